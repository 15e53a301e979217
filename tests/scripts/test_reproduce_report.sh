#!/usr/bin/env bash
# The AAH reproduction report on hand-made table rows: each claim's verdict follows the stated
# rule (differences of at least 0.01 nats with the paper's sign hold, smaller ones are not
# measurable), the tables are written as markdown and CSV, and REPORT.md carries the paper's
# reference values. No training: the numbers are chosen so every verdict kind occurs.
source "$(dirname "$0")/report_test_lib.sh"
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
# The A-B-B-A pairs t_full / t_regime: grouping_off below 1 in every pair (slower: the paper's sign),
# full_adaptive on both sides of 1 -> the claim over every regime is not shown.
import os
os.makedirs(f"{d}/regimes")
summary = [{"branch": "full", "abba_update_speedup": None},
           {"branch": "grouping_off", "abba_update_speedup": {"mean": 0.93, "pair_ratios": [0.90, 0.95, 0.93, 0.92]}},
           {"branch": "full_adaptive", "abba_update_speedup": {"mean": 1.0, "pair_ratios": [0.97, 1.04, 1.01, 0.99]}}]
json.dump({"summary": summary}, open(f"{d}/regimes/results.json", "w"))
open(f"{d}/commands.txt", "w").write("headwise experiment ...\n")
PY
python3 "$root/scripts/reproduce/aah_report.py" "$tmp" cpu "test rows" 60 "test machine" 2>/dev/null
# ACR 0.54-0.97 < 1: by construction. full_adaptive is +0.03 worse (>= 0.01): does not hold. Speed:
# grouping_off median 0.925 (0.90-0.95) holds, full_adaptive 1.000 (0.97-1.04) straddles: not shown.
# Shallow freeze 0.02 below the baseline: holds.
# Shuffle 0.005 worse: not measurable. Full-adaptive shuffle 0.1 worse: holds. Table 6's shallow
# freeze 2.471 vs grouping_off 2.468 (0.003): not measurable.
expect REPORT.md "| every AAH regime selects less than full coverage (Table 4 ACR < 1) | ACR 0.29-0.58 | ACR 0.540-0.970 (windows narrower than the context: arithmetic, not a finding) | by construction |"
expect REPORT.md "| deltas -0.0020, +0.0300, +0.0010, +0.0020 (one seed, no spread) | does not hold |"
expect REPORT.md "| 0.75-0.82x (tokens/s) | grouping_off: median 0.925x, rounds 0.900-0.950x (n = 4); full_adaptive: median 1.000x, rounds 0.970-1.040x (n = 4) | not shown at this scale |"
expect REPORT.md "| shallow freeze beats the pure baseline (Table 5) | 7.2920 vs 7.3226 | 2.4800 vs 2.5000 (one seed, no spread) | holds |"
expect REPORT.md "| 7.3074 vs 7.2920 | 2.4850 vs 2.4800 (one seed, no spread) | not measurable at this scale |"
expect REPORT.md "| 7.3404 vs 7.3226 | 2.6000 vs 2.5000 (one seed, no spread) | holds |"
expect REPORT.md "| 6.5293, next 6.5514 | 2.4710, best other 2.4680 | not measurable at this scale |"
expect REPORT.md "| Shallow freeze | 6.5367 | 0.3724 | 3479 | 36.7700 |"
# With two seeds per branch the threshold is their spread: shallow freeze 2.46 / 2.50 (sd 0.0283) and
# the pure baseline 2.48 / 2.52 (sd 0.0283) give hypot = 0.0400 > |2.48 - 2.50|: not measurable.
for sd_ in 1337:2.46:2.48 1338:2.50:2.52; do
  IFS=: read -r seed a b <<< "$sd_"
  mkdir -p "$tmp/ablations/seed_$seed/shallow_freeze" "$tmp/ablations/seed_$seed/pure_baseline"
  echo "{\"val_loss\": $a}" > "$tmp/ablations/seed_$seed/shallow_freeze/result.json"
  echo "{\"val_loss\": $b}" > "$tmp/ablations/seed_$seed/pure_baseline/result.json"
