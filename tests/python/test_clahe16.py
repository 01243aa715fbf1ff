"""histeq.clahe and 16-bit images from Python (host arrays: CPU in CI, the GPU where usable):
OpenCV 4.6's CLAHE goldens (../shared/golden/opencv-4.6-clahe), batches and lists equal to one by
one, the 16-bit equalization against an independent NumPy model of its formula, 16-bit file round
trips, the command line's bytes for the same input, and every argument error. The CUDA-array
cases are in test_gpu.py."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import histeq
from conftest import NATURAL_DIR, REPO, rng_image
from test_files import _cli

CLAHE_DIR = next((d for d in (REPO.parent / "shared" / "golden" / "opencv-4.6-clahe",
                              Path("/work/shared/golden/opencv-4.6-clahe"))
                  if d.is_dir()), None)


def clahe_goldens():
    """(id, input path, golden path, clip, (tiles_x, tiles_y)) for every CLAHE golden:
    NAME__clipC_tWxH.png is OpenCV 4.6's CLAHE of NAME.png (natural/ or beside the goldens)."""
    if CLAHE_DIR is None:
        return []
    out = []
    for g in sorted(CLAHE_DIR.glob("*__clip*_t*x*.png")):
        name, params = g.stem.split("__")
        clip_s, tiles_s = params[len("clip"):].split("_t")
        tx, ty = (int(v) for v in tiles_s.split("x"))
        src = next((p for p in (NATURAL_DIR / f"{name}.png", CLAHE_DIR / f"{name}.png")
                    if p.exists()), None)
        if src is not None:
            out.append((g.stem, src, g, float(clip_s), (tx, ty)))
    return out


GOLDENS = clahe_goldens()


@pytest.mark.skipif(not GOLDENS, reason="no CLAHE goldens (../shared/golden/opencv-4.6-clahe)")
@pytest.mark.parametrize("case", GOLDENS, ids=[c[0] for c in GOLDENS])
@pytest.mark.parametrize("backend", ["cpu", "auto"])
def test_clahe_equals_opencv_goldens(case, backend):
    _, src, golden, clip, tiles = case
    img = histeq.load_image(src, depth=None)
    want = histeq.load_image(golden, depth=None)
    got = histeq.clahe(img, clip_limit=clip, tile_grid_size=tiles, backend=backend)
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64)).max()
    if img.ndim == 2:
        assert diff == 0  # gray and 16-bit: byte-identical
    else:
        assert diff <= 1  # colour: OpenCV's YCrCb round trip


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_clahe_batch_and_list_equal_one_by_one(dtype):
    rng = np.random.default_rng(3)
    high = 256 if dtype == np.uint8 else 65536
    batch = rng.integers(0, high, size=(4, 37, 53), dtype=np.int64).astype(dtype)
    batch[1] //= 3
    batch[2] = 7  # constant
    one = [histeq.clahe(b, clip_limit=3.0, tile_grid_size=(3, 5)) for b in batch]
    np.testing.assert_array_equal(histeq.clahe(batch, clip_limit=3.0, tile_grid_size=(3, 5)), np.stack(one))
    for got, want in zip(histeq.clahe(list(batch), clip_limit=3.0, tile_grid_size=(3, 5)), one):
        np.testing.assert_array_equal(got, want)
    assert histeq.clahe(batch[2])[0, 0] == histeq.clahe(batch[2]).max()  # constant stays flat


def test_clahe_shapes_and_modes():
    rgb = rng_image((30, 40, 3), seed=5, high=120)
    assert histeq.clahe(rgb).shape == (30, 40, 3)
    assert histeq.clahe(rgb, mode="gray").shape == (30, 40)
    assert histeq.clahe(rgb, mode="rgb").shape == (30, 40, 3)
    g1 = rng_image((30, 40, 1), seed=6)
    np.testing.assert_array_equal(histeq.clahe(g1)[..., 0], histeq.clahe(g1[..., 0]))
    assert histeq.clahe(np.zeros((0, 5), np.uint8)).shape == (0, 5)
    one = np.full((1, 1), 9, np.uint8)
    assert histeq.clahe(one, tile_grid_size=(8, 8)).shape == (1, 1)  # smaller than the grid
    # the grid's extremes and a grid of one tile
    img = rng_image((64, 64), seed=7)
    assert histeq.clahe(img, tile_grid_size=64).shape == (64, 64)
    assert histeq.clahe(img, tile_grid_size=(1, 1), clip_limit=0).shape == (64, 64)
    # clip 0 = no clipping: differs from a tight clip on this image
    assert not np.array_equal(histeq.clahe(img, clip_limit=0), histeq.clahe(img, clip_limit=1.0))


