// test_host_match.cpp — histogram matching's LUT (match_lut, match_lut16) and its reference
// (MatchReference), histeq/match.hpp. The LUTs are checked on cases worked out by hand and
// against a model written here as scikit-image and NumPy state the rule: np.bincount of the
// source (levels 0..its highest), the reference's nonzero levels, cumulative counts over the
// sizes, np.interp by bisection with arr_interp's branches, np.rint.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "histeq/color.hpp"
#include "histeq/error.hpp"
#include "histeq/match.hpp"

namespace histeq {
namespace {

using Counts = std::vector<std::uint64_t>;

/// np.interp(x, xp, fp) at one x: NumPy's binary search (the last j with xp[j] <= x; -1 below,
/// len above), then arr_interp's branches in its order.
double np_interp(double x, const std::vector<double>& xp, const std::vector<double>& fp) {
  const std::ptrdiff_t len = std::ptrdiff_t(xp.size());
  if (len == 1) return x < xp[0] ? fp[0] : x > xp[0] ? fp[0] : fp[0];
  std::ptrdiff_t j;
  if (x > xp[std::size_t(len - 1)]) {
    j = len;
  } else if (x < xp[0]) {
    j = -1;
  } else {
    std::ptrdiff_t lo = 0, hi = len;  // bisection: first index with xp[i] > x, minus one
    while (lo < hi) {
      const std::ptrdiff_t mid = lo + (hi - lo) / 2;
      if (x >= xp[std::size_t(mid)])
        lo = mid + 1;
      else
        hi = mid;
    }
    j = lo - 1;
  }
  if (j == -1) return fp[0];
  if (j == len) return fp[std::size_t(len - 1)];
  const std::size_t u = std::size_t(j);
  if (j == len - 1) return fp[u];
  if (xp[u] == x) return fp[u];
  const double slope = (fp[u + 1] - fp[u]) / (xp[u + 1] - xp[u]);
  return slope * (x - xp[u]) + fp[u];  // no multiply-add: -ffp-contract=off (tests/CMakeLists)
}

/// _match_cumulative_cdf's values for the source levels 0..max (the levels np.bincount gives),
/// rounded by np.rint. Empty when the source is empty.
std::vector<std::uint32_t> model(const Counts& src, const Counts& ref) {
  std::size_t top = src.size();
  while (top > 0 && src[top - 1] == 0) --top;
  std::uint64_t n_src = 0, n_ref = 0;
  for (auto c : src) n_src += c;
  for (auto c : ref) n_ref += c;
  std::vector<double> xp, fp;
  std::uint64_t cum = 0;
  for (std::size_t v = 0; v < ref.size(); ++v) {
    if (ref[v] == 0) continue;
    cum += ref[v];
    fp.push_back(double(v));
    xp.push_back(double(cum) / double(n_ref));
  }
  std::vector<std::uint32_t> out;
  cum = 0;
  for (std::size_t v = 0; v < top; ++v) {
    cum += src[v];
    out.push_back(std::uint32_t(std::rint(np_interp(double(cum) / double(n_src), xp, fp))));
  }
  return out;
}

Counts counts(std::size_t levels, std::initializer_list<std::pair<std::size_t, std::uint64_t>> l) {
  Counts c(levels, 0);
  for (const auto& [v, n] : l) c[v] = n;
  return c;
}

template <class L>
void expect_model(const Counts& src, const Counts& ref, const L& lut, const std::string& what) {
  const auto want = model(src, ref);
  ASSERT_FALSE(want.empty()) << what;
  for (std::size_t v = 0; v < want.size(); ++v)
    ASSERT_EQ(lut[v], want[v]) << what << " level " << v;
  // Above the source's highest level: as that level (those levels do not occur).
  for (std::size_t v = want.size(); v < src.size(); ++v)
    ASSERT_EQ(lut[v], lut[want.size() - 1]) << what << " level " << v;
}

TEST(MatchLut, HandWorkedCases) {
  // One source level (100): below it quantile 0 < the first reference quantile (0.25): the
  // lowest reference level; from it on quantile 1: the highest.
  Lut lut =
      match_lut(counts(256, {{100, 5}}).data(), counts(256, {{10, 1}, {20, 1}, {30, 2}}).data());
  for (int v = 0; v < 256; ++v) EXPECT_EQ(lut[v], v < 100 ? 10 : 30) << v;
  // Two source levels 0 and 255, quantiles 0.5 and 1: an exact hit of the reference's second
  // quantile (0.5, level 100) and its last (level 200).
  lut = match_lut(counts(256, {{0, 1}, {255, 1}}).data(),
                  counts(256, {{0, 1}, {100, 1}, {200, 2}}).data());
  EXPECT_EQ(lut[0], 100);
  for (int v = 1; v < 255; ++v) EXPECT_EQ(lut[v], 100) << v;
  EXPECT_EQ(lut[255], 200);
  // A reference with a gap (levels 50 and 200, quantiles 0.5 and 1) and a uniform source over
  // 0..3 (quantiles 0.25, 0.5, 0.75, 1): 50, 50, 50 + 300 * 0.25 = 125, 200.
  lut = match_lut(counts(256, {{0, 1}, {1, 1}, {2, 1}, {3, 1}}).data(),
                  counts(256, {{50, 2}, {200, 2}}).data());
  EXPECT_EQ(lut[0], 50);
  EXPECT_EQ(lut[1], 50);
  EXPECT_EQ(lut[2], 125);
  EXPECT_EQ(lut[3], 200);
  EXPECT_EQ(lut[4], 200);
  EXPECT_EQ(lut[255], 200);
  // Halves round to even: reference levels 0 and 5 (quantiles 0.5, 1), source quantile 0.75:
  // 10 * 0.25 = 2.5 → 2; levels 0 and 3: 6 * 0.25 = 1.5 → 2.
  lut = match_lut(counts(256, {{0, 3}, {1, 1}}).data(), counts(256, {{0, 1}, {5, 1}}).data());
  EXPECT_EQ(lut[0], 2);
  EXPECT_EQ(lut[1], 5);
  lut = match_lut(counts(256, {{0, 3}, {1, 1}}).data(), counts(256, {{0, 1}, {3, 1}}).data());
  EXPECT_EQ(lut[0], 2);
  EXPECT_EQ(lut[1], 3);
  // A one-level reference: everything maps to it.
  lut = match_lut(counts(256, {{7, 3}, {90, 1}}).data(), counts(256, {{42, 9}}).data());
  for (int v = 0; v < 256; ++v) EXPECT_EQ(lut[v], 42) << v;
}

TEST(MatchLut, EmptyReferenceThrowsAndEmptySourceIsTheIdentity) {
  const Counts none(256, 0), some = counts(256, {{3, 1}});
  EXPECT_THROW(match_lut(some.data(), none.data()), UsageError);
  EXPECT_THROW(match_lut(none.data(), none.data()), UsageError);
  const Lut id = match_lut(none.data(), some.data());
  for (int v = 0; v < 256; ++v) EXPECT_EQ(id[v], v);
  const Counts none16(65536, 0), some16 = counts(65536, {{3000, 2}});
  EXPECT_THROW(match_lut16(some16.data(), none16.data()), UsageError);
  const auto id16 = match_lut16(none16.data(), some16.data());
  for (int v = 0; v < 65536; ++v) ASSERT_EQ(id16[std::size_t(v)], v);
}

TEST(MatchLut, SourceEqualToReferenceKeepsItsLevels) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 20; ++round) {
    Counts h(256, 0);
    for (int v = 0; v < 256; ++v)
      if (rng() % 3 == 0) h[std::size_t(v)] = 1 + rng() % (round < 10 ? 1000 : (1ull << 40));
    if (std::all_of(h.begin(), h.end(), [](auto c) { return c == 0; })) h[17] = 1;
    const Lut lut = match_lut(h.data(), h.data());
    for (int v = 0; v < 256; ++v)
      if (h[std::size_t(v)] != 0) ASSERT_EQ(lut[v], v) << "round " << round;
  }
  Counts h16(65536, 0);
  for (int i = 0; i < 5000; ++i) h16[rng() % 65536] += 1 + rng() % 50;
  const auto lut16 = match_lut16(h16.data(), h16.data());
  for (int v = 0; v < 65536; ++v)
    if (h16[std::size_t(v)] != 0) ASSERT_EQ(lut16[std::size_t(v)], v);
}

