"""Arrays for histeq's calls: argument checks, NumPy / CPU tensors on the host, and CUDA arrays
(PyTorch, CuPy, __cuda_array_interface__, DLPack) seen as a device pointer, a shape, a device
and the caller's current stream. Private: the histeq package's functions use it.

The CUDA path is the hot one (a call that queues one or two kernel launches): what can be looked
up once is (the torch and CuPy modules, torch's dtypes and raw-stream function, the types of torch
tensors and CuPy arrays), and nothing is allocated per call beyond the result and one small record
(Dev). Gray torch tensors and CuPy arrays, the common case, take fast_gray (torch_gray,
cupy_gray): the few reads of the array that the call needs, no record, the result allocated by
the caller, or given as out= (fast_out: its reads and a check that its memory is apart from the
input's, or is the input's where the kernels take that)."""
from __future__ import annotations

import sys as _sys
from typing import Any, Optional, Sequence, Tuple

import numpy as _np

try:  # installed package (pip install .): histeq/_histeq*.so
    from . import _histeq
except ImportError:  # plain CMake build: PYTHONPATH=python:build/python
    import _histeq  # type: ignore  # noqa: F401

#: ``mode`` values: ``luma`` (Y of YCbCr, BT.601 full range; chroma kept), ``rgb`` (each
#: colour channel on its own), ``gray`` (one output channel, the equalized luma).
MODES = ("luma", "rgb", "gray")
#: ``formula`` values: ``opencv`` (cv::equalizeHist's float32 arithmetic), ``exact`` (integer).
FORMULAS = ("opencv", "exact")
#: ``backend`` values: ``auto`` (GPU when usable, else CPU), ``cuda``, ``cpu``.
BACKENDS = ("auto", "cuda", "cpu")
#: ``channel_order`` values: ``rgb`` (histeq's :func:`load_image`, PIL, scikit-image,
#: torchvision) or ``bgr`` (OpenCV's ``cv2.imread``).
CHANNEL_ORDERS = ("rgb", "bgr")

_MODES = frozenset(MODES)
_FORMULAS = frozenset(FORMULAS)
_BACKENDS = frozenset(BACKENDS)
_ORDERS = frozenset(CHANNEL_ORDERS)


# ------------------------------------------------------------------------------------------
# Arguments
# ------------------------------------------------------------------------------------------

def check_choice(name: str, value: Any, choices: Sequence[str], allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a str, got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"{name}: unknown value {value!r}; expected one of {', '.join(choices)}")


def kernel_names() -> list:
    return [n for n, _e, _s in _histeq.kernels()]


def check_kernel(kernel: Any) -> None:
    if not isinstance(kernel, str):
        raise TypeError(f"kernel: expected a str, got {type(kernel).__name__}")
    if kernel != "auto" and kernel not in kernel_names():
        if not _histeq.CUDA_BUILT:
            raise ValueError(f"kernel: unknown kernel {kernel!r}: this histeq was built without "
                             f"CUDA, so it has no GPU histogram kernels; use kernel='auto'")
        raise ValueError(f"kernel: unknown kernel {kernel!r}; known: auto, "
                         f"{', '.join(kernel_names())}")


def check_options(mode: Optional[str], formula: str, kernel: str, backend: str,
                  channel_order: str) -> None:
    if (mode is None and formula == "opencv" and kernel == "auto" and backend == "auto" and
            channel_order == "rgb" and type(formula) is str and type(kernel) is str and
            type(backend) is str and type(channel_order) is str):
        return  # the defaults (the hot path)
    check_choice("mode", mode, MODES, allow_none=True)
    check_choice("formula", formula, FORMULAS)
    check_choice("backend", backend, BACKENDS)
    check_choice("channel_order", channel_order, CHANNEL_ORDERS)
    check_kernel(kernel)
    if backend == "cpu" and kernel != "auto":  # as the command line refuses --kernel with it
        raise ValueError(f"kernel: {kernel!r} is a GPU histogram kernel, and backend='cpu' runs "
                         f"none; use kernel='auto' (or backend='cuda' or 'auto')")


_cuda_state: Optional[tuple] = None


def cuda_state() -> tuple:
    """(usable, why not) of the CUDA device, probed once per process."""
    global _cuda_state
    if _cuda_state is None:
        _cuda_state = tuple(_histeq.cuda_available())
    return _cuda_state


def require_cuda(argname: str) -> None:
    ok, why = cuda_state()
    if not ok:
        raise ValueError(f"{argname}: no usable CUDA device ({why})")


# The library takes a count, height and width each below 2**31 (C ints); a batch's pixels and an
# image's pixels (height x width) may pass 2**31.
_MAX_SIDE = 2**31 - 1


def over_side(shape: Sequence[int]) -> bool:
    return any(d > _MAX_SIDE for d in shape)


