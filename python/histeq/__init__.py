"""histeq — histogram equalization (also of a masked region), CLAHE and histogram matching of
8- and 16-bit images on the GPU, from Python.

The same library as the ``histeq`` command-line tool, byte for byte: every result equals what
``histeq equalize`` / ``histeq clahe`` / ``histeq match`` write for the same pixels
(``cv::equalizeHist`` of OpenCV 4.x with the default ``formula="opencv"``; Gonzalez & Woods,
*Digital Image Processing*, §3.3; :func:`clahe` equals OpenCV's CLAHE, with OpenCV's defaults;
:func:`match_histograms` equals scikit-image's ``match_histograms`` rounded to the image's
dtype).

Arrays
------
* NumPy ``uint8`` / ``uint16`` arrays: the work runs on the GPU when one is usable, else on the
  CPU backend (all cores), reading the array in place; the result is a new NumPy array. CPU
  PyTorch tensors work the same way and give a CPU tensor. 16-bit images stay 16 bits
  (65536-bin histograms; equalization is OpenCV's formula over 65536 levels); colour 16-bit
  images are processed per channel (``mode="rgb"``).
* CUDA arrays — PyTorch tensors, CuPy arrays, any object with ``__cuda_array_interface__`` or a
  CUDA ``__dlpack__`` (the last two give a CuPy array back): read in place (no copy); the result
  is allocated by the same library on the same device; the work is queued on the caller's
  current stream (``torch.cuda.current_stream()``, ``cupy.cuda.get_current_stream()``, the
  interface's ``stream`` entry) and the call returns without synchronizing the device.
* Layout: channels last, C-contiguous. ``(H, W)`` gray; ``(H, W, C)`` with C = 1..4 (gray,
  gray+alpha, colour, colour+alpha); batches ``(N, H, W)`` / ``(N, H, W, C)``; or a list of
  images of different sizes. A 3-D array is ``(H, W, C)`` when its last extent is 1..4, else
  ``(N, H, W)``; pass ``batch=True`` / ``False`` to say which.
* Channel order: colour images are RGB(A) unless ``channel_order="bgr"`` says BGR(A), as
  ``cv2.imread`` gives them. It matters to ``mode="luma"`` (the default) and ``"gray"``, whose
  luma weighs red and blue differently; :func:`load_image` returns RGB.
* ``out=`` (keyword-only, in :func:`equalize`, :func:`clahe`, :func:`match_histograms` and
  :func:`histogram`, as NumPy's ``out=`` and OpenCV's ``dst``): the result is written into
  ``out``, which is returned, and nothing is allocated for it. ``out`` must be the kind of
  array the call returns for the image (NumPy for a NumPy array, a CPU tensor for a CPU tensor,
  the same library's array for a CUDA array, CuPy for ``__cuda_array_interface__`` and DLPack
  arrays), on the image's device, C-contiguous and writable, with exactly the result's shape and
  dtype (``TypeError`` for another kind or dtype, ``ValueError`` for another device, shape or
  layout); one image or batch, not a list. It may be the image itself (in place) or overlap it:
  gray CUDA images are written in place by the kernels that take it (:func:`equalize` with
  ``kernel="auto"`` and no mask or roi, 8 or 16 bits, and 16-bit masked too; :func:`clahe`;
  16-bit :func:`match_histograms`), unless ``out`` overlaps the mask; every other path writes
  a new array and copies it into ``out`` after the image was read.

A build without the CUDA toolkit (``pip install .`` on a machine without nvcc) has the CPU
backend only, with the same results; :func:`cuda_available` is then False and says why.

Errors
------
``TypeError`` for an argument of the wrong type (not an array, wrong dtype); ``ValueError``
naming the argument for a bad value (shape, strides, unknown mode/formula/kernel/backend, a CUDA
array with ``backend="cpu"``, ``backend="cuda"`` without a usable GPU) and for a file that is not
a decodable image; ``OSError`` (``FileNotFoundError``, ``PermissionError``, ``IsADirectoryError``,
...) for a file that cannot be read or written; ``RuntimeError`` for CUDA failures.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as _np

from . import _arrays as _a
from . import _region as _r
from ._arrays import BACKENDS, CHANNEL_ORDERS, FORMULAS, MODES, _histeq
from ._files import clahe_files, equalize_files, load_image, match_files, save_image

__version__: str = _histeq.__version__

__all__ = ["equalize", "histogram", "clahe", "match_histograms", "kernels", "equalize_files",
           "clahe_files", "match_files",
           "cuda_available",
           "load_image", "save_image", "MODES", "FORMULAS", "BACKENDS", "CHANNEL_ORDERS",
           "__version__"]


def __dir__() -> List[str]:
    """dir(histeq) and tab completion: the public names, not the typing helpers imported here."""
    return sorted(set(__all__) | {"__doc__", "__file__", "__name__", "__package__", "__path__",
                                  "__spec__"})


def cuda_available() -> bool:
    """True when a CUDA device can run this build's code (probed once per process). False in a
    build without CUDA; ``histeq._cuda_why()`` says why not."""
    return bool(_a.cuda_state()[0])


def _cuda_why() -> str:
    """Why no CUDA device is usable ("" when one is)."""
    return str(_a.cuda_state()[1])


def kernels() -> List[Dict[str, Any]]:
    """The histogram kernels, in the registry's order (``histeq kernels``): a list of dicts
    ``{"name": str, "exact": bool, "summary": str}``. ``"auto"`` is not listed: it picks the
    fastest exact kernel per call (docs/kernels.md). Empty in a build without CUDA."""
    return [{"name": n, "exact": e, "summary": s} for n, e, s in _histeq.kernels()]


def _cpu_with_cuda_array() -> ValueError:
    return ValueError("backend: 'cpu' cannot take a CUDA array; copy it to the host first")


# ------------------------------------------------------------------------------------------
# equalize
# ------------------------------------------------------------------------------------------

def _equalize_host(a: _np.ndarray, batch, mode, formula, kernel, backend, order, region=None,
                   out=None, wrap=None):
    """The NumPy result (out's memory where the calls can write it: _arrays.host_target)."""
    n, h, w, c, is_batch = _a.split_shape(a.shape, batch, "image")
    if region is not None:
        mask, roi = region.host(h, w)
        res = _a.host_target(out, wrap, _a.out_shape(a.shape, mode, n, h, w, c, is_batch),
                             "uint8", a)
        if n * h * w > 0:
            _histeq.equalize_host(a, res, n, h, w, c, mode, formula, kernel, backend, order,
                                  mask=mask, roi=roi)
        return res
    if is_batch and c == 1 and n > 1 and h * w > 0 and kernel == "auto" and backend != "cpu":
        # gray batch: one upload, the batched device path, one download (None: no GPU)
        res = _histeq.equalize_host_batch(a, n, h * w, formula, backend)
        if res is not None:
            return res.reshape(a.shape)
    res = _a.host_target(out, wrap, _a.out_shape(a.shape, mode, n, h, w, c, is_batch), "uint8", a)
    if n * h * w > 0:
        _histeq.equalize_host(a, res, n, h, w, c, mode, formula, kernel, backend, order)
    return res


#: How gray batches of one size run on the GPU (see _set_batch_path).
_batch_path = "auto"
_BATCH_PATHS = ("auto", "queued", "two_launch", "cluster", "table")


def _set_batch_path(path: str) -> str:
    """Benchmark knob: how ``equalize`` runs a gray ``(N, H, W)`` CUDA batch from now on —
    ``"auto"`` (the library's policy, kernels/batched/batched.hpp), ``"queued"`` (one launch, a work
    queue), ``"two_launch"`` (histogram + LUT launch, then apply launch), ``"cluster"`` (one
    launch, one thread-block cluster per image held in registers; images of 64 KiB to 2 MiB
    whose size is a multiple of 16, compute capability 9.0+, else two_launch), ``"table"`` (the
    list path: one descriptor per image, two launches per 64 images). Every path gives the same
    bytes. Returns the previous value."""
    global _batch_path
    _a.check_choice("path", path, _BATCH_PATHS)
    prev, _batch_path = _batch_path, path
    return prev


def _equalize_device(d: _a.Dev, batch, mode, formula, kernel, order, out=None):
    n, h, w, c, is_batch = _a.split_shape(d.shape, batch, "image")
    swap = order == "bgr" and c >= 3 and mode != "rgb"
    if swap:  # the device stages compute luma from RGB: a swapped copy, and back for luma
        d = _a.swap_red_blue(d)
    # In place (out is the image): gray images with kernel "auto" (the batched kernels, and the
    # list kernel for one image, take in == out); the other paths (the per-plane apply kernel,
    # and a named histogram kernel's stages) write a new array that is copied into out.
    res = _a.device_target(d, out, _a.out_shape(d.shape, mode, n, h, w, c, is_batch),
                           in_place=c == 1 and kernel == "auto")
    rptr = _a.ptr(res)
    if n * h * w > 0:
        if n == 1 and res is out and rptr == d.ptr:
            _histeq.equalize_device_list(d.device, d.stream, [d.ptr], [rptr], [h * w], formula)
        else:
            _histeq.equalize_device(d.device, d.stream, d.ptr, rptr, n, h * w, c, mode, formula,
                                    kernel, _batch_path)
    if swap and _a.out_channels(mode, c) == c:
        res = _a.unswap_red_blue(res)
    return _a.finish(out, res, d)


def _equalize_torch_list(images, formula):
    """The batched list path for gray CUDA torch tensors of one device, without the general
    path's per-image work: one loop reading pointers and sizes, ONE output allocation cut into
    views (the results share one storage, disjoint), one compiled call. None when the list does
    not qualify (the general path then runs and reports any error)."""
    torch = _a._torch
    first = images[0]
    if type(first) not in _a._torch_types or not first.is_cuda:
        return None
    dev = first.get_device()
    u8 = torch.uint8
    ptrs, sizes = [], []
    for t in images:
        if type(t) not in _a._torch_types or not t.is_cuda or t.dtype != u8 or \
                t.get_device() != dev or not t.is_contiguous():
            return None
        nd = t.dim()
        if nd != 2 and not (nd == 3 and t.shape[2] == 1):
            return None
        ptrs.append(t.data_ptr())
        sizes.append(t.numel())
    flat = torch.empty(sum(sizes), dtype=u8, device=first.device)
    base, outs_ptr, off = flat.data_ptr(), [], 0
    for n in sizes:
        outs_ptr.append(base + off)
        off += n
    _histeq.equalize_device_list(dev, _a.torch_stream(dev), ptrs, outs_ptr, sizes, formula)
    return [o.view(t.shape) for o, t in zip(flat.split(sizes), images)]


def _check16(formula: str, kernel: str) -> None:
    """16-bit images have one LUT formula and one histogram kernel (hist_u16)."""
    if formula != "opencv":
        raise ValueError(f"formula: 16-bit images take OpenCV's formula over 65536 levels only "
                         f"(formula='opencv'); got {formula!r}")
    if kernel != "auto":
        raise ValueError(f"kernel: the registry's kernels count 8-bit samples; 16-bit images "
                         f"take kernel='auto' (65536-bin hist_u16); got {kernel!r}")


def _per_image_host(a: _np.ndarray, batch, fn):
    """fn(image, h, w, c) on each image of a host array (one image or a batch), the results
    shaped as the input's images, stacked for a batch."""
    n, h, w, c, is_batch = _a.split_shape(a.shape, batch, "image")
    outs = []
    for i in range(n):
        img = a[i] if is_batch else a
        out = _np.empty(img.shape, a.dtype) if h * w == 0 else fn(img, h, w, c)
        outs.append(out.reshape(img.shape) if out.size == img.size else out)
    if is_batch:
        return _np.stack(outs) if outs else _np.empty(a.shape, a.dtype)
    return outs[0]


def _equalize16_host(a: _np.ndarray, batch, mode, backend, region=None, reference=None):
    """The NumPy result: a new array (the compiled 16-bit calls return theirs)."""
    if region is None and reference is None:
        return _per_image_host(
            a, batch, lambda img, h, w, c: _histeq.equalize_host16(img, h, w, c, mode, backend)[0])
    _n, h, w, _c, _b = _a.split_shape(a.shape, batch, "image")
    mask, roi = region.host(h, w) if region is not None else (None, None)
    return _per_image_host(
        a, batch, lambda img, h, w, c: _histeq.equalize_host16(
            img, h, w, c, mode, backend, mask=mask, roi=roi, reference=reference)[0])


def _equalize16_device(d: _a.Dev, batch, mode, out=None):
    n, h, w, c, is_batch = _a.split_shape(d.shape, batch, "image")
    if c != 1:  # gray+alpha and colour: the whole-image path on the host
        return _a.via_host(d, lambda a: _equalize16_host(a, batch, mode, "auto"), out)
    res = _a.device_target(d, out, d.shape, "uint16", in_place=True)  # Equalizer16: in == out
    if n * h * w > 0:
        _histeq.equalize16_device(d.device, d.stream, d.ptr, _a.ptr(res), n, h * w)
    return _a.finish(out, res, d)


def _equalize_list(images, mode, formula, kernel, backend, order):
    if images and kernel == "auto" and backend != "cpu" and _a.is_torch(images[0]) and \
            cuda_available():
        outs = _equalize_torch_list(images, formula)
        if outs is not None:
            return outs
    devs = [_a.as_device(x, f"image[{i}]") for i, x in enumerate(images)]
    kw = dict(mode=mode, formula=formula, kernel=kernel, backend=backend, batch=False,
              channel_order=order)
    if all(d is None for d in devs):
        return _a.each(images, lambda x: equalize(x, **kw))
    if any(d is None for d in devs):
        raise ValueError("image: a list mixes host and CUDA arrays; pass one kind")
    if len({(d.lib, d.device) for d in devs}) != 1:
        raise ValueError("image: a list of CUDA arrays must come from one library and one device")
    if backend == "cpu":
        raise ValueError("backend: 'cpu' cannot take CUDA arrays; copy them to the host first")
    if any(d.dtype != "uint8" for d in devs):
        return _a.each(images, lambda x: equalize(x, **kw))
    shapes = [_a.split_shape(d.shape, False, f"image[{i}]") for i, d in enumerate(devs)]
    if kernel != "auto" or any(s[3] != 1 for s in shapes):
        return _a.each(devs, lambda d: _equalize_device(d, False, mode, formula, kernel, order))
    outs = [_a.result_like(d, d.shape) for d in devs]
    _histeq.equalize_device_list(devs[0].device, devs[0].stream, [d.ptr for d in devs],
                                 [_a.ptr(o) for o in outs], [s[1] * s[2] for s in shapes], formula)
    return outs


def _stages_device(d: _a.Dev, batch, mode, formula, kernel, order, region=None, hists=None,
                   out=None, ref_image=(0, 0)):
    """equalize() with a mask or roi, or match_histograms() (hists: the reference's histograms
    on the device; or ref_image: the address and pixel count of a gray 8-bit reference image on
    the device, counted by the call), on 8-bit CUDA arrays: histeq._histeq.stages_device on the
    caller's stream. Never in place (the apply kernel's input and output do not overlap): an
    out that overlaps the image or the mask gets the result through a new array."""
    n, h, w, c, is_batch = _a.split_shape(d.shape, batch, "image")
    mask, roi = region.device(d, h, w) if region is not None else (None, None)
    swap = order == "bgr" and c >= 3 and mode != "rgb"
    if swap:  # the device stages compute luma from RGB: a swapped copy, and back for luma
        d = _a.swap_red_blue(d)
    res = _a.device_target(d, out, _a.out_shape(d.shape, mode, n, h, w, c, is_batch),
                           mask=mask, mask_bytes=h * w)
    if n * h * w > 0:
        refs = (0 if hists is None else _a.ptr(hists), 0 if hists is None else
                int(hists.shape[0])) + (ref_image if ref_image[0] else ())
        _histeq.stages_device(d.device, d.stream, d.ptr, _a.ptr(res), n, h, w, c, mode, formula,
                              kernel, 0 if mask is None else _a.ptr(mask), roi, *refs)
    if swap and _a.out_channels(mode, c) == c:
        res = _a.unswap_red_blue(res)
    return _a.finish(out, res, d)


def _stages16_device(d: _a.Dev, batch, region=None, hists=None, out=None):
    """equalize() with a mask or roi, or match_histograms() (hists: the reference's 65536 counts
    on the device, shape (1, 65536)), of gray 16-bit CUDA arrays: histeq._histeq.stages16_device
    on the caller's stream, image by image (the region's histogram, the LUT, the apply). In place
    where out is the image (each image is counted before it is written); an out overlapping the
    mask or the image otherwise gets the result through a new array."""
    n, h, w, _c, _is_batch = _a.split_shape(d.shape, batch, "image")
    mask, roi = region.device(d, h, w) if region is not None else (None, None)
    res = _a.device_target(d, out, d.shape, d.dtype, in_place=True, mask=mask, mask_bytes=h * w)
    if n * h * w > 0:
        _histeq.stages16_device(d.device, d.stream, d.ptr, _a.ptr(res), n, h, w,
                                0 if mask is None else _a.ptr(mask), roi,
                                0 if hists is None else _a.ptr(hists))
    return _a.finish(out, res, d)


def _equalize_region_host(a: _np.ndarray, region, batch, mode, formula, kernel, backend, order,
                          out=None, wrap=None):
    if a.dtype == _np.uint16:
        _check16(formula, kernel)
        return _equalize16_host(a, batch, mode, backend, region)
    return _equalize_host(a, batch, mode, formula, kernel, backend, order, region, out, wrap)


def _equalize_region(image, region: _r.Region, batch, mode, formula, kernel, backend, order,
                     out=None):
    """equalize() with a mask or roi: one image or a batch."""
    d = _a.as_device(image, "image")
    if d is not None:
        if backend == "cpu":
            raise _cpu_with_cuda_array()
        if d.dtype == "uint8":
            return _stages_device(d, batch, mode, formula, kernel, order, region=region, out=out)
        _check16(formula, kernel)
        if _a.split_shape(d.shape, batch, "image")[3] == 1:  # gray: on the device
            return _stages16_device(d, batch, region=region, out=out)
        # 16-bit colour CUDA arrays: the whole-image path through the host
        return _a.via_host(d, lambda a: _equalize_region_host(a, region, batch, mode, formula,
                                                               kernel, "auto", order), out)
    if backend == "cuda":
        _a.require_cuda("backend='cuda'")
    a, wrap = _a.host_array(image, "image")
    res = _equalize_region_host(a, region, batch, mode, formula, kernel, backend, order, out, wrap)
    return _a.host_finish(out, wrap, res)


def equalize(image, *, mode: Optional[str] = None, formula: str = "opencv", kernel: str = "auto",
             backend: str = "auto", batch: Optional[bool] = None, channel_order: str = "rgb",
             mask=None, roi=None, out=None):
    """Equalizes the histogram of 8- or 16-bit images, as ``histeq equalize`` (and
    ``cv::equalizeHist``; 16-bit: its formula over 65536 levels, include/histeq/equalize16.hpp).

    Args:
        image: ``uint8`` or ``uint16`` (16-bit: ``formula="opencv"`` and ``kernel="auto"`` only;
            colour per channel, ``mode="rgb"``; gray+alpha keeps alpha, except with
            ``mode="gray"``: ``(H, W)``, as at 8 bits), channels last
            (host arrays of other layouts are copied), CUDA arrays C-contiguous: ``(H, W)``,
            ``(H, W, C)`` with C in 1..4, a batch ``(N, H, W)`` / ``(N, H, W, C)``, or a list
            (or tuple) of such images (sizes may differ). NumPy array or CPU tensor (GPU when
            usable, else CPU; result on the host), or a CUDA array (PyTorch, CuPy,
            ``__cuda_array_interface__``, DLPack): read in place, result allocated by the same
            library on the same device, work queued on the caller's current stream without
            synchronizing.
        mode: colour images: ``"luma"`` (default for 2..4 channels: Y of YCbCr equalized, chroma
            and alpha kept), ``"rgb"`` (each channel on its own histogram, alpha kept),
            ``"gray"`` (one output channel: the equalized luma). Ignored for gray images.
        formula: ``"opencv"`` (default, cv::equalizeHist's float32 rounding) or ``"exact"``.
        kernel: histogram kernel by name (:func:`kernels`), or ``"auto"``. With ``"auto"`` gray
            batches and lists on the GPU run the batched path: an ``(N, H, W)`` batch in one
            launch (one thread-block cluster per image for images of 64 KiB to 2 MiB whose size
            is a multiple of 16 on compute capability 9.0+; a work queue from 1 GiB) or two
            (docs/batched.md), a list in two per 64 images (a list's results are views of one
            allocation).
        backend: ``"auto"``, ``"cuda"`` or ``"cpu"`` (host arrays; CUDA arrays always run on
            their device).
        batch: whether a 3-D array is a batch ``(N, H, W)``; ``None`` guesses (see module doc).
        channel_order: ``"rgb"`` (default) or ``"bgr"`` (OpenCV's order): which channel of a
            colour image is red, for the luma of ``mode="luma"`` and ``"gray"``. With
            ``"bgr"``, the result of ``mode="luma"`` equals OpenCV's recipe (``COLOR_BGR2YCrCb``,
            ``equalizeHist`` of Y, ``COLOR_YCrCb2BGR``) within one level.
        mask: masked equalization: the histograms count only the pixels where ``mask`` is
            nonzero, and the LUT made from them (OpenCV's formula with N = the counted pixels)
            applies to every pixel. An array of the image's height x width (``(H, W)``; one
            mask for every image of a batch or list), any integer or bool dtype, NumPy, CPU
            tensor or CUDA array. ``None`` (default): every pixel. 8-bit CUDA images and 16-bit
            gray ones run on their device; a mask on the device is checked there for a counted
            pixel, which waits for the device (a torch mask: once until it is modified in place,
            or on every call for one made under ``torch.inference_mode``, which has no version
            counter).
        roi: ``(x, y, width, height)``: the histograms count only the pixels of this rectangle
            (with ``mask``: the mask's pixels inside it); the LUT applies to every pixel.
        out: an array the result is written into and which is returned (no result is
            allocated): the kind of array the call returns for ``image`` (a NumPy array for
            a NumPy array, a CPU tensor for a CPU tensor, the same library's array on the
            image's device for a CUDA array, a CuPy array for a ``__cuda_array_interface__`` or
            DLPack one), C-contiguous and writable, with exactly the result's shape and dtype;
            for one image or a batch (not a list). It may be the image itself (in place) or
            overlap it: gray CUDA images (8-bit with ``kernel="auto"`` and no ``mask`` or
            ``roi``, and 16-bit, masked too, unless ``out`` overlaps the mask) are equalized in
            place by the batched kernels, the list kernel for one 8-bit image, and the 16-bit
            engine; the other paths (host arrays, colour, an 8-bit mask or roi, a named kernel)
            write a new array and copy it into ``out`` after the
            image was read. On a CUDA array the work, and that copy, are queued on the caller's
            stream as without ``out``.

    Returns:
        The equalized image(s): same shape, except ``mode="gray"`` on colour gives ``(H, W)``
        (``(N, H, W)`` for a batch); same kind of array (a list for a list or tuple); ``out``
        when given.

    Raises:
        TypeError: ``image`` is not an array (or list of them) or not ``uint8``/``uint16``;
            ``mask`` not of a bool or integer dtype; ``roi`` not four ints; ``out`` not of the
            result's kind or dtype, or given with a list or tuple of images.
        ValueError: bad shape or strides, unknown ``mode``/``formula``/``kernel``/``backend``/
            ``channel_order``, a CUDA array with ``backend="cpu"``, ``backend="cuda"`` without
            a usable GPU; a ``mask`` of another height x width, a ``roi`` outside the image or
            empty, a mask that counts no pixel; ``out`` on another device, of another shape,
            not C-contiguous or read-only.
        RuntimeError: a CUDA failure.
    """
    _a.check_options(mode, formula, kernel, backend, channel_order)
    if mode == "gray":
        image = _a.gray_of_gray_alpha16(image, batch)
    g = _a.fast_gray(image, batch) if backend != "cpu" else None
    if g is not None:  # a gray CUDA tensor or CuPy array: the general path's calls, no steps
        dev, stream, ptr, n, h, w, sixteen, _b = g
        if mask is None and roi is None:
            if sixteen:
                _check16(formula, kernel)
            if out is None:
                out = _a.fast_empty_like(image)
                optr = _a.fast_ptr(out)
            else:  # in place with the 16-bit engine, and the batched kernels with "auto"
                nbytes = n * h * w * (2 if sixteen else 1)
                optr = _a.fast_out(out, image, dev, image.shape, image.dtype, nbytes, ptr,
                                   nbytes, sixteen or kernel == "auto")
            if optr is not None:
                if n * h * w > 0:
                    if sixteen:
                        _histeq.equalize16_device(dev, stream, ptr, optr, n, h * w)
                    elif n == 1 and optr == ptr:  # in place: the list kernel takes it
                        _histeq.equalize_device_list(dev, stream, [ptr], [ptr], [h * w], formula)
                    else:
                        _histeq.equalize_device(dev, stream, ptr, optr, n, h * w, 1, mode,
                                                formula, kernel, _batch_path)
                return out
        else:
            r = None if sixteen else _r.fast_region(mask, roi, image, dev, h, w)
            if r is not None:  # 8-bit, a mask read in place and/or a roi: _stages_device's
                if out is None:
                    out = _a.fast_empty_like(image)
                    optr = _a.fast_ptr(out)
                else:  # the stages' apply kernel: never in place
                    optr = _a.fast_out(out, image, dev, image.shape, image.dtype, n * h * w,
                                       ptr, n * h * w, False, r[0], h * w)
                if optr is not None:
                    if n * h * w > 0:
                        _histeq.stages_device(dev, stream, ptr, optr, n, h, w, 1, mode, formula,
                                              kernel, r[0], r[1], 0, 0)
                    return out
    if isinstance(image, (list, tuple)):
        _a.no_list_out(out)
    if mask is not None or roi is not None:
        region = _r.Region(mask, roi)
        if isinstance(image, (list, tuple)):
            return _a.each(image, lambda x: _equalize_region(x, region, False, mode, formula,
                                                             kernel, backend, channel_order))
        return _equalize_region(image, region, batch, mode, formula, kernel, backend,
                                channel_order, out)
    if isinstance(image, (list, tuple)):
        return _equalize_list(list(image), mode, formula, kernel, backend, channel_order)
    d = _a.as_device(image, "image")
    if d is not None:
        if backend == "cpu":
            raise _cpu_with_cuda_array()
        if d.dtype == "uint16":
            _check16(formula, kernel)
            return _equalize16_device(d, batch, mode, out)
        return _equalize_device(d, batch, mode, formula, kernel, channel_order, out)
    if backend == "cuda":
        _a.require_cuda("backend='cuda'")
    a, wrap = _a.host_array(image, "image")
    if a.dtype == _np.uint16:
        _check16(formula, kernel)
        res = _equalize16_host(a, batch, mode, backend)
    else:
        res = _equalize_host(a, batch, mode, formula, kernel, backend, channel_order, out=out,
                             wrap=wrap)
    return _a.host_finish(out, wrap, res)


# ------------------------------------------------------------------------------------------
# histogram
# ------------------------------------------------------------------------------------------

def _check_bins(bins) -> None:
    if bins is not None and (isinstance(bins, bool) or not isinstance(bins, (int, _np.integer))):
        raise TypeError(f"bins: expected an int, got {type(bins).__name__}")
    if bins is not None and not 1 <= int(bins) <= 4096 and int(bins) != 65536:
        raise ValueError(f"bins: must be in 1..4096 (8-bit) or 65536 (16-bit), got {bins}")


def _counts_shape(n: int, planes: int, bins: int, is_batch: bool) -> tuple:
    """The shape of histogram()'s counts: (N,) for a batch, then (planes,) when more than one,
    then (bins,); C-contiguous, image i's plane p at (i * planes + p) * bins."""
    return ((n,) if is_batch else ()) + ((planes, bins) if planes > 1 else (bins,))


def _histogram_device(d: _a.Dev, bins, kernel, mode, batch, order, out=None):
    n, h, w, c, is_batch = _a.split_shape(d.shape, batch, "image")
    if c != 1 and bins != 256:
        raise ValueError(f"bins: colour images take 256 bins only; got {bins}")
    if order == "bgr" and c >= 3 and mode != "rgb":
        d = _a.swap_red_blue(d)
    planes = 3 if (c >= 3 and mode == "rgb") else 1
    res = _a.device_target(d, out, _counts_shape(n, planes, bins, is_batch), "int64")
    optr = _a.ptr(res)
    step = h * w * c
    for i in range(n):
        _histeq.histogram_device(d.device, d.stream, d.ptr + i * step, h * w, c, mode, bins,
                                 kernel, optr + i * planes * bins * 8)
    return _a.finish(out, res, d)


def _histogram_host(a: _np.ndarray, bins, kernel, mode, backend, batch, order):
    n, h, w, c, is_batch = _a.split_shape(a.shape, batch, "image")
    if c != 1 and bins != 256:
        raise ValueError(f"bins: colour images take 256 bins only; got {bins}")
    planes = 3 if (c >= 3 and mode == "rgb") else 1
    out = _np.empty((n, planes, bins), _np.int64)
    for i in range(n):
        out[i] = _histeq.histogram_host(a[i] if is_batch else a, h, w, c, mode, bins, kernel,
                                        backend, order)
    if planes == 1:
        out = out.reshape(n, bins)
    return out if is_batch else out[0]


def _histogram_region_host(a: _np.ndarray, region: _r.Region, bins, kernel, mode, backend, batch,
                           order):
    n, h, w, c, is_batch = _a.split_shape(a.shape, batch, "image")
    mask, roi = region.host(h, w)  # checked against the size even when it holds no pixel
    if h * w == 0:  # no pixel to count: zero counts, as without a mask (and on the device)
        mask, roi = None, None
    if a.dtype != _np.uint16 and c != 1 and bins != 256:
        raise ValueError(f"bins: colour images take 256 bins only; got {bins}")
    res = []
    for i in range(n):
        img = _np.ascontiguousarray(a[i] if is_batch else a)
        if a.dtype == _np.uint16:
            hs = _histeq.histogram_host16(img, h, w, c, mode, backend, mask=mask, roi=roi)
        else:
            hs = _histeq.histogram_host(img, h, w, c, mode, 256, kernel, backend, order,
                                        mask=mask, roi=roi)
            if bins != 256:  # sample v in bin v * bins // 256, from the 256 counts
                rebinned = _np.zeros((hs.shape[0], bins), _np.int64)
                _np.add.at(rebinned, (slice(None), _np.arange(256) * bins // 256), hs)
                hs = rebinned
        res.append(hs[0] if hs.shape[0] == 1 else hs)
    if not res:  # a batch of no image: the counts' shape of a batch of one, N = 0
        planes = 3 if c >= 3 and (a.dtype == _np.uint16 or mode == "rgb") else 1
        return _np.zeros(_counts_shape(0, planes, bins, True), _np.int64)
    return _np.stack(res) if is_batch else res[0]


def _histogram_region_device(d: _a.Dev, region: _r.Region, mode, n, h, w, c, is_batch, order,
                             out=None):
    """The 256-bin histograms of the counted pixels of 8-bit CUDA images, on their device."""
    mask, roi = region.device(d, h, w)
    if order == "bgr" and c >= 3 and mode != "rgb":
        d = _a.swap_red_blue(d)
    planes = 3 if (c >= 3 and mode == "rgb") else 1
    res = _a.device_target(d, out, _counts_shape(n, planes, 256, is_batch), "int64", mask=mask,
                           mask_bytes=h * w)
    optr, mptr = _a.ptr(res), 0 if mask is None else _a.ptr(mask)
    if h * w == 0:
        res.fill_(0) if hasattr(res, "fill_") else res.fill(0)
    for i in range(n if h * w > 0 else 0):
        _histeq.histogram_device_region(d.device, d.stream, d.ptr + i * h * w * c, h, w, c, mode,
                                        mptr, roi, optr + i * planes * 256 * 8)
    return _a.finish(out, res, d)


def _histogram_region(image, region: _r.Region, bins, kernel, mode, backend, batch, order,
                      out=None):
    """histogram() with a mask or roi: one image or a batch."""
    d = _a.as_device(image, "image")
    if (d.dtype if d is not None else _a.host_dtype(image)) == "uint16":
        if bins is not None and int(bins) != 65536:
            raise ValueError(f"bins: 16-bit images take 65536 bins (one per level), got {bins}")
        _check16("opencv", kernel)
        bins = 65536
    else:
        bins = 256 if bins is None else int(bins)
        if bins > 4096:
            raise ValueError(f"bins: 8-bit images take 1..4096 bins, got {bins}")
    if d is not None:
        if backend == "cpu":
            raise _cpu_with_cuda_array()
        n, h, w, c, is_batch = _a.split_shape(d.shape, batch, "image")
        if d.dtype == "uint8" and bins == 256:
            return _histogram_region_device(d, region, mode, n, h, w, c, is_batch, order, out)
        return _a.via_host(d, lambda a: _histogram_region_host(a, region, bins, kernel, mode,
                                                                "auto", batch, order), out)
    if backend == "cuda":
        _a.require_cuda("backend='cuda'")
    a, wrap = _a.host_array(image, "image")
    res = _histogram_region_host(a, region, bins, kernel, mode, backend, batch, order)
    return _a.host_finish(out, wrap, res)


def histogram(image, bins: Optional[int] = None, kernel: str = "auto", *,
              mode: Optional[str] = None, backend: str = "auto", batch: Optional[bool] = None,
              channel_order: str = "rgb", mask=None, roi=None, out=None):
    """The histogram(s) of the planes ``equalize`` would equalize, as ``histeq histogram``.

    Args:
        image: as :func:`equalize` (one image, a batch or a list), ``uint8`` or ``uint16``.
        bins: ``uint8``: number of bins, 1..4096 (default 256); sample v goes to bin
            ``v * bins // 256``; colour images take 256 only. ``uint16``: 65536 (the default and
            the only value; one bin per level).
        kernel: histogram kernel by name (:func:`kernels`) or ``"auto"``.
        mode: for colour images: ``"luma"``/``"gray"`` (one plane, Y) or ``"rgb"`` (the
            three colour channels, in the array's order).
        backend: as :func:`equalize`.
        batch: as :func:`equalize`.
        channel_order: as :func:`equalize` (which channel is red, for Y).
        mask: as :func:`equalize`: only the pixels where the mask is nonzero are counted.
        roi: as :func:`equalize`: only the pixels of ``(x, y, width, height)`` are counted.
        out: an array the counts are written into and which is returned, as :func:`equalize`
            takes it: the kind of array the call returns (NumPy for host input, the image's
            library on its device), C-contiguous, ``int64``, with exactly the result's shape.
            The kernels count 8-bit CUDA images and 16-bit gray ones into it directly (unless it
            overlaps the image or the mask); the other paths copy their counts into it.

    Returns:
        Counts (``int64``, as ``numpy.histogram`` and scikit-image give them) of one image:
        shape ``(bins,)`` for one plane, ``(3, bins)`` for ``mode="rgb"`` (16-bit colour
        images: always the three channels; gray and gray+alpha: the gray channel); a batch adds
        a leading ``N``; a list gives a list. NumPy for host input; on a CUDA array the same
        library's array on the same device (``torch.int64``, ``cupy.int64``), queued on the
        current stream; ``out`` when given.

    Raises:
        as :func:`equalize` (``mask``, ``roi`` and ``out`` included); ValueError for ``bins``
        outside 1..4096 or not 256 on colour, or not 65536 on ``uint16``.
    """
    _a.check_options(mode, "opencv", kernel, backend, channel_order)
    _check_bins(bins)
    g = _a.fast_gray(image, batch) if backend != "cpu" else None
    if g is not None:  # a gray CUDA tensor or CuPy array: the general path's calls, no steps
        if mask is None and roi is None:
            res = _histogram_fast_gray(image, g, bins, kernel, mode, out)
            if res is not None:
                return res
        elif not g[6] and (bins is None or (type(bins) is int and bins == 256)):
            r = _r.fast_region(mask, roi, image, g[0], g[4], g[5])
            if r is not None:
                res = _histogram_region_fast_gray(image, g, r, mode, out)
                if res is not None:
                    return res
    if isinstance(image, (list, tuple)):
        _a.no_list_out(out)
    if mask is not None or roi is not None:
        region = _r.Region(mask, roi)
        if isinstance(image, (list, tuple)):
            return _a.each(image, lambda x: _histogram_region(x, region, bins, kernel, mode,
                                                              backend, False, channel_order))
        return _histogram_region(image, region, bins, kernel, mode, backend, batch,
                                 channel_order, out)
    if isinstance(image, (list, tuple)):
        return _a.each(image, lambda x: histogram(x, bins, kernel, mode=mode, backend=backend,
                                                  batch=False, channel_order=channel_order))
    d = _a.as_device(image, "image")
    if (d.dtype if d is not None else _a.host_dtype(image)) == "uint16":
        return _histogram16(image, d, bins, kernel, mode, backend, batch, out)
    bins = 256 if bins is None else int(bins)
    if bins > 4096:
        raise ValueError(f"bins: 8-bit images take 1..4096 bins, got {bins}")
    if d is not None:
        if backend == "cpu":
            raise _cpu_with_cuda_array()
        return _histogram_device(d, bins, kernel, mode, batch, channel_order, out)
    if backend == "cuda":
        _a.require_cuda("backend='cuda'")
    a, wrap = _a.host_array(image, "image")
    res = _histogram_host(a, bins, kernel, mode, backend, batch, channel_order)
    return _a.host_finish(out, wrap, res)


def _counts_target(x, g, shape, out, mask: int = 0):
    """(the counts' array, its address) for the histogram shortcuts: a new int64 array of x's
    library of shape on x's device when out is None, else out when their calls can write the
    counts into it (_arrays.fast_out; the image and the mask at address mask are read); (None,
    None) for any other out (the general path takes it)."""
    if out is None:
        res = _a.fast_counts(x, shape)
        return res, _a.fast_ptr(res)
    dev, _st, ptr, n, h, w, sixteen, _b = g
    optr = _a.fast_out(out, x, dev, shape, _a.i64_of(x), _a._count(shape) * 8, ptr,
                       n * h * w * (2 if sixteen else 1), False, mask, h * w)
    return (None, None) if optr is None else (out, optr)


def _histogram_fast_gray(x, g, bins, kernel, mode, out):
    """histogram() of a gray CUDA tensor or CuPy array (g: _arrays.fast_gray's view of it): what
    _histogram16 and _histogram_device do for it, the counts allocated in the result's shape
    (or written into out). None when out is not one these calls can write (the general path
    takes it)."""
    dev, stream, ptr, n, h, w, sixteen, is_batch = g
    if sixteen:
        if bins is not None and int(bins) != 65536:
            raise ValueError(f"bins: 16-bit images take 65536 bins (one per level), got {bins}")
        _check16("opencv", kernel)
        res, optr = _counts_target(x, g, (n, 65536) if is_batch else (65536,), out)
        if res is None:
            return None
        if n * h * w > 0:
            _histeq.histogram16_device(dev, stream, ptr, n, h * w, optr)
        else:
            _a.fast_zero(res)
        return res
    bins = 256 if bins is None else int(bins)
    if bins > 4096:
        raise ValueError(f"bins: 8-bit images take 1..4096 bins, got {bins}")
    res, optr = _counts_target(x, g, (n, bins) if is_batch else (bins,), out)
    if res is None:
        return None
    pixels = h * w
    for i in range(n):
        _histeq.histogram_device(dev, stream, ptr + i * pixels, pixels, 1, mode, bins, kernel,
                                 optr + i * bins * 8)
    return res


def _histogram_region_fast_gray(x, g, r, mode, out):
    """histogram() of a gray 8-bit CUDA tensor or CuPy array (g: _arrays.fast_gray's view of
    it) with a mask and/or roi (r: _region.fast_region's): _histogram_region_device's calls,
    the counts allocated in the result's shape (or written into out). None when out is not one
    these calls can write (the general path takes it)."""
    dev, stream, ptr, n, h, w, _s, is_batch = g
    res, optr = _counts_target(x, g, (n, 256) if is_batch else (256,), out, r[0])
    if res is None:
        return None
    pixels = h * w
    if pixels == 0:
        _a.fast_zero(res)
        return res
    mptr, roi = r[0], r[1]
    for i in range(n):
        _histeq.histogram_device_region(dev, stream, ptr + i * pixels, h, w, 1, mode, mptr, roi,
                                        optr + i * 2048)
    return res


def _histogram16(image, d: Optional[_a.Dev], bins, kernel, mode, backend, batch, out=None):
    """histogram() of a uint16 image: 65536 bins per plane (hist_u16 on the GPU)."""
    if bins is not None and int(bins) != 65536:
        raise ValueError(f"bins: 16-bit images take 65536 bins (one per level), got {bins}")
    _check16("opencv", kernel)

    def host(a, backend):
        def one(img, h, w, c):
            hs = _histeq.histogram_host16(img, h, w, c, mode, backend)
            return hs[0] if hs.shape[0] == 1 else hs
        n, h, w, c, is_batch = _a.split_shape(a.shape, batch, "image")
        res = [one(_np.ascontiguousarray(a[i] if is_batch else a), h, w, c) for i in range(n)]
        if not res:  # a batch of no image: (0, 3, 65536) for colour (its channels), N = 0
            return _np.zeros(_counts_shape(0, 3 if c >= 3 else 1, 65536, True), _np.int64)
        return _np.stack(res) if is_batch else res[0]

    if d is not None:
        if backend == "cpu":
            raise _cpu_with_cuda_array()
        n, h, w, c, is_batch = _a.split_shape(d.shape, batch, "image")
        if c != 1:  # gray+alpha and colour: their planes on the host
            return _a.via_host(d, lambda a: host(a, "auto"), out)
        res = _a.device_target(d, out, _counts_shape(n, 1, 65536, is_batch), "int64")
        if n * h * w > 0:
            _histeq.histogram16_device(d.device, d.stream, d.ptr, n, h * w, _a.ptr(res))
        else:  # torch has zero_, CuPy fill
            res.zero_() if hasattr(res, "zero_") else res.fill(0)
        return _a.finish(out, res, d)
    if backend == "cuda":
        _a.require_cuda("backend='cuda'")
    a, wrap = _a.host_array(image, "image")
    res = host(a, backend)
    return _a.host_finish(out, wrap, res)


# ------------------------------------------------------------------------------------------
# clahe
# ------------------------------------------------------------------------------------------

_clahe_args = _a.clahe_args


def _clahe_host(a: _np.ndarray, batch, mode, clip, tx, ty, backend, order, region=None,
                out=None, wrap=None):
    """The NumPy result (out's memory where the calls can write it: _arrays.host_target)."""
    n, h, w, c, is_batch = _a.split_shape(a.shape, batch, "image")
    mask, roi = region.host(h, w) if region is not None else (None, None)
    if a.dtype == _np.uint16:  # 16-bit images keep their channels
        res = _a.host_target(out, wrap, a.shape, "uint16", a)
        if n * h * w > 0:
            _histeq.clahe_host16(a, res, n, h, w, c, mode, clip, tx, ty, backend,
                                 mask=mask, roi=roi)
        return res
    res = _a.host_target(out, wrap, _a.out_shape(a.shape, mode, n, h, w, c, is_batch), "uint8",
                         a)
    if n * h * w > 0:
        _histeq.clahe_host(a, res, n, h, w, c, mode, clip, tx, ty, backend, order,
                           mask=mask, roi=roi)
    return res


def clahe(image, clip_limit: float = 40.0, tile_grid_size=(8, 8), *,
          mode: Optional[str] = None, backend: str = "auto", batch: Optional[bool] = None,
          channel_order: str = "rgb", mask=None, roi=None, out=None):
    """Contrast-limited adaptive histogram equalization, as ``histeq clahe`` and OpenCV's
    ``cv2.createCLAHE(clipLimit, tileGridSize).apply(img)``, with OpenCV's names (as
    scikit-image's and kornia's ``clip_limit``) and defaults: ``histeq.clahe(g)`` equals
    ``cv2.createCLAHE().apply(g)`` (byte-identical on gray ``uint8`` and ``uint16`` images;
    Zuiderveld, "Contrast Limited Adaptive Histogram Equalization", Graphics Gems IV, 1994).

    Args:
        image: ``uint8`` or ``uint16``, as :func:`equalize` (one image, a batch, a list).
            Gray CUDA arrays (``(H, W)``, ``(H, W, 1)``, ``(N, H, W)``) run on their device on
            the caller's current stream without synchronizing; colour CUDA arrays take a copy
            through the host (synchronizing), then come back as the same library's array.
        clip_limit: OpenCV's clipLimit: the per-bin limit is
            ``max(1, int(clip_limit * tile_area / bins))``; ``0`` (or less) disables clipping.
            Default 40.0 (OpenCV's). 40 barely limits the contrast of 8x8 tiles of a large
            image; 2.0 to 4.0 is the usual choice for photographs (less noise amplified). A
            limit so large that OpenCV's ``int`` of it overflows (above about ``2**31 * bins /
            tile_area``) is no clipping here, where OpenCV clips at 1.
        tile_grid_size: OpenCV's tileGridSize ``(columns, rows)``, each 1..1024: two ints as a
            tuple, list or array, or one int n for ``(n, n)``. Default ``(8, 8)``. Sizes the
            grid does not divide are padded as OpenCV pads them (BORDER_REFLECT_101) for the
            tile histograms.
        mode: colour ``uint8`` images: ``"luma"`` (default: CLAHE on Y of YCbCr, chroma and
            alpha kept; within ±1 of OpenCV's YCrCb round trip), ``"rgb"`` (each channel),
            ``"gray"`` (one output channel). ``uint16`` colour images: ``"rgb"`` only.
        backend: ``"auto"``, ``"cuda"`` or ``"cpu"`` for host arrays (equal bytes).
        batch: as :func:`equalize`.
        channel_order: as :func:`equalize`.
        mask: masked CLAHE: each tile's histogram counts only the pixels of the tile where
            ``mask`` is nonzero (the padded border takes the mask's flags reflected as the
            pixels are), and their number N replaces the tile area in the clip limit
            (``max(1, int(clip_limit * N / bins))``) and in the LUT scale (``(bins - 1) / N``);
            a tile with no counted pixel keeps the identity LUT; every pixel is interpolated as
            OpenCV does. A mask counting every pixel gives exactly the unmasked result. Masks as
            :func:`equalize` takes them (one ``(H, W)`` mask for every image of a batch).
            Host arrays run on ``backend`` (equal bytes); gray CUDA arrays run on their device
            on the caller's stream (a mask on the device is checked there for a counted pixel,
            as :func:`equalize` says), colour ones through the host.
        roi: ``(x, y, width, height)``: the tile histograms count only the pixels of this
            rectangle (with ``mask``: the mask's pixels inside it), as ``mask``.
        out: an array the result is written into and which is returned, as :func:`equalize`
            takes it (the result's kind, device, shape and dtype; C-contiguous; not with a
            list). It may be the image itself (in place): gray CUDA images (8 and 16 bits) are
            written in place by the CLAHE kernels; host arrays and colour CLAHE write a new
            array and copy it into ``out``.

    Returns:
        The result, same shape and dtype (``mode="gray"`` on colour gives ``(H, W)``), the same
        kind of array (a list for a list or tuple); ``out`` when given.

    Raises:
        TypeError: ``image`` not an array of ``uint8``/``uint16``; ``clip_limit`` not a number;
            ``tile_grid_size`` not two ints.
        ValueError: bad shape, a tile count outside 1..1024, a grid whose LUTs would exceed 2^28
            entries (16-bit: at most 4096 tiles), unknown ``mode``/``backend``/
            ``channel_order``, ``mode`` other than ``"rgb"`` on 16-bit colour, a CUDA array with
            ``backend="cpu"``; a ``mask`` or ``roi`` that does not fit the image or counts no
            pixel (TypeError for a ``mask`` not of a bool or integer dtype, a ``roi`` not four
            ints); ``out`` as :func:`equalize` says.
        RuntimeError: a CUDA failure.
    """
    if mode is not None or backend != "auto" or channel_order != "rgb":
        _a.check_choice("mode", mode, MODES, allow_none=True)
        _a.check_choice("backend", backend, BACKENDS)
        _a.check_choice("channel_order", channel_order, CHANNEL_ORDERS)
    clip, tx, ty = _clahe_args(clip_limit, tile_grid_size)
    if mode == "gray":
        image = _a.gray_of_gray_alpha16(image, batch)
    g = _a.fast_gray(image, batch) if backend != "cpu" else None
    if g is not None:  # a gray CUDA tensor or CuPy array: the general path's calls, no steps
        dev, stream, ptr, n, h, w, sixteen, _b = g
        plain = mask is None and roi is None
        # a mask read in place and/or a roi (kept alive in r until the calls are queued)
        r = None if plain else _r.fast_region(mask, roi, image, dev, h, w)
        if plain or r is not None:
            if out is None:
                out = _a.fast_empty_like(image)
                optr = _a.fast_ptr(out)
            else:  # the CLAHE engine takes in == out; the mask stays apart from out
                nbytes = n * h * w * (2 if sixteen else 1)
                optr = _a.fast_out(out, image, dev, image.shape, image.dtype, nbytes, ptr,
                                   nbytes, True, 0 if r is None else r[0],
                                   0 if r is None else h * w)
            if optr is not None:
                if n * h * w > 0:
                    if r is None:
                        _histeq.clahe_device(dev, stream, ptr, optr, n, h, w, sixteen, clip, tx,
                                             ty)
                    else:
                        _histeq.clahe_device(dev, stream, ptr, optr, n, h, w, sixteen, clip, tx,
                                             ty, r[0], r[1])
                return out
    region = _r.Region(mask, roi) if mask is not None or roi is not None else None
    if isinstance(image, (list, tuple)):
        _a.no_list_out(out)
        return _a.each(image, lambda x: clahe(x, clip, (tx, ty), mode=mode, backend=backend,
                                              batch=False, channel_order=channel_order,
                                              mask=mask, roi=roi))
    d = _a.as_device(image, "image")
    if d is not None:
        if backend == "cpu":
            raise _cpu_with_cuda_array()
        n, h, w, c, is_batch = _a.split_shape(d.shape, batch, "image")
        if c != 1:  # colour: through the host
            return _a.via_host(d, lambda a: _clahe_host(a, batch, mode, clip, tx, ty, "auto",
                                                         channel_order, region), out)
        mask, roi = region.device(d, h, w) if region is not None else (None, None)
        # in == out: the engine takes it; the mask must stay apart from out
        res = _a.device_target(d, out, d.shape, d.dtype, in_place=True, mask=mask,
                               mask_bytes=h * w)
        if n * h * w > 0:
            args = (d.device, d.stream, d.ptr, _a.ptr(res), n, h, w, d.dtype == "uint16", clip,
                    tx, ty)
            if region is None:
                _histeq.clahe_device(*args)
            else:
                _histeq.clahe_device(*args, 0 if mask is None else _a.ptr(mask), roi)
        return _a.finish(out, res, d)
    if backend == "cuda":
        _a.require_cuda("backend='cuda'")
    a, wrap = _a.host_array(image, "image")
    res = _clahe_host(a, batch, mode, clip, tx, ty, backend, channel_order, region, out, wrap)
    return _a.host_finish(out, wrap, res)


# ------------------------------------------------------------------------------------------
# match_histograms
# ------------------------------------------------------------------------------------------

def _match_planes(mode, c: int, sixteen: bool) -> int:
    """How many planes (and so reference histograms) an image of c channels is matched in."""
    if c < 3:
        return 1
    return 3 if sixteen or (mode or "luma") == "rgb" else 1


def _match_host(a: _np.ndarray, ref: _r.Reference, batch, mode, backend, order, out=None,
                wrap=None):
    """The NumPy result (out's memory where the calls can write it: _arrays.host_target)."""
    n, h, w, c, is_batch = _a.split_shape(a.shape, batch, "image")
    sixteen = a.dtype == _np.uint16
    hists = ref.histograms(_match_planes(mode, c, sixteen), 16 if sixteen else 8)
    if sixteen:
        return _per_image_host(a, batch, lambda img, h, w, c: _histeq.equalize_host16(
            img, h, w, c, mode, backend, reference=hists)[0])
    res = _a.host_target(out, wrap, _a.out_shape(a.shape, mode, n, h, w, c, is_batch), "uint8", a)
    if n * h * w > 0:
        _histeq.equalize_host(a, res, n, h, w, c, mode, "opencv", "auto", backend, order,
                              reference=hists)
    return res


def _match_one(image, ref: _r.Reference, batch, mode, backend, order, out=None,
               count_ref=True):
    """match_histograms() of one image or batch. count_ref: a gray 8-bit CUDA image whose
    reference is a gray 8-bit image on its device (same library) has the reference counted by
    its own compiled call (no array of counts); False (a list of images): counted once, kept."""
    d = _a.as_device(image, "image")
    if d is None:
        if backend == "cuda":
            _a.require_cuda("backend='cuda'")
        a, wrap = _a.host_array(image, "image")
        res = _match_host(a, ref, batch, mode, backend, order, out, wrap)
        return _a.host_finish(out, wrap, res)
    if backend == "cpu":
        raise _cpu_with_cuda_array()
    c = _a.split_shape(d.shape, batch, "image")[3]
    if d.dtype == "uint16":
        if c == 1:  # gray: on the device, to the reference's 65536 counts there
            return _stages16_device(d, batch, hists=ref.device_histograms(1, d, 16), out=out)
        # 16-bit colour CUDA arrays: the whole-image path through the host
        return _a.via_host(d, lambda a: _match_host(a, ref, batch, mode, "auto", order), out)
    if c == 1 and count_ref:
        ref_image = ref.device_image(d)
        if ref_image is not None:
            return _stages_device(d, batch, mode, "opencv", "auto", order, out=out,
                                  ref_image=ref_image)
    hists = ref.device_histograms(_match_planes(mode, c, False), d)
    return _stages_device(d, batch, mode, "opencv", "auto", order, hists=hists, out=out)


def _match_fast_gray(image, reference, batch, mode, out):
    """match_histograms() of a gray 8-bit CUDA tensor or CuPy array to a gray 8-bit image (H, W)
    or (H, W, 1) with pixels on its device (both of one library): what the general path queues
    (one stages_device call that counts the reference and matches), without its steps. None
    when the arguments are not these (the general path takes them)."""
    g = _a.fast_gray(image, batch)
    if g is None or g[6]:
        return None
    r = _a.fast_gray(reference, None)
    if r is None or r[6] or r[7] or r[0] != g[0] or r[4] * r[5] == 0:
        return None
    dev, stream, ptr, n, h, w, _s, _b = g
    if out is not None:  # the stages' apply kernel: never in place
        nbytes = n * h * w
        optr = _a.fast_out(out, image, dev, image.shape, image.dtype, nbytes, ptr, nbytes, False)
        if optr is None:
            return None
    if out is None:
        out = _a.fast_empty_like(image)
        optr = _a.fast_ptr(out)
    if n * h * w > 0:  # the reference counted by the call (stages_device's ref_image)
        _histeq.stages_device(dev, stream, ptr, optr, n, h, w, 1, mode, "opencv", "auto", 0, None,
                              0, 0, r[2], r[4] * r[5])
    return out


def match_histograms(image, reference, *, mode: Optional[str] = None, backend: str = "auto",
                     batch: Optional[bool] = None, channel_order: str = "rgb", out=None):
    """Histogram matching: maps the levels of ``image`` so that its cumulative histogram follows
    the reference's, as ``histeq match`` and scikit-image's ``exposure.match_histograms``:
    byte-identical to ``np.rint(skimage.exposure.match_histograms(image, reference))`` cast to
    the image's dtype on gray images, and to that of each channel on its own in ``mode="rgb"``.

    The rule (scikit-image's for unsigned integers): the source's quantiles ``cumsum(counts) /
    N`` at its levels, the reference's at its occupied levels, the reference's level linearly
    interpolated at each source quantile (``np.interp``, float64), rounded half to even; one
    LUT per plane, applied to every pixel.

    Args:
        image: as :func:`equalize` (``uint8`` or ``uint16``; one image, a batch ``(N, H, W[,
            C])`` or a list; NumPy, CPU tensor or CUDA array, the result of the same kind). 8-bit
            CUDA arrays and 16-bit gray ones run on their device, queued on the caller's
            current stream without synchronizing; 16-bit colour CUDA arrays go through the
            host.
        reference: one image (``uint8`` or ``uint16``, ``(H, W)`` or ``(H, W, C)``, NumPy, CPU
            tensor or CUDA array) every image is matched to. A gray reference gives its
            histogram to every plane; a colour one its channels (``mode="rgb"``) or its luma
            (``"luma"``, ``"gray"``, and gray images). Another depth than the image's is
            converted first as the library converts (``v * 257`` up, ``round(v / 257)`` down).
        mode: colour images: ``"luma"`` (default: Y of YCbCr matched to the reference's Y,
            chroma and alpha kept, as :func:`equalize`), ``"rgb"`` (each channel to the
            reference's channel, alpha kept: scikit-image's ``channel_axis=-1``), ``"gray"``
            (one output channel: the matched luma). ``uint16`` colour: ``"rgb"`` only.
        backend: ``"auto"``, ``"cuda"`` or ``"cpu"`` for host arrays (equal bytes).
        batch: as :func:`equalize`.
        channel_order: as :func:`equalize`: which channel of a colour image and of a colour
            reference is red, for their luma.
        out: an array the result is written into and which is returned, as :func:`equalize`
            takes it (the result's kind, device, shape and dtype; C-contiguous; not with a
            list). It may be the image (in place) or the reference: the reference's histograms
            are counted first, and the image's LUTs are applied into a new array copied into
            ``out`` when ``out`` overlaps the image (the 8-bit apply kernel does not write in
            place; 16-bit gray CUDA images are matched in place by the 16-bit engine).

    Returns:
        The matched image(s): same shape and dtype (``mode="gray"`` on colour gives ``(H,
        W)``), the same kind of array (a list for a list or tuple); ``out`` when given.

    Raises:
        TypeError: ``image`` or ``reference`` not an array of ``uint8``/``uint16``; a list as
            ``reference``; ``out`` as :func:`equalize` says.
        ValueError: bad shapes, a reference with no pixel, unknown ``mode``/``backend``/
            ``channel_order``, ``mode`` other than ``"rgb"`` on 16-bit colour or a 16-bit
            colour reference for a gray image (no 16-bit YCbCr), a CUDA array with
            ``backend="cpu"``, ``backend="cuda"`` without a usable GPU; ``out`` as
            :func:`equalize` says.
        RuntimeError: a CUDA failure.
    """
    _a.check_options(mode, "opencv", "auto", backend, channel_order)
    if mode == "gray":
        image = _a.gray_of_gray_alpha16(image, batch)
    if backend != "cpu" and _a.same_library(image, reference):
        res = _match_fast_gray(image, reference, batch, mode, out)
        if res is not None:
            return res
    if isinstance(image, (list, tuple)):
        _a.no_list_out(out)
    ref = _r.Reference(reference, channel_order, backend)
    if isinstance(image, (list, tuple)):
        return _a.each(image, lambda x: _match_one(x, ref, False, mode, backend, channel_order,
                                                   count_ref=False))
    return _match_one(image, ref, batch, mode, backend, channel_order, out)
