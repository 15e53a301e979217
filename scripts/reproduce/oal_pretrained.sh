# shellcheck shell=bash
# OAL at --scale gpu|cluster on the pretrained models the user passes (sourced by
# scripts/reproduce/oal.sh after common.sh; its header says what runs). With --backend headwise
# every command runs on the CPU backend: Qwen2/Llama (RMSNorm, SwiGLU), LoRA adapters, the linear
# head and the baseline heads have no CUDA ops (src/model/model.cpp stops a CUDA model with them at
# its first line), and oal-tables, eval-tasks and the PPL evaluation below run on the CPU. So those
# jobs ask for CPUs only, and no GPU check runs (it checks the CUDA backend, which they do not use).
# With --backend torch headwise converts (CPU) and the LoRA fine-tune, the PPL and the task columns
# run in PyTorch on the job's GPU (scripts/reproduce/torch_route.py); the Tables 1-2 unit stays
# headwise's (oal-tables, CPU). SEQ_LEN and LAYERS_QWEN / LAYERS_LLAMA change the paper's T 4096 and
# layer ranges for a trial on a small model (the tests' tiny Llama).
# --scale gpu promises a GPU: with --backend headwise nothing here would use one, so it is refused.
if [ "$SCALE" = gpu ] && [ "$BACKEND" = headwise ]; then
  echo "error: OAL at --scale gpu --backend headwise would run every stage on the CPU: the CUDA backend has no Llama-family (RMSNorm, SwiGLU), LoRA, linear or baseline-head ops, and oal-tables is CPU-only; use --backend torch (PyTorch fine-tunes and evaluates on this GPU after headwise converts) or --scale cluster (CPU jobs)" >&2
  exit 1
