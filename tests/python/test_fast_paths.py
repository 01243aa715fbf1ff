"""The shortcuts of gray CUDA torch tensors (histeq._arrays.torch_gray and the calls that take it in
equalize, clahe, histogram and match_histograms; with a mask or roi, histeq._region.torch_region
in equalize, clahe and histogram) against the general path they skip, on the CPU: a stand-in torch
module whose "CUDA" tensors are host memory, and the extension's device calls recorded instead of
run, with the memory their addresses point to at the time of the call. For each case the
shortcut must queue the same compiled calls with the same arguments and memory and return an
array of the same kind, shape, dtype, device and contents as the general path (histeq._arrays.
torch_gray replaced by one that declines), or raise the same error with the same message, and
wait for the device (a mask's count check) as often; no call may be given the address of a
released allocation. out=: the compiled calls get out's address (no result allocated), or the
image's own where their kernels write in place, else a new array's that is copied into out; a
wrong out is refused with the general path's error (the shortcuts decline it). CuPy arrays and
__cuda_array_interface__ objects on a stand-in cupy."""
from __future__ import annotations

import sys
import types
import weakref
from typing import Optional

import numpy as np
import pytest

import histeq
from histeq import _arrays as _a
from histeq import _region as _r

_DEVICE_CALLS = ("equalize_device", "equalize16_device", "clahe_device", "histogram_device",
                 "histogram16_device", "stages_device", "stages16_device", "equalize_device_list",
                 "histogram_device_region")


class _Dtype:
    def __init__(self, name):
        self.name, self.np = name, np.dtype(name)

    def __repr__(self):
        return f"torch.{self.name}"


class _Device:
    def __init__(self, kind, index=None):
        self.type, self.index = kind, index

    def __repr__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        return isinstance(other, _Device) and (self.type, self.index) == (other.type,
                                                                            other.index)

    def __hash__(self):
        return hash((self.type, self.index))


class _Torch(types.ModuleType):
    """The members of torch that histeq uses, over NumPy arrays. Every allocation gets an address
    of its own (recorded in `allocs`) and is filled with 0x5A, so unwritten results compare."""

    def __init__(self):
        super().__init__("torch")
        self.uint8, self.uint16 = _Dtype("uint8"), _Dtype("uint16")
        self.int64, self.float32, self.int16 = _Dtype("int64"), _Dtype("float32"), _Dtype("int16")
        self.bool, self.int8, self.int32 = _Dtype("bool"), _Dtype("int8"), _Dtype("int32")
        self._by_np = {d.np: d for d in (self.uint8, self.uint16, self.int64, self.float32,
                                         self.int16, self.bool, self.int8, self.int32)}
        self._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda dev: 0x5000 + dev)
        self.allocs = []
        self.next_base = 1 << 40
        self.syncs = 0  # reads of device memory from the host (bool() of a tensor, .cpu())
        self.memory = {}  # base >> 32 → weak reference to the allocation's array (its owner)
        self.freed_reads = []  # compiled calls given the address of a released allocation

    def tensor_of(self, a, device):
        base = self.next_base
        self.next_base += 1 << 32
        if a.base is not None:  # an array of its own: alive while a tensor (a view) holds it
            a = a.copy()
        self.allocs.append((base, a.nbytes))
        self.memory[base >> 32] = weakref.ref(a)
        return FakeTensor(a, device, base)

    def memory_at(self, address):
        """The bytes of the allocation address is in, at the time of the call (None: not one
        of this torch's); a released allocation is noted in freed_reads."""
        ref = self.memory.get(address >> 32)
        if ref is None:
            return None
        a = ref()
        if a is None:
            self.freed_reads.append(address)
            return "released"
        return a.tobytes()

    def empty(self, shape, dtype, device):
        return self.tensor_of(np.full(tuple(shape), 0x5A, dtype.np), device)

    def empty_like(self, t):
        return self.empty(t.shape, t.dtype, t.device)

    def from_numpy(self, a):
        return FakeTensor(a, _Device("cpu"), 0)

    def tensor(self, values, device):
        return self.tensor_of(np.asarray(values, np.int64), device)


