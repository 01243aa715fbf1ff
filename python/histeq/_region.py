"""The pixels a histogram counts (``mask=`` / ``roi=`` of equalize and histogram) and the reference
histograms of match_histograms. Private: the histeq package's functions use it.

Gray 8-bit CUDA tensors (CuPy arrays) with a mask of their library on their device and/or a
rectangle of four ints (the common masked call) take fast_region (torch_region, cupy_region): a
few reads of the mask, no Region; the one costly check (whether the mask counts a pixel, which
waits for the device) is remembered per mask as long as its data, layout and the rectangle stay
the same, for both paths."""
from __future__ import annotations

import sys as _sys
import weakref as _weakref
from typing import Any, Dict, Optional, Tuple

import numpy as _np

from . import _arrays as _a


#: The largest right or bottom edge a rectangle can have: image sizes are 32-bit ints.
_ROI_EDGE_MAX = (1 << 31) - 1


def _roi_tuple(roi: Any) -> Tuple[int, int, int, int]:
    """roi as (x, y, width, height), checked as far as no image is needed: TypeError when it is
    not four ints; ValueError when it is empty, has a negative corner, or reaches past any image
    (x + width or y + height over 2**31 - 1, as ``histeq --roi``). Image by image, Region says
    whether it lies inside the image."""
    try:
        items = list(roi) if not isinstance(roi, (str, bytes)) else None
    except TypeError:
        items = None
    if items is None or len(items) != 4 or any(
            isinstance(t, bool) or not isinstance(t, (int, _np.integer)) for t in items):
        raise TypeError(f"roi: expected (x, y, width, height) as four ints, got {roi!r}")
    x, y, w, h = (int(t) for t in items)
    if w <= 0 or h <= 0:
        raise ValueError(f"roi: (x, y, width, height) = {(x, y, w, h)} is empty; width and "
                         f"height must be at least 1")
    if x < 0 or y < 0:
        raise ValueError(f"roi: (x, y, width, height) = {(x, y, w, h)} starts outside the "
                         f"image; x and y must be at least 0")
    if x + w > _ROI_EDGE_MAX or y + h > _ROI_EDGE_MAX:
        raise ValueError(f"roi: (x, y, width, height) = {(x, y, w, h)} is not inside any image; "
                         f"x + width and y + height must be at most 2**31 - 1")
    return x, y, w, h


_MASK_EXPECTED = ("an array of bool or integers of the image's height x width (NumPy, PyTorch, "
                  "CuPy, a CUDA array, or nested lists)")


def _is_mask_array(mask: Any) -> bool:
    return (isinstance(mask, (_np.ndarray, list, tuple)) or _a.is_torch(mask)
            or _a.is_cupy(mask) or hasattr(mask, "__cuda_array_interface__"))


def _nested_mask(mask: Any) -> _np.ndarray:
    """Nested lists as an array; ragged ones (rows of different lengths) are a ValueError that
    names the mask, not NumPy's words alone."""
    try:
        return _np.asarray(mask)
    except ValueError as e:
        raise ValueError(f"mask: nested lists whose rows differ in length ({e})") from None


def _mask_to_host(mask: Any) -> _np.ndarray:
    """The mask as a NumPy array (a copy from the device for a CUDA array)."""
    if type(mask) is _np.ndarray:
        return mask
    if _a.is_torch(mask):
        return mask.detach().cpu().numpy()
    if _a.is_cupy(mask) or hasattr(mask, "__cuda_array_interface__"):
        import cupy  # type: ignore
        return cupy.asnumpy(cupy.asarray(mask))
    if isinstance(mask, _np.ndarray):
        return _np.asarray(mask)
    if isinstance(mask, (list, tuple)):
        return _nested_mask(mask)
    raise TypeError(f"mask: expected {_MASK_EXPECTED}, got {type(mask).__name__}")


