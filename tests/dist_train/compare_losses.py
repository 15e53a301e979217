#!/usr/bin/env python3
"""Compare the per-step losses of two headwise runs (metrics.jsonl files).

  compare_losses.py GOT REF --tol T [--steps N] [--from-step K] [--key loss]

Every record of GOT with a "step" and the key (default "loss") must match REF's record of the
same step within T (absolute). GOT must cover exactly the steps K..N-1 when --steps is given
(K defaults to 0), so a run that stopped early or logged twice fails. Exit 0 and one summary
line when all agree, else exit 1 naming the worst step. Standard library only.
"""
import argparse
import json
import sys


def records(path, key):
    out = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not a JSON line ({e})")
            if not isinstance(rec, dict) or key not in rec:
                continue
            step = rec.get("step")
            if not isinstance(step, int) or not isinstance(rec[key], (int, float)):
                sys.exit(f"{path}:{n}: 'step' or '{key}' is not a number")
            if step in out:
                sys.exit(f"{path}:{n}: step {step} logged twice")
            out[step] = float(rec[key])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("got")
    ap.add_argument("ref")
    ap.add_argument("--tol", type=float, required=True)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--from-step", type=int, default=0)
    ap.add_argument("--key", default="loss")
    a = ap.parse_args()
    got, ref = records(a.got, a.key), records(a.ref, a.key)
    if not got:
        sys.exit(f"FAIL: no '{a.key}' records in {a.got}")
    if a.steps is not None:
        want = list(range(a.from_step, a.steps))
        if sorted(got) != want:
            sys.exit(f"FAIL: {a.got} has '{a.key}' at steps {sorted(got)}, expected {a.from_step}..{a.steps - 1}")
    missing = [s for s in got if s not in ref]
    if missing:
        sys.exit(f"FAIL: {a.ref} has no '{a.key}' at steps {missing}")
    worst = max(got, key=lambda s: abs(got[s] - ref[s]))
    diff = abs(got[worst] - ref[worst])
    if not diff <= a.tol:  # also catches NaN
        sys.exit(f"FAIL: step {worst}: {a.key} {got[worst]!r} in {a.got} vs {ref[worst]!r} in {a.ref} "
                 f"(|diff| {diff:.3g} > {a.tol})")
    print(f"ok: {len(got)} '{a.key}' values agree within {a.tol} (worst step {worst}: {diff:.3g})")


if __name__ == "__main__":
    main()
