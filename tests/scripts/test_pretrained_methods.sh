#!/usr/bin/env bash
# The methods on transformers-made Llama, Qwen2 and Qwen3 models (issue 38), each against a
# reference computed here with torch/transformers (tests/scripts/pretrained_methods.py):
#  - AoH: `headwise heads` effective ranks equal a full float64 SVD of W_K^T W_Q per query head;
#  - SAF zero-shot: `convert --method saf --calib` (variance and forward-KL selectors) picks the
#    heads a direct computation of the statistic on transformers' attention probabilities picks;
#  - OAL: on a head with planted outlier q/k dimensions, the calibrated L's held-out RelMSE is
#    below its Taylor initialisation's.
#  - every method's converted checkpoint (SAF static heads, AAH window heads, AoH sink+window
#    heads, OAL linear heads): `headwise eval`'s loss equals a dense float64 forward of the same
#    plan written in pretrained_methods.py from the definitions (6e-7 relative);
#  - checkpoint types: a mixed plan is model_type "headwise", which transformers refuses, and
#    `headwise merge` writes it back with the same loss bit for bit; an all-softmax conversion
#    keeps the family's type and opens in transformers with headwise's loss.
# torch + transformers come from VENV (scripts/python_env.sh); a skip (77) only when the package
# index cannot be reached, a failure in CI mode (scripts/references.sh).
# Usage: test_pretrained_methods.sh path/to/headwise [VENV]   (default VENV: ~/.cache/headwise/pyvenv)
. "$(dirname "$0")/python_check.sh" "$1" "${2:-}"
"$PY" "$SRC/tests/scripts/hf_roundtrip.py" make "$TMP" 2>/dev/null
declare -A loss
dense=()
types=()
fail=0
for fam in llama qwen2 qwen3; do
  "$HW" heads --checkpoint "$TMP/$fam" --json "$TMP/heads_$fam.json" >/dev/null
  if "$PY" "$SRC/tests/scripts/pretrained_methods.py" aoh "$TMP/$fam" "$TMP/heads_$fam.json" 2>/dev/null; then
    echo "ok: $fam: AoH effective ranks equal a full SVD"
  else echo "FAIL: $fam: AoH effective ranks"; fail=1; fi
  for sel in variance kl; do
    out="$TMP/saf_${fam}_$sel"
    "$HW" convert --checkpoint "$TMP/$fam" --out "$out" --method saf --calib "$TMP/tokens.bin" \
      --seq-len 24 --set method.selector=$sel --set method.ratio=0.25 --set method.calib_seqs=6 \
      --set method.fit_steps=30 --set method.max_kl=1e9 >/dev/null
    if "$PY" "$SRC/tests/scripts/pretrained_methods.py" saf "$TMP/$fam" "$out/convert.json" "$TMP/tokens.bin" 2>/dev/null; then
      echo "ok: $fam: SAF $sel selection equals the directly computed statistic's"
    else echo "FAIL: $fam: SAF $sel selection"; fail=1; fi
  done
  "$PY" "$SRC/tests/scripts/pretrained_methods.py" outliers "$TMP/$fam" "$TMP/outliers_$fam" 2>/dev/null
  "$HW" convert --checkpoint "$TMP/outliers_$fam" --out "$TMP/oal_$fam" --method oal --calib "$TMP/tokens.bin" \
    --seq-len 24 --set method.layers=0 --set method.stats_prompts=8 --set method.fit_seqs=4 --set method.val_seqs=2 \
    >/dev/null 2>&1
  if "$PY" "$SRC/tests/scripts/pretrained_methods.py" oal "$TMP/oal_$fam/convert.json"; then
    echo "ok: $fam: OAL's L beats its Taylor initialisation on the outlier head"
  else echo "FAIL: $fam: OAL on the outlier head"; fail=1; fi
  # Window (AAH with a fixed window), sink+window (AoH) and all-softmax (AoH, sparsity 0) plans.
  "$HW" convert --checkpoint "$TMP/$fam" --out "$TMP/aah_$fam" --method aah \
    --set method.ablation=fixed_window:5 --set method.warmup_steps=0 >/dev/null
  "$HW" convert --checkpoint "$TMP/$fam" --out "$TMP/aoh_$fam" --method aoh \
    --set method.sparsity=0.5 --set method.sink=2 --set method.window=4 >/dev/null
  "$HW" convert --checkpoint "$TMP/$fam" --out "$TMP/plain_$fam" --method aoh --set method.sparsity=0 \
    --set method.sink=2 --set method.window=4 >/dev/null
  "$HW" merge --checkpoint "$TMP/oal_$fam" --out "$TMP/oalm_$fam" >/dev/null
  for ck in saf_${fam}_variance aah_$fam aoh_$fam oal_$fam oalm_$fam plain_$fam; do
    loss[$ck]=$("$HW" eval --checkpoint "$TMP/$ck" --data "$TMP/tokens.bin" --batches 1 --micro-batch 2 --seq-len 24 | field loss)
  done
  for ck in saf_${fam}_variance aah_$fam aoh_$fam oal_$fam; do dense+=("$TMP/$ck=${loss[$ck]}"); done
  for ck in aoh_$fam oal_$fam oalm_$fam plain_$fam; do types+=("$TMP/$ck=${loss[$ck]}"); done
  if [ "${loss[oalm_$fam]}" = "${loss[oal_$fam]}" ]; then echo "ok: $fam: merge wrote the mixed checkpoint back: same loss bit for bit"
  else echo "FAIL: $fam: merge of the OAL checkpoint: ${loss[oalm_$fam]} vs ${loss[oal_$fam]}"; fail=1; fi
done
# One Python process for every family's checkpoints (torch's start-up is most of the time).
if "$PY" "$SRC/tests/scripts/pretrained_methods.py" dense "$TMP/tokens.bin" 2 24 "${dense[@]}"; then
  echo "ok: SAF, AAH, AoH and OAL conversions' losses equal a dense float64 forward of their plans"
else echo "FAIL: converted losses against the dense float64 forward"; fail=1; fi
if "$PY" "$SRC/tests/scripts/pretrained_methods.py" hftype "$TMP/tokens.bin" 2 24 "${types[@]}" 2>/dev/null; then
  echo "ok: transformers refuses the mixed plans (AoH, OAL, merged OAL), opens the all-softmax one with headwise's loss"
else echo "FAIL: checkpoint model types"; fail=1; fi
[ $fail = 0 ] && echo "pretrained_methods: all passed"
exit $fail
