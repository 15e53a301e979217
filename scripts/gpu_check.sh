#!/usr/bin/env bash
# The GPU check (issues 5, 6 and 7): build for sm_90, run the CUDA parity tests and the NCCL
# communicator's collective tests on one rank, time training
# updates of GPT-2 124M in bf16 mixed precision (T = 1024 and 4096; 25% and 50% static heads at
# 4096; T = 1024 once more with fp32 storage and TF32 GEMMs) against PyTorch
# (bf16 autocast + SDPA flash + torch.compile) on the same GPU and batch, time one layer's
# attention per plan composition against SDPA, and print ONE table at the end.
# Sized for < 8 minutes on one H200 (the build is ~2-3 min of it on 16 cores).
#
# Usage: bash scripts/gpu_check.sh [--bundle DIR] [--quick] [--budget SECONDS] [--no-parity]
#   --bundle DIR  use binaries built elsewhere by scripts/gpu_bundle.sh (for a GPU machine without
#                 the Debian build dependencies); DIR may be the folder or its .tar.gz archive.
#                 Otherwise configure and build build-gpu here.
#   --quick       fewer timed steps and lengths (a smoke run).
#   --budget S    wall-clock seconds for the whole check (default 450). Every step's timeout is cut
#                 to what is left, a step that no longer fits is skipped (its row says so), and the
#                 table is always printed: a device lease is short and a killed command returns
#                 nothing it has not written yet. Steps run in order of what the issues need
#                 most: parity, our training benchmarks, our attention tables, then PyTorch's
#                 (torch.compile alone takes about a minute per shape).
#   --no-parity   skip the parity tests (a rerun for the numbers only).
# If the parity tests fail, each test case is rerun in its own process (as far as the budget
# allows), so that one failure that poisons the CUDA context (a trap, a bad address) does not hide
# which other cases pass.
# Logs go to ./gpu_check_out, or on the device tool's machine to a scratch folder of which at
# most four files come back in $OUT (the tool returns only 8): table.txt, test_cuda.log,
# test_cuda_cases.txt and logs.tar.gz (everything).
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=""; QUICK=0; BUDGET=450; PARITY=1
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) BUNDLE=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --budget) BUDGET=$2; shift 2 ;;
    --no-parity) PARITY=0; shift ;;
    *) echo "gpu_check: unknown option $1" >&2; exit 2 ;;
  esac
done
case "$BUDGET" in ''|*[!0-9]*) echo "gpu_check: --budget takes whole seconds, not '$BUDGET'" >&2; exit 2 ;; esac
START=$SECONDS
if [ -n "${OUT:-}" ]; then LOGS=$(mktemp -d /tmp/gpu_check_logs.XXXX); else LOGS=gpu_check_out; fi
mkdir -p "$LOGS"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
log() { echo "[gpu_check $(date +%T) +$((SECONDS - START))s] $*"; }

# What comes back from the device machine: a few files, whatever happened (also on a kill by the
# budget's own timeouts, an error exit or Ctrl-C).
pack_logs() {
  [ -n "${OUT:-}" ] || return 0
  [ -f "$LOGS/table.txt" ] && cp "$LOGS/table.txt" "$OUT/"
  [ -f "$LOGS/test_cuda.log" ] && tail -c 8000000 "$LOGS/test_cuda.log" >"$OUT/test_cuda.log"
  [ -f "$LOGS/test_cuda_cases.txt" ] && cp "$LOGS/test_cuda_cases.txt" "$OUT/"
  tar -C "$LOGS" -czf "$OUT/logs.tar.gz" . 2>/dev/null
}
trap pack_logs EXIT

