#!/usr/bin/env python3
"""Plot `headwise bench-attention --curve --csv FILE` as the OAL paper's Fig. 3 (latency and
memory vs T, log scales). Where the CSV has cpu_ms_min / cpu_ms_max (scripts/reproduce/oal_report.py's
medians over alternated rounds), the latency points carry those as error bars. Needs matplotlib; without it, says so and exits 0 (the CSV is the result).
Usage: python3 scripts/plot_attention_curve.py CURVE.csv OUT.png"""
import csv
import os
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_attention_curve.py CURVE.csv OUT.png")
    src, dst = sys.argv[1], sys.argv[2]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG (the CSV holds the curve)")
        return
    try:
        with open(src, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"error: {src}: {e}")
    kinds = []
    for r in rows:
        if r["kind"] not in kinds:
            kinds.append(r["kind"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    mib = 2.0**20
    for k in kinds:
        pts = [(int(r["T"]), float(r["cpu_ms_fwd_bwd"]), int(r["total_bytes"]) / mib, int(r["workspace_bytes"]) / mib,
                float(r.get("cpu_ms_min") or r["cpu_ms_fwd_bwd"]), float(r.get("cpu_ms_max") or r["cpu_ms_fwd_bwd"]))
               for r in rows if r["kind"] == k]
        err = [[p[1] - p[4] for p in pts], [p[5] - p[1] for p in pts]]
        line = a.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=err, marker="o", capsize=3, label=k).lines[0]
        b.plot([p[0] for p in pts], [p[2] for p in pts], marker="o", color=line.get_color(), label=k)
        # The attention workspace alone (dashed): the part a kernel adds beyond its inputs and outputs.
        b.plot([p[0] for p in pts], [p[3] for p in pts], linestyle="--", color=line.get_color())
    a.set_title("latency (median; bars: min-max of the rounds)" if "cpu_ms_min" in rows[0] else "latency")
    b.set_title("memory: total (solid), attention workspace (dashed)")
    for ax, lab in ((a, "CPU ms, forward + backward (1 head, 1 thread)"), (b, "MiB (inputs, outputs, gradients, workspace)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T")
        ax.set_ylabel(lab)
        ax.grid(True, which="both", alpha=0.3)
    a.legend()
    fig.tight_layout()
    tmp = dst + ".tmp.png"
    fig.savefig(tmp, dpi=120)
    os.replace(tmp, dst)


if __name__ == "__main__":
    main()
