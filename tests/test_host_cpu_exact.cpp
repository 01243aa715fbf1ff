// test_host_cpu_exact.cpp — the CPU backend's per-pixel stages (cpu::extract_planes, cpu::apply)
// against a straightforward per-pixel reference written with color.hpp, so that the table-driven
// and blocked loops of cpu_backend.cpp stay byte-identical to the formulas the GPU kernels and the
// OpenCV goldens are checked against:
//  - every one of the 2^24 RGB colours (3 and 4 channels) through extract_planes (luma, gray,
//    rgb) and apply (luma with several LUTs, including the saturating extremes; gray; rgb),
//    in one call and in calls of 1..40 pixels (the loops' tails);
//  - random images of odd sizes, 1..4 channels, every mode, 1 and several threads, out of place
//    and in place (the batch executor applies in place), with a guard byte after the output.
// Every test runs twice: with the CPU's SIMD paths (AVX2 where the CPU has it) and with them
// off (cpu::set_simd(false): the portable table-driven loops).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "histeq/color.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/lut.hpp"
#include "histeq/planes.hpp"

namespace histeq {
namespace {

// ---- the reference: one pixel at a time, straight from color.hpp and planes.hpp ----

void ref_extract_planes(const std::uint8_t* in, std::size_t pixels, int c, Mode mode,
                        std::uint8_t* planes) {
  for (std::size_t i = 0; i < pixels; ++i) {
    const std::uint8_t* px = in + i * std::size_t(c);
    if (c < 3)
      planes[i] = px[0];
    else if (mode == Mode::rgb)
      for (int p = 0; p < 3; ++p) planes[std::size_t(p) * pixels + i] = px[p];
    else
      planes[i] = color::luma(px[0], px[1], px[2]);
  }
}

void ref_apply(const std::uint8_t* in, std::size_t pixels, int c, Mode mode, const Lut* luts,
               std::uint8_t* out) {
  const int oc = output_channels(mode, c);
  for (std::size_t i = 0; i < pixels; ++i) {
    const std::uint8_t* px = in + i * std::size_t(c);
    std::uint8_t* o = out + i * std::size_t(oc);
    if (c < 3) {
      o[0] = luts[0][px[0]];
      if (oc == 2) o[1] = px[1];
      continue;
    }
    switch (mode) {
      case Mode::gray: o[0] = luts[0][color::luma(px[0], px[1], px[2])]; break;
      case Mode::rgb:
        for (int p = 0; p < 3; ++p) o[p] = luts[p][px[p]];
        break;
      case Mode::luma: {
        std::uint8_t r = px[0], g = px[1], b = px[2];
        color::equalize_luma(r, g, b, luts[0].data());
        o[0] = r;
        o[1] = g;
        o[2] = b;
        break;
      }
    }
    if (c == 4 && mode != Mode::gray) o[3] = px[3];
  }
}

/// The first differing byte, as a message (empty when equal).
std::string first_diff(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
                       int channels) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return "byte " + std::to_string(i) + " (pixel " + std::to_string(i / std::size_t(channels)) +
             ", channel " + std::to_string(i % std::size_t(channels)) + "): got " +
             std::to_string(got[i]) + ", want " + std::to_string(want[i]);
  return {};
}

/// LUTs that reach every corner of the luma reconstruction: identity, reversed, random, all 0
/// and all 255 (the two ends of R/G/B saturation), and a steep one.
std::vector<Lut> test_luts() {
  std::vector<Lut> luts(6);
  std::mt19937 rng(12345);
  for (int v = 0; v < 256; ++v) {
    luts[0][v] = static_cast<std::uint8_t>(v);
    luts[1][v] = static_cast<std::uint8_t>(255 - v);
    luts[2][v] = static_cast<std::uint8_t>(rng());
    luts[3][v] = 0;
    luts[4][v] = 255;
    luts[5][v] = static_cast<std::uint8_t>(v < 96 ? 0 : (v > 160 ? 255 : (v - 96) * 4));
  }
  return luts;
}

/// All 2^24 colours, pixel i = (i >> 16, i >> 8, i) & 0xff; with 4 channels alpha = a hash of i.
std::vector<std::uint8_t> all_colours(int channels) {
  const std::size_t n = std::size_t(1) << 24;
  std::vector<std::uint8_t> img(n * std::size_t(channels));
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t* px = &img[i * std::size_t(channels)];
    px[0] = static_cast<std::uint8_t>(i >> 16);
    px[1] = static_cast<std::uint8_t>(i >> 8);
    px[2] = static_cast<std::uint8_t>(i);
    if (channels == 4) px[3] = static_cast<std::uint8_t>((i * 2654435761u) >> 13);
  }
  return img;
}