def check_sides(shape: Sequence[int], argname: str) -> None:
    if over_side(shape):
        raise ValueError(f"{argname}: shape {tuple(shape)} has a side over {_MAX_SIDE} "
                         f"(2**31 - 1), the most histeq takes for a count, height or width")


def split_shape(shape: Sequence[int], batch: Optional[bool], argname: str):
    """(count, height, width, channels, is_batch) of a channels-last shape."""
    check_sides(shape, argname)
    return _split_shape(shape, batch, argname)


def _split_shape(shape: Sequence[int], batch: Optional[bool], argname: str):
    nd = len(shape)
    one = batch is not None  # batch=False: one image is expected (a batch is no way out)
    if batch is None:
        batch = nd == 4 or (nd == 3 and not 1 <= shape[2] <= 4)
    elif batch is not True and batch is not False and not isinstance(batch, _np.bool_):
        raise TypeError(f"batch: expected True, False or None, got {type(batch).__name__} "
                        f"{batch!r}")
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
    if one:
        raise ValueError(f"{argname}: expected one image, of shape (H, W) or (H, W, C); got "
                         f"{tuple(shape)}")
    raise ValueError(f"{argname}: expected shape (H, W) or (H, W, C), or a batch "
                     f"(N, H, W) / (N, H, W, C); got {tuple(shape)}")


def out_channels(mode: Optional[str], channels: int) -> int:
    return 1 if mode == "gray" else channels


def out_shape(shape: Sequence[int], mode: Optional[str], n: int, h: int, w: int, c: int,
              is_batch: bool) -> tuple:
    """The result's shape: the input's, or without the channel axis for one output channel
    from several (mode gray)."""
    if out_channels(mode, c) == c:
        return tuple(shape)
    return (n, h, w) if is_batch else (h, w)


# ------------------------------------------------------------------------------------------
# Device arrays
# ------------------------------------------------------------------------------------------

class Dev:
    """A CUDA array seen as (library, pointer, shape, device, stream, sample type)."""

    __slots__ = ("lib", "obj", "ptr", "shape", "device", "stream", "dtype")

    def __init__(self, lib, obj, ptr, shape, device, stream, dtype="uint8"):
        self.lib, self.obj, self.ptr, self.shape = lib, obj, ptr, shape
        self.device, self.stream, self.dtype = device, stream, dtype

    def empty(self, shape, dtype="uint8"):
        """A new array of the same library on the same device (dtype uint8, uint16 or int64)."""
        if self.lib == "torch":
            tdt = _torch_u8 if dtype == "uint8" else _torch_u16 if dtype == "uint16" else \
                _torch_i64
            return _torch.empty(shape, dtype=tdt, device=self.obj.device)
        cupy = _cupy
        if cupy is None:
            import cupy  # type: ignore
        ndt = _U8 if dtype == "uint8" else _U16 if dtype == "uint16" else _np.int64
        if cupy.cuda.runtime.getDevice() == self.device:  # the current device already
            return cupy.empty(shape, dtype=ndt)
        with cupy.cuda.Device(self.device):
            return cupy.empty(shape, dtype=ndt)


_torch: Any = None          # the torch module, once a tensor has been seen
_torch_u8: Any = None
_torch_u16: Any = None
_torch_i64: Any = None
_torch_bool: Any = None     # bool and int8: with uint8, the masks read in place as bytes
_torch_i8: Any = None
_torch_wide_ints: tuple = ()  # int16, int32, int64: masks read as mask != 0
_torch_types: set = set()   # the classes of torch tensors seen
_torch_raw_stream: Any = None
_cupy: Any = None           # the cupy module, once a CuPy array has been seen
_cupy_types: set = set()    # the classes of CuPy arrays seen
_U8 = _np.dtype(_np.uint8)
_U16 = _np.dtype(_np.uint16)
_I64 = _np.dtype(_np.int64)


def is_torch(x) -> bool:
    t = type(x)
    if t in _torch_types:
        return True
    if t.__module__.startswith("torch") and hasattr(x, "data_ptr"):
        global _torch, _torch_u8, _torch_u16, _torch_i64, _torch_bool, _torch_i8
        global _torch_wide_ints, _torch_raw_stream
        _torch = _sys.modules["torch"]
        _torch_u8, _torch_u16 = _torch.uint8, getattr(_torch, "uint16", None)
        _torch_i64, _torch_bool, _torch_i8 = _torch.int64, _torch.bool, _torch.int8
        _torch_wide_ints = (_torch.int16, _torch.int32, _torch.int64)
        # The handle of torch's current stream on a device, without building a
        # torch.cuda.Stream object (~3 us): torch._C._cuda_getCurrentRawStream where it exists.
        raw = getattr(_torch._C, "_cuda_getCurrentRawStream", None)
        _torch_raw_stream = raw if raw is not None else \
            (lambda d: _torch.cuda.current_stream(d).cuda_stream)
        _torch_types.add(t)
        return True
    return False


