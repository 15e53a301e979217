#!/usr/bin/env bash
# CPU training throughput, headwise vs PyTorch, on the same model (configs/bench_cpu_small.json:
# 4 layers, n_embd 256, 4 heads, T 256, micro-batch 8, fp32, AdamW + clipping) with the same
# thread count. Each round runs headwise, PyTorch eager and (with --compile) PyTorch with
# torch.compile one after another in fresh processes, so load drifts hit every column alike.
# Prints per round and then a table of medians: tokens/s, the ratio to PyTorch eager, GFLOP/s,
# the share of the machine's fp32 peak (the 1024^3 SGEMM of build/bench_gemm at the same
# thread count, measured in the same run) and each process's peak resident memory.
# Usage: bash scripts/bench_cpu_vs_pytorch.sh [threads] [rounds] [--compile]
# Environment: PYTHON (a Python with torch; default ~/.cache/headwise/bench-venv/bin/python when
#   it exists, else python3), HEADWISE_BIN (default build/headwise), STEPS (10), WARMUP (2).
#   To run the AVX2 code paths on an AVX-512 machine: OPENBLAS_CORETYPE=Haswell for headwise's
#   GEMMs and ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 for
#   PyTorch's (headwise's own loops stay compiled for the host, -march=native).
set -euo pipefail
cd "$(dirname "$0")/.."
COMPILE=0
args=()
for a in "$@"; do
  case "$a" in
    --compile) COMPILE=1 ;;
    -*) echo "error: unknown option '$a' (usage: bench_cpu_vs_pytorch.sh [threads] [rounds] [--compile])" >&2; exit 1 ;;
    *) args+=("$a") ;;
  esac
done
THREADS=${args[0]:-$(nproc)}
ROUNDS=${args[1]:-3}
for v in "$THREADS" "$ROUNDS"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "error: threads and rounds must be positive integers, got '$v'" >&2; exit 1; }
done
VENV_PY=$HOME/.cache/headwise/bench-venv/bin/python
PY=${PYTHON:-$([ -x "$VENV_PY" ] && echo "$VENV_PY" || echo python3)}
HW=${HEADWISE_BIN:-build/headwise}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-2}
[ -x "$HW" ] || bash scripts/setup.sh build
[ -x build/bench_gemm ] || cmake --build build --target bench_gemm >/dev/null
"$PY" -c "import torch" 2>/dev/null ||
  { echo "error: PyTorch not found for $PY (pip install torch into a venv and set PYTHON)" >&2; exit 1; }
export OMP_WAIT_POLICY=passive
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$ROUNDS"); do
  OMP_NUM_THREADS=$THREADS "$HW" bench --config configs/bench_cpu_small.json --steps "$STEPS" --warmup "$WARMUP" \
    --set train.threads="$THREADS" | tail -n 1 >> "$tmp/headwise.jsonl"
  "$PY" scripts/bench_pytorch_cpu.py --threads "$THREADS" --steps "$STEPS" --warmup "$WARMUP" |
    tail -n 1 >> "$tmp/eager.jsonl"
  if [ "$COMPILE" = 1 ]; then
    "$PY" scripts/bench_pytorch_cpu.py --threads "$THREADS" --steps "$STEPS" --warmup "$WARMUP" --compile |
      tail -n 1 >> "$tmp/compile.jsonl"
  fi
  echo "round $r: headwise $(tail -n 1 "$tmp/headwise.jsonl" | cut -c1-60)... done" >&2
done
# The machine's practical fp32 peak at this thread count: the square SGEMM row of bench_gemm.
peak=$(OMP_NUM_THREADS=$THREADS build/bench_gemm --threads "$THREADS" --reps 5 | awk -F'|' '/peak 1024/ {print $(NF-1)}')
"$PY" - "$THREADS" "$tmp" "$peak" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)" <<'PYEOF'
import json, os, statistics, sys
threads, tmp, peak, cpu = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4].strip()
def rows(name):
    p = os.path.join(tmp, name + ".jsonl")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
hw = rows("headwise")
flops_per_token = hw[0]["flops_per_token"]
cols = [("headwise", hw), ("pytorch eager", rows("eager")), ("pytorch compile", rows("compile"))]
eager = statistics.median(r["tok_per_s"] for r in cols[1][1])
print(f"CPU: {cpu}; threads {threads}; fp32 peak (1024^3 SGEMM, bench_gemm): {peak:.1f} GFLOP/s; "
      f"training FLOPs per token: {flops_per_token / 1e6:.2f} M")
print(f"| impl | tok/s per round | tok/s (median) | vs eager | GFLOP/s | share of peak | peak RSS (MB) |")
print("|---|---|---:|---:|---:|---:|---:|")
for name, rs in cols:
    if not rs:
        continue
    impl = rs[0].get("impl", name)
    if name == "pytorch compile" and impl != "pytorch-compile":
        name += " (failed: eager ran)"
    tps = [r["tok_per_s"] for r in rs]
    med = statistics.median(tps)
    gflops = med * flops_per_token / 1e9
    rss = statistics.median(r["peak_rss_bytes"] for r in rs) / 1e6
    print(f"| {name} | {' '.join(f'{t:.0f}' for t in tps)} | {med:.0f} | {med / eager:.2f} | {gflops:.1f} | "
          f"{gflops / peak:.0%} | {rss:.0f} |")
print(f"ratio headwise/pytorch eager: {statistics.median(r['tok_per_s'] for r in hw) / eager:.2f}")
PYEOF
