#!/usr/bin/env bash
# The paper-protocol gpu/cluster branches of scripts/reproduce/*.sh without a GPU or Slurm
# (--smoke for the branches issue 40 added): the jobs they write and the collector on hand-made
# results. AAH: one sbatch job per experiment and seed, each starting with the gpu_check --quick
# step, running the 1B configs (WikiText-2, bf16, dropout 0.1, Table 5 at 3,000 updates with the
# fixed window 1024) with the seed's settings; the collector merges the seeds' tables (mean and
# spread) into the report with every table and claim row. Bad input: missing WikiText-2 shards,
# no sbatch, bad SEEDS: one `error:` line each. The paper's dropout 0.1 (the default) is refused
# when the jobs would be written (the CUDA backend has no dropout op): one error line naming the
# CUDA backend and DROPOUT=0, and no job; with DROPOUT=0 the jobs set both dropout rates to 0.
# Usage: test_reproduce_cluster.sh HEADWISE_BIN
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
hw=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
# A stand-in sbatch on PATH (the scripts only look for it; nothing is submitted).
mkdir -p "$tmp/bin" "$tmp/wt2"
printf '#!/bin/sh\necho "stand-in sbatch" >&2\nexit 1\n' > "$tmp/bin/sbatch"
chmod +x "$tmp/bin/sbatch"
: > "$tmp/wt2/train_000000.bin"
: > "$tmp/wt2/val_000000.bin"
aah() { DROPOUT=${DROPOUT-0} PATH="$tmp/bin:$PATH" HEADWISE_BIN=$hw bash "$root/scripts/reproduce/aah.sh" "$@"; }
# one_error CMD...: exits non-zero with exactly one line on stderr, an `error:` line (printed).
one_error() {
  local err rc=0
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  if [ "$rc" = 0 ] || [ "$(printf '%s\n' "$err" | wc -l)" != 1 ] || [[ "$err" != error:* ]]; then
    bad "expected one error line from: $*; got rc $rc: $err"
  else
    echo "ok: $err"
  fi
}

