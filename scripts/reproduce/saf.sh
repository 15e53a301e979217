#!/usr/bin/env bash
# Reproduce the SAF paper's (Selective Attention Freezing, arXiv 2609.34650) headline results:
# Table 1 (variance vs random vs same-head pruning, matched tokens and matched time), Table 2 (PPL
# change, update speedup, memory by context and ratio, mean ± std over seeds), Fig. 3 (the five
# fixed-pattern kinds vs ratio), the timing of the intervention (25%, 50%, 75%, after training)
# and the MQAR curve (query accuracy vs key-value pairs).
#   bash scripts/reproduce/saf.sh [--scale cpu|gpu|cluster] [--out DIR] [--smoke]
# Five `headwise experiment` runs, each one trunk per seed with branches continued from it:
#   tokens   ordinary, SAF 25%/50%, same-head pruning, random heads, Gate-Taylor pruning (25%),
#            SEEDS, A-B-B-A speed phase: Table 1 (matched tokens), Table 2 at the main context,
#            the final checkpoints MQAR adapts;
#   time     the same selections with budget "time" (SEEDS): Table 1 (matched time);
#   context_<T>  ordinary, SAF 25%/50% at each further context (SEEDS, speed phase): Table 2;
#   study    one seed: the five patterns at 25% and 50% from the midpoint (Fig. 3) and SAF 25% at
#            25%, 75% and after training (the timing study; its 50% row is Fig. 3's mean 25%);
# then `headwise mqar` on the tokens run's ordinary, SAF 25%, pruning and Gate-Taylor finals.
# cpu (default): configs/saf_cpu_table2.json's 4 x 4 x 128 model shrunk to 100 updates of 2,048
#   tokens (8 evaluation batches), contexts 128, 256 (main), 512, seeds 1337-1339, one A-B-B-A
#   round; MQAR at length 64 with 200 adaptation updates of 16. About 5,500 update-equivalents:
#   15-30 minutes on 2 idle cores (an estimate from 0.15-0.31 s per update, not measured end to end).
# gpu: the paper's 124M configs (configs/saf_124m_{4k,8k,16k}_learned.json, train.device=cuda)
#   with the schedule shortened to STEPS updates (default 500; the paper: 5,000), on data/fineweb
#   when its shards exist, else the byte-level KJV corpus; MQAR runs on the CPU (headwise mqar has
#   no device option) with MQAR_STEPS (default 300) updates.
#   gpu and cluster also run Table 2 at RoPE positions: rope_<T> with configs/saf_124m_{4k,8k,16k}_rope.json.
# cluster: writes OUT/jobs/*.sbatch (the full 124M configurations: 5,000 updates, 3 seeds, data
#   paths as in the configs; jobs/1b_8k.sbatch: configs/saf_1b_8k_rope.json as one job of 4 ranks on
#   4 GPUs, LAUNCH=pmix|file as scripts/slurm/train_1node_8gpu.sbatch, its update speed the slowest
#   rank's per update) and OUT/collect.sh, which builds the same report from their outputs.
# --smoke: a 2 x 2 x 32 model, 4 updates, 2 seeds, contexts 16 and 32: every file is written, the
#   numbers mean nothing (for CI).
# Environment: HEADWISE_BIN (the binary), SEEDS (a JSON list, default [1337,1338,1339]), STEPS
#   (cpu: 100, gpu: 500), MQAR_STEPS (cpu: 200, gpu: 300). A finished experiment (its results.json)
#   or MQAR run is not run again: rerunning into the same OUT resumes. TASKS_DIR (gpu/cluster): a
#   folder of eval-tasks JSONL files for the task columns (cpu: a next-verse task from the corpus;
#   without TASKS_DIR the report says "not run (no task files)").
# Writes OUT/table1.{md,csv}, table2.*, fig3.*, timing.*, mqar.*, fig3_patterns.{png,csv},
# fig_timing.{png,csv}, fig_mqar.{png,csv}, tasks.{md,csv} and OUT/REPORT.md.
PAPER=saf
source "$(dirname "$0")/common.sh" "$@"
SEEDS=${SEEDS:-'[1337,1338,1339]'}
python3 -c "import json,sys; s=json.loads(sys.argv[1]); assert isinstance(s, list) and s and all(isinstance(x, int) and x >= 0 for x in s)" \
  "$SEEDS" 2>/dev/null || { echo "error: SEEDS must be a JSON list of non-negative integers, e.g. [1337,1338], got '$SEEDS'" >&2; exit 1; }
