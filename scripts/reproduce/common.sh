# Shared by scripts/reproduce/<paper>.sh (sourced): options, the binary, the machine.
#   --scale cpu|gpu|cluster (default cpu), --out DIR (default runs/reproduce/<paper>-<scale>)
#   --smoke: the cpu protocol shrunk to a tiny model and a few steps (under 2 minutes), for CI:
#   every table, CSV, PNG and claim line is written, the numbers mean nothing. Scripts read SMOKE=1.
#   --backend headwise|torch (default headwise; gpu/cluster scales of OAL and AoH): torch runs the
#   stages after headwise's conversion in PyTorch (transformers, PEFT, lm-evaluation-harness) on the
#   GPU, through the model converted checkpoints carry (scripts/reproduce/torch_route.py), with the
#   Python of TORCH_VENV (default build/pyvenv, made by scripts/python_env.sh). Scripts read BACKEND.
# HEADWISE_BIN names the binary; otherwise build/headwise is built by scripts/setup.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SCALE=cpu
SMOKE=0
OUT=""
BACKEND=headwise
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) SCALE=${2:-}; shift 2 ;;
    --out) OUT=${2:-}; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    --backend) BACKEND=${2:-}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//' | head -n -1; exit 0 ;;
    *) echo "error: unknown option '$1' (use --scale cpu|gpu|cluster, --out DIR, --smoke, --backend headwise|torch)" >&2; exit 1 ;;
  esac
done
case "$SCALE" in cpu|gpu|cluster) ;; *) echo "error: --scale must be cpu, gpu or cluster, got '$SCALE'" >&2; exit 1 ;; esac
case "$BACKEND" in headwise|torch) ;; *) echo "error: --backend must be headwise or torch, got '$BACKEND'" >&2; exit 1 ;; esac
if [ "$BACKEND" = torch ] && { [ "$SCALE" = cpu ] || { [ "$PAPER" != oal ] && [ "$PAPER" != aoh ]; }; }; then
  echo "error: --backend torch is the GPU route of OAL's and AoH's --scale gpu|cluster runs on pretrained models" >&2; exit 1
fi
if [ "$SMOKE" = 1 ] && [ "$SCALE" != cpu ]; then
  echo "error: --smoke shrinks the cpu protocol; it cannot be combined with --scale $SCALE" >&2; exit 1
fi
OUT=${OUT:-runs/reproduce/${PAPER}-$([ "$SMOKE" = 1 ] && echo smoke || echo "$SCALE")}
mkdir -p "$OUT"
if [ -n "${HEADWISE_BIN:-}" ]; then
  HW=$HEADWISE_BIN
  [ -x "$HW" ] || { echo "error: HEADWISE_BIN=$HW is not an executable" >&2; exit 1; }
else
  HW=build/headwise
  [ -x "$HW" ] || HEADWISE_BUILD_TARGET=headwise bash scripts/setup.sh build
