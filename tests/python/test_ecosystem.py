"""The package as NumPy / OpenCV / scikit-image users expect it: OpenCV's BGR order, OpenCV's
CLAHE names and defaults, int64 histograms, results written without touching the input, the
`histeq` command beside an installed package, stubs that type-check user code. OpenCV cases
skip without cv2 (pip install opencv-python-headless)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import numpy as np
import pytest

import histeq
from conftest import NATURAL_DIR, REPO, rng_image


def _photo(name="chelsea.png"):
    """A colour photo (RGB) from the natural set or the samples."""
    for d in (NATURAL_DIR, REPO / "samples"):
        if (d / name).exists():
            img = histeq.load_image(d / name)
            if img.ndim == 3:
                return img
    return rng_image((96, 128, 3), seed=3, high=200)


def _colour_cases():
    photo = _photo()
    return [("photo", photo), ("random", rng_image((61, 77, 3), seed=5)),
            ("rgba", np.dstack([photo[:50, :70], rng_image((50, 70), seed=2)]))]


# ------------------------------------------------------------------------------ channel order

@pytest.mark.parametrize("name,rgb", _colour_cases(), ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("mode", [None, "gray", "rgb"])
@pytest.mark.parametrize("op", ["equalize", "clahe", "histogram"])
def test_bgr_is_rgb_with_the_channels_swapped(name, rgb, mode, op):
    """channel_order="bgr" on a BGR(A) array gives exactly the RGB result, in BGR(A) order."""
    order = [2, 1, 0, 3][:rgb.shape[2]]
    bgr = np.ascontiguousarray(rgb[..., order])
    fn = getattr(histeq, op)
    want, got = fn(rgb, mode=mode, backend="cpu"), fn(bgr, mode=mode, backend="cpu",
                                                      channel_order="bgr")
    if op == "histogram" and mode == "rgb":
        want = want[[2, 1, 0]]  # rgb mode's planes are the channels in the array's order
    elif op != "histogram" and want.ndim == 3:
        want = want[..., order]
    np.testing.assert_array_equal(got, want)


def test_bgr_without_saying_so_is_a_different_luma():
    rgb = _photo()
    bgr = np.ascontiguousarray(rgb[..., ::-1])
    assert not np.array_equal(histeq.equalize(bgr, mode="gray"),
                              histeq.equalize(rgb, mode="gray"))
    np.testing.assert_array_equal(histeq.equalize(bgr, mode="gray", channel_order="bgr"),
                                  histeq.equalize(rgb, mode="gray"))


def test_bgr_equals_opencvs_ycrcb_recipe():
    cv2 = pytest.importorskip("cv2")
    for _, rgb in _colour_cases()[:2]:
        bgr = np.ascontiguousarray(rgb[..., ::-1])
        ycc = cv2.cvtColor(bgr, cv2.COLOR_BGR2YCrCb)
        ycc[..., 0] = cv2.equalizeHist(np.ascontiguousarray(ycc[..., 0]))
        want = cv2.cvtColor(ycc, cv2.COLOR_YCrCb2BGR)
        got = histeq.equalize(bgr, channel_order="bgr")
        assert np.abs(got.astype(np.int16) - want).max() <= 1
        # and the Y plane itself exactly (the one-level slack is OpenCV's YCrCb2BGR rounding)
        np.testing.assert_array_equal(histeq.equalize(bgr, mode="gray", channel_order="bgr"),
                                      ycc[..., 0])
        ycc = cv2.cvtColor(bgr, cv2.COLOR_BGR2YCrCb)
        ycc[..., 0] = cv2.createCLAHE(2.0, (8, 8)).apply(np.ascontiguousarray(ycc[..., 0]))
        want = cv2.cvtColor(ycc, cv2.COLOR_YCrCb2BGR)
        got = histeq.clahe(bgr, 2.0, channel_order="bgr")
        assert np.abs(got.astype(np.int16) - want).max() <= 1


def test_channel_order_is_checked():
    with pytest.raises(ValueError, match="channel_order"):
        histeq.equalize(_photo(), channel_order="brg")
    with pytest.raises(TypeError, match="channel_order"):
        histeq.clahe(_photo(), channel_order=1)
    assert histeq.CHANNEL_ORDERS == ("rgb", "bgr")


# ---------------------------------------------------------------------------------- CLAHE API

def _gray():
    p = REPO / "samples" / "moon.png"
    return histeq.load_image(p) if p.exists() else rng_image((200, 300), seed=4, high=150)


def test_clahe_defaults_are_opencvs():
    cv2 = pytest.importorskip("cv2")
    g = _gray()
    np.testing.assert_array_equal(histeq.clahe(g, backend="cpu"), cv2.createCLAHE().apply(g))
    g16 = (g.astype(np.uint16) * 257) ^ rng_image(g.shape, seed=1).astype(np.uint16)
    np.testing.assert_array_equal(histeq.clahe(g16, backend="cpu"), cv2.createCLAHE().apply(g16))


@pytest.mark.parametrize("grid", [(4, 6), [4, 6], np.array([4, 6]), (np.int64(4), np.int32(6)),
                                  np.array([4, 6], dtype=np.uint8)])
def test_clahe_takes_opencvs_arguments_positionally_and_any_integer_grid(grid):
    cv2 = pytest.importorskip("cv2")
    g = _gray()
    want = cv2.createCLAHE(3.0, (4, 6)).apply(g)
    np.testing.assert_array_equal(histeq.clahe(g, 3.0, grid, backend="cpu"), want)
    np.testing.assert_array_equal(
        histeq.clahe(g, clip_limit=3.0, tile_grid_size=grid, backend="cpu"), want)


def test_clahe_grid_errors():
    g = _gray()
    for bad in ((4,), (4, 6, 8), np.array([[4, 6]]), (4.0, 6), "46", (True, 4)):
        with pytest.raises(TypeError, match="tile_grid_size"):
            histeq.clahe(g, 2.0, bad)
    with pytest.raises(TypeError):
        histeq.clahe(g, 2.0, (8, 8), "gray")  # mode and the rest are keywords


# ----------------------------------------------------------------------------------- dtypes

def test_histograms_are_int64_so_differences_are_signed():
    img = rng_image((40, 50), seed=7, high=200)
    h = histeq.histogram(img)
    assert h.dtype == np.int64
    np.testing.assert_array_equal(h, np.histogram(img, bins=256, range=(0, 256))[0])
    assert np.diff(h).min() < 0  # uint64 would have wrapped to 2**64 - k
    assert histeq.histogram(rng_image((3, 9, 9), seed=1)).dtype == np.int64
    assert histeq.histogram(img.astype(np.uint16) * 200).dtype == np.int64


# ------------------------------------------------------------------------------- host arrays

@pytest.mark.parametrize("op", ["equalize", "clahe"])
def test_the_input_is_read_in_place_and_left_alone(op):
    fn = getattr(histeq, op)
    for img in (rng_image((300, 257), seed=1, high=120), _photo()):
        before = img.copy()
        img.flags.writeable = False  # read-only arrays are taken (nothing is written to them)
        out = fn(img, backend="cpu")
        assert out.flags.c_contiguous and out.flags.writeable and out.flags.owndata
        assert not np.shares_memory(out, img)
        np.testing.assert_array_equal(img, before)
        np.testing.assert_array_equal(out, fn(before.copy(), backend="cpu"))


@pytest.mark.parametrize("shape", [(9, 31, 33), (3, 250, 260), (6, 20, 24, 3), (5, 17, 19, 4)])
@pytest.mark.parametrize("op", ["equalize", "clahe"])
def test_cpu_batches_spread_over_threads_equal_one_by_one(shape, op):
    fn = getattr(histeq, op)
    batch = rng_image(shape, seed=len(shape) + shape[0])
    batch[1] //= 2
    got = fn(batch, backend="cpu")
    for i in range(shape[0]):
        np.testing.assert_array_equal(got[i], fn(batch[i], backend="cpu", batch=False))


# ----------------------------------------------------------------------------- the package

def test_a_cpu_only_build_says_so():
    if histeq._histeq.CUDA_BUILT:
        pytest.skip("this build has CUDA")
    assert not histeq.cuda_available()
    assert "without CUDA" in histeq._cuda_why()
    assert histeq.kernels() == []
    with pytest.raises(ValueError, match="without CUDA"):
        histeq.equalize(rng_image((4, 4)), kernel="atomic")


def _installed() -> bool:
    return Path(histeq.__file__).parent.parent.name in ("site-packages", "dist-packages")


def test_the_histeq_command_is_installed_with_the_package():
    if not _installed():
        pytest.skip("histeq runs from the build tree (PYTHONPATH), not an installed package")
    exe = Path(sysconfig.get_path("scripts")) / "histeq"
    assert exe.exists(), f"no {exe}: the wheel's scripts lack the CLI"
    r = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    assert r.stdout.startswith(f"histeq {histeq.__version__}")


def test_the_stubs_type_check_user_code(tmp_path):
    pytest.importorskip("mypy")
    env = dict(os.environ)
    if not _installed():  # the build tree: mypy reads the stubs beside the package's sources
        env["MYPYPATH"] = str(Path(histeq.__file__).parent.parent)
    user = tmp_path / "user.py"
    user.write_text(textwrap.dedent("""
        import numpy as np
        import histeq
        img = np.zeros((8, 8), np.uint8)
        out: np.ndarray = histeq.equalize(img, channel_order="bgr")
        outs: list = histeq.equalize((img, img))
        c = histeq.clahe(img, 2.0, (4, 4))
        h = histeq.histogram(img)
        d = np.diff(h)
        histeq.save_image("x.png", out)
        back = histeq.load_image("x.png")
        h16 = histeq.histogram(img, np.int64(16))          # bins as NumPy's int, as at run time
        reports = histeq.equalize_files([b"a.png"], b"out")  # bytes paths, as os.fsdecode takes
        reports = histeq.clahe_files([b"a.png"], b"out", 2.0, (8, 8))
        reports = histeq.match_files([b"a.png"], b"out", b"ref.png")
    """))
    bad = tmp_path / "bad.py"
    bad.write_text("import histeq\nhisteq.equalize(None, mode='hsv')\n")
    ok = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", str(user)],
                        capture_output=True, text=True, cwd=tmp_path, env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    no = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", str(bad)],
                        capture_output=True, text=True, cwd=tmp_path, env=env)
    assert no.returncode != 0 and "mode" in no.stdout, no.stdout


def test_library_messages_speak_python():
    with pytest.raises(ValueError) as e:  # the executor's own check, through the compiled core
        histeq._histeq.run_files([("a.png", "b.png", "")], None, "opencv", "auto", "cpu", 95, 1,
                                 "420", -1, 0, [], 1 << 28)
    assert "jobs" in str(e.value) and "--" not in str(e.value)


def test_nothing_is_printed_on_import():
    r = subprocess.run([sys.executable, "-c", "import histeq"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONWARNINGS": "error"})
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr
    assert shutil.which(sys.executable)