class FakeTensor:
    """A tensor over the NumPy array a at address base + offset. Views (indexing, reshape,
    detach) share their base's version counter, which in-place writes move, as torch's do."""

    def __init__(self, a, device, base, offset=0, version=None):
        self.a, self.device, self._base, self._offset = a, device, base, offset
        self._counter = [0] if version is None else version
        self.inference = False  # made under torch.inference_mode: no version counter

    @property
    def _version(self):
        if self.inference:
            raise RuntimeError("Inference tensors do not track version counter.")
        return self._counter[0]

    def is_inference(self):
        return self.inference

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def dtype(self):
        return _torch()._by_np[self.a.dtype]

    @property
    def shape(self):
        return tuple(self.a.shape)

    def is_contiguous(self):
        return self.a.flags.c_contiguous

    def stride(self):
        return tuple(s // self.a.itemsize for s in self.a.strides)

    def get_device(self):
        return self.device.index if self.is_cuda else -1

    def data_ptr(self):
        return self._base + self._offset

    def dim(self):
        return self.a.ndim

    def numel(self):
        return self.a.size

    def cpu(self):
        if self.is_cuda:
            _torch().syncs += 1
        return FakeTensor(self.a.copy(), _Device("cpu"), 0)

    def detach(self):
        return FakeTensor(self.a, self.device, self._base, self._offset, self._counter)

    def numpy(self):
        assert not self.is_cuda
        return self.a

    def to(self, device):
        return _torch().tensor_of(np.ascontiguousarray(self.a), device)

    def reshape(self, *shape):
        return FakeTensor(self.a.reshape(*shape), self.device, self._base, self._offset,
                          self._counter)

    def __getitem__(self, i):
        v = self.a[i]
        if not isinstance(v, np.ndarray):
            v = self.a[i:i + 1].reshape(())
        start = v.__array_interface__["data"][0] - self.a.__array_interface__["data"][0]
        return FakeTensor(v, self.device, self._base, self._offset + start, self._counter)

    def __setitem__(self, i, value):
        self.a[i] = value
        self._counter[0] += 1

    def __ne__(self, other):
        return _torch().tensor_of(self.a != other, self.device)

    def any(self):
        return FakeTensor(np.array(self.a.any()), self.device, 0)

    def __bool__(self):
        if self.a.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        if self.is_cuda:
            _torch().syncs += 1
        return bool(self.a.reshape(()))

    __hash__ = object.__hash__

    def index_select(self, dim, index):
        return _torch().tensor_of(np.take(self.a, index.a, axis=dim), self.device)

    def contiguous(self):
        return self if self.a.flags.c_contiguous else self.to(self.device)

    def zero_(self):
        return self.fill_(0)

    def fill_(self, value):
        self.a[...] = value
        self._counter[0] += 1
        return self

    def copy_(self, source):
        """source's values into this tensor's memory (a CPU source into a CUDA tensor: an upload,
        no wait); moves the version counter, as torch's in-place operations do."""
        self.a[...] = source.a
        self._counter[0] += 1
        return self

    def set_(self, source):
        """The storage, shape and strides of source (this stand-in does not move the version
        counter: the address tells the change)."""
        self.a, self._base, self._offset = source.a, source._base, source._offset
        return self


FakeTensor.__module__ = "torch"


def _torch() -> _Torch:
    return sys.modules["torch"]  # type: ignore[return-value]


@pytest.fixture
def fake(monkeypatch):
    """The stand-in torch installed, histeq's torch state reset to it, the GPU "usable", and the
    device calls recorded into the returned list: (name, arguments, the bytes of the allocations
    that its address arguments point into, at the time of the call)."""
    torch = _Torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    for name in ("_torch", "_torch_u8", "_torch_u16", "_torch_i64", "_torch_bool", "_torch_i8",
                 "_torch_wide_ints", "_torch_raw_stream"):
        monkeypatch.setattr(_a, name, None)
    monkeypatch.setattr(_a, "_torch_types", set())
    monkeypatch.setattr(_a, "_cuda_state", (True, ""))
    monkeypatch.setattr(_r, "_mask_checked", {})
    calls: list = []

    def recorder(name):
        def call(*args):
            memory = tuple(torch.memory_at(v) for v in args
                           if isinstance(v, int) and not isinstance(v, bool) and v >= 1 << 40)
            calls.append((name, args, memory))
            return "recorded"
        return call
    for name in _DEVICE_CALLS:
        monkeypatch.setattr(_a._histeq, name, recorder(name))
    assert _a.is_torch(cuda(np.zeros((1, 1), np.uint8)))
    return torch, calls


def cuda(a, index=0):
    return _torch().tensor_of(np.ascontiguousarray(a), _Device("cuda", index))


def _norm(v, allocs):
    """An argument with the addresses of this call's allocations as (allocation, offset)."""
    if isinstance(v, int) and not isinstance(v, bool):
        for i, (base, size) in enumerate(allocs):
            if base <= v <= base + size:
                return ("alloc", i, v - base)
    return v


def _outcome(fn, torch, calls):
    """("ok", the compiled calls (arguments with addresses as _norm gives them, and the memory
    they point to), the result, the device waits) or ("error", type, message, device waits)."""
    torch.allocs.clear()
    calls.clear()
    syncs, torch.syncs = torch.syncs, 0
    try:
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001 — the error is the outcome compared
            return ("error", type(e), str(e), torch.syncs)
        allocs = list(torch.allocs)
        recorded = [(n, tuple(_norm(v, allocs) for v in args), memory)
                    for n, args, memory in calls]
        def kind(out):
            if isinstance(out, FakeTensor):
                return ("tensor", out.shape, repr(out.dtype), repr(out.device),
                        _norm(out.data_ptr(), allocs), out.a.tobytes())
            if isinstance(out, list):
                return ("list", [kind(o) for o in out])
            return ("other", type(out).__name__, np.asarray(out).tobytes())
        return ("ok", recorded, kind(out), torch.syncs)
    finally:
        torch.syncs += syncs


def _spy_shortcuts(monkeypatch, lib):
    """_arrays.LIB_gray and _region.LIB_region (lib: "torch" or "cupy") replaced by spies that
    note whether each call took the shortcut: (the notes of the first, of the second, the real
    functions)."""
    taken, region_taken = [], []
    real, real_region = getattr(_a, lib + "_gray"), getattr(_r, lib + "_region")

    def spy(x, batch):
        g = real(x, batch)
        taken.append(g is not None)
        return g

    def region_spy(*args):
        r = real_region(*args)
        region_taken.append(r is not None)
        return r
    monkeypatch.setattr(_a, lib + "_gray", spy)
    monkeypatch.setattr(_r, lib + "_region", region_spy)
    return taken, region_taken, real, real_region


def _both(fn, torch, calls, monkeypatch, fast_expected, region=False, before=None):
    """fn's outcome with the shortcuts, then with torch_gray declining, each from no remembered
    mask check (and after before(), when given): equal; the shortcut taken when fast_expected
    says so (region: with a mask or roi, _region.torch_region's shortcut too). No compiled call
    was given a released allocation."""
    taken, region_taken, real, real_region = _spy_shortcuts(monkeypatch, "torch")
    _r._mask_checked.clear()
    if before is not None:
        before()
    fast = _outcome(fn, torch, calls)
    monkeypatch.setattr(_a, "torch_gray", lambda x, batch: None)
    _r._mask_checked.clear()
    if before is not None:
        before()
    general = _outcome(fn, torch, calls)
    monkeypatch.setattr(_a, "torch_gray", real)
    monkeypatch.setattr(_r, "torch_region", real_region)
    assert not torch.freed_reads
    assert fast == general
    if callable(fast_expected):
        fast_expected = fast_expected(fast)
    if fast_expected:
        assert taken and all(taken), "the shortcut was not taken"
        if region:
            assert region_taken and all(region_taken), "the region's shortcut was not taken"
    return fast


def _u8(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


def _u16(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 65536, size=shape).astype(np.uint16)


_GRAY_SHAPES = [((40, 30), None), ((40, 30, 1), None), ((5, 20, 10), None),
                ((3, 20, 10, 1), None), ((0, 7), None), ((0, 20, 10), None), ((1, 1), None),
                ((40, 30), False), ((5, 20, 10), True), ((3, 20, 10, 1), True),
                ((20, 10, 1), False), ((20, 10, 1), True)]


@pytest.mark.parametrize("shape,batch", _GRAY_SHAPES)
@pytest.mark.parametrize("depth", [8, 16])
@pytest.mark.parametrize("call", ["equalize", "clahe", "histogram"])
def test_gray_tensors_take_the_shortcut_with_the_general_path_s_calls(fake, monkeypatch, call,
                                                                       depth, shape, batch):
    torch, calls = fake
    x = cuda(_u8(shape) if depth == 8 else _u16(shape))
    fn = getattr(histeq, call)
    got = _both(lambda: fn(x, batch=batch), torch, calls, monkeypatch, fast_expected=True)
    assert got[0] == "ok"


@pytest.mark.parametrize("kwargs", [
    {}, {"formula": "exact"}, {"kernel": "no-such-kernel"}, {"mode": "gray"}, {"mode": "rgb"},
    {"mode": "ycbcr"}, {"backend": "cpu"}, {"backend": "cuda"}, {"backend": "gpu"},
    {"channel_order": "bgr"}, {"channel_order": "xyz"}, {"formula": 3}, {"batch": 1},
    {"batch": "yes"}])
@pytest.mark.parametrize("depth", [8, 16])
def test_equalize_options(fake, monkeypatch, kwargs, depth):
    torch, calls = fake
    x = cuda(_u8((30, 20)) if depth == 8 else _u16((30, 20)))
    _both(lambda: histeq.equalize(x, **kwargs), torch, calls, monkeypatch, fast_expected=False)


@pytest.mark.parametrize("args,kwargs", [
    ((), {}), ((2.0, (4, 3)), {}), ((3,), {}), ((np.float32(2.5), np.array([2, 5])), {}),
    ((float("nan"),), {}), ((float("inf"),), {}), ((-1.0,), {}), ((0.0, 5), {}),
    ((2.0, (0, 3)), {}), ((2.0, (3, 1025)), {}), ((2.0, [4, 4]), {}), ((2.0, (4.0, 4)), {}),
    ((2.0, (True, 4)), {}), ((True,), {}), (("2",), {}), ((2.0, (4, 4, 4)), {}),
    ((), {"mode": "rgb"}), ((), {"mode": "bad"}), ((), {"backend": "cpu"}),
    ((), {"backend": "cuda"}), ((), {"channel_order": "bgr"}), ((), {"batch": 0})])
@pytest.mark.parametrize("depth", [8, 16])
def test_clahe_arguments(fake, monkeypatch, args, kwargs, depth):
    torch, calls = fake
    x = cuda(_u8((30, 20)) if depth == 8 else _u16((30, 20)))
    _both(lambda: histeq.clahe(x, *args, **kwargs), torch, calls, monkeypatch,
          fast_expected=False)


@pytest.mark.parametrize("kwargs", [
    {}, {"bins": 16}, {"bins": 4096}, {"bins": 65536}, {"bins": 300}, {"bins": 0},
    {"bins": np.int64(64)}, {"bins": True}, {"bins": 2.0}, {"kernel": "no-such-kernel"},
    {"mode": "rgb"}, {"backend": "cpu"}, {"channel_order": "bgr"}])
@pytest.mark.parametrize("depth", [8, 16])
def test_histogram_options(fake, monkeypatch, kwargs, depth):
    torch, calls = fake
    x = cuda(_u8((3, 30, 20)) if depth == 8 else _u16((3, 30, 20)))
    _both(lambda: histeq.histogram(x, **kwargs), torch, calls, monkeypatch, fast_expected=False)


@pytest.mark.parametrize("make", [
    lambda: FakeTensor(_u8((30, 20)).T, _Device("cuda", 0), 1 << 39),  # not C-contiguous
    lambda: cuda(_u8((30, 20)).astype(np.float32)),
    lambda: cuda(_u8((30, 20)).astype(np.int16)),
    lambda: FakeTensor(_u8((30, 20)), _Device("meta"), 0),
    lambda: _torch().from_numpy(_u8((30, 20))),                         # a CPU tensor
    lambda: cuda(_u8((2, 3, 20, 10, 1))),
    lambda: cuda(_u8((3, 20, 10, 5))),
    lambda: cuda(_u8((20, 10, 3))),
    lambda: cuda(_u8((20, 10, 2))),
    lambda: cuda(_u8((30,))),
    lambda: cuda(_u8((30, 20)), index=1)])
@pytest.mark.parametrize("call", ["equalize", "clahe", "histogram", "match"])
def test_other_tensors_keep_the_general_path(fake, monkeypatch, make, call):
    torch, calls = fake
    x = make()
    ref = cuda(_u8((10, 10), seed=1))
    fns = {"equalize": lambda: histeq.equalize(x), "clahe": lambda: histeq.clahe(x),
           "histogram": lambda: histeq.histogram(x),
           "match": lambda: histeq.match_histograms(x, ref)}
    _both(fns[call], torch, calls, monkeypatch, fast_expected=False)


def test_without_a_usable_gpu_the_error_is_the_general_path_s(fake, monkeypatch):
    torch, calls = fake
    monkeypatch.setattr(_a, "_cuda_state", (False, "no device here"))
    x = cuda(_u8((30, 20)))
    for fn in (histeq.equalize, histeq.clahe, histeq.histogram):
        got = _both(lambda: fn(x), torch, calls, monkeypatch, fast_expected=False)
        assert got[0] == "error" and "no device here" in got[2]


@pytest.mark.parametrize("shape,batch", _GRAY_SHAPES)
def test_match_gray_tensors(fake, monkeypatch, shape, batch):
    torch, calls = fake
    x = cuda(_u8(shape))
    ref = cuda(_u8((25, 15), seed=1))
    got = _both(lambda: histeq.match_histograms(x, ref, batch=batch), torch, calls, monkeypatch,
                fast_expected=True)
    # one call: the reference counted by stages_device itself (its ref_image), no array of counts
    pixels = int(np.prod(shape))
    assert got[0] == "ok" and [c[0] for c in got[1]] == (["stages_device"] if pixels else [])
    assert all(c[1][-2:] == (ref.data_ptr(), 25 * 15) for c in got[1])


@pytest.mark.parametrize("make_ref", [
    lambda: cuda(_u8((25, 15, 1))),
    lambda: cuda(_u8((25, 15, 3))),                    # colour: its luma
    lambda: cuda(_u16((25, 15))),                      # 16-bit: narrowed on the host
    lambda: cuda(_u8((25, 15)), index=1),              # another device
    lambda: cuda(_u8((0, 15))),                        # no pixel
    lambda: cuda(_u8((4, 25, 15))),                    # not one image
    lambda: _torch().from_numpy(_u8((25, 15))),        # on the host
    lambda: FakeTensor(_u8((15, 25)).T, _Device("cuda", 0), 1 << 39),
    lambda: [cuda(_u8((25, 15)))]])
@pytest.mark.parametrize("kwargs", [{}, {"mode": "rgb"}, {"backend": "cpu"},
                                    {"channel_order": "bgr"}, {"mode": "bad"}])
def test_match_references(fake, monkeypatch, make_ref, kwargs):
    torch, calls = fake
    x = cuda(_u8((30, 20)))
    ref = make_ref()
    _both(lambda: histeq.match_histograms(x, ref, **kwargs), torch, calls, monkeypatch,
          fast_expected=False)


def test_match_takes_the_shortcut_for_a_gray_reference_of_one_channel(fake, monkeypatch):
    torch, calls = fake
    x, ref = cuda(_u8((30, 20))), cuda(_u8((25, 15, 1), seed=1))
    got = _both(lambda: histeq.match_histograms(x, ref), torch, calls, monkeypatch,
                fast_expected=True)
    assert [c[0] for c in got[1]] == ["stages_device"]


def test_the_batch_path_knob_reaches_the_compiled_call(fake, monkeypatch):
    torch, calls = fake
    x = cuda(_u8((4, 20, 10)))
    prev = histeq._set_batch_path("queued")
    try:
        got = _both(lambda: histeq.equalize(x), torch, calls, monkeypatch, fast_expected=True)
    finally:
        histeq._set_batch_path(prev)
    assert got[1][0][1][-1] == "queued"


# ------------------------------------------------------------------------- masks and rectangles

_IN_PLACE = ("bool", "uint8", "int8")      # the kernels read these masks as they are
_CONVERTED = ("int16", "int32", "int64")   # these as mask != 0 (a new tensor per call)


def _mask(kind, h, w, seed=3):
    """A mask for images of h x w, about half of it counted, as kind says."""
    m = np.random.default_rng(seed).random((h, w)) < 0.5
    if h * w:
        m.flat[0] = True
    values = {"bool": m, "uint8": m * np.uint8(200), "int8": m * np.int8(-3),
              "int16": m * np.int16(300), "int32": m * np.int32(70000),
              "int64": m * np.int64(1 << 40), "uint16": m * np.uint16(257),
              "float32": m.astype(np.float32)}
    if kind in values:
        return cuda(values[kind])
    if kind == "non-contiguous":  # a transposed view of a (w, h) tensor
        t = cuda(np.ascontiguousarray(m.T))
        return FakeTensor(t.a.T, t.device, t._base, 0, t._counter)
    if kind == "other device":
        return cuda(m, index=1)
    if kind == "cpu tensor":
        return _torch().from_numpy(m)
    if kind == "numpy":
        return m
    if kind == "list":
        return m.tolist()
    if kind == "empty":
        return cuda(np.zeros((h, w), bool))
    if kind == "transposed shape":
        return cuda(np.ones((w, h), bool))
    if kind == "3-d":
        return cuda(np.ones((h, w, 1), bool))
    if kind == "scalar":
        return True
    raise AssertionError(kind)


_MASK_KINDS = _IN_PLACE + _CONVERTED + (
    "uint16", "float32", "non-contiguous", "other device", "cpu tensor", "numpy", "list", "empty",
    "transposed shape", "3-d", "scalar")


def _takes_region_shortcut(kind):
    return lambda outcome: kind in _IN_PLACE + _CONVERTED and outcome[0] == "ok"


@pytest.mark.parametrize("kind", _MASK_KINDS)
@pytest.mark.parametrize("roi", [None, (1, 2, 5, 4)])
@pytest.mark.parametrize("shape,batch", [((40, 30), None), ((40, 30, 1), None),
                                         ((5, 20, 10), None), ((3, 20, 10, 1), True),
                                         ((20, 10, 1), False), ((0, 7), None),
                                         ((0, 20, 10), None), ((1, 1), None)])
@pytest.mark.parametrize("call", ["equalize", "histogram"])
def test_masked_gray_tensors(fake, monkeypatch, call, shape, batch, roi, kind):
    """Every kind of mask, with and without a rectangle, on the gray shapes (a rectangle outside
    the image and masks that do not fit it included): the region's shortcut gives the general
    path's calls, result, errors and device waits."""
    torch, calls = fake
    x = cuda(_u8(shape))
    nd = len(shape) - (1 if shape[-1] == 1 and len(shape) > 2 else 0)
    h, w = shape[nd - 2], shape[nd - 1]
    m = _mask(kind, h, w)
    fn = getattr(histeq, call)
    _both(lambda: fn(x, batch=batch, mask=m, roi=roi), torch, calls, monkeypatch,
          fast_expected=_takes_region_shortcut(kind), region=True)


@pytest.mark.parametrize("roi", [
    (0, 0, 30, 40), (29, 39, 1, 1), [1, 2, 5, 4], (np.int64(1), 2, 5, 4), (True, 0, 1, 1),
    (0, 0, 0, 4), (0, 0, 4, -2), (-1, 0, 4, 4), (0, 0, 31, 1), (0, 1, 30, 40), (1, 2, 5),
    (1, 2, 5, 4.0), (2**31 - 2, 0, 1, 1), (0, 2**31, 1, 1), (2**64, 0, 1, 1), "1,2,5,4", 7,
    [1, 2, 5, 4, 0], (5, 5, 4, 4)])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("call", ["equalize", "histogram"])
def test_rectangles(fake, monkeypatch, call, masked, roi):
    torch, calls = fake
    x = cuda(_u8((40, 30)))
    m = None
    if masked:  # counts one pixel, outside (5, 5, 4, 4)
        a = np.zeros((40, 30), bool)
        a[2, 1] = True
        m = cuda(a)
    fn = getattr(histeq, call)
    _both(lambda: fn(x, mask=m, roi=roi), torch, calls, monkeypatch,
          fast_expected=lambda o: o[0] == "ok" and (
              type(roi) is tuple or type(roi) is list) and all(type(t) is int for t in roi),
          region=True)


@pytest.mark.parametrize("kwargs", [
    {"mode": "rgb"}, {"mode": "gray"}, {"mode": "luma"}, {"mode": "ycbcr"}, {"formula": "exact"},
    {"formula": 3}, {"kernel": "no-such-kernel"}, {"backend": "cpu"}, {"backend": "cuda"},
    {"backend": "gpu"}, {"channel_order": "bgr"}, {"batch": True}, {"batch": 1},
    {"bins": 256}, {"bins": np.int64(256)}, {"bins": 16}, {"bins": 65536}, {"bins": 300},
    {"bins": True}])
@pytest.mark.parametrize("depth", [8, 16])
@pytest.mark.parametrize("call", ["equalize", "histogram"])
def test_masked_options(fake, monkeypatch, call, depth, kwargs):
    torch, calls = fake
    if ("bins" in kwargs) != (call == "histogram"):
        pytest.skip("equalize takes no bins; histogram's options are tested unmasked")
    x = cuda(_u8((30, 20)) if depth == 8 else _u16((30, 20)))
    m = _mask("bool", 30, 20)
    fn = getattr(histeq, call)
    _both(lambda: fn(x, mask=m, roi=(2, 3, 10, 12), **kwargs), torch, calls, monkeypatch,
          fast_expected=False)


@pytest.mark.parametrize("make", [
    lambda: cuda(_u8((20, 10, 3))), lambda: cuda(_u8((20, 10, 2))),
    lambda: cuda(_u8((2, 20, 10, 4))), lambda: cuda(_u16((20, 10))),
    lambda: FakeTensor(_u8((10, 20)).T, _Device("cuda", 0), 1 << 39),
    lambda: _torch().from_numpy(_u8((20, 10))), lambda: cuda(_u8((20, 10)), index=1),
    lambda: [cuda(_u8((20, 10))), cuda(_u8((20, 10), seed=1))],
    lambda: [cuda(_u8((20, 10))), cuda(_u8((10, 20)))]])
@pytest.mark.parametrize("call", ["equalize", "histogram"])
def test_masked_other_images_keep_the_general_path(fake, monkeypatch, call, make):
    torch, calls = fake
    x = make()
    m = _mask("bool", 20, 10)
    fn = getattr(histeq, call)
    _both(lambda: fn(x, mask=m), torch, calls, monkeypatch, fast_expected=False)
    _both(lambda: fn(x, roi=(1, 1, 5, 5)), torch, calls, monkeypatch, fast_expected=False)


def test_the_rectangle_shortcut_accepts_what_the_general_checks_accept():
    """_region._fast_roi against _roi_tuple and Region's check per image, on images up to
    2**32 wide (sizes no stand-in allocates): it takes a tuple or list of four ints exactly when
    they pass, as the same tuple, and nothing else."""
    edge = 2**31 - 1
    values = [-1, 0, 1, 5, 2**31 - 3, 2**31 - 2, edge, 2**31, 2**32]
    sizes = [(0, 7), (1, 1), (40, 30), (3, edge), (edge, 2), (2, 2**32)]
    rng = np.random.default_rng(7)
    for _ in range(4000):
        roi = tuple(int(v) for v in rng.choice(values, 4))
        h, w = sizes[rng.integers(len(sizes))]
        try:
            region = _r.Region(None, roi)
            region._check_roi(h, w)
            want = region.roi
        except ValueError:
            want = None
        assert _r._fast_roi(roi, h, w) == want
        assert _r._fast_roi(list(roi), h, w) == want
    for other in [(np.int64(1), 2, 3, 4), (True, 0, 1, 1), (1.0, 2, 3, 4), (1, 2, 3), "1234",
                  range(1, 5), np.array([1, 2, 3, 4]), (1, 2, 3, 4, 5)]:
        assert _r._fast_roi(other, 40, 30) is None


def _sequence_both(steps, torch, calls, monkeypatch):
    """The outcomes of steps (calls, and writes to the masks between them) in turn with the
    shortcuts, then in turn with torch_gray declining, each run from no remembered mask check:
    equal step by step. The first step must restore what the others change."""
    real, runs = _a.torch_gray, []
    for gray in (real, lambda x, batch: None):
        monkeypatch.setattr(_a, "torch_gray", gray)
        _r._mask_checked.clear()
        runs.append([_outcome(step, torch, calls) for step in steps])
    monkeypatch.setattr(_a, "torch_gray", real)
    assert not torch.freed_reads
    assert runs[0] == runs[1]
    return runs[0]


def _waits(outcomes):
    return [o[-1] for o in outcomes]


def _kinds(outcomes):
    return [o[0] if o[0] == "ok" else o[2] for o in outcomes]


_EMPTY = "mask: the mask counts no pixel (every mask pixel is 0)"
_EMPTY_IN_ROI = "mask: the mask counts no pixel inside the rectangle (roi)"


@pytest.mark.parametrize("kind", _IN_PLACE + _CONVERTED + ("non-contiguous",))
def test_a_mask_written_in_place_is_checked_again(fake, monkeypatch, kind):
    """The count check waits for the device once per mask until the mask, a view of it or the
    rectangle changes; a mask emptied in place gives the error, filled again the result."""
    torch, calls = fake
    x = cuda(_u8((40, 30)))
    m = _mask(kind, 40, 30)
    first = m.a.copy()
    steps = [lambda: m.__setitem__(Ellipsis, first),
             lambda: histeq.equalize(x, mask=m),
             lambda: histeq.equalize(x, mask=m),            # remembered: no wait
             lambda: histeq.histogram(x, mask=m),           # the same check
             lambda: m.fill_(0),
             lambda: histeq.equalize(x, mask=m),
             lambda: m.__setitem__((3, 4), 1),
             lambda: histeq.equalize(x, mask=m),
             lambda: histeq.equalize(x, mask=m, roi=(0, 0, 5, 5)),    # another rectangle
             lambda: histeq.equalize(x, mask=m, roi=(10, 10, 5, 5)),
             lambda: histeq.equalize(x, mask=m, roi=(0, 0, 5, 5)),
             lambda: m[2:6].fill_(0),                       # through a view
             lambda: histeq.histogram(x, mask=m)]
    got = _sequence_both(steps, torch, calls, monkeypatch)
    assert _kinds(got) == ["ok", "ok", "ok", "ok", "ok", _EMPTY, "ok", "ok", "ok", _EMPTY_IN_ROI,
                           "ok", "ok", _EMPTY]
    assert _waits(got) == [0, 1, 0, 0, 0, 1, 0, 1, 1, 1, 0, 0, 1]
    masks = [c[2][-1] for o in got if o[0] == "ok" for c in o[1]]
    assert len(set(masks)) == 3  # the mask's bytes as each call read them: three versions


def test_masks_of_the_same_shape_are_told_apart(fake, monkeypatch):
    torch, calls = fake
    x = cuda(_u8((40, 30)))
    counted, empty = _mask("bool", 40, 30), cuda(np.zeros((40, 30), bool))
    other, full = cuda(np.zeros((40, 30), bool)), cuda(np.zeros((40, 30), bool))
    steps = [lambda: full.set_(counted),
             lambda: histeq.equalize(x, mask=full),
             lambda: histeq.equalize(x, mask=empty),
             lambda: histeq.equalize(x, mask=full),
             lambda: histeq.equalize(x, mask=empty),        # an error is not remembered
             lambda: full.set_(other),                      # another address, same version
             lambda: histeq.equalize(x, mask=full),
             lambda: full.set_(counted),
             lambda: histeq.equalize(x, mask=full)]         # remembered
    got = _sequence_both(steps, torch, calls, monkeypatch)
    assert _kinds(got) == ["ok", "ok", _EMPTY, "ok", _EMPTY, "ok", _EMPTY, "ok", "ok"]
    assert _waits(got) == [0, 1, 1, 0, 1, 0, 1, 0, 0]


@pytest.mark.parametrize("kind", _IN_PLACE + _CONVERTED)
def test_the_shortcut_and_the_general_path_remember_one_check(fake, monkeypatch, kind):
    """A check the general path remembered (a list of images) spares the shortcut's, and the
    other way round."""
    torch, calls = fake
    x, m = cuda(_u8((40, 30))), _mask(kind, 40, 30)
    for first, then in (([x], x), (x, [x])):
        _r._mask_checked.clear()
        _outcome(lambda: histeq.equalize(first, mask=m, roi=[1, 2, 5, 4]), torch, calls)
        assert torch.syncs == 1
        got = _outcome(lambda: histeq.equalize(then, mask=m, roi=(1, 2, 5, 4)), torch, calls)
        assert got[0] == "ok" and got[-1] == 0
        torch.syncs = 0


@pytest.mark.parametrize("kind", ["bool", "int32", "non-contiguous"])
def test_inference_tensors_are_checked_on_every_call(fake, monkeypatch, kind):
    """A mask made under torch.inference_mode has no version counter (reading it raises): its
    count check runs on every call, in place writes seen."""
    torch, calls = fake
    x = cuda(_u8((40, 30)))
    m = _mask(kind, 40, 30)
    m.inference = True
    first = m.a.copy()
    steps = [lambda: m.__setitem__(Ellipsis, first),
             lambda: histeq.equalize(x, mask=m),
             lambda: histeq.equalize(x, mask=m, roi=(0, 0, 5, 5)),
             lambda: histeq.histogram(x, mask=m),
             lambda: m.fill_(0),
             lambda: histeq.equalize(x, mask=m)]
    got = _sequence_both(steps, torch, calls, monkeypatch)
    assert _kinds(got) == ["ok", "ok", "ok", "ok", "ok", _EMPTY]
    assert _waits(got) == [0, 1, 1, 1, 0, 1]


def test_a_remembered_check_belongs_to_its_tensor(fake, monkeypatch):
    """A remembered check whose tensor is gone (its id taken by a new tensor) is not the new
    tensor's."""
    torch, calls = fake
    x = cuda(_u8((40, 30)))
    empty = cuda(np.zeros((40, 30), bool))
    stand_in = cuda(np.ones((40, 30), bool))
    stamp = _r._torch_stamp(empty, 0, True, None)
    for gray in (_a.torch_gray, lambda x, batch: None):
        monkeypatch.setattr(_a, "torch_gray", gray)
        _r._mask_checked[id(empty)] = (weakref.ref(stand_in), stamp)
        with pytest.raises(ValueError, match="counts no pixel"):
            histeq.equalize(x, mask=empty)


def test_a_converted_mask_lives_until_the_calls_are_queued(fake, monkeypatch):
    """The mask != 0 of a wide integer mask is held until the compiled calls are queued (the
    stand-in notes any call given the address of a released allocation)."""
    torch, calls = fake
    x = cuda(_u8((3, 40, 30)))
    m = _mask("int32", 40, 30)
    for call in (histeq.equalize, histeq.histogram):
        got = _both(lambda: call(x, mask=m), torch, calls, monkeypatch, fast_expected=True,
                    region=True)
        assert all(c[2] and "released" not in c[2] for c in got[1])
        assert all(c[2][-1] == (_mask("int32", 40, 30).a != 0).tobytes() for c in got[1]
                   if c[0] == "stages_device")


@pytest.mark.parametrize("clip", [40.0, 0.0, -3.5, 1e308, float("inf"), float("-inf"),
                                  float("nan")])
@pytest.mark.parametrize("grid", [(8, 8), (1, 1024), (0, 4), (4, 1025), (-1, 3), (2**70, 1)])
def test_clahe_args_shortcut_equals_the_full_checks(clip, grid):
    """clahe_args' shortcut (a float and a tuple of ints) against its full checks, which a
    np.float64 clip (a float subclass) takes."""
    def outcome(c):
        try:
            return _a.clahe_args(c, grid)
        except Exception as e:  # noqa: BLE001 — the error is the outcome compared
            return (type(e), str(e))
    assert outcome(clip) == outcome(np.float64(clip))


# ------------------------------------------------------------------------------- CuPy arrays

class _CupyState:
    current = 0
    streams = {0: 0x7000, 1: 0x7100}
    entered = None  # a stream made current by `with stream:` (ExternalStream, Stream.null)
    allocs: list = []  # the arrays cupy.empty made, in order
    syncs = 0  # reads of device memory from the host (bool() of an array)

    @staticmethod
    def stream():
        return _CupyState.entered if _CupyState.entered is not None else \
            _CupyState.streams[_CupyState.current]


class _CupyStream:
    def __init__(self, ptr):
        self.ptr = ptr

    def __enter__(self):
        self.prev, _CupyState.entered = _CupyState.entered, self.ptr
        return self

    def __exit__(self, *exc):
        _CupyState.entered = self.prev
        return False


class _CupyDevice:
    def __init__(self, i):
        self.id = i

    def __enter__(self):
        self.prev, _CupyState.current = _CupyState.current, self.id
        return self

    def __exit__(self, *exc):
        _CupyState.current = self.prev
        return False


class FakeCupyArray:
    """A CuPy array over the NumPy array a: an address of its own on its device (or ptr), the
    stream current when set and copyto wrote it in `writes`."""
    next_address = 0

    def __init__(self, a, device, ptr=None):
        self.a, self._device = a, device
        if ptr is None:
            FakeCupyArray.next_address += 1
            ptr = (1 << 41) + (device << 36) + (FakeCupyArray.next_address << 24)
        self.data = types.SimpleNamespace(ptr=ptr, device_id=device)
        self.flags = types.SimpleNamespace(c_contiguous=a.flags.c_contiguous)
        self.writes = []

    dtype = property(lambda self: self.a.dtype)
    shape = property(lambda self: self.a.shape)
    strides = property(lambda self: self.a.strides)
    device = property(lambda self: _CupyDevice(self._device))

    def set(self, host):
        self.a[...] = host
        self.writes.append(("set", _CupyState.current, _CupyState.stream()))

    def fill(self, value):
        self.a[...] = value
        self.writes.append(("fill", _CupyState.current, _CupyState.stream()))

    def _made(self, a):
        """A new array of this one's device (an operation's result) over a."""
        return _cupy_empty(a.shape, a.dtype, a, self._device)

    def __ne__(self, other):
        return self._made(self.a != other)

    __hash__ = object.__hash__

    def any(self):
        return self._made(np.array(self.a.any()))

    def reshape(self, *shape):  # a view of the same memory
        return FakeCupyArray(self.a.reshape(*shape), self._device, self.data.ptr)

    def __getitem__(self, i):  # a view: its address is the element's
        v = self.a[i]
        start = v.__array_interface__["data"][0] - self.a.__array_interface__["data"][0]
        return FakeCupyArray(v, self._device, self.data.ptr + start)

    def __bool__(self):
        if self.a.size != 1:
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous.")
        _CupyState.syncs += 1
        return bool(self.a.reshape(()))


def _cupy_empty(shape, dtype, values=None, device=None):
    """cupy.empty (filled with 0x5A, or values) on the current device (or device), recorded."""
    a = np.full(shape, 0x5A, dtype) if values is None else np.ascontiguousarray(values, dtype)
    arr = FakeCupyArray(a, _CupyState.current if device is None else device)
    _CupyState.allocs.append(arr)
    return arr


FakeCupyArray.__module__ = "cupy"


@pytest.fixture
def fake_cupy(monkeypatch):
    """A stand-in cupy (two devices, a current one, a current stream per device) and the device
    calls recorded into the returned list."""
    cupy = types.ModuleType("cupy")
    cupy.ndarray = FakeCupyArray
    cupy.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: _CupyState.current),
        get_current_stream=lambda: types.SimpleNamespace(ptr=_CupyState.stream()),
        Device=_CupyDevice, ExternalStream=_CupyStream,
        Stream=types.SimpleNamespace(null=_CupyStream(0)))
    cupy.empty = lambda shape, dtype: _cupy_empty(shape, dtype)
    cupy.ascontiguousarray = lambda x: x if x.a.flags.c_contiguous else \
        _cupy_empty(x.shape, x.dtype, x.a, x._device)

    def copyto(dst, src):
        assert dst._device == src._device == _CupyState.current
        dst.a[...] = src.a
        dst.writes.append(("copyto", _CupyState.current, _CupyState.stream()))
    cupy.copyto = copyto
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(_a, "_cupy", None)
    monkeypatch.setattr(_a, "_cupy_types", set())
    monkeypatch.setattr(_a, "_cuda_state", (True, ""))
    monkeypatch.setattr(_CupyState, "current", 0)
    monkeypatch.setattr(_CupyState, "entered", None)
    monkeypatch.setattr(_CupyState, "allocs", [])
    monkeypatch.setattr(_CupyState, "syncs", 0)
    monkeypatch.setattr(_r, "_mask_checked", {})
    calls: list = []
    for name in _DEVICE_CALLS:
        monkeypatch.setattr(_a._histeq, name,
                            lambda *args, _n=name: calls.append((_n, args)) or "recorded")
    return calls


