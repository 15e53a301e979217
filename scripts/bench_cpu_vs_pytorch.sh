#!/usr/bin/env bash
# CPU throughput, headwise vs PyTorch, on the same model (4 layers, n_embd 256, 4 heads,
# T 256, micro-batch 8, fp32, AdamW + clipping) with the same thread count. Runs the two
# alternately (A-B-A-B) and prints both and the ratio of the medians.
# Needs PyTorch for the baseline: pip install torch (a CPU wheel is enough).
# Usage: bash scripts/bench_cpu_vs_pytorch.sh [threads] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-$(nproc)}
ROUNDS=${2:-3}
PY=${PYTHON:-python3}
[ -x build/headwise ] || bash scripts/setup.sh build
"$PY" -c "import torch" 2>/dev/null || { echo "bench: PyTorch not found for $PY (pip install torch)" >&2; exit 1; }
export OMP_WAIT_POLICY=passive
hw=(); pt=()
for r in $(seq "$ROUNDS"); do
  h=$(OMP_NUM_THREADS=$THREADS build/headwise bench --config configs/bench_cpu_small.json --steps 10 --warmup 2 \
        --set train.threads="$THREADS" | tail -n 1)
  p=$("$PY" scripts/bench_pytorch_cpu.py --threads "$THREADS" --steps 10 --warmup 2 | tail -n 1)
  hw+=("$(echo "$h" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["tok_per_s"])')")
  pt+=("$(echo "$p" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["tok_per_s"])')")
  echo "round $r: headwise ${hw[-1]} tok/s, pytorch ${pt[-1]} tok/s"
done
"$PY" - "$THREADS" "${hw[*]}" "${pt[*]}" <<'PYEOF'
import statistics, sys
threads, hw, pt = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
h, p = statistics.median(hw), statistics.median(pt)
print(f"| impl | threads | tok/s (median of {len(hw)}) |\n|---|---|---|")
print(f"| headwise | {threads} | {h:.0f} |\n| pytorch | {threads} | {p:.0f} |")
print(f"ratio headwise/pytorch: {h / p:.2f}")
PYEOF