# Commands go to the report shell-quoted (their JSON arguments must survive a copy and paste).
run() { COMMANDS+=("$(printf '%q ' "$@")"); echo "reproduce[saf]: ${COMMANDS[-1]}" >&2; "$@"; }
# A-B-B-A rounds of the update-speed phase (each 2 pairs of fresh processes): the speed claims read
# the interval of the pairs (scripts/reproduce/verdicts.py).
SPEED_ROUNDS=5
SETS=()
MQAR_OPTS=()
set_all() { for s in "$@"; do SETS+=(--set "$s"); done; }
case "$SCALE" in
  cpu)
    CFG_MAIN=configs/saf_cpu_table2.json
    MAIN_T=256
    if [ "$SMOKE" = 1 ]; then
      SEEDS='[1337,1338]'
      CONTEXTS="16 32"; MAIN_T=32
      SPEED_ROUNDS=1
      set_all model.n_layer=2 model.n_head=2 model.n_embd=32 model.block_size=32 train.seq_len=32 \
        train.micro_batch=2 train.total_batch_tokens=64 train.steps=4 train.warmup_steps=1 train.eval_batches=2 \
        train.log_every=1 method.calib_seqs=4 method.fit_steps=10
      TOKENS_PER_UPDATE=64
      MQAR_OPTS=(--vocab 16 --seq-len 32 --train-pairs 2 --eval-pairs 2,4 --steps 4 --batch 4 --lr 2e-3
                 --eval-examples 8 --eval-batch 8 --log-every 2)
      NOTE="SMOKE RUN (numbers meaningless): 2 layers x 2 heads x 32 wide, context 32 (and 16), 4 updates of 64 tokens, seeds 1337-1338, MQAR 4 updates at length 32"
    else
      CONTEXTS="128 256 512"
      STEPS=${STEPS:-100}
      set_all train.micro_batch=8 train.total_batch_tokens=2048 train.steps="$STEPS" train.warmup_steps=10 \
        train.eval_batches=8 train.log_every=50 method.calib_seqs=16
      TOKENS_PER_UPDATE=2048
      MQAR_STEPS=${MQAR_STEPS:-200}
      MQAR_OPTS=(--vocab 64 --seq-len 64 --train-pairs 4 --eval-pairs 4,8,12,16 --steps "$MQAR_STEPS" --batch 16 --lr 2e-3
                 --eval-examples 64 --log-every 100)
      NOTE="4 layers x 4 heads x 128 wide (configs/saf_cpu_table2.json), $STEPS updates of 2,048 tokens (paper: 124M, 5,000 of 491,520), contexts 128/256/512 (paper: 4K/8K/16K), byte-level KJV corpus, seeds $SEEDS, SAF at the midpoint; MQAR at length 64, vocabulary 64, 4 training pairs, $MQAR_STEPS updates of 16 (paper: 512, 8192, 8, 1,500)"
    fi ;;
  gpu|cluster)
    CFG_MAIN=configs/saf_124m_4k_learned.json
    MAIN_T=4096
    CONTEXTS="4096 8192 16384"
    SPEED_ROUNDS=3
    if [ "$SCALE" = gpu ]; then
      STEPS=${STEPS:-500}
      set_all train.steps="$STEPS" train.warmup_steps=$(( STEPS / 10 )) train.eval_every=0 train.checkpoint_every=0
      if ! ls data/fineweb/train_*.bin > /dev/null 2>&1; then
        [ -e data/kjv/train_000000.bin ] || run bash scripts/prepare_default_corpus.sh "$HW" data/kjv
        set_all 'data.train=data/kjv/train_*.bin' 'data.val=data/kjv/val_*.bin' train.eval_batches=6
        DATA_NOTE="byte-level KJV corpus (no data/fineweb shards here; the paper: FineWeb-Edu)"
      else
        DATA_NOTE="data/fineweb shards"
      fi
      MQAR_STEPS=${MQAR_STEPS:-300}
      NOTE="the paper's 124M shape (12 x 12 x 768) at 4K/8K/16K on one GPU (learned positions and RoPE; the 1B 8K run needs 4 GPUs: --scale cluster), $STEPS updates of 491,520 tokens (paper: 5,000), $DATA_NOTE, seeds $SEEDS; MQAR on the CPU, $MQAR_STEPS updates (paper: 1,500)"
    else
      MQAR_STEPS=1500
      NOTE="the paper's full 124M configurations: 5,000 updates of 491,520 tokens at 4K/8K/16K (learned positions and RoPE), seeds $SEEDS, the 1B 8K RoPE run on 4 GPUs (configs/saf_1b_8k_rope.json, one seed), data as in configs/saf_124m_*.json; MQAR with the paper's sizes (1,500 updates)"
    fi
    TOKENS_PER_UPDATE=491520
    MQAR_OPTS=(--steps "$MQAR_STEPS") ;;  # headwise mqar's defaults are the paper's sizes
