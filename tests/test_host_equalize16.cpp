// test_host_equalize16.cpp — 16-bit histogram and equalization on the CPU (equalize16.hpp),
// against a plain reference of the documented formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "histeq/equalize16.hpp"
#include "histeq/error.hpp"

namespace histeq {
namespace {

std::vector<std::uint16_t> reference_lut(const std::vector<std::uint16_t>& s) {
  std::vector<std::uint64_t> h(65536, 0);
  for (auto v : s) h[v]++;
  int v0 = 0;
  while (v0 < 65536 && h[std::size_t(v0)] == 0) ++v0;
  std::vector<std::uint16_t> lut(65536);
  if (v0 == 65536 || h[std::size_t(v0)] == s.size()) {
    for (int v = 0; v < 65536; ++v) lut[std::size_t(v)] = std::uint16_t(v);
    return lut;
  }
  const float scale = 65535.0f / float(s.size() - h[std::size_t(v0)]);
  std::uint64_t cdf = 0;
  for (int v = 0; v < 65536; ++v) {
    cdf += h[std::size_t(v)];
    if (v <= v0) {
      lut[std::size_t(v)] = 0;
      continue;
    }
    const float p = float(cdf - h[std::size_t(v0)]) * scale;
    lut[std::size_t(v)] = std::uint16_t(std::min(65535.0f, std::max(0.0f, std::nearbyint(p))));
  }
  return lut;
}

TEST(Equalize16Cpu, HistogramCountsEverySample) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> d(0, 65535);
  std::vector<std::uint16_t> s(300001);
  for (auto& v : s) v = std::uint16_t(d(rng));
  const Histogram h = cpu::histogram16(s.data(), s.size(), 3);
  std::vector<std::uint64_t> want(65536, 0);
  for (auto v : s) want[v]++;
  EXPECT_EQ(h, want);
}

TEST(Equalize16Cpu, GrayImageFollowsTheFormula) {
  std::mt19937 rng(2);
  std::normal_distribution<double> d(1100, 30);  // the 1000..1200 example
  Image16 img;
  img.width = 301;
  img.height = 97;
  img.channels = 1;
  for (int i = 0; i < 301 * 97; ++i)
    img.pixels.push_back(std::uint16_t(std::clamp(d(rng), 1000.0, 1200.0)));
  const auto lut = reference_lut(img.pixels);
  const Image16 out = cpu::equalize16(img, Mode::gray);
  for (std::size_t i = 0; i < img.pixels.size(); ++i) ASSERT_EQ(out.pixels[i], lut[img.pixels[i]]);
  // More than two output levels survive (8-bit reduction would leave 0 and 255 only).
  std::vector<bool> seen(65536);
  int levels = 0;
  for (auto v : out.pixels) levels += !seen[v] ? (seen[v] = true, 1) : 0;
  EXPECT_GT(levels, 150);
  EXPECT_EQ(*std::max_element(out.pixels.begin(), out.pixels.end()), 65535);
}

TEST(Equalize16Cpu, ConstantIsIdentityAndColourIsPerChannel) {
  Image16 c;
  c.width = 4;
  c.height = 4;
  c.channels = 1;
  c.pixels.assign(16, 4242);
  EXPECT_EQ(cpu::equalize16(c).pixels, c.pixels);
  Image16 rgba;
  rgba.width = 50;
  rgba.height = 20;
  rgba.channels = 4;
  std::mt19937 rng(3);
  for (int i = 0; i < 50 * 20 * 4; ++i) rgba.pixels.push_back(std::uint16_t(rng() % 5000));
  const Image16 out = cpu::equalize16(rgba, Mode::rgb);
  for (int k = 0; k < 3; ++k) {
    std::vector<std::uint16_t> ch;
    for (int i = 0; i < 1000; ++i) ch.push_back(rgba.pixels[std::size_t(i) * 4 + std::size_t(k)]);
    const auto lut = reference_lut(ch);
    for (int i = 0; i < 1000; ++i)
      ASSERT_EQ(out.pixels[std::size_t(i) * 4 + std::size_t(k)], lut[ch[std::size_t(i)]]);
  }
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(out.pixels[std::size_t(i) * 4 + 3], rgba.pixels[std::size_t(i) * 4 + 3]);
  EXPECT_THROW(cpu::equalize16(rgba, Mode::luma), UsageError);
}

}  // namespace
}  // namespace histeq
