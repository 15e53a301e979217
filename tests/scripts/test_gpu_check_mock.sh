#!/usr/bin/env bash
# scripts/gpu_check.sh on stand-ins (no GPU needed): a fake nvidia-smi and compute-sanitizer, a
# bundle whose gpu_probe, test_cuda, test_dist and headwise print what the real ones would, and a
# python3 stand-in for PyTorch's benchmarks. A device lease is one short shot, so the script's own
# logic is checked here:
#   1. parity fails: the failing case is named after the per-case reruns (a name with a comma and
#      brackets survives Catch's escaping), the reruns run with CUDA_LAUNCH_BLOCKING=1, memcheck
#      runs on the failing case, the table carries our numbers, at most the four files the device
#      tool returns land in $OUT, and the exit status says the check failed;
#   2. a linear chain that hangs: the case is reported as timed out, with the kernel's message
#      naming item, batch, head, stage and chunk;
#   3. a CUDA runtime that cannot start: FAILED with the runtime's own error text, the other steps
#      reported as skipped, exit 1;
#   4. a budget too small for everything: late steps are skipped (rows say so), the run ends
#      within the budget, and the table and logs still come back;
#   5. SIGKILL in the middle of a step: $OUT holds whole files with every finished step, and the
#      running step's log as of the last 15 s publish.
# Nothing here waits on a guess: each gpu_check run is bounded (RUN_LIMIT, a hang is a failure
# that says so), and run 5 polls for the events it needs (the step started, a publish of its log
# landed) with bounds, failing fast with what did not happen.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d /tmp/gpu_check_mock.XXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
mkdir -p "$W/bin" "$W/bundle/bin" "$W/bundle/lib" "$W/out"
fail() { echo "FAIL: $*"; exit 1; }

cat >"$W/bin/nvidia-smi" <<'S'
#!/bin/sh
case "$*" in
  *clocks.sm*) echo "1980 MHz, 1980 MHz, 3201 MHz, 41, 120.5 W, 0 %" ;;
  *name*) echo "MOCK H200, 143771 MiB, 000" ;;
  *) echo "mock nvidia-smi" ;;
esac
S
cat >"$W/bin/compute-sanitizer" <<'S'
#!/bin/sh
echo "========= Invalid __global__ read of size 4 bytes at attention_linear.cuh:433"
echo "========= ERROR SUMMARY: 2 errors"
exit 3
S
cat >"$W/bundle/bin/gpu_probe" <<'S'
#!/bin/bash
if [ "${MOCK_PROBE:-ok}" = init_fail ]; then
  echo "probe: runtime: FAILED: cudaGetDeviceCount: cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA runtime version); driver API 12040, runtime 13000"
  echo '{"runtime": "FAILED: cudaGetDeviceCount: cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA runtime version)", "ok": false}'
  exit 1
fi
echo "probe: runtime: ok MOCK H200, sm_90, 132 SMs"
echo '{"device": "MOCK H200", "sm": "9.0", "optin_smem_bytes": 232448, "runtime": "ok", "kernel": "ok", "cublaslt": "ok", "nccl": "ok", "ok": true}'
S
cat >"$W/bundle/bin/test_cuda" <<'S'
#!/bin/bash
if [ "$1" = "--list-test-names-only" ]; then printf 'good case\nbad, case [x]\nlinear chain case\nother case\n'; exit 0; fi
[ "$HEADWISE_EXPECT_GPU" = 1 ] || { echo "HEADWISE_EXPECT_GPU not set"; exit 5; }
case "${*: -1}" in
  'bad\, case \[x\]') echo "bad case FAILED (CUDA_LAUNCH_BLOCKING=$CUDA_LAUNCH_BLOCKING)"; exit 1 ;;
  'linear chain case')
    if [ "${MOCK_HANG:-0}" = 1 ]; then
      echo "headwise: linear chain wait timed out after 10 s: item kind 1 (0 forward, 1 dQ, 2 dK/dV), batch 1 head 3 stage 5 waits for stage 4 to publish chunk 7 (it has published 6); trapping"
      sleep 1000
    fi
    exit 0 ;;
  'good case'|'other case') exit 0 ;;
  yes) echo "whole run: 1 of 4 failed"; exit 1 ;;  # the full run (last argument of -d yes)
  *) echo "unexpected spec: ${*: -1}"; exit 2 ;;
