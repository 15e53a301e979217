#!/usr/bin/env bash
# transformers <-> headwise for Llama, Qwen2 and Qwen3 (float32, float16 and bfloat16 shards):
# transformers writes, `headwise eval` gives transformers' loss; `headwise train --init-from`
# (lr 1e-30: the weights stay) writes its checkpoint, AutoModelForCausalLM reads it and gives headwise's loss.
# torch + transformers come from the virtual environment VENV (scripts/python_env.sh, shared
# with the other cross-checks); a skip (77) only when the package index cannot be reached, a
# failure in CI mode (scripts/references.sh).
# Usage: test_hf_roundtrip.sh path/to/headwise [VENV]   (default VENV: ~/.cache/headwise/pyvenv)
. "$(dirname "$0")/python_check.sh" "$1" "${2:-}"
"$PY" "$SRC/tests/scripts/hf_roundtrip.py" make "$TMP" 2>/dev/null
# |headwise - transformers| of the losses, at most 1.5e-5: about 10x the largest measured on an
# AVX-512 machine / with OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 (AVX2 kernels):
# llama 8.2e-8 / 8.5e-8, qwen2 (fp16) 2.8e-7 / 3.0e-7, qwen3 (bf16) 1.33e-6 / 1.13e-6 (was 1e-4).
TOL=1.5e-5
close() {  # close A B WHAT: |A - B| < TOL
  "$PY" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) < $TOL else 1)" "$1" "$2" ||
    { echo "FAIL: $3: $1 vs $2 (tolerance $TOL)"; exit 1; }
  echo "ok: $3: $1 vs $2"
}
cat > "$TMP/run.json" <<JSON
{"train": {"micro_batch": 2, "seq_len": 24, "total_batch_tokens": 48, "steps": 1, "lr": 1e-30, "min_lr": 0.0,
           "warmup_steps": 0, "weight_decay": 0.0, "eval_every": 0},
 "data": {"train": "$TMP/tokens.bin", "val": "$TMP/tokens.bin", "shuffle": false}}
JSON
for fam in llama qwen2 qwen3; do
  hf=$("$PY" -c "import json; print(json.load(open('$TMP/$fam/hf_loss.json'))['loss'])")
  hw=$("$HW" eval --checkpoint "$TMP/$fam" --data "$TMP/tokens.bin" --batches 1 --micro-batch 2 --seq-len 24 | field loss)
  close "$hw" "$hf" "$fam: transformers wrote, headwise eval"
  "$HW" train --config "$TMP/run.json" --out "$TMP/run_$fam" --init-from "$TMP/$fam" >/dev/null 2>&1
  ck="$TMP/run_$fam/checkpoints/step_1"
  hw2=$("$HW" eval --checkpoint "$ck" --data "$TMP/tokens.bin" --batches 1 --micro-batch 2 --seq-len 24 | field loss)
  hf2=$("$PY" "$SRC/tests/scripts/hf_roundtrip.py" loss "$ck" "$TMP/tokens.bin" 2 24 2>/dev/null | field loss)
  close "$hf2" "$hw2" "$fam: headwise wrote, transformers AutoModelForCausalLM"
  # The same weights in headwise both times: the same loss bit for bit.
  [ "$hw2" = "$hw" ] || { echo "FAIL: $fam: the written checkpoint is not the read one: $hw2 vs $hw"; exit 1; }
  echo "ok: $fam: the written checkpoint is the read one: $hw2"
done
echo "hf_roundtrip: all passed"
