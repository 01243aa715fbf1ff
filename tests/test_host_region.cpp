// test_host_region.cpp — the counted region (masked equalization, histeq/match.hpp's Region) on
// the CPU: Region::check, the region histograms (cpu::histogram, cpu::histogram16), the 8-bit
// stage sequence and cpu::equalize16 with a region or a matching reference. Models: counts by
// Region::counts pixel by pixel, and OpenCV's equalizeHist LUT loop (as test_host_lut.cpp
// transcribes it) over the counted pixels' histogram, applied to every pixel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "histeq/color.hpp"
#include "histeq/cpu.hpp"
#include "histeq/equalize16.hpp"
#include "histeq/error.hpp"
#include "histeq/match.hpp"

namespace histeq {
namespace {

/// OpenCV's equalizeHist LUT loop (histogram.cpp: int running sum, float scale, cvRound), with
/// the identity for a constant or empty histogram.
Lut opencv_lut(const Histogram& h) {
  Lut lut{};
  int i = 0;
  while (i < 256 && !h[std::size_t(i)]) ++i;
  long long total = 0;
  for (auto c : h) total += static_cast<long long>(c);
  if (i == 256 || static_cast<long long>(h[std::size_t(i)]) == total) {
    for (int v = 0; v < 256; ++v) lut[std::size_t(v)] = static_cast<std::uint8_t>(v);
    return lut;
  }
  const float scale = 255.f / static_cast<float>(total - static_cast<long long>(h[std::size_t(i)]));
  long long sum = 0;
  for (lut[std::size_t(i++)] = 0; i < 256; ++i) {
    sum += static_cast<long long>(h[std::size_t(i)]);
    const long r = std::lrintf(static_cast<float>(sum) * scale);
    lut[std::size_t(i)] = static_cast<std::uint8_t>(r < 0 ? 0 : r > 255 ? 255 : r);
  }
  return lut;
}

/// The 16-bit formula (equalize16.hpp) over a histogram.
std::vector<std::uint16_t> formula16_lut(const Histogram& h) {
  std::uint64_t n = 0;
  for (auto c : h) n += c;
  int v0 = 0;
  while (v0 < 65536 && h[std::size_t(v0)] == 0) ++v0;
  std::vector<std::uint16_t> lut(65536);
  if (v0 == 65536 || h[std::size_t(v0)] == n) {
    for (int v = 0; v < 65536; ++v) lut[std::size_t(v)] = std::uint16_t(v);
    return lut;
  }
  const float scale = 65535.0f / float(n - h[std::size_t(v0)]);
  std::uint64_t cdf = 0;
  for (int v = 0; v < 65536; ++v) {
    cdf += h[std::size_t(v)];
    const float p = float(cdf - h[std::size_t(v0)]) * scale;
    lut[std::size_t(v)] =
        v <= v0 ? 0 : std::uint16_t(std::min(65535.0f, std::max(0.0f, std::nearbyint(p))));
  }
  return lut;
}

Image make_image(int w, int h, int c, std::uint64_t seed, int spread = 256) {
  std::mt19937_64 rng(seed);
  Image img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels.resize(img.byte_count());
  for (auto& p : img.pixels) p = std::uint8_t(rng() % std::uint64_t(spread));
  return img;
}

/// A mask with blobs, long zero runs (whole 8-byte words of zero) and nonzero values other
/// than 255.
std::shared_ptr<const Image> make_mask(int w, int h, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto m = std::make_shared<Image>();
  m->width = w;
  m->height = h;
  m->channels = 1;
  m->pixels.resize(m->byte_count());
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const bool blob = (x / 13 + y / 7) % 3 == 0 || (x > w / 2 && y % 5 == 0);
      m->pixels[std::size_t(y) * std::size_t(w) + std::size_t(x)] =
          blob ? std::uint8_t(1 + rng() % 255) : std::uint8_t(0);
    }
  return m;
}

template <class T>
Histogram model_counts(const T* plane, int w, int h, const Region& r, std::size_t bins) {
  Histogram out(bins, 0);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (r.counts(x, y, w)) ++out[plane[std::size_t(y) * std::size_t(w) + std::size_t(x)]];
  return out;
}

std::vector<Region> regions(int w, int h, std::uint64_t seed) {
  Region rect, masked, both;
  rect.roi = Roi{3, 2, w - 11, h - 5};
  masked.mask = make_mask(w, h, seed);
  both.roi = Roi{w / 3, 1, w / 2 + 1, h - 2};
  both.mask = masked.mask;
  Region rows;  // whole rows: the contiguous path
  rows.roi = Roi{0, h / 4, w, h / 2};
  return {rect, masked, both, rows};
}

void expect_usage_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no UsageError (" << part << ")";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("pic.png"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Region, CheckRefusesWhatDoesNotFitAndWhatCountsNothing) {
  const int w = 40, h = 30;
  auto check = [&](Region r) { return [r, w, h] { r.check(w, h, "pic.png"); }; };
  for (Roi bad : {Roi{-1, 0, 10, 10}, Roi{0, -2, 5, 5}, Roi{35, 0, 6, 5}, Roi{0, 25, 5, 6},
                  Roi{2147483000, 0, 2000, 1}}) {
    Region r;
    r.roi = bad;
    expect_usage_error(check(r), "not inside");
  }
  for (Roi bad : {Roi{0, 0, 0, 5}, Roi{1, 1, 5, -1}}) {
    Region r;
    r.roi = bad;
    expect_usage_error(check(r), "empty");
  }
  Region ok;
  ok.roi = Roi{0, 0, w, h};
  EXPECT_NO_THROW(ok.check(w, h, "pic.png"));
  ok.roi = Roi{39, 29, 1, 1};
  EXPECT_NO_THROW(ok.check(w, h, "pic.png"));

