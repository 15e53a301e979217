#!/usr/bin/env python3
"""The shared verdict rules of the reproduction reports (scripts/reproduce/verdicts.py) on hand-made
rounds, each expected value worked out by hand in the comment beside it.
Usage: test_verdicts.py REPO_ROOT"""
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "scripts", "reproduce"))
import verdicts as v  # noqa: E402

failures = []


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


# Decode-time ratios (AoH / all-softmax) of five alternated rounds.
# Straddling 1 (0.93 .. 1.04): the rounds disagree about the sign -> not shown.
straddle = [0.97, 1.04, 0.93, 0.99, 1.01]
r = v.timing_claim(straddle, "below")
expect("straddling rounds", r["verdict"], v.NOT_SHOWN)
expect("straddling median", r["median"], 0.99)
expect("straddling interval", (r["lo"], r["hi"]), (0.93, 1.04))
expect("straddling text", r["ours"], "median 0.990x, rounds 0.930-1.040x (n = 5)")
# Wholly below 1 (0.61 .. 0.72), claimed below -> holds; claimed above -> does not hold.
below = [0.70, 0.61, 0.72, 0.66, 0.64]
expect("below, claimed below", v.timing_claim(below, "below")["verdict"], v.HOLDS)
expect("below, claimed above", v.timing_claim(below, "above")["verdict"], v.DOES_NOT_HOLD)
expect("below median", v.timing_claim(below, "below")["median"], 0.66)
# Speedups wholly above 1 (1.02 .. 1.09), claimed above -> holds.
expect("above, claimed above", v.timing_claim([1.05, 1.02, 1.09, 1.06], "above")["verdict"], v.HOLDS)
# One round touching 1 exactly: the interval is not strictly on one side -> not shown.
expect("touching 1", v.timing_claim([0.8, 0.9, 1.0], "below")["verdict"], v.NOT_SHOWN)
# A single point below 1 that the old rule read as "holds" (0.87 at 8K) still holds as one round,
# but the AoH rows of one run (0.96, 1.33, 0.69, 0.87) straddle: not shown.
expect("the old aoh rows", v.timing_claim([0.96, 1.33, 0.69, 0.87], "below")["verdict"], v.NOT_SHOWN)
expect("no rounds", v.timing_claim([], "below")["verdict"], v.NOT_MEASURABLE)
try:
    v.timing_claim([0.9], "sideways")
    failures.append("an unknown claimed side was accepted")
except ValueError:
    pass
# p-values: 50 draws give a floor of 1/51 = 0.0196; 1,000 draws 1/1001 = 0.000999.
expect("p at the floor", v.p_value_text(1 / 51, 50),
       "p = 0.0196 from 50 draws (smallest possible 0.0196) (the floor: no draw did as well)")
expect("p above the floor", v.p_value_text(0.25, 1000), "p = 0.25 from 1000 draws (smallest possible 0.000999)")
# Seed spread: 2.0, 2.2, 2.4 -> mean 2.2, sample std 0.2.
expect("seed spread", v.seed_spread([2.0, 2.2, 2.4], "{:.2f}"), "2.20 +- 0.20 (n = 3 seeds)")
expect("one seed", v.seed_spread([2.5], "{:.2f}"), "2.50 (one seed, no spread)")
# The tally leaves by-construction rows out of the findings.
claims = [{"verdict": v.HOLDS}, {"verdict": v.BY_CONSTRUCTION}, {"verdict": v.NOT_SHOWN}, {"verdict": v.DOES_NOT_HOLD}]
t = v.tally(claims)
expect("tally findings", t["findings"], 2)
expect("tally by construction", t[v.BY_CONSTRUCTION], 1)
expect("spread text", v.spread_text(0.9, 1.1, 1.0), "20.0% of the median")

if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
print("verdicts: all rules as worked by hand")
