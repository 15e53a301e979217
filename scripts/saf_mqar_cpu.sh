#!/usr/bin/env bash
# MQAR comparison on the CPU (the paper's Appendix C.3.6 protocol, shrunk): adapt the final
# checkpoints of a finished saf_table2_cpu.sh run (ordinary, SAF 25%, same-head pruning 25% and,
# when the run has them, Gate-Taylor pruning 25%) on multi-query associative recall with the loss
# on query positions only, then report query accuracy for 4, 8 and 16 key-value pairs at a fixed
# length of 64 tokens (vocabulary 64, the byte model's 256 logits all compete in the argmax).
# Every seed_* folder of the run is one pretraining seed: the table gives, per pair count and
# model, the mean ± sample standard deviation over them (the paper: 3 seeds). About 2 minutes
# per model and seed on 2 cores.
# For the paper's rows (3 seeds, Gate-Taylor included) run the table first with
#   bash scripts/saf_table2_cpu.sh runs/saf_cpu_table2 'experiment.seeds=[1337,1338,1339]' \
#        'experiment.controls=["prune","random","gate_taylor"]'
# The paper's sizes (length 512, 8192 tokens, 8 pairs, 1,500 updates at lr 1e-4, 512 examples
# per pair count up to 64 pairs) are headwise mqar's defaults for a 124M checkpoint.
# Usage: bash scripts/saf_mqar_cpu.sh [table2-dir] [out-dir]
#        (defaults runs/saf_cpu_table2 and runs/saf_mqar_cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
T2=${1:-runs/saf_cpu_table2}
OUT=${2:-runs/saf_mqar_cpu}
BUILD=${BUILD:-build}
SEED_DIRS=$(ls -d "$T2"/seed_* 2>/dev/null || true)
[ -n "$SEED_DIRS" ] || { echo "saf_mqar_cpu: no $T2/seed_*: run scripts/saf_table2_cpu.sh first" >&2; exit 1; }
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$OUT"
mkdir -p "$OUT"
BRANCHES="ordinary saf_25 prune_25 gate_taylor_25"
for seed_dir in $SEED_DIRS; do
  seed=$(basename "$seed_dir")
  for branch in $BRANCHES; do
    [ -d "$seed_dir/$branch/final" ] || { echo "saf_mqar_cpu: $seed has no $branch (skipped)" >&2; continue; }
    "$BUILD/headwise" mqar --checkpoint "$seed_dir/$branch/final" --out "$OUT/$seed/$branch" --label "$branch" \
      --vocab 64 --seq-len 64 --train-pairs 4 --eval-pairs 4,8,16 --steps 1000 --batch 32 --lr 2e-3 \
      --eval-examples 128 --log-every 250
  done
done
# One table: accuracy (%) per pair count, one column per model, mean ± std over seeds.
python3 - "$OUT" $BRANCHES <<'PY' | tee "$OUT/table.md"
import json, os, statistics, sys
out, names = sys.argv[1], sys.argv[2:]
seeds = sorted(d for d in os.listdir(out) if d.startswith("seed_"))
runs = {n: [json.load(open(f"{out}/{s}/{n}/mqar.json")) for s in seeds if os.path.exists(f"{out}/{s}/{n}/mqar.json")]
        for n in names}
names = [n for n in names if runs[n]]
pairs = [a["pairs"] for a in runs[names[0]][0]["accuracy"]]
def cell(vals):
    m = statistics.mean(vals)
    return f"{m:.2f} ± {statistics.stdev(vals):.2f}" if len(vals) > 1 else f"{m:.2f}"
print(f"MQAR query accuracy (%), mean ± std over {len(seeds)} pretraining seed(s): {', '.join(seeds)}")
print()
print("| Pairs | " + " | ".join(names) + " |")
print("|---" * (len(names) + 1) + "|")
for i, p in enumerate(pairs):
    print(f"| {p} | " + " | ".join(cell([100 * r["accuracy"][i]["accuracy"] for r in runs[n]]) for n in names) + " |")
PY