  auto mask = std::make_shared<Image>();
  mask->width = w;
  mask->height = h;
  mask->channels = 1;
  mask->pixels.assign(std::size_t(w * h), 0);
  Region m;
  m.mask = mask;
  expect_usage_error(check(m), "no pixel");  // an empty mask
  mask->pixels[std::size_t(29 * w + 39)] = 7;
  EXPECT_NO_THROW(m.check(w, h, "pic.png"));
  m.roi = Roi{0, 0, 39, 30};  // the one counted pixel is outside the rectangle
  expect_usage_error(check(m), "no pixel");
  m.roi.reset();
  expect_usage_error([&] { m.check(w + 1, h, "pic.png"); }, "40x30");  // another size
  expect_usage_error([&] { m.check(w, h - 1, "pic.png"); }, "size");
  auto rgb = std::make_shared<Image>(*mask);
  rgb->channels = 3;
  rgb->pixels.assign(std::size_t(w * h * 3), 255);
  Region c;
  c.mask = rgb;
  expect_usage_error(check(c), "3 channels");
}

TEST(Region, HistogramsCountTheCountedPixels) {
  for (auto [w, h] : {std::pair{203, 117}, std::pair{16, 9}, std::pair{1031, 517}}) {
    const Image img = make_image(w, h, 1, std::uint64_t(w));
    std::vector<std::uint16_t> p16(img.pixels.size());
    std::mt19937 rng{std::uint32_t(h)};
    for (auto& v : p16) v = std::uint16_t(rng() % 65536);
    const Region all;
    EXPECT_EQ(cpu::histogram(img.pixels.data(), w, h, all, 2),
              model_counts(img.pixels.data(), w, h, all, 256));
    EXPECT_EQ(cpu::histogram16(p16.data(), w, h, all, 2),
              model_counts(p16.data(), w, h, all, 65536));
    int k = 0;
    for (const Region& r : regions(w, h, std::uint64_t(w))) {
      ASSERT_NO_THROW(r.check(w, h, "pic.png"));
      const Histogram want = model_counts(img.pixels.data(), w, h, r, 256);
      const Histogram want16 = model_counts(p16.data(), w, h, r, 65536);
      for (int threads : {1, 2, 3, 4}) {
        EXPECT_EQ(cpu::histogram(img.pixels.data(), w, h, r, threads), want)
            << w << "x" << h << " region " << k << " threads " << threads;
        EXPECT_EQ(cpu::histogram16(p16.data(), w, h, r, threads), want16)
            << w << "x" << h << " region " << k << " threads " << threads;
      }
      ++k;
    }
  }
}

