"""histeq — histogram equalization and CLAHE of 8- and 16-bit images on the GPU, from Python.

The same library as the ``histeq`` command-line tool, byte for byte: every result equals what
``histeq equalize`` / ``histeq clahe`` write for the same pixels (``cv::equalizeHist`` of
OpenCV 4.x with the default ``formula="opencv"``; Gonzalez & Woods, *Digital Image Processing*,
§3.3; :func:`clahe` equals OpenCV 4.6's CLAHE).

Arrays
------
* NumPy ``uint8`` / ``uint16`` arrays: the work runs on the GPU when one is usable, else on the
  CPU backend; the result is a new NumPy array. CPU PyTorch tensors work the same way and give a
  CPU tensor. 16-bit images stay 16 bits (65536-bin histograms; equalization is OpenCV's
  formula over 65536 levels); colour 16-bit images are processed per channel (``mode="rgb"``).
* CUDA arrays — PyTorch tensors, CuPy arrays, any object with ``__cuda_array_interface__`` or a
  CUDA ``__dlpack__`` (the last two give a CuPy array back): read in place (no copy); the result
  is allocated by the same library on the same device; the work is queued on the caller's
  current stream (``torch.cuda.current_stream()``, ``cupy.cuda.get_current_stream()``, the
  interface's ``stream`` entry) and the call returns without synchronizing the device.
* Layout: channels last, C-contiguous. ``(H, W)`` gray; ``(H, W, C)`` with C = 1..4 (gray,
  gray+alpha, RGB, RGBA); batches ``(N, H, W)`` / ``(N, H, W, C)``; or a list of images of
  different sizes. A 3-D array is ``(H, W, C)`` when its last extent is 1..4, else
  ``(N, H, W)``; pass ``batch=True`` / ``False`` to say which.

Errors
------
``TypeError`` for an argument of the wrong type (not an array, wrong dtype); ``ValueError``
naming the argument for a bad value (shape, strides, unknown mode/formula/kernel/backend, a CUDA
array with ``backend="cpu"``, ``backend="cuda"`` without a usable GPU); ``RuntimeError`` for
CUDA failures and unreadable or unwritable files.
"""
from __future__ import annotations

import os
import sys as _sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

try:  # installed package (pip install .): histeq/_histeq*.so
    from . import _histeq
except ImportError:  # plain CMake build: PYTHONPATH=python:build/python
    import _histeq  # type: ignore[no-redef]

import numpy as _np

__version__: str = _histeq.__version__

__all__ = ["equalize", "histogram", "clahe", "kernels", "equalize_files", "cuda_available",
           "load_image", "save_image", "MODES", "FORMULAS", "BACKENDS", "__version__"]

#: ``mode`` values: ``luma`` (Y of YCbCr, BT.601 full range; chroma kept), ``rgb`` (each
#: colour channel on its own), ``gray`` (one output channel, the equalized luma).
MODES = ("luma", "rgb", "gray")
#: ``formula`` values: ``opencv`` (cv::equalizeHist's float32 arithmetic), ``exact`` (integer).
FORMULAS = ("opencv", "exact")
#: ``backend`` values: ``auto`` (GPU when usable, else CPU), ``cuda``, ``cpu``.
BACKENDS = ("auto", "cuda", "cpu")

_WRITABLE = (".png", ".jpg", ".jpeg", ".bmp", ".tga", ".pgm", ".ppm", ".pnm")


# ------------------------------------------------------------------------------------------
# Arguments
# ------------------------------------------------------------------------------------------

def _check_choice(name: str, value: Any, choices: Sequence[str], allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a str, got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"{name}: unknown value {value!r}; expected one of {', '.join(choices)}")


def _check_options(mode: Optional[str], formula: str, kernel: str, backend: str) -> None:
    if mode is None and formula == "opencv" and kernel == "auto" and backend == "auto" and \
            type(formula) is str and type(kernel) is str and type(backend) is str:
        return  # the defaults (the hot path)
    _check_choice("mode", mode, MODES, allow_none=True)
    _check_choice("formula", formula, FORMULAS)
    _check_choice("backend", backend, BACKENDS)
    if not isinstance(kernel, str):
        raise TypeError(f"kernel: expected a str, got {type(kernel).__name__}")
    if kernel != "auto" and kernel not in {k["name"] for k in kernels()}:
        names = ", ".join(k["name"] for k in kernels())
        raise ValueError(f"kernel: unknown kernel {kernel!r}; known: auto, {names}")


_cuda_state: Optional[tuple] = None


def cuda_available() -> bool:
    """True when a CUDA device can run this build's code (probed once per process)."""
    global _cuda_state
    if _cuda_state is None:
        _cuda_state = tuple(_histeq.cuda_available())
    return bool(_cuda_state[0])


def _require_cuda(argname: str) -> None:
    if not cuda_available():
        raise ValueError(f"{argname}: no usable CUDA device ({_cuda_state[1]})")


def _split_shape(shape: Sequence[int], batch: Optional[bool], argname: str):
    """(count, height, width, channels, is_batch) of a channels-last shape."""
    nd = len(shape)
    if batch is None:
        batch = nd == 4 or (nd == 3 and not 1 <= shape[2] <= 4)
    if batch:
        if nd == 3:
            return shape[0], shape[1], shape[2], 1, True
        if nd == 4:
            c = shape[3]
            if not 1 <= c <= 4:
                raise ValueError(f"{argname}: {c} channels in shape {tuple(shape)}; expected 1..4")
            return shape[0], shape[1], shape[2], c, True
        raise ValueError(f"{argname}: a batch has shape (N, H, W) or (N, H, W, C); "
                         f"got {tuple(shape)}")
    if nd == 2:
        return 1, shape[0], shape[1], 1, False
    if nd == 3:
        c = shape[2]
        if not 1 <= c <= 4:
            raise ValueError(f"{argname}: {c} channels in shape {tuple(shape)}; expected 1..4")
        return 1, shape[0], shape[1], c, False
    raise ValueError(f"{argname}: expected shape (H, W) or (H, W, C), or a batch "
                     f"(N, H, W) / (N, H, W, C); got {tuple(shape)}")


def _out_channels(mode: Optional[str], channels: int) -> int:
    return 1 if mode == "gray" else channels


