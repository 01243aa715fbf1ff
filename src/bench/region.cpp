// bench/region.cpp — `histeq bench --equalize`'s rows for masked equalization and histogram
// matching in device memory: the u8 case as a w x h gray image (w = floor(sqrt(n))), each
// variant checked byte for byte against the CPU twin, then timed like the other rows.
//   hist:columns   the registry's columns kernel, every pixel (the unmasked reference)
//   hist:mask      the region kernel with a mask (the inscribed disc, ~79 % of the pixels): the
//                  plane and the mask read in one pass
//   hist:roi       the region kernel on a rectangle (margins of w/8 and h/8: a warp per row)
//   equalize:mask  hist:mask + CDF/LUT + apply (against equalize:columns of the same run)
//   equalize:roi   hist:roi + CDF/LUT + apply
//   match:gpu      columns histogram + the matching LUT + apply (a reference with gaps)
//   hist16:mask    the 16-bit region kernel with the disc mask, on u16 samples made of the case
//                  (high byte the sample, low byte the sample half the case away)
//   hist16:mask:constant  the same on a constant plane (every counted sample one level: the
//                  case where the kernel's per-value aggregation matters most)
// The 8-bit rows run in the caller's input and output buffers; the rows allocate only the mask
// (and the 16-bit rows their plane), after checking that much device memory is free.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bench/detail.hpp"
#include "equalize/stages.hpp"
#include "histeq/cpu.hpp"
#include "histeq/equalize16.hpp"
#include "histeq/gpu.hpp"
#include "histeq/lut.hpp"
#include "histeq/match.hpp"
#include "histogram/region.hpp"
#include "support/cuda_check.hpp"
#include "u16/hist_u16.hpp"

namespace histeq::bench::internal {
namespace {

/// The first byte where got and want differ, as a FAIL reason; "" when equal.
template <typename T>
std::string first_diff(const std::vector<T>& got, const std::vector<T>& want) {
  std::size_t i = 0;
  while (i < got.size() && got[i] == want[i]) ++i;
  return i == got.size() ? std::string()
                         : "differs from the CPU at " + std::to_string(i) + ": " +
                               std::to_string(got[i]) + " vs " + std::to_string(want[i]);
}

/// The disc inscribed in a w x h image (nonzero inside).
std::shared_ptr<const Image> disc_mask(int w, int h) {
  auto m = std::make_shared<Image>();
  m->width = w;
  m->height = h;
  m->channels = 1;
  m->pixels.assign(std::size_t(w) * std::size_t(h), 0);
  const double rx = w / 2.0, ry = h / 2.0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const double dx = (x + 0.5 - rx) / rx, dy = (y + 0.5 - ry) / ry;
      if (dx * dx + dy * dy <= 1.0) m->pixels[std::size_t(y) * std::size_t(w) + std::size_t(x)] = 1;
    }
  return m;
}

/// hist16:mask and hist16:mask:constant: the 16-bit masked histogram of a w x h plane made of the
/// case, and of a constant plane, with the mask d_mask (the disc), checked against
/// cpu::histogram16 of the same region and timed.
void region16_rows(const std::uint8_t* data, int w, int h, const Region& mask,
                   const std::uint8_t* d_mask, const Options& opt, Gpu& g, const RowFn& row16) {
  const std::size_t m = std::size_t(w) * std::size_t(h);
  std::vector<std::uint16_t> natural(m), constant(m, std::uint16_t(0x8001));
  for (std::size_t i = 0; i < m; ++i)
    natural[i] = static_cast<std::uint16_t>((data[i] << 8) | data[(i + m / 2) % m]);
  DeviceBuffer<std::uint16_t> d_plane(m);
  DeviceBuffer<std::uint64_t> d_hist(65536);
  Stream stream;
  const cudaStream_t s = stream.get();
  kernels::RegionLaunch l = kernels::region_launch(w, h, 0, 0, w, h, d_mask, s);
  l.d_plane = d_plane.get();
  l.d_hist = d_hist.get();
  // With a mask the kernel takes no scratch (that is the unmasked whole-rows path's).
  const auto count = [&l] { kernels::hist_u16_region(l, nullptr); };
  for (const auto& [name, plane] :
       {std::pair{"hist16:mask", &natural}, std::pair{"hist16:mask:constant", &constant}}) {
    HISTEQ_CUDA_CHECK(
        cudaMemcpyAsync(d_plane.get(), plane->data(), m * 2, cudaMemcpyHostToDevice, s));
    count();
    std::vector<std::uint64_t> got(65536);
    HISTEQ_CUDA_CHECK(
        cudaMemcpyAsync(got.data(), d_hist.get(), 65536 * 8, cudaMemcpyDeviceToHost, s));
    HISTEQ_CUDA_CHECK(cudaStreamSynchronize(s));
    const std::string reason = first_diff(got, cpu::histogram16(plane->data(), w, h, mask));
    for (L2 l2 : opt.l2)
      row16(name, l2, reason,
            time_reps(s, opt.warmup, opt.reps, opt.timing, l2_flush(l2, g, s), count));
  }
}

}  // namespace

