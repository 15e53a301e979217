#!/usr/bin/env bash
# Build the GPU binaries here (sm_90) and pack them with the shared libraries they need that a
# bare CUDA machine lacks (spdlog, fmt, OpenBLAS, ...; not the CUDA libraries, which the target
# has in /usr/local/cuda), for `scripts/gpu_check.sh --bundle DIR` on a GPU machine that has CUDA
# but not the Debian build dependencies. Usage: bash scripts/gpu_bundle.sh [DIR=.gpu_bundle]
# Also writes DIR.tar.gz: the folder is ~55 MB (OpenBLAS alone is 36 MB), close to the device
# tool's 64 MiB limit on what travels with the tree; the archive is 18 MB. Carry the
# archive and run `bash scripts/gpu_check.sh --bundle DIR.tar.gz` there.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.gpu_bundle}
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DHEADWISE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DHEADWISE_MPI=OFF >/dev/null
cmake --build build-gpu -j"$(nproc)" --target headwise test_cuda test_dist
rm -rf "$DIR" && mkdir -p "$DIR/bin" "$DIR/lib"
cp build-gpu/headwise build-gpu/test_cuda build-gpu/test_dist "$DIR/bin/"
# Every resolved library except glibc's own, the dynamic loader and CUDA's (libcuda comes with the
# driver; cudart/cublas/nccl from the target's toolkit).
ldd build-gpu/headwise build-gpu/test_cuda build-gpu/test_dist | awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*)\.so|/usr/local/cuda|libcuda\.so|libnvidia' |
  while read -r lib; do cp -L "$lib" "$DIR/lib/"; done
tar -C "$(dirname "$DIR")" -czf "$DIR.tar.gz" "$(basename "$DIR")"
du -sh "$DIR" "$DIR.tar.gz"
echo "bundle ready: bash scripts/gpu_check.sh --bundle $DIR (or --bundle $DIR.tar.gz)"
