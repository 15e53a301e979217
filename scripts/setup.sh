#!/usr/bin/env bash
# Installs headwise's build dependencies from Debian packages and builds it: the CPU backend,
# and the CUDA backend when nvcc is found (/usr/local/cuda; it compiles without a GPU).
# Usage: bash scripts/setup.sh [build-dir]   (default: build); extra CMake options in
# HEADWISE_CMAKE_ARGS, e.g. "-DHEADWISE_CUDA=OFF" or "-DCMAKE_CUDA_ARCHITECTURES=90";
# HEADWISE_BUILD_TARGET=headwise builds the binary alone.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
# clang, libclang-rt-14-dev (libFuzzer, the sanitizer runtimes) and libomp-dev (clang's OpenMP):
# the sanitizer tree and fuzz targets of the bad-input tests (tests/scripts/sanitize.sh).
pkgs=(build-essential cmake nlohmann-json3-dev libcli11-dev libspdlog-dev catch2 libopenblas-dev
      libopenmpi-dev openmpi-bin bible-kjv python3-numpy python3-matplotlib clang libclang-rt-14-dev libomp-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${HEADWISE_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" ${HEADWISE_BUILD_TARGET:+--target "$HEADWISE_BUILD_TARGET"}
echo "setup: built $BUILD_DIR/headwise"
