// test_region_gpu.cpp — masked and rectangle equalization of gray planes in device memory
// (gpu::Equalizer::equalize_gray_region) and the 8-bit region histogram under every
// RegionTuning choice equal the CPU twin byte for byte: cpu::histogram of the region, make_lut,
// the LUT applied to every pixel. The masks are made to reach each branch of the counting step
// (kernels/histogram/region_count.cuh): 16-byte mask vectors of zeros only (skipped), of nonzero
// bytes only (the full-vector path), mixed ones, nonzero bytes of any value; planes and masks at
// every phase (16-byte loads of both, or the mask's bytes one by one), heads and tails shorter
// than a vector, planes large enough that the grid strides, in place and apart. Every case needs
// a device and skips with the reason where none is usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.hpp"
#include "histeq/cpu.hpp"
#include "histeq/gpu.hpp"
#include "histeq/lut.hpp"
#include "histeq/match.hpp"
#include "histogram/region.hpp"
#include "region_test_support.hpp"
#include "support/device_buffer.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

using test::Config;
using test::config;
using test::kMaskKinds;
using test::mask_of;

using test::download;

/// A smooth image with noise (neighbours alike, as photographs).
std::vector<std::uint8_t> plane_of(int w, int h, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> p(std::size_t(w) * std::size_t(h));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      p[std::size_t(y) * std::size_t(w) + std::size_t(x)] =
          std::uint8_t((x * 3 + y * 2 + int(rng() % 11)) / 3 % 256);
  return p;
}

using Path = RegionTuning::Equalize;
using Shape = RegionTuning::FusedShape;
const Config kConfigs[] = {
    {"policy", Tuning{}},
    config("full_vectors", [](Tuning& t) { t.region.full_vectors = true; }),
    config("fused_1024x1",
           [](Tuning& t) {
             t.region.equalize = Path::fused;
             t.region.fused_shape = Shape::t1024_v1;
           }),
    config("fused_768x2_full",
           [](Tuning& t) {
             t.region.equalize = Path::fused;
             t.region.fused_shape = Shape::t768_v2;
             t.region.full_vectors = true;
           }),
    config("pair", [](Tuning& t) { t.region.equalize = Path::pair; }),
    config("pair_3sm_full",
           [](Tuning& t) {
             t.region.equalize = Path::pair;
             t.region.blocks_per_sm = 3;
             t.region.full_vectors = true;
           }),
    config("pair_no_pdl",
           [](Tuning& t) {
             t.region.equalize = Path::pair;
             t.pdl_edges = 0;
           }),
    config("stages", [](Tuning& t) { t.region.equalize = Path::stages; }),
};

class RegionEqualizeGpu : public ::testing::TestWithParam<Config> {
 protected:
  const Tuning& tuning() const { return GetParam().tuning; }
};
class RegionHistogramTuned : public RegionEqualizeGpu {};
std::string config_name(const ::testing::TestParamInfo<Config>& p) { return p.param.name; }
INSTANTIATE_TEST_SUITE_P(Configs, RegionEqualizeGpu, ::testing::ValuesIn(kConfigs), config_name);
INSTANTIATE_TEST_SUITE_P(Configs, RegionHistogramTuned, ::testing::ValuesIn(kConfigs), config_name);

/// The CPU's answer for `region` of the plane: its histogram and the plane through its LUT.
struct Want {
  Histogram hist;
  Lut lut;
  std::vector<std::uint8_t> out;
};
Want want_of(const std::vector<std::uint8_t>& plane, int w, int h, const Region& region,
             Formula f) {
  Want r;
  r.hist = cpu::histogram(plane.data(), w, h, region);
  r.lut = make_lut(r.hist.data(), f);
  r.out.resize(plane.size());
  for (std::size_t i = 0; i < plane.size(); ++i) r.out[i] = r.lut[plane[i]];
  return r;
}

/// Where the buffers of one call lie: the plane `in_off` bytes into its buffer, the mask
/// `mask_off` into its own, the output `out_off` into its own (or the plane itself: in place).
struct Layout {
  std::size_t in_off = 0, mask_off = 0, out_off = 0;
  bool in_place = false;
};

