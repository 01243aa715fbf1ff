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
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bench/detail.hpp"
#include "equalize/stages.hpp"
#include "histeq/cpu.hpp"
#include "histeq/gpu.hpp"
#include "histeq/lut.hpp"
#include "histeq/match.hpp"
#include "histogram/region.hpp"
#include "support/cuda_check.hpp"

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

}  // namespace

void region_rows(const std::uint8_t* data, std::size_t n, const Options& opt, Gpu& g,
                 const RowFn& row) {
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

  DeviceBuffer<std::uint8_t> d_in(m), d_out(m), d_mask(m);
  DeviceBuffer<std::uint64_t> d_hist(256), d_ref(256);
  DeviceBuffer<std::uint8_t> d_lut(256);
  HISTEQ_CUDA_CHECK(cudaMemcpy(d_in.get(), data, m, cudaMemcpyHostToDevice));
  HISTEQ_CUDA_CHECK(cudaMemcpy(d_mask.get(), mask.mask->pixels.data(), m, cudaMemcpyHostToDevice));
  HISTEQ_CUDA_CHECK(cudaMemcpy(d_ref.get(), ref.data(), 256 * 8, cudaMemcpyHostToDevice));
  HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());  // the Equalizer's stream is non-blocking
  gpu::Equalizer eq;
  eq.set_tuning(opt.tune.gpu);
  const cudaStream_t s = eq.stream();

  auto launch = [&](const Region& r) {
    const Roi box = r.roi.value_or(Roi{0, 0, w, h});
    kernels::RegionLaunch l;
    l.d_plane = d_in.get();
    l.width = w;
    l.height = h;
    l.x = box.x;
    l.y = box.y;
    l.w = box.width;
    l.h = box.height;
    l.d_mask = r.mask ? d_mask.get() : nullptr;
    l.d_hist = d_hist.get();
    l.stream = s;
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
}

}  // namespace histeq::bench::internal
