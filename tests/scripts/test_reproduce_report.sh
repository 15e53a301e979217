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
open(f"{d}/commands.txt", "w").write("headwise experiment ...\n")
PY
python3 "$root/scripts/reproduce/aah_report.py" "$tmp" cpu "test rows" 60 "test machine" 2>/dev/null
# ACR 0.54-0.97 < 1: holds. full_adaptive is +0.03 worse (>= 0.01): does not hold. tok/s 1.05-1.30x
# faster: the paper's "slower" does not hold. Shallow freeze 0.02 below the baseline: holds.
# Shuffle 0.005 worse: not measurable. Full-adaptive shuffle 0.1 worse: holds. Table 6's shallow
# freeze 2.471 vs grouping_off 2.468 (0.003): not measurable.
expect REPORT.md "| every AAH regime selects less than full coverage (Table 4 ACR < 1) | ACR 0.29-0.58 | ACR 0.540-0.970 | holds |"
expect REPORT.md "| deltas -0.0020, +0.0300, +0.0010, +0.0020 | does not hold |"
expect REPORT.md "| 0.75-0.82x | 1.05-1.30x | does not hold |"
expect REPORT.md "| shallow freeze beats the pure baseline (Table 5) | 7.2920 vs 7.3226 | 2.4800 vs 2.5000 | holds |"
expect REPORT.md "| 7.3074 vs 7.2920 | 2.4850 vs 2.4800 | not measurable at this scale |"
expect REPORT.md "| 7.3404 vs 7.3226 | 2.6000 vs 2.5000 | holds |"
expect REPORT.md "| 6.5293, next 6.5514 | 2.4710, best other 2.4680 | not measurable at this scale |"
expect REPORT.md "| Shallow freeze | 6.5367 | 0.3724 | 3479 | 36.7700 |"
for f in table4 table5 table6; do
  [ -s "$tmp/$f.md" ] && [ -s "$tmp/$f.csv" ] || { echo "missing $f.md or $f.csv" >&2; fail=1; }
done
[ "$(head -1 "$tmp/table5.csv")" = "Row,Val. loss,vs first row" ] || { echo "table5.csv header" >&2; fail=1; }

# AoH: retention rows (S = 0.5: spectrum 99.67 vs random 99.66 +- 0.15, within one sd: not
# measurable) and bench-infer lines at two contexts (the longest: prefill 0.64, decode 0.52 -> both
# hold; KV 0.5195 <= 0.55 holds); retention 99.67 >= 96.5 holds.
mkdir -p "$tmp/aoh/eval"
python3 - "$tmp/aoh" <<'PY'
import json, sys
d = sys.argv[1]
rows = [{"S": 0.5, "selection": "AoH spectrum", "ppl_retention": 99.67, "mqar_retention": 97.9},
        {"S": 0.5, "selection": "random (3 seeds)", "ppl_retention": 99.66, "mqar_retention": 96.0,
         "sd": {"ppl_retention": 0.15, "mqar_retention": 0.69}}]
json.dump({"rows": rows}, open(f"{d}/eval/table.json", "w"))
for c, (p, dr, kv) in {1024: (0.8, 0.7, 0.55), 8192: (0.64, 0.52, 0.5195)}.items():
    side = lambda s: {"prefill_ms": 100.0 * s, "decode_ms_per_token": 10.0 * s}
    json.dump({"plan": side(1.0), "all_softmax": side(1.5), "prefill_ratio": p, "decode_ratio": dr, "kv_bytes_ratio": kv},
              open(f"{d}/bench_{c}.json", "w"))
open(f"{d}/commands.txt", "w").write("bash scripts/aoh_eval_cpu.sh\n")
PY
python3 "$root/scripts/reproduce/aoh_report.py" "$tmp/aoh" cpu "test rows" 60 "test machine" 1024 8192 2>/dev/null
for line in "| 96.5% on average | 99.67% | holds |" \
            "| 99.67 vs 99.66 +- 0.15 | not measurable at this scale |" \
            "| up to -41.4% | -36.0% | holds |" "| up to -66.0% | -48.0% | holds |" \
            "| -50% at 256K | -48.1% at 8192 | holds |"; do
  grep -qF -- "$line" "$tmp/aoh/REPORT.md" || { echo "missing in AoH REPORT.md: $line" >&2; fail=1; }
done
[ "$(sed -n 3p "$tmp/aoh/latency.csv")" = "8192,100.0,150.0,0.64,10.0,15.0,0.52,0.5195" ] || { echo "latency.csv row" >&2; fail=1; }
exit $fail