@pytest.mark.parametrize("device", [0, 1])
@pytest.mark.parametrize("call", ["equalize", "clahe"])
def test_cupy_arrays_run_on_their_device_s_current_stream(fake_cupy, call, device):
    """The stream is the current stream of the array's device, read without entering the
    device when it is the current one; the result is allocated on the array's device; the
    current device is the caller's again after the call."""
    calls = fake_cupy
    x = FakeCupyArray(_u8((30, 20)), device)
    out = getattr(histeq, call)(x)
    assert isinstance(out, FakeCupyArray) and out._device == device and out.shape == (30, 20)
    assert out.dtype == np.uint8 and _CupyState.current == 0
    (_name, args), = calls
    assert args[:3] == (device, _CupyState.streams[device], x.data.ptr)


def test_cupy_dtypes(fake_cupy):
    calls = fake_cupy
    meta = np.dtype(np.uint16, metadata={"a": 1})  # equal to uint16, not NumPy's own object
    assert meta == np.uint16 and meta is not np.dtype(np.uint16)
    out = histeq.clahe(FakeCupyArray(_u16((30, 20)).astype(meta), 0))
    assert out.dtype == np.uint16 and calls[0][1][7] is True  # clahe_device(..., sixteen, ...)
    with pytest.raises(TypeError, match=r"image: dtype >u2; expected uint8 or uint16"):
        histeq.equalize(FakeCupyArray(_u16((30, 20)).astype(">u2"), 0))
    with pytest.raises(TypeError, match=r"image: dtype float32; expected uint8 or uint16"):
        histeq.equalize(FakeCupyArray(np.zeros((3, 3), np.float32), 0))


