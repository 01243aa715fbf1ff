// test_host_clahe_masked.cpp — masked CLAHE on the CPU (ClaheOptions::region, clahe.hpp) against
// a model written here: the image and the counted flags padded by materializing their
// reflect-101 copies, each tile's histogram of its counted pixels, the clip limit and LUT scale
// from their number N, the identity LUT for N = 0, and OpenCV's interpolation on every pixel.
// A region counting every pixel gives the unmasked bytes (OpenCV 4.6's goldens included).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "clahe_model.hpp"
#include "histeq/clahe.hpp"
#include "histeq/error.hpp"
#include "histeq/image16.hpp"
#include "histeq/image_io.hpp"
#include "histeq/match.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

using test::random_plane;

/// The model's per-tile LUTs (tiles_x · tiles_y · bins ints, tile-major).
template <class T>
std::vector<int> model_luts(const std::vector<T>& src, const std::vector<std::uint8_t>& flags,
                            int w, int h, double clip_limit, int tx_n, int ty_n, int* tw_out,
                            int* th_out) {
  const int bins = sizeof(T) == 1 ? 256 : 65536;
  int pw = w, ph = h;
  if (w % tx_n != 0 || h % ty_n != 0) {
    pw = w + tx_n - w % tx_n;
    ph = h + ty_n - h % ty_n;
  }
  std::vector<T> ext(std::size_t(pw) * ph);
  std::vector<std::uint8_t> ext_flags(ext.size());
  for (int y = 0; y < ph; ++y)
    for (int x = 0; x < pw; ++x) {
      const std::size_t from =
          std::size_t(test::reflect101(y, h)) * w + std::size_t(test::reflect101(x, w));
      ext[std::size_t(y) * pw + x] = src[from];
      ext_flags[std::size_t(y) * pw + x] = flags[from];
    }
  const int tw = pw / tx_n, th = ph / ty_n;
  *tw_out = tw;
  *th_out = th;
  std::vector<int> luts(std::size_t(tx_n) * ty_n * bins);
  std::vector<int> hist(bins);
  for (int ty = 0; ty < ty_n; ++ty) {
    for (int tx = 0; tx < tx_n; ++tx) {
      int* lut = &luts[(std::size_t(ty) * tx_n + tx) * bins];
      std::fill(hist.begin(), hist.end(), 0);
      int n = 0;
      for (int y = ty * th; y < (ty + 1) * th; ++y)
        for (int x = tx * tw; x < (tx + 1) * tw; ++x)
          if (ext_flags[std::size_t(y) * pw + x]) {
            hist[ext[std::size_t(y) * pw + x]]++;
            ++n;
          }
      if (n == 0) {
        for (int i = 0; i < bins; ++i) lut[i] = i;
        continue;
      }
      int clip = 0;
      if (clip_limit > 0) {
        const double c = clip_limit * n / bins;
        clip = c >= n ? 0 : std::max(1, int(c));
      }
      if (clip > 0) {
        int clipped = 0;
        for (int& c : hist)
          if (c > clip) {
            clipped += c - clip;
            c = clip;
          }
        const int batch = clipped / bins;
        int residual = clipped % bins;
        for (int& c : hist) c += batch;
        const int step = residual ? std::max(bins / residual, 1) : 1;
        for (int i = 0; i < bins && residual > 0; i += step, --residual) hist[i]++;
      }
      const float scale = float(bins - 1) / float(n);
      int sum = 0;
      for (int i = 0; i < bins; ++i) {
        sum += hist[i];
        lut[i] = std::clamp(int(std::nearbyint(float(sum) * scale)), 0, bins - 1);
      }
    }
  }
  return luts;
}

/// The model's result: model_luts, then OpenCV's bilinear interpolation on every pixel.
template <class T>
std::vector<T> model_clahe(const std::vector<T>& src, const std::vector<std::uint8_t>& flags, int w,
                           int h, double clip_limit, int tx_n, int ty_n) {
  const int bins = sizeof(T) == 1 ? 256 : 65536;
  int tw = 0, th = 0;
  const std::vector<int> luts = model_luts(src, flags, w, h, clip_limit, tx_n, ty_n, &tw, &th);
  return test::interpolate_luts(src, w, h, luts, tw, th, tx_n, ty_n);
}

std::shared_ptr<const Image> mask_image(int w, int h, const std::vector<std::uint8_t>& px) {
  auto m = std::make_shared<Image>();
  m->width = w;
  m->height = h;
  m->channels = 1;
  m->pixels = px;
  return m;
}

