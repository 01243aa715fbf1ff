"""The shortcuts of gray CUDA torch tensors (histeq._arrays.torch_gray and the calls that take it in
equalize, clahe, histogram and match_histograms) against the general path they skip, on the CPU:
a stand-in torch module whose "CUDA" tensors are host memory, and the extension's device calls
recorded instead of run. For each case the shortcut must queue the same compiled calls with the
same arguments and return an array of the same kind, shape, dtype, device and contents as the
general path (histeq._arrays.torch_gray replaced by one that declines), or raise the same error
with the same message."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import histeq
from histeq import _arrays as _a

_DEVICE_CALLS = ("equalize_device", "equalize16_device", "clahe_device", "histogram_device",
                 "histogram16_device", "stages_device", "equalize_device_list",
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
        self._by_np = {d.np: d for d in (self.uint8, self.uint16, self.int64, self.float32,
                                         self.int16)}
        self._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda dev: 0x5000 + dev)
        self.allocs = []
        self.next_base = 1 << 40

    def tensor_of(self, a, device):
        base = self.next_base
        self.next_base += 1 << 32
        self.allocs.append((base, a.nbytes))
        return FakeTensor(a, device, base)

    def empty(self, shape, dtype, device):
        return self.tensor_of(np.full(tuple(shape), 0x5A, dtype.np), device)

    def empty_like(self, t):
        return self.empty(t.shape, t.dtype, t.device)

    def from_numpy(self, a):
        return FakeTensor(a, _Device("cpu"), 0)

    def tensor(self, values, device):
        return self.tensor_of(np.asarray(values, np.int64), device)


class FakeTensor:
    def __init__(self, a, device, base, offset=0):
        self.a, self.device, self._base, self._offset = a, device, base, offset

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
        return FakeTensor(self.a.copy(), _Device("cpu"), 0)

    def numpy(self):
        assert not self.is_cuda
        return self.a

    def to(self, device):
        return _torch().tensor_of(np.ascontiguousarray(self.a), device)

    def reshape(self, *shape):
        return FakeTensor(self.a.reshape(*shape), self.device, self._base, self._offset)

    def __getitem__(self, i):
        return FakeTensor(self.a[i], self.device, self._base,
                          self._offset + i * self.a[0].nbytes)

    def index_select(self, dim, index):
        return _torch().tensor_of(np.take(self.a, index.a, axis=dim), self.device)

    def contiguous(self):
        return self if self.a.flags.c_contiguous else self.to(self.device)

    def zero_(self):
        self.a[...] = 0
        return self


FakeTensor.__module__ = "torch"


def _torch() -> _Torch:
    return sys.modules["torch"]  # type: ignore[return-value]


@pytest.fixture
def fake(monkeypatch):
    """The stand-in torch installed, histeq's torch state reset to it, the GPU "usable", and the
    device calls recorded into the returned list."""
    torch = _Torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    for name in ("_torch", "_torch_u8", "_torch_u16", "_torch_i64", "_torch_raw_stream"):
        monkeypatch.setattr(_a, name, None)
    monkeypatch.setattr(_a, "_torch_types", set())
    monkeypatch.setattr(_a, "_cuda_state", (True, ""))
    calls: list = []
    for name in _DEVICE_CALLS:
        monkeypatch.setattr(_a._histeq, name,
                            lambda *args, _n=name: calls.append((_n, args)) or "recorded")
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
    torch.allocs.clear()
    calls.clear()
    try:
        out = fn()
    except Exception as e:  # noqa: BLE001 — the error is the outcome compared
        return ("error", type(e), str(e))
    allocs = list(torch.allocs)
    recorded = [(n, tuple(_norm(v, allocs) for v in args)) for n, args in calls]
    if isinstance(out, FakeTensor):
        kind = ("tensor", out.shape, repr(out.dtype), repr(out.device),
                _norm(out.data_ptr(), allocs), out.a.tobytes())
    else:
        kind = ("other", type(out).__name__, np.asarray(out).tobytes())
    return ("ok", recorded, kind)


def _both(fn, torch, calls, monkeypatch, fast_expected):
    """fn's outcome with the shortcuts, then with torch_gray declining: equal; the shortcut taken
    when fast_expected says so."""
    taken = []
    real = _a.torch_gray

    def spy(x, batch):
        g = real(x, batch)
        taken.append(g is not None)
        return g
    monkeypatch.setattr(_a, "torch_gray", spy)
    fast = _outcome(fn, torch, calls)
    monkeypatch.setattr(_a, "torch_gray", lambda x, batch: None)
    general = _outcome(fn, torch, calls)
    monkeypatch.setattr(_a, "torch_gray", real)
    assert fast == general
    if fast_expected:
        assert taken and all(taken), "the shortcut was not taken"
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
    assert got[0] == "ok" and got[1][0][0] == "histogram_device"


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
    assert [n for n, _args in got[1]] == ["histogram_device", "stages_device"]


def test_the_batch_path_knob_reaches_the_compiled_call(fake, monkeypatch):
    torch, calls = fake
    x = cuda(_u8((4, 20, 10)))
    prev = histeq._set_batch_path("queued")
    try:
        got = _both(lambda: histeq.equalize(x), torch, calls, monkeypatch, fast_expected=True)
    finally:
        histeq._set_batch_path(prev)
    assert got[1][0][1][-1] == "queued"


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
    def __init__(self, a, device):
        self.a, self._device = a, device
        self.data = types.SimpleNamespace(ptr=(1 << 41) + (device << 36))
        self.flags = types.SimpleNamespace(c_contiguous=a.flags.c_contiguous)

    dtype = property(lambda self: self.a.dtype)
    shape = property(lambda self: self.a.shape)
    strides = property(lambda self: self.a.strides)
    device = property(lambda self: _CupyDevice(self._device))


FakeCupyArray.__module__ = "cupy"


@pytest.fixture
def fake_cupy(monkeypatch):
    """A stand-in cupy (two devices, a current one, a current stream per device) and the device
    calls recorded into the returned list."""
    cupy = types.ModuleType("cupy")
    cupy.ndarray = FakeCupyArray
    cupy.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: _CupyState.current),
        get_current_stream=lambda: types.SimpleNamespace(
            ptr=_CupyState.streams[_CupyState.current]),
        Device=_CupyDevice)
    cupy.empty = lambda shape, dtype: FakeCupyArray(np.empty(shape, dtype), _CupyState.current)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(_a, "_cupy", None)
    monkeypatch.setattr(_a, "_cupy_types", set())
    monkeypatch.setattr(_a, "_cuda_state", (True, ""))
    monkeypatch.setattr(_CupyState, "current", 0)
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