# ------------------------------------------------------------------------------------------
# Device arrays
# ------------------------------------------------------------------------------------------

class _Dev:
    """A CUDA array seen as (library, pointer, shape, device, stream, sample type)."""

    __slots__ = ("lib", "obj", "ptr", "shape", "device", "stream", "dtype")

    def __init__(self, lib, obj, ptr, shape, device, stream, dtype="uint8"):
        self.lib, self.obj, self.ptr, self.shape = lib, obj, ptr, tuple(shape)
        self.device, self.stream, self.dtype = device, stream, dtype

    def empty(self, shape, dtype="uint8"):
        """A new array of the same library on the same device (dtype uint8, uint16 or uint64)."""
        if self.lib == "torch":
            import torch
            tdt = {"uint8": torch.uint8, "uint16": getattr(torch, "uint16", None)}.get(
                dtype, torch.int64)  # torch: no full uint64
            return torch.empty(shape, dtype=tdt, device=self.obj.device)
        import cupy
        with cupy.cuda.Device(self.device):
            return cupy.empty(shape, dtype={"uint8": _np.uint8, "uint16": _np.uint16}.get(
                dtype, _np.uint64))

    def data_ptr(self, arr) -> int:
        """The device address of an array this _Dev's library made (empty())."""
        return arr.data_ptr() if self.lib == "torch" else arr.data.ptr


_torch_types: set = set()
_torch_raw_stream = None


def _is_torch(x) -> bool:
    t = type(x)
    if t in _torch_types:
        return True
    if t.__module__.startswith("torch") and hasattr(x, "data_ptr"):
        _torch_types.add(t)
        return True
    return False


def _torch_stream(torch, dev: int) -> int:
    """The handle of torch's current stream on `dev`, without building a torch.cuda.Stream
    object (~3 us): torch._C._cuda_getCurrentRawStream where this torch has it (looked up once)."""
    global _torch_raw_stream
    if _torch_raw_stream is None:
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _torch_raw_stream = raw if raw is not None else \
            (lambda d: torch.cuda.current_stream(d).cuda_stream)
    return _torch_raw_stream(dev)


def _is_cupy(x) -> bool:
    return type(x).__module__.startswith("cupy") and hasattr(x, "data") and hasattr(x, "device")


def _contiguous_strides(shape, itemsize=1):
    strides, s = [], itemsize
    for n in reversed(shape):
        strides.append(s)
        s *= n
    return tuple(reversed(strides))


def _check_c_contiguous(shape, strides, argname, itemsize=1):
    if strides is None:
        return
    want = _contiguous_strides(shape, itemsize)
    if any(n > 1 and st != w for n, st, w in zip(shape, strides, want)):
        raise ValueError(f"{argname}: strides {tuple(strides)} (bytes) of shape {tuple(shape)} are "
                         f"not C-contiguous; pass a contiguous copy (.contiguous() / "
                         f"cupy.ascontiguousarray)")


def _as_device(x, argname: str) -> Optional[_Dev]:
    """The CUDA view of x, or None when x is a host array."""
    if _is_torch(x):
        if not x.is_cuda:
            if x.device.type == "cpu":
                return None
            raise ValueError(f"{argname}: a tensor on {x.device} cannot be reached; expected a "
                             f"CPU or CUDA tensor")
        torch = _sys.modules["torch"]
        if x.dtype == torch.uint8:
            dtype, item = "uint8", 1
        elif x.dtype == getattr(torch, "uint16", None):
            dtype, item = "uint16", 2
        else:
            raise TypeError(f"{argname}: dtype {x.dtype}; expected torch.uint8 or torch.uint16")
        if not x.is_contiguous():
            _check_c_contiguous(tuple(x.shape), tuple(s * item for s in x.stride()), argname,
                                item)
        dev = x.get_device()  # an int: no torch.device object
        return _Dev("torch", x, x.data_ptr(), tuple(x.shape), dev, _torch_stream(torch, dev),
                    dtype)
    if _is_cupy(x):
        if x.dtype not in (_np.uint8, _np.uint16):
            raise TypeError(f"{argname}: dtype {x.dtype}; expected uint8 or uint16")
        if not x.flags.c_contiguous:
            _check_c_contiguous(x.shape, x.strides, argname, x.dtype.itemsize)
        import cupy
        with x.device:
            stream = cupy.cuda.get_current_stream().ptr
        return _Dev("cupy", x, x.data.ptr, x.shape, x.device.id, stream, str(x.dtype))
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        typestr = cai.get("typestr")
        if typestr in ("|u1", "<u1", ">u1"):
            dtype, item = "uint8", 1
        elif typestr in ("<u2", "=u2") or (typestr == "|u2" and _sys.byteorder == "little"):
            dtype, item = "uint16", 2
        else:
            raise TypeError(f"{argname}: typestr {typestr!r}; expected '|u1' (uint8) or '<u2' "
                            f"(uint16)")
        if cai.get("mask") is not None:
            raise ValueError(f"{argname}: masked CUDA arrays are not supported")
        _check_c_contiguous(cai["shape"], cai.get("strides"), argname, item)
        if not cuda_available():
            raise ValueError(f"{argname}: a CUDA array, but this build cannot use the GPU "
                             f"({_cuda_state[1]})")
        ptr = int(cai["data"][0])
        stream = cai.get("stream") or 0
        stream = 0 if stream == 1 else int(stream)  # 1: the legacy default stream
        return _Dev("cai", x, ptr, cai["shape"], _histeq.pointer_device(ptr), stream, dtype)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__") and \
            not isinstance(x, _np.ndarray):
        dev_type, _ = x.__dlpack_device__()
        if int(dev_type) in (2, 13):  # kDLCUDA, kDLCUDAManaged
            try:
                import cupy
            except ImportError:
                raise TypeError(f"{argname}: a CUDA DLPack array of {type(x).__name__} needs "
                                f"CuPy to hold the result; pass a torch or CuPy array") from None
            return _as_device(cupy.from_dlpack(x), argname)
    return None


def _as_device_checked(x, argname: str) -> Optional[_Dev]:
    """_as_device, and for a CUDA array a usable device for this build (else ValueError)."""
    d = _as_device(x, argname)
    if d is not None and not cuda_available():
        raise ValueError(f"{argname}: a CUDA array, but this build cannot use the GPU "
                         f"({_cuda_state[1]})")
    return d


