// test_clahe_gpu.cpp — the CLAHE kernels (gpu::Clahe, histeq::clahe on Backend::cuda) equal to
// the CPU twin byte for byte: every OpenCV golden, random sizes and grids (both the fused
// privatized 8-bit path and the global-counter path), 16-bit, misaligned and in-place planes,
// repeated calls on one engine (the counters must come back zero). The engine tests run once per
// kernel configuration (kConfigs8, kConfigs16: the policy, and each path the policy takes only
// for planes larger than the tests' or on other devices, forced through gpu::Clahe::set_tuning).
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "gpu_test_support.hpp"
#include "histeq/clahe.hpp"
#include "histeq/clahe_gpu.hpp"
#include "histeq/error.hpp"
#include "histeq/image16.hpp"
#include "histeq/image_io.hpp"
#include "histeq/match.hpp"
#include "histeq/tuning.hpp"
#include "region_test_support.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

using test::Config;
using test::config;

template <class T>
std::vector<T> random_plane(std::mt19937& rng, int w, int h, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(std::size_t(w) * h);
  for (auto& x : v) x = T(d(rng));
  return v;
}

/// Smooth content with noise: peaked tile histograms, so clipping and redistribution matter.
template <class T>
std::vector<T> smooth_plane(std::mt19937& rng, int w, int h, int maxval) {
  std::normal_distribution<double> noise(0, maxval / 50.0);
  std::vector<T> v(std::size_t(w) * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const double b = maxval * (0.5 + 0.3 * std::sin(x * 0.02 + y * 0.01));
      v[std::size_t(y) * w + x] = T(std::clamp<double>(std::round(b + noise(rng)), 0, maxval));
    }
  return v;
}

ClaheOptions opts(double clip, int tx, int ty) {
  ClaheOptions o;
  o.clip_limit = clip;
  o.tiles_x = tx;
  o.tiles_y = ty;
  return o;
}

/// Programmatic dependent launch on every launch site (kernels/support/pdl.cuh's edges, all bits).
constexpr std::int32_t kEveryEdge = 0x7FFFFFFF;

/// 8-bit: the policy; the strip and the cell apply forced (the test planes are mostly below the
/// 4M pixels from which the policy takes them); small planes' tile histograms by bands and a
/// ticket instead of a cluster per tile row (the path of planes over 2M pixels); without and
/// with programmatic dependent launch everywhere.
const Config kConfigs8[] = {
    {"policy", Tuning{}},
    config("strip_apply", [](Tuning& t) { t.clahe.apply = ClaheTuning::Apply::strip; }),
    config("cell_apply", [](Tuning& t) { t.clahe.apply = ClaheTuning::Apply::cell; }),
    config("banded_small_planes", [](Tuning& t) { t.clahe.small_clusters = false; }),
    config("no_pdl", [](Tuning& t) { t.pdl_edges = 0; }),
    config("every_pdl", [](Tuning& t) { t.pdl_edges = kEveryEdge; }),
};

/// 16-bit: the policy; without the one-launch tile clusters (the path where they do not fit),
/// once with global-atomic tile histograms and the four-gather apply, once with packed tile
/// histograms, the LUT step and the pairs kernel, and the flat pair apply; without and with
/// programmatic dependent launch everywhere.
const Config kConfigs16[] = {
    {"policy", Tuning{}},
    config("atomic_tiles",
           [](Tuning& t) {
             t.clahe.fused16 = Choice::off;
             t.clahe.tiles16 = ClaheTuning::Tiles16::atomic;
             t.clahe.pairs16 = Choice::off;
           }),
    config("unfused",
           [](Tuning& t) {
             t.clahe.fused16 = Choice::off;
             t.clahe.cells16 = false;
           }),
    config("no_pdl", [](Tuning& t) { t.pdl_edges = 0; }),
    config("every_pdl", [](Tuning& t) { t.pdl_edges = kEveryEdge; }),
};

std::string config_name(const ::testing::TestParamInfo<Config>& p) { return p.param.name; }

/// The engine tests of 8-bit and 16-bit planes, each run under every configuration of its kind.
class ClaheGpu8 : public ::testing::TestWithParam<Config> {
 protected:
  gpu::Clahe engine() const {
    gpu::Clahe e;
    e.set_tuning(GetParam().tuning);
    return e;
  }
};
class ClaheGpu16 : public ClaheGpu8 {};
INSTANTIATE_TEST_SUITE_P(Configs, ClaheGpu8, ::testing::ValuesIn(kConfigs8), config_name);
INSTANTIATE_TEST_SUITE_P(Configs, ClaheGpu16, ::testing::ValuesIn(kConfigs16), config_name);

/// GPU CLAHE of a host plane, `offset` elements into its device buffer, in place or not.
template <class T>
std::vector<T> gpu_plane(gpu::Clahe& engine, const std::vector<T>& src, int w, int h,
                         const ClaheOptions& o, std::size_t offset = 0, bool in_place = false) {
  std::vector<T> padded(offset + src.size(), T(0));
  for (std::size_t i = 0; i < src.size(); ++i) padded[offset + i] = src[i];
  auto d_in = test::upload_typed(padded);
  DeviceBuffer<T> d_out(src.size() + offset);
  T* out = in_place ? d_in.get() + offset : d_out.get() + offset;
  if constexpr (sizeof(T) == 1)
    engine.apply(d_in.get() + offset, out, w, h, o);
  else
    engine.apply16(d_in.get() + offset, out, w, h, o);
  engine.synchronize();
  return test::download(out, src.size());
}

template <class T>
std::vector<T> cpu_plane(const std::vector<T>& src, int w, int h, const ClaheOptions& o) {
  std::vector<T> out(src.size());
  if constexpr (sizeof(T) == 1)
    cpu::clahe_plane(src.data(), w, h, o, out.data());
  else
    cpu::clahe_plane16(src.data(), w, h, o, out.data());
  return out;
}

