#!/usr/bin/env bash
# Reproduce the OAL paper's (Outlier-Aware Attention Linearization) Tables 1-3, Fig. 2 (error vs
# group count) and Fig. 3 (latency and memory vs length against our softmax kernel).
#   bash scripts/reproduce/oal.sh [--scale cpu|gpu|cluster] [--out DIR] [--smoke] [--backend headwise|torch]
# cpu (default): scripts/oal_eval_cpu.sh on a configs/default_cpu.json corpus model (4 x 4 x 128,
#   context 128, 300 updates; layers 1-2 converted): Tables 1, 2 and Fig. 2 from `headwise
#   oal-tables` with DRAWS random-dimension draws (default 50; the script's default is 100),
#   Table 3 from STEPS LoRA fine-tuning updates per row (default 60; configs/oal_cpu.json: 100),
#   then Fig. 3 from `headwise bench-attention --curve` at CURVE_T (default 1024..16384, one head,
#   head_dim 64, one thread, forward + backward) in ROUNDS (default 5) rounds, each kind group
#   (softmax | linear G=4 | linear G=1 | the baselines) a fresh process, the order rotating by
#   round; the report reads the interval of the rounds (scripts/reproduce/verdicts.py). 28 minutes
#   on 2 cores at load average 14-18 (the corpus model 15 of them, oal-tables 5, the three
#   fine-tunes 6, the curve 1.5).
#   EXTRA_RUNS (see scripts/oal_eval_cpu.sh) adds Table 3 rows; they appear in the report as-is.
# --smoke: the same protocol on a 4 x 2 x 32 model at context 32 (10 updates), a few prompts,
#   draws, positions and fine-tuning updates and a two-point curve at head_dim 16 in 2 rounds (under 90 s):
#   every file and claim line is written, the numbers mean nothing.
# gpu, cluster: the paper's protocol on the pretrained models the user passes, BASE_QWEN=DIR
#   (Qwen2.5-0.5B) and/or BASE_LLAMA=DIR (Llama-3.2-1B), Hugging Face directories (config.json,
#   *.safetensors, tokenizer.json). Every stage runs on the CPU backend (the CUDA backend has no
#   RMSNorm/SwiGLU, LoRA, linear or baseline head ops yet, and oal-tables is CPU-only): the jobs ask
#   for CPUs, no GPU; --scale gpu therefore needs --backend torch (with headwise: one error).
#   Units (OUT/jobs/<unit>.sh; cluster: OUT/jobs/<unit>.sbatch and OUT/collect.sh):
#   qwen_tables  Tables 1, 2 and Fig. 2: oal-tables on Qwen's layers 4, 12, 20 at T 4096 (WikiText-2:
#                fit/validation windows from train, 16 held-out windows from val; 1,000 random draws);
#   <m>_<row>    Table 3, m in qwen, llama; row in softmax_lora, oal, global (fixed:1), performer,
#                dijiang, taylorshift: convert with the paper's layers (Qwen 3-20, Llama 1-14) at
#                --seq-len 4096 (calibration on WikiText-2 train), 512 LoRA updates
#                (configs/oal_pretrained_ft.json, WikiText-103 train/val), the best checkpoint's PPL on
#                every 4096-token block of the WikiText-103 test split, and with TASKS_DIR the task
#                columns (eval-tasks on TASKS_DIR/*.jsonl: PIQA, HellaSwag, ARC-Easy).
#   Shards, each model in its own tokenizer (scripts/data/prepare_corpus.sh makes them; the error
#   names the command): WT2_<M> (default data/wikitext2_<m>: train_*, val_*), WT103_<M> (default
#   data/wikitext103_<m>: train_*, val_*), WT103_TEST_<M> (default data/wikitext103_<m>_test: val_*,
#   the test split). STEPS=N shortens the fine-tuning (a trial). Fig. 3 is not part of these scales
#   (bench-attention --curve: --scale cpu). --backend torch: after headwise's conversion the
#   fine-tune, PPL and task columns run in PyTorch on a GPU (scripts/reproduce/torch_route.py;
#   docs/reproducing.md, "The GPU route").
# Task columns: a next-verse task made from the held-out KJV text, scored on the corpus model and
#   every Table 3 row (tasks.{md,csv}; the paper's PIQA/HellaSwag/ARC-E columns need its Qwen model).
# Writes OUT/table1.{md,csv}, table2.*, table3.*, fig2.{png,csv,md}, fig3.{png,csv,md}, tasks.* and OUT/REPORT.md
# (OUT/curve/round<r>_<kinds>.csv: every round's raw curve rows).
PAPER=oal
source "$(dirname "$0")/common.sh" "$@"
if [ "$SCALE" != cpu ]; then
  source scripts/reproduce/oal_pretrained.sh
  exit 0
