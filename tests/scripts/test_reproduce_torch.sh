#!/usr/bin/env bash
# The GPU route of OAL's and AoH's full-scale runs (--backend torch, issue 56) on the CPU, with tiny
# models: headwise converts, then scripts/reproduce/torch_route.py fine-tunes, evaluates and times in
# PyTorch through the converted model's own Python files (what the jobs run on a GPU node):
#  - OAL: the cluster jobs ask for a GPU and run torch_route.py after headwise convert; one unit
#    (OAL's linear heads on a transformers-made tiny Llama with a BPE tokenizer, T 32, 2 updates) run
#    end to end: the LoRA fine-tune's best checkpoint opens in headwise with the PPL torch_route.py
#    measured (1e-5), and the files the collector reads (summary, PPL, lm-evaluation-harness's task
#    columns) carry its keys;
#  - AoH: --scale gpu --backend torch end to end on the tiny Llama fixture (sink 4, window 8, contexts
#    32 and 64): the KV ratios of the converted model's cache are the hand-worked (N + 12) / 2N of
#    headwise's own bench (0.6875, 0.59375), and the report has its 6 claim rows.
# torch, transformers, peft and lm_eval come from VENV (scripts/python_env.sh); a skip (77) only when the
# package index cannot be reached, a failure in CI mode (scripts/references.sh).
# Usage: test_reproduce_torch.sh path/to/headwise VENV
set -euo pipefail
HW=$(realpath "$1")
VENV=$(realpath -m "$2")
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/scripts/references.sh"
python_reference "$VENV" torch "transformers==5.24.0" safetensors "peft==0.21.2" "lm_eval[hf]==0.4.13"
PY="$VENV/bin/hwpy"
"$PY" -c "import torch, transformers, peft, lm_eval" 2>/dev/null || { echo "FAIL: torch/transformers/peft/lm_eval do not import from $VENV"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} HF_HUB_OFFLINE=1 HF_HOME=$tmp/hf TRANSFORMERS_VERBOSITY=error TORCH_VENV=$VENV
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
mkdir -p "$tmp/bin" "$tmp/tasks"
printf '#!/bin/sh\necho "stand-in sbatch" >&2\nexit 1\n' > "$tmp/bin/sbatch"
chmod +x "$tmp/bin/sbatch"
cp "$root/tests/fixtures/eval/piqa.jsonl" "$tmp/tasks/"
# A tiny Llama with the BPE fixture tokenizer's vocabulary, and token shards of that vocabulary.
"$PY" - "$tmp" "$root/tests/fixtures/tokenizers/gpt2_style.json" <<'PY'
import json, os, shutil, struct, sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM
out, tok = sys.argv[1], sys.argv[2]
V = len(json.load(open(tok))["model"]["vocab"])
torch.manual_seed(0)
m = LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, intermediate_size=48, max_position_embeddings=128,
                                 bos_token_id=None, eos_token_id=None, tie_word_embeddings=True))
m.save_pretrained(os.path.join(out, "base"))
shutil.copy(tok, os.path.join(out, "base", "tokenizer.json"))
json.dump({"tokenizer_class": "GPT2Tokenizer", "eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>"},
          open(os.path.join(out, "base", "tokenizer_config.json"), "w"))
g = torch.Generator().manual_seed(1)
def shard(path, n):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t = torch.randint(0, V, (n,), generator=g).tolist()
    open(path, "wb").write(struct.pack("<256i", 20240520, 1, n, *[0] * 253) + struct.pack(f"<{n}H", *t))
for s in ("train", "val"):
    shard(f"{out}/data/wt2/{s}_000000.bin", 2000)
    shard(f"{out}/data/wt103/{s}_000000.bin", 2000)
shard(f"{out}/data/test/val_000000.bin", 3 * 32 + 1)
PY
oal_env=(BASE_LLAMA="$tmp/base" WT2_LLAMA="$tmp/data/wt2" WT103_LLAMA="$tmp/data/wt103" WT103_TEST_LLAMA="$tmp/data/test"
         TASKS_DIR="$tmp/tasks" STEPS=2 SEQ_LEN=32 LAYERS_LLAMA=0-1 HEADWISE_BIN="$HW" PATH="$tmp/bin:$PATH")