Image run_stages(const Image& img, const EqualizeOptions& opt, EqualizeReport& rep) {
  return cpu::equalize_stages(img, opt, true, 2, rep);
}

TEST(MaskedEqualize, GrayFollowsOpenCvsFormulaOnTheCountedPixels) {
  const int w = 251, h = 123;
  const Image img = make_image(w, h, 1, 4, 180);
  for (const Region& r : regions(w, h, 4)) {
    EqualizeOptions opt;
    opt.region = r;
    EqualizeReport rep;
    const Image out = run_stages(img, opt, rep);
    const Histogram counted = model_counts(img.pixels.data(), w, h, r, 256);
    ASSERT_EQ(rep.histograms.size(), 1u);
    EXPECT_EQ(rep.histograms[0], counted);
    const Lut lut = opencv_lut(counted);
    ASSERT_EQ(out.pixels.size(), img.pixels.size());
    for (std::size_t i = 0; i < img.pixels.size(); ++i)
      ASSERT_EQ(out.pixels[i], lut[img.pixels[i]]) << i;  // every pixel, counted or not
  }
}

TEST(MaskedEqualize, ColourPerChannelAndLuma) {
  const int w = 97, h = 61;
  for (int c : {3, 4}) {
    const Image img = make_image(w, h, c, std::uint64_t(c), 200);
    for (const Region& r : regions(w, h, 7)) {
      EqualizeOptions opt;
      opt.region = r;
      opt.mode = Mode::rgb;
      EqualizeReport rep;
      const Image out = run_stages(img, opt, rep);
      std::vector<std::uint8_t> plane(img.pixel_count());
      for (int k = 0; k < 3; ++k) {
        for (std::size_t i = 0; i < plane.size(); ++i)
          plane[i] = img.pixels[i * std::size_t(c) + std::size_t(k)];
        const Histogram counted = model_counts(plane.data(), w, h, r, 256);
        EXPECT_EQ(rep.histograms[std::size_t(k)], counted);
        const Lut lut = opencv_lut(counted);
        for (std::size_t i = 0; i < plane.size(); ++i)
          ASSERT_EQ(out.pixels[i * std::size_t(c) + std::size_t(k)], lut[plane[i]]);
      }
      opt.mode = Mode::luma;
      const Image luma = run_stages(img, opt, rep);
      for (std::size_t i = 0; i < plane.size(); ++i) {
        const std::uint8_t* p = img.pixels.data() + i * std::size_t(c);
        plane[i] = color::luma(p[0], p[1], p[2]);
      }
      const Histogram counted = model_counts(plane.data(), w, h, r, 256);
      ASSERT_EQ(rep.histograms.size(), 1u);
      EXPECT_EQ(rep.histograms[0], counted);
      const Lut lut = opencv_lut(counted);
      for (std::size_t i = 0; i < plane.size(); ++i) {
        std::uint8_t px[4];
        std::copy_n(img.pixels.data() + i * std::size_t(c), c, px);
        color::equalize_luma(px[0], px[1], px[2], lut.data());
        for (int k = 0; k < c; ++k)
          ASSERT_EQ(luma.pixels[i * std::size_t(c) + std::size_t(k)], px[k]);
      }
    }
  }
}