def _result_like(d: _Dev, shape, dtype: str = "uint8"):
    """A new array for the result: same library (CuPy for foreign CUDA arrays), same device."""
    if d.lib == "cai":
        try:
            import cupy  # noqa: F401
        except ImportError:
            raise TypeError(f"image: cannot allocate a result for {type(d.obj).__name__}; "
                            f"install CuPy or pass a torch or CuPy array") from None
        d = _Dev("cupy", d.obj, d.ptr, d.shape, d.device, d.stream, d.dtype)
    return d.empty(shape, dtype)


# ------------------------------------------------------------------------------------------
# equalize
# ------------------------------------------------------------------------------------------

def _host_array(x, argname: str):
    """(numpy array, wrap) for a host image (uint8 or uint16); wrap turns a NumPy result back
    into x's kind."""
    if _is_torch(x):
        import torch
        if x.dtype not in (torch.uint8, getattr(torch, "uint16", None)):
            raise TypeError(f"{argname}: dtype {x.dtype}; expected torch.uint8 or torch.uint16")
        return _np.ascontiguousarray(x.numpy()), torch.from_numpy
    if not isinstance(x, _np.ndarray):
        raise TypeError(f"{argname}: expected a NumPy array, a PyTorch tensor, a CuPy array, a "
                        f"CUDA array (__cuda_array_interface__ / DLPack) or a list of them; got "
                        f"{type(x).__name__}")
    if x.dtype.kind != "u" or x.dtype.itemsize not in (1, 2):
        raise TypeError(f"{argname}: dtype {x.dtype}; expected uint8 or uint16 (scale other "
                        f"types to 0..255 or 0..65535 and convert with .astype)")
    if x.dtype.itemsize == 2 and not x.dtype.isnative:
        x = x.astype(_np.uint16)  # samples in this machine's byte order
    return _np.ascontiguousarray(x), (lambda a: a)


def _host_dtype(x) -> str:
    """"uint16" for a NumPy array or CPU tensor of 16-bit samples, else "" (not an error here:
    _host_array names a wrong type)."""
    dt = str(getattr(x, "dtype", ""))
    return "uint16" if dt in ("uint16", "torch.uint16", ">u2", "<u2") else ""


def _via_host(d: _Dev, fn):
    """Runs fn(numpy array) on a copy of the CUDA array d on the host and returns its NumPy
    result as a new array of d's library on d's device. The copies synchronize the caller's
    stream: the path of the calls the device engines take only for gray planes (colour CLAHE and
    16-bit colour on CUDA arrays)."""
    if d.lib == "torch":
        res = fn(_np.ascontiguousarray(d.obj.cpu().numpy()))
        torch = _sys.modules["torch"]
        return torch.from_numpy(res).to(d.obj.device)
    import cupy
    host = cupy.asnumpy(d.obj if d.lib == "cupy" else cupy.asarray(d.obj))
    res = fn(_np.ascontiguousarray(host))
    with cupy.cuda.Device(d.device):
        return cupy.asarray(res)


def _equalize_host(a: _np.ndarray, batch, mode, formula, kernel, backend):
    n, h, w, c, is_batch = _split_shape(a.shape, batch, "image")
    if c == 1 and a.ndim == (4 if is_batch else 3):
        a = a.reshape(a.shape[:-1])  # (.., 1) → gray
        keep_axis = True
    else:
        keep_axis = False
    if is_batch and c == 1 and n > 1 and h * w > 0 and kernel == "auto" and backend != "cpu":
        # gray batch: one upload, the batched device path, one download (None: no GPU)
        out = _histeq.equalize_host_batch(a, n, h * w, formula, backend)
        if out is not None:
            return out.reshape((n, h, w, 1) if keep_axis else (n, h, w))
    outs = []
    for i in range(n):
        img = a[i] if is_batch else a
        if h * w == 0:
            out = _np.empty((h, w) if _out_channels(mode, c) == 1 else (h, w, c), _np.uint8)
        else:
            out, _ = _histeq.equalize_host(img, h, w, c, mode, formula, kernel, backend)
        if keep_axis:
            out = out.reshape(h, w, 1)
        outs.append(out)
    if is_batch:
        return _np.stack(outs) if outs else _np.empty(a.shape, _np.uint8)
    return outs[0]


#: How gray batches of one size run on the GPU (see _set_batch_path).
_batch_path = "auto"
_BATCH_PATHS = ("auto", "queued", "two_launch", "cluster", "table")


def _set_batch_path(path: str) -> str:
    """Benchmark knob: how ``equalize`` runs a gray ``(N, H, W)`` CUDA batch from now on —
    ``"auto"`` (the library's policy, kernels/batched/batched.hpp), ``"queued"`` (one launch, a work
    queue), ``"two_launch"`` (histogram + LUT launch, then apply launch), ``"cluster"`` (one
    launch, one thread-block cluster per image held in registers; images of 64 KiB to 2 MiB
    whose size is a multiple of 16, compute capability 9.0+, else two_launch), ``"table"`` (the list
    path: one descriptor per image, two launches per 64 images). Every path gives the same
    bytes. Returns the previous value."""
    global _batch_path
    _check_choice("path", path, _BATCH_PATHS)
    prev, _batch_path = _batch_path, path
    return prev


def _equalize_device(d: _Dev, batch, mode, formula, kernel):
    n, h, w, c, is_batch = _split_shape(d.shape, batch, "image")
    oc = _out_channels(mode, c)
    if d.lib == "torch" and oc == c:
        torch = _sys.modules["torch"]
        out = torch.empty_like(d.obj, memory_format=torch.contiguous_format)
    else:
        out = _result_like(d, d.shape if oc == c else ((n, h, w) if is_batch else (h, w)))
    if n * h * w > 0:
        out_ptr = out.data_ptr() if d.lib == "torch" else out.data.ptr
        _histeq.equalize_device(d.device, d.stream, d.ptr, out_ptr, n, h * w, c, mode, formula,
                                kernel, _batch_path)
    return out