def torch_stream(dev: int) -> int:
    return _torch_raw_stream(dev)


def is_cupy(x) -> bool:
    t = type(x)
    if t in _cupy_types:
        return True
    if t.__module__.startswith("cupy") and hasattr(x, "data") and hasattr(x, "device"):
        global _cupy
        import cupy  # type: ignore
        _cupy = cupy
        _cupy_types.add(t)
        return True
    return False


def gray_dims(shape, batch):
    """(count, height, width, is_batch) of a shape that split_shape reads as gray images ((H, W),
    (H, W, 1), (N, H, W), (N, H, W, 1); batch None, True or False as split_shape takes it), None
    for any other shape or batch."""
    nd = len(shape)
    if batch is None:  # as split_shape guesses
        batch = nd == 4 or (nd == 3 and not 1 <= shape[2] <= 4)
    elif batch is not True and batch is not False:
        return None
    if over_side(shape):
        return None  # split_shape says why
    if batch:
        if nd == 3:
            return shape[0], shape[1], shape[2], True
        if nd == 4 and shape[3] == 1:
            return shape[0], shape[1], shape[2], True
        return None
    if nd == 2:
        return 1, shape[0], shape[1], False
    if nd == 3 and shape[2] == 1:
        return 1, shape[0], shape[1], False
    return None


def torch_gray(x, batch):
    """The fast path of a torch tensor of gray images: (device, stream, pointer, count, height,
    width, 16-bit, is_batch) when x is a C-contiguous uint8 or uint16 CUDA tensor whose shape
    split_shape reads as one channel (gray_dims) and the GPU is usable: then as_device and
    split_shape would give the same values without an error. None for anything else, which the
    general path (as_device) takes and reports. x is a tensor of a class in _torch_types."""
    if not x.is_cuda or _cuda_state is None or not _cuda_state[0]:
        return None
    dt = x.dtype
    if dt is _torch_u8:
        sixteen = False
    elif dt is _torch_u16 and dt is not None:
        sixteen = True
    else:
        return None
    if not x.is_contiguous():
        return None
    dims = gray_dims(x.shape, batch)
    if dims is None:
        return None
    n, h, w, batch = dims
    dev = x.get_device()
    return dev, _torch_raw_stream(dev), x.data_ptr(), n, h, w, sixteen, batch


def cupy_gray(x, batch):
    """torch_gray for a CuPy array (of a class in _cupy_types) on the current device: the
    values as_device gives it (its stream: the device's current one). None for an array on
    another device than the current one, and for anything torch_gray declines."""
    if _cuda_state is None or not _cuda_state[0]:
        return None
    dt = x.dtype
    if dt is _U8 or dt == _U8:
        sixteen = False
    elif dt is _U16 or dt == _U16:
        sixteen = True
    else:
        return None
    if not x.flags.c_contiguous:
        return None
    dims = gray_dims(x.shape, batch)
    if dims is None:
        return None
    mem = x.data
    dev = mem.device_id
    if dev != _cupy.cuda.runtime.getDevice():
        return None
    n, h, w, batch = dims
    return dev, _cupy.cuda.get_current_stream().ptr, mem.ptr, n, h, w, sixteen, batch


def fast_gray(x, batch):
    """torch_gray or cupy_gray of x by its library; None for anything else (the general path)."""
    t = type(x)
    if t in _torch_types:
        return torch_gray(x, batch)
    if t in _cupy_types:
        return cupy_gray(x, batch)
    return None


def same_library(x, y) -> bool:
    """Whether x and y are both torch tensors or both CuPy arrays (of the classes seen)."""
    tx, ty = type(x), type(y)
    return (tx in _torch_types and ty in _torch_types) or \
        (tx in _cupy_types and ty in _cupy_types)


def fast_counts(x, shape):
    """A new int64 array of x's library (a fast path's torch tensor or CuPy array) on x's
    device, for counts. A CuPy array's device is the current one (cupy_gray)."""
    if type(x) in _torch_types:
        return _torch.empty(shape, dtype=_torch_i64, device=x.device)
    return _cupy.empty(shape, _I64)


def fast_empty_like(x):
    """A new array of x's shape, dtype, library and device (x: a fast path's array)."""
    if type(x) in _torch_types:
        return _torch.empty_like(x)
    return _cupy.empty(x.shape, x.dtype)


def fast_zero(res) -> None:
    """Sets the fast path's new array res to zeros."""
    if type(res) in _torch_types:
        res.zero_()
    else:
        res.fill(0)