def _check_mask_dtype(dtype: Any) -> None:
    kind = getattr(dtype, "kind", None)
    if kind is None:  # a torch dtype
        name = str(dtype)
        if name == "torch.bool" or "int" in name:
            return
        kind = "f"
    if kind not in "biu":
        raise TypeError(f"mask: dtype {dtype}; expected bool or an integer type (nonzero: "
                        f"counted)")


def check_mask(mask: Any) -> None:
    """TypeError unless mask is an array (or nested lists) of bool or integers: the checks that
    need no image, made once per call."""
    if not _is_mask_array(mask):
        raise TypeError(f"mask: expected {_MASK_EXPECTED}, got {type(mask).__name__}")
    if isinstance(mask, (list, tuple)):
        dtype = _nested_mask(mask).dtype
    elif hasattr(mask, "dtype"):
        dtype = mask.dtype
    else:  # __cuda_array_interface__ only
        dtype = _np.dtype(mask.__cuda_array_interface__["typestr"])
    _check_mask_dtype(dtype)


class Region:
    """A call's ``mask`` and ``roi``, checked against each image size it meets (and kept in the
    forms the calls take, per size and per device library)."""

    __slots__ = ("mask", "roi", "_host", "_dev")

    def __init__(self, mask: Any, roi: Any) -> None:
        if mask is not None:
            check_mask(mask)
        self.mask = mask
        self.roi = _roi_tuple(roi) if roi is not None else None
        self._host: Dict[Tuple[int, int], Tuple[Optional[_np.ndarray], Any]] = {}
        self._dev: Dict[Any, Any] = {}

    def _check_shape(self, shape, h: int, w: int) -> None:
        if tuple(shape) != (h, w):
            raise ValueError(f"mask: shape {tuple(shape)}; expected the image's height x width "
                             f"({h}, {w})")

    def _check_roi(self, h: int, w: int) -> None:
        if self.roi is None:
            return
        x, y, rw, rh = self.roi  # not empty, not negative: _roi_tuple
        if x + rw > w or y + rh > h:
            raise ValueError(f"roi: (x, y, width, height) = {self.roi} is not inside the "
                             f"{w}x{h} image")

    def _crop(self, m):
        if self.roi is None:
            return m
        x, y, rw, rh = self.roi
        return m[y:y + rh, x:x + rw]

    def host(self, h: int, w: int):
        """(mask as a C-contiguous uint8 (h, w) NumPy array or None, roi tuple or None) for an
        image of h x w; ValueError when they do not fit it (the compiled core says when they
        count no pixel)."""
        got = self._host.get((h, w))
        if got is not None:
            return got
        self._check_roi(h, w)
        m = None
        if self.mask is not None:
            m = _mask_to_host(self.mask)
            _check_mask_dtype(m.dtype)
            self._check_shape(m.shape, h, w)
            if m.dtype == _np.uint8 or m.dtype == _np.bool_:
                m = _np.ascontiguousarray(m).view(_np.uint8)
            else:
                m = (m != 0).view(_np.uint8)
        got = (m, self.roi)
        self._host[(h, w)] = got
        return got

    def _empty_message(self) -> str:
        return _empty_message(self.roi)

    def device(self, d: "_a.Dev", h: int, w: int):
        """(mask, roi) for the CUDA array d: the mask as a C-contiguous array of one byte per
        pixel (nonzero: counted) of d's library on d's device, or None; ValueError when they do
        not fit an image of h x w or count no pixel. A host mask is checked on the host and
        copied up; a device mask of the same library and device is used in place (bool and
        8-bit integers as they are, other dtypes as mask != 0) and checked on the device (a
        torch mask once while torch's version counter says it was not modified)."""
        key = (d.lib, d.device, h, w)
        got = self._dev.get(key)
        if got is not None:
            return got
        self._check_roi(h, w)
        mk = self.mask
        if mk is None:
            got = (None, self.roi)
        elif d.lib == "torch" and _a.is_torch(mk) and mk.is_cuda and mk.get_device() == d.device:
            got = (self._torch_mask(mk, h, w), self.roi)
        elif d.lib == "cupy" and _a.is_cupy(mk) and mk.device.id == d.device:
            got = (self._cupy_mask(mk, h, w), self.roi)
        else:
            m, _ = self.host(h, w)
            if h * w > 0 and not self._crop(m).any():
                raise ValueError(self._empty_message())
            if d.lib == "torch":
                got = (_a._torch.from_numpy(m).to(d.obj.device), self.roi)
            else:
                import cupy  # type: ignore
                with cupy.cuda.Device(d.device):
                    got = (cupy.asarray(m), self.roi)
        self._dev[key] = got
        return got

    def _torch_mask(self, mk, h: int, w: int):
        torch = _a._torch
        _check_mask_dtype(mk.dtype)
        self._check_shape(mk.shape, h, w)
        m = mk if mk.dtype in (torch.bool, torch.uint8, torch.int8) else mk != 0
        contiguous = mk.is_contiguous()
        m = m if m.is_contiguous() else m.contiguous()
        _device_counts(mk, m, _torch_stamp(mk, mk.get_device(), contiguous, self.roi), self.roi,
                      h * w)
        return m

    def _cupy_mask(self, mk, h: int, w: int):
        import cupy  # type: ignore
        _check_mask_dtype(mk.dtype)
        self._check_shape(mk.shape, h, w)
        with mk.device:
            m = mk if mk.dtype in (_np.bool_, _np.uint8, _np.int8) else mk != 0
            m = cupy.ascontiguousarray(m)
            stamp = (None, mk.data.ptr, tuple(mk.shape), mk.dtype, mk.device.id,
                     tuple(mk.strides), self.roi)
            _device_counts(mk, m, stamp, self.roi, h * w)
        return m