def _equalize_torch_list(images, formula):
    """The batched list path for gray CUDA torch tensors of one device, without the general
    path's per-image work: one loop reading pointers and sizes, ONE output allocation cut into
    views (the results share one storage, disjoint), one compiled call. None when the list does
    not qualify (the general path then runs and reports any error)."""
    torch = _sys.modules["torch"]
    first = images[0]
    if type(first) not in _torch_types or not first.is_cuda:
        return None
    dev = first.get_device()
    u8 = torch.uint8
    ptrs, sizes = [], []
    for t in images:
        if type(t) not in _torch_types or not t.is_cuda or t.dtype != u8 or \
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
    _histeq.equalize_device_list(dev, _torch_stream(torch, dev), ptrs, outs_ptr, sizes, formula)
    return [o.view(t.shape) for o, t in zip(flat.split(sizes), images)]


# ------------------------------------------------------------------------------------------
# 16-bit images
# ------------------------------------------------------------------------------------------

def _check16(formula: str, kernel: str) -> None:
    """16-bit images have one LUT formula and one histogram kernel (hist_u16)."""
    if formula != "opencv":
        raise ValueError(f"formula: 16-bit images take OpenCV's formula over 65536 levels only "
                         f"(formula='opencv'); got {formula!r}")
    if kernel != "auto":
        raise ValueError(f"kernel: the registry's kernels count 8-bit samples; 16-bit images "
                         f"take kernel='auto' (65536-bin hist_u16); got {kernel!r}")


def _ptr(arr) -> int:
    """The device address of a torch tensor or CuPy array."""
    return arr.data_ptr() if hasattr(arr, "data_ptr") else arr.data.ptr


def _per_image_host(a: _np.ndarray, batch, fn, empty_channels):
    """fn(image, h, w, c) on each image of a host array (one image or a batch), the results
    shaped as the input's images when they hold as many samples, stacked for a batch.
    empty_channels(c): the channels of an empty image's result."""
    n, h, w, c, is_batch = _split_shape(a.shape, batch, "image")
    outs = []
    for i in range(n):
        img = _np.ascontiguousarray(a[i] if is_batch else a)
        if h * w == 0:
            out = _np.empty(img.shape if empty_channels(c) == c else (h, w), a.dtype)
        else:
            out = fn(img, h, w, c)
            if out.size == img.size:
                out = out.reshape(img.shape)
        outs.append(out)
    if is_batch:
        return _np.stack(outs) if outs else _np.empty(a.shape, a.dtype)
    return outs[0]


def _equalize16_host(a: _np.ndarray, batch, mode, backend):
    return _per_image_host(
        a, batch, lambda img, h, w, c: _histeq.equalize_host16(img, h, w, c, mode, backend)[0],
        lambda c: c)


def _equalize16_device(d: _Dev, batch, mode):
    n, h, w, c, is_batch = _split_shape(d.shape, batch, "image")
    if c != 1:  # gray+alpha and colour: the whole-image path on the host
        return _via_host(d, lambda a: _equalize16_host(a, batch, mode, "auto"))
    out = _result_like(d, d.shape, "uint16")
    if n * h * w > 0:
        _histeq.equalize16_device(d.device, d.stream, d.ptr, _ptr(out), n, h * w)
    return out


def _equalize_list(images, mode, formula, kernel, backend):
    if images and kernel == "auto" and backend != "cpu" and _is_torch(images[0]) and \
            cuda_available():
        outs = _equalize_torch_list(images, formula)
        if outs is not None:
            return outs
    devs = [_as_device_checked(x, f"image[{i}]") for i, x in enumerate(images)]
    if all(d is None for d in devs):
        return [equalize(x, mode=mode, formula=formula, kernel=kernel, backend=backend,
                         batch=False) for x in images]
    if any(d is None for d in devs):
        raise ValueError("image: a list mixes host and CUDA arrays; pass one kind")
    if len({(d.lib, d.device) for d in devs}) != 1:
        raise ValueError("image: a list of CUDA arrays must come from one library and one device")
    if backend == "cpu":
        raise ValueError("backend: 'cpu' cannot take CUDA arrays; copy them to the host first")
    if any(d.dtype != "uint8" for d in devs):
        return [equalize(x, mode=mode, formula=formula, kernel=kernel, backend=backend,
                         batch=False) for x in images]
    shapes = [_split_shape(d.shape, False, f"image[{i}]") for i, d in enumerate(devs)]
    if kernel != "auto" or any(s[3] != 1 for s in shapes):
        return [_equalize_device(d, False, mode, formula, kernel) for d in devs]
    outs = [_result_like(d, d.shape) for d in devs]
    ptr = (lambda o: o.data_ptr()) if devs[0].lib == "torch" else (lambda o: o.data.ptr)
    _histeq.equalize_device_list(devs[0].device, devs[0].stream, [d.ptr for d in devs],
                                 [ptr(o) for o in outs], [s[1] * s[2] for s in shapes], formula)
    return outs


def equalize(image, *, mode: Optional[str] = None, formula: str = "opencv", kernel: str = "auto",
             backend: str = "auto", batch: Optional[bool] = None):
    """Equalizes the histogram of 8- or 16-bit images, as ``histeq equalize`` (and
    ``cv::equalizeHist``; 16-bit: its formula over 65536 levels, include/histeq/equalize16.hpp).

    Args:
        image: ``uint8`` or ``uint16`` (16-bit: ``formula="opencv"`` and ``kernel="auto"`` only;
            colour per channel, ``mode="rgb"``; gray+alpha keeps alpha), channels last
            (host arrays of other layouts are copied), CUDA arrays C-contiguous: ``(H, W)``,
            ``(H, W, C)`` with C in 1..4,
            a batch ``(N, H, W)`` / ``(N, H, W, C)``, or a list of such images (sizes may
            differ). NumPy array or CPU tensor (GPU when usable, else CPU; result on the host),
            or a CUDA array (PyTorch, CuPy, ``__cuda_array_interface__``, DLPack): read in
            place, result allocated by the same library on the same device, work queued on the
            caller's current stream without synchronizing.
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

    Returns:
        The equalized image(s): same shape, except ``mode="gray"`` on colour gives ``(H, W)``
        (``(N, H, W)`` for a batch); same kind of array (a list for a list).

    Raises:
        TypeError: ``image`` is not an array (or list of them) or not ``uint8``.
        ValueError: bad shape or strides, unknown ``mode``/``formula``/``kernel``/``backend``,
            a CUDA array with ``backend="cpu"``, ``backend="cuda"`` without a usable GPU.
        RuntimeError: a CUDA failure.
    """
    _check_options(mode, formula, kernel, backend)
    if isinstance(image, (list, tuple)):
        return _equalize_list(list(image), mode, formula, kernel, backend)
    d = _as_device_checked(image, "image")
    if d is not None:
        if backend == "cpu":
            raise ValueError("backend: 'cpu' cannot take a CUDA array; copy it to the host first")
        if d.dtype == "uint16":
            _check16(formula, kernel)
            return _equalize16_device(d, batch, mode)
        return _equalize_device(d, batch, mode, formula, kernel)
    if backend == "cuda":
        _require_cuda("backend='cuda'")
    a, wrap = _host_array(image, "image")
    if a.dtype == _np.uint16:
        _check16(formula, kernel)
        return wrap(_equalize16_host(a, batch, mode, backend))
    return wrap(_equalize_host(a, batch, mode, formula, kernel, backend))


