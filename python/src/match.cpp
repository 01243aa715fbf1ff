// match.cpp — what histeq.match_histograms and the `mask` / `roi` arguments need of the compiled
// core beyond the host calls (which take them as options: _histeq.cpp, clahe16.cpp): the counted
// region and the reference histograms from Python's arrays, and the calls on 8-bit CUDA arrays.
//
// stages_device: the stage sequence on the device with a region and/or a reference, queued on
// the caller's stream without a host synchronization: gray images with a region and no
// reference through gpu::Equalizer::equalize_gray_region; otherwise each plane's histogram (the
// region kernel, histogram/region.hpp, over the plane and the mask in one pass, when a mask or a
// rectangle counts; else the Equalizer's kernels), the LUTs (the formula, or histogram
// matching's LUT kernel to the reference's histograms, which the Python side keeps on the
// device or, for a gray 8-bit reference image on the device, which this call counts into its
// own buffer: no array allocated for them per call), the Equalizer's apply kernel.
// histogram_device_region: the region's histograms.
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
#include "equalize/stages.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/match.hpp"
#include "histeq/planes.hpp"
#include "histogram/region.hpp"
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

/// What one call on 8-bit CUDA images counts and how it makes its LUTs.
struct DeviceJob {
  const std::uint8_t* in = nullptr;
  std::uint8_t* out = nullptr;
  std::size_t count = 0;
  int width = 0, height = 0, channels = 0;
  histeq::Mode mode = histeq::Mode::gray;
  int planes = 1;
  histeq::Formula formula = histeq::Formula::opencv;
  std::string kernel = "auto";
  const std::uint8_t* mask = nullptr;        ///< width x height bytes on the device, or null
  histeq::Roi rect;                          ///< the counted rectangle (the whole image by default)
  bool region = false;                       ///< a mask or a rectangle: the region kernel counts
  const std::uint64_t* reference = nullptr;  ///< ref_planes x 256 counts on the device, or null
  int ref_planes = 0;
  /// Or the reference as a gray 8-bit image of ref_pixels on the device (null: none), counted
  /// into the context's histogram buffer after the images' (one plane: ref_planes 1).
  const std::uint8_t* ref_image = nullptr;
  std::size_t ref_pixels = 0;
};

DeviceJob make_job(std::uintptr_t in, std::uintptr_t out, std::size_t count, int height, int width,
                   int channels, const std::optional<std::string>& mode, std::uintptr_t mask,
                   const std::optional<histeq::python::RoiTuple>& roi) {
  if (channels < 1 || channels > 4) {
    throw histeq::UsageError("image: " + std::to_string(channels) +
                             " channels; expected 1, 2, 3 or 4");
  }
  DeviceJob j;
  j.in = reinterpret_cast<const std::uint8_t*>(in);
  j.out = reinterpret_cast<std::uint8_t*>(out);
  j.count = count;
  j.width = width;
  j.height = height;
  j.channels = channels;
  // One channel: the gray plane whatever the mode (the apply kernel's gray case).
  j.mode = channels == 1
               ? histeq::Mode::gray
               : histeq::python::parse_mode_opt(mode).value_or(histeq::default_mode(channels));
  j.planes = histeq::plane_count(j.mode, channels);
  j.mask = reinterpret_cast<const std::uint8_t*>(mask);
  j.rect = histeq::Roi{0, 0, width, height};
  if (roi) {
    j.rect =
        histeq::Roi{std::get<0>(*roi), std::get<1>(*roi), std::get<2>(*roi), std::get<3>(*roi)};
    histeq::Region r;
    r.roi = j.rect;
    r.check(width, height, "roi");
  }
  j.region = j.mask != nullptr || roi.has_value();
  return j;
}

/// Queues the 256-bin histograms of the job's planes (image i, plane p at hist + (i·planes + p)·
/// 256): the region kernel when a mask or rectangle counts, else the Equalizer's kernels.
void queue_histograms(DeviceContext& c, const DeviceJob& j, std::uint64_t* hist) {
  const std::size_t pixels = std::size_t(j.width) * std::size_t(j.height);
  const std::size_t in_step = pixels * std::size_t(j.channels);
  if (j.channels > 1 && c.planes.size() < std::size_t(j.planes) * pixels) {
    c.planes.reset();
    c.planes = histeq::DeviceBuffer<std::uint8_t>(std::size_t(j.planes) * pixels);
  }
  for (std::size_t i = 0; i < j.count; ++i) {
    const std::uint8_t* base = j.in + i * in_step;
    if (j.channels > 1) {
      c.eq.extract_planes(base, pixels, j.channels, j.mode, c.planes.get());
      base = c.planes.get();
    }
    for (int p = 0; p < j.planes; ++p) {
      const std::uint8_t* plane = base + std::size_t(p) * pixels;
      std::uint64_t* h = hist + (i * std::size_t(j.planes) + std::size_t(p)) * kBins;
      if (!j.region) {
        c.eq.histogram(j.kernel, plane, pixels, histeq::SampleType::u8, kBins, h);
        continue;
      }
      histeq::kernels::RegionLaunch r;
      r.d_plane = plane;
      r.width = j.width;
      r.height = j.height;
      r.x = j.rect.x;
      r.y = j.rect.y;
      r.w = j.rect.width;
      r.h = j.rect.height;
      r.d_mask = j.mask;
      r.d_hist = h;
      r.stream = c.current;
      histeq::kernels::region_histogram_u8(r);
    }
  }
}

