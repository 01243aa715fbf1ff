// test_host_cpu.cpp — the CPU backend (cpu.hpp): threaded histogram against a naive loop,
// plane extraction and LUT application per mode, and the full CPU equalization against
// OpenCV 4.6's output for the sample images (tests/data/golden-opencv-4.6).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "histeq/color.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/image_io.hpp"
#include "histeq/lut.hpp"
#include "histeq/planes.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

Histogram naive_histogram(const void* in, std::size_t n, SampleType type, int bins) {
  Histogram h(std::size_t(bins), 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (type == SampleType::u8) {
      const int v = static_cast<const std::uint8_t*>(in)[i];
      ++h[std::size_t((v * bins) / 256)];
    } else {
      const std::int32_t v = static_cast<const std::int32_t*>(in)[i];
      if (v >= 0 && v < bins) ++h[std::size_t(v)];
    }
  }
  return h;
}

/// Random samples: uniform, runs of equal values, or mostly one value; i32 includes values
/// outside [0, bins) (negative and too large) that must not be counted.
std::vector<std::uint8_t> random_samples(std::size_t n, SampleType type, int bins, int kind,
                                         std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> out(n * sample_bytes(type));
  const int range = type == SampleType::u8 ? 256 : bins + 20;
  int run_value = 0;
  for (std::size_t i = 0; i < n; ++i) {
    int v;
    if (kind == 0) {
      v = int(rng() % std::uint64_t(range));
    } else if (kind == 1) {
      if (i % 97 == 0) run_value = int(rng() % std::uint64_t(range));
      v = run_value;
    } else {
      v = rng() % 10 ? 0 : int(rng() % std::uint64_t(range));
    }
    if (type == SampleType::u8) {
      out[i] = static_cast<std::uint8_t>(v);
    } else {
      std::int32_t s = v - 10;  // some negative, some >= bins
      if (rng() % 1000 == 0) s = (rng() % 2) ? INT32_MIN : INT32_MAX;
      std::memcpy(out.data() + 4 * i, &s, 4);
    }
  }
  return out;
}

TEST(CpuHistogram, EqualsNaiveLoop) {
  const std::size_t sizes[] = {0, 1, 7, 255, 256, 257, 4099, 65537, 300007, 1u << 20};
  const int thread_counts[] = {0, 1, 2, 3, 8, 1000};
  int cases = 0;
  for (SampleType type : {SampleType::u8, SampleType::i32})
    for (int bins : {1, 16, 64, 100, 256, 1000, 4096})
      for (std::size_t n : sizes)
        for (int kind = 0; kind < 3; ++kind) {
          const auto data = random_samples(n, type, bins, kind, n * 31 + bins + kind);
          const Histogram want = naive_histogram(data.data(), n, type, bins);
          for (int t : thread_counts) {
            if (n > 70000 && t == 1000) continue;  // 1000 threads on big inputs: slow, same code
            const Histogram got = cpu::histogram(data.data(), n, type, bins, t);
            ASSERT_EQ(got, want) << to_string(type) << " bins " << bins << " n " << n << " kind "
                                 << kind << " threads " << t;
            ++cases;
          }
        }
  EXPECT_GT(cases, 1000);
}

TEST(CpuHistogram, UnalignedStartAndTail) {
  std::vector<std::uint8_t> data(100003);
  std::mt19937 rng(2);
  for (auto& b : data) b = static_cast<std::uint8_t>(rng());
  for (std::size_t off = 0; off < 9; ++off)
    for (int t : {1, 2, 3})
      ASSERT_EQ(cpu::histogram(data.data() + off, data.size() - off - 5, SampleType::u8, 256, t),
                naive_histogram(data.data() + off, data.size() - off - 5, SampleType::u8, 256))
          << "offset " << off << " threads " << t;
}

TEST(CpuHistogram, BinsOutOfRangeIsUsageError) {
  std::uint8_t x = 0;
  for (int bins : {0, -1, kMaxBins + 1}) {
    try {
      cpu::histogram(&x, 1, SampleType::u8, bins);
      ADD_FAILURE() << "no UsageError for bins " << bins;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bins)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(kMaxBins)), std::string::npos);
    }
  }
  EXPECT_EQ(cpu::histogram(&x, 1, SampleType::u8, kMaxBins).size(), std::size_t(kMaxBins));
}

