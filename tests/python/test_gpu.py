"""CUDA arrays (PyTorch, CuPy): zero copy, the caller's stream, no synchronize, batches and
lists. Skipped without a usable GPU or without torch / cupy. Every result is compared with the
NumPy CPU backend's (tied to OpenCV by test_numpy.py)."""
from __future__ import annotations

import numpy as np
import pytest

import histeq
from conftest import golden_pairs, rng_image


def ref(img: np.ndarray, **kw) -> np.ndarray:
    return histeq.equalize(img, backend="cpu", **kw)


@pytest.fixture
def batch_path():
    """Sets histeq's batched path for one test (histeq._set_batch_path), restored after it."""
    prev = histeq._set_batch_path("auto")
    yield histeq._set_batch_path
    histeq._set_batch_path(prev)


def test_batch_path_knob():
    prev = histeq._set_batch_path("queued")
    try:
        assert histeq._set_batch_path("two_launch") == "queued"
        with pytest.raises(ValueError, match="path"):
            histeq._set_batch_path("fast")
    finally:
        histeq._set_batch_path(prev)


def test_torch_batch_paths_interleaved_on_one_stream(torch_cuda, batch_path):
    """The paths share the device's scratch: calls that switch paths back to back, queued on one
    stream with no synchronize between them, each give their own batch's bytes."""
    torch = torch_cuda
    batches = [rng_image((n, 300, 257), seed=10 + n, high=60 + 20 * n) for n in (5, 9, 2, 9)]
    xs = [torch.from_numpy(b).cuda() for b in batches]
    outs = []
    for i, x in enumerate(xs * 2):
        batch_path(("queued", "two_launch", "table", "auto", "cluster")[i % 5])
        outs.append(histeq.equalize(x))
    for i, o in enumerate(outs):
        b = batches[i % len(batches)]
        oc = o.cpu().numpy()
        for k in range(b.shape[0]):
            np.testing.assert_array_equal(oc[k], ref(b[k]))


# ---------------------------------------------------------------------------------- torch

@pytest.mark.parametrize("shape", [(1, 1), (480, 640), (1000, 1001), (64, 64, 3), (50, 70, 4),
                                   (30, 20, 2)])
@pytest.mark.parametrize("mode", [None, "rgb", "gray"])
def test_torch_equals_cpu(torch_cuda, shape, mode):
    torch = torch_cuda
    img = rng_image(shape, seed=sum(shape), high=200)
    x = torch.from_numpy(img).cuda()
    y = histeq.equalize(x, mode=mode)
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == torch.uint8
    assert y.data_ptr() != x.data_ptr()
    torch.cuda.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), ref(img, mode=mode))


def test_torch_goldens(torch_cuda):
    torch = torch_cuda
    for name, src, golden in golden_pairs():
        img = histeq.load_image(src)
        y = histeq.equalize(torch.from_numpy(img).cuda()).cpu().numpy()
        np.testing.assert_array_equal(y, ref(img), err_msg=name)


def test_torch_is_ordered_on_the_current_stream_without_synchronizing(torch_cuda):
    torch = torch_cuda
    img = rng_image((2048, 2048), seed=1, high=180)
    src = torch.from_numpy(img).cuda()
    s = torch.cuda.Stream()

    def calls(x):
        return (histeq.equalize(x), histeq.histogram(x),
                histeq.equalize(x.view(4, 1024, 1024)),  # a batch of four 1M images (one launch)
                histeq.equalize([x[:1000], x[1000:]]))   # a list: the table path

    # Warm-up on the same stream: the first calls grow the device buffers, and freeing a
    # smaller buffer (cudaFree) synchronizes the device; steady-state calls allocate nothing.
    with torch.cuda.stream(s):
        calls(src.clone())
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        x = torch.zeros_like(src)
        torch.cuda._sleep(int(1e9))  # keeps the stream busy (~0.5 s): a sync would wait for it
        x.copy_(src)                 # the input exists only after the sleep, on this stream
        y, h, yb, yl = calls(x)
        assert not s.query(), "histeq.equalize synchronized the stream"
    s.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), ref(img))
    for i in range(4):
        np.testing.assert_array_equal(yb[i].cpu().numpy(), ref(img.reshape(4, 1024, 1024)[i]))
    np.testing.assert_array_equal(yl[0].cpu().numpy(), ref(img[:1000]))
    np.testing.assert_array_equal(yl[1].cpu().numpy(), ref(img[1000:]))
    np.testing.assert_array_equal(h.cpu().numpy(), np.bincount(img.ravel(), minlength=256))