fi
EVAL=(env BUILD="$(dirname "$HW")")
LM_ARG=()
if [ "$SMOKE" = 1 ]; then
  # Tiny shapes: 4 layers (layers 1-2 convert, as in configs/oal_cpu.json), 2 heads of 16.
  SHAPE="--set model.n_head=2 --set model.n_embd=32 --set model.block_size=32 --set train.seq_len=32 \
--set train.micro_batch=4 --set train.total_batch_tokens=128"
  FIT="--set method.stats_prompts=4 --set method.fit_seqs=2 --set method.val_seqs=1 --set method.max_updates=20 \
--set method.val_every=10 --set method.patience=10 --set method.bootstrap=50"
  LM="$OUT/lm/checkpoints/step_10"
  # shellcheck disable=SC2086
  [ -e "$LM/model.safetensors" ] || run "$HW" train --config configs/default_cpu.json --out "$OUT/lm" --resume auto $SHAPE \
    --set train.steps=10 --set train.warmup_steps=2 --set train.eval_every=0 --set train.checkpoint_every=10 \
    --set train.log_every=5
  LM_ARG=("$LM")
  EVAL+=(STEPS=4 DRAWS=3 FT_SETS="$SHAPE --set train.eval_every=2 --set train.eval_batches=2" CONVERT_SETS="$FIT"
         TABLES_ARGS="--eval-seqs 1 --positions 4 --performer-features 16 --performer-seeds 1 --max-groups 3 --fixed-groups 2 $FIT")
  CURVE_T=${CURVE_T:-64,128}
  HEAD_DIM=16
  ROUNDS=2
  NOTE="SMOKE RUN (numbers mean nothing): 4 x 2 x 32 model at context 32, 10 updates; oal-tables on 4 prompts, 1 held-out window, 4 positions, 3 random draws, L fits of at most 20 updates; 4 fine-tuning updates per Table 3 row; curve at T = ${CURVE_T}, head_dim 16"
else
  STEPS=${STEPS:-60}
  DRAWS=${DRAWS:-50}
  EVAL+=(STEPS="$STEPS" DRAWS="$DRAWS")
  CURVE_T=${CURVE_T:-1024,2048,4096,8192,16384}
  HEAD_DIM=64
  ROUNDS=${ROUNDS:-5}
  NOTE="configs/default_cpu.json corpus model (4 layers x 4 heads x 128 wide, context 128, 300 updates, byte-level KJV corpus), layers 1-2 converted (8 heads of head_dim 32); Table 1 with $DRAWS random-dimension draws (paper: 1,000); Table 3 after $STEPS LoRA updates of 1,024 tokens (paper: 512 of 4,096), one seed, PPL only (no downstream tasks); Fig. 3: one head, head_dim 64, batch 1, one CPU thread, forward + backward at T = ${CURVE_T} in $ROUNDS alternated rounds of fresh processes (paper: forward only, 14 heads, A100, N = 1K-32K)"
fi
[ -e "$OUT/eval/table3.csv" ] || run "${EVAL[@]}" bash scripts/oal_eval_cpu.sh "$OUT/eval" "${LM_ARG[@]}"
# One thread: the curve's workspace is one slice per OpenMP thread and the paper times one kernel.
# One fresh process per kind group and round, the groups' order rotating by round, so that the
# machine's drift hits every kind alike; a finished round's files are kept (a rerun resumes).
KIND_GROUPS=("softmax" "linear G=4" "linear G=1" "performer,dijiang,taylorshift")
mkdir -p "$OUT/curve"
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#KIND_GROUPS[@]}; i++)); do
    g=${KIND_GROUPS[$(( (i + r) % ${#KIND_GROUPS[@]} ))]}
    f="$OUT/curve/round${r}_$(echo "$g" | tr -c 'A-Za-z0-9\n' '_').csv"
    [ -s "$f" ] || run env OMP_NUM_THREADS=1 "$HW" bench-attention --curve --T "$CURVE_T" --kinds "$g" \
      --head-dim "$HEAD_DIM" --repeats 1 --csv "$f" >> "$OUT/curve.log"
  done
done
# Task columns (the paper's Table 3 accuracy columns): the corpus model and each Table 3 row.
last_ckpt() { ls -d "$1"/checkpoints/step_* | sort -V | tail -n 1; }
BASE=${LM_ARG[0]:-}
[ -n "$BASE" ] || BASE=$(last_ckpt "$OUT/eval/lm")
TASK_MODELS=("base=$BASE")
for ft in "$OUT"/eval/ft_*/; do
  ft=${ft%/}
  TASK_MODELS+=("${ft##*/ft_}=$(last_ckpt "$ft")")
done
task_columns "${TASK_MODELS[@]}"
WALL=$(( $(date +%s) - START_S ))
printf '%s\n' "${COMMANDS[@]}" > "$OUT/commands.txt"
ROUNDS=$ROUNDS python3 scripts/reproduce/oal_report.py "$OUT" "$SCALE" "$NOTE" "$WALL" "$MACHINE" "$SMOKE"
append_task_section
echo "reproduce[oal]: $OUT/REPORT.md"