# ------------------------------------------------------------------------------------------
# histogram
# ------------------------------------------------------------------------------------------

def histogram(image, bins: Optional[int] = None, kernel: str = "auto", *,
              mode: Optional[str] = None, backend: str = "auto", batch: Optional[bool] = None):
    """The histogram(s) of the planes ``equalize`` would equalize, as ``histeq histogram``.

    Args:
        image: as :func:`equalize` (one image, a batch or a list), ``uint8`` or ``uint16``.
        bins: ``uint8``: number of bins, 1..4096 (default 256); sample v goes to bin
            ``v * bins // 256``; colour images take 256 only. ``uint16``: 65536 (the default and
            the only value; one bin per level).
        kernel: histogram kernel by name (:func:`kernels`) or ``"auto"``.
        mode: for colour images: ``"luma"``/``"gray"`` (one plane, Y) or ``"rgb"`` (R, G, B).
        backend: as :func:`equalize`.
        batch: as :func:`equalize`.

    Returns:
        Counts of one image: shape ``(bins,)`` for one plane, ``(3, bins)`` for ``mode="rgb"``
        (16-bit colour images: always R, G, B; gray and gray+alpha: the gray channel);
        a batch adds a leading ``N``; a list gives a list. NumPy ``uint64`` for host input; on
        a CUDA array the same library's array on the same device (``torch.int64`` — torch has
        no full uint64 —, ``cupy.uint64``), queued on the current stream.

    Raises:
        as :func:`equalize`; ValueError for ``bins`` outside 1..4096 or not 256 on colour, or
        not 65536 on ``uint16``.
    """
    _check_options(mode, "opencv", kernel, backend)
    if bins is not None and (isinstance(bins, bool) or not isinstance(bins, (int, _np.integer))):
        raise TypeError(f"bins: expected an int, got {type(bins).__name__}")
    if bins is not None and not 1 <= int(bins) <= 4096 and int(bins) != 65536:
        raise ValueError(f"bins: must be in 1..4096 (8-bit) or 65536 (16-bit), got {bins}")
    if isinstance(image, (list, tuple)):
        return [histogram(x, bins, kernel, mode=mode, backend=backend, batch=False)
                for x in image]
    d = _as_device_checked(image, "image")
    if (d.dtype if d is not None else _host_dtype(image)) == "uint16":
        return _histogram16(image, d, bins, kernel, mode, backend, batch)
    bins = 256 if bins is None else int(bins)
    if bins > 4096:
        raise ValueError(f"bins: 8-bit images take 1..4096 bins, got {bins}")
    if d is not None:
        if backend == "cpu":
            raise ValueError("backend: 'cpu' cannot take a CUDA array; copy it to the host first")
        n, h, w, c, is_batch = _split_shape(d.shape, batch, "image")
        if c != 1 and bins != 256:
            raise ValueError(f"bins: colour images take 256 bins only; got {bins}")
        planes = 3 if (c >= 3 and mode == "rgb") else 1
        out = _result_like(d, (n, planes, bins), "uint64")
        optr = out.data_ptr() if d.lib == "torch" else out.data.ptr
        step = h * w * c
        for i in range(n):
            _histeq.histogram_device(d.device, d.stream, d.ptr + i * step, h * w, c, mode, bins,
                                     kernel, optr + i * planes * bins * 8)
        if planes == 1:
            out = out.reshape(n, bins)
        return out if is_batch else out[0]
    if backend == "cuda":
        _require_cuda("backend='cuda'")
    a, wrap = _host_array(image, "image")
    n, h, w, c, is_batch = _split_shape(a.shape, batch, "image")
    if c != 1 and bins != 256:
        raise ValueError(f"bins: colour images take 256 bins only; got {bins}")
    res = []
    for i in range(n):
        img = _np.ascontiguousarray(a[i] if is_batch else a)
        hs = _histeq.histogram_host(img, h, w, c, mode, bins, kernel, backend)
        res.append(hs[0] if hs.shape[0] == 1 else hs)
    if not res:  # an empty batch
        planes = 3 if (c >= 3 and mode == "rgb") else 1
        return wrap(_np.zeros((0, bins) if planes == 1 else (0, planes, bins), _np.uint64))
    out = _np.stack(res) if is_batch else res[0]
    return wrap(out)


