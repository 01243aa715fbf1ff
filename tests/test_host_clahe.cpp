// test_host_clahe.cpp — CPU CLAHE (clahe.hpp) against OpenCV 4.6's goldens and against a
// straightforward reference written here (padded copy, per-tile loops, no shortcuts); 16-bit
// image I/O round trips (image16.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "clahe_model.hpp"
#include "histeq/clahe.hpp"
#include "histeq/clahe_formula.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/image16.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

using test::random_plane;

/// The reference: OpenCV 4.6's CLAHE as plainly as it can be written. Pads by materializing the
/// reflect-101 copy, histograms each tile of the copy, clips with OpenCV's loops, and
/// interpolates with the float expressions of CLAHE_Interpolation_Body (clahe_model.hpp).
template <class T>
std::vector<T> reference_clahe(const std::vector<T>& src, int w, int h, double clip_limit, int tx_n,
                               int ty_n) {
  const int bins = sizeof(T) == 1 ? 256 : 65536;
  int pw = w, ph = h;
  if (w % tx_n != 0 || h % ty_n != 0) {
    pw = w + tx_n - w % tx_n;
    ph = h + ty_n - h % ty_n;
  }
  std::vector<T> ext(std::size_t(pw) * ph);
  for (int y = 0; y < ph; ++y)
    for (int x = 0; x < pw; ++x)
      ext[std::size_t(y) * pw + x] =
          src[std::size_t(test::reflect101(y, h)) * w + test::reflect101(x, w)];
  const int tw = pw / tx_n, th = ph / ty_n, area = tw * th;
  const float scale = float(bins - 1) / float(area);
  int clip = 0;
  if (clip_limit > 0) clip = std::max(1, int(clip_limit * area / bins));
  std::vector<int> luts(std::size_t(tx_n) * ty_n * bins);
  std::vector<int> hist(bins);
  for (int ty = 0; ty < ty_n; ++ty) {
    for (int tx = 0; tx < tx_n; ++tx) {
      std::fill(hist.begin(), hist.end(), 0);
      for (int y = ty * th; y < (ty + 1) * th; ++y)
        for (int x = tx * tw; x < (tx + 1) * tw; ++x) hist[ext[std::size_t(y) * pw + x]]++;
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
      int sum = 0;
      int* lut = &luts[(std::size_t(ty) * tx_n + tx) * bins];
      for (int i = 0; i < bins; ++i) {
        sum += hist[i];
        lut[i] = std::clamp(int(std::nearbyint(float(sum) * scale)), 0, bins - 1);
      }
    }
  }
  return test::interpolate_luts(src, w, h, luts, tw, th, tx_n, ty_n);
}

/// A smooth ramp plus noise: realistic histograms with clipped peaks.
template <class T>
std::vector<T> natural_plane(std::mt19937& rng, int w, int h, int maxval) {
  std::normal_distribution<double> noise(0, maxval / 40.0);
  std::vector<T> v(std::size_t(w) * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const double base = maxval * (0.3 + 0.4 * std::sin(x * 0.05) * std::cos(y * 0.03));
      v[std::size_t(y) * w + x] = T(std::clamp<double>(std::round(base + noise(rng)), 0, maxval));
    }
  return v;
}

template <class T>
std::vector<T> run_cpu(const std::vector<T>& src, int w, int h, double clip, int tx, int ty,
                       int threads = 0) {
  ClaheOptions o;
  o.clip_limit = clip;
  o.tiles_x = tx;
  o.tiles_y = ty;
  std::vector<T> out(src.size());
  if constexpr (sizeof(T) == 1)
    cpu::clahe_plane(src.data(), w, h, o, out.data(), threads);
  else
    cpu::clahe_plane16(src.data(), w, h, o, out.data(), threads);
  return out;
}

struct Case {
  int w, h, tx, ty;
  double clip;
};

