"""out= on host arrays (NumPy), with the compiled core: the result written into the caller's
array, equal to the out=None call's, out returned; the image itself as out (in place), and an out
that overlaps the image or the mask; every wrong out refused before anything is written. The
CUDA arrays' out= (which memory the compiled calls get, in place or through a copy) is tested on
stand-ins in test_fast_paths.py, and on the GPU in test_gpu.py."""
from __future__ import annotations

import numpy as np
import pytest

import histeq
from conftest import rng_image

BACKENDS = ["cpu", "auto"]


def _u16(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 65536, size=shape).astype(np.uint16)


def _mask(h, w, seed=3):
    m = np.random.default_rng(seed).random((h, w)) < 0.5
    m.flat[0] = True
    return m


_REF = rng_image((25, 15), seed=9, low=40, high=200)

# (name, image, call(image, out, backend)): every host path of the four entry points.
_CASES = [
    ("equalize gray", rng_image((60, 50)), lambda x, o, b: histeq.equalize(x, backend=b, out=o)),
    ("equalize gray (H, W, 1)", rng_image((60, 50, 1)),
     lambda x, o, b: histeq.equalize(x, backend=b, out=o)),
    ("equalize gray batch", rng_image((4, 30, 20)),
     lambda x, o, b: histeq.equalize(x, backend=b, out=o)),
    ("equalize luma", rng_image((60, 50, 3)), lambda x, o, b: histeq.equalize(x, backend=b, out=o)),
    ("equalize luma bgr", rng_image((60, 50, 4)),
     lambda x, o, b: histeq.equalize(x, channel_order="bgr", backend=b, out=o)),
    ("equalize rgb batch", rng_image((3, 30, 20, 3)),
     lambda x, o, b: histeq.equalize(x, mode="rgb", backend=b, out=o)),
    ("equalize gray mode", rng_image((60, 50, 3)),
     lambda x, o, b: histeq.equalize(x, mode="gray", backend=b, out=o)),
    ("equalize gray+alpha", rng_image((60, 50, 2)),
     lambda x, o, b: histeq.equalize(x, backend=b, out=o)),
    ("equalize exact", rng_image((60, 50)),
     lambda x, o, b: histeq.equalize(x, formula="exact", backend=b, out=o)),
    ("equalize mask", rng_image((60, 50)),
     lambda x, o, b: histeq.equalize(x, mask=_mask(60, 50), backend=b, out=o)),
    ("equalize roi batch", rng_image((3, 60, 50)),
     lambda x, o, b: histeq.equalize(x, roi=(5, 6, 20, 30), backend=b, out=o)),
    ("equalize 16", _u16((60, 50)), lambda x, o, b: histeq.equalize(x, backend=b, out=o)),
    ("equalize 16 colour", _u16((2, 30, 20, 3)),
     lambda x, o, b: histeq.equalize(x, mode="rgb", backend=b, out=o)),
    ("equalize 16 mask", _u16((60, 50)),
     lambda x, o, b: histeq.equalize(x, mask=_mask(60, 50), backend=b, out=o)),
    ("equalize empty", rng_image((0, 7)), lambda x, o, b: histeq.equalize(x, backend=b, out=o)),
    ("clahe gray", rng_image((60, 50)),
     lambda x, o, b: histeq.clahe(x, 2.0, (3, 4), backend=b, out=o)),
    ("clahe gray batch", rng_image((3, 30, 20)),
     lambda x, o, b: histeq.clahe(x, 2.0, (3, 4), backend=b, out=o)),
    ("clahe luma", rng_image((60, 50, 3)), lambda x, o, b: histeq.clahe(x, backend=b, out=o)),
    ("clahe gray mode", rng_image((60, 50, 4)),
     lambda x, o, b: histeq.clahe(x, mode="gray", backend=b, out=o)),
    ("clahe mask", rng_image((60, 50)),
     lambda x, o, b: histeq.clahe(x, 2.0, (2, 2), mask=_mask(60, 50), backend=b, out=o)),
    ("clahe 16", _u16((60, 50)), lambda x, o, b: histeq.clahe(x, 2.0, (3, 4), backend=b, out=o)),
    ("clahe 16 colour", _u16((30, 20, 3)),
     lambda x, o, b: histeq.clahe(x, mode="rgb", backend=b, out=o)),
    ("match gray", rng_image((60, 50)),
     lambda x, o, b: histeq.match_histograms(x, _REF, backend=b, out=o)),
    ("match batch", rng_image((3, 30, 20)),
     lambda x, o, b: histeq.match_histograms(x, _REF, backend=b, out=o)),
    ("match rgb", rng_image((30, 20, 3)),
     lambda x, o, b: histeq.match_histograms(x, rng_image((10, 10, 3), seed=4), mode="rgb",
                                             backend=b, out=o)),
    ("match itself", rng_image((60, 50)),
     lambda x, o, b: histeq.match_histograms(x, x, backend=b, out=o)),
    ("match 16", _u16((60, 50)),
     lambda x, o, b: histeq.match_histograms(x, _REF, backend=b, out=o)),
    ("histogram gray", rng_image((60, 50)), lambda x, o, b: histeq.histogram(x, backend=b, out=o)),
    ("histogram bins", rng_image((60, 50)),
     lambda x, o, b: histeq.histogram(x, 16, backend=b, out=o)),
    ("histogram batch", rng_image((4, 30, 20)),
     lambda x, o, b: histeq.histogram(x, backend=b, out=o)),
    ("histogram rgb", rng_image((2, 30, 20, 3)),
     lambda x, o, b: histeq.histogram(x, mode="rgb", backend=b, out=o)),
    ("histogram mask", rng_image((60, 50)),
     lambda x, o, b: histeq.histogram(x, mask=_mask(60, 50), backend=b, out=o)),
    ("histogram 16", _u16((60, 50)), lambda x, o, b: histeq.histogram(x, backend=b, out=o)),
    ("histogram 16 colour", _u16((30, 20, 3)),
     lambda x, o, b: histeq.histogram(x, backend=b, out=o)),
]
_IDS = [c[0] for c in _CASES]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,image,call", _CASES, ids=_IDS)
def test_out_holds_the_result(name, image, call, backend):
    want = call(image, None, backend)
    out = np.full_like(want, 7)
    before = image.copy()
    assert call(image, out, backend) is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(image, before)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,image,call", _CASES, ids=_IDS)