def fast_ptr(res) -> int:
    """The device address of a fast path's array."""
    return res.data_ptr() if type(res) in _torch_types else res.data.ptr


def _contiguous_strides(shape, itemsize=1):
    strides, s = [], itemsize
    for n in reversed(shape):
        strides.append(s)
        s *= n
    return tuple(reversed(strides))


def check_c_contiguous(shape, strides, argname, itemsize=1):
    if strides is None:
        return
    want = _contiguous_strides(shape, itemsize)
    if any(n > 1 and st != w for n, st, w in zip(shape, strides, want)):
        raise ValueError(f"{argname}: strides {tuple(strides)} (bytes) of shape {tuple(shape)} are "
                         f"not C-contiguous; pass a contiguous copy (.contiguous() / "
                         f"cupy.ascontiguousarray)")


def _torch_device(x, argname: str) -> Optional[Dev]:
    if not x.is_cuda:
        if x.device.type == "cpu":
            return None
        raise ValueError(f"{argname}: a tensor on {x.device} cannot be reached; expected a CPU or "
                         f"CUDA tensor")
    dt = x.dtype
    if dt is _torch_u8:
        dtype = "uint8"
    elif dt is _torch_u16 and dt is not None:
        dtype = "uint16"
    else:
        raise TypeError(f"{argname}: dtype {dt}; expected torch.uint8 or torch.uint16")
    if not x.is_contiguous():
        item = 1 if dtype == "uint8" else 2
        check_c_contiguous(tuple(x.shape), tuple(s * item for s in x.stride()), argname, item)
    dev = x.get_device()  # an int: no torch.device object
    return Dev("torch", x, x.data_ptr(), x.shape, dev, _torch_raw_stream(dev), dtype)


def _cai_device(x, cai, argname: str) -> Dev:
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
    check_c_contiguous(cai["shape"], cai.get("strides"), argname, item)
    ok, why = cuda_state()
    if not ok:
        raise ValueError(f"{argname}: a CUDA array, but this build cannot use the GPU ({why})")
    ptr = int(cai["data"][0])
    stream = cai.get("stream") or 0
    stream = 0 if stream == 1 else int(stream)  # 1: the legacy default stream
    return Dev("cai", x, ptr, tuple(cai["shape"]), _histeq.pointer_device(ptr), stream, dtype)


def as_device(x, argname: str) -> Optional[Dev]:
    """The CUDA view of x, or None when x is a host array. ValueError when x is a CUDA array and
    this build or machine cannot use the GPU."""
    if type(x) is _np.ndarray:
        return None
    if type(x) in _torch_types or is_torch(x):
        d = _torch_device(x, argname)
    elif type(x) in _cupy_types or is_cupy(x):
        dt = x.dtype
        if dt is _U8 or dt is _U16:  # NumPy's own dtype objects: no comparison needed
            dtype = "uint8" if dt is _U8 else "uint16"
        elif dt not in (_np.uint8, _np.uint16):
            raise TypeError(f"{argname}: dtype {x.dtype}; expected uint8 or uint16")
        else:
            dtype = str(dt)
        if not x.flags.c_contiguous:
            check_c_contiguous(x.shape, x.strides, argname, x.dtype.itemsize)
        device = x.device
        if _cupy.cuda.runtime.getDevice() == device.id:  # the current device: its stream
            stream = _cupy.cuda.get_current_stream().ptr
        else:
            with device:
                stream = _cupy.cuda.get_current_stream().ptr
        d = Dev("cupy", x, x.data.ptr, x.shape, device.id, stream, dtype)
    elif isinstance(x, _np.ndarray):
        return None
    else:
        cai = getattr(x, "__cuda_array_interface__", None)
        if cai is not None:
            return _cai_device(x, cai, argname)
        if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
            dev_type, _ = x.__dlpack_device__()
            if int(dev_type) in (2, 13):  # kDLCUDA, kDLCUDAManaged
                try:
                    import cupy  # type: ignore
                except ImportError:
                    raise TypeError(f"{argname}: a CUDA DLPack array of {type(x).__name__} needs "
                                    f"CuPy to hold the result; pass a torch or CuPy array") \
                        from None
                return as_device(cupy.from_dlpack(x), argname)
        return None
    if d is not None and not (_cuda_state or cuda_state())[0]:
        raise ValueError(f"{argname}: a CUDA array, but this build cannot use the GPU "
                         f"({cuda_state()[1]})")
    return d


