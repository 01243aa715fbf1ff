// test_stages.cpp — the device stages around the histogram (kernels/equalize/stages.hpp) against
// their CPU twins: CDF+LUT vs histeq::make_lut, extract_planes vs cpu::extract_planes, apply vs
// cpu::apply. GPU cases skip with the reason where no CUDA device is usable; argument checks run
// anywhere.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "equalize/stages.hpp"
#include "gpu_test_support.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/lut.hpp"
#include "histeq/planes.hpp"
#include "support/device_buffer.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

using Hist256 = std::vector<std::uint64_t>;

const Formula kFormulas[] = {Formula::opencv, Formula::exact};
const Mode kModes[] = {Mode::luma, Mode::rgb, Mode::gray};

std::string label(Formula f) { return to_string(f); }

template <typename T>
DeviceBuffer<T> upload(const std::vector<T>& v) {
  return histeq::test::upload_typed(v);
}
using histeq::test::download;

/// Device LUTs of several histograms at once (the planes entry), synchronously.
std::vector<Lut> device_luts(const std::vector<Hist256>& hists, Formula f) {
  std::vector<std::uint64_t> flat;
  for (const Hist256& h : hists) flat.insert(flat.end(), h.begin(), h.end());
  auto d_hist = upload(flat);
  DeviceBuffer<std::uint8_t> d_lut(hists.size() * 256);
  kernels::launch_cdf_lut_planes(d_hist.get(), int(hists.size()), d_lut.get(), f, nullptr);
  HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
  const auto bytes = download(d_lut.get(), d_lut.size());
  std::vector<Lut> out(hists.size());
  for (std::size_t p = 0; p < hists.size(); ++p) {
    std::copy(bytes.begin() + std::ptrdiff_t(p * 256),
              bytes.begin() + std::ptrdiff_t(p * 256 + 256), out[p].begin());
  }
  return out;
}

/// The single-histogram entry.
Lut device_lut(const Hist256& h, Formula f) {
  auto d_hist = upload(h);
  DeviceBuffer<std::uint8_t> d_lut(256);
  kernels::launch_cdf_lut(d_hist.get(), d_lut.get(), f, nullptr);
  HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
  const auto bytes = download(d_lut.get(), 256);
  Lut l;
  std::copy(bytes.begin(), bytes.end(), l.begin());
  return l;
}

void expect_lut_eq(const Lut& want, const Lut& got, const std::string& what) {
  for (int v = 0; v < 256; ++v) {
    ASSERT_EQ(int(want[v]), int(got[v])) << what << ": lut[" << v << "]";
  }
}

/// Random histograms of several shapes: dense, sparse (most bins empty), a few huge bins.
std::vector<Hist256> random_histograms(std::uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::vector<Hist256> out;
  for (int k = 0; k < count; ++k) {
    Hist256 h(256, 0);
    const int shape = k % 4;
    for (int v = 0; v < 256; ++v) {
      switch (shape) {
        case 0: h[v] = rng() % 1000; break;                                        // dense, small
        case 1: h[v] = (rng() % 8 == 0) ? rng() % 100000 : 0; break;               // sparse
        case 2: h[v] = (rng() % 32 == 0) ? rng() % (1u << 24) : rng() % 3; break;  // spiky
        default: h[v] = (v >= 40 && v < 200) ? rng() % 50 + 1 : 0; break;  // v0 > 0, gap at top
      }
    }
    out.push_back(h);
  }
  return out;
}

// ---- argument checks (no device needed: they throw before any CUDA call) ----

TEST(StagesArgs, ApplyRejectsBadChannelCounts) {
  for (int c : {0, 5, -1}) {
    EXPECT_THROW(kernels::launch_apply(nullptr, 10, c, Mode::luma, nullptr, nullptr, nullptr),
                 UsageError)
        << "channels " << c;
    EXPECT_THROW(kernels::launch_extract_planes(nullptr, 10, c, Mode::rgb, nullptr, nullptr),
                 UsageError)
        << "channels " << c;
  }
}

TEST(StagesArgs, CdfLutRejectsNegativePlaneCount) {
  EXPECT_THROW(kernels::launch_cdf_lut_planes(nullptr, -1, nullptr, Formula::opencv, nullptr),
               UsageError);
}

TEST(StagesArgs, EmptyImagesLaunchNothing) {
  // pixels == 0 returns before touching the device, so this holds without a GPU.
  EXPECT_NO_THROW(kernels::launch_apply(nullptr, 0, 3, Mode::luma, nullptr, nullptr, nullptr));
  EXPECT_NO_THROW(kernels::launch_extract_planes(nullptr, 0, 4, Mode::rgb, nullptr, nullptr));
  EXPECT_NO_THROW(kernels::launch_cdf_lut_planes(nullptr, 0, nullptr, Formula::exact, nullptr));
}

