#!/usr/bin/env python3
"""End to end: a folder of photographs through `histeq equalize DIR -o OUT` against OpenCV in
Python doing the same work (imread, BGR->YCrCb, equalizeHist on Y, back to BGR, imwrite in the
same format: JPEG quality 95, PNG at OpenCV's default level), with 1 thread and with N threads
(a thread pool of N, one file per task; cv2 releases the GIL in its calls). Best of --reps
(default 3) wall times; MP/s and the ratio histeq / OpenCV. The header gives the command, the git
commit and the device.

  bench/e2e/fetch.sh /tmp/photos                      # once: DIR/jpg and DIR/png
  bench/e2e/run.py --histeq build/histeq /tmp/photos/png
  bench/e2e/run.py --histeq build/histeq /tmp/photos/jpg --repeat 20    # 20x the names, longer
  bench/e2e/run.py --histeq build/histeq --rss 1000,10000 /tmp/photos/png  # peak RSS vs count

When torch and torchvision are importable and CUDA is up, a JPEG folder also runs torchvision's
nvJPEG path as a peer ("torchvision, nvJPEG"): per chunk of --tv-batch files, read the bytes
(torchvision.io.read_file), torchvision.io.decode_jpeg(list, device='cuda', mode=RGB), the same
work on Y as the others (Y = 0.299 R + 0.587 G + 0.114 B; torchvision.transforms.v2.functional.equalize
on the uint8 Y plane, a torchvision user's equalizer; the Cr/Cb kept, i.e. RGB + (Y' - Y)),
torchvision.io.encode_jpeg(list, quality=95) on the GPU, and the files written. It runs in this
process, so its CUDA context and nvJPEG handles are warm after the first rep (histeq pays its
start-up in every run): its figure is a lower bound on a fresh process's time.

histeq runs with --json: its summary gives the stage times summed over the workers (printed as
MP per second of stage time) and the number of images each decoder served.
The commit is taken from the environment variable HISTEQ_COMMIT when set (a copied checkout's
.git may be stale), else from git describe.

--repeat K makes a folder of K symlinks per photo (different names, same bytes). --rss N,M runs
histeq alone on folders of N and M symlinks to one small image made from the first photo
(256x256) and prints the peak resident set size of each run (getrusage of the child): it must
stay flat as the count grows. The CPU seconds (user + system, getrusage) are printed beside the
wall times: on a shared machine they say more than the wall clock. Needs: python3, numpy, opencv-python-headless.
"""
import argparse
import concurrent.futures as cf
import json
import os
import pathlib
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

EXTS = {".png", ".jpg", ".jpeg"}


