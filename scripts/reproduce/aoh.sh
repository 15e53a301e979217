#!/usr/bin/env bash
# Reproduce the AoH paper's (Autonomy-of-Heads) headline results: quality retention vs sparsity
# (AoH's spectrum choice vs random KV heads, on language modelling and on MQAR retrieval) and
# prefill / decode latency and KV memory vs context (a plot).
#   bash scripts/reproduce/aoh.sh [--scale cpu] [--out DIR]
# cpu (default): scripts/aoh_eval_cpu.sh (a corpus model at context 128 and an MQAR model,
#   S in {0.25, 0.5, 0.75}, 3 random seeds), then a RoPE corpus model at context 8192 (300
#   updates at T 128) timed by `headwise bench-infer` at CONTEXTS (default 1024 2048 4096 8192)
#   with 50% streaming KV heads (sink 64, window 256). About 25 minutes on 2 cores.
# gpu, cluster: not available: cached decoding (the part AoH speeds up) runs on the CPU backend
#   only, so there is nothing to time on a GPU yet.
# Writes OUT/retention.{md,csv}, latency.{md,csv}, fig_latency_vs_context.png and OUT/REPORT.md.
PAPER=aoh
source "$(dirname "$0")/common.sh" "$@"
if [ "$SCALE" != cpu ]; then
  echo "error: --scale $SCALE: AoH's gains are in cached decoding, which runs on the CPU backend only (no GPU decode kernels yet); use --scale cpu" >&2
  exit 1
fi
CONTEXTS=${CONTEXTS:-1024 2048 4096 8192}
NOTE="retention: 4 x 4 x 128 byte-level corpus model at context 128 and an MQAR model (length 64); latency: the same shape with RoPE at block 8192, contexts ${CONTEXTS// /, }"
[ -e "$OUT/eval/table.json" ] || run env BUILD="$(dirname "$HW")" bash scripts/aoh_eval_cpu.sh "$OUT/eval"
LONG="$OUT/long/checkpoints/step_300"
[ -e "$LONG/model.safetensors" ] || run "$HW" train --config configs/default_cpu.json --out "$OUT/long" \
  --set model.pos=rope --set model.block_size=8192 --set train.eval_every=0
for c in $CONTEXTS; do
  [ -s "$OUT/bench_$c.json" ] || run sh -c "'$HW' bench-infer --checkpoint '$LONG' --context $c --method aoh \
    --set method.sparsity=0.5 --prefill-warmup 1 --prefill-runs 3 --decode-warmup 20 --decode-runs 60 2>/dev/null \
    | tail -n 1 > '$OUT/bench_$c.json'"
done
WALL=$(( $(date +%s) - START_S ))
printf '%s\n' "${COMMANDS[@]}" > "$OUT/commands.txt"
python3 scripts/reproduce/aoh_report.py "$OUT" "$SCALE" "$NOTE" "$WALL" "$MACHINE" $CONTEXTS
echo "reproduce[aoh]: $OUT/REPORT.md"
