#!/usr/bin/env python3
"""Where the host time of histeq's calls on CUDA arrays goes, from Python: each entry point
(equalize, clahe, histogram, match_histograms) on one gray image of --size, 8 and 16 bits, on a
torch tensor (and a CuPy array when CuPy is importable), against the compiled calls it makes;
8-bit masked rows beside them: equalize, histogram and clahe with a bool mask on the device (a
letterbox: the middle three quarters of the rows counted), equalize and histogram with roi= its
rectangle, and equalize with both. Each call again with out= (``histeq.X(x, out=o)``, o an array of the
result's kind allocated once: no result allocated or released per call).
Timed as bench_python.py's "host us per call (issue only)" rows: perf_counter around one call,
the GPU synchronized before it (not timed), median of --reps after --warmup.

    python bench/python/bench_overhead.py [--size 1M] [--reps 200] [--warmup 20] [--csv FILE]

Columns (host microseconds per call):
- call: ``histeq.X(x)`` (``X mask=``: ``histeq.X(x, mask=m)``, the mask of x's library on its
  device; its count check, which waits for the device, is remembered from the warm-up for a
  torch mask and made on every call for a CuPy one), its result released inside the clock (as
  bench_python.py's rows: the caller drops it); ``X out=`` rows: ``histeq.X(x, out=o)``.
- call, result kept: the same call, the result released after the clock stopped.
- compiled: the extension calls that the Python call makes (histeq._histeq: equalize_device,
  clahe_device, ...), with the same arguments on a preallocated output, computed once.
- Python layer: ``histeq.X(x)`` with the extension's device calls replaced by a Python no-op:
  the Python code, the array library's reads of the input and the result's allocation (kept).
- over compiled: call - compiled, the Python layer's share of a call as a user sees it.
A second table sets each masked row beside its entry's unmasked row (ratio: of the calls), a
third each call with out= beside the same call without (saved: the result's allocation and
release, less the reads of out).
Then the array library's pieces that a call uses (torch, and CuPy when importable): the
allocation of a result (and its release; for the counts, three ways), the reads of an array
(torch: is_cuda, dtype, is_contiguous(), shape, get_device(), data_ptr(), the current stream;
CuPy: dtype, flags, shape, data, the current device and stream), and a Python call that does
nothing. Prints Markdown tables with command, commit and device; --csv writes the rows.
"""
from __future__ import annotations

import argparse
import csv
import os
import shlex
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cpu  # noqa: E402  (commit)
import bench_python  # noqa: E402  (time_issue, natural, parse_size, square)

DEVICE_CALLS = ("equalize_device", "equalize16_device", "clahe_device", "histogram_device",
                "histogram16_device", "stages_device", "stages16_device", "histogram_device_region")


