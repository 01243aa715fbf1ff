"""histeq.match_histograms against scikit-image's exposure.match_histograms (rounded half to even
to the image's dtype): gray images and each channel on its own (mode "rgb", scikit-image's
channel_axis=-1 channel by channel), on the shared photographs and on adversarial histograms, 8
and 16 bits; batches, lists, references of another depth or kind, and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import histeq
from conftest import NATURAL_DIR

exposure = pytest.importorskip("skimage.exposure")

BACKENDS = ["cpu", "auto"]


def sk(src: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """scikit-image's matching of one plane, rounded half to even to the source's dtype."""
    return np.rint(exposure.match_histograms(src, ref)).astype(src.dtype)


def sk_rgb(src: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Each channel on its own (scikit-image's channel_axis=-1 before its cast)."""
    return np.stack([sk(src[..., k], ref[..., k]) for k in range(src.shape[-1])], axis=-1)


def photos():
    """The shared photographs: (gray ones, colour ones), by name."""
    gray, colour = {}, {}
    for p in sorted(NATURAL_DIR.glob("*.png")) + sorted(NATURAL_DIR.glob("*.jpg")):
        img = histeq.load_image(p)
        if img.ndim == 2:
            gray[p.stem] = img
        elif img.shape[2] == 3:
            colour[p.stem] = img
    return gray, colour


GRAY, COLOUR = photos()
GRAY_PAIRS = [(a, b) for a in GRAY for b in GRAY if a != b][:12]
COLOUR_PAIRS = [(a, b) for a in COLOUR for b in COLOUR if a != b][:6]


def to16(img: np.ndarray, seed: int) -> np.ndarray:
    """A 16-bit image with every level used around the 8-bit one (v * 257 + noise)."""
    rng = np.random.default_rng(seed)
    return (img.astype(np.uint32) * 257 + rng.integers(0, 257, img.shape)).clip(0, 65535) \
        .astype(np.uint16)


def test_photographs_were_found():
    assert len(GRAY) >= 2 and len(COLOUR) >= 2, f"photographs missing in {NATURAL_DIR}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src,ref", GRAY_PAIRS, ids=[f"{a}-to-{b}" for a, b in GRAY_PAIRS])
def test_gray_photographs_equal_scikit_image(src, ref, backend):
    s, r = GRAY[src], GRAY[ref]
    got = histeq.match_histograms(s, r, backend=backend)
    assert got.dtype == np.uint8 and got.shape == s.shape
    np.testing.assert_array_equal(got, sk(s, r))
    assert not np.array_equal(got, s)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src,ref", GRAY_PAIRS[:4], ids=[f"{a}-to-{b}" for a, b in GRAY_PAIRS[:4]])
def test_gray_photographs_16bit_equal_scikit_image(src, ref, backend):
    s, r = to16(GRAY[src], 1), to16(GRAY[ref], 2)
    got = histeq.match_histograms(s, r, backend=backend)
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got, sk(s, r))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src,ref", COLOUR_PAIRS, ids=[f"{a}-to-{b}" for a, b in COLOUR_PAIRS])
def test_colour_photographs_per_channel_equal_scikit_image(src, ref, backend):
    s, r = COLOUR[src], COLOUR[ref]
    got = histeq.match_histograms(s, r, mode="rgb", backend=backend)
    assert got.shape == s.shape
    np.testing.assert_array_equal(got, sk_rgb(s, r))
    # 16 bits: colour is per channel whatever the mode's default
    s16, r16 = to16(s[:200, :300], 3), to16(r[:150, :250], 4)
    np.testing.assert_array_equal(histeq.match_histograms(s16, r16, backend=backend),
                                  sk_rgb(s16, r16))


def test_scikit_image_channel_axis_truncates_where_histeq_rounds():
    """scikit-image's channel_axis path writes float results into an array of the image's dtype
    (truncation); histeq rounds, as its gray path's np.rint: the two differ by at most 1 and
    equal after flooring histeq's rounding rule."""
    s, r = next(iter(COLOUR.values())), list(COLOUR.values())[1]
    theirs = exposure.match_histograms(s, r, channel_axis=-1)
    got = histeq.match_histograms(s, r, mode="rgb")
    diff = got.astype(np.int16) - theirs
    assert diff.min() >= 0 and diff.max() <= 1


