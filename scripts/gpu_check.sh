#!/usr/bin/env bash
# The GPU check (issues 5 and 6): build for sm_90, run the CUDA parity tests, time training
# updates of GPT-2 124M in bf16 mixed precision (T = 1024 and 4096; 25% and 50% static heads at
# 4096; T = 1024 once more with fp32 storage and TF32 GEMMs) against PyTorch
# (bf16 autocast + SDPA flash + torch.compile) on the same GPU and batch, time one layer's
# attention per plan composition against SDPA, and print ONE table at the end.
# Sized for < 8 minutes on one H200 (the build is ~2-3 min of it on 16 cores).
#
# Usage: bash scripts/gpu_check.sh [--bundle DIR] [--quick]
#   --bundle DIR  use binaries built elsewhere by scripts/gpu_bundle.sh (for a GPU machine without
#                 the Debian build dependencies); DIR may be the folder or its .tar.gz archive.
#                 Otherwise configure and build build-gpu here.
#   --quick       fewer timed steps and lengths (a smoke run).
# Logs and JSON go to $OUT (the device tool's output folder) or ./gpu_check_out.
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=""; QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) BUNDLE=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    *) echo "gpu_check: unknown option $1" >&2; exit 2 ;;
  esac
done
LOGS=${OUT:-gpu_check_out}
mkdir -p "$LOGS"
PY=${PYTHON:-python3}
log() { echo "[gpu_check $(date +%T)] $*"; }

if [ -n "$BUNDLE" ] && [ -f "$BUNDLE" ]; then  # an archive from gpu_bundle.sh: unpack it first
  mkdir -p /tmp/headwise_bundle
  tar -C /tmp/headwise_bundle -xzf "$BUNDLE" || { echo "gpu_check: cannot unpack $BUNDLE" >&2; exit 1; }
  BUNDLE=$(find /tmp/headwise_bundle -mindepth 1 -maxdepth 1 -type d | head -n 1)
  log "unpacked the bundle into $BUNDLE"
fi
if ! nvidia-smi >/dev/null 2>&1; then echo "gpu_check: no NVIDIA GPU here (nvidia-smi failed)" >&2; exit 1; fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$LOGS/gpu.txt"

if [ -n "$BUNDLE" ]; then
  BIN=$BUNDLE/bin
  export LD_LIBRARY_PATH="$BUNDLE/lib:${LD_LIBRARY_PATH:-}"
else
  BIN=build-gpu
  log "configure + build (sm_90)"
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DHEADWISE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DHEADWISE_MPI=OFF >"$LOGS/cmake.log" 2>&1 || { tail -n 30 "$LOGS/cmake.log"; exit 1; }
  cmake --build build-gpu -j"$(nproc)" --target headwise test_cuda >"$LOGS/build.log" 2>&1 ||
    { grep -E "error" "$LOGS/build.log" | head -n 30; exit 1; }
fi
[ -x "$BIN/headwise" ] && [ -x "$BIN/test_cuda" ] || { echo "gpu_check: $BIN lacks headwise/test_cuda" >&2; exit 1; }

log "CUDA parity tests"
timeout 240 "$BIN/test_cuda" -r compact >"$LOGS/test_cuda.log" 2>&1
PARITY_RC=$?
tail -n 3 "$LOGS/test_cuda.log"

STEPS=10; WARM=3; LAYER_T=1024,4096,8192,16384
[ "$QUICK" = 1 ] && { STEPS=3; WARM=2; LAYER_T=1024,4096; }
static_plan() {  # 12 layers x 12 heads with the first $1 heads of each layer static
  "$PY" -c "import json,sys; n=int(sys.argv[1]); print(json.dumps([['static']*n+['softmax']*(12-n)]*12))" "$1"
}
hw_bench() {  # name T batch [extra --set ...]
  local name=$1 T=$2 B=$3; shift 3
  log "headwise bench $name"
  timeout 150 "$BIN/headwise" bench --config configs/bench_gpu_124m.json --steps $STEPS --warmup $WARM \
    --set train.seq_len="$T" --set train.micro_batch="$B" --set model.block_size="$T" \
    --set train.total_batch_tokens=$((T * B)) "$@" >"$LOGS/$name.json" 2>"$LOGS/$name.err" ||
    { echo "{\"error\": \"$(tail -n 1 "$LOGS/$name.err" | tr -d '"')\"}" >"$LOGS/$name.json"; }
  tail -n 1 "$LOGS/$name.json"
}
pt_bench() {  # name T batch
  log "pytorch bench $1"
  timeout 240 "$PY" scripts/bench_pytorch_gpu.py --seq "$2" --batch "$3" --steps $STEPS --warmup $WARM \
    >"$LOGS/$1.json" 2>"$LOGS/$1.err" || echo "{\"error\": \"pytorch bench failed\"}" >"$LOGS/$1.json"
  tail -n 1 "$LOGS/$1.json"
}
hw_bench hw_t1024 1024 16
pt_bench pt_t1024 1024 16
hw_bench hw_t1024_fp32 1024 16 --set train.precision=fp32
hw_bench hw_t4096 4096 4
pt_bench pt_t4096 4096 4
hw_bench hw_t4096_static25 4096 4 --set "model.head_plan=$(static_plan 3)"
hw_bench hw_t4096_static50 4096 4 --set "model.head_plan=$(static_plan 6)"

log "attention per layer (headwise kernels)"
timeout 200 "$BIN/headwise" bench-attention --layer --device cuda --T $LAYER_T --batch 4 --heads 12 --head-dim 64 \
  --repeats 5 >"$LOGS/attn_layer.txt" 2>"$LOGS/attn_layer.err" || tail -n 2 "$LOGS/attn_layer.err"
tail -n 1 "$LOGS/attn_layer.txt" >"$LOGS/attn_layer.json"
log "attention per layer (headwise kernels, bf16 activations)"
timeout 200 "$BIN/headwise" bench-attention --layer --device cuda --precision bf16 --T $LAYER_T --batch 4 --heads 12 \
  --head-dim 64 --repeats 5 >"$LOGS/attn_layer_bf16.txt" 2>"$LOGS/attn_layer_bf16.err" || tail -n 2 "$LOGS/attn_layer_bf16.err"
tail -n 1 "$LOGS/attn_layer_bf16.txt" >"$LOGS/attn_layer_bf16.json"
log "attention per layer (PyTorch SDPA)"
: >"$LOGS/attn_sdpa.jsonl"
for T in ${LAYER_T//,/ }; do
  timeout 60 "$PY" scripts/bench_attention_sdpa.py --batch 4 --heads 12 --seq "$T" --head-dim 64 \
    >>"$LOGS/attn_sdpa.jsonl" 2>>"$LOGS/attn_sdpa.err" || true
done

"$PY" scripts/gpu_check_table.py "$LOGS" "$PARITY_RC"
