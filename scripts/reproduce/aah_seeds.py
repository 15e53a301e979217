#!/usr/bin/env python3
"""AAH at gpu/cluster scale runs one job per seed; this merges their tables.

Usage: aah_seeds.py OUT SEED... (reads OUT/t{4,5,6}.s<SEED>.json, written by `headwise aah-table`
on each seed's experiment). Writes OUT/t{4,5,6}.json with every numeric column the mean over the
seeds (what aah_report.py reads; "seeds" is the count) plus val_loss_sd (sample standard
deviation, 0 for one seed), val_loss_min and val_loss_max, and OUT/seeds.md: per table and
branch, val loss mean, sd and range over the seeds, and the seeds themselves.
"""
import json
import os
import statistics
import sys

out, seeds = sys.argv[1], sys.argv[2:]
if not seeds:
    sys.exit("error: aah_seeds.py needs at least one seed")
lines = ["", "## Seeds", "",
         f"Each seed ran as its own job (seeds {', '.join(seeds)}); the tables above show the mean over them. "
         "Val loss per branch over the seeds:", ""]
for t in (4, 5, 6):
    per_seed = []
    for s in seeds:
        path = os.path.join(out, f"t{t}.s{s}.json")
        if not os.path.exists(path):
            sys.exit(f"error: {path} missing: the seed-{s} job's table (run its experiment, then the collector)")
        per_seed.append(json.load(open(path)))
    branches = [r["branch"] for r in per_seed[0]]
    for s, rows in zip(seeds, per_seed):
        if [r["branch"] for r in rows] != branches:
            sys.exit(f"error: {os.path.join(out, f't{t}.s{s}.json')}: other branches than seed {seeds[0]}'s")
    merged = []
    lines += [f"Table {t}:", "", "| branch | mean | sd | min | max | per seed |", "|---|---|---|---|---|---|"]
    for i, b in enumerate(branches):
        rows = [p[i] for p in per_seed]
        m = {"branch": b}
        for k, v in rows[0].items():
            if k != "branch" and isinstance(v, (int, float)) and not isinstance(v, bool):
                m[k] = statistics.fmean(float(r[k]) for r in rows)
        losses = [float(r["val_loss"]) for r in rows]
        m["seeds"] = len(rows)
        m["val_loss_sd"] = statistics.stdev(losses) if len(losses) > 1 else 0.0
        m["val_loss_min"], m["val_loss_max"] = min(losses), max(losses)
        merged.append(m)
        lines.append(f"| {b} | {m['val_loss']:.4f} | {m['val_loss_sd']:.4f} | {min(losses):.4f} | {max(losses):.4f} | "
                     + ", ".join(f"{s}: {x:.4f}" for s, x in zip(seeds, losses)) + " |")
    lines.append("")
    json.dump(merged, open(os.path.join(out, f"t{t}.json"), "w"), indent=1)
open(os.path.join(out, "seeds.md"), "w").write("\n".join(lines) + "\n")
print(f"aah_seeds: merged {len(seeds)} seed(s) into {out}/t4.json, t5.json, t6.json and seeds.md")