def result_like(d: Dev, shape, dtype: str = "uint8"):
    """A new array for the result: same library (CuPy for foreign CUDA arrays), same device."""
    if d.lib == "torch" and dtype == d.dtype and tuple(shape) == tuple(d.shape):
        return _torch.empty_like(d.obj)  # the input is contiguous: so is this
    global _cupy
    if d.lib == "cai":
        if _cupy is None:
            try:
                import cupy  # type: ignore
            except ImportError:
                raise TypeError(f"image: cannot allocate a result for {type(d.obj).__name__}; "
                                f"install CuPy or pass a torch or CuPy array") from None
            _cupy = cupy
        d = Dev("cupy", d.obj, d.ptr, d.shape, d.device, d.stream, d.dtype)
    return d.empty(shape, dtype)


def ptr(arr) -> int:
    """The device address of a torch tensor or CuPy array."""
    return arr.data_ptr() if hasattr(arr, "data_ptr") else arr.data.ptr


def via_host(d: Dev, fn, out=None):
    """Runs fn(numpy array) on a copy of the CUDA array d on the host and returns its NumPy
    result as a new array of d's library on d's device, or copied into out (checked against
    the result as check_out does) and out returned. The copies synchronize the caller's stream:
    the path of the calls the device engines take only for gray planes (colour CLAHE and 16-bit
    colour on CUDA arrays)."""
    if d.lib == "torch":
        res = fn(_np.ascontiguousarray(d.obj.cpu().numpy()))
        if out is not None:
            check_device_out(out, d, res.shape, res.dtype.name)
            out.copy_(_torch.from_numpy(res))
            return out
        return _torch.from_numpy(res).to(d.obj.device)
    import cupy  # type: ignore
    host = cupy.asnumpy(d.obj if d.lib == "cupy" else cupy.asarray(d.obj))
    res = fn(_np.ascontiguousarray(host))
    if out is not None:
        check_device_out(out, d, res.shape, res.dtype.name)
    with cupy.cuda.Device(d.device):
        if out is not None:
            _written(ptr(out), res.nbytes)
            out.set(res)
            return out
        return cupy.asarray(res)


def swap_red_blue(d: Dev) -> Dev:
    """A BGR(A) CUDA array as a new RGB(A) one of the same library (a copy on its device, on
    its current stream), for the device stages, which compute luma from RGB."""
    c = d.shape[-1]
    order = [2, 1, 0, 3][:c]
    if d.lib == "torch":
        idx = _torch.tensor(order, device=d.obj.device)
        x = d.obj.index_select(d.obj.dim() - 1, idx).contiguous()
        return _torch_device(x, "image")  # type: ignore[return-value]
    import cupy  # type: ignore
    src = d.obj if d.lib == "cupy" else cupy.asarray(d.obj)
    with cupy.cuda.Device(d.device):
        x = cupy.ascontiguousarray(src[..., order])
    return as_device(x, "image")  # type: ignore[return-value]


def unswap_red_blue(arr):
    """The result of swap_red_blue'd input back in BGR order (luma mode keeps the channels)."""
    c = arr.shape[-1]
    order = [2, 1, 0, 3][:c]
    if hasattr(arr, "index_select"):
        return arr.index_select(arr.dim() - 1, _torch.tensor(order, device=arr.device))
    import cupy  # type: ignore
    return cupy.ascontiguousarray(arr[..., order])


# ------------------------------------------------------------------------------------------
# out=: the caller's array for the result
# ------------------------------------------------------------------------------------------

_ITEMSIZE = {"uint8": 1, "uint16": 2, "int64": 8}

#: The _region module (set by it when imported): before a call writes an array given as out=
#: (CuPy moves no counter, torch's raw writes do not move its version counter), _written forgets
#: the count checks remembered of masks in that memory.
_region: Any = None


def _written(address: int, nbytes: int) -> None:
    if _region is not None and _region._mask_checked:
        _region.forget_written(address, nbytes)


def _apart(a: int, a_bytes: int, b: int, b_bytes: int) -> bool:
    """Whether the byte ranges [a, a + a_bytes) and [b, b + b_bytes) do not overlap."""
    return a + a_bytes <= b or b + b_bytes <= a


def _count(shape) -> int:
    n = 1
    for e in shape:
        n *= int(e)
    return n