def test_cuda_array_interface_results_are_cupy_arrays_on_the_array_s_device(fake_cupy,
                                                                           monkeypatch):
    calls = fake_cupy

    class Foreign:
        __cuda_array_interface__ = {"shape": (30, 20), "typestr": "|u1", "data": (1 << 42, False),
                                    "version": 3, "stream": 1}
    monkeypatch.setattr(_a._histeq, "pointer_device", lambda ptr: 1)
    out = histeq.equalize(Foreign())
    assert isinstance(out, FakeCupyArray) and out._device == 1 and out.shape == (30, 20)
    assert _CupyState.current == 0
    (_name, args), = calls
    assert args[:3] == (1, 0, 1 << 42)  # stream 1: the legacy default stream, 0
    monkeypatch.setattr(_a, "_cupy", None)
    monkeypatch.setitem(sys.modules, "cupy", None)  # not installed
    with pytest.raises(TypeError, match="image: cannot allocate a result for Foreign; install "
                                        "CuPy"):
        histeq.equalize(Foreign())


# ------------------------------------------------------------------------------------------ out=

def _calls_of(name, x, ref=None):
    """fn(out) for the entry point name on x (ref: match_histograms' reference)."""
    return {"equalize": lambda out: histeq.equalize(x, out=out),
            "clahe": lambda out: histeq.clahe(x, out=out),
            "histogram": lambda out: histeq.histogram(x, out=out),
            "match": lambda out: histeq.match_histograms(x, ref, out=out)}[name]


