#!/usr/bin/env python3
"""histeq's CPU backend from Python against OpenCV on the same host arrays, in one run: equalize
and CLAHE, gray and colour, at each size (default 1M and 16M pixels), timed as bench_python.py
times host calls (perf_counter around each call, median of --reps after --warmup), the two calls
of a pair in turn (time_pair), so that both see the same machine, and then each alone
(time_blocks: blocks of one library's calls, in turn with the other's blocks), as a program that
calls one of them in a loop sees it.

    python bench/python/bench_cpu.py [--sizes 1M,16M] [--reps 20] [--warmup 3] [--csv FILE]

The calls (each pair on the same array, OpenCV with its own thread pool, cv2.getNumThreads()):
- equalize gray: ``histeq.equalize(g, backend="cpu")`` / ``cv2.equalizeHist(g)``;
- equalize colour (BGR, as cv2.imread gives it): ``histeq.equalize(bgr, backend="cpu",
  channel_order="bgr")`` / OpenCV's recipe: ``cvtColor(BGR2YCrCb)``, ``equalizeHist`` of Y,
  ``cvtColor(YCrCb2BGR)``;
- CLAHE gray: ``histeq.clahe(g, backend="cpu")`` / ``cv2.createCLAHE().apply(g)`` (both with
  OpenCV's defaults, clip limit 40, 8x8 tiles);
- CLAHE colour: the same recipe with ``apply`` on Y / ``histeq.clahe(bgr, ..., channel_order=
  "bgr")``.
Beside each pair: whether the outputs are equal (gray: byte for byte; colour: the largest
difference, OpenCV's YCrCb round trip rounds within one level). Data: a natural-like image (a
smooth 2-D field plus noise; colour: three such channels), fixed seed. bench_python.py prints
these rows first, then its GPU rows; alone, this script prints the same table with the command,
commit and device (the CPU's model and the cores this process may use).
"""
from __future__ import annotations

import argparse
import csv
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time


def parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def timed(fn) -> float:
    """Microseconds of one call of fn() (perf_counter)."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e6


def time_host(fn, reps: int, warmup: int) -> float:
    """Median microseconds of fn() (perf_counter), after `warmup` untimed calls."""
    times = [timed(fn) for _ in range(warmup + reps)]
    return statistics.median(times[warmup:])


def time_pair(a, b, reps: int, warmup: int):
    """Median microseconds of a() and of b(), called in turn (a, b, a, b, ...), so that both see
    the same machine while it is measured (other processes on a shared host, clock changes)."""
    ta, tb = [], []
    for i in range(warmup + reps):
        for fn, acc in ((a, ta), (b, tb)):
            t = timed(fn)
            if i >= warmup:
                acc.append(t)
    return statistics.median(ta), statistics.median(tb)


def time_blocks(a, b, reps: int, warmup: int, rounds: int = 4):
    """Median microseconds of a() and of b(), each timed in blocks of its own calls (a block of
    a, then a block of b, `rounds` times, each block after `warmup` untimed calls of its own):
    what a program that calls one library in a loop sees. Called in turn (time_pair), each call
    starts while the other library's pool threads may still be spinning for work (OpenCV's and
    histeq's both spin before they sleep), which slows whichever runs second."""
    ta, tb = [], []
    per = max(1, reps // rounds)
    for _ in range(rounds):
        for fn, acc in ((a, ta), (b, tb)):
            acc.extend([timed(fn) for _ in range(warmup + per)][warmup:])
    return statistics.median(ta), statistics.median(tb)


def natural_host(np, h: int, w: int, channels: int = 1, seed: int = 7):
    """A natural-like uint8 image: a smooth field plus noise per channel."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    planes = []
    for k in range(channels):
        f = np.sin(x / w * (7.1 + k)) * np.cos(y / h * (5.3 - k)) + \
            0.5 * np.sin((x + y) / (w + h) * 23.0)
        f = (f - f.min()) / (f.max() - f.min())
        planes.append(np.clip(40 + 150 * f + rng.normal(0, 6, (h, w)), 0, 255).astype(np.uint8))
    return planes[0] if channels == 1 else np.ascontiguousarray(np.stack(planes, axis=-1))


def commit() -> str:
    if os.environ.get("HISTEQ_COMMIT"):
        return os.environ["HISTEQ_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=os.path.dirname(os.path.abspath(__file__))
                              ).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def cpu_device() -> str:
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu_name()}, {n} cores usable"


def cpu_rows(sizes, reps: int, warmup: int):
    """(rows, notes, ok): rows (case, peer, median us); ok when every pair agrees."""
    import numpy as np
    import histeq
    try:
        import cv2
    except ImportError as e:
        return [], [f"cv2: {e} (pip install opencv-python-headless)"], True
    clahe = cv2.createCLAHE()

    def cv_colour(bgr, op):
        ycc = cv2.cvtColor(bgr, cv2.COLOR_BGR2YCrCb)
        y, cr, cb = cv2.split(ycc)
        return cv2.cvtColor(cv2.merge([op(y), cr, cb]), cv2.COLOR_YCrCb2BGR)

    rows, notes, ok = [], [f"OpenCV {cv2.__version__}, {cv2.getNumThreads()} threads"], True
    for s in sizes:
        n = parse_size(s)
        side = int(round(n ** 0.5))
        g = natural_host(np, side, side)
        bgr = natural_host(np, side, side, 3)
        pairs = [
            ("equalize gray", lambda: histeq.equalize(g, backend="cpu"),
             lambda: cv2.equalizeHist(g), 0),
            ("equalize colour (BGR)",
             lambda: histeq.equalize(bgr, backend="cpu", channel_order="bgr"),
             lambda: cv_colour(bgr, cv2.equalizeHist), 1),
            ("CLAHE gray", lambda: histeq.clahe(g, backend="cpu"), lambda: clahe.apply(g), 0),
            ("CLAHE colour (BGR)", lambda: histeq.clahe(bgr, backend="cpu", channel_order="bgr"),
             lambda: cv_colour(bgr, clahe.apply), 1),
        ]
        for what, mine, theirs, slack in pairs:
            worst = int(np.abs(mine().astype(np.int16) - theirs()).max())
            agree = worst <= slack
            ok = ok and agree
            case = f"{s} {what}"
            us_mine, us_theirs = time_pair(mine, theirs, reps, warmup)
            rows.append((case, "histeq CPU", us_mine))
            rows.append((case, "OpenCV", us_theirs))
            us_mine, us_theirs = time_blocks(mine, theirs, reps, warmup)
            rows.append((case, "histeq CPU, alone", us_mine))
            rows.append((case, "OpenCV, alone", us_theirs))
            notes.append(f"{case}: largest difference {worst} "
                         f"({'equal' if worst == 0 else 'within one level' if agree else 'DIFFERENT'})")
    return rows, notes, ok


def print_cpu_table(rows) -> None:
    """| case | histeq CPU | OpenCV | OpenCV / histeq | the same, each alone |"""
    cases = list(dict.fromkeys(r[0] for r in rows))
    val = {(c, p): us for c, p, us in rows}
    print("| case | histeq CPU | OpenCV | OpenCV / histeq | histeq alone | OpenCV alone "
          "| OpenCV / histeq, alone |")
    print("|---|---|---|---|---|---|---|")
    for c in cases:
        a, b = val.get((c, "histeq CPU")), val.get((c, "OpenCV"))
        if a is None or b is None:
            continue
        line = f"| {c} | {a / 1000:.2f} ms | {b / 1000:.2f} ms | {b / a:.2f}x |"
        a1, b1 = val.get((c, "histeq CPU, alone")), val.get((c, "OpenCV, alone"))
        if a1 is not None and b1 is not None:
            line += f" {a1 / 1000:.2f} ms | {b1 / 1000:.2f} ms | {b1 / a1:.2f}x |"
        else:
            line += " | | |"
        print(line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1M,16M")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--csv")
    args = ap.parse_args()
    import histeq
    rows, notes, ok = cpu_rows([s for s in args.sizes.split(",") if s], args.reps, args.warmup)
    print(f"command: {' '.join(shlex.quote(a) for a in [sys.executable] + sys.argv)}")
    print(f"commit: {commit()}  histeq {histeq.__version__}")
    print(f"device: {cpu_device()}")
    print(f"timing: perf_counter around each call, median of {args.reps} after {args.warmup} "
          f"warm-ups, one process; the two calls of a pair in turn, then each alone (blocks of "
          f"its own calls, the two libraries' blocks in turn)")
    print()
    print_cpu_table(rows)
    for note in notes:
        print(f"note: {note}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            wr = csv.writer(f)
            wr.writerow(["case", "peer", "median_us", "commit", "device"])
            for c, p, us in rows:
                wr.writerow([c, p, f"{us:.2f}", commit(), cpu_device()])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
