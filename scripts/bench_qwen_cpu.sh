#!/usr/bin/env bash
# Qwen2.5-0.5B's shape on the CPU, headwise vs transformers (issue 37's memory and speed figures):
# peak RSS against the fp32 weight bytes, prefill ms at CONTEXT, decode ms/token, the memory-
# bandwidth bound of decoding (STREAM triad measured in the same run), same greedy tokens; at
# each thread count of THREADS. Writes a ~2 GB checkpoint under OUT once (random weights made by
# transformers). Prints a JSON report and a table.
# Usage: bash scripts/bench_qwen_cpu.sh [OUT=runs/bench_qwen]
# Environment: HEADWISE_BIN (default build/headwise), THREADS (default 1,2), CONTEXT (default 2048),
#   NEW (default 32), BENCH_VENV (default ~/.cache/headwise/bench-venv; torch + transformers from
#   PyPI are installed there when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/bench_qwen}
HW=${HEADWISE_BIN:-build/headwise}
VENV=${BENCH_VENV:-$HOME/.cache/headwise/bench-venv}
PY="$VENV/bin/python"
[ -x "$HW" ] || bash scripts/setup.sh build
if ! "$PY" -c "import torch, transformers" 2>/dev/null; then
  echo "bench: installing torch + transformers into $VENV ..." >&2
  python3 -m venv "$VENV"
  "$PY" -m pip install --quiet torch transformers safetensors
fi
"$PY" scripts/bench_qwen_cpu.py --headwise "$HW" --out "$OUT" --context "${CONTEXT:-2048}" --new "${NEW:-32}" \
  --threads "${THREADS:-1,2}"
