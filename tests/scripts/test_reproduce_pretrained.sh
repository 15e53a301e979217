#!/usr/bin/env bash
# OAL's and AoH's --scale gpu|cluster branches (pretrained Hugging Face models) without Slurm or a
# GPU: the jobs they write (the actual command lines: the paper's layer ranges, T 4096, the LoRA
# recipe, the sparsity settings), the collectors on hand-made results (every table row and claim),
# the context choice from the model's shape and the node's memory (hand-worked), AoH's CPU job
# end to end on the tiny Llama fixture (KV ratios hand-worked), and bad input: one `error:` line
# (--scale gpu with the headwise backend among it: nothing there would use the GPU).
# Usage: test_reproduce_pretrained.sh HEADWISE_BIN
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
hw=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
one_error() {  # one_error CMD...: non-zero exit, exactly one stderr line, an `error:` line (printed)
  local err rc=0
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  if [ "$rc" = 0 ] || [ "$(printf '%s\n' "$err" | wc -l)" != 1 ] || [[ "$err" != error:* ]]; then
    bad "expected one error line from: $*; got rc $rc: $err"
  else
    echo "ok: $err"
  fi
  LAST_ERR=$err
}
mkdir -p "$tmp/bin" "$tmp/tasks"
printf '#!/bin/sh\necho "stand-in sbatch" >&2\nexit 1\n' > "$tmp/bin/sbatch"
chmod +x "$tmp/bin/sbatch"
: > "$tmp/tasks/piqa.jsonl"
hf_dir() {  # hf_dir DIR MODEL_TYPE: a stand-in model directory (the scripts only look at it)
  mkdir -p "$1"
  echo "{\"model_type\": \"$2\"}" > "$1/config.json"
  : > "$1/model.safetensors"
  echo '{}' > "$1/tokenizer.json"
}
hf_dir "$tmp/qwen" qwen2
hf_dir "$tmp/llama" llama
# Shards with real headers: the test split holds 3 x 4096 + 1 and 4096 tokens: 3 + 0 whole blocks.
python3 - "$tmp/data" <<'PY'
import os, struct, sys
d = sys.argv[1]
def shard(path, n):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").write(struct.pack("<256i", 20240520, 1, n, *[0] * 253))  # header only: the script reads the count
for m in ("qwen", "llama"):
    for s in ("train", "val"):
        shard(f"{d}/wt2_{m}/{s}_000000.bin", 100)
        shard(f"{d}/wt103_{m}/{s}_000000.bin", 100)
    shard(f"{d}/test_{m}/val_000000.bin", 3 * 4096 + 1)
    shard(f"{d}/test_{m}/val_000001.bin", 4096)
PY
oal_env=(BASE_QWEN="$tmp/qwen" BASE_LLAMA="$tmp/llama" TASKS_DIR="$tmp/tasks")
for m in qwen llama; do
  M=${m^^}
  oal_env+=("WT2_$M=$tmp/data/wt2_$m" "WT103_$M=$tmp/data/wt103_$m" "WT103_TEST_$M=$tmp/data/test_$m")