TEST(MaskedEqualize, AWholeImageRegionGivesTheUnmaskedBytes) {
  const int w = 133, h = 71;
  for (int c : {1, 2, 3, 4}) {
    const Image img = make_image(w, h, c, std::uint64_t(10 + c));
    auto full = std::make_shared<Image>(make_image(w, h, 1, 99));
    for (auto& v : full->pixels) v = std::uint8_t(v | 1);  // every pixel counted, not only 255
    Region mask, rect, both;
    mask.mask = full;
    rect.roi = Roi{0, 0, w, h};
    both = mask;
    both.roi = rect.roi;
    for (Mode m : {Mode::luma, Mode::rgb, Mode::gray}) {
      EqualizeOptions opt;
      opt.mode = m;
      EqualizeReport rep;
      const Image unmasked = run_stages(img, opt, rep);
      for (const Region& r : {mask, rect, both}) {
        opt.region = r;
        EXPECT_EQ(run_stages(img, opt, rep).pixels, unmasked.pixels) << c << " " << to_string(m);
      }
    }
  }
  // 16 bits, gray and colour.
  for (int c : {1, 3}) {
    Image16 img;
    img.width = w;
    img.height = h;
    img.channels = c;
    std::mt19937 rng{std::uint32_t(c)};
    for (std::size_t i = 0; i < std::size_t(w * h * c); ++i)
      img.pixels.push_back(std::uint16_t(rng() % 40000 + 1000));
    Region mask;
    auto full = std::make_shared<Image>(make_image(w, h, 1, 5));
    for (auto& v : full->pixels) v = 200;
    mask.mask = full;
    EXPECT_EQ(cpu::equalize16(img, Mode::rgb, 2, mask, nullptr).pixels,
              cpu::equalize16(img, Mode::rgb, 2).pixels);
  }
}

TEST(MaskedEqualize, EmptyMaskAndBadRectangleAreUsageErrors) {
  const Image img = make_image(20, 10, 3, 1);
  auto zero = std::make_shared<Image>(make_image(20, 10, 1, 1));
  std::fill(zero->pixels.begin(), zero->pixels.end(), 0);
  EqualizeOptions opt;
  opt.region.mask = zero;
  EqualizeReport rep;
  EXPECT_THROW(run_stages(img, opt, rep), UsageError);
  opt.region.mask.reset();
  opt.region.roi = Roi{15, 5, 6, 5};
  EXPECT_THROW(run_stages(img, opt, rep), UsageError);
  Image16 img16;
  img16.width = 20;
  img16.height = 10;
  img16.channels = 1;
  img16.pixels.assign(200, 5);
  EXPECT_THROW(cpu::equalize16(img16, Mode::gray, 1, opt.region, nullptr), UsageError);
  opt.region.roi.reset();
  opt.region.mask = zero;
  EXPECT_THROW(cpu::equalize16(img16, Mode::gray, 1, opt.region, nullptr), UsageError);
}

TEST(MaskedEqualize, SixteenBitsFollowTheFormulaOnTheCountedPixels) {
  const int w = 211, h = 83;
  Image16 img;
  img.width = w;
  img.height = h;
  img.channels = 4;
  std::mt19937 rng(8);
  std::normal_distribution<double> d(20000, 3000);
  for (std::size_t i = 0; i < std::size_t(w * h * 4); ++i)
    img.pixels.push_back(std::uint16_t(std::clamp(d(rng), 0.0, 65535.0)));
  for (const Region& r : regions(w, h, 3)) {
    const Image16 out = cpu::equalize16(img, Mode::rgb, 3, r, nullptr);
    std::vector<std::uint16_t> plane(img.pixel_count());
    for (int k = 0; k < 4; ++k) {
      for (std::size_t i = 0; i < plane.size(); ++i) plane[i] = img.pixels[i * 4 + std::size_t(k)];
      const auto lut = formula16_lut(model_counts(plane.data(), w, h, r, 65536));
      for (std::size_t i = 0; i < plane.size(); ++i)  // alpha (k 3) passes through
        ASSERT_EQ(out.pixels[i * 4 + std::size_t(k)], k == 3 ? plane[i] : lut[plane[i]]) << k;
    }
  }
}

