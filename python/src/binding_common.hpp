// binding_common.hpp — what the compiled core's translation units (_histeq.cpp, clahe16.cpp)
// share: host array types, NumPy results that own their vectors, option parsing, the current
// device for a call, and the caller's stream handle.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/pipeline.hpp"
#include "support/cuda_check.hpp"

namespace histeq::python {

namespace nb = nanobind;

using HostU8 = nb::ndarray<const std::uint8_t, nb::c_contig, nb::device::cpu>;
using HostU16 = nb::ndarray<const std::uint16_t, nb::c_contig, nb::device::cpu>;

inline std::optional<Mode> parse_mode_opt(const std::optional<std::string>& m) {
  if (!m) return std::nullopt;
  return parse_mode(*m);
}

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