# Seconds a step may take: what it asks for, cut to the budget left less a reserve for the table
# and the packing; 0 when fewer than 20 s would remain (the step is then skipped).
RESERVE=15
step_seconds() {
  local want=$1 left=$((BUDGET - (SECONDS - START) - RESERVE))
  if [ "$left" -lt 20 ]; then echo 0; elif [ "$want" -lt "$left" ]; then echo "$want"; else echo "$left"; fi
}
# limited WANT CMD...: CMD under `timeout` for step_seconds WANT; exit 124 without running it when
# nothing is left (a bare `timeout 0` would mean no limit at all).
limited() {
  local t; t=$(step_seconds "$1"); shift
  if [ "$t" = 0 ]; then echo "skipped: the time budget ran out before ${1##*/}" >&2; return 124; fi
  timeout -k 5 "$t" "$@"
}

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
  cmake --build build-gpu -j"$(nproc)" --target headwise test_cuda test_dist >"$LOGS/build.log" 2>&1 ||
    { grep -E "error" "$LOGS/build.log" | head -n 30; exit 1; }
fi
[ -x "$BIN/headwise" ] && [ -x "$BIN/test_cuda" ] || { echo "gpu_check: $BIN lacks headwise/test_cuda" >&2; exit 1; }

# Shared libraries the loader cannot find. The bundle leaves out CUDA's own (cudart, cuBLASLt) and
# NCCL, expecting the GPU machine's toolkit; an image may instead keep some of them only inside
# Python packages (nvidia-nccl-cu13, nvidia-cublas, ...). Look there and in the usual folders.
resolve_libs() {
  local lib dir roots
  roots="/usr/local/cuda /usr/local/cuda/lib64 /usr/lib /opt $("$PY" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)"
  for lib in $(ldd "$BIN"/headwise "$BIN"/test_* 2>/dev/null | awk '/not found/{print $1}' | sort -u); do
    # shellcheck disable=SC2086  # roots is a list of folders
    dir=$(timeout 60 find -L $roots -name "$lib" 2>/dev/null | head -n 1)
    if [ -n "$dir" ]; then
      export LD_LIBRARY_PATH="$(dirname "$dir"):$LD_LIBRARY_PATH"; log "$lib: using $(dirname "$dir")"
    else
      log "$lib: not found on this machine; the binaries cannot start"
    fi
  done
}
resolve_libs

PARITY_RC=-1
if [ "$PARITY" = 1 ]; then
  log "CUDA parity tests"
  limited 240 "$BIN/test_cuda" -r compact -d yes >"$LOGS/test_cuda.log" 2>&1
  PARITY_RC=$?
  tail -n 3 "$LOGS/test_cuda.log"
  if [ "$PARITY_RC" -ne 0 ] && [ "$PARITY_RC" -ne 77 ]; then
    # One process per case, at most 60 s each and 150 s in all, so the benchmarks keep their time.
    log "parity failed (exit $PARITY_RC): rerunning each case in its own process"
    CASES_END=$((SECONDS + 150))
    "$BIN/test_cuda" --list-test-names-only 2>/dev/null | grep -v '^$' | while IFS= read -r name; do
      if [ "$(step_seconds 60)" = 0 ] || [ "$SECONDS" -ge "$CASES_END" ]; then echo "NOT RUN (time): $name"; continue; fi
      spec=$(printf '%s' "$name" | sed 's/[][,*~\\"]/\\&/g')  # Catch's test spec escapes
      limited 60 "$BIN/test_cuda" -r compact -d yes "$spec" </dev/null >>"$LOGS/test_cuda_cases.log" 2>&1
      rc=$?
      if [ "$rc" = 0 ]; then echo "passed: $name"; else echo "FAILED (exit $rc): $name"; fi
    done >"$LOGS/test_cuda_cases.txt"
    grep -c '^passed' "$LOGS/test_cuda_cases.txt" | sed 's/^/cases passed alone: /'
    grep -v '^passed' "$LOGS/test_cuda_cases.txt"
  fi
fi

# Issue 7's NCCL communicator, as far as one GPU can check it: the collective tests of test_dist
# on a one-rank NCCL communicator (device and staged host buffers, async all-reduce, buckets).
NCCL_RC=-1
if [ -x "$BIN/test_dist" ]; then
  log "NCCL communicator, one rank (test_dist with HEADWISE_TEST_NCCL=1)"
  HEADWISE_TEST_NCCL=1 limited 90 "$BIN/test_dist" -r compact >"$LOGS/test_nccl.log" 2>&1
  NCCL_RC=$?
  tail -n 2 "$LOGS/test_nccl.log"
