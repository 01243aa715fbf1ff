#!/usr/bin/env python3
"""tables.py — the Markdown tables of docs/benchmarks.md ("H200 results") from the CSV files that
bench/run_h200.sh writes. Standard library only.

    python3 bench/tables.py bench/results/h200 > /tmp/tables.md

Every number is a median in µs (or the column named) copied from the CSV rows with status PASS;
'-' marks a cell the run did not have (unsupported, or not asked for)."""
import csv
import os
import sys
from collections import OrderedDict

SIZE = {65536: "64K", 262144: "256K", 1 << 20: "1M", 2 << 20: "2M", 4 << 20: "4M", 8 << 20: "8M",
        16 << 20: "16M", 64 << 20: "64M", 256 << 20: "256M", 1 << 30: "1G"}


def load(folder, step):
    path = os.path.join(folder, step + ".csv")
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f)]


def size_name(n):
    n = int(n)
    return SIZE.get(n, str(n))


def table(rows, row_key, col_key, value="median_us", where=None, fmt="{:.1f}", title=None):
    """rows × columns of `value` for the rows passing `where`."""
    sel = [r for r in rows if r["status"] == "PASS" and (where is None or where(r))]
    if not sel:
        return ""
    rk = OrderedDict()
    ck = OrderedDict()
    cell = {}
    for r in sel:
        a, b = row_key(r), col_key(r)
        rk[a] = 1
        ck[b] = 1
        cell[(a, b)] = float(r[value])
    out = []
    if title:
        out.append(title + "\n")
    out.append("| | " + " | ".join(ck) + " |")
    out.append("|---|" + "---:|" * len(ck))
    for a in rk:
        vals = [fmt.format(cell[(a, b)]) if (a, b) in cell else "-" for b in ck]
        out.append("| " + a + " | " + " | ".join(vals) + " |")
    return "\n".join(out) + "\n"


def header(folder, step):
    path = os.path.join(folder, step + ".txt")
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        lines = [next(f, "").strip(), next(f, "").strip()]
    return "`" + lines[0].lstrip("# ") + "`  \n`" + lines[1].lstrip("# ") + "`\n"


