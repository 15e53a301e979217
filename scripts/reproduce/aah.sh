#!/usr/bin/env bash
# Reproduce the AAH paper's (Asymmetric Attention Heads) Tables 4, 5 and 6.
#   bash scripts/reproduce/aah.sh [--scale cpu|gpu|cluster] [--out DIR] [--smoke]
# cpu (default): the five regimes (configs/experiment_aah_cpu.json) and the screening ablations
#   (configs/experiment_aah_ablations_cpu.json) on the embedded corpus, 4 layers x 4 heads x 128
#   wide at context 512, windows {64, 128, 256, 512}, 150 updates of 1,024 tokens, one seed
#   (about 10 minutes on 2 cores); Table 6 from each branch's final checkpoint.
# gpu: the paper's shape (16 layers, 12 heads, 1536 wide, FFN 6144, context 4096, windows {512,
#   1024, 2048, 4096}) on one GPU, schedule shortened to STEPS updates (default 1000; the paper:
#   10,000), on the embedded (byte-level) corpus, not WikiText-2.
# cluster: writes OUT/jobs/*.sbatch (one `headwise experiment` per table on one GPU node, the
#   paper's 10,000 updates) and OUT/collect.sh, which builds the same report from their outputs.
# --smoke: the cpu protocol on a 2 x 4 x 32 model at context 128, 6 updates (for CI; numbers meaningless).
# Writes OUT/table4.{md,csv}, table5.*, table6.*, fig_acr_vs_loss.{png,csv} and OUT/REPORT.md.
PAPER=aah
source "$(dirname "$0")/common.sh" "$@"
STEPS=${STEPS:-1000}
SETS=()
case "$SCALE" in
  cpu) NOTE="4 layers x 4 heads x 128 wide, context 512, 150 updates of 1,024 tokens, seed 1337, byte-level KJV corpus"
    if [ "$SMOKE" = 1 ]; then  # the same protocol on a tiny model: every file is written, the numbers mean nothing
      NOTE="SMOKE RUN (numbers meaningless): 2 layers x 4 heads x 32 wide, context 128, windows {16, 32, 64, 128}, 6 updates of 256 tokens"
      SETS=(--set model.n_layer=2 --set model.n_embd=32 --set model.block_size=128 --set train.seq_len=128
            --set train.total_batch_tokens=256 --set train.steps=6 --set train.warmup_steps=1 --set train.eval_every=3
            --set train.eval_batches=2 --set train.log_every=1 --set "method.windows=[16,32,64,128]"
            --set method.warmup_steps=2 --set method.control_every=1 --set experiment.speed_rounds=1)
    fi ;;
  gpu|cluster)
    [ "$SCALE" = cluster ] && STEPS=10000
    NOTE="16 layers x 12 heads x 1536 wide, context 4096, $STEPS updates of 4,096 tokens (paper: 10,000), byte-level KJV corpus"
    SETS=(--set model.n_layer=16 --set model.n_head=12 --set model.n_embd=1536 --set model.block_size=4096
          --set train.seq_len=4096 --set train.micro_batch=1 --set train.total_batch_tokens=4096
          --set train.steps="$STEPS" --set train.warmup_steps=100 --set train.lr=3e-4 --set train.min_lr=0
          --set train.grad_clip=0 --set train.device=cuda --set "method.windows=[512,1024,2048,4096]"
          --set method.warmup_steps=100 --set train.eval_every=200 --set train.eval_batches=20) ;;
esac
experiments=(regimes:configs/experiment_aah_cpu.json ablations:configs/experiment_aah_ablations_cpu.json)
if [ "$SCALE" = cluster ]; then
  mkdir -p "$OUT/jobs"
  for e in "${experiments[@]}"; do
    name=${e%%:*}; cfg=${e#*:}
    cat > "$OUT/jobs/$name.sbatch" <<JOB
#!/usr/bin/env bash
#SBATCH --job-name=aah-$name
#SBATCH --nodes=1
#SBATCH --gpus-per-node=1
#SBATCH --cpus-per-task=8
#SBATCH --time=48:00:00
#SBATCH --output=$OUT/jobs/%x-%j.out
set -euo pipefail
cd "$(pwd)"
"$(realpath "$HW")" experiment --config $cfg --out $OUT/$name ${SETS[*]}
JOB
  done
  cat > "$OUT/collect.sh" <<COLLECT
#!/usr/bin/env bash
# Builds OUT/REPORT.md from the finished jobs' outputs.
set -euo pipefail
cd "$(pwd)"
COLLECT_ONLY=1 HEADWISE_BIN="$(realpath "$HW")" bash scripts/reproduce/aah.sh --scale cluster --out "$OUT"
COLLECT
  chmod +x "$OUT/collect.sh"
  if [ -z "${COLLECT_ONLY:-}" ]; then
    echo "reproduce[aah]: wrote $OUT/jobs/{regimes,ablations}.sbatch; submit them with sbatch, then run $OUT/collect.sh"
    exit 0
  fi
else
  for e in "${experiments[@]}"; do
    name=${e%%:*}; cfg=${e#*:}
    [ -e "$OUT/$name/results.json" ] || run "$HW" experiment --config "$cfg" --out "$OUT/$name" "${SETS[@]}"
  done
fi
run "$HW" aah-table --experiment "$OUT/regimes" --table 4 --json "$OUT/t4.json" > /dev/null
run "$HW" aah-table --experiment "$OUT/ablations" --table 5 --json "$OUT/t5.json" > /dev/null
run "$HW" aah-table --experiment "$OUT/regimes" --table 6 --json "$OUT/t6.json" > /dev/null
WALL=$(( $(date +%s) - START_S ))
printf '%s\n' "${COMMANDS[@]}" > "$OUT/commands.txt"
REPORT_SCALE=$SCALE
[ "$SMOKE" = 1 ] && REPORT_SCALE="cpu --smoke (numbers meaningless)"
python3 scripts/reproduce/aah_report.py "$OUT" "$REPORT_SCALE" "$NOTE" "$WALL" "$MACHINE"
echo "reproduce[aah]: $OUT/REPORT.md"
