#!/usr/bin/env python3
"""Histogram matching and masked equalization from Python, in one run: histeq against
scikit-image's ``exposure.match_histograms`` on host arrays (the CPU backend), and, where a GPU,
torch and histeq's CUDA side are usable, histeq on CUDA tensors against cuCIM's
``match_histograms`` on the same data; masked against unmasked equalization of the same image.
Host calls are timed as bench_cpu.py times them (perf_counter, a pair of calls in turn, median of
--reps after --warmup), device calls as bench_python.py does (CUDA events on the current stream,
synchronized after each call).

    python bench/python/bench_match.py [--sizes 16M] [--reps 10] [--warmup 2] [--cpu-only]
        [--csv FILE]

Rows per size (gray uint8, a natural-like image matched to another of a different
distribution; the reference's histogram is computed in every call, by every peer):
- ``match gray``: ``histeq.match_histograms(g, ref, backend="cpu")`` / scikit-image's
  ``match_histograms(g, ref)`` (NumPy, one thread); beside them whether histeq equals
  ``np.rint`` of scikit-image's result byte for byte. On the GPU: histeq on torch tensors (image
  and reference on the device), histeq on CuPy arrays, cuCIM's ``match_histograms``.
- ``equalize gray, masked``: ``histeq.equalize(g, mask=m)`` / ``histeq.equalize(g)`` for a
  letterbox mask (the central 80 % of the rows and columns counted) and a random half of the
  pixels, CPU backend and CUDA tensors (mask on the device); scikit-image's
  ``equalize_hist(g, mask=m)`` on the host for scale (its own rule: float output).
- ``CLAHE gray (2.0, 8x8), masked``: on CUDA tensors, ``histeq.clahe(g, 2.0, mask=m)`` /
  ``histeq.clahe(g, 2.0)`` with the same masks (the masked call equal to the CPU backend's).
- ``match gray 16-bit`` and ``equalize gray 16-bit, masked`` (the letterbox): the same image and
  reference widened to 16 bits (v * 257) on CUDA tensors, against the unmasked 16-bit equalize.
bench_python.py prints these rows too (its --match-sizes).
"""
from __future__ import annotations

import argparse
import csv
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cpu  # noqa: E402  (the host timing, data and machine description)


def reference_host(np, side: int):
    """A reference of another distribution: a natural-like image, darker and with a gamma."""
    r = bench_cpu.natural_host(np, side, side, seed=11).astype(np.float32) / 255.0
    return np.clip(255.0 * r ** 1.8 * 0.9, 0, 255).astype(np.uint8)


def masks_host(np, side: int):
    letterbox = np.zeros((side, side), bool)
    m = side // 10
    letterbox[m:side - m, m:side - m] = True
    half = np.random.default_rng(3).random((side, side)) < 0.5
    return [("letterbox mask", letterbox), ("random half mask", half)]


