# shellcheck shell=bash
# AoH at --scale gpu|cluster on a pretrained model the user passes (sourced by
# scripts/reproduce/aoh.sh after common.sh; its header says what runs). headwise's cached decoding
# runs on the CPU backend only (src/infer/cached_decoder.cpp refuses another backend), so with --backend
# headwise the job is a CPU job; with --backend torch headwise scores and converts the heads (CPU)
# and PyTorch times prefill and decode with the converted model's cache on the job's GPU
# (scripts/reproduce/torch_route.py bench, bf16; TORCH_DTYPE=fp32 for a CPU trial), at 1024, 2048,
# ... up to 8192 (MAX_CONTEXT, max_position_embeddings).
# The paper's 50% with DuoAttention's streaming heads (sink 64, window 256); SINK / WINDOW override
# them only for a trial on a model whose context is shorter than 320 (the tests' tiny Llama).
# --scale gpu promises a GPU: with --backend headwise nothing here would use one, so it is refused.
if [ "$SCALE" = gpu ] && [ "$BACKEND" = headwise ]; then
  echo "error: AoH at --scale gpu --backend headwise would time decoding on the CPU: headwise's cached decoding (bench-infer) has no CUDA path; use --backend torch (PyTorch times prefill and decode on this GPU after headwise converts) or --scale cluster (a CPU job)" >&2
  exit 1
fi
SPARSITY=0.5 SINK=${SINK:-64} WINDOW=${WINDOW:-256}
require_hf_model BASE_MODEL "${BASE_MODEL:-}" "llama qwen2 qwen3" "a Hugging Face Llama, Qwen2 or Qwen3 model directory" no-tokenizer
# DuoAttention's timing protocol: 3 untimed + 10 timed prefills, 50 untimed + 100 timed decode steps
# (BENCH_RUNS="PW PR DW DR" shortens it for a trial).
read -r PW PR DW DR <<< "${BENCH_RUNS:-3 10 50 100}"
# ROUNDS fresh processes per side and context, the order alternating (scripts/reproduce/verdicts.py reads
# the interval of the rounds' ratios).
ROUNDS=${ROUNDS:-3}
for v in MAX_CONTEXT FIRST_CONTEXT SINK WINDOW PR DR ROUNDS; do
  if [ -n "${!v:-}" ] && ! [[ "${!v}" =~ ^[1-9][0-9]*$ ]]; then echo "error: $v='${!v}' must be a positive integer" >&2; exit 1; fi
