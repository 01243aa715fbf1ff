#!/usr/bin/env python3
"""CLAHE (clip 2, 8x8 tiles) of gray uint8 images: the peers (OpenCV, kornia, cuCIM) timed in one
run beside `histeq bench --clahe`, so that the figures of the comparison come from the same
machine and the same call.

    python bench/python/bench_clahe_peers.py [--sizes 1M,16M,64M] [--reps 10] [--warmup 2]
        [--histeq build/histeq] [--skip PEER,...]

Peers (each skipped with the reason when it cannot be imported):
- OpenCV `cv2.createCLAHE(clipLimit=2.0, tileGridSize=(8, 8)).apply` on a host array, its own
  thread pool (cv2.setNumThreads(16) unless --threads), timed with perf_counter (time_host);
- kornia `kornia.enhance.equalize_clahe(x, clip_limit=2.0, grid_size=(8, 8))` on a float
  (1,1,H,W) CUDA tensor in [0, 1] (converted before timing), CUDA events around each call
  (time_cuda);
- cuCIM `cucim.skimage.exposure.equalize_adapthist(x, kernel_size=(H/8, W/8))` on a CuPy uint8
  array (scikit-image's clip limit, a fraction of the tile area: its default 0.01, not OpenCV's
  2.0), timed like kornia (CuPy and torch both on the legacy default stream), as
  bench_python.py times cuCIM.
Medians of --reps calls after --warmup. Data: the natural-like image of bench_python.py (a smooth
gradient plus noise), the same array for every peer. histeq's own row is `histeq bench --clahe
--sizes S --dist natural` run by this script in the same process tree (its own synthetic natural
plane: a smooth 2-D field plus noise, include/histeq/synthetic.hpp; the kernel times barely
depend on content, docs/benchmarks.md). Prints a Markdown table with the command, commit (env
HISTEQ_COMMIT when set, else git) and device.
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_python import natural, parse_size, square, time_cuda, time_host  # noqa: E402


def commit() -> str:
    if os.environ.get("HISTEQ_COMMIT"):
        return os.environ["HISTEQ_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def histeq_rows(binary: str, sizes: list[str], reps: int, warmup: int) -> dict[str, float]:
    """Median µs of `clahe:gpu` per size from `histeq bench --clahe` (natural data)."""
    out = subprocess.run([binary, "bench", "--clahe", "--sizes", ",".join(sizes), "--dist",
                          "natural", "--reps", str(reps), "--warmup", str(warmup)],
                         capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) > 8 and f[0] == "clahe:gpu" and f[4] == "natural" and f[7] == "PASS":
            rows[f[3]] = float(f[8])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1M,16M,64M")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=16, help="OpenCV's thread count")
    ap.add_argument("--histeq", default="build/histeq", help="the histeq binary ('' to skip)")
    ap.add_argument("--skip", default="", help="peers to leave out: opencv,kornia,cucim")
    args = ap.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]

    import torch

    notes: list[str] = []
    peers = {}
    if "opencv" not in skip:
        try:
            import cv2

            cv2.setNumThreads(args.threads)
            clahe = cv2.createCLAHE(clipLimit=2.0, tileGridSize=(8, 8))
            peers[f"OpenCV {cv2.__version__} CPU, {cv2.getNumThreads()} threads"] = (
                "host", lambda h: (lambda: clahe.apply(h)))
        except Exception as e:  # noqa: BLE001 - report and go on
            notes.append(f"opencv: {e}")
    if "kornia" not in skip:
        try:
            import kornia

            def kornia_call(x):
                a = (x.float() / 255.0)[None, None]
                return lambda: kornia.enhance.equalize_clahe(a, clip_limit=2.0, grid_size=(8, 8))

            peers[f"kornia {kornia.__version__} (GPU)"] = ("device", kornia_call)
        except Exception as e:  # noqa: BLE001
            notes.append(f"kornia: {e}")
    if "cucim" not in skip:
        try:
            import cucim
            import cupy
            from cucim.skimage import exposure

            def cucim_call(x):
                c = cupy.asarray(x)
                kh, kw = c.shape[0] // 8, c.shape[1] // 8
                return lambda: exposure.equalize_adapthist(c, kernel_size=(kh, kw))

            peers[f"cuCIM {cucim.__version__} equalize_adapthist (GPU)"] = ("device", cucim_call)
        except Exception as e:  # noqa: BLE001
            notes.append(f"cucim: {e}")

    results: dict[str, dict[str, float]] = {}
    if args.histeq:
        try:
            results["histeq `bench --clahe` (GPU, in device memory)"] = histeq_rows(
                args.histeq, sizes, max(args.reps, 20), max(args.warmup, 3))
        except (OSError, subprocess.CalledProcessError) as e:
            notes.append(f"histeq: {e}")
    for name, (kind, make) in peers.items():
        row = {}
        for s in sizes:
            h, w = square(parse_size(s))
            x = natural(torch, h, w, seed=1)
            try:
                if kind == "host":
                    row[s] = time_host(make(x.cpu().numpy()), args.reps, args.warmup)
                else:  # torch and CuPy work alike on the default stream: torch's events
                    row[s] = time_cuda(torch, make(x), args.reps, args.warmup)
            except Exception as e:  # noqa: BLE001
                notes.append(f"{name} {s}: {e}")
        results[name] = row

    cmd = " ".join(shlex.quote(a) for a in [os.path.basename(sys.argv[0])] + sys.argv[1:])
    print(f"# CLAHE clip 2, 8x8 tiles, gray uint8, median µs — `{cmd}`, commit {commit()}, "
          f"{torch.cuda.get_device_name(0)}")
    print()
    print("| peer | " + " | ".join(sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name, row in results.items():
        print(f"| {name} | " + " | ".join(f"{row[s]:.1f}" if s in row else "-" for s in sizes)
              + " |")
    for n in notes:
        print(f"\nnote: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
