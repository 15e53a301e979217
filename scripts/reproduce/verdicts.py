#!/usr/bin/env python3
"""The verdict rules that every reproduction report (scripts/reproduce/*_report.py) shares.

One place, so that SAF, AAH, AoH and OAL read their rows the same way, and one test
(tests/scripts/test_verdicts.py) checks the rules on hand-made rounds:

- A timing claim ("B is faster than A") is read from rounds that alternated A and B in fresh
  processes. Each round gives one ratio; the verdict reads the whole interval of the rounds
  (min..max), not one point: "holds" when the interval lies on the claimed side of 1, "does not
  hold" when it lies wholly on the other side, otherwise "not shown at this scale" (the rounds
  disagree about the sign, so the effect is within the round-to-round spread).
- A row that follows from how the experiment is built (windows narrower than the context give an
  ACR below 1; half the KV heads streaming give about half the KV bytes) is "by construction": a
  check of the arithmetic, not a reproduced finding, and not counted as one.
- A permutation or bootstrap p-value is printed with its number of draws and the smallest p those
  draws can give (1 / (draws + 1)): with 50 draws "p = 0.02" is the floor, not strong evidence.
- A quality claim gives the spread over seeds (mean +- sample std, n), or says there is one seed.
"""
import math
import statistics

HOLDS = "holds"
DOES_NOT_HOLD = "does not hold"
NOT_SHOWN = "not shown at this scale"
NOT_MEASURABLE = "not measurable at this scale"
BY_CONSTRUCTION = "by construction"
VERDICTS = (HOLDS, DOES_NOT_HOLD, NOT_SHOWN, NOT_MEASURABLE, BY_CONSTRUCTION)
# Verdicts that count as a reproduced (or refuted) finding in a report's tally.
FINDINGS = (HOLDS, DOES_NOT_HOLD)

# The least number of alternated rounds a cpu-scale timing claim is read from.
MIN_ROUNDS_CPU = 5


def interval(values):
    """(median, min, max) of a non-empty list of finite numbers."""
    vals = [float(v) for v in values]
    if not vals or not all(math.isfinite(v) for v in vals):
        raise ValueError(f"interval of {values!r}: needs at least one finite value")
    return statistics.median(vals), min(vals), max(vals)


def side_of_one(lo, hi, claimed):
    """The verdict for an interval [lo, hi] of ratios whose claimed side of 1 is `claimed`
    ("below" or "above")."""
    if claimed not in ("below", "above"):
        raise ValueError(f"claimed side must be 'below' or 'above', not {claimed!r}")
    below, above = hi < 1.0, lo > 1.0
    if (below and claimed == "below") or (above and claimed == "above"):
        return HOLDS
    if below or above:
        return DOES_NOT_HOLD
    return NOT_SHOWN


def timing_claim(ratios, claimed, unit="x"):
    """Verdict and text of a timing claim from per-round ratios (variant / baseline time, or a
    speedup), `claimed` "below" or "above" 1. Returns {"verdict", "ours", "median", "lo", "hi", "n"}."""
    if not ratios:
        return {"verdict": NOT_MEASURABLE, "ours": "no timed rounds", "median": None, "lo": None, "hi": None, "n": 0}
    med, lo, hi = interval(ratios)
    n = len(ratios)
    verdict = side_of_one(lo, hi, claimed)
    ours = f"median {med:.3f}{unit}, rounds {lo:.3f}-{hi:.3f}{unit} (n = {n})"
    return {"verdict": verdict, "ours": ours, "median": med, "lo": lo, "hi": hi, "n": n}


def spread_text(lo, hi, med):
    """The round-to-round spread as a share of the median: (max - min) / median."""
    return f"{100 * (hi - lo) / med:.1f}% of the median" if med else "n/a"


def p_value_text(p, draws):
    """A permutation / bootstrap p-value with its resolution."""
    floor = 1.0 / (int(draws) + 1)
    at_floor = " (the floor: no draw did as well)" if p <= floor * (1 + 1e-9) else ""
    return f"p = {p:.3g} from {int(draws)} draws (smallest possible {floor:.3g}){at_floor}"


def seed_spread(values, fmt="{:.4f}"):
    """Mean +- sample std over seeds, with n; "one seed, no spread" for a single value."""
    vals = [float(v) for v in values]
    if len(vals) == 1:
        return fmt.format(vals[0]) + " (one seed, no spread)"
    return f"{fmt.format(statistics.mean(vals))} +- {fmt.format(statistics.stdev(vals))} (n = {len(vals)} seeds)"


def tally(claims):
    """{'findings': reproduced + refuted, 'holds': n, 'does not hold': n, 'not shown': n, 'by construction': n,
    'not measurable': n}: what a report may count as findings (by-construction rows excluded)."""
    count = {v: sum(1 for c in claims if c["verdict"] == v) for v in VERDICTS}
    return {"findings": count[HOLDS] + count[DOES_NOT_HOLD], **count}