fi

STEPS=10; WARM=3; LAYER_T=1024,4096,8192,16384
[ "$QUICK" = 1 ] && { STEPS=3; WARM=2; LAYER_T=1024,4096; }
static_plan() {  # 12 layers x 12 heads with the first $1 heads of each layer static
  "$PY" -c "import json,sys; n=int(sys.argv[1]); print(json.dumps([['static']*n+['softmax']*(12-n)]*12))" "$1"
}
hw_bench() {  # name T batch [extra --set ...]
  local name=$1 T=$2 B=$3; shift 3
  log "headwise bench $name"
  limited 150 "$BIN/headwise" bench --config configs/bench_gpu_124m.json --steps $STEPS --warmup $WARM \
    --set train.seq_len="$T" --set train.micro_batch="$B" --set model.block_size="$T" \
    --set train.total_batch_tokens=$((T * B)) "$@" >"$LOGS/$name.json" 2>"$LOGS/$name.err" ||
    { echo "{\"error\": \"$(tail -n 1 "$LOGS/$name.err" | tr -d '"\\')\"}" >"$LOGS/$name.json"; }
  tail -n 1 "$LOGS/$name.json"
}
pt_bench() {  # name T batch
  log "pytorch bench $1"
  limited 240 "$PY" scripts/bench_pytorch_gpu.py --seq "$2" --batch "$3" --steps $STEPS --warmup $WARM \
    >"$LOGS/$1.json" 2>"$LOGS/$1.err" ||
    { echo "{\"error\": \"pytorch: $(tail -n 1 "$LOGS/$1.err" | tr -d '"\\')\"}" >"$LOGS/$1.json"; }
  tail -n 1 "$LOGS/$1.json"
}
hw_bench hw_t1024 1024 16
hw_bench hw_t4096 4096 4
hw_bench hw_t4096_static25 4096 4 --set "model.head_plan=$(static_plan 3)"
hw_bench hw_t4096_static50 4096 4 --set "model.head_plan=$(static_plan 6)"
hw_bench hw_t1024_fp32 1024 16 --set train.precision=fp32

log "attention per layer (headwise kernels)"
limited 200 "$BIN/headwise" bench-attention --layer --device cuda --T $LAYER_T --batch 4 --heads 12 --head-dim 64 \
  --repeats 5 >"$LOGS/attn_layer.txt" 2>"$LOGS/attn_layer.err" || tail -n 2 "$LOGS/attn_layer.err"
tail -n 1 "$LOGS/attn_layer.txt" >"$LOGS/attn_layer.json"
log "attention per layer (headwise kernels, bf16 activations)"
limited 200 "$BIN/headwise" bench-attention --layer --device cuda --precision bf16 --T $LAYER_T --batch 4 --heads 12 \
  --head-dim 64 --repeats 5 >"$LOGS/attn_layer_bf16.txt" 2>"$LOGS/attn_layer_bf16.err" || tail -n 2 "$LOGS/attn_layer_bf16.err"
tail -n 1 "$LOGS/attn_layer_bf16.txt" >"$LOGS/attn_layer_bf16.json"
log "attention per layer (PyTorch SDPA)"
: >"$LOGS/attn_sdpa.jsonl"
for T in ${LAYER_T//,/ }; do
  limited 60 "$PY" scripts/bench_attention_sdpa.py --batch 4 --heads 12 --seq "$T" --head-dim 64 \
    >>"$LOGS/attn_sdpa.jsonl" 2>>"$LOGS/attn_sdpa.err" || true
done

pt_bench pt_t1024 1024 16
pt_bench pt_t4096 4096 4

"$PY" scripts/gpu_check_table.py "$LOGS" "$PARITY_RC" "$NCCL_RC" | tee "$LOGS/table.txt"
log "done in $((SECONDS - START)) s of the $BUDGET s budget"
