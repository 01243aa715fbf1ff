#!/usr/bin/env python3
"""Plot a `histeq lesson` run: the speed-up of each step over `atomic`, one panel per data set.

Reads the CSV written by `histeq lesson NAME --csv FILE` (one line per step and case) and
draws one panel per data distribution (uniform, hot, blocky, a photo, ...). In a panel, each
case (bins and size) is a group of bars, one bar per step in the lesson's order, each step in
its own colour (the same in every panel), on a log scale: 1 is `atomic`, above 1 is faster.
The dashed black segment over a group is the read ceiling: the speed-up a kernel would reach
if it only read its input at the streaming-read bandwidth measured in the same run. Bars of a
step whose histogram differs from the CPU's (the racy kernel losing counts) are hatched.
Needs matplotlib (Debian: apt-get install python3-matplotlib; or pip install matplotlib).

Usage: python3 bench/lesson_plot.py lesson.csv -o lesson.png
"""
import argparse
import csv
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D
except ImportError:  # pragma: no cover - depends on the machine
    sys.exit("lesson_plot.py: matplotlib not found; install it with: "
             "apt-get install python3-matplotlib (or pip install matplotlib)")

# Distinct colours, one per step (Okabe-Ito, readable by colour-blind learners, then tab10).
COLOURS = ["#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00",
           "#CC79A7", "#999999", "#8c564b", "#17becf", "#bcbd22"]


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def load(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"lesson_plot.py: {path} holds no result lines")
    for need in ("panel", "case", "step", "kernel", "status", "speedup_atomic",
                 "ceiling_speedup"):
        if need not in rows[0]:
            sys.exit(f"lesson_plot.py: {path} has no '{need}' column: is it from "
                     "'histeq lesson --csv'?")
    return rows


def ordered(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="CSV written by histeq lesson NAME --csv FILE")
    ap.add_argument("-o", "--output", required=True, help="PNG file to write")
    args = ap.parse_args()

    rows = load(args.csv)
    timed = [r for r in rows if number(r["speedup_atomic"]) is not None]
    if not timed:
        sys.exit("lesson_plot.py: no step has a speed-up over atomic (a run without a GPU has "
                 "only the CPU step): nothing to plot")

    steps = sorted({(int(r["step"]), r["kernel"]) for r in rows})
    colour = {k: COLOURS[(s - 1) % len(COLOURS)] for s, k in steps}
    panels = ordered(r["panel"] for r in timed)
    cases_max = max(len(ordered(r["case"] for r in timed if r["panel"] == p)) for p in panels)
    # Many cases per panel (the bins lesson): panels stacked; few: side by side.
    ncols = 1 if cases_max > 3 else min(len(panels), 2 if len(panels) == 4 else 3)
    nrows = (len(panels) + ncols - 1) // ncols
    width = min(14.0, max(5.0, 0.55 * len(steps) * cases_max + 1.5))
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, 4.6 * nrows), squeeze=False,
                             sharey=True)
    lo, hi = 1.0, 1.0
    for i, panel in enumerate(panels):
        ax = axes[i // ncols][i % ncols]
        cases = ordered(r["case"] for r in timed if r["panel"] == panel)
        bar_w = 0.8 / len(steps)
        for g, case in enumerate(cases):
            in_case = {r["kernel"]: r for r in timed if r["panel"] == panel and r["case"] == case}
            for j, (_, kernel) in enumerate(steps):
                r = in_case.get(kernel)
                if r is None:
                    continue
                v = number(r["speedup_atomic"])
                x = g - 0.4 + bar_w * (j + 0.5)
                wrong = r["status"] != "PASS"
                ax.bar(x, v, bar_w * 0.92, color=colour[kernel], edgecolor="black",
                       linewidth=0.5, hatch="///" if wrong else None)
                label = f"{v:.0f}" if v >= 10 else f"{v:.2g}"
                ax.annotate(label, (x, v), textcoords="offset points", xytext=(0, 2),
                            ha="center", fontsize=7, rotation=90 if len(steps) > 5 else 0)
                lo, hi = min(lo, v), max(hi, v)
            ceiling = [number(r["ceiling_speedup"]) for r in in_case.values()]
            ceiling = [c for c in ceiling if c]
            if ceiling:
                ax.hlines(ceiling[0], g - 0.45, g + 0.45, colors="black", linestyles="dashed",
                          linewidth=1.4)
                hi = max(hi, ceiling[0])
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(cases, fontsize=8, rotation=20 if len(cases) > 3 else 0)
        ax.set_title(panel)
        ax.grid(axis="y", which="both", alpha=0.25)
        if i % ncols == 0:
            ax.set_ylabel("speed-up over atomic (log; 1 = atomic)")
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    for row in axes:
        for ax in row:
            ax.set_ylim(lo / 2.5, hi * 3.0)

    handles = [Patch(facecolor=colour[k], edgecolor="black", label=f"{s} {k}") for s, k in steps]
    handles.append(Line2D([0], [0], color="black", linestyle="dashed",
                          label="read ceiling (this run)"))
    if any(r["status"] != "PASS" for r in timed):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///",
                             label="differs from the CPU (lost counts)"))
    first = rows[0]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 5), fontsize=9,
               frameon=False)
    fig.suptitle(f"histeq lesson {first['lesson']}: speed-up of each step over atomic\n"
                 f"{first['device']}, read ceiling {number(first['read_bw_gbps']) or 0:.0f} GB/s, "
                 f"commit {first['commit'] or 'unknown'}", fontsize=11)
    legend_rows = (len(handles) + 4) // 5
    fig.tight_layout(rect=(0, 0.05 + 0.035 * legend_rows, 1, 0.93))
    fig.savefig(args.output, dpi=130)
    print(f"lesson_plot.py: wrote {args.output}")


if __name__ == "__main__":
    main()