def check_out(out, lib: str, device: Optional[int], shape, dtype: str) -> None:
    """The rules of out=: an array of the kind the call returns (lib "numpy", "torch" or
    "cupy"), on its device (torch: -1 for the CPU), C-contiguous, writable, of exactly its shape
    and dtype ("uint8", "uint16" or "int64"). TypeError for another kind or dtype, ValueError for
    another device, shape or layout, each naming out and what was expected."""
    if lib == "numpy":
        if not isinstance(out, _np.ndarray):
            raise TypeError(f"out: expected a NumPy array (the kind of array this call returns "
                            f"for this image), got {type(out).__name__}")
    elif lib == "torch":
        if not hasattr(out, "is_contiguous") or not is_torch(out):  # a tensor, no storage
            raise TypeError(f"out: expected a torch tensor (the kind of array this call returns "
                            f"for this image), got {type(out).__name__}")
        where = f"cuda:{device}" if device is not None and device >= 0 else "cpu"
        if (out.get_device() if out.is_cuda else -1) != device or \
                (not out.is_cuda and out.device.type != "cpu"):
            raise ValueError(f"out: a tensor on {out.device}; expected one on {where}, the "
                             f"image's device")
    else:
        if not is_cupy(out):
            raise TypeError(f"out: expected a CuPy array (the kind of array this call returns "
                            f"for this image), got {type(out).__name__}")
        if out.device.id != device:
            raise ValueError(f"out: an array on device {out.device.id}; expected one on device "
                             f"{device}, the image's device")
    if lib == "torch":
        want = _torch_u8 if dtype == "uint8" else _torch_u16 if dtype == "uint16" else _torch_i64
        if want is None or out.dtype is not want:
            raise TypeError(f"out: dtype {out.dtype}; expected torch.{dtype}, the result's dtype")
    elif out.dtype != _np.dtype(dtype):
        raise TypeError(f"out: dtype {out.dtype}; expected {dtype}, the result's dtype")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out: shape {tuple(out.shape)}; expected {tuple(shape)}, the result's "
                         f"shape")
    if not (out.is_contiguous() if lib == "torch" else out.flags.c_contiguous):
        raise ValueError("out: not C-contiguous; expected a C-contiguous array (the result is "
                         "written into its memory in order)")
    if lib == "numpy" and not out.flags.writeable:
        raise ValueError("out: a read-only array; expected a writable one")


def check_device_out(out, d: Dev, shape, dtype: str) -> None:
    """check_out for the result of the CUDA array d: its library's array (CuPy for a
    __cuda_array_interface__ array, as result_like allocates) on d's device."""
    check_out(out, "torch" if d.lib == "torch" else "cupy", d.device, shape, dtype)


def device_target(d: Dev, out, shape, dtype: str = "uint8", in_place: bool = False,
                  mask: Any = None, mask_bytes: int = 0):
    """The array the compiled calls write the result of the CUDA array d into: a new one
    (result_like) when out is None; else out, checked (check_device_out), when its memory is
    apart from d's and from the mask the calls read (mask: its device array, or None), or is
    d's memory itself and in_place says the calls take that; else a new array, which finish
    copies into out after the calls."""
    if out is None:
        return result_like(d, shape, dtype)
    check_device_out(out, d, shape, dtype)
    optr, nbytes = ptr(out), _count(shape) * _ITEMSIZE[dtype]
    # out's memory is written (here or by finish's copy): the mask checks remembered of what it
    # holds are forgotten (CuPy's writes move no counter; torch's raw writes neither)
    _written(optr, nbytes)
    in_bytes = _count(d.shape) * _ITEMSIZE[d.dtype]
    if not (_apart(optr, nbytes, d.ptr, in_bytes) or (in_place and optr == d.ptr)) or \
            (mask is not None and not _apart(optr, nbytes, ptr(mask), mask_bytes)):
        return result_like(d, shape, dtype)
    return out


def finish(out, res, d: Dev):
    """The call's return value: res when out is None or res is out; else res copied into out
    (on the stream the calls ran on) and out."""
    if out is None or res is out:
        return res
    if d.lib == "torch":
        out.copy_(res)  # torch's version counter sees this write (the masks' checks)
        return out
    cupy = _cupy
    with cupy.cuda.Device(d.device):
        if d.lib == "cai":  # the calls ran on the interface's stream: the copy too
            stream = cupy.cuda.ExternalStream(d.stream) if d.stream else cupy.cuda.Stream.null
            with stream:
                cupy.copyto(out, res)
        else:
            cupy.copyto(out, res)
    return out


def torch_out(out, dev: int, shape, dtype, nbytes: int, in_ptr: int, in_bytes: int,
              in_place: bool, mask: int = 0, mask_bytes: int = 0) -> Optional[int]:
    """The shortcuts' out=: out's address when out is a C-contiguous CUDA tensor on device dev
    of exactly shape and dtype (a torch dtype) whose nbytes are apart from the input's
    [in_ptr, + in_bytes) and the mask's (address mask, 0: none), or are the input's own and
    in_place says the calls take that; None for anything else, which the general path takes
    (and reports, or writes through a new array)."""
    if type(out) not in _torch_types or not out.is_cuda or out.dtype is not dtype or \
            out.shape != shape or not out.is_contiguous() or out.get_device() != dev:
        return None
    return _out_apart(out.data_ptr(), nbytes, in_ptr, in_bytes, in_place, mask, mask_bytes)


