// match.cpp — what histeq.match_histograms and the `mask` / `roi` arguments need of the compiled
// core beyond the host calls (which take them as options: _histeq.cpp, clahe16.cpp): the counted
// region and the reference histograms from Python's arrays, and the two calls on 8-bit CUDA
// arrays.
//
// match_device: the images' histograms on the device (the Equalizer's kernels, on the caller's
// stream), read back (the one host synchronization: the LUTs are made on the host by
// histeq::match_lut, 256 entries per plane), the LUTs copied up and applied by the Equalizer's
// apply kernel. A batch reads its histograms back once.
// equalize_counted_device: masked equalization of a gray plane whose counted pixels the Python
// side gathered on the device (a boolean index of the array's own library): their histogram,
// the LUT of OpenCV's formula on it, applied to every pixel; queued, no synchronization.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "binding_common.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/match.hpp"
#include "histeq/planes.hpp"
#include "support/cuda_check.hpp"

namespace nb = nanobind;
using namespace nb::literals;

histeq::Region histeq::python::region_of(const std::optional<HostU8>& mask,
                                         const std::optional<RoiTuple>& roi, int width,
                                         int height) {
  Region r;
  if (roi) r.roi = Roi{std::get<0>(*roi), std::get<1>(*roi), std::get<2>(*roi), std::get<3>(*roi)};
  if (mask) {
    check_size(*mask, std::size_t(width) * std::size_t(height), "mask");
    // The mask's copy (Region holds an Image) goes into a buffer kept per thread between
    // calls, so that a large mask does not fault in fresh pages on every call.
    static thread_local std::shared_ptr<Image> spare;
    if (!spare || spare.use_count() != 1) spare = std::make_shared<Image>();
    std::shared_ptr<Image> m = spare;
    m->width = width;
    m->height = height;
    m->channels = 1;
    m->pixels.assign(mask->data(), mask->data() + mask->size());
    r.mask = std::move(m);
  }
  if (!r.all()) r.check(width, height, mask ? "mask" : "roi");
  return r;
}

std::shared_ptr<const std::vector<histeq::Histogram>> histeq::python::reference_of(
    const std::optional<HostHists>& ref, std::size_t bins) {
  if (!ref) return nullptr;
  if (ref->shape(1) != bins) {
    throw UsageError("reference: " + std::to_string(ref->shape(1)) + " bins; " +
                     std::to_string(bins) + " expected");
  }
  auto out = std::make_shared<std::vector<Histogram>>(ref->shape(0), Histogram(bins));
  const std::int64_t* p = ref->data();
  for (auto& h : *out) {
    for (std::size_t b = 0; b < bins; ++b, ++p) {
      if (*p < 0) throw UsageError("reference: a negative count");
      h[b] = std::uint64_t(*p);
    }
  }
  return out;
}

namespace {

using histeq::python::DeviceContext;

constexpr int kBins = 256;

/// Queues the 256-bin histograms of `count` images' planes (image i, plane p at hist + (i·planes
/// + p)·256) on the context's stream.
void device_histograms(DeviceContext& c, const std::uint8_t* src, std::size_t count,
                       std::size_t pixels, int channels, histeq::Mode mode, int planes,
                       const std::string& kernel, std::uint64_t* hist) {
  const std::size_t in_step = pixels * std::size_t(channels);
  if (channels > 1 && c.planes.size() < std::size_t(planes) * pixels) {
    c.planes.reset();
    c.planes = histeq::DeviceBuffer<std::uint8_t>(std::size_t(planes) * pixels);
  }
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t* h = hist + i * std::size_t(planes) * kBins;
    if (channels == 1) {
      c.eq.histogram(kernel, src + i * in_step, pixels, histeq::SampleType::u8, kBins, h);
      continue;
    }
    c.eq.extract_planes(src + i * in_step, pixels, channels, mode, c.planes.get());
    for (int p = 0; p < planes; ++p) {
      c.eq.histogram(kernel, c.planes.get() + std::size_t(p) * pixels, pixels,
                     histeq::SampleType::u8, kBins, h + std::size_t(p) * kBins);
    }
  }
}