# --- AAH: the jobs -----------------------------------------------------------------------------
out=$tmp/aah
SEEDS="0 1" WIKITEXT2_DIR=$tmp/wt2 aah --scale cluster --out "$out" > /dev/null
for j in regimes_s0 regimes_s1 ablations_s0 ablations_s1; do
  f=$out/jobs/$j.sbatch
  [ -s "$f" ] || { bad "missing $j.sbatch"; continue; }
  seed=${j##*_s}
  grep -q 'env -u OUT bash scripts/gpu_check.sh --quick' "$f" || bad "$j: no gpu_check --quick step"
  # the check comes before the experiment
  [ "$(grep -n 'gpu_check.sh --quick' "$f" | head -1 | cut -d: -f1)" -lt "$(grep -n ' experiment --config ' "$f" | cut -d: -f1)" ] \
    || bad "$j: the experiment runs before the GPU check"
  grep -q -- "--set experiment.seeds=\[$seed\] --set method.seed=$seed" "$f" || bad "$j: not seed $seed"
  grep -qF "data.train=$tmp/wt2/train_\\*.bin" "$f" || bad "$j: not the WikiText-2 shards (quoted)"
  bash -n "$f" || bad "$j: not valid bash"
done
grep -q -- '--set model.resid_pdrop=0 --set model.embd_pdrop=0 ' "$out/jobs/regimes_s0.sbatch" || bad "DROPOUT=0: the job keeps the config's dropout"
grep -q 'configs/experiment_aah_1b_4k.json' "$out/jobs/regimes_s0.sbatch" || bad "regimes job: not the 1B config"
grep -q 'configs/experiment_aah_ablations_1b_4k.json' "$out/jobs/ablations_s1.sbatch" || bad "ablations job: not the 1B Table 5 config"
# Without STEPS the configs' own schedules run (10,000 updates; Table 5: 3,000): no train.steps override.
grep -q 'train.steps=' "$out"/jobs/*.sbatch && bad "STEPS unset: a job overrides train.steps (the configs' 10,000 / 3,000 updates)"
STEPS=7 SEEDS=0 WIKITEXT2_DIR=$tmp/wt2 aah --scale cluster --out "$tmp/aah_steps" > /dev/null
grep -q -- '--set train.steps=7' "$tmp/aah_steps/jobs/regimes_s0.sbatch" || bad "STEPS=7: the job does not shorten the schedule"
# The updates each job's experiment would run, read as the trainer reads them (its config's
# train.steps, then the job's last --set train.steps=N): 10,000 for Tables 4/6, 3,000 for Table 5.
job_steps() {  # job_steps JOB.sbatch: the train.steps its experiment line resolves to
  python3 - "$1" "$root" <<'PY'
import json, re, sys
line = [l for l in open(sys.argv[1]) if " experiment --config " in l][0]
cfg = re.search(r"--config (\S+)", line).group(1)
text = "".join(l for l in open(f"{sys.argv[2]}/{cfg}") if not l.lstrip().startswith("//"))
steps = json.loads(text)["train"]["steps"]
for v in re.findall(r"--set train\.steps=(\d+)", line):
    steps = int(v)
print(steps)
PY
}
for j in regimes_s0:10000 regimes_s1:10000 ablations_s0:3000 ablations_s1:3000; do
  got=$(job_steps "$out/jobs/${j%%:*}.sbatch")
  [ "$got" = "${j#*:}" ] || bad "${j%%:*}: $got updates, expected ${j#*:}"
done
[ "$(job_steps "$tmp/aah_steps/jobs/ablations_s0.sbatch")" = 7 ] || bad "STEPS=7: the Table 5 job does not run 7 updates"
echo "ok: AAH updates per job: regimes 10000, ablations 3000 (STEPS=7: 7)"
[ -x "$out/collect.sh" ] || bad "no collect.sh"
echo "ok: AAH jobs $(ls "$out/jobs" | tr '\n' ' ')"

# --- the jobs' first step, run with a stand-in nvidia-smi and gpu_check.sh -------------------------
g=$tmp/guard
mkdir -p "$g/scripts" "$g/bin"
sed -n '/^# --- the CUDA backend/,/^fi$/p' "$out/jobs/regimes_s0.sbatch" > "$g/step.sh"
printf '#!/bin/sh\necho "NVIDIA H200"\n' > "$g/bin/nvidia-smi"
cat > "$g/scripts/gpu_check.sh" <<'STUB'
echo run >> "$GUARD_RUNS"
mkdir -p gpu_check_out && echo "| parity | FAILED |" > gpu_check_out/table.txt
[ "$GUARD_PASS" = 1 ]
STUB
chmod +x "$g/bin/nvidia-smi"
step() { (cd "$g" && PATH="$g/bin:$PATH" HEADWISE_GPU_CHECKED_DIR="$g/checked" GUARD_RUNS="$g/runs" GUARD_PASS=$1 bash step.sh); }
if step 0 > "$g/fail.out" 2> "$g/fail.err"; then bad "the step went on after gpu_check failed"; fi
grep -q '| parity | FAILED |' "$g/fail.out" || bad "a failed check does not print its table"
[ "$(grep -c '^error: scripts/gpu_check.sh --quick failed on NVIDIA_H200' "$g/fail.err")" = 1 ] || bad "failed check: not one error line"
[ ! -e "$g/checked/NVIDIA_H200" ] || bad "a failed check marked the GPU type as passed"
step 1 > /dev/null 2>&1 || bad "the step stopped after gpu_check passed"
[ -e "$g/checked/NVIDIA_H200" ] || bad "a passed check is not recorded"
step 0 > /dev/null 2>&1 || bad "a GPU type that passed before is checked again (and its failure stops the job)"
[ "$(wc -l < "$g/runs")" = 2 ] || bad "gpu_check ran $(wc -l < "$g/runs") times, expected 2 (fail, pass, then skipped)"
echo "ok: the jobs' first step runs gpu_check --quick until the GPU type passes, stops with its table on failure"

# --- AAH: the collector on hand-made per-seed tables ----------------------------------------------
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
for s, shift in ((0, 0.0), (1, 0.02)):
    t4 = [{"branch": b, "val_loss": v + shift, "acr": a, "tok_per_s": 4000 - 100 * i, "memory_mb": 1, "peak_rss_mb": 2, "seeds": 1}
          for i, (b, v, a) in enumerate([("full", 6.57, 1.0), ("grouping_off", 6.56, 0.58), ("full_adaptive", 6.55, 0.31),
                                         ("shallow_freeze", 6.53, 0.37), ("deep_reuse", 6.55, 0.29)])]
    t5 = [{"branch": b, "val_loss": v + shift, "delta_vs_first": v - 7.32, "seeds": 1}
          for b, v in [("pure_baseline", 7.32), ("shallow_control_interval_10", 7.28), ("shallow_freeze", 7.29),
                       ("fixed_random_grouping", 7.28), ("fixed_1024", 7.28), ("shallow_shuffle_post_select", 7.31),
                       ("full_adaptive_shuffle_post_select", 7.34)]]
    t6 = [{"branch": r["branch"], "val_loss": r["val_loss"], "val_ppl": 700.0, "acr": r["acr"], "tok_per_s": 9000, "seeds": 1}
          for r in t4]
    for n, t in ((4, t4), (5, t5), (6, t6)):
        json.dump(t, open(f"{d}/t{n}.s{s}.json", "w"))
PY
PATH="$tmp/bin:$PATH" bash "$out/collect.sh" > "$tmp/collect.log" 2>&1 || { cat "$tmp/collect.log"; bad "collect.sh failed"; }
for t in table4 table5 table6; do [ -s "$out/$t.md" ] && [ -s "$out/$t.csv" ] || bad "missing $t.md/csv"; done
n=$(grep -cE '\| (holds|does not hold|not shown at this scale|not measurable at this scale|by construction) \|$' "$out/REPORT.md" || true)
[ "$n" = 7 ] || bad "REPORT.md has $n claim rows, expected 7"
grep -q '^## Seeds' "$out/REPORT.md" || bad "REPORT.md has no seeds section"
# full attention's val loss: 6.57 and 6.59 -> mean 6.58, sd 0.0141
grep -qF '| full | 6.5800 | 0.0141 | 6.5700 | 6.5900 | 0: 6.5700, 1: 6.5900 |' "$out/REPORT.md" \
  || bad "seeds table: full attention's mean and spread over seeds 0 and 1"
python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[0]; sys.exit(0 if abs(r['val_loss']-6.58)<1e-12 and r['seeds']==2 else 1)" \
  "$out/t4.json" || bad "t4.json: not the mean over two seeds"
echo "ok: AAH collector merged 2 seeds into REPORT.md ($n claim rows)"

# --- SAF: every GPU job starts with the same check (mqar.sbatch runs on CPUs) -----------------------
PATH="$tmp/bin:$PATH" HEADWISE_BIN=$hw bash "$root/scripts/reproduce/saf.sh" --scale cluster --out "$tmp/saf" > /dev/null
for f in "$tmp"/saf/jobs/*.sbatch; do
  j=$(basename "$f" .sbatch)
  if [ "$j" = mqar ]; then continue; fi
  grep -q 'env -u OUT bash scripts/gpu_check.sh --quick' "$f" || bad "saf $j: no gpu_check --quick step"
  bash -n "$f" || bad "saf $j: not valid bash"
done
echo "ok: SAF GPU jobs start with the GPU check: $(ls "$tmp/saf/jobs" | tr '\n' ' ')"

# --- SAF: Table 2 at RoPE positions, the 1B 8K run as one 4-GPU job --------------------------------
sj=$tmp/saf/jobs
for t in 4096:4k 8192:8k 16384:16k; do
  f=$sj/rope_${t%%:*}.sbatch
  [ -s "$f" ] || { bad "no rope_${t%%:*}.sbatch"; continue; }
  grep -q -- "--config configs/saf_124m_${t##*:}_rope.json" "$f" || bad "rope_${t%%:*}: not configs/saf_124m_${t##*:}_rope.json"
  grep -qE -- '--set experiment\.ratios=\\?\[0\.25\\?,0\.5\\?\]' "$f" || bad "rope_${t%%:*}: not SAF 25%/50%"
  grep -q '^#SBATCH --gpus-per-node=1$' "$f" || bad "rope_${t%%:*}: not one GPU"
done
for t in 8192 16384; do [ -s "$sj/context_$t.sbatch" ] || bad "the learned-position context_$t job is gone"; done
f=$sj/1b_8k.sbatch
grep -q '^#SBATCH --ntasks-per-node=4$' "$f" && grep -q '^#SBATCH --gpus-per-node=4$' "$f" || bad "1b_8k: not 4 tasks on 4 GPUs"
grep -q -- '--config configs/saf_1b_8k_rope.json' "$f" || bad "1b_8k: not configs/saf_1b_8k_rope.json"
grep -q -- '--set experiment.speed_rounds=0' "$f" || bad "1b_8k: the one-process A-B-B-A phase is not off"
# The job's launch, run with a stand-in srun that records its arguments: pmix (default) is one srun
# with --mpi=pmix; file proves the rendezvous with launch-check, then runs with --mpi=none.
l=$tmp/launch
mkdir -p "$l/bin"
printf '#!/bin/sh\necho "$*" >> "$SRUN_LOG"\n' > "$l/bin/srun"
chmod +x "$l/bin/srun"
sed -n '/^# --- 4 ranks/,$p' "$f" > "$l/launch.sh"
launch() { (cd "$l" && rm -f srun.log && env PATH="$l/bin:$PATH" SRUN_LOG="$l/srun.log" HEADWISE_NCCL_ID_DIR="$l/id" "$@" bash launch.sh); }
launch > /dev/null || bad "1b_8k launch (pmix) failed"
[ "$(wc -l < "$l/srun.log")" = 1 ] && grep -q "^--mpi=pmix --kill-on-bad-exit=1 $hw experiment --config configs/saf_1b_8k_rope.json" "$l/srun.log" \
  || bad "LAUNCH=pmix: not one srun --mpi=pmix of the experiment: $(cat "$l/srun.log")"
launch LAUNCH=file > /dev/null || bad "1b_8k launch (file) failed"
[ "$(sed -n 1p "$l/srun.log")" = "--mpi=none --kill-on-bad-exit=1 $hw launch-check" ] \
  && sed -n 2p "$l/srun.log" | grep -q "^--mpi=none --kill-on-bad-exit=1 $hw experiment " && [ -d "$l/id" ] \
  || bad "LAUNCH=file: not launch-check then the experiment with --mpi=none: $(cat "$l/srun.log")"
one_error launch LAUNCH=mpi
echo "ok: SAF RoPE jobs at 4K/8K/16K and the 1B 8K job on 4 GPUs (LAUNCH=pmix and file)"

# --- SAF: the collector on hand-made results, the RoPE and 1B rows in Table 2 ------------------------
SEEDS='[1337,1338]' PATH="$tmp/bin:$PATH" HEADWISE_BIN=$hw bash "$root/scripts/reproduce/saf.sh" --scale cluster --out "$tmp/saf2" > /dev/null
python3 - "$tmp/saf2" <<'PY'
import json, os, sys
d = sys.argv[1]
def s(m, sd=None): return {"mean": m, "std": sd}
def row(b, pc, sd=0.05, fire=None, spd=1.0, mem=0.0, iv=None):
    return {"branch": b, "ppl_change_pct": s(pc, sd), "fire_step": fire, "abba_update_speedup": None,
            "update_speedup": s(spd, None), "memory_change_pct": s(mem, None), "updates": s(5000, 0.0),
            "peak_rss_change_pct": None, "intervention_seconds": None if iv is None else s(iv, None)}
def write(name, rows, seeds=None):
    os.makedirs(f"{d}/{name}", exist_ok=True)
    json.dump({"summary": rows, "seeds": seeds or []}, open(f"{d}/{name}/results.json", "w"))
base = [row("ordinary", 0.0), row("saf_25", 0.77, mem=-1.96), row("saf_50", 2.49, mem=-3.04)]
write("tokens", base + [row("prune_25", 0.81), row("random_25", 1.28), row("gate_taylor_25", 0.9)])
write("time", [row("ordinary", 0.0), row("saf_25", 0.46, iv=54.9), row("saf_50", 2.0, iv=55.0), row("prune_25", 0.11, iv=50.0),
               row("random_25", 1.2, iv=40.0), row("random_50", 2.1, iv=41.0)])
for t in (8192, 16384): write(f"context_{t}", base)
for t, a, b in ((4096, 0.70, 2.40), (8192, 0.58, 2.06), (16384, 0.45, 1.79)):
    write(f"rope_{t}", [row("ordinary", 0.0), row("saf_25", a, mem=-1.0), row("saf_50", b, mem=-2.0)])
# the 1B run: one seed, 4 ranks; SAF 25% +0.507 and 1.068x in-run, 50% +2.027 and 1.167x
write("1b_8k", [row("ordinary", 0.0, None), row("saf_25", 0.507, None, spd=1.068, mem=-1.5),
                row("saf_50", 2.027, None, spd=1.167, mem=-2.5), row("gate_taylor_25", 0.6, None)],
      seeds=[{"seed": 1337, "branches": [{"branch": b, "update_ms_ranks": 4} for b in ("ordinary", "saf_25", "saf_50")]}])
study = [row("ordinary", 0.0, fire=25)]
for p in ("mean", "sharp_mean", "gaussian", "dirichlet", "structured_random"):
    study += [row(f"{p}_25", 0.7, fire=50), row(f"{p}_50", 2.6, fire=50)]
study += [row(f"saf_25_at_{f}", 0.7, fire=f) for f in (25, 75, 100)]
write("study", study)
for seed in (1337, 1338):
    for b in ("ordinary", "saf_25", "prune_25", "gate_taylor_25"):
        os.makedirs(f"{d}/mqar/seed_{seed}/{b}")
        json.dump({"accuracy": [{"pairs": 8, "accuracy": 0.5}]}, open(f"{d}/mqar/seed_{seed}/{b}/mqar.json", "w"))
PY
PATH="$tmp/bin:$PATH" bash "$tmp/saf2/collect.sh" > "$tmp/saf_collect.log" 2>&1 || { cat "$tmp/saf_collect.log"; bad "saf collect.sh failed"; }
t2=$tmp/saf2/table2.md
for want in "| 4096 (RoPE) | 25% | +0.700 ± 0.050 |" "| 16384 (RoPE) | 50% | +1.790 ± 0.050 |" \
            "| 1B, 8192 (RoPE, 4 ranks) | 25% | +0.507 | n/a (in-run, across ranks) | 1.068x | -1.50 |" \
            "| 1B, 8192 (RoPE, 4 ranks) | 50% | +2.027 | n/a (in-run, across ranks) | 1.167x | -2.50 |" \
            "| 8192 | 25% | +0.770 ± 0.050 |"; do
  grep -qF -- "$want" "$t2" || bad "table2.md lacks: $want"
done
grep -qF -- "| SAF (variance, mean) | +0.770 ± 0.050 | +0.460 ± 0.050 | 5000 ± 0 | 54.90 |" "$tmp/saf2/table1.md" \
  || bad "table1.md: SAF's intervention seconds are not their own column"
n=$(grep -cE '\| (holds|does not hold|not shown at this scale|not measurable at this scale|by construction) \|$' "$tmp/saf2/REPORT.md" || true)
[ "$n" = 16 ] || bad "SAF REPORT.md has $n claim rows, expected 16"
echo "ok: SAF collector: RoPE and 1B rows in Table 2, intervention seconds in Table 1 ($n claim rows)"

# --- AAH: the paper's dropout stops the script before any job is written (CUDA has no dropout op) ---
for d in "" 0.1; do
  err=$(DROPOUT=$d SEEDS=0 WIKITEXT2_DIR=$tmp/wt2 aah --scale cluster --out "$tmp/drop$d" 2>&1 >/dev/null) && bad "DROPOUT='$d': jobs written"
  [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ "$err" == "error: AAH at --scale cluster: the paper's dropout 0.1 "*"the CUDA backend lacks"*"DROPOUT=0 runs without it, deviating from the paper's protocol" ]] \
    || bad "DROPOUT='$d': not the one dropout error line: $err"
  [ ! -e "$tmp/drop$d/jobs" ] || bad "DROPOUT='$d': a jobs folder was written"
done
one_error env DROPOUT=0.1 WIKITEXT2_DIR="$tmp/wt2" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/aah.sh" --scale gpu --out "$tmp/drop_gpu"
one_error env DROPOUT=x WIKITEXT2_DIR="$tmp/wt2" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/aah.sh" --scale gpu --out "$tmp/drop_x"
echo "ok: AAH's paper dropout is refused when the jobs are written (DROPOUT=0 writes them)"

# --- bad input -----------------------------------------------------------------------------------
one_error env SEEDS=0 WIKITEXT2_DIR="$tmp/none" PATH="$tmp/bin:$PATH" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/aah.sh" --scale cluster --out "$tmp/x1"
err=$(WIKITEXT2_DIR="$tmp/none" PATH="$tmp/bin:$PATH" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/aah.sh" --scale gpu --out "$tmp/x2" 2>&1 || true)
[[ "$err" == *"missing $tmp/none/train_*.bin $tmp/none/val_*.bin"*"scripts/data/prepare_corpus.sh"* ]] \
  || bad "missing shards: the error names the files and the command: $err"
one_error env DROPOUT=0 SEEDS="0 x" WIKITEXT2_DIR="$tmp/wt2" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/aah.sh" --scale gpu --out "$tmp/x3"
one_error env DROPOUT=0 WIKITEXT2_DIR="$tmp/wt2" SBATCH=hw-no-such-sbatch HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/aah.sh" --scale cluster --out "$tmp/x4"
exit $fail