/// Random histograms of several shapes: dense, sparse, a few levels, all-zero stretches,
/// huge counts.
Counts random_counts(std::mt19937_64& rng, std::size_t levels, int shape) {
  Counts h(levels, 0);
  const std::size_t lo = rng() % levels, span = 1 + rng() % (levels - lo);
  switch (shape % 5) {
    case 0:  // dense over a span
      for (std::size_t v = lo; v < lo + span; ++v) h[v] = rng() % 100;
      break;
    case 1:  // sparse: a few levels
      for (int k = 0; k < 1 + int(rng() % 6); ++k) h[rng() % levels] += 1 + rng() % 10;
      break;
    case 2:  // two far levels
      h[lo] = 1 + rng() % 3;
      h[lo + span - 1] += 1 + rng() % 3;
      break;
    case 3:  // huge counts, gaps
      for (std::size_t v = lo; v < lo + span; v += 1 + rng() % 40) h[v] = rng() % (1ull << 42);
      break;
    default:  // a peak and a tail
      for (std::size_t v = 0; v < levels; ++v) h[v] = rng() % 50 == 0 ? rng() % 5 : 0;
      h[lo] += 1000000;
  }
  if (std::all_of(h.begin(), h.end(), [](auto c) { return c == 0; })) h[lo] = 1;
  return h;
}