done
oal() { env "${oal_env[@]}" PATH="$tmp/bin:$PATH" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/oal.sh" --scale cluster --out "$tmp/oal"; }

# --- OAL: the jobs --------------------------------------------------------------------------------
oal > /dev/null
J=$tmp/oal/jobs
O=$tmp/oal
[ "$(ls "$J" | tr '\n' ' ')" = "llama_dijiang.sbatch llama_global.sbatch llama_oal.sbatch llama_performer.sbatch llama_softmax_lora.sbatch llama_taylorshift.sbatch qwen_dijiang.sbatch qwen_global.sbatch qwen_oal.sbatch qwen_performer.sbatch qwen_softmax_lora.sbatch qwen_tables.sbatch qwen_taylorshift.sbatch " ] \
  || bad "OAL jobs: $(ls "$J" | tr '\n' ' ')"
has() { grep -qxF -- "$2" "$J/$1.sbatch" || bad "$1.sbatch lacks the line: $2"; }
lacks() { ! grep -qF -- "$2" "$J/$1.sbatch" || bad "$1.sbatch has: $2"; }
for m in qwen llama; do
  L=$([ $m = qwen ] && echo 3-20 || echo 1-14)
  for row in oal global performer dijiang taylorshift; do
    case $row in
      oal) extra="" calib="--calib $tmp/data/wt2_$m/train_\\*.bin " ;;
      global) extra=" --set method.grouping=fixed:1" calib="--calib $tmp/data/wt2_$m/train_\\*.bin " ;;
      *) extra=" --set method.kernel=$row" calib="" ;;
    esac
    has ${m}_$row "[ -s $O/$m/conv_$row/config.json  ] || $hw convert --checkpoint $tmp/$m --out $O/$m/conv_$row --method oal ${calib}--seq-len 4096 --set method.layers=$L$extra "
    has ${m}_$row "[ -s $O/$m/ft_$row/summary.json  ] || $hw train --config configs/oal_pretrained_ft.json --out $O/$m/ft_$row --resume auto --init-from $O/$m/conv_$row --set data.train=$tmp/data/wt103_$m/train_\\*.bin --set data.val=$tmp/data/wt103_$m/val_\\*.bin "
  done
  has ${m}_softmax_lora "[ -s $O/$m/ft_softmax_lora/summary.json  ] || $hw train --config configs/oal_pretrained_ft.json --out $O/$m/ft_softmax_lora --resume auto --init-from $tmp/$m --set data.train=$tmp/data/wt103_$m/train_\\*.bin --set data.val=$tmp/data/wt103_$m/val_\\*.bin --set model.lora.rank=8 --set model.lora.alpha=16 --set model.lora.dropout=0.05 --set model.lora.freeze_base=true "
  lacks ${m}_softmax_lora " convert "
  for row in softmax_lora oal global performer dijiang taylorshift; do
    has ${m}_$row "[ -s $O/$m/ppl_$row.json  ] || { $hw eval --checkpoint $O/$m/ft_$row/checkpoints/best --data $tmp/data/test_$m/val_\\*.bin --seq-len 4096 --micro-batch 1  --batches \"\$blocks\" | tail -n 1 > $O/$m/ppl_$row.json.part  && mv $O/$m/ppl_$row.json.part $O/$m/ppl_$row.json ; }"
    has ${m}_$row "[ -s $O/tasks/${m}_$row.json  ] || $hw eval-tasks --checkpoint $O/$m/ft_$row/checkpoints/best --task $tmp/tasks/piqa.jsonl --json $O/tasks/${m}_$row.json --no-progress "
    has ${m}_$row "#SBATCH --cpus-per-task=32"
    lacks ${m}_$row "gpu"
    bash -n "$J/${m}_$row.sbatch" || bad "${m}_$row.sbatch: not valid bash"
  done
done
has qwen_tables "[ -s $O/qwen/tables/tables.json  ] || $hw oal-tables --checkpoint $tmp/qwen --data $tmp/data/wt2_qwen/train_\\*.bin --eval-data $tmp/data/wt2_qwen/val_\\*.bin --out $O/qwen/tables --set method.layers=4\\,12\\,20 --set method.calib_seq_len=4096 --set method.stats_seq_len=512 --eval-seqs 16 --positions 32 --random-draws 1000 --performer-features 250 --performer-seeds 5 --fixed-groups 4 --max-groups 5 "
# The PPL's block count, run as the job runs it: (3 x 4096 + 1 - 1) / 4096 + (4096 - 1) / 4096 = 3.
blocks=$(cd "$root" && eval "$(grep '^blocks=' "$J/qwen_oal.sbatch")" && echo "$blocks")
[ "$blocks" = 3 ] || bad "the test split's block count: $blocks, expected 3"
echo "ok: OAL jobs: layers 3-20 (Qwen) / 1-14 (Llama), T 4096, the LoRA recipe, PPL on 3 test blocks, CPU only"

