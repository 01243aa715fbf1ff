"""Every error path: a Python exception that names the argument, never a crash."""
from __future__ import annotations

import errno
import os

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


def test_a_named_kernel_with_the_cpu_backend_is_refused(tmp_path):
    """backend='cpu' runs no GPU kernel: a named one was run as the CPU's, silently; the
    command line refuses --kernel NAME with --backend cpu."""
    names = [k["name"] for k in histeq.kernels()]
    if not names:
        pytest.skip("built without CUDA: no named kernel")
    for fn in (histeq.equalize, histeq.histogram):
        with pytest.raises(ValueError, match="kernel: .*backend='cpu'"):
            fn(IMG, kernel=names[0], backend="cpu")
    histeq.save_image(tmp_path / "a.png", IMG)
    with pytest.raises(ValueError, match="kernel"):
        histeq.equalize_files([tmp_path / "a.png"], tmp_path / "o", kernel=names[0],
                              backend="cpu")
    assert not (tmp_path / "o").exists()


def test_a_side_past_the_c_int_is_a_value_error():
    """A count, height or width over 2**31 - 1 met nanobind's C int with its TypeError ("incompatible
    function arguments"), after a copy of the whole array; a broadcast view costs no memory."""
    for shape in ((1, 2**31), (2**31, 1), (2**31, 2, 2)):
        big = np.broadcast_to(np.uint8(0), shape)
        for fn in (histeq.equalize, histeq.histogram, histeq.clahe):
            with pytest.raises(ValueError, match="image: .*2\\*\\*31 - 1"):
                fn(big)
        with pytest.raises(ValueError, match="reference"):
            histeq.match_histograms(IMG, big)


def test_bad_batch_flag_shapes():
    with pytest.raises(ValueError, match="batch"):
        histeq.equalize(IMG, batch=True)  # 2-D cannot be a batch
    with pytest.raises(ValueError, match="shape"):
        histeq.equalize(np.zeros((2, 3, 4, 5), np.uint8), batch=False)


@pytest.mark.parametrize("flag", ["yes", "False", 1, [True]])
def test_a_batch_flag_that_is_no_bool_is_a_type_error(flag):
    """batch takes True, False or None: another value is a TypeError naming it (a truthy "yes"
    or "False" read as True said that a 2-D image is no batch)."""
    for fn in (histeq.equalize, histeq.clahe, histeq.histogram):
        with pytest.raises(TypeError, match="batch"):
            fn(IMG, batch=flag)
    with pytest.raises(TypeError, match="batch"):
        histeq.match_histograms(IMG, IMG, batch=flag)
    out = histeq.equalize(np.zeros((2, 4, 4), np.uint8), batch=np.bool_(True))  # NumPy's bool
    assert out.shape == (2, 4, 4)


def test_where_one_image_is_expected_a_batch_is_not_offered():
    """A 4-D array where one image is expected (save_image's image, a reference, an image with
    batch=False, an image of a list) is refused without naming a batch as the way out."""
    four = np.zeros((2, 4, 4, 3), np.uint8)
    calls = [lambda: histeq.save_image("x.png", four),
             lambda: histeq.match_histograms(IMG, four),
             lambda: histeq.match_files(["a.png"], "out", four),
             lambda: histeq.equalize(four, batch=False),
             lambda: histeq.equalize([IMG, four])]
    for call in calls:
        with pytest.raises(ValueError, match=r"shape \(H, W\) or \(H, W, C\)") as e:
            call()
        assert "batch (N" not in str(e.value), str(e.value)
    with pytest.raises(ValueError, match="batch"):  # where a batch is taken, it is named
        histeq.equalize(np.zeros((2, 2, 4, 4, 3), np.uint8))


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
    # past the command line's ranges: a ValueError naming the argument (not nanobind's TypeError)
    for kw, big in (("jobs", 2**40), ("max_inflight_mb", 2**70), ("max_pixels", 2**70)):
        with pytest.raises(ValueError, match=kw):
            histeq.equalize_files(["a.png"], tmp_path, **{kw: big})
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
    with pytest.raises(FileNotFoundError, match="missing.png") as e:
        histeq.equalize_files([str(tmp_path / "missing.png")], tmp_path / "out", backend="cpu",
                              errors="raise")
    assert e.value.filename == str(tmp_path / "missing.png")
    notimg = tmp_path / "n.png"
    notimg.write_bytes(b"not an image")
    with pytest.raises(ValueError, match="n.png"):
        histeq.equalize_files([notimg], tmp_path / "out", backend="cpu", errors="raise")
    with pytest.raises(FileNotFoundError, match="no such folder") as e:  # a missing folder
        histeq.equalize_files([str(tmp_path / "photos")], tmp_path / "out", backend="cpu")
    assert e.value.errno == errno.ENOENT and e.value.filename == str(tmp_path / "photos")


