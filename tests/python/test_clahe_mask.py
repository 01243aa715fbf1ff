"""Masked CLAHE (clahe with mask= and roi=) against an independent NumPy model: OpenCV's CLAHE
with each tile's histogram of the tile's counted pixels only (the image and the mask padded by
reflect-101 as OpenCV pads the image), N = the counted pixels in place of the tile area in the
clip limit and the LUT scale, the identity LUT for a tile with no counted pixel, and OpenCV's
float32 interpolation on every pixel; 8 and 16 bits; a full mask gives the unmasked bytes; the
errors; the CLI's bytes. GPU cases (torch, CuPy) compare with the CPU and skip without a GPU."""
from __future__ import annotations

import numpy as np
import pytest

import histeq
from conftest import NATURAL_DIR, rng_image


def _reflect101(p: np.ndarray, n: int) -> np.ndarray:
    if n == 1:
        return np.zeros_like(p)
    p = p.copy()
    while ((p < 0) | (p >= n)).any():
        p = np.where(p < 0, -p, np.where(p >= n, 2 * n - 2 - p, p))
    return p


def clahe_model(img: np.ndarray, counted: np.ndarray, clip_limit: float, tx: int,
                ty: int) -> np.ndarray:
    bins = 256 if img.dtype == np.uint8 else 65536
    h, w = img.shape
    pw, ph = w, h
    if w % tx or h % ty:
        pw, ph = w + tx - w % tx, h + ty - h % ty
    yi, xi = _reflect101(np.arange(ph), h), _reflect101(np.arange(pw), w)
    ext = img[np.ix_(yi, xi)]
    flags = counted.astype(bool)[np.ix_(yi, xi)]
    tw, th = pw // tx, ph // ty
    luts = np.empty((ty, tx, bins), np.int64)
    for j in range(ty):
        for i in range(tx):
            tile = ext[j * th:(j + 1) * th, i * tw:(i + 1) * tw]
            vals = tile[flags[j * th:(j + 1) * th, i * tw:(i + 1) * tw]]
            n = int(vals.size)
            if n == 0:
                luts[j, i] = np.arange(bins)
                continue
            hist = np.bincount(vals.ravel(), minlength=bins).astype(np.int64)
            clip = 0
            if clip_limit > 0:
                c = clip_limit * n / bins
                clip = 0 if c >= n else max(1, int(c))
            if clip > 0:
                clipped = int(np.maximum(hist - clip, 0).sum())
                hist = np.minimum(hist, clip)
                hist += clipped // bins
                residual = clipped % bins
                if residual:
                    step = max(bins // residual, 1)
                    hist[np.arange(0, bins, step)[:residual]] += 1
            scale = np.float32(bins - 1) / np.float32(n)
            lut = np.rint(np.cumsum(hist).astype(np.float32) * scale)
            luts[j, i] = np.clip(lut, 0, bins - 1)

    def axis(n, size, tiles):
        f = np.arange(n).astype(np.float32) * (np.float32(1) / np.float32(size)) - np.float32(0.5)
        t1 = np.floor(f).astype(np.int64)
        a = f - t1.astype(np.float32)
        return np.maximum(t1, 0), np.minimum(t1 + 1, tiles - 1), a, np.float32(1) - a

    y1, y2, ya, ya1 = axis(h, th, ty)
    x1, x2, xa, xa1 = axis(w, tw, tx)
    v = img.astype(np.int64)
    Y1, Y2, X1, X2 = y1[:, None], y2[:, None], x1[None, :], x2[None, :]

    def lut(yy, xx):
        return luts[yy, xx, v].astype(np.float32)

    top = lut(Y1, X1) * xa1[None, :] + lut(Y1, X2) * xa[None, :]
    bot = lut(Y2, X1) * xa1[None, :] + lut(Y2, X2) * xa[None, :]
    res = top * ya1[:, None] + bot * ya[:, None]
    return np.clip(np.rint(res), 0, bins - 1).astype(img.dtype)


def photos():
    out = []
    for p in sorted(NATURAL_DIR.glob("*.png"))[:3]:
        img = histeq.load_image(p)
        if img.ndim == 2:
            out.append((p.stem, img[: img.shape[0] - 3, : img.shape[1] - 5]))  # not divisible
    return out


PHOTOS = photos()


def masks_for(h: int, w: int, seed: int):
    rng = np.random.default_rng(seed)
    border = np.zeros((h, w), bool)
    border[h // 8: h - h // 8, w // 6: w - w // 6] = True
    left = np.zeros((h, w), bool)
    left[:, : w // 3] = True  # the right tiles count nothing: identity LUTs
    return [("random", rng.random((h, w)) < 0.3), ("border", border), ("left", left)]


def test_the_model_is_opencvs_clahe_unmasked():
    img = rng_image((61, 83), 3)
    full = np.ones(img.shape, bool)
    for clip, grid in ((40.0, (8, 8)), (2.0, (5, 3)), (0.0, (4, 4))):
        np.testing.assert_array_equal(clahe_model(img, full, clip, *grid),
                                      histeq.clahe(img, clip, grid, backend="cpu"))


def test_photographs_were_found():
    assert PHOTOS


@pytest.mark.parametrize("backend", ["cpu", "auto"])
@pytest.mark.parametrize("name,img", PHOTOS, ids=[p[0] for p in PHOTOS])
def test_masked_photographs_equal_the_model(name, img, backend):
    h, w = img.shape
    for mname, m in masks_for(h, w, 5):
        for clip, grid in ((2.0, (8, 8)), (40.0, (3, 5))):
            got = histeq.clahe(img, clip, grid, mask=m, backend=backend)
            np.testing.assert_array_equal(got, clahe_model(img, m, clip, *grid), err_msg=mname)


def test_16bit_masks_and_rectangles_equal_the_model():
    rng = np.random.default_rng(4)
    img = rng.integers(1000, 9000, size=(45, 70), dtype=np.uint16)
    m = rng.random(img.shape) < 0.4
    np.testing.assert_array_equal(histeq.clahe(img, 2.0, (4, 3), mask=m),
                                  clahe_model(img, m, 2.0, 4, 3))
    roi = (10, 5, 30, 20)
    r = np.zeros(img.shape, bool)
    r[5:25, 10:40] = True
    np.testing.assert_array_equal(histeq.clahe(img, 2.0, (4, 3), roi=roi),
                                  clahe_model(img, r, 2.0, 4, 3))
    np.testing.assert_array_equal(histeq.clahe(img, 2.0, (4, 3), roi=roi, mask=m),
                                  clahe_model(img, r & m, 2.0, 4, 3))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_a_full_region_gives_the_unmasked_bytes(dtype):
    img = rng_image((50, 77), 6).astype(dtype) * (257 if dtype == np.uint16 else 1)
    want = histeq.clahe(img, 2.0, (8, 8))
    h, w = img.shape
    np.testing.assert_array_equal(histeq.clahe(img, 2.0, (8, 8), mask=np.ones((h, w), bool)),
                                  want)
    np.testing.assert_array_equal(histeq.clahe(img, 2.0, (8, 8), roi=(0, 0, w, h)), want)


def test_tiles_with_no_counted_pixel_keep_the_pixels():
    img = rng_image((32, 64), 8)
    m = np.zeros(img.shape, bool)
    m[:, :32] = True
    got = histeq.clahe(img, 2.0, (4, 2), mask=m)
    np.testing.assert_array_equal(got[:, 40:], img[:, 40:])  # identity LUTs only there
    assert (got[:, :24] != img[:, :24]).any()


def test_colour_batches_and_lists():
    img = rng_image((3, 40, 50, 3), 9)
    m = np.random.default_rng(9).random((40, 50)) < 0.5
    batch = histeq.clahe(img, 2.0, (3, 3), mode="rgb", mask=m)
    for k in range(3):
        for c in range(3):
            np.testing.assert_array_equal(batch[k, :, :, c],
                                          clahe_model(img[k, :, :, c], m, 2.0, 3, 3))
    lst = histeq.clahe(list(img), 2.0, (3, 3), mask=m)
    for k in range(3):
        np.testing.assert_array_equal(lst[k], histeq.clahe(img[k], 2.0, (3, 3), mask=m))


def test_errors():
    img = rng_image((20, 30), 1)
    with pytest.raises(ValueError, match="counts no pixel"):
        histeq.clahe(img, mask=np.zeros((20, 30), bool))
    with pytest.raises(ValueError, match="mask"):
        histeq.clahe(img, mask=np.ones((10, 30), bool))
    with pytest.raises(ValueError, match="roi"):
        histeq.clahe(img, roi=(25, 0, 10, 5))
    with pytest.raises(TypeError, match="mask"):
        histeq.clahe(img, mask=np.ones((20, 30), np.float32))
    with pytest.raises(TypeError, match="roi"):
        histeq.clahe(img, roi=(1, 2, 3))


def test_masked_clahe_equals_the_cli(tmp_path):
    import subprocess
    from test_files import _cli
    cli = _cli()
    img = PHOTOS[0][1]
    h, w = img.shape
    m = np.zeros((h, w), np.uint8)
    m[h // 6:h - h // 5, w // 7:w - w // 3] = 255
    histeq.save_image(tmp_path / "in.png", img)
    histeq.save_image(tmp_path / "mask.png", m)
    roi = (w // 5, h // 4, w // 2, h // 3)
    for opts, kw in ((["--mask", str(tmp_path / "mask.png")], {"mask": m}),
                     (["--roi", ",".join(map(str, roi))], {"roi": roi})):
        dst = tmp_path / "out.png"
        subprocess.run([cli, "clahe", str(tmp_path / "in.png"), "-o", str(dst), "--backend", "cpu",
                        "--clip-limit", "2", "--quiet"] + opts, check=True)
        np.testing.assert_array_equal(histeq.load_image(dst), histeq.clahe(img, 2.0, **kw))


def test_clahe_files_take_the_clis_mask_and_roi(tmp_path):
    """clahe_files runs `histeq clahe FOLDER --mask/--roi` (the batch engine takes them) with
    equalize_files' mask= and roi=: the CLI's bytes, the array call's pixels, a file of another
    size failing alone, the same errors before any file is read."""
    import subprocess
    from test_files import _cli
    cli = _cli()
    img = PHOTOS[0][1]
    h, w = img.shape
    m = np.zeros((h, w), np.uint8)
    m[h // 6:h - h // 5, w // 7:w - w // 3] = 255
    src = tmp_path / "in"
    src.mkdir()
    histeq.save_image(src / "a.png", img)
    histeq.save_image(src / "b.png", img[::-1].copy())
    histeq.save_image(src / "small.png", img[:h // 2])
    histeq.save_image(tmp_path / "mask.png", m)
    roi = (w // 5, h // 4, w // 2, h // 3)
    for opts, kw in ((["--mask", str(tmp_path / "mask.png")], {"mask": m}),
                     (["--mask", str(tmp_path / "mask.png")], {"mask": tmp_path / "mask.png"}),
                     (["--roi", ",".join(map(str, roi))], {"roi": roi})):
        subprocess.run([cli, "clahe", str(src), "-o", str(tmp_path / "cli"), "--backend", "cpu",
                        "--clip-limit", "2", "--tile-grid-size", "4x3", "--quiet"] + opts)
        reps = histeq.clahe_files([src], tmp_path / "py", 2.0, (4, 3), backend="cpu", **kw)
        assert [r["ok"] for r in reps] == [True, True, False]  # small.png: another size
        for name, arr in (("a.png", img), ("b.png", img[::-1].copy())):
            got = (tmp_path / "py" / name).read_bytes()
            assert got == (tmp_path / "cli" / name).read_bytes()
            want = histeq.clahe(arr, 2.0, (4, 3), mask=m if "mask" in kw else None,
                                roi=kw.get("roi"))
            np.testing.assert_array_equal(histeq.load_image(tmp_path / "py" / name), want)
    with pytest.raises(ValueError, match="counts no pixel"):
        histeq.clahe_files([src], tmp_path / "never", mask=m * 0)
    with pytest.raises(ValueError, match="counts no pixel inside the rectangle"):
        histeq.clahe_files([src], tmp_path / "never", mask=m, roi=(0, 0, 2, 2))
    with pytest.raises(ValueError, match="roi"):
        histeq.clahe_files([src], tmp_path / "never", roi=(0, 0, 0, 2))
    assert not (tmp_path / "never").exists()


def test_torch_goes_through_the_host(torch_cuda):
    torch = torch_cuda
    img = rng_image((40, 70), 11)
    m = np.random.default_rng(11).random(img.shape) < 0.3
    want = histeq.clahe(img, 2.0, (4, 4), mask=m, backend="cpu")
    x = torch.from_numpy(img).cuda()
    for mk in (m, torch.from_numpy(m).cuda()):
        got = histeq.clahe(x, 2.0, (4, 4), mask=mk)
        assert got.is_cuda and got.dtype == x.dtype
        np.testing.assert_array_equal(got.cpu().numpy(), want)
    np.testing.assert_array_equal(histeq.clahe(img, 2.0, (4, 4), mask=m, backend="cuda"), want)


def test_cupy_goes_through_the_host(cupy_cuda):
    cupy = cupy_cuda
    img = rng_image((40, 70), 12)
    want = histeq.clahe(img, 2.0, (4, 4), roi=(5, 5, 30, 20), backend="cpu")
    got = histeq.clahe(cupy.asarray(img), 2.0, (4, 4), roi=(5, 5, 30, 20))
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(got), want)


def test_the_docs_example_runs(tmp_path, monkeypatch):
    """docs/python.md's example of masked CLAHE, run as written beside a copy of samples/."""
    import pathlib
    import shutil
    root = pathlib.Path(__file__).resolve().parents[2]
    text = (root / "docs" / "python.md").read_text(encoding="utf-8")
    section = text.split("**`mask=` and `roi=` of `clahe`**", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "clahe(" in code and "mask=" in code
    shutil.copytree(root / "samples", tmp_path / "samples")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/python.md", "exec"), {"__name__": "__docs__"})