/// The engine's per-tile LUTs of a plane equal cpu::clahe_luts / clahe_luts16.
template <class T>
void expect_luts_equal_cpu(gpu::Clahe& engine, const std::vector<T>& src, int w, int h,
                           const ClaheOptions& o) {
  constexpr std::size_t kBins = sizeof(T) == 1 ? 256 : 65536;
  auto d_in = test::upload_typed(src);
  const void* d_luts = engine.luts(d_in.get(), w, h, o, sizeof(T) == 2);
  engine.synchronize();
  std::vector<T> want(std::size_t(o.tiles_x) * std::size_t(o.tiles_y) * kBins);
  if constexpr (sizeof(T) == 1)
    cpu::clahe_luts(src.data(), w, h, o, want.data());
  else
    cpu::clahe_luts16(src.data(), w, h, o, want.data());
  EXPECT_EQ(test::download(static_cast<const T*>(d_luts), want.size()), want);
}

struct Case {
  int w, h, tx, ty;
  double clip;
};
const Case kCases[] = {
    {1, 1, 8, 8, 2.0},       {1, 1, 1, 1, 0.0},
    {2, 3, 8, 8, 2.0},       {7, 5, 8, 8, 2.0},
    {1, 37, 8, 8, 2.0},      {41, 1, 8, 8, 3.0},
    {64, 64, 8, 8, 2.0},     {64, 63, 8, 8, 2.0},
    {63, 64, 8, 8, 2.0},     {100, 37, 3, 7, 1.0},
    {257, 129, 16, 4, 4.0},  {128, 128, 64, 64, 2.0},
    {130, 70, 64, 64, 2.0},  {61, 59, 64, 64, 0.0},
    {300, 200, 1, 1, 2.0},   {301, 203, 2, 9, 0.01},
    {96, 96, 8, 8, 1000.0},  {1024, 1024, 8, 8, 2.0},
    {1023, 777, 8, 8, 2.0},  {2049, 1531, 13, 5, 3.0},
    {500, 300, 100, 3, 2.0},  // 100 tiles wide: the 8-bit global-counter path
    {4096, 64, 8, 8, 2.0},   {17, 4099, 8, 8, 2.0},
};

TEST_P(ClaheGpu8, EqualsCpuOnSizesAndGrids8) {
  HISTEQ_REQUIRE_GPU();
  std::mt19937 rng(2024);
  gpu::Clahe engine = this->engine();  // one engine for every case: counters back to zero
  for (const Case& c : kCases) {
    for (int kind = 0; kind < 3; ++kind) {
      const auto src = kind == 0   ? random_plane<std::uint8_t>(rng, c.w, c.h, 0, 255)
                       : kind == 1 ? smooth_plane<std::uint8_t>(rng, c.w, c.h, 255)
                                   : std::vector<std::uint8_t>(std::size_t(c.w) * c.h, 77);
      const auto o = opts(c.clip, c.tx, c.ty);
      const auto want = cpu_plane(src, c.w, c.h, o);
      ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o), want)
          << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty << " clip " << c.clip << " kind "
          << kind;
      ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o, 3), want) << "misaligned by 3";
      ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o, 16, true), want) << "in place";
    }
  }
}

// A clip limit whose clip reaches the tile's pixel count is no clipping on the device too (the
// geometry is shared: clahe_formula::make_geometry): 8- and 16-bit, at the boundary (clip_limit
// = bins: clip = the area), just below it, and at 1e12 / 1e308 (an overflowing float-to-int
// conversion before), against the CPU.
TEST(ClaheGpu, ClipAtOrAboveTheTileAreaIsNoClipping) {
  HISTEQ_REQUIRE_GPU();
  std::mt19937 rng(31);
  gpu::Clahe engine;
  const auto s8 = smooth_plane<std::uint8_t>(rng, 200, 120, 255);
  const auto s16 = smooth_plane<std::uint16_t>(rng, 130, 90, 65535);
  std::vector<std::uint8_t> peaked(64 * 64, 100);  // each 8x8 tile: 63 of 100, one 50
  for (int y = 0; y < 64; y += 8)
    for (int x = 0; x < 64; x += 8) peaked[std::size_t(y) * 64 + std::size_t(x)] = 50;
  const auto none8 = cpu_plane(s8, 200, 120, opts(0.0, 8, 8));
  const auto none16 = cpu_plane(s16, 130, 90, opts(0.0, 8, 8));
  const auto none_peaked = cpu_plane(peaked, 64, 64, opts(0.0, 8, 8));
  for (const double big : {1e12, 1e308}) {
    EXPECT_EQ(gpu_plane(engine, s8, 200, 120, opts(big, 8, 8)), none8) << big;
    EXPECT_EQ(gpu_plane(engine, s16, 130, 90, opts(big, 8, 8)), none16) << big;
    EXPECT_EQ(gpu_plane(engine, peaked, 64, 64, opts(big, 8, 8)), none_peaked) << big;
  }
  EXPECT_EQ(gpu_plane(engine, peaked, 64, 64, opts(256.0, 8, 8)), none_peaked);  // = the area
  EXPECT_EQ(gpu_plane(engine, s16, 130, 90, opts(65536.0, 8, 8)), none16);
  for (const double below : {255.99, 250.0}) {  // clip 63: nothing to cut; clip 62: cuts
    EXPECT_EQ(gpu_plane(engine, peaked, 64, 64, opts(below, 8, 8)),
              cpu_plane(peaked, 64, 64, opts(below, 8, 8)))
        << below;
  }
  EXPECT_NE(gpu_plane(engine, peaked, 64, 64, opts(250.0, 8, 8)), none_peaked);
}