esac
# gpu/cluster: Table 2 also at RoPE positions (the paper's 8K/16K rows and its prefill study use RoPE
# checkpoints), one experiment rope_<T> per context beside the learned-position context_<T>.
ROPE_CONTEXTS=""
[ "$SCALE" = cpu ] || ROPE_CONTEXTS="4096 8192 16384"
rope_config() { echo "configs/saf_124m_$(( $1 / 1024 ))k_rope.json"; }
config_for() {  # config_for T: the run config of context T
  case "$SCALE:$1" in
    gpu:4096|cluster:4096) echo configs/saf_124m_4k_learned.json ;;
    gpu:8192|cluster:8192) echo configs/saf_124m_8k_learned.json ;;
    gpu:16384|cluster:16384) echo configs/saf_124m_16k_learned.json ;;
    *) echo "$CFG_MAIN" ;;
  esac
}
context_sets() {  # context_sets T: the cpu model at context T keeps the update's token count
  [ "$SCALE" = cpu ] || return 0
  echo "--set model.block_size=$1 --set train.seq_len=$1 --set train.micro_batch=$(( TOKENS_PER_UPDATE / $1 ))"
}
# Explicit branch lists (method objects merged onto the config's method section, name saf).
B_ORD='{"name":"ordinary","method":{"name":"none"}}'
b() { echo "{\"name\":\"$1\",\"method\":{\"ratio\":$2${3:+,$3}}}"; }
TIME_BRANCHES="[$B_ORD,$(b saf_25 0.25),$(b saf_50 0.5),$(b prune_25 0.25 '"mode":"prune"'),$(b random_25 0.25 '"selector":"random"'),$(b random_50 0.5 '"selector":"random"')]"
STUDY="$B_ORD"
for r in 25 50; do
  for p in mean sharp_mean gaussian dirichlet structured_random; do
    STUDY+=",$(b "${p}_$r" "0.$r" "\"pattern\":\"$p\",\"at_fraction\":0.5")"
  done
done
for f in 25 75 100; do STUDY+=",$(b "saf_25_at_$f" 0.25 "\"at_fraction\":$([ $f = 100 ] && echo 1.0 || echo 0.$f)")"; done
# name|config|extra --set arguments (no "|" inside: the separator)
EXPERIMENTS=("tokens|$CFG_MAIN|experiment.seeds=$SEEDS|experiment.ratios=[0.25,0.5]|experiment.controls=[\"prune\",\"random\",\"gate_taylor\"]|experiment.save_final=true|experiment.speed_rounds=$SPEED_ROUNDS"
             "time|$CFG_MAIN|experiment.seeds=$SEEDS|experiment.budget=time|experiment.branches=$TIME_BRANCHES|experiment.speed_rounds=0"
             "study|$CFG_MAIN|experiment.seeds=[1337]|experiment.branches=[$STUDY]|experiment.speed_rounds=0")
for t in $CONTEXTS; do
  [ "$t" = "$MAIN_T" ] && continue
  EXPERIMENTS+=("context_$t|$(config_for "$t")|experiment.seeds=$SEEDS|experiment.ratios=[0.25,0.5]|experiment.controls=[]|experiment.speed_rounds=$SPEED_ROUNDS")