// Sizes smaller than the grid, 1x1, single rows/columns, sizes that only one side divides,
// primes, grids up to 64x64, clip 0 / tiny / large.
const Case kCases[] = {
    {1, 1, 8, 8, 2.0},      {1, 1, 1, 1, 0.0},       {1, 1, 64, 64, 40.0},   {2, 3, 8, 8, 2.0},
    {7, 5, 8, 8, 2.0},      {1, 37, 8, 8, 2.0},      {41, 1, 8, 8, 3.0},     {64, 64, 8, 8, 2.0},
    {64, 63, 8, 8, 2.0},    {63, 64, 8, 8, 2.0},     {65, 65, 8, 8, 0.0},    {100, 37, 3, 7, 1.0},
    {257, 129, 16, 4, 4.0}, {128, 128, 64, 64, 2.0}, {130, 70, 64, 64, 2.0}, {61, 59, 64, 64, 0.0},
    {300, 200, 1, 1, 2.0},  {301, 203, 2, 9, 0.01},  {96, 96, 8, 8, 1000.0}, {40, 30, 40, 30, 2.0},
    {3, 200, 5, 5, 2.5},    {511, 17, 8, 2, 2.0},
};

/// The reference cases once with the vector apply (where the CPU has AVX2) and once with the
/// portable loop (cpu::set_simd(false)).
class ClaheCpuSimd : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { cpu::set_simd(GetParam()); }
  void TearDown() override { cpu::set_simd(true); }
};

TEST_P(ClaheCpuSimd, EqualsReferenceOnAdversarialSizesAndGrids8) {
  std::mt19937 rng(1234);
  for (const Case& c : kCases) {
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<std::uint8_t> src = kind == 0 ? random_plane<std::uint8_t>(rng, c.w, c.h, 0, 255)
                                      : kind == 1
                                          ? natural_plane<std::uint8_t>(rng, c.w, c.h, 255)
                                          : random_plane<std::uint8_t>(rng, c.w, c.h, 90, 97);
      const auto want = reference_clahe(src, c.w, c.h, c.clip, c.tx, c.ty);
      const auto got = run_cpu(src, c.w, c.h, c.clip, c.tx, c.ty);
      ASSERT_EQ(got, want) << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty << " clip "
                           << c.clip << " kind " << kind;
    }
  }
}

TEST_P(ClaheCpuSimd, EqualsReferenceOnAdversarialSizesAndGrids16) {
  std::mt19937 rng(99);
  for (const Case& c : kCases) {
    if (std::size_t(c.tx) * c.ty > 256)
      continue;  // the reference's 65536-bin LUTs: keep memory small
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<std::uint16_t> src =
          kind == 0   ? random_plane<std::uint16_t>(rng, c.w, c.h, 0, 65535)
          : kind == 1 ? natural_plane<std::uint16_t>(rng, c.w, c.h, 4095)
                      : random_plane<std::uint16_t>(rng, c.w, c.h, 1000, 1200);
      const auto want = reference_clahe(src, c.w, c.h, c.clip, c.tx, c.ty);
      const auto got = run_cpu(src, c.w, c.h, c.clip, c.tx, c.ty);
      ASSERT_EQ(got, want) << c.w << "x" << c.h << " grid " << c.tx << "x" << c.ty << " clip "
                           << c.clip << " kind " << kind;
    }
  }
}

// The GPU's closed form of the residual redistribution (bin i gets one iff i % step == 0 and
// i / step < residual) against OpenCV's loop, for every residual of both bin counts.
INSTANTIATE_TEST_SUITE_P(SimdAndPortable, ClaheCpuSimd, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "simd" : "portable";
                         });

TEST(ClaheFormula, ResidualClosedFormEqualsOpenCvLoop) {
  for (int bins : {256, 65536}) {
    std::vector<int> loop(static_cast<std::size_t>(bins));
    for (int residual = 0; residual < bins; residual += (bins == 256 ? 1 : 97)) {
      std::fill(loop.begin(), loop.end(), 0);
      const int step = clahe_formula::residual_step(bins, residual);
      int r = residual;
      for (int i = 0; i < bins && r > 0; i += step, --r) loop[std::size_t(i)]++;
      for (int i = 0; i < bins; ++i) {
        ASSERT_EQ(clahe_formula::gets_residual(i, residual, step) ? 1 : 0, loop[std::size_t(i)])
            << "bins " << bins << " residual " << residual << " bin " << i;
      }
    }
  }
}