# --- OAL: the GPU jobs, then one of them run here -------------------------------------------------------
(cd "$root" && env "${oal_env[@]}" bash scripts/reproduce/oal.sh --scale cluster --backend torch --out "$tmp/oal") > /dev/null
J=$tmp/oal/jobs/llama_oal.sbatch
for line in "#SBATCH --gpus-per-node=1" "TORCH_PY=$VENV/bin/hwpy" "export HF_HUB_OFFLINE=1" \
  "[ -s $tmp/oal/llama/ft_oal/summary.json  ] || \"\$TORCH_PY\" scripts/reproduce/torch_route.py finetune --checkpoint $tmp/oal/llama/conv_oal --config configs/oal_pretrained_ft.json --out $tmp/oal/llama/ft_oal --set data.train=$tmp/data/wt103/train_\\*.bin --set data.val=$tmp/data/wt103/val_\\*.bin --set train.steps=2 --set train.warmup_steps=1 --set train.eval_every=2 --set train.seq_len=32 --set train.total_batch_tokens=32 "; do
  grep -qxF -- "$line" "$J" || bad "llama_oal.sbatch lacks the line: $line"
done
grep -q " convert --checkpoint $tmp/base --out $tmp/oal/llama/conv_oal --method oal " "$J" || bad "llama_oal.sbatch: no headwise convert"
grep -q -- "--lora 8\\\\,16\\\\,0.05" "$tmp/oal/jobs/llama_softmax_lora.sbatch" || bad "llama_softmax_lora.sbatch: not the LoRA recipe"
(cd "$root" && bash "$J") > "$tmp/unit.log" 2>&1 || { tail -n 20 "$tmp/unit.log"; bad "the llama_oal unit failed"; }
O=$tmp/oal/llama
hw=$("$HW" eval --checkpoint "$O/ft_oal/checkpoints/best" --data "$tmp/data/test/val_*.bin" --seq-len 32 --micro-batch 1 --batches 3 | tail -n 1)
"$PY" - "$O" "$tmp/oal/tasks/llama_oal.json" "$hw" <<'PY' || bad "the OAL unit's outputs"
import json, sys
o, tasks, hw = sys.argv[1], json.load(open(sys.argv[2])), json.loads(sys.argv[3])
ppl = json.load(open(f"{o}/ppl_oal.json"))
summ = json.load(open(f"{o}/ft_oal/summary.json"))
rel = abs(ppl["loss"] - hw["loss"]) / hw["loss"]
t = tasks["tasks"][0]
print(json.dumps({"torch_ppl": ppl["ppl"], "headwise_ppl": hw["ppl"], "loss_rel_err": rel, "best_step": summ["best"]["step"],
                  "task": t["format"], "acc_norm": t["acc_norm"]}))
ok = rel < 1e-5 and ppl["tokens"] == hw["tokens"] == 96 and summ["best"]["step"] == 2 and t["format"] == "piqa" \
    and all(k in t for k in ("acc", "acc_norm", "acc_stderr", "acc_norm_stderr", "examples", "examples_per_s"))
sys.exit(0 if ok else 1)
PY
echo "ok: OAL --backend torch: GPU jobs; a unit's fine-tuned model opens in headwise with torch_route's PPL"

# --- AoH: --scale gpu --backend torch end to end on the tiny Llama fixture -------------------------------
cp -r "$root/tests/fixtures/hf_tiny_llama" "$tmp/tiny"
(cd "$root" && OMP_NUM_THREADS=1 env BASE_MODEL="$tmp/tiny" FIRST_CONTEXT=32 SINK=4 WINDOW=8 BENCH_RUNS="0 1 1 2" ROUNDS=2 \
  TORCH_DTYPE=fp32 HEADWISE_BIN="$HW" bash scripts/reproduce/aoh.sh --scale gpu --backend torch --out "$tmp/aoh") \
  > "$tmp/aoh.log" 2>&1 || { tail -n 20 "$tmp/aoh.log"; bad "aoh.sh --scale gpu --backend torch failed"; }
G=$tmp/aoh
[ "$(cat "$G/contexts.txt" 2>/dev/null)" = "32 64" ] || bad "contexts '$(cat "$G/contexts.txt" 2>/dev/null)', expected 32 64"
[ "$(cut -d, -f1,9 "$G/latency.csv" 2>/dev/null | tr '\n' ' ')" = "context,KV ratio 32,0.6875 64,0.59375 " ] \
  || bad "latency.csv KV ratios: $(cut -d, -f1,9 "$G/latency.csv" 2>/dev/null | tr '\n' ' ')"
ls "$G"/bench/ctx32_round1_all-softmax.json "$G"/bench/ctx64_round1_plan.json > /dev/null || bad "the rounds' bench files"
n=$(grep -cE '\| (holds|does not hold|not shown at this scale|not measurable at this scale|by construction) \|$' "$G/REPORT.md" || true)
[ "$n" = 6 ] || bad "AoH REPORT.md has $n claim rows, expected 6"
grep -qF -- "--backend torch" "$G/REPORT.md" || bad "AoH REPORT.md does not say the backend"
echo "ok: AoH --backend torch on the tiny Llama: contexts 32 64 in 2 alternated rounds, KV ratios 0.6875 0.59375, 6 claim rows"
[ $fail = 0 ] && echo "reproduce_torch: all passed"
exit $fail