def test_load_and_save_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.png") as e:
        histeq.load_image(tmp_path / "nope.png")
    assert e.value.errno == errno.ENOENT and e.value.filename == str(tmp_path / "nope.png")
    with pytest.raises(IsADirectoryError):
        histeq.load_image(tmp_path)
    empty, junk = tmp_path / "empty.png", tmp_path / "junk.png"
    empty.write_bytes(b"")
    junk.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    for bad in (empty, junk):  # undecodable data: ValueError, not OSError
        with pytest.raises(ValueError, match=bad.name):
            histeq.load_image(bad)
        with pytest.raises(ValueError, match=bad.name):
            histeq.load_image(bad, depth=16)
    with pytest.raises(ValueError, match="gif"):
        histeq.save_image(tmp_path / "x.gif", IMG)
    with pytest.raises(FileNotFoundError):
        histeq.save_image(tmp_path / "no" / "such" / "dir" / "x.png", IMG)
    if os.geteuid() != 0:  # root may write anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        try:
            with pytest.raises(PermissionError):
                histeq.save_image(ro / "x.png", IMG)
        finally:
            ro.chmod(0o700)
    locked = tmp_path / "locked.png"
    histeq.save_image(locked, IMG)
    locked.chmod(0o400)  # a read-only file is refused, even to root
    with pytest.raises(PermissionError, match="read-only"):
        histeq.save_image(locked, IMG)


def test_save_image_takes_the_old_argument_order_with_a_warning(tmp_path):
    with pytest.warns(DeprecationWarning, match="save_image"):
        histeq.save_image(IMG, tmp_path / "old.png")
    np.testing.assert_array_equal(histeq.load_image(tmp_path / "old.png"), IMG)
    with pytest.raises(TypeError, match="path"):
        histeq.save_image(IMG, IMG)


def test_messages_speak_python():
    if histeq.cuda_available():
        pytest.skip("a CUDA device is usable here")
    with pytest.raises(ValueError) as e:
        histeq.equalize_files(["a.jpg"], "out", decoder="gpu", backend="cpu")
    assert "--" not in str(e.value) and "decoder" in str(e.value)
    with pytest.raises(ValueError) as e:
        histeq.equalize(IMG, backend="cuda")
    assert "--" not in str(e.value)


@pytest.mark.parametrize("shape", [(0, 4), (3, 0), (0, 0, 3)])
def test_save_image_of_no_pixel_is_a_value_error(tmp_path, shape):
    with pytest.raises(ValueError, match="no pixel"):
        histeq.save_image(tmp_path / "z.png", np.zeros(shape, np.uint8))
    assert not (tmp_path / "z.png").exists()


def test_a_run_that_cannot_start_makes_no_output_folder(tmp_path):
    """decoder='gpu' with no usable device: a ValueError naming the argument, as
    backend='cuda' (it was a RuntimeError), before any file and before any folder (the run
    makes its output folders once it can start)."""
    if not histeq._histeq.CUDA_BUILT or histeq.cuda_available():
        pytest.skip("needs a CUDA build without a usable device")
    src = tmp_path / "in.png"
    histeq.save_image(src, IMG)
    with pytest.raises(ValueError, match="decoder='gpu': no usable CUDA device"):
        histeq.equalize_files([src], tmp_path / "a" / "b", decoder="gpu")
    with pytest.raises(ValueError, match="backend='cuda': no usable CUDA device"):
        histeq.equalize_files([src], tmp_path / "a" / "b", backend="cuda")
    assert not (tmp_path / "a").exists()


def test_devices_with_the_cpu_backend_and_a_depth_of_another_type(tmp_path):
    """As the CLI refuses `--devices 0 --backend cpu` (a list that would start nothing), and
    as NumPy names a wrong type: a TypeError for depth='8', a ValueError for depth=12."""
    src = tmp_path / "in.png"
    histeq.save_image(src, IMG)
    with pytest.raises(ValueError, match="devices: .*backend='cpu'"):
        histeq.equalize_files([src], tmp_path / "o", devices=[0], backend="cpu")
    assert not (tmp_path / "o").exists()
    for bad in ("8", 8.0, True):
        with pytest.raises(TypeError, match="depth"):
            histeq.load_image(src, depth=bad)
        with pytest.raises(TypeError, match="depth"):
            histeq.equalize_files([src], tmp_path / "o", depth=bad)
    with pytest.raises(ValueError, match="depth"):
        histeq.load_image(src, depth=12)
    assert histeq.load_image(src, depth=np.int64(8)).dtype == np.uint8


def test_an_output_folder_that_cannot_be_made_is_an_oserror(tmp_path):
    src = tmp_path / "in.png"
    histeq.save_image(src, IMG)
    (tmp_path / "file").write_bytes(b"x")  # a file where a folder should be
    with pytest.raises(OSError) as e:
        histeq.equalize_files([src], tmp_path / "file" / "out")
    assert e.value.filename is not None and "file" in str(e.value.filename)
    assert not isinstance(e.value, RuntimeError)


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


