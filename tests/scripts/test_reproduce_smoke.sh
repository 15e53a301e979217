#!/usr/bin/env bash
# scripts/reproduce/<paper>.sh --smoke end to end with the built binary: every table (.md, .csv),
# every figure (.png with its .csv), any further file the paper writes, and REPORT.md's claim rows
# (one per headline claim, each with a verdict; for OAL also the named claim lines) must be
# written, and the report must say it was a smoke run. Prints the seconds taken.
# Usage: test_reproduce_smoke.sh PAPER HEADWISE_BIN. Exit 77 (skipped) without Debian's matplotlib.
set -euo pipefail
paper=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
/usr/bin/python3 -s -c "import matplotlib" 2>/dev/null || { echo "skipped: Debian's python3-matplotlib is missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
files=""
named_claims=()
case "$paper" in
  saf) tables="table1 table2 fig3 timing mqar tasks"; figures="fig3_patterns fig_timing fig_mqar"; claims=16 ;;
  aah) tables="table4 table5 table6"; figures="fig_acr_vs_loss"; claims=7 ;;
  aoh) tables="retention latency"; figures="fig_latency_vs_context"; claims=6 ;;
  oal) tables="table1 table2 table3 fig2 fig3 tasks"; figures="fig2 fig3"; files="curve_raw.csv"; claims=25
       named_claims=(
    "| Table 1, Performer: approximating only the top-contribution dimensions keeps more of the full error than as many random bulk dimensions |"
    "| Table 1, Performer: the top dimensions keep more of the error on the model's Q/K than on Gaussian Q/K |"
    "| Table 2: OAL (bootstrap) has a lower RelMSE than Random grouping (bootstrap sizes), before and after W_O |"
    "| Table 2: OAL (bootstrap) has a lower RelMSE than Learned global (G = 1), before and after W_O |"
    "| Fig. 2: the held-out error decreases as the fixed group count G grows |"
    "| Fig. 2: most of the decrease comes at low G (diminishing returns) |"
    "| Table 3: OAL reaches a lower PPL than the learned global kernel after the same LoRA budget |"
    "| Table 3: softmax + LoRA stays better than every converted model |"
    "| Fig. 3: softmax attention is faster than OAL's linear kernel (linear G=4) at every tested length |"
    "| Fig. 3: the linear kernel (linear G=4) is faster than softmax beyond some length |"
    "| Fig. 3: the linear kernel's time grows about linearly with length at long lengths |"
    "| Fig. 3: OAL's grouped kernel (linear G=4) costs about as much as the learned global kernel (linear G=1) |"
    "| Fig. 3: softmax needs less memory than the linear kernel (linear G=4) at every tested length |") ;;
  *) echo "error: unknown paper '$paper' (expected saf, aah, aoh or oal)" >&2; exit 1 ;;
esac
start=$(date +%s)
if ! HEADWISE_BIN=$2 bash "$root/scripts/reproduce/$paper.sh" --smoke --out "$tmp/out" > "$tmp/log" 2>&1; then
  tail -n 30 "$tmp/log" >&2
  echo "error: $paper.sh --smoke failed" >&2
  exit 1
fi
echo "$paper.sh --smoke: $(( $(date +%s) - start )) s"
fail=0
need() { [ -s "$tmp/out/$1" ] || { echo "missing or empty: $1" >&2; fail=1; }; }
for t in $tables; do need "$t.md"; need "$t.csv"; done
for f in $files; do need "$f"; done
for f in $figures; do
  need "$f.csv"; need "$f.png"
  [ "$(head -c 4 "$tmp/out/$f.png" 2>/dev/null | tail -c 3)" = PNG ] || { echo "not a PNG: $f.png" >&2; fail=1; }
done
need REPORT.md
if [ -s "$tmp/out/REPORT.md" ]; then
  grep -qE '^- scale: \*\*cpu( --smoke| \(smoke\))' "$tmp/out/REPORT.md" ||
    { echo "REPORT.md does not say it was a smoke run" >&2; fail=1; }
  grep -q '^Rule: ' "$tmp/out/REPORT.md" || { echo "REPORT.md states no verdict rule" >&2; fail=1; }
  n=$(grep -cE '\| (holds|does not hold|not shown at this scale|not measurable at this scale|by construction) \|$' "$tmp/out/REPORT.md" || true)
  [ "$n" = "$claims" ] || { echo "REPORT.md has $n claim rows with a verdict, expected $claims" >&2; fail=1; }
  for f in $tables; do grep -qF "$f.md" "$tmp/out/REPORT.md" || { echo "REPORT.md lacks the section of $f" >&2; fail=1; }; done
  for c in "${named_claims[@]}"; do
    grep -qF -- "$c" "$tmp/out/REPORT.md" || { echo "missing in REPORT.md: $c" >&2; fail=1; }
  done
fi
# saf's cluster scale writes its jobs (the full 124M configurations) and the collector, runs nothing.
if [ "$paper" = saf ]; then
  HEADWISE_BIN=$2 bash "$root/scripts/reproduce/saf.sh" --scale cluster --out "$tmp/cluster" > /dev/null 2>&1 \
    || { echo "saf.sh --scale cluster failed" >&2; fail=1; }
  for j in tokens time study context_8192 context_16384 mqar; do
    [ -s "$tmp/cluster/jobs/$j.sbatch" ] || { echo "missing cluster job $j.sbatch" >&2; fail=1; }
  done
  [ -x "$tmp/cluster/collect.sh" ] || { echo "missing cluster collect.sh" >&2; fail=1; }
  grep -q 'configs/saf_124m_16k_learned.json' "$tmp/cluster/jobs/context_16384.sbatch" 2>/dev/null \
    || { echo "context_16384.sbatch does not run the 16K config" >&2; fail=1; }
  [ "$(grep -c ' mqar --checkpoint ' "$tmp/cluster/jobs/mqar.sbatch" 2>/dev/null)" = 12 ] \
    || { echo "mqar.sbatch: expected 12 runs (3 seeds x 4 models)" >&2; fail=1; }
fi
[ "${KEEP_SMOKE_OUT:-}" ] && cp -r "$tmp/out" "$KEEP_SMOKE_OUT"
exit $fail
