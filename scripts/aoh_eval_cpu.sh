#!/usr/bin/env bash
# AoH evaluation at CPU scale (issue 17 item 5), one table in the paper's style:
#   quality retention vs sparsity S in {0.25, 0.5, 0.75}, for AoH's spectrum choice and for a
#   random choice of the same number of KV heads (the control: does the spectrum matter?):
#   - language modelling: PPL retention = 100 x PPL(all softmax) / PPL(converted) on the corpus'
#     validation shards (a model trained on the embedded corpus);
#   - retrieval: MQAR accuracy retention = 100 x acc(converted) / acc(all softmax) for a model
#     trained from scratch on MQAR (Zoology's task: vocabulary 8192, length 64; a 2 x 4 x 128
#     model, 3,000 updates of 64 on 8 pairs at lr 1e-3 after a 100-update warm-up, weight decay 0.1,
#     residual projections initialised without GPT-2's 1/sqrt(2 n_layer): without the warm-up
#     or with that scaling it stays on the recall plateau), no further training after the
#     conversion;
#   - prefill and decode latency change and KV-cache memory change of cached decoding at the
#     model's context (headwise bench-infer, same weights, all-softmax vs the converted plan).
# Usage: bash scripts/aoh_eval_cpu.sh [OUT=runs/aoh_eval_cpu] [LM_CKPT]
#   LM_CKPT: a checkpoint trained on the corpus (default: train configs/default_cpu.json, ~4 min).
# Environment: BUILD (default build), RANDOM_SEEDS (default "1 2 3"; the random rows average them),
#   SINK/WINDOW for the LM (default 4/32 at the default context 128), MQAR_SINK/MQAR_WINDOW
#   (default 4/16 at MQAR length 64), MQAR_STEPS (default 3000), MQAR_TRAIN_PAIRS (default 8),
#   MQAR_EVAL_PAIRS (default 4,8,16); for quick checks (the reproduction
#   script's --smoke): MQAR_EXAMPLES (default 256 per pair count), MQAR_SETS (extra --set arguments
#   for the MQAR model's config, e.g. a smaller shape), BENCH_RUNS (default "2 5 10 40": prefill
#   warm-up and timed runs, decode warm-up and timed runs).
# Writes OUT/table.md and OUT/table.json; every run's own output stays under OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/aoh_eval_cpu}
LM_CKPT=${2:-}
BUILD=${BUILD:-build}
HW="$BUILD/headwise"
SEEDS=${RANDOM_SEEDS:-1 2 3}
SINK=${SINK:-4}
WINDOW=${WINDOW:-32}
MQAR_SINK=${MQAR_SINK:-4}
MQAR_WINDOW=${MQAR_WINDOW:-16}
MQAR_STEPS=${MQAR_STEPS:-3000}
MQAR_TRAIN_PAIRS=${MQAR_TRAIN_PAIRS:-8}
MQAR_EVAL_PAIRS=${MQAR_EVAL_PAIRS:-4,8,16}
MQAR_EXAMPLES=${MQAR_EXAMPLES:-256}
read -ra MQAR_SETS <<< "${MQAR_SETS:-}"
read -r PW PR DW DR <<< "${BENCH_RUNS:-2 5 10 40}"
SPARSITIES="0.25 0.5 0.75"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
[ -x "$HW" ] || { echo "aoh_eval_cpu: $HW not found (build first: bash scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$OUT"

say() { echo "aoh_eval_cpu: $*"; }

# 1. The language model.
if [ -z "$LM_CKPT" ]; then
  bash scripts/prepare_default_corpus.sh "$HW" data/kjv
  if [ ! -f "$OUT/lm/checkpoints/step_300/model.safetensors" ]; then
    say "training the corpus model (configs/default_cpu.json)"
    "$HW" train --config configs/default_cpu.json --out "$OUT/lm" --set train.checkpoint_every=300 >"$OUT/lm.log" 2>&1
  fi
  LM_CKPT="$OUT/lm/checkpoints/step_300"
fi
CONTEXT=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['n_positions'])" "$LM_CKPT/config.json")
VAL=${VAL:-data/kjv/val_*.bin}

# 2. The MQAR model: trained from scratch on MQAR, saved.
MQAR_MODEL=(--set model.n_layer=2 --set model.n_head=4 --set model.n_embd=128 --set model.block_size=64
            --set model.vocab_size=8192 --set model.init_residual_scale=false --set train.seq_len=64)
MQAR_OPTS=(--vocab 8192 --seq-len 64 --train-pairs "$MQAR_TRAIN_PAIRS" --eval-pairs "$MQAR_EVAL_PAIRS"
           --eval-examples "$MQAR_EXAMPLES" --log-every 250)
if [ ! -f "$OUT/mqar_base/adapted/model.safetensors" ]; then
  say "training the MQAR model ($MQAR_STEPS updates)"
  "$HW" mqar --config configs/default_cpu.json "${MQAR_MODEL[@]}" "${MQAR_SETS[@]}" --out "$OUT/mqar_base" \
    --label softmax "${MQAR_OPTS[@]}" --steps "$MQAR_STEPS" --batch 64 --lr 1e-3 --warmup-steps 100 \
    --weight-decay 0.1 --save-checkpoint >"$OUT/mqar_base.log" 2>&1
fi
MQAR_CKPT="$OUT/mqar_base/adapted"