TEST(MatchLut, EqualsTheModelOnRandomHistograms) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 500; ++round) {
    const Counts src = random_counts(rng, 256, round), ref = random_counts(rng, 256, round / 5);
    expect_model(src, ref, match_lut(src.data(), ref.data()),
                 "8-bit round " + std::to_string(round));
  }
  for (int round = 0; round < 60; ++round) {
    const Counts src = random_counts(rng, 65536, round), ref = random_counts(rng, 65536, round / 5);
    expect_model(src, ref, match_lut16(src.data(), ref.data()),
                 "16-bit round " + std::to_string(round));
  }
}

TEST(MatchLut, SixteenBitHandWorkedCases) {
  // The 8-bit gap case at levels · 257, and halves rounding to even at 16 bits.
  const auto lut = match_lut16(counts(65536, {{0, 1}, {257, 1}, {514, 1}, {771, 1}}).data(),
                               counts(65536, {{12850, 2}, {51400, 2}}).data());
  EXPECT_EQ(lut[0], 12850);
  EXPECT_EQ(lut[257], 12850);
  EXPECT_EQ(lut[514], 32125);  // 12850 + 77100 · 0.25
  EXPECT_EQ(lut[771], 51400);
  EXPECT_EQ(lut[65535], 51400);
  const auto half = match_lut16(counts(65536, {{100, 3}, {200, 1}}).data(),
                                counts(65536, {{60000, 1}, {60005, 1}}).data());
  EXPECT_EQ(half[100], 60002);  // 60000 + 10 · 0.25 = 60002.5 → even
  EXPECT_EQ(half[200], 60005);
  EXPECT_EQ(half[0], 60000);
}

Image image8(int w, int h, int c, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Image img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels.resize(img.byte_count());
  for (std::size_t i = 0; i < img.pixels.size(); ++i)
    img.pixels[i] = std::uint8_t((rng() % 160) + (i % std::size_t(c)) * 30);
  return img;
}

Histogram count_channel(const Image& img, int k) {
  Histogram h(256, 0);
  for (std::size_t i = 0; i < img.pixel_count(); ++i)
    ++h[img.pixels[i * std::size_t(img.channels) + std::size_t(k)]];
  return h;
}

TEST(MatchReference, GrayReferenceGivesItsHistogramToEveryPlane) {
  const Image g = image8(37, 21, 1, 1);
  const MatchReference ref(g, "gray.png");
  EXPECT_EQ(ref.name(), "gray.png");
  EXPECT_EQ(ref.width(), 37);
  EXPECT_EQ(ref.height(), 21);
  EXPECT_EQ(ref.channels(), 1);
  const Histogram want = count_channel(g, 0);
  const auto rgb = ref.histograms(Mode::rgb, 3, 8);
  ASSERT_EQ(rgb->size(), 3u);
  for (const auto& h : *rgb) EXPECT_EQ(h, want);
  const auto luma = ref.histograms(Mode::luma, 4, 8);
  ASSERT_EQ(luma->size(), 1u);
  EXPECT_EQ((*luma)[0], want);
  EXPECT_EQ(ref.histograms(Mode::gray, 1, 8)->at(0), want);
  // Kept: the same histograms on the next call, also from other threads.
  std::vector<std::thread> ts;
  std::vector<const void*> seen(4);
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] { seen[std::size_t(t)] = ref.histograms(Mode::rgb, 3, 8).get(); });
  for (auto& t : ts) t.join();
  for (const void* p : seen) EXPECT_EQ(p, rgb.get());
  // At 16 bits: the levels widened (v · 257).
  const auto h16 = ref.histograms(Mode::rgb, 3, 16);
  ASSERT_EQ(h16->size(), 3u);
  for (const auto& h : *h16) {
    ASSERT_EQ(h.size(), 65536u);
    for (int v = 0; v < 65536; ++v)
      ASSERT_EQ(h[std::size_t(v)], v % 257 == 0 ? want[std::size_t(v / 257)] : 0u) << v;
  }
}