/// equalize_gray_region of `region` on eq, in the layout; checks the output, the histogram and the
/// LUT against the CPU and returns the path that ran.
std::string check_region(gpu::Equalizer& eq, const std::vector<std::uint8_t>& plane, int w, int h,
                         const Region& region, const Layout& at, Formula f,
                         const std::string& what) {
  const Want want = want_of(plane, w, h, region, f);
  auto d_in = test::upload_bytes(plane, at.in_off);
  DeviceBuffer<std::uint8_t> d_mask, d_out;
  if (region.mask) d_mask = test::upload_bytes(region.mask->pixels, at.mask_off);
  if (!at.in_place)
    d_out = test::upload_bytes(std::vector<std::uint8_t>(plane.size(), 0xA5), at.out_off);
  std::uint8_t* in = d_in.get() + at.in_off;
  std::uint8_t* out = at.in_place ? in : d_out.get() + at.out_off;
  const Roi roi = region.roi.value_or(Roi{0, 0, w, h});
  const std::string ran =
      eq.equalize_gray_region(in, out, w, h, roi.x, roi.y, roi.width, roi.height,
                              region.mask ? d_mask.get() + at.mask_off : nullptr, f);
  eq.synchronize();
  EXPECT_EQ(download(out, plane.size()), want.out) << what << " (" << ran << ")";
  EXPECT_EQ(download(eq.device_hist(1), 256), want.hist) << what << " (" << ran << ")";
  const std::vector<std::uint8_t> lut = download(eq.device_lut(1), 256);
  EXPECT_EQ(lut, std::vector<std::uint8_t>(want.lut.begin(), want.lut.end()))
      << what << " (" << ran << ")";
  return ran;
}