TEST_P(ClaheGpu16, EqualsCpuOnSizesAndGrids16) {
  HISTEQ_REQUIRE_GPU();
  std::mt19937 rng(7);
  gpu::Clahe engine = this->engine();
  for (const Case& c : kCases) {
    if (std::size_t(c.tx) * c.ty > 1024) continue;
    for (int kind = 0; kind < 2; ++kind) {
      const auto src = kind == 0 ? random_plane<std::uint16_t>(rng, c.w, c.h, 0, 65535)
                                 : smooth_plane<std::uint16_t>(rng, c.w, c.h, 4095);
      const auto o = opts(c.clip, c.tx, c.ty);
      const auto want = cpu_plane(src, c.w, c.h, o);
      ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o), want)
          << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty << " clip " << c.clip << " kind "
          << kind;
      ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o, 1), want) << "misaligned by 1 sample";
    }
  }
}

// 16-bit tiles of 8192 samples and more are counted in packed 16-bit shared counters
// (clahe_hist.cu, tile_hist16_packed_kernel), with a spill to the tile's global counter each
// time a half reaches 0x8000: planes whose blocks see more than 32768 samples of one value
// (a 1x1 grid of 2048x1024 is cut into 32 parts of 64K samples), in the low half, the high half
// and both halves of one word, beside a plain random plane. (Configuration atomic_tiles: the
// global-atomic path and the four-gather apply instead.)
TEST_P(ClaheGpu16, Packed16SpillsExactly) {
  HISTEQ_REQUIRE_GPU();
  std::mt19937 rng(1616);
  gpu::Clahe engine = this->engine();
  const int w = 2048, h = 1024;
  const std::size_t n = std::size_t(w) * h;
  std::vector<std::vector<std::uint16_t>> planes;
  planes.emplace_back(n, std::uint16_t(1000));
  planes.emplace_back(n, std::uint16_t(40000));
  std::vector<std::uint16_t> both(n);
  for (std::size_t i = 0; i < n; ++i) both[i] = (i % 3) ? std::uint16_t(7) : std::uint16_t(32775);
  planes.push_back(both);
  planes.push_back(random_plane<std::uint16_t>(rng, w, h, 0, 65535));
  for (std::size_t k = 0; k < planes.size(); ++k) {
    for (const auto& o : {opts(0.0, 1, 1), opts(2.0, 1, 1), opts(2.0, 2, 1), opts(4.0, 3, 2)}) {
      ASSERT_EQ(gpu_plane(engine, planes[k], w, h, o), cpu_plane(planes[k], w, h, o))
          << "plane " << k << " grid " << o.tiles_x << "x" << o.tiles_y << " clip " << o.clip_limit;
    }
  }
}

// 16-bit tiles of at least 4096 samples are counted and turned into LUTs in one launch, by a
// cluster of 2, 4 or 8 blocks per tile (clahe_hist.cu, tile_clahe16_cluster_kernel: fewer
// blocks per tile the more tiles there are): grids that take each cluster size on a GPU of
// 100+ SMs, padded and unpadded, the vector walk (aligned, tiles inside the image) and the
// row walk (misaligned, edge tiles of a padded plane), clip 0, 2 and 40, random and smooth
// content, a constant plane whose blocks spill, in place, and the LUTs themselves. Planes
// large enough for LUT pairs with widths that are multiples of 8 are applied by cell columns
// (clahe_apply.cu, apply_cells16_kernel), the others by the flat kernel. (Configuration
// unfused: without the one-launch path and with the flat pair apply.)
TEST_P(ClaheGpu16, Fused16ClusterShapesEqualCpu) {
  HISTEQ_REQUIRE_GPU();
  std::mt19937 rng(16016);
  gpu::Clahe engine = this->engine();
  const Case cases[] = {
      {2048, 2048, 8, 8, 2.0},   // 64 tiles of 64 Ki samples: clusters of 2
      {2401, 2399, 6, 6, 2.0},   // 36 tiles, padded, LUT pairs: clusters of 2
      {2000, 2000, 5, 5, 0.0},   // 25 tiles, LUT pairs: clusters of 4
      {1000, 1003, 3, 3, 40.0},  // 9 tiles, padded: clusters of 8
      {1560, 520, 6, 2, 2.0},    // width a multiple of 8, tile width (260) not
      {2400, 2000, 7, 4, 2.0},   // LUT pairs applied by cell columns, cell edges inside vectors
      {1024, 2160, 1, 1, 2.0},   // unfused: 67 packed parts of 33 rows, the last below the tile
      {8192, 4, 1, 1, 2.0},      // one tile of 4 rows, clusters of 8: four ranks count nothing
      {4096, 5, 2, 2, 2.0},      // tiles of 3 padded rows (one reflected), clusters of 8
  };
  for (const Case& c : cases) {
    const auto o = opts(c.clip, c.tx, c.ty);
    for (int kind = 0; kind < 4; ++kind) {
      // Constant planes spill in the high half of a word (51234) and in the low half (1234).
      const auto src = kind == 0   ? random_plane<std::uint16_t>(rng, c.w, c.h, 0, 65535)
                       : kind == 1 ? smooth_plane<std::uint16_t>(rng, c.w, c.h, 65535)
                                   : std::vector<std::uint16_t>(std::size_t(c.w) * c.h,
                                                                kind == 2 ? 51234 : 1234);
      const auto want = cpu_plane(src, c.w, c.h, o);
      ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o), want)
          << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty << " kind " << kind;
      ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o, 3), want) << "misaligned, kind " << kind;
      ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o, 8, true), want) << "in place, kind " << kind;
    }
  }
  expect_luts_equal_cpu(engine, smooth_plane<std::uint16_t>(rng, 1024, 768, 65535), 1024, 768,
                        opts(2.0, 4, 4));
}

TEST_P(ClaheGpu8, LutsEqualCpu) {
  HISTEQ_REQUIRE_GPU();
  std::mt19937 rng(3);
  gpu::Clahe engine = this->engine();
  expect_luts_equal_cpu(engine, smooth_plane<std::uint8_t>(rng, 777, 555, 255), 777, 555,
                        opts(2.0, 8, 8));
}