def time_issue_kept(torch, fn, reps: int, warmup: int) -> float:
    """bench_python.time_issue with fn's result released after the clock stopped."""
    times = []
    for i in range(warmup + reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        r = fn()
        t = (time.perf_counter() - t0) * 1e6
        del r
        if i >= warmup:
            times.append(t)
    torch.cuda.synchronize()
    return statistics.median(times)


def letterbox(torch, h: int, w: int):
    """(mask, roi): a bool CUDA mask counting the middle three quarters of the rows, and that
    rectangle as (x, y, width, height)."""
    top, rows = h // 8, h - 2 * (h // 8)
    m = torch.zeros((h, w), dtype=torch.bool, device="cuda")
    m[top:top + rows] = True
    return m, (0, top, w, rows)


def compiled_calls(torch, core, x, ref, sixteen: bool, mask=None, roi=None):
    """{entry: callable} making the extension calls of each entry point on x (ref: the reference
    of match_histograms; mask and roi: the masked rows' for 8 bits), outputs preallocated,
    arguments computed once."""
    dev = x.get_device()
    stream = torch.cuda.current_stream(dev).cuda_stream
    h, w = x.shape
    n = h * w
    out = torch.empty_like(x)
    hist = torch.empty((65536 if sixteen else 256,), dtype=torch.int64, device=x.device)
    ip, op, hp = x.data_ptr(), out.data_ptr(), hist.data_ptr()
    calls = {
        "equalize": (lambda: core.equalize16_device(dev, stream, ip, op, 1, n)) if sixteen else
        (lambda: core.equalize_device(dev, stream, ip, op, 1, n, 1, None, "opencv", "auto",
                                      "auto")),
        "clahe": lambda: core.clahe_device(dev, stream, ip, op, 1, h, w, sixteen, 40.0, 8, 8),
        "histogram": (lambda: core.histogram16_device(dev, stream, ip, 1, n, hp)) if sixteen else
        (lambda: core.histogram_device(dev, stream, ip, n, 1, None, 256, "auto", hp)),
    }
    if not sixteen:
        rp, rn = ref.data_ptr(), ref.numel()

        calls["match_histograms"] = lambda: core.stages_device(  # the reference counted there
            dev, stream, ip, op, 1, h, w, 1, None, "opencv", "auto", 0, None, 0, 0, rp, rn)
        mp = mask.data_ptr()

        def stages(m, r):
            return lambda: core.stages_device(dev, stream, ip, op, 1, h, w, 1, None, "opencv",
                                              "auto", m, r, 0, 0)
        calls["equalize mask="] = stages(mp, None)
        calls["equalize roi="] = stages(0, roi)
        calls["equalize mask= roi="] = stages(mp, roi)
        calls["histogram mask="] = lambda: core.histogram_device_region(
            dev, stream, ip, h, w, 1, None, mp, None, hp)
        calls["histogram roi="] = lambda: core.histogram_device_region(
            dev, stream, ip, h, w, 1, None, 0, roi, hp)
        calls["clahe mask="] = lambda: core.clahe_device(dev, stream, ip, op, 1, h, w, False,
                                                         40.0, 8, 8, mp, None)
    return calls, (out, hist)


def widen(torch, x8):
    """The 8-bit image as 16 bits (v * 257)."""
    return (x8.to(torch.int32) * 257).to(torch.uint16)


def entry_calls(histeq, x, ref, mask, roi):
    return {"equalize": lambda: histeq.equalize(x), "clahe": lambda: histeq.clahe(x),
            "histogram": lambda: histeq.histogram(x),
            "match_histograms": lambda: histeq.match_histograms(x, ref),
            "equalize mask=": lambda: histeq.equalize(x, mask=mask),
            "equalize roi=": lambda: histeq.equalize(x, roi=roi),
            "equalize mask= roi=": lambda: histeq.equalize(x, mask=mask, roi=roi),
            "histogram mask=": lambda: histeq.histogram(x, mask=mask),
            "histogram roi=": lambda: histeq.histogram(x, roi=roi),
            "clahe mask=": lambda: histeq.clahe(x, mask=mask)}


def out_calls(histeq, x, ref, mask, roi, outs):
    """entry_calls' calls with out=: outs[entry] (an array of the entry's result, allocated
    once) written by every call."""
    o = outs
    return {"equalize": lambda: histeq.equalize(x, out=o["equalize"]),
            "clahe": lambda: histeq.clahe(x, out=o["clahe"]),
            "histogram": lambda: histeq.histogram(x, out=o["histogram"]),
            "match_histograms": lambda: histeq.match_histograms(x, ref,
                                                                out=o["match_histograms"]),
            "equalize mask=": lambda: histeq.equalize(x, mask=mask, out=o["equalize mask="]),
            "equalize roi=": lambda: histeq.equalize(x, roi=roi, out=o["equalize roi="]),
            "equalize mask= roi=": lambda: histeq.equalize(x, mask=mask, roi=roi,
                                                           out=o["equalize mask= roi="]),
            "histogram mask=": lambda: histeq.histogram(x, mask=mask, out=o["histogram mask="]),
            "histogram roi=": lambda: histeq.histogram(x, roi=roi, out=o["histogram roi="]),
            "clahe mask=": lambda: histeq.clahe(x, mask=mask, out=o["clahe mask="])}


def python_layer(torch, core, fn, reps: int, warmup: int) -> float:
    """fn's host time with the extension's device calls replaced by a no-op."""
    saved = {name: getattr(core, name) for name in DEVICE_CALLS}
    try:
        for name in DEVICE_CALLS:
            setattr(core, name, lambda *args: "")
        return time_issue_kept(torch, fn, reps, warmup)
    finally:
        for name, f in saved.items():
            setattr(core, name, f)


def piece_rows(torch, x, reps: int, warmup: int):
    """(name, us) of the torch operations a call on x makes, alone."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    dev = x.get_device()
    where = x.device
    template = torch.empty((256,), dtype=torch.int64, device=x.device)

    def reads():
        if x.is_cuda and x.dtype is torch.uint8 and x.is_contiguous():
            d = x.get_device()
            return x.shape, d, x.data_ptr(), raw(d) if raw else 0
        return None
    kept = lambda fn: time_issue_kept(torch, fn, reps, warmup)  # noqa: E731
    dropped = lambda fn: bench_python.time_issue(torch, fn, reps, warmup)  # noqa: E731
    return [
        ("a Python call that does nothing", kept(lambda: None)),
        ("torch.empty_like(x), kept", kept(lambda: torch.empty_like(x))),
        ("torch.empty_like(x), released", dropped(lambda: torch.empty_like(x))),
        ("x.new_empty(x.shape), kept", kept(lambda: x.new_empty(x.shape))),
        ("torch.empty((256,), dtype=int64, device=x.device), kept",
         kept(lambda: torch.empty((256,), dtype=torch.int64, device=x.device))),
        ("x.new_empty((256,), dtype=int64), kept",
         kept(lambda: x.new_empty((256,), dtype=torch.int64))),
        ("reads of x: is_cuda, dtype, is_contiguous(), shape, get_device(), data_ptr(), stream",
         kept(reads)),
        ("x.is_contiguous()", kept(lambda: x.is_contiguous())),
        ("x.get_device()", kept(lambda: x.get_device())),
        ("torch._C._cuda_getCurrentRawStream(dev)",
         kept(lambda: raw(dev)) if raw else float("nan")),
        ("torch.empty((256,), dtype=int64, device=<a torch.device kept>), kept",
         kept(lambda: torch.empty((256,), dtype=torch.int64, device=where))),
        ("torch.empty((256,), dtype=int64, device=<the index>), kept",
         kept(lambda: torch.empty((256,), dtype=torch.int64, device=dev))),
        ("torch.empty_like(<a (256,) int64 tensor kept>), kept",
         kept(lambda: torch.empty_like(template))),
    ]


def cupy_piece_rows(torch, cupy, x, reps: int, warmup: int):
    """(name, us) of the CuPy operations a call on the CuPy array x makes, alone."""
    kept = lambda fn: time_issue_kept(torch, fn, reps, warmup)  # noqa: E731
    runtime = cupy.cuda.runtime

    def reads():
        if x.dtype == cupy.uint8 and x.flags.c_contiguous:
            mem = x.data
            return (x.shape, mem.device_id, mem.ptr, runtime.getDevice(),
                    cupy.cuda.get_current_stream().ptr)
        return None
    return [
        ("cupy.empty(x.shape, x.dtype), kept", kept(lambda: cupy.empty(x.shape, x.dtype))),
        ("cupy.empty_like(x), kept", kept(lambda: cupy.empty_like(x))),
        ("cupy.empty((256,), int64), kept", kept(lambda: cupy.empty((256,), cupy.int64))),
        ("reads of x: dtype, flags.c_contiguous, shape, data.device_id, data.ptr, the current "
         "device and stream", kept(reads)),
        ("x.flags.c_contiguous", kept(lambda: x.flags.c_contiguous)),
        ("cupy.cuda.get_current_stream().ptr", kept(lambda: cupy.cuda.get_current_stream().ptr)),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1M")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--csv")
    args = ap.parse_args()

    import histeq
    from histeq import _histeq as core
    import torch
    if not torch.cuda.is_available() or not histeq.cuda_available():
        print(f"bench_overhead: no usable GPU (torch: {torch.cuda.is_available()}, histeq: "
              f"{histeq._cuda_why() or 'ok'})", file=sys.stderr)
        return 1
    try:
        import cupy
    except ImportError:
        cupy = None
    h, w = bench_python.square(bench_python.parse_size(args.size))
    x8 = bench_python.natural(torch, h, w, seed=1)
    ref = bench_python.natural(torch, h, w, seed=2)
    mask, roi = letterbox(torch, h, w)
    inputs = [("uint8", x8)]
    if hasattr(torch, "uint16"):
        inputs.append(("uint16", widen(torch, x8)))
    torch.cuda.synchronize()

    rows = []  # (entry, depth, library, call, kept, compiled, python); out= rows: "X out="
    for depth, x in inputs:
        sixteen = depth == "uint16"
        compiled, _keep = compiled_calls(torch, core, x, ref, sixteen, mask, roi)
        libs = [("torch", x, ref, mask)]
        if cupy is not None:
            c8 = cupy.asarray(x8)
            libs.append(("cupy", c8.astype(cupy.uint16) * 257 if sixteen else c8,
                         cupy.asarray(ref), cupy.asarray(mask)))
        for lib, xa, ra, ma in libs:
            plain = entry_calls(histeq, xa, ra, ma, roi)
            outs = {entry: fn() for entry, fn in plain.items() if entry in compiled}
            with_out = out_calls(histeq, xa, ra, ma, roi, outs)
            for entry, fn in list(plain.items()) + [(e + " out=", with_out[e]) for e in plain]:
                base = entry[:-len(" out=")] if entry.endswith(" out=") else entry
                if base not in compiled:
                    continue  # 16-bit matching and masks go through the host
                rows.append((entry, depth, lib,
                             bench_python.time_issue(torch, fn, args.reps, args.warmup),
                             time_issue_kept(torch, fn, args.reps, args.warmup),
                             bench_python.time_issue(torch, compiled[base], args.reps,
                                                     args.warmup),
                             python_layer(torch, core, fn, args.reps, args.warmup)))
    pieces = piece_rows(torch, x8, args.reps, args.warmup)
    cupy_pieces = cupy_piece_rows(torch, cupy, cupy.asarray(x8), args.reps, args.warmup) \
        if cupy is not None else []

    commit = bench_cpu.commit()
    print(f"command: {' '.join(shlex.quote(a) for a in [sys.executable] + sys.argv)}")
    print(f"commit: {commit}  histeq {histeq.__version__}  torch {torch.__version__}"
          + (f"  cupy {cupy.__version__}" if cupy is not None else ""))
    print(f"device: {torch.cuda.get_device_name()}; host: {bench_cpu.cpu_device()}; Python "
          f"{sys.version.split()[0]}")
    print(f"timing: host microseconds per call, perf_counter around the call, the GPU "
          f"synchronized before it; median of {args.reps} after {args.warmup} warm-ups; one "
          f"gray image of {args.size} ({h}x{w})")
    print()
    print("| entry | depth | array | call | call, result kept | compiled | Python layer | "
          "over compiled |")
    print("|---|---|---|---|---|---|---|---|")
    for entry, depth, lib, call, kept, comp, py in rows:
        print(f"| {entry} | {depth} | {lib} | {call:.1f} | {kept:.1f} | {comp:.1f} | {py:.1f} | "
              f"{call - comp:.1f} |")
    print()
    print("Masked against unmasked (8 bits; host us per call):")
    print()
    print("| entry | array | call | unmasked call | ratio | Python layer | unmasked | compiled | "
          "unmasked |")
    print("|---|---|---|---|---|---|---|---|---|")
    by = {(r[0], r[1], r[2]): r for r in rows}
    for entry, depth, lib, call, _kept, comp, py in rows:
        plain = by.get((entry.split()[0], depth, lib))
        if " " not in entry or entry.endswith(" out=") or plain is None:
            continue
        print(f"| {entry} | {lib} | {call:.1f} | {plain[3]:.1f} | {call / plain[3]:.2f} | "
              f"{py:.1f} | {plain[6]:.1f} | {comp:.1f} | {plain[5]:.1f} |")
    print()
    print("With out= against without (host us per call; saved: call - call with out=):")
    print()
    print("| entry | depth | array | call | call, out= | saved | Python layer | Python layer, "
          "out= | compiled | out= over compiled |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for entry, depth, lib, call, _kept, comp, py in rows:
        o = by.get((entry + " out=", depth, lib))
        if o is None:
            continue
        print(f"| {entry} | {depth} | {lib} | {call:.1f} | {o[3]:.1f} | {call - o[3]:.1f} | "
              f"{py:.1f} | {o[6]:.1f} | {comp:.1f} | {o[3] - comp:.1f} |")
    print()
    print("| torch piece | host us |")
    print("|---|---|")
    for name, us in pieces:
        print(f"| {name} | {us:.2f} |")
    if cupy_pieces:
        print()
        print("| CuPy piece | host us |")
        print("|---|---|")
        for name, us in cupy_pieces:
            print(f"| {name} | {us:.2f} |")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            wr = csv.writer(f)
            wr.writerow(["entry", "depth", "array", "call_us", "call_kept_us", "compiled_us",
                         "python_layer_us", "commit", "device"])
            for r in rows:
                wr.writerow(list(r[:3]) + [f"{v:.2f}" for v in r[3:]] +
                            [commit, torch.cuda.get_device_name()])
            for lib, rows_of in (("torch", pieces), ("cupy", cupy_pieces)):
                for name, us in rows_of:
                    wr.writerow([name, "", lib, f"{us:.2f}", "", "", "", commit,
                                 torch.cuda.get_device_name()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
