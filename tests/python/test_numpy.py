"""NumPy round trips: OpenCV goldens, backends, batches equal one-by-one, lists, modes,
histograms, kernels. CPU backend unless a GPU is usable (backend='auto' then uses it)."""
from __future__ import annotations

import numpy as np
import pytest

import histeq
from conftest import golden_pairs, rng_image

PAIRS = golden_pairs()
BACKENDS = ["cpu", "auto"]


def test_version_and_kernels():
    assert isinstance(histeq.__version__, str) and histeq.__version__.count(".") == 2
    ks = histeq.kernels()
    if not histeq._histeq.CUDA_BUILT:  # a CPU-only build: no GPU histogram kernels
        assert ks == []
        return
    names = [k["name"] for k in ks]
    assert "atomic" in names and "columns" in names and "auto" not in names
    assert all(isinstance(k["exact"], bool) and k["summary"] for k in ks)
    assert [k["name"] for k in ks if not k["exact"]] == ["racy"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,src,golden", PAIRS, ids=[p[0] for p in PAIRS])
def test_matches_opencv_golden(name, src, golden, backend):
    img = histeq.load_image(src)
    want = histeq.load_image(golden)
    got = histeq.equalize(img, backend=backend)
    assert got.dtype == np.uint8 and got.shape == want.shape
    if img.ndim == 2:
        np.testing.assert_array_equal(got, want)  # gray: byte for byte
    else:  # colour (luma mode): OpenCV's YCrCb round trip, within 1 per channel
        assert np.abs(got.astype(np.int16) - want).max() <= 1
    assert not np.array_equal(got, img)


def test_goldens_were_found():
    assert len(PAIRS) >= 5, "the OpenCV goldens or their inputs are missing"


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (64, 64, 3), (33, 17, 4), (20, 21, 2),
                                   (5, 9, 1)])
@pytest.mark.parametrize("formula", ["opencv", "exact"])
def test_cpu_and_auto_backends_agree(shape, formula):
    img = rng_image(shape, seed=sum(shape))
    a = histeq.equalize(img, formula=formula, backend="cpu")
    b = histeq.equalize(img, formula=formula, backend="auto")
    np.testing.assert_array_equal(a, b)
    assert a.shape == img.shape


def test_gray_equalization_by_hand():
    img = rng_image((50, 60), seed=3, low=40, high=90)
    hist = np.bincount(img.ravel(), minlength=256)
    np.testing.assert_array_equal(histeq.histogram(img, backend="cpu"), hist)
    # exact formula: floor(((cdf - h[v0]) * 510 + d) / (2d)), d = N - h[v0]
    cdf = np.cumsum(hist)
    v0 = int(np.flatnonzero(hist)[0])
    d = img.size - int(hist[v0])
    lut = np.zeros(256, np.int64)
    for v in range(v0 + 1, 256):
        lut[v] = min(255, ((int(cdf[v]) - int(hist[v0])) * 510 + d) // (2 * d))
    np.testing.assert_array_equal(histeq.equalize(img, formula="exact", backend="cpu"),
                                  lut[img].astype(np.uint8))


def test_constant_and_empty_images():
    c = np.full((10, 10), 77, np.uint8)
    np.testing.assert_array_equal(histeq.equalize(c), c)  # identity (OpenCV copies it)
    e = np.zeros((0, 5), np.uint8)
    assert histeq.equalize(e).shape == (0, 5)


def test_equalizing_twice_is_monotone_and_keeps_the_levels():
    grays = [im for im in (histeq.load_image(p[1]) for p in PAIRS) if im.ndim == 2]
    img = grays[0] if grays else rng_image((64, 64), 1, high=120)
    once = histeq.equalize(img)
    twice = histeq.equalize(once)
    # the LUT is monotone: the order of the pixels' values is kept, no level is created
    order = np.argsort(once.ravel(), kind="stable")
    assert np.all(np.diff(twice.ravel()[order].astype(np.int16)) >= 0)
    assert np.count_nonzero(histeq.histogram(twice)) <= np.count_nonzero(histeq.histogram(once))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(4, 30, 40), (3, 30, 40, 3), (2, 16, 16, 4), (5, 8, 8, 1)])
def test_batch_equals_one_by_one(shape, backend):
    batch = rng_image(shape, seed=len(shape))
    batch[0] //= 3  # images with different histograms
    got = histeq.equalize(batch, backend=backend)
    assert got.shape == batch.shape
    for i in range(shape[0]):
        np.testing.assert_array_equal(got[i], histeq.equalize(batch[i], backend=backend,
                                                              batch=False))


def test_three_d_shape_rule_and_batch_flag():
    x = rng_image((3, 20, 20), seed=9)  # last extent 20 > 4: a batch of gray images
    np.testing.assert_array_equal(histeq.equalize(x)[1], histeq.equalize(x[1]))
    y = rng_image((20, 20, 3), seed=9)  # last extent 3: one RGB image
    np.testing.assert_array_equal(histeq.equalize(y, mode="rgb")[..., 0],
                                  histeq.equalize(y[..., 0].copy()))
    z = rng_image((6, 20, 3), seed=2)  # batch=True: six 20x3 gray images
    out = histeq.equalize(z, batch=True)
    np.testing.assert_array_equal(out[5], histeq.equalize(z[5].copy()))


def test_list_of_different_sizes():
    imgs = [rng_image((10 + i, 20 + 3 * i), seed=i) for i in range(5)] + [rng_image((9, 9, 3), 1)]
    outs = histeq.equalize(imgs)
    assert isinstance(outs, list) and len(outs) == len(imgs)
    for a, o in zip(imgs, outs):
        np.testing.assert_array_equal(o, histeq.equalize(a))