def _fresh_like(t, fill=7):
    """A new CUDA tensor of t's shape and dtype on t's device, filled with fill."""
    return _torch().tensor_of(np.full(t.shape, fill, t.a.dtype), t.device)


def _calls_into(outcome, address):
    """An outcome's compiled calls (names, arguments) with its result's allocation at address."""
    result = outcome[2][4]  # ("alloc", index, 0): the result was allocated by the call

    def at(v):
        if isinstance(v, tuple) and v[:2] == ("alloc", result[1]):
            return address + v[2]
        return v
    return [(name, tuple(at(v) for v in args)) for name, args, _memory in outcome[1]]


@pytest.mark.parametrize("shape,batch", _GRAY_SHAPES)
@pytest.mark.parametrize("depth", [8, 16])
@pytest.mark.parametrize("call", ["equalize", "clahe", "histogram", "match"])
def test_out_takes_the_result_of_gray_tensors(fake, monkeypatch, call, depth, shape, batch):
    """The shortcut writes into out: the compiled calls of the out=None call with out's address
    in place of the result's, no allocation of a result, out returned; the general path gives
    the same."""
    torch, calls = fake
    if call == "match" and depth == 16:
        pytest.skip("16-bit matching on CUDA arrays goes through the host")
    x = cuda(_u8(shape) if depth == 8 else _u16(shape))
    ref = cuda(_u8((25, 15), seed=1))
    fn = {"equalize": lambda out: histeq.equalize(x, batch=batch, out=out),
          "clahe": lambda out: histeq.clahe(x, batch=batch, out=out),
          "histogram": lambda out: histeq.histogram(x, batch=batch, out=out),
          "match": lambda out: histeq.match_histograms(x, ref, batch=batch, out=out)}[call]
    plain = _outcome(lambda: fn(None), torch, calls)
    out = _fresh_like(fn(None))
    got = _both(lambda: fn(out), torch, calls, monkeypatch, fast_expected=True)
    assert got[0] == "ok" and got[2][4] == out.data_ptr()
    assert [(name, args) for name, args, _m in got[1]] == _calls_into(plain, out.data_ptr())
    torch.allocs.clear()
    assert fn(out) is out
    assert not torch.allocs  # (match: the reference counted by the call, into its own buffer)


@pytest.mark.parametrize("kind", ["bool", "uint8", "int32"])
@pytest.mark.parametrize("call", ["equalize", "histogram"])
def test_out_takes_the_masked_result(fake, monkeypatch, call, kind):
    torch, calls = fake
    x = cuda(_u8((3, 40, 30)))
    m = _mask(kind, 40, 30)
    fn = getattr(histeq, call)
    plain = _outcome(lambda: fn(x, mask=m, roi=(1, 2, 20, 30)), torch, calls)
    out = _fresh_like(fn(x, mask=m))
    got = _both(lambda: fn(x, mask=m, roi=(1, 2, 20, 30), out=out), torch, calls, monkeypatch,
                fast_expected=True, region=True)
    assert got[0] == "ok" and got[2][4] == out.data_ptr()
    assert [(name, args) for name, args, _m in got[1]] == _calls_into(plain, out.data_ptr())


def _wrong_outs(want):
    """(name, out) pairs that break one rule each for a result like want (a stand-in tensor)."""
    other = np.uint16 if want.a.dtype != np.uint16 else np.uint8
    shape = want.shape
    return [
        ("dtype", cuda(np.zeros(shape, other))),
        ("float32", cuda(np.zeros(shape, np.float32))),
        ("shape", cuda(np.zeros(shape + (1,), want.a.dtype))),
        ("fewer", cuda(np.zeros(shape[1:] or (1,), want.a.dtype))),
        ("strides", FakeTensor(np.zeros(shape + (2,), want.a.dtype)[..., 0], _Device("cuda", 0),
                               1 << 39)),
        ("cpu tensor", _torch().from_numpy(np.zeros(shape, want.a.dtype))),
        ("other device", cuda(np.zeros(shape, want.a.dtype), index=1)),
        ("meta tensor", FakeTensor(np.zeros(shape, want.a.dtype), _Device("meta"), 0)),
        ("numpy", np.zeros(shape, want.a.dtype)),
        ("list", np.zeros(shape, want.a.dtype).tolist()),
        ("none of the kinds", 3)]


_OUT_ERRORS = {"dtype": TypeError, "float32": TypeError, "shape": ValueError, "fewer": ValueError,
               "strides": ValueError, "cpu tensor": ValueError, "other device": ValueError,
               "meta tensor": ValueError, "numpy": TypeError, "list": TypeError,
               "none of the kinds": TypeError}


@pytest.mark.parametrize("shape", [(40, 30), (3, 20, 10), (20, 10, 1), (0, 7)])
@pytest.mark.parametrize("depth", [8, 16])
@pytest.mark.parametrize("call", ["equalize", "clahe", "histogram", "match"])
def test_every_wrong_out_is_refused_with_the_general_path_s_error(fake, monkeypatch, call, depth,
                                                                 shape):
    torch, calls = fake
    x = cuda(_u8(shape) if depth == 8 else _u16(shape))
    fn = _calls_of(call, x, cuda(_u8((25, 15), seed=1)))
    want = fn(None)
    for name, out in _wrong_outs(want):
        if name == "strides" and not want.a.size:
            continue  # an empty array is C-contiguous whatever its strides
        got = _both(lambda: fn(out), torch, calls, monkeypatch, fast_expected=False)
        assert got[0] == "error" and got[1] is _OUT_ERRORS[name], (name, got)
        assert got[2].startswith("out: "), got[2]
        if not (call == "match" and depth == 16):  # 16 bits: checked against the host's result
            assert not got[3]


def test_the_messages_say_what_out_should_be(fake):
    x = cuda(_u8((40, 30)))
    out = cuda(np.zeros((40, 30), np.uint16))
    with pytest.raises(TypeError, match=r"^out: dtype torch\.uint16; expected torch\.uint8, the "
                                        r"result's dtype$"):
        histeq.equalize(x, out=out)
    with pytest.raises(ValueError, match=r"^out: shape \(30, 40\); expected \(40, 30\), the "
                                         r"result's shape$"):
        histeq.clahe(x, out=cuda(np.zeros((30, 40), np.uint8)))
    with pytest.raises(ValueError, match=r"^out: a tensor on cuda:1; expected one on cuda:0, "
                                         r"the image's device$"):
        histeq.equalize(x, out=cuda(np.zeros((40, 30), np.uint8), index=1))
    with pytest.raises(ValueError, match=r"^out: not C-contiguous"):
        histeq.equalize(x, out=FakeTensor(np.zeros((30, 40), np.uint8).T, _Device("cuda", 0),
                                          1 << 39))
    with pytest.raises(TypeError, match=r"^out: expected a torch tensor \(the kind of array this "
                                        r"call returns for this image\), got ndarray$"):
        histeq.equalize(x, out=np.zeros((40, 30), np.uint8))
    with pytest.raises(TypeError, match=r"^out: dtype torch\.uint8; expected torch\.int64"):
        histeq.histogram(x, out=cuda(np.zeros(256, np.uint8)))
    with pytest.raises(ValueError, match=r"^out: shape \(256,\); expected \(3, 256\)"):
        histeq.histogram(cuda(_u8((3, 40, 30))), out=cuda(np.zeros(256, np.int64)))


@pytest.mark.parametrize("call", ["equalize", "clahe", "histogram", "match"])
def test_lists_take_no_out(fake, call):
    x = [cuda(_u8((40, 30))), cuda(_u8((20, 10), seed=1))]
    for images in (x, tuple(x)):
        with pytest.raises(TypeError, match=r"^out: not supported for a list or tuple of images"):
            _calls_of(call, images, cuda(_u8((25, 15), seed=1)))(cuda(_u8((40, 30))))


