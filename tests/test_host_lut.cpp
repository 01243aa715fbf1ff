// test_host_lut.cpp — the CDF and the two LUT formulas (lut.hpp, lut_formula.hpp) on the host.
// The opencv formula is checked against a transcription of cv::equalizeHist's LUT loop
// (OpenCV 4.6 modules/imgproc/src/histogram.cpp: int running sum, float scale, cvRound), and the
// exact formula against rational arithmetic; the crafted cases show where the two differ.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/lut.hpp"
#include "histeq/types.hpp"

namespace histeq {
namespace {

using Hist = std::array<std::uint64_t, 256>;

/// OpenCV's equalizeHist LUT loop, written out as in histogram.cpp (with the identity for a
/// constant image, which OpenCV produces by dst.setTo(v0)).
Lut opencv_reference(const Hist& h) {
  Lut lut{};
  int i = 0;
  while (i < 256 && !h[i]) ++i;
  long long total = 0;
  for (auto c : h) total += static_cast<long long>(c);
  if (i == 256 || static_cast<long long>(h[i]) == total) {
    for (int v = 0; v < 256; ++v) lut[v] = static_cast<std::uint8_t>(v);
    return lut;
  }
  const float scale = (256 - 1.f) / static_cast<float>(total - static_cast<long long>(h[i]));
  long long sum = 0;
  for (lut[i++] = 0; i < 256; ++i) {
    sum += static_cast<long long>(h[i]);
    const float p = static_cast<float>(sum) * scale;
    const long r = std::lrintf(p);  // cvRound: round half to even
    lut[i] = static_cast<std::uint8_t>(r < 0 ? 0 : r > 255 ? 255 : r);
  }
  return lut;
}

/// Exact rational rounding half up of c·255/d, computed with long double-free integer math.
std::uint64_t exact_round(std::uint64_t c, std::uint64_t d) {
  const std::uint64_t q = (c * 255) / d, r = (c * 255) % d;
  return 2 * r >= d ? q + 1 : q;
}

TEST(Types, NamesRoundTripAndBadValuesNameTheChoices) {
  for (Mode m : {Mode::luma, Mode::rgb, Mode::gray}) EXPECT_EQ(parse_mode(to_string(m)), m);
  for (Formula f : {Formula::opencv, Formula::exact}) EXPECT_EQ(parse_formula(to_string(f)), f);
  for (Backend b : {Backend::automatic, Backend::cuda, Backend::cpu})
    EXPECT_EQ(parse_backend(to_string(b)), b);
  for (SampleType t : {SampleType::u8, SampleType::i32})
    EXPECT_EQ(parse_sample_type(to_string(t)), t);
  EXPECT_EQ(parse_sample_type("int32"), SampleType::i32);
  EXPECT_EQ(parse_backend("auto"), Backend::automatic);
  struct Case {
    std::function<void()> f;
    const char* bad;
    const char* choice;
  };
  const Case cases[] = {
      {[] { parse_mode("hsv"); }, "'hsv'", "luma"},
      {[] { parse_formula("clahe"); }, "'clahe'", "exact"},
      {[] { parse_backend("opencl"); }, "'opencl'", "cuda"},
      {[] { parse_sample_type("f32"); }, "'f32'", "i32"},
  };
  for (const auto& c : cases) {
    try {
      c.f();
      ADD_FAILURE() << "no UsageError for " << c.bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.bad), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.choice), std::string::npos) << e.what();
    }
  }
}

TEST(Cdf, MonotoneAndLastIsTotal) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    Hist h{};
    std::uint64_t n = 0;
    for (auto& c : h) {
      c = rng() % 4 == 0 ? 0 : rng() % 100000;
      n += c;
    }
    const auto cdf = cumulate(h.data());
    EXPECT_EQ(cdf[0], h[0]);
    for (int v = 1; v < 256; ++v) {
      EXPECT_GE(cdf[v], cdf[v - 1]);
      EXPECT_EQ(cdf[v] - cdf[v - 1], h[v]);
    }
    EXPECT_EQ(cdf[255], n);
  }
}