esac
S
cat >"$W/bundle/bin/test_dist" <<'S'
#!/bin/bash
[ "$HEADWISE_TEST_NCCL" = 1 ] || { echo "HEADWISE_TEST_NCCL not set"; exit 3; }
echo "Passed all 32 test cases"
S
cat >"$W/bundle/bin/headwise" <<'S'
#!/bin/bash
echo "[info] starting $1"
sleep "${MOCK_STEP_SECONDS:-0}"
if [ "$1" = bench ]; then
  echo '{"ms_per_step": 40.0, "tok_per_s": 409600, "mfu": 0.45, "peak_bytes": 2147483648}'
else
  echo '[{"plan": "softmax", "T": 1024, "ms_fwd_bwd": 1.5, "relative_to_softmax": 1.0, "acr": 1.0}]'
fi
S
cat >"$W/bin/mockpy" <<'S'
#!/bin/bash
case "$1" in
  scripts/bench_pytorch_gpu.py) echo '{"ms_per_step": 50.0, "tok_per_s": 327680, "mfu": 0.36}' ;;
  scripts/bench_attention_sdpa.py) echo '{"seq": 1024, "dtype": "bfloat16", "fwd_bwd_ms": 1.0}' ;;
  *) exec python3 "$@" ;;
esac
S
printf 'kernel | registers | spill stores | spill loads | stack\nattention_backward_kernel<128, bf16> | 255 | spill stores 16 | spill loads 16 | 16\n' \
  >"$W/bundle/kernel_resources.txt"
chmod +x "$W/bin/"* "$W/bundle/bin/"*
RUN_LIMIT=120  # the longest run below takes about 40 s
run_check() {  # run_check LOG [gpu_check options...]: gpu_check's exit status; a hang fails the test
  local log=$1 rc=0; shift
  TMPDIR="$W" PATH="$W/bin:$PATH" PYTHON="$W/bin/mockpy" OUT="$W/out" timeout -k 5 "$RUN_LIMIT" \
    bash "$ROOT/scripts/gpu_check.sh" --bundle "$W/bundle" "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then tail -5 "$log"; fail "gpu_check $* did not finish within $RUN_LIMIT s"; fi
  return "$rc"
}
# wait_for SECONDS WHAT CMD...: polls CMD every 0.2 s; fails naming WHAT after SECONDS.
wait_for() {
  local limit=$1 what=$2 t0=$SECONDS; shift 2
  until "$@"; do
    [ $((SECONDS - t0)) -lt "$limit" ] || fail "$what did not happen within $limit s"
    sleep 0.2
  done
}

# 1. Parity fails; everything fits the budget.
run_check "$W/run1.log" --budget 300 && fail "gpu_check exited 0 although parity failed"
grep -q "CUDA parity tests: FAILED" "$W/run1.log" || fail "the parity failure is not reported"
grep -q "NCCL communicator, one rank (test_dist, HEADWISE_TEST_NCCL=1): PASSED" "$W/run1.log" ||
  fail "the one-rank NCCL tests are not reported as passed"
grep -q "Cases rerun one per process (CUDA_LAUNCH_BLOCKING=1): 3 of 4 passed alone" "$W/run1.log" ||
  fail "per-case reruns not summarised"
grep -q "FAILED (exit 1): bad, case \[x\]" "$W/run1.log" || fail "the failing case is not named"
grep -q "compute-sanitizer memcheck, bad, case \[x\]: ========= ERROR SUMMARY: 2 errors" "$W/run1.log" ||
  fail "memcheck did not run on the failing case"
grep -q "Invalid __global__ read of size 4 bytes at attention_linear.cuh:433" "$W/run1.log" ||
  fail "memcheck's finding is not in the table"
grep -q "| probe | ok |" "$W/run1.log" || fail "no probe row"
grep -q "GPU clocks .* before the benchmarks: 1980 MHz" "$W/run1.log" || fail "no clocks"
grep -q "attention_backward_kernel<128, bf16> | 255 | spill stores 16" "$W/run1.log" || fail "no kernel resources"
grep -q "| 124M T=1024 | 40.00 | 409600 | 0.450 | 2.00 | 50.00 | 327680 | 0.360 | 1.25 |" "$W/run1.log" ||
  fail "the training row is wrong: $(grep '124M T=1024 |' "$W/run1.log")"