TEST_P(RegionEqualizeGpu, EveryMaskAndLayoutEqualsTheCpu) {
  HISTEQ_REQUIRE_GPU();
  gpu::Equalizer eq;
  eq.set_tuning(tuning());
  const Layout layouts[] = {{0, 0, 0, false},   {0, 0, 0, true},  {1, 1, 1, false},
                            {13, 13, 13, true}, {0, 5, 0, false}, {3, 0, 7, false}};
  int cases = 0;
  for (const auto& [w, h] : {std::pair{67, 45}, std::pair{256, 130}, std::pair{1000, 37}}) {
    const std::vector<std::uint8_t> plane = plane_of(w, h, std::uint32_t(w));
    for (int kind = 0; kind < kMaskKinds; ++kind) {
      Region region;
      region.mask = mask_of(w, h, kind, 40 + std::uint32_t(kind));
      for (const Layout& at : layouts) {
        const std::string what = std::to_string(w) + "x" + std::to_string(h) + ", mask " +
                                 std::to_string(kind) + ", +" + std::to_string(at.in_off) + "/+" +
                                 std::to_string(at.mask_off) +
                                 (at.in_place ? " in place" : "/+" + std::to_string(at.out_off));
        const std::string ran = check_region(eq, plane, w, h, region, at, Formula::opencv, what);
        // The policy runs fused where the buffers allow it, the pair path elsewhere.
        if (tuning().region.equalize == Path::automatic) {
          const bool fused = at.in_off % 16 == at.mask_off % 16 &&
                             (at.in_place || at.in_off % 16 == at.out_off % 16);
          EXPECT_EQ(ran, fused ? "fused" : "pair") << what;
        }
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 3 * kMaskKinds * 6);
}

TEST_P(RegionEqualizeGpu, RectanglesWithAndWithoutMasks) {
  HISTEQ_REQUIRE_GPU();
  gpu::Equalizer eq;
  eq.set_tuning(tuning());
  const int w = 301, h = 77;
  const std::vector<std::uint8_t> plane = plane_of(w, h, 9);
  std::vector<std::pair<std::string, Region>> regions;
  for (const Roi& r : {Roi{w / 5, h / 4, w / 2, h / 3}, Roi{0, h / 3, w, h / 2},
                       Roi{1, 2, w - 3, h - 5}, Roi{w - 1, h - 1, 1, 1}, Roi{0, 0, w, h}}) {
    Region a;
    a.roi = r;
    regions.emplace_back("rectangle", a);
    a.mask = mask_of(w, h, 5, 3);
    regions.emplace_back("rectangle and runs", a);
    a.mask = mask_of(w, h, 1, 4);
    regions.emplace_back("rectangle and random", a);
  }
  for (const auto& [name, region] : regions)
    for (const Layout& at : {Layout{0, 0, 0, false}, Layout{5, 9, 5, false}}) {
      const Roi r = *region.roi;
      const std::string what = name + " " + std::to_string(r.x) + "," + std::to_string(r.y) + "," +
                               std::to_string(r.width) + "," + std::to_string(r.height) + ", +" +
                               std::to_string(at.in_off);
      const std::string ran = check_region(eq, plane, w, h, region, at, Formula::exact, what);
      // A mask over the whole frame is a plain masked image: the policy runs it fused where the
      // buffers line up; every true rectangle takes the pair path.
      const bool whole = r.x == 0 && r.y == 0 && r.width == w && r.height == h;
      const bool fused = whole && region.mask && at.in_off % 16 == at.mask_off % 16 &&
                         at.in_off % 16 == at.out_off % 16;
      if (tuning().region.equalize == Path::automatic)
        EXPECT_EQ(ran, fused ? "fused" : "pair") << what;
    }
}

TEST_P(RegionEqualizeGpu, LargePlanesStrideTheGridAndKeepTheirState) {
  HISTEQ_REQUIRE_GPU();
  // Large enough that every thread counts several vector steps and the one-launch equalizer
  // re-reads what it did not keep; one Equalizer across calls, so the pair path's grid state and
  // the fused path's alternating histograms must be left ready for the next call.
  gpu::Equalizer eq;
  eq.set_tuning(tuning());
  const int w = 3001, h = 2003;
  const std::vector<std::uint8_t> plane = plane_of(w, h, 15);
  for (int kind : {0, 1, 4, 5, 2}) {
    Region region;
    region.mask = mask_of(w, h, kind, 60 + std::uint32_t(kind));
    check_region(eq, plane, w, h, region, Layout{}, Formula::opencv,
                 "3001x2003, mask " + std::to_string(kind));
    region.roi = Roi{0, h / 3, w, h / 2};
    check_region(eq, plane, w, h, region, Layout{1, 1, 1, false}, Formula::opencv,
                 "3001x2003 whole rows, mask " + std::to_string(kind));
  }
}

TEST_P(RegionEqualizeGpu, NothingCountedGivesTheIdentity) {
  HISTEQ_REQUIRE_GPU();
  // The callers refuse such regions (Region::check); the device path still gives the empty
  // histogram's identity LUT rather than anything undefined.
  gpu::Equalizer eq;
  eq.set_tuning(tuning());
  const int w = 97, h = 31;
  const std::vector<std::uint8_t> plane = plane_of(w, h, 2);
  Region none;
  none.mask = mask_of(w, h, 6, 0);
  check_region(eq, plane, w, h, none, Layout{}, Formula::opencv, "an empty mask");
  Region empty_rect;
  empty_rect.roi = Roi{3, 4, 0, 5};
  check_region(eq, plane, w, h, empty_rect, Layout{}, Formula::opencv, "an empty rectangle");
}

TEST_P(RegionHistogramTuned, EveryMaskAtEveryPhaseEqualsTheCpu) {
  HISTEQ_REQUIRE_GPU();
  Stream stream;
  for (const auto& [w, h] : {std::pair{67, 45}, std::pair{1000, 37}, std::pair{1500, 701}}) {
    const std::vector<std::uint8_t> plane = plane_of(w, h, 21);
    for (int kind = 0; kind < kMaskKinds; ++kind)
      for (const bool rows : {false, true})
        for (const auto& [off, moff] :
             {std::pair{std::size_t(0), std::size_t(0)}, std::pair{std::size_t(7), std::size_t(7)},
              std::pair{std::size_t(2), std::size_t(11)}}) {
          Region region;
          region.mask = mask_of(w, h, kind, 90 + std::uint32_t(kind));
          if (rows) region.roi = Roi{2, 1, w - 5, h - 3};
          const Roi roi = region.roi.value_or(Roi{0, 0, w, h});
          auto d_plane = test::upload_bytes(plane, off);
          auto d_mask = test::upload_bytes(region.mask->pixels, moff);
          DeviceBuffer<std::uint64_t> d_hist(256);
          HISTEQ_CUDA_CHECK(cudaMemsetAsync(d_hist.get(), 0xFF, d_hist.bytes(), stream.get()));
          kernels::RegionLaunch r = kernels::region_launch(
              w, h, roi.x, roi.y, roi.width, roi.height, d_mask.get() + moff, stream.get());
          r.d_plane = d_plane.get() + off;
          r.d_hist = d_hist.get();
          kernels::region_histogram_u8(r, tuning());
          stream.sync();
          EXPECT_EQ(download(d_hist.get(), 256), cpu::histogram(plane.data(), w, h, region))
              << w << "x" << h << ", mask " << kind << (rows ? " in a rectangle" : "") << ", +"
              << off << "/+" << moff;
        }
  }
}

}  // namespace
}  // namespace histeq