TEST(Lut, ConstantImageIsIdentity) {
  for (int v : {0, 1, 77, 128, 255}) {
    Hist h{};
    h[v] = 12345;
    for (Formula f : {Formula::opencv, Formula::exact}) {
      const Lut lut = make_lut(h.data(), f);
      for (int x = 0; x < 256; ++x)
        ASSERT_EQ(lut[x], x) << "value " << v << " formula " << to_string(f);
    }
  }
  Hist empty{};
  const Lut lut = make_lut(empty.data(), Formula::opencv);
  for (int x = 0; x < 256; ++x) ASSERT_EQ(lut[x], x);
}

TEST(Lut, AllValuesOnceMapToThemselves) {
  // 256 pixels, one of each value: cdf(v) − h[0] = v, d = 255, so lut[v] = v exactly.
  for (std::uint64_t k : {1, 3, 1000}) {
    Hist h;
    h.fill(k);
    for (Formula f : {Formula::opencv, Formula::exact}) {
      const Lut lut = make_lut(h.data(), f);
      for (int x = 0; x < 256; ++x) ASSERT_EQ(lut[x], x) << "k " << k << " " << to_string(f);
    }
  }
}

TEST(Lut, FirstOccupiedBinMapsToZeroAndLastTo255) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    Hist h{};
    const int lo = int(rng() % 200), hi = lo + 1 + int(rng() % (255 - lo));
    h[lo] = 1 + rng() % 1000;
    h[hi] = 1 + rng() % 1000;
    for (int v = lo + 1; v < hi; ++v) h[v] = rng() % 3 == 0 ? rng() % 500 : 0;
    for (Formula f : {Formula::opencv, Formula::exact}) {
      const Lut lut = make_lut(h.data(), f);
      EXPECT_EQ(lut[lo], 0);
      EXPECT_EQ(lut[hi], 255);
      for (int v = lo + 1; v <= hi; ++v) EXPECT_GE(lut[v], lut[v - 1]) << "LUT not monotone";
    }
  }
}

TEST(Lut, OpencvFormulaEqualsEqualizeHistLoop) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    Hist h{};
    const int occupied = 1 + int(rng() % 256);
    const std::uint64_t scale = std::uint64_t(1) << (rng() % 16);
    for (int i = 0; i < occupied; ++i) h[rng() % 256] += 1 + rng() % scale;
    ASSERT_EQ(make_lut(h.data(), Formula::opencv), opencv_reference(h)) << "trial " << trial;
  }
}

TEST(Lut, ExactFormulaIsRationalRoundHalfUp) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 2000; ++trial) {
    Hist h{};
    for (int i = 0; i < 1 + int(rng() % 256); ++i) h[rng() % 256] += 1 + rng() % 100000;
    const Lut lut = make_lut(h.data(), Formula::exact);
    int v0 = 0;
    while (!h[v0]) ++v0;
    const auto cdf = cumulate(h.data());
    const std::uint64_t d = cdf[255] - h[v0];
    if (d == 0) continue;
    for (int v = v0; v < 256; ++v) ASSERT_EQ(lut[v], exact_round(cdf[v] - h[v0], d)) << v;
  }
}

TEST(Lut, TiesAtHalfRoundToEvenInOpencvAndUpInExact) {
  // N = 511, h[v0 = 0] = 1, so d = 510 and scale = 255/510 = 0.5 exactly in float32: every odd
  // c = cdf − h[v0] gives a product of exactly k + .5.
  Hist h{};
  h[0] = 1;
  h[1] = 1;    // c = 1  → 0.5
  h[2] = 2;    // c = 3  → 1.5
  h[3] = 2;    // c = 5  → 2.5
  h[4] = 2;    // c = 7  → 3.5
  h[5] = 503;  // c = 510 → 255
  const Lut cv = make_lut(h.data(), Formula::opencv), ex = make_lut(h.data(), Formula::exact);
  const int c[] = {0, 1, 3, 5, 7};
  int differ = 0;
  for (int v = 1; v <= 4; ++v) {
    const double p = c[v] * 0.5;
    ASSERT_EQ(p - std::floor(p), 0.5);
    EXPECT_EQ(cv[v], std::lrint(p)) << "opencv: half to even at bin " << v;
    EXPECT_EQ(cv[v] % 2, 0);
    EXPECT_EQ(ex[v], static_cast<int>(std::floor(p)) + 1) << "exact: half up at bin " << v;
    differ += cv[v] != ex[v];
  }
  EXPECT_EQ(differ, 2);  // 0.5 → 0 vs 1 and 2.5 → 2 vs 3; 1.5 and 3.5 agree (even is up)
  EXPECT_EQ(cv[5], 255);
  EXPECT_EQ(ex[5], 255);
}