def device_name():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            return "GPU: " + ", ".join(l.strip() for l in out.stdout.splitlines() if l.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    model = platform.processor()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"no GPU; CPU: {model}, {os.cpu_count()} cores"


def git_commit():
    if os.environ.get("HISTEQ_COMMIT"):
        return os.environ["HISTEQ_COMMIT"] + " (HISTEQ_COMMIT)"
    here = pathlib.Path(__file__).resolve().parent
    try:
        return subprocess.run(["git", "-C", str(here), "describe", "--always", "--dirty"],
                              capture_output=True, text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def photos(folder):
    return sorted(p for p in pathlib.Path(folder).iterdir() if p.suffix.lower() in EXTS)


def opencv_one(cv2, src, dst):
    img = cv2.imread(str(src), cv2.IMREAD_COLOR)
    ycc = cv2.cvtColor(img, cv2.COLOR_BGR2YCrCb)
    y, cr, cb = cv2.split(ycc)
    ycc = cv2.merge((cv2.equalizeHist(y), cr, cb))
    out = cv2.cvtColor(ycc, cv2.COLOR_YCrCb2BGR)
    params = [cv2.IMWRITE_JPEG_QUALITY, 95] if dst.suffix.lower() in (".jpg", ".jpeg") else []
    if not cv2.imwrite(str(dst), out, params):
        raise RuntimeError(f"cv2.imwrite failed: {dst}")
    return img.shape[0] * img.shape[1]


def cpu_s(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def run_opencv(cv2, files, out_dir, threads):
    cv2.setNumThreads(1)
    c0 = cpu_s(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if threads == 1:
        for f in files:
            opencv_one(cv2, f, out_dir / f.name)
    else:
        with cf.ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda f: opencv_one(cv2, f, out_dir / f.name), files))
    return time.perf_counter() - t0, cpu_s(resource.RUSAGE_SELF) - c0


HISTEQ_SUMMARY = {}


def run_histeq(histeq, folder, out_dir, extra, summary=True):
    """One timed run; with `summary`, its --json summary is kept when it is the fastest so far."""
    cmd = [histeq, "equalize", str(folder), "-o", str(out_dir), "--quiet", "--json"] + extra
    c0 = cpu_s(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"histeq failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    try:
        last = json.loads(r.stdout.strip().splitlines()[-1])
        if summary and "summary" in last and (
                "wall" not in HISTEQ_SUMMARY or dt < HISTEQ_SUMMARY["wall"]):
            HISTEQ_SUMMARY.clear()
            HISTEQ_SUMMARY.update(last["summary"])
            HISTEQ_SUMMARY["wall"] = dt
    except (ValueError, IndexError):
        pass
    return dt, cpu_s(resource.RUSAGE_CHILDREN) - c0


def torchvision_ready():
    """(torch, torchvision) when both import and CUDA is up, else (None, why)."""
    try:
        import torch
        import torchvision
    except ImportError as e:
        return None, f"not importable ({e})"
    if not torch.cuda.is_available():
        return None, "torch sees no CUDA device"
    return (torch, torchvision), ""


def run_torchvision(mods, files, out_dir, batch):
    torch, torchvision = mods
    from torchvision.io import ImageReadMode, decode_jpeg, encode_jpeg, read_file
    from torchvision.transforms.v2 import functional as F
    c0 = cpu_s(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    for i in range(0, len(files), batch):
        chunk = files[i:i + batch]
        datas = [read_file(str(f)) for f in chunk]
        imgs = decode_jpeg(datas, device="cuda", mode=ImageReadMode.RGB)
        outs = []
        for img in imgs:
            x = img.float()
            y = 0.299 * x[0] + 0.587 * x[1] + 0.114 * x[2]
            y8 = y.round().clamp(0, 255).to(torch.uint8)
            ye = F.equalize(y8.unsqueeze(0))[0].float()
            outs.append((x + (ye - y)).round().clamp(0, 255).to(torch.uint8))
        encoded = encode_jpeg(outs, quality=95)
        for f, e in zip(chunk, encoded):
            (out_dir / f.name).write_bytes(e.cpu().numpy().tobytes())
    torch.cuda.synchronize()
    return time.perf_counter() - t0, cpu_s(resource.RUSAGE_SELF) - c0


def best_of(n, fn):
    """(best wall seconds, CPU seconds of that run)."""
    return min(fn() for _ in range(n))


def linked_folder(base, files, repeat):
    d = pathlib.Path(tempfile.mkdtemp(prefix="e2e-rep-", dir=base))
    for k in range(repeat):
        for f in files:
            (d / f"{f.stem}-{k:05d}{f.suffix}").symlink_to(f.resolve())
    return d


def rss_mode(args, files, work):
    import cv2
    counts = [int(c) for c in args.rss.split(",")]
    small = work / "small.png"
    img = cv2.resize(cv2.imread(str(files[0]), cv2.IMREAD_COLOR), (256, 256))
    cv2.imwrite(str(small), img)
    print(f"peak RSS of `histeq equalize FOLDER -o OUT` on N symlinks to a 256x256 PNG")
    print("| inputs | seconds | peak RSS (MiB) |\n|---:|---:|---:|")
    for n in counts:
        d = work / f"rss-{n}"
        d.mkdir()
        for i in range(n):
            (d / f"s{i:06d}.png").symlink_to(small)
        out = work / f"rss-out-{n}"
        cmd = [args.histeq, "equalize", str(d), "-o", str(out), "--quiet"] + args.histeq_args
        t0 = time.perf_counter()
        # A fresh interpreter child per run, so that RUSAGE_CHILDREN holds this run alone.
        code = ("import resource,subprocess,sys;r=subprocess.run(sys.argv[1:]).returncode;"
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss);sys.exit(r)")
        r = subprocess.run([sys.executable, "-c", code] + cmd, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit(f"histeq failed: {r.stderr}")
        kib = int(r.stdout.strip().splitlines()[-1])
        print(f"| {n} | {dt:.2f} | {kib / 1024:.1f} |")
        shutil.rmtree(out)
        shutil.rmtree(d)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help="folder of .jpg or .png photographs (bench/e2e/fetch.sh)")
    ap.add_argument("--histeq", default="build/histeq", help="the histeq binary")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="OpenCV's N (default: cores)")
    ap.add_argument("--reps", type=int, default=3, help="best of REPS (default 3)")
    ap.add_argument("--repeat", type=int, default=1, help="K symlinks per photo (longer runs)")
    ap.add_argument("--tv-batch", type=int, default=32, help="torchvision: files per decode/encode call")
    ap.add_argument("--no-torchvision", action="store_true", help="skip the torchvision peer")
    ap.add_argument("--no-single", action="store_true",
                    help="skip OpenCV with 1 thread (quicker probes; published tables keep it)")
    ap.add_argument("--rss", help="N,M: peak RSS of histeq on N and M inputs instead of the timing")
    ap.add_argument("--compare-cpu", action="store_true",
                    help="also run histeq with --backend cpu (a row of its own, same run; the two "
                         "runs taken in turns)")
    ap.add_argument("--histeq-args", nargs=argparse.REMAINDER, default=[],
                    help="the rest goes to histeq (e.g. --backend cpu --png-level 2)")
    args = ap.parse_args()
    if not os.access(args.histeq, os.X_OK):
        sys.exit(f"not executable: {args.histeq} (build it, or pass --histeq)")
    files = photos(args.folder)
    if not files:
        sys.exit(f"no .jpg/.png files in {args.folder} (run bench/e2e/fetch.sh DIR first)")
    work = pathlib.Path(tempfile.mkdtemp(prefix="histeq-e2e-"))
    try:
        print(f"command: {' '.join(sys.argv)}")
        print(f"commit: {git_commit()}  device: {device_name()}")
        if args.rss:
            rss_mode(args, files, work)
            return
        import cv2
        folder = pathlib.Path(args.folder)
        # Megapixels of the distinct photos, before the links (the linked folder sorts its
        # names otherwise: its first len/K entries are not the K distinct photos).
        mp = 0.0
        for f in files:
            im = cv2.imread(str(f), cv2.IMREAD_UNCHANGED)
            mp += im.shape[0] * im.shape[1] / 1e6
        mp *= max(args.repeat, 1)
        if args.repeat > 1:
            folder = linked_folder(work, files, args.repeat)
            files = photos(folder)
        print(f"opencv {cv2.__version__}; {len(files)} files, {mp:.1f} MP; best of {args.reps}\n")
        rows = []
        out = work / "out"

        def fresh():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()

        def h():
            fresh()
            return run_histeq(args.histeq, folder, out, args.histeq_args)

        def c1():
            fresh()
            return run_opencv(cv2, files, out, 1)

        def cn():
            fresh()
            return run_opencv(cv2, files, out, args.threads)

        name = "histeq " + " ".join(["equalize DIR -o OUT"] + args.histeq_args)
        if args.compare_cpu:
            def hc():
                fresh()
                return run_histeq(args.histeq, folder, out, args.histeq_args + ["--backend", "cpu"],
                                  summary=False)
            # Taken in turns (defaults, --backend cpu, defaults, ...): a drift of the machine over
            # the runs (page cache, writeback of earlier outputs) weighs on both alike.
            runs = [(h(), hc()) for _ in range(args.reps)]
            rows.append((name, min(r[0] for r in runs)))
            rows.append((name + " --backend cpu", min(r[1] for r in runs)))
        else:
            rows.append((name, best_of(args.reps, h)))
        if not args.no_single:
            rows.append(("OpenCV, 1 thread", best_of(args.reps, c1)))
        rows.append((f"OpenCV, {args.threads} threads", best_of(args.reps, cn)))
        tv_note = ""
        if not args.no_torchvision:
            jpegs = all(f.suffix.lower() in (".jpg", ".jpeg") for f in files)
            mods, why = torchvision_ready() if jpegs else (None, "the folder is not all JPEG")
            if mods:
                def tv():
                    fresh()
                    return run_torchvision(mods, files, out, max(args.tv_batch, 1))
                tv()  # warm-up: CUDA context, nvJPEG handles (not counted)
                rows.append((f"torchvision {mods[1].__version__}, nvJPEG (warm process)", best_of(args.reps, tv)))
            else:
                tv_note = f"torchvision peer skipped: {why}"
        t_h, c_h = rows[0][1]
        print("| how | seconds | MP/s | histeq / this (wall) | CPU s (user+sys) | histeq / this (CPU) |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, (t, c) in rows:
            print(f"| {name} | {t:.3f} | {mp / t:.1f} | {t / t_h:.2f}x | {c:.2f} | {c / c_h:.2f}x |")
        if tv_note:
            print(f"\n{tv_note}")
        hs = HISTEQ_SUMMARY
        if hs.get("summed_ms"):
            print(f"\nhisteq's best run (--json summary): {hs.get('jobs', '?')} CPU workers, at most "
                  f"{hs.get('peak_busy_workers', '?')} busy at once; start-up: devices "
                  f"{hs.get('device_init_ms', 0):.0f} ms, nvJPEG handles {hs.get('nvjpeg_init_ms', 0):.0f} ms")
            print("| stage | summed ms (all workers) | MP per stage-second |\n|---|---:|---:|")
            for stage, ms in hs["summed_ms"].items():
                rate = f"{hs['megapixels'] / (ms / 1000):.0f}" if ms > 0 else "-"
                print(f"| {stage} | {ms:.1f} | {rate} |")
            if hs.get("decoders"):
                print("decoders: " + ", ".join(f"{k} {v}" for k, v in sorted(hs["decoders"].items())))
            if hs.get("routes"):
                print("routes: " + ", ".join(f"{k} {v['files']} files ({v['megapixels']:.0f} MP)"
                                             for k, v in sorted(hs["routes"].items())))
            if "device_started" in hs:
                print(f"device route: {'started' if hs['device_started'] else 'not started'}"
                      + (f" ({hs['device_note']})" if hs.get("device_note") else ""))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
