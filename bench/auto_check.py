#!/usr/bin/env python3
"""auto_check.py — how close `auto` came to the fastest exact GPU kernel, cell by cell.

    python3 bench/auto_check.py bench/results/h200/{default,small,images,1g,l2,wide}.csv

For every case (type, bins, size, distribution or image, L2 state) that has an `auto` row, compares
auto's median with the smallest median of the exact GPU kernels measured in the same file (every
registry kernel but `racy`, which loses updates, and the `cpu` row). Only hot-L2 cells are
compared unless --cold is given. Prints one line per case over the tolerance (default 5 %) and a
summary line; exit status 0 either way (a measurement, not a test).
"""
import argparse
import csv
import sys

NOT_CANDIDATES = {"auto", "cpu", "racy"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--tolerance", type=float, default=0.05, help="allowed excess (0.05 = 5%%)")
    ap.add_argument("--cold", action="store_true", help="also compare cold-L2 cells")
    args = ap.parse_args()

    total = within = 0
    misses = []
    worst = 0.0
    for path in args.csv:
        cases = {}
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["status"] != "PASS" or not r["median_us"]:
                    continue
                if r["l2"] == "cold" and not args.cold:
                    continue
                key = (r["type"], r["bins"], r["size"], r["dist"], r["l2"], r.get("block", ""))
                cases.setdefault(key, []).append(r)
        for key, rows in sorted(cases.items()):
            auto = [r for r in rows if r["kernel"] == "auto"]
            cands = [r for r in rows if r["kernel"] not in NOT_CANDIDATES]
            if not auto or not cands:
                continue
            best = min(cands, key=lambda r: float(r["median_us"]))
            a, b = float(auto[0]["median_us"]), float(best["median_us"])
            excess = a / b - 1.0
            total += 1
            worst = max(worst, excess)
            if excess <= args.tolerance:
                within += 1
            else:
                chose = auto[0]["reason"]
                misses.append(f"{path}: {key[0]} {key[1]} bins n={key[2]} {key[3]} {key[4]}: "
                              f"auto {a:.2f} us ({chose}), best {best['kernel']} {b:.2f} us, "
                              f"+{100 * excess:.1f} %")
    for m in misses:
        print(m)
    print(f"auto within {100 * args.tolerance:.0f} % of the fastest exact GPU kernel in {within} "
          f"of {total} cases (worst +{100 * worst:.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