done
[[ "$PW $DW" =~ ^[0-9]+\ [0-9]+$ ]] && [ -n "$DR" ] || { echo "error: BENCH_RUNS='${BENCH_RUNS:-}' must be four counts: prefill warm-ups, prefill runs, decode warm-ups, decode runs" >&2; exit 1; }
OUTA=$(realpath "$OUT")
HWA=$(realpath "$HW")
BASEA=$(realpath "$BASE_MODEL")
q() { printf '%q ' "$@"; }
# The job's text: the contexts (from the model's config and, for headwise, the node's memory),
# heads and the 50% conversion once, then ROUNDS alternated rounds of fresh processes per context
# and side, each result kept (a rerun skips what is there).
job_body() {
  local bench
  if [ "$BACKEND" = torch ]; then
    torch_env_lines
    echo "contexts=\$(python3 -c 'import json, sys; c, n, top = int(sys.argv[2]), [], min(int(sys.argv[3]), json.load(open(sys.argv[1])).get(\"max_position_embeddings\", 1 << 30))
while c <= top: n.append(c); c *= 2
print(\" \".join(map(str, n)))' $(q "$BASEA/config.json")${FIRST_CONTEXT:-1024} ${MAX_CONTEXT:-8192})"
    bench="\"\$TORCH_PY\" scripts/reproduce/torch_route.py bench $(q --checkpoint "$BASEA" --plan-from "$OUTA/aoh50") \
--side \"\$side\" --context \"\$c\" --dtype ${TORCH_DTYPE:-bf16} --runs $PW $PR $DW $DR "
  else
    echo "# Node memory: Slurm's allocation when it names one, else MemTotal; the contexts follow from it."
    echo 'mem=$(( ${SLURM_MEM_PER_NODE:-0} * 1048576 ))'
    echo '[ "$mem" -gt 0 ] || mem=$(( $(awk '"'"'/MemTotal/ {print $2}'"'"' /proc/meminfo) * 1024 ))'
    echo 'threads=${OMP_NUM_THREADS:-$(nproc)}'
    echo "contexts=\$(python3 scripts/reproduce/aoh_contexts.py $(q "$BASEA/config.json")\"\$mem\" \"\$threads\" '${MAX_CONTEXT:-}' ${FIRST_CONTEXT:-1024})"
    bench="$(q "$HWA" bench-infer --checkpoint "$BASEA" --plan-from "$OUTA/aoh50") \
--side \"\$side\" --context \"\$c\" --weights bf16 --prefill-warmup $PW --prefill-runs $PR --decode-warmup $DW --decode-runs $DR \
"
  fi
  echo "echo \"\$contexts\" > $(q "$OUTA/contexts.txt")"
  echo "[ -s $(q "$OUTA/heads.json") ] || $(q "$HWA" heads --checkpoint "$BASEA" --sparsity $SPARSITY --sink $SINK --window $WINDOW --json "$OUTA/heads.json")> /dev/null"
  echo "[ -s $(q "$OUTA/aoh50/config.json") ] || $(q "$HWA" convert --checkpoint "$BASEA" --out "$OUTA/aoh50" --method aoh \
    --set method.sparsity=$SPARSITY --set method.sink=$SINK --set method.window=$WINDOW)"
  echo "mkdir -p $(q "$OUTA/bench")"
  echo 'for c in $contexts; do'
  echo "  for ((r = 0; r < $ROUNDS; r++)); do"
  echo '    order="plan all-softmax"; (( r % 2 )) && order="all-softmax plan"'
  echo '    for side in $order; do'
  local f
  f="$(printf %q "$OUTA")/bench/ctx\${c}_round\${r}_\$side.json"
  echo "      [ -s $f ] || { $bench| tail -n 1 > $f.part && mv $f.part $f; }"
  echo '    done'
  echo '  done'
  echo 'done'
}
mkdir -p "$OUT/jobs"
if [ "$SCALE" = cluster ] && [ "$BACKEND" = torch ]; then
  require_slurm
  {
    printf '%s\n' '#!/usr/bin/env bash' '#SBATCH --job-name=aoh-latency' '#SBATCH --nodes=1' '#SBATCH --ntasks=1' \
      "#SBATCH --cpus-per-task=${AOH_CPUS:-16}" '#SBATCH --gpus-per-node=1' '#SBATCH --time=12:00:00' \
      "#SBATCH --output=$OUTA/jobs/%x-%j.out" \
      '# --backend torch: headwise scores and converts the heads on the CPU; PyTorch times prefill and decode with' \
      '# the converted model'"'"'s cache (sink + window for streaming heads) on the GPU (scripts/reproduce/torch_route.py).' \
      'set -euo pipefail' "cd \"$(pwd)\"" 'export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}'
    job_body
  } > "$OUT/jobs/aoh.sbatch"
elif [ "$SCALE" = cluster ]; then
  require_slurm
  {
    printf '%s\n' '#!/usr/bin/env bash' '#SBATCH --job-name=aoh-latency' '#SBATCH --nodes=1' '#SBATCH --ntasks=1' '#SBATCH --exclusive' \
      "#SBATCH --cpus-per-task=${AOH_CPUS:-32}" '#SBATCH --time=48:00:00' "#SBATCH --output=$OUTA/jobs/%x-%j.out" \
      '# CPU backend only, no GPU: cached decoding (prefill, decode, the KV cache) has no CUDA path yet; a whole' \
      '# node (--exclusive) so the timings see no neighbours and the contexts can use its memory.' \
      'set -euo pipefail' "cd \"$(pwd)\"" 'export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}'
    job_body
  } > "$OUT/jobs/aoh.sbatch"
  cat > "$OUT/collect.sh" <<COLLECT
#!/usr/bin/env bash
# Builds OUT/REPORT.md from the finished job's outputs.
set -euo pipefail
cd "$(pwd)"
COLLECT_ONLY=1 BASE_MODEL=$(q "$BASEA")SINK=$SINK WINDOW=$WINDOW BENCH_RUNS="$PW $PR $DW $DR" ROUNDS=$ROUNDS HEADWISE_BIN=$(q "$HWA")bash scripts/reproduce/aoh.sh --scale cluster --backend $BACKEND --out $(q "$OUTA")
COLLECT
  chmod +x "$OUT/collect.sh"
  if [ -z "${COLLECT_ONLY:-}" ]; then
    echo "reproduce[aoh]: wrote $OUT/jobs/aoh.sbatch (a CPU job); submit it with sbatch, then run $OUT/collect.sh"
    exit 0
  fi
  JOB=$OUT/jobs/aoh.sbatch
else
  { printf '%s\n' '#!/usr/bin/env bash' 'set -euo pipefail' "cd \"$(pwd)\""; job_body; } > "$OUT/jobs/aoh.sh"
  JOB=$OUT/jobs/aoh.sh
  run bash "$JOB" 2>&1 | tee "$OUT/jobs/aoh.log" >&2 || { echo "error: the AoH job failed; its log: $OUT/jobs/aoh.log" >&2; exit 1; }
fi
[ -s "$OUT/contexts.txt" ] || { echo "error: $OUT/contexts.txt missing: the AoH job has not run" >&2; exit 1; }
read -r -a CONTEXT_LIST < "$OUT/contexts.txt"
for c in "${CONTEXT_LIST[@]}"; do
  for ((r = 0; r < ROUNDS; r++)); do
    for side in plan all-softmax; do
      [ -s "$OUT/bench/ctx${c}_round${r}_$side.json" ] || { echo "error: $OUT/bench/ctx${c}_round${r}_$side.json missing: the AoH job has not finished context $c" >&2; exit 1; }
    done
  done
done
while IFS= read -r line; do COMMANDS+=("$line"); done < <(grep -E '^\[ -s |^contexts=|^ +\[ -s ' "$JOB")
if [ "$BACKEND" = torch ]; then
  NOTE="$(basename "$BASEA") ($BASEA), AoH at sparsity $SPARSITY (streaming KV heads: sink $SINK, window $WINDOW), timed in PyTorch (--backend torch: the converted model's own cache, ${TORCH_DTYPE:-bf16} weights; device: $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("device", "?"))' "$OUT/bench/ctx${CONTEXT_LIST[0]}_round0_plan.json")) against the same code with every head softmax ($PW + $PR prefills, $DW + $DR decode steps per process, $ROUNDS alternated rounds of fresh processes per side) at contexts ${CONTEXT_LIST[*]}; no retention rows at this scale"
else
  NOTE="$(basename "$BASEA") ($BASEA), AoH at sparsity $SPARSITY (streaming KV heads: sink $SINK, window $WINDOW), bench-infer on the CPU backend with bf16 weights ($PW + $PR prefills, $DW + $DR decode steps per process, $ROUNDS alternated rounds of fresh processes per side) at contexts ${CONTEXT_LIST[*]} (the longest that fits the node: scripts/reproduce/aoh_contexts.py); no retention rows at this scale"
fi
WALL=$(( $(date +%s) - START_S ))
printf '%s\n' "${COMMANDS[@]}" > "$OUT/commands.txt"
ROUNDS=$ROUNDS python3 scripts/reproduce/aoh_report.py "$OUT" "$SCALE" "$NOTE" "$WALL" "$MACHINE" "${CONTEXT_LIST[@]}"
echo "reproduce[aoh]: $OUT/REPORT.md"