def cupy_out(out, dev: int, shape, dtype, nbytes: int, in_ptr: int, in_bytes: int,
             in_place: bool, mask: int = 0, mask_bytes: int = 0) -> Optional[int]:
    """torch_out for a CuPy out (dtype: a NumPy dtype)."""
    if type(out) not in _cupy_types or out.dtype != dtype or out.shape != tuple(shape) or \
            not out.flags.c_contiguous:
        return None
    mem = out.data
    if mem.device_id != dev:
        return None
    return _out_apart(mem.ptr, nbytes, in_ptr, in_bytes, in_place, mask, mask_bytes)


def fast_out(out, x, dev: int, shape, dtype, nbytes: int, in_ptr: int, in_bytes: int,
             in_place: bool, mask: int = 0, mask_bytes: int = 0) -> Optional[int]:
    """torch_out or cupy_out by the library of the image x (dtype: of that library)."""
    if type(x) in _torch_types:
        return torch_out(out, dev, shape, dtype, nbytes, in_ptr, in_bytes, in_place, mask,
                         mask_bytes)
    return cupy_out(out, dev, shape, dtype, nbytes, in_ptr, in_bytes, in_place, mask,
                    mask_bytes)


def i64_of(x):
    """int64 in the library of the fast path's array x."""
    return _torch_i64 if type(x) in _torch_types else _I64


def _out_apart(optr: int, nbytes: int, in_ptr: int, in_bytes: int, in_place: bool, mask: int,
               mask_bytes: int) -> Optional[int]:
    """optr when out's nbytes there are apart from the input and the mask as torch_out says
    (its remembered mask checks forgotten: out is about to be written), else None."""
    if not (optr + nbytes <= in_ptr or in_ptr + in_bytes <= optr or
            (in_place and optr == in_ptr)):
        return None
    if mask and not (optr + nbytes <= mask or mask + mask_bytes <= optr):
        return None
    if _region is not None and _region._mask_checked:  # _written, inline
        _region.forget_written(optr, nbytes)
    return optr


def host_target(out, wrap, shape, dtype: str, image: _np.ndarray) -> _np.ndarray:
    """The NumPy array a host call writes its result into: a new one when out is None; else
    out (a NumPy array, or a CPU tensor's memory when wrap says the image was a tensor), checked
    as check_out does, when it is apart from the image (the host calls read the image while
    they write); else a new array, which host_finish copies into out."""
    if out is None:
        return _np.empty(shape, dtype)
    check_out(out, "numpy" if wrap is None else "torch", None if wrap is None else -1, shape,
              dtype)
    o = out if wrap is None else out.numpy()
    if _np.may_share_memory(o, image):
        return _np.empty(shape, dtype)
    return o


def host_finish(out, wrap, res: _np.ndarray):
    """The return value of a host call whose NumPy result is res: res (wrapped into the image's
    kind) when out is None; else out, res copied into it unless res is out's memory (out checked
    against res as check_out does)."""
    if out is None:
        return res if wrap is None else wrap(res)
    check_out(out, "numpy" if wrap is None else "torch", None if wrap is None else -1, res.shape,
              res.dtype.name)
    o = out if wrap is None else out.numpy()
    if res.__array_interface__["data"][0] != o.__array_interface__["data"][0]:
        _np.copyto(o, res)
    return out


def no_list_out(out) -> None:
    if out is not None:
        raise TypeError("out: not supported for a list or tuple of images (each has a result of "
                        "its own); pass out=None, or one array (or a batch) per call")


def each(images, fn) -> list:
    """[fn(x) for x in images], where a ValueError or TypeError about image i names it: its
    message ends with ' (image[i] of the list)', so that a wrong roi, mask or dtype in a long
    list can be found."""
    outs = []
    for i, x in enumerate(images):
        try:
            outs.append(fn(x))
        except (ValueError, TypeError) as e:
            if type(e) not in (ValueError, TypeError) or len(e.args) != 1 or \
                    not isinstance(e.args[0], str) or "of the list)" in e.args[0]:
                raise
            raise type(e)(f"{e.args[0]} (image[{i}] of the list)") from None
    return outs


# ------------------------------------------------------------------------------------------
# Host arrays
# ------------------------------------------------------------------------------------------