def test_clahe_matches_the_cli(tmp_path):
    cli = _cli()
    for i, img in enumerate([rng_image((45, 61), seed=11, high=140),
                             rng_image((33, 40, 3), seed=12),
                             (np.random.default_rng(13).integers(1000, 1200, (40, 52))
                              ).astype(np.uint16)]):
        src, dst = tmp_path / f"in{i}.png", tmp_path / f"out{i}.png"
        histeq.save_image(src, img)
        subprocess.run([cli, "clahe", str(src), "-o", str(dst), "--clip", "3", "--tiles", "4x3",
                        "--backend", "cpu", "--quiet"], check=True)
        want = histeq.load_image(dst, depth=None)
        np.testing.assert_array_equal(histeq.clahe(img, clip_limit=3, tile_grid_size=(4, 3), backend="cpu"),
                                      want)


def test_clahe_argument_errors():
    img = rng_image((20, 20))
    with pytest.raises(TypeError, match="clip_limit"):
        histeq.clahe(img, clip_limit="2")
    with pytest.raises(ValueError, match="clip_limit"):
        histeq.clahe(img, clip_limit=float("inf"))
    with pytest.raises(ValueError, match="clip_limit"):  # an int past float's range
        histeq.clahe(img, clip_limit=10**400)
    with pytest.raises(ValueError, match="clip_limit"):
        histeq.clahe_files(["a.png"], "out", clip_limit=10**400)
    with pytest.raises(TypeError, match="tile_grid_size"):
        histeq.clahe(img, tile_grid_size=(8,))
    with pytest.raises(TypeError, match="tile_grid_size"):
        histeq.clahe(img, tile_grid_size=(8.0, 8))
    with pytest.raises(ValueError, match="tile_grid_size"):
        histeq.clahe(img, tile_grid_size=(0, 8))
    with pytest.raises(ValueError, match="tile_grid_size"):
        histeq.clahe(img, tile_grid_size=(8, 2000))
    with pytest.raises(ValueError, match="^tile_grid_size: .*LUT entries"):  # Python's name
        histeq.clahe(img.astype(np.uint16), tile_grid_size=(100, 100))  # 10000 tiles x 65536 bins
    with pytest.raises(ValueError, match="mode"):
        histeq.clahe(img, mode="hsv")
    with pytest.raises(ValueError, match="mode"):
        histeq.clahe(np.zeros((8, 8, 3), np.uint16), mode="luma")
    with pytest.raises(TypeError, match="dtype"):
        histeq.clahe(img.astype(np.float32))
    with pytest.raises(ValueError, match="backend"):
        histeq.clahe(img, backend="gpu")


# ---------------------------------------------------------------------------------- 16-bit

def equalize16_model(img: np.ndarray) -> np.ndarray:
    """equalize16.hpp's formula, written independently: float32 scale 65535 / (N - h[v0]),
    round half to even of float32((cdf - h[v0])) * scale; empty/constant: identity."""
    h = np.bincount(img.ravel(), minlength=65536)
    cdf = np.cumsum(h)
    nz = np.flatnonzero(h)
    total = img.size
    if nz.size == 0 or h[nz[0]] == total:
        return img.copy()
    v0 = nz[0]
    scale = np.float32(65535) / np.float32(total - int(h[v0]))
    lut = np.rint((cdf.astype(np.int64) - int(h[v0])).astype(np.float32) * scale)
    lut = np.clip(lut, 0, 65535).astype(np.uint16)
    lut[:v0 + 1] = 0
    return lut[img]


