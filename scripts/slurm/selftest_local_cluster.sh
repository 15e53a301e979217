#!/usr/bin/env bash
# Self-test of the SLURM path on one machine without GPUs: starts a one-node SLURM cluster on
# localhost (slurmctld + slurmd from Debian's slurm-wlm packages, munge for auth), submits
# train_1node_8gpu.sbatch as a 2-task CPU job, waits for it, checks it, and always stops the
# daemons it started.
#
# Usage (as root, from anywhere):
#   selftest_local_cluster.sh HEADWISE_BINARY
#       The real trainer end to end on a tiny config (tests/dist_train/tiny.json, 20 steps, on a
#       generated corpus that `headwise prepare` tokenises): a single-process reference run
#       first, then the 2-task SLURM job; every step's loss must match the reference within
#       SELFTEST_LOSS_TOL, OUT/summary.json must say world 2 and the final checkpoint must be
#       complete. SELFTEST_EXTRA adds arguments to both runs (e.g. "--set train.zero1=true").
#   selftest_local_cluster.sh HEADWISE_BINARY CONFIG [REFERENCE_METRICS_JSONL]
#       The same with your config (its data paths must exist): runs `headwise train --config
#       CONFIG --out OUT --set train.device=cpu` as 2 srun tasks and compares with the given
#       reference metrics.jsonl, or with a single-process run of CONFIG made here first.
#   selftest_local_cluster.sh --requeue HEADWISE_BINARY
#       Preemption and time limits on the sbatch script's own path: the tiny config made slower
#       (wider, 300 updates, no periodic checkpoints) runs as a 2-task job that is stopped twice
#       mid-run: first USR1 to the batch shell, as --signal=B:USR1@120 sends it before the time
#       limit (the tasks checkpoint, exit 75, the script requeues the job), then `scontrol
#       requeue`, as a preemption does (Slurm sends SIGTERM, the tasks checkpoint, Slurm
#       requeues). The job must end COMPLETED after 2 restarts with every step logged once, the
#       losses of a single-process uninterrupted run (within 1e-12: 2 ranks sum the same
#       micro-batches) and its final weights byte for byte.
#   selftest_local_cluster.sh --smoke TEST_PROGRAM
#       Checks the cluster plumbing without the trainer: the same sbatch script runs a stand-in
#       for headwise that runs TEST_PROGRAM (e.g. build/test_dist, the communicator tests) as
#       each of the 2 tasks, then writes fixed summary.json / metrics.jsonl on rank 0. Also
#       checks that the loss comparison rejects a reference that differs by 1e-4.
#   selftest_local_cluster.sh --rendezvous HEADWISE_BINARY
#       The launch rendezvous of GPU ranks on both of the sbatch script's paths, with CPU tasks and
#       `headwise launch-check` (a stand-in id in place of NCCL's), 2 tasks each: LAUNCH=file (no
#       PMIx: the ranks meet in a folder) and LAUNCH=pmix (the id over MPI) must give both tasks
#       the same id; LAUNCH=file with task 1 staying away must end the job with one error from rank
#       0 naming rank 1 after HEADWISE_RENDEZVOUS_TIMEOUT_S (3 s here), not hang.
#
# Environment: SELFTEST_TIMEOUT (seconds for the job, default 900), SELFTEST_LOSS_TOL (1e-5),
# SELFTEST_SCRIPT=train_multinode.sbatch runs the multi-node script (on this one node) instead,
# SELFTEST_KEEP=1 keeps the temporary folder (logs, OUT) for inspection.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sbatch_script="$here/${SELFTEST_SCRIPT:-train_1node_8gpu.sbatch}"
timeout_s=${SELFTEST_TIMEOUT:-900}
tol=${SELFTEST_LOSS_TOL:-1e-5}

