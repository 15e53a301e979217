#!/usr/bin/env bash
# Reproduce the AoH paper's (Autonomy-of-Heads) headline results: quality retention vs sparsity
# (AoH's spectrum choice vs random KV heads, on language modelling and on MQAR retrieval) and
# prefill / decode latency and KV memory vs context (a plot).
#   bash scripts/reproduce/aoh.sh [--scale cpu|gpu|cluster] [--out DIR] [--smoke] [--backend headwise|torch]
# cpu (default): scripts/aoh_eval_cpu.sh (a corpus model at context 128 and an MQAR model,
#   S in {0.25, 0.5, 0.75}, 3 random seeds), then the latency part on a model whose decode is bound
#   by memory, not per-token overhead: GPT-2 124M's shape (12 x 12 x 768, vocabulary 50,304) with
#   RoPE at block 8192 and random weights (one update, to write a checkpoint), timed by
#   `headwise bench-infer --side plan|all-softmax` at CONTEXTS (default 2048 4096 8192) with 50%
#   streaming KV heads (sink 64, window 256), ROUNDS (default 5) rounds per context, each a fresh
#   process per side in alternating order (plan first in even rounds, all-softmax first in odd
#   ones). The report reads the interval of the rounds' ratios, not one point
#   (scripts/reproduce/verdicts.py). About 25 minutes on 2 idle cores.
# gpu, cluster: a pretrained model the user passes, BASE_MODEL=DIR (a Hugging Face Llama / Qwen2 /
#   Qwen3 directory: config.json, *.safetensors, tokenizer.json): `headwise heads` scores its heads
#   (OUT/heads.json), `headwise convert --method aoh` makes the paper's 50% plan (sink 64, window
#   256: DuoAttention's streaming heads; OUT/aoh50), and `headwise bench-infer --plan-from OUT/aoh50`
#   times prefill and decode (bf16 weights; 3 + 10 prefills, 50 + 100 decode steps, DuoAttention's
#   protocol) and counts KV bytes at 1024, 2048, ... up to the longest context that fits the node
#   (scripts/reproduce/aoh_contexts.py: from the model's shape and the node's memory, at most
#   max_position_embeddings and MAX_CONTEXT; printed, and kept in OUT/contexts.txt). Cached decoding
#   runs on the CPU backend only (the decoder has no CUDA path), so the job asks for a whole CPU node
#   (--exclusive) and no GPU: OUT/jobs/aoh.sbatch and OUT/collect.sh (the job also runs with bash).
#   --scale gpu needs --backend torch (with headwise nothing would use the GPU: one error).
#   No quality-retention rows at these scales (they need a corpus and MQAR models: --scale cpu).
#   --backend torch: the timing runs in PyTorch on a GPU with the converted model's cache, up to 8192
#   (scripts/reproduce/torch_route.py bench; docs/reproducing.md, "The GPU route").
# --smoke: the same steps on 2 x 4 x 32 models trained 4 updates, timed at 256 and 512 in 2 rounds
#   (for CI; numbers meaningless).
# Writes OUT/retention.{md,csv}, latency.{md,csv}, fig_latency_vs_context.png and OUT/REPORT.md.
PAPER=aoh
source "$(dirname "$0")/common.sh" "$@"
if [ "$SCALE" != cpu ]; then
  source scripts/reproduce/aoh_pretrained.sh
  exit 0
fi
CONTEXTS=${CONTEXTS:-2048 4096 8192}
ROUNDS=${ROUNDS:-5}
NOTE="retention: 4 x 4 x 128 byte-level corpus model at context 128 and an MQAR model (length 64); latency: GPT-2 124M's shape (12 x 12 x 768) with RoPE at block 8192, random weights, fp32, contexts ${CONTEXTS// /, }, $ROUNDS alternated rounds of fresh processes per context"
LONG_BLOCK=8192
# The latency model: 124M parameters (500 MB of fp32 weights) make a decode step read as many bytes
# as the KV cache at 8K holds (604 MB), so the cache's share of each step's bytes is what AoH's claim
# is about; a 4 x 128 model's step is set by per-token overhead instead.
LONG_SHAPE=(--set model.n_layer=12 --set model.n_head=12 --set model.n_embd=768 --set model.vocab_size=50304)
LONG_TRAIN=(--set train.steps=1 --set train.warmup_steps=0 --set train.micro_batch=1 --set train.seq_len=64
            --set train.total_batch_tokens=64 --set train.eval_every=0 --set train.eval_batches=1
            --set train.checkpoint_every=1)