TEST(Lut, Float32RoundingMovesAProductAcrossHalf) {
  // Search for (c, d) where the exact product c·255/d is NOT a tie, yet float32(c)·float32(255/d)
  // lands on the other side of k + .5 (cases exist from d ≈ 26000, a 163×163 image).
  std::uint64_t fc = 0, fd = 0;
  for (std::uint64_t d = 2; d < 200000 && !fd; ++d) {
    const float s = 255.0f / static_cast<float>(d);
    for (std::uint64_t k = 0; k < 255 && !fd; ++k) {
      const std::uint64_t mid = ((2 * k + 1) * d) / 510;  // c with c·255/d just below k + .5
      for (std::uint64_t c = mid; c <= mid + 1 && c < d; ++c) {
        if (c == 0 || (c * 510) % (2 * d) == d) continue;  // skip exact ties
        if (static_cast<std::uint64_t>(std::lrintf(static_cast<float>(c) * s)) !=
            exact_round(c, d)) {
          fc = c;
          fd = d;
          break;
        }
      }
    }
  }
  ASSERT_NE(fd, 0u) << "no float32 rounding case found";
  // Histogram: v0 = 0 holds 1 pixel, bin 100 holds c pixels, bin 200 the rest (d − c).
  Hist h{};
  h[0] = 1;
  h[100] = fc;
  h[200] = fd - fc;
  const Lut cv = make_lut(h.data(), Formula::opencv), ex = make_lut(h.data(), Formula::exact);
  EXPECT_EQ(cv, opencv_reference(h));
  EXPECT_EQ(ex[100], exact_round(fc, fd));
  EXPECT_NE(cv[100], ex[100]) << "c=" << fc << " d=" << fd;
  EXPECT_EQ(std::abs(int(cv[100]) - int(ex[100])), 1);
}

TEST(Lut, BeyondFloat24BitsCdfIsRounded) {
  // Over 2^24 pixels cdf − h[v0] is no longer exact in float32; the opencv formula still follows
  // OpenCV (the float conversion of the running sum), the exact formula does not.
  Hist h{};
  h[0] = 1;
  h[1] = (std::uint64_t(1) << 24) + 1;  // odd, not representable in float32
  h[2] = (std::uint64_t(1) << 25) + 3;
  EXPECT_EQ(make_lut(h.data(), Formula::opencv), opencv_reference(h));
  const Lut ex = make_lut(h.data(), Formula::exact);
  const auto cdf = cumulate(h.data());
  EXPECT_EQ(ex[1], exact_round(cdf[1] - 1, cdf[255] - 1));
  EXPECT_EQ(ex[2], 255);
}

TEST(Lut, EqualizingTwiceIsStable) {
  // Apply the LUT to the histogram (the equalized image's histogram), equalize again: when the
  // first occupied bin is the only one mapped to 0, a second pass changes nothing.
  std::mt19937_64 rng(13);
  int checked = 0;
  for (int trial = 0; trial < 500; ++trial) {
    Hist h{};
    for (int i = 0; i < 1 + int(rng() % 256); ++i) h[rng() % 256] += 1 + rng() % 5000;
    for (Formula f : {Formula::opencv, Formula::exact}) {
      const Lut l1 = make_lut(h.data(), f);
      Hist h2{};
      for (int v = 0; v < 256; ++v) h2[l1[v]] += h[v];
      int v0 = 0;
      while (!h[v0]) ++v0;
      if (h2[l1[v0]] != h[v0]) continue;  // another value merged into 0: the scale changes
      const Lut l2 = make_lut(h2.data(), f);
      for (int v = 0; v < 256; ++v)
        if (h[v]) ASSERT_EQ(l2[l1[v]], l1[v]) << "trial " << trial << " value " << v;
      ++checked;
    }
  }
  EXPECT_GT(checked, 500);
}

}  // namespace
}  // namespace histeq
