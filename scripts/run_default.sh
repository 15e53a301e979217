#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, prepare the embedded corpus
# (King James Bible, byte-level), train the default small model on the CPU (a few minutes on
# 2 cores) and print the validation loss and perplexity.
# Usage: bash scripts/run_default.sh [run-dir]   (default: runs/default)
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_DIR=${1:-runs/default}
# The default job runs on the CPU. Without a GPU, skip compiling the CUDA backend (most of the
# build time on a small machine; scripts/test.sh still compiles and checks it).
if ! nvidia-smi >/dev/null 2>&1; then
  echo "run_default: no GPU here: building the CPU-only binary (the CUDA build is covered by scripts/test.sh)"
  export HEADWISE_CMAKE_ARGS="-DHEADWISE_CUDA=OFF ${HEADWISE_CMAKE_ARGS:-}"
fi
HEADWISE_BUILD_TARGET=headwise bash scripts/setup.sh build
bash scripts/prepare_default_corpus.sh build/headwise data/kjv
# OpenMP threads that spin-wait steal the cores OpenBLAS needs between parallel regions.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# --resume auto: a second run of this script reports the finished run (or continues an
# interrupted one) instead of training again.
build/headwise train --config configs/default_cpu.json --out "$RUN_DIR" --resume auto
build/headwise eval --checkpoint "$RUN_DIR/checkpoints/step_300" --data 'data/kjv/val_*.bin' --batches 20 \
  --micro-batch 16 --seq-len 128
echo "run directory: $RUN_DIR (metrics.jsonl, summary.json, checkpoints/)"
