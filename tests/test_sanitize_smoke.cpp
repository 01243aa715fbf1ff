// test_sanitize_smoke.cpp — small calls of every registry kernel, for the CUDA sanitizers
// (scripts/gpu_sanitize.sh runs it under compute-sanitizer memcheck / initcheck / synccheck /
// racecheck, one kernel at a time with --gtest_filter='Registry/SanitizerSmoke.*/NAME') and as
// an ordinary GPU test. Each kernel: u8 with 1, 7, 64 and 256 bins and i32 with 16 and 4096 bins
// (values partly outside [0, bins)), n in {0, 1, 4099} at a 0- and a 3-sample offset; results
// against the CPU reference (exact kernels bin for bin; racy within race bounds). Sizes are
// small so that a sanitizer run of the whole registry takes seconds, not minutes.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "gpu_test_support.hpp"
#include "histeq/cpu.hpp"
#include "histeq/types.hpp"
#include "histogram/contract.hpp"
#include "histogram/registry.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"
#include "test_support.hpp"

namespace {

using histeq::DeviceBuffer;
using histeq::Histogram;
using histeq::SampleType;
using histeq::kernels::HistogramLaunch;
using histeq::kernels::KernelEntry;

class SanitizerSmoke : public testing::TestWithParam<const KernelEntry*> {};

TEST_P(SanitizerSmoke, SmallCallsMatchCpu) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  struct Case {
    SampleType type;
    int bins;
  };
  const Case cases[] = {{SampleType::u8, 1},   {SampleType::u8, 7},   {SampleType::u8, 64},
                        {SampleType::u8, 256}, {SampleType::i32, 16}, {SampleType::i32, 4096}};
  const std::size_t kMax = 4099 + 3;
  int ran = 0;
  for (const Case& c : cases) {
    if (e.unsupported(c.type, c.bins)) continue;
    const std::size_t sb = histeq::sample_bytes(c.type);
    std::vector<std::uint8_t> host(kMax * sb);
    std::uint32_t x = 77u + std::uint32_t(c.bins);
    for (std::size_t i = 0; i < kMax; ++i) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      if (c.type == SampleType::u8) {
        host[i] = std::uint8_t(i % 5 == 0 ? 200 : x);
      } else {
        const std::int32_t v =
            std::int32_t(x % std::uint32_t(c.bins + 8)) - 4;  // some out of range
        std::memcpy(&host[i * 4], &v, 4);
      }
    }
    DeviceBuffer<std::uint8_t> d_in(host.size());
    HISTEQ_CUDA_CHECK(cudaMemcpy(d_in.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
    for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(4099)})
      for (std::size_t off : {std::size_t(0), std::size_t(3)}) {
        SCOPED_TRACE(std::string(histeq::to_string(c.type)) + " bins " + std::to_string(c.bins) +
                     " n " + std::to_string(n) + " offset " + std::to_string(off));
        DeviceBuffer<std::uint64_t> d_hist(std::size_t(c.bins));
        DeviceBuffer<std::uint8_t> scratch(e.scratch_bytes(n, c.bins, c.type));
        histeq::kernels::prepare_scratch(e, scratch.get(), scratch.bytes(), nullptr);
        HistogramLaunch call;
        call.d_in = n ? static_cast<const void*>(d_in.get() + off * sb) : nullptr;
        call.n = n;
        call.type = c.type;
        call.bins = c.bins;
        call.d_hist = d_hist.get();
        call.d_scratch = scratch.get();
        histeq::kernels::run_histogram(e, call);
        HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
        Histogram got(std::size_t(c.bins));
        HISTEQ_CUDA_CHECK(
            cudaMemcpy(got.data(), d_hist.get(), d_hist.bytes(), cudaMemcpyDeviceToHost));
        const Histogram ref = histeq::cpu::histogram(host.data() + off * sb, n, c.type, c.bins, 1);
        for (std::size_t b = 0; b < ref.size(); ++b) {
          if (e.exact) {
            ASSERT_EQ(got[b], ref[b]) << "bin " << b;
          } else {
            ASSERT_LE(got[b], ref[b]) << "bin " << b;
            ASSERT_EQ(got[b] == 0, ref[b] == 0) << "bin " << b;
          }
        }
        ++ran;
      }
  }
  EXPECT_GT(ran, 0) << e.name << " supports none of the smoke cases";
}

INSTANTIATE_TEST_SUITE_P(Registry, SanitizerSmoke,
                         testing::ValuesIn(histeq::test::registry_entries()),
                         histeq::test::kernel_param_name);

}  // namespace
