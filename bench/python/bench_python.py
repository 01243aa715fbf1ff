#!/usr/bin/env python3
"""Whole equalization of gray uint8 images already on the GPU, from Python: histeq against the
Python peers, timed as a Python caller sees them: CUDA events recorded around each call on the current
stream, synchronized after it, median of 30 after 5 warm-ups (so Python and launch costs count).

    python bench/python/bench_python.py [--sizes 1M,16M,64M] [--batch 64x1M] [--reps 30]
        [--warmup 5] [--csv FILE] [--skip PEER,...] [--cpu-sizes 1M,16M] [--cpu-only]
        [--clahe-sizes 1M,16M] [--match-sizes 16M]

The same run also prints histeq's CPU backend against OpenCV on host arrays (bench_cpu.py:
equalize and CLAHE, gray and BGR colour, at --cpu-sizes), and, where torch or a usable GPU is
missing, that table alone with the reason the GPU rows are skipped. The CLAHE rows on gray CUDA
tensors (--clahe-sizes) give the call, its host cost (also with out=) and the compiled call
alone, so that the
Python layer's share of a call shows beside `histeq bench --clahe`'s C++ figure. Last, the rows of
bench_match.py at --match-sizes: histogram matching against scikit-image (host) and cuCIM
(device), and masked against unmasked equalization, host and device.

Peers (each skipped with the reason when it cannot be imported): histeq on a torch tensor, on a
CuPy array, a batch (N,H,W) torch tensor and a list of N tensors; torchvision.transforms.v2
.functional.equalize (uint8 (1,H,W) / (N,1,H,W)); CuPy by hand (bincount → cumsum → LUT →
take); kornia.enhance.equalize (float (1,1,H,W) in [0,1], converted before timing); cuCIM's
skimage.exposure.equalize_hist; OpenCV cv2.equalizeHist on the host (perf_counter, its own
thread count). Data: a natural-like image (smooth gradient + noise), the same for every peer.
Diagnostic rows beside them (histeq_variants): the host time of one histeq call (queueing only;
torch and CuPy; torch also with out=, the result written into a tensor allocated once) and of
the compiled call it makes, the compiled call alone on a preallocated
output, torch's clone of the same tensor (a copy: the floor of any call that reads every byte and
writes a new tensor), and each batched path of a gray batch
("histeq batch path queued / two_launch / cluster / table"): one GPU run says which path wins;
and histeq's call timed with the L2 emptied before each call (time_cuda_flushed), beside the
repeated-input figure.
Prints a Markdown table with the command, commit (env HISTEQ_COMMIT when set, else git) and
device; --csv writes the rows.
"""
from __future__ import annotations

import argparse
import csv
import os
import shlex
import statistics
import subprocess
import sys
import time


def parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def square(n: int):
    side = int(round(n ** 0.5))
    if side * side != n:
        raise ValueError(f"size {n} is not a square")
    return side, side