INFER_RUNS=(--prefill-warmup 0 --prefill-runs 1 --decode-warmup 10 --decode-runs 40)
STREAM=""  # the streaming heads' sink and window: the method's defaults (64, 256)
LM_CKPT=""
TINY=()
if [ "$SMOKE" = 1 ]; then  # the same protocol on tiny models: every file is written, the numbers mean nothing
  CONTEXTS="256 512" LONG_BLOCK=512 ROUNDS=2
  INFER_RUNS=(--prefill-warmup 0 --prefill-runs 1 --decode-warmup 1 --decode-runs 4)
  STREAM="--set method.sink=16 --set method.window=64"
  LONG_SHAPE=(--set model.n_layer=2 --set model.n_embd=32)
  TINY=(--set model.n_layer=2 --set model.n_embd=32 --set train.micro_batch=2 --set train.total_batch_tokens=256
        --set train.steps=4 --set train.warmup_steps=1 --set train.eval_every=0 --set train.checkpoint_every=4 --set train.log_every=1)
  NOTE="SMOKE RUN (numbers meaningless): 2 x 4 x 32 models, 4 updates each (corpus at context 64, MQAR, RoPE at block 512 timed at 256 and 512 in $ROUNDS rounds with 4 decode runs, sink 16, window 64), 16 MQAR examples per pair count, 2 random seeds"
  LM_CKPT="$OUT/lm/checkpoints/step_4"
  [ -e "$LM_CKPT/model.safetensors" ] || run "$HW" train --config configs/default_cpu.json --out "$OUT/lm" --resume auto "${TINY[@]}" \
    --set model.block_size=64 --set train.seq_len=64 > /dev/null 2>&1
  export RANDOM_SEEDS="1 2" MQAR_STEPS=4 SINK=2 WINDOW=8 MQAR_SINK=2 MQAR_WINDOW=8 MQAR_EXAMPLES=16 BENCH_RUNS="0 1 1 4" \
    MQAR_SETS="--set model.n_layer=2 --set model.n_embd=32"
fi
[ -e "$OUT/eval/table.json" ] || run env BUILD="$(dirname "$HW")" bash scripts/aoh_eval_cpu.sh "$OUT/eval" $LM_CKPT
LONG="$OUT/long/checkpoints/step_1"
[ -e "$LONG/model.safetensors" ] || run "$HW" train --config configs/default_cpu.json --out "$OUT/long" --resume auto \
  --set model.pos=rope --set model.block_size=$LONG_BLOCK "${LONG_SHAPE[@]}" "${LONG_TRAIN[@]}" > "$OUT/long.log" 2>&1 \
  || { echo "error: the latency model's training failed; its log: $OUT/long.log" >&2; tail -n 3 "$OUT/long.log" >&2; exit 1; }
# Rounds: one fresh process per side, the order alternating between rounds (A B, B A, A B, ...), so a
# drift of the machine hits both sides alike; a finished round's files are kept (a rerun resumes).
mkdir -p "$OUT/bench"
for c in $CONTEXTS; do
  for ((r = 0; r < ROUNDS; r++)); do
    order="plan all-softmax"
    (( r % 2 )) && order="all-softmax plan"
    for side in $order; do
      f="$OUT/bench/ctx${c}_round${r}_$side.json"
      [ -s "$f" ] || run sh -c "'$HW' bench-infer --checkpoint '$LONG' --context $c --method aoh --side $side \
        --set method.sparsity=0.5 $STREAM ${INFER_RUNS[*]} 2>/dev/null | tail -n 1 > '$f.tmp' && mv '$f.tmp' '$f'"
    done
  done
done
WALL=$(( $(date +%s) - START_S ))
printf '%s\n' "${COMMANDS[@]}" > "$OUT/commands.txt"
REPORT_SCALE=$SCALE
[ "$SMOKE" = 1 ] && REPORT_SCALE="cpu --smoke (numbers meaningless)"
ROUNDS=$ROUNDS python3 scripts/reproduce/aoh_report.py "$OUT" "$REPORT_SCALE" "$NOTE" "$WALL" "$MACHINE" $CONTEXTS
echo "reproduce[aoh]: $OUT/REPORT.md"