TEST(Matching, StagesUseTheReferenceForEveryPlaneOrPerPlane) {
  const int w = 120, h = 77;
  const Image img = make_image(w, h, 3, 21, 150);
  Histogram g(256, 0);
  for (int v = 40; v < 220; v += 3) g[std::size_t(v)] = std::uint64_t(v);
  std::vector<Histogram> per(3, Histogram(256, 0));
  for (int k = 0; k < 3; ++k)
    for (int v = 10 * k; v < 256; v += 5 + k)
      per[std::size_t(k)][std::size_t(v)] = 1 + std::uint64_t(v % 7);
  Region masked;
  masked.mask = make_mask(w, h, 2);
  for (const Region& r : {Region{}, masked}) {
    for (bool one : {true, false}) {
      EqualizeOptions opt;
      opt.mode = Mode::rgb;
      opt.region = r;
      opt.reference =
          std::make_shared<const std::vector<Histogram>>(one ? std::vector<Histogram>{g} : per);
      EqualizeReport rep;
      const Image out = run_stages(img, opt, rep);
      std::vector<std::uint8_t> plane(img.pixel_count());
      for (int k = 0; k < 3; ++k) {
        for (std::size_t i = 0; i < plane.size(); ++i)
          plane[i] = img.pixels[i * 3 + std::size_t(k)];
        const Histogram counted = model_counts(plane.data(), w, h, r, 256);
        const Lut lut = match_lut(counted.data(), (one ? g : per[std::size_t(k)]).data());
        EXPECT_EQ(rep.luts[std::size_t(k)], lut);
        for (std::size_t i = 0; i < plane.size(); ++i)
          ASSERT_EQ(out.pixels[i * 3 + std::size_t(k)], lut[plane[i]]);
      }
    }
  }
  // The wrong number of histograms, or of bins, is refused.
  EqualizeOptions bad;
  bad.mode = Mode::rgb;
  bad.reference = std::make_shared<const std::vector<Histogram>>(2, g);
  EqualizeReport rep;
  EXPECT_THROW(run_stages(img, bad, rep), Error);
  bad.reference = std::make_shared<const std::vector<Histogram>>(1, Histogram(65536, 1));
  EXPECT_THROW(run_stages(img, bad, rep), Error);
}

TEST(Matching, SixteenBitEqualizeTakesTheReference) {
  const int w = 90, h = 40;
  Image16 img;
  img.width = w;
  img.height = h;
  img.channels = 1;
  std::mt19937 rng(4);
  for (int i = 0; i < w * h; ++i) img.pixels.push_back(std::uint16_t(1000 + rng() % 3000));
  Histogram ref(65536, 0);
  for (int v = 30000; v < 60000; v += 7) ref[std::size_t(v)] = 2;
  Region rect;
  rect.roi = Roi{10, 5, 50, 20};
  const std::vector<Histogram> refs{ref};
  for (const Region& r : {Region{}, rect}) {
    const Image16 out = cpu::equalize16(img, Mode::gray, 2, r, &refs);
    const Histogram counted = model_counts(img.pixels.data(), w, h, r, 65536);
    const auto lut = match_lut16(counted.data(), ref.data());
    for (std::size_t i = 0; i < img.pixels.size(); ++i)
      ASSERT_EQ(out.pixels[i], lut[img.pixels[i]]);
  }
  const std::vector<Histogram> narrow{Histogram(256, 1)};
  EXPECT_THROW(cpu::equalize16(img, Mode::gray, 2, Region{}, &narrow), Error);
}

}  // namespace
}  // namespace histeq
