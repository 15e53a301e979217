#!/usr/bin/env bash
# scripts/reproduce/<paper>.sh --smoke end to end with the built binary: every table (.md, .csv),
# every figure (.png with its .csv) and REPORT.md's claim rows (one per headline claim, each with a
# verdict) must be written, and the report must say it was a smoke run. Prints the seconds taken.
# Usage: test_reproduce_smoke.sh PAPER HEADWISE_BIN
set -euo pipefail
paper=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case "$paper" in
  saf) tables="table1 table2 fig3 timing mqar"; figures="fig3_patterns fig_timing fig_mqar"; claims=16 ;;
  aah) tables="table4 table5 table6"; figures="fig_acr_vs_loss"; claims=7 ;;
  aoh) tables="retention latency"; figures="fig_latency_vs_context"; claims=5 ;;
  *) echo "error: unknown paper '$paper' (expected saf, aah or aoh)" >&2; exit 1 ;;
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
for f in $figures; do
  need "$f.csv"; need "$f.png"
  [ "$(head -c 4 "$tmp/out/$f.png" 2>/dev/null | tail -c 3)" = PNG ] || { echo "not a PNG: $f.png" >&2; fail=1; }
done
need REPORT.md
if [ -s "$tmp/out/REPORT.md" ]; then
  grep -q '^- scale: \*\*cpu --smoke' "$tmp/out/REPORT.md" || { echo "REPORT.md does not say it was a smoke run" >&2; fail=1; }
  grep -q '^Rule: ' "$tmp/out/REPORT.md" || { echo "REPORT.md states no verdict rule" >&2; fail=1; }
  n=$(grep -cE '\| (holds|does not hold|not measurable at this scale) \|$' "$tmp/out/REPORT.md" || true)
  [ "$n" = "$claims" ] || { echo "REPORT.md has $n claim rows with a verdict, expected $claims" >&2; fail=1; }
  for f in $tables; do grep -qF "$f.md" "$tmp/out/REPORT.md" || { echo "REPORT.md lacks the section of $f" >&2; fail=1; }; done
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