// ---- CDF + LUT on the device vs make_lut ----

TEST(CdfLut, RandomHistogramsMatchHostBothEntries) {
  HISTEQ_REQUIRE_GPU();
  for (Formula f : kFormulas) {
    const auto hists = random_histograms(42 + int(f), 64);
    const auto got = device_luts(hists, f);
    for (std::size_t i = 0; i < hists.size(); ++i) {
      expect_lut_eq(make_lut(hists[i].data(), f), got[i],
                    label(f) + " planes entry, histogram " + std::to_string(i));
    }
    for (std::size_t i = 0; i < 8; ++i) {
      expect_lut_eq(make_lut(hists[i].data(), f), device_lut(hists[i], f),
                    label(f) + " single entry, histogram " + std::to_string(i));
    }
  }
}

TEST(CdfLut, ConstantAndEmptyGiveIdentity) {
  HISTEQ_REQUIRE_GPU();
  for (Formula f : kFormulas) {
    for (int bin : {0, 1, 128, 255}) {
      Hist256 h(256, 0);
      h[bin] = 12345;
      const Lut got = device_lut(h, f);
      expect_lut_eq(make_lut(h.data(), f), got, label(f) + " constant bin " + std::to_string(bin));
      for (int v = 0; v < 256; ++v) ASSERT_EQ(int(got[v]), v) << "constant bin " << bin;
    }
    Hist256 empty(256, 0);
    const Lut got = device_lut(empty, f);
    for (int v = 0; v < 256; ++v) ASSERT_EQ(int(got[v]), v) << "empty histogram";
  }
}

TEST(CdfLut, SinglePixelImageIsIdentity) {
  HISTEQ_REQUIRE_GPU();
  for (Formula f : kFormulas) {
    Hist256 h(256, 0);
    h[77] = 1;
    const Lut got = device_lut(h, f);
    for (int v = 0; v < 256; ++v) ASSERT_EQ(int(got[v]), v);
  }
}

TEST(CdfLut, IdentityRampMapsToItself) {
  HISTEQ_REQUIRE_GPU();
  for (Formula f : kFormulas) {
    for (std::uint64_t k : {std::uint64_t(1), std::uint64_t(3), std::uint64_t(1000)}) {
      Hist256 h(256, k);  // every value equally often: already equalized
      const Lut got = device_lut(h, f);
      expect_lut_eq(make_lut(h.data(), f), got, label(f) + " ramp");
      for (int v = 0; v < 256; ++v) ASSERT_EQ(int(got[v]), v) << label(f) << " k=" << k;
    }
  }
}

TEST(CdfLut, HugeCountsNeedSixtyFourBits) {
  HISTEQ_REQUIRE_GPU();
  // Totals beyond 2^32 pixels: a 32-bit scan would wrap and give a different LUT.
  std::mt19937_64 rng(7);
  std::vector<Hist256> hists;
  for (int k = 0; k < 8; ++k) {
    Hist256 h(256, 0);
    for (int v = 0; v < 256; ++v) h[v] = (std::uint64_t(1) << 32) / 64 + rng() % (1u << 30);
    h[k * 30] += std::uint64_t(5) << 32;  // one bin alone over 2^32
    hists.push_back(h);
  }
  for (Formula f : kFormulas) {
    const auto got = device_luts(hists, f);
    for (std::size_t i = 0; i < hists.size(); ++i) {
      std::uint64_t total = 0;
      for (auto c : hists[i]) total += c;
      ASSERT_GT(total, std::uint64_t(1) << 32);
      expect_lut_eq(make_lut(hists[i].data(), f), got[i], label(f) + " huge " + std::to_string(i));
    }
  }
}

// ---- extract_planes and apply vs the CPU backend ----

