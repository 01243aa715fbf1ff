#!/usr/bin/env python3
"""Compares `histeq equalize` of JPEG files with OpenCV (cv2.imread + cv2.equalizeHist; colour:
Y of COLOR_BGR2YCrCb, as tests/data/golden-opencv-4.6/README.md). Usage:
  scripts/jpeg_opencv_check.py [--histeq build/histeq] [--backend cpu] FILE.jpg...
Prints, per file, the largest difference and how many samples differ. With --backend cpu
(libjpeg-turbo decode) the expected result is 0 everywhere (measured: samples/hubble_deep_field.jpg
0, OpenCV 5.0.0); on the GPU (nvJPEG decode) the difference is the decoders'.
"""
import argparse, os, subprocess, sys, tempfile

import cv2
import numpy as np


def opencv_equalized(path):
    img = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if img.ndim == 2:
        return cv2.equalizeHist(img)
    ycc = cv2.cvtColor(img[:, :, :3], cv2.COLOR_BGR2YCrCb)
    ycc[:, :, 0] = cv2.equalizeHist(ycc[:, :, 0])
    return cv2.cvtColor(ycc, cv2.COLOR_YCrCb2BGR)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--histeq", default="build/histeq")
    ap.add_argument("--backend", default="cpu", choices=["auto", "cuda", "cpu"])
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    worst = 0
    with tempfile.TemporaryDirectory() as tmp:
        for f in a.files:
            out = os.path.join(tmp, "out.png")
            r = subprocess.run([a.histeq, "equalize", f, "-o", out, "--backend", a.backend, "--json"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{f}: histeq failed: {r.stderr.strip()}")
                worst = max(worst, 256)
                continue
            got = cv2.imread(out, cv2.IMREAD_UNCHANGED)
            ref = opencv_equalized(f)
            if got.shape != ref.shape:
                print(f"{f}: shape {got.shape} != OpenCV's {ref.shape}")
                worst = max(worst, 256)
                continue
            d = np.abs(got.astype(int) - ref.astype(int))
            worst = max(worst, int(d.max()))
            dec = r.stdout.split('"decoder":"')[1].split('"')[0] if '"decoder"' in r.stdout else "?"
            print(f"{f}: {got.shape} decoder {dec}: max diff {d.max()}, {int((d > 0).sum())} samples differ")
    print(f"largest difference: {worst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
