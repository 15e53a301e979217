#!/usr/bin/env bash
# CPU training throughput, headwise vs PyTorch, on the same model with the same thread count:
# GPT-2 (configs/bench_cpu_small.json: 4 layers, n_embd 256, 4 heads, T 256, micro-batch 8, fp32,
# AdamW + clipping) or, with --family llama, its Llama-style twin (configs/bench_cpu_small_llama.json:
# RMSNorm, SwiGLU, RoPE, GQA 2:1, vocabulary 32,000, tied head; scripts/pytorch_llama.py). Each round
# runs, at every thread count in turn, headwise, PyTorch eager and (with --compile) PyTorch with
# torch.compile one after another in fresh processes, so load drifts hit every column alike.
# Prints per round and then, per thread count, a table of medians: tokens/s, the ratio to PyTorch
# eager, GFLOP/s, the share of the machine's fp32 peak (the 1024^3 SGEMM of build/bench_gemm at
# the same thread count, measured in the same run) and each process's peak resident memory.
# Usage: bash scripts/bench_cpu_vs_pytorch.sh [threads] [rounds] [--compile] [--family gpt2|llama]
#   threads: a count or a comma list (default "1,2": both, alternated within each round).
# Environment: PYTHON (a Python with torch; default build/pyvenv/bin/hwpy, else
#   ~/.cache/headwise/bench-venv/bin/python, else python3), HEADWISE_BIN (default build/headwise),
#   STEPS (10), WARMUP (2). OMP_WAIT_POLICY is left as the environment has it, for both sides
#   (unset is libgomp's default and the fastest for both; docs/configuration.md).
#   To run the AVX2 code paths on an AVX-512 machine: OPENBLAS_CORETYPE=Haswell for headwise's
#   GEMMs and ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 for
#   PyTorch's (headwise's own loops stay compiled for the host, -march=native).
set -euo pipefail
cd "$(dirname "$0")/.."
COMPILE=0
FAMILY=gpt2
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --compile) COMPILE=1 ;;
    --family) FAMILY=${2:-}; shift ;;
    --family=*) FAMILY=${1#--family=} ;;
    -*) echo "error: unknown option '$1' (usage: bench_cpu_vs_pytorch.sh [threads] [rounds] [--compile] [--family gpt2|llama])" >&2; exit 1 ;;
    *) args+=("$1") ;;
  esac
  shift
done
case "$FAMILY" in
  gpt2) CONFIG=configs/bench_cpu_small.json ;;
  llama) CONFIG=configs/bench_cpu_small_llama.json ;;
  *) echo "error: --family must be gpt2 or llama, got '$FAMILY'" >&2; exit 1 ;;
esac
THREADS=${args[0]:-1,2}
ROUNDS=${args[1]:-3}
[[ "$THREADS" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  { echo "error: threads must be a positive integer or a comma list of them, got '$THREADS'" >&2; exit 1; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "error: rounds must be a positive integer, got '$ROUNDS'" >&2; exit 1; }
VENV_PY=$HOME/.cache/headwise/bench-venv/bin/python
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x build/pyvenv/bin/hwpy ]; then PY=build/pyvenv/bin/hwpy
elif [ -x "$VENV_PY" ]; then PY=$VENV_PY
else PY=python3
fi
HW=${HEADWISE_BIN:-build/headwise}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-2}
[ -x "$HW" ] || bash scripts/setup.sh build
[ -x build/bench_gemm ] || cmake --build build --target bench_gemm >/dev/null
"$PY" -c "import torch" 2>/dev/null ||
  { echo "error: PyTorch not found for $PY (scripts/python_env.sh build/pyvenv, or set PYTHON)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
IFS=, read -r -a thread_list <<<"$THREADS"
for r in $(seq "$ROUNDS"); do
  for t in "${thread_list[@]}"; do
    OMP_NUM_THREADS=$t "$HW" bench --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" \
      --set train.threads="$t" | tail -n 1 >> "$tmp/headwise.$t.jsonl"
    OMP_NUM_THREADS=$t "$PY" scripts/bench_pytorch_cpu.py --family "$FAMILY" --threads "$t" --steps "$STEPS" \
      --warmup "$WARMUP" | tail -n 1 >> "$tmp/eager.$t.jsonl"
    if [ "$COMPILE" = 1 ]; then
      OMP_NUM_THREADS=$t "$PY" scripts/bench_pytorch_cpu.py --family "$FAMILY" --threads "$t" --steps "$STEPS" \
        --warmup "$WARMUP" --compile | tail -n 1 >> "$tmp/compile.$t.jsonl"
    fi
    echo "round $r, $t thread(s): headwise $(tail -n 1 "$tmp/headwise.$t.jsonl" | cut -c1-60)... done" >&2
  done
done
for t in "${thread_list[@]}"; do
  # The machine's practical fp32 peak at this thread count: the square SGEMM row of bench_gemm.
  peak=$(OMP_NUM_THREADS=$t build/bench_gemm --threads "$t" --reps 5 | awk -F'|' '/peak 1024/ {print $(NF-1)}')
  "$PY" - "$t" "$tmp" "$peak" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)" "$FAMILY" <<'PYEOF'
import json, os, statistics, sys
threads, tmp, peak, cpu, family = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4].strip(), sys.argv[5]
def rows(name):
    p = os.path.join(tmp, f"{name}.{threads}.jsonl")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
hw = rows("headwise")
flops_per_token = hw[0]["flops_per_token"]
cols = [("headwise", hw), ("pytorch eager", rows("eager")), ("pytorch compile", rows("compile"))]
eager = statistics.median(r["tok_per_s"] for r in cols[1][1])
print(f"\nfamily {family}; CPU: {cpu}; threads {threads}; fp32 peak (1024^3 SGEMM, bench_gemm): {peak:.1f} GFLOP/s; "
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
print(f"ratio headwise/pytorch eager at {threads} thread(s): {statistics.median(r['tok_per_s'] for r in hw) / eager:.2f}")
PYEOF
done