die() { echo "selftest: FAIL: $*" >&2; exit 1; }
say() { echo "selftest: $*"; }

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 2; }
mode=train
requeue=0
if [ "${1:-}" = "--requeue" ]; then
  requeue=1
  shift
  [ $# -eq 1 ] || usage
fi
if [ "${1:-}" = "--rendezvous" ]; then
  mode=rendezvous
  [ $# -eq 2 ] || usage
  headwise=$(realpath "$2")
  [ -x "$headwise" ] || die "headwise binary $2 is not an executable file"
elif [ "${1:-}" = "--smoke" ]; then
  mode=smoke
  [ $# -eq 2 ] || usage
  test_program=$(realpath "$2")
  [ -x "$test_program" ] || die "test program $2 is not an executable file"
else
  { [ $# -ge 1 ] && [ $# -le 3 ]; } || usage
  headwise=$(realpath "$1")
  [ -x "$headwise" ] || die "headwise binary $1 is not an executable file"
  config=""
  if [ $# -ge 2 ]; then
    config=$(realpath "$2")
    [ -f "$config" ] || die "config $2 does not exist"
  fi
  reference=""
  if [ $# -eq 3 ]; then
    reference=$(realpath "$3")
    [ -f "$reference" ] || die "reference metrics $3 does not exist"
  fi
fi
[ -f "$sbatch_script" ] || die "no sbatch script $sbatch_script"
[ "$(id -u)" -eq 0 ] || die "needs root (slurmd runs jobs as root here)"

# --- packages --------------------------------------------------------------------------------
missing=()
for p in slurmctld slurmd slurm-client munge; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- cleanup, whatever happens -----------------------------------------------------------------
work=$(mktemp -d /tmp/hw_slurm_selftest.XXXXXX)
started_munged=0
job_id=""
cleanup() {
  local rc=$?
  set +e
  if [ -n "$job_id" ] && scancel "$job_id" >/dev/null 2>&1; then
    # Let slurmd end the job's processes before slurmd itself goes.
    for _ in $(seq 100); do
      scontrol show job -o "$job_id" 2>/dev/null | grep -qE 'JobState=(PENDING|RUNNING|COMPLETING)' || break
      sleep 0.1
    done
  fi
  for d in slurmd slurmctld; do
    if [ -f "$work/$d.pid" ]; then
      local pid
      pid=$(cat "$work/$d.pid")
      kill "$pid" 2>/dev/null
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    fi
  done
  if [ "$started_munged" = 1 ] && [ -f /run/munge/munged.pid ]; then kill "$(cat /run/munge/munged.pid)" 2>/dev/null; fi
  if [ "$rc" -ne 0 ]; then
    for f in "$work"/job-*.out "$work/slurmctld.log" "$work/slurmd.log"; do
      [ -f "$f" ] && { echo "----- $f (last 40 lines)"; tail -n 40 "$f"; }
    done
  fi
  if [ "${SELFTEST_KEEP:-0}" = 1 ]; then say "kept $work"; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- munge: the key and the daemon, unless already there -------------------------------------
if [ ! -f /etc/munge/munge.key ]; then
  say "creating /etc/munge/munge.key"
  install -d -o munge -g munge -m 700 /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
fi
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  install -d -o munge -g munge -m 755 /run/munge
  munged --force --log-file="$work/munged.log"
  started_munged=1
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null || die "munged does not answer"
fi

# --- a minimal slurm.conf: this host is the controller and the only node ----------------------
for d in slurmctld slurmd; do
  pgrep -x "$d" >/dev/null && die "a $d is already running on this machine; stop it first"
done
host=$(hostname -s)
mem_mib=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
mkdir -p "$work/state" "$work/spool"
export SLURM_CONF="$work/slurm.conf"
cat > "$SLURM_CONF" <<EOF
ClusterName=hwselftest
SlurmctldHost=$host(127.0.0.1)
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ReturnToService=2
MinJobAge=3600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem_mib State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF

say "starting slurmctld and slurmd ($work)"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 1
done
[ "$state" = idle ] || die "node $host not idle after 60 s (state '$state')"
say "node $host is idle"

# --- the job -----------------------------------------------------------------------------------
out="$work/out"
read -r -a extra <<< "${SELFTEST_EXTRA:-}"
if [ "$mode" = train ] && [ -z "$config" ]; then
  # The tiny test config on a generated corpus (the same recipe as tests/dist_train).
  config=$(realpath "$here/../../tests/dist_train/tiny.json")
  [ -f "$config" ] || die "no $config next to this script's folder"
  python3 "$here/../../tests/dist_train/make_corpus.py" "$work/corpus.txt"
  "$headwise" prepare --input "$work/corpus.txt" --output "$work/data" --val-fraction 0.1 > "$work/prepare.log" 2>&1 \
    || { cat "$work/prepare.log" >&2; die "headwise prepare failed"; }
  extra+=(--set "data.train=$work/data/train_*.bin" --set "data.val=$work/data/val_*.bin")
  # --requeue: updates of ~10 ms, 300 of them, so the job can be stopped twice in the middle.
  [ "$requeue" = 0 ] || extra+=(--set model.n_embd=128 --set model.block_size=64 --set train.seq_len=64
    --set train.micro_batch=4 --set train.total_batch_tokens=512 --set train.steps=300 --set train.eval_every=100
    --set train.checkpoint_every=1000 --set train.log_every=50)
fi
for a in "${extra[@]}"; do
  [[ "$a" != *" "* ]] || die "argument '$a' has a space: the sbatch script's EXTRA is split on spaces"
done
if [ "$mode" = train ] && [ -z "$reference" ]; then
  say "single-process reference run"
  OMP_NUM_THREADS=1 "$headwise" train --config "$config" --out "$work/ref" --set train.device=cpu "${extra[@]}" \
    > "$work/ref.log" 2>&1 || { tail -n 30 "$work/ref.log" >&2; die "the single-process reference run failed"; }
  reference="$work/ref/metrics.jsonl"
fi
if [ "$mode" = smoke ]; then
  # Stands in for `headwise train --config C --out O ARGS...`: every task runs the test program,
  # then rank 0 writes what the trainer would.
  headwise="$work/headwise_standin.sh"
  config="$work/standin_config.json"
  echo '{}' > "$config"
  cat > "$headwise" <<EOF
#!/usr/bin/env bash
set -euo pipefail
[ "\$1" = train ] || { echo "stand-in: expected 'train', got '\$1'" >&2; exit 2; }
shift
outdir=""
args=("\$@")
while [ \$# -gt 0 ]; do [ "\$1" = --out ] && outdir=\$2; shift; done
echo "task \$SLURM_PROCID of \$SLURM_NTASKS (local \$SLURM_LOCALID) on \$(hostname -s): PMIX_RANK=\${PMIX_RANK:-unset}"
"$test_program" > "$work/test_program.\$SLURM_PROCID.log" 2>&1 \
  || { tail -n 30 "$work/test_program.\$SLURM_PROCID.log" >&2; exit 1; }
if [ "\$SLURM_PROCID" = 0 ]; then
  mkdir -p "\$outdir"
  printf '%s\n' "\${args[@]}" > "\$outdir/args.txt"
  printf '{"step": %d, "loss": %s}\n' 1 10.8125 2 9.90625 3 9.0 > "\$outdir/metrics.jsonl"
  echo '{"world": '\$SLURM_NTASKS'}' > "\$outdir/summary.json"
fi
EOF
  chmod +x "$headwise"
  reference="$work/reference.jsonl"
  printf '{"step": %d, "loss": %s}\n' 1 10.8125 2 9.90625 3 9.0 > "$reference"
fi

if [ "$mode" = rendezvous ]; then
  # Stands in for `headwise`: launch-check goes to the real binary (task SELFTEST_ABSENT_RANK stays
  # away); `train` runs launch-check too under PMIx (LAUNCH=pmix: the MPI path) and writes a summary.
  standin="$work/headwise_rendezvous.sh"
  cat > "$standin" <<STANDIN
#!/usr/bin/env bash
set -euo pipefail
if [ "\${SELFTEST_ABSENT_RANK:-}" = "\$SLURM_PROCID" ]; then echo "task \$SLURM_PROCID stays away"; exit 0; fi
case "\$1" in
  launch-check) exec "$headwise" launch-check ;;
  train) [ -z "\${PMIX_RANK:-}" ] || "$headwise" launch-check
    outdir=""; while [ \$# -gt 0 ]; do [ "\$1" = --out ] && outdir=\$2; shift; done
    [ "\$SLURM_PROCID" != 0 ] || echo '{"world": '\$SLURM_NTASKS'}' > "\$outdir/summary.json" ;;
  *) echo "stand-in: unexpected '\$1'" >&2; exit 2 ;;
esac
STANDIN
  chmod +x "$standin"
  echo '{}' > "$work/standin_config.json"
  # rendezvous_job NAME LAUNCH [ABSENT_RANK]: submits the script as 2 CPU tasks, waits (2 minutes
  # at most: longer is a hang), prints the job's final state; its output is $work/NAME.out.
  rendezvous_job() {
    local name=$1 launch=$2 absent=${3:-} id info st deadline
    id=$(CONFIG="$work/standin_config.json" OUT="$work/$name" HEADWISE="$standin" LAUNCH="$launch" \
      SELFTEST_ABSENT_RANK="$absent" HEADWISE_RENDEZVOUS_TIMEOUT_S=3 HEADWISE_NCCL_ID_DIR="$work/$name/.rdv" \
      sbatch --parsable --nodes=1 --ntasks-per-node=2 --gpus-per-node=0 --cpus-per-task=1 --time=10 \
        --job-name="hw-$name" --output="$work/$name.out" --chdir="$work" "$sbatch_script")
    id=${id%%;*}
    deadline=$(( $(date +%s) + 120 ))
    while :; do
      info=$(scontrol show job -o "$id")
      st=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<< "$info")
      case "$st" in PENDING|RUNNING|CONFIGURING|COMPLETING|"") ;; *) break ;; esac
      if [ "$(date +%s)" -ge "$deadline" ]; then scancel "$id"; echo "HUNG"; return; fi
      sleep 1
    done
    echo "$st"
  }
  # same_id NAME PATH: both tasks printed a launch-check line through PATH, with one id.
  same_id() {
    local lines ids
    lines=$(grep -c "^launch-check: rank [01] of 2 .*through $2)" "$work/$1.out" || true)
    ids=$(sed -n "s/^launch-check: rank [01] of 2 .*: id \([0-9a-f]*\) .*through $2)/\1/p" "$work/$1.out" | sort -u | wc -l)
    { [ "$lines" -ge 2 ] && [ "$ids" = 1 ]; } || { cat "$work/$1.out" >&2; die "$1: expected both tasks with one id through $2"; }
  }
  st=$(rendezvous_job file file)
  [ "$st" = COMPLETED ] || { cat "$work/file.out" >&2; die "LAUNCH=file job ended $st"; }
  same_id file file
  say "LAUNCH=file: both tasks met in the folder and got one id ($(grep -m1 -o 'id [0-9a-f]*' "$work/file.out"))"
  st=$(rendezvous_job pmix pmix)
  [ "$st" = COMPLETED ] || { cat "$work/pmix.out" >&2; die "LAUNCH=pmix job ended $st"; }
  same_id pmix mpi
  say "LAUNCH=pmix: both tasks got one id over MPI ($(grep -m1 -o 'id [0-9a-f]*' "$work/pmix.out"))"
  t0=$(date +%s)
  st=$(rendezvous_job absent file 1)
  { [ "$st" != COMPLETED ] && [ "$st" != HUNG ]; } || { cat "$work/absent.out" >&2; die "a job with an absent task ended $st"; }
  n=$(grep -c '^error: rendezvous (rank 0 of 2): rank 1 of 2 never arrived .* within 3 s' "$work/absent.out" || true)
  [ "$n" = 1 ] || { cat "$work/absent.out" >&2; die "absent task: expected one error from rank 0 naming rank 1"; }
  say "an absent task: job $st after $(( $(date +%s) - t0 )) s with: $(grep -m1 '^error: ' "$work/absent.out")"
  say "PASS"
  exit 0
fi

if [ "$requeue" = 1 ]; then
  # job_field NAME: a field of `scontrol show job` for the job.
  job_field() { scontrol show job -o "$job_id" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
  # updates: the update lines of OUT/metrics.jsonl so far.
  updates() { local n; n=$(grep -c '"loss"' "$out/metrics.jsonl" 2>/dev/null); echo "${n:-0}"; }
  # wait_until SECONDS WHAT COMMAND...: poll COMMAND until it succeeds.
  wait_until() {
    local limit=$1 what=$2 t0
    shift 2
    t0=$(date +%s)
    until "$@"; do
      [ $(( $(date +%s) - t0 )) -lt "$limit" ] || die "$what: not after $limit s (job state $(job_field JobState))"
      sleep 0.2
    done
  }
  running_past() { [ "$(job_field JobState)" = RUNNING ] && [ "$(job_field Restarts)" = "$1" ] && [ "$(updates)" -ge "$2" ]; }
  job_id=$(CONFIG="$config" OUT="$out" HEADWISE="$headwise" EXTRA="--set train.device=cpu ${extra[*]}" \
    sbatch --parsable --nodes=1 --ntasks-per-node=2 --gpus-per-node=0 --cpus-per-task=1 --time=60 \
      --job-name=hw-requeue --output="$work/job.out" --chdir="$work" "$sbatch_script")
  job_id=${job_id%%;*}
  say "submitted job $job_id (300 updates)"
  wait_until 300 "job $job_id past update 40" running_past 0 40
  # What --signal=B:USR1@120 does before the time limit: USR1 to the batch shell only.
  scancel --batch --signal=USR1 "$job_id"
  say "USR1 to the batch shell at update $(updates)"
  wait_until 300 "job $job_id requeued by its script and past update 160" running_past 1 160
  stop1=$(grep -o 'stopped by SIGUSR1 after update [0-9]*' "$work/job.out" | head -1)
  [ -n "$stop1" ] || die "no 'stopped by SIGUSR1' line in the job's output"
  # What a preemption does: SIGTERM to the job's processes, then a requeue by Slurm.
  scontrol requeue "$job_id"
  say "scontrol requeue at update $(updates)"
  wait_until 600 "job $job_id finished" sh -c "scontrol show job -o $job_id | grep -qE 'JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)'"
  [ "$(job_field JobState)" = COMPLETED ] || die "job $job_id ended $(job_field JobState)"
  [ "$(job_field Restarts)" = 2 ] || die "job $job_id restarted $(job_field Restarts) times, not 2"
  stop2=$(grep -o 'stopped by SIGTERM after update [0-9]*' "$work/job.out" | head -1)
  [ -n "$stop2" ] || die "no 'stopped by SIGTERM' line in the job's output"
  grep -q 'second stop signal' "$work/job.out" && die "a task took a second stop signal (exited without its checkpoint)"
  python3 "$here/../../tests/dist_train/compare_losses.py" "$out/metrics.jsonl" "$reference" --tol 1e-12 --steps 300 \
    || die "the requeued job's losses differ from the uninterrupted run's"
  python3 - "$out/metrics.jsonl" <<'PY' || die "metrics.jsonl does not hold each step once"
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1]) if '"loss"' in l]
sys.exit(0 if steps == list(range(300)) else 1)
PY
  cmp -s "$out/checkpoints/step_300/model.safetensors" "$work/ref/checkpoints/step_300/model.safetensors" \
    || die "final weights differ from the uninterrupted run's"
  say "job $job_id: $stop1 (requeued by its script), $stop2 (requeued by Slurm), COMPLETED after 2 restarts"
  say "every step once, losses as the uninterrupted single-process run (1e-12), final weights byte for byte"
  say "PASS"
  exit 0
fi

# The 8-GPU script, shrunk to one node with 2 CPU tasks: command-line options override its #SBATCH lines.
job_id=$(CONFIG="$config" OUT="$out" HEADWISE="$headwise" EXTRA="--set train.device=cpu ${extra[*]}" \
  sbatch --parsable --nodes=1 --ntasks-per-node=2 --gpus-per-node=0 --cpus-per-task=1 --time=60 \
    --job-name=hw-selftest --output="$work/job-%j.out" --chdir="$work" "$sbatch_script")
job_id=${job_id%%;*}
say "submitted job $job_id; waiting up to $timeout_s s"
deadline=$(( $(date +%s) + timeout_s ))
while :; do
  info=$(scontrol show job -o "$job_id")
  jstate=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<< "$info")
  case "$jstate" in
    PENDING|RUNNING|CONFIGURING|COMPLETING|"") ;;
    *) break ;;
  esac
  [ "$(date +%s)" -lt "$deadline" ] || die "job $job_id still $jstate after $timeout_s s"
  sleep 1