def _histogram16(image, d: Optional[_Dev], bins, kernel, mode, backend, batch):
    """histogram() of a uint16 image: 65536 bins per plane (hist_u16 on the GPU)."""
    if bins is not None and int(bins) != 65536:
        raise ValueError(f"bins: 16-bit images take 65536 bins (one per level), got {bins}")
    _check16("opencv", kernel)

    def host(a, backend):
        def one(img, h, w, c):
            hs = _histeq.histogram_host16(img, h, w, c, mode, backend)
            return hs[0] if hs.shape[0] == 1 else hs
        n, h, w, c, is_batch = _split_shape(a.shape, batch, "image")
        res = [one(_np.ascontiguousarray(a[i] if is_batch else a), h, w, c) for i in range(n)]
        if not res:
            return _np.zeros((0, 65536), _np.uint64)
        return _np.stack(res) if is_batch else res[0]

    if d is not None:
        if backend == "cpu":
            raise ValueError("backend: 'cpu' cannot take a CUDA array; copy it to the host first")
        n, h, w, c, is_batch = _split_shape(d.shape, batch, "image")
        if c != 1:  # gray+alpha and colour: their planes on the host
            torch_out = d.lib == "torch"
            return _via_host(d, lambda a: host(a, "auto").astype(
                _np.int64 if torch_out else _np.uint64))
        out = _result_like(d, (n, 65536), "uint64")
        if n * h * w > 0:
            _histeq.histogram16_device(d.device, d.stream, d.ptr, n, h * w, _ptr(out))
        else:
            out.fill(0)
        return out if is_batch else out[0]
    if backend == "cuda":
        _require_cuda("backend='cuda'")
    a, wrap = _host_array(image, "image")
    return wrap(host(a, backend))


# ------------------------------------------------------------------------------------------
# clahe
# ------------------------------------------------------------------------------------------

def _clahe_args(clip, tiles):
    if isinstance(clip, bool) or not isinstance(clip, (int, float, _np.integer, _np.floating)):
        raise TypeError(f"clip: expected a number, got {type(clip).__name__}")
    clip = float(clip)
    if clip != clip or clip in (float("inf"), float("-inf")):
        raise ValueError(f"clip: must be finite, got {clip}")
    if isinstance(tiles, (int, _np.integer)) and not isinstance(tiles, bool):
        tiles = (int(tiles), int(tiles))
    if not isinstance(tiles, (tuple, list)) or len(tiles) != 2 or \
            any(isinstance(t, bool) or not isinstance(t, (int, _np.integer)) for t in tiles):
        raise TypeError(f"tiles: expected (columns, rows) as two ints, got {tiles!r}")
    tx, ty = int(tiles[0]), int(tiles[1])
    if not (1 <= tx <= 1024 and 1 <= ty <= 1024):
        raise ValueError(f"tiles: each count must be in 1..1024, got ({tx}, {ty})")
    return clip, tx, ty


def _clahe_host(a: _np.ndarray, batch, mode, clip, tx, ty, backend):
    fn = _histeq.clahe_host16 if a.dtype == _np.uint16 else _histeq.clahe_host
    return _per_image_host(
        a, batch, lambda img, h, w, c: fn(img, h, w, c, mode, clip, tx, ty, backend)[0],
        lambda c: c if a.dtype == _np.uint16 else _out_channels(mode, c))


def clahe(image, *, clip: float = 2.0, tiles=(8, 8), mode: Optional[str] = None,
          backend: str = "auto", batch: Optional[bool] = None):
    """Contrast-limited adaptive histogram equalization, as ``histeq clahe`` and OpenCV's
    ``cv2.createCLAHE(clipLimit=clip, tileGridSize=tiles).apply(img)`` (byte-identical to
    OpenCV 4.6 on gray ``uint8`` and ``uint16`` images; Zuiderveld, "Contrast Limited Adaptive
    Histogram Equalization", Graphics Gems IV, 1994).

    Args:
        image: ``uint8`` or ``uint16``, as :func:`equalize` (one image, a batch, a list).
            Gray CUDA arrays (``(H, W)``, ``(H, W, 1)``, ``(N, H, W)``) run on their device on
            the caller's current stream without synchronizing; colour CUDA arrays take a copy
            through the host (synchronizing), then come back as the same library's array.
        clip: OpenCV's clipLimit: the per-bin limit is ``max(1, int(clip * tile_area / bins))``;
            ``0`` (or less) disables clipping. Default 2.0 (OpenCV's own default is 40).
        tiles: OpenCV's tileGridSize ``(columns, rows)``, each 1..1024 (an int n means
            ``(n, n)``). Default ``(8, 8)``. Sizes the grid does not divide are padded as
            OpenCV pads them (BORDER_REFLECT_101) for the tile histograms.
        mode: colour ``uint8`` images: ``"luma"`` (default: CLAHE on Y of YCbCr, chroma and
            alpha kept; within ±1 of OpenCV's YCrCb round trip), ``"rgb"`` (each channel),
            ``"gray"`` (one output channel). ``uint16`` colour images: ``"rgb"`` only.
        backend: ``"auto"``, ``"cuda"`` or ``"cpu"`` for host arrays (equal bytes).
        batch: as :func:`equalize`.

    Returns:
        The result, same shape and dtype (``mode="gray"`` on colour gives ``(H, W)``), the same
        kind of array (a list for a list).

    Raises:
        TypeError: ``image`` not an array of ``uint8``/``uint16``; ``clip`` not a number;
            ``tiles`` not two ints.
        ValueError: bad shape, ``tiles`` outside 1..1024, a grid whose LUTs would exceed 2^28
            entries (16-bit: at most 4096 tiles), unknown ``mode``/``backend``, ``mode`` other
            than ``"rgb"`` on 16-bit colour, a CUDA array with ``backend="cpu"``.
        RuntimeError: a CUDA failure.
    """
    _check_choice("mode", mode, MODES, allow_none=True)
    _check_choice("backend", backend, BACKENDS)
    clip, tx, ty = _clahe_args(clip, tiles)
    if isinstance(image, (list, tuple)):
        return [clahe(x, clip=clip, tiles=(tx, ty), mode=mode, backend=backend, batch=False)
                for x in image]
    d = _as_device_checked(image, "image")
    if d is not None:
        if backend == "cpu":
            raise ValueError("backend: 'cpu' cannot take a CUDA array; copy it to the host first")
        n, h, w, c, is_batch = _split_shape(d.shape, batch, "image")
        if c != 1:
            return _via_host(d, lambda a: _clahe_host(a, batch, mode, clip, tx, ty, "auto"))
        out = _result_like(d, d.shape, d.dtype)
        if n * h * w > 0:
            _histeq.clahe_device(d.device, d.stream, d.ptr, _ptr(out), n, h, w,
                                 d.dtype == "uint16", clip, tx, ty)
        return out
    if backend == "cuda":
        _require_cuda("backend='cuda'")
    a, wrap = _host_array(image, "image")
    return wrap(_clahe_host(a, batch, mode, clip, tx, ty, backend))