def main():
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(args) > 1 or (args and args[0].startswith("-")):
        print("usage: python3 bench/tables.py [RESULTS_DIR]  (default bench/results/h200)",
              file=sys.stderr)
        return 2
    folder = args[0] if args else "bench/results/h200"
    if not os.path.isdir(folder):
        print(f"tables.py: '{folder}' is not a folder", file=sys.stderr)
        return 2
    k = lambda r: r["kernel"]
    d = lambda r: r["dist"]
    gpu = lambda r: r["kernel"] not in ("cpu",) and r["block"] == "0"
    parts = []

    rows = load(folder, "default")
    if rows:
        parts.append("### Default sweep (`default.txt`)\n\n" + header(folder, "default"))
        for t, b, n in (("u8", "256", 1 << 20), ("u8", "256", 16 << 20), ("u8", "256", 64 << 20),
                        ("u8", "16", 1 << 20), ("u8", "16", 16 << 20), ("i32", "256", 64 << 20)):
            parts.append(table(rows, k, d, where=lambda r: gpu(r) and r["type"] == t and
                               r["bins"] == b and int(r["size"]) == n and r["l2"] == "hot",
                               title=f"**{t}, {b} bins, {size_name(n)}, µs (median, hot L2)**"))
        parts.append(table(rows, k, d, value="pct_of_read_bw", where=lambda r: gpu(r) and
                           r["type"] == "u8" and r["bins"] == "256" and int(r["size"]) == 64 << 20
                           and r["kernel"] not in ("atomic", "racy", "privatized"),
                           title="**u8, 256 bins, 64M: % of the read bandwidth**"))
    rows = load(folder, "1g")
    if rows:
        parts.append("### 1G u8, 256 bins (`1g.txt`)\n\n" + header(folder, "1g"))
        parts.append(table(rows, k, d, where=gpu, title="**µs (median)**"))
        parts.append(table(rows, k, d, value="pct_of_read_bw", where=gpu,
                           title="**% of the read bandwidth of the same run**"))
    rows = load(folder, "images")
    if rows:
        parts.append("### Natural images, 256 bins (`images.txt`)\n\n" + header(folder, "images"))
        parts.append(table(rows, lambda r: r["dist"].replace("image:", "") + f" ({int(r['size']):,})",
                           k, where=lambda r: gpu(r) and r["kernel"] not in ("atomic", "racy"),
                           title="**µs (median); rows: image (samples)**"))
    rows = load(folder, "small")
    if rows:
        parts.append("### Small inputs, u8, 256 bins (`small.txt`)\n\n" + header(folder, "small"))
        for dist in ("uniform", "natural", "constant"):
            parts.append(table(rows, k, lambda r: size_name(r["size"]),
                               where=lambda r: gpu(r) and r["dist"] == dist and
                               r["kernel"] not in ("atomic", "racy"),
                               title=f"**{dist}, µs (median)**"))
    rows = load(folder, "fold")
    if rows:
        parts.append("### Fewer bins, 64K to 16M (`fold.txt`)\n\n" + header(folder, "fold"))
        fold_kernels = ("privatized", "coarsened", "aggregated", "columns", "cub", "auto")
        for t in ("u8", "i32"):
            for bins in ("16", "64"):
                parts.append(table(rows, lambda r: r["kernel"],
                                   lambda r: size_name(r["size"]) + " " + r["dist"],
                                   where=lambda r, t=t, bins=bins: gpu(r) and r["type"] == t and
                                   r["bins"] == bins and r["kernel"] in fold_kernels,
                                   title=f"**{t}, {bins} bins, µs (median, hot L2; the other "
                                   f"kernels are in fold.txt)**"))
    rows = load(folder, "l2")
    if rows:
        parts.append("### Hot vs cold L2, u8, 256 bins (`l2.txt`)\n\n" + header(folder, "l2"))
        for n in (16 << 20, 64 << 20):
            parts.append(table(rows, lambda r: r["kernel"] + " " + r["l2"], d,
                               where=lambda r: gpu(r) and int(r["size"]) == n and
                               r["kernel"] in ("columns", "cub", "coarsened", "auto"),
                               title=f"**{size_name(n)}, µs (median)**"))
    rows = load(folder, "wide")
    if rows:
        parts.append("### Many bins, i32 (`wide.txt`)\n\n" + header(folder, "wide"))
        for b in ("1024", "4096"):
            parts.append(table(rows, lambda r: r["kernel"], lambda r: size_name(r["size"]) + " " + r["dist"],
                               where=lambda r: gpu(r) and r["bins"] == b and
                               r["kernel"] in ("coarsened", "aggregated", "cub", "auto"),
                               title=f"**{b} bins, µs (median)**"))
    rows = load(folder, "equalize")
    if rows:
        parts.append("### Whole equalization in device memory (`equalize.txt`)\n\n" + header(folder, "equalize"))
        for l2 in ("hot", "cold"):
            parts.append(table(rows, lambda r: r["kernel"], lambda r: size_name(r["size"]) + " " + r["dist"],
                               where=lambda r: r["l2"] == l2 and r["dist"] in ("uniform", "natural"),
                               title=f"**{l2} L2, µs (median)**"))
        parts.append(table(rows, lambda r: r["kernel"], lambda r: size_name(r["size"]) + " " + r["dist"],
                           where=lambda r: r["kernel"] == "equalize:cpu" and r["dist"] in ("uniform", "natural"),
                           title="**CPU backend of the GPU machine (16 cores), µs (median)**"))
    for step in ("timing", "timing_equalize"):
        rows = load(folder, step)
        if rows:
            parts.append(f"### The same cells with `--timing enqueue` (`{step}.txt`)\n\n" + header(folder, step))
            parts.append(table(rows, lambda r: r["kernel"] + (" " + r["l2"] if step == "timing_equalize" else ""),
                               lambda r: size_name(r["size"]) + " " + r["dist"], where=lambda r: r["kernel"] != "equalize:cpu",
                               title="**µs (median)**"))
    for step in ("lesson", "lesson_cmdline", "blocks"):
        rows = load(folder, step)
        if rows:
            parts.append(f"### `{step}.txt`\n\n" + header(folder, step))
            parts.append(table(rows, k, lambda r: "block " + (r["block"] if r["block"] != "0" else "def"),
                               where=lambda r: r["kernel"] != "cpu", title="**µs (median)**"))
    if not any(parts):
        print(f"tables.py: no bench CSV files (default.csv, 1g.csv, ...) in '{folder}'",
              file=sys.stderr)
        return 1
    print("\n".join(p for p in parts if p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
