#!/usr/bin/env bash
# Converted models outside headwise (issue 56): the PyTorch model that headwise writes beside a
# mixed plan (python/headwise_hf) against headwise itself, through
# AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True) with HF_HUB_OFFLINE=1
# (tests/scripts/hf_remote_code.py):
#  - parity: GPT-2, Llama, Qwen2 and Qwen3 (transformers-made weights; each of the nine kinds
#    alone, and every kind mixed inside each layer of a 12-head GQA model) and GPT-2 with RoPE, GQA
#    and no biases: logits of a 2 x 150 batch (2 x 32 on the GPT-2 fixture) to 1e-5 of headwise's
#    fp32 forward and every gradient to 1e-4 of the largest (`headwise eval --dump`); in double on
#    both sides (--dump-precision fp64) logits to 1e-12 and each gradient to 1e-10 of its tensor;
#  - the folders headwise writes: model_type headwise with the repository's two Python files and
#    an auto_map for a mixed plan, the family's own type and no Python files for all-softmax;
#  - generation: model.generate (HeadwiseCache) gives headwise generate's greedy tokens (10-token
#    prompt, 40 new: rings of sink 1-3 + window 2-6 wrap many times; linear heads' state; static
#    groups' V only), the same as a full forward per token, and streaming groups keep S + W rows;
#  - a bf16 export loads in bfloat16 (head-kind values float32) near the fp32 model; window heads
#    through FlexAttention give the mask path's logits; an unknown head kind in config.json is one
#    ValueError naming it.
# torch + transformers come from VENV (scripts/python_env.sh, shared with the other cross-checks);
# a skip (77) only when the package index cannot be reached, a failure in CI mode (scripts/references.sh).
# Usage: test_hf_remote_code.sh path/to/headwise [VENV]   (default VENV: ~/.cache/headwise/pyvenv)
. "$(dirname "$0")/python_check.sh" "$1" "${2:-}"
P="$SRC/tests/scripts/hf_remote_code.py"
fail=0
"$PY" "$P" make "$TMP" > "$TMP/made.txt"
names=()
while read -r name t; do
  "$HW" export --checkpoint "$TMP/src/$name" --out "$TMP/dst/$name" > /dev/null
  for p in fp32 fp64; do
    "$HW" eval --checkpoint "$TMP/dst/$name" --data "$TMP/tokens.bin" --batches 1 --micro-batch 2 --seq-len "$t" \
      --dump "$TMP/dst/$name/hw_dump_$p.safetensors" --dump-precision "$p" > /dev/null
  done
  names+=("$name")
  mt=$("$PY" -c "import json, sys; print(json.load(open(sys.argv[1]))['model_type'])" "$TMP/dst/$name/config.json")
  if [ "${name#*_}" = softmax ]; then
    { [ "$mt" != headwise ] && [ ! -e "$TMP/dst/$name/modeling_headwise.py" ]; } ||
      { echo "FAIL: $name: an all-softmax plan must keep the family's type and no Python files"; fail=1; }
  else
    { [ "$mt" = headwise ] && cmp -s "$TMP/dst/$name/modeling_headwise.py" "$SRC/python/headwise_hf/modeling_headwise.py" &&
      cmp -s "$TMP/dst/$name/configuration_headwise.py" "$SRC/python/headwise_hf/configuration_headwise.py"; } ||
      { echo "FAIL: $name: model_type $mt, or its Python files are not python/headwise_hf's"; fail=1; }
  fi
done < <(grep -v _gen "$TMP/made.txt")
echo "ok: headwise wrote ${#names[@]} folders (mixed plans with python/headwise_hf's files, all-softmax as the family)"
if "$PY" "$P" parity "$TMP" "${names[@]}" > "$TMP/parity.log" 2>&1; then
  echo "ok: logits and gradients equal headwise's (fp32: 1e-5 / 1e-4; fp64: 1e-12 / 1e-10), every family and kind"
else
  echo "FAIL: parity"; fail=1
fi
tail -n 2 "$TMP/parity.log"

# Generation with the cache, past the rings' wrap; a bf16 export; FlexAttention; an unknown kind.
"$PY" -c "import sys; sys.path.insert(0, sys.argv[1]); import hf_remote_code as R
x, _ = R.first_batch(sys.argv[2], 1, 10); print(' '.join(map(str, x[0].tolist())))" "$SRC/tests/scripts" \
  "$TMP/tokens.bin" > "$TMP/prompt.txt"
for name in gpt2rope_gen llama_gen; do
  "$HW" export --checkpoint "$TMP/src/$name" --out "$TMP/dst/$name" > /dev/null
  "$HW" generate --checkpoint "$TMP/dst/$name" --prompt-tokens "$TMP/prompt.txt" --max-new 40 --temperature 0 \
    --ignore-eos > "$TMP/hw_$name.txt" 2> /dev/null
done
"$HW" export --checkpoint "$TMP/src/llama_mixed" --out "$TMP/dst/llama_mixed_bf16" --dtype bf16 > /dev/null
cp -r "$TMP/dst/qwen3_mixed" "$TMP/unknown"
if "$PY" "$P" rest "$TMP" > "$TMP/rest.log" 2>&1; then
  echo "ok: generation (greedy tokens = headwise generate's = a full forward's, rings of S + W), bf16, FlexAttention, unknown kind"
else echo "FAIL: generation, bf16, FlexAttention or the unknown kind"; fail=1; fi
grep '^{' "$TMP/rest.log"
[ $fail = 0 ] && echo "hf_remote_code: all passed"
exit $fail
