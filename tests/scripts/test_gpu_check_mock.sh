#!/usr/bin/env bash
# scripts/gpu_check.sh on stand-ins (no GPU needed): a fake nvidia-smi, a bundle whose headwise
# prints fixed JSON and whose test_cuda fails one case, and a python3 stand-in for PyTorch's
# benchmarks. A device lease is one short shot, so the script's own logic is checked here:
#   1. with a generous budget: the table is printed with our numbers, the failing case is named
#      after the per-case reruns (a name with a comma and brackets survives Catch's escaping),
#      and at most the four files the device tool can return land in $OUT;
#   2. with a budget too small for everything: late steps are reported as skipped, not killed,
#      and the table and logs still come back.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d /tmp/gpu_check_mock.XXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/bin" "$W/bundle/bin" "$W/bundle/lib" "$W/out"
fail() { echo "FAIL: $*"; exit 1; }

cat >"$W/bin/nvidia-smi" <<'S'
#!/bin/sh
echo "MOCK H200, 143771 MiB, 000"
S
cat >"$W/bundle/bin/test_cuda" <<'S'
#!/bin/bash
if [ "$1" = "--list-test-names-only" ]; then printf 'good case\nbad, case [x]\nother case\n'; exit 0; fi
case "${*: -1}" in
  'bad\, case \[x\]') echo "bad case FAILED"; exit 1 ;;
  'good case'|'other case') exit 0 ;;
  yes) echo "whole run: 1 of 3 failed"; exit 1 ;;  # the full run (last argument of -d yes)
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
chmod +x "$W/bin/"* "$W/bundle/bin/"*

# 1. Everything fits.
PATH="$W/bin:$PATH" PYTHON="$W/bin/mockpy" OUT="$W/out" bash "$ROOT/scripts/gpu_check.sh" --bundle "$W/bundle" \
  --quick --budget 300 >"$W/run1.log" 2>&1 || fail "gpu_check exited $? (log: $(tail -n 5 "$W/run1.log"))"
grep -q "CUDA parity tests: FAILED" "$W/run1.log" || fail "the parity failure is not reported"
grep -q "NCCL communicator, one rank (test_dist, HEADWISE_TEST_NCCL=1): PASSED" "$W/run1.log" ||
  fail "the one-rank NCCL tests are not reported as passed"
grep -q "Cases rerun one per process: 2 of 3 passed alone" "$W/run1.log" || fail "per-case reruns not summarised"
grep -q "FAILED (exit 1): bad, case \[x\]" "$W/run1.log" || fail "the failing case is not named"
grep -q "| 124M T=1024 | 40.00 | 409600 | 0.450 | 2.00 | 50.00 | 327680 | 0.360 | 1.25 |" "$W/run1.log" ||
  fail "the training row is wrong: $(grep '124M T=1024 |' "$W/run1.log")"
grep -q "| softmax | 1024 | 1.500 | 1.000 | 1.000 |  | 1.50 |" "$W/run1.log" || fail "the attention row is wrong"
n_out=$(find "$W/out" -type f | wc -l)
[ "$n_out" -le 8 ] || fail "$n_out files in \$OUT (the device tool returns 8)"
for f in table.txt test_cuda.log test_cuda_cases.txt logs.tar.gz; do [ -s "$W/out/$f" ] || fail "no $f in \$OUT"; done
tar -tzf "$W/out/logs.tar.gz" >"$W/logs.list" || fail "logs.tar.gz does not unpack"
grep -q "hw_t4096.json" "$W/logs.list" || fail "logs.tar.gz lacks the benchmark JSON"

# 2. A budget that runs out: each headwise step takes 4 s, the budget leaves room for a few.
rm -rf "${W:?}/out/"*
PATH="$W/bin:$PATH" PYTHON="$W/bin/mockpy" OUT="$W/out" MOCK_STEP_SECONDS=4 bash "$ROOT/scripts/gpu_check.sh" \
  --bundle "$W/bundle" --quick --no-parity --budget 45 >"$W/run2.log" 2>&1 || fail "budget run exited $?"
grep -q "CUDA parity tests: not run" "$W/run2.log" || fail "--no-parity not reported"
grep -q "skipped: the time budget ran out" "$W/run2.log" || fail "no step was reported as skipped"
grep -q "## headwise GPU check on MOCK H200" "$W/run2.log" || fail "no table after the budget ran out"
[ -s "$W/out/table.txt" ] && [ -s "$W/out/logs.tar.gz" ] || fail "table or logs missing after the budget ran out"
echo "gpu_check mock: all checks passed"