def _empty_message(roi) -> str:
    # the library's words for the host path's check (Region::check)
    if roi is not None:
        return "mask: the mask counts no pixel inside the rectangle (roi)"
    return "mask: the mask counts no pixel (every mask pixel is 0)"


#: Device masks found to count pixels: id → (weak reference, stamp). A torch mask's stamp holds
#: its version counter, so writes to it through torch are seen; a CuPy array has none, so its
#: stamp is its address, layout and the rectangle: a CuPy mask emptied in place afterwards is not
#: checked again (its histogram is then empty: the identity LUT, the image unchanged), while a
#: new array always is. Writes through out= are forgotten (forget_written).
_mask_checked: Dict[int, Tuple[Any, Any]] = {}


def _checked(mk, stamp: Optional[tuple]) -> bool:
    """Whether mk's count check is remembered with this stamp (never for a None stamp)."""
    seen = _mask_checked.get(id(mk))
    return stamp is not None and seen is not None and seen[0]() is mk and seen[1] == stamp


def _remember(mk, stamp: Optional[tuple]) -> None:
    """Remembers that mk counts pixels under this stamp (not without a stamp, nor for an array
    that takes no weak reference: those are checked on every call)."""
    if stamp is None:
        return
    try:
        ref = _weakref.ref(mk)
    except TypeError:
        return
    if len(_mask_checked) > 64:
        _mask_checked.clear()
    _mask_checked[id(mk)] = (ref, stamp)


def _torch_stamp(mk, device: int, contiguous: bool, roi) -> Optional[tuple]:
    """What a torch mask's count check depends on: its data (torch's version counter, which
    in-place writes to the tensor and its views move, and its address), its layout (shape,
    dtype, device, and its strides unless it is C-contiguous: then the shape gives them) and the
    rectangle. Any change makes the check run again. None for an inference tensor (made under
    torch.inference_mode), which has no version counter: its check runs on every call."""
    try:
        version = mk._version
    except RuntimeError:
        if not mk.is_inference():
            raise
        return None
    return (version, mk.data_ptr(), mk.shape, mk.dtype, device,
            None if contiguous else mk.stride(), roi)