def adversarial_cases(dtype):
    top = np.iinfo(dtype).max
    rng = np.random.default_rng(5)
    z = np.zeros((40, 50), dtype)
    two = z.copy()
    two[:, 25:] = top
    gappy = rng.choice(np.array([0, 3, top // 2, top - 1], dtype), size=(30, 40))
    ramp = np.tile(np.arange(0, 50, dtype=dtype) * (top // 49), (40, 1))
    noisy = rng.integers(0, top + 1, (33, 47)).astype(dtype)
    dark = np.where(rng.random((40, 50)) < 0.9, 0, rng.integers(0, top + 1, (40, 50))).astype(dtype)
    one = np.full((17, 9), top // 3, dtype)
    corner = np.full((1, 1), top, dtype)
    return [
        ("one-level-src", one, noisy),
        ("one-level-ref", noisy, one),
        ("both-one-level", one, np.full((3, 3), 7, dtype)),
        ("two-levels-src", two, ramp),
        ("two-levels-ref", ramp, two),
        ("gappy-ref", noisy, gappy),
        ("gappy-src", gappy, ramp),
        ("all-zero-src", z, noisy),
        ("all-zero-ref", noisy, z),
        ("mostly-zero", dark, noisy),
        ("to-mostly-zero", noisy, dark),
        ("one-pixel", corner, noisy),
        ("to-one-pixel", noisy, corner),
        ("top-level-src", np.full((4, 4), top, dtype), ramp),
    ]


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("backend", BACKENDS)
def test_adversarial_histograms_equal_scikit_image(dtype, backend):
    for name, s, r in adversarial_cases(dtype):
        got = histeq.match_histograms(s, r, backend=backend)
        np.testing.assert_array_equal(got, sk(s, r), err_msg=name)


def test_matching_to_itself_is_the_identity():
    for img in list(GRAY.values())[:3]:
        np.testing.assert_array_equal(histeq.match_histograms(img, img), img)


def test_gray_reference_for_every_channel_and_colour_reference_for_gray():
    s, c = next(iter(COLOUR.values())), list(COLOUR.values())[1]
    g = next(iter(GRAY.values()))
    got = histeq.match_histograms(s, g, mode="rgb")
    np.testing.assert_array_equal(got, np.stack([sk(s[..., k], g) for k in range(3)], -1))
    # a gray image to a colour reference: the reference's luma (its gray-mode plane)
    y_ref = histeq.match_histograms(c, c, mode="gray")  # matching to itself: the luma itself
    np.testing.assert_array_equal(histeq.match_histograms(g, c), sk(g, y_ref))


def test_luma_and_gray_modes_match_the_luma():
    s, r = list(COLOUR.values())[:2]
    y_src = histeq.match_histograms(s, s, mode="gray")
    y_ref = histeq.match_histograms(r, r, mode="gray")
    assert y_src.shape == s.shape[:2]
    got = histeq.match_histograms(s, r, mode="gray")
    np.testing.assert_array_equal(got, sk(y_src, y_ref))
    luma = histeq.match_histograms(s, r)  # default mode luma: chroma kept, channels kept
    assert luma.shape == s.shape and luma.dtype == np.uint8
    # its luma is the matched luma, up to the rounding of the YCbCr round trip
    assert np.abs(histeq.match_histograms(luma, luma, mode="gray").astype(np.int16) - got) \
        .max() <= 1
    # alpha is kept
    rgba = np.dstack([s, np.full(s.shape[:2], 77, np.uint8)])
    out = histeq.match_histograms(rgba, r)
    np.testing.assert_array_equal(out[..., 3], rgba[..., 3])
    np.testing.assert_array_equal(out[..., :3], luma)


def test_channel_order_bgr():
    s, r = list(COLOUR.values())[:2]
    for mode in (None, "gray", "rgb"):
        rgb = histeq.match_histograms(s, r, mode=mode)
        bgr = histeq.match_histograms(s[..., ::-1].copy(), r[..., ::-1].copy(), mode=mode,
                                      channel_order="bgr")
        np.testing.assert_array_equal(bgr, rgb[..., ::-1] if rgb.ndim == 3 else rgb)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_batches_and_lists_take_one_reference(dtype):
    rng = np.random.default_rng(9)
    top = np.iinfo(dtype).max
    batch = rng.integers(0, top // 2, (4, 30, 40)).astype(dtype)
    ref = rng.integers(top // 4, top, (25, 35)).astype(dtype)
    got = histeq.match_histograms(batch, ref)
    assert got.shape == batch.shape
    for k in range(4):
        np.testing.assert_array_equal(got[k], sk(batch[k], ref))
    lst = [batch[0], batch[1][:10, :13], batch[2][5:, 3:]]
    outs = histeq.match_histograms(lst, ref)
    assert isinstance(outs, list) and len(outs) == 3
    for o, s in zip(outs, lst):
        np.testing.assert_array_equal(o, sk(s, ref))
    colour = rng.integers(0, top, (3, 20, 24, 3)).astype(dtype)
    out = histeq.match_histograms(colour, ref, mode="rgb")
    for k in range(3):
        np.testing.assert_array_equal(out[k], np.stack(
            [sk(colour[k][..., c], ref) for c in range(3)], -1))


def test_reference_of_another_depth_is_converted_as_the_library_converts():
    g = list(GRAY.values())
    s8, r8 = g[0], g[1]
    r16 = r8.astype(np.uint16) * 257  # widened: narrowing gives r8 back
    np.testing.assert_array_equal(histeq.match_histograms(s8, r16), histeq.match_histograms(
        s8, r8))
    s16 = to16(s8, 7)
    np.testing.assert_array_equal(histeq.match_histograms(s16, r8), sk(s16, r16))
    noisy16 = to16(r8, 8)
    narrowed = ((noisy16.astype(np.uint32) + 128) // 257).astype(np.uint8)
    np.testing.assert_array_equal(histeq.match_histograms(s8, noisy16), sk(s8, narrowed))


def test_kinds_of_arrays():
    torch = pytest.importorskip("torch")
    s, r = list(GRAY.values())[:2]
    got = histeq.match_histograms(torch.from_numpy(s), torch.from_numpy(r))
    assert isinstance(got, torch.Tensor)
    np.testing.assert_array_equal(got.numpy(), sk(s, r))


def test_empty_image_and_errors():
    r = np.arange(256, dtype=np.uint8).reshape(16, 16)
    assert histeq.match_histograms(np.zeros((0, 5), np.uint8), r).shape == (0, 5)
    with pytest.raises(ValueError, match="reference"):
        histeq.match_histograms(r, np.zeros((0, 4), np.uint8))
    with pytest.raises(TypeError, match="reference"):
        histeq.match_histograms(r, [r, r])
    with pytest.raises(TypeError, match="reference"):
        histeq.match_histograms(r, r.astype(np.float32))
    with pytest.raises(TypeError, match="image"):
        histeq.match_histograms(r.astype(np.int16), r)
    with pytest.raises(ValueError, match="mode"):
        histeq.match_histograms(r, r, mode="hsv")
    with pytest.raises(ValueError, match="backend"):
        histeq.match_histograms(r, r, backend="gpu")
    c16 = np.zeros((4, 4, 3), np.uint16)
    with pytest.raises(ValueError, match="mode"):
        histeq.match_histograms(c16, c16, mode="luma")
    with pytest.raises(ValueError, match="reference"):
        histeq.match_histograms(np.zeros((4, 4), np.uint16), c16)


# ---------------------------------------------------------------------------------- GPU

def _gpu_cases():
    s, r = list(GRAY.values())[:2]
    cs, cr = list(COLOUR.values())[:2]
    rng = np.random.default_rng(11)
    return [
        ("gray", s, r, {}),
        ("gray-batch", rng.integers(0, 200, (5, 64, 80)).astype(np.uint8), r, {}),
        ("colour-luma", cs, cr, {}),
        ("colour-rgb", cs, cr, {"mode": "rgb"}),
        ("colour-gray", cs, cr, {"mode": "gray"}),
        ("colour-bgr", cs, cr, {"channel_order": "bgr"}),
        ("rgba", np.dstack([cs, cs[..., 0]]), cr, {}),
        ("gray-to-colour", s, cr, {}),
        ("16-bit", to16(s, 1), to16(r, 2), {}),
        ("16-bit-colour", to16(cs[:64, :64], 3), to16(cr, 4), {}),
        ("adversarial", *adversarial_cases(np.uint8)[5][1:], {}),
    ]


GPU_CASES = _gpu_cases()


@pytest.mark.parametrize("name,s,r,kw", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_torch_equals_cpu(torch_cuda, name, s, r, kw):
    torch = torch_cuda
    if s.dtype == np.uint16 and not hasattr(torch, "uint16"):
        pytest.skip("this torch has no uint16")
    want = histeq.match_histograms(s, r, backend="cpu", **kw)
    x = torch.from_numpy(s).cuda()
    for ref in (r, torch.from_numpy(r).cuda()):  # a host or a device reference
        got = histeq.match_histograms(x, ref, **kw)
        assert got.is_cuda and got.dtype == x.dtype
        np.testing.assert_array_equal(got.cpu().numpy(), want)
    np.testing.assert_array_equal(histeq.match_histograms(s, r, backend="cuda", **kw), want)


@pytest.mark.parametrize("name,s,r,kw", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_cupy_equals_cpu(cupy_cuda, name, s, r, kw):
    cupy = cupy_cuda
    want = histeq.match_histograms(s, r, backend="cpu", **kw)
    for ref in (r, cupy.asarray(r)):
        got = histeq.match_histograms(cupy.asarray(s), ref, **kw)
        assert isinstance(got, cupy.ndarray)
        np.testing.assert_array_equal(cupy.asnumpy(got), want)


def test_torch_list_and_stream(torch_cuda):
    torch = torch_cuda
    s, r = list(GRAY.values())[:2]
    xs = [torch.from_numpy(s).cuda(), torch.from_numpy(s[:100, :77].copy()).cuda()]
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        outs = histeq.match_histograms(xs, torch.from_numpy(r).cuda())
    stream.synchronize()
    np.testing.assert_array_equal(outs[0].cpu().numpy(), sk(s, r))
    np.testing.assert_array_equal(outs[1].cpu().numpy(), sk(s[:100, :77], r))
    with pytest.raises(ValueError, match="backend"):
        histeq.match_histograms(xs[0], r, backend="cpu")


# ---------------------------------------------------------------------------------- docs

def test_the_docs_example_runs(tmp_path, monkeypatch):
    """docs/python.md's example of matching and masks, run as written beside a copy of samples/
    (tests/python/test_readme.py does the same for the README's blocks)."""
    import pathlib
    import shutil
    root = pathlib.Path(__file__).resolve().parents[2]
    text = (root / "docs" / "python.md").read_text(encoding="utf-8")
    section = text.split("## Histogram matching and masked equalization", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "match_histograms" in code and "mask=" in code
    shutil.copytree(root / "samples", tmp_path / "samples")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/python.md", "exec"), {"__name__": "__docs__"})


# ---------------------------------------------------------------------------------- files, CLI

def test_match_histograms_equals_the_cli(tmp_path):
    import subprocess
    from test_files import _cli
    cli = _cli()
    s, r = list(GRAY.values())[:2]
    cs, cr = list(COLOUR.values())[:2]
    cases = [("gray", s, r, []), ("luma", cs, cr, []), ("rgb", cs, cr, ["--mode", "rgb"]),
             ("gray-to-colour", s, cr, []), ("16", to16(s, 1), to16(r, 2), [])]
    for name, img, ref, opts in cases:
        src, rp, dst = (tmp_path / f"{name}-{k}.png" for k in ("in", "ref", "out"))
        histeq.save_image(src, img)
        histeq.save_image(rp, ref)
        subprocess.run([cli, "match", str(src), "-o", str(dst), "--reference", str(rp),
                        "--backend", "cpu", "--quiet"] + opts, check=True)
        mode = opts[1] if opts else None
        np.testing.assert_array_equal(
            histeq.load_image(dst, depth=None),
            histeq.match_histograms(img, ref, mode=mode, backend="cpu"), err_msg=name)


def test_match_files_equals_the_arrays(tmp_path):
    s, r = list(GRAY.values())[:2]
    cs = list(COLOUR.values())[0]
    (tmp_path / "in").mkdir()
    inputs = []
    for name, img in (("a", s), ("b", cs), ("c", to16(s, 5))):
        histeq.save_image(tmp_path / "in" / f"{name}.png", img)
        inputs.append((name, img))
    histeq.save_image(tmp_path / "ref.png", r)
    for ref in (tmp_path / "ref.png", r):  # a file or an array
        reps = histeq.match_files([tmp_path / "in"], tmp_path / "out", ref, backend="cpu",
                                  errors="raise")
        assert [x["ok"] for x in reps] == [True] * 3
        for name, img in inputs:
            np.testing.assert_array_equal(
                histeq.load_image(tmp_path / "out" / f"{name}.png", depth=None),
                histeq.match_histograms(img, r, backend="cpu"), err_msg=name)
    with pytest.raises(ValueError, match="reference"):
        histeq.match_files([tmp_path / "in"], tmp_path / "x", np.zeros((0, 3), np.uint8))
    with pytest.raises(TypeError, match="reference"):
        histeq.match_files([tmp_path / "in"], tmp_path / "x", r.astype(np.float32))


def test_reference_messages_name_what_is_refused(tmp_path):
    g = np.arange(256, dtype=np.uint8).reshape(16, 16)
    c8 = np.dstack([g, g[::-1], g.T])
    # the image is 16-bit, the reference 8-bit: the message says which is which
    with pytest.raises(ValueError, match="16-bit gray image is matched to a colour reference") \
            as e:
        histeq.match_histograms(g.astype(np.uint16) * 257, c8)
    assert "16-bit colour reference" not in str(e.value)
    # a missing reference is not a list, and a list is what match_files refuses
    with pytest.raises(TypeError, match="reference: expected one image: .*; got NoneType") as e:
        histeq.match_histograms(g, None)
    assert "list of them" not in str(e.value)
    histeq.save_image(tmp_path / "a.png", g)
    with pytest.raises(TypeError, match="reference: expected one image .*got a list") as e:
        histeq.match_files([tmp_path / "a.png"], tmp_path / "o", reference=[g])
    assert "list of them" not in str(e.value)
    with pytest.raises(TypeError, match="reference: expected one image: .*; got NoneType"):
        histeq.match_files([tmp_path / "a.png"], tmp_path / "o", reference=None)
    assert not (tmp_path / "o").exists()


def test_match_files_decoder(tmp_path):
    g = np.arange(256, dtype=np.uint8).reshape(16, 16)
    r = np.repeat(np.arange(0, 256, 4, dtype=np.uint8), 4).reshape(16, 16)
    histeq.save_image(tmp_path / "a.jpg", g)
    want = {}
    for decoder in ("auto", "cpu"):
        reps = histeq.match_files([tmp_path / "a.jpg"], tmp_path / decoder, r, backend="cpu",
                                  decoder=decoder, errors="raise")
        assert reps[0]["decoder"] == "libjpeg-turbo"
        want[decoder] = (tmp_path / decoder / "a.jpg").read_bytes()
    assert want["auto"] == want["cpu"]
    # 'gpu' as equalize_files takes it (every JPEG on the device route): not on the CPU backend
    with pytest.raises(ValueError, match="decoder: 'gpu' needs"):
        histeq.match_files([tmp_path / "a.jpg"], tmp_path / "g", r, decoder="gpu", backend="cpu")
    with pytest.raises(ValueError, match="decoder"):
        histeq.match_files([tmp_path / "a.jpg"], tmp_path / "g", r, decoder="fast")
    assert not (tmp_path / "g").exists()


def test_the_compiled_matching_call_takes_one_form_of_reference():
    """stages_device's reference: counts (reference, ref_planes) or a gray image (ref_image,
    ref_pixels), not both, and an image of pixels: refused before any device work."""
    core = histeq._histeq
    if not hasattr(core, "stages_device"):
        pytest.skip("this build has no device calls (CPU-only)")
    args = (0, 0, 1 << 40, 1 << 41, 1, 2, 2, 1, None, "opencv", "auto", 0, None)
    with pytest.raises(ValueError, match="reference: its counts and its image, both"):
        core.stages_device(*args, 1 << 42, 1, 1 << 43, 4)
    with pytest.raises(ValueError, match="reference: an image of no pixel"):
        core.stages_device(*args, 0, 0, 1 << 43, 0)
