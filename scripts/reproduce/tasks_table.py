"""The task columns of a reproduction report: zero-shot multiple-choice accuracy of each model
(`headwise eval-tasks` JSON files) as OUT/tasks.md and OUT/tasks.csv, or one line saying why
they were not run.
Usage: tasks_table.py OUT SCALE_NOTE LABEL=EVAL.json...
       tasks_table.py OUT --not-run REASON
"""
import json
import os
import sys


def main():
    out = sys.argv[1]
    md = "\n## Task columns (tasks.md)\n\n"
    csv = "model,task,format,examples,acc,acc_stderr,acc_norm,acc_norm_stderr,examples_per_s\n"
    if sys.argv[2] == "--not-run":
        md += f"Zero-shot tasks: not run ({sys.argv[3]}).\n"
    else:
        md += sys.argv[2] + "\n\n"
        md += "| model | task | format | n | acc | acc_norm | examples/s |\n|---|---|---|---|---|---|---|\n"
        for arg in sys.argv[3:]:
            label, path = arg.split("=", 1)
            for t in json.load(open(path))["tasks"]:
                se = lambda k: "" if t[k] is None else "%.4f" % t[k]
                name = os.path.basename(t["task"])
                md += "| %s | %s | %s | %d | %.4f ± %s | %.4f ± %s | %.1f |\n" % (
                    label, name, t["format"], t["examples"], t["acc"], se("acc_stderr") or "n/a", t["acc_norm"],
                    se("acc_norm_stderr") or "n/a", t["examples_per_s"])
                csv += "%s,%s,%s,%d,%.6f,%s,%.6f,%s,%.3f\n" % (
                    label, name, t["format"], t["examples"], t["acc"], se("acc_stderr"), t["acc_norm"],
                    se("acc_norm_stderr"), t["examples_per_s"])
        md += "\nacc: the choice with the highest log-likelihood; acc_norm: per character of the choice; " \
              "± the standard error (lm-evaluation-harness's rules, `headwise eval-tasks`).\n"
    open(os.path.join(out, "tasks.md"), "w").write(md)
    open(os.path.join(out, "tasks.csv"), "w").write(csv)


if __name__ == "__main__":
    main()