TEST(MatchReference, ColourReferencePerChannelInRgbAndItsLumaOtherwise) {
  for (int c : {3, 4}) {
    for (ChannelOrder order : {ChannelOrder::rgb, ChannelOrder::bgr}) {
      const Image col = image8(29, 33, c, std::uint64_t(c));
      const MatchReference ref(col, "colour.png", order);
      const auto rgb = ref.histograms(Mode::rgb, 3, 8);
      ASSERT_EQ(rgb->size(), 3u);
      for (int k = 0; k < 3; ++k) EXPECT_EQ((*rgb)[std::size_t(k)], count_channel(col, k)) << k;
      Histogram y(256, 0);
      const int r = order == ChannelOrder::rgb ? 0 : 2, b = 2 - r;
      for (std::size_t i = 0; i < col.pixel_count(); ++i) {
        const std::uint8_t* p = col.pixels.data() + i * std::size_t(c);
        ++y[color::luma(p[r], p[1], p[b])];
      }
      for (Mode m : {Mode::luma, Mode::gray}) {
        const auto l = ref.histograms(m, c, 8);
        ASSERT_EQ(l->size(), 1u);
        EXPECT_EQ((*l)[0], y) << to_string(m);
      }
      // A gray image (one plane, whatever the mode) follows the reference's luma: the one
      // histogram the JPEG device route matches colour JPEGs' Y and gray JPEGs to.
      EXPECT_EQ(ref.histograms(Mode::rgb, 1, 8)->at(0), y);
      EXPECT_EQ(ref.histograms(Mode::luma, 2, 8)->at(0), y);
      EXPECT_EQ(ref.histograms(Mode::gray, 1, 8)->at(0), y);
    }
  }
}

TEST(MatchReference, SixteenBits) {
  Image16 col;
  col.width = 40;
  col.height = 10;
  col.channels = 3;
  std::mt19937 rng(3);
  for (int i = 0; i < 1200; ++i) col.pixels.push_back(std::uint16_t(rng() % 65536));
  const MatchReference ref(col, "deep.png");
  const auto rgb = ref.histograms(Mode::rgb, 3, 16);
  ASSERT_EQ(rgb->size(), 3u);
  for (int k = 0; k < 3; ++k) {
    Histogram want(65536, 0);
    for (int i = 0; i < 400; ++i) ++want[col.pixels[std::size_t(i * 3 + k)]];
    EXPECT_EQ((*rgb)[std::size_t(k)], want);
  }
  // No 16-bit luma: a colour reference for a one-plane 16-bit image is refused, naming it.
  for (auto [m, c] :
       {std::pair{Mode::luma, 3}, std::pair{Mode::gray, 1}, std::pair{Mode::rgb, 1}}) {
    try {
      ref.histograms(m, c, 16);
      ADD_FAILURE() << "no UsageError for " << to_string(m) << " " << c;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("deep.png"), std::string::npos) << e.what();
    }
  }
  // At 8 bits: narrowed as images are, round(v / 257).
  const auto n8 = ref.histograms(Mode::rgb, 3, 8);
  for (int k = 0; k < 3; ++k) {
    Histogram want(256, 0);
    for (int i = 0; i < 400; ++i)
      ++want[std::size_t(std::lround(col.pixels[std::size_t(i * 3 + k)] / 257.0))];
    EXPECT_EQ((*n8)[std::size_t(k)], want);
  }
  // A gray 16-bit reference: every plane.
  Image16 g = col;
  g.channels = 1;
  g.width = 1200;
  g.height = 1;
  const MatchReference gref(g, "g16.png");
  const auto three = gref.histograms(Mode::rgb, 4, 16);
  ASSERT_EQ(three->size(), 3u);
  Histogram want(65536, 0);
  for (auto v : g.pixels) ++want[v];
  for (const auto& h : *three) EXPECT_EQ(h, want);
}

TEST(MatchReference, EmptyReferenceAndBadDepthAreUsageErrors) {
  Image empty;
  empty.channels = 1;
  const MatchReference ref(empty, "empty.png");
  try {
    ref.histograms(Mode::gray, 1, 8);
    ADD_FAILURE() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("empty.png"), std::string::npos) << e.what();
  }
  const MatchReference ok(image8(2, 2, 1, 9), "ok.png");
  EXPECT_THROW(ok.histograms(Mode::gray, 1, 12), UsageError);
}

}  // namespace
}  // namespace histeq