grep -q "| softmax | 1024 | 1.500 | 1.000 | 1.000 |  | 1.50 |" "$W/run1.log" || fail "the attention row is wrong"
n_out=$(find "$W/out" -type f | wc -l)
[ "$n_out" -le 8 ] || fail "$n_out files in \$OUT (the device tool returns 8)"
for f in table.txt test_cuda.log test_cuda_cases.txt logs.tar.gz; do [ -s "$W/out/$f" ] || fail "no $f in \$OUT"; done
[ -z "$(find "$W/out" -name '.*' -type f)" ] || fail "temporary files left in \$OUT"
tar -tzf "$W/out/logs.tar.gz" >"$W/logs.list" || fail "logs.tar.gz does not unpack"
grep -q "hw_t4096.json" "$W/logs.list" || fail "logs.tar.gz lacks the benchmark JSON"
mkdir -p "$W/logs1" && tar -C "$W/logs1" -xzf "$W/out/logs.tar.gz"
grep -q "bad case FAILED (CUDA_LAUNCH_BLOCKING=1)" "$W/logs1/test_cuda_cases.log" || fail "reruns without CUDA_LAUNCH_BLOCKING=1"

# 2. A linear chain that hangs in one case: timed out, with the kernel's own words.
rm -rf "${W:?}/out/"*
MOCK_HANG=1 run_check "$W/run2.log" --budget 300 --quick
grep -q "TIMED OUT after 30 s: linear chain case" "$W/run2.log" || fail "the hanging case is not reported as timed out"
grep -q "linear chain wait timed out after 10 s: item kind 1 (0 forward, 1 dQ, 2 dK/dV), batch 1 head 3 stage 5 waits for stage 4 to publish chunk 7" \
  "$W/run2.log" || fail "the hang's item, stage and chunk are not in the table"

# 3. The CUDA runtime cannot start: FAILED with its text, the rest skipped.
rm -rf "${W:?}/out/"*
MOCK_PROBE=init_fail run_check "$W/run3.log" --budget 300 && fail "gpu_check exited 0 with a dead runtime"
grep -q "| probe | FAILED | .*cudaErrorInsufficientDriver (CUDA driver version is insufficient" "$W/run3.log" ||
  fail "the init failure's text is not in the probe row"
grep -q "| parity | skipped | 0 | the CUDA runtime did not start (probe) |" "$W/run3.log" || fail "parity not skipped"
grep -q "SKIPPED" "$W/run3.log" && fail "something says SKIPPED as a result on a GPU machine"
[ -s "$W/out/table.txt" ] || fail "no table after the init failure"

# 4. A budget that runs out: each headwise step takes 4 s.
rm -rf "${W:?}/out/"*
t0=$SECONDS
MOCK_STEP_SECONDS=4 run_check "$W/run4.log" --no-parity --budget 45
took=$((SECONDS - t0))
[ "$took" -le 50 ] || fail "a 45 s budget took $took s"
grep -q "CUDA parity tests: not run" "$W/run4.log" || fail "--no-parity not reported"
grep -q "| skipped | 0 | the time budget ran out" "$W/run4.log" || fail "no step was reported as skipped"
grep -q "## headwise GPU check on MOCK H200" "$W/run4.log" || fail "no table after the budget ran out"
[ -s "$W/out/table.txt" ] && [ -s "$W/out/logs.tar.gz" ] || fail "table or logs missing after the budget ran out"

# 5. SIGKILL of the whole run while a 40 s benchmark step runs.
rm -rf "${W:?}/out/"*
MOCK_STEP_SECONDS=40 setsid bash -c "$(declare -f run_check fail); W=$W ROOT=$ROOT RUN_LIMIT=$RUN_LIMIT run_check $W/run5.log --no-parity --budget 300" &
pid=$!
wait_for 60 "the 40 s benchmark step's start" grep -qs "bench hw_t1024 (limit" "$W/run5.log"
published() { tar -xzOf "$W/out/logs.tar.gz" ./hw_t1024.log 2>/dev/null | grep -q "starting bench"; }
wait_for 30 "a 15 s publish of the running step's log" published
kill -9 -- -"$pid" 2>/dev/null
wait "$pid" 2>/dev/null
grep -q "| nccl | ok |" "$W/out/table.txt" || fail "the steps finished before the kill are not in \$OUT/table.txt"
mkdir -p "$W/logs5" && tar -C "$W/logs5" -xzf "$W/out/logs.tar.gz" || fail "logs.tar.gz is not whole after SIGKILL"
grep -q "starting bench" "$W/logs5/hw_t1024.log" || fail "the running step's log did not come back"
echo "gpu_check mock: all checks passed"
