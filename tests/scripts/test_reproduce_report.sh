#!/usr/bin/env bash
# The AAH reproduction report on hand-made table rows: each claim's verdict follows the stated
# rule (differences of at least 0.01 nats with the paper's sign hold, smaller ones are not
# measurable), the tables are written as markdown and CSV, and REPORT.md carries the paper's
# reference values. No training: the numbers are chosen so every verdict kind occurs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
t4 = [{"branch": b, "val_loss": v, "acr": a, "tok_per_s": t, "memory_mb": 50, "peak_rss_mb": 100, "seeds": 1}
      for b, v, a, t in [("full", 2.47, 1.0, 1000), ("grouping_off", 2.468, 0.54, 1200), ("full_adaptive", 2.50, 0.87, 1100),
                         ("shallow_freeze", 2.471, 0.97, 1050), ("deep_reuse", 2.472, 0.9, 1300)]]
t5 = [{"branch": b, "val_loss": v, "delta_vs_first": v - 2.5, "seeds": 1}
      for b, v in [("pure_baseline", 2.5), ("shallow_control_interval_10", 2.49), ("shallow_freeze", 2.48),
                   ("fixed_random_grouping", 2.5), ("fixed_128", 2.5), ("shallow_shuffle_post_select", 2.485),
                   ("full_adaptive_shuffle_post_select", 2.6)]]
t6 = [{"branch": r["branch"], "val_loss": r["val_loss"], "val_ppl": 10.0, "acr": r["acr"], "tok_per_s": 5000, "seeds": 1}
      for r in t4]
for n, t in ((4, t4), (5, t5), (6, t6)):
    json.dump(t, open(f"{d}/t{n}.json", "w"))
open(f"{d}/commands.txt", "w").write("headwise experiment ...\n")
PY
python3 "$root/scripts/reproduce/aah_report.py" "$tmp" cpu "test rows" 60 "test machine" 2>/dev/null
fail=0
expect() {  # expect PATTERN: a line of REPORT.md must match
  grep -qF -- "$1" "$tmp/REPORT.md" || { echo "missing in REPORT.md: $1" >&2; fail=1; }
}
# ACR 0.54-0.97 < 1: holds. full_adaptive is +0.03 worse (>= 0.01): does not hold. tok/s 1.05-1.30x
# faster: the paper's "slower" does not hold. Shallow freeze 0.02 below the baseline: holds.
# Shuffle 0.005 worse: not measurable. Full-adaptive shuffle 0.1 worse: holds. Table 6's shallow
# freeze 2.471 vs grouping_off 2.468 (0.003): not measurable.
expect "| every AAH regime selects less than full coverage (Table 4 ACR < 1) | ACR 0.29-0.58 | ACR 0.540-0.970 | holds |"
expect "| deltas -0.0020, +0.0300, +0.0010, +0.0020 | does not hold |"
expect "| 0.75-0.82x | 1.05-1.30x | does not hold |"
expect "| shallow freeze beats the pure baseline (Table 5) | 7.2920 vs 7.3226 | 2.4800 vs 2.5000 | holds |"
expect "| 7.3074 vs 7.2920 | 2.4850 vs 2.4800 | not measurable at this scale |"
expect "| 7.3404 vs 7.3226 | 2.6000 vs 2.5000 | holds |"
expect "| 6.5293, next 6.5514 | 2.4710, best other 2.4680 | not measurable at this scale |"
expect "| Shallow freeze | 6.5367 | 0.3724 | 3479 | 36.7700 |"
for f in table4 table5 table6; do
  [ -s "$tmp/$f.md" ] && [ -s "$tmp/$f.csv" ] || { echo "missing $f.md or $f.csv" >&2; fail=1; }
done
[ "$(head -1 "$tmp/table5.csv")" = "Row,Val. loss,vs first row" ] || { echo "table5.csv header" >&2; fail=1; }
exit $fail
