// bench/region.cpp — `histeq bench --equalize`'s rows for masked equalization and histogram
// matching in device memory: the u8 case as a w x h gray image (w = floor(sqrt(n))), each
// variant checked byte for byte against the CPU twin, then timed like the other rows.
//   hist:columns   the registry's columns kernel, every pixel (the unmasked reference)
//   hist:mask      the region kernel with a mask (the inscribed disc, ~79 % of the pixels): the
//                  plane and the mask read in one pass (memset + one launch)
//   hist:roi       the region kernel on a rectangle (margins of w/8 and h/8: a warp per row)
//   equalize:mask  gpu::Equalizer::equalize_gray_region with the disc, the policy's path
//                  (against equalize:fused and equalize:columns of the same run)
//   equalize:roi   the same with the rectangle
//   hist:mask-M, equalize:mask-M and their variants, for M = letterbox (the central 80 % of the
//                  rows and columns counted, as bench/python/bench_match.py's) and half (a random
//                  half of the pixels): the policy, then each RegionTuning choice beside it
//                  (mask_rows below names them)
//   match:gpu      columns histogram + the matching LUT + apply (a reference with gaps)
//   hist16:mask    the 16-bit region kernel with the disc mask, on u16 samples made of the case
//                  (high byte the sample, low byte the sample half the case away)
//   hist16:mask:constant  the same on a constant plane (every counted sample one level: the
//                  case where the kernel's per-value aggregation matters most)
// The 8-bit rows run in the caller's input and output buffers; the rows allocate only the masks
// (and the 16-bit rows their plane), after checking that much device memory is free.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
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
#include "support/pdl_edges.hpp"
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

/// A w x h mask: kind "disc" the disc inscribed in the image, "letterbox" the central 80 % of
/// the rows and columns (margins of a tenth), "half" each pixel with probability 1/2 (a fixed
/// seed); 1 where counted.
std::shared_ptr<const Image> mask_image(int w, int h, const std::string& kind) {
  auto m = std::make_shared<Image>();
  m->width = w;
  m->height = h;
  m->channels = 1;
  m->pixels.assign(std::size_t(w) * std::size_t(h), 0);
  const double rx = w / 2.0, ry = h / 2.0;
  const int mx = w / 10, my = h / 10;
  std::mt19937 rng(3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      bool on = false;
      if (kind == "disc") {
        const double dx = (x + 0.5 - rx) / rx, dy = (y + 0.5 - ry) / ry;
        on = dx * dx + dy * dy <= 1.0;
      } else if (kind == "letterbox") {
        on = x >= mx && x < w - mx && y >= my && y < h - my;
      } else {
        on = (rng() & 1u) != 0;
      }
      m->pixels[std::size_t(y) * std::size_t(w) + std::size_t(x)] = on ? 1 : 0;
    }
  return m;
}

/// One way to run a masked row: its label suffix and the tuning that picks it.
struct Variant {
  const char* suffix;
  Tuning tune;
};

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

/// The rows' shared state: the case as a w x h plane in the caller's buffers, the Equalizer, the
/// CPU's expectations and the timing.
struct Rows {
  Rows(const std::uint8_t* data_, int w_, int h_, std::uint8_t* d_in_, std::uint8_t* d_out_,
       const Options& opt_, Gpu& g_, const RowFn& row_)
      : data(data_),
        w(w_),
        h(h_),
        m(std::size_t(w_) * std::size_t(h_)),
        d_in(d_in_),
        d_out(d_out_),
        opt(opt_),
        g(g_),
        row(row_) {}
  const std::uint8_t* data;
  int w, h;
  std::size_t m;
  std::uint8_t* d_in;
  std::uint8_t* d_out;
  const Options& opt;
  Gpu& g;
  const RowFn& row;
  gpu::Equalizer eq;
  DeviceBuffer<std::uint64_t> d_hist{256};

