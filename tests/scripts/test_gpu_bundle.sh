#!/usr/bin/env bash
# scripts/gpu_bundle.sh's packing, on this build's binaries (CI cannot afford the bundle's own
# x86-64-v3 build): the bundle carries every library the binaries need except glibc's and CUDA's,
# and its binaries start from a clean directory with nothing but the bundle's lib/ on
# LD_LIBRARY_PATH (as gpu_check.sh runs them): headwise answers --help, and the CUDA parts report
# the missing GPU as they do in CI (test_cuda: skipped, 77; gpu_probe: the runtime's error, 1).
# Usage: test_gpu_bundle.sh BUILD_DIR
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$1" && pwd)
W=$(mktemp -d /tmp/gpu_bundle_test.XXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

bash "$ROOT/scripts/gpu_bundle.sh" --pack-only "$BUILD" "$W/bundle" >"$W/pack.log" 2>&1 ||
  fail "packing failed: $(tail -n 3 "$W/pack.log")"
size=$(stat -c %s "$W/bundle.tar.gz")
[ "$size" -lt $((64 << 20)) ] || fail "the archive is $size bytes, over the device tool's 64 MiB"

# Every library a binary loads comes from the bundle, glibc, or CUDA (which the GPU machine has).
mv "$W/bundle" "$W/moved"  # the archive's copy is what travels: unpack it elsewhere
mkdir -p "$W/clean" && tar -C "$W/clean" -xzf "$W/bundle.tar.gz" || fail "the archive does not unpack"
B="$W/clean/bundle"
for bin in "$B"/bin/*; do
  env -i LD_LIBRARY_PATH="$B/lib" ldd "$bin" >"$W/ldd.txt" 2>&1 || fail "ldd $bin: $(cat "$W/ldd.txt")"
  while read -r name _ path _; do
    case "$name" in linux-vdso*|/lib64/ld-linux*) continue ;; esac
    case "$path" in
      "$B"/lib/*) ;;
      */libc.so*|*/libm.so*|*/libdl.so*|*/librt.so*|*/libpthread.so*|*/libresolv.so*|*/ld-linux*) ;;
      /usr/local/cuda*) ;;
      not) case "$name" in libcuda.so*|libcudart.so*|libcublas*|libnccl*) ;; *) fail "$bin: $name not found" ;; esac ;;
      *) fail "$bin loads $name from $path, outside the bundle" ;;
    esac
  done <"$W/ldd.txt"
done

# The binaries start from a clean directory and a clean environment.
mkdir -p "$W/run" && cd "$W/run" || exit 1
run() { env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$B/lib" "$@"; }
out=$(run "$B/bin/headwise" --help 2>&1) || fail "headwise --help from the bundle: $out"
grep -q "train" <<<"$out" || fail "headwise --help printed no subcommands: $out"
if nvidia-smi -L >/dev/null 2>&1; then echo "a GPU is here: the CUDA binaries' no-GPU answers are not checked"; exit 0; fi
out=$(run "$B/bin/test_cuda" 2>&1); rc=$?
[ "$rc" = 77 ] || fail "test_cuda from the bundle exited $rc, not 77 (skipped): $out"
out=$(run "$B/bin/gpu_probe" 2>&1); rc=$?
[ "$rc" = 1 ] || fail "gpu_probe from the bundle exited $rc, not 1: $out"
grep -q "^probe: runtime: FAILED: cudaGetDeviceCount: cudaError" <<<"$out" || fail "gpu_probe did not quote the runtime: $out"
grep -q '"ok":false' <<<"$out" || fail "gpu_probe's JSON line is missing: $out"
echo "gpu bundle: $(ls "$B/lib" | wc -l) libraries, archive $((size >> 20)) MiB; binaries start from a clean directory"
