#!/usr/bin/env bash
# The GPU check: one run that fits a short GPU lease (15 minutes in all, machine start included)
# and, when something fails, says what broke. Steps, in order of what matters most:
#   probe      seconds: the CUDA runtime with its real error text, the opt-in shared memory per
#              block, one tiny kernel, one cuBLASLt GEMM, one NCCL init (build/gpu_probe);
#   parity     test_cuda, every CUDA op against the CPU reference (HEADWISE_EXPECT_GPU=1: a GPU
#              the runtime cannot open is a failure with its text, never "skipped");
#   reruns     only if parity failed: each case in its own process with CUDA_LAUNCH_BLOCKING=1,
#              so a fault is charged to the launch that made it and cannot hide the other cases;
#   sanitizer  only if parity failed: compute-sanitizer --tool memcheck on up to three failing cases;
#   nccl       the NCCL communicator's collective tests on one rank (test_dist);
#   clocks     GPU clocks, temperature and power before and after the benchmarks;
#   benchmarks GPT-2 124M training updates in bf16 (T = 1024 and 4096; 25% and 50% static heads at
#              4096; T = 1024 once more in fp32 + TF32), one layer's attention per plan against
#              SDPA, and PyTorch's training update (bf16 autocast + SDPA + torch.compile).
# Every step has a time limit cut to what is left of --budget; a step that no longer fits is
# skipped and its row says so. After every step the table and the logs are copied into $OUT
# (whole files, by rename), and every 15 s during a step, so a run killed at the lease's limit,
# even by SIGKILL, still returns what it had.
#
# Usage: bash scripts/gpu_check.sh [--bundle DIR|DIR.tar.gz] [--quick] [--budget SECONDS] [--no-parity]
#   --bundle DIR  binaries built elsewhere by scripts/gpu_bundle.sh (for a GPU machine without the
#                 Debian build dependencies). Otherwise configure and build build-gpu here.
#   --quick       probe, parity, nccl and one training benchmark, no PyTorch: under 3 minutes
#                 (default budget 170 s); what a cluster job runs before it trusts the backend.
#   --budget S    wall-clock seconds for the whole check (default 450, 170 with --quick).
#   --no-parity   skip parity, reruns and sanitizer (a rerun for the numbers only).
# Exit status: 0 when probe, parity and nccl passed (or were not asked for), 1 otherwise.
# Logs go to ./gpu_check_out, or, under the device tool ($OUT set), to a scratch folder of which
# four files come back in $OUT: table.txt, test_cuda.log, test_cuda_cases.txt, logs.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=""; QUICK=0; BUDGET=""; PARITY=1
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) BUNDLE=${2:-}; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --budget) BUDGET=${2:-}; shift 2 ;;
    --no-parity) PARITY=0; shift ;;
    *) echo "error: gpu_check: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$BUDGET" ] || BUDGET=$([ "$QUICK" = 1 ] && echo 170 || echo 450)
