#!/usr/bin/env bash
# MQAR comparison on the CPU (the paper's Appendix C.3.6 protocol, shrunk): adapt the final
# checkpoints of a finished saf_table2_cpu.sh run (ordinary, SAF 25%, same-head pruning 25%) on
# multi-query associative recall with the loss on query positions only, then report query
# accuracy for 4, 8 and 16 key-value pairs at a fixed length of 64 tokens (vocabulary 64, the
# byte model's 256 logits all compete in the argmax). About 2 minutes per model on 2 cores (6 in all).
# The paper's sizes (length 512, 8192 tokens, 8 pairs, 1,500 updates at lr 1e-4, 512 examples
# per pair count up to 64 pairs) are headwise mqar's defaults for a 124M checkpoint.
# Usage: bash scripts/saf_mqar_cpu.sh [table2-dir] [out-dir]
#        (defaults runs/saf_cpu_table2 and runs/saf_mqar_cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
T2=${1:-runs/saf_cpu_table2}
OUT=${2:-runs/saf_mqar_cpu}
BUILD=${BUILD:-build}
SEED_DIR=$(ls -d "$T2"/seed_* 2>/dev/null | head -n 1 || true)
[ -n "$SEED_DIR" ] || { echo "saf_mqar_cpu: no $T2/seed_*: run scripts/saf_table2_cpu.sh first" >&2; exit 1; }
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$OUT"
mkdir -p "$OUT"
for branch in ordinary saf_25 prune_25; do
  "$BUILD/headwise" mqar --checkpoint "$SEED_DIR/$branch/final" --out "$OUT/$branch" --label "$branch" \
    --vocab 64 --seq-len 64 --train-pairs 4 --eval-pairs 4,8,16 --steps 1000 --batch 32 --lr 2e-3 \
    --eval-examples 128 --log-every 250
done
# One table: accuracy (%) per pair count, one column per model.
python3 - "$OUT" ordinary saf_25 prune_25 <<'PY' | tee "$OUT/table.md"
import json, sys
out, names = sys.argv[1], sys.argv[2:]
runs = {n: json.load(open(f"{out}/{n}/mqar.json")) for n in names}
pairs = [a["pairs"] for a in runs[names[0]]["accuracy"]]
print("| Pairs | " + " | ".join(names) + " |")
print("|---" * (len(names) + 1) + "|")
for i, p in enumerate(pairs):
    print(f"| {p} | " + " | ".join(f"{100 * runs[n]['accuracy'][i]['accuracy']:.2f}" for n in names) + " |")
PY
