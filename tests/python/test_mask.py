"""Masked equalization (equalize / histogram with mask= and roi=) against an independent NumPy
model of OpenCV's equalizeHist formula on the counted pixels only (N = counted pixels, the LUT
applied to every pixel), 8 and 16 bits; a full mask gives the unmasked bytes; the errors. GPU
cases (torch, CuPy) compare with the CPU backend and skip without a GPU."""
from __future__ import annotations

import numpy as np
import pytest

import histeq
from conftest import NATURAL_DIR, rng_image
from test_clahe16 import equalize16_model

BACKENDS = ["cpu", "auto"]


def equalize_model(img: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """OpenCV's equalizeHist formula (over 256 or 65536 levels) on the histogram of the counted
    pixels: float32 scale top / (N - h[v0]) with N the counted pixels and v0 their lowest level,
    lut[v] = round half to even of float32(cdf[v] - h[v0]) * scale above v0, 0 at or below it;
    a constant (or empty) histogram: the identity. The LUT applies to every pixel."""
    top = int(np.iinfo(img.dtype).max)
    h = np.bincount(img[counted.astype(bool)].ravel(), minlength=top + 1)
    nz = np.flatnonzero(h)
    total = int(h.sum())
    if nz.size == 0 or int(h[nz[0]]) == total:
        return img.copy()
    v0 = int(nz[0])
    scale = np.float32(top) / np.float32(total - int(h[v0]))
    cdf = np.cumsum(h).astype(np.int64) - int(h[v0])
    lut = np.clip(np.rint(cdf.astype(np.float32) * scale), 0, top).astype(img.dtype)
    lut[:v0 + 1] = 0
    return lut[img]


def photos():
    out = []
    for p in sorted(NATURAL_DIR.glob("*.png"))[:6]:
        img = histeq.load_image(p)
        if img.ndim == 2:
            out.append((p.stem, img))
    return out


PHOTOS = photos()


def masks_for(h: int, w: int, seed: int):
    rng = np.random.default_rng(seed)
    border = np.zeros((h, w), bool)
    border[h // 8: h - h // 8, w // 6: w - w // 6] = True  # a letterbox ignored
    return [
        ("random", rng.random((h, w)) < 0.3),
        ("border", border),
        ("one-pixel", np.eye(1, h * w, (h * w) // 2, dtype=bool).reshape(h, w)),
        ("half", np.arange(h * w).reshape(h, w) % 2 == 0),
    ]


def test_the_model_is_opencvs_formula_unmasked():
    cv2 = pytest.importorskip("cv2")
    for _name, img in PHOTOS[:3]:
        full = np.ones(img.shape, bool)
        np.testing.assert_array_equal(equalize_model(img, full), cv2.equalizeHist(img))
    img16 = np.random.default_rng(1).integers(900, 1300, (40, 50)).astype(np.uint16)
    np.testing.assert_array_equal(equalize_model(img16, np.ones(img16.shape, bool)),
                                  equalize16_model(img16))


def test_photographs_were_found():
    assert PHOTOS, f"no gray photograph in {NATURAL_DIR}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,img", PHOTOS, ids=[p[0] for p in PHOTOS])
def test_masked_photographs_equal_the_model(name, img, backend):
    for mname, m in masks_for(*img.shape, seed=len(name)):
        got = histeq.equalize(img, mask=m, backend=backend)
        np.testing.assert_array_equal(got, equalize_model(img, m), err_msg=mname)
    np.testing.assert_array_equal(histeq.histogram(img, mask=m, backend=backend),
                                  np.bincount(img[m], minlength=256))


@pytest.mark.parametrize("backend", BACKENDS)
def test_16bit_masks_equal_the_model(backend):
    rng = np.random.default_rng(4)
    img = rng.integers(0, 65536, (70, 90)).astype(np.uint16)
    img[:, :20] = 0  # a black border the mask leaves out
    for mname, m in masks_for(70, 90, seed=3):
        np.testing.assert_array_equal(histeq.equalize(img, mask=m, backend=backend),
                                      equalize_model(img, m), err_msg=mname)
        np.testing.assert_array_equal(histeq.histogram(img, mask=m, backend=backend),
                                      np.bincount(img[m], minlength=65536))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_full_mask_gives_the_unmasked_bytes(dtype):
    imgs = [p[1] for p in PHOTOS[:3]] + [rng_image((31, 47), 2), rng_image((20, 30, 3), 3),
                                         rng_image((5, 16, 12), 4)]
    for img in imgs:
        img = img.astype(dtype) * (257 if dtype == np.uint16 else 1)
        shape = img.shape[1:3] if img.ndim == 3 and img.shape[2] > 4 else img.shape[:2]
        for full in (np.ones(shape, bool), np.full(shape, 255, np.uint8)):
            np.testing.assert_array_equal(histeq.equalize(img, mask=full), histeq.equalize(img))
        np.testing.assert_array_equal(histeq.equalize(img, roi=(0, 0, shape[1], shape[0])),
                                      histeq.equalize(img))


def test_roi_and_roi_with_mask():
    img = PHOTOS[0][1]
    h, w = img.shape
    x, y, rw, rh = w // 4, h // 5, w // 2, h // 3
    inside = np.zeros((h, w), bool)
    inside[y:y + rh, x:x + rw] = True
    np.testing.assert_array_equal(histeq.equalize(img, roi=(x, y, rw, rh)),
                                  equalize_model(img, inside))
    np.testing.assert_array_equal(histeq.equalize(img, roi=[x, y, rw, rh]),
                                  histeq.equalize(img, mask=inside))
    m = np.random.default_rng(2).random((h, w)) < 0.5
    np.testing.assert_array_equal(histeq.equalize(img, mask=m, roi=(x, y, rw, rh)),
                                  equalize_model(img, m & inside))
    np.testing.assert_array_equal(histeq.histogram(img, roi=(x, y, rw, rh)),
                                  np.bincount(img[inside], minlength=256))


def test_mask_dtypes_count_nonzero():
    img = rng_image((40, 60), 7)
    m = np.random.default_rng(8).integers(-3, 4, (40, 60))
    want = equalize_model(img, m != 0)
    for dt in (np.int8, np.int32, np.int64):
        np.testing.assert_array_equal(histeq.equalize(img, mask=m.astype(dt)), want)
    np.testing.assert_array_equal(histeq.equalize(img, mask=(m != 0) * 256), want)  # > 255
    np.testing.assert_array_equal(histeq.equalize(img, mask=((m != 0) * 256).astype(np.uint16)),
                                  want)
    np.testing.assert_array_equal(histeq.equalize(img, mask=(m != 0).astype(np.uint8) * 200),
                                  want)
    np.testing.assert_array_equal(histeq.equalize(img, mask=np.asfortranarray(m != 0)), want)
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(histeq.equalize(img, mask=torch.from_numpy(m != 0)), want)


def test_colour_batches_and_lists():
    rgb = rng_image((30, 40, 3), 9)
    m = np.random.default_rng(3).random((30, 40)) < 0.4
    got = histeq.equalize(rgb, mode="rgb", mask=m)
    for c in range(3):  # rgb mode: each channel's histogram of the counted pixels
        np.testing.assert_array_equal(got[..., c], equalize_model(rgb[..., c], m))
    luma = histeq.equalize(rgb, mask=m)
    assert luma.shape == rgb.shape and not np.array_equal(luma, histeq.equalize(rgb))
    hs = histeq.histogram(rgb, mode="rgb", mask=m)
    for c in range(3):
        np.testing.assert_array_equal(hs[c], np.bincount(rgb[..., c][m], minlength=256))
    batch = rng_image((4, 30, 40), 10)
    out = histeq.equalize(batch, mask=m)
    for k in range(4):
        np.testing.assert_array_equal(out[k], equalize_model(batch[k], m))
    lst = histeq.equalize([batch[0], batch[1]], mask=m)
    np.testing.assert_array_equal(lst[1], out[1])
    hb = histeq.histogram(batch, mask=m)
    assert hb.shape == (4, 256)
    np.testing.assert_array_equal(hb[2], np.bincount(batch[2][m], minlength=256))


@pytest.mark.parametrize("bins", [1, 16, 100, 4096])
def test_masked_histogram_bins(bins):
    img = rng_image((50, 30), 12)
    m = np.random.default_rng(12).random((50, 30)) < 0.5
    want = np.bincount(img[m].astype(np.int64) * bins // 256, minlength=bins)
    np.testing.assert_array_equal(histeq.histogram(img, bins, mask=m), want)


def test_errors():
    img = rng_image((20, 30), 1)
    with pytest.raises(ValueError, match="mask: the mask counts no pixel"):
        histeq.equalize(img, mask=np.zeros((20, 30), bool))
    with pytest.raises(ValueError, match="mask: the mask counts no pixel"):
        histeq.histogram(img, mask=np.zeros((20, 30), np.uint8))
    with pytest.raises(ValueError, match="mask: the mask counts no pixel inside the rectangle"):
        m = np.zeros((20, 30), bool)
        m[0, 0] = True
        histeq.equalize(img, mask=m, roi=(5, 5, 4, 4))
    with pytest.raises(ValueError, match="mask: the mask counts no pixel"):
        histeq.equalize(img.astype(np.uint16), mask=np.zeros((20, 30), bool))
    with pytest.raises(ValueError, match=r"mask: shape \(30, 20\); expected .* \(20, 30\)"):
        histeq.equalize(img, mask=np.ones((30, 20), bool))
    with pytest.raises(ValueError, match="mask: shape"):
        histeq.equalize(img, mask=np.ones((20, 30, 1), bool))
    # nested lists are a mask's form: ragged ones name the mask (NumPy's words alone did not)
    for fn in (histeq.equalize, histeq.histogram, histeq.clahe):
        with pytest.raises(ValueError, match="mask: nested lists whose rows differ"):
            fn(np.zeros((2, 2), np.uint8), mask=[[1, 0], [1]])
    assert histeq.equalize(np.zeros((2, 2), np.uint8), mask=[[1, 0], [1, 1]]).shape == (2, 2)
    with pytest.raises(ValueError, match="mask: shape"):
        histeq.equalize([img, img[:10]], mask=np.ones((20, 30), bool))
    with pytest.raises(TypeError, match="mask: dtype float"):
        histeq.equalize(img, mask=np.ones((20, 30), np.float32))
    with pytest.raises(ValueError, match="roi.*not inside"):
        histeq.equalize(img, roi=(25, 0, 10, 5))
    with pytest.raises(ValueError, match="roi.*empty"):
        histeq.equalize(img, roi=(0, 0, 0, 5))
    with pytest.raises(TypeError, match="roi"):
        histeq.equalize(img, roi=(0, 0, 5))
    with pytest.raises(TypeError, match="roi"):
        histeq.equalize(img, roi=(0, 0, 5, 2.5))


EMPTY_SHAPES = [(0, 5), (2, 0, 5), (0, 5, 3)]


def _empty_calls(img, mask, roi):
    kw = {} if mask is None else {"mask": mask}
    if roi is not None:
        kw["roi"] = roi
    return [lambda: histeq.equalize(img, **kw), lambda: histeq.clahe(img, **kw),
            lambda: histeq.histogram(img, **kw)]


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("shape", EMPTY_SHAPES, ids=str)
def test_an_empty_image_meets_masks_and_rois_alike_in_every_call(shape, dtype):
    """An image of no pixel: a mask of its size (counting nothing, there is nothing) gives what
    no mask gives; a mask of another size or a roi outside it is the same ValueError from
    equalize, clahe and histogram (clahe and histogram let them through before)."""
    if dtype == np.uint16 and len(shape) == 3 and shape[-1] == 3:
        pytest.skip("16-bit colour takes mode='rgb' only; covered by the gray shapes")
    img = np.zeros(shape, dtype)
    hw = (0, 5)
    for plain, masked in zip(_empty_calls(img, None, None),
                             _empty_calls(img, np.zeros(hw, bool), None)):
        np.testing.assert_array_equal(masked(), plain())
    for call in _empty_calls(img, np.zeros((3, 5), bool), None):
        with pytest.raises(ValueError, match=r"mask: shape \(3, 5\); expected .* \(0, 5\)"):
            call()
    for call in _empty_calls(img, None, (0, 0, 1, 1)):
        with pytest.raises(ValueError, match="roi.*not inside the 5x0 image"):
            call()


def test_an_empty_cuda_image_meets_masks_and_rois_as_a_host_one(torch_cuda):
    torch = torch_cuda
    img = torch.zeros((0, 5), dtype=torch.uint8, device="cuda")
    for plain, masked in zip(_empty_calls(img, None, None),
                             _empty_calls(img, np.zeros((0, 5), bool), None)):
        assert torch.equal(masked().cpu(), plain().cpu())
    for call in _empty_calls(img, np.zeros((3, 5), bool), None):
        with pytest.raises(ValueError, match="mask: shape"):
            call()
    for call in _empty_calls(img, None, (0, 0, 1, 1)):
        with pytest.raises(ValueError, match="roi.*not inside"):
            call()


# ---------------------------------------------------------------------------------- GPU

def _gpu_cases():
    img = PHOTOS[0][1] if PHOTOS else rng_image((300, 400), 1)
    h, w = img.shape
    m = np.random.default_rng(5).random((h, w)) < 0.3
    batch = rng_image((3, 50, 64), 6)
    bm = np.random.default_rng(6).random((50, 64)) < 0.5
    return [
        ("gray-mask", img, {"mask": m}),
        ("gray-roi", img, {"roi": (w // 4, h // 4, w // 3, h // 2)}),
        ("gray-both", img, {"mask": m, "roi": (0, 0, w // 2, h)}),
        ("gray-batch", batch, {"mask": bm}),
        ("colour", rng_image((50, 64, 3), 7), {"mask": bm}),
        ("colour-rgb", rng_image((50, 64, 3), 7), {"mask": bm, "mode": "rgb"}),
        ("16-bit", img.astype(np.uint16) * 257 + 3, {"mask": m}),
    ]


GPU_CASES = _gpu_cases()


@pytest.mark.parametrize("name,img,kw", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_torch_equals_cpu(torch_cuda, name, img, kw):
    torch = torch_cuda
    if img.dtype == np.uint16 and not hasattr(torch, "uint16"):
        pytest.skip("this torch has no uint16")
    want = histeq.equalize(img, backend="cpu", **kw)
    x = torch.from_numpy(img).cuda()
    dev_kw = dict(kw)
    if "mask" in kw:
        dev_kw["mask"] = torch.from_numpy(kw["mask"]).cuda()
    for k in (kw, dev_kw):  # a host or a device mask
        got = histeq.equalize(x, **k)
        assert got.is_cuda and got.dtype == x.dtype
        np.testing.assert_array_equal(got.cpu().numpy(), want)
        np.testing.assert_array_equal(histeq.histogram(x, **k).cpu().numpy(),
                                      histeq.histogram(img, backend="cpu", **kw))
    np.testing.assert_array_equal(histeq.equalize(img, backend="cuda", **kw), want)
    with pytest.raises(ValueError, match="mask: the mask counts no pixel"):
        histeq.equalize(x, mask=torch.zeros(img.shape[-2:] if img.ndim == 2 or
                                            img.shape[-1] > 4 else img.shape[:2],
                                            dtype=torch.bool, device="cuda"))


@pytest.mark.parametrize("name,img,kw", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_cupy_equals_cpu(cupy_cuda, name, img, kw):
    cupy = cupy_cuda
    want = histeq.equalize(img, backend="cpu", **kw)
    dev_kw = dict(kw)
    if "mask" in kw:
        dev_kw["mask"] = cupy.asarray(kw["mask"])
    for k in (kw, dev_kw):
        got = histeq.equalize(cupy.asarray(img), **k)
        assert isinstance(got, cupy.ndarray)
        np.testing.assert_array_equal(cupy.asnumpy(got), want)
        np.testing.assert_array_equal(cupy.asnumpy(histeq.histogram(cupy.asarray(img), **k)),
                                      histeq.histogram(img, backend="cpu", **kw))


def test_torch_device_masks_are_checked_again_once_modified(torch_cuda):
    torch = torch_cuda
    img = rng_image((40, 50), 21)
    x = torch.from_numpy(img).cuda()
    m = torch.zeros((40, 50), dtype=torch.uint8, device="cuda")
    m[5:30, 10:40] = 200  # nonzero: counted
    want = equalize_model(img, m.cpu().numpy() != 0)
    for _ in range(2):  # the second call finds the check remembered
        np.testing.assert_array_equal(histeq.equalize(x, mask=m).cpu().numpy(), want)
    for dt in (torch.int32, torch.bool, torch.int64):
        np.testing.assert_array_equal(histeq.equalize(x, mask=m.to(dt)).cpu().numpy(), want)
    m.zero_()  # in place: torch's version counter moves, so the mask is checked again
    with pytest.raises(ValueError, match="mask: the mask counts no pixel"):
        histeq.equalize(x, mask=m)
    with pytest.raises(ValueError, match="mask: shape"):
        histeq.equalize(x, mask=torch.ones((50, 40), dtype=torch.bool, device="cuda"))
    with pytest.raises(TypeError, match="mask: dtype"):
        histeq.equalize(x, mask=torch.ones((40, 50), dtype=torch.float32, device="cuda"))


def test_cupy_device_masks_are_checked_once_per_array(cupy_cuda, monkeypatch):
    """A CuPy mask's count check (a wait for the device) runs once per array, address, layout and
    rectangle (CuPy has no version counter): the second call skips it; a new array, another
    rectangle or an out= write over the mask checks again; an empty new array is refused; a mask
    emptied in place afterwards gives the empty histogram's identity (the image unchanged)."""
    cupy = cupy_cuda
    import histeq._region as _r
    img = rng_image((40, 50), 22)
    x = cupy.asarray(img)
    host = np.zeros((40, 50), np.uint8)
    host[5:30, 10:40] = 1
    m = cupy.asarray(host)
    want = equalize_model(img, host != 0)
    waits = []  # the checks that ran: each waits on the mask's any() (or refuses it)
    real_counts = _r._device_counts

    def counting_counts(mk, mm, stamp, roi, pixels):
        if not _r._checked(mk, stamp):
            waits.append(1)
        return real_counts(mk, mm, stamp, roi, pixels)
    monkeypatch.setattr(_r, "_device_counts", counting_counts)
    _r._mask_checked.clear()
    for n in (1, 1):  # checked on the first call only
        np.testing.assert_array_equal(cupy.asnumpy(histeq.equalize(x, mask=m)), want)
        assert len(waits) == n
    np.testing.assert_array_equal(cupy.asnumpy(histeq.histogram(x, mask=m)),
                                  histeq.histogram(img, mask=host, backend="cpu"))
    assert len(waits) == 1
    m.fill(0)  # in place: not seen; the empty histogram's identity
    np.testing.assert_array_equal(cupy.asnumpy(histeq.equalize(x, mask=m)), img)
    assert len(waits) == 1
    m[...] = cupy.asarray(host)
    histeq.equalize(x, mask=m, roi=(10, 5, 30, 25))  # another rectangle: checked again
    assert len(waits) == 2
    histeq.equalize(x, mask=m.copy())  # another array
    assert len(waits) == 3
    with pytest.raises(ValueError, match="mask: the mask counts no pixel"):
        histeq.equalize(x, mask=cupy.zeros((40, 50), cupy.bool_))
    histeq.equalize(x, mask=m)  # the rectangle's stamp replaced: checked again
    assert len(waits) == 5
    histeq.equalize(x, mask=m, out=m)  # remembered; out= over the mask forgets it
    assert len(waits) == 5
    histeq.equalize(x, mask=m)
    assert len(waits) == 6


def test_torch_inference_mode_masks(torch_cuda):
    """Tensors made under torch.inference_mode have no version counter (reading it raises): their
    count check runs on every call, so a mask emptied in place gives the error."""
    torch = torch_cuda
    img = rng_image((40, 50), 23)
    with torch.inference_mode():
        x = torch.from_numpy(img).cuda()
        m = torch.zeros((40, 50), dtype=torch.bool, device="cuda")
        m[5:30, 10:40] = True
        assert m.is_inference()
        host = m.cpu().numpy()
        want = equalize_model(img, host)
        want_hist = histeq.histogram(img, mask=host, backend="cpu")
        for mk in (m, m.to(torch.int32), m.t().contiguous().t()):  # in place, != 0, a copy
            for _ in range(2):
                np.testing.assert_array_equal(histeq.equalize(x, mask=mk).cpu().numpy(), want)
            np.testing.assert_array_equal(histeq.histogram(x, mask=mk).cpu().numpy(), want_hist)
        m.zero_()
        with pytest.raises(ValueError, match="mask: the mask counts no pixel"):
            histeq.equalize(x, mask=m)
        with pytest.raises(ValueError, match="mask: the mask counts no pixel"):
            histeq.histogram(x, mask=m)


# ---------------------------------------------------------------------------------- files, CLI

def test_masks_equal_the_cli_and_equalize_files(tmp_path):
    import subprocess
    from test_files import _cli
    cli = _cli()
    img = PHOTOS[0][1]
    h, w = img.shape
    m = np.zeros((h, w), np.uint8)
    m[h // 6:h - h // 5, w // 7:w - w // 3] = 255
    m[::7, ::5] = 0
    histeq.save_image(tmp_path / "in.png", img)
    histeq.save_image(tmp_path / "mask.png", m)
    roi = (w // 5, h // 4, w // 2, h // 3)
    for opts, kw in (([], {"mask": m}), (["--roi", ",".join(map(str, roi))], {"roi": roi})):
        dst = tmp_path / "out.png"
        subprocess.run([cli, "equalize", str(tmp_path / "in.png"), "-o", str(dst), "--backend",
                        "cpu", "--quiet"] + (opts or ["--mask", str(tmp_path / "mask.png")]),
                       check=True)
        want = histeq.equalize(img, backend="cpu", **kw)
        np.testing.assert_array_equal(histeq.load_image(dst), want)
        for mk in ([tmp_path / "mask.png", m != 0] if "mask" in kw else [None]):
            fkw = {"mask": mk} if mk is not None else {"roi": roi}
            reps = histeq.equalize_files([tmp_path / "in.png"], tmp_path / "files",
                                         backend="cpu", errors="raise", **fkw)
            assert reps[0]["ok"]
            np.testing.assert_array_equal(histeq.load_image(tmp_path / "files" / "in.png"), want)
    rep = histeq.equalize_files([tmp_path / "in.png"], tmp_path / "bad", mask=m[:-1])[0]
    assert not rep["ok"] and "mask" in rep["error"]
    with pytest.raises(ValueError, match="mask: the mask counts no pixel"):
        histeq.equalize_files([tmp_path / "in.png"], tmp_path / "bad", mask=m * 0)
    with pytest.raises(ValueError, match="decoder"):
        histeq.equalize_files([tmp_path / "in.png"], tmp_path / "bad", mask=m, decoder="gpu")
    # a mask with no counted pixel inside the rectangle: refused before any file, as equalize
    # refuses it (the rectangle and the mask are every file's)
    inside = (w // 7 + 1, h // 6 + 1, 3, 3)
    outside = (0, 0, w // 7, h)
    assert histeq.equalize(img, mask=m, roi=inside).shape == img.shape
    with pytest.raises(ValueError, match="counts no pixel inside the rectangle"):
        histeq.equalize(img, mask=m, roi=outside)
    for mk in (m, tmp_path / "mask.png"):
        with pytest.raises(ValueError, match="counts no pixel inside the rectangle"):
            histeq.equalize_files([tmp_path / "in.png", tmp_path / "missing.png"],
                                  tmp_path / "never", mask=mk, roi=outside)
        assert not (tmp_path / "never").exists()
        assert histeq.equalize_files([tmp_path / "in.png"], tmp_path / "ok", mask=mk,
                                     roi=inside)[0]["ok"]


@pytest.mark.parametrize("roi,words", [
    ((0, 0, 2**31, 1), "not inside any image"), ((2**40, 0, 1, 1), "not inside any image"),
    ((2**64, 0, 1, 1), "not inside any image"), ((0, 2**31 - 4, 1, 4), "not inside any image"),
    ((0, 0, 0, 4), "empty"), ((0, 0, 4, -2), "empty"), ((-1, 0, 4, 4), "outside the image")])
def test_roi_refused_before_any_file_as_equalize_refuses_it(tmp_path, roi, words):
    img = rng_image((20, 30), 31)
    histeq.save_image(tmp_path / "a.png", img)
    with pytest.raises(ValueError, match=f"roi: .*{words}") as arrays:
        histeq.equalize(img, roi=roi)
    with pytest.raises(ValueError, match=f"roi: .*{words}") as files:
        histeq.equalize_files([tmp_path / "a.png"], tmp_path / "out", roi=roi)
    assert str(files.value) == str(arrays.value)
    assert not (tmp_path / "out").exists()  # refused before any work


def test_roi_at_the_largest_edge_is_checked_per_image(tmp_path):
    img = rng_image((20, 30), 32)
    histeq.save_image(tmp_path / "a.png", img)
    roi = (2**31 - 2, 0, 1, 1)  # a valid rectangle, but not inside this image
    with pytest.raises(ValueError, match=r"roi: .*not inside the 30x20 image"):
        histeq.equalize(img, roi=roi)
    rep = histeq.equalize_files([tmp_path / "a.png"], tmp_path / "out", roi=roi)[0]
    assert not rep["ok"] and "not inside" in rep["error"]


@pytest.mark.parametrize("mask", [True, 1, memoryview(bytes(600)), "counted", 2.5],
                         ids=["bool", "int", "memoryview", "str", "float"])
def test_mask_of_a_wrong_type_names_its_type(tmp_path, mask):
    img = rng_image((20, 30), 33)
    expected = r"mask: expected an array of bool or integers .*, got " + type(mask).__name__
    with pytest.raises(TypeError, match=expected) as e:
        histeq.equalize(img, mask=mask)
    assert "dtype None" not in str(e.value)
    with pytest.raises(TypeError, match=expected):
        histeq.histogram(img, mask=mask)
    if not isinstance(mask, str):  # a str is a mask file's path for equalize_files
        histeq.save_image(tmp_path / "a.png", img)
        with pytest.raises(TypeError, match=expected):
            histeq.equalize_files([tmp_path / "a.png"], tmp_path / "out", mask=mask)
        assert not (tmp_path / "out").exists()


def test_mask_file_of_three_equal_channels_is_gray(tmp_path):
    img = rng_image((20, 30), 34)
    m = np.zeros((20, 30), np.uint8)
    m[3:15, 4:25] = 255
    m[::3, ::4] = 0
    histeq.save_image(tmp_path / "a.png", img)
    histeq.save_image(tmp_path / "m.bmp", m)  # histeq writes a gray BMP as three channels
    assert histeq.load_image(tmp_path / "m.bmp").shape == (20, 30, 3)
    want = equalize_model(img, m != 0)
    reps = histeq.equalize_files([tmp_path / "a.png"], tmp_path / "out", mask=tmp_path / "m.bmp",
                                 backend="cpu", errors="raise")
    assert reps[0]["ok"]
    np.testing.assert_array_equal(histeq.load_image(tmp_path / "out" / "a.png"), want)
    colour = np.dstack([m, m, m])
    colour[5, 6, 1] ^= 1  # one pixel whose channels differ: a colour image
    histeq.save_image(tmp_path / "c.bmp", colour)
    with pytest.raises(ValueError, match="mask: .*c.bmp.* has 3 channels"):
        histeq.equalize_files([tmp_path / "a.png"], tmp_path / "out2", mask=tmp_path / "c.bmp")
    histeq.save_image(tmp_path / "ga.png", np.dstack([m, m]))  # gray + alpha
    with pytest.raises(ValueError, match="mask: .*ga.png.* has 2 channels"):
        histeq.equalize_files([tmp_path / "a.png"], tmp_path / "out2", mask=tmp_path / "ga.png")
    assert not (tmp_path / "out2").exists()


def test_forget_written_spans_cupy_strides_in_bytes_and_downward():
    """A CuPy mask's stamp (version None) holds strides in bytes, possibly negative (a view
    such as m[::-1] starts at its last row): an out= write reaching the bytes the view covers
    forgets its check, a write ending before them or starting after them does not."""
    import weakref
    import histeq._region as _r

    class Stand:
        pass
    keep = Stand()
    p, rows, cols = 1 << 40, 4, 10
    for strides, lo, hi in (((cols, 1), p, p + rows * cols),
                            ((-cols, 1), p - (rows - 1) * cols, p + cols)):
        for address, nbytes, forgotten in ((lo - 8, 8, False), (lo - 1, 2, True),
                                           (hi - 1, 1, True), (hi, 4, False)):
            _r._mask_checked.clear()
            _r._mask_checked[1] = (weakref.ref(keep), (None, p, (rows, cols), np.dtype(np.uint8),
                                                       0, strides, None))
            _r.forget_written(address, nbytes)
            assert (1 not in _r._mask_checked) == forgotten, (strides, address, nbytes)
    _r._mask_checked.clear()