fi
START_S=$(date +%s)
MACHINE="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), \
$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)$( (command -v nvidia-smi >/dev/null && \
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | sed 's/^/, GPU /') || true)"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
COMMANDS=()
run() {  # run CMD...: log it for the report, run it
  COMMANDS+=("$*")
  echo "reproduce[$PAPER]: $*" >&2
  "$@"
}
[ "$SCALE" != cpu ] || [ -e data/kjv/train_000000.bin ] || run bash scripts/prepare_default_corpus.sh "$HW" data/kjv
# --backend torch: the job lines that make the Python environment (scripts/python_env.sh, once per
# VENV) and name its Python (TORCH_PY) in a job's text.
torch_env_lines() {
  local venv
  venv=$(realpath -m "${TORCH_VENV:-build/pyvenv}")
  echo "bash scripts/python_env.sh $(printf %q "$venv") torch transformers==5.24.0 safetensors peft==0.21.2 'lm_eval[hf]==0.4.13' || { echo 'error: the PyTorch environment could not be installed' >&2; exit 1; }"
  echo "TORCH_PY=$(printf %q "$venv/bin/hwpy")"
  echo 'export HF_HUB_OFFLINE=1'
}
# The task columns (zero-shot multiple choice, `headwise eval-tasks`) of the models LABEL=CKPT...:
# at cpu scale a next-verse task made from the held-out end of the KJV text (the last 5%, which
# `prepare` keeps for validation; --smoke: short verses from anywhere, to fit a context of 32);
# at gpu/cluster scale every TASKS_DIR/*.jsonl, or "not run (no task files)". Writes OUT/tasks.md
# and OUT/tasks.csv; append_task_section adds tasks.md to REPORT.md after the paper's writer.
task_columns() {
  local dir=$OUT/tasks files=() evals=() note
  mkdir -p "$dir"
  if [ "$SCALE" = cpu ]; then
    if [ ! -s "$dir/verses.jsonl" ]; then
      env -u COLUMNS bible -f Gen1:1-Rev22:21 > "$dir/kjv.txt"
      if [ "$SMOKE" = 1 ]; then
        run python3 scripts/make_verse_task.py --text "$dir/kjv.txt" --out "$dir/verses.jsonl" --n 8 --from 0 --max-chars 24
      else
        run python3 scripts/make_verse_task.py --text "$dir/kjv.txt" --out "$dir/verses.jsonl" --n 200
      fi
    fi
    files=("$dir/verses.jsonl")
    note="Task: which verse comes next, among the true one and three others (scripts/make_verse_task.py on the held-out last 5% of the KJV text, 4 choices, chance 0.25)."
    [ "$SMOKE" = 1 ] && note="Task (smoke): which verse comes next, 8 examples with choices of at most 24 characters from the whole KJV text (numbers meaningless)."
  elif [ -n "${TASKS_DIR:-}" ]; then
    files=("$TASKS_DIR"/*.jsonl)
    [ -e "${files[0]}" ] || { echo "error: TASKS_DIR=$TASKS_DIR has no *.jsonl task files" >&2; exit 1; }
    note="Tasks: every task file of TASKS_DIR=$TASKS_DIR."
  fi
  if [ ${#files[@]} = 0 ]; then
    python3 scripts/reproduce/tasks_table.py "$OUT" --not-run "no task files: set TASKS_DIR to a folder of eval-tasks JSONL files"
    return 0
  fi
  local pair label ckpt task_args=()
  for f in "${files[@]}"; do task_args+=(--task "$f"); done
  for pair in "$@"; do
    label=${pair%%=*}
    ckpt=${pair#*=}
    [ -s "$dir/$label.json" ] || run "$HW" eval-tasks --checkpoint "$ckpt" "${task_args[@]}" --json "$dir/$label.json" \
      --no-progress > "$dir/$label.log" 2>&1 \
      || { echo "error: eval-tasks of $label failed; its log: $dir/$label.log" >&2; tail -n 3 "$dir/$label.log" >&2; exit 1; }
    evals+=("$label=$dir/$label.json")
  done
  python3 scripts/reproduce/tasks_table.py "$OUT" "$note" "${evals[@]}"
}
append_task_section() { [ -s "$OUT/tasks.md" ] && cat "$OUT/tasks.md" >> "$OUT/REPORT.md"; return 0; }
# The first step of every generated sbatch job: scripts/gpu_check.sh --quick (probe, parity, NCCL,
# one training benchmark; a few minutes) unless this GPU type already passed it, recorded as a
# file named after the type in HEADWISE_GPU_CHECKED_DIR (default ~/.cache/headwise/gpu_checked).
# A failure prints the check's table and stops the job before it spends hours on an unverified
# backend. Prints the job text (bash, run from the repository root).
gpu_check_step() {
  cat <<'STEP'
# --- the CUDA backend on this GPU type: scripts/gpu_check.sh --quick unless it passed here before
gpu_type=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr -c 'A-Za-z0-9.\n-' '_')
[ -n "$gpu_type" ] || { echo "error: nvidia-smi names no GPU in this job (ask for one: --gpus-per-node)" >&2; exit 1; }
checked=${HEADWISE_GPU_CHECKED_DIR:-$HOME/.cache/headwise/gpu_checked}/$gpu_type
if [ ! -e "$checked" ]; then
  echo "headwise: $gpu_type has not passed scripts/gpu_check.sh --quick yet; running it first"
  if env -u OUT bash scripts/gpu_check.sh --quick; then
    mkdir -p "$(dirname "$checked")" && date -u > "$checked"
  else
    cat gpu_check_out/table.txt 2>/dev/null
    echo "error: scripts/gpu_check.sh --quick failed on $gpu_type (table above, logs in gpu_check_out/): not training on an unverified backend" >&2
    exit 1
  fi
fi
STEP
}
# require_shards DIR WHAT HOW [SPLITS]: DIR/<split>_*.bin must exist for each of SPLITS (default
# "train val"); otherwise one error line naming the missing files and the command that makes them.
require_shards() {
  local dir=$1 what=$2 how=$3 missing=() s
  for s in ${4:-train val}; do compgen -G "$dir/${s}_*.bin" > /dev/null || missing+=("$dir/${s}_*.bin"); done
  [ ${#missing[@]} = 0 ] && return 0
  echo "error: $what: missing ${missing[*]}; make them with: $how" >&2
  exit 1
}
# The cluster scales need Slurm's tools where the jobs are written: SBATCH (default sbatch) on PATH.
require_slurm() {
  command -v "${SBATCH:-sbatch}" > /dev/null || {
    echo "error: --scale cluster writes sbatch jobs: no '${SBATCH:-sbatch}' on PATH (load Slurm's module, or use --scale gpu; OAL and AoH need --backend torch there)" >&2
    exit 1
  }
}
# require_hf_model VAR DIR TYPES WHAT [no-tokenizer]: DIR must be a Hugging Face model directory whose
# config.json has a model_type among TYPES (space-separated), with *.safetensors and (unless
# no-tokenizer) tokenizer.json; otherwise one error line naming VAR, DIR and what it must hold.
require_hf_model() {
  local var=$1 dir=$2 types=$3 what=$4 mt="" tok=" and tokenizer.json"
  [ "${5:-}" != no-tokenizer ] || tok=""
  if [ -z "$dir" ]; then
    echo "error: $var is not set: it must name $what" >&2; exit 1
  fi
  [ -s "$dir/config.json" ] && mt=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("model_type", ""))' \
    "$dir/config.json" 2>/dev/null || true)
  if [ -z "$mt" ] || [[ " $types " != *" $mt "* ]] || ! compgen -G "$dir/*.safetensors" > /dev/null || { [ -n "$tok" ] && [ ! -s "$dir/tokenizer.json" ]; }; then
    echo "error: $var=$dir is not $what: it needs config.json with model_type ${types// / or } (found '${mt:-none}'), *.safetensors$tok" >&2
    exit 1
  fi
}