/// The counted flags of a region (Region::counts), one byte per pixel.
std::vector<std::uint8_t> flags_of(const Region& r, int w, int h) {
  std::vector<std::uint8_t> f(std::size_t(w) * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) f[std::size_t(y) * w + x] = r.counts(x, y, w) ? 1 : 0;
  return f;
}

template <class T>
std::vector<T> run_cpu(const std::vector<T>& src, int w, int h, double clip, int tx, int ty,
                       const Region& region) {
  ClaheOptions o;
  o.clip_limit = clip;
  o.tiles_x = tx;
  o.tiles_y = ty;
  o.region = region;
  std::vector<T> out(src.size());
  if constexpr (sizeof(T) == 1)
    cpu::clahe_plane(src.data(), w, h, o, out.data());
  else
    cpu::clahe_plane16(src.data(), w, h, o, out.data());
  return out;
}

struct Case {
  int w, h, tx, ty;
  double clip;
};

// Sizes the grid divides and sizes it does not (one side, both), grids larger than the image,
// one row, one column, clip 0 / small / large.
const Case kCases[] = {
    {64, 64, 8, 8, 2.0},   {64, 63, 8, 8, 2.0},    {63, 64, 8, 8, 4.0},    {100, 37, 3, 7, 1.0},
    {7, 5, 8, 8, 2.0},     {1, 37, 8, 8, 2.0},     {41, 1, 8, 8, 3.0},     {257, 129, 16, 4, 0.0},
    {130, 70, 16, 16, 40}, {301, 203, 2, 9, 0.01}, {96, 96, 8, 8, 1000.0}, {1, 1, 4, 4, 2.0},
};

/// Regions of a w x h image: a random sparse mask, a half, a rectangle, and both.
std::vector<Region> regions_for(std::mt19937& rng, int w, int h) {
  std::vector<Region> v;
  std::vector<std::uint8_t> sparse(std::size_t(w) * h), half(sparse.size());
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      sparse[std::size_t(y) * w + x] = (rng() % 7 == 0) ? std::uint8_t(1 + rng() % 255) : 0;
      half[std::size_t(y) * w + x] = x < (w + 1) / 2 ? 255 : 0;
    }
  sparse[0] = 1;  // never empty
  Region r;
  r.mask = mask_image(w, h, sparse);
  v.push_back(r);
  r.mask = mask_image(w, h, half);
  v.push_back(r);
  Region rect;
  rect.roi = Roi{w / 4, h / 3, std::max(1, w / 2), std::max(1, h / 2)};
  v.push_back(rect);
  Region both = rect;
  both.mask = mask_image(w, h, half);
  if (flags_of(both, w, h) != std::vector<std::uint8_t>(std::size_t(w) * h, 0)) v.push_back(both);
  return v;
}

TEST(ClaheMasked, EqualsTheModel8) {
  std::mt19937 rng(7);
  int runs = 0;
  for (const Case& c : kCases) {
    for (const Region& region : regions_for(rng, c.w, c.h)) {
      const auto src = random_plane<std::uint8_t>(rng, c.w, c.h, 0, 255);
      const auto want = model_clahe(src, flags_of(region, c.w, c.h), c.w, c.h, c.clip, c.tx, c.ty);
      ASSERT_EQ(run_cpu(src, c.w, c.h, c.clip, c.tx, c.ty, region), want)
          << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty << " clip " << c.clip;
      ++runs;
    }
  }
  EXPECT_GT(runs, 40);
}

TEST(ClaheMasked, EqualsTheModel16) {
  std::mt19937 rng(8);
  for (const Case& c : kCases) {
    if (c.tx * c.ty > 64) continue;  // the model's 65536-bin LUTs: keep memory small
    for (const Region& region : regions_for(rng, c.w, c.h)) {
      const auto src = random_plane<std::uint16_t>(rng, c.w, c.h, 1000, 5000);
      const auto want = model_clahe(src, flags_of(region, c.w, c.h), c.w, c.h, c.clip, c.tx, c.ty);
      ASSERT_EQ(run_cpu(src, c.w, c.h, c.clip, c.tx, c.ty, region), want)
          << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty << " clip " << c.clip;
    }
  }
}

