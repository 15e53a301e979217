#!/usr/bin/env bash
# The SAF Table-2-style comparison on the CPU: a 4-layer x 4-head x 128-wide model on the
# embedded KJV corpus (T = 256, 500 updates of 4096 tokens), trained once to update 250, then
# continued five ways from that checkpoint: ordinary attention, SAF 25%, SAF 50%, same-head
# pruning 25%, random heads 25%. About 8 minutes on 2 cores. Prints the table and writes
# OUT/table.md, OUT/results.json and one folder per branch (metrics, interventions/, final/).
# Usage: bash scripts/saf_table2_cpu.sh [out-dir] [section.key=value ...]   (each one becomes --set)
#        (default out-dir runs/saf_cpu_table2; e.g. 'experiment.seeds=[1337,1338,1339]')
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/saf_cpu_table2}
[ $# -gt 0 ] && shift
BUILD=${BUILD:-build}
[ -x "$BUILD/headwise" ] || bash scripts/setup.sh "$BUILD"
bash scripts/prepare_default_corpus.sh "$BUILD/headwise" data/kjv
# OpenMP threads that spin-wait steal the cores OpenBLAS needs between parallel regions.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$OUT"
sets=()
for s in "$@"; do sets+=(--set "$s"); done
"$BUILD/headwise" experiment --config configs/saf_cpu_table2.json --out "$OUT" "${sets[@]}"
