#!/usr/bin/env bash
# headwise eval-tasks / eval --text against lm-evaluation-harness (`--model hf`) on one all-softmax
# checkpoint (trained here for a few updates on KJV text with the GPT-2-style fixture tokenizer),
# and on the same weights fine-tuned with a mixed plan (static, linear, sink+window and window heads,
# which the harness runs through the checkpoint's own PyTorch model, trust_remote_code), and
# the committed task files of every supported format (tests/fixtures/eval/): every example's
# log-likelihoods (2e-6 relative; the mixed plan 2.5e-4), acc and acc_norm (exactly), word/byte
# perplexity and bits per byte (2e-6 relative; eval_harness_compare.py); prints the table and both
# tools' examples/s.
# Installs lm_eval[hf] (transformers, torch) into VENV through scripts/python_env.sh (shared with
# the other cross-checks, kept between runs); a skip (77) only when the package index cannot be
# reached, a failure in CI mode (scripts/references.sh).
# Usage: test_eval_harness.sh path/to/headwise VENV [THREADS]
set -euo pipefail
HEADWISE=$1
VENV=$2
THREADS=${3:-2}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
FIX=$SRC/tests/fixtures/eval
# transformers pinned as the other cross-checks pin it: lm_eval alone pulled the newest, and a
# concurrent ctest job (scripts:hf_roundtrip) then swapped in 5.24.0 while this one imported it
# ("No module named 'transformers.utils'", a fresh-clone CI run of 2026-12-03).
. "$SRC/scripts/references.sh"
python_reference "$VENV" torch "lm_eval[hf]==0.4.13" "transformers==5.24.0"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export HF_HOME=$TMP/hf

# The checkpoint: KJV Genesis when bible-kjv is installed, else the committed texts repeated.
if command -v bible >/dev/null; then
  env -u COLUMNS bible -f Gen1:1-Gen50:26 >"$TMP/corpus.txt"
else
  for _ in $(seq 40); do cat "$FIX/text_a.txt" "$FIX/text_b.txt"; done >"$TMP/corpus.txt"
fi
"$HEADWISE" prepare --input "$TMP/corpus.txt" --output "$TMP/data" --tokenizer "$SRC/tests/fixtures/tokenizers/gpt2_style.json" \
  --val-fraction 0.05 >/dev/null 2>&1
cat >"$TMP/cfg.json" <<CFG
{"model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64, "vocab_size": 3328},
 "train": {"micro_batch": 8, "seq_len": 64, "steps": 80, "lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 5,
           "eval_every": 80, "eval_batches": 2, "log_every": 40, "threads": $THREADS},
 "data": {"train": "$TMP/data/train_*.bin", "val": "$TMP/data/val_*.bin"}}
CFG
"$HEADWISE" train --config "$TMP/cfg.json" --out "$TMP/run" >/dev/null 2>&1
CKPT=$TMP/run/checkpoints/step_80

declare -A FILE=([generic]=generic [hellaswag]=hellaswag [piqa]=piqa [arc]=arc_easy [boolq]=boolq [sst2]=sst2
                 [winogrande]=winogrande [mmlu]=mmlu)
HW_ARGS=() LM_ARGS=()
for fmt in generic hellaswag piqa arc boolq sst2 winogrande mmlu; do
  HW_ARGS+=(--task "$FIX/${FILE[$fmt]}.jsonl")
  LM_ARGS+=("$fmt:$fmt=$FIX/${FILE[$fmt]}.jsonl")
done
# A larger generic task, for throughput: which Exodus verse comes next (200 examples of 4 choices).
if command -v bible >/dev/null; then
  env -u COLUMNS bible -f Ex1:1-Ex40:38 >"$TMP/exodus.txt"
  python3 "$SRC/scripts/make_verse_task.py" --text "$TMP/exodus.txt" --out "$TMP/verses.jsonl" --n 200 --from 0 --to 1
  HW_ARGS+=(--task "$TMP/verses.jsonl")
  LM_ARGS+=("verses:generic=$TMP/verses.jsonl")