@pytest.mark.parametrize("backend", ["cpu", "auto"])
def test_equalize16_equals_the_formula(backend):
    rng = np.random.default_rng(21)
    narrow = rng.integers(1000, 1201, (60, 70)).astype(np.uint16)  # the 1000..1200 case
    got = histeq.equalize(narrow, backend=backend)
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got, equalize16_model(narrow))
    assert len(np.unique(got)) == len(np.unique(narrow))  # 16 bits kept: no levels merged
    wide = rng.integers(0, 65536, (33, 45)).astype(np.uint16)
    np.testing.assert_array_equal(histeq.equalize(wide, backend=backend), equalize16_model(wide))
    flat = np.full((5, 6), 4242, np.uint16)
    np.testing.assert_array_equal(histeq.equalize(flat, backend=backend), flat)


def test_equalize16_colour_batches_and_histogram():
    rng = np.random.default_rng(22)
    rgb = rng.integers(0, 4000, (20, 30, 3)).astype(np.uint16)
    got = histeq.equalize(rgb)
    for ch in range(3):  # per channel (no 16-bit YCbCr)
        np.testing.assert_array_equal(got[..., ch], equalize16_model(rgb[..., ch]))
    ga = rng.integers(0, 65536, (10, 12, 2)).astype(np.uint16)
    out = histeq.equalize(ga)
    np.testing.assert_array_equal(out[..., 0], equalize16_model(ga[..., 0]))
    np.testing.assert_array_equal(out[..., 1], ga[..., 1])  # alpha kept
    batch = rng.integers(0, 65536, (3, 16, 18)).astype(np.uint16)
    np.testing.assert_array_equal(histeq.equalize(batch),
                                  np.stack([equalize16_model(b) for b in batch]))
    h = histeq.histogram(batch[0])
    assert h.shape == (65536,) and h.dtype == np.int64
    np.testing.assert_array_equal(h, np.bincount(batch[0].ravel(), minlength=65536))
    hb = histeq.histogram(batch)
    assert hb.shape == (3, 65536) and int(hb.sum()) == batch.size
    hr = histeq.histogram(rgb)
    assert hr.shape == (3, 65536)
    np.testing.assert_array_equal(hr[2], np.bincount(rgb[..., 2].ravel(), minlength=65536))


def test_16bit_errors():
    img = np.zeros((8, 8), np.uint16)
    with pytest.raises(ValueError, match="formula"):
        histeq.equalize(img, formula="exact")
    with pytest.raises(ValueError, match="kernel"):
        histeq.equalize(img, kernel="atomic")
    with pytest.raises(ValueError, match="bins"):
        histeq.histogram(img, bins=256)
    with pytest.raises(ValueError, match="bins"):
        histeq.histogram(np.zeros((8, 8), np.uint8), bins=65536)
    with pytest.raises(ValueError, match="mode"):
        histeq.equalize(np.zeros((4, 4, 3), np.uint16), mode="gray")
    with pytest.raises(TypeError, match="dtype"):
        histeq.equalize(np.zeros((4, 4), np.int16))


def test_16bit_files_round_trip(tmp_path):
    rng = np.random.default_rng(23)
    for shape, ext in [((21, 34), ".png"), ((9, 7, 3), ".png"), ((11, 13, 4), ".png"),
                       ((12, 15), ".pgm"), ((6, 5, 3), ".ppm")]:
        img = rng.integers(0, 65536, shape).astype(np.uint16)
        path = tmp_path / f"x{len(shape)}{shape[-1]}{ext}"
        histeq.save_image(path, img)
        back = histeq.load_image(path, depth=None)
        assert back.dtype == np.uint16
        np.testing.assert_array_equal(back, img)
        np.testing.assert_array_equal(histeq.load_image(path, depth=16), img)
        assert histeq.load_image(path).dtype == np.uint8  # the default: 8 bits, as cv2.imread
    eight = rng_image((5, 6), seed=1)
    histeq.save_image(tmp_path / "e.png", eight)
    np.testing.assert_array_equal(histeq.load_image(tmp_path / "e.png", depth=16),
                                  eight.astype(np.uint16) * 257)
    assert histeq.load_image(tmp_path / "e.png", depth=None).dtype == np.uint8
    with pytest.raises(ValueError, match="16-bit"):
        histeq.save_image(tmp_path / "x.jpg", np.zeros((4, 4), np.uint16))
    with pytest.raises(ValueError, match="depth"):
        histeq.load_image(tmp_path / "e.png", depth=12)