// A clip limit whose clip reaches the tile's pixel count cannot cut any bin: it is no clipping,
// and defined. clip_limit x area / bins is compared with the area in double before it becomes
// an int; --clip 1e12 overflowed that conversion (undefined; INT_MIN on x86, so max(1, INT_MIN)
// = 1, the strongest clipping). Below the area nothing changes.
TEST(ClaheFormula, ClipAtOrAboveTheTileAreaIsNoClipping) {
  namespace cf = clahe_formula;
  // 64x64 in 8x8 tiles: 64 pixels a tile; 256 bins: clip = L x 64 / 256 = L / 4.
  EXPECT_EQ(cf::make_geometry(64, 64, 8, 8, 0.0, 256).clip, 0);
  EXPECT_EQ(cf::make_geometry(64, 64, 8, 8, 0.001, 256).clip, 1);
  EXPECT_EQ(cf::make_geometry(64, 64, 8, 8, 2.0, 256).clip, 1);  // int(0.5), at least 1
  EXPECT_EQ(cf::make_geometry(64, 64, 8, 8, 250.0, 256).clip, 62);
  EXPECT_EQ(cf::make_geometry(64, 64, 8, 8, 255.99, 256).clip, 63);  // one below the area
  for (const double big : {256.0, 256.01, 1e12, 1e308, std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::infinity()})
    EXPECT_EQ(cf::make_geometry(64, 64, 8, 8, big, 256).clip, 0) << big;
  // 16 bits: 65536 bins, the same area.
  EXPECT_EQ(cf::make_geometry(64, 64, 8, 8, 65535.0, 65536).clip, 63);
  EXPECT_EQ(cf::make_geometry(64, 64, 8, 8, 65536.0, 65536).clip, 0);
  EXPECT_EQ(cf::make_geometry(64, 64, 8, 8, 1e300, 65536).clip, 0);
  // A padded grid: 65x65 in 8x8 tiles of 9x9 = 81 pixels.
  EXPECT_EQ(cf::make_geometry(65, 65, 8, 8, 255.0 * 81.0 / 81.0, 256).clip, 80);
  EXPECT_EQ(cf::make_geometry(65, 65, 8, 8, 256.0, 256).clip, 0);

  // The bytes: huge limits give the output of --clip 0, on natural and on peaked tiles; a clip
  // one below a tile's largest bin does clip (the control).
  std::mt19937 rng(12);
  const auto nat8 = natural_plane<std::uint8_t>(rng, 200, 120, 255);
  const auto nat16 = natural_plane<std::uint16_t>(rng, 130, 90, 65535);
  std::vector<std::uint8_t> peaked(64 * 64, 100);  // each 8x8 tile: 63 of 100, one 50
  for (int y = 0; y < 64; y += 8)
    for (int x = 0; x < 64; x += 8) peaked[std::size_t(y) * 64 + std::size_t(x)] = 50;
  for (const double big : {1e12, 1e308, std::numeric_limits<double>::max()}) {
    EXPECT_EQ(run_cpu(nat8, 200, 120, big, 8, 8), run_cpu(nat8, 200, 120, 0.0, 8, 8)) << big;
    EXPECT_EQ(run_cpu(nat16, 130, 90, big, 8, 8), run_cpu(nat16, 130, 90, 0.0, 8, 8)) << big;
    EXPECT_EQ(run_cpu(peaked, 64, 64, big, 8, 8), run_cpu(peaked, 64, 64, 0.0, 8, 8)) << big;
  }
  EXPECT_EQ(run_cpu(peaked, 64, 64, 256.0, 8, 8), run_cpu(peaked, 64, 64, 0.0, 8, 8));
  EXPECT_EQ(run_cpu(peaked, 64, 64, 255.99, 8, 8), run_cpu(peaked, 64, 64, 0.0, 8, 8));
  EXPECT_NE(run_cpu(peaked, 64, 64, 250.0, 8, 8), run_cpu(peaked, 64, 64, 0.0, 8, 8));
  // Below the area, the reference (OpenCV's own arithmetic) still agrees.
  EXPECT_EQ(run_cpu(peaked, 64, 64, 250.0, 8, 8), reference_clahe(peaked, 64, 64, 250.0, 8, 8));
}

