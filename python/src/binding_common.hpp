// binding_common.hpp — what the compiled core's translation units (_histeq.cpp, clahe16.cpp)
// share: host array types, NumPy results that own their vectors, option parsing, the current
// device for a call, and the caller's stream handle.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "histeq/clahe_gpu.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/gpu16.hpp"
#include "histeq/match.hpp"
#include "histeq/pipeline.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"

namespace histeq::python {

namespace nb = nanobind;

/// A file path from Python: a str (encoded as os.fsencode encodes it, so a name that is not
/// UTF-8, held as surrogate escapes, keeps its bytes) or bytes. Back to Python it is a str as
/// os.fsdecode gives it, the form of the names os.listdir returns.
struct FsPath {
  std::string bytes;
};

/// Text for Python that may hold bytes that are not UTF-8 (a message naming such a file):
/// those bytes written as \xNN, so that the str prints anywhere.
inline nb::str text(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "backslashreplace");
  if (o == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(o);
}

/// A path for Python, as os.fsdecode gives it.
inline nb::str fs_text(const std::string& path) {
  PyObject* o = PyUnicode_DecodeFSDefaultAndSize(path.data(), Py_ssize_t(path.size()));
  if (o == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(o);
}

using HostU8 = nb::ndarray<const std::uint8_t, nb::c_contig, nb::device::cpu>;
using HostU16 = nb::ndarray<const std::uint16_t, nb::c_contig, nb::device::cpu>;
/// A result array the Python side allocated (np.empty), written in place.
using OutU8 = nb::ndarray<std::uint8_t, nb::c_contig, nb::device::cpu>;
using OutU16 = nb::ndarray<std::uint16_t, nb::c_contig, nb::device::cpu>;
/// Histograms from Python: (planes, bins) int64 counts.
using HostHists = nb::ndarray<const std::int64_t, nb::c_contig, nb::device::cpu, nb::ndim<2>>;
/// A rectangle from Python: (x, y, width, height).
using RoiTuple = std::tuple<int, int, int, int>;

/// The pixels a call's histograms count (histeq/match.hpp's Region): `mask` (height x width
/// bytes, nonzero: counted; None: every pixel) and `roi` (None: the whole image). Checked with
/// Region::check (UsageError naming the mask or the rectangle).
Region region_of(const std::optional<HostU8>& mask, const std::optional<RoiTuple>& roi, int width,
                 int height);
/// Histogram matching's reference histograms from a (planes, bins) array (one row per plane
/// the image makes; bins 256 or 65536), or null when absent. UsageError for another bin count
/// or a negative count.
std::shared_ptr<const std::vector<Histogram>> reference_of(const std::optional<HostHists>& ref,
                                                           std::size_t bins);

inline std::optional<Mode> parse_mode_opt(const std::optional<std::string>& m) {
  if (!m) return std::nullopt;
  return parse_mode(*m);
}

/// A library message as Python speaks: the command line's options become keyword arguments
/// ("--backend cpu" → "backend='cpu'", "--decoder gpu" → "decoder='gpu'", "--max-inflight-mb"
/// → "max_inflight_mb").
std::string python_words(const std::string& msg);

/// Throws UsageError unless `a` holds exactly `n` samples.
template <typename Array>
void check_size(const Array& a, std::size_t n, const char* what) {
  if (a.size() != n) {
    throw UsageError(std::string(what) + ": " + std::to_string(a.size()) + " samples; " +
                     std::to_string(n) + " expected from its shape");
  }
}

/// fn(i) for the images i in [0, count) of a host batch, with the GIL released by the caller.
/// On the CPU backend, images of fewer than kSmall pixels (whose CPU work runs on one thread:
/// below the backend's per-thread minimum) are spread over the usable cores, a contiguous range
/// of images per thread; larger ones, and every image on the GPU backend, run one after
/// another (each using the cores, or the device, itself). The first exception is rethrown after
/// every thread joined.
void for_images(std::size_t count, std::size_t pixels, Backend backend,
                const std::function<void(std::size_t)>& fn);

/// Everything one CUDA device needs across the device calls: an Equalizer, a plane buffer for
/// colour images, the CLAHE and 16-bit engines (made on first use), all running on the caller's
/// stream of the call (set_stream: no stream or event of their own in between), and the event
/// that orders a call after the previous call's work on another stream (the buffers are
/// shared). One per device, never destroyed (CUDA may be torn down before the interpreter).
struct DeviceContext {
  gpu::Equalizer eq{gpu::StreamHandle(nullptr)};
  DeviceBuffer<std::uint8_t> planes;
  std::unique_ptr<gpu::Clahe> clahe;
  std::unique_ptr<gpu::Equalizer16> eq16;
  cudaEvent_t done = nullptr;
  cudaStream_t current = nullptr;  ///< the stream of the call under way
  cudaStream_t last = nullptr;     ///< the stream of the previous call
  bool used = false;
  DeviceContext();
  gpu::Clahe& clahe_engine();
  gpu::Equalizer16& eq16_engine();
};

/// The device's context with its engines on the caller's `stream` (0: the legacy default
/// stream), ordered after the previous call's work when that was on another stream
/// (cudaStreamWaitEvent: no host synchronization). The GIL is held (device calls keep it).
DeviceContext& begin(int device, std::uintptr_t stream);
/// After the call's work is queued: the event the next call on another stream waits for.
void end(DeviceContext& c);

/// Sets the current device for the duration of a call and puts the previous one back.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    HISTEQ_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) HISTEQ_CUDA_CHECK(cudaSetDevice(device));
    changed_ = previous_ != device;
  }
  ~DeviceScope() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

/// The caller's stream handle as the runtime takes it: 0 (the legacy default stream, e.g. torch's
/// and CuPy's default streams) becomes cudaStreamLegacy, since a null handle would send the
/// Equalizer back to its own stream, unordered with the caller's work.
inline cudaStream_t caller_stream(std::uintptr_t stream) {
  return stream == 0 ? cudaStreamLegacy : reinterpret_cast<cudaStream_t>(stream);
}

/// An Image (uint8 samples) or Image16 (uint16) holding a copy of the host array's samples
/// (shape checked against its size).
template <typename Img, typename Array>
Img image_of(const Array& a, int height, int width, int channels) {
  Img img;
  img.height = height;
  img.width = width;
  img.channels = channels;
  const std::size_t n = std::size_t(height) * std::size_t(width) * std::size_t(channels);
  if (a.size() != n) throw UsageError("image: size does not match its shape");
  img.pixels.assign(a.data(), a.data() + n);
  return img;
}
inline Image image_from(const HostU8& a, int height, int width, int channels) {
  return image_of<Image>(a, height, width, channels);
}

/// A NumPy array that owns `v` (moved, no copy).
template <typename T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T>&& v, std::vector<std::size_t> shape) {
  auto* owner = new std::vector<T>(std::move(v));
  nb::capsule cap(owner, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owner->data(), shape.size(), shape.data(), cap);
}

}  // namespace histeq::python

namespace nanobind::detail {

/// histeq::python::FsPath from and to Python (str or bytes in; a str out).
template <>
struct type_caster<histeq::python::FsPath> {
  NB_TYPE_CASTER(histeq::python::FsPath, const_name("str | bytes"))

  template <typename Flags>  // uint8_t in nanobind 2, uint32_t in 3
  bool from_python(handle src, Flags, cleanup_list*) noexcept {
    PyObject* b = nullptr;
    if (PyBytes_Check(src.ptr())) {
      b = src.inc_ref().ptr();
    } else if (PyUnicode_Check(src.ptr())) {
      b = PyUnicode_EncodeFSDefault(src.ptr());
      if (b == nullptr) {
        PyErr_Clear();
        return false;
      }
    } else {
      return false;
    }
    value.bytes.assign(PyBytes_AS_STRING(b), std::size_t(PyBytes_GET_SIZE(b)));
    Py_DECREF(b);
    return true;
  }

  static handle from_cpp(const histeq::python::FsPath& p, rv_policy, cleanup_list*) noexcept {
    return PyUnicode_DecodeFSDefaultAndSize(p.bytes.data(), Py_ssize_t(p.bytes.size()));
  }
};

}  // namespace nanobind::detail