# ------------------------------------------------------------------------------------------
# kernels, files
# ------------------------------------------------------------------------------------------

def kernels() -> List[Dict[str, Any]]:
    """The histogram kernels, in the registry's order (``histeq kernels``): a list of dicts
    ``{"name": str, "exact": bool, "summary": str}``. ``"auto"`` is not listed: it picks the
    fastest exact kernel per call (docs/kernels.md)."""
    return [{"name": n, "exact": e, "summary": s} for n, e, s in _histeq.kernels()]


def load_image(path: Union[str, os.PathLike], depth: Optional[int] = 8) -> _np.ndarray:
    """Decodes PNG/JPEG/BMP/TGA/GIF/PNM into an array ``(H, W)`` or ``(H, W, C)``.

    depth: ``8`` (default, as ``cv2.imread``'s default): ``uint8``, 16-bit files reduced to 8
    bits; ``16``: ``uint16`` (PNG and PGM/PPM only; 8-bit samples widened as ``v * 257``);
    ``None``: the file's own depth (``uint16`` for a 16-bit PNG or a PGM/PPM with maxval > 255,
    as ``histeq`` keeps them). Raises RuntimeError naming the file and the cause, ValueError for
    another depth."""
    if depth not in (8, 16, None) or isinstance(depth, bool):
        raise ValueError(f"depth: 8, 16 or None, got {depth!r}")
    p = os.fsdecode(path)
    if depth == 16 or (depth is None and _histeq.is_16bit_image(p)):
        return _histeq.load_image16(p)
    return _histeq.load_image(p)


def save_image(image: _np.ndarray, path: Union[str, os.PathLike], quality: int = 95) -> None:
    """Writes ``image`` (``uint8`` or ``uint16``, ``(H, W)`` / ``(H, W, C)``) as
    .png/.jpg/.jpeg/.bmp/.tga or a binary .pgm (gray) / .ppm (colour) / .pnm (either), by the
    extension, through a temporary file renamed over ``path``; ``uint16`` images as 16-bit
    .png/.pgm/.ppm/.pnm only. ValueError for another extension, quality outside 1..100, or an
    image the format cannot hold (colour as .pgm, gray as .ppm, alpha in PGM/PPM: the message
    names the extension that fits); RuntimeError for I/O failures."""
    if isinstance(quality, bool) or not isinstance(quality, (int, _np.integer)):
        raise TypeError(f"quality: expected an int, got {type(quality).__name__}")
    if not 1 <= int(quality) <= 100:
        raise ValueError(f"quality: must be in 1..100, got {quality}")
    path = os.fsdecode(path)
    a, _ = _host_array(image, "image")
    _, h, w, c, _ = _split_shape(a.shape, False, "image")
    if a.dtype == _np.uint16:
        ext = os.path.splitext(path)[1].lower()
        if ext not in (".png", ".pgm", ".ppm", ".pnm"):
            raise ValueError(f"path: 16-bit images are written as .png, .pgm, .ppm or .pnm; got "
                             f"{ext or 'no extension'!r} (convert to uint8 for other formats)")
        _histeq.save_image16(a, h, w, c, path)
        return
    _histeq.save_image(_np.ascontiguousarray(a), h, w, c, path, int(quality))


_READABLE = (".png", ".jpg", ".jpeg", ".bmp", ".tga", ".gif", ".pnm", ".pgm", ".ppm")
_FORMATS = {"png": ".png", "jpg": ".jpg", "jpeg": ".jpg", "bmp": ".bmp", "tga": ".tga",
            "pgm": ".pgm", "ppm": ".ppm", "pnm": ".pnm"}


def _collect_inputs(inputs: List[str], recursive: bool) -> List[tuple]:
    """(input, output path relative to the output folder) per file, as the CLI's batch: a file
    as itself (its name); a folder's image files by extension, sorted by path, with their path
    under the folder (subfolders with ``recursive``)."""
    out = []
    for inp in inputs:
        if os.path.isdir(inp):
            found = []
            if recursive:
                for root, _dirs, files in os.walk(inp):
                    for f in files:
                        p = os.path.join(root, f)
                        if os.path.splitext(f)[1].lower() in _READABLE and os.path.isfile(p):
                            found.append((p, os.path.relpath(p, inp)))
            else:
                try:
                    entries = list(os.scandir(inp))
                except OSError as e:
                    raise RuntimeError(f"cannot list folder '{inp}': {e.strerror}") from None
                for e in entries:
                    if os.path.splitext(e.name)[1].lower() in _READABLE and e.is_file():
                        found.append((os.path.join(inp, e.name), e.name))
            found.sort(key=lambda t: t[0])
            out.extend(found)
        else:
            out.append((inp, os.path.basename(inp)))
    return out


def _check_int(name: str, value: Any, low: int, high: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, _np.integer)) or value < low or \
            (high is not None and value > high):
        rng = f"{low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name}: must be an int {rng}, got {value!r}")
    return int(value)