TEST(ClaheCpu, ConstantImagesMatchReference) {
  for (int v : {0, 1, 128, 255}) {
    for (const Case& c :
         {Case{17, 9, 8, 8, 2.0}, Case{64, 64, 8, 8, 0.0}, Case{5, 5, 64, 64, 40.0}}) {
      std::vector<std::uint8_t> src(std::size_t(c.w) * c.h, std::uint8_t(v));
      EXPECT_EQ(run_cpu(src, c.w, c.h, c.clip, c.tx, c.ty),
                reference_clahe(src, c.w, c.h, c.clip, c.tx, c.ty))
          << "value " << v;
    }
  }
  std::vector<std::uint16_t> s16(33 * 20, 40000);
  EXPECT_EQ(run_cpu(s16, 33, 20, 2.0, 8, 8), reference_clahe(s16, 33, 20, 2.0, 8, 8));
}

TEST(ClaheCpu, ThreadCountDoesNotChangeTheResult) {
  std::mt19937 rng(5);
  const auto src = natural_plane<std::uint8_t>(rng, 333, 222, 255);
  const auto one = run_cpu(src, 333, 222, 2.0, 8, 8, 1);
  for (int t : {2, 3, 7}) EXPECT_EQ(run_cpu(src, 333, 222, 2.0, 8, 8, t), one) << t << " threads";
}

TEST(ClaheCpu, RejectsBadOptions) {
  std::vector<std::uint8_t> p(16), o(16);
  ClaheOptions bad;
  bad.tiles_x = 0;
  EXPECT_THROW(cpu::clahe_plane(p.data(), 4, 4, bad, o.data()), UsageError);
  bad = {};
  bad.tiles_y = kMaxClaheTiles + 1;
  EXPECT_THROW(cpu::clahe_plane(p.data(), 4, 4, bad, o.data()), UsageError);
  bad = {};
  bad.clip_limit = std::nan("");
  EXPECT_THROW(cpu::clahe_plane(p.data(), 4, 4, bad, o.data()), UsageError);
  EXPECT_THROW(cpu::clahe_plane(p.data(), 0, 4, ClaheOptions{}, o.data()), UsageError);
  std::vector<std::uint16_t> p16(16), o16(16);
  ClaheOptions huge;
  huge.tiles_x = huge.tiles_y = 65;  // 4225 tiles x 65536 bins > kMaxClaheLutEntries
  EXPECT_THROW(cpu::clahe_plane16(p16.data(), 4, 4, huge, o16.data()), UsageError);
  huge.tiles_x = huge.tiles_y = 64;
  EXPECT_NO_THROW(cpu::clahe_plane16(p16.data(), 4, 4, huge, o16.data()));
  huge.tiles_x = huge.tiles_y = kMaxClaheTiles;
  EXPECT_NO_THROW(validate(huge, 256));
  Image16 colour;
  colour.width = colour.height = 2;
  colour.channels = 3;
  colour.pixels.assign(12, 7);
  ClaheOptions luma;
  luma.mode = Mode::luma;
  EXPECT_THROW(cpu::clahe(colour, luma), UsageError);
}

TEST(ClaheCpu, ColourModes) {
  std::mt19937 rng(77);
  Image img;
  img.width = 50;
  img.height = 31;
  img.channels = 4;
  img.pixels = random_plane<std::uint8_t>(rng, 50 * 4, 31, 0, 255);
  ClaheOptions o;
  o.mode = Mode::rgb;
  const Image rgb = cpu::clahe(img, o);
  ASSERT_EQ(rgb.channels, 4);
  // rgb: each channel is the plane CLAHE of that channel; alpha unchanged.
  for (int k = 0; k < 4; ++k) {
    std::vector<std::uint8_t> ch(img.pixel_count());
    for (std::size_t i = 0; i < ch.size(); ++i) ch[i] = img.pixels[i * 4 + std::size_t(k)];
    const auto want = k == 3 ? ch : run_cpu(ch, 50, 31, o.clip_limit, 8, 8);
    for (std::size_t i = 0; i < ch.size(); ++i)
      ASSERT_EQ(rgb.pixels[i * 4 + std::size_t(k)], want[i]) << k;
  }
  o.mode = Mode::gray;
  const Image gray = cpu::clahe(img, o);
  EXPECT_EQ(gray.channels, 1);
  o.mode = Mode::luma;
  const Image luma = cpu::clahe(img, o);
  EXPECT_EQ(luma.channels, 4);
  for (std::size_t i = 0; i < img.pixel_count(); ++i)
    ASSERT_EQ(luma.pixels[i * 4 + 3], img.pixels[i * 4 + 3]);
}

