#!/usr/bin/env bash
# `headwise launch-check` as separate processes, started the way `srun --mpi=none` starts the
# tasks of a step (SLURM_PROCID / SLURM_NTASKS / SLURM_STEP_ID / SLURM_JOB_ID in each one's
# environment), meeting through one folder (ctest dist:launch_check_processes):
#   1. three tasks agree on one id (rank 0's), each exits 0;
#   2. a task that never starts (rank 2 of 3): ranks 0 and 1 both exit 1 with one `error:` line,
#      rank 0's naming rank 2, rank 1's passing on rank 0's reason, both within the timeout (not
#      after rank 1's own, twice as long);
#   3. the same job requeued (SLURM_RESTART_COUNT=1: same job id, steps from 0 again), rank 0
#      starting last: the files of the launches before (an id file, a failure file and arrival
#      files of the same step) are ignored and the three tasks agree on a new id.
# Usage: test_launch_check.sh path/to/headwise
set -uo pipefail
HW=$1
D=$(mktemp -d "${TMPDIR:-/tmp}/launch_check_test.XXXXXX")
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
TIMEOUT_S=3
# task JOB STEP RANK WORLD [RESTART]: one task in the background; its output in $D/out.*, its exit
# status and seconds taken in $D/rc.*.
task() {
  local name=$1.$2.$3
  (
    start=$(date +%s.%N)
    env -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK SLURM_JOB_ID=$1 SLURM_STEP_ID=$2 SLURM_PROCID=$3 SLURM_NTASKS=$4 \
      SLURM_LOCALID=0 ${5:+SLURM_RESTART_COUNT=$5} HEADWISE_RENDEZVOUS_TIMEOUT_S=$TIMEOUT_S \
      "$HW" launch-check --dir "$D/meet" >"$D/out.$name" 2>&1
    echo "$? $(echo "$(date +%s.%N) - $start" | bc)" >"$D/rc.$name"
  ) &
}
id_of() { sed -n 's/^launch-check: rank .* id \([0-9a-f]*\) (launcher slurm, through file)$/\1/p' "$D/out.$1"; }
check_agree() {  # check_agree WHAT JOB.STEP: ranks 0..2 exited 0 with one id; prints it
  local ids=() r
  for r in 0 1 2; do
    read -r rc _ <"$D/rc.$2.$r"
    [ "$rc" = 0 ] || fail "$1: rank $r exited $rc: $(cat "$D/out.$2.$r")"
    ids+=("$(id_of "$2.$r")")
    [ -n "${ids[$r]}" ] || fail "$1: rank $r printed no id: $(cat "$D/out.$2.$r")"
  done
  [ "${ids[0]}" = "${ids[1]}" ] && [ "${ids[0]}" = "${ids[2]}" ] || fail "$1: the ranks got different ids: ${ids[*]}"
  echo "${ids[0]}"
}

# 1. Three tasks of job 500, step 0.
for r in 2 0 1; do task 500 0 $r 3; done
wait
id_a=$(check_agree "three tasks" 500.0) || { echo "$id_a"; exit 1; }
echo "ok: three tasks agree on rank 0's id $id_a"

# 2. Step 1 of the same job, rank 2 never starts.
task 500 1 0 3
task 500 1 1 3
wait
for r in 0 1; do
  read -r rc secs <"$D/rc.500.1.$r"
  out=$(cat "$D/out.500.1.$r")
  [ "$rc" = 1 ] || fail "missing rank: rank $r exited $rc: $out"
  [ "$(grep -c '^error:' <<<"$out")" = 1 ] && [ "$(grep -c . <<<"$out")" = 1 ] || fail "missing rank: rank $r did not print one error line: $out"
  grep -q "rank 2 of 3 never arrived" <<<"$out" || fail "missing rank: rank $r does not name rank 2: $out"
  [ "$(echo "$secs < $TIMEOUT_S + 1.5" | bc)" = 1 ] || fail "missing rank: rank $r took $secs s (timeout $TIMEOUT_S s)"
  echo "ok: missing rank: rank $r exit 1 after $secs s: $out"
done
grep -q "rank 0 gave up" "$D/out.500.1.1" || fail "rank 1 does not pass on rank 0's reason"
[ -e "$D/meet/500.1.failed" ] && [ -e "$D/meet/500.1.rank1" ] || fail "the failed launch left no files to test staleness with"

# 3. Job 500 requeued: step 1 again; ranks 1 and 2 start first and see the stale files.
task 500 1 1 3 1
task 500 1 2 3 1
sleep 1
task 500 1 0 3 1
wait
id_c=$(check_agree "requeued job, stale files in the folder" 500.1) || { echo "$id_c"; exit 1; }
[ "$id_c" != "$id_a" ] || fail "the requeued launch took the earlier launch's id $id_a"
echo "ok: a requeued launch ignores the files of the launches before: new id $id_c"
echo "launch_check: all passed"
