#!/usr/bin/env bash
# Build the GPU binaries here and pack them with the shared libraries a bare CUDA machine lacks,
# for `scripts/gpu_check.sh --bundle DIR.tar.gz` on a GPU machine that has CUDA but not the
# Debian build dependencies (the device tool's H200: CUDA 13 and PyTorch, no spdlog/OpenBLAS).
#   - host code for x86-64-v3 (AVX2 + FMA), not this machine's -march=native: the GPU machine's
#     CPU may lack AVX-512 (checked: no zmm register in our binaries' code);
#   - device code for sm_90 with line tables (-lineinfo, from CMakeLists.txt);
#   - every library ldd resolves except glibc's, the loader and CUDA's own (cudart, cuBLAS(Lt),
#     NCCL, the driver), which the GPU machine brings (gpu_check.sh finds them, also inside
#     Python packages);
#   - kernel_resources.txt: registers, spills and stack of every kernel, from ptxas at build time
#     (the check's table shows the attention kernels' and every spill).
# The folder is ~80 MB (OpenBLAS alone 36 MB), the archive ~25 MB (2026-12-03): carry the archive (the device
# tool carries at most 64 MiB) and run `bash scripts/gpu_check.sh --bundle DIR.tar.gz` there.
#
# Usage: bash scripts/gpu_bundle.sh [DIR]                    (default DIR: .gpu_bundle; build dir build-gpu)
#        bash scripts/gpu_bundle.sh --pack-only BUILD DIR    (pack BUILD's binaries as they are;
#                                                             tests/scripts/test_gpu_bundle.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BINARIES=(headwise test_cuda test_dist gpu_probe)
if [ "${1:-}" = --pack-only ]; then
  BUILD=${2:?--pack-only BUILD DIR}; DIR=${3:?--pack-only BUILD DIR}; PACK_ONLY=1
else
  BUILD=build-gpu; DIR=${1:-.gpu_bundle}; PACK_ONLY=0
fi

if [ "$PACK_ONLY" = 0 ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DHEADWISE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DHEADWISE_MPI=OFF -DHEADWISE_CPU_ARCH=x86-64-v3 "-DCMAKE_CUDA_FLAGS=-Xptxas=-v" >/dev/null
  # ptxas reports only what it compiles: recompile the device code so the report is whole.
  find "$BUILD" -name '*.cu.o' -delete
  cmake --build "$BUILD" -j"$(nproc)" --target "${BINARIES[@]}" 2>&1 | tee "$BUILD/bundle_build.log" |
    grep -v '^ptxas info\|bytes stack frame' || true
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "error: gpu_bundle: the build failed (see $BUILD/bundle_build.log)" >&2; exit 1; }
fi

rm -rf "$DIR" && mkdir -p "$DIR/bin" "$DIR/lib"
for b in "${BINARIES[@]}"; do
  if [ -x "$BUILD/$b" ]; then cp "$BUILD/$b" "$DIR/bin/"
  elif [ "$b" != test_dist ]; then echo "error: gpu_bundle: $BUILD/$b was not built" >&2; exit 1; fi
done
# Every resolved library except glibc's own, the dynamic loader and CUDA's (libcuda comes with the
# driver; cudart/cublas/nccl from the target's toolkit or Python packages).
ldd "$DIR"/bin/* | awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|libresolv|ld-linux[^/]*)\.so|/usr/local/cuda|/libcuda\.so|/libnvidia|/libcudart|/libcublas|/libnccl|/libnvToolsExt' |
  while read -r lib; do cp -L "$lib" "$DIR/lib/"; done

if [ "$PACK_ONLY" = 0 ]; then
  # Host code must run on any x86-64-v3 CPU: no AVX-512 register in our own binaries.
  for b in "$DIR"/bin/*; do
    n=$(objdump -d --no-show-raw-insn "$b" | grep -c '%zmm' || true)
    [ "$n" = 0 ] || { echo "error: gpu_bundle: $b uses AVX-512 ($n instructions with zmm registers)" >&2; exit 1; }
  done
  python3 scripts/gpu_kernel_resources.py "$BUILD/bundle_build.log" >"$DIR/kernel_resources.txt"
fi
tar -C "$(dirname "$DIR")" -czf "$DIR.tar.gz" "$(basename "$DIR")"
du -sh "$DIR" "$DIR.tar.gz"
echo "bundle ready: bash scripts/gpu_check.sh --bundle $DIR.tar.gz"