TEST(ClaheMasked, AFullRegionGivesTheUnmaskedBytes) {
  std::mt19937 rng(9);
  for (const Case& c : kCases) {
    Region full_mask, full_rect;
    full_mask.mask =
        mask_image(c.w, c.h, std::vector<std::uint8_t>(std::size_t(c.w) * std::size_t(c.h), 3));
    full_rect.roi = Roi{0, 0, c.w, c.h};
    const auto s8 = random_plane<std::uint8_t>(rng, c.w, c.h, 0, 255);
    const auto plain8 = run_cpu(s8, c.w, c.h, c.clip, c.tx, c.ty, Region{});
    EXPECT_EQ(run_cpu(s8, c.w, c.h, c.clip, c.tx, c.ty, full_mask), plain8);
    EXPECT_EQ(run_cpu(s8, c.w, c.h, c.clip, c.tx, c.ty, full_rect), plain8);
    if (c.tx * c.ty > 64) continue;
    const auto s16 = random_plane<std::uint16_t>(rng, c.w, c.h, 0, 65535);
    const auto plain16 = run_cpu(s16, c.w, c.h, c.clip, c.tx, c.ty, Region{});
    EXPECT_EQ(run_cpu(s16, c.w, c.h, c.clip, c.tx, c.ty, full_mask), plain16);
    EXPECT_EQ(run_cpu(s16, c.w, c.h, c.clip, c.tx, c.ty, full_rect), plain16);
  }
}

TEST(ClaheMasked, AFullMaskGivesOpenCvsGoldens) {
  const std::string shared = test::shared_dir();
  const std::filesystem::path dir =
      std::filesystem::path(shared.empty() ? "/nonexistent" : shared) / "golden" /
      "opencv-4.6-clahe";
  if (shared.empty() || !std::filesystem::is_directory(dir))
    GTEST_SKIP() << "no ../shared/golden/opencv-4.6-clahe next to the checkout";
  int n8 = 0, n16 = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string fn = e.path().filename().string();
    const std::size_t sep = fn.find("__clip");
    if (sep == std::string::npos) continue;
    double clip = 0;
    int tx = 0, ty = 0;
    if (std::sscanf(fn.c_str() + sep, "__clip%lf_t%dx%d.png", &clip, &tx, &ty) != 3) continue;
    const std::string name = fn.substr(0, sep);
    const bool sixteen = name.size() > 2 && name.compare(name.size() - 2, 2, "16") == 0;
    ClaheOptions o;
    o.clip_limit = clip;
    o.tiles_x = tx;
    o.tiles_y = ty;
    SCOPED_TRACE(fn);
    if (sixteen) {
      const Image16 in = load_image16((dir / (name + ".png")).string());
      if (in.channels != 1) continue;
      o.region.mask = mask_image(in.width, in.height,
                                 std::vector<std::uint8_t>(std::size_t(in.width) * in.height, 1));
      EXPECT_TRUE(cpu::clahe(in, o).pixels == load_image16(e.path().string()).pixels);
      ++n16;
    } else {
      const Image in = load_image(shared + "/natural/" + name + ".png");
      if (in.channels != 1) continue;
      o.region.roi = Roi{0, 0, in.width, in.height};
      EXPECT_TRUE(cpu::clahe(in, o).pixels == load_image(e.path().string()).pixels);
      ++n8;
    }
  }
  EXPECT_GT(n8, 0);
  EXPECT_GT(n16, 0);
}

TEST(ClaheMasked, ATileWithNoCountedPixelKeepsTheIdentity) {
  // 64x32, grid 4x2: the mask counts the left half only, so tiles 2 and 3 of each row count
  // nothing and keep the identity LUT; the pixels whose neighbour tiles are all such tiles (x
  // from 40, the centre of tile 2) come out unchanged.
  const int w = 64, h = 32;
  std::mt19937 rng(10);
  const auto src = random_plane<std::uint8_t>(rng, w, h, 0, 255);
  std::vector<std::uint8_t> left(std::size_t(w) * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) left[std::size_t(y) * w + x] = x < 32 ? 1 : 0;
  ClaheOptions o;
  o.clip_limit = 2.0;
  o.tiles_x = 4;
  o.tiles_y = 2;
  o.region.mask = mask_image(w, h, left);
  std::vector<std::uint8_t> luts(std::size_t(8) * 256);
  cpu::clahe_luts(src.data(), w, h, o, luts.data());
  for (int ty = 0; ty < 2; ++ty)
    for (int tx = 0; tx < 4; ++tx) {
      bool identity = true;
      for (int v = 0; v < 256; ++v)
        identity = identity && luts[std::size_t(ty * 4 + tx) * 256 + v] == v;
      EXPECT_EQ(identity, tx >= 2) << "tile " << tx << "," << ty;
    }
  std::vector<std::uint8_t> out(src.size());
  cpu::clahe_plane(src.data(), w, h, o, out.data());
  EXPECT_EQ(out, model_clahe(src, left, w, h, 2.0, 4, 2));
  for (int y = 0; y < h; ++y)
    for (int x = 40; x < w; ++x)
      ASSERT_EQ(out[std::size_t(y) * w + x], src[std::size_t(y) * w + x]) << x << "," << y;
  // the same at 16 bits
  std::vector<std::uint16_t> s16(src.begin(), src.end()), o16(src.size());
  for (auto& v : s16) v = std::uint16_t(v * 200 + 7);
  std::vector<std::uint16_t> l16(std::size_t(8) * 65536);
  cpu::clahe_luts16(s16.data(), w, h, o, l16.data());
  for (int v = 0; v < 65536; v += 4099) EXPECT_EQ(l16[std::size_t(3) * 65536 + v], v);
  cpu::clahe_plane16(s16.data(), w, h, o, o16.data());
  EXPECT_EQ(o16, model_clahe(s16, left, w, h, 2.0, 4, 2));
}

