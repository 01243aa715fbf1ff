#!/usr/bin/python3
"""CPU backend against OpenCV's cv2.equalizeHist on the same 8-bit image, in the same run.

Usage: bench/cpu_vs_opencv.py [--histeq build/histeq] [--megapixels 64] [--reps 15]

Makes a natural-looking gray image (a smooth 2-D field plus noise, numpy, fixed seed), writes it
as PNG to a temp folder, then times
  - OpenCV 4.x cv2.equalizeHist on the decoded array (median of reps; OpenCV's own threads), and
  - histeq's CPU backend on the same decoded pixels: `histeq bench --equalize --kernels cpu
    --images FILE` (histogram + CDF/LUT + apply, in-process, median of reps),
and checks that the two outputs are identical (histeq's default formula is OpenCV's).
Needs Debian's python3-opencv and python3-numpy. Prints a Markdown table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import cv2
import numpy as np


def natural_image(h, w, seed=7):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    field = (np.sin(x / w * 7.1) * np.cos(y / h * 5.3) + 0.5 * np.sin((x + y) / (w + h) * 23.0))
    field = (field - field.min()) / (field.max() - field.min())
    img = 40 + 150 * field + rng.normal(0, 6, (h, w)).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--histeq", default="build/histeq")
    ap.add_argument("--megapixels", type=int, default=64)
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    side = int((a.megapixels * 1024 * 1024) ** 0.5)
    img = natural_image(side, side)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "natural.png")
        cv2.imwrite(path, img, [cv2.IMWRITE_PNG_COMPRESSION, 1])
        decoded = cv2.imread(path, cv2.IMREAD_UNCHANGED)
        assert decoded.shape == img.shape
        # OpenCV
        cv2.equalizeHist(decoded)  # warm-up
        t = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            ocv = cv2.equalizeHist(decoded)
            t.append((time.perf_counter() - t0) * 1e6)
        ocv_us = statistics.median(t)
        # histeq CPU backend, same pixels (decoded by stb from the same PNG)
        js = os.path.join(tmp, "h.json")
        subprocess.run([a.histeq, "bench", "--equalize", "--kernels", "cpu", "--images", path,
                        "--reps", str(a.reps), "--json", js], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cells = [c for c in json.load(open(js))["cells"] if c["kernel"] == "equalize:cpu"]
        he_us = cells[0]["median_us"]
        status = cells[0]["status"]
        # same output?
        out = os.path.join(tmp, "eq.png")
        subprocess.run([a.histeq, "equalize", path, "-o", out, "--backend", "cpu"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        same = np.array_equal(cv2.imread(out, cv2.IMREAD_UNCHANGED), ocv)
    print(f"| image | OpenCV {cv2.__version__} equalizeHist | histeq CPU backend | speed-up | "
          f"outputs identical |")
    print("|---|---|---|---|---|")
    print(f"| {side}x{side} natural gray ({side*side/1e6:.1f} MP), {os.cpu_count()} cores, "
          f"OpenCV threads {cv2.getNumThreads()} | {ocv_us/1e3:.2f} ms | {he_us/1e3:.2f} ms "
          f"({status}) | {ocv_us/he_us:.2f}x | {'yes' if same else 'NO'} |")
    return 0 if same and status == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