done
for t in $ROPE_CONTEXTS; do
  EXPERIMENTS+=("rope_$t|$(rope_config "$t")|experiment.seeds=$SEEDS|experiment.ratios=[0.25,0.5]|experiment.controls=[]|experiment.speed_rounds=$SPEED_ROUNDS")
done
# cluster: the 1B 8K RoPE row as one job over 4 GPUs (the distributed trainer, NCCL all-reduce);
# its update speed is the in-run one measured across ranks (each update's time is the slowest
# rank's, all-reduce included: result.json "update_ms_ranks"); the A-B-B-A phase is one process
# on one GPU, so it is off here. The config's own experiment section: seed 1337, 25%/50%, Gate-Taylor.
ONE_B=""
if [ "$SCALE" = cluster ]; then
  ONE_B=1b_8k
  EXPERIMENTS+=("1b_8k|configs/saf_1b_8k_rope.json|experiment.speed_rounds=0")
fi
exp_args() {  # exp_args SPEC: prints one argument per line (config, out, sets)
  local parts
  IFS='|' read -ra parts <<< "$1"
  echo "--config"; echo "${parts[1]}"; echo "--out"; echo "$OUT/${parts[0]}"
  for a in "${SETS[@]}"; do echo "$a"; done
  local t=${parts[0]#context_}  # after SETS: a context's shape wins over the shared overrides
  if [ "$t" != "${parts[0]}" ]; then for a in $(context_sets "$t"); do echo "$a"; done; fi
  for s in "${parts[@]:2}"; do echo "--set"; echo "$s"; done
}
MQAR_BRANCHES="ordinary saf_25 prune_25 gate_taylor_25"
mqar_seeds() { python3 -c "import json,sys; print(' '.join(str(s) for s in json.loads(sys.argv[1])))" "$SEEDS"; }
if [ "$SCALE" = cluster ]; then
  mkdir -p "$OUT/jobs"
  for e in "${EXPERIMENTS[@]}"; do
    name=${e%%|*}
    mapfile -t args < <(exp_args "$e")
    gpus=1
    [ "$name" = "$ONE_B" ] && gpus=4
    {
      printf '%s\n' '#!/usr/bin/env bash' "#SBATCH --job-name=saf-$name" '#SBATCH --nodes=1' "#SBATCH --ntasks-per-node=$gpus" \
        "#SBATCH --gpus-per-node=$gpus" '#SBATCH --cpus-per-task=8' '#SBATCH --time=96:00:00' \
        "#SBATCH --output=$OUT/jobs/%x-%j.out" 'set -euo pipefail' "cd \"$(pwd)\""
      gpu_check_step
      if [ "$gpus" = 1 ]; then
        printf '%q ' "$(realpath "$HW")" experiment "${args[@]}"; echo
      else
        # One rank per GPU as scripts/slurm/train_1node_8gpu.sbatch launches them: LAUNCH=pmix (default,
        # srun --mpi=pmix carries the NCCL id) or LAUNCH=file (no PMIx: the ranks meet in a shared folder,
        # proven by a launch-check step first).
        printf '%s\n' '# --- 4 ranks, one per GPU: LAUNCH=pmix (default) or LAUNCH=file (a Slurm without PMIx)' \
          'export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}} NCCL_DEBUG=${NCCL_DEBUG:-WARN}' \
          "export HEADWISE_NCCL_ID_DIR=\${HEADWISE_NCCL_ID_DIR:-$OUT/$name/.nccl_id}" \
          'mkdir -p "$HEADWISE_NCCL_ID_DIR"' \
          'case "${LAUNCH:-pmix}" in' \
          '  pmix) srun_mpi=--mpi=pmix ;;' \
          "  file) srun_mpi=--mpi=none; srun --mpi=none --kill-on-bad-exit=1 $(printf '%q' "$(realpath "$HW")") launch-check ;;" \
          '  *) echo "error: LAUNCH='"'"'$LAUNCH'"'"' must be pmix or file" >&2; exit 1 ;;' \
          'esac'
        printf 'srun "$srun_mpi" --kill-on-bad-exit=1 '; printf '%q ' "$(realpath "$HW")" experiment "${args[@]}"; echo
      fi
    } > "$OUT/jobs/$name.sbatch"
  done
  {
    printf '%s\n' '#!/usr/bin/env bash' '# After jobs/tokens.sbatch: sbatch --dependency=afterok:<tokens job id> jobs/mqar.sbatch' \
      '#SBATCH --job-name=saf-mqar' '#SBATCH --nodes=1' '#SBATCH --cpus-per-task=16' '#SBATCH --time=96:00:00' \
      "#SBATCH --output=$OUT/jobs/%x-%j.out" 'set -euo pipefail' "cd \"$(pwd)\""
    for s in $(mqar_seeds); do
      for br in $MQAR_BRANCHES; do
        printf '%q ' "$(realpath "$HW")" mqar --checkpoint "$OUT/tokens/seed_$s/$br/final" --out "$OUT/mqar/seed_$s/$br" \
          --label "$br" "${MQAR_OPTS[@]}"; echo
      done
    done
  } > "$OUT/jobs/mqar.sbatch"
  cat > "$OUT/collect.sh" <<COLLECT
#!/usr/bin/env bash
# Builds OUT/REPORT.md from the finished jobs' outputs.
set -euo pipefail
cd "$(pwd)"
COLLECT_ONLY=1 HEADWISE_BIN="$(realpath "$HW")" bash scripts/reproduce/saf.sh --scale cluster --out "$OUT"
COLLECT
  chmod +x "$OUT/collect.sh"
  for j in "$OUT"/jobs/*.sbatch; do COMMANDS+=("sbatch $j  # $(grep -cE '^(/|srun )' "$j" || true) command(s)"); done
  if [ -z "${COLLECT_ONLY:-}" ]; then
    echo "reproduce[saf]: wrote $OUT/jobs/*.sbatch; submit them with sbatch (mqar.sbatch after tokens.sbatch), then run $OUT/collect.sh"
    exit 0
  fi
else
  for e in "${EXPERIMENTS[@]}"; do
    name=${e%%|*}
    mapfile -t args < <(exp_args "$e")
    [ -e "$OUT/$name/results.json" ] || run "$HW" experiment "${args[@]}" > "$OUT/$name.log" 2>&1 \
      || { echo "error: experiment '$name' failed; its log: $OUT/$name.log" >&2; tail -n 5 "$OUT/$name.log" >&2; exit 1; }
  done
  for s in $(mqar_seeds); do
    for br in $MQAR_BRANCHES; do
      [ -e "$OUT/mqar/seed_$s/$br/mqar.json" ] && continue
      run "$HW" mqar --checkpoint "$OUT/tokens/seed_$s/$br/final" --out "$OUT/mqar/seed_$s/$br" --label "$br" \
        "${MQAR_OPTS[@]}" > "$OUT/mqar_${s}_$br.log" 2>&1 \
        || { echo "error: mqar of seed $s $br failed; its log: $OUT/mqar_${s}_$br.log" >&2; exit 1; }
    done
  done
fi
# Task columns (the paper's zero-shot accuracy of the ordinary model and SAF at 25% / 50%).
TASK_MODELS=()
for s in $(mqar_seeds); do
  for br in ordinary saf_25 saf_50; do TASK_MODELS+=("${br}_seed$s=$OUT/tokens/seed_$s/$br/final"); done
done
task_columns "${TASK_MODELS[@]}"
WALL=$(( $(date +%s) - START_S ))
printf '%s\n' "${COMMANDS[@]}" > "$OUT/commands.txt"
REPORT_SCALE=$SCALE
[ "$SMOKE" = 1 ] && REPORT_SCALE="cpu --smoke (numbers meaningless)"
SAF_ROPE_CONTEXTS="$ROPE_CONTEXTS" SAF_1B="$ONE_B" python3 scripts/reproduce/saf_report.py "$OUT" "$REPORT_SCALE" "$NOTE" "$WALL" "$MACHINE" "$MAIN_T" $CONTEXTS
append_task_section
echo "reproduce[saf]: $OUT/REPORT.md"
