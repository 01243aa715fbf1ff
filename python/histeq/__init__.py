"""histeq — histogram equalization of 8-bit images on the GPU (CUDA), from Python.

The same library as the ``histeq`` command-line tool, byte for byte: every result equals what
``histeq equalize`` writes for the same pixels (``cv::equalizeHist`` of OpenCV 4.x with the
default ``formula="opencv"``; Gonzalez & Woods, *Digital Image Processing*, §3.3).

Arrays
------
* NumPy ``uint8`` arrays: the work runs on the GPU when one is usable, else on the CPU backend;
  the result is a new NumPy array. CPU PyTorch tensors work the same way and give a CPU tensor.
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
import concurrent.futures as _futures
from pathlib import Path as _Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

try:  # installed package (pip install .): histeq/_histeq*.so
    from . import _histeq
except ImportError:  # plain CMake build: PYTHONPATH=python:build/python
    import _histeq  # type: ignore[no-redef]

import numpy as _np

__version__: str = _histeq.__version__

__all__ = ["equalize", "histogram", "kernels", "equalize_files", "cuda_available",
           "load_image", "save_image", "MODES", "FORMULAS", "BACKENDS", "__version__"]

#: ``mode`` values: ``luma`` (Y of YCbCr, BT.601 full range; chroma kept), ``rgb`` (each
#: colour channel on its own), ``gray`` (one output channel, the equalized luma).
MODES = ("luma", "rgb", "gray")
#: ``formula`` values: ``opencv`` (cv::equalizeHist's float32 arithmetic), ``exact`` (integer).
FORMULAS = ("opencv", "exact")
#: ``backend`` values: ``auto`` (GPU when usable, else CPU), ``cuda``, ``cpu``.
BACKENDS = ("auto", "cuda", "cpu")

_WRITABLE = (".png", ".jpg", ".jpeg", ".bmp", ".tga")


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
    """A CUDA array seen as (library, pointer, shape, device, stream)."""

    __slots__ = ("lib", "obj", "ptr", "shape", "device", "stream")

    def __init__(self, lib, obj, ptr, shape, device, stream):
        self.lib, self.obj, self.ptr, self.shape = lib, obj, ptr, tuple(shape)
        self.device, self.stream = device, stream

    def empty(self, shape, dtype="uint8"):
        """A new array of the same library on the same device."""
        if self.lib == "torch":
            import torch
            tdt = torch.uint8 if dtype == "uint8" else torch.int64  # torch: no full uint64
            return torch.empty(shape, dtype=tdt, device=self.obj.device)
        import cupy
        with cupy.cuda.Device(self.device):
            return cupy.empty(shape, dtype=_np.uint8 if dtype == "uint8" else _np.uint64)


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _is_cupy(x) -> bool:
    return type(x).__module__.startswith("cupy") and hasattr(x, "data") and hasattr(x, "device")


def _contiguous_strides(shape, itemsize=1):
    strides, s = [], itemsize
    for n in reversed(shape):
        strides.append(s)
        s *= n
    return tuple(reversed(strides))


def _check_c_contiguous(shape, strides, argname):
    if strides is None:
        return
    want = _contiguous_strides(shape)
    if any(n > 1 and st != w for n, st, w in zip(shape, strides, want)):
        raise ValueError(f"{argname}: strides {tuple(strides)} (bytes) of shape {tuple(shape)} are "
                         f"not C-contiguous; pass a contiguous copy (.contiguous() / "
                         f"cupy.ascontiguousarray)")


def _as_device(x, argname: str) -> Optional[_Dev]:
    """The CUDA view of x, or None when x is a host array."""
    if _is_torch(x):
        if x.device.type == "cpu":
            return None
        if x.device.type != "cuda":
            raise ValueError(f"{argname}: a tensor on {x.device} cannot be reached; expected a "
                             f"CPU or CUDA tensor")
        import torch
        if x.dtype != torch.uint8:
            raise TypeError(f"{argname}: dtype {x.dtype}; expected torch.uint8")
        if not x.is_contiguous():
            _check_c_contiguous(tuple(x.shape), tuple(x.stride()), argname)
        dev = x.device.index if x.device.index is not None else torch.cuda.current_device()
        # the current stream handle without building a torch.cuda.Stream object (~3 us)
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        stream = raw(dev) if raw is not None else torch.cuda.current_stream(dev).cuda_stream
        return _Dev("torch", x, x.data_ptr(), tuple(x.shape), dev, stream)
    if _is_cupy(x):
        if x.dtype != _np.uint8:
            raise TypeError(f"{argname}: dtype {x.dtype}; expected uint8")
        if not x.flags.c_contiguous:
            _check_c_contiguous(x.shape, x.strides, argname)
        import cupy
        with x.device:
            stream = cupy.cuda.get_current_stream().ptr
        return _Dev("cupy", x, x.data.ptr, x.shape, x.device.id, stream)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        if cai.get("typestr") not in ("|u1", "<u1", ">u1"):
            raise TypeError(f"{argname}: typestr {cai.get('typestr')!r}; expected '|u1' (uint8)")
        if cai.get("mask") is not None:
            raise ValueError(f"{argname}: masked CUDA arrays are not supported")
        _check_c_contiguous(cai["shape"], cai.get("strides"), argname)
        if not cuda_available():
            raise ValueError(f"{argname}: a CUDA array, but this build cannot use the GPU "
                             f"({_cuda_state[1]})")
        ptr = int(cai["data"][0])
        stream = cai.get("stream") or 0
        stream = 0 if stream == 1 else int(stream)  # 1: the legacy default stream
        return _Dev("cai", x, ptr, cai["shape"], _histeq.pointer_device(ptr), stream)
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
        d = _Dev("cupy", d.obj, d.ptr, d.shape, d.device, d.stream)
    return d.empty(shape, dtype)


# ------------------------------------------------------------------------------------------
# equalize
# ------------------------------------------------------------------------------------------

def _host_array(x, argname: str):
    """(numpy array, wrap) for a host image; wrap turns a NumPy result back into x's kind."""
    if _is_torch(x):
        import torch
        if x.dtype != torch.uint8:
            raise TypeError(f"{argname}: dtype {x.dtype}; expected torch.uint8")
        return _np.ascontiguousarray(x.numpy()), torch.from_numpy
    if not isinstance(x, _np.ndarray):
        raise TypeError(f"{argname}: expected a NumPy array, a PyTorch tensor, a CuPy array, a "
                        f"CUDA array (__cuda_array_interface__ / DLPack) or a list of them; got "
                        f"{type(x).__name__}")
    if x.dtype != _np.uint8:
        raise TypeError(f"{argname}: dtype {x.dtype}; expected uint8 (convert with "
                        f".astype(numpy.uint8) after scaling to 0..255)")
    return _np.ascontiguousarray(x), (lambda a: a)


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