done
python3 "$root/scripts/reproduce/aah_report.py" "$tmp" cpu "test rows" 60 "test machine" 2>/dev/null
expect REPORT.md "| 2.4800 vs 2.5000 (2 seeds, threshold 0.0400 from their spread) | not measurable at this scale |"
for f in table4 table5 table6; do
  [ -s "$tmp/$f.md" ] && [ -s "$tmp/$f.csv" ] || { echo "missing $f.md or $f.csv" >&2; fail=1; }
done
[ "$(head -1 "$tmp/table5.csv")" = "Row,Val. loss,vs first row" ] || { echo "table5.csv header" >&2; fail=1; }

# AoH: retention rows (S = 0.5: spectrum 99.67 vs random 99.66 +- 0.15, within one sd: not
# measurable) and bench-infer --side lines at two contexts, 3 rounds each (ROUNDS=3). Per round the
# ratio is plan / all-softmax of the process's value. At 8192 the prefill ratios 0.60, 0.64, 0.70 lie
# below 1 (holds, median 0.64); the decode ratios (median ms/token) 0.90, 1.05, 0.95 straddle 1 (not
# shown, median 0.95); KV 0.5195 is by construction; bytes per step (weights 100 + KV 52 vs 100 + 100)
# = 0.76. MQAR 97.9 vs 96.0 +- 0.69 beats random by more than one sd: holds. The tally counts 3
# findings (retention, MQAR, prefill), 1 not shown (decode), 1 not measurable (PPL vs random) and the
# KV row apart.
mkdir -p "$tmp/aoh/eval" "$tmp/aoh/bench"
python3 - "$tmp/aoh" <<'PY'
import json, sys
d = sys.argv[1]
rows = [{"S": 0.5, "selection": "AoH spectrum", "ppl_retention": 99.67, "mqar_retention": 97.9},
        {"S": 0.5, "selection": "random (3 seeds)", "ppl_retention": 99.66, "mqar_retention": 96.0,
         "sd": {"ppl_retention": 0.15, "mqar_retention": 0.69}}]
json.dump({"rows": rows}, open(f"{d}/eval/table.json", "w"))
ratios = {1024: ([0.8, 0.9, 0.85], [0.9, 0.95, 0.97]), 8192: ([0.60, 0.64, 0.70], [0.90, 1.05, 0.95])}
for c, (pre, dec) in ratios.items():
    for r in range(3):
        side = lambda p_ms, d_ms, kv: {"prefill_ms": p_ms, "decode_median_ms_per_token": d_ms,
                                       "kv_cache_bytes": kv, "weight_bytes_per_token": 100}
        json.dump({"plan": side(100.0 * pre[r], 10.0 * dec[r], 52)},
                  open(f"{d}/bench/ctx{c}_round{r}_plan.json", "w"))
        json.dump({"all_softmax": side(100.0, 10.0, 100)}, open(f"{d}/bench/ctx{c}_round{r}_all-softmax.json", "w"))
open(f"{d}/commands.txt", "w").write("bash scripts/aoh_eval_cpu.sh\n")
PY
ROUNDS=3 python3 "$root/scripts/reproduce/aoh_report.py" "$tmp/aoh" cpu "test rows" 60 "test machine" 1024 8192
for line in "| 96.5% on average | 99.67% | holds |" \
            "| 99.67 vs random 99.66 +- 0.15 (sd over the random seeds) | not measurable at this scale |" \
            "| up to -41.4% | time ratio median 0.640x, rounds 0.600-0.700x (n = 3) | holds |" \
            "| up to -66.0% | time ratio median 0.950x, rounds 0.900-1.050x (n = 3); bytes read per step 0.760x | not shown at this scale |" \
            "| -50% at 256K | -48.0% at 8192 (sink + window rows of half the KV heads: arithmetic, not a finding) | by construction |" \
            "Tally: 3 findings (3 hold, 0 do not hold); 1 not shown at this scale, 1 not measurable, 1 by construction."; do
  grep -qF -- "$line" "$tmp/aoh/REPORT.md" || { echo "missing in AoH REPORT.md: $line" >&2; fail=1; }
done
[ "$(sed -n 3p "$tmp/aoh/fig_latency_vs_context.csv")" = "8192,3,0.64,0.6,0.7,0.95,0.9,1.05,0.76,0.52" ] \
  || { echo "fig_latency_vs_context.csv row: $(sed -n 3p "$tmp/aoh/fig_latency_vs_context.csv")" >&2; fail=1; }
exit $fail
