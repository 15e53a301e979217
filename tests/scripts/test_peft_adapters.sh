#!/usr/bin/env bash
# LoRA adapters with PEFT's names on a transformers-made Qwen2 model (issue 38):
#  - adapters headwise trained (train --init-from, model.lora.rank 4, freeze_base) load with
#    PeftModel.from_pretrained: PEFT's loss equals `headwise eval`'s, and the logits of
#    `headwise merge`'s checkpoint (opened by transformers) equal PEFT's (bounds below);
#  - adapters PEFT trained (get_peft_model, q/k/v/o_proj, save_pretrained) load in headwise: its
#    loss equals PEFT's;
#  - an adapter file with a renamed tensor or a B of the wrong rank: one error line, exit 1.
# torch, transformers and peft come from VENV (scripts/python_env.sh installs what is missing); a
# skip (77) only when the package index cannot be reached, a failure in CI mode (scripts/references.sh).
# Usage: test_peft_adapters.sh path/to/headwise [VENV]   (default VENV: ~/.cache/headwise/pyvenv)
. "$(dirname "$0")/python_check.sh" "$1" "${2:-}" "peft==0.21.2"
"$PY" -c "import peft" 2>/dev/null || { echo "FAIL: peft does not import from $VENV"; exit 1; }
"$PY" "$SRC/tests/scripts/hf_roundtrip.py" make "$TMP" 2>/dev/null
P="$SRC/tests/scripts/peft_adapters.py"
# Bounds, about 10x the largest measured on an AVX-512 machine / with OPENBLAS_CORETYPE=Haswell
# ATEN_CPU_CAPABILITY=avx2 (AVX2 kernels) (both were 1e-4): losses 9e-7 (headwise-trained
# adapters 3.1e-8 / 8.7e-8, PEFT-trained 7.5e-8 / 6.8e-8), merged logits 7e-5 (7.3e-6 / 4.3e-6).
LOSS_TOL=9e-7
LOGITS_TOL=7e-5
close() {  # close A B TOL WHAT: |A - B| < TOL
  "$PY" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) < $3 else 1)" "$1" "$2" ||
    { echo "FAIL: $4: $1 vs $2 (tolerance $3)"; exit 1; }
  echo "ok: $4: $1 vs $2"
}
hw_loss() { "$HW" eval --checkpoint "$1" --data "$TMP/tokens.bin" --batches 1 --micro-batch 2 --seq-len 24 | field loss; }
cat > "$TMP/run.json" <<JSON
{"train": {"micro_batch": 2, "seq_len": 24, "steps": 2, "lr": 0.05, "min_lr": 0.0, "warmup_steps": 0,
           "weight_decay": 0.0, "eval_every": 0},
 "data": {"train": "$TMP/tokens.bin", "shuffle": false}}
JSON
"$HW" train --config "$TMP/run.json" --out "$TMP/run" --init-from "$TMP/qwen2" --set model.lora.rank=4 \
  --set model.lora.freeze_base=true >/dev/null 2>&1
ck="$TMP/run/checkpoints/step_2"
grep -q '"base_model.model.model.layers.1.self_attn.o_proj.lora_B.weight"' "$ck/adapter_model.safetensors" ||
  { echo "FAIL: PEFT's Qwen2 names missing from $ck/adapter_model.safetensors"; exit 1; }
hw=$(hw_loss "$ck")
peft=$("$PY" "$P" load "$TMP/qwen2" "$ck" "$TMP/tokens.bin" 2 24 2>/dev/null | field loss)
close "$peft" "$hw" $LOSS_TOL "headwise-trained adapters: PeftModel.from_pretrained's loss vs headwise eval"
base=$("$PY" -c "import json; print(json.load(open('$TMP/qwen2/hf_loss.json'))['loss'])")
"$PY" -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-3 else 1)" "$hw" "$base" ||
  { echo "FAIL: headwise's trained adapters changed nothing ($hw vs the base's $base)"; exit 1; }
"$HW" merge --checkpoint "$ck" --out "$TMP/merged" >/dev/null
d=$("$PY" "$P" logits "$TMP/merged" "$TMP/tokens.bin" 2 24 "$ck/peft_logits.pt" 2>/dev/null | field max_abs_diff)
close "$d" 0 $LOGITS_TOL "headwise merge's logits (transformers) vs PEFT's, max |difference|"

peft=$("$PY" "$P" train "$TMP/qwen2" "$TMP/peft" "$TMP/tokens.bin" 2 24 4 2>/dev/null | field loss)
cp -r "$ck" "$TMP/from_peft"
cp "$TMP/peft/adapter_model.safetensors" "$TMP/from_peft/"
hw=$(hw_loss "$TMP/from_peft")
close "$hw" "$peft" $LOSS_TOL "PEFT-trained adapters: headwise eval vs PEFT's loss"
"$PY" -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-3 else 1)" "$hw" \
  "$(hw_loss "$ck")" || { echo "FAIL: the PEFT adapters changed nothing"; exit 1; }

for bad in rename reshape; do
  cp -r "$TMP/from_peft" "$TMP/$bad"
  name=$("$PY" "$P" $bad "$TMP/$bad" 2>/dev/null)
  set +e
  out=$("$HW" eval --checkpoint "$TMP/$bad" --data "$TMP/tokens.bin" --batches 1 --micro-batch 2 --seq-len 24 2>&1)
  rc=$?
  set -e
  n=$(grep -c '^error:' <<<"$out" || true)
  if [ $rc = 1 ] && [ "$n" = 1 ] && grep -q "$name" <<<"$out"; then echo "ok: $bad adapter: one error line naming $name"
  else echo "FAIL: $bad adapter: exit $rc, $n error lines: $out"; exit 1; fi
done
echo "peft_adapters: all passed"