def equalize_files(inputs: Iterable[Union[str, os.PathLike]], output_dir: Union[str, os.PathLike],
                   *, mode: Optional[str] = None, formula: str = "opencv", kernel: str = "auto",
                   backend: str = "auto", format: Optional[str] = None, recursive: bool = False,
                   jobs: int = 0, max_inflight_mb: Optional[int] = None, devices: Optional[Sequence[int]] = None,
                   quality: int = 95, png_level: Optional[int] = None,
                   subsampling: Union[str, int] = "420", decoder: str = "auto", suffix: str = "",
                   max_pixels: int = 1 << 28, errors: str = "report") -> List[Dict[str, Any]]:
    """Equalizes image files into ``output_dir`` with the many-files executor — the engine of
    ``histeq equalize INPUT... -o FOLDER`` (src/histeq/executor.hpp): files are read, decoded,
    equalized (on the GPU with backend auto/cuda), encoded and written overlapping across files,
    and every output is byte-identical to the CLI's for the same inputs and options — except
    16-bit PNG/PGM inputs, which this executor reads at 8 bits (stb_image's ``v >> 8``) and
    writes as 8-bit files, where the CLI keeps 16 bits: for those, ``load_image(path,
    depth=None)``, ``equalize`` and ``save_image`` keep 16 bits (a known gap).

    Outputs, as the CLI: a file input writes ``output_dir/<name>``; a folder input writes its
    image files (.png .jpg .jpeg .bmp .tga .gif .pnm .pgm .ppm; subfolders with ``recursive``,
    keeping their relative paths); ``format`` replaces every output's extension, otherwise each
    file keeps its own (ValueError for an input histeq cannot write back: pass ``format``).
    ``suffix`` (Python only) goes before the extension: ``a.png`` → ``a-eq.png``.

    Args:
        inputs: files and folders (a list; a single path is a TypeError).
        output_dir: created (with subfolders) if missing.
        mode, formula, kernel, backend: as :func:`equalize`.
        format: ``"png"``, ``"jpg"``, ``"bmp"``, ``"tga"``, ``"pgm"``, ``"ppm"``, ``"pnm"``
            (``--format``).
        recursive: descend into subfolders of folder inputs (``-r``).
        jobs: CPU worker threads (``--jobs``; 0: the number of cores).
        max_inflight_mb: cap on the megabytes of images in flight (``--max-inflight-mb``;
            None: the CLI's default, max(256, 128 x jobs) MB, at most a quarter of the RAM).
        devices: CUDA device ordinals, one device worker each (``--devices``; repeats allowed;
            default every visible device).
        quality: JPEG quality 1..100. png_level: PNG deflate level 0..9 (default the CLI's,
            1: ISA-L's igzip on several threads; 2..9: libdeflate, 9 smallest).
        subsampling: JPEG chroma subsampling of colour outputs: ``"444"``, ``"422"``, ``"420"``.
        decoder: JPEG route as the CLI's ``--decoder``: ``"auto"`` (nvJPEG on the device workers
            when the build has it and a GPU runs, libjpeg-turbo on the CPU workers meanwhile),
            ``"gpu"`` (every JPEG waits for nvJPEG), ``"cpu"`` (libjpeg-turbo only).
        max_pixels: refuse images with more pixels (checked from the header).
        errors: ``"report"`` (default): a file that fails is a report with ``ok=False`` and its
            ``error``, the others run on; ``"raise"``: after the run, RuntimeError with the
            first failure (the other files are written).

    Returns:
        One dict per file, in input order (folders expanded): ``input output ok error width
        height channels output_channels decoder encoder output_bytes mode backend kernel
        device times`` (``times``: milliseconds per stage ``read decode upload equalize download
        encode write``). ``error`` is None when ``ok``.

    Raises:
        TypeError: ``inputs`` is a single path. ValueError: bad options, an input that cannot
        be written back without ``format``, two inputs that would write the same output.
        RuntimeError: a folder that cannot be listed; with ``errors="raise"`` a failed file.

    The call releases the GIL while the files run (other Python threads go on).
    """
    _check_options(mode, formula, kernel, backend)
    if isinstance(inputs, (str, bytes, os.PathLike)):
        raise TypeError("inputs: expected a list of paths, got a single path")
    inputs = [os.fspath(p) for p in inputs]
    quality = _check_int("quality", quality, 1, 100)
    if png_level is None:
        png_level = _histeq.DEFAULT_PNG_LEVEL
    png_level = _check_int("png_level", png_level, 0, 9)
    jobs = _check_int("jobs", jobs, 0)
    max_inflight_mb = (0 if max_inflight_mb is None
                       else _check_int("max_inflight_mb", max_inflight_mb, 1))
    max_pixels = _check_int("max_pixels", max_pixels, 1)
    devs = [] if devices is None else [_check_int("devices", d, 0, 1024) for d in devices]
    if devices is not None and not devs:
        raise ValueError("devices: empty list")
    _check_choice("decoder", decoder, ("auto", "cpu", "gpu"))
    _check_choice("errors", errors, ("report", "raise"))
    if not isinstance(suffix, str):
        raise TypeError(f"suffix: expected a str, got {type(suffix).__name__}")
    fmt = None
    if format is not None:
        key = str(format).lower().lstrip(".")
        if key not in _FORMATS:
            raise ValueError(f"format: unknown format {format!r}; expected png, jpg, bmp, tga, "
                             f"pgm, ppm or pnm")
        fmt = _FORMATS[key]
    subsampling = str(subsampling)
    if subsampling not in ("444", "422", "420", "4:4:4", "4:2:2", "4:2:0"):
        raise ValueError(f"subsampling: expected 444, 422 or 420, got {subsampling!r}")
    if backend == "cuda":
        _require_cuda("backend='cuda'")
    out_dir = os.fspath(output_dir)
    items = []
    seen: Dict[str, str] = {}
    for inp, rel in _collect_inputs(inputs, bool(recursive)):
        stem, e = os.path.splitext(rel)
        if fmt is not None:
            e = fmt
        elif e.lower() not in _WRITABLE:
            raise ValueError(f"format: cannot write {inp!r} in its own format "
                             f"({e or 'no extension'}; histeq writes png, jpg, bmp, tga, pgm, ppm, "
                             f"pnm): pass "
                             f"format='png' (or jpg, bmp, tga)")
        out = os.path.normpath(os.path.join(out_dir, stem + suffix + e))
        if out in seen:
            raise ValueError(f"inputs: {seen[out]!r} and {inp!r} would both write {out!r}")
        seen[out] = inp
        items.append((inp, out, fmt or ""))
    if not items:
        return []
    for d in sorted({os.path.dirname(o) for _, o, _ in items}):
        if d:
            os.makedirs(d, exist_ok=True)
    reports = _run_files(items, mode, formula, kernel, backend, quality, png_level, subsampling,
                         jobs, max_inflight_mb << 20, devs, max_pixels, decoder)
    if errors == "raise":
        for r in reports:
            if not r["ok"]:
                raise RuntimeError(r["error"])
    return reports


def _run_files(items, mode, formula, kernel, backend, quality, png_level, subsampling, jobs,
               max_inflight_bytes, devices, max_pixels, decoder="auto") -> List[Dict[str, Any]]:
    """One Executor run (GIL released) over items = [(input, output, format)]."""
    reports, _fallback = _histeq.run_files(items, mode, formula, kernel, backend, quality,
                                           png_level, subsampling, jobs, max_inflight_bytes,
                                           devices, max_pixels, decoder)
    return reports