def test_torch_default_stream_is_the_callers(torch_cuda):
    torch = torch_cuda
    img = rng_image((1024, 1024), seed=6, high=140)
    src = torch.from_numpy(img).cuda()
    torch.cuda.synchronize()
    assert torch.cuda.current_stream().cuda_stream == 0  # the legacy default stream
    x = torch.zeros_like(src)
    torch.cuda._sleep(int(2e8))
    x.copy_(src)  # on the default stream, after the sleep
    y = histeq.equalize(x)
    yb = histeq.equalize(x.view(4, 512, 512))
    torch.cuda.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), ref(img))
    np.testing.assert_array_equal(yb[3].cpu().numpy(), ref(img.reshape(4, 512, 512)[3]))


def test_torch_two_streams_share_the_buffers_safely(torch_cuda):
    torch = torch_cuda
    imgs = [rng_image((700, 900), seed=i, high=100 + 30 * i) for i in range(4)]
    streams = [torch.cuda.Stream() for _ in range(2)]
    outs = []
    for i, img in enumerate(imgs):
        with torch.cuda.stream(streams[i % 2]):
            outs.append(histeq.equalize(torch.from_numpy(img).cuda(non_blocking=False),
                                        kernel="atomic" if i == 1 else "auto"))
    torch.cuda.synchronize()
    for img, o in zip(imgs, outs):
        np.testing.assert_array_equal(o.cpu().numpy(), ref(img))


@pytest.mark.parametrize("path", ["auto", "queued", "two_launch", "cluster", "table"])
@pytest.mark.parametrize("n,h,w", [(64, 1024, 1024), (7, 100, 333), (3, 1, 1), (6, 1080, 1920),
                                   (5, 256, 256)])
