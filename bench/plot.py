#!/usr/bin/env python3
"""Plot `histeq bench` results: input throughput (GB/s) against size, one line per kernel.

Reads the CSV written by `histeq bench --csv FILE` (one line per cell) and draws a grid of
panels: one column per distribution, one row per (type, bins, L2 state, block size) present.
The dashed line is the streaming-read bandwidth measured in the same run. Image cases
(dist "image:NAME") get a bar chart of their own below the grid.
Only PASS rows with a time are drawn. Needs Debian's python3-matplotlib.

Usage: python3 bench/plot.py results.csv -o results.png [--type u8] [--bins 256] [--l2 hot]
"""
import argparse
import collections
import csv
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator
except ImportError:  # pragma: no cover - depends on the machine
    sys.exit("plot.py: matplotlib not found; install it with: apt-get install python3-matplotlib")

DIST_ORDER = ["uniform", "hot", "blocky", "natural", "constant", "sequential"]
MAX_ROWS = 8


def fmt_size(n):
    for unit, suffix in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f}M"
    return str(n)


def load(path, args):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot.py: {path} holds no result lines")
    keep = []
    for r in rows:
        if r["status"] != "PASS" or not r["gbps"]:
            continue
        if args.type and r["type"] != args.type:
            continue
        if args.bins and r["bins"] != str(args.bins):
            continue
        if args.l2 and r["l2"] not in (args.l2, "-"):
            continue
        keep.append(r)
    return rows, keep


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="CSV written by histeq bench --csv")
    ap.add_argument("-o", "--output", required=True, help="PNG file to write")
    ap.add_argument("--type", help="only this element type (u8, i32)")
    ap.add_argument("--bins", type=int, help="only this bin count")
    ap.add_argument("--l2", choices=["hot", "cold"], help="only this L2 state")
    ap.add_argument("--no-cpu", action="store_true", help="leave out the CPU reference")
    args = ap.parse_args()

    rows, keep = load(args.csv, args)
    if args.no_cpu:
        keep = [r for r in keep if r["kernel"] != "cpu"]
    if not keep:
        sys.exit("plot.py: no PASS rows to draw (after filters)")

    first = rows[0]
    read_bw = float(first["read_bw_gbps"]) if first.get("read_bw_gbps") else None
    kernels = list(dict.fromkeys(r["kernel"] for r in keep))
    colors = {k: plt.cm.tab20(i % 20) for i, k in enumerate(kernels)}

    synth = [r for r in keep if not r["dist"].startswith("image:")]
    images = [r for r in keep if r["dist"].startswith("image:")]

    # Rows of the grid: (type, bins, l2, block); the CPU rows ("-") join every L2 state.
    def group(r):
        return (r["type"], int(r["bins"]), int(r["block"]))

    groups = sorted({group(r) + (r["l2"],) for r in synth if r["l2"] != "-"}) or sorted(
        {group(r) + ("-",) for r in synth})
    if len(groups) > MAX_ROWS:
        print(f"plot.py: {len(groups)} (type, bins, l2, block) groups; drawing the first "
              f"{MAX_ROWS} (filter with --type/--bins/--l2)", file=sys.stderr)
        groups = groups[:MAX_ROWS]
    dists = [d for d in DIST_ORDER if any(r["dist"] == d for r in synth)]

    n_rows = len(groups) if synth else 0
    n_cols = max(len(dists), 1)
    extra = 1 if images else 0
    # One y scale for every panel, so that panels compare at a glance.
    n_images = len({r["dist"] for r in images})
    width = max(3.4 * n_cols + 1.5, (0.9 * n_images + 3) if images else 0)
    fig, axes = plt.subplots(n_rows + extra, n_cols, squeeze=False, sharey=True,
                             figsize=(width, 2.8 * (n_rows + extra) + 0.8))

    for gi, (typ, bins, block, l2) in enumerate(groups if synth else []):
        for di, dist in enumerate(dists):
            ax = axes[gi][di]
            lines = collections.defaultdict(list)
            for r in synth:
                if r["dist"] != dist or group(r) != (typ, bins, block):
                    continue
                if r["l2"] not in (l2, "-"):
                    continue
                lines[r["kernel"]].append((int(r["size"]), float(r["gbps"])))
            for k in kernels:
                if k in lines:
                    pts = sorted(lines[k])
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                            label=k, color=colors[k])
            if read_bw:
                ax.axhline(read_bw, ls="--", lw=0.8, color="gray")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            sizes = sorted({int(r["size"]) for r in synth if int(r["size"]) > 0})
            if sizes:
                ax.set_xticks(sizes)
                ax.set_xticklabels([fmt_size(s) for s in sizes], fontsize=7)
            ax.yaxis.set_major_locator(LogLocator(base=10))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
            ax.tick_params(axis="y", labelsize=7)
            blk = "default block" if block == 0 else f"block {block}"
            ax.set_title(f"{dist} · {typ} · {bins} bins · L2 {l2} · {blk}", fontsize=8)
            if di == 0:
                ax.set_ylabel("GB/s of input", fontsize=8)
            if gi == n_rows - 1:
                ax.set_xlabel("elements", fontsize=8)
        for di in range(len(dists), n_cols):
            axes[gi][di].axis("off")

    if images:
        for c in range(n_cols):
            axes[n_rows][c].axis("off")
        ax = axes[n_rows][0]
        ax.axis("on")
        # Span the whole last row for the bar chart.
        gs = axes[n_rows][0].get_gridspec()
        for c in range(n_cols):
            axes[n_rows][c].remove()
        ax = fig.add_subplot(gs[n_rows, :])
        names = list(dict.fromkeys(r["dist"][len("image:"):] for r in images))
        ks = [k for k in kernels if any(r["kernel"] == k for r in images)]
        width = 0.8 / max(len(ks), 1)
        for ki, k in enumerate(ks):
            vals = []
            for name in names:
                v = [float(r["gbps"]) for r in images
                     if r["kernel"] == k and r["dist"] == "image:" + name]
                vals.append(max(v) if v else 0.0)
            ax.bar([i + ki * width for i in range(len(names))], vals, width, label=k,
                   color=colors[k])
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
        ax.set_xticklabels(names, fontsize=7, rotation=30, ha="right")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.tick_params(axis="y", labelsize=7)
        ax.set_ylabel("GB/s of input", fontsize=8)
        ax.set_title("natural images (luma/gray plane, u8)", fontsize=8)

    handles, labels = [], []
    for row in fig.axes:
        for h, lab in zip(*row.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="center right", fontsize=8, title="kernel")
    title = f"histeq bench on {first.get('device', '?')}"
    if first.get("commit"):
        title += f" (commit {first['commit']})"
    if read_bw:
        title += f" — dashed: streaming read {read_bw:.0f} GB/s"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1 - 1.3 / fig.get_figwidth(), 0.97))
    fig.savefig(args.output, dpi=110)
    print(f"plot.py: wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
