#!/usr/bin/env bash
# OAL evaluation at CPU scale (issue 19 item 6) on a model trained on the embedded corpus:
#   Table 1, Table 2 and Fig. 2 from `headwise oal-tables` (calibration windows from the training
#   shards, held-out windows from the validation shards), and Table 3: PPL after conversion and
#   the same LoRA fine-tuning for OAL (bootstrap grouping), the learned global kernel (fixed:1),
#   with BASELINES=1 the baselines Performer, DiJiang and TaylorShift (method.kernel: the same
#   layers become that head kind, uncalibrated, with the same adapters), and the softmax + LoRA reference
#   (configs/oal_cpu*.json), each the best checkpoint by val loss.
# Usage: bash scripts/oal_eval_cpu.sh [OUT=runs/oal_eval_cpu] [LM_CKPT]
#   LM_CKPT: an all-softmax checkpoint of configs/default_cpu.json's shape (default: train it, ~4 min).
# Environment: BUILD (default build), STEPS (fine-tuning updates, default 100), DRAWS (Table 1's
#   random-dimension draws, default 100), BASELINES (1: add Table 3's performer, dijiang and
#   taylorshift rows, ~13 min more on 2 busy cores, performer ~9 of them; default 0 keeps the
#   script's runtime), EXTRA_RUNS: more Table 3 rows as "label:--set k=v ..." entries separated
#   by ';', run like the OAL row; TABLES_ARGS: more oal-tables options; FT_SETS: more --set
#   arguments of every fine-tuning run; CONVERT_SETS: more --set arguments of the converting runs
#   only (method.* keys). The reproduction harness (scripts/reproduce/oal.sh) shrinks the
#   protocol through these.
# Writes OUT/tables.md (all four), OUT/table3.csv, OUT/tables/*.csv, and OUT/fig2.png when
# Debian's python3-matplotlib is installed (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/oal_eval_cpu}
LM_CKPT=${2:-}
BUILD=${BUILD:-build}
HW="$BUILD/headwise"
STEPS=${STEPS:-100}
DRAWS=${DRAWS:-100}
BASELINES=${BASELINES:-0}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
[ -x "$HW" ] || { echo "oal_eval_cpu: $HW not found (build first: bash scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$OUT"
say() { echo "oal_eval_cpu: $*"; }
T0=$(date +%s)

bash scripts/prepare_default_corpus.sh "$HW" data/kjv
if [ -z "$LM_CKPT" ]; then
  if [ ! -f "$OUT/lm/checkpoints/step_300/model.safetensors" ]; then
    say "training the corpus model (configs/default_cpu.json)"
    "$HW" train --config configs/default_cpu.json --out "$OUT/lm" --set train.checkpoint_every=300 >"$OUT/lm.log" 2>&1
  fi
  LM_CKPT="$OUT/lm/checkpoints/step_300"
fi

say "Tables 1, 2 and Fig. 2 (oal-tables on $LM_CKPT)"
T1=$(date +%s)
"$HW" oal-tables --checkpoint "$LM_CKPT" --data "data/kjv/train_*.bin" --eval-data "data/kjv/val_*.bin" \
  --out "$OUT/tables" --set method.layers=1-2 --random-draws "$DRAWS" ${TABLES_ARGS:-} >"$OUT/tables.log" 2>&1
say "  oal-tables: $(( $(date +%s) - T1 )) s"

# Table 3: conversion + fine-tuning runs; PPL = exp(best val loss) on the second half of data.val.
RUNS="oal:;global:--set method.grouping=fixed:1"
if [ "$BASELINES" = 1 ]; then
  for k in performer dijiang taylorshift; do RUNS="$RUNS;$k:--set method.kernel=$k"; done
fi
RUNS="$RUNS${EXTRA_RUNS:+;$EXTRA_RUNS}"
finetune() {  # label config extra-args...
  local label=$1 cfg=$2
  shift 2
  say "Table 3: $label ($STEPS updates)"
  local t=$(date +%s)
  rm -rf "$OUT/ft_$label"
  "$HW" train --config "$cfg" --out "$OUT/ft_$label" --init-from "$LM_CKPT" --set train.steps="$STEPS" \
    --set train.warmup_steps=$(( (STEPS * 5 + 99) / 100 )) ${FT_SETS:-} "$@" >"$OUT/ft_$label.log" 2>&1
  say "  $label: $(( $(date +%s) - t )) s"
}
finetune softmax_lora configs/oal_cpu_softmax_lora.json
IFS=';' read -ra ENTRIES <<<"$RUNS"
LABELS="softmax_lora"
for e in "${ENTRIES[@]}"; do
  label=${e%%:*}
  args=${e#*:}
  # shellcheck disable=SC2086
  finetune "$label" configs/oal_cpu.json ${CONVERT_SETS:-} $args
  LABELS="$LABELS $label"
done

# Debian's python (with python3-matplotlib, installed by scripts/setup.sh), without the user site.
/usr/bin/python3 -s - "$OUT" $LABELS <<'PY'
import json, math, sys
out, labels = sys.argv[1], sys.argv[2:]
rows = []
for label in labels:
    s = json.load(open(f"{out}/ft_{label}/summary.json"))
    best = s["best"]
    rows.append((label, math.exp(best["val_loss"]), best["step"], math.exp(s["val_loss"])))
with open(f"{out}/table3.csv", "w") as f:
    f.write("method,ppl_best,best_step,ppl_last\n")
    for r in rows:
        f.write("%s,%.6g,%d,%.6g\n" % r)
md = open(f"{out}/tables/tables.md").read()
md += "\n### Table 3: PPL after conversion and LoRA fine-tuning (best checkpoint by val loss)\n\n"
md += "| method | PPL (best) | best at update | PPL (last) |\n|---|---|---|---|\n"
for r in rows:
    md += "| %s | %.3f | %d | %.3f |\n" % r
open(f"{out}/tables.md", "w").write(md)
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig2 = json.load(open(f"{out}/tables/tables.json"))["fig2"]
    G = [r["G"] for r in fig2]
    ax = plt.figure(figsize=(5, 3.5)).add_subplot(111)
    ax.plot(G, [r["heldout_mse"] for r in fig2], "o-", label="held-out MSE")
    ax.set_xlabel("fixed group count G"); ax.set_ylabel("attention-output MSE")
    ax2 = ax.twinx(); ax2.bar(G, [r["params_per_head"] for r in fig2], alpha=0.25); ax2.set_ylabel("parameters per head")
    plt.tight_layout(); plt.savefig(f"{out}/fig2.png", dpi=120)
except ImportError:
    print("oal_eval_cpu: no matplotlib, fig2.png skipped (fig2.csv has the data)")
PY
cat "$OUT/tables.md"
say "done in $(( $(date +%s) - T0 )) s"