def test_torch_batch_equals_one_by_one(torch_cuda, n, h, w, path, batch_path):
    torch = torch_cuda
    batch_path(path)
    batch = rng_image((n, h, w), seed=n)
    for i in range(n):
        batch[i] = batch[i] // (1 + i % 5)
    x = torch.from_numpy(batch).cuda()
    # batch=True: (3, 1, 1) would otherwise read as one 3x1 image with 1 channel (the documented
    # guess for a 3-D array whose last extent is 1..4)
    y = histeq.equalize(x, batch=True)
    assert y.shape == x.shape
    yc = y.cpu().numpy()
    for i in range(0, n, max(1, n // 8)):
        np.testing.assert_array_equal(yc[i], ref(batch[i]))
        np.testing.assert_array_equal(yc[i], histeq.equalize(x[i]).cpu().numpy())


def test_torch_colour_batch(torch_cuda):
    torch = torch_cuda
    batch = rng_image((5, 40, 50, 3), seed=2)
    y = histeq.equalize(torch.from_numpy(batch).cuda(), mode="rgb").cpu().numpy()
    for i in range(5):
        np.testing.assert_array_equal(y[i], ref(batch[i], mode="rgb"))


def test_torch_list_of_sizes(torch_cuda):
    torch = torch_cuda
    sizes = [(1, 1), (17, 19), (256, 64), (1000, 1000), (3, 16385)] + [(40 + i, 41) for i in range(70)]
    imgs = [rng_image(s, seed=i, high=60 + i % 190) for i, s in enumerate(sizes)]
    outs = histeq.equalize([torch.from_numpy(a).cuda() for a in imgs])
    for a, o in zip(imgs, outs):
        np.testing.assert_array_equal(o.cpu().numpy(), ref(a))


def test_torch_list_fast_path_shapes_and_fallbacks(torch_cuda):
    """Gray lists take one allocation cut into views: (H, W, 1) keeps its shape, an empty image
    is fine, outputs are disjoint; a list with a colour image or a non-contiguous tensor falls
    back to the general path with the same results."""
    torch = torch_cuda
    imgs = [rng_image((30, 20, 1), seed=1), rng_image((0, 5), seed=2),
            rng_image((7, 9), seed=3, high=40), rng_image((64, 33), seed=4)]
    xs = [torch.from_numpy(a).cuda() for a in imgs]
    outs = histeq.equalize(xs)
    assert [tuple(o.shape) for o in outs] == [a.shape for a in imgs]
    for a, o in zip(imgs, outs):
        assert o.is_cuda and o.dtype == torch.uint8
        np.testing.assert_array_equal(o.cpu().numpy(), ref(a) if a.size else a)
    outs[2].fill_(7)  # disjoint views: the others are untouched
    np.testing.assert_array_equal(outs[3].cpu().numpy(), ref(imgs[3]))
    col = rng_image((10, 12, 3), seed=5)
    t = torch.from_numpy(rng_image((12, 10), seed=6)).cuda().t()  # non-contiguous
    with pytest.raises(ValueError, match="strides"):
        histeq.equalize([xs[3], t])
    mixed = histeq.equalize([xs[3], torch.from_numpy(col).cuda()])
    np.testing.assert_array_equal(mixed[1].cpu().numpy(), ref(col))
    np.testing.assert_array_equal(mixed[0].cpu().numpy(), ref(imgs[3]))


def test_torch_errors(torch_cuda):
    torch = torch_cuda
    x = torch.zeros((10, 10), dtype=torch.float32, device="cuda")
    with pytest.raises(TypeError, match="dtype"):
        histeq.equalize(x)
    y = torch.zeros((10, 20), dtype=torch.uint8, device="cuda")
    with pytest.raises(ValueError, match="strides"):
        histeq.equalize(y.t())
    with pytest.raises(ValueError, match="backend"):
        histeq.equalize(y, backend="cpu")
    with pytest.raises(ValueError, match="kernel"):
        histeq.equalize(y, kernel="nope")


def test_torch_histogram(torch_cuda):
    torch = torch_cuda
    img = rng_image((3, 300, 200), seed=9)
    h = histeq.histogram(torch.from_numpy(img).cuda(), bins=64)
    assert h.shape == (3, 64) and h.dtype == torch.int64 and h.is_cuda
    for i in range(3):
        np.testing.assert_array_equal(h[i].cpu().numpy(),
                                      np.bincount(img[i].ravel() >> 2, minlength=64))


# ---------------------------------------------------------------------------------- cupy

@pytest.mark.parametrize("shape", [(333, 444), (64, 64, 3), (4, 100, 100), (2, 30, 30, 4)])
def test_cupy_equals_cpu(cupy_cuda, shape):
    cp = cupy_cuda
    img = rng_image(shape, seed=len(shape))
    x = cp.asarray(img)
    y = histeq.equalize(x)
    assert isinstance(y, cp.ndarray) and y.device.id == x.device.id
    assert y.data.ptr != x.data.ptr
    got = cp.asnumpy(y)
    if len(shape) == 4 or (len(shape) == 3 and shape[-1] > 4):
        for i in range(shape[0]):
            np.testing.assert_array_equal(got[i], ref(img[i]))
    else:
        np.testing.assert_array_equal(got, ref(img))


def test_cupy_on_its_current_stream(cupy_cuda):
    cp = cupy_cuda
    img = rng_image((1500, 1500), seed=4, high=77)
    src = cp.asarray(img)
    cp.cuda.Device().synchronize()
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.zeros_like(src)
        x[...] = src  # on s
        y = histeq.equalize(x)
    s.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(y), ref(img))


def test_cupy_list_and_histogram(cupy_cuda):
    cp = cupy_cuda
    imgs = [rng_image((10 + 7 * i, 300 - i), seed=i) for i in range(10)]
    outs = histeq.equalize([cp.asarray(a) for a in imgs])
    for a, o in zip(imgs, outs):
        np.testing.assert_array_equal(cp.asnumpy(o), ref(a))
    h = histeq.histogram(cp.asarray(imgs[0]))
    assert h.dtype == np.int64
    np.testing.assert_array_equal(cp.asnumpy(h), np.bincount(imgs[0].ravel(), minlength=256))


def test_cuda_array_interface_object(cupy_cuda):
    cp = cupy_cuda
    img = rng_image((50, 60), seed=3)
    base = cp.asarray(img)

    class Wrapper:  # a foreign CUDA array: only the interface
        __cuda_array_interface__ = base.__cuda_array_interface__

    y = histeq.equalize(Wrapper())
    assert isinstance(y, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(y), ref(img))


def test_torch_dlpack_via_cupy(torch_cuda, cupy_cuda):
    torch = torch_cuda
    img = rng_image((64, 80), seed=5)
    t = torch.from_numpy(img).cuda()

    class Capsule:  # only the DLPack protocol
        def __dlpack__(self, stream=None):
            return t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    y = histeq.equalize(Capsule())
    np.testing.assert_array_equal(cupy_cuda.asnumpy(y), ref(img))


# ---------------------------------------------------------------------------------- numpy on GPU

@pytest.mark.parametrize("shape", [(16, 256, 256), (3, 1000, 1001), (5, 7, 9, 1)])
def test_numpy_gray_batch_on_the_gpu(cuda, shape):
    batch = rng_image(shape, seed=shape[0], high=150)
    got = histeq.equalize(batch, backend="cuda", batch=True)
    assert isinstance(got, np.ndarray) and got.shape == batch.shape
    for i in range(shape[0]):
        np.testing.assert_array_equal(got[i], ref(batch[i]))


def test_numpy_histograms_on_the_gpu(cuda):
    img = rng_image((300, 301), seed=2)
    for bins in (7, 256, 4096):
        np.testing.assert_array_equal(histeq.histogram(img, bins=bins, backend="cuda"),
                                      histeq.histogram(img, bins=bins, backend="cpu"))


# ---------------------------------------------------------------------------- CLAHE and 16-bit

def u16(shape, seed, low=0, high=65536):
    return np.random.default_rng(seed).integers(low, high, size=shape).astype(np.uint16)


@pytest.mark.parametrize("dtype", ["uint8", "uint16"])
@pytest.mark.parametrize("shape", [(1, 1), (300, 257), (3, 130, 170), (64, 48, 1)])
def test_torch_clahe_equals_cpu(torch_cuda, dtype, shape):
    """Gray CUDA tensors on the device's gpu::Clahe, on a side stream the caller chose: the same
    bytes as the CPU backend, in a tensor of the same dtype on the same device."""
    torch = torch_cuda
    if dtype == "uint16" and not hasattr(torch, "uint16"):
        pytest.skip("this torch has no uint16")
    img = rng_image(shape, seed=3, high=200) if dtype == "uint8" else u16(shape, 3, 900, 1300)
    is_batch = len(shape) == 3 and shape[2] > 4
    x = torch.from_numpy(img).cuda()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = histeq.clahe(x, clip_limit=3.0, tile_grid_size=(5, 3), batch=is_batch)
    s.synchronize()
    assert y.device == x.device and y.dtype == x.dtype and y.shape == x.shape
    want = histeq.clahe(img, clip_limit=3.0, tile_grid_size=(5, 3), backend="cpu", batch=is_batch)
    np.testing.assert_array_equal(y.cpu().numpy(), want)


@pytest.mark.parametrize("dtype", ["uint8", "uint16"])
@pytest.mark.parametrize("shape", [(300, 257), (300, 257, 1), (3, 130, 170), (2, 40, 50, 1)])
def test_torch_gray_shortcut_on_a_side_stream_equals_cpu(torch_cuda, dtype, shape):
    """Gray tensors with the default options take the shortcut (histeq._arrays.torch_gray) in
    every entry point: queued on the caller's side stream, the CPU backend's bytes."""
    torch = torch_cuda
    if dtype == "uint16" and not hasattr(torch, "uint16"):
        pytest.skip("this torch has no uint16")
    img = rng_image(shape, seed=12, high=220) if dtype == "uint8" else u16(shape, 12, 100, 3000)
    ref = rng_image((90, 70), seed=13)
    x = torch.from_numpy(img).cuda()
    assert histeq._arrays.torch_gray(x, None) is not None
    calls = {"equalize": histeq.equalize, "clahe": histeq.clahe, "histogram": histeq.histogram}
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        outs = {name: fn(x) for name, fn in calls.items()}
        if dtype == "uint8":
            outs["match"] = histeq.match_histograms(x, torch.from_numpy(ref).cuda())
    s.synchronize()
    for name, fn in calls.items():
        assert outs[name].is_cuda
        np.testing.assert_array_equal(outs[name].cpu().numpy(), fn(img, backend="cpu"),
                                      err_msg=name)
    if dtype == "uint8":
        np.testing.assert_array_equal(outs["match"].cpu().numpy(),
                                      histeq.match_histograms(img, ref, backend="cpu"))


@pytest.mark.parametrize("shortcut", [True, False])
@pytest.mark.parametrize("shape", [(300, 257), (300, 257, 1), (3, 130, 170), (2, 40, 50, 1),
                                   (0, 7)])
def test_torch_masked_gray_on_a_side_stream_equals_cpu(torch_cuda, shape, shortcut,
                                                       monkeypatch):
    """Gray 8-bit tensors with a device mask (bool, uint8, int8 in place; int32 as != 0) and/or
    a rectangle take the region's shortcut (histeq._region.torch_region) in equalize and
    histogram: queued on the caller's side stream, the CPU backend's bytes; the same without
    the shortcut. A mask emptied in place gives the error."""
    torch = torch_cuda
    if not shortcut:
        monkeypatch.setattr(histeq._arrays, "torch_gray", lambda x, batch: None)
    img = rng_image(shape, seed=14, high=220)
    is_batch = len(shape) == 4 or (len(shape) == 3 and shape[2] > 4)
    h, w = shape[1:3] if is_batch else shape[:2]
    counted = np.random.default_rng(15).random((h, w)) < 0.4
    counted[h // 3:, : w // 2] = False  # none in the lower left
    counted.flat[:1] = True
    roi = (0, 0, max(w // 2, 1), max(h // 3, 1)) if h * w else None
    x = torch.from_numpy(img).cuda()
    masks = [torch.from_numpy(counted).cuda(), torch.from_numpy(counted * np.uint8(200)).cuda(),
             torch.from_numpy(counted * np.int8(-3)).cuda(),
             torch.from_numpy(counted * np.int32(70000)).cuda()]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    for kw_dev, kw_host in [({"mask": m}, {"mask": counted}) for m in masks] + [
            ({"roi": roi}, {"roi": roi}), ({"mask": masks[0], "roi": roi},
                                           {"mask": counted, "roi": roi})]:
        if kw_host.get("roi", 0) is None:
            continue
        if shortcut:
            got = histeq._region.torch_region(kw_dev.get("mask"), kw_dev.get("roi"),
                                              x.get_device(), h, w)
            assert got is not None
        with torch.cuda.stream(s):
            eq = histeq.equalize(x, batch=is_batch, **kw_dev)
            hs = histeq.histogram(x, batch=is_batch, **kw_dev)
        s.synchronize()
        np.testing.assert_array_equal(
            eq.cpu().numpy(), histeq.equalize(img, batch=is_batch, backend="cpu", **kw_host))
        np.testing.assert_array_equal(
            hs.cpu().numpy(), histeq.histogram(img, batch=is_batch, backend="cpu", **kw_host))
    if h * w:
        m = masks[0]
        m[: h // 3].zero_()  # through views: torch's version counter moves for m too
        m[h // 3:].zero_()
        with pytest.raises(ValueError, match="mask: the mask counts no pixel"):
            histeq.equalize(x, batch=is_batch, mask=m)
        with pytest.raises(ValueError, match="mask: the mask counts no pixel"):
            histeq.histogram(x, batch=is_batch, mask=m)


def test_torch_clahe_colour_goes_through_the_host(torch_cuda):
    torch = torch_cuda
    img = rng_image((40, 50, 3), seed=4)
    y = histeq.clahe(torch.from_numpy(img).cuda(), mode="rgb")
    assert y.is_cuda and y.shape == (40, 50, 3)
    np.testing.assert_array_equal(y.cpu().numpy(), histeq.clahe(img, mode="rgb", backend="cpu"))


@pytest.mark.parametrize("shape", [(300, 257), (4, 100, 90), (1, 1)])
def test_torch_uint16_equalize_and_histogram(torch_cuda, shape):
    torch = torch_cuda
    if not hasattr(torch, "uint16"):
        pytest.skip("this torch has no uint16")
    img = u16(shape, 5, 1000, 1200)
    is_batch = len(shape) == 3
    x = torch.from_numpy(img).cuda()
    y = histeq.equalize(x, batch=is_batch)
    assert y.dtype == torch.uint16 and y.is_cuda
    np.testing.assert_array_equal(y.cpu().numpy(),
                                  histeq.equalize(img, backend="cpu", batch=is_batch))
    h = histeq.histogram(x, batch=is_batch)
    assert h.dtype == torch.int64 and h.shape[-1] == 65536
    np.testing.assert_array_equal(h.cpu().numpy(),
                                  histeq.histogram(img, backend="cpu", batch=is_batch))


@pytest.mark.parametrize("shortcut", [True, False])
@pytest.mark.parametrize("shape", [(0, 5), (2, 0, 5)])
def test_torch_uint16_histogram_of_an_image_without_pixels(torch_cuda, shape, shortcut,
                                                           monkeypatch):
    """No pixel: 65536 zeros per image, as 8-bit images count 256 (the counts are zeroed with
    zero_: a torch tensor has no fill), through the gray tensors' shortcut and without it."""
    torch = torch_cuda
    if not hasattr(torch, "uint16"):
        pytest.skip("this torch has no uint16")
    if not shortcut:
        monkeypatch.setattr(histeq._arrays, "torch_gray", lambda x, batch: None)
    is_batch = len(shape) == 3
    h = histeq.histogram(torch.empty(shape, dtype=torch.uint16, device="cuda"), batch=is_batch)
    assert h.is_cuda and h.dtype == torch.int64
    np.testing.assert_array_equal(h.cpu().numpy(), np.zeros(shape[:-2] + (65536,), np.int64))


def test_numpy_16bit_and_clahe_on_the_gpu(cuda):
    img16 = u16((120, 130), 6, 0, 5000)
    np.testing.assert_array_equal(histeq.equalize(img16, backend="cuda"),
                                  histeq.equalize(img16, backend="cpu"))
    np.testing.assert_array_equal(histeq.histogram(img16, backend="cuda"),
                                  histeq.histogram(img16, backend="cpu"))
    for img in (img16, rng_image((120, 130, 3), seed=7)):
        np.testing.assert_array_equal(histeq.clahe(img, backend="cuda"),
                                      histeq.clahe(img, backend="cpu"))


def test_cupy_uint16_and_clahe(cupy_cuda):
    cupy = cupy_cuda
    img16 = u16((77, 91), 8, 100, 400)
    y = histeq.equalize(cupy.asarray(img16))
    assert isinstance(y, cupy.ndarray) and y.dtype == np.uint16
    np.testing.assert_array_equal(cupy.asnumpy(y), histeq.equalize(img16, backend="cpu"))
    img8 = rng_image((77, 91), seed=9)
    np.testing.assert_array_equal(cupy.asnumpy(histeq.clahe(cupy.asarray(img8))),
                                  histeq.clahe(img8, backend="cpu"))
    h = histeq.histogram(cupy.asarray(img16))
    assert h.dtype == np.int64
    np.testing.assert_array_equal(cupy.asnumpy(h), histeq.histogram(img16, backend="cpu"))


def test_torch_uint16_colour_goes_through_the_host(torch_cuda):
    torch = torch_cuda
    if not hasattr(torch, "uint16"):
        pytest.skip("this torch has no uint16")
    img = u16((30, 40, 3), 10, 0, 3000)
    x = torch.from_numpy(img).cuda()
    for fn in (histeq.equalize, histeq.clahe):
        y = fn(x)
        assert y.is_cuda and y.dtype == torch.uint16 and y.shape == x.shape
        np.testing.assert_array_equal(y.cpu().numpy(), fn(img, backend="cpu"))
    h = histeq.histogram(x)
    assert h.is_cuda and h.dtype == torch.int64 and h.shape == (3, 65536)
    np.testing.assert_array_equal(h.cpu().numpy(),
                                  histeq.histogram(img, backend="cpu"))


def test_torch_clahe_and_16bit_on_streams_after_the_callers_work(torch_cuda):
    """The CLAHE and 16-bit engines run on the caller's stream itself: work queued before the
    call on that stream (a copy held back by a sleep) is seen, calls on two streams in turn share
    the engines' buffers safely, and nothing synchronizes the device."""
    torch = torch_cuda
    imgs = [rng_image((600, 700), seed=i, high=90 + 40 * i) for i in range(4)]
    srcs = [torch.from_numpy(im).cuda() for im in imgs]
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream() for _ in range(2)]
    outs, eqs = [], []
    for i, src in enumerate(srcs):
        with torch.cuda.stream(streams[i % 2]):
            x = torch.zeros_like(src)
            torch.cuda._sleep(int(5e7))
            x.copy_(src)
            outs.append(histeq.clahe(x, 2.0, (6, 4)))
            if hasattr(torch, "uint16"):
                eqs.append(histeq.equalize((x.to(torch.int32) * 257).to(torch.uint16)))
    torch.cuda.synchronize()
    for i, (img, o) in enumerate(zip(imgs, outs)):
        np.testing.assert_array_equal(o.cpu().numpy(),
                                      histeq.clahe(img, 2.0, (6, 4), backend="cpu"))
        if eqs:
            want = histeq.equalize(img.astype(np.uint16) * 257, backend="cpu")
            np.testing.assert_array_equal(eqs[i].cpu().numpy(), want)


@pytest.mark.parametrize("lib", ["torch_cuda", "cupy_cuda"])
@pytest.mark.parametrize("mode", [None, "gray", "rgb"])
def test_cuda_bgr_arrays(request, lib, mode):
    """channel_order="bgr" on CUDA arrays (a swapped copy on the device for luma and gray): the
    RGB result with the channels swapped, as on the host."""
    m = request.getfixturevalue(lib)
    to_host = (lambda a: a.cpu().numpy()) if lib == "torch_cuda" else m.asnumpy
    rgb = rng_image((90, 110, 4), seed=8)
    bgr = np.ascontiguousarray(rgb[..., [2, 1, 0, 3]])
    x = m.from_numpy(bgr).cuda() if lib == "torch_cuda" else m.asarray(bgr)
    want = histeq.equalize(bgr, mode=mode, channel_order="bgr", backend="cpu")
    np.testing.assert_array_equal(to_host(histeq.equalize(x, mode=mode, channel_order="bgr")),
                                  want)
    np.testing.assert_array_equal(
        to_host(histeq.histogram(x, mode=mode, channel_order="bgr")),
        histeq.histogram(bgr, mode=mode, channel_order="bgr", backend="cpu"))
    np.testing.assert_array_equal(  # host arrays on the GPU backend: swapped on the host
        histeq.equalize(bgr, mode=mode, channel_order="bgr", backend="cuda"), want)


# ---------------------------------------------------------------------------------------- out=

_OUT_MASK = np.random.default_rng(15).random((130, 170)) < 0.4
#: (entry point, host image, keyword arguments) for out= on CUDA arrays: every way a call reaches
#: the device (the shortcuts and the general path, the kernels that write in place and those
#: that do not, the calls through the host).
_GPU_OUT_CASES = [
    ("equalize", rng_image((300, 257), seed=20, high=220), {}),
    ("equalize", rng_image((5, 130, 170), seed=21, high=220), {}),
    ("equalize", rng_image((130, 170, 3), seed=22), {}),
    ("equalize", rng_image((130, 170, 4), seed=23), {"channel_order": "bgr"}),
    ("equalize", rng_image((2, 130, 170, 3), seed=24), {"mode": "rgb"}),
    ("equalize", rng_image((130, 170, 3), seed=25), {"mode": "gray"}),
    ("equalize", rng_image((130, 170), seed=26), {"mask": _OUT_MASK}),
    ("equalize", rng_image((3, 130, 170), seed=27), {"roi": (5, 6, 60, 70)}),
    ("equalize", u16((300, 257), 28, 100, 3000), {}),
    ("equalize", u16((3, 130, 170), 29, 100, 3000), {}),
    ("equalize", u16((130, 170, 3), 30), {"mode": "rgb"}),
    ("clahe", rng_image((300, 257), seed=31, high=220), {}),
    ("clahe", rng_image((3, 130, 170), seed=32, high=220), {}),
    ("clahe", u16((300, 257), 33, 100, 3000), {}),
    ("clahe", rng_image((130, 170, 3), seed=34), {}),
    ("clahe", rng_image((130, 170), seed=35), {"mask": _OUT_MASK}),
    ("match_histograms", rng_image((300, 257), seed=36, high=220), {}),
    ("match_histograms", rng_image((130, 170, 3), seed=37), {}),
    ("match_histograms", u16((130, 170), 38, 100, 3000), {}),
    ("histogram", rng_image((300, 257), seed=39), {}),
    ("histogram", rng_image((4, 130, 170), seed=40), {}),
    ("histogram", rng_image((130, 170, 3), seed=41), {"mode": "rgb"}),
    ("histogram", rng_image((130, 170), seed=42), {"mask": _OUT_MASK}),
    ("histogram", u16((300, 257), 43), {}),
]
_OUT_REF = rng_image((90, 70), seed=13)


@pytest.mark.parametrize("shortcut", [True, False])
@pytest.mark.parametrize("lib", ["torch_cuda", "cupy_cuda"])
@pytest.mark.parametrize("fn,img,kw", _GPU_OUT_CASES)
def test_out_on_a_side_stream_equals_cpu(request, fn, img, kw, lib, shortcut, monkeypatch):
    """out= on CUDA arrays, queued on the caller's side stream: out holds the CPU backend's
    bytes and is returned; so does the image itself as out (in place) where the result has its
    shape and dtype, and an out that overlaps the image (the same rows, one row down)."""
    m = request.getfixturevalue(lib)
    if lib == "torch_cuda" and img.dtype == np.uint16 and not hasattr(m, "uint16"):
        pytest.skip("this torch has no uint16")
    if not shortcut:
        monkeypatch.setattr(histeq._arrays, "torch_gray", lambda x, batch: None)
        monkeypatch.setattr(histeq._arrays, "cupy_gray", lambda x, batch: None)
    to_host = (lambda a: a.cpu().numpy()) if lib == "torch_cuda" else m.asnumpy

    def up(a):
        return m.from_numpy(np.ascontiguousarray(a)).cuda() if lib == "torch_cuda" else \
            m.asarray(a)
    if fn == "match_histograms":
        want = histeq.match_histograms(img, _OUT_REF, backend="cpu")
        dev_ref = up(_OUT_REF)
        call = lambda x, out: histeq.match_histograms(x, dev_ref, out=out)  # noqa: E731
    else:
        want = getattr(histeq, fn)(img, backend="cpu", **kw)
        dev_kw = {k: up(v) if k == "mask" else v for k, v in kw.items()}
        call = lambda x, out: getattr(histeq, fn)(x, out=out, **dev_kw)  # noqa: E731
    x, out = up(img), up(np.full(want.shape, 7, want.dtype))
    in_place = want.shape == img.shape and want.dtype == img.dtype
    x2 = up(img)
    base = up(np.concatenate([img, img[:1]]))  # base[:-1] is img; base[1:] overlaps it
    if lib == "torch_cuda":
        m.cuda.synchronize()
        s = m.cuda.Stream()
        ctx = m.cuda.stream(s)
    else:
        m.cuda.Device().synchronize()
        s = m.cuda.Stream(non_blocking=True)
        ctx = s
    below = base[1:]
    with ctx:
        got = call(x, out)
        if in_place:
            got2 = call(x2, x2)
            got3 = call(base[:-1], below)
    s.synchronize()
    assert got is out
    np.testing.assert_array_equal(to_host(out), want)
    if in_place:
        assert got2 is x2 and got3 is below
        np.testing.assert_array_equal(to_host(x2), want, err_msg="in place")
        np.testing.assert_array_equal(to_host(below), want, err_msg="overlapping")
        np.testing.assert_array_equal(to_host(base[:1]), img[:1])


@pytest.mark.parametrize("path", ["auto", "queued", "two_launch", "cluster", "table"])
@pytest.mark.parametrize("n,h,w", [(1, 1000, 1001), (7, 100, 333), (6, 1080, 1920),
                                   (3, 512, 512)])
def test_torch_equalize_in_place_on_every_batch_path(torch_cuda, n, h, w, path, batch_path):
    """Gray tensors equalized in place: the batched kernels (every path) and, for one image,
    the list kernel write the image's own memory; the CPU backend's bytes."""
    torch = torch_cuda
    batch_path(path)
    img = rng_image((n, h, w), seed=n + h, high=180)
    x = torch.from_numpy(img).cuda()
    assert histeq.equalize(x, out=x) is x
    got = x.cpu().numpy()
    for k in range(n):
        np.testing.assert_array_equal(got[k], ref(img[k]))
    one = torch.from_numpy(img[0]).cuda()
    assert histeq.equalize(one, out=one) is one
    np.testing.assert_array_equal(one.cpu().numpy(), ref(img[0]))


def test_torch_wrong_outs(torch_cuda):
    torch = torch_cuda
    x = torch.from_numpy(rng_image((40, 30))).cuda()
    for out, error in [(torch.empty((40, 30), dtype=torch.int16, device="cuda"), TypeError),
                       (torch.empty((30, 40), dtype=torch.uint8, device="cuda"), ValueError),
                       (torch.empty((30, 40), dtype=torch.uint8, device="cuda").t(), ValueError),
                       (torch.empty((40, 30), dtype=torch.uint8), ValueError),
                       (np.empty((40, 30), np.uint8), TypeError)]:
        with pytest.raises(error, match="^out: "):
            histeq.equalize(x, out=out)
    with pytest.raises(TypeError, match="^out: dtype torch.uint8; expected torch.int64"):
        histeq.histogram(x, out=torch.empty(256, dtype=torch.uint8, device="cuda"))