TEST_P(ClaheGpu8, RandomSizesAndGrids) {
  HISTEQ_REQUIRE_GPU();
  std::mt19937 rng(555);
  gpu::Clahe engine = this->engine();
  std::uniform_int_distribution<int> size(1, 1500), grid(1, 64), clip(0, 8);
  for (int i = 0; i < 40; ++i) {
    const int w = size(rng), h = size(rng);
    const auto o = opts(clip(rng) * 0.75, grid(rng), grid(rng));
    const auto src = i % 2 ? smooth_plane<std::uint8_t>(rng, w, h, 255)
                           : random_plane<std::uint8_t>(rng, w, h, 0, 255);
    ASSERT_EQ(gpu_plane(engine, src, w, h, o), cpu_plane(src, w, h, o))
        << w << "x" << h << " grid " << o.tiles_x << "x" << o.tiles_y << " clip " << o.clip_limit;
  }
}

// Widths that are multiples of 16 take the 8-bit cell path of the apply (clahe_apply_cell.cu):
// random heights and grids, tiles from 1 pixel wide to wider than one 16-pixel slot per cell,
// in place and out of place.
TEST_P(ClaheGpu8, CellApplyRandomSizesAndGrids) {
  HISTEQ_REQUIRE_GPU();
  std::mt19937 rng(909);
  gpu::Clahe engine = this->engine();
  std::uniform_int_distribution<int> cols(1, 120), size(1, 1500), grid(1, 64), clip(0, 8);
  for (int i = 0; i < 40; ++i) {
    const int w = 16 * cols(rng), h = size(rng);
    const auto o = opts(clip(rng) * 0.75, grid(rng), grid(rng));
    const auto src = i % 2 ? smooth_plane<std::uint8_t>(rng, w, h, 255)
                           : random_plane<std::uint8_t>(rng, w, h, 0, 255);
    const auto want = cpu_plane(src, w, h, o);
    ASSERT_EQ(gpu_plane(engine, src, w, h, o), want)
        << w << "x" << h << " grid " << o.tiles_x << "x" << o.tiles_y << " clip " << o.clip_limit;
    ASSERT_EQ(gpu_plane(engine, src, w, h, o, 16, true), want) << "in place";
  }
}

// 8-bit planes of at most 2M padded pixels (the cluster histograms, tile_hist_cluster_kernel,
// then the apply), width a multiple of 16: one engine alternates geometries, grids up to 64 tile
// rows and 250 tile rows of 8 pixels, padded and unpadded, in place and out of place.
// Configurations no_pdl and every_pdl: without programmatic dependent launch, and with it on
// every launch site.
TEST_P(ClaheGpu8, SmallPlanesAcrossGeometries) {
  HISTEQ_REQUIRE_GPU();
  struct Small {
    int w, h, tx, ty;
    double clip;
  };
  const Small cases[] = {
      {1024, 1024, 8, 8, 2.0},   {512, 512, 64, 64, 2.0},   {1024, 1024, 2, 2, 2.0},
      {1216, 1300, 64, 64, 1.5}, {256, 64, 8, 8, 2.0},      {1920, 1080, 8, 8, 2.0},
      {1024, 1016, 8, 127, 3.0}, {2048, 1000, 16, 3, 0.0},  {16, 2000, 1, 250, 2.0},
      {1024, 1003, 8, 8, 2.0},   {1280, 1300, 64, 60, 4.0}, {32, 32, 1, 1, 2.0}};
  std::mt19937 rng(4242);
  gpu::Clahe engine = this->engine();
  for (int round = 0; round < 2; ++round) {
    for (const Small& c : cases) {
      const auto o = opts(c.clip, c.tx, c.ty);
      for (int kind = 0; kind < 2; ++kind) {
        const auto src = kind == 0 ? smooth_plane<std::uint8_t>(rng, c.w, c.h, 255)
                                   : random_plane<std::uint8_t>(rng, c.w, c.h, 0, 255);
        const auto want = cpu_plane(src, c.w, c.h, o);
        ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o), want)
            << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty << " kind " << kind;
        ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o, 16, true), want)
            << "in place " << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty;
      }
    }
  }
}

// Large planes with widths that are multiples of 16: the strip apply (clahe_apply_strip.cu)
// takes those of 4M pixels and more by default, and all of them in configuration strip_apply
// (cell_apply forces the cell kernel): cell edges on and off the 16-column slots (a slot that
// crosses into the next cell), padded grids, tiles 32 and 64 pixels wide (blocks narrowed so that
// their cells' LUT words fit), strips shorter than a block's rows, in place and out of place.
TEST_P(ClaheGpu8, StripApplyLargePlanes) {
  HISTEQ_REQUIRE_GPU();
  struct Big {
    int w, h, tx, ty;
  };
  const Big cases[] = {{1024, 1024, 8, 8},  {1936, 1031, 7, 5},   {2048, 1024, 64, 3},
                       {4096, 512, 64, 2},  {1024, 2048, 3, 64},  {1296, 1296, 1, 1},
                       {3072, 400, 12, 13}, {1040, 1100, 16, 16}, {2560, 1664, 8, 8},
                       {2576, 1700, 5, 9}};
  std::mt19937 rng(4242);
  gpu::Clahe engine = this->engine();
  int k = 0;
  for (const Big& c : cases) {
    for (double clip : {0.0, 2.0, 40.0}) {
      const auto o = opts(clip, c.tx, c.ty);
      const auto src = (k++ % 2) ? smooth_plane<std::uint8_t>(rng, c.w, c.h, 255)
                                 : random_plane<std::uint8_t>(rng, c.w, c.h, 0, 255);
      const auto want = cpu_plane(src, c.w, c.h, o);
      ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o), want)
          << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty << " clip " << clip;
      ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o, 16, true), want)
          << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty << " clip " << clip
          << " in place";
    }
  }
}

