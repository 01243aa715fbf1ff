"""Every error path: a Python exception that names the argument, never a crash."""
from __future__ import annotations

import numpy as np
import pytest

import histeq
from conftest import rng_image

IMG = rng_image((8, 8), seed=1)


@pytest.mark.parametrize("bad,exc,word", [
    ([[1, 2], [3, 4]], TypeError, "image"),        # a nested list is a list of non-arrays
    ("moon.png", TypeError, "image"),
    (None, TypeError, "image"),
    (np.zeros((4, 4), np.float32), TypeError, "dtype"),
    (np.zeros((4, 4), np.int16), TypeError, "dtype"),   # uint16 is served; int16 is not
    (np.zeros((4, 4), np.uint32), TypeError, "dtype"),
    (np.zeros((4,), np.uint8), ValueError, "shape"),
    (np.zeros((2, 3, 4, 5, 6), np.uint8), ValueError, "shape"),
    (np.zeros((2, 4, 4, 7), np.uint8), ValueError, "channels"),
])
def test_bad_images(bad, exc, word):
    with pytest.raises(exc, match=word):
        histeq.equalize(bad)
    with pytest.raises(exc, match=word):
        histeq.clahe(bad)


@pytest.mark.parametrize("kw,exc,word", [
    ({"mode": "hsv"}, ValueError, "mode"),
    ({"mode": 3}, TypeError, "mode"),
    ({"formula": "fast"}, ValueError, "formula"),
    ({"kernel": "fastest"}, ValueError, "kernel"),
    ({"kernel": None}, TypeError, "kernel"),
    ({"backend": "opencl"}, ValueError, "backend"),
])
def test_bad_options(kw, exc, word):
    with pytest.raises(exc, match=word):
        histeq.equalize(IMG, **kw)
    if "formula" not in kw:
        with pytest.raises(exc, match=word):
            histeq.histogram(IMG, **kw)


def test_bad_batch_flag_shapes():
    with pytest.raises(ValueError, match="batch"):
        histeq.equalize(IMG, batch=True)  # 2-D cannot be a batch
    with pytest.raises(ValueError, match="shape"):
        histeq.equalize(np.zeros((2, 3, 4, 5), np.uint8), batch=False)


@pytest.mark.parametrize("bins,exc", [(0, ValueError), (4097, ValueError), (-1, ValueError),
                                      (2.5, TypeError), (True, TypeError)])
def test_bad_bins(bins, exc):
    with pytest.raises(exc, match="bins"):
        histeq.histogram(IMG, bins=bins)


def test_colour_histogram_takes_256_bins_only():
    with pytest.raises(ValueError, match="bins"):
        histeq.histogram(rng_image((4, 4, 3)), bins=16)


def test_backend_cuda_without_a_device():
    if histeq.cuda_available():
        pytest.skip("a CUDA device is usable here")
    with pytest.raises(ValueError, match="backend"):
        histeq.equalize(IMG, backend="cuda")
    with pytest.raises(ValueError, match="backend"):
        histeq.histogram(IMG, backend="cuda")


def test_files_errors(tmp_path):
    with pytest.raises(TypeError, match="inputs"):
        histeq.equalize_files("a.png", tmp_path)
    with pytest.raises(ValueError, match="quality"):
        histeq.equalize_files([], tmp_path, quality=0)
    with pytest.raises(ValueError, match="would both write"):
        histeq.equalize_files(["a/x.png", "b/x.png"], tmp_path)
    with pytest.raises(ValueError, match="jobs"):
        histeq.equalize_files(["a.png"], tmp_path, jobs=-1)
    with pytest.raises(ValueError, match="format"):
        histeq.equalize_files(["a.png"], tmp_path, format="gif")
    with pytest.raises(ValueError, match="format"):
        histeq.equalize_files(["a.gif"], tmp_path)  # not writable in its own format
    with pytest.raises(ValueError, match="png_level"):
        histeq.equalize_files(["a.png"], tmp_path, png_level=10)
    with pytest.raises(ValueError, match="max_inflight_mb"):
        histeq.equalize_files(["a.png"], tmp_path, max_inflight_mb=0)
    with pytest.raises(ValueError, match="devices"):
        histeq.equalize_files(["a.png"], tmp_path, devices=[])
    with pytest.raises(ValueError, match="decoder"):
        histeq.equalize_files(["a.png"], tmp_path, decoder="fast")
    with pytest.raises(ValueError, match="subsampling"):
        histeq.equalize_files(["a.png"], tmp_path, subsampling="411")
    with pytest.raises(ValueError, match="errors"):
        histeq.equalize_files(["a.png"], tmp_path, errors="ignore")
    with pytest.raises(RuntimeError, match="missing.png"):
        histeq.equalize_files([str(tmp_path / "missing.png")], tmp_path / "out", backend="cpu",
                              errors="raise")
    notimg = tmp_path / "n.png"
    notimg.write_bytes(b"not an image")
    with pytest.raises(RuntimeError, match="n.png"):
        histeq.equalize_files([notimg], tmp_path / "out", backend="cpu", errors="raise")


def test_load_and_save_errors(tmp_path):
    with pytest.raises(RuntimeError, match="nope.png"):
        histeq.load_image(tmp_path / "nope.png")
    with pytest.raises(ValueError, match="gif"):
        histeq.save_image(IMG, tmp_path / "x.gif")
    with pytest.raises(RuntimeError):
        histeq.save_image(IMG, tmp_path / "no" / "such" / "dir" / "x.png")


def test_cuda_array_interface_with_wrong_dtype():
    class Fake:
        __cuda_array_interface__ = {"shape": (4, 4), "typestr": "<f4", "data": (0, False),
                                    "version": 3}
    with pytest.raises(TypeError, match="image"):
        histeq.equalize(Fake())


def test_cuda_array_interface_with_strides():
    class Fake:
        __cuda_array_interface__ = {"shape": (4, 4), "typestr": "|u1", "data": (0, False),
                                    "strides": (8, 1), "version": 3}
    with pytest.raises(ValueError, match="strides"):
        histeq.equalize(Fake())


def test_cuda_array_without_a_usable_gpu():
    if histeq.cuda_available():
        pytest.skip("a CUDA device is usable here")

    class Fake:
        __cuda_array_interface__ = {"shape": (4, 4), "typestr": "|u1", "data": (0, False),
                                    "version": 3}
    with pytest.raises(ValueError, match="image"):
        histeq.equalize(Fake())
    with pytest.raises(ValueError, match="image"):
        histeq.histogram(Fake())


def test_mixed_list():
    class Fake:
        __cuda_array_interface__ = {"shape": (4, 4), "typestr": "|u1", "data": (0, False),
                                    "version": 3}
    if histeq.cuda_available():
        pytest.skip("the fake device array would be probed on a real device")
    with pytest.raises((ValueError, RuntimeError)):
        histeq.equalize([IMG, Fake()])
