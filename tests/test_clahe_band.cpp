// test_clahe_band.cpp — the CLAHE tile-histogram kernel's decomposition
// (kernels/clahe/clahe_band.cuh: bands of rows per block, 16-byte vectors with head/tail, column
// carry, reflect-101 padding) run on the CPU, block by block and thread by thread, against tile
// histograms of a materialized padded image. CPU-only: no GPU needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "clahe/clahe_band.cuh"
#include "histeq/clahe_formula.hpp"

namespace histeq {
namespace {
namespace cf = clahe_formula;

template <class T>
std::vector<std::uint32_t> reference_tiles(const std::vector<T>& src, const cf::Geometry& g) {
  std::vector<std::uint32_t> h(std::size_t(g.tiles()) * g.hist_size, 0);
  for (int y = 0; y < g.padded_h; ++y)
    for (int x = 0; x < g.padded_w; ++x) {
      const T v =
          src[std::size_t(cf::reflect101(y, g.height)) * g.width + cf::reflect101(x, g.width)];
      const int t = (y / g.tile_h) * g.tiles_x + x / g.tile_w;
      h[std::size_t(t) * g.hist_size + v]++;
    }
  return h;
}

template <class T>
std::vector<std::uint32_t> kernel_tiles(const T* in, const cf::Geometry& g, int target_blocks,
                                        int min_rows, unsigned threads) {
  std::vector<std::uint32_t> h(std::size_t(g.tiles()) * g.hist_size, 0);
  const auto split =
      kernels::clahe_detail::split_bands(g.tile_h, g.tiles_y, target_blocks, min_rows);
  EXPECT_GE(split.bands * split.rows, g.tile_h);
  EXPECT_LT((split.bands - 1) * split.rows, g.tile_h);
  for (int b = 0; b < split.bands * g.tiles_y; ++b) {
    const int ty = b / split.bands, band = b % split.bands;
    const int yp0 = ty * g.tile_h + band * split.rows;
    const int yp1 = std::min(yp0 + split.rows, (ty + 1) * g.tile_h);
    auto count = [&](int tx, int v) {
      EXPECT_GE(tx, 0);
      EXPECT_LT(tx, g.tiles_x);
      h[(std::size_t(ty) * g.tiles_x + std::size_t(tx)) * g.hist_size + std::size_t(v)]++;
    };
    for (unsigned t = 0; t < threads; ++t)
      kernels::clahe_detail::visit_band(in, g, yp0, yp1, t, threads, count);
  }
  return h;
}

template <class T>
void check(int w, int h, int tx, int ty, std::mt19937& rng) {
  const int bins = sizeof(T) == 1 ? 256 : 65536;
  const cf::Geometry g = cf::make_geometry(w, h, tx, ty, 2.0, bins);
  std::uniform_int_distribution<int> d(0, bins - 1);
  for (std::size_t offset : {std::size_t(0), std::size_t(1), std::size_t(5)}) {
    std::vector<T> buf(std::size_t(w) * h + offset + 16);
    for (auto& v : buf) v = T(d(rng));
    // 16-byte aligned storage, then `offset` elements in.
    std::vector<uint4> storage(buf.size() * sizeof(T) / 16 + 2);
    T* base = reinterpret_cast<T*>(storage.data()) + offset;
    std::copy(buf.begin(), buf.begin() + std::ptrdiff_t(std::size_t(w) * h), base);
    const std::vector<T> src(base, base + std::size_t(w) * h);
    const auto want = reference_tiles(src, g);
    for (auto [target, min_rows, threads] :
         {std::tuple{528, 1, 512u}, std::tuple{1, 1, 7u}, std::tuple{100000, 3, 33u}}) {
      ASSERT_EQ(kernel_tiles(base, g, target, min_rows, threads), want)
          << w << "x" << h << " grid " << tx << "x" << ty << " offset " << offset << " target "
          << target << " threads " << threads;
    }
  }
}

TEST(ClaheBand, TileHistogramsEqualThePaddedImage) {
  std::mt19937 rng(8);
  const int cases[][4] = {{1, 1, 8, 8},
                          {2, 3, 8, 8},
                          {7, 5, 8, 8},
                          {1, 37, 8, 8},
                          {41, 1, 8, 8},
                          {64, 64, 8, 8},
                          {64, 63, 8, 8},
                          {63, 64, 8, 8},
                          {100, 37, 3, 7},
                          {257, 129, 16, 4},
                          {130, 70, 64, 64},
                          {61, 59, 64, 64},
                          {300, 200, 1, 1},
                          {17, 300, 5, 9},
                          {500, 40, 100, 3},
                          // whole-vector fast path (width and tile width multiples of 16)
                          {256, 96, 8, 3},
                          {1024, 64, 4, 4},
                          {512, 48, 2, 1},
                          {64, 64, 4, 4}};
  for (const auto& c : cases) {
    check<std::uint8_t>(c[0], c[1], c[2], c[3], rng);
    if (c[2] * c[3] <= 64) check<std::uint16_t>(c[0], c[1], c[2], c[3], rng);
  }
}

}  // namespace
}  // namespace histeq
