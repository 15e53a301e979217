#!/usr/bin/env bash
# Install dependencies, build, and run the whole test suite (Catch2 under ctest, including the
# 2-rank MPI tests). Usage: bash scripts/test.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
bash scripts/setup.sh "$BUILD_DIR"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" --timeout 600
