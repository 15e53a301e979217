#!/usr/bin/env python3
"""Writes a reproduction's tables (markdown + CSV) and REPORT.md from one spec JSON.

Spec: {"paper": str, "title": str, "scale": str, "scale_note": str, "wall_s": float,
       "machine": str, "commands": [str],
       "tables": [{"name": str, "paper_ref": "Table 4", "columns": [str], "rows": [[...]],
                   "reference": {"columns": [str], "rows": [[...]]} | null}],
       "figures": [{"file": "x.png", "csv": "x.csv", "caption": str}],
       "claims": [{"claim": str, "paper": str, "ours": str, "verdict": str}],
       "rule": str}
Verdicts are those of verdicts.py (holds, does not hold, not shown at this scale, not measurable at
this scale, by construction); the paper script decides them by the shared rules there and states
its own thresholds in "rule". REPORT.md counts as findings only rows that hold or do not hold.
"""
import csv
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verdicts import BY_CONSTRUCTION, DOES_NOT_HOLD, HOLDS, NOT_SHOWN, VERDICTS, tally  # noqa: E402


def fmt(v):
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def markdown(columns, rows):
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def main():
    spec_path, out_dir = sys.argv[1], sys.argv[2]
    spec = json.load(open(spec_path))
    report = [f"# {spec['title']}: reproduction report\n",
              f"- scale: **{spec['scale']}** ({spec['scale_note']})",
              f"- wall time: {spec['wall_s'] / 60:.1f} min",
              f"- machine: {spec['machine']}",
              "- commands:\n" + "\n".join(f"  - `{c}`" for c in spec["commands"]), ""]
    for t in spec["tables"]:
        base = os.path.join(out_dir, t["name"])
        md = markdown(t["columns"], t["rows"])
        open(base + ".md", "w").write(md)
        with open(base + ".csv", "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(t["columns"])
            w.writerows(t["rows"])
        report += [f"## {t['paper_ref']} ({t['name']}.md, {t['name']}.csv)\n", "Ours:\n", md]
        if t.get("reference"):
            report += [f"Paper ({t['paper_ref']}, copied as reference values):\n",
                       markdown(t["reference"]["columns"], t["reference"]["rows"])]
    for fig in spec.get("figures", []):
        report += [f"## {fig['caption']}\n", f"![{fig['caption']}]({fig['file']}) (data: {fig['csv']})\n"]
    t = tally(spec["claims"])
    report += ["## Claims\n", f"Rule: {spec['rule']}\n",
               "Shared rules (scripts/reproduce/verdicts.py): a timing claim is read from alternated rounds in "
               "fresh processes and holds only when every round's ratio lies on the claimed side of 1 (rounds on "
               "both sides: not shown at this scale); a row that follows from how the experiment is built is "
               "'by construction' and is not counted as a finding.\n",
               f"Tally: {t['findings']} findings ({t[HOLDS]} hold, {t[DOES_NOT_HOLD]} do not hold); "
               f"{t[NOT_SHOWN]} not shown at this scale, {t['not measurable at this scale']} not measurable, "
               f"{t[BY_CONSTRUCTION]} by construction.\n",
               markdown(["claim", "paper", "ours", "verdict"],
                        [[c["claim"], c["paper"], c["ours"], c["verdict"]] for c in spec["claims"]])]
    for c in spec["claims"]:
        if c["verdict"] not in VERDICTS:
            sys.exit(f"error: claim '{c['claim']}' has verdict '{c['verdict']}', not one of {VERDICTS}")
    tmp = os.path.join(out_dir, "REPORT.md.tmp")
    open(tmp, "w").write("\n".join(report))
    os.replace(tmp, os.path.join(out_dir, "REPORT.md"))


if __name__ == "__main__":
    main()