def cpu_rows(sizes, reps: int, warmup: int):
    """(rows, notes, ok): rows (case, peer, median us) of the host calls."""
    import numpy as np
    import histeq
    rows, notes, ok = [], [], True
    try:
        from skimage import exposure
        import skimage
        notes.append(f"scikit-image {skimage.__version__} (NumPy {np.__version__}, one thread)")
    except ImportError as e:
        exposure = None
        notes.append(f"skimage: {e} (pip install scikit-image)")
    for s in sizes:
        side = int(round(bench_cpu.parse_size(s) ** 0.5))
        g = bench_cpu.natural_host(np, side, side)
        ref = reference_host(np, side)
        case = f"{s} match gray"
        mine = lambda: histeq.match_histograms(g, ref, backend="cpu")  # noqa: E731
        if exposure is not None:
            theirs = lambda: exposure.match_histograms(g, ref)  # noqa: E731
            same = bool(np.array_equal(mine(), np.rint(theirs()).astype(np.uint8)))
            ok = ok and same
            notes.append(f"{case}: histeq == np.rint(scikit-image): {same}")
            a, b = bench_cpu.time_pair(mine, theirs, reps, warmup)
            rows += [(case, "histeq CPU", a), (case, "scikit-image", b)]
        else:
            rows.append((case, "histeq CPU", bench_cpu.time_host(mine, reps, warmup)))
        for mname, m in masks_host(np, side):
            case = f"{s} equalize gray, {mname}"
            a, b = bench_cpu.time_pair(lambda: histeq.equalize(g, mask=m, backend="cpu"),
                                       lambda: histeq.equalize(g, backend="cpu"), reps, warmup)
            rows += [(case, "histeq CPU masked", a), (case, "histeq CPU unmasked", b)]
            if exposure is not None and mname.startswith("letterbox"):
                rows.append((case, "scikit-image equalize_hist(mask) (float output)",
                             bench_cpu.time_host(lambda: exposure.equalize_hist(g, mask=m),
                                                 max(1, reps // 4), 1)))
    return rows, notes, ok


def gpu_rows(sizes, reps: int, warmup: int):
    """(rows, notes, ok) of the calls on CUDA arrays; ([], [why], True) without a GPU."""
    import numpy as np
    import histeq
    try:
        import torch
    except ImportError as e:
        return [], [f"GPU rows skipped: torch: {e}"], True
    if not torch.cuda.is_available() or not histeq.cuda_available():
        return [], [f"GPU rows skipped: {histeq._cuda_why() or 'torch sees no CUDA device'}"], \
            True
    from bench_python import time_cuda
    rows, notes, ok = [], [f"GPU: {torch.cuda.get_device_name()}"], True
    try:
        import cupy as cp
    except ImportError as e:
        cp = None
        notes.append(f"cupy: {e}")
    try:
        from cucim.skimage import exposure as cu_exposure
    except ImportError as e:
        cu_exposure = None
        notes.append(f"cucim: {e}")
    for s in sizes:
        side = int(round(bench_cpu.parse_size(s) ** 0.5))
        g_host = bench_cpu.natural_host(np, side, side)
        ref_host = reference_host(np, side)
        g, ref = torch.from_numpy(g_host).cuda(), torch.from_numpy(ref_host).cuda()
        want = histeq.match_histograms(g_host, ref_host, backend="cpu")
        same = bool(np.array_equal(histeq.match_histograms(g, ref).cpu().numpy(), want))
        ok = ok and same
        case = f"{s} match gray"
        notes.append(f"{case}: histeq on the GPU == CPU backend: {same}")
        rows.append((case, "histeq (torch)",
                     time_cuda(torch, lambda: histeq.match_histograms(g, ref), reps, warmup)))
        rows.append((case, "histeq.equalize (torch), for scale",
                     time_cuda(torch, lambda: histeq.equalize(g), reps, warmup)))
        if cp is not None:
            gc, rc = cp.asarray(g), cp.asarray(ref)
            rows.append((case, "histeq (cupy)",
                         time_cuda(torch, lambda: histeq.match_histograms(gc, rc), reps, warmup)))
            if cu_exposure is not None:
                rows.append((case, "cuCIM match_histograms",
                             time_cuda(torch, lambda: cu_exposure.match_histograms(gc, rc), reps,
                                       warmup)))
        def pair(case, on_gpu, on_cpu, labels, first, second):
            """One case: on_gpu() against on_cpu() (equal bytes or not, in the notes), then
            first and second timed as labels (0 and 1) name them."""
            nonlocal ok
            same = bool(np.array_equal(on_gpu().cpu().numpy(), on_cpu()))
            ok = ok and same
            notes.append(f"{case}: histeq on the GPU == CPU backend: {same}")
            rows.append((case, labels[0], time_cuda(torch, first, reps, warmup)))
            rows.append((case, labels[1], time_cuda(torch, second, reps, warmup)))

        masked = ("histeq (torch) masked", "histeq (torch) unmasked")
        for mname, m in masks_host(np, side):
            md = torch.from_numpy(m).cuda()
            pair(f"{s} equalize gray, {mname}", lambda: histeq.equalize(g, mask=md),
                 lambda: histeq.equalize(g_host, mask=m, backend="cpu"), masked,
                 lambda: histeq.equalize(g, mask=md), lambda: histeq.equalize(g))
            pair(f"{s} CLAHE gray (2.0, 8x8), {mname}", lambda: histeq.clahe(g, 2.0, mask=md),
                 lambda: histeq.clahe(g_host, 2.0, mask=m, backend="cpu"), masked,
                 lambda: histeq.clahe(g, 2.0, mask=md), lambda: histeq.clahe(g, 2.0))
        if hasattr(torch, "uint16"):  # 16-bit gray on the device: matching and a mask
            g16_host = (g_host.astype(np.uint32) * 257).astype(np.uint16)
            ref16_host = (ref_host.astype(np.uint32) * 257).astype(np.uint16)
            g16, ref16 = torch.from_numpy(g16_host).cuda(), torch.from_numpy(ref16_host).cuda()
            pair(f"{s} match gray 16-bit", lambda: histeq.match_histograms(g16, ref16),
                 lambda: histeq.match_histograms(g16_host, ref16_host, backend="cpu"),
                 ("histeq (torch)", "histeq.equalize (torch), for scale"),
                 lambda: histeq.match_histograms(g16, ref16), lambda: histeq.equalize(g16))
            mname, m = masks_host(np, side)[0]
            md = torch.from_numpy(m).cuda()
            pair(f"{s} equalize gray 16-bit, {mname}", lambda: histeq.equalize(g16, mask=md),
                 lambda: histeq.equalize(g16_host, mask=m, backend="cpu"), masked,
                 lambda: histeq.equalize(g16, mask=md), lambda: histeq.equalize(g16))
            del g16, ref16
        del g, ref
        torch.cuda.empty_cache()
    return rows, notes, ok


def print_table(rows) -> None:
    """| case | peer | median | its time / the case's first row's (histeq's) |"""
    print("| case | peer | median | time / first row's |")
    print("|---|---|---|---|")
    first = {}
    for c, p, us in rows:
        base = first.setdefault(c, us)
        print(f"| {c} | {p} | {us / 1000:.3f} ms | {us / base:.2f}x |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="16M")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cpu-only", action="store_true", help="the host rows only")
    ap.add_argument("--csv")
    args = ap.parse_args()
    import histeq
    sizes = [s for s in args.sizes.split(",") if s]
    rows, notes, ok = cpu_rows(sizes, args.reps, args.warmup)
    if not args.cpu_only:
        grows, gnotes, gok = gpu_rows(sizes, args.reps, args.warmup)
        rows, notes, ok = rows + grows, notes + gnotes, ok and gok
    print(f"command: {' '.join(shlex.quote(a) for a in [sys.executable] + sys.argv)}")
    print(f"commit: {bench_cpu.commit()}  histeq {histeq.__version__}")
    print(f"device: {bench_cpu.cpu_device()}")
    print(f"timing: host calls perf_counter, the two calls of a pair in turn; CUDA arrays CUDA "
          f"events on the current stream; median of {args.reps} after {args.warmup} warm-ups, "
          f"one process")
    print()
    print_table(rows)
    for note in notes:
        print(f"note: {note}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            wr = csv.writer(f)
            wr.writerow(["case", "peer", "median_us", "commit", "device"])
            for c, p, us in rows:
                wr.writerow([c, p, f"{us:.2f}", bench_cpu.commit(), bench_cpu.cpu_device()])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
