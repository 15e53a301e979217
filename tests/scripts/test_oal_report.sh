#!/usr/bin/env bash
# The OAL reproduction report (scripts/reproduce/oal_report.py) on hand-made inputs in the
# formats of `headwise oal-tables` (tables.json), scripts/oal_eval_cpu.sh (table3.csv) and
# `headwise bench-attention --curve --kinds --csv` (one file per kind group and round): every table is
# written as markdown and CSV in the
# paper's layout, rows the report does not know (a DiJiang baseline) appear with their own claims,
# and each verdict follows the stated rule. The numbers are chosen (and the expected verdicts
# worked out by hand in the comments) so that every verdict kind occurs. No headwise binary.
source "$(dirname "$0")/report_test_lib.sh"
python3 - "$tmp" <<'PY'
import json, os, sys
d = sys.argv[1]
def t1row(m, top, gauss, rnd, p, draws):
    return {"method": m, "error_kept_top": top, "error_kept_gaussian": gauss, "error_kept_random_mean": rnd,
            "p_value": p, "random_draws": draws}
def t2row(m, a, b, c, e, v=0.01):
    return {"method": m, "mse_pre": a, "relmse_pre": b, "mse_post": c, "relmse_post": e, "val_mse": v}
def write(case, t1, t2, f2, t3, curve, factors=None):
    """curve: (kind, T, CPU ms, total bytes); factors: {kind: [per-round multiplier]} (default one round)."""
    os.makedirs(f"{d}/{case}/eval/tables")
    json.dump({"table1": {"dims_selected": 17, "dims_total": 256, "dims_selected_gaussian": 20, "rows": t1},
               "table2": t2, "fig2": [{"G": g + 1, "heldout_mse": m, "val_mse": m, "params_per_head": (g + 2) * (g + 3) // 2}
                                      for g, m in enumerate(f2)]}, open(f"{d}/{case}/eval/tables/tables.json", "w"))
    with open(f"{d}/{case}/eval/tables/fig2.csv", "w") as f:
        f.write("G,heldout_mse,val_mse,params_per_head\n")
        for g, m in enumerate(f2):
            f.write(f"{g + 1},{m},{m},{(g + 2) * (g + 3) // 2}\n")
    with open(f"{d}/{case}/eval/table3.csv", "w") as f:
        f.write("method,ppl_best,best_step,ppl_last\n" + "".join(f"{r}\n" for r in t3))
    os.makedirs(f"{d}/{case}/curve")
    kinds = sorted({k for k, *_ in curve})
    factors = factors or {k: [1.0] for k in kinds}
    for kind in kinds:
        for r, x in enumerate(factors[kind]):
            with open(f"{d}/{case}/curve/round{r}_{kind.replace(' ', '_').replace('=', '_')}.csv", "w") as f:
                f.write("kind,T,ms_fwd_bwd,cpu_ms_fwd_bwd,relative_to_softmax,workspace_bytes,total_bytes\n")
                for k, T, cpu, total in curve:
                    if k == kind:
                        f.write(f"{kind},{T},{4 * cpu * x:.4f},{cpu * x:.4f},0,50000,{total}\n")
    open(f"{d}/{case}/commands.txt", "w").write("bash scripts/oal_eval_cpu.sh\n")

# Case a: the README's CPU-scale figures, rounded, plus a DiJiang row the report does not name.
write("a",
      [t1row("performer", 0.378, 0.047, 0.10, 0.001, 1000), t1row("taylor2", 0.016, 0.020, 0.010, 0.2, 100),
       t1row("dijiang", 0.05, 0.01, 0.08, 0.9, 100)],
      [t2row("taylor", 0.04, 0.45, 0.02, 0.39), t2row("global", 0.015, 0.160, 0.007, 0.113),
       t2row("random", 0.0142, 0.151, 0.0066, 0.1105), t2row("fixed:4", 0.0141, 0.149, 0.0065, 0.109),
       t2row("oal_bootstrap", 0.0140, 0.150, 0.0065, 0.110), t2row("dijiang", 0.0130, 0.140, 0.0060, 0.100)],
      [0.0150, 0.0146, 0.0143, 0.0142, 0.0138],
      ["softmax_lora,9.336,100,9.40", "oal,9.453,80,9.50", "global,9.452,100,9.46", "dijiang,9.9,60,10.1",
       "TaylorShift-conv,10.5,60,10.6"],
      [("softmax", 1024, 27.09, 2150000), ("linear G=1", 1024, 109.45, 4490000), ("linear G=4", 1024, 92.72, 4490000),
       ("softmax", 4096, 463.87, 8450000), ("linear G=1", 4096, 430.51, 10800000), ("linear G=4", 4096, 321.59, 10800000),
       ("softmax", 16384, 5682.67, 33670000), ("linear G=1", 16384, 1175.34, 36010000),
       ("linear G=4", 16384, 1185.22, 36010000)],
      # three rounds: softmax x 1, 1.02, 0.98; G=4 x 1, 0.99, 1.03; G=1 x 1, 1.01, 0.97
      {"softmax": [1.0, 1.02, 0.98], "linear G=4": [1.0, 0.99, 1.03], "linear G=1": [1.0, 1.01, 0.97]})
# Case b: the other branches (no random draws, a random grouping that wins, a Fig. 2 step up, a
# softmax that is beaten, a linear kernel that is always slower and grows quadratically, no G=1 row).
write("b", [t1row("performer", 0.3, 0.1, 0.1, 1.0, 0)],
      [t2row("random", 0.010, 0.100, 0.005, 0.080), t2row("oal_bootstrap", 0.012, 0.120, 0.006, 0.081)],
      [0.0150, 0.0160, 0.0140],
      ["softmax_lora,12.0,10,12.0", "oal,10.0,10,10.0", "global,11.0,10,11.0"],
      [("softmax", 128, 10.0, 3000), ("linear G=4", 128, 30.0, 2000), ("softmax", 256, 40.0, 5000),
       ("linear G=4", 256, 120.0, 6000)])
PY
python3 "$root/scripts/reproduce/oal_report.py" "$tmp/a" cpu "test rows" 60 "test machine" 0 2>/dev/null
python3 "$root/scripts/reproduce/oal_report.py" "$tmp/b" cpu "test rows" 60 "test machine" 1 2>/dev/null
# Table 1: performer 37.8% > random 10.0% with p 0.001 <= 0.05: holds; taylor2 1.6% > 1.0% but
# p 0.2: not measurable, and 1.6% < Gaussian 2.0%: does not hold; DiJiang 5.0% < random 8.0%: does
# not hold, 5.0% > Gaussian 1.0%: holds (with the paper's 64.8% vs 19.4%).
expect a/REPORT.md "| Performer | 17 of 256 (6.6%) | 37.8000 | 4.7000 | 10.0000 | 0.0010 | 1000 |"
expect a/REPORT.md "| Table 1, Performer: approximating only the top-contribution dimensions keeps more of the full error than as many random bulk dimensions | p = 0.000999 (none of 1,000 draws) | 37.8% vs 10.0% (p = 0.001 from 1000 draws (smallest possible 0.000999)) | holds |"
expect a/REPORT.md "| 1.6% vs 1.0% (p = 0.2 from 100 draws (smallest possible 0.0099)) | not measurable at this scale |"
expect a/REPORT.md "| 37.8-64.8% vs 4.7-19.4% (other approximations) | 1.6% vs 2.0% | does not hold |"
expect a/REPORT.md "| 5.0% vs 8.0% (p = 0.9 from 100 draws (smallest possible 0.0099)) | does not hold |"
expect a/REPORT.md "| Table 1, DiJiang: the top dimensions keep more of the error on the model's Q/K than on Gaussian Q/K | 64.8% vs 19.4% | 5.0% vs 1.0% | holds |"
expect a/REPORT.md "| DiJiang | 147 of 2,688 (5.47%) | 64.8% | 19.4% |"
# Table 2 (OAL 0.150 / 0.110): global 0.160 / 0.113 is 6.3% / 2.7% worse (both >= 2%): holds;
# random 0.151 / 0.1105 is within 2%: not measurable; DiJiang 0.140 / 0.100 is better: does not
# hold; the fixed:4 row is listed but not compared.
expect a/REPORT.md "| DiJiang | 0.0130 | 0.1400 | 0.0060 | 0.1000 | 0.0100 |"
expect a/REPORT.md "| OAL fixed:4 | 0.0141 | 0.1490 | 0.0065 | 0.1090 | 0.0100 |"
expect a/REPORT.md "| Table 2: OAL (bootstrap) has a lower RelMSE than Learned global (G = 1), before and after W_O | not in Table 2 (Fig. 2 and Table 3 isolate G = 1) | 0.1500 vs 0.1600; 0.1100 vs 0.1130 | holds |"
expect a/REPORT.md "| implied (the grouping is the method) | 0.1500 vs 0.1510; 0.1100 vs 0.1105 | not measurable at this scale |"
expect a/REPORT.md "| Table 2: OAL (bootstrap) has a lower RelMSE than DiJiang, before and after W_O | 0.432 vs 0.474; 0.595 vs 0.631 | 0.1500 vs 0.1400; 0.1100 vs 0.1000 | does not hold |"
expect a/REPORT.md "| OAL | 0.0780 | 0.4320 | 0.0310 | 0.5950 |"
# Fig. 2: 0.0150 -> 0.0138 is -8.0% with no step up: holds; G 1 -> 3 gives 0.0007 of 0.0012 (58%): holds.
expect a/REPORT.md "| G = 1..5: 0.015 -> 0.0138 (-8.0%) | holds |"
expect a/REPORT.md "| G = 1 -> 3: 58% of the drop | holds |"
expect a/REPORT.md "| 3 | 0.0143 | 0.0143 | 10 |"
# Table 3: OAL 9.453 vs global 9.452 (0.01%): not measurable; OAL vs DiJiang 9.9 (4.5% lower):
# holds; softmax 9.336 vs the best converted 9.452 (1.2% lower): holds.
expect a/REPORT.md "| 27.50 vs 31.71 (Qwen); 32.99 vs 36.03 (Llama) | 9.453 vs 9.452 (one seed, no spread) | not measurable at this scale |"
expect a/REPORT.md "| Table 3: OAL reaches a lower PPL than DiJiang after the same LoRA budget | 27.50 vs 36.05 (Qwen) | 9.453 vs 9.900 (one seed, no spread) | holds |"
expect a/REPORT.md "| 9.336 vs best converted 9.452 (Learned global (G = 1); one seed, no spread) | holds |"
# A label the report does not know still finds the paper's value by its leading letters.
expect a/REPORT.md "| Table 3: OAL reaches a lower PPL than TaylorShift-conv after the same LoRA budget | 27.50 vs 39.50 (Qwen) | 9.453 vs 10.500 (one seed, no spread) | holds |"
expect a/REPORT.md "| OAL | 9.4530 | 80 | 9.5000 |"
expect a/REPORT.md "| Llama-3.2-1B | OAL | 32.9900 | 63.6600 | 35.4200 | 41.6700 |"
# Fig. 3 in three rounds (softmax x 1, 1.02, 0.98; G=4 x 1, 0.99, 1.03; G=1 x 1, 1.01, 0.97): the
# round ratios G=4 / softmax are the base ratio x 1, 0.99 / 1.02 = 0.9706, 1.03 / 0.98 = 1.0510.
# At 1024 3.4227 x those = 3.423, 3.322, 3.597 (all above 1); at 4096 0.693 (0.673-0.729) and at 16384
# 0.209 (0.202-0.219) all below 1: softmax faster everywhere does not hold; the linear kernel is
# faster in every round from 4096 on: holds. The rounds scale each kind alike at every T, so each
# round's slope is ln(1185.22 / 321.59) / ln 4 = 0.94 <= 1.25: holds (softmax 1.81). G=4 / G=1 at
# 16384 = 1.0084 x 1, 0.99 / 1.01, 1.03 / 0.97 = 1.01, 0.99, 1.07 <= 1.25: holds. Memory: by construction.
expect a/REPORT.md "| linear G=4 / softmax CPU time: T = 1024: median 3.423x, rounds 3.322-3.597x (n = 3); T = 4096: median 0.693x, rounds 0.673-0.729x (n = 3); T = 16384: median 0.209x, rounds 0.202-0.219x (n = 3) | does not hold |"
expect a/REPORT.md "| not within 32K (against FlashAttention) | faster in every round from T = 4096 (median 0.209x, rounds 0.202-0.219x (n = 3) at 16384) | holds |"
expect a/REPORT.md "| log-log slope from T = 4096 to 16384: median 0.94, rounds 0.94-0.94 (softmax median 1.81) | holds |"
expect a/REPORT.md "| curves close (G = 5 vs G = 1) | median 1.01x, rounds 0.99-1.07x at T = 16384 | holds |"
expect a/REPORT.md "| 32.11 vs 34.34 MiB at T = 16384 (allocated buffers: arithmetic, not a finding) | by construction |"
expect a/REPORT.md "| linear G=4 | 16384 | 4741 | 1185.220 (1173.368-1220.777) | 0.2086 | 0.0477 | 34.3418 |"
# Case b: no draws: not measurable; random grouping 0.100 / 0.080 beats OAL 0.120 / 0.081: does
# not hold; Fig. 2 rises 6.7% at G = 2: does not hold, so 'most at low G' (0.0150 - 0.0160 of a 0.0010 drop: -100%) is not measurable; OAL
# 10.0 beats global 11.0 by 9.1%: holds; softmax 12.0 is 20% above OAL: does not hold; G=4 is 3x
# softmax at both lengths: holds / does not hold; slope ln 4 / ln 2 = 2.00: does not hold;
# softmax's buffers are larger at 256: does not hold.
expect b/REPORT.md "OAL (Outlier-Aware Attention Linearization, arXiv 2610.13674) -- SMOKE RUN, numbers mean nothing"
expect b/REPORT.md "- scale: **cpu (smoke)**"
expect b/REPORT.md "| 30.0% vs 10.0% (no draws) | not measurable at this scale |"
expect b/REPORT.md "| 0.1200 vs 0.1000; 0.0810 vs 0.0800 | does not hold |"
expect b/REPORT.md "| G = 1..3: 0.015 -> 0.014 (-6.7%) | does not hold |"
expect b/REPORT.md "| G = 1 -> 2: -100% of the drop | not measurable at this scale |"
expect b/REPORT.md "| 10.000 vs 11.000 (one seed, no spread) | holds |"
expect b/REPORT.md "| 12.000 vs best converted 10.000 (OAL; one seed, no spread) | does not hold |"
expect b/REPORT.md "| linear G=4 / softmax CPU time: T = 128: median 3.000x, rounds 3.000-3.000x (n = 1); T = 256: median 3.000x, rounds 3.000-3.000x (n = 1) | holds |"
expect b/REPORT.md "| median 3.000x, rounds 3.000-3.000x (n = 1) at the longest T = 256 | does not hold |"
expect b/REPORT.md "| log-log slope from T = 128 to 256: median 2.00, rounds 2.00-2.00 (softmax median 2.00) | does not hold |"
expect b/REPORT.md "| 0.00 vs 0.01 MiB at T = 256 (allocated buffers: arithmetic, not a finding) | does not hold |"
grep -qF "costs about as much as the learned global" "$tmp/b/REPORT.md" && { echo "case b has no G=1 row, yet a G=1 claim" >&2; fail=1; }
for c in a b; do
  for f in table1 table2 table3 fig2 fig3; do
    [ -s "$tmp/$c/$f.md" ] && [ -s "$tmp/$c/$f.csv" ] || { echo "case $c: missing $f.md or $f.csv" >&2; fail=1; }
  done
done
[ "$(head -1 "$tmp/a/table3.csv")" = "Method,PPL (best checkpoint),best at update,PPL (last)" ] || { echo "table3.csv header" >&2; fail=1; }
[ "$(sed -n 5p "$tmp/a/table3.csv")" = "DiJiang,9.9,60,10.1" ] || { echo "table3.csv DiJiang row: $(sed -n 5p "$tmp/a/table3.csv")" >&2; fail=1; }
exit $fail