fi
T=${SEQ_LEN:-4096}
# the paper's App. F: Qwen keeps 3 softmax layers at each end
declare -A LAYERS=([qwen]=${LAYERS_QWEN:-3-20} [llama]=${LAYERS_LLAMA:-1-14})
declare -A PAPER_NAME=([qwen]=Qwen2.5-0.5B [llama]=Llama-3.2-1B)
declare -A HF_TYPE=([qwen]=qwen2 [llama]=llama)
TABLE_LAYERS=4,12,20                          # Tables 1-2: Qwen's layers 4, 12 and 20 (App. A.2, Sec. 5.1)
ROWS="softmax_lora oal global performer dijiang taylorshift"
MODELS=()
[ -z "${BASE_QWEN:-}" ] || MODELS+=(qwen)
[ -z "${BASE_LLAMA:-}" ] || MODELS+=(llama)
if [ ${#MODELS[@]} = 0 ]; then
  echo "error: --scale $SCALE converts pretrained models: set BASE_QWEN=DIR (Qwen2.5-0.5B) and/or BASE_LLAMA=DIR (Llama-3.2-1B), Hugging Face directories with config.json, *.safetensors and tokenizer.json" >&2
  exit 1
fi
var_or() { local v=$1; echo "${!v:-$2}"; }  # var_or NAME DEFAULT
base_of() { realpath "$(var_or "BASE_${1^^}" "")"; }
wt2_of() { var_or "WT2_${1^^}" "data/wikitext2_$1"; }
wt103_of() { var_or "WT103_${1^^}" "data/wikitext103_$1"; }
test_of() { var_or "WT103_TEST_${1^^}" "data/wikitext103_$1_test"; }
for m in "${MODELS[@]}"; do
  require_hf_model "BASE_${m^^}" "$(var_or "BASE_${m^^}" "")" "${HF_TYPE[$m]}" "a Hugging Face ${PAPER_NAME[$m]} directory"
  prep="scripts/data/prepare_corpus.sh --tokenizer $(var_or "BASE_${m^^}" "")/tokenizer.json"
  require_shards "$(wt2_of "$m")" "OAL's calibration reads WikiText-2 in ${PAPER_NAME[$m]}'s tokenizer" \
    "$prep --out $(wt2_of "$m") --split train --input WIKITEXT2/train-*.parquet, then --split val --input WIKITEXT2/validation-*.parquet (docs/data-and-tokenizers.md)"
  require_shards "$(wt103_of "$m")" "OAL's LoRA stage trains on WikiText-103 in ${PAPER_NAME[$m]}'s tokenizer" \
    "$prep --out $(wt103_of "$m") --split train --input WIKITEXT103/train-*.parquet, then --split val --input WIKITEXT103/validation-*.parquet"
  require_shards "$(test_of "$m")" "Table 3's PPL is on the WikiText-103 test split in ${PAPER_NAME[$m]}'s tokenizer" \
    "$prep --out $(test_of "$m") --split val --input WIKITEXT103/test-*.parquet" val
done
TASK_FILES=()
if [ -n "${TASKS_DIR:-}" ]; then
  TASK_FILES=("$TASKS_DIR"/*.jsonl)
  [ -e "${TASK_FILES[0]}" ] || { echo "error: TASKS_DIR=$TASKS_DIR has no *.jsonl task files" >&2; exit 1; }
fi
if [ -n "${STEPS:-}" ]; then
  [[ "$STEPS" =~ ^[1-9][0-9]*$ ]] || { echo "error: STEPS='$STEPS' must be a positive integer" >&2; exit 1; }
fi
OUTA=$(realpath "$OUT")
HWA=$(realpath "$HW")
q() { printf '%q ' "$@"; }
row_sets() {  # the convert --set arguments of a Table 3 row (softmax_lora converts nothing)
  case "$1" in
    oal) ;;
    global) echo "--set method.grouping=fixed:1" ;;
    *) echo "--set method.kernel=$1" ;;
  esac
}
# unit_body UNIT: the commands of one unit (each skipped when its output is there: a rerun resumes).
unit_body() {
  local unit=$1 m row base dir init ft best test sets=()
  if [ "$unit" = qwen_tables ]; then
    base=$(base_of qwen)
    echo "mkdir -p $(q "$OUTA/qwen")"
    echo "[ -s $(q "$OUTA/qwen/tables/tables.json") ] || $(q "$HWA" oal-tables --checkpoint "$base" \
      --data "$(wt2_of qwen)/train_*.bin" --eval-data "$(wt2_of qwen)/val_*.bin" --out "$OUTA/qwen/tables" \
      --set method.layers=$TABLE_LAYERS --set method.calib_seq_len=$T --set method.stats_seq_len=512 \
      --eval-seqs 16 --positions 32 --random-draws 1000 --performer-features 250 --performer-seeds 5 \
      --fixed-groups 4 --max-groups 5)"
    return
  fi
  m=${unit%%_*} row=${unit#*_}
  base=$(base_of "$m") dir=$OUTA/$m init=$base ft=$OUTA/$m/ft_$row
  best=$ft/checkpoints/best test=$(test_of "$m")
  echo "mkdir -p $(q "$dir")"
  if [ "$row" = softmax_lora ] && [ "$BACKEND" = torch ]; then
    sets=(--lora 8,16,0.05)
  elif [ "$row" = softmax_lora ]; then
    sets=(--set model.lora.rank=8 --set model.lora.alpha=16 --set model.lora.dropout=0.05 --set model.lora.freeze_base=true)
  else
    init=$dir/conv_$row
    local calib=()
    case "$row" in oal|global) calib=(--calib "$(wt2_of "$m")/train_*.bin") ;; esac
    # shellcheck disable=SC2046
    echo "[ -s $(q "$init/config.json") ] || $(q "$HWA" convert --checkpoint "$base" --out "$init" --method oal "${calib[@]}" \
      --seq-len $T --set method.layers="${LAYERS[$m]}" $(row_sets "$row"))"
  fi
  [ -z "${STEPS:-}" ] || sets+=(--set train.steps="$STEPS" --set train.warmup_steps=$(( (STEPS * 5 + 99) / 100 ))
                                --set train.eval_every=$(( STEPS < 128 ? STEPS : 128 )))
  [ "$T" = 4096 ] || sets+=(--set train.seq_len="$T" --set train.total_batch_tokens="$T")
  if [ "$BACKEND" = torch ]; then
    unit_body_torch
    return
  fi
  echo "[ -s $(q "$ft/summary.json") ] || $(q "$HWA" train --config configs/oal_pretrained_ft.json --out "$ft" --resume auto --init-from "$init" \
    --set "data.train=$(wt103_of "$m")/train_*.bin" --set "data.val=$(wt103_of "$m")/val_*.bin" "${sets[@]}")"
  # Every whole 4096-token block of the test split (a block reads T + 1 tokens: T predictions).
  echo "blocks=\$(python3 -c 'import struct, sys; T = int(sys.argv[1]); print(sum((struct.unpack(\"<3i\", open(f, \"rb\").read(12))[2] - 1) // T for f in sys.argv[2:]))' $T $(printf %q "$test")/val_*.bin)"
  echo "[ -s $(q "$dir/ppl_$row.json") ] || { $(q "$HWA" eval --checkpoint "$best" --data "$test/val_*.bin" --seq-len $T --micro-batch 1) --batches \"\$blocks\" | tail -n 1 > $(q "$dir/ppl_$row.json.part") && mv $(q "$dir/ppl_$row.json.part" "$dir/ppl_$row.json"); }"
  if [ ${#TASK_FILES[@]} -gt 0 ]; then
    local targs=() f
    for f in "${TASK_FILES[@]}"; do targs+=(--task "$(realpath "$f")"); done
    echo "mkdir -p $(q "$OUTA/tasks")"
    echo "[ -s $(q "$OUTA/tasks/${m}_$row.json") ] || $(q "$HWA" eval-tasks --checkpoint "$best" "${targs[@]}" --json "$OUTA/tasks/${m}_$row.json" --no-progress)"
  fi
}
# --backend torch: a Table 3 unit's fine-tune, PPL and task columns in PyTorch (unit_body's locals).
unit_body_torch() {
  local tr='"$TORCH_PY" scripts/reproduce/torch_route.py'
  echo "[ -s $(q "$ft/summary.json") ] || $tr $(q finetune --checkpoint "$init" --config configs/oal_pretrained_ft.json \
    --out "$ft" --set "data.train=$(wt103_of "$m")/train_*.bin" --set "data.val=$(wt103_of "$m")/val_*.bin" "${sets[@]}")"
  echo "[ -s $(q "$dir/ppl_$row.json") ] || { $tr $(q ppl --checkpoint "$best" --data "$test/val_*.bin" --seq-len $T) | tail -n 1 > $(q "$dir/ppl_$row.json.part") && mv $(q "$dir/ppl_$row.json.part" "$dir/ppl_$row.json"); }"
  if [ ${#TASK_FILES[@]} -gt 0 ]; then
    local targs=() f
    for f in "${TASK_FILES[@]}"; do targs+=(--task "$(realpath "$f")"); done
    echo "mkdir -p $(q "$OUTA/tasks")"
    echo "[ -s $(q "$OUTA/tasks/${m}_$row.json") ] || $tr $(q tasks --checkpoint "$best" "${targs[@]}" --json "$OUTA/tasks/${m}_$row.json") > /dev/null"
  fi
}
UNITS=()
for m in "${MODELS[@]}"; do
  [ "$m" != qwen ] || UNITS+=(qwen_tables)
  for row in $ROWS; do UNITS+=("${m}_$row"); done
done
[ "$SCALE" != cluster ] || require_slurm
mkdir -p "$OUT/jobs"
for u in "${UNITS[@]}"; do
  torch_unit=0
  [ "$BACKEND" = torch ] && [ "$u" != qwen_tables ] && torch_unit=1
  if [ "$SCALE" = cluster ] && [ $torch_unit = 1 ]; then
    {
      printf '%s\n' '#!/usr/bin/env bash' "#SBATCH --job-name=oal-$u" '#SBATCH --nodes=1' '#SBATCH --ntasks=1' \
        "#SBATCH --cpus-per-task=${OAL_CPUS:-16}" '#SBATCH --gpus-per-node=1' '#SBATCH --time=24:00:00' \
        "#SBATCH --output=$OUTA/jobs/%x-%j.out" \
        '# --backend torch: headwise converts on the CPU, then PyTorch fine-tunes (PEFT LoRA), measures the PPL and' \
        '# runs lm-evaluation-harness on the GPU (scripts/reproduce/torch_route.py).' \
        'set -euo pipefail' "cd \"$(pwd)\"" 'export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}'
      torch_env_lines
      unit_body "$u"
    } > "$OUT/jobs/$u.sbatch"
  elif [ "$SCALE" = cluster ]; then
    {
      printf '%s\n' '#!/usr/bin/env bash' "#SBATCH --job-name=oal-$u" '#SBATCH --nodes=1' '#SBATCH --ntasks=1' \
        "#SBATCH --cpus-per-task=${OAL_CPUS:-32}" '#SBATCH --time=96:00:00' "#SBATCH --output=$OUTA/jobs/%x-%j.out" \
        '# CPU backend only, no GPU: the CUDA backend has no Llama-family (RMSNorm, SwiGLU), LoRA, linear or' \
        '# baseline-head ops, and oal-tables / eval / eval-tasks run on the CPU (scripts/reproduce/oal_pretrained.sh).' \
        'set -euo pipefail' "cd \"$(pwd)\"" 'export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}'
      unit_body "$u"
    } > "$OUT/jobs/$u.sbatch"
  else
    { printf '%s\n' '#!/usr/bin/env bash' 'set -euo pipefail' "cd \"$(pwd)\""; [ $torch_unit = 0 ] || torch_env_lines
      unit_body "$u"; } > "$OUT/jobs/$u.sh"
  fi
done
if [ "$SCALE" = cluster ]; then
  env_line=""
  for m in "${MODELS[@]}"; do
    env_line+="BASE_${m^^}=$(q "$(base_of "$m")")WT2_${m^^}=$(q "$(wt2_of "$m")")WT103_${m^^}=$(q "$(wt103_of "$m")")WT103_TEST_${m^^}=$(q "$(test_of "$m")")"
  done
  [ -z "${TASKS_DIR:-}" ] || env_line+="TASKS_DIR=$(q "$(realpath "$TASKS_DIR")")"
  [ -z "${STEPS:-}" ] || env_line+="STEPS=$STEPS "
  [ -z "${SEQ_LEN:-}" ] || env_line+="SEQ_LEN=$SEQ_LEN "
  [ -z "${LAYERS_QWEN:-}" ] || env_line+="LAYERS_QWEN=$LAYERS_QWEN "
  [ -z "${LAYERS_LLAMA:-}" ] || env_line+="LAYERS_LLAMA=$LAYERS_LLAMA "
  [ -z "${TORCH_VENV:-}" ] || env_line+="TORCH_VENV=$(q "$(realpath -m "$TORCH_VENV")")"
  cat > "$OUT/collect.sh" <<COLLECT
#!/usr/bin/env bash
# Builds OUT/REPORT.md from the finished jobs' outputs.
set -euo pipefail
cd "$(pwd)"
COLLECT_ONLY=1 ${env_line}HEADWISE_BIN=$(q "$HWA")bash scripts/reproduce/oal.sh --scale cluster --backend $BACKEND --out $(q "$OUTA")
COLLECT
  chmod +x "$OUT/collect.sh"
  if [ -z "${COLLECT_ONLY:-}" ]; then
    kind="CPU jobs"; [ "$BACKEND" = torch ] && kind="GPU jobs for PyTorch, Tables 1-2 on the CPU"
    echo "reproduce[oal]: wrote $(cd "$OUT/jobs" && ls -- *.sbatch | tr '\n' ' ')in $OUT/jobs ($kind); submit them with sbatch, then run $OUT/collect.sh"
    exit 0
  fi
else
  for u in "${UNITS[@]}"; do
    run bash "$OUT/jobs/$u.sh" > "$OUT/jobs/$u.log" 2>&1 \
      || { echo "error: unit $u failed; its log: $OUT/jobs/$u.log" >&2; tail -n 5 "$OUT/jobs/$u.log" >&2; exit 1; }
  done
fi
# The collector: every unit's output must be there.
for u in "${UNITS[@]}"; do
  case "$u" in
    qwen_tables) need=$OUT/qwen/tables/tables.json ;;
    *) need=$OUT/${u%%_*}/ppl_${u#*_}.json ;;
  esac
  [ "$u" = qwen_tables ] || [ ${#TASK_FILES[@]} = 0 ] || [ ! -s "$need" ] || need=$OUT/tasks/$u.json
  [ -s "$need" ] || { echo "error: $need missing: unit $u (OUT/jobs/$u.*) has not finished" >&2; exit 1; }
  ext="sh"; [ "$SCALE" = cluster ] && ext="sbatch"
  while IFS= read -r line; do COMMANDS+=("$line"); done < <(grep -E '^\[ -s |^blocks=' "$OUT/jobs/$u.$ext")
done
# The task columns: the jobs ran eval-tasks (OUT/tasks/<unit>.json); Table 3 shows their acc_norm.
if [ ${#TASK_FILES[@]} -gt 0 ]; then
  EVALS=()
  for u in "${UNITS[@]}"; do [ "$u" = qwen_tables ] || EVALS+=("$u=$OUT/tasks/$u.json"); done
  python3 scripts/reproduce/tasks_table.py "$OUT" "Tasks: every task file of TASKS_DIR=$TASKS_DIR (headwise eval-tasks in each Table 3 job)." "${EVALS[@]}"
else
  python3 scripts/reproduce/tasks_table.py "$OUT" --not-run "no task files: set TASKS_DIR to a folder of eval-tasks JSONL files (PIQA, HellaSwag, ARC-Easy)"
fi
ON="the CPU backend"
[ "$BACKEND" = torch ] && ON="PyTorch (--backend torch: headwise converts, transformers + PEFT + lm-evaluation-harness fine-tune and evaluate)"
NOTE="the paper's protocol on $ON: $(for m in "${MODELS[@]}"; do printf '%s (layers %s converted) ' "${PAPER_NAME[$m]}" "${LAYERS[$m]}"; done)at T $T; Tables 1-2 on Qwen's layers $TABLE_LAYERS (1,000 random draws, 16 held-out WikiText-2 windows); Table 3 after ${STEPS:-512} LoRA updates of one $T-token block (rank 8, alpha 16, dropout 0.05), PPL of the best checkpoint on every $T-token block of the WikiText-103 test split"
WALL=$(( $(date +%s) - START_S ))
printf '%s\n' "${COMMANDS[@]}" > "$OUT/commands.txt"
python3 scripts/reproduce/oal_pretrained_report.py "$OUT" "$SCALE" "$NOTE" "$WALL" "$MACHINE" "${MODELS[@]}"
append_task_section
echo "reproduce[oal]: $OUT/REPORT.md"