fi
# Both tools on checkpoint $1 ($2: a label; $3: a tolerance other than eval_harness_compare.py's);
# the tasks are HW_ARGS / LM_ARGS.
compare() {
  local ckpt=$1 out=$TMP/$2 tol=${3:-}
  mkdir -p "$out"
  local start
  start=$(date +%s.%N)
  "$HEADWISE" eval-tasks --checkpoint "$ckpt" "${HW_ARGS[@]}" --batch 8 --json "$out/hw.json" \
    --samples "$out/hw_samples.jsonl" --threads "$THREADS" --no-progress >/dev/null
  local hw_seconds
  hw_seconds=$(echo "$(date +%s.%N) - $start" | bc)
  "$HEADWISE" eval --checkpoint "$ckpt" --text "$FIX/text_a.txt" --text "$FIX/text_b.txt" --threads "$THREADS" \
    | tail -n 1 >"$out/hw_text.json"
  "$VENV/bin/hwpy" "$SRC/tests/scripts/eval_harness_run.py" "$ckpt" "$out/harness.json" "$THREADS" "$TMP/text.jsonl" \
    "${LM_ARGS[@]}" >"$out/harness.log" 2>&1 || { cat "$out/harness.log"; exit 1; }
  echo "== $2"
  python3 "$SRC/tests/scripts/eval_harness_compare.py" "$out/hw.json" "$out/hw_samples.jsonl" "$hw_seconds" \
    "$out/hw_text.json" "$out/harness.json" $tol
}
"$VENV/bin/hwpy" - "$FIX" "$TMP/text.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as f:
    for name in ("text_a.txt", "text_b.txt"):
        f.write(json.dumps({"page": open(f"{sys.argv[1]}/{name}", encoding="utf-8").read()}) + "\n")
PY
compare "$CKPT" "checkpoint with the GPT-2-style tokenizer (no BOS)"
# The same weights with a tokenizer whose post-processor puts a BOS before every text, as Llama 3's
# does (transformers then adds it in tok_encode, and the harness conditions empty contexts on it):
# the fixture files only.
cp -r "$CKPT" "$TMP/ckpt_bos"
"$VENV/bin/hwpy" - "$TMP/ckpt_bos/tokenizer.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
seq = lambda i, t: {"Sequence": {"id": i, "type_id": t}}
bos = lambda t: {"SpecialToken": {"id": "<|endoftext|>", "type_id": t}}
d["post_processor"] = {"type": "Sequence", "processors": [
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
    {"type": "TemplateProcessing", "single": [bos(0), seq("A", 0)], "pair": [bos(0), seq("A", 0), bos(1), seq("B", 1)],
     "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0], "tokens": ["<|endoftext|>"]}}}]}
json.dump(d, open(sys.argv[1], "w"))
PY
ALL_HW=("${HW_ARGS[@]}") ALL_LM=("${LM_ARGS[@]}")
HW_ARGS=("${HW_ARGS[@]:0:16}") LM_ARGS=("${LM_ARGS[@]:0:8}")
compare "$TMP/ckpt_bos" "the same weights, a tokenizer that puts a BOS before each text (Llama 3 style)"
# A mixed plan (issue 56): the checkpoint fine-tuned 20 updates with static, linear, sink+window and
# window heads is model_type "headwise"; the harness runs it through the PyTorch model the folder
# carries (trust_remote_code): a second, independent check of eval-tasks on such plans.
"$HEADWISE" train --config "$TMP/cfg.json" --out "$TMP/mixed" --init-from "$CKPT" \
  --set 'model.head_plan=[["static","linear"],["sink_window:4:16","window:8"]]' --set train.steps=20 \
  --set train.warmup_steps=2 --set train.eval_every=20 > /dev/null 2>&1
grep -q '"model_type": "headwise"' "$TMP/mixed/checkpoints/step_20/config.json" ||
  { echo "FAIL: the mixed-plan checkpoint is not model_type headwise"; exit 1; }
HW_ARGS=("${ALL_HW[@]:0:6}" "${ALL_HW[@]:16}") LM_ARGS=("${ALL_LM[@]:0:3}" "${ALL_LM[@]:8}")
compare "$TMP/mixed/checkpoints/step_20" "a mixed plan (static, linear, sink_window, window heads) through its PyTorch model" 2.5e-4