// Large 8-bit planes, most of them from 4M pixels (the strip apply by default; all of them in
// configuration strip_apply), on one engine that runs the cases twice over with LUT-only
// calls between them, so that every geometry starts from the counters and tickets the last one
// left (a ticket left non-zero, or a counter, shows as a wrong LUT): tile rows of one to many
// bands, grids of 64 tile rows, and in place with reflect-101 rows below the image that come
// from tile rows above the last (1000 = 62·16 + 8 rows, so the last tile row of 16 is all
// padding, read from rows 975-998 of three tile rows).
TEST_P(ClaheGpu8, LargePlanesAcrossGeometries) {
  HISTEQ_REQUIRE_GPU();
  struct Case {
    int w, h, tx, ty;
    double clip;
  };
  const Case cases[] = {{4096, 1024, 8, 8, 2.0},  {2048, 2100, 8, 64, 2.0},
                        {1024, 1000, 8, 64, 2.0}, {4096, 4096, 8, 8, 2.0},
                        {2560, 1700, 5, 9, 40.0}, {8192, 520, 16, 3, 0.0},
                        {2048, 4104, 32, 50, 3.0}};
  std::mt19937 rng(31337);
  gpu::Clahe engine = this->engine();
  for (int round = 0; round < 2; ++round) {
    int k = 0;
    for (const Case& c : cases) {
      const auto o = opts(c.clip, c.tx, c.ty);
      const auto src = (k++ + round) % 2 ? smooth_plane<std::uint8_t>(rng, c.w, c.h, 255)
                                         : random_plane<std::uint8_t>(rng, c.w, c.h, 0, 255);
      const auto want = cpu_plane(src, c.w, c.h, o);
      ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o, 16, true), want)
          << "in place " << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty;
      ASSERT_EQ(gpu_plane(engine, src, c.w, c.h, o), want)
          << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty;
      auto d_src = test::upload_typed(src);
      engine.luts(d_src.get(), c.w, c.h, o, false);
      engine.synchronize();
    }
  }
}

TEST(ClaheGpu, GoldensAndColourModesEqualCpu) {
  HISTEQ_REQUIRE_GPU();
  const std::string shared = test::shared_dir();
  if (shared.empty()) GTEST_SKIP() << "no ../shared next to the checkout";
  const std::filesystem::path dir = std::filesystem::path(shared) / "golden" / "opencv-4.6-clahe";
  const std::regex re(R"((\w+?)(16)?__clip([0-9.]+)_t(\d+)x(\d+)\.png)");
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::smatch m;
    const std::string fn = e.path().filename().string();
    if (!std::regex_match(fn, m, re)) continue;
    SCOPED_TRACE(fn);
    auto o = opts(std::stod(m[3]), std::stoi(m[4]), std::stoi(m[5]));
    if (m[2].matched) {
      const Image16 in = load_image16((dir / (std::string(m[1]) + "16.png")).string());
      const Image16 got = clahe(in, o, Backend::cuda);
      EXPECT_TRUE(got.pixels == cpu::clahe(in, o).pixels);
      EXPECT_TRUE(got.pixels == load_image16(e.path().string()).pixels);
    } else {
      const Image in = load_image(shared + "/natural/" + std::string(m[1]) + ".png");
      for (Mode mode : {Mode::luma, Mode::rgb, Mode::gray}) {
        o.mode = mode;
        const Image got = clahe(in, o, Backend::cuda);
        EXPECT_TRUE(got.pixels == cpu::clahe(in, o).pixels) << to_string(mode);
      }
    }
    ++n;
  }
  EXPECT_GT(n, 0);
}

// Masked CLAHE (ClaheOptions::region): the engine's masked tile histograms and LUTs
// (kernels/clahe/clahe_masked.cu) and its output equal the CPU twin byte for byte, 8 and 16
// bits, on sizes the grid does not divide, with masks, rectangles and both, tiles without a
// counted pixel (identity LUTs) included, on random, smooth and constant planes and under each
// kernel configuration (misaligned and in place too); a full mask gives the unmasked kernels'
// bytes; the engine rejects a bad region; the host-level call says which device ran.
std::vector<Region> masked_regions(int w, int h, std::uint32_t seed) {
  std::mt19937 rng(seed);
  auto mask = [&](auto pred) {
    auto m = std::make_shared<Image>();
    m->width = w;
    m->height = h;
    m->channels = 1;
    m->pixels.resize(std::size_t(w) * std::size_t(h));
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) m->pixels[std::size_t(y) * std::size_t(w) + x] = pred(x, y);
    m->pixels[0] = 1;  // never empty
    return std::shared_ptr<const Image>(m);
  };
  std::vector<Region> v(4);
  v[0].mask = mask([&](int, int) { return std::uint8_t(rng() % 5 == 0 ? 1 + rng() % 255 : 0); });
  v[1].mask = mask([&](int x, int) { return std::uint8_t(x < (w + 2) / 3 ? 255 : 0); });
  v[2].roi = Roi{w / 4, h / 3, std::max(1, w / 2), std::max(1, h / 2)};
  v[3].mask = v[0].mask;
  v[3].roi = Roi{0, 0, std::max(1, w / 2), h};
  return v;
}

/// A test plane of one kind: 0 random, 1 smooth (peaked tile histograms: the clip's
/// redistribution is non-zero; 16 bits at 12-bit depth), 2 constant.
template <class T>
std::vector<T> plane_of_kind(std::mt19937& rng, int kind, int w, int h) {
  constexpr int kMax = sizeof(T) == 1 ? 255 : 65535;
  if (kind == 0) return random_plane<T>(rng, w, h, 0, kMax);
  if (kind == 1) return smooth_plane<T>(rng, w, h, sizeof(T) == 1 ? 255 : 4095);
  return std::vector<T>(std::size_t(w) * std::size_t(h), T(sizeof(T) == 1 ? 77 : 3000));
}

