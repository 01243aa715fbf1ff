// test_match_gpu.cpp — histogram matching and counted regions on the device equal their CPU twin
// byte for byte: the matching LUT kernels against match_lut / match_lut16 on adversarial
// histograms (one level, two levels, references with gaps, counts near 2^50, empty sources);
// the region histogram kernels against cpu::histogram / cpu::histogram16 of a region (rectangle,
// mask, both, misaligned planes and masks); and the whole stage sequences (histeq::equalize with
// Backend::cuda, equalize16 and histograms16 on the GPU) against the CPU backend in gray, rgb
// and luma modes. Every case that needs a device skips with the reason where no CUDA device is
// usable; the refusals that happen before any device work (a region that does not fit on the
// CPU backend, the JPEG device route given a region or a per-image reference) run everywhere.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "equalize/stages.hpp"
#include "gpu_test_support.hpp"
#include "histeq/cpu.hpp"
#include "histeq/equalize16.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu16.hpp"
#include "histeq/match.hpp"
#include "histeq/pipeline.hpp"
#include "histogram/region.hpp"
#include "pipeline/image_engine.hpp"
#include "pipeline/jpeg_device.hpp"
#include "region_test_support.hpp"
#include "support/device_buffer.hpp"
#include "test_support.hpp"
#include "u16/hist_u16.hpp"