def test_equalize16_file_matches_the_cli(tmp_path):
    cli = _cli()
    img = (np.random.default_rng(24).integers(1000, 1200, (40, 52))).astype(np.uint16)
    src, dst = tmp_path / "in.png", tmp_path / "out.png"
    histeq.save_image(src, img)
    subprocess.run([cli, "equalize", str(src), "-o", str(dst), "--backend", "cpu", "--quiet"],
                   check=True)
    np.testing.assert_array_equal(histeq.equalize(img, backend="cpu"),
                                  histeq.load_image(dst, depth=None))
    assert os.path.getsize(dst) > 0


def test_review_fixes():
    """Found by trying the API as a new user: big-endian 16-bit arrays, 16-bit gray+alpha CLAHE
    keeping alpha, an empty 8-bit batch's histogram, save_image's quality and bytes paths."""
    rng = np.random.default_rng(31)
    g = rng.integers(0, 65536, (40, 50)).astype(np.uint16)
    np.testing.assert_array_equal(histeq.clahe(g.astype(">u2")), histeq.clahe(g))
    np.testing.assert_array_equal(histeq.equalize(g.astype(">u2")), histeq.equalize(g))
    ga = np.stack([g, g[::-1]], -1)
    for mode in (None, "luma", "rgb"):
        out = histeq.clahe(ga, mode=mode)
        assert out.shape == ga.shape
        np.testing.assert_array_equal(out[..., 0], histeq.clahe(g))
        np.testing.assert_array_equal(out[..., 1], ga[..., 1])
    np.testing.assert_array_equal(histeq.clahe(ga, mode="gray"), histeq.clahe(g))
    assert histeq.histogram(np.zeros((0, 5, 5), np.uint8)).shape == (0, 256)
    img = rng_image((6, 7))
    for q in (0, 101):
        with pytest.raises(ValueError, match="quality"):
            histeq.save_image("/tmp/never-written.png", img, quality=q)
    with pytest.raises(TypeError, match="quality"):
        histeq.save_image("/tmp/never-written.png", img, quality="50")
    with pytest.raises(TypeError, match="dtype"):
        histeq.equalize(np.zeros((4, 4), np.uint32))


def test_bytes_paths(tmp_path):
    img = rng_image((6, 7))
    p = os.fsencode(tmp_path / "b.png")
    histeq.save_image(p, img)
    np.testing.assert_array_equal(histeq.load_image(p), img)
    g = np.arange(42, dtype=np.uint16).reshape(6, 7) * 1000
    p16 = os.fsencode(tmp_path / "b16.png")
    histeq.save_image(p16, g)
    np.testing.assert_array_equal(histeq.load_image(p16, depth=None), g)


@pytest.mark.parametrize("shape,planes", [((0, 4), 1), ((3, 0), 1), ((0, 4, 2), 1),
                                          ((0, 4, 3), 3), ((0, 4, 4), 3)])
def test_empty_16bit_image_histogram_is_zero_counts(shape, planes):
    """An image without pixels has an all-zero histogram at 16 bits as at 8 bits (it is not a
    CUDA failure): (65536,) per plane, the planes a non-empty image of its channels has; also
    with a mask of its size and in a batch."""
    z = np.zeros(shape, np.uint16)
    want = (planes, 65536) if planes > 1 else (65536,)
    for kw in ({}, {"backend": "cpu"}, {"mask": np.zeros(shape[:2], bool)}):
        h = histeq.histogram(z, **kw)
        assert h.dtype == np.int64 and h.shape == want and not h.any()
    out = np.full(want, 7, np.int64)
    assert histeq.histogram(z, out=out) is out and not out.any()
    batch = histeq.histogram(np.zeros((2,) + shape, np.uint16), batch=True)
    assert batch.shape == (2,) + want and not batch.any()