/// The whole CPU equalization from the pieces: planes → histogram → LUT → apply.
Image cpu_equalize(const Image& in, Mode mode, Formula f = Formula::opencv, int threads = 0) {
  const std::size_t px = in.pixel_count();
  const int np = plane_count(mode, in.channels);
  std::vector<std::uint8_t> planes(px * std::size_t(np));
  cpu::extract_planes(in.pixels.data(), px, in.channels, mode, planes.data(), threads);
  std::vector<Lut> luts;
  for (int p = 0; p < np; ++p) {
    const Histogram h =
        cpu::histogram(planes.data() + std::size_t(p) * px, px, SampleType::u8, 256, threads);
    luts.push_back(make_lut(h.data(), f));
  }
  Image out;
  out.width = in.width;
  out.height = in.height;
  out.channels = output_channels(mode, in.channels);
  out.pixels.resize(out.byte_count());
  cpu::apply(in.pixels.data(), px, in.channels, mode, luts.data(), out.pixels.data(), threads);
  return out;
}

Image random_image(int w, int h, int c, std::uint64_t seed) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels.resize(img.byte_count());
  std::mt19937_64 rng(seed);
  for (auto& b : img.pixels) b = static_cast<std::uint8_t>(rng() % 200 + 20);
  return img;
}

TEST(CpuApply, PlanesAndModesFollowPlanesHpp) {
  for (int c = 1; c <= 4; ++c)
    for (Mode mode : {Mode::luma, Mode::rgb, Mode::gray}) {
      const Image in = random_image(37, 23, c, std::uint64_t(c * 10 + int(mode)));
      const std::size_t px = in.pixel_count();
      const int np = plane_count(mode, c);
      std::vector<std::uint8_t> planes(px * std::size_t(np));
      cpu::extract_planes(in.pixels.data(), px, c, mode, planes.data(), 3);
      // Distinct LUTs per plane, so that a wrong plane shows.
      std::vector<Lut> luts(3);
      for (int p = 0; p < 3; ++p)
        for (int v = 0; v < 256; ++v) luts[p][v] = static_cast<std::uint8_t>(255 - v + 17 * p);
      const int oc = output_channels(mode, c);
      std::vector<std::uint8_t> out(px * std::size_t(oc), 0xAB);
      cpu::apply(in.pixels.data(), px, c, mode, luts.data(), out.data(), 2);
      for (std::size_t i = 0; i < px; ++i) {
        const std::uint8_t* s = &in.pixels[i * std::size_t(c)];
        const std::uint8_t* o = &out[i * std::size_t(oc)];
        if (c < 3) {
          ASSERT_EQ(planes[i], s[0]);
          ASSERT_EQ(o[0], luts[0][s[0]]);
          if (oc == 2) ASSERT_EQ(o[1], s[1]) << "alpha of gray+alpha kept";
          continue;
        }
        const std::uint8_t y = color::luma(s[0], s[1], s[2]);
        if (mode == Mode::rgb) {
          for (int p = 0; p < 3; ++p) {
            ASSERT_EQ(planes[std::size_t(p) * px + i], s[p]);
            ASSERT_EQ(o[p], luts[p][s[p]]);
          }
        } else {
          ASSERT_EQ(planes[i], y);
          if (mode == Mode::gray) {
            ASSERT_EQ(oc, 1);
            ASSERT_EQ(o[0], luts[0][y]);
          } else {
            std::uint8_t r = s[0], g = s[1], b = s[2];
            color::equalize_luma(r, g, b, luts[0].data());
            ASSERT_EQ(o[0], r);
            ASSERT_EQ(o[1], g);
            ASSERT_EQ(o[2], b);
          }
        }
        if (c == 4 && mode != Mode::gray) ASSERT_EQ(o[3], s[3]) << "alpha of RGBA kept";
      }
    }
}

TEST(CpuApply, GrayLutEqualsNaiveForEveryLengthAndOffsetWithAndWithoutSimd) {
  std::vector<std::uint8_t> in(70000 + 80), out(in.size());
  std::mt19937 rng(4);
  for (auto& b : in) b = static_cast<std::uint8_t>(rng());
  Lut lut;
  for (auto& v : lut) v = static_cast<std::uint8_t>(rng());
  for (const char* simd : {"on", "off"}) {
    cpu::set_simd(std::string(simd) == "on");
    for (std::size_t off = 0; off < 3; ++off)
      for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(63), std::size_t(64),
                            std::size_t(65), std::size_t(200), std::size_t(70001)}) {
        std::fill(out.begin(), out.end(), 0xEE);
        cpu::apply(in.data() + off, n, 1, Mode::gray, &lut, out.data() + off, 2);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(out[off + i], lut[in[off + i]]) << "simd " << simd << " n " << n << " i " << i;
        if (off + n < out.size()) ASSERT_EQ(out[off + n], 0xEE) << "wrote past the end";
      }
  }
  cpu::set_simd(true);
}