/// Each test body runs once with SIMD and once without (the fixture's parameter,
/// cpu::set_simd); SIMD is on again afterwards.
class CpuExact : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { cpu::set_simd(GetParam()); }
  void TearDown() override { cpu::set_simd(true); }
};
INSTANTIATE_TEST_SUITE_P(Simd, CpuExact, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return std::string(p.param ? "simd" : "no_simd");
                         });

TEST_P(CpuExact, EveryRgbColourThroughExtractPlanes) {
  const std::size_t n = std::size_t(1) << 24;
  for (int c : {3, 4}) {
    const auto img = all_colours(c);
    for (Mode mode : {Mode::luma, Mode::gray, Mode::rgb}) {
      const std::size_t np = std::size_t(plane_count(mode, c));
      std::vector<std::uint8_t> want(n * np), got(n * np, 0xEE);
      ref_extract_planes(img.data(), n, c, mode, want.data());
      cpu::extract_planes(img.data(), n, c, mode, got.data(), 1);
      ASSERT_EQ(first_diff(got, want, 1), "") << c << " channels, mode " << to_string(mode);
    }
  }
}

TEST_P(CpuExact, EveryRgbColourThroughApplyLumaWithEveryTestLut) {
  const std::size_t n = std::size_t(1) << 24;
  for (int c : {3, 4}) {
    const auto img = all_colours(c);
    std::vector<std::uint8_t> want(img.size()), got(img.size());
    int k = 0;
    for (const Lut& lut : test_luts()) {
      ref_apply(img.data(), n, c, Mode::luma, &lut, want.data());
      std::fill(got.begin(), got.end(), 0xEE);
      cpu::apply(img.data(), n, c, Mode::luma, &lut, got.data(), 1);
      ASSERT_EQ(first_diff(got, want, c), "") << c << " channels, LUT " << k;
      ++k;
    }
  }
}

TEST_P(CpuExact, EveryRgbColourThroughApplyGrayAndRgb) {
  const std::size_t n = std::size_t(1) << 24;
  const std::vector<Lut> luts = test_luts();
  const Lut rgb_luts[3] = {luts[2], luts[1], luts[5]};  // a different LUT per plane
  for (int c : {3, 4}) {
    const auto img = all_colours(c);
    {
      std::vector<std::uint8_t> want(n), got(n, 0xEE);
      ref_apply(img.data(), n, c, Mode::gray, &luts[2], want.data());
      cpu::apply(img.data(), n, c, Mode::gray, &luts[2], got.data(), 1);
      ASSERT_EQ(first_diff(got, want, 1), "") << c << " channels, gray";
    }
    std::vector<std::uint8_t> want(img.size()), got(img.size(), 0xEE);
    ref_apply(img.data(), n, c, Mode::rgb, rgb_luts, want.data());
    cpu::apply(img.data(), n, c, Mode::rgb, rgb_luts, got.data(), 1);
    ASSERT_EQ(first_diff(got, want, c), "") << c << " channels, rgb";
  }
}

TEST_P(CpuExact, EveryRgbColourInShortCalls) {
  // The same 2^24 colours, in calls of 1, 2, ..., 40 pixels in turn: every colour also goes
  // through the loops' short and tail paths (a 2^24-pixel call has no tail).
  const std::size_t n = std::size_t(1) << 24;
  const Lut lut = test_luts()[2];
  for (int c : {3, 4}) {
    const auto img = all_colours(c);
    for (Mode mode : {Mode::luma, Mode::gray}) {
      const std::size_t oc = std::size_t(output_channels(mode, c));
      std::vector<std::uint8_t> want(n * oc), got(n * oc, 0xEE), want_y(n), got_y(n, 0xEE);
      ref_apply(img.data(), n, c, mode, &lut, want.data());
      ref_extract_planes(img.data(), n, c, mode, want_y.data());
      std::size_t len = 1;
      for (std::size_t i = 0; i < n; i += len, len = len % 40 + 1) {
        const std::size_t m = std::min(len, n - i);
        cpu::apply(img.data() + i * std::size_t(c), m, c, mode, &lut, got.data() + i * oc, 1);
        cpu::extract_planes(img.data() + i * std::size_t(c), m, c, mode, got_y.data() + i, 1);
      }
      ASSERT_EQ(first_diff(got, want, int(oc)), "") << c << " channels, " << to_string(mode);
      ASSERT_EQ(first_diff(got_y, want_y, 1), "") << c << " channels, " << to_string(mode);
    }
  }
}

/// The image with its first and third channels swapped (RGB(A) ↔ BGR(A)).
std::vector<std::uint8_t> swapped(const std::vector<std::uint8_t>& img, int c) {
  std::vector<std::uint8_t> out = img;
  for (std::size_t i = 0; i < out.size(); i += std::size_t(c)) std::swap(out[i], out[i + 2]);
  return out;
}