def test_in_place(name, image, call, backend):
    """The image as out: the result of the out=None call on the image as it was (the host
    calls do not write their input's memory while they read it: a new array, copied)."""
    want = call(image, None, backend)
    if want.shape != image.shape or want.dtype != image.dtype:
        pytest.skip("the result's shape or dtype is not the image's")
    x = image.copy()
    assert call(x, x, backend) is x
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call", [
    lambda x, o, b: histeq.equalize(x, backend=b, out=o),
    lambda x, o, b: histeq.equalize(x, mode="rgb", backend=b, out=o),
    lambda x, o, b: histeq.clahe(x, backend=b, out=o),
    lambda x, o, b: histeq.match_histograms(x, _REF, backend=b, out=o)])
@pytest.mark.parametrize("shape", [(5, 30, 20), (5, 30, 20, 3)])
def test_an_out_overlapping_the_image(call, shape, backend):
    """out and the image are overlapping views of one batch (images 1..4 and 0..3)."""
    first = rng_image(shape)
    base = first.copy()
    x, out = base[:-1], base[1:]
    want = call(first[:-1], None, backend)
    assert call(x, out, backend) is out
    np.testing.assert_array_equal(base[1:], want)
    np.testing.assert_array_equal(base[0], first[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_out_over_the_mask(backend):
    """The mask is read (copied) before anything is written: it may be out."""
    g = rng_image((60, 50))
    m = (_mask(60, 50) * 255).astype(np.uint8)
    want = histeq.equalize(g, mask=m.copy(), backend=backend)
    assert histeq.equalize(g, mask=m, backend=backend, out=m) is m
    np.testing.assert_array_equal(m, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_in_a_loop_is_not_reallocated(backend):
    out = np.empty((40, 30), np.uint8)
    for seed in range(3):
        g = rng_image((40, 30), seed=seed)
        assert histeq.clahe(g, backend=backend, out=out) is out
        np.testing.assert_array_equal(out, histeq.clahe(g, backend=backend))


_WRONG = [
    ("dtype", lambda w: np.zeros(w.shape, np.uint16 if w.dtype == np.uint8 else np.uint8),
     TypeError, r"^out: dtype \w+; expected \w+, the result's dtype$"),
    ("float", lambda w: np.zeros(w.shape, np.float32), TypeError,
     r"^out: dtype float32; expected "),
    ("byte order", lambda w: np.zeros(w.shape, w.dtype.newbyteorder(">"))
     if w.dtype.itemsize > 1 else None, TypeError, r"^out: dtype >[ui]\d; expected "),
    ("shape", lambda w: np.zeros(w.shape + (1,), w.dtype), ValueError,
     r"^out: shape \(.*\); expected \(.*\), the result's shape$"),
    ("transposed", lambda w: np.zeros(w.shape[::-1], w.dtype) if w.ndim > 1 and
     w.shape != w.shape[::-1] else None, ValueError, r"^out: shape "),
    ("Fortran order", lambda w: np.asfortranarray(np.zeros(w.shape, w.dtype))
     if w.ndim > 1 else None, ValueError, r"^out: not C-contiguous"),
    ("strided", lambda w: np.zeros(w.shape + (2,), w.dtype)[..., 0], ValueError,
     r"^out: not C-contiguous"),
    ("read-only", lambda w: np.broadcast_to(np.zeros((), w.dtype), w.shape), ValueError,
     r"^out: (a read-only array|not C-contiguous)"),
    ("list", lambda w: w.tolist(), TypeError, r"^out: expected a NumPy array \(the kind of "
     r"array this call returns for this image\), got list$"),
    ("scalar", lambda w: 0, TypeError, r"^out: expected a NumPy array"),
]


@pytest.mark.parametrize("wrong,make,error,message", _WRONG, ids=[w[0] for w in _WRONG])
@pytest.mark.parametrize("name,image,call", _CASES, ids=_IDS)
def test_a_wrong_out_is_refused(name, image, call, wrong, make, error, message):
    want = call(image, None, "cpu")
    out = make(want)
    if out is None or (wrong in ("strided", "Fortran order") and want.size == 0):
        pytest.skip("no such out for this result")
    if isinstance(out, np.ndarray) and out.flags.writeable:
        out[...] = 7
    snapshot = np.array(out, copy=True) if isinstance(out, np.ndarray) else None
    with pytest.raises(error, match=message):
        call(image, out, "cpu")
    if snapshot is not None:
        np.testing.assert_array_equal(out, snapshot)  # nothing written


def test_a_read_only_array_of_the_right_layout_is_refused():
    out = np.zeros((40, 30), np.uint8)
    out.flags.writeable = False
    with pytest.raises(ValueError, match=r"^out: a read-only array; expected a writable one$"):
        histeq.equalize(rng_image((40, 30)), out=out)


@pytest.mark.parametrize("call", [histeq.equalize, histeq.clahe, histeq.histogram,
                                  lambda x, out: histeq.match_histograms(x, _REF, out=out)])
def test_lists_take_no_out(call):
    images = [rng_image((40, 30)), rng_image((20, 10), seed=1)]
    for seq in (images, tuple(images)):
        with pytest.raises(TypeError, match=r"^out: not supported for a list or tuple of "
                                            r"images \(each has a result of its own\)"):
            call(seq, out=np.zeros((40, 30), np.uint8))
    assert isinstance(call(images, out=None), list)


def test_out_is_keyword_only():
    g = rng_image((40, 30))
    with pytest.raises(TypeError):
        histeq.equalize(g, np.empty_like(g))  # type: ignore[misc]
    with pytest.raises(TypeError):
        histeq.clahe(g, 40.0, (8, 8), np.empty_like(g))  # type: ignore[misc]