namespace histeq {
namespace {

using test::mask_of;

/// The region launch of `region` over a w x h plane (its rectangle, or the whole plane).
kernels::RegionLaunch launch_of(const Region& region, int w, int h, const void* d_plane,
                                const std::uint8_t* d_mask, std::uint64_t* d_hist,
                                cudaStream_t stream) {
  const Roi roi = region.roi.value_or(Roi{0, 0, w, h});
  kernels::RegionLaunch r =
      kernels::region_launch(w, h, roi.x, roi.y, roi.width, roi.height, d_mask, stream);
  r.d_plane = d_plane;
  r.d_hist = d_hist;
  return r;
}

using test::download;
using test::upload_typed;

// ---- histograms ----------------------------------------------------------------------------

/// Adversarial histograms of `bins` levels: kind 0 empty, 1 one level, 2 two levels (far apart),
/// 3 sparse levels with gaps, 4 every level, 5 one level holding almost every count and a few
/// scattered ones, 6 counts near 2^50 on a few levels (quantiles that are not short fractions),
/// 7 the lowest and the highest level only.
Histogram hist_of(int bins, int kind, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  Histogram h(std::size_t(bins), 0);
  const auto level = [&] { return std::size_t(rng() % std::uint64_t(bins)); };
  switch (kind) {
    case 0: break;
    case 1: h[level()] = 1 + rng() % 1000; break;
    case 2:
      h[std::size_t(bins) / 5] = 1 + rng() % 1000;
      h[std::size_t(bins) * 4 / 5] = 1 + rng() % 1000;
      break;
    case 3:
      for (int k = 0; k < 12; ++k) h[level()] += 1 + rng() % 50;
      break;
    case 4:
      for (auto& c : h) c = 1 + rng() % 100;
      break;
    case 5:
      h[level()] = 1000000;
      for (int k = 0; k < 5; ++k) h[level()] += 1;
      break;
    case 6:
      for (int k = 0; k < 7; ++k) h[level()] += (std::uint64_t(1) << 50) / 7 + rng() % 997;
      break;
    default:
      h.front() = 3;
      h.back() = 5;
      break;
  }
  return h;
}
constexpr int kKinds = 8;

std::uint64_t total(const Histogram& h) {
  std::uint64_t s = 0;
  for (std::uint64_t c : h) s += c;
  return s;
}

TEST(MatchLutGpu, EqualsMatchLutOnAdversarialHistograms) {
  HISTEQ_REQUIRE_GPU();
  Stream stream;
  int cases = 0;
  for (int sk = 0; sk < kKinds; ++sk)
    for (int rk = 1; rk < kKinds; ++rk)  // an empty reference is refused before the device
      for (std::uint32_t seed = 1; seed <= 3; ++seed) {
        const Histogram src = hist_of(256, sk, seed * 31 + 7);
        const Histogram ref = hist_of(256, rk, seed * 17 + 3);
        const Lut want = match_lut(src.data(), ref.data());
        auto d_src = upload_typed(src);
        auto d_ref = upload_typed(ref);
        DeviceBuffer<std::uint8_t> d_lut(256);
        kernels::launch_match_lut_planes(d_src.get(), 1, d_ref.get(), true, d_lut.get(),
                                         stream.get());
        stream.sync();
        const std::vector<std::uint8_t> got = download(d_lut.get(), 256);
        ASSERT_EQ(got, std::vector<std::uint8_t>(want.begin(), want.end()))
            << "source kind " << sk << ", reference kind " << rk << ", seed " << seed;
        ++cases;
      }
  EXPECT_EQ(cases, kKinds * (kKinds - 1) * 3);
}

TEST(MatchLutGpu, PlanesTakeTheirOwnReferenceOrOneForAll) {
  HISTEQ_REQUIRE_GPU();
  Stream stream;
  std::vector<std::uint64_t> src, ref;
  std::vector<Histogram> srcs, refs;
  for (int p = 0; p < 3; ++p) {
    srcs.push_back(hist_of(256, 3 + p, 100 + p));
    refs.push_back(hist_of(256, 2 + 2 * p, 200 + p));
    src.insert(src.end(), srcs.back().begin(), srcs.back().end());
    ref.insert(ref.end(), refs.back().begin(), refs.back().end());
  }
  auto d_src = upload_typed(src);
  auto d_ref = upload_typed(ref);
  DeviceBuffer<std::uint8_t> d_lut(3 * 256);
  for (bool one : {false, true}) {
    kernels::launch_match_lut_planes(d_src.get(), 3, d_ref.get(), one, d_lut.get(), stream.get());
    stream.sync();
    const std::vector<std::uint8_t> got = download(d_lut.get(), 3 * 256);
    for (int p = 0; p < 3; ++p) {
      const Lut want =
          match_lut(srcs[std::size_t(p)].data(), refs[one ? 0 : std::size_t(p)].data());
      EXPECT_EQ(std::vector<std::uint8_t>(got.begin() + p * 256, got.begin() + (p + 1) * 256),
                std::vector<std::uint8_t>(want.begin(), want.end()))
          << "plane " << p << (one ? ", one reference" : ", a reference per plane");
    }
  }
}

TEST(MatchLutGpu, SixteenBitEqualsMatchLut16) {
  HISTEQ_REQUIRE_GPU();
  Stream stream;
  DeviceBuffer<std::uint64_t> scratch(kernels::match_lut_u16_scratch_words());
  DeviceBuffer<std::uint16_t> d_lut(65536);
  for (int sk = 0; sk < kKinds; ++sk)
    for (int rk = 1; rk < kKinds; ++rk) {
      const Histogram src = hist_of(65536, sk, 11u * std::uint32_t(sk) + 1);
      const Histogram ref = hist_of(65536, rk, 13u * std::uint32_t(rk) + 2);
      const std::vector<std::uint16_t> want = match_lut16(src.data(), ref.data());
      auto d_src = upload_typed(src);
      auto d_ref = upload_typed(ref);
      kernels::match_lut_u16(d_src.get(), d_ref.get(), d_lut.get(), scratch.get(), stream.get());
      stream.sync();
      const std::vector<std::uint16_t> got = download(d_lut.get(), 65536);
      ASSERT_EQ(got, want) << "source kind " << sk << ", reference kind " << rk;
    }
}

// ---- regions --------------------------------------------------------------------------------

/// A smooth image with noise (neighbours alike, as photographs), `channels` interleaved.
Image smooth_image(int w, int h, int channels, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Image img;
  img.width = w;
  img.height = h;
  img.channels = channels;
  img.pixels.resize(img.byte_count());
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c)
        img.pixels[(std::size_t(y) * std::size_t(w) + std::size_t(x)) * std::size_t(channels) +
                   std::size_t(c)] = std::uint8_t((x * (2 + c) + y * 3 + int(rng() % 9)) / 3 % 256);
  return img;
}

/// The regions the tests count: a rectangle inside, a rectangle of whole rows (alone and with a
/// mask), masks, a mask inside a rectangle, a rectangle of one pixel.
std::vector<std::pair<std::string, Region>> regions(int w, int h) {
  std::vector<std::pair<std::string, Region>> r;
  Region a;
  a.roi = Roi{w / 5, h / 4, w / 2, h / 3};
  r.emplace_back("rectangle", a);
  Region b;
  b.roi = Roi{0, h / 3, w, h / 2};
  r.emplace_back("whole rows", b);
  b.mask = mask_of(w, h, 1, 39);
  r.emplace_back("whole rows and a mask", b);
  for (int k = 0; k < 4; ++k) {
    Region m;
    m.mask = mask_of(w, h, k, 40 + std::uint32_t(k));
    r.emplace_back("mask " + std::to_string(k), m);
  }
  Region c;
  c.roi = Roi{1, 2, w - 3, h - 5};
  c.mask = mask_of(w, h, 1, 77);
  r.emplace_back("mask in a rectangle", c);
  Region d;
  d.roi = Roi{w - 1, h - 1, 1, 1};
  r.emplace_back("one pixel", d);
  return r;
}

/// Runs the 8-bit region kernel on `plane` placed `offset` bytes into its buffer and the mask
/// `mask_offset` bytes into its own (16-byte loads of both where their phases agree).
Histogram region_u8(const std::vector<std::uint8_t>& plane, int w, int h, const Region& region,
                    std::size_t offset, std::size_t mask_offset) {
  Stream stream;
  auto d_plane = test::upload_bytes(plane, offset);
  DeviceBuffer<std::uint8_t> d_mask;
  if (region.mask) d_mask = test::upload_bytes(region.mask->pixels, mask_offset);
  DeviceBuffer<std::uint64_t> d_hist(256);
  const kernels::RegionLaunch r =
      launch_of(region, w, h, d_plane.get() + offset,
                region.mask ? d_mask.get() + mask_offset : nullptr, d_hist.get(), stream.get());
  HISTEQ_CUDA_CHECK(cudaMemsetAsync(d_hist.get(), 0xFF, d_hist.bytes(), stream.get()));
  kernels::region_histogram_u8(r);
  stream.sync();
  return download(d_hist.get(), 256);
}

TEST(RegionHistogramGpu, EightBitEqualsTheCpuTwin) {
  HISTEQ_REQUIRE_GPU();
  int cases = 0;
  for (const auto& [w, h] : {std::pair{67, 45}, std::pair{256, 130}, std::pair{1000, 37}}) {
    const Image img = smooth_image(w, h, 1, 5);
    for (const auto& [name, region] : regions(w, h))
      for (std::size_t off : {0, 1, 13})
        for (std::size_t moff : {std::size_t(0), std::size_t(5), std::size_t(13)}) {
          const Histogram want = cpu::histogram(img.pixels.data(), w, h, region);
          EXPECT_EQ(region_u8(img.pixels, w, h, region, off, moff), want)
              << name << ", " << w << "x" << h << ", plane +" << off << ", mask +" << moff;
          ++cases;
        }
  }
  EXPECT_EQ(cases, 3 * 9 * 3 * 3);
}

TEST(RegionHistogramGpu, EightBitLargeMaskedPlanesAtEveryPhase) {
  HISTEQ_REQUIRE_GPU();
  // Large enough that each thread loops over several vector groups and the grid strides.
  const int w = 3001, h = 2003;
  const Image img = smooth_image(w, h, 1, 15);
  for (int kind : {0, 1})
    for (const bool rows : {false, true}) {
      Region region;
      region.mask = mask_of(w, h, kind, 60 + std::uint32_t(kind));
      if (rows) region.roi = Roi{0, h / 3, w, h / 2};
      const Histogram want = cpu::histogram(img.pixels.data(), w, h, region);
      for (const auto& [off, moff] :
           {std::pair{std::size_t(0), std::size_t(0)}, std::pair{std::size_t(1), std::size_t(5)}})
        EXPECT_EQ(region_u8(img.pixels, w, h, region, off, moff), want)
            << "mask " << kind << (rows ? " in whole rows" : "") << ", plane +" << off << ", mask +"
            << moff;
    }
}

TEST(RegionHistogramGpu, EightBitTallNarrowRectangles) {
  HISTEQ_REQUIRE_GPU();
  // More rows than the grid has warps: each warp takes several rows.
  const int w = 40, h = 20000;
  const Image img = smooth_image(w, h, 1, 16);
  Region rect;
  rect.roi = Roi{1, 0, w - 2, h};
  Region masked = rect;
  masked.mask = mask_of(w, h, 1, 61);
  for (const Region* r : {&rect, &masked})
    for (std::size_t off : {std::size_t(0), std::size_t(3)})
      EXPECT_EQ(region_u8(img.pixels, w, h, *r, off, off),
                cpu::histogram(img.pixels.data(), w, h, *r))
          << (r->mask ? "masked" : "rectangle") << ", +" << off;
}

/// hist_u16_region of `plane` (w x h) counted in `region`, downloaded.
Histogram region_u16(const std::vector<std::uint16_t>& plane, int w, int h, const Region& region) {
  Stream stream;
  auto d_plane = upload_typed(plane);
  DeviceBuffer<std::uint8_t> d_mask;
  if (region.mask) d_mask = test::upload_bytes(region.mask->pixels);
  DeviceBuffer<std::uint32_t> scratch(kernels::hist_u16_scratch_words());
  HISTEQ_CUDA_CHECK(cudaMemsetAsync(scratch.get(), 0, scratch.bytes(), stream.get()));
  DeviceBuffer<std::uint64_t> d_hist(65536);
  const kernels::RegionLaunch r =
      launch_of(region, w, h, d_plane.get(), region.mask ? d_mask.get() : nullptr, d_hist.get(),
                stream.get());
  HISTEQ_CUDA_CHECK(cudaMemsetAsync(d_hist.get(), 0xFF, d_hist.bytes(), stream.get()));
  kernels::hist_u16_region(r, scratch.get());
  stream.sync();
  return download(d_hist.get(), 65536);
}

TEST(RegionHistogramGpu, SixteenBitTallNarrowAndDominantLevels) {
  HISTEQ_REQUIRE_GPU();
  // More rows than the grid has warps (the row loop), and planes where the lanes of a warp hold
  // one level, a few levels, or all distinct ones (the per-value grouping of the atomics).
  const int w = 24, h = 20000;
  std::mt19937 rng(17);
  std::vector<std::vector<std::uint16_t>> planes(4, std::vector<std::uint16_t>(std::size_t(w) * h));
  for (std::size_t i = 0; i < planes[0].size(); ++i) {
    planes[0][i] = 0x8001;                                   // one level
    planes[1][i] = std::uint16_t(65533 + rng() % 3);         // three levels, the top ones
    planes[2][i] = std::uint16_t(rng());                     // mostly distinct
    planes[3][i] = std::uint16_t(rng() % 7 == 0 ? 0 : 512);  // a dominant level and zero
  }
  Region rect;
  rect.roi = Roi{1, 0, w - 2, h};
  Region masked = rect;
  masked.mask = mask_of(w, h, 1, 62);
  Region mask_only;
  mask_only.mask = mask_of(w, h, 0, 63);
  int k = 0;
  for (const auto& plane : planes) {
    for (const Region* r : {&rect, &masked, &mask_only})
      EXPECT_EQ(region_u16(plane, w, h, *r), cpu::histogram16(plane.data(), w, h, *r))
          << "plane " << k << (r->mask ? ", masked" : ", rectangle") << (r->roi ? "" : " alone");
    ++k;
  }
}

TEST(RegionHistogramGpu, SixteenBitEqualsTheCpuTwin) {
  HISTEQ_REQUIRE_GPU();
  Stream stream;
  for (const auto& [w, h] : {std::pair{67, 45}, std::pair{300, 211}}) {
    std::mt19937 rng(9);
    std::vector<std::uint16_t> plane(std::size_t(w) * std::size_t(h));
    for (std::size_t i = 0; i < plane.size(); ++i)
      plane[i] = std::uint16_t(1000 + (i % std::size_t(w)) * 37 + rng() % 300);
    auto d_plane = upload_typed(plane);
    DeviceBuffer<std::uint32_t> scratch(kernels::hist_u16_scratch_words());
    HISTEQ_CUDA_CHECK(cudaMemsetAsync(scratch.get(), 0, scratch.bytes(), stream.get()));
    DeviceBuffer<std::uint64_t> d_hist(65536);
    for (const auto& [name, region] : regions(w, h)) {
      DeviceBuffer<std::uint8_t> d_mask;
      if (region.mask) d_mask = test::upload_bytes(region.mask->pixels);
      const kernels::RegionLaunch r =
          launch_of(region, w, h, d_plane.get(), region.mask ? d_mask.get() : nullptr, d_hist.get(),
                    stream.get());
      HISTEQ_CUDA_CHECK(cudaMemsetAsync(d_hist.get(), 0xFF, d_hist.bytes(), stream.get()));
      kernels::hist_u16_region(r, scratch.get());
      stream.sync();
      EXPECT_EQ(download(d_hist.get(), 65536), cpu::histogram16(plane.data(), w, h, region))
          << name << ", " << w << "x" << h;
    }
  }
}

// ---- the stage sequences ---------------------------------------------------------------------

EqualizeOptions options(Backend b, Mode mode) {
  EqualizeOptions o;
  o.backend = b;
  o.mode = mode;
  return o;
}

/// The reference histograms of a mode (one per plane), from a second image.
std::shared_ptr<const std::vector<Histogram>> reference_of(const Image& ref, Mode mode) {
  EqualizeOptions o = options(Backend::cpu, mode);
  return std::make_shared<const std::vector<Histogram>>(image_histograms(ref, o));
}

/// GPU == CPU for one image and options: the output bytes, the counted histograms, the LUTs.
void expect_same(const Image& img, EqualizeOptions o, const std::string& what) {
  EqualizeReport rc, rg;
  o.backend = Backend::cpu;
  const Image want = equalize(img, o, &rc);
  o.backend = Backend::cuda;
  const Image got = equalize(img, o, &rg);
  EXPECT_EQ(got.pixels, want.pixels) << what;
  EXPECT_EQ(rg.histograms, rc.histograms) << what;
  EXPECT_EQ(rg.luts, rc.luts) << what;
  EXPECT_EQ(image_histograms(img, o), rc.histograms) << what << " (histograms only)";
}

TEST(MatchGpu, EqualizeWithAReferenceEqualsTheCpu) {
  HISTEQ_REQUIRE_GPU();
  const Image ref3 = smooth_image(90, 70, 3, 21);
  const Image ref1 = smooth_image(50, 40, 1, 22);
  for (const auto& [channels, mode] :
       {std::pair{1, Mode::gray}, std::pair{2, Mode::gray}, std::pair{3, Mode::rgb},
        std::pair{4, Mode::rgb}, std::pair{3, Mode::luma}, std::pair{3, Mode::gray}}) {
    const Image img = smooth_image(123, 77, channels, 3);
    EqualizeOptions o = options(Backend::cuda, mode);
    o.reference = reference_of(channels >= 3 ? ref3 : ref1, mode);
    expect_same(img, o, std::string("reference per plane, ") + to_string(mode));
    o.reference = reference_of(ref1, Mode::gray);  // one histogram for every plane
    expect_same(img, o, std::string("one reference, ") + to_string(mode));
  }
}

TEST(MatchGpu, AdversarialImagesAndReferences) {
  HISTEQ_REQUIRE_GPU();
  Image constant = smooth_image(40, 30, 1, 1);
  std::fill(constant.pixels.begin(), constant.pixels.end(), std::uint8_t(77));
  Image two = constant;
  for (std::size_t i = 0; i < two.pixels.size(); i += 3) two.pixels[i] = 200;
  const Image natural = smooth_image(40, 30, 1, 2);
  for (const Image* img : std::vector<const Image*>{&constant, &two, &natural})
    for (int rk = 1; rk < kKinds; ++rk) {
      EqualizeOptions o = options(Backend::cuda, Mode::gray);
      o.reference = std::make_shared<const std::vector<Histogram>>(
          std::vector<Histogram>{hist_of(256, rk, 5u + std::uint32_t(rk))});
      expect_same(*img, o, "reference kind " + std::to_string(rk));
    }
}

/// The message `f` throws as an Error ("" when it does not throw); *usage: whether a UsageError.
template <typename F>
std::string error_of(F f, bool* usage) {
  try {
    f();
  } catch (const UsageError& e) {
    *usage = true;
    return e.what();
  } catch (const Error& e) {
    *usage = false;
    return e.what();
  }
  return "";
}

/// The CPU and the GPU refuse `o` on `img` alike: the same exception type and message.
void expect_same_error(const Image& img, EqualizeOptions o, const std::string& what) {
  bool usage_cpu = false, usage_gpu = false;
  o.backend = Backend::cpu;
  const std::string cpu = error_of([&] { equalize(img, o); }, &usage_cpu);
  o.backend = Backend::cuda;
  const std::string gpu = error_of([&] { equalize(img, o); }, &usage_gpu);
  EXPECT_FALSE(cpu.empty()) << what;
  EXPECT_EQ(gpu, cpu) << what;
  EXPECT_EQ(usage_gpu, usage_cpu) << what;
}

TEST(MatchGpu, AReferenceThatDoesNotFitIsRefusedAsOnTheCpu) {
  HISTEQ_REQUIRE_GPU();
  const Image img = smooth_image(20, 10, 3, 4);
  EqualizeOptions o = options(Backend::cuda, Mode::rgb);
  o.reference = std::make_shared<const std::vector<Histogram>>(
      std::vector<Histogram>{hist_of(256, 3, 1), hist_of(256, 3, 2)});
  expect_same_error(img, o, "two histograms for three planes");
  o.reference =
      std::make_shared<const std::vector<Histogram>>(std::vector<Histogram>{Histogram(256, 0)});
  expect_same_error(img, o, "an empty reference");
  o.reference =
      std::make_shared<const std::vector<Histogram>>(std::vector<Histogram>{Histogram(255, 1)});
  expect_same_error(img, o, "255 bins");
}

TEST(RegionGpu, ARegionThatDoesNotFitIsRefusedAsOnTheCpu) {
  HISTEQ_REQUIRE_GPU();
  const Image img = smooth_image(20, 10, 1, 4);
  EqualizeOptions o = options(Backend::cuda, Mode::gray);
  o.region.roi = Roi{15, 0, 10, 5};
  expect_same_error(img, o, "a rectangle outside");
  o.region.roi.reset();
  o.region.mask = mask_of(21, 10, 2, 0);
  expect_same_error(img, o, "a mask of another size");
  auto zero = std::make_shared<Image>(*mask_of(20, 10, 2, 0));
  std::fill(zero->pixels.begin(), zero->pixels.end(), std::uint8_t(0));
  o.region.mask = zero;
  expect_same_error(img, o, "an empty mask");
}

TEST(RegionGpu, EqualizeOfARegionEqualsTheCpu) {
  HISTEQ_REQUIRE_GPU();
  for (const auto& [channels, mode] : {std::pair{1, Mode::gray}, std::pair{3, Mode::rgb},
                                       std::pair{3, Mode::luma}, std::pair{4, Mode::gray}}) {
    const int w = 131, h = 59;
    const Image img = smooth_image(w, h, channels, 8);
    for (const auto& [name, region] : regions(w, h)) {
      EqualizeOptions o = options(Backend::cuda, mode);
      o.region = region;
      expect_same(img, o, name + ", " + to_string(mode));
      o.reference = reference_of(smooth_image(33, 20, channels, 9), mode);  // both at once
      expect_same(img, o, name + " and a reference, " + to_string(mode));
    }
  }
}

TEST(RegionGpu, AFullMaskGivesTheUnmaskedBytes) {
  HISTEQ_REQUIRE_GPU();
  const Image img = smooth_image(257, 100, 3, 12);
  EqualizeOptions o = options(Backend::cuda, Mode::luma);
  EqualizeReport plain_rep, full_rep;
  const Image plain = equalize(img, o, &plain_rep);
  o.region.mask = mask_of(257, 100, 2, 0);
  const Image full = equalize(img, o, &full_rep);
  EXPECT_EQ(full.pixels, plain.pixels);
  EXPECT_EQ(full_rep.histograms, plain_rep.histograms);
  o.region.mask.reset();
  o.region.roi = Roi{0, 0, 257, 100};
  EXPECT_EQ(equalize(img, o).pixels, plain.pixels);
}

TEST(RegionGpu, OneEngineFollowsChangingMasksAndReferences) {
  HISTEQ_REQUIRE_GPU();
  // The engine keeps the last mask and reference on the device, keyed by pointer: a new one must
  // be uploaded, the same one reused, whatever the order.
  const int w = 150, h = 90;
  const Image img = smooth_image(w, h, 3, 30);
  const auto mask_a = mask_of(w, h, 0, 1);
  const auto mask_b = mask_of(w, h, 1, 2);
  const auto ref_a = reference_of(smooth_image(40, 40, 3, 31), Mode::rgb);
  const auto ref_b = reference_of(smooth_image(60, 20, 3, 32), Mode::rgb);
  gpu::ImageEngine engine(nullptr, /*pinned=*/true);
  const struct {
    std::shared_ptr<const Image> mask;
    std::shared_ptr<const std::vector<Histogram>> ref;
  } steps[] = {{mask_a, nullptr}, {mask_b, nullptr}, {mask_a, ref_a},   {mask_a, ref_b},
               {nullptr, ref_a},  {mask_b, ref_b},   {nullptr, nullptr}};
  int k = 0;
  for (const auto& step : steps) {
    EqualizeOptions o = options(Backend::cuda, Mode::rgb);
    o.region.mask = step.mask;
    o.reference = step.ref;
    EqualizeReport rg, rc;
    const Image got = engine.run(img, nullptr, o, true, true, rg);
    o.backend = Backend::cpu;
    const Image want = equalize(img, o, &rc);
    EXPECT_EQ(got.pixels, want.pixels) << "step " << k;
    EXPECT_EQ(rg.histograms, rc.histograms) << "step " << k;
    ++k;
  }
}

// ---- 16 bits ---------------------------------------------------------------------------------

Image16 image16(int w, int h, int channels, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Image16 img;
  img.width = w;
  img.height = h;
  img.channels = channels;
  img.pixels.resize(img.sample_count());
  for (std::size_t i = 0; i < img.pixels.size(); ++i)
    img.pixels[i] = std::uint16_t(2000 + (i / std::size_t(channels)) % std::size_t(w) * 97 +
                                  (i % std::size_t(channels)) * 5000 + rng() % 500);
  return img;
}

// gpu::Equalizer16::equalize_region (the region and the reference in device memory, as
// Python's CUDA arrays give them): the CPU's equalize16 of a gray plane with that Region and
// reference, every region kind, equalized and matched (one reference, one with gaps), in place
// and not; a rectangle not inside the plane is refused.
TEST(MatchGpu, SixteenBitRegionOnTheDeviceEqualsTheCpu) {
  HISTEQ_REQUIRE_GPU();
  gpu::Equalizer16 q;
  const int w = 97, h = 41;
  const Image16 img = image16(w, h, 1, 5);
  const std::vector<Histogram> one{
      histograms16(image16(50, 30, 1, 6), Mode::rgb, Backend::cpu).front()};
  const std::vector<Histogram> gappy{hist_of(65536, 3, 8)};
  std::vector<std::pair<std::string, Region>> rs = regions(w, h);
  rs.emplace_back("every pixel", Region{});
  int runs = 0;
  for (const auto& [name, region] : rs) {
    for (const std::vector<Histogram>* r :
         {static_cast<const std::vector<Histogram>*>(nullptr), &one, &gappy}) {
      for (const bool in_place : {false, true}) {
        SCOPED_TRACE(name + (r == nullptr ? ", equalize" : ", matched") +
                     (in_place ? ", in place" : ""));
        auto d_in = upload_typed(img.pixels);
        DeviceBuffer<std::uint16_t> d_out(img.pixels.size());
        DeviceBuffer<std::uint8_t> d_mask;
        if (region.mask) d_mask = upload_typed(region.mask->pixels);
        DeviceBuffer<std::uint64_t> d_ref;
        if (r != nullptr) d_ref = upload_typed(std::vector<std::uint64_t>(r->front()));
        const Roi roi = region.roi.value_or(Roi{0, 0, w, h});
        std::uint16_t* out = in_place ? d_in.get() : d_out.get();
        q.equalize_region(d_in.get(), out, w, h, roi.x, roi.y, roi.width, roi.height, d_mask.get(),
                          d_ref.get());
        q.synchronize();
        EXPECT_EQ(download(out, img.pixels.size()),
                  cpu::equalize16(img, Mode::rgb, 0, region, r).pixels);
        ++runs;
      }
    }
  }
  EXPECT_GT(runs, 40);
  DeviceBuffer<std::uint16_t> d(std::size_t(w) * h);
  for (const Roi& bad :
       {Roi{-1, 0, 5, 5}, Roi{0, 0, w + 1, h}, Roi{w - 2, 0, 3, h}, Roi{0, 0, 0, h}})
    EXPECT_THROW(
        q.equalize_region(d.get(), d.get(), w, h, bad.x, bad.y, bad.width, bad.height, nullptr),
        UsageError);
}

TEST(MatchGpu, SixteenBitEqualize16EqualsTheCpu) {
  HISTEQ_REQUIRE_GPU();
  for (int channels : {1, 2, 3, 4}) {
    const int w = 97, h = 41;
    const Image16 img = image16(w, h, channels, 3);
    const Image16 ref = image16(50, 30, channels, 4);
    const std::vector<Histogram> per_plane = histograms16(ref, Mode::rgb, Backend::cpu);
    const std::vector<Histogram> one{per_plane.front()};
    const std::vector<Histogram> gappy{hist_of(65536, 3, 8)};
    std::vector<std::pair<std::string, Region>> rs = regions(w, h);
    rs.emplace_back("every pixel", Region{});
    for (const auto& [name, region] : rs) {
      for (const std::vector<Histogram>* r :
           {static_cast<const std::vector<Histogram>*>(nullptr), &per_plane, &one, &gappy}) {
        std::string dev;
        const Image16 got = equalize16(img, Mode::rgb, Backend::cuda, &dev, region, r);
        EXPECT_NE(dev, "cpu");
        const Image16 want = cpu::equalize16(img, Mode::rgb, 0, region, r);
        EXPECT_EQ(got.pixels, want.pixels)
            << name << ", " << channels << " channels, "
            << (r == nullptr ? "equalize" : std::to_string(r->size()) + " reference(s)");
      }
      EXPECT_EQ(histograms16(img, Mode::rgb, Backend::cuda, nullptr, region),
                histograms16(img, Mode::rgb, Backend::cpu, nullptr, region))
          << name << ", " << channels << " channels";
    }
  }
}

TEST(MatchGpu, SixteenBitReferenceChecks) {
  HISTEQ_REQUIRE_GPU();
  const Image16 img = image16(20, 10, 3, 1);
  const std::vector<Histogram> two{hist_of(65536, 3, 1), hist_of(65536, 3, 2)};
  const std::vector<Histogram> empty{Histogram(65536, 0)};
  const std::vector<Histogram> narrow{Histogram(256, 1)};
  for (const std::vector<Histogram>* r : {&two, &empty, &narrow}) {
    bool usage_cpu = false, usage_gpu = false;
    const std::string cpu = error_of(
        [&] { equalize16(img, Mode::rgb, Backend::cpu, nullptr, Region{}, r); }, &usage_cpu);
    const std::string gpu = error_of(
        [&] { equalize16(img, Mode::rgb, Backend::cuda, nullptr, Region{}, r); }, &usage_gpu);
    EXPECT_FALSE(cpu.empty());
    EXPECT_EQ(gpu, cpu);
    EXPECT_EQ(usage_gpu, usage_cpu);
  }
  EXPECT_GT(total(hist_of(65536, 6, 1)), std::uint64_t(1) << 49);  // the large-count kind is large
}

/// Regions a 20 x 10 image refuses: a rectangle outside it, a mask of another size, an empty
/// mask, a mask that counts nothing inside its rectangle.
std::vector<std::pair<std::string, Region>> bad_regions() {
  std::vector<std::pair<std::string, Region>> r;
  Region a;
  a.roi = Roi{15, 0, 10, 5};
  r.emplace_back("a rectangle outside", a);
  Region b;
  b.mask = mask_of(21, 10, 2, 0);
  r.emplace_back("a mask of another size", b);
  auto zero = std::make_shared<Image>(*mask_of(20, 10, 2, 0));
  std::fill(zero->pixels.begin(), zero->pixels.end(), std::uint8_t(0));
  Region c;
  c.mask = zero;
  r.emplace_back("an empty mask", c);
  Region d;
  d.mask = mask_of(20, 10, 3, 0);  // one pixel, at (10, 3)
  d.roi = Roi{0, 5, 20, 5};
  r.emplace_back("a mask with nothing in the rectangle", d);
  return r;
}

/// The message Region::check gives for a 20 x 10 image ("" when it passes).
std::string check_message(const Region& r) {
  bool usage = false;
  return error_of([&] { r.check(20, 10, "image"); }, &usage);
}

// Runs without a GPU: the CPU backend refuses these before any count (no read outside the
// image or the mask), with Region::check's messages.
TEST(Region16Cpu, ARegionThatDoesNotFitIsRefusedBeforeAnyCount) {
  const Image16 img = image16(20, 10, 3, 1);
  for (const auto& [name, bad] : bad_regions()) {
    const Region& region = bad;  // (a structured binding is not captured by a C++17 lambda)
    const std::string want = check_message(region);
    ASSERT_FALSE(want.empty()) << name;
    bool usage = false;
    EXPECT_EQ(
        error_of([&] { histograms16(img, Mode::rgb, Backend::cpu, nullptr, region); }, &usage),
        want)
        << name;
    EXPECT_TRUE(usage) << name;
    usage = false;
    EXPECT_EQ(error_of([&] { equalize16(img, Mode::rgb, Backend::cpu, nullptr, region); }, &usage),
              want)
        << name;
    EXPECT_TRUE(usage) << name;
  }
}

TEST(Region16Gpu, ARegionThatDoesNotFitIsRefusedAsOnTheCpu) {
  HISTEQ_REQUIRE_GPU();
  const Image16 img = image16(20, 10, 3, 1);
  const std::vector<Histogram> ref{hist_of(65536, 3, 1)};
  for (const auto& [name, bad] : bad_regions())
    for (const std::vector<Histogram>* r :
         {static_cast<const std::vector<Histogram>*>(nullptr), &ref}) {
      const Region& region = bad;  // (a structured binding is not captured by a C++17 lambda)
      bool usage_cpu = false, usage_gpu = false;
      const std::string cpu = error_of(
          [&] { equalize16(img, Mode::rgb, Backend::cpu, nullptr, region, r); }, &usage_cpu);
      const std::string gpu = error_of(
          [&] { equalize16(img, Mode::rgb, Backend::cuda, nullptr, region, r); }, &usage_gpu);
      EXPECT_FALSE(cpu.empty()) << name;
      EXPECT_EQ(gpu, cpu) << name;
      EXPECT_EQ(usage_gpu, usage_cpu) << name;
      const std::string cpu_h = error_of(
          [&] { histograms16(img, Mode::rgb, Backend::cpu, nullptr, region); }, &usage_cpu);
      const std::string gpu_h = error_of(
          [&] { histograms16(img, Mode::rgb, Backend::cuda, nullptr, region); }, &usage_gpu);
      EXPECT_FALSE(cpu_h.empty()) << name;
      EXPECT_EQ(gpu_h, cpu_h) << name;
      EXPECT_EQ(usage_gpu, usage_cpu) << name;
    }
}

TEST(MatchGpu, SixteenBitReferencesCheckedInTheCpuTwinsOrder) {
  HISTEQ_REQUIRE_GPU();
  // Sizes before emptiness: an empty histogram ahead of one of 256 bins is the size error on
  // both backends; the first empty one in plane order otherwise.
  const Image16 img = image16(20, 10, 3, 2);
  const Histogram ok = hist_of(65536, 3, 3);
  const std::vector<std::vector<Histogram>> refs{
      {ok, Histogram(65536, 0), Histogram(256, 1)},
      {ok, Histogram(65536, 0), ok},
      {Histogram(255, 1), Histogram(65536, 0), ok},
      {Histogram(65536, 0), Histogram(65536, 0), Histogram(256, 1)}};
  for (std::size_t k = 0; k < refs.size(); ++k) {
    bool usage_cpu = false, usage_gpu = false;
    const std::string cpu = error_of(
        [&] { equalize16(img, Mode::rgb, Backend::cpu, nullptr, Region{}, &refs[k]); }, &usage_cpu);
    const std::string gpu =
        error_of([&] { equalize16(img, Mode::rgb, Backend::cuda, nullptr, Region{}, &refs[k]); },
                 &usage_gpu);
    EXPECT_FALSE(cpu.empty()) << "references " << k;
    EXPECT_EQ(gpu, cpu) << "references " << k;
    EXPECT_EQ(usage_gpu, usage_cpu) << "references " << k;
  }
}

// Runs without a GPU: the JPEG device route counts whole images; the executor never plans it
// with a region, and it takes matching's reference as its own option (Options::reference), not
// as per-image histograms: the route refuses a region or those at once, and a reference with no
// pixel (a usage error, as on the CPU) before it starts anything.
TEST(JpegDeviceRoute, RefusesARegionOrAPerImageReference) {
  detail::JpegDevices::Options o;
  o.equalize.region.roi = Roi{0, 0, 1, 1};
  const auto done = [](detail::DeviceJob*) {};
  EXPECT_THROW(detail::JpegDevices(o, done), Error);
  o.equalize.region = Region{};
  o.equalize.reference =
      std::make_shared<const std::vector<Histogram>>(std::vector<Histogram>{hist_of(256, 3, 1)});
  EXPECT_THROW(detail::JpegDevices(o, done), Error);
  o.equalize.reference.reset();
  Image empty;
  empty.channels = 3;
  o.reference = std::make_shared<const MatchReference>(empty, "empty.png");
  EXPECT_THROW(detail::JpegDevices(o, done), UsageError);
}

TEST(RegionGpu, TheEngineChecksBeforeItTouchesTheDevice) {
  HISTEQ_REQUIRE_GPU();
  // A refused run leaves the report as it was (its fields are set after the checks) and the
  // device output unwritten.
  const Image img = smooth_image(20, 10, 1, 4);
  gpu::ImageEngine engine(nullptr, /*pinned=*/false);
  for (const auto& [name, region] : bad_regions()) {
    EqualizeOptions o = options(Backend::cuda, Mode::gray);
    o.region = region;
    EqualizeReport rep;
    EXPECT_THROW(engine.run(img, nullptr, o, true, true, rep), UsageError) << name;
    EXPECT_TRUE(rep.backend.empty()) << name;
    std::vector<std::uint8_t> out(img.pixels.size(), 0);
    EXPECT_THROW(engine.run_into({img.pixels.data(), 20, 10, 1}, o, true, out.data(), rep),
                 UsageError)
        << name;
    EXPECT_TRUE(rep.backend.empty()) << name;
    auto d_in = test::upload_bytes(img.pixels);
    auto d_out = test::upload_bytes(std::vector<std::uint8_t>(img.pixels.size(), 0xA5));
    EXPECT_THROW(engine.run_device(d_in.get(), 20, 10, 1, o, d_out.get(), rep), UsageError) << name;
    EXPECT_TRUE(rep.backend.empty()) << name;
    EXPECT_EQ(download(d_out.get(), img.pixels.size()),
              std::vector<std::uint8_t>(img.pixels.size(), 0xA5))
        << name;
  }
  EqualizeOptions o = options(Backend::cuda, Mode::gray);
  o.reference =
      std::make_shared<const std::vector<Histogram>>(std::vector<Histogram>{Histogram(256, 0)});
  EqualizeReport rep;
  EXPECT_THROW(engine.run(img, nullptr, o, true, true, rep), UsageError);
  EXPECT_TRUE(rep.backend.empty());
}

TEST(RegionGpu, AMaskWhosePixelsWereReplacedIsUploadedAgain) {
  HISTEQ_REQUIRE_GPU();
  // The engine keys its uploaded mask by the image and its pixels' address and size: the same
  // image object with new pixels (a new buffer) must be counted with the new pixels.
  const int w = 150, h = 90;
  const Image img = smooth_image(w, h, 1, 33);
  auto mask = std::make_shared<Image>(*mask_of(w, h, 0, 1));
  gpu::ImageEngine engine(nullptr, /*pinned=*/false);
  EqualizeOptions o = options(Backend::cuda, Mode::gray);
  o.region.mask = mask;
  EqualizeReport first;
  (void)engine.run(img, nullptr, o, true, true, first);
  std::vector<std::uint8_t> other = mask_of(w, h, 1, 2)->pixels;
  mask->pixels.swap(other);  // the old buffer stays alive in `other`: a new address
  ASSERT_NE(mask->pixels.data(), other.data());
  EqualizeReport rg, rc;
  const Image got = engine.run(img, nullptr, o, true, true, rg);
  o.backend = Backend::cpu;
  const Image want = equalize(img, o, &rc);
  EXPECT_EQ(got.pixels, want.pixels);
  EXPECT_EQ(rg.histograms, rc.histograms);
  EXPECT_NE(rg.histograms, first.histograms);
}

}  // namespace
}  // namespace histeq