// A 16-bit gray+alpha image keeps its alpha, whatever mode is asked (as equalize16 does): the
// gray channel is the plane CLAHE, alpha is copied.
TEST(ClaheCpu, SixteenBitGrayAlphaKeepsAlpha) {
  std::mt19937 rng(78);
  Image16 img;
  img.width = 37;
  img.height = 23;
  img.channels = 2;
  img.pixels = random_plane<std::uint16_t>(rng, 37 * 2, 23, 0, 65535);
  std::vector<std::uint16_t> gray(img.pixel_count()), want(gray.size());
  for (std::size_t i = 0; i < gray.size(); ++i) gray[i] = img.pixels[i * 2];
  ClaheOptions o;
  o.tiles_x = 3;
  o.tiles_y = 5;
  cpu::clahe_plane16(gray.data(), 37, 23, o, want.data());
  for (const Mode m : {Mode::gray, Mode::luma, Mode::rgb}) {
    o.mode = m;
    const Image16 out = cpu::clahe(img, o);
    ASSERT_EQ(out.channels, 2) << to_string(m);
    for (std::size_t i = 0; i < gray.size(); ++i) {
      ASSERT_EQ(out.pixels[i * 2], want[i]) << i;
      ASSERT_EQ(out.pixels[i * 2 + 1], img.pixels[i * 2 + 1]) << i;
    }
  }
}

// ---- OpenCV 4.6 goldens ----

struct Golden {
  std::filesystem::path file;
  std::string name;
  double clip;
  int tx, ty;
  bool sixteen;
};

std::vector<Golden> goldens() {
  std::vector<Golden> v;
  const std::string shared = test::shared_dir();
  if (shared.empty()) return v;
  const std::filesystem::path dir = std::filesystem::path(shared) / "golden" / "opencv-4.6-clahe";
  if (!std::filesystem::is_directory(dir)) return v;
  const std::regex re(R"((\w+?)(16)?__clip([0-9.]+)_t(\d+)x(\d+)\.png)");
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::smatch m;
    const std::string fn = e.path().filename().string();
    if (!std::regex_match(fn, m, re)) continue;
    v.push_back({e.path(), m[1], std::stod(m[3]), std::stoi(m[4]), std::stoi(m[5]), m[2].matched});
  }
  std::sort(v.begin(), v.end(), [](const Golden& a, const Golden& b) { return a.file < b.file; });
  return v;
}

TEST(ClaheCpu, OpenCvGoldens) {
  const auto gs = goldens();
  if (gs.empty()) GTEST_SKIP() << "no ../shared/golden/opencv-4.6-clahe next to the checkout";
  int gray = 0, colour = 0, sixteen = 0;
  for (const Golden& g : gs) {
    SCOPED_TRACE(g.file.filename().string());
    ClaheOptions o;
    o.clip_limit = g.clip;
    o.tiles_x = g.tx;
    o.tiles_y = g.ty;
    if (g.sixteen) {
      const Image16 in = load_image16((g.file.parent_path() / (g.name + "16.png")).string());
      const Image16 want = load_image16(g.file.string());
      const Image16 got = cpu::clahe(in, o);
      ASSERT_EQ(got.channels, want.channels);
      EXPECT_TRUE(got.pixels == want.pixels);
      ++sixteen;
      continue;
    }
    const std::string natural = test::shared_dir() + "/natural/" + g.name + ".png";
    const Image in = load_image(natural);
    const Image want = load_image(g.file.string());
    const Image got = cpu::clahe(in, o);
    ASSERT_EQ(got.width, want.width);
    ASSERT_EQ(got.channels, want.channels);
    if (in.channels == 1) {
      EXPECT_TRUE(got.pixels == want.pixels);
      ++gray;
    } else {
      int worst = 0;
      for (std::size_t i = 0; i < got.pixels.size(); ++i)
        worst = std::max(worst, std::abs(int(got.pixels[i]) - int(want.pixels[i])));
      EXPECT_LE(worst, 1);
      ++colour;
    }
  }
  EXPECT_GT(gray, 0);
  EXPECT_GT(colour, 0);
  EXPECT_GT(sixteen, 0);
}

