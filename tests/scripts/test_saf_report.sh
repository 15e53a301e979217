#!/usr/bin/env bash
# The SAF reproduction report on hand-made experiment summaries: each table is written in the
# paper's layout (markdown + CSV) and each claim's verdict follows the stated rule (a difference of
# two PPL changes holds with the paper's sign when it reaches max(0.1 pp, the seeds' combined std),
# single-seed rows use sqrt(2) x SAF 25%'s seed std; an A-B-B-A speedup holds when every pair lies
# above 1, is not shown when the pairs straddle 1; the arena-memory row is by construction).
# The numbers are chosen so every verdict kind occurs; the expected lines are worked out by hand in
# the comments. No training.
source "$(dirname "$0")/report_test_lib.sh"
python3 - "$tmp" <<'PY'
import json, math, os, sys
d = sys.argv[1]
def s(m, sd=None): return {"mean": m, "std": sd}
def row(b, pc, sd=None, fire=None, abba=None, mem=0.0, upd=100.0, rss=None, iv=None):
    return {"intervention_seconds": None if iv is None else s(iv[0], iv[1]), "branch": b, "ppl_change_pct": s(pc, sd), "fire_step": fire, "abba_update_speedup": None if abba is None else {"mean": sorted(abba)[len(abba) // 2], "std": None, "pair_ratios": abba},
            "update_speedup": s(1.0, 0.02), "memory_change_pct": s(mem, 0.0), "updates": s(upd, 0.0),
            "peak_rss_change_pct": None if rss is None else s(rss, 0.5)}
def write(name, rows):
    os.makedirs(f"{d}/{name}", exist_ok=True)
    json.dump({"summary": rows}, open(f"{d}/{name}/results.json", "w"))
write("tokens", [row("ordinary", 0.0, 0.0), row("saf_25", 0.70, 0.05, abba=[1.02, 1.03, 1.05], mem=-2.0, rss=1.0),
                 row("saf_50", 2.50, 0.10, abba=[0.98, 0.995, 1.01], mem=-4.0), row("prune_25", 0.85, 0.05),
                 row("random_25", 0.75, 0.10), row("gate_taylor_25", 0.90, 0.10)])
write("time", [row("ordinary", 0.0, 0.0), row("saf_25", 0.40, 0.05, iv=(54.9, 6.0)), row("saf_50", 2.0, 0.1), row("prune_25", 0.90, 0.05),
               row("random_25", 1.20, 0.05), row("random_50", 2.05, 0.1)])
write("context_128", [row("ordinary", 0.0, 0.0), row("saf_25", 1.00, 0.05, abba=[1.005, 1.01, 1.02], mem=-1.5),
                      row("saf_50", 3.00, 0.10, abba=[1.04, 1.05, 1.07], mem=-3.0)])
study = [row("ordinary", 0.0, fire=25)]
for p, a, b in [("mean", 0.60, 2.60), ("sharp_mean", 0.62, 2.45), ("gaussian", 0.90, 3.0), ("dirichlet", 0.80, 2.90),
                ("structured_random", 3.0, 6.0)]:
    study += [row(f"{p}_25", a, fire=50), row(f"{p}_50", b, fire=50)]
study += [row("saf_25_at_25", 0.65, fire=25), row("saf_25_at_75", 0.68, fire=75), row("saf_25_at_100", 8.0, fire=100)]
write("study", study)
acc = {"ordinary": (20, 22), "saf_25": (50, 54), "prune_25": (51, 53), "gate_taylor_25": (60, 62)}
for i, seed in enumerate((1337, 1338)):
    for b, v in acc.items():
        os.makedirs(f"{d}/mqar/seed_{seed}/{b}")
        json.dump({"accuracy": [{"pairs": 4, "accuracy": 0.9}, {"pairs": 8, "accuracy": v[i] / 100}]},
                  open(f"{d}/mqar/seed_{seed}/{b}/mqar.json", "w"))
open(f"{d}/commands.txt", "w").write("headwise experiment ...\n")
PY
python3 "$root/scripts/reproduce/saf_report.py" "$tmp" cpu "test rows" 60 "test machine" 256 128 256 2>/dev/null
# Table 1: SAF 0.70 vs random 0.75 (d -0.05 < hypot(0.05, 0.10) = 0.112): not measurable; vs pruning
# 0.85 (d -0.15 >= 0.1): holds. Matched time: pruning 0.90 vs SAF 0.40 (+0.5, paper's sign is -):
# does not hold. Random vs SAF at time: 25% +0.80 holds, 50% +0.05 (< 0.141) not measurable -> not measurable.
expect REPORT.md "| variance selection beats random heads at matched tokens (Table 1) | +0.663 vs +1.282 | +0.700 ± 0.050 vs +0.750 ± 0.100 | not measurable at this scale |"
expect REPORT.md "| +0.663 vs +0.806 | +0.700 ± 0.050 vs +0.850 ± 0.050 | holds |"
expect REPORT.md "| +0.113 vs +0.456 | +0.900 ± 0.050 vs +0.400 ± 0.050 | does not hold |"
expect REPORT.md "| 0.786 / 0.866 pp | +0.800 / +0.050 pp | not measurable at this scale |"
# Table 2: 50% above 25% at 128 (3.0 vs 1.0) and 256 (2.5 vs 0.7): holds; 25% cost 0.70 at 256 below
# 1.00 at 128 (-0.3): holds. A-B-B-A pairs: SAF 25% above 1 at 128 (1.005-1.02) and 256 (1.02-1.05):
# holds; SAF 50% above 1 at 128 but 0.98-1.01 at 256: not shown. Arena -4.00..-1.50: by construction.
expect REPORT.md "| +2.49 vs +0.77 at 4K | 128: +3.000 vs +1.000, 256: +2.500 vs +0.700 | holds |"
expect REPORT.md "| the 25% PPL cost shrinks with context (Table 2; ours 128 vs 256) | +0.768 at 4K, +0.450 at 16K | +1.000 ± 0.050 vs +0.700 ± 0.050 | holds |"
expect REPORT.md "| SAF 25% makes the optimizer update faster (Table 2, A-B-B-A, every context) | 1.025-1.056x | 128: median 1.010x, rounds 1.005-1.020x (n = 3); 256: median 1.030x, rounds 1.020-1.050x (n = 3) | holds |"
expect REPORT.md "| 1.070-1.119x | 128: median 1.050x, rounds 1.040-1.070x (n = 3); 256: median 0.995x, rounds 0.980-1.010x (n = 3) | not shown at this scale |"
expect REPORT.md "| -0.82% to -3.04% | -4.00% to -1.50% (fewer parameters: arithmetic, not a finding) | by construction |"
# Fig. 3 (one seed, threshold max(0.1, sqrt(2) x 0.05) = 0.1): Gaussian/Dirichlet 0.2-0.4 above the
# mean: holds; sharp mean 2.45 below the mean's 2.60 at 50%: does not hold. Timing: after training
# 8.0 vs 0.6 holds; 75% 0.68 vs 0.60 (0.08, above sqrt(2) x 0.05 but below the 0.1 floor): not measurable.
expect REPORT.md "| none does | gaussian 25%: +0.300, gaussian 50%: +0.400, dirichlet 25%: +0.200, dirichlet 50%: +0.300 pp vs mean | holds |"
expect REPORT.md "| +2.649 vs +2.780 | +2.600 vs +2.450 | does not hold |"
expect REPORT.md "| +8.168 vs about +0.66 | +8.000 vs +0.600 | holds |"
expect REPORT.md "| about +0.66 vs +0.936 | +0.600 vs +0.680 | not measurable at this scale |"
# MQAR at 8 pairs (2 seeds): SAF 52 ± 2.83; ordinary 21 ± 1.41 (holds), pruning 52 (not measurable),
# Gate-Taylor 61 (9 > hypot(1.41, 2.83) = 3.16 in the wrong direction: does not hold).
expect REPORT.md "| 54.42 vs 26.19 at 64 pairs | 52.00 ± 2.83 vs 21.00 ± 1.41 | holds |"
expect REPORT.md "| 54.42 vs 29.03 at 64 pairs | 52.00 ± 2.83 vs 52.00 ± 1.41 | not measurable at this scale |"
expect REPORT.md "| 54.42 vs 26.59 at 64 pairs | 52.00 ± 2.83 vs 61.00 ± 1.41 | does not hold |"
# The tables in the paper's layout, with the paper's reference rows in REPORT.md.
# The intervention time is its own column (outside the matched-time budget): SAF's 54.9 ± 6.0 s.
expect table1.md "| SAF (variance, mean) | +0.700 ± 0.050 | +0.400 ± 0.050 | 100 ± 0 | 54.90 ± 6.00 |"
expect table1.md "| Gate-Taylor pruning | +0.900 ± 0.100 | n/a (not run at matched time) | n/a | n/a |"
expect table1.md "| Random heads, mean 50% | n/a (not run at matched tokens) | +2.050 ± 0.100 | 100 ± 0 | n/a |"
expect table2.md "| 128 | 25% | +1.000 ± 0.050 | 1.010x (1.005-1.020, 3 pairs) | 1.000x ± 0.020x | -1.50 ± 0.00 | n/a |"
expect table2.md "| 256 | 25% | +0.700 ± 0.050 | 1.030x (1.020-1.050, 3 pairs) | 1.000x ± 0.020x | -2.00 ± 0.00 | +1.00 ± 0.50 |"
expect fig3.md "| Gaussian sample | +0.900 | +3.000 |"
expect timing.md "| after training | 100 | +8.000 |"
expect timing.md "| 50% (midpoint) | 50 | +0.600 |"
expect mqar.md "| 8 | 21.00 ± 1.41 | 52.00 ± 2.83 | 52.00 ± 1.41 | 61.00 ± 1.41 |"
expect REPORT.md "| 124M, 16K | 25% | +0.450 ± 0.012 | 1.025x | -0.82 |"
expect REPORT.md "| 64 | 26.19 ± 2.75 | 54.42 ± 8.70 | 29.03 ± 1.42 | 26.59 ± 4.41 |"
expect table2.csv "Context,Ratio,PPL change (%),Update speedup (A-B-B-A median (min-max of the pairs); first seed),In-run speedup (one measurement; not read by a claim),Arena memory change (%),Peak RSS change (%)"
expect fig3_patterns.csv "dirichlet,0.5,2.9"
expect fig_mqar.csv "gate_taylor_25,8,61.0,1.4142135623730951"
expect fig_timing.csv "after training,100,8.0"
# A random-heads control that drew the variance choice's very heads (in every seed) is not
# measurable whatever its PPL; with one head different the noise rule decides again (1.5 vs 0.7: holds).
for random_heads in "[[0, 0], [0, 1]]" "[[1, 0], [0, 1]]"; do
  python3 - "$tmp" "$random_heads" <<'PY'
import json, sys
p = f"{sys.argv[1]}/tokens/results.json"
r = json.load(open(p))
for row in r["summary"]:
    if row["branch"] == "random_25":
        row["ppl_change_pct"] = {"mean": 1.5, "std": 0.05}
r["seeds"] = [{"seed": 1, "branches": [{"branch": "saf_25", "selected": [[0, 1], [0, 0]]},
                                       {"branch": "random_25", "selected": json.loads(sys.argv[2])}]}]
json.dump(r, open(p, "w"))
PY
  python3 "$root/scripts/reproduce/saf_report.py" "$tmp" cpu "test rows" 60 "test machine" 256 128 256 2>/dev/null
  if [ "$random_heads" = "[[0, 0], [0, 1]]" ]; then
    expect REPORT.md "| +0.663 vs +1.282 | +0.700 ± 0.050 vs +1.500 ± 0.050 (the same heads in every seed: the variance choice fills whole layers) | not measurable at this scale |"
  else
    expect REPORT.md "| +0.663 vs +1.282 | +0.700 ± 0.050 vs +1.500 ± 0.050 | holds |"
  fi
done
# A missing input is one error line naming the file, exit 1, and no REPORT.md change.
rm "$tmp/mqar/seed_1338/prune_25/mqar.json"
cp "$tmp/REPORT.md" "$tmp/REPORT.before"
if err=$(python3 "$root/scripts/reproduce/saf_report.py" "$tmp" cpu "test rows" 60 "test machine" 256 128 256 2>&1); then
  echo "saf_report.py accepted a missing mqar.json" >&2; fail=1
fi
[ "$err" = "error: $tmp/mqar/seed_1338/prune_25/mqar.json: not found (an output of scripts/reproduce/saf.sh's runs)" ] \
  || { echo "unexpected error output: $err" >&2; fail=1; }
cmp -s "$tmp/REPORT.md" "$tmp/REPORT.before" || { echo "REPORT.md changed on a failed run" >&2; fail=1; }
exit $fail