TEST(CpuApply, ThreadCountDoesNotChangeTheResult) {
  const Image in = random_image(301, 257, 4, 99);
  for (Mode mode : {Mode::luma, Mode::rgb, Mode::gray}) {
    const Image one = cpu_equalize(in, mode, Formula::opencv, 1);
    for (int t : {0, 2, 5, 64})
      EXPECT_EQ(cpu_equalize(in, mode, Formula::opencv, t).pixels, one.pixels);
  }
}

TEST(CpuApply, LumaIdentityLutKeepsColourWithinRounding) {
  // With the identity LUT, RGB → YCrCb → RGB in 8-bit fixed point returns each channel within
  // a couple of levels (the round trip through rounded Cr/Cb is not exact).
  Lut id;
  for (int v = 0; v < 256; ++v) id[v] = static_cast<std::uint8_t>(v);
  int worst = 0;
  for (int r = 0; r < 256; r += 5)
    for (int g = 0; g < 256; g += 5)
      for (int b = 0; b < 256; b += 5) {
        std::uint8_t rr = r, gg = g, bb = b;
        color::equalize_luma(rr, gg, bb, id.data());
        worst = std::max({worst, std::abs(rr - r), std::abs(gg - g), std::abs(bb - b)});
      }
  EXPECT_LE(worst, 2);
}

// ---- against OpenCV 4.6 ----

struct Golden {
  const char* name;
  bool color;
};
const Golden kGoldens[] = {{"page", false},   {"text", false},    {"coins", false},
                           {"camera", false}, {"moon", false},    {"chelsea", true},
                           {"coffee", true},  {"astronaut", true}};

TEST(CpuGolden, GrayByteIdenticalToOpenCV) {
  for (const Golden& g : kGoldens) {
    if (g.color) continue;
    const Image in = load_image(test::source_path(std::string("samples/") + g.name + ".png"));
    const Image want = load_image(
        test::source_path(std::string("tests/data/golden-opencv-4.6/") + g.name + ".png"));
    ASSERT_EQ(in.channels, 1) << g.name;
    ASSERT_NE(in.pixels, want.pixels) << g.name << ": the golden equals its input";
    const Image got = cpu_equalize(in, Mode::gray);
    ASSERT_EQ(got.width, want.width);
    ASSERT_EQ(got.height, want.height);
    ASSERT_EQ(got.channels, want.channels);
    std::size_t diff = 0;
    for (std::size_t i = 0; i < got.pixels.size(); ++i) diff += got.pixels[i] != want.pixels[i];
    EXPECT_EQ(diff, 0u) << g.name << ": " << diff << " pixels differ from cv::equalizeHist";
    // The default mode of a gray image is the same thing.
    EXPECT_EQ(cpu_equalize(in, default_mode(1)).pixels, got.pixels);
  }
}

TEST(CpuGolden, ColorLumaWithinOneOfOpenCV) {
  int overall = 0;
  for (const Golden& g : kGoldens) {
    if (!g.color) continue;
    const Image in = load_image(test::source_path(std::string("samples/") + g.name + ".png"));
    const Image want = load_image(
        test::source_path(std::string("tests/data/golden-opencv-4.6/") + g.name + ".png"));
    ASSERT_GE(in.channels, 3) << g.name;
    ASSERT_NE(in.pixels, want.pixels) << g.name << ": the golden equals its input";
    const Image got = cpu_equalize(in, Mode::luma);
    ASSERT_EQ(got.channels, in.channels);
    ASSERT_EQ(want.pixels.size(), got.pixels.size()) << g.name;
    int worst = 0;
    std::size_t off = 0;
    for (std::size_t i = 0; i < got.pixels.size(); ++i) {
      const int d = std::abs(int(got.pixels[i]) - int(want.pixels[i]));
      worst = std::max(worst, d);
      off += d != 0;
    }
    overall = std::max(overall, worst);
    std::printf("[ golden   ] %s: max |diff| %d, %zu of %zu channel values differ\n", g.name, worst,
                off, got.pixels.size());
    EXPECT_LE(worst, 1) << g.name;
  }
  RecordProperty("max_color_deviation", overall);
}

}  // namespace
}  // namespace histeq