// ---- 16-bit I/O ----

class Image16Io : public test::TempDirTest {
 protected:
  Image16Io() : TempDirTest("histeq-image16") {}
};

Image16 random_image16(int w, int h, int c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Image16 img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels = random_plane<std::uint16_t>(rng, w * c, h, 0, 65535);
  return img;
}

TEST_F(Image16Io, PngRoundTripEveryChannelCount) {
  for (int c = 1; c <= 4; ++c) {
    const Image16 img = random_image16(37, 23, c, std::uint32_t(c));
    const std::string p = path("img" + std::to_string(c) + ".png");
    save_image16(img, p);
    EXPECT_TRUE(is_16bit_image(p));
    const Image16 back = load_image16(p);
    EXPECT_EQ(back.width, 37);
    EXPECT_EQ(back.height, 23);
    EXPECT_EQ(back.channels, c);
    EXPECT_TRUE(back.pixels == img.pixels) << c << " channels";
  }
}

/// A fake ICC profile of `size` bytes whose colour space (bytes 16..19) is `space`.
std::vector<std::uint8_t> fake_icc16(const char* space, std::size_t size = 700) {
  std::vector<std::uint8_t> icc(size);
  for (std::size_t i = 0; i < size; ++i) icc[i] = std::uint8_t(i * 5 % 11);
  std::memcpy(icc.data() + 16, space, 4);
  return icc;
}

TEST_F(Image16Io, PngIccProfileRoundTripsWhenItFitsTheChannels) {
  // The 16-bit PNG writer (libspng) wrote no iCCP and the reader did not keep one, so a 16-bit
  // PNG lost its profile where the 8-bit paths keep it. Same rule as the 8-bit writer: a GRAY
  // profile for 1-2 channels, an RGB one for 3-4; another is dropped.
  for (int c = 1; c <= 4; ++c) {
    SCOPED_TRACE(std::to_string(c) + " channels");
    Image16 img = random_image16(9, 7, c, std::uint32_t(40 + c));
    img.icc = fake_icc16(c <= 2 ? "GRAY" : "RGB ");
    const std::vector<std::uint8_t> png = encode_image16(img, ".png");
    EXPECT_EQ(png::read_iccp(png.data(), png.size()), img.icc);  // the chunk, read independently
    const Image16 back = decode_image16(png.data(), png.size(), "icc.png");
    EXPECT_EQ(back.icc, img.icc);
    EXPECT_TRUE(back.pixels == img.pixels);
    img.icc = fake_icc16(c <= 2 ? "RGB " : "GRAY");  // does not describe these channels
    const std::vector<std::uint8_t> other = encode_image16(img, ".png");
    EXPECT_TRUE(png::read_iccp(other.data(), other.size()).empty());
    EXPECT_TRUE(decode_image16(other.data(), other.size(), "other.png").icc.empty());
  }
  // A profile larger than one deflate block, and PGM/PPM (no place for one) still encode.
  Image16 big = random_image16(4, 4, 3, 7);
  big.icc = fake_icc16("RGB ", 70000);
  const std::vector<std::uint8_t> png = encode_image16(big, ".png");
  EXPECT_EQ(decode_image16(png.data(), png.size(), "big.png").icc, big.icc);
  save_image16(big, path("big.ppm"));
  EXPECT_TRUE(load_image16(path("big.ppm")).pixels == big.pixels);
  // An 8-bit PNG read at 16 bits keeps its profile, and --depth's conversions carry it.
  Image img8;
  img8.width = 4;
  img8.height = 2;
  img8.channels = 3;
  img8.pixels.assign(24, 77);
  img8.icc = fake_icc16("RGB ");
  const std::vector<std::uint8_t> p8 = encode_image(img8, ".png");
  const Image16 w = decode_image16(p8.data(), p8.size(), "p8.png");
  EXPECT_EQ(w.icc, img8.icc);
  EXPECT_EQ(widen_to_16(img8).icc, img8.icc);
  EXPECT_EQ(narrow_to_8(w).icc, img8.icc);
}

