// test_equalize16_gpu.cpp — the 65536-bin u16 histogram kernel exact against the CPU (uniform,
// hot, clustered, misaligned, tiny and odd sizes; hot bins of 2^24 samples cross the packed
// kernel's 16-bit counters many times per block), and 16-bit equalization GPU == CPU; each
// under every kernel configuration of kConfigs (gpu::Equalizer16::set_tuning).
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <random>
#include <vector>

#include "gpu_test_support.hpp"
#include "histeq/equalize16.hpp"
#include "histeq/gpu16.hpp"
#include "histeq/tuning.hpp"
#include "region_test_support.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

using test::Config;
using test::config;

std::vector<std::uint16_t> data(std::size_t n, int kind, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) {
    switch (kind) {
      case 0: x = std::uint16_t(rng()); break;                       // uniform over 65536
      case 1: x = 40000; break;                                      // one hot bin
      case 2: x = std::uint16_t(1000 + rng() % 200); break;          // clustered (one owner block)
      case 3: x = std::uint16_t(rng() % 2 ? 32767 : 32768); break;   // both halves' edges
      case 4: x = 5; break;                                          // one hot bin, low half
      default: x = std::uint16_t(rng() % 2 ? 7 : 7 + 32768); break;  // both halves of one word
    }
  }
  return v;
}

/// The policy; single blocks instead of clusters of two (the path where no pair fits); no
/// programmatic dependent launch; programmatic launch on every site.
Config config16(const char* name, bool pairs, std::int32_t pdl) {
  return config(name, [&](Tuning& t) {
    t.hist16.pairs = pairs;
    t.pdl_edges = pdl;
  });
}
const Config kConfigs[] = {config16("policy", true, -1), config16("unpaired", false, -1),
                           config16("no_pdl", true, 0), config16("every_pdl", true, 0x7FFFFFFF)};

class HistU16Gpu : public ::testing::TestWithParam<Config> {
 protected:
  gpu::Equalizer16 engine() const {
    gpu::Equalizer16 e;
    e.set_tuning(GetParam().tuning);
    return e;
  }
};
INSTANTIATE_TEST_SUITE_P(Configs, HistU16Gpu, ::testing::ValuesIn(kConfigs),
                         [](const ::testing::TestParamInfo<Config>& p) { return p.param.name; });

TEST_P(HistU16Gpu, ExactAgainstCpu) {
  HISTEQ_REQUIRE_GPU();
  gpu::Equalizer16 eq = engine();
  DeviceBuffer<std::uint64_t> d_hist(65536);
  for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(4099), std::size_t(1) << 20,
                        (std::size_t(1) << 24) + 3}) {
    for (int kind = 0; kind < 6; ++kind) {
      for (std::size_t offset : {std::size_t(0), std::size_t(1), std::size_t(3)}) {
        const auto v = data(n + offset, kind, std::uint32_t(n + kind));
        auto d = test::upload_typed(v);
        eq.histogram(d.get() + offset, n, d_hist.get());
        eq.synchronize();
        const auto got = test::download(d_hist.get(), 65536);
        ASSERT_EQ(got, cpu::histogram16(v.data() + offset, n))
            << n << " kind " << kind << " offset " << offset;
      }
    }
  }
}

TEST_P(HistU16Gpu, EqualizeEqualsCpu) {
  HISTEQ_REQUIRE_GPU();
  gpu::Equalizer16 eq = engine();
  for (int kind = 0; kind < 4; ++kind) {
    Image16 img;
    img.width = 1001;
    img.height = 333;
    img.channels = 1;
    img.pixels = data(std::size_t(1001) * 333, kind, 11);
    auto d = test::upload_typed(img.pixels);
    eq.equalize(d.get(), d.get(), img.pixels.size());  // in place
    eq.synchronize();
    EXPECT_EQ(test::download(d.get(), img.pixels.size()), cpu::equalize16(img, Mode::gray).pixels)
        << "kind " << kind;
  }
  Image16 rgb;
  rgb.width = 64;
  rgb.height = 48;
  rgb.channels = 3;
  rgb.pixels = data(64 * 48 * 3, 2, 5);
  EXPECT_EQ(equalize16(rgb, Mode::rgb, Backend::cuda).pixels,
            cpu::equalize16(rgb, Mode::rgb).pixels);
}

}  // namespace
}  // namespace histeq
