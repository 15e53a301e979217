#!/usr/bin/env bash
# Conversions at real model sizes (issue 55): `convert --method saf` and `--method oal` on a
# Qwen2.5-0.5B-shaped model at T 4096, `convert --method aoh` and `heads` on a Llama-3.2-1B-shaped
# bf16 model, each run's wall time and peak RSS beside its goal and a bound from this machine's
# own fp32/fp64 GEMM rates and read bandwidth (scripts/bench_convert_cpu.py has the details).
# Writes the models (random weights made by transformers: 2.0 GB fp32 and 2.5 GB bf16) under OUT
# once. Takes about 10 minutes on an idle 2-core machine; run it on an idle one.
# Usage: bash scripts/bench_convert_cpu.sh [OUT=runs/bench_convert]
# Environment: HEADWISE_BIN (build/headwise), THREADS (2), SEQ_LEN (4096), ONLY (saf,oal,aoh,heads),
#   VENV (build/pyvenv; scripts/python_env.sh makes it with transformers).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/bench_convert}
HW=${HEADWISE_BIN:-build/headwise}
VENV=${VENV:-build/pyvenv}
[ -x "$HW" ] || { echo "error: $HW is not built (cmake --build build --target headwise)" >&2; exit 1; }
bash scripts/python_env.sh "$VENV" "transformers==5.24.0" safetensors || exit $?
exec 8<"$(realpath -m "$VENV").lock"
flock -s 8  # the venv stays as it is while this runs (python_env.sh)
"$VENV/bin/hwpy" scripts/bench_convert_cpu.py --headwise "$HW" --out "$OUT" --threads "${THREADS:-2}" \
  --seq-len "${SEQ_LEN:-4096}" --only "${ONLY:-saf,oal,aoh,heads}"