def test_modes():
    img = rng_image((30, 40, 4), seed=11)
    luma = histeq.equalize(img)
    np.testing.assert_array_equal(luma[..., 3], img[..., 3])  # alpha passed through
    gray = histeq.equalize(img, mode="gray")
    assert gray.shape == (30, 40)
    rgb = histeq.equalize(img, mode="rgb")
    for ch in range(3):
        np.testing.assert_array_equal(rgb[..., ch], histeq.equalize(img[..., ch].copy()))
    # the gray mode's histogram of Y is the luma plane's
    h_gray = histeq.histogram(img, mode="gray")
    assert h_gray.shape == (256,) and int(h_gray.sum()) == 30 * 40
    assert histeq.histogram(img, mode="rgb").shape == (3, 256)


def test_non_contiguous_numpy_is_copied():
    base = rng_image((40, 80), seed=5)
    view = base[:, ::2]
    np.testing.assert_array_equal(histeq.equalize(view), histeq.equalize(view.copy()))


@pytest.mark.parametrize("bins", [1, 16, 100, 256, 4096])
def test_histogram_bins(bins):
    img = rng_image((77, 31), seed=bins)
    want = np.bincount((img.ravel().astype(np.int64) * bins) >> 8, minlength=bins)
    for backend in BACKENDS:
        h = histeq.histogram(img, bins=bins, backend=backend)
        assert h.dtype == np.int64 and h.shape == (bins,)
        np.testing.assert_array_equal(h, want)


def test_histogram_batch_and_list():
    b = rng_image((3, 10, 12), seed=4)
    hs = histeq.histogram(b)
    assert hs.shape == (3, 256)
    for i in range(3):
        np.testing.assert_array_equal(hs[i], np.bincount(b[i].ravel(), minlength=256))
    hl = histeq.histogram([b[0], b[1, :5]])
    assert isinstance(hl, list) and int(hl[1].sum()) == 60


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("shape,mode", [((5, 6, 3), "rgb"), ((5, 6, 4), "rgb"), ((5, 6, 3), None),
                                        ((5, 6, 2), "rgb"), ((5, 6), None)])
def test_histogram_of_an_empty_batch_has_the_shape_of_a_full_one(dtype, shape, mode):
    """A batch of no image has the counts' shape of a batch of one with its first extent 0
    (three planes for mode="rgb", and for 16-bit colour), with a mask and a roi as without."""
    if dtype == np.uint16 and len(shape) == 3 and shape[2] >= 3:
        mode = "rgb"  # 16-bit colour: per channel only
    one = histeq.histogram(np.zeros((1,) + shape, dtype), mode=mode, batch=True)
    region = {"mask": np.ones(shape[:2], bool), "roi": (1, 1, 2, 2)}
    for kw in ({}, {"mask": region["mask"]}, {"roi": region["roi"]}, region):
        for backend in BACKENDS:
            h = histeq.histogram(np.zeros((0,) + shape, dtype), mode=mode, batch=True,
                                 backend=backend, **kw)
            assert h.dtype == np.int64 and h.shape == (0,) + one.shape[1:], (kw, h.shape)
            out = np.empty((0,) + one.shape[1:], np.int64)
            assert histeq.histogram(np.zeros((0,) + shape, dtype), mode=mode, batch=True,
                                    backend=backend, out=out, **kw) is out


@pytest.mark.parametrize("kernel", [k["name"] for k in histeq.kernels() if k["exact"]])
def test_every_exact_kernel_gives_the_same_result(kernel):
    img = rng_image((100, 101), seed=1, high=200)
    np.testing.assert_array_equal(histeq.equalize(img, kernel=kernel), histeq.equalize(img))


def test_torch_cpu_tensors_round_trip():
    torch = pytest.importorskip("torch")
    img = rng_image((20, 30), seed=8)
    out = histeq.equalize(torch.from_numpy(img))
    assert isinstance(out, torch.Tensor) and out.device.type == "cpu"
    np.testing.assert_array_equal(out.numpy(), histeq.equalize(img))


def test_save_and_load_round_trip(tmp_path):
    img = rng_image((12, 14, 3), seed=2)
    p = tmp_path / "x.png"
    histeq.save_image(p, img)
    np.testing.assert_array_equal(histeq.load_image(p), img)


@pytest.mark.parametrize("maxval", [15, 300, 1000, 65535])
def test_load_image_scales_pnm_samples_as_its_docstring_says(tmp_path, maxval):
    """PGM samples scaled from 0..maxval, rounded: round(v * 255 / maxval) at 8 bits (a 16-bit
    file too, not v >> 8 as a 16-bit PNG), round(v * 65535 / maxval) at 16."""
    v = np.random.default_rng(maxval).integers(0, maxval + 1, (9, 11)).astype(np.uint16)
    v[0, 0], v[0, 1] = maxval, 0
    wide = maxval > 255
    p = tmp_path / "v.pgm"
    p.write_bytes(f"P5\n11 9\n{maxval}\n".encode() +
                  (v.astype(">u2") if wide else v.astype(np.uint8)).tobytes())
    scaled = v.astype(np.float64) / maxval
    np.testing.assert_array_equal(histeq.load_image(p), np.floor(scaled * 255 + 0.5))
    np.testing.assert_array_equal(histeq.load_image(p, depth=16), np.floor(scaled * 65535 + 0.5)
                                  if wide else np.floor(scaled * 255 + 0.5) * 257)
    assert "round(v * 255 / maxval)" in " ".join(histeq.load_image.__doc__.split())
