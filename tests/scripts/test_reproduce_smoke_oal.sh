#!/usr/bin/env bash
# scripts/reproduce/oal.sh --smoke end to end with the built binary: every table and figure file
# (markdown, CSV, PNG) and REPORT.md with one claim line per headline claim must be written.
# Usage: test_reproduce_smoke_oal.sh HEADWISE_BIN. Exit 77 (skipped) without Debian's matplotlib.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "$1")
/usr/bin/python3 -s -c "import matplotlib" 2>/dev/null || { echo "skipped: Debian's python3-matplotlib is missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t0=$(date +%s)
HEADWISE_BIN=$bin bash "$root/scripts/reproduce/oal.sh" --smoke --out "$tmp/out" > "$tmp/log" 2>&1 || {
  tail -n 30 "$tmp/log" >&2; echo "oal.sh --smoke failed" >&2; exit 1; }
echo "oal.sh --smoke: $(( $(date +%s) - t0 )) s"
fail=0
for f in table1.md table1.csv table2.md table2.csv table3.md table3.csv fig2.md fig2.csv fig2.png fig3.md fig3.csv \
         fig3.png curve_raw.csv REPORT.md; do
  [ -s "$tmp/out/$f" ] || { echo "missing or empty: $f" >&2; fail=1; }
done
[ -s "$tmp/out/REPORT.md" ] || exit 1
for claim in "SMOKE RUN" \
    "| Table 1, Performer: approximating only the top-contribution dimensions keeps more of the full error than as many random bulk dimensions |" \
    "| Table 1, Performer: the top dimensions keep more of the error on the model's Q/K than on Gaussian Q/K |" \
    "| Table 2: OAL (bootstrap) has a lower RelMSE than Random grouping (bootstrap sizes), before and after W_O |" \
    "| Table 2: OAL (bootstrap) has a lower RelMSE than Learned global (G = 1), before and after W_O |" \
    "| Fig. 2: the held-out error decreases as the fixed group count G grows |" \
    "| Fig. 2: most of the decrease comes at low G (diminishing returns) |" \
    "| Table 3: OAL reaches a lower PPL than the learned global kernel after the same LoRA budget |" \
    "| Table 3: softmax + LoRA stays better than every converted model |" \
    "| Fig. 3: softmax attention is faster than OAL's linear kernel (linear G=4) at every tested length |" \
    "| Fig. 3: the linear kernel (linear G=4) is faster than softmax beyond some length |" \
    "| Fig. 3: the linear kernel's time grows about linearly with length at long lengths |" \
    "| Fig. 3: OAL's grouped kernel (linear G=4) costs about as much as the learned global kernel (linear G=1) |" \
    "| Fig. 3: softmax needs less memory than the linear kernel (linear G=4) at every tested length |"; do
  grep -qF -- "$claim" "$tmp/out/REPORT.md" || { echo "missing in REPORT.md: $claim" >&2; fail=1; }
done
# Every claim line ends in one of the three verdicts.
bad=$(sed -n '/^## Claims/,$p' "$tmp/out/REPORT.md" | grep '^| [TF]' |
      grep -cvE '\| (holds|does not hold|not measurable at this scale) \|$' || true)
[ "$bad" = 0 ] || { echo "$bad claim lines without a verdict" >&2; fail=1; }
exit $fail