case "$BUDGET" in ''|*[!0-9]*) echo "error: gpu_check: --budget takes whole seconds, not '$BUDGET'" >&2; exit 2 ;; esac
START=$SECONDS
if [ -n "${OUT:-}" ]; then LOGS=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check_logs.XXXX"); else LOGS=gpu_check_out; fi
rm -rf "${LOGS:?}"/* 2>/dev/null; mkdir -p "$LOGS"
PACK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check_pack.XXXX")  # what publish() writes before it is whole
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
log() { echo "[gpu_check $(date +%T) +$((SECONDS - START))s] $*"; }
: >"$LOGS/steps.tsv"

# ---- what comes back: the table and logs, copied whole into $OUT after every step ----
# (write under a temporary name in $OUT, then rename: a kill never leaves half a file there)
put() {  # put SRC NAME
  cp "$1" "$OUT/.$2.part" 2>/dev/null && mv -f "$OUT/.$2.part" "$OUT/$2"
}
publish() {
  "$PY" scripts/gpu_check_table.py "$LOGS" >"$PACK/table.txt" 2>"$LOGS/table.err" &&
    mv -f "$PACK/table.txt" "$LOGS/table.txt"
  [ -n "${OUT:-}" ] || return 0
  [ -f "$LOGS/table.txt" ] && put "$LOGS/table.txt" table.txt
  if [ -f "$LOGS/test_cuda.log" ]; then
    tail -c 8000000 "$LOGS/test_cuda.log" >"$PACK/test_cuda.tail" && put "$PACK/test_cuda.tail" test_cuda.log
  fi
  [ -f "$LOGS/test_cuda_cases.txt" ] && put "$LOGS/test_cuda_cases.txt" test_cuda_cases.txt
  tar -C "$LOGS" -czf "$PACK/logs.tar.gz" . 2>/dev/null && put "$PACK/logs.tar.gz" logs.tar.gz
}
PUBLISHER=""
start_publisher() {  # every 15 s while a step runs
  [ -n "${OUT:-}" ] || return 0
  (trap - EXIT TERM; while sleep 15; do publish; done) >/dev/null 2>&1 &
  PUBLISHER=$!
}
stop_publisher() { [ -n "$PUBLISHER" ] && kill "$PUBLISHER" 2>/dev/null; wait "$PUBLISHER" 2>/dev/null; PUBLISHER=""; }
# (the logs themselves stay in ./gpu_check_out, or under $OUT as logs.tar.gz)
# Only the script's own shell cleans up: a subshell killed by a signal can run the EXIT trap too
# (seen under ctest), and must not delete the logs under the running check.
finish() {
  [ "$BASHPID" = "$$" ] || return 0
  stop_publisher; publish; rm -rf "$PACK"; [ -z "${OUT:-}" ] || rm -rf "$LOGS"
}
trap finish EXIT

# ---- steps under the budget ----
RESERVE=15  # seconds kept for the last table and packing
left() { echo $((BUDGET - (SECONDS - START) - RESERVE)); }
record() {  # record NAME STATUS SECONDS DETAIL
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(printf '%s' "$4" | tr '\t\n' '  ' | cut -c1-400)" >>"$LOGS/steps.tsv"
}
skip() {  # skip NAME WHY
  log "$1: skipped ($2)"; record "$1" skipped 0 "$2"; publish
}
# step NAME WANT LOG CMD...: CMD with stdout+stderr in LOG, limited to WANT seconds or what is
# left of the budget; skipped when under 20 s are left. Returns CMD's status (124: timed out,
# 125: skipped).
step() {
  local name=$1 want=$2 out=$3; shift 3
  local t; t=$(left)
  if [ "$t" -lt 20 ]; then skip "$name" "the time budget ran out ($((BUDGET - (SECONDS - START))) s of $BUDGET s left)"; return 125; fi
  [ "$want" -lt "$t" ] && t=$want
  log "$name (limit $t s)"
  local s0=$SECONDS rc
  start_publisher
  timeout -k 5 "$t" "$@" >"$out" 2>&1 </dev/null
  rc=$?
  stop_publisher
  local took=$((SECONDS - s0)) last
  last=$(grep -v '^[[:space:]]*$' "$out" 2>/dev/null | tail -n 1)
  case $rc in
    0) record "$name" ok "$took" "$last" ;;
    124|137) record "$name" "timed out" "$took" "killed after $t s; last line: $last" ;;
    77) record "$name" skipped "$took" "$last" ;;
    *) record "$name" FAILED "$took" "exit $rc: $last" ;;
  esac
  log "$name: exit $rc after $took s"
  publish
  return $rc
}

# ---- the binaries and the libraries they need ----
if [ -n "$BUNDLE" ] && [ -f "$BUNDLE" ]; then  # an archive from gpu_bundle.sh: unpack it first
  rm -rf /tmp/headwise_bundle && mkdir -p /tmp/headwise_bundle
  tar -C /tmp/headwise_bundle -xzf "$BUNDLE" || { echo "error: gpu_check: cannot unpack $BUNDLE" >&2; exit 1; }
  BUNDLE=$(find /tmp/headwise_bundle -mindepth 1 -maxdepth 1 -type d | head -n 1)
  log "unpacked the bundle into $BUNDLE"
fi
if ! nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1; then
  record nvidia-smi FAILED 0 "$(tail -n 1 "$LOGS/nvidia-smi.txt")"
  echo "error: gpu_check: no NVIDIA GPU here (nvidia-smi failed: $(tail -n 1 "$LOGS/nvidia-smi.txt"))" >&2
  exit 1
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$LOGS/gpu.txt" 2>&1
log "GPU: $(cat "$LOGS/gpu.txt")"
export HEADWISE_EXPECT_GPU=1  # test_cuda: a GPU the runtime cannot open is a failure, not a skip

if [ -n "$BUNDLE" ]; then
  BIN=$BUNDLE/bin
  export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ -f "$BUNDLE/kernel_resources.txt" ] && cp "$BUNDLE/kernel_resources.txt" "$LOGS/"
else
  BIN=build-gpu
  step configure 120 "$LOGS/cmake.log" cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DHEADWISE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DHEADWISE_MPI=OFF || exit 1
  step build 600 "$LOGS/build.log" cmake --build build-gpu -j"$(nproc)" --target headwise test_cuda test_dist gpu_probe || exit 1
fi
for b in headwise test_cuda gpu_probe; do
  [ -x "$BIN/$b" ] || { record binaries FAILED 0 "$BIN lacks $b"; echo "error: gpu_check: $BIN lacks $b" >&2; exit 1; }
done

# Libraries the loader cannot find. The bundle leaves out CUDA's own (cudart, cuBLASLt) and NCCL;
# an image may keep some only inside Python packages (nvidia-nccl-cu13, nvidia-cublas, ...). Look
# in a fixed list of folders, globbed, not by searching trees (seconds, not minutes).
resolve_libs() {
  local lib d found dirs=() sites
  sites=$(timeout 10 "$PY" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib \
           /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu $sites; do
    [ -d "$d" ] && dirs+=("$d")
    for found in "$d"/nvidia/*/lib; do [ -d "$found" ] && dirs+=("$found"); done
  done
  local missing=() resolved=()
  for lib in $(ldd "$BIN"/* 2>/dev/null | awk '/not found/{print $1}' | sort -u); do
    found=""
    for d in "${dirs[@]}"; do [ -e "$d/$lib" ] && { found=$d; break; }; done
    if [ -n "$found" ]; then
      export LD_LIBRARY_PATH="$found:$LD_LIBRARY_PATH"; resolved+=("$lib from $found")
    else
      missing+=("$lib")
    fi
  done
  # cuBLASLt is opened on first use (dlopen; src/kernels/cuda/cublaslt_on_demand.cpp), so ldd does
  # not list it: the binary looks beside libcudart and on the loader's path; add its folder when
  # it is elsewhere (the pip wheels keep it apart from the runtime).
  if ! ldconfig -p 2>/dev/null | grep -q 'libcublasLt\.so\.'; then
    for d in "${dirs[@]}"; do
      if compgen -G "$d/libcublasLt.so.*" >/dev/null; then
        export LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH"; resolved+=("libcublasLt (dlopen) from $d"); break
      fi
    done
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    record libraries FAILED "$((SECONDS - START))" "not found: ${missing[*]} (looked in ${dirs[*]})"
  else
    record libraries ok 0 "${resolved[*]:-all found by the loader}"
  fi
}
resolve_libs
publish

# ---- 1. probe ----
PROBE_RC=0
step probe 30 "$LOGS/probe.log" "$BIN/gpu_probe" || PROBE_RC=$?
grep '^probe:' "$LOGS/probe.log" 2>/dev/null
if [ "$PROBE_RC" -ne 0 ] && ! grep -q '^probe: runtime: ok' "$LOGS/probe.log" 2>/dev/null; then
  # Without a working runtime nothing else can run: say so row by row, and stop.
  for s in parity nccl benchmarks; do skip "$s" "the CUDA runtime did not start (probe)"; done
  stop_publisher; publish; cat "$LOGS/table.txt"; exit 1
fi

# ---- 2. parity, and what to do when it fails ----
PARITY_RC=0
if [ "$PARITY" = 1 ]; then
  step parity 240 "$LOGS/test_cuda.log" "$BIN/test_cuda" -r compact -d yes
  PARITY_RC=$?
  tail -n 3 "$LOGS/test_cuda.log"
  if [ "$PARITY_RC" -ne 0 ] && [ "$PARITY_RC" -ne 125 ]; then  # (125: skipped, out of time)
    CASES_BUDGET=$([ "$QUICK" = 1 ] && echo 60 || echo 150)
    CASES_END=$((SECONDS + CASES_BUDGET))
    log "parity failed (exit $PARITY_RC): each case in its own process, CUDA_LAUNCH_BLOCKING=1, at most $CASES_BUDGET s"
    : >"$LOGS/test_cuda_cases.txt"; : >"$LOGS/test_cuda_cases.log"
    "$BIN/test_cuda" --list-test-names-only 2>/dev/null | grep -v '^$' >"$LOGS/case_names.txt"
    s0=$SECONDS
    while IFS= read -r name; do
      t=$(( $(left) < CASES_END - SECONDS ? $(left) : CASES_END - SECONDS )); [ "$t" -gt 30 ] && t=30
      if [ "$t" -lt 5 ]; then echo "NOT RUN (time): $name" >>"$LOGS/test_cuda_cases.txt"; continue; fi
      spec=$(printf '%s' "$name" | sed 's/[][,*~\\"]/\\&/g')  # Catch's test spec escapes
      echo "=== $name" >>"$LOGS/test_cuda_cases.log"
      CUDA_LAUNCH_BLOCKING=1 timeout -k 5 "$t" "$BIN/test_cuda" -r compact -d yes "$spec" </dev/null \
        >>"$LOGS/test_cuda_cases.log" 2>&1
      rc=$?
      case $rc in
        0) echo "passed: $name" ;;
        124|137) echo "TIMED OUT after $t s: $name" ;;
        *) echo "FAILED (exit $rc): $name" ;;
      esac >>"$LOGS/test_cuda_cases.txt"
      publish
    done <"$LOGS/case_names.txt"
    n_pass=$(grep -c '^passed' "$LOGS/test_cuda_cases.txt")
    record reruns done "$((SECONDS - s0))" "$n_pass of $(wc -l <"$LOGS/case_names.txt") cases passed alone (CUDA_LAUNCH_BLOCKING=1)"
    publish
    grep -v '^passed' "$LOGS/test_cuda_cases.txt"
    # memcheck on up to three failing cases (the first ones listed), each bounded.
    SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -n 1)
    if [ -z "$SAN" ]; then
      skip sanitizer "compute-sanitizer not found on this machine"
    else
      grep -E '^(FAILED|TIMED OUT)' "$LOGS/test_cuda_cases.txt" | sed 's/^[^:]*: //' | head -n 3 >"$LOGS/sanitize_cases.txt"
      i=0
      while IFS= read -r name; do
        i=$((i + 1))
        spec=$(printf '%s' "$name" | sed 's/[][,*~\\"]/\\&/g')
        step "sanitizer $i" 90 "$LOGS/sanitizer_$i.log" "$SAN" --tool memcheck --print-limit 20 --error-exitcode 3 \
          "$BIN/test_cuda" -r compact "$spec"
      done <"$LOGS/sanitize_cases.txt"
      [ "$i" = 0 ] && skip sanitizer "no case failed alone"
    fi
  fi
else
  PARITY_RC=-1
  record parity "not run" 0 "--no-parity"
fi

# ---- 3. NCCL communicator, one rank ----
NCCL_RC=0
if [ -x "$BIN/test_dist" ]; then
  step nccl 90 "$LOGS/test_nccl.log" env HEADWISE_TEST_NCCL=1 "$BIN/test_dist" -r compact
  NCCL_RC=$?
else
  skip nccl "no test_dist in $BIN"
fi

# ---- 4. benchmarks ----
clocks() {
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu \
    --format=csv,noheader 2>&1 | sed "s/^/$1: /" >>"$LOGS/clocks.txt"
}
clocks "before the benchmarks"
STEPS=10; WARM=3; LAYER_T=1024,4096,8192,16384
[ "$QUICK" = 1 ] && { STEPS=3; WARM=2; LAYER_T=1024; }
static_plan() {  # 12 layers x 12 heads with the first $1 heads of each layer static
  "$PY" -c "import json,sys; n=int(sys.argv[1]); print(json.dumps([['static']*n+['softmax']*(12-n)]*12))" "$1"
}
hw_bench() {  # name T batch [extra --set ...]
  local name=$1 T=$2 B=$3; shift 3
  step "bench $name" 150 "$LOGS/$name.log" "$BIN/headwise" bench --config configs/bench_gpu_124m.json --steps $STEPS \
    --warmup $WARM --set train.seq_len="$T" --set train.micro_batch="$B" --set model.block_size="$T" \
    --set train.total_batch_tokens=$((T * B)) "$@"
  local rc=$?
  if [ "$rc" = 0 ]; then grep -E '^\{' "$LOGS/$name.log" | tail -n 1 >"$LOGS/$name.json"
  else echo "{\"error\": \"$(grep -v '^[[:space:]]*$' "$LOGS/$name.log" | tail -n 1 | tr -d '"\\' | cut -c1-300)\"}" >"$LOGS/$name.json"; fi
}
pt_bench() {  # name T batch
  step "bench $1" 240 "$LOGS/$1.log" "$PY" scripts/bench_pytorch_gpu.py --seq "$2" --batch "$3" --steps $STEPS --warmup $WARM
  local rc=$?
  if [ "$rc" = 0 ]; then grep -E '^\{' "$LOGS/$1.log" | tail -n 1 >"$LOGS/$1.json"
  else echo "{\"error\": \"pytorch: $(grep -v '^[[:space:]]*$' "$LOGS/$1.log" | tail -n 1 | tr -d '"\\' | cut -c1-300)\"}" >"$LOGS/$1.json"; fi
}
hw_bench hw_t1024 1024 16
if [ "$QUICK" = 0 ]; then
  hw_bench hw_t4096 4096 4
  hw_bench hw_t4096_static25 4096 4 --set "model.head_plan=$(static_plan 3)"
  hw_bench hw_t4096_static50 4096 4 --set "model.head_plan=$(static_plan 6)"
  hw_bench hw_t1024_fp32 1024 16 --set train.precision=fp32
  step "attention fp32" 200 "$LOGS/attn_layer.txt" "$BIN/headwise" bench-attention --layer --device cuda --T $LAYER_T \
    --batch 4 --heads 12 --head-dim 64 --repeats 5
  grep -E '^\[\{' "$LOGS/attn_layer.txt" | tail -n 1 >"$LOGS/attn_layer.json"
  step "attention bf16" 200 "$LOGS/attn_layer_bf16.txt" "$BIN/headwise" bench-attention --layer --device cuda \
    --precision bf16 --T $LAYER_T --batch 4 --heads 12 --head-dim 64 --repeats 5
  grep -E '^\[\{' "$LOGS/attn_layer_bf16.txt" | tail -n 1 >"$LOGS/attn_layer_bf16.json"
  : >"$LOGS/attn_sdpa.jsonl"
  for T in ${LAYER_T//,/ }; do
    step "sdpa T=$T" 60 "$LOGS/attn_sdpa_$T.log" "$PY" scripts/bench_attention_sdpa.py --batch 4 --heads 12 --seq "$T" --head-dim 64 &&
      grep -E '^\{' "$LOGS/attn_sdpa_$T.log" >>"$LOGS/attn_sdpa.jsonl"
  done
  pt_bench pt_t1024 1024 16
  pt_bench pt_t4096 4096 4
else
  skip "other benchmarks" "--quick runs one training benchmark only"
fi
clocks "after the benchmarks"

stop_publisher
publish
cat "$LOGS/table.txt"
log "done in $((SECONDS - START)) s of the $BUDGET s budget"
[ "$PROBE_RC" = 0 ] && [ "$PARITY_RC" -le 0 ] && [ "$NCCL_RC" = 0 ]
