# Draws the curves of `headwise plot` (embedded in the binary at build time from this file).
#   python3 plot_runs.py DATA.csv OUT.png
# DATA.csv (written by the binary, kept beside the PNG): run,step,loss,val_loss,val_ppl,lr,tok_per_s,
# intervention -- one row per metrics.jsonl line (empty cells where the line has no such value) and
# one row per installed plan change (only run, step and intervention set).
# Four panels: training loss (validation loss dashed), validation perplexity, learning rate and
# tokens/s, one colour per run, a dotted vertical line at each intervention step.
import csv
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(3)  # the binary turns this status into its one error line

data_path, png_path = sys.argv[1], sys.argv[2]
runs = {}  # run -> {column: [(step, value)]}, in file order
with open(data_path, newline="") as f:
    for row in csv.DictReader(f):
        series = runs.setdefault(row["run"], {})
        step = int(row["step"])
        for col in ("loss", "val_loss", "val_ppl", "lr", "tok_per_s", "intervention"):
            if row[col] != "":
                value = row[col] if col == "intervention" else float(row[col])
                series.setdefault(col, []).append((step, value))

panels = [("loss", "loss (train; validation dashed)"), ("val_ppl", "validation perplexity"),
          ("lr", "learning rate"), ("tok_per_s", "tokens/s")]
fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
for i, (run, series) in enumerate(runs.items()):
    color = colors[i % len(colors)]
    for ax, (col, title) in zip(axes.flat, panels):
        points = series.get(col, [])
        if points:
            ax.plot([s for s, _ in points], [v for _, v in points], color=color,
                    marker="o" if col == "val_ppl" and len(points) < 30 else None, ms=3, lw=1.2,
                    label=run)
        if col == "loss" and series.get("val_loss"):
            vl = series["val_loss"]
            ax.plot([s for s, _ in vl], [v for _, v in vl], color=color, ls="--", lw=1.2,
                    marker="o" if len(vl) < 30 else None, ms=3)
        for step, name in series.get("intervention", []):
            ax.axvline(step, color=color, ls=":", lw=1)
            if col == "loss":
                ax.annotate(name, (step, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                            va="top", ha="right", fontsize=7, color=color)
for ax, (col, title) in zip(axes.flat, panels):
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if not ax.lines:
        ax.text(0.5, 0.5, "no values in these runs", transform=ax.transAxes, ha="center", color="gray")
for ax in axes[1]:
    ax.set_xlabel("step (update)")
axes[0][0].legend(fontsize=8)
fig.tight_layout()
fig.savefig(png_path, dpi=110)