def _device_counts(mk, m, stamp: Optional[tuple], roi, pixels: int) -> None:
    """ValueError when m (the device mask mk, torch or CuPy, as the kernels read it: one byte
    per pixel, C-contiguous) counts no pixel inside roi; the check waits for the device, so it
    runs once per stamp of mk (on every call without a stamp)."""
    if _checked(mk, stamp):
        return
    if pixels > 0:
        if roi is not None:
            x, y, rw, rh = roi
            m = m[y:y + rh, x:x + rw]
        if not bool(m.any()):  # waits for the device
            raise ValueError(_empty_message(roi))
    _remember(mk, stamp)


def forget_written(address: int, nbytes: int) -> None:
    """Forgets the remembered count checks of the device masks whose memory overlaps
    [address, address + nbytes): a call with out= is about to write it, which neither torch's
    version counter nor CuPy sees (_arrays._written)."""
    for key, (_ref, stamp) in list(_mask_checked.items()):
        version, p, shape, dtype, _device, strides, _roi = stamp
        itemsize = int(getattr(dtype, "itemsize", 8))
        if 0 in tuple(shape):
            continue
        if strides is None:  # C-contiguous
            count = 1
            for e in shape:
                count *= int(e)
            lo, hi = p, p + count * itemsize
        elif version is None:  # CuPy: strides in bytes, possibly negative
            lo = p + sum(min(0, (int(e) - 1) * int(s)) for e, s in zip(shape, strides))
            hi = p + sum(max(0, (int(e) - 1) * int(s)) for e, s in zip(shape, strides)) + itemsize
        else:  # torch: strides in elements
            last = sum((int(e) - 1) * abs(int(s)) for e, s in zip(shape, strides))
            lo, hi = p, p + (1 + last) * itemsize
        if lo < address + nbytes and address < hi:
            del _mask_checked[key]


_a._region = _sys.modules[__name__]


def _fast_roi(roi, h: int, w: int):
    """roi as a tuple of four ints when it is one, or a list of four ints, of a rectangle inside
    an image of h x w (as _roi_tuple and Region._check_roi accept it); None for anything else."""
    if type(roi) is not tuple:
        if type(roi) is not list:
            return None
        roi = tuple(roi)
    if len(roi) != 4:
        return None
    x, y, rw, rh = roi
    if type(x) is not int or type(y) is not int or type(rw) is not int or type(rh) is not int:
        return None
    if x < 0 or y < 0 or rw <= 0 or rh <= 0 or x + rw > w or y + rh > h or \
            x + rw > _ROI_EDGE_MAX or y + rh > _ROI_EDGE_MAX:
        return None
    return roi


def _fast_roi_of(roi, h: int, w: int):
    """A region shortcut's roi: None for none, the tuple _fast_roi gives, or False for a roi the
    shortcuts decline (the general path takes it)."""
    if roi is None:
        return None
    r = _fast_roi(roi, h, w)
    return False if r is None else r


def torch_region(mask: Any, roi: Any, device: int, h: int, w: int):
    """The shortcut of a mask and/or roi for gray CUDA tensors of h x w on device (8-bit for
    equalize and histogram, 8 and 16 for clahe):
    (address, roi, keep) when Region and Region.device would take them without an error, with
    address the mask's device address (0 without a mask), roi a tuple or None, and keep the
    tensor at that address, which the caller holds until its compiled calls are queued (freed
    earlier, the result could be allocated in its memory). roi: None or four ints (a tuple or a
    list) of a rectangle inside the image; mask: None or a C-contiguous CUDA tensor of h x w on
    the same device, bool, uint8 or int8 (read in place) or int16, int32, int64 (read as
    mask != 0, a new tensor per call, as Region.device makes it). Its count check is
    Region.device's, remembered as that remembers it (the same ValueError for a mask that
    counts no pixel). None for anything else: the general path takes it and reports any
    error."""
    roi = _fast_roi_of(roi, h, w)
    if roi is False:
        return None
    if mask is None:
        return 0, roi, None
    if type(mask) not in _a._torch_types or not mask.is_cuda:
        return None
    dt = mask.dtype
    wide = dt is not _a._torch_bool and dt is not _a._torch_u8 and dt is not _a._torch_i8
    if wide and dt not in _a._torch_wide_ints:
        return None
    shape = mask.shape
    if shape != (h, w) or not mask.is_contiguous() or mask.get_device() != device:
        return None
    ptr = mask.data_ptr()
    try:
        stamp: Optional[tuple] = (mask._version, ptr, shape, dt, device, None, roi)
    except RuntimeError:  # _torch_stamp's, and its None for an inference tensor
        stamp = _torch_stamp(mask, device, True, roi)
    m = mask != 0 if wide else mask  # contiguous, as the mask is
    if not _checked(mask, stamp):
        _device_counts(mask, m, stamp, roi, h * w)
    return (m.data_ptr() if wide else ptr), roi, m