eval_ppl() { "$HW" eval --checkpoint "$1" --data "$VAL" --batches 16 --micro-batch 8 | tail -n 1; }
mqar_eval() { "$HW" mqar --checkpoint "$1" --out "$2" --label "$3" "${MQAR_OPTS[@]}" --steps 0 >"$2.log" 2>&1; }

eval_ppl "$LM_CKPT" >"$OUT/lm_softmax.eval.json"
mqar_eval "$MQAR_CKPT" "$OUT/mqar_softmax" softmax

# 3. Every (S, selection[, seed]) conversion of both models, evaluated.
for S in $SPARSITIES; do
  for sel in spectrum $(for s in $SEEDS; do echo "random$s"; done); do
    name="S${S}_${sel}"
    sets=(--set "method.sparsity=$S")
    if [ "$sel" != spectrum ]; then sets+=(--set method.selection=random --set "method.seed=${sel#random}"); fi
    say "$name"
    "$HW" convert --checkpoint "$LM_CKPT" --out "$OUT/lm_$name" --method aoh "${sets[@]}" \
      --set "method.sink=$SINK" --set "method.window=$WINDOW" >"$OUT/lm_$name.convert.log" 2>&1
    eval_ppl "$OUT/lm_$name" >"$OUT/lm_$name.eval.json"
    "$HW" bench-infer --checkpoint "$LM_CKPT" --context "$CONTEXT" --plan-from "$OUT/lm_$name" \
      --prefill-warmup "$PW" --prefill-runs "$PR" --decode-warmup "$DW" --decode-runs "$DR" 2>/dev/null | tail -n 1 \
      >"$OUT/lm_$name.bench.json"
    "$HW" convert --checkpoint "$MQAR_CKPT" --out "$OUT/mqar_$name.ckpt" --method aoh "${sets[@]}" \
      --set "method.sink=$MQAR_SINK" --set "method.window=$MQAR_WINDOW" >"$OUT/mqar_$name.convert.log" 2>&1
    mqar_eval "$OUT/mqar_$name.ckpt" "$OUT/mqar_$name" "$name"
  done
done

# 4. The table.
python3 - "$OUT" "$SPARSITIES" "$SEEDS" "$CONTEXT" "$MQAR_EVAL_PAIRS" <<'PY'
import json, math, statistics, sys
out, sparsities, seeds, context = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4]
eval_pairs = sys.argv[5].replace(",", ", ")
load = lambda p: json.load(open(p))
base_ppl = load(f"{out}/lm_softmax.eval.json")["ppl"]
base_acc = statistics.mean(a["accuracy"] for a in load(f"{out}/mqar_softmax/mqar.json")["accuracy"])

def row(name):
    ppl = load(f"{out}/lm_{name}.eval.json")["ppl"]
    acc = statistics.mean(a["accuracy"] for a in load(f"{out}/mqar_{name}/mqar.json")["accuracy"])
    b = load(f"{out}/lm_{name}.bench.json")
    return {"ppl": ppl, "ppl_retention": 100 * base_ppl / ppl, "mqar_accuracy": acc,
            "mqar_retention": 100 * acc / base_acc if base_acc > 0 else float("nan"),
            "prefill_change": 100 * (b["prefill_ratio"] - 1), "decode_change": 100 * (b["decode_ratio"] - 1),
            "kv_change": 100 * (b["kv_bytes_ratio"] - 1)}

rows = []
for S in sparsities:
    rows.append({"S": float(S), "selection": "AoH spectrum", **row(f"S{S}_spectrum")})
    rs = [row(f"S{S}_random{s}") for s in seeds]
    # Plain arithmetic: statistics' exact fractions reject NaN (MQAR retention of a model with
    # zero base accuracy, as in a smoke run).
    mean = {k: sum(r[k] for r in rs) / len(rs) for k in rs[0]}
    sd = {k: math.sqrt(sum((r[k] - mean[k]) ** 2 for r in rs) / (len(rs) - 1)) if len(rs) > 1 else 0.0
          for k in rs[0]}
    rows.append({"S": float(S), "selection": f"random ({len(rs)} seeds)", **mean,
                 "sd": {k: sd[k] for k in ("ppl_retention", "mqar_retention")}})
json.dump({"base_ppl": base_ppl, "base_mqar_accuracy": base_acc, "context": int(context), "rows": rows},
          open(f"{out}/table.json", "w"), indent=2)
lines = [f"AoH at CPU scale: all-softmax PPL {base_ppl:.3f}, MQAR accuracy {100 * base_acc:.1f}% "
         f"(mean over {eval_pairs} pairs); latency and KV at context {context}.", "",
         "| S | choice | PPL retention % | MQAR retention % | prefill change % | decode change % | KV memory change % |",
         "|---|---|---|---|---|---|---|"]
for r in rows:
    pm = f" +- {r['sd']['ppl_retention']:.2f}" if "sd" in r else ""
    mm = f" +- {r['sd']['mqar_retention']:.2f}" if "sd" in r else ""
    lines.append(f"| {r['S']:.2f} | {r['selection']} | {r['ppl_retention']:.2f}{pm} | {r['mqar_retention']:.2f}{mm} | "
                 f"{r['prefill_change']:+.1f} | {r['decode_change']:+.1f} | {r['kv_change']:+.1f} |")
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