/// histeq.equalize (with a mask or rectangle) and histeq.match_histograms on `count` 8-bit
/// images back to back in device memory: histograms → LUTs (the formula, or matching to the
/// reference) → apply, all queued on the caller's stream.
void stages_device(int device, std::uintptr_t stream, const DeviceJob& j) {
  if (j.ref_image && (j.reference || j.ref_pixels == 0)) {
    throw histeq::UsageError(j.reference ? "reference: its counts and its image, both"
                                         : "reference: an image of no pixel");
  }
  if (j.reference && j.ref_planes != 1 && j.ref_planes != j.planes) {
    throw histeq::UsageError("reference: " + std::to_string(j.ref_planes) + " histograms for " +
                             std::to_string(j.planes) + " planes");
  }
  const std::size_t pixels = std::size_t(j.width) * std::size_t(j.height);
  if (j.count == 0 || pixels == 0) return;
  histeq::python::DeviceScope scope(device);
  DeviceContext& c = histeq::python::begin(device, stream);
  if (j.region && j.channels == 1 && !j.reference && !j.ref_image) {
    // Gray images equalized by a region: the Equalizer's region path (one cooperative launch for
    // a mask alone, else the histogram launch whose last block builds the LUT, then the apply).
    for (std::size_t i = 0; i < j.count; ++i)
      c.eq.equalize_gray_region(j.in + i * pixels, j.out + i * pixels, j.width, j.height, j.rect.x,
                                j.rect.y, j.rect.width, j.rect.height, j.mask, j.formula);
    histeq::python::end(c);
    return;
  }
  const std::size_t total = j.count * std::size_t(j.planes);
  std::uint64_t* hist = c.eq.device_hist(int(total) + (j.ref_image ? 1 : 0));
  std::uint8_t* luts = c.eq.device_lut(int(total));
  const std::uint64_t* reference = j.reference;
  if (j.ref_image) {  // the reference's one histogram, after the images'
    std::uint64_t* ref_hist = hist + total * kBins;
    c.eq.histogram("auto", j.ref_image, j.ref_pixels, histeq::SampleType::u8, kBins, ref_hist);
    reference = ref_hist;
  }
  queue_histograms(c, j, hist);
  const std::size_t step = std::size_t(j.planes) * kBins;
  if (reference) {
    for (std::size_t i = 0; i < j.count; ++i) {
      histeq::kernels::launch_match_lut_planes(hist + i * step, j.planes, reference,
                                               j.ref_image || j.ref_planes == 1, luts + i * step,
                                               c.current);
    }
  } else {
    c.eq.cdf_lut(hist, int(total), j.formula, luts);
  }
  const std::size_t in_step = pixels * std::size_t(j.channels);
  const std::size_t out_step = pixels * std::size_t(histeq::output_channels(j.mode, j.channels));
  for (std::size_t i = 0; i < j.count; ++i)
    c.eq.apply(j.in + i * in_step, pixels, j.channels, j.mode, luts + i * step,
               j.out + i * out_step);
  histeq::python::end(c);
}

}  // namespace

void bind_match(nb::module_& m) {
  // count images of height x width x channels back to back → out. mask: the device address of a
  // height x width byte mask (nonzero: counted) or 0; roi: the counted rectangle or None;
  // reference: the device address of ref_planes x 256 int64 counts (histogram matching), or 0
  // (equalization with `formula`); or ref_image: the device address of a gray 8-bit reference
  // image of ref_pixels (counted here, on the device, into the call's own buffer), or 0.
  m.def(
      "stages_device",
      [](int device, std::uintptr_t stream, std::uintptr_t in, std::uintptr_t out,
         std::size_t count, int height, int width, int channels, std::optional<std::string> mode,
         std::string formula, std::string kernel, std::uintptr_t mask,
         std::optional<histeq::python::RoiTuple> roi, std::uintptr_t reference, int ref_planes,
         std::uintptr_t ref_image, std::size_t ref_pixels) {
        DeviceJob j = make_job(in, out, count, height, width, channels, mode, mask, roi);
        j.formula = histeq::parse_formula(formula);
        j.kernel = kernel;
        j.reference = reinterpret_cast<const std::uint64_t*>(reference);
        j.ref_planes = ref_planes;
        j.ref_image = reinterpret_cast<const std::uint8_t*>(ref_image);
        j.ref_pixels = ref_pixels;
        stages_device(device, stream, j);
      },
      "device"_a, "stream"_a, "input"_a, "output"_a, "count"_a, "height"_a, "width"_a, "channels"_a,
      "mode"_a.none(), "formula"_a, "kernel"_a, "mask"_a, "roi"_a.none(), "reference"_a,
      "ref_planes"_a, "ref_image"_a = 0, "ref_pixels"_a = 0);

  // The 256-bin histograms of one image's planes counted in a region (mask and/or roi, as
  // stages_device's) into output (planes x 256 int64, device), queued on the caller's stream.
  m.def(
      "histogram_device_region",
      [](int device, std::uintptr_t stream, std::uintptr_t in, int height, int width, int channels,
         std::optional<std::string> mode, std::uintptr_t mask,
         std::optional<histeq::python::RoiTuple> roi, std::uintptr_t out) {
        DeviceJob j = make_job(in, 0, 1, height, width, channels, mode, mask, roi);
        j.region = true;
        if (std::size_t(width) * std::size_t(height) == 0) return;
        histeq::python::DeviceScope scope(device);
        DeviceContext& c = histeq::python::begin(device, stream);
        queue_histograms(c, j, reinterpret_cast<std::uint64_t*>(out));
        histeq::python::end(c);
      },
      "device"_a, "stream"_a, "input"_a, "height"_a, "width"_a, "channels"_a, "mode"_a.none(),
      "mask"_a, "roi"_a.none(), "output"_a);
}