def cupy_region(mask: Any, roi: Any, device: int, h: int, w: int):
    """torch_region for the gray CuPy arrays of h x w on device (the current one, cupy_gray):
    mask None or a C-contiguous CuPy array of h x w on that device, bool, uint8 or int8 (read
    in place) or a wider integer type (read as mask != 0); its count check is Region.device's
    (_cupy_mask), remembered under the same stamp. None for anything else."""
    roi = _fast_roi_of(roi, h, w)
    if roi is False:
        return None
    if mask is None:
        return 0, roi, None
    if type(mask) not in _a._cupy_types:
        return None
    dt = mask.dtype
    kind = dt.kind
    if kind not in "biu":
        return None
    shape = mask.shape
    if shape != (h, w) or not mask.flags.c_contiguous:
        return None
    mem = mask.data
    if mem.device_id != device:
        return None
    wide = kind != "b" and dt.itemsize != 1
    m = mask != 0 if wide else mask  # contiguous, as the mask is
    stamp = (None, mem.ptr, shape, dt, device, mask.strides, roi)
    if not _checked(mask, stamp):
        _device_counts(mask, m, stamp, roi, h * w)
    return (m.data.ptr if wide else mem.ptr), roi, m


def fast_region(mask: Any, roi: Any, x: Any, device: int, h: int, w: int):
    """torch_region or cupy_region by the library of the image x (a mask of the other library
    is the general path's)."""
    if type(x) in _a._torch_types:
        return torch_region(mask, roi, device, h, w)
    return cupy_region(mask, roi, device, h, w)


# ------------------------------------------------------------------------------------------
# match_histograms' reference
# ------------------------------------------------------------------------------------------

def _to_numpy(x: Any) -> _np.ndarray:
    """A CUDA array (torch, CuPy, __cuda_array_interface__) copied to a NumPy array."""
    if _a.is_torch(x):
        return x.cpu().numpy()
    import cupy  # type: ignore
    return cupy.asnumpy(cupy.asarray(x))