def host_array(x, argname: str, lists: bool = True):
    """(numpy array, wrap) for a host image (uint8 or uint16), C-contiguous (other layouts are
    copied); wrap turns a NumPy result back into x's kind. lists: whether the argument also takes
    a list of images (only its TypeError says so)."""
    if type(x) is _np.ndarray:
        dt = x.dtype
        if dt == _np.uint8 or (dt == _np.uint16 and dt.isnative):
            if x.flags.c_contiguous:
                return x, None
            check_sides(x.shape, argname)  # before a copy of what cannot run
            return _np.ascontiguousarray(x), None
    if is_torch(x):
        if x.dtype not in (_torch_u8, _torch_u16):
            raise TypeError(f"{argname}: dtype {x.dtype}; expected torch.uint8 or torch.uint16")
        return _np.ascontiguousarray(x.numpy()), _torch.from_numpy
    if not isinstance(x, _np.ndarray):
        what = ("a NumPy array, a PyTorch tensor, a CuPy array, a CUDA array "
                "(__cuda_array_interface__ / DLPack)")
        what = f"{what} or a list of them" if lists else f"one image: {what}"
        raise TypeError(f"{argname}: expected {what}; got {type(x).__name__}")
    if x.dtype.kind != "u" or x.dtype.itemsize not in (1, 2):
        raise TypeError(f"{argname}: dtype {x.dtype}; expected uint8 or uint16 (scale other "
                        f"types to 0..255 or 0..65535 and convert with .astype)")
    check_sides(x.shape, argname)
    if x.dtype.itemsize == 2 and not x.dtype.isnative:
        x = x.astype(_np.uint16)  # samples in this machine's byte order
    return _np.ascontiguousarray(x), None


def gray_of_gray_alpha16(x, batch: Optional[bool]):
    """What mode="gray" runs on: for 16-bit gray+alpha images their gray channel alone, as
    8-bit gray+alpha gives one channel of equalized gray (the alpha dropped): x's channel 0 as
    a C-contiguous array of x's kind (CuPy for other CUDA arrays), each image of a list on its
    own. Any other x or shape is returned as it is (the calls name a bad one)."""
    if isinstance(x, (list, tuple)):
        return [gray_of_gray_alpha16(e, False) for e in x]
    if host_dtype(x) != "uint16":
        return x
    try:
        c = _split_shape(tuple(x.shape), batch, "image")[3]
    except (ValueError, TypeError, AttributeError):
        return x
    if c != 2:
        return x
    if is_torch(x):
        return x[..., 0].contiguous()
    if isinstance(x, _np.ndarray):
        return _np.ascontiguousarray(x[..., 0])
    if is_cupy(x):
        return _cupy.ascontiguousarray(x[..., 0])
    if getattr(x, "__cuda_array_interface__", None) is not None or hasattr(x, "__dlpack__"):
        d = as_device(x, "image")  # CuPy holds the result of a foreign CUDA array anyway
        if d is not None:
            import cupy  # type: ignore  # as_device or result_like needs it for these too
            y = cupy.asarray(x) if d.lib == "cai" else d.obj
            return cupy.ascontiguousarray(y[..., 0])
    return x


def host_dtype(x) -> str:
    """"uint16" for a NumPy array or CPU tensor of 16-bit samples, else "" (not an error here:
    host_array names a wrong type)."""
    dt = str(getattr(x, "dtype", ""))
    return "uint16" if dt in ("uint16", "torch.uint16", ">u2", "<u2") else ""


def clahe_args(clip_limit: Any, tile_grid_size: Any) -> Tuple[float, int, int]:
    """clahe()'s checks of OpenCV's clipLimit and tileGridSize: (clip, columns, rows)."""
    if type(clip_limit) is float and type(tile_grid_size) is tuple and len(tile_grid_size) == 2:
        tx, ty = tile_grid_size  # the usual call (a float and a tuple of two ints): no copies
        if type(tx) is int and type(ty) is int and 1 <= tx <= 1024 and 1 <= ty <= 1024 and \
                clip_limit - clip_limit == 0.0:  # finite: inf - inf and nan - nan are nan
            return clip_limit, tx, ty
    if isinstance(clip_limit, bool) or \
            not isinstance(clip_limit, (int, float, _np.integer, _np.floating)):
        raise TypeError(f"clip_limit: expected a number, got {type(clip_limit).__name__}")
    try:
        clip = float(clip_limit)
    except OverflowError:  # an int past float's range
        raise ValueError(f"clip_limit: must be finite, got {clip_limit}") from None
    if clip != clip or clip in (float("inf"), float("-inf")):
        raise ValueError(f"clip_limit: must be finite, got {clip}")
    grid = tile_grid_size
    if isinstance(grid, (int, _np.integer)) and not isinstance(grid, bool):
        grid = (grid, grid)
    try:
        items = list(grid) if not isinstance(grid, (str, bytes)) else None
    except TypeError:
        items = None
    if items is None or len(items) != 2 or any(
            isinstance(t, bool) or not isinstance(t, (int, _np.integer)) for t in items):
        raise TypeError(f"tile_grid_size: expected (columns, rows) as two ints (a tuple, list or "
                        f"array) or one int, got {tile_grid_size!r}")
    tx, ty = int(items[0]), int(items[1])
    if not (1 <= tx <= 1024 and 1 <= ty <= 1024):
        raise ValueError(f"tile_grid_size: each count must be in 1..1024, got ({tx}, {ty})")
    return clip, tx, ty