TEST_P(CpuExact, EveryColourInBgrOrderIsTheRgbResultSwapped) {
  // ChannelOrder::bgr: the luma of luma and gray modes from channel 2 as red; luma mode writes
  // the channels back in BGR order. In calls of 1..40 pixels and in one, on 1 and 3 threads.
  const std::size_t n = std::size_t(1) << 24;
  const Lut lut = test_luts()[5];
  for (int c : {3, 4}) {
    const auto rgb = all_colours(c);
    const auto bgr = swapped(rgb, c);
    for (Mode mode : {Mode::luma, Mode::gray}) {
      const std::size_t oc = std::size_t(output_channels(mode, c));
      std::vector<std::uint8_t> want(n * oc), got(n * oc, 0xEE), want_y(n), got_y(n, 0xEE);
      ref_apply(rgb.data(), n, c, mode, &lut, want.data());
      if (oc == std::size_t(c)) want = swapped(want, c);
      ref_extract_planes(rgb.data(), n, c, mode, want_y.data());
      cpu::apply(bgr.data(), n, c, mode, &lut, got.data(), 3, ChannelOrder::bgr);
      cpu::extract_planes(bgr.data(), n, c, mode, got_y.data(), 3, ChannelOrder::bgr);
      ASSERT_EQ(first_diff(got, want, int(oc)), "") << c << " channels, " << to_string(mode);
      ASSERT_EQ(first_diff(got_y, want_y, 1), "") << c << " channels, " << to_string(mode);
      std::fill(got.begin(), got.end(), 0xEE);
      std::size_t len = 1;
      for (std::size_t i = 0; i < n; i += len, len = len % 40 + 1) {
        const std::size_t m = std::min(len, n - i);
        cpu::apply(bgr.data() + i * std::size_t(c), m, c, mode, &lut, got.data() + i * oc, 1,
                   ChannelOrder::bgr);
      }
      ASSERT_EQ(first_diff(got, want, int(oc)), "") << c << " channels, short calls";
    }
    // rgb mode is per channel: the planes in memory order, whatever the order says.
    std::vector<std::uint8_t> a(n * 3), b(n * 3);
    cpu::extract_planes(bgr.data(), n, c, Mode::rgb, a.data(), 1, ChannelOrder::bgr);
    cpu::extract_planes(bgr.data(), n, c, Mode::rgb, b.data(), 1, ChannelOrder::rgb);
    ASSERT_EQ(first_diff(a, b, 1), "") << c << " channels, rgb planes";
  }
}

TEST_P(CpuExact, ReplaceLumaIsChromaOfTheInputAndToRgbOfTheNewLuma) {
  // cpu::replace_luma (CLAHE's luma mode): every colour with a pseudo-random new Y, against
  // color::chroma + color::to_rgb per pixel; both orders, short calls, in place.
  const std::size_t n = std::size_t(1) << 24;
  std::vector<std::uint8_t> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = static_cast<std::uint8_t>((i * 2246822519u) >> 24);
  for (int c : {3, 4}) {
    const auto rgb = all_colours(c);
    std::vector<std::uint8_t> want(rgb.size());
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint8_t* px = &rgb[i * std::size_t(c)];
      std::uint8_t* o = &want[i * std::size_t(c)];
      std::uint8_t cr, cb;
      color::chroma(px[0], px[2], color::luma(px[0], px[1], px[2]), cr, cb);
      color::to_rgb(y[i], cr, cb, o[0], o[1], o[2]);
      if (c == 4) o[3] = px[3];
    }
    std::vector<std::uint8_t> got(rgb.size(), 0xEE);
    cpu::replace_luma(rgb.data(), n, c, y.data(), got.data(), 3);
    ASSERT_EQ(first_diff(got, want, c), "") << c << " channels";
    const auto bgr = swapped(rgb, c);
    std::vector<std::uint8_t> in_place = bgr;
    std::size_t len = 1;
    for (std::size_t i = 0; i < n; i += len, len = len % 40 + 1) {
      const std::size_t m = std::min(len, n - i);
      std::uint8_t* p = in_place.data() + i * std::size_t(c);
      cpu::replace_luma(p, m, c, y.data() + i, p, 1, ChannelOrder::bgr);
    }
    ASSERT_EQ(first_diff(in_place, swapped(want, c), c), "") << c << " channels, bgr in place";
  }
  std::vector<std::uint8_t> one(2);
  EXPECT_THROW(cpu::replace_luma(one.data(), 1, 2, y.data(), one.data()), Error);
}