# --- OAL: the collector on hand-made results --------------------------------------------------------
python3 - "$O" <<'PY'
import json, os, sys
d = sys.argv[1]
os.makedirs(f"{d}/qwen/tables", exist_ok=True)
json.dump({"table1": {"dims_selected": 147, "dims_total": 2688, "rows": [
              {"method": "performer", "error_kept_top": 0.378, "error_kept_gaussian": 0.047, "error_kept_random_mean": 0.1,
               "p_value": 0.000999, "random_draws": 1000}]},
           "table2": [{"method": "global", "mse_pre": 0.09, "relmse_pre": 0.50, "mse_post": 0.035, "relmse_post": 0.65, "val_mse": 0.09},
                      {"method": "oal_bootstrap", "mse_pre": 0.078, "relmse_pre": 0.432, "mse_post": 0.031, "relmse_post": 0.595,
                       "val_mse": 0.08}],
           "fig2": [{"G": g, "heldout_mse": m, "val_mse": m, "params_per_head": (g + 1) * (g + 2) // 2}
                    for g, m in ((1, 0.10), (2, 0.09), (3, 0.085))]}, open(f"{d}/qwen/tables/tables.json", "w"))
ppl = {"qwen": {"softmax_lora": 10.9, "oal": 27.5, "global": 31.7, "performer": 37.0, "dijiang": 27.6, "taylorshift": 25.0},
       "llama": {"softmax_lora": 8.2, "oal": 33.0, "global": 36.0, "performer": 50.4, "dijiang": 56.3, "taylorshift": 62.7}}
acc = {"oal": (64.69, 37.2, 41.0), "global": (61.15, 36.8, 50.0)}
acc_llama = {"oal": 63.66, "global": 57.40}
os.makedirs(f"{d}/tasks", exist_ok=True)
for m, rows in ppl.items():
    for r, p in rows.items():
        os.makedirs(f"{d}/{m}/ft_{r}/checkpoints/best", exist_ok=True)
        json.dump({"ppl": p, "loss": 0}, open(f"{d}/{m}/ppl_{r}.json", "w"))
        json.dump({"best": {"step": 384, "val_loss": 3.0}}, open(f"{d}/{m}/ft_{r}/summary.json", "w"))
        # Qwen: all three tasks; Llama: PIQA only (TASKS_DIR's one file), so its other task claims say "not run"
        a = acc.get(r, (50.0, 30.0, 40.0)) if m == "qwen" else (acc_llama.get(r, 55.0),)
        json.dump({"tasks": [{"task": f"/t/{f}.jsonl", "format": f, "examples": 100, "acc": x / 100, "acc_stderr": 0.01,
                              "acc_norm": x / 100, "acc_norm_stderr": 0.01, "examples_per_s": 5.0}
                             for f, x in zip(("piqa", "hellaswag", "arc"), a)]},
                  open(f"{d}/tasks/{m}_{r}.json", "w"))
PY
PATH="$tmp/bin:$PATH" bash "$O/collect.sh" > "$tmp/oal_collect.log" 2>&1 || { cat "$tmp/oal_collect.log"; bad "OAL collect.sh failed"; }
for t in table1 table2 fig2 table3; do [ -s "$O/$t.md" ] && [ -s "$O/$t.csv" ] || bad "OAL: missing $t.md/csv"; done
[ "$(grep -c '^Qwen2.5-0.5B,\|^Llama-3.2-1B,' "$O/table3.csv")" = 12 ] || bad "table3.csv: not 12 rows (2 models x 6 methods)"
grep -qxF 'Qwen2.5-0.5B,OAL,27.5,384,64.69,37.2,41.0' "$O/table3.csv" || bad "table3.csv: Qwen's OAL row"
grep -qxF 'Llama-3.2-1B,Learned global (G = 1),36.0,384,57.4,not run,not run' "$O/table3.csv" || bad "table3.csv: Llama's global row"
expect() { grep -qF -- "$1" "$O/REPORT.md" || bad "OAL REPORT.md lacks: $1"; }
# Hand-worked verdicts: PPL differences of >= 1% with the paper's sign hold (27.5 vs 31.7), 27.5 vs
# 27.6 (0.4%) is not measurable, 27.5 vs 25.0 does not hold; task points >= 1 hold (64.69 vs 61.15),
# 0.4 is not measurable, -9.0 does not hold; Llama's PIQA 63.66 vs 57.40 holds, its HellaSwag was not
# run (no task file): not measurable.
expect "| Table 3 (Qwen2.5-0.5B): OAL reaches a lower WikiText-103 PPL than Learned global (G = 1) after the same LoRA budget | 27.50 vs 31.71 | 27.500 vs 31.700 | holds |"
expect "| Table 3 (Qwen2.5-0.5B): OAL reaches a lower WikiText-103 PPL than DiJiang after the same LoRA budget | 27.50 vs 36.05 | 27.500 vs 27.600 | not measurable at this scale |"
expect "| Table 3 (Qwen2.5-0.5B): OAL reaches a lower WikiText-103 PPL than TaylorShift after the same LoRA budget | 27.50 vs 39.50 | 27.500 vs 25.000 | does not hold |"
expect "| Table 3 (Qwen2.5-0.5B): softmax + LoRA stays better than every converted model | 10.89 vs best converted 27.50 | 10.900 vs best converted 25.000 (TaylorShift) | holds |"
expect "| Table 3 (Qwen2.5-0.5B): OAL's PIQA accuracy beats the learned global kernel's | 64.69 vs 61.15 | 64.69 vs 61.15 | holds |"
expect "| Table 3 (Qwen2.5-0.5B): OAL's HellaSwag accuracy beats the learned global kernel's | 37.20 vs 32.43 | 37.20 vs 36.80 | not measurable at this scale |"
expect "| Table 3 (Qwen2.5-0.5B): OAL's ARC-E accuracy beats the learned global kernel's | 50.38 vs 41.41 | 41.00 vs 50.00 | does not hold |"
expect "| Table 3 (Llama-3.2-1B): OAL reaches a lower WikiText-103 PPL than Performer after the same LoRA budget | 32.99 vs 50.39 | 33.000 vs 50.400 | holds |"
expect "| Table 3 (Llama-3.2-1B): OAL's PIQA accuracy beats the learned global kernel's | 63.66 vs 57.40 | 63.66 vs 57.40 | holds |"
expect "| Table 3 (Llama-3.2-1B): OAL's HellaSwag accuracy beats the learned global kernel's | 35.42 vs 35.02 | not run (no HellaSwag task file in TASKS_DIR) | not measurable at this scale |"
expect "| Table 2: OAL (bootstrap) has a lower RelMSE than Learned global (G = 1), before and after W_O |"
n=$(grep -cE '\| (holds|does not hold|not shown at this scale|not measurable at this scale|by construction) \|$' "$O/REPORT.md" || true)
# Table 1: 2 claims (one row), Table 2: 1, Fig. 2: 2, Table 3: 2 x (4 PPL + softmax + 3 tasks) = 16
[ "$n" = 21 ] || bad "OAL REPORT.md has $n claim rows, expected 21"
grep -q '^## Task columns' "$O/REPORT.md" || bad "OAL REPORT.md has no task section"
echo "ok: OAL collector: Tables 1-3 and Fig. 2, 12 Table 3 rows, $n claim rows"

# --- OAL: bad input ---------------------------------------------------------------------------------
oal_bad() { env "$@" PATH="$tmp/bin:$PATH" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/oal.sh" --scale cluster --out "$tmp/oal_bad"; }
one_error oal_bad
[[ "$LAST_ERR" == *"set BASE_QWEN=DIR (Qwen2.5-0.5B) and/or BASE_LLAMA=DIR (Llama-3.2-1B)"* ]] || bad "no BASE_*: the error names the variables"
one_error oal_bad BASE_QWEN="$tmp/llama"
[[ "$LAST_ERR" == "error: BASE_QWEN=$tmp/llama is not a Hugging Face Qwen2.5-0.5B directory: it needs config.json with model_type qwen2 (found 'llama'), *.safetensors and tokenizer.json" ]] \
  || bad "a Llama directory as BASE_QWEN: $LAST_ERR"
one_error oal_bad BASE_LLAMA="$tmp/none"
one_error oal_bad BASE_LLAMA="$tmp/llama" WT2_LLAMA="$tmp/data/wt2_llama" WT103_LLAMA="$tmp/data/wt103_llama" WT103_TEST_LLAMA="$tmp/nowhere"
[[ "$LAST_ERR" == *"missing $tmp/nowhere/val_*.bin; make them with: scripts/data/prepare_corpus.sh --tokenizer $tmp/llama/tokenizer.json --out $tmp/nowhere --split val --input WIKITEXT103/test-*.parquet" ]] \
  || bad "missing test shards: the error names the files and the command: $LAST_ERR"
one_error oal_bad BASE_LLAMA="$tmp/llama"  # the default data/wikitext2_llama is not there
one_error env "${oal_env[@]}" SBATCH=hw-no-such-sbatch HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/oal.sh" --scale cluster --out "$tmp/oal_x"
# --scale gpu with the headwise backend would run on the CPU: refused, saying what is CPU-only.
one_error env "${oal_env[@]}" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/oal.sh" --scale gpu --out "$tmp/oal_g"
[[ "$LAST_ERR" == *"the CUDA backend has no Llama-family (RMSNorm, SwiGLU), LoRA, linear or baseline-head ops"*"use --backend torch"* ]] || bad "oal --scale gpu: $LAST_ERR"

# --- AoH: the context choice from the model's shape and the node's memory ------------------------------
# L 2, C 32, H 4, KV 2, D 8, FFN 64, V 96, untied: 2 x 96 x 32 + 2 x (32x32 + 2x32x16 + 32x32 + 3x32x64
# + 2x32 + 32 + 2x16) + 32 = 24,864 parameters. At 2 threads bench-infer needs at most
# 6 x 24,864 + 2 x (2x2x2x8 x 4 N + 2 x 64 x (N + 64) x 4) + 2^30 = 1,073,956,544 + 1,536 N bytes:
# N = 8192 needs 1,086,539,456 <= 0.8 x 1,360,003,072 (1,297 MiB) = 1,088,002,457; 16384 needs more.
cfg=$tmp/shape/config.json
mkdir -p "$tmp/shape"
echo '{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
"head_dim": 8, "intermediate_size": 64, "vocab_size": 96, "tie_word_embeddings": false, "max_position_embeddings": 1048576}' > "$cfg"
: > "$tmp/shape/model.safetensors"
got=$(python3 "$root/scripts/reproduce/aoh_contexts.py" "$cfg" 1360003072 2 2> "$tmp/ctx.err")
[ "$got" = "1024 2048 4096 8192" ] || bad "contexts at 1,297 MiB: '$got', expected up to 8192"
grep -qF "aoh: contexts up to 8192: bench-infer needs at most 1.0 GiB there, within 80% of the node's 1.3 GiB (2 threads; 24,864 parameters); 16384 would need 1.0 GiB" "$tmp/ctx.err" \
  || bad "the printed choice: $(cat "$tmp/ctx.err")"
sed 's/1048576/2048/' "$cfg" > "$tmp/cfg2048.json"
got=$(python3 "$root/scripts/reproduce/aoh_contexts.py" "$tmp/cfg2048.json" 1360003072 2 2> "$tmp/ctx.err")
[ "$got" = "1024 2048" ] && grep -qF "4096 exceeds max_position_embeddings 2048" "$tmp/ctx.err" || bad "max_position_embeddings 2048: '$got' $(cat "$tmp/ctx.err")"
got=$(python3 "$root/scripts/reproduce/aoh_contexts.py" "$cfg" 1360003072 2 4096 2> /dev/null)
[ "$got" = "1024 2048 4096" ] || bad "MAX_CONTEXT 4096: '$got'"
one_error python3 "$root/scripts/reproduce/aoh_contexts.py" "$cfg" 1000000000 2
echo "ok: AoH contexts: up to 8192 at 1,297 MiB (hand-worked), capped by max_position_embeddings and MAX_CONTEXT"

# --- AoH: the cluster job -----------------------------------------------------------------------------
aoh() {  # aoh [NAME=VALUE]... OPTION...: aoh.sh with those variables
  local envs=()
  while [ $# -gt 0 ] && [[ "$1" != --* ]]; do envs+=("$1"); shift; done
  env "${envs[@]}" PATH="$tmp/bin:$PATH" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/aoh.sh" "$@"
}
env BASE_MODEL="$tmp/shape" PATH="$tmp/bin:$PATH" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/aoh.sh" --scale cluster --out "$tmp/aoh" > /dev/null
A=$tmp/aoh/jobs/aoh.sbatch
for line in "#SBATCH --exclusive" \
  "contexts=\$(python3 scripts/reproduce/aoh_contexts.py $tmp/shape/config.json \"\$mem\" \"\$threads\" '' 1024)" \
  "[ -s $tmp/aoh/heads.json  ] || $hw heads --checkpoint $tmp/shape --sparsity 0.5 --sink 64 --window 256 --json $tmp/aoh/heads.json > /dev/null" \
  "[ -s $tmp/aoh/aoh50/config.json  ] || $hw convert --checkpoint $tmp/shape --out $tmp/aoh/aoh50 --method aoh --set method.sparsity=0.5 --set method.sink=64 --set method.window=256 " \
  "  for ((r = 0; r < 3; r++)); do" \
  "    order=\"plan all-softmax\"; (( r % 2 )) && order=\"all-softmax plan\"" \
  "      [ -s $tmp/aoh/bench/ctx\${c}_round\${r}_\$side.json ] || { $hw bench-infer --checkpoint $tmp/shape --plan-from $tmp/aoh/aoh50  --side \"\$side\" --context \"\$c\" --weights bf16 --prefill-warmup 3 --prefill-runs 10 --decode-warmup 50 --decode-runs 100 | tail -n 1 > $tmp/aoh/bench/ctx\${c}_round\${r}_\$side.json.part && mv $tmp/aoh/bench/ctx\${c}_round\${r}_\$side.json.part $tmp/aoh/bench/ctx\${c}_round\${r}_\$side.json; }"; do
  grep -qxF -- "$line" "$A" || bad "aoh.sbatch lacks the line: $line"
done
! grep -q 'gpu' "$A" || bad "aoh.sbatch asks for a GPU or checks one (it runs on the CPU backend)"
bash -n "$A" || bad "aoh.sbatch: not valid bash"
# Its context step, run as Slurm would with 1,297 MiB and 2 threads: contexts.txt up to 8192.
(cd "$root" && SLURM_MEM_PER_NODE=1297 OMP_NUM_THREADS=2 bash -c "$(sed -n '/^mem=/,/contexts.txt/p' "$A")" 2> /dev/null)
[ "$(cat "$tmp/aoh/contexts.txt")" = "1024 2048 4096 8192" ] || bad "the job's contexts.txt: $(cat "$tmp/aoh/contexts.txt")"
echo "ok: AoH cluster job: heads, convert (S 0.5, sink 64, window 256), bench-infer at the contexts the node fits"

# --- AoH: the CPU job end to end on the tiny Llama fixture (contexts 32 and 64, sink 4, window 8) ---------
# --scale cluster writes it, bash runs it here as Slurm would, collect.sh writes the report.
# Its 2 KV heads per layer: one full, one streaming (sink 4 + window 8 = 12 slots): KV bytes
# (N + 12) / 2N of all-softmax: 44 / 64 = 0.6875 at 32, 76 / 128 = 0.59375 at 64.
cp -r "$root/tests/fixtures/hf_tiny_llama" "$tmp/tiny"
{ aoh BASE_MODEL="$tmp/tiny" FIRST_CONTEXT=32 SINK=4 WINDOW=8 BENCH_RUNS="0 1 1 2" ROUNDS=2 --scale cluster --out "$tmp/aoh_gpu" \
    && (cd "$root" && OMP_NUM_THREADS=1 bash "$tmp/aoh_gpu/jobs/aoh.sbatch") && PATH="$tmp/bin:$PATH" "$tmp/aoh_gpu/collect.sh"; } \
  > "$tmp/aoh_gpu.log" 2>&1 || { tail -n 5 "$tmp/aoh_gpu.log"; bad "aoh.sh --scale cluster, its job and collect.sh failed"; }
G=$tmp/aoh_gpu
[ "$(cat "$G/contexts.txt" 2>/dev/null)" = "32 64" ] || bad "tiny model: contexts '$(cat "$G/contexts.txt" 2>/dev/null)', expected 32 64 (max_position_embeddings 64)"
[ "$(cut -d, -f1,9 "$G/latency.csv" 2>/dev/null | tr '\n' ' ')" = "context,KV ratio 32,0.6875 64,0.59375 " ] \
  || bad "latency.csv KV ratios: $(cut -d, -f1,9 "$G/latency.csv" 2>/dev/null | tr '\n' ' ')"
[ "$(head -1 "$G/latency.csv")" = "context,prefill ms AoH (median),prefill ms softmax (median),prefill ratio: median (min-max of 2 rounds),decode ms/token AoH (median),decode ms/token softmax (median),decode ratio: median (min-max of 2 rounds),bytes read per decode step ratio,KV ratio,KV MiB AoH,KV MiB softmax" ] \
  || bad "latency.csv header: $(head -1 "$G/latency.csv")"
ls "$G"/bench/ctx32_round1_all-softmax.json "$G"/bench/ctx64_round1_plan.json > /dev/null || bad "the rounds' bench files"
python3 -c "import json,sys; h=json.load(open(sys.argv[1])); sys.exit(0)" "$G/heads.json" || bad "heads.json is not JSON"
n=$(grep -cE '\| (holds|does not hold|not shown at this scale|not measurable at this scale|by construction) \|$' "$G/REPORT.md" || true)
[ "$n" = 6 ] || bad "AoH REPORT.md has $n claim rows, expected 6"
grep -qF "| the KV cache shrinks by about half (50% of KV heads streaming) | -50% at 256K | -40.6% at 64 (sink + window rows of half the KV heads: arithmetic, not a finding) | by construction |" "$G/REPORT.md" \
  || bad "AoH REPORT.md: the KV claim at 64"
[ "$(grep -c '| not run (a pretrained model without a corpus) | not measurable at this scale |' "$G/REPORT.md")" = 3 ] \
  || bad "AoH REPORT.md: the retention claims do not say 'not run'"
echo "ok: AoH CPU job on the tiny Llama: contexts 32 64 in 2 alternated rounds, KV ratios 0.6875 0.59375, 6 claim rows"

# --- AoH: bad input ------------------------------------------------------------------------------------
one_error aoh --scale cluster --out "$tmp/aoh_bad"
one_error aoh BASE_MODEL="$root/tests/fixtures/hf_tiny_gpt2" --scale cluster --out "$tmp/aoh_bad"
[[ "$LAST_ERR" == *"model_type llama or qwen2 or qwen3 (found 'gpt2')"* ]] || bad "a GPT-2 directory: $LAST_ERR"
one_error aoh BASE_MODEL="$tmp/shape" MAX_CONTEXT=lots --scale cluster --out "$tmp/aoh_bad"
# --scale gpu with the headwise backend would run on the CPU: refused, saying what is CPU-only.
one_error aoh BASE_MODEL="$tmp/tiny" --scale gpu --out "$tmp/aoh_bad"
[[ "$LAST_ERR" == *"headwise's cached decoding (bench-infer) has no CUDA path; use --backend torch"* ]] || bad "aoh --scale gpu: $LAST_ERR"
one_error aoh BASE_MODEL="$tmp/shape" SBATCH=hw-no-such-sbatch --scale cluster --out "$tmp/aoh_bad"
exit $fail
