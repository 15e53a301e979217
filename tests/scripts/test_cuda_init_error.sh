#!/usr/bin/env bash
# test_cuda on a machine without a GPU: "skipped" (77) by default, but a failure that quotes the
# CUDA runtime's error where a GPU is expected (HEADWISE_EXPECT_GPU=1, as gpu_check.sh sets it),
# so a GPU machine whose driver cannot start is never reported as a skipped run.
# Usage: test_cuda_init_error.sh TEST_CUDA   (exits 77 where a GPU answers: nothing to check)
set -uo pipefail
BIN=$1
if nvidia-smi -L >/dev/null 2>&1 || [ -e /dev/nvidiactl ]; then echo "a GPU is here: nothing to check"; exit 77; fi
fail() { echo "FAIL: $*"; exit 1; }
out=$(env -u HEADWISE_EXPECT_GPU "$BIN" 2>&1); rc=$?
[ "$rc" = 77 ] || fail "without a GPU and not expecting one, test_cuda exited $rc, not 77: $out"
grep -q "skipped: no GPU usable by the CUDA runtime: cudaGetDeviceCount failed with cudaError" <<<"$out" ||
  fail "the skip does not quote the runtime's error: $out"
out=$(HEADWISE_EXPECT_GPU=1 "$BIN" 2>&1); rc=$?
[ "$rc" = 1 ] || fail "expecting a GPU, test_cuda exited $rc, not 1: $out"
grep -q "FAILED before any test: a GPU is expected here, but no GPU usable by the CUDA runtime: cudaGetDeviceCount failed with cudaError[A-Za-z]* (" <<<"$out" ||
  fail "the failure does not quote the runtime's error: $out"
echo "test_cuda init error: ok ($out)"