TEST_P(CpuExact, RandomImagesEveryModeChannelCountThreadCountAndInPlace) {
  // Sizes around the loops' block and unroll widths, a few odd ones and one big enough to be
  // split over several threads; pixels uniform random (every code path, no structure).
  const std::size_t sizes[] = {0,  1,  2,  3,   5,   7,    8,    15,   16,      17,      31,    33,
                               63, 64, 65, 255, 257, 1023, 1025, 4097, 37 * 23, 1 << 16, 300007};
  const std::vector<Lut> luts = test_luts();
  std::mt19937_64 rng(7);
  int cases = 0;
  for (std::size_t n : sizes)
    for (int c = 1; c <= 4; ++c) {
      std::vector<std::uint8_t> img(n * std::size_t(c));
      for (auto& b : img) b = static_cast<std::uint8_t>(rng());
      const Lut plane_luts[3] = {luts[std::size_t(rng() % luts.size())],
                                 luts[std::size_t(rng() % luts.size())],
                                 luts[std::size_t(rng() % luts.size())]};
      for (Mode mode : {Mode::luma, Mode::rgb, Mode::gray}) {
        const int np = plane_count(mode, c), oc = output_channels(mode, c);
        std::vector<std::uint8_t> want_planes(n * std::size_t(np)), want(n * std::size_t(oc));
        ref_extract_planes(img.data(), n, c, mode, want_planes.data());
        ref_apply(img.data(), n, c, mode, plane_luts, want.data());
        for (int t : {1, 3}) {
          const std::string what = "n " + std::to_string(n) + ", " + std::to_string(c) +
                                   " channels, mode " + to_string(mode) + ", threads " +
                                   std::to_string(t);
          // A guard byte after each output: nothing is written past the end.
          std::vector<std::uint8_t> planes(want_planes.size() + 1, 0xEE);
          cpu::extract_planes(img.data(), n, c, mode, planes.data(), t);
          ASSERT_EQ(planes.back(), 0xEE) << what << ": extract_planes wrote past the end";
          planes.pop_back();
          ASSERT_EQ(first_diff(planes, want_planes, 1), "") << what << ", extract_planes";
          std::vector<std::uint8_t> out(want.size() + 1, 0xEE);
          cpu::apply(img.data(), n, c, mode, plane_luts, out.data(), t);
          ASSERT_EQ(out.back(), 0xEE) << what << ": apply wrote past the end";
          out.pop_back();
          ASSERT_EQ(first_diff(out, want, oc), "") << what << ", apply";
          if (oc == c) {  // in place, as the batch executor calls it
            std::vector<std::uint8_t> buf = img;
            cpu::apply(buf.data(), n, c, mode, plane_luts, buf.data(), t);
            ASSERT_EQ(first_diff(buf, want, oc), "") << what << ", apply in place";
          }
          ++cases;
        }
      }
    }
  EXPECT_EQ(cases, int(std::size(sizes)) * 4 * 3 * 2);
}

TEST_P(CpuExact, UnalignedBuffers) {
  // The same pixels at every start offset 0..7 of input and output (the loops load several
  // pixels at a time).
  const std::size_t n = 1000;
  const std::vector<Lut> luts = test_luts();
  const Lut plane_luts[3] = {luts[2], luts[5], luts[1]};
  std::mt19937 rng(11);
  for (int c = 1; c <= 4; ++c) {
    std::vector<std::uint8_t> src(n * std::size_t(c) + 8);
    for (auto& b : src) b = static_cast<std::uint8_t>(rng());
    for (Mode mode : {Mode::luma, Mode::rgb, Mode::gray}) {
      const int oc = output_channels(mode, c), np = plane_count(mode, c);
      for (std::size_t off = 0; off < 8; ++off) {
        const std::uint8_t* in = src.data() + off;
        std::vector<std::uint8_t> want(n * std::size_t(oc)), got_buf(want.size() + 8);
        ref_apply(in, n, c, mode, plane_luts, want.data());
        cpu::apply(in, n, c, mode, plane_luts, got_buf.data() + (7 - off), 1);
        const std::vector<std::uint8_t> got(
            got_buf.begin() + std::ptrdiff_t(7 - off),
            got_buf.begin() + std::ptrdiff_t(7 - off + want.size()));
        ASSERT_EQ(first_diff(got, want, oc), "")
            << c << " ch, " << to_string(mode) << ", off " << off;
        std::vector<std::uint8_t> want_p(n * std::size_t(np)), pbuf(want_p.size() + 8);
        ref_extract_planes(in, n, c, mode, want_p.data());
        cpu::extract_planes(in, n, c, mode, pbuf.data() + off, 1);
        const std::vector<std::uint8_t> got_p(pbuf.begin() + std::ptrdiff_t(off),
                                              pbuf.begin() + std::ptrdiff_t(off + want_p.size()));
        ASSERT_EQ(first_diff(got_p, want_p, 1), "")
            << c << " ch, " << to_string(mode) << ", off " << off;
      }
    }
  }
}

}  // namespace
}  // namespace histeq