# In place: which calls write the image's memory themselves (their kernels take in == out).
_IN_PLACE_CASES = [
    # (call, shape, depth, kwargs, the compiled call that writes in place, or None: a copy)
    ("equalize", (40, 30), 8, {}, "equalize_device_list"),     # one image: the list kernel
    ("equalize", (40, 30, 1), 8, {}, "equalize_device_list"),
    ("equalize", (4, 20, 10), 8, {}, "equalize_device"),       # a batch: the batched kernels
    ("equalize", (40, 30), 16, {}, "equalize16_device"),
    ("equalize", (3, 20, 10), 16, {}, "equalize16_device"),
    ("clahe", (40, 30), 8, {}, "clahe_device"),
    ("clahe", (3, 20, 10, 1), 8, {}, "clahe_device"),
    ("clahe", (40, 30), 16, {}, "clahe_device"),
    ("match", (40, 30), 8, {}, None),                          # the stages' apply kernel
    ("match", (3, 20, 10), 8, {}, None),
    ("equalize", (40, 30), 8, {"roi": (1, 2, 5, 4)}, None),
    ("equalize", (20, 10, 3), 8, {}, None),                    # colour: the apply kernel
    ("equalize", (20, 10, 4), 8, {"channel_order": "bgr"}, None),
    ("equalize", (2, 20, 10, 3), 8, {"mode": "rgb"}, None),
]


@pytest.mark.parametrize("call,shape,depth,kwargs,direct", _IN_PLACE_CASES)
def test_in_place(fake, monkeypatch, call, shape, depth, kwargs, direct):
    """out=image: the calls whose kernels take in == out get the image's address as their
    output and nothing is allocated; the others write a new array that is copied into the
    image afterwards (on the stand-in, whose calls write nothing: the new array's fill)."""
    torch, calls = fake
    first = _u8(shape) if depth == 8 else _u16(shape)
    x = cuda(first.copy())  # first stays as it was
    ref = cuda(_u8((25, 15), seed=1))
    fns = {"equalize": lambda: histeq.equalize(x, out=x, **kwargs),
           "clahe": lambda: histeq.clahe(x, out=x, **kwargs),
           "match": lambda: histeq.match_histograms(x, ref, out=x, **kwargs)}
    restore = lambda: x.a.__setitem__(Ellipsis, first)  # noqa: E731
    got = _both(fns[call], torch, calls, monkeypatch, fast_expected=direct is not None,
                before=restore)
    assert got[0] == "ok" and got[2][4] == x.data_ptr()
    p = x.data_ptr()
    writes = [c for c in got[1] if c[0] != "histogram_device"]
    if direct is not None:
        (name, args, _memory), = writes
        assert name == direct
        if name == "equalize_device_list":
            assert args[2:5] == ([p], [p], [first.size])
        else:
            assert args[2] == args[3] == p
        assert got[2][5] == first.tobytes()  # the stand-in's calls write nothing
    elif kwargs.get("channel_order") == "bgr":  # the calls read a swapped copy, write x
        (_name, args, _memory), = writes
        assert args[2] != p and args[3] == p
    else:
        (_name, args, _memory), = writes
        assert args[2] == p and args[3][0] == "alloc"  # a new array
        assert got[2][5] == bytes([0x5A]) * first.nbytes  # the new array's bytes, copied
    restore()
    assert fns[call]() is x


def test_in_place_with_a_named_kernel_writes_a_copy(fake, monkeypatch):
    torch, calls = fake
    names = _a.kernel_names()
    if not names:
        pytest.skip("a build without CUDA has no histogram kernels to name")
    first = _u8((40, 30))
    x = cuda(first.copy())  # first stays as it was
    got = _both(lambda: histeq.equalize(x, kernel=names[0], out=x), torch, calls, monkeypatch,
                fast_expected=False, before=lambda: x.a.__setitem__(Ellipsis, first))
    (name, args, _memory), = got[1]
    assert name == "equalize_device" and args[3] == ("alloc", 0, 0)


@pytest.mark.parametrize("call", ["equalize", "clahe", "match"])
def test_an_out_overlapping_the_image_gets_a_copy(fake, monkeypatch, call):
    """out a view that overlaps the image without being it (rows 1..4 of a batch whose rows
    0..3 are the image): the calls write a new array, copied into out afterwards."""
    torch, calls = fake
    first = _u8((5, 20, 10))
    base = cuda(first.copy())
    x, out = base[0:4], base[1:5]
    assert x.is_contiguous() and out.is_contiguous()
    fn = _calls_of(call, x, cuda(_u8((25, 15), seed=1)))
    got = _both(lambda: fn(out), torch, calls, monkeypatch, fast_expected=False,
                before=lambda: base.a.__setitem__(Ellipsis, first))
    assert got[0] == "ok" and got[2][4] == out.data_ptr()
    (_name, args, memory), = [c for c in got[1] if c[0] != "histogram_device"]
    assert args[2] == x.data_ptr() and args[3] != out.data_ptr()
    assert memory[0] == first.tobytes()  # the batch as it was: nothing written before
    assert got[2][5] == bytes([0x5A]) * out.a.nbytes


def test_the_same_memory_as_another_tensor_is_in_place(fake, monkeypatch):
    """An out that is another tensor over the image's memory (a view of all of it) is the
    image: written in place."""
    torch, calls = fake
    first = _u8((4, 20, 10))
    x = cuda(first.copy())  # first stays as it was
    view = x.reshape(4, 200).reshape(4, 20, 10)
    assert view is not x and view.data_ptr() == x.data_ptr()
    got = _both(lambda: histeq.clahe(x, out=view), torch, calls, monkeypatch, fast_expected=True,
                before=lambda: x.a.__setitem__(Ellipsis, first))
    (_name, args, _memory), = got[1]
    assert args[2] == args[3] == x.data_ptr()


@pytest.mark.parametrize("call", ["equalize", "histogram"])
def test_an_out_overlapping_the_mask_gets_a_copy(fake, monkeypatch, call):
    torch, calls = fake
    x = cuda(_u8((40, 30)))
    m = _mask("uint8", 40, 30)
    mask_bytes = m.a.tobytes()
    if call == "equalize":
        out = m
    else:  # int64 counts over the mask's first bytes
        out = FakeTensor(np.zeros(256, np.int64), m.device, m.data_ptr())
    fn = getattr(histeq, call)
    got = _both(lambda: fn(x, mask=m, out=out), torch, calls, monkeypatch, fast_expected=False,
                before=lambda: m.a.__setitem__(Ellipsis, np.frombuffer(mask_bytes, np.uint8)
                                               .reshape(40, 30)))
    assert got[0] == "ok"
    assert all(args[-1] != out.data_ptr() and args[3] != out.data_ptr() for _n, args, _m in got[1])


def test_a_mask_written_through_out_is_checked_again(fake, monkeypatch):
    """A call that writes a remembered mask's memory through out= (which torch's version counter
    does not see) makes its count check run again."""
    torch, calls = fake
    x, y = cuda(_u8((40, 30))), cuda(_u8((40, 30), seed=1))
    m = _mask("uint8", 40, 30)
    first = m.a.copy()
    other = cuda(np.zeros((40, 30), np.uint8))
    steps = [lambda: m.__setitem__(Ellipsis, first),
             lambda: histeq.equalize(x, mask=m),
             lambda: histeq.equalize(x, mask=m),          # remembered: no wait
             lambda: histeq.clahe(y, out=other),          # another tensor's memory
             lambda: histeq.equalize(x, mask=m),          # still remembered
             lambda: histeq.clahe(y, out=m),              # the mask's memory, written in place
             lambda: histeq.equalize(x, mask=m),          # checked again
             lambda: histeq.histogram(x, mask=m, out=cuda(np.zeros(256, np.int64))),
             lambda: histeq.equalize(y[20:], out=m[20:]),  # a view of its second half
             lambda: histeq.histogram(x, mask=m)]
    got = _sequence_both(steps, torch, calls, monkeypatch)
    assert _kinds(got) == ["ok"] * len(steps)
    assert _waits(got) == [0, 1, 0, 0, 0, 0, 1, 0, 0, 1]


@pytest.mark.parametrize("call,shape,depth", [
    ("clahe", (20, 10, 3), 8), ("clahe", (2, 20, 10, 3), 8), ("equalize", (20, 10, 3), 16),
    ("histogram", (20, 10, 3), 16), ("match", (30, 20, 3), 16), ("clahe_masked", (30, 20, 3), 8)])
def test_out_of_the_calls_through_the_host(fake, monkeypatch, call, shape, depth):
    """The CUDA arrays the host computes for (colour CLAHE, masked too, 16-bit colour, 16-bit
    matching): the host's result is copied into out (an upload), out returned; the same bytes
    as the out=None call's result; a wrong out refused before the upload."""
    torch, calls = fake
    x = cuda(_u8(shape) if depth == 8 else _u16(shape))
    m = _mask("bool", 30, 20)
    ref = cuda(_u8((25, 15), seed=1))
    fn = {"clahe": lambda out: histeq.clahe(x, 2.0, (2, 3), out=out),
          "equalize": lambda out: histeq.equalize(x, out=out),
          "histogram": lambda out: histeq.histogram(x, out=out),
          "match": lambda out: histeq.match_histograms(x, ref, out=out),
          "clahe_masked": lambda out: histeq.clahe(x, 2.0, (2, 3), mask=m, out=out)}[call]
    want = fn(None)
    out = _fresh_like(want)
    version = out._version
    assert fn(out) is out and out.a.tobytes() == want.a.tobytes() and out._version > version
    bad = cuda(np.zeros(want.shape + (1,), want.a.dtype))
    with pytest.raises(ValueError, match=r"^out: shape "):
        fn(bad)
    assert not bad.a.any()


def _mask_given(m, address, memory, in_place):
    """The mask argument of a compiled call: 0 without a mask; the mask's own address when the
    kernels read it in place; else memory at the call's last address holding mask != 0."""
    if m is None:
        assert address == 0
    elif in_place:
        assert address == m.data_ptr()
    else:
        counted = (m if isinstance(m, np.ndarray) else m.a) != 0
        assert memory[-1] == counted.astype(np.uint8).tobytes()


def _refuses_an_empty_mask(call, kind, torch, calls, monkeypatch):
    """call(mask) with a 40 x 30 mask counting no pixel (a device mask, or a host one for kind
    "host"): the ValueError, on both paths, before any compiled call."""
    empty = cuda(np.zeros((40, 30), np.uint8)) if kind != "host" else np.zeros((40, 30), bool)
    got = _both(lambda: call(empty), torch, calls, monkeypatch, fast_expected=False)
    assert got[:3] == ("error", ValueError, _EMPTY)
    assert not calls