  cudaStream_t s() const { return reinterpret_cast<cudaStream_t>(eq.stream()); }
  void timed(const std::string& name, const std::string& reason, const std::function<void()>& run) {
    for (L2 l : opt.l2)
      row(name, l, reason,
          time_reps(s(), opt.warmup, opt.reps, opt.timing, l2_flush(l, g, s()), run));
  }
  std::vector<std::uint64_t> hist_of_device() {
    eq.synchronize();
    std::vector<std::uint64_t> got(256);
    HISTEQ_CUDA_CHECK(cudaMemcpy(got.data(), d_hist.get(), 256 * 8, cudaMemcpyDeviceToHost));
    return got;
  }
  std::vector<std::uint8_t> out_of_device() {
    eq.synchronize();
    std::vector<std::uint8_t> got(m);
    HISTEQ_CUDA_CHECK(cudaMemcpy(got.data(), d_out, m, cudaMemcpyDeviceToHost));
    return got;
  }
  std::vector<std::uint8_t> cpu_apply(const Lut& lut) const {
    std::vector<std::uint8_t> want(m);
    cpu::apply(data, m, 1, Mode::gray, &lut, want.data());
    return want;
  }
  kernels::RegionLaunch launch(const Region& r, const std::uint8_t* d_mask) {
    const Roi box = r.roi.value_or(Roi{0, 0, w, h});
    kernels::RegionLaunch l = kernels::region_launch(w, h, box.x, box.y, box.width, box.height,
                                                     r.mask ? d_mask : nullptr, s());
    l.d_plane = d_in;
    l.d_hist = d_hist.get();
    return l;
  }

  /// `name` (hist:) and equalize: rows of one region under `tune`: the histogram alone (memset +
  /// region kernel) when hist_too, then equalize_gray_region.
  void region_pair(const std::string& hist_name, const std::string& eq_name, const Region& r,
                   const std::uint8_t* d_mask, const Histogram& want, const Tuning& tune,
                   bool hist_too) {
    eq.set_tuning(tune);
    if (hist_too) {
      const kernels::RegionLaunch l = launch(r, d_mask);
      const auto count = [l, &tune] { kernels::region_histogram_u8(l, tune); };
      count();
      timed(hist_name, first_diff(hist_of_device(), want), count);
    }
    if (eq_name.empty()) return;
    const Roi box = r.roi.value_or(Roi{0, 0, w, h});
    const std::uint8_t* mk = r.mask ? d_mask : nullptr;
    const auto equalize = [&, box, mk] {
      eq.equalize_gray_region(d_in, d_out, w, h, box.x, box.y, box.width, box.height, mk,
                              Formula::opencv);
    };
    equalize();
    timed(eq_name, first_diff(out_of_device(), cpu_apply(make_lut(want.data(), Formula::opencv))),
          equalize);
  }
};

/// The variants of the masked rows beside the policy (base): each RegionTuning choice alone.
std::vector<Variant> variants(const Tuning& base) {
  using E = RegionTuning::Equalize;
  using S = RegionTuning::FusedShape;
  std::vector<Variant> v;
  const auto with = [&](const char* suffix, auto&& change) {
    Variant x{suffix, base};
    change(x.tune);
    v.push_back(x);
  };
  with("", [](Tuning&) {});
  with(":full", [](Tuning& t) { t.region.full_vectors = true; });
  with(":3sm", [](Tuning& t) { t.region.blocks_per_sm = 3; });
  with(":fused-1024x1", [](Tuning& t) {
    t.region.equalize = E::fused;
    t.region.fused_shape = S::t1024_v1;
  });
  with(":fused-768x2", [](Tuning& t) {
    t.region.equalize = E::fused;
    t.region.fused_shape = S::t768_v2;
  });
  with(":pair", [](Tuning& t) { t.region.equalize = E::pair; });
  with(":pair-nopdl", [](Tuning& t) {
    t.region.equalize = E::pair;
    const unsigned edges = t.pdl_edges < 0 ? kernels::pdl::kDefaultEdges : unsigned(t.pdl_edges);
    t.pdl_edges = std::int32_t(edges & ~unsigned(kernels::pdl::kRegionEqualize));
  });
  with(":stages", [](Tuning& t) { t.region.equalize = E::stages; });
  return v;
}