/// A one-channel mask of w x h, its bytes from value(x, y).
template <typename Value>
std::shared_ptr<const Image> mask_image(int w, int h, Value value) {
  auto m = std::make_shared<Image>();
  m->width = w;
  m->height = h;
  m->channels = 1;
  m->pixels.resize(std::size_t(w) * std::size_t(h));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) m->pixels[std::size_t(y) * std::size_t(w) + x] = value(x, y);
  return m;
}

TEST(ClaheMaskedGpu, EqualsTheCpuTwin8And16) {
  HISTEQ_REQUIRE_GPU();
  gpu::Clahe engine;
  std::mt19937 rng(31);
  int runs = 0;
  for (const Case& c : kCases) {
    for (const Region& region : masked_regions(c.w, c.h, std::uint32_t(c.w * 7 + c.h))) {
      for (int kind = 0; kind < 3; ++kind) {
        ClaheOptions o;
        o.clip_limit = c.clip;
        o.tiles_x = c.tx;
        o.tiles_y = c.ty;
        o.region = region;
        ClaheOptions plain = o;
        plain.region = Region{};
        SCOPED_TRACE(std::to_string(c.w) + "x" + std::to_string(c.h) + " grid " +
                     std::to_string(c.tx) + "x" + std::to_string(c.ty) + " kind " +
                     std::to_string(kind));
        const auto s8 = plane_of_kind<std::uint8_t>(rng, kind, c.w, c.h);
        ASSERT_EQ(gpu_plane(engine, s8, c.w, c.h, o), cpu_plane(s8, c.w, c.h, o));
        expect_luts_equal_cpu(engine, s8, c.w, c.h, o);
        // the unmasked call after a masked one: the counters were left zero
        ASSERT_EQ(gpu_plane(engine, s8, c.w, c.h, plain), cpu_plane(s8, c.w, c.h, plain));
        ++runs;
        if (c.tx * c.ty > 256) continue;  // the twin's 65536-entry LUTs: keep memory small
        const auto s16 = plane_of_kind<std::uint16_t>(rng, kind, c.w, c.h);
        ASSERT_EQ(gpu_plane(engine, s16, c.w, c.h, o), cpu_plane(s16, c.w, c.h, o));
        expect_luts_equal_cpu(engine, s16, c.w, c.h, o);
        ASSERT_EQ(gpu_plane(engine, s16, c.w, c.h, plain), cpu_plane(s16, c.w, c.h, plain));
      }
    }
  }
  EXPECT_GT(runs, 240);
}

TEST(ClaheMaskedGpu, HostCallsSayWhichDeviceRan) {
  std::mt19937 rng(21);
  Image img;
  img.width = 70;
  img.height = 45;
  img.channels = 3;
  img.pixels = random_plane<std::uint8_t>(rng, 70 * 3, 45, 0, 255);
  ClaheOptions o;
  o.clip_limit = 2.0;
  o.tiles_x = 4;
  o.tiles_y = 3;
  o.region = masked_regions(70, 45, 5)[0];
  ClaheOptions plain = o;
  plain.region = Region{};
  for (Mode mode : {Mode::luma, Mode::rgb, Mode::gray}) {
    o.mode = plain.mode = mode;
    const Image want = cpu::clahe(img, o);
    ASSERT_FALSE(want.pixels == cpu::clahe(img, plain).pixels);  // the mask matters
    std::string used;
    EXPECT_TRUE(clahe(img, o, Backend::cpu, &used).pixels == want.pixels);
    EXPECT_EQ(used, "cpu");
    if (!test::gpu_available(nullptr)) continue;
    used.clear();
    EXPECT_TRUE(clahe(img, o, Backend::cuda, &used).pixels == want.pixels) << to_string(mode);
    EXPECT_NE(used, "cpu");
  }
  if (!test::gpu_available(nullptr)) GTEST_SKIP() << "the CPU half ran; no usable CUDA device";
}

TEST(ClaheMaskedGpu, EngineRejectsABadRegion) {
  HISTEQ_REQUIRE_GPU();
  gpu::Clahe engine;
  const int w = 40, h = 30;
  DeviceBuffer<std::uint8_t> d8(std::size_t(w) * h);
  DeviceBuffer<std::uint16_t> d16(std::size_t(w) * h);
  std::vector<Region> bad(5);
  bad[0].mask = mask_image(w + 1, h, [](int, int) { return std::uint8_t(1); });  // wrong size
  bad[1].mask = mask_image(w, h - 1, [](int, int) { return std::uint8_t(1); });  // wrong size
  bad[2].roi = Roi{w - 5, 0, 10, h};                                             // past the edge
  bad[3].mask = mask_image(w, h, [](int, int) { return std::uint8_t(0); });      // no pixel
  bad[4].mask = mask_image(w, h, [](int x, int y) { return std::uint8_t(x + y == 0); });
  bad[4].roi = Roi{1, 1, w - 1, h - 1};  // the mask's only pixel is outside: no pixel
  for (std::size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE("bad region " + std::to_string(i));
    ClaheOptions o = opts(2.0, 4, 3);
    o.region = bad[i];
    EXPECT_THROW(engine.apply(d8.get(), d8.get(), w, h, o), UsageError);
    EXPECT_THROW(engine.apply16(d16.get(), d16.get(), w, h, o), UsageError);
  }
  // the engine still works after the rejections
  std::mt19937 rng(77);
  ClaheOptions o = opts(2.0, 4, 3);
  o.region = masked_regions(w, h, 3)[0];
  const auto s8 = smooth_plane<std::uint8_t>(rng, w, h, 255);
  EXPECT_EQ(gpu_plane(engine, s8, w, h, o), cpu_plane(s8, w, h, o));
  const auto s16 = smooth_plane<std::uint16_t>(rng, w, h, 4095);
  EXPECT_EQ(gpu_plane(engine, s16, w, h, o), cpu_plane(s16, w, h, o));
}

