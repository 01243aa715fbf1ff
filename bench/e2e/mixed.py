#!/usr/bin/env python3
"""The second photo folder of the end-to-end benchmark, unlike the first (bench/e2e/fetch.sh):
other pictures, other sizes, and the JPEG variants a camera folder holds. Made from the PNG
wallpapers of the same Debian package (plasma-workspace-wallpapers; fetch.sh keeps the .deb in
DIR/deb) that fetch.sh's JPEG folder does not use, plus scikit-image's Hubble photograph
(../shared/natural, when given with --natural).

    python3 bench/e2e/mixed.py FETCHED_DIR OUT_DIR [--natural ../shared/natural]

writes OUT_DIR/jpg/*.jpg (OpenCV encodes them: pip install opencv-python-headless), one line per
file on stdout. The files: 4:2:0, 4:2:2 and 4:4:4 sampling; two progressive; one gray; two with an
EXIF orientation (6: shown rotated, 3: upside down); one with restart markers; 0.9 to 14.7 MP,
landscape and portrait. Photos are never committed.
"""
import argparse
import glob
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile

import cv2

# (output name, wallpaper, its image file, long side or 0 for as is, what to write)
PLAN = [
    ("milkyway_exif6.jpg", "MilkyWay", "5120x2880.png", 0, dict(q=92, sampling="420", orient=6)),
    ("kay_portrait_444.jpg", "Kay", "1080x1920.png", 0, dict(q=95, sampling="444")),
    ("patak_progressive.jpg", "Patak", "5120x2880.png", 2400, dict(q=90, sampling="420", prog=True)),
    ("icecold_422.jpg", "IceCold", "5120x2880.png", 0, dict(q=90, sampling="422")),
    ("canopee_gray.jpg", "Canopee", "3840x2160.png", 0, dict(q=90, gray=True)),
    ("opal_progressive_444.jpg", "Opal", "3840x2160.png", 0, dict(q=88, sampling="444", prog=True)),
    ("kokkini_exif3.jpg", "Kokkini", "3840x2160.png", 1920, dict(q=85, sampling="420", orient=3)),
    ("altai_portrait_restart.jpg", "Altai", "1080x1920.png", 0, dict(q=92, sampling="420", rst=8)),
]

SAMPLING = {"420": "IMWRITE_JPEG_SAMPLING_FACTOR_420", "422": "IMWRITE_JPEG_SAMPLING_FACTOR_422",
            "444": "IMWRITE_JPEG_SAMPLING_FACTOR_444"}


def exif_orientation(value: int) -> bytes:
    """An APP1 Exif segment holding one IFD entry: Orientation (0x0112) = value."""
    tiff = b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 1)
    tiff += struct.pack("<HHIHH", 0x0112, 3, 1, value, 0) + struct.pack("<I", 0)
    body = b"Exif\x00\x00" + tiff
    return b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body


def encode(img, how: dict) -> bytes:
    params = [cv2.IMWRITE_JPEG_QUALITY, how["q"]]
    if how.get("prog"):
        params += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    if how.get("rst"):
        params += [cv2.IMWRITE_JPEG_RST_INTERVAL, how["rst"]]
    if how.get("gray"):
        img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    elif "sampling" in how:
        params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, getattr(cv2, SAMPLING[how["sampling"]])]
    ok, buf = cv2.imencode(".jpg", img, params)
    if not ok:
        raise RuntimeError("OpenCV could not encode")
    data = buf.tobytes()
    if how.get("orient"):
        data = data[:2] + exif_orientation(how["orient"]) + data[2:]
    return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fetched", help="the folder fetch.sh wrote (its deb/ holds the package)")
    ap.add_argument("out", help="writes OUT/jpg")
    ap.add_argument("--natural", help="../shared/natural: adds its Hubble photograph as is")
    a = ap.parse_args()
    debs = glob.glob(str(pathlib.Path(a.fetched) / "deb" / "plasma-workspace-wallpapers_*.deb"))
    if not debs:
        print(f"no plasma-workspace-wallpapers .deb in {a.fetched}/deb: run fetch.sh first",
              file=sys.stderr)
        return 2
    out = pathlib.Path(a.out) / "jpg"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["dpkg", "-x", debs[0], tmp], check=True)
        walls = pathlib.Path(tmp) / "usr" / "share" / "wallpapers"
        for name, wall, image, side, how in PLAN:
            img = cv2.imread(str(walls / wall / "contents" / "images" / image), cv2.IMREAD_COLOR)
            if img is None:
                print(f"{wall}/{image}: not in the package", file=sys.stderr)
                return 1
            if side:
                h, w = img.shape[:2]
                s = side / max(h, w)
                img = cv2.resize(img, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA)
            (out / name).write_bytes(encode(img, how))
            print(f"{name}: {img.shape[1]}x{img.shape[0]} {how}")
    if a.natural:
        src = pathlib.Path(a.natural) / "hubble_deep_field.jpg"
        shutil.copyfile(src, out / "hubble_deep_field.jpg")
        print("hubble_deep_field.jpg: as in ../shared/natural (EXIF, baseline)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