def natural(torch, h: int, w: int, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    y = torch.linspace(0, 1, h, device="cuda")[:, None]
    x = torch.linspace(0, 1, w, device="cuda")[None, :]
    base = 60 + 80 * (0.5 + 0.5 * torch.sin(6.0 * x + 3.0 * y))
    noise = torch.randn((h, w), generator=g, device="cuda") * 12
    return (base + noise).clamp(0, 255).to(torch.uint8)


def time_cuda(torch, fn, reps: int, warmup: int, before=None) -> float:
    """Median microseconds of fn() between two events on the current stream. before(i), when
    given, runs before each call, untimed, followed by a device synchronize."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warmup + reps):
        if before is not None:
            before(i)
            torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def time_cuda_flushed(torch, fn, reps: int, warmup: int, mib: int = 256) -> float:
    """time_cuda with the L2 cache emptied of the input before each call: a `mib` MiB buffer
    is written (not timed) and the device synchronized before the start event, so the call
    reads its input from DRAM, as a batch that was not just written or read would be. The
    repeated-input rows of time_cuda may find part of a batch still in the 60 MB L2 from the
    call before."""
    flush = torch.empty(mib << 20, dtype=torch.uint8, device="cuda")
    us = time_cuda(torch, fn, reps, warmup, before=lambda i: flush.fill_(i & 0xFF))
    del flush
    return us


def time_issue(torch, fn, reps: int, warmup: int) -> float:
    """Median host microseconds to make the call (queue the work), the GPU synchronized between
    calls but not timed: when this is near time_cuda's number, the call is host-bound. fn's
    result is released inside the clock (a call that returns a new array pays its allocation and
    its release here; the compiled rows write into an output allocated once).
    bench_overhead.py splits a call's host time into its parts."""
    times = []
    for i in range(warmup + reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        t = (time.perf_counter() - t0) * 1e6
        if i >= warmup:
            times.append(t)
    torch.cuda.synchronize()
    return statistics.median(times)


def histeq_variants(torch, histeq, x, batched: bool):
    """(name, callable) rows that tell where histeq's time goes: the host cost of one call, the
    compiled call alone on a preallocated output (no Python layer, no allocation), and for a
    gray batch each batched path (histeq._set_batch_path)."""
    from histeq import _histeq as core
    out = torch.empty_like(x)
    dev = x.get_device()
    stream = torch.cuda.current_stream(dev).cuda_stream
    n = x.shape[0] if batched else 1
    pixels = x.numel() // n
    rows = [("histeq (compiled call only, output preallocated)",
             lambda: core.equalize_device(dev, stream, x.data_ptr(), out.data_ptr(), n, pixels, 1,
                                          None, "opencv", "auto", "auto"))]
    if batched:
        for path in ("queued", "two_launch", "cluster", "table"):
            def fn(path=path):
                prev = histeq._set_batch_path(path)
                try:
                    return histeq.equalize(x)
                finally:
                    histeq._set_batch_path(prev)
            rows.append((f"histeq batch path {path}", fn))
    return rows


def clahe_rows(torch, histeq, x, case: str, reps: int, warmup: int):
    """(case, name, us) rows of histeq.clahe on the gray CUDA tensor x: the whole call (CUDA
    events), its host cost per call (issue only; again with out=, no result allocated), and the
    compiled call alone on a preallocated output (no Python layer, no allocation): their
    difference is the Python layer's share."""
    from histeq import _histeq as core
    out = torch.empty_like(x)
    dev = x.get_device()
    stream = torch.cuda.current_stream(dev).cuda_stream
    h, w = x.shape
    compiled = lambda: core.clahe_device(dev, stream, x.data_ptr(), out.data_ptr(), 1, h, w,  # noqa: E731
                                         False, 40.0, 8, 8)
    return [(case, "histeq.clahe (torch)", time_cuda(torch, lambda: histeq.clahe(x), reps,
                                                     warmup)),
            (case, "histeq.clahe (torch): host us per call (issue only)",
             time_issue(torch, lambda: histeq.clahe(x), reps, warmup)),
            (case, "histeq.clahe (torch, out=): host us per call (issue only)",
             time_issue(torch, lambda: histeq.clahe(x, out=out), reps, warmup)),
            (case, "histeq clahe (compiled call only, output preallocated)",
             time_cuda(torch, compiled, reps, warmup)),
            (case, "histeq clahe compiled call: host us per call (issue only)",
             time_issue(torch, compiled, reps, warmup))]


def time_host(fn, reps: int, warmup: int) -> float:
    times = []
    for i in range(warmup + reps):
        t0 = time.perf_counter()
        fn()
        t = (time.perf_counter() - t0) * 1e6
        if i >= warmup:
            times.append(t)
    return statistics.median(times)


def cupy_by_hand(cp):
    def eq(x):
        hist = cp.bincount(x.ravel(), minlength=256)
        cdf = cp.cumsum(hist)
        nz = cp.argmax(hist > 0)
        h0 = hist[nz]
        scale = cp.float32(255) / (x.size - h0).astype(cp.float32)
        lut = cp.rint((cdf - h0).astype(cp.float32) * scale).clip(0, 255).astype(cp.uint8)
        return lut[x]
    return eq


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1M,16M,64M")
    ap.add_argument("--batch", default="64x1M", help="N x size (empty: none)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--csv")
    ap.add_argument("--skip", default="", help="comma-separated peers to leave out")
    ap.add_argument("--cpu-sizes", default="1M,16M",
                    help="sizes of the CPU table (histeq's CPU backend against OpenCV; empty: "
                         "none)")
    ap.add_argument("--cpu-only", action="store_true", help="the CPU table only")
    ap.add_argument("--clahe-sizes", default="1M,16M",
                    help="sizes of the CLAHE rows on CUDA tensors (empty: none)")
    ap.add_argument("--match-sizes", default="16M",
                    help="sizes of the histogram matching and masked equalization rows "
                         "(bench_match.py: host and CUDA arrays; empty: none)")
    args = ap.parse_args()
    skip = {s for s in args.skip.split(",") if s}

    import histeq
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_cpu
    cpu_sizes = [s for s in args.cpu_sizes.split(",") if s]
    cpu_rows, cpu_notes, cpu_ok = bench_cpu.cpu_rows(cpu_sizes, args.reps, args.warmup) \
        if cpu_sizes else ([], [], True)
    import bench_match
    match_sizes = [s for s in args.match_sizes.split(",") if s]
    match_rows, match_notes, match_ok = bench_match.cpu_rows(match_sizes, args.reps,
                                                             args.warmup)

    def print_match(gpu: bool) -> bool:
        """bench_match.py's rows (its GPU rows too when gpu), after the other tables."""
        if not match_sizes:
            return True
        rows, notes, ok = match_rows, match_notes, match_ok
        if gpu:
            grows, gnotes, gok = bench_match.gpu_rows(match_sizes, args.reps, args.warmup)
            rows, notes, ok = rows + grows, notes + gnotes, ok and gok
        print()
        print("Histogram matching and masked equalization (bench_match.py):")
        bench_match.print_table(rows)
        for note in notes:
            print(f"note: {note}")
        return ok
    gpu_why = ""
    try:
        import torch
        if not torch.cuda.is_available():
            gpu_why = "torch sees no CUDA device"
    except ImportError as e:
        gpu_why = f"torch: {e}"
    if not gpu_why and not histeq.cuda_available():
        gpu_why = f"histeq cannot use the GPU ({histeq._cuda_why()})"
    if gpu_why or args.cpu_only:
        print(f"command: {' '.join(shlex.quote(a) for a in [sys.executable] + sys.argv)}")
        print(f"commit: {bench_cpu.commit()}  histeq {histeq.__version__}")
        print(f"device: {bench_cpu.cpu_device()}")
        print(f"timing: perf_counter around each call, median of {args.reps} after "
              f"{args.warmup} warm-ups; the two calls of a pair in turn, then each alone")
        print()
        bench_cpu.print_cpu_table(cpu_rows)
        for note in cpu_notes:
            print(f"note: {note}")
        print(f"note: GPU peers skipped: {gpu_why or '--cpu-only'}")
        match_same = print_match(False)
        return 0 if cpu_ok and match_same else 1

    peers = {}   # name -> (kind, make(x_torch) -> callable)
    notes = []
    peers["histeq (torch)"] = lambda x: (lambda: histeq.equalize(x))
    try:
        import cupy as cp
        peers["histeq (cupy)"] = lambda x: (lambda a=cp.asarray(x): histeq.equalize(a))
        eq = cupy_by_hand(cp)
        peers["CuPy by hand"] = lambda x: (lambda a=cp.asarray(x): eq(a))
    except ImportError as e:
        notes.append(f"cupy: {e}")
    try:
        from torchvision.transforms.v2 import functional as TF
        peers["torchvision v2 equalize"] = lambda x: (lambda a=x.unsqueeze(-3): TF.equalize(a))
    except ImportError as e:
        notes.append(f"torchvision: {e}")
    try:
        import kornia
        peers["kornia"] = lambda x: (
            lambda a=(x.unsqueeze(-3).float() / 255): kornia.enhance.equalize(a))
    except ImportError as e:
        notes.append(f"kornia: {e}")
    try:
        from cucim.skimage import exposure
        import cupy as cp
        peers["cuCIM equalize_hist"] = lambda x: (
            lambda a=cp.asarray(x): exposure.equalize_hist(a))
    except ImportError as e:
        notes.append(f"cucim: {e}")
    try:
        import cv2
        peers["OpenCV CPU"] = "host"
        notes.append(f"OpenCV {cv2.__version__}, {cv2.getNumThreads()} threads")
    except ImportError as e:
        notes.append(f"cv2: {e}")

    rows = []   # (case, peer, us)

    # Peers that have no per-image batch call: on a (N, H, W) array they would equalize one
    # histogram of the whole volume, not N images, so they are left out of the batch column.
    no_batch = {"CuPy by hand", "cuCIM equalize_hist"}

    def run(case: str, x, batch_list=None):
        for name, make in peers.items():
            if name in skip or (batch_list is not None and name in no_batch):
                continue
            try:
                if make == "host":
                    import cv2
                    host = x.cpu().numpy()
                    if host.ndim == 3:
                        fn = lambda: [cv2.equalizeHist(im) for im in host]  # noqa: E731
                    else:
                        fn = lambda: cv2.equalizeHist(host)  # noqa: E731
                    us = time_host(fn, args.reps, args.warmup)
                else:
                    us = time_cuda(torch, make(x), args.reps, args.warmup)
            except Exception as e:  # noqa: BLE001 — a peer that fails is reported, not fatal
                notes.append(f"{name} at {case}: {type(e).__name__}: {e}")
                continue
            rows.append((case, name, us))
        if "torch clone" not in skip:
            # The floor of any call that reads every byte and writes a new tensor: torch's own
            # copy, timed the same way (Python, allocation, one launch, 2 x the bytes moved).
            rows.append((case, "torch clone (copy: read + write, no compute)",
                         time_cuda(torch, lambda: x.clone(), args.reps, args.warmup)))
        if "histeq (torch)" not in skip:
            rows.append((case, "histeq (torch): host us per call (issue only)",
                         time_issue(torch, lambda: histeq.equalize(x), args.reps, args.warmup)))
            out = torch.empty_like(x)
            rows.append((case, "histeq (torch, out=): host us per call (issue only)",
                         time_issue(torch, lambda: histeq.equalize(x, out=out), args.reps,
                                    args.warmup)))
            variants = histeq_variants(torch, histeq, x, batch_list is not None)
            rows.append((case, "histeq compiled call: host us per call (issue only)",
                         time_issue(torch, variants[0][1], args.reps, args.warmup)))
            for vname, fn in variants:
                rows.append((case, vname, time_cuda(torch, fn, args.reps, args.warmup)))
        if "histeq (cupy)" in peers and "histeq (cupy)" not in skip:
            rows.append((case, "histeq (cupy): host us per call (issue only)",
                         time_issue(torch, peers["histeq (cupy)"](x), args.reps, args.warmup)))
            rows.append((case, "histeq (torch), L2 emptied before each call",
                         time_cuda_flushed(torch, lambda: histeq.equalize(x), args.reps,
                                           args.warmup)))
        if batch_list is not None and "histeq (list of tensors)" not in skip:
            rows.append((case, "histeq (list of tensors)",
                         time_cuda(torch, lambda: histeq.equalize(batch_list), args.reps,
                                   args.warmup)))

    for s in [s for s in args.sizes.split(",") if s]:
        n = parse_size(s)
        h, w = square(n)
        x = natural(torch, h, w, seed=n)
        torch.cuda.synchronize()
        run(s, x)
        del x
        torch.cuda.empty_cache()
    # CLAHE on gray CUDA tensors (OpenCV's defaults): the call, its host cost, the compiled call
    # alone on a preallocated output, and CUDA's floor of one empty call; the same call from C++
    # is `histeq bench --clahe` (bench_clahe_peers.py prints it beside its peers).
    for s in [s for s in args.clahe_sizes.split(",") if s]:
        n = parse_size(s)
        h, w = square(n)
        x = natural(torch, h, w, seed=n)
        torch.cuda.synchronize()
        case = f"CLAHE {s}"
        rows.extend(clahe_rows(torch, histeq, x, case, args.reps, args.warmup))
        del x
        torch.cuda.empty_cache()
    if args.batch:
        count, size = args.batch.lower().split("x")
        h, w = square(parse_size(size))
        xb = torch.stack([natural(torch, h, w, seed=i) for i in range(int(count))])
        torch.cuda.synchronize()
        run(f"{count} x {size.upper()}", xb, batch_list=list(xb.unbind(0)))

    # Correctness beside the numbers: histeq equals the CPU backend on the first size.
    x = natural(torch, 1024, 1024, seed=1)
    same = bool((histeq.equalize(x).cpu().numpy() ==
                 histeq.equalize(x.cpu().numpy(), backend="cpu")).all())

    commit = os.environ.get("HISTEQ_COMMIT", "")  # the GPU machine's .git may be stale
    try:
        commit = commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=os.path.dirname(os.path.abspath(__file__))
                                ).stdout.strip() or "unknown"
    except OSError:
        commit = "unknown"
    print(f"command: {' '.join(shlex.quote(a) for a in [sys.executable] + sys.argv)}")
    print(f"commit: {commit}  histeq {histeq.__version__}  torch {torch.__version__}")
    print(f"device: {torch.cuda.get_device_name()}")
    print(f"timing: CUDA events around each call on the current stream, synchronized after it; "
          f"median of {args.reps} after {args.warmup} warm-ups (OpenCV: perf_counter)")
    print(f"histeq == CPU backend at 1M: {same}")
    if args.batch:
        ref = histeq.equalize(xb)
        for path in ("queued", "two_launch", "cluster", "table"):
            prev = histeq._set_batch_path(path)
            ok = bool(torch.equal(histeq.equalize(xb), ref))
            histeq._set_batch_path(prev)
            print(f"batch path {path} == auto on {args.batch}: {ok}")
            same = same and ok
    cases = list(dict.fromkeys(r[0] for r in rows))
    names = list(dict.fromkeys(r[1] for r in rows))
    print()
    print("| peer | " + " | ".join(cases) + " |")
    print("|---|" + "---|" * len(cases))
    val = {(c, n): us for c, n, us in rows}
    for n in names:
        cells = [f"{val[(c, n)]:.1f} us" if (c, n) in val else "" for c in cases]
        print(f"| {n} | " + " | ".join(cells) + " |")
    for note in notes:
        print(f"note: {note}")
    if cpu_rows:
        print()
        print(f"CPU: {bench_cpu.cpu_device()} (histeq's CPU backend against OpenCV on host "
              f"arrays; perf_counter, the two calls of a pair in turn, then each alone)")
        bench_cpu.print_cpu_table(cpu_rows)
        for note in cpu_notes:
            print(f"note: {note}")
        same = same and cpu_ok
        rows.extend(cpu_rows)
    same = print_match(True) and same
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            wr = csv.writer(f)
            wr.writerow(["case", "peer", "median_us", "commit", "device"])
            for c, n, us in rows:
                wr.writerow([c, n, f"{us:.2f}", commit, torch.cuda.get_device_name()])
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