void region_rows(const std::uint8_t* data, std::size_t n, std::uint8_t* d_in_n,
                 std::uint8_t* d_out_n, const Options& opt, Gpu& g, const RowFn& row,
                 const RowFn& row16, const SkipFn& skip) {
  const int w = std::max(1, int(std::sqrt(double(n))));
  const int h = int(n / std::size_t(w));
  const std::size_t m = std::size_t(w) * std::size_t(h);
  if (m == 0 || h < 1) return;
  Region mask;
  mask.mask = disc_mask(w, h);
  Region roi;
  roi.roi = Roi{w / 8, h / 8, std::max(1, w - w / 4), std::max(1, h - h / 4)};
  // The reference of matching: the case's own histogram on every third level (gaps), +1.
  const Histogram all = cpu::histogram(data, m, SampleType::u8, 256);
  Histogram ref(256, 0);
  for (int v = 0; v < 256; v += 3) ref[std::size_t(v)] = all[std::size_t(v)] + 1;

  // Beyond the caller's buffers: the mask (and small tables); the 16-bit rows also their plane.
  const std::size_t small = std::size_t(1) << 20;
  const std::string why = skip_reason(nullptr, m + small, free_device_bytes());
  if (!why.empty()) {
    for (const char* k : {"hist:columns", "hist:mask", "hist:roi", "equalize:mask", "equalize:roi",
                          "match:gpu", "hist16:mask", "hist16:mask:constant"})
      skip(k, "mask " + why);
    return;
  }
  struct Plane {  // the caller's buffers, as the DeviceBuffers the rows were written with
    std::uint8_t* p;
    std::uint8_t* get() const { return p; }
  } d_in{d_in_n}, d_out{d_out_n};
  DeviceBuffer<std::uint8_t> d_mask(m);
  DeviceBuffer<std::uint64_t> d_hist(256), d_ref(256);
  DeviceBuffer<std::uint8_t> d_lut(256);
  HISTEQ_CUDA_CHECK(cudaMemcpy(d_mask.get(), mask.mask->pixels.data(), m, cudaMemcpyHostToDevice));
  HISTEQ_CUDA_CHECK(cudaMemcpy(d_ref.get(), ref.data(), 256 * 8, cudaMemcpyHostToDevice));
  HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());  // the Equalizer's stream is non-blocking
  gpu::Equalizer eq;
  eq.set_tuning(opt.tune.gpu);
  const cudaStream_t s = eq.stream();

  auto launch = [&](const Region& r) {
    const Roi box = r.roi.value_or(Roi{0, 0, w, h});
    kernels::RegionLaunch l = kernels::region_launch(w, h, box.x, box.y, box.width, box.height,
                                                     r.mask ? d_mask.get() : nullptr, s);
    l.d_plane = d_in.get();
    l.d_hist = d_hist.get();
    return l;
  };
  auto hist_of_device = [&] {
    eq.synchronize();
    std::vector<std::uint64_t> got(256);
    HISTEQ_CUDA_CHECK(cudaMemcpy(got.data(), d_hist.get(), 256 * 8, cudaMemcpyDeviceToHost));
    return got;
  };
  auto out_of_device = [&] {
    eq.synchronize();
    std::vector<std::uint8_t> got(m);
    HISTEQ_CUDA_CHECK(cudaMemcpy(got.data(), d_out.get(), m, cudaMemcpyDeviceToHost));
    return got;
  };
  auto timed = [&](const std::string& name, const std::string& reason,
                   const std::function<void()>& run) {
    for (L2 l : opt.l2)
      row(name, l, reason, time_reps(s, opt.warmup, opt.reps, opt.timing, l2_flush(l, g, s), run));
  };
  auto cpu_apply = [&](const Lut& lut) {
    std::vector<std::uint8_t> want(m);
    cpu::apply(data, m, 1, Mode::gray, &lut, want.data());
    return want;
  };

  // Histograms alone.
  const auto columns = [&] {
    eq.histogram("columns", d_in.get(), m, SampleType::u8, 256, d_hist.get());
  };
  columns();
  timed("hist:columns", first_diff(hist_of_device(), all), columns);
  for (const auto& [name, r] : {std::pair{"mask", &mask}, std::pair{"roi", &roi}}) {
    const kernels::RegionLaunch l = launch(*r);
    const auto count = [l] { kernels::region_histogram_u8(l); };
    count();
    const Histogram want = cpu::histogram(data, w, h, *r);
    timed(std::string("hist:") + name, first_diff(hist_of_device(), want), count);
    // The whole masked equalization: region histogram, CDF + LUT, apply.
    const auto equalize = [&, l] {
      kernels::region_histogram_u8(l);
      kernels::launch_cdf_lut(d_hist.get(), d_lut.get(), Formula::opencv, s);
      kernels::launch_apply(d_in.get(), m, 1, Mode::gray, d_lut.get(), d_out.get(), s);
    };
    equalize();
    timed(std::string("equalize:") + name,
          first_diff(out_of_device(), cpu_apply(make_lut(want.data(), Formula::opencv))), equalize);
  }
  // Matching: every pixel's histogram, the matching LUT, apply.
  const auto match = [&] {
    eq.histogram("auto", d_in.get(), m, SampleType::u8, 256, d_hist.get());
    kernels::launch_match_lut_planes(d_hist.get(), 1, d_ref.get(), true, d_lut.get(), s);
    kernels::launch_apply(d_in.get(), m, 1, Mode::gray, d_lut.get(), d_out.get(), s);
  };
  match();
  timed("match:gpu", first_diff(out_of_device(), cpu_apply(match_lut(all.data(), ref.data()))),
        match);
  eq.synchronize();
  const std::string why16 = skip_reason(nullptr, 2 * m + small, free_device_bytes());
  if (!why16.empty()) {
    for (const char* k : {"hist16:mask", "hist16:mask:constant"}) skip(k, "16-bit plane " + why16);
    return;
  }
  region16_rows(data, w, h, mask, d_mask.get(), opt, g, row16);
}

}  // namespace histeq::bench::internal