TEST(ClaheMasked, ThePaddingTakesTheMasksFlagsReflected) {
  // 10x10 with a 3x3 grid: padded to 12x12 (tiles 4x4). A mask counting only column 8 (the
  // reflection of padded column 10) and row 8: the last tile column counts column 8 twice.
  const int w = 10, h = 10;
  std::mt19937 rng(11);
  const auto src = random_plane<std::uint8_t>(rng, w, h, 0, 255);
  std::vector<std::uint8_t> m(std::size_t(w) * h);
  for (int y = 0; y < h; ++y) m[std::size_t(y) * w + 8] = 1;
  for (int x = 0; x < w; ++x) m[std::size_t(8) * w + x] = 1;
  Region r;
  r.mask = mask_image(w, h, m);
  EXPECT_EQ(run_cpu(src, w, h, 0.0, 3, 3, r), model_clahe(src, m, w, h, 0.0, 3, 3));
  EXPECT_EQ(run_cpu(src, w, h, 1.0, 3, 3, r), model_clahe(src, m, w, h, 1.0, 3, 3));
}

TEST(ClaheMasked, ColourPlanesCountTheSamePixels) {
  std::mt19937 rng(12);
  const int w = 50, h = 40;
  Image img;
  img.width = w;
  img.height = h;
  img.channels = 3;
  img.pixels = random_plane<std::uint8_t>(rng, w * 3, h, 0, 255);
  std::vector<std::uint8_t> m(std::size_t(w) * h);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = (i % 3 == 0) ? 1 : 0;
  ClaheOptions o;
  o.clip_limit = 3.0;
  o.tiles_x = 3;
  o.tiles_y = 5;
  o.mode = Mode::rgb;
  o.region.mask = mask_image(w, h, m);
  const Image got = cpu::clahe(img, o);
  ASSERT_EQ(got.channels, 3);
  for (int k = 0; k < 3; ++k) {
    std::vector<std::uint8_t> plane(std::size_t(w) * h);
    for (std::size_t i = 0; i < plane.size(); ++i) plane[i] = img.pixels[i * 3 + std::size_t(k)];
    const auto want = model_clahe(plane, m, w, h, 3.0, 3, 5);
    for (std::size_t i = 0; i < plane.size(); ++i)
      ASSERT_EQ(got.pixels[i * 3 + std::size_t(k)], want[i]) << "channel " << k << " pixel " << i;
  }
}

TEST(ClaheMasked, ARegionThatDoesNotFitOrCountsNothingIsAUsageError) {
  std::mt19937 rng(13);
  const auto src = random_plane<std::uint8_t>(rng, 20, 10, 0, 255);
  std::vector<std::uint8_t> out(src.size());
  ClaheOptions o;
  o.region.mask = mask_image(20, 10, std::vector<std::uint8_t>(200, 0));
  EXPECT_THROW(cpu::clahe_plane(src.data(), 20, 10, o, out.data()), UsageError);
  o.region.mask = mask_image(10, 10, std::vector<std::uint8_t>(100, 1));
  EXPECT_THROW(cpu::clahe_plane(src.data(), 20, 10, o, out.data()), UsageError);
  o.region.mask.reset();
  o.region.roi = Roi{15, 0, 10, 5};
  EXPECT_THROW(cpu::clahe_plane(src.data(), 20, 10, o, out.data()), UsageError);
}

}  // namespace
}  // namespace histeq