TEST_F(Image16Io, PnmRoundTripAndMaxvalScaling) {
  const Image16 g = random_image16(19, 11, 1, 3), rgb = random_image16(5, 4, 3, 4);
  save_image16(g, path("g.pgm"));
  save_image16(rgb, path("c.ppm"));
  EXPECT_TRUE(load_image16(path("g.pgm")).pixels == g.pixels);
  EXPECT_TRUE(load_image16(path("c.ppm")).pixels == rgb.pixels);
  EXPECT_TRUE(is_16bit_image(path("g.pgm")));
  // maxval 1000, big-endian: v → round(v · 65535 / 1000).
  const std::string head = "P5\n# c\n3 1\n1000\n";
  std::vector<std::uint8_t> bytes(head.begin(), head.end());
  for (int v : {0, 500, 1000}) {
    bytes.push_back(std::uint8_t(v >> 8));
    bytes.push_back(std::uint8_t(v & 255));
  }
  const Image16 s = decode_image16(bytes.data(), bytes.size(), "mem");
  ASSERT_EQ(s.pixels.size(), 3u);
  EXPECT_EQ(s.pixels[0], 0);
  EXPECT_EQ(s.pixels[1], 32768);  // 32767.5 rounds up
  EXPECT_EQ(s.pixels[2], 65535);
  // maxval 255 (one byte per sample): v · 257.
  const std::string h8 = "P5 2 1 255 ";
  std::vector<std::uint8_t> b8(h8.begin(), h8.end());
  b8.push_back(3);
  b8.push_back(255);
  const Image16 s8 = decode_image16(b8.data(), b8.size(), "mem8");
  EXPECT_EQ(s8.pixels, (std::vector<std::uint16_t>{3 * 257, 65535}));
  EXPECT_THROW(save_image16(g, path("g.ppm")), UsageError);
  EXPECT_THROW(save_image16(g, path("g.jpg")), UsageError);
}

TEST_F(Image16Io, EightBitPngWidensAndNarrowsBack) {
  Image img;
  img.width = 16;
  img.height = 16;
  img.channels = 1;
  for (int i = 0; i < 256; ++i) img.pixels.push_back(std::uint8_t(i));
  save_image(img, path("g8.png"));
  EXPECT_FALSE(is_16bit_image(path("g8.png")));
  const Image16 w = load_image16(path("g8.png"));
  for (int i = 0; i < 256; ++i) ASSERT_EQ(w.pixels[std::size_t(i)], i * 257);
  EXPECT_TRUE(narrow_to_8(w).pixels == img.pixels);
  EXPECT_TRUE(widen_to_16(img).pixels == w.pixels);
}

TEST_F(Image16Io, BadFilesAreErrors) {
  EXPECT_THROW(load_image16(path("missing.png")), Error);
  const Image16 img = random_image16(8, 8, 1, 9);
  auto png = encode_image16(img, ".png");
  png.resize(png.size() / 2);
  EXPECT_THROW(decode_image16(png.data(), png.size(), "half.png"), Error);
  const std::string junk = "not an image";
  EXPECT_THROW(decode_image16(reinterpret_cast<const std::uint8_t*>(junk.data()), junk.size(), "j"),
               Error);
  const std::string trunc = "P5 4 4 65535\n";
  EXPECT_THROW(
      decode_image16(reinterpret_cast<const std::uint8_t*>(trunc.data()), trunc.size(), "t"),
      Error);
}

}  // namespace
}  // namespace histeq