/// hist:mask-KIND and equalize:mask-KIND under each variant: the histogram rows where the variant
/// changes the histogram kernel (the policy, :full, :3sm), the equalize rows where it changes the
/// equalization (all but :3sm, whose equalization is the policy's fused launch).
void mask_rows(Rows& rs, const std::string& kind, const std::uint8_t* d_mask, const Region& r,
               const Tuning& base) {
  const Histogram want = cpu::histogram(rs.data, rs.w, rs.h, r);
  for (const Variant& v : variants(base)) {
    const std::string sfx = v.suffix;
    const bool hist_too = sfx.empty() || sfx == ":full" || sfx == ":3sm";
    const bool eq_too = sfx != ":3sm";
    rs.region_pair("hist:mask-" + kind + sfx, eq_too ? "equalize:mask-" + kind + sfx : "", r,
                   d_mask, want, v.tune, hist_too);
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
  const char* kinds[] = {"disc", "letterbox", "half"};
  Region masks[3];
  for (int k = 0; k < 3; ++k) masks[k].mask = mask_image(w, h, kinds[k]);
  Region roi;
  roi.roi = Roi{w / 8, h / 8, std::max(1, w - w / 4), std::max(1, h - h / 4)};
  // The reference of matching: the case's own histogram on every third level (gaps), +1.
  const Histogram all = cpu::histogram(data, m, SampleType::u8, 256);
  Histogram ref(256, 0);
  for (int v = 0; v < 256; v += 3) ref[std::size_t(v)] = all[std::size_t(v)] + 1;

  // Beyond the caller's buffers: the masks (and small tables); the 16-bit rows also their plane.
  const std::size_t small = std::size_t(1) << 20;
  const std::string why = skip_reason(nullptr, 3 * m + small, free_device_bytes());
  if (!why.empty()) {
    for (const char* k : {"hist:columns", "hist:mask", "hist:roi", "equalize:mask", "equalize:roi",
                          "hist:mask-letterbox", "equalize:mask-letterbox", "hist:mask-half",
                          "equalize:mask-half", "match:gpu", "hist16:mask", "hist16:mask:constant"})
      skip(k, "mask " + why);
    return;
  }
  DeviceBuffer<std::uint8_t> d_masks[3] = {
      DeviceBuffer<std::uint8_t>(m), DeviceBuffer<std::uint8_t>(m), DeviceBuffer<std::uint8_t>(m)};
  for (int k = 0; k < 3; ++k)
    HISTEQ_CUDA_CHECK(
        cudaMemcpy(d_masks[k].get(), masks[k].mask->pixels.data(), m, cudaMemcpyHostToDevice));
  DeviceBuffer<std::uint64_t> d_ref(256);
  HISTEQ_CUDA_CHECK(cudaMemcpy(d_ref.get(), ref.data(), 256 * 8, cudaMemcpyHostToDevice));
  HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());  // the Equalizer's stream is non-blocking
  Rows rs(data, w, h, d_in_n, d_out_n, opt, g, row);
  const Tuning& base = opt.tune.gpu;
  rs.eq.set_tuning(base);
  const cudaStream_t s = rs.s();

  // Every pixel, then the disc and the rectangle with the policy.
  const auto columns = [&] {
    rs.eq.histogram("columns", d_in_n, m, SampleType::u8, 256, rs.d_hist.get());
  };
  columns();
  rs.timed("hist:columns", first_diff(rs.hist_of_device(), all), columns);
  rs.region_pair("hist:mask", "equalize:mask", masks[0], d_masks[0].get(),
                 cpu::histogram(data, w, h, masks[0]), base, true);
  rs.region_pair("hist:roi", "equalize:roi", roi, nullptr, cpu::histogram(data, w, h, roi), base,
                 true);
  // The letterbox and the random half, under each variant.
  for (int k = 1; k < 3; ++k) mask_rows(rs, kinds[k], d_masks[k].get(), masks[k], base);
  rs.eq.set_tuning(base);
  // Matching: every pixel's histogram, the matching LUT, apply.
  std::uint8_t* d_lut = rs.eq.device_lut(1);
  const auto match = [&] {
    rs.eq.histogram("auto", d_in_n, m, SampleType::u8, 256, rs.d_hist.get());
    kernels::launch_match_lut_planes(rs.d_hist.get(), 1, d_ref.get(), true, d_lut, s);
    kernels::launch_apply(d_in_n, m, 1, Mode::gray, d_lut, d_out_n, s);
  };
  match();
  rs.timed("match:gpu",
           first_diff(rs.out_of_device(), rs.cpu_apply(match_lut(all.data(), ref.data()))), match);
  rs.eq.synchronize();
  const std::string why16 = skip_reason(nullptr, 2 * m + small, free_device_bytes());
  if (!why16.empty()) {
    for (const char* k : {"hist16:mask", "hist16:mask:constant"}) skip(k, "16-bit plane " + why16);
    return;
  }
  region16_rows(data, w, h, masks[0], d_masks[0].get(), opt, g, row16);
}

}  // namespace histeq::bench::internal
