#!/usr/bin/env bash
# The paper-protocol gpu/cluster branches of scripts/reproduce/*.sh without a GPU or Slurm
# (--smoke for the branches issue 40 added): the jobs they write and the collector on hand-made
# results. AAH: one sbatch job per experiment and seed, each starting with the gpu_check --quick
# step, running the 1B configs (WikiText-2, bf16, dropout 0.1, Table 5 at 3,000 updates with the
# fixed window 1024) with the seed's settings; the collector merges the seeds' tables (mean and
# spread) into the report with every table and claim row. Bad input: missing WikiText-2 shards,
# no sbatch, bad SEEDS: one `error:` line each.
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
aah() { PATH="$tmp/bin:$PATH" HEADWISE_BIN=$hw bash "$root/scripts/reproduce/aah.sh" "$@"; }
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
grep -q 'configs/experiment_aah_1b_4k.json' "$out/jobs/regimes_s0.sbatch" || bad "regimes job: not the 1B config"
grep -q 'configs/experiment_aah_ablations_1b_4k.json' "$out/jobs/ablations_s1.sbatch" || bad "ablations job: not the 1B Table 5 config"
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
n=$(grep -cE '\| (holds|does not hold|not measurable at this scale) \|$' "$out/REPORT.md" || true)
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

# --- bad input -----------------------------------------------------------------------------------
one_error env SEEDS=0 WIKITEXT2_DIR="$tmp/none" PATH="$tmp/bin:$PATH" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/aah.sh" --scale cluster --out "$tmp/x1"
err=$(WIKITEXT2_DIR="$tmp/none" PATH="$tmp/bin:$PATH" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/aah.sh" --scale gpu --out "$tmp/x2" 2>&1 || true)
[[ "$err" == *"missing $tmp/none/train_*.bin $tmp/none/val_*.bin"*"scripts/data/prepare_corpus.sh"* ]] \
  || bad "missing shards: the error names the files and the command: $err"
one_error env SEEDS="0 x" WIKITEXT2_DIR="$tmp/wt2" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/aah.sh" --scale gpu --out "$tmp/x3"
one_error env WIKITEXT2_DIR="$tmp/wt2" SBATCH=hw-no-such-sbatch HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/aah.sh" --scale cluster --out "$tmp/x4"
exit $fail