def _narrow(a: _np.ndarray) -> _np.ndarray:
    """16 → 8 bits as the library narrows: round(v / 257), half up."""
    return ((a.astype(_np.uint32) + 128) // 257).astype(_np.uint8)


def _widen(a: _np.ndarray) -> _np.ndarray:
    """8 → 16 bits: v * 257."""
    return a.astype(_np.uint16) * _np.uint16(257)


class Reference:
    """match_histograms' reference image, checked once; its histograms per (planes, bits) of the
    images it is matched to, computed on first use (a batch or a list: once) as int64 NumPy
    arrays of shape (planes, bins)."""

    __slots__ = ("obj", "dev", "shape", "bits", "order", "backend", "_hists", "_dev_hists")

    def __init__(self, reference: Any, order: str, backend: str) -> None:
        if isinstance(reference, (list, tuple)):
            raise TypeError("reference: expected one image (an array), got a "
                            f"{type(reference).__name__}; every image is matched to one "
                            f"reference")
        self.dev = _a.as_device(reference, "reference")
        if self.dev is not None:
            self.obj, self.shape = reference, tuple(self.dev.shape)
            self.bits = 16 if self.dev.dtype == "uint16" else 8
        else:
            self.obj, _wrap = _a.host_array(reference, "reference", lists=False)
            self.shape = self.obj.shape
            self.bits = 16 if self.obj.dtype == _np.uint16 else 8
        _n, h, w, _c, _b = _a.split_shape(self.shape, False, "reference")
        if h * w == 0:
            raise ValueError(f"reference: shape {tuple(self.shape)} has no pixel; its histogram "
                             f"would be empty")
        self.order, self.backend = order, backend
        self._hists: Dict[Tuple[int, int], _np.ndarray] = {}
        self._dev_hists: Dict[Any, Any] = {}

    def channels(self) -> int:
        return _a.split_shape(self.shape, False, "reference")[3]

    def histograms(self, planes: int, bits: int) -> _np.ndarray:
        key = (planes, bits)
        got = self._hists.get(key)
        if got is None:
            got = self._compute(planes, bits)
            self._hists[key] = got
        return got

    def device_histograms(self, planes: int, d: "_a.Dev", bits: int = 8):
        """The histograms for a CUDA image d of `bits` bits as an int64 array of d's library on
        d's device, (1 or planes, 256 or 65536 bins): counted on the device, without waiting for
        it, when the reference is an array of that depth of the same library and device; else
        the host's copied up. Kept per (planes, bits, library, device)."""
        key = (planes, bits, d.lib, d.device)
        got = self._dev_hists.get(key)
        if got is not None:
            return got
        r = self.dev
        if r is not None and r.lib == d.lib and r.device == d.device and self.bits == bits:
            got = self._histogram(self.obj, planes, bits, "auto").reshape(
                -1, 65536 if bits == 16 else 256)
        else:
            hs = self.histograms(planes, bits)
            if d.lib == "torch":
                got = _a._torch.from_numpy(hs).to(d.obj.device)
            else:
                import cupy  # type: ignore
                with cupy.cuda.Device(d.device):
                    got = cupy.asarray(hs)
        self._dev_hists[key] = got
        return got

    def device_image(self, d: "_a.Dev"):
        """(address, pixels) of the reference for a compiled call on the CUDA image d that counts
        it itself: a gray 8-bit image ((H, W) or (H, W, 1)) of d's library on d's device and
        stream (the call reads it on d's stream: a reference on another stream, as a
        __cuda_array_interface__ may name, is counted on its own, the call ordered after it);
        None for any other reference."""
        r = self.dev
        if r is None or r.lib != d.lib or r.device != d.device or r.stream != d.stream or \
                self.bits != 8:
            return None
        _n, h, w, c, _b = _a.split_shape(self.shape, False, "reference")
        return (r.ptr, h * w) if c == 1 else None

    def _histogram(self, ref, planes: int, bits: int, backend: str):
        """histogram() of the reference in the mode that gives the planes' histograms: its gray
        plane, its luma, or its colour channels."""
        from . import histogram as _histogram  # the package's own function (host or device)
        histogram: Any = _histogram
        c = self.channels()
        if c >= 3:
            if planes == 1 and bits == 16:
                raise ValueError("reference: a 16-bit gray image is matched to a colour "
                                 "reference's luma, and 16-bit luma (YCbCr) does not exist: "
                                 "pass a gray reference, or 8-bit images")
            hmode = "rgb" if planes == 3 else "gray"
        else:
            hmode = None
        return histogram(ref, mode=hmode, backend=backend, batch=False, channel_order=self.order)

    def _compute(self, planes: int, bits: int) -> _np.ndarray:
        ref = self.obj
        if bits != self.bits:  # the reference at the images' depth, as the library converts
            host = ref if self.dev is None else _to_numpy(ref)
            ref = _narrow(host) if bits == 8 else _widen(host)
        on_host = isinstance(ref, _np.ndarray)
        hs = self._histogram(ref, planes, bits, self.backend if on_host else "auto")
        if not isinstance(hs, _np.ndarray):
            hs = _to_numpy(hs)
        bins = 65536 if bits == 16 else 256
        hs = _np.ascontiguousarray(hs, _np.int64).reshape(-1, bins)
        if hs.shape[0] != planes:
            hs = _np.ascontiguousarray(_np.broadcast_to(hs[:1], (planes, bins)))
        return hs