@pytest.mark.parametrize("call, regions", [
    (lambda imgs, **kw: histeq.equalize(imgs, **kw), True),
    (lambda imgs, **kw: histeq.clahe(imgs, **kw), True),
    (lambda imgs, **kw: histeq.histogram(imgs, **kw), True),
    (lambda imgs, **kw: histeq.match_histograms(imgs, imgs[0], **kw), False),
])
def test_a_list_error_names_the_image(call, regions):
    """An error about one image of a list says which: a region outside it, a mask of another
    size, a dtype the functions do not take."""
    big, small = np.zeros((40, 40), np.uint8), np.zeros((10, 10), np.uint8)
    if regions:
        with pytest.raises(ValueError, match=r"roi.*\(image\[1\] of the list\)$"):
            call([big, small], roi=(5, 5, 20, 20))
        with pytest.raises(ValueError, match=r"mask.*\(image\[2\] of the list\)$"):
            call([big, big, small], mask=np.ones((40, 40), bool))
    with pytest.raises(TypeError, match=r"dtype float32.*\(image\[1\] of the list\)$"):
        call([big, small.astype(np.float32)])
    # an option's error is the call's, not an image's
    with pytest.raises(ValueError) as e:
        call([big, small], mode="hsv")
    assert "of the list" not in str(e.value)


@pytest.mark.parametrize("folder", ["CUDA runs", "cannot write"])
def test_raised_type_does_not_depend_on_the_words_of_a_path(tmp_path, folder):
    """errors="raise" picks the exception from the failure, not from words that happen to be in
    the file's path: an undecodable file is a ValueError wherever it lies."""
    d = tmp_path / folder
    d.mkdir()
    junk = d / "junk.png"
    junk.write_bytes(b"not an image")
    with pytest.raises(ValueError, match="junk.png") as e:
        histeq.equalize_files([junk], tmp_path / "out", backend="cpu", errors="raise")
    assert type(e.value) is ValueError


@pytest.mark.parametrize("kw", [{"jobs": "2"}, {"quality": 90.0}, {"png_level": 1.5},
                                {"max_inflight_mb": "64"}, {"max_pixels": 1e6},
                                {"devices": [0.0]}, {"devices": 0}, {"jobs": True}])
def test_files_option_of_a_wrong_type_is_a_type_error(tmp_path, kw):
    """An option that is not an int is a TypeError naming it (as save_image's quality, and
    NumPy's 'cannot be interpreted as an integer'); an int out of range stays a ValueError."""
    name = next(iter(kw))
    for fn in (histeq.equalize_files, histeq.clahe_files):
        with pytest.raises(TypeError, match=name):
            fn(["a.png"], tmp_path, **kw)
    with pytest.raises(TypeError, match=name):
        histeq.match_files(["a.png"], tmp_path, IMG, **kw)


def test_a_path_argument_that_is_no_path_is_named(tmp_path):
    """A path of the wrong type is a TypeError naming the argument (os.fsdecode's own message
    names none)."""
    for fn in (histeq.equalize_files, histeq.clahe_files):
        with pytest.raises(TypeError, match=r"inputs\[1\]"):
            fn(["a.png", 3], tmp_path)
        with pytest.raises(TypeError, match="output_dir"):
            fn(["a.png"], None)
    with pytest.raises(TypeError, match=r"inputs\[0\]"):
        histeq.match_files([None], tmp_path, IMG)
    with pytest.raises(TypeError, match="inputs"):
        histeq.equalize_files(None, tmp_path)
    with pytest.raises(TypeError, match="path"):
        histeq.load_image(3)


def test_a_failed_report_says_its_kind_errno_and_path(tmp_path):
    """A failed item's report names what failed (error_kind, from the library's exception type)
    and, for a file that could not be read or written, its errno and path; errors="raise" raises
    from them (an output that is a folder: IsADirectoryError naming the output)."""
    missing = tmp_path / "missing.png"
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"not an image")
    good = tmp_path / "good.png"
    histeq.save_image(good, IMG)
    out = tmp_path / "out"
    out.mkdir()
    (out / "good.png").mkdir()  # the good input's output path is a folder
    reps = histeq.equalize_files([missing, junk, good], out, backend="cpu")
    by = {os.path.basename(r["input"]): r for r in reps}
    m, j, g = by["missing.png"], by["junk.png"], by["good.png"]
    assert (m["error_kind"], m["errno"], m["error_path"]) == ("file", errno.ENOENT, str(missing))
    assert j["error_kind"] == "decode" and j["errno"] is None
    assert j["error_path"] is None
    assert (g["error_kind"], g["errno"]) == ("file", errno.EISDIR)
    assert g["error_path"] == str(out / "good.png")
    ok = histeq.equalize_files([good], tmp_path / "out2", backend="cpu")[0]
    assert ok["ok"] and ok["error_kind"] is None and ok["errno"] is None
    with pytest.raises(IsADirectoryError) as e:
        histeq.equalize_files([good], out, backend="cpu", errors="raise")
    assert e.value.filename == str(out / "good.png")