def _gray_alpha16(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 65536, shape + (2,)).astype(np.uint16)


def _mode_gray_cases(ga):
    """(name, result with mode="gray", result on the gray channel alone) of each call."""
    g = np.ascontiguousarray(ga[..., 0])
    ref = _gray_alpha16((13, 11), 5)
    return [
        ("equalize", lambda x, **k: histeq.equalize(x, mode="gray", **k),
         lambda **k: histeq.equalize(g, **k)),
        ("clahe", lambda x, **k: histeq.clahe(x, 2.0, (3, 2), mode="gray", **k),
         lambda **k: histeq.clahe(g, 2.0, (3, 2), **k)),
        ("match", lambda x, **k: histeq.match_histograms(x, ref, mode="gray", **k),
         lambda **k: histeq.match_histograms(g, ref[..., 0].copy(), **k)),
        ("masked", lambda x, **k: histeq.equalize(x, mode="gray", roi=(2, 3, 9, 7), **k),
         lambda **k: histeq.equalize(g, roi=(2, 3, 9, 7), **k)),
    ]


def test_sixteen_bit_gray_alpha_with_mode_gray_gives_the_gray_channel():
    """16-bit gray+alpha with mode="gray" gives (H, W), as 8-bit gray+alpha does and as
    ``histeq --mode gray`` writes it; the other modes keep the alpha."""
    ga = _gray_alpha16((24, 31), 41)
    for name, gray_mode, on_gray in _mode_gray_cases(ga):
        got = gray_mode(ga, backend="cpu")
        assert got.shape == (24, 31) and got.dtype == np.uint16, name
        np.testing.assert_array_equal(got, on_gray(backend="cpu"), err_msg=name)
    for mode in (None, "luma", "rgb"):
        kept = histeq.equalize(ga, mode=mode, backend="cpu")
        assert kept.shape == ga.shape
        np.testing.assert_array_equal(kept[..., 1], ga[..., 1])
    # a batch, a list, out= and an 8-bit twin's shape
    batch = np.stack([ga, ga[::-1]])
    got = histeq.equalize(batch, mode="gray", backend="cpu")
    assert got.shape == (2, 24, 31)
    np.testing.assert_array_equal(got[1], histeq.equalize(ga[::-1, :, 0].copy(), backend="cpu"))
    got = histeq.equalize([ga, ga[:5]], mode="gray", backend="cpu")
    assert [x.shape for x in got] == [(24, 31), (5, 31)]
    out = np.empty((24, 31), np.uint16)
    assert histeq.equalize(ga, mode="gray", out=out, backend="cpu") is out
    assert histeq.equalize((ga >> 8).astype(np.uint8), mode="gray").shape == (24, 31)
    with pytest.raises(ValueError, match="shape"):
        histeq.equalize(ga, mode="gray", out=ga)


def test_sixteen_bit_gray_alpha_with_mode_gray_on_torch_tensors():
    torch = pytest.importorskip("torch")
    if getattr(torch, "uint16", None) is None:
        pytest.skip("this torch has no uint16")
    ga = _gray_alpha16((24, 31), 42)
    t = torch.from_numpy(ga)
    for name, gray_mode, on_gray in _mode_gray_cases(ga):
        got = gray_mode(t, backend="cpu")
        assert isinstance(got, torch.Tensor) and tuple(got.shape) == (24, 31), name
        np.testing.assert_array_equal(got.numpy(), on_gray(backend="cpu"), err_msg=name)


def test_sixteen_bit_gray_alpha_with_mode_gray_on_cuda_arrays(torch_cuda):
    torch = torch_cuda
    if getattr(torch, "uint16", None) is None:
        pytest.skip("this torch has no uint16")
    ga = _gray_alpha16((24, 31), 43)
    t = torch.from_numpy(ga).cuda()
    for name, gray_mode, on_gray in _mode_gray_cases(ga):
        got = gray_mode(t)
        assert got.is_cuda and tuple(got.shape) == (24, 31), name
        np.testing.assert_array_equal(got.cpu().numpy(), on_gray(backend="cpu"), err_msg=name)