/// A region counting every pixel (a full mask: region.all() is false, so the masked kernels run)
/// gives exactly the unmasked kernels' bytes, 8 and 16 bits, sizes the grid divides and not.
TEST(ClaheMaskedGpu, FullMaskEqualsTheUnmaskedKernels) {
  HISTEQ_REQUIRE_GPU();
  gpu::Clahe engine;
  std::mt19937 rng(5);
  const Case cases[] = {{64, 64, 8, 8, 2.0},    {128, 96, 4, 3, 3.0},   {100, 37, 3, 7, 1.0},
                        {1023, 777, 8, 8, 2.0}, {130, 70, 16, 16, 2.0}, {257, 129, 16, 4, 0.0}};
  for (const Case& c : cases) {
    ClaheOptions plain = opts(c.clip, c.tx, c.ty);
    ClaheOptions full = plain;
    full.region.mask =
        mask_image(c.w, c.h, [&](int, int) { return std::uint8_t(1 + rng() % 255); });
    ClaheOptions whole = plain;  // a rectangle of the whole image
    whole.region.roi = Roi{0, 0, c.w, c.h};
    ASSERT_FALSE(full.region.all());
    ASSERT_FALSE(whole.region.all());
    for (int kind = 0; kind < 2; ++kind) {
      SCOPED_TRACE(std::to_string(c.w) + "x" + std::to_string(c.h) + " grid " +
                   std::to_string(c.tx) + "x" + std::to_string(c.ty) + " kind " +
                   std::to_string(kind));
      const auto s8 = plane_of_kind<std::uint8_t>(rng, kind, c.w, c.h);
      const auto want8 = gpu_plane(engine, s8, c.w, c.h, plain);
      EXPECT_EQ(gpu_plane(engine, s8, c.w, c.h, full), want8);
      EXPECT_EQ(gpu_plane(engine, s8, c.w, c.h, whole), want8);
      EXPECT_EQ(want8, cpu_plane(s8, c.w, c.h, plain));
      const auto s16 = plane_of_kind<std::uint16_t>(rng, kind, c.w, c.h);
      const auto want16 = gpu_plane(engine, s16, c.w, c.h, plain);
      EXPECT_EQ(gpu_plane(engine, s16, c.w, c.h, full), want16);
      EXPECT_EQ(gpu_plane(engine, s16, c.w, c.h, whole), want16);
      EXPECT_EQ(want16, cpu_plane(s16, c.w, c.h, plain));
    }
  }
}

/// The masked path under each kernel configuration (the strip and cell apply, programmatic
/// dependent launch everywhere, ...), with a misaligned and an in-place call.
const Case kMaskedCases[] = {
    {7, 5, 8, 8, 2.0},        {64, 63, 8, 8, 2.0},    {257, 129, 16, 4, 4.0},
    {130, 70, 64, 64, 2.0},   {1023, 777, 8, 8, 2.0}, {500, 300, 100, 3, 2.0},
    {2049, 1531, 13, 5, 3.0},
};

template <class T>
std::vector<T> gpu_plane_region(gpu::Clahe& engine, const std::vector<T>& src, int w, int h,
                                const ClaheOptions& o, const Region& region, std::size_t offset,
                                bool in_place);

/// Each masked case on the engine (with the region as ClaheOptions::region, or, on_device,
/// given to apply_region in device memory) against the CPU twin.
template <class T>
void expect_masked_configs_equal_cpu(gpu::Clahe& engine, std::uint32_t seed,
                                     bool on_device = false) {
  std::mt19937 rng(seed);
  int i = 0;
  for (const Case& c : kMaskedCases) {
    if (sizeof(T) == 2 && c.tx * c.ty > 256) continue;
    for (const Region& region : masked_regions(c.w, c.h, std::uint32_t(c.w + 3 * c.h))) {
      ClaheOptions o = opts(c.clip, c.tx, c.ty);
      o.region = region;
      const auto src = plane_of_kind<T>(rng, 1 - (i % 2), c.w, c.h);
      const std::size_t offset = i % 3 == 1 ? 3 : 0;  // misaligned
      const bool in_place = i % 3 == 2;
      SCOPED_TRACE(std::to_string(c.w) + "x" + std::to_string(c.h) + " grid " +
                   std::to_string(c.tx) + "x" + std::to_string(c.ty) + " offset " +
                   std::to_string(offset) + (in_place ? " in place" : "") +
                   (on_device ? " (region on the device)" : ""));
      const std::vector<T> got =
          on_device ? gpu_plane_region(engine, src, c.w, c.h, opts(c.clip, c.tx, c.ty), region,
                                       offset, in_place)
                    : gpu_plane(engine, src, c.w, c.h, o, offset, in_place);
      ASSERT_EQ(got, cpu_plane(src, c.w, c.h, o));
      ++i;
    }
  }
  EXPECT_GT(i, 8);
}

TEST_P(ClaheGpu8, MaskedEqualsCpu) {
  HISTEQ_REQUIRE_GPU();
  gpu::Clahe engine = this->engine();
  expect_masked_configs_equal_cpu<std::uint8_t>(engine, 41);
}

TEST_P(ClaheGpu16, MaskedEqualsCpu) {
  HISTEQ_REQUIRE_GPU();
  gpu::Clahe engine = this->engine();
  expect_masked_configs_equal_cpu<std::uint16_t>(engine, 43);
}

