#!/usr/bin/env bash
# PEFT on converted models, both ways (issue 56), through the PyTorch model mixed-plan checkpoints
# carry (tests/scripts/peft_mixed.py): a Qwen2 (6 heads over 2 KV heads) and GPT-2 with mixed plans
# (softmax, linear, sink+window, static, window heads), HF_HUB_OFFLINE=1:
#  - PEFT -> headwise: adapters get_peft_model trained (r 16 / alpha 32 on q_proj and v_proj; r 8
#    with rank_pattern, alpha_pattern and use_rslora on q/k/v/o_proj; GPT-2's fused c_attn), their
#    two files copied beside the converted model: `headwise eval` gives PEFT's loss, `train
#    --init-from` starts from it, `merge` writes a model whose logits (PyTorch) are PEFT's;
#  - headwise -> PEFT: adapters `train --init-from --set model.lora.*` trained (Qwen2 q and v, GPT-2
#    q, v and o): PeftModel.from_pretrained and the model loaded with its adapters folded in give
#    headwise eval's loss;
#  - DoRA and an adapter on the MLP's gate_proj are one error line each.
# torch, transformers and peft come from VENV (scripts/python_env.sh); a skip (77) only when the
# package index cannot be reached, a failure in CI mode (scripts/references.sh).
# Usage: test_peft_mixed.sh path/to/headwise [VENV]   (default VENV: ~/.cache/headwise/pyvenv)
. "$(dirname "$0")/python_check.sh" "$1" "${2:-}" "peft==0.21.2"
"$PY" -c "import peft" 2>/dev/null || { echo "FAIL: peft does not import from $VENV"; exit 1; }
P="$SRC/tests/scripts/peft_mixed.py"
fail=0
close() {  # close A B WHAT: |A - B| <= 1e-5 |B|
  if "$PY" -c "import sys; a, b = map(float, sys.argv[1:3]); sys.exit(0 if abs(a - b) <= 1e-5 * abs(b) else 1)" "$1" "$2"
  then echo "ok: $3: $1 vs $2"; else echo "FAIL: $3: $1 vs $2"; fail=1; fi
}
hw_loss() { "$HW" eval --checkpoint "$1" --data "$TMP/tokens.bin" --batches 1 --micro-batch 2 --seq-len 24 | field loss; }
peft_loss() { "$PY" -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]['loss'])" "$TMP/peft.json" "$1"; }

"$PY" "$P" make "$TMP"
for m in qwen2 gpt2; do "$HW" export --checkpoint "$TMP/${m}_src" --out "$TMP/$m" > /dev/null; done
"$PY" "$P" peft "$TMP" > /dev/null 2> "$TMP/peft.err" || { tail -n 5 "$TMP/peft.err"; echo "FAIL: PEFT training"; exit 1; }

# PEFT -> headwise: the adapter directory's two files beside the converted model.
with_adapter() {  # with_adapter BASE ADAPTER OUT
  cp -r "$TMP/$1" "$TMP/$3"
  cp "$TMP/$2/adapter_config.json" "$TMP/$2/adapter_model.safetensors" "$TMP/$3/"
}
for a in a_qv a_pattern a_gpt2; do
  base=qwen2; [ $a = a_gpt2 ] && base=gpt2
  with_adapter $base $a "hw_$a"
  close "$(hw_loss "$TMP/hw_$a")" "$(peft_loss $a)" "$a (PEFT-trained) in headwise eval vs PEFT's loss"
  "$HW" merge --checkpoint "$TMP/hw_$a" --out "$TMP/merged_$a" > /dev/null
done
cat > "$TMP/run.json" <<JSON
{"train": {"micro_batch": 2, "seq_len": 24, "steps": 2, "lr": 0.02, "min_lr": 0.02, "warmup_steps": 0,
           "weight_decay": 0.0, "eval_every": 0, "log_every": 1},
 "data": {"train": "$TMP/tokens.bin", "shuffle": false}}
JSON
"$HW" train --config "$TMP/run.json" --out "$TMP/ft_qv" --init-from "$TMP/hw_a_qv" --set model.lora.freeze_base=true \
  > /dev/null 2>&1
first=$("$PY" -c "import json, sys; print(json.loads(open(sys.argv[1]).readline())['loss'])" "$TMP/ft_qv/metrics.jsonl")
close "$first" "$(peft_loss a_qv)" "train --init-from a PEFT adapter: its first step's loss vs PEFT's"

# headwise -> PEFT: adapters headwise trained on the converted models.
"$HW" train --config "$TMP/run.json" --out "$TMP/hwq" --init-from "$TMP/qwen2" --set model.lora.rank=4 \
  --set 'model.lora.targets=["q","v"]' --set model.lora.freeze_base=true --set train.lr=0.05 > /dev/null 2>&1
"$HW" train --config "$TMP/run.json" --out "$TMP/hwg" --init-from "$TMP/gpt2" --set model.lora.rank=2 \
  --set 'model.lora.targets=["q","v","o"]' --set model.lora.freeze_base=true --set train.lr=0.05 > /dev/null 2>&1
cp -r "$TMP/hwq/checkpoints/step_2" "$TMP/hw_qwen2_lora"
cp -r "$TMP/hwg/checkpoints/step_2" "$TMP/hw_gpt2_lora"
pairs=()
for ck in hw_qwen2_lora hw_gpt2_lora; do pairs+=("$ck=$(hw_loss "$TMP/$ck")"); done
for a in a_qv a_pattern a_gpt2; do pairs+=("merged:merged_$a=$a"); done
if "$PY" "$P" check "$TMP" "${pairs[@]}" 2> "$TMP/check.err"; then
  echo "ok: headwise's adapters in PEFT (PeftModel.from_pretrained, and folded at load) give headwise eval's loss; merged PEFT adapters give PEFT's logits"
else tail -n 5 "$TMP/check.err"; echo "FAIL: headwise adapters in PyTorch, or merged logits"; fail=1; fi

# What headwise cannot apply: one error line naming it.
for a in a_dora a_mlp; do
  with_adapter qwen2 $a "hw_$a"
  set +e
  out=$("$HW" eval --checkpoint "$TMP/hw_$a" --data "$TMP/tokens.bin" --batches 1 --micro-batch 2 --seq-len 24 2>&1)
  rc=$?
  set -e
  want="use_dora"; [ $a = a_mlp ] && want="model.layers.0.mlp.gate_proj"
  if [ $rc = 1 ] && [ "$(grep -c '^error:' <<<"$out")" = 1 ] && grep -q "$want" <<<"$out"; then
    echo "ok: $a: one error line naming $want"
  else echo "FAIL: $a: exit $rc: $out"; fail=1; fi
done
[ $fail = 0 ] && echo "peft_mixed: all passed"
exit $fail