done
exit_code=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<< "$info")
say "job $job_id ended: JobState=$jstate ExitCode=$exit_code"
{ [ "$jstate" = COMPLETED ] && [ "$exit_code" = "0:0" ]; } || die "job $job_id did not complete cleanly"
[ -f "$out/summary.json" ] || die "$out/summary.json missing"

# --- losses against the reference ------------------------------------------------------------
compare_losses() {  # metrics.jsonl reference.jsonl: exit 0 when every step's loss agrees
  python3 "$here/../../tests/dist_train/compare_losses.py" "$1" "$2" --tol "$tol"
}
if [ -n "$reference" ]; then
  compare_losses "$out/metrics.jsonl" "$reference" || die "losses differ from $reference"
fi
if [ "$mode" = train ]; then
  # Two tasks that each trained alone would also write a summary: it must say they were one job.
  python3 - "$out/summary.json" <<'EOF' || die "$out/summary.json does not say world 2"
import json, sys
sys.exit(0 if json.load(open(sys.argv[1])).get("world") == 2 else 1)
EOF
  steps=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["steps"])' "$out/summary.json")
  final="$out/checkpoints/step_$steps"
  [ -f "$final/model.safetensors" ] && [ -f "$final/trainer.json" ] || die "final checkpoint $final incomplete"
  [ ! -e "$final.tmp" ] || die "$final.tmp left behind"
  say "2 tasks trained as one job: $(grep -h -m1 'data parallel' "$work"/job-*.out | sed 's/.*data parallel/data parallel/')"
fi
if [ "$mode" = smoke ]; then
  { grep -qx -- "--set" "$out/args.txt" && grep -qx -- "train.device=cpu" "$out/args.txt"; } \
    || die "EXTRA did not reach the program: $(tr '\n' ' ' < "$out/args.txt")"
  sed 's/9.90625/9.90635/' "$reference" > "$work/reference_off.jsonl"
  if compare_losses "$out/metrics.jsonl" "$work/reference_off.jsonl" 2>/dev/null; then
    die "the loss comparison accepted a reference off by 1e-4"
  fi
  say "the loss comparison rejects a reference off by 1e-4"
  grep -h "All tests passed" "$work"/test_program.*.log | sed 's/\x1b\[[0-9;]*m//g' | sed 's/^/selftest: task: /'
  grep -h "^task " "$work"/job-*.out | sed 's/^/selftest: /'
fi
say "PASS"