/// A mask leaving one whole tile uncounted: that tile's CPU LUT is the identity (and another
/// tile's is not), and the GPU's LUTs and output equal the CPU's, 8 and 16 bits.
template <class T>
void expect_identity_tile(gpu::Clahe& engine, int w, int h) {
  constexpr std::size_t kBins = sizeof(T) == 1 ? 256 : 65536;
  std::mt19937 rng(9);
  ClaheOptions o = opts(2.0, 4, 4);
  const int tw = w / 4, th = h / 4;  // w, h divisible by 4: tile (1, 2) exactly
  o.region.mask = mask_image(w, h, [&](int x, int y) {
    return std::uint8_t(x >= tw && x < 2 * tw && y >= 2 * th && y < 3 * th ? 0 : 1 + rng() % 255);
  });
  const auto src = plane_of_kind<T>(rng, 0, w, h);
  std::vector<T> luts(16 * kBins);
  if constexpr (sizeof(T) == 1)
    cpu::clahe_luts(src.data(), w, h, o, luts.data());
  else
    cpu::clahe_luts16(src.data(), w, h, o, luts.data());
  auto identity = [&](std::size_t tile) {
    for (std::size_t v = 0; v < kBins; ++v)
      if (luts[tile * kBins + v] != T(v)) return false;
    return true;
  };
  EXPECT_TRUE(identity(2 * 4 + 1));
  EXPECT_FALSE(identity(0));
  expect_luts_equal_cpu(engine, src, w, h, o);
  EXPECT_EQ(gpu_plane(engine, src, w, h, o), cpu_plane(src, w, h, o));
}

TEST(ClaheMaskedGpu, UncountedTileHasTheIdentityLut) {
  HISTEQ_REQUIRE_GPU();
  gpu::Clahe engine;
  expect_identity_tile<std::uint8_t>(engine, 128, 96);
  expect_identity_tile<std::uint16_t>(engine, 128, 96);
}

/// apply_region / apply16_region (the region on the device, as Python's CUDA arrays give it):
/// the bytes of apply with that ClaheOptions::region, 8 and 16 bits, masks, rectangles and
/// both, misaligned and in place; a region counting no pixel leaves the plane as it was; a
/// rectangle not inside the plane, or a host region as well, is refused.
template <class T>
std::vector<T> gpu_plane_region(gpu::Clahe& engine, const std::vector<T>& src, int w, int h,
                                const ClaheOptions& o, const Region& region, std::size_t offset,
                                bool in_place) {
  std::vector<T> padded(offset + src.size(), T(0));
  std::copy(src.begin(), src.end(), padded.begin() + std::ptrdiff_t(offset));
  auto d_in = test::upload_typed(padded);
  DeviceBuffer<T> d_out(src.size() + offset);
  T* out = in_place ? d_in.get() + offset : d_out.get() + offset;
  DeviceBuffer<std::uint8_t> d_mask;
  if (region.mask) d_mask = test::upload_typed(region.mask->pixels);
  const Roi r = region.roi ? *region.roi : Roi{0, 0, w, h};
  if constexpr (sizeof(T) == 1)
    engine.apply_region(d_in.get() + offset, out, w, h, o, r.x, r.y, r.width, r.height,
                        d_mask.get());
  else
    engine.apply16_region(d_in.get() + offset, out, w, h, o, r.x, r.y, r.width, r.height,
                          d_mask.get());
  engine.synchronize();
  return test::download(out, src.size());
}

template <class T>
void expect_device_regions_equal_cpu(gpu::Clahe& engine, std::uint32_t seed) {
  expect_masked_configs_equal_cpu<T>(engine, seed, /*on_device=*/true);
  std::mt19937 rng(seed);
  // a region counting no pixel: every LUT the identity, the plane unchanged
  const int w = 70, h = 45;
  Region none;
  none.mask = mask_image(w, h, [](int, int) { return std::uint8_t(0); });
  const auto src = plane_of_kind<T>(rng, 0, w, h);
  EXPECT_EQ(gpu_plane_region(engine, src, w, h, opts(2.0, 4, 3), none, 0, false), src);
  // refused: a rectangle not inside the plane, an empty one, and a host region as well
  DeviceBuffer<T> d(std::size_t(w) * h);
  const Roi bad[] = {{-1, 0, 10, 10},  {0, 0, w + 1, h}, {w - 5, 0, 6, h},
                     {0, h - 1, w, 2}, {0, 0, 0, h},     {0, 0, w, 0}};
  for (const Roi& r : bad) {
    if constexpr (sizeof(T) == 1)
      EXPECT_THROW(engine.apply_region(d.get(), d.get(), w, h, opts(2.0, 4, 3), r.x, r.y, r.width,
                                       r.height, nullptr),
                   UsageError);
    else
      EXPECT_THROW(engine.apply16_region(d.get(), d.get(), w, h, opts(2.0, 4, 3), r.x, r.y, r.width,
                                         r.height, nullptr),
                   UsageError);
  }
  ClaheOptions both = opts(2.0, 4, 3);
  both.region.roi = Roi{0, 0, 10, 10};
  if constexpr (sizeof(T) == 1)
    EXPECT_THROW(engine.apply_region(d.get(), d.get(), w, h, both, 0, 0, w, h, nullptr),
                 UsageError);
  else
    EXPECT_THROW(engine.apply16_region(d.get(), d.get(), w, h, both, 0, 0, w, h, nullptr),
                 UsageError);
}

TEST(ClaheMaskedGpu, DeviceRegionEqualsTheHostRegion) {
  HISTEQ_REQUIRE_GPU();
  gpu::Clahe engine;
  expect_device_regions_equal_cpu<std::uint8_t>(engine, 51);
  expect_device_regions_equal_cpu<std::uint16_t>(engine, 53);
}

TEST(ClaheBench, ParsesTheClaheOption) {  // CPU-only
  const bench::Options o = bench::parse_args({"--clahe", "--size", "1M"});
  EXPECT_TRUE(o.clahe);
  EXPECT_FALSE(o.equalize);
  EXPECT_EQ(o.types, std::vector<SampleType>{SampleType::u8});
  EXPECT_EQ(o.bins, std::vector<int>{256});
  EXPECT_THROW(bench::parse_args({"--clahe", "--type", "i32"}), UsageError);
  EXPECT_THROW(bench::parse_args({"--clahe", "--bins", "64"}), UsageError);
  EXPECT_THROW(bench::parse_args({"--clahe", "--equalize"}), UsageError);
}

}  // namespace
}  // namespace histeq