/// histeq.match_histograms on `count` 8-bit images back to back in device memory.
void match_device(int device, std::uintptr_t stream, std::uintptr_t in, std::uintptr_t out,
                  std::size_t count, std::size_t pixels, int channels,
                  const std::optional<std::string>& mode, const std::string& kernel,
                  const histeq::python::HostHists& reference) {
  if (channels < 1 || channels > 4) {
    throw histeq::UsageError("image: " + std::to_string(channels) +
                             " channels; expected 1, 2, 3 or 4");
  }
  // One channel: the gray plane whatever the mode (the apply kernel's gray case).
  const histeq::Mode md =
      channels == 1 ? histeq::Mode::gray
                    : histeq::python::parse_mode_opt(mode).value_or(histeq::default_mode(channels));
  const int planes = histeq::plane_count(md, channels);
  const auto ref = histeq::python::reference_of(reference, kBins);
  if (ref->size() != std::size_t(planes)) {
    throw histeq::UsageError("reference: " + std::to_string(ref->size()) + " histograms for " +
                             std::to_string(planes) + " planes");
  }
  if (count == 0 || pixels == 0) return;
  histeq::python::DeviceScope scope(device);
  DeviceContext& c = histeq::python::begin(device, stream);
  const std::size_t total = count * std::size_t(planes);
  std::uint64_t* d_hist = c.eq.device_hist(int(total));
  std::uint8_t* d_lut = c.eq.device_lut(int(total));
  const auto* src = reinterpret_cast<const std::uint8_t*>(in);
  auto* dst = reinterpret_cast<std::uint8_t*>(out);
  device_histograms(c, src, count, pixels, channels, md, planes, kernel, d_hist);
  std::vector<std::uint64_t> hist(total * kBins);
  HISTEQ_CUDA_CHECK(cudaMemcpyAsync(hist.data(), d_hist, hist.size() * sizeof(std::uint64_t),
                                    cudaMemcpyDeviceToHost, c.current));
  // The GIL stays held, as in every device call: the device's context is shared.
  HISTEQ_CUDA_CHECK(cudaStreamSynchronize(c.current));
  std::vector<std::uint8_t> luts(total * kBins);
  for (std::size_t k = 0; k < total; ++k) {
    const histeq::Lut l = histeq::match_lut(hist.data() + k * kBins, (*ref)[k % planes].data());
    std::copy(l.begin(), l.end(), luts.begin() + std::ptrdiff_t(k * kBins));
  }
  // Pageable memory: the call returns once the LUTs are staged, so `luts` may go.
  HISTEQ_CUDA_CHECK(
      cudaMemcpyAsync(d_lut, luts.data(), luts.size(), cudaMemcpyHostToDevice, c.current));
  const std::size_t in_step = pixels * std::size_t(channels);
  const std::size_t out_step = pixels * std::size_t(histeq::output_channels(md, channels));
  for (std::size_t i = 0; i < count; ++i) {
    c.eq.apply(src + i * in_step, pixels, channels, md, d_lut + i * std::size_t(planes) * kBins,
               dst + i * out_step);
  }
  histeq::python::end(c);
}

}  // namespace

void bind_match(nb::module_& m) {
  m.def("match_device", &match_device, "device"_a, "stream"_a, "input"_a, "output"_a, "count"_a,
        "pixels"_a, "channels"_a, "mode"_a.none(), "kernel"_a, "reference"_a);

  // A gray plane in[0, pixels) → out, equalized with the histogram of counted[0, n): the pixels
  // the mask selects, gathered by the caller on the same device and stream.
  m.def(
      "equalize_counted_device",
      [](int device, std::uintptr_t stream, std::uintptr_t in, std::uintptr_t out,
         std::size_t pixels, std::uintptr_t counted, std::size_t n, const std::string& formula,
         const std::string& kernel) {
        const histeq::Formula f = histeq::parse_formula(formula);
        if (n == 0) throw histeq::UsageError("mask: the mask counts no pixel");
        histeq::python::DeviceScope scope(device);
        DeviceContext& c = histeq::python::begin(device, stream);
        std::uint64_t* hist = c.eq.device_hist(1);
        std::uint8_t* lut = c.eq.device_lut(1);
        c.eq.histogram(kernel, reinterpret_cast<const std::uint8_t*>(counted), n,
                       histeq::SampleType::u8, kBins, hist);
        c.eq.cdf_lut(hist, 1, f, lut);
        c.eq.apply(reinterpret_cast<const std::uint8_t*>(in), pixels, 1, histeq::Mode::gray, lut,
                   reinterpret_cast<std::uint8_t*>(out));
        histeq::python::end(c);
      },
      "device"_a, "stream"_a, "input"_a, "output"_a, "pixels"_a, "counted"_a, "n"_a, "formula"_a,
      "kernel"_a);
}