def _equalize_device(d: _Dev, batch, mode, formula, kernel):
    n, h, w, c, is_batch = _split_shape(d.shape, batch, "image")
    oc = _out_channels(mode, c)
    if oc == c:
        shape = d.shape
    else:
        shape = (n, h, w) if is_batch else (h, w)
    out = _result_like(d, shape)
    if n * h * w > 0:
        out_ptr = out.data_ptr() if d.lib == "torch" else out.data.ptr
        _histeq.equalize_device(d.device, d.stream, d.ptr, out_ptr, n, h * w, c, mode, formula,
                                kernel)
    return out


def _equalize_list(images, mode, formula, kernel, backend):
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
    """Equalizes the histogram of 8-bit images, as ``histeq equalize`` (and ``cv::equalizeHist``).

    Args:
        image: ``uint8``, channels last, C-contiguous: ``(H, W)``, ``(H, W, C)`` with C in 1..4,
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
            batches and lists on the GPU run the batched path (all images in two launches).
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
        return _equalize_device(d, batch, mode, formula, kernel)
    if backend == "cuda":
        _require_cuda("backend='cuda'")
    a, wrap = _host_array(image, "image")
    return wrap(_equalize_host(a, batch, mode, formula, kernel, backend))


# ------------------------------------------------------------------------------------------
# histogram
# ------------------------------------------------------------------------------------------

def histogram(image, bins: int = 256, kernel: str = "auto", *, mode: Optional[str] = None,
              backend: str = "auto", batch: Optional[bool] = None):
    """The histogram(s) of the planes ``equalize`` would equalize, as ``histeq histogram``.

    Args:
        image: as :func:`equalize` (one image, a batch or a list).
        bins: number of bins, 1..4096; sample v goes to bin ``v * bins // 256``. Colour images
            take 256 only.
        kernel: histogram kernel by name (:func:`kernels`) or ``"auto"``.
        mode: for colour images: ``"luma"``/``"gray"`` (one plane, Y) or ``"rgb"`` (R, G, B).
        backend: as :func:`equalize`.
        batch: as :func:`equalize`.

    Returns:
        Counts of one image: shape ``(bins,)`` for one plane, ``(3, bins)`` for ``mode="rgb"``;
        a batch adds a leading ``N``; a list gives a list. NumPy ``uint64`` for host input; on
        a CUDA array the same library's array on the same device (``torch.int64`` — torch has
        no full uint64 —, ``cupy.uint64``), queued on the current stream.

    Raises:
        as :func:`equalize`; ValueError for ``bins`` outside 1..4096 or not 256 on colour.
    """
    _check_options(mode, "opencv", kernel, backend)
    if isinstance(bins, bool) or not isinstance(bins, (int, _np.integer)):
        raise TypeError(f"bins: expected an int, got {type(bins).__name__}")
    bins = int(bins)
    if not 1 <= bins <= 4096:
        raise ValueError(f"bins: must be in 1..4096, got {bins}")
    if isinstance(image, (list, tuple)):
        return [histogram(x, bins, kernel, mode=mode, backend=backend, batch=False)
                for x in image]
    d = _as_device_checked(image, "image")
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
    out = _np.stack(res) if is_batch else res[0]
    return wrap(out)


# ------------------------------------------------------------------------------------------
# kernels, files
# ------------------------------------------------------------------------------------------

def kernels() -> List[Dict[str, Any]]:
    """The histogram kernels, in the registry's order (``histeq kernels``): a list of dicts
    ``{"name": str, "exact": bool, "summary": str}``. ``"auto"`` is not listed: it picks the
    fastest exact kernel per call (docs/kernels.md)."""
    return [{"name": n, "exact": e, "summary": s} for n, e, s in _histeq.kernels()]


def load_image(path: Union[str, os.PathLike]) -> _np.ndarray:
    """Decodes PNG/JPEG/BMP/TGA/GIF/PNM into a ``uint8`` array ``(H, W)`` or ``(H, W, C)``.
    Raises RuntimeError naming the file and the cause."""
    return _histeq.load_image(os.fspath(path))


def save_image(image: _np.ndarray, path: Union[str, os.PathLike], quality: int = 95) -> None:
    """Writes ``image`` (``uint8`` ``(H, W)`` / ``(H, W, C)``) as .png/.jpg/.jpeg/.bmp/.tga (by
    the extension) through a temporary file renamed over ``path``. ValueError for another
    extension or quality outside 1..100; RuntimeError for I/O failures."""
    a, _ = _host_array(image, "image")
    _, h, w, c, _ = _split_shape(a.shape, False, "image")
    _histeq.save_image(_np.ascontiguousarray(a), h, w, c, os.fspath(path), int(quality))


def _output_path(inp: str, output_dir: _Path, suffix: str, ext: Optional[str]) -> _Path:
    p = _Path(inp)
    e = ext if ext is not None else (p.suffix if p.suffix.lower() in _WRITABLE else ".png")
    if not e.startswith("."):
        e = "." + e
    return output_dir / (p.stem + suffix + e)


def equalize_files(inputs: Iterable[Union[str, os.PathLike]], output_dir: Union[str, os.PathLike],
                   *, mode: Optional[str] = None, formula: str = "opencv", kernel: str = "auto",
                   backend: str = "auto", quality: int = 95, suffix: str = "",
                   ext: Optional[str] = None, workers: Optional[int] = None,
                   max_pixels: int = 1 << 28) -> List[Dict[str, Any]]:
    """Equalizes image files into ``output_dir`` (created if missing), as ``histeq equalize``
    per file: ``output_dir/<stem><suffix><ext>``, ``ext`` defaulting to the input's when it is
    writable (.png .jpg .jpeg .bmp .tga), else ``.png``.

    Runs ``workers`` files at a time (default: the CPU count, at most the number of files) on
    threads over the single-file API (decode → equalize → encode, the GIL released). Issue 11's
    many-files executor (src/histeq/executor.hpp) replaces this loop without changing the call:
    see ``_run_files`` below.

    Returns:
        One dict per input, in order: ``input output width height channels output_channels
        mode backend kernel device``.

    Raises:
        ValueError: bad options, or two inputs that would write the same output.
        RuntimeError: the first file that fails (unreadable, not an image, unwritable output);
            files already done stay written.
    """
    _check_options(mode, formula, kernel, backend)
    if isinstance(inputs, (str, bytes, os.PathLike)):
        raise TypeError("inputs: expected a list of paths, got a single path")
    inputs = [os.fspath(p) for p in inputs]
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
        raise ValueError(f"quality: must be an int in 1..100, got {quality!r}")
    if backend == "cuda":
        _require_cuda("backend='cuda'")
    out_dir = _Path(output_dir)
    outputs = [_output_path(p, out_dir, suffix, ext) for p in inputs]
    seen: Dict[_Path, str] = {}
    for p, o in zip(inputs, outputs):
        if o.suffix.lower() not in _WRITABLE:
            raise ValueError(f"ext: {o.suffix!r} is not writable; expected one of "
                             f"{', '.join(_WRITABLE)}")
        if o in seen:
            raise ValueError(f"inputs: {seen[o]!r} and {p!r} would both write {str(o)!r}")
        seen[o] = p
    if not inputs:
        return []
    n_workers = workers if workers is not None else min(len(inputs), os.cpu_count() or 1)
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
        raise ValueError(f"workers: must be an int >= 1, got {workers!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    return _run_files(inputs, [str(o) for o in outputs], mode, formula, kernel, backend, quality,
                      int(max_pixels), n_workers)


def _run_files(inputs: List[str], outputs: List[str], mode, formula, kernel, backend, quality,
               max_pixels: int, n_workers: int) -> List[Dict[str, Any]]:
    """THE PLACE FOR THE EXECUTOR (issue 11): today a thread pool over _histeq.equalize_file;
    bind the executor as one _histeq call taking the same lists and options and returning the
    same report dicts in input order (first failure raised as RuntimeError)."""
    def one(i: int) -> Dict[str, Any]:
        return _histeq.equalize_file(inputs[i], outputs[i], mode, formula, kernel, backend,
                                     quality, max_pixels)

    if n_workers == 1:
        return [one(i) for i in range(len(inputs))]
    with _futures.ThreadPoolExecutor(n_workers) as pool:
        return list(pool.map(one, range(len(inputs))))