/// Random interleaved image bytes of `pixels` pixels.
std::vector<std::uint8_t> random_image(std::size_t pixels, int channels, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> v(pixels * std::size_t(channels));
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

const std::size_t kOddSizes[] = {1, 3, 15, 17, 31, 255, 1001, 4099, 65537 + 6};
const std::size_t kOffsets[] = {0, 1, 3, 8};  // bytes past a 256-byte-aligned cudaMalloc

TEST(ExtractPlanes, MatchesCpuForEveryModeAndChannelCount) {
  HISTEQ_REQUIRE_GPU();
  for (int c = 1; c <= 4; ++c) {
    for (Mode mode : kModes) {
      for (std::size_t pixels : kOddSizes) {
        for (std::size_t off : kOffsets) {
          const auto img = random_image(pixels, c, pixels * 31 + c);
          const std::size_t plane_bytes = std::size_t(plane_count(mode, c)) * pixels;
          std::vector<std::uint8_t> want(plane_bytes);
          cpu::extract_planes(img.data(), pixels, c, mode, want.data(), 2);

          DeviceBuffer<std::uint8_t> d_in(img.size() + 16), d_planes(plane_bytes + 16);
          HISTEQ_CUDA_CHECK(
              cudaMemcpy(d_in.get() + off, img.data(), img.size(), cudaMemcpyHostToDevice));
          const std::size_t out_off = (off * 5) % 16;  // a different misalignment
          kernels::launch_extract_planes(d_in.get() + off, pixels, c, mode,
                                         d_planes.get() + out_off, nullptr);
          HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
          const auto got = download(d_planes.get() + out_off, plane_bytes);
          ASSERT_EQ(want, got) << "channels " << c << " mode " << to_string(mode) << " pixels "
                               << pixels << " offset " << off;
        }
      }
    }
  }
}

TEST(Apply, MatchesCpuForEveryModeAndChannelCount) {
  HISTEQ_REQUIRE_GPU();
  std::mt19937_64 rng(99);
  Lut luts[3];
  for (Lut& l : luts) {
    for (auto& b : l) b = static_cast<std::uint8_t>(rng());  // arbitrary, not monotone
  }
  std::vector<std::uint8_t> flat_luts;
  for (const Lut& l : luts) flat_luts.insert(flat_luts.end(), l.begin(), l.end());
  auto d_luts = upload(flat_luts);

  for (int c = 1; c <= 4; ++c) {
    for (Mode mode : kModes) {
      for (std::size_t pixels : kOddSizes) {
        for (std::size_t in_off : kOffsets) {
          for (std::size_t out_off : {std::size_t(0), std::size_t(5), in_off}) {
            const auto img = random_image(pixels, c, pixels * 7 + c * 3 + in_off);
            const std::size_t out_bytes = pixels * std::size_t(output_channels(mode, c));
            std::vector<std::uint8_t> want(out_bytes);
            cpu::apply(img.data(), pixels, c, mode, luts, want.data(), 2);

            DeviceBuffer<std::uint8_t> d_in(img.size() + 16), d_out(out_bytes + 32);
            HISTEQ_CUDA_CHECK(
                cudaMemcpy(d_in.get() + in_off, img.data(), img.size(), cudaMemcpyHostToDevice));
            // Guard bytes around the output: apply must write exactly out_bytes.
            HISTEQ_CUDA_CHECK(cudaMemset(d_out.get(), 0xA5, d_out.size()));
            kernels::launch_apply(d_in.get() + in_off, pixels, c, mode, d_luts.get(),
                                  d_out.get() + out_off, nullptr);
            HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
            const auto all = download(d_out.get(), d_out.size());
            const std::vector<std::uint8_t> got(all.begin() + std::ptrdiff_t(out_off),
                                                all.begin() + std::ptrdiff_t(out_off + out_bytes));
            const std::string what = "channels " + std::to_string(c) + " mode " + to_string(mode) +
                                     " pixels " + std::to_string(pixels) + " in_off " +
                                     std::to_string(in_off) + " out_off " + std::to_string(out_off);
            ASSERT_EQ(want, got) << what;
            for (std::size_t i = 0; i < out_off; ++i) ASSERT_EQ(all[i], 0xA5) << what;
            for (std::size_t i = out_off + out_bytes; i < all.size(); ++i) {
              ASSERT_EQ(all[i], 0xA5) << what << " (wrote past the end)";
            }
          }
        }
      }
    }
  }
}

TEST(Apply, LargeGrayImageUsesWholeGridAndMatchesCpu) {
  HISTEQ_REQUIRE_GPU();
  // Larger than blocks_per_sm · SMs · block · 16 bytes, so the grid-stride loop wraps.
  const std::size_t pixels = (std::size_t(1) << 26) + 13;
  const auto img = random_image(pixels, 1, 5);
  Lut lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<std::uint8_t>(255 - v);
  std::vector<std::uint8_t> want(pixels);
  cpu::apply(img.data(), pixels, 1, Mode::gray, &lut, want.data(), 0);
  auto d_in = upload(img);
  auto d_lut = upload(std::vector<std::uint8_t>(lut.begin(), lut.end()));
  DeviceBuffer<std::uint8_t> d_out(pixels);
  kernels::launch_apply(d_in.get(), pixels, 1, Mode::gray, d_lut.get(), d_out.get(), nullptr);
  HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
  ASSERT_EQ(want, download(d_out.get(), pixels));
}

// ---- gpu::Equalizer on device-resident data ----

TEST(Equalizer, EqualizeGrayOnDeviceDataMatchesCpuChain) {
  HISTEQ_REQUIRE_GPU();
  for (Formula f : kFormulas) {
    for (std::size_t n : {std::size_t(1), std::size_t(257), std::size_t(1) << 20}) {
      // A skewed image (values concentrated low), so that the LUT is far from the identity.
      std::mt19937_64 rng(n);
      std::vector<std::uint8_t> img(n);
      for (auto& b : img) b = static_cast<std::uint8_t>((rng() % 256) * (rng() % 256) / 255);
      const Histogram h = cpu::histogram(img.data(), n, SampleType::u8, 256, 2);
      const Lut lut = make_lut(h.data(), f);
      std::vector<std::uint8_t> want(n);
      cpu::apply(img.data(), n, 1, Mode::gray, &lut, want.data(), 2);

      // "auto" runs the fused single-launch equalizer; a named kernel runs the three stages.
      for (const char* kernel : {"auto", "columns", "privatized"}) {
        gpu::Equalizer eq;
        auto d_in = upload(img);
        DeviceBuffer<std::uint8_t> d_out(n);
        for (int rep = 0; rep < 3; ++rep) {  // repeats: the fused path alternates histograms
          const std::string ran = eq.equalize_gray(d_in.get(), d_out.get(), n, f, kernel);
          eq.synchronize();
          EXPECT_FALSE(ran.empty());
          EXPECT_EQ(want, download(d_out.get(), n)) << label(f) << " n=" << n << " kernel " << ran;
          ASSERT_NE(eq.last_equalize_histogram(), nullptr);
          EXPECT_EQ(h, download(eq.last_equalize_histogram(), 256)) << ran << " rep " << rep;
          const auto dl = download(eq.device_lut(1), 256);
          EXPECT_EQ(std::vector<std::uint8_t>(lut.begin(), lut.end()), dl) << ran;
        }
        // In place (the fused path allows d_in == d_out).
        if (std::string(kernel) == "auto") {
          eq.equalize_gray(d_in.get(), d_in.get(), n, f, kernel);
          eq.synchronize();
          EXPECT_EQ(want, download(d_in.get(), n)) << "in place, n=" << n;
        }
      }
    }
  }
}

TEST(Equalizer, ARefusedFusedCallLeavesTheAlternatingHistogramsReady) {
  HISTEQ_REQUIRE_GPU();
  // The fused equalizers count into one of two histograms and zero the other for the next call.
  // A call refused before its launch (overlapping buffers) must not move on to the other one: it
  // still holds the previous call's counts, which only the refused launch would have zeroed.
  const std::size_t n = 4099;
  std::mt19937_64 rng(7);
  std::vector<std::uint8_t> img(n);
  for (auto& b : img) b = static_cast<std::uint8_t>((rng() % 256) * (rng() % 256) / 255);
  const Histogram h = cpu::histogram(img.data(), n, SampleType::u8, 256, 1);
  const Lut lut = make_lut(h.data(), Formula::opencv);
  std::vector<std::uint8_t> want(n);
  cpu::apply(img.data(), n, 1, Mode::gray, &lut, want.data(), 1);
  gpu::Equalizer eq;
  auto d_in = upload(img);
  auto d_mask = upload(std::vector<std::uint8_t>(n, 1));  // counts every pixel
  DeviceBuffer<std::uint8_t> d_out(n), d_big(n + 16);
  ASSERT_EQ(eq.equalize_gray(d_in.get(), d_out.get(), n, Formula::opencv), "fused");
  eq.synchronize();
  EXPECT_EQ(want, download(d_out.get(), n));
  for (int round = 0; round < 2; ++round) {
    EXPECT_THROW(eq.equalize_gray(d_big.get(), d_big.get() + 16, n, Formula::opencv), UsageError);
    const std::string ran = round == 0
                                ? eq.equalize_gray_region(d_in.get(), d_out.get(), int(n), 1, 0, 0,
                                                          int(n), 1, d_mask.get(), Formula::opencv)
                                : eq.equalize_gray(d_in.get(), d_out.get(), n, Formula::opencv);
    eq.synchronize();
    EXPECT_EQ(ran, "fused") << "round " << round;
    EXPECT_EQ(want, download(d_out.get(), n)) << "round " << round;
    EXPECT_EQ(std::vector<std::uint8_t>(lut.begin(), lut.end()), download(eq.device_lut(1), 256))
        << "round " << round;
  }
}

TEST(Equalizer, UnknownKernelIsUsageError) {
  HISTEQ_REQUIRE_GPU();
  gpu::Equalizer eq;
  DeviceBuffer<std::uint8_t> d(16);
  EXPECT_THROW(eq.histogram("no-such-kernel", d.get(), 16, SampleType::u8, 256, eq.device_hist()),
               UsageError);
  EXPECT_THROW(eq.histogram("auto", d.get(), 16, SampleType::u8, 0, eq.device_hist()), UsageError);
}

}  // namespace
}  // namespace histeq