@pytest.mark.parametrize("depth", [8, 16])
@pytest.mark.parametrize("kind", ["uint8", "bool", "int32", "host", "roi only"])
def test_masked_clahe_of_gray_tensors_runs_on_the_device(fake, monkeypatch, depth, kind):
    """Masked CLAHE of a gray CUDA tensor (one image and a batch, 8 and 16 bits): one
    clahe_device call per image set with the mask on the device (a bool or 8-bit torch mask
    read in place, other dtypes as mask != 0, a host mask copied up) and the rectangle; nothing
    through the host; the shortcut (torch_region) for a torch mask or a rectangle alone, with
    the general path's calls; in place with out=x; an out over the mask's memory gets a new
    array; a mask counting no pixel is refused before any call."""
    torch, calls = fake
    make = _u8 if depth == 8 else _u16
    roi = (3, 2, 20, 30)
    if kind == "host":
        m = np.random.default_rng(5).random((40, 30)) < 0.5
    elif kind == "roi only":
        m = None
    else:
        m = _mask(kind, 40, 30)
    for shape in ((40, 30), (3, 40, 30)):
        x = cuda(make(shape))
        got = _both(lambda: histeq.clahe(x, 2.0, (4, 3), mask=m, roi=roi), torch, calls,
                    monkeypatch, fast_expected=kind != "host", region=kind != "host")
        assert got[0] == "ok"
        (name, args, memory), = got[1]
        assert name == "clahe_device" and args[2] == x.data_ptr()
        assert args[4:11] == (x.a.size // 1200, 40, 30, depth == 16, 2.0, 4, 3)
        assert args[12] == roi
        _mask_given(m, args[11], memory, in_place=kind in ("bool", "uint8"))
    first = make((40, 30))
    x = cuda(first.copy())
    got = _both(lambda: histeq.clahe(x, 2.0, (4, 3), mask=m, roi=roi, out=x), torch, calls,
                monkeypatch, fast_expected=False, before=lambda: x.a.__setitem__(Ellipsis, first))
    (_name, args, _memory), = got[1]
    assert args[2] == args[3] == x.data_ptr()
    if kind in ("uint8", "bool") and depth == 8:
        x = cuda(make((40, 30)))
        mask_bytes = m.a.tobytes()
        out = FakeTensor(m.a.view(np.uint8), m.device, m.data_ptr()) if kind == "bool" else m
        got = _both(lambda: histeq.clahe(x, 2.0, (4, 3), mask=m, out=out), torch, calls,
                    monkeypatch, fast_expected=False,
                    before=lambda: m.a.__setitem__(Ellipsis, np.frombuffer(
                        mask_bytes, m.a.dtype).reshape(40, 30)))
        (_name, args, _memory), = got[1]
        assert args[3] != out.data_ptr() and args[11] == m.data_ptr()
    if m is not None:
        _refuses_an_empty_mask(lambda empty: histeq.clahe(cuda(make((40, 30))), mask=empty), kind,
                               torch, calls, monkeypatch)


@pytest.mark.parametrize("kind", ["uint8", "int32", "host", "roi only"])
def test_masked_16bit_equalize_of_gray_tensors_runs_on_the_device(fake, monkeypatch, kind):
    """equalize(mask=/roi=) of a gray 16-bit CUDA tensor (one image and a batch): one
    stages16_device call with the mask on the device (a uint8 torch mask read in place, other
    dtypes as mask != 0, a host mask copied up), the rectangle and no reference; nothing through
    the host; in place with out=x; an out over the mask's memory gets a new array; a mask
    counting no pixel refused before any call."""
    torch, calls = fake
    roi = (3, 2, 20, 30)
    m = {"host": np.random.default_rng(5).random((40, 30)) < 0.5, "roi only": None}.get(kind)
    if kind in ("uint8", "int32"):
        m = _mask(kind, 40, 30)
    for shape in ((40, 30), (3, 40, 30), (40, 30, 1)):
        x = cuda(_u16(shape))
        got = _both(lambda: histeq.equalize(x, mask=m, roi=roi), torch, calls, monkeypatch,
                    fast_expected=False)
        assert got[0] == "ok"
        (name, args, memory), = got[1]
        assert name == "stages16_device" and args[2] == x.data_ptr()
        assert args[4:7] == (x.a.size // 1200, 40, 30) and args[8] == roi and args[9] == 0
        _mask_given(m, args[7], memory, in_place=kind == "uint8")
    first = _u16((40, 30))
    x = cuda(first.copy())
    got = _both(lambda: histeq.equalize(x, mask=m, roi=roi, out=x), torch, calls, monkeypatch,
                fast_expected=False, before=lambda: x.a.__setitem__(Ellipsis, first))
    (_name, args, _memory), = got[1]
    assert args[2] == args[3] == x.data_ptr()
    if kind == "uint8":  # out (2400 bytes) over memory whose first 1200 bytes are the mask
        backing = np.zeros(2400, np.uint8)
        backing[:1200] = m.a.ravel()
        big = cuda(backing.copy())
        mk = big[:1200].reshape(40, 30)
        out = FakeTensor(big.a.view(np.uint16).reshape(40, 30), big.device, big.data_ptr())
        x = cuda(_u16((40, 30)))
        got = _both(lambda: histeq.equalize(x, mask=mk, out=out), torch, calls, monkeypatch,
                    fast_expected=False, before=lambda: big.a.__setitem__(Ellipsis, backing))
        assert got[0] == "ok"
        (_name, args, _memory), = got[1]
        assert args[3] != out.data_ptr() and args[7] == mk.data_ptr()
    if m is not None:
        _refuses_an_empty_mask(lambda empty: histeq.equalize(cuda(_u16((40, 30))), mask=empty),
                               kind, torch, calls, monkeypatch)


@pytest.mark.parametrize("ref_kind", ["cuda16", "cuda8", "host16"])
def test_16bit_gray_matching_of_tensors_runs_on_the_device(fake, monkeypatch, ref_kind):
    """match_histograms of a gray 16-bit CUDA tensor: one stages16_device call with the
    reference's 65536 counts on the device (counted there by histogram16_device for a 16-bit
    reference tensor on the same device; the host's counts copied up otherwise), no mask; in
    place with out=x."""
    torch, calls = fake
    ref_host = _u16((25, 15), seed=1)
    ref = {"cuda16": lambda: cuda(ref_host), "cuda8": lambda: cuda(_u8((25, 15), seed=1)),
           "host16": lambda: ref_host}[ref_kind]()
    for shape in ((40, 30), (3, 40, 30)):
        x = cuda(_u16(shape))
        got = _both(lambda: histeq.match_histograms(x, ref), torch, calls, monkeypatch,
                    fast_expected=False)
        assert got[0] == "ok"
        names = [c[0] for c in got[1]]
        assert names == (["histogram16_device", "stages16_device"] if ref_kind == "cuda16"
                         else ["stages16_device"])
        _name, args, memory = got[1][-1]
        assert args[2] == x.data_ptr() and args[7] == 0 and args[8] is None and args[9] != 0
        if ref_kind == "host16":  # the reference's counts as uploaded
            want = np.bincount(ref_host.ravel(), minlength=65536).astype(np.int64)
            assert memory[-1] == want.tobytes()
    x = cuda(_u16((40, 30)))
    first = x.a.copy()
    got = _both(lambda: histeq.match_histograms(x, ref, out=x), torch, calls, monkeypatch,
                fast_expected=False, before=lambda: x.a.__setitem__(Ellipsis, first))
    _name, args, _memory = got[1][-1]
    assert args[2] == args[3] == x.data_ptr()


def test_cpu_tensors_take_a_cpu_tensor(fake):
    """A CPU tensor's result is a CPU tensor: out is one (written through its NumPy view)."""
    torch, _calls = fake
    a = _u8((30, 20, 3))
    x = torch.from_numpy(a)
    out = torch.from_numpy(np.zeros((30, 20), np.uint8))
    assert histeq.equalize(x, mode="gray", out=out) is out
    assert (out.a == histeq.equalize(a, mode="gray")).all()
    want = histeq.equalize(a)
    assert histeq.equalize(x, out=x) is x and (a == want).all()  # x's memory is a
    with pytest.raises(ValueError, match=r"^out: a tensor on cuda:0; expected one on cpu"):
        histeq.equalize(torch.from_numpy(a), out=cuda(a))
    with pytest.raises(TypeError, match=r"^out: expected a torch tensor"):
        histeq.equalize(torch.from_numpy(a), out=a.copy())


@pytest.mark.parametrize("device", [0, 1])
@pytest.mark.parametrize("call", ["equalize", "clahe", "histogram"])
def test_cupy_out(fake_cupy, call, device):
    """A CuPy array's out: a CuPy array on its device; the compiled call gets its address."""
    calls = fake_cupy
    x = FakeCupyArray(_u8((30, 20)), device)
    shape, dtype = ((256,), np.int64) if call == "histogram" else ((30, 20), np.uint8)
    out = FakeCupyArray(np.zeros(shape, dtype), device)
    assert getattr(histeq, call)(x, out=out) is out and _CupyState.current == 0
    (_name, args), = calls
    assert out.data.ptr in args and x.data.ptr in args
    with pytest.raises(ValueError, match=f"^out: an array on device {1 - device}; expected one "
                                         f"on device {device}, the image's device$"):
        getattr(histeq, call)(x, out=FakeCupyArray(np.zeros(shape, dtype), 1 - device))
    with pytest.raises(TypeError, match=r"^out: expected a CuPy array"):
        getattr(histeq, call)(x, out=np.zeros(shape, dtype))
    with pytest.raises(TypeError, match=r"^out: dtype uint16; expected "):
        getattr(histeq, call)(x, out=FakeCupyArray(np.zeros(shape, np.uint16), device))


@pytest.mark.parametrize("device", [0, 1])
def test_cupy_in_place_colour_is_copied_on_the_array_s_stream(fake_cupy, device):
    calls = fake_cupy
    x = FakeCupyArray(_u8((30, 20, 3)), device)
    assert histeq.equalize(x, out=x) is x
    (_name, args), = calls
    assert args[2] == x.data.ptr and args[3] != x.data.ptr
    assert x.writes == [("copyto", device, _CupyState.streams[device])]
    assert (x.a == 0x5A).all() and _CupyState.current == 0


def test_cuda_array_interface_out_is_a_cupy_array_copied_on_the_interface_s_stream(fake_cupy,
                                                                                 monkeypatch):
    calls = fake_cupy

    class Foreign:
        __cuda_array_interface__ = {"shape": (30, 20, 3), "typestr": "|u1",
                                    "data": (1 << 42, False), "version": 3, "stream": 0x9000}
    monkeypatch.setattr(_a._histeq, "pointer_device", lambda ptr: 1)
    apart = FakeCupyArray(np.zeros((30, 20, 3), np.uint8), 1)
    assert histeq.equalize(Foreign(), out=apart) is apart
    assert calls[-1][1][:4] == (1, 0x9000, 1 << 42, apart.data.ptr) and not apart.writes
    alias = FakeCupyArray(np.zeros((30, 20, 3), np.uint8), 1, ptr=1 << 42)  # the same memory
    assert histeq.equalize(Foreign(), out=alias) is alias
    assert calls[-1][1][3] != 1 << 42 and alias.writes == [("copyto", 1, 0x9000)]
    with pytest.raises(TypeError, match=r"^out: expected a CuPy array"):
        histeq.equalize(Foreign(), out=Foreign())


# ----------------------------------------------------------------- the shortcuts of CuPy arrays

def _cupy_outcome(fn, calls):
    """fn's outcome on the stand-in cupy, as _outcome gives a torch call's: ("ok", the compiled
    calls with the addresses of this call's allocations as (allocation, offset), the result,
    the device waits, the current device after it, the number of allocations) or ("error",
    type, message, waits)."""
    _CupyState.allocs.clear()
    calls.clear()
    _CupyState.syncs = 0
    try:
        out = fn()
    except Exception as e:  # noqa: BLE001 — the error is the outcome compared
        return ("error", type(e), str(e), _CupyState.syncs)
    allocs = [(a.data.ptr, a.a.nbytes) for a in _CupyState.allocs]
    recorded = [(name, tuple(_norm(v, allocs) for v in args)) for name, args in calls]
    assert isinstance(out, FakeCupyArray)
    result = (out.shape, out.dtype.str, out._device, _norm(out.data.ptr, allocs), out.a.tobytes())
    return ("ok", recorded, result, _CupyState.syncs, _CupyState.current, len(allocs))


def _cupy_both(fn, calls, monkeypatch, fast_expected: Optional[bool] = True, region=False):
    """fn's outcome with the shortcuts, then with cupy_gray declining (each from no remembered
    mask check): equal; the shortcut (and with region, cupy_region's) taken when fast_expected
    is True, not taken when False (None: either)."""
    assert _a.is_cupy(FakeCupyArray(np.zeros((1, 1), np.uint8), 0))  # the class seen before
    taken, region_taken, real, real_region = _spy_shortcuts(monkeypatch, "cupy")
    _r._mask_checked.clear()
    fast = _cupy_outcome(fn, calls)
    monkeypatch.setattr(_a, "cupy_gray", lambda x, batch: None)
    _r._mask_checked.clear()
    general = _cupy_outcome(fn, calls)
    monkeypatch.setattr(_a, "cupy_gray", real)
    monkeypatch.setattr(_r, "cupy_region", real_region)
    assert fast == general
    if fast_expected is True:
        assert taken and all(taken), "the shortcut was not taken"
        if region:
            assert region_taken and all(region_taken), "the region's shortcut was not taken"
    elif fast_expected is False:
        assert not any(taken), "the shortcut was taken"
    return fast


def _cupy_call(call, x, ref=None, **kw):
    if call == "match":
        return lambda: histeq.match_histograms(x, ref, **kw)
    return lambda: getattr(histeq, call)(x, **kw)


@pytest.mark.parametrize("shape,batch", _GRAY_SHAPES)
@pytest.mark.parametrize("depth", [8, 16])
@pytest.mark.parametrize("call", ["equalize", "clahe", "histogram", "match"])
def test_gray_cupy_arrays_take_the_shortcut_with_the_general_path_s_calls(
        fake_cupy, monkeypatch, call, depth, shape, batch):
    """Gray CuPy arrays on the current device: the compiled calls of the general path, on the
    device's current stream, the same result (a CuPy array on that device)."""
    calls = fake_cupy
    x = FakeCupyArray(_u8(shape) if depth == 8 else _u16(shape), 0)
    ref = FakeCupyArray(_u8((25, 15), seed=1) if depth == 8 else _u16((25, 15), seed=1), 0)
    # 16-bit matching: the general path (the reference's histogram takes the shortcut)
    got = _cupy_both(_cupy_call(call, x, ref, batch=batch), calls, monkeypatch,
                     fast_expected=None if call == "match" and depth == 16 else True)
    assert got[0] == "ok"
    assert all(args[1] == _CupyState.streams[0] for _name, args in got[1])


@pytest.mark.parametrize("call", ["equalize", "clahe", "histogram", "match"])
def test_cupy_arrays_the_shortcut_declines(fake_cupy, monkeypatch, call):
    """Colour images, another device than the current one, a non-contiguous array, a reference
    of another device: the general path, with the same outcome."""
    calls = fake_cupy
    ref = FakeCupyArray(_u8((25, 15), seed=1), 0)
    for x, r in [(FakeCupyArray(_u8((20, 10, 3)), 0), ref),
                 (FakeCupyArray(_u8((20, 10)), 1), FakeCupyArray(_u8((25, 15), seed=1), 1)),
                 (FakeCupyArray(_u8((20, 10)), 0)[:, ::2], ref)]:
        # (matching: the reference's histogram may take the shortcut)
        _cupy_both(_cupy_call(call, x, r), calls, monkeypatch,
                   fast_expected=None if call == "match" else False)
    if call == "match":  # the reference on another device than the image
        x = FakeCupyArray(_u8((20, 10)), 0)
        _cupy_both(_cupy_call(call, x, FakeCupyArray(_u8((25, 15), seed=1), 1)), calls,
                   monkeypatch, fast_expected=None)


@pytest.mark.parametrize("kind", ["bool", "uint8", "int8", "int32", "uint16"])
@pytest.mark.parametrize("roi", [None, (1, 2, 5, 4)])
@pytest.mark.parametrize("shape", [(40, 30), (3, 40, 30)])
@pytest.mark.parametrize("call", ["equalize", "histogram", "clahe"])
def test_masked_cupy_arrays(fake_cupy, monkeypatch, call, shape, roi, kind):
    """A CuPy mask on the image's device, with or without a rectangle, and a rectangle alone:
    the general path's calls and result; a mask that counts no pixel: its error, after as many
    waits for the device."""
    calls = fake_cupy
    x = FakeCupyArray(_u8(shape), 0)
    m = np.zeros((40, 30), kind)
    m[3:30, 2:20] = 1
    mask = FakeCupyArray(m, 0)
    kw = {"mask": mask} if roi is None else {"mask": mask, "roi": roi}
    got = _cupy_both(_cupy_call(call, x, **kw), calls, monkeypatch, region=True)
    assert got[0] == "ok" and got[3] == 1  # one wait: the mask's count check
    if roi is not None:
        assert _cupy_both(_cupy_call(call, x, roi=roi), calls, monkeypatch, region=True)[0] == "ok"
    empty = FakeCupyArray(np.zeros((40, 30), kind), 0)
    got = _cupy_both(_cupy_call(call, x, mask=empty, roi=roi), calls, monkeypatch)
    assert got[0] == "error" and got[1] is ValueError and "counts no pixel" in got[2]


def test_a_cupy_mask_s_check_is_remembered_by_both_paths(fake_cupy, monkeypatch):
    """The shortcut and the general path remember one count check per mask (one wait), and a
    mask of another address (a new array) is checked again."""
    calls = fake_cupy
    x = FakeCupyArray(_u8((40, 30)), 0)
    mask = FakeCupyArray(np.ones((40, 30), bool), 0)
    _CupyState.syncs = 0
    histeq.equalize(x, mask=mask)
    monkeypatch.setattr(_a, "cupy_gray", lambda x, batch: None)
    histeq.equalize(x, mask=mask)
    assert _CupyState.syncs == 1
    histeq.equalize(x, mask=FakeCupyArray(np.ones((40, 30), bool), 0))
    assert _CupyState.syncs == 2 and len(calls) == 3


@pytest.mark.parametrize("call", ["equalize", "clahe", "histogram", "match"])
def test_cupy_out_takes_the_shortcut(fake_cupy, monkeypatch, call):
    """out= a CuPy array of the result: the compiled calls write it (no result allocated), as
    the general path's; out on another device or of another shape: the general path's
    outcome."""
    calls = fake_cupy
    x = FakeCupyArray(_u8((3, 20, 10)), 0)
    ref = FakeCupyArray(_u8((25, 15), seed=1), 0)
    shape, dtype = ((3, 256), np.int64) if call == "histogram" else ((3, 20, 10), np.uint8)
    out = FakeCupyArray(np.zeros(shape, dtype), 0)
    got = _cupy_both(_cupy_call(call, x, ref, out=out), calls, monkeypatch)
    # out written, nothing allocated (matching: the reference counted by the call itself)
    assert got[0] == "ok" and got[2][3] == out.data.ptr and got[5] == 0
    for wrong in (FakeCupyArray(np.zeros(shape, dtype), 1),
                  FakeCupyArray(np.zeros(shape[1:], dtype), 0)):
        _cupy_both(_cupy_call(call, x, ref, out=wrong), calls, monkeypatch,
                   fast_expected=None)


@pytest.mark.parametrize("ref_stream", [0x9000, 0xA000])
def test_a_cuda_array_interface_reference_on_another_stream_is_counted_on_it(fake_cupy,
                                                                             monkeypatch,
                                                                             ref_stream):
    """match_histograms of __cuda_array_interface__ arrays: a gray reference on the image's
    stream is counted by the matching call itself (ref_image); one on another stream is counted
    on its own stream first (the matching call ordered after it by the compiled core), as
    before the reference was counted in the call."""
    calls = fake_cupy
    assert _a.is_cupy(FakeCupyArray(np.zeros((1, 1), np.uint8), 0))

    def cai(shape, ptr, stream):
        return type("Foreign", (), {"__cuda_array_interface__": {
            "shape": shape, "typestr": "|u1", "data": (ptr, False), "version": 3,
            "stream": stream}})()
    monkeypatch.setattr(_a._histeq, "pointer_device", lambda ptr: 0)
    image, ref = cai((30, 20), 1 << 42, 0x9000), cai((25, 15), 1 << 43, ref_stream)
    histeq.match_histograms(image, ref)
    if ref_stream == 0x9000:
        assert [(n, a[1], a[-2:]) for n, a in calls] == [("stages_device", 0x9000,
                                                          (1 << 43, 25 * 15))]
    else:
        assert [(n, a[1], a[2]) for n, a in calls] == [("histogram_device", 0xA000, 1 << 43),
                                                       ("stages_device", 0x9000, 1 << 42)]
        assert len(calls[1][1]) == 15  # the counts' address and planes: no ref_image
