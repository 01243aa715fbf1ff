// test_kernel_edges.cpp — the edges of vectorized histogram kernels (16-byte loads, tiles of
// block × items per thread), for every registry kernel (GPU; skips with the reason without one):
//  - u8 inputs at every offset 0..15 from a 256-byte-aligned allocation × every n in 1..80
//    (heads, vector bodies and tails of every length), and the same for i32 at element
//    offsets 1..3 (4..12 bytes);
//  - sizes one below / at / one above multiples of the kernel's own tile (block size from its
//    launch shape, × 16 samples per thread, × grid), from an odd offset;
//  - a "pitched" sub-image: a W×H image stored with a row pitch (bytes per row, not a multiple
//    of 16) inside a larger buffer; the histogram of the sub-image (x0, y0, w, h), computed row
//    by row (d_in + row·pitch + x0, n = w) and summed, equals the CPU histogram of the sub-image.
// Exact kernels must equal the CPU reference (histeq::cpu::histogram) bin for bin; the racy
// kernel only what a race allows (every bin ≤ exact, non-zero where exact is, sum ≤ n).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_test_support.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
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
using histeq::Stream;
using histeq::kernels::HistogramLaunch;
using histeq::kernels::KernelEntry;

/// Runs kernels through the registry's checked entry point with d_hist poisoned (0xFF) first;
/// d_hist and the scratch buffer are kept between calls (thousands of small calls per kernel).
class Runner {
 public:
  Histogram run(const KernelEntry& e, const void* d_in, std::size_t n, SampleType type, int bins) {
    const std::size_t need = e.scratch_bytes(n, bins, type);
    // zeroed_scratch kernels get their own buffer, zeroed once and reused by every call: each
    // call must leave it zero for the next (contract.hpp).
    DeviceBuffer<std::uint8_t>& scratch = e.zeroed_scratch ? zeroed_ : scratch_;
    if (need > scratch.size()) {
      scratch = DeviceBuffer<std::uint8_t>(need);
      histeq::kernels::prepare_scratch(e, scratch.get(), scratch.bytes(), stream_.get());
    }
    HISTEQ_CUDA_CHECK(cudaMemsetAsync(d_hist_.get(), 0xFF, std::size_t(bins) * 8, stream_.get()));
    HistogramLaunch call;
    call.d_in = d_in;
    call.n = n;
    call.type = type;
    call.bins = bins;
    call.d_hist = d_hist_.get();
    call.d_scratch = scratch.get();
    call.stream = stream_.get();
    histeq::kernels::run_histogram(e, call);
    Histogram h(static_cast<std::size_t>(bins));
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(h.data(), d_hist_.get(), std::size_t(bins) * 8,
                                      cudaMemcpyDeviceToHost, stream_.get()));
    stream_.sync();
    return h;
  }

 private:
  Stream stream_;
  DeviceBuffer<std::uint64_t> d_hist_{std::size_t(histeq::kMaxBins)};
  DeviceBuffer<std::uint8_t> scratch_;
  DeviceBuffer<std::uint8_t> zeroed_;
};

testing::AssertionResult matches(const KernelEntry& e, const Histogram& got, const Histogram& ref,
                                 std::size_t n) {
  if (got.size() != ref.size()) return testing::AssertionFailure() << "bin count differs";
  std::ostringstream bad;
  int nbad = 0;
  for (std::size_t b = 0; b < ref.size(); ++b) {
    const bool ok =
        e.exact ? got[b] == ref[b] : got[b] <= ref[b] && ((got[b] == 0) == (ref[b] == 0));
    if (!ok && nbad++ < 6) bad << " bin " << b << ": got " << got[b] << ", cpu " << ref[b] << ";";
  }
  const std::uint64_t sum = std::accumulate(got.begin(), got.end(), std::uint64_t(0));
  if (!e.exact && sum > n) return testing::AssertionFailure() << "sum " << sum << " > n " << n;
  if (nbad) return testing::AssertionFailure() << nbad << " bins wrong:" << bad.str();
  return testing::AssertionSuccess();
}

/// Deterministic bytes with runs (so aggregating kernels see equal neighbours) and noise.
std::vector<std::uint8_t> bytes_for(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> v(n);
  std::uint32_t x = seed * 2654435761u + 12345;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 7 != 0) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
    }
    v[i] = std::uint8_t(x >> ((i / 5) % 3 * 8));
  }
  return v;
}

class KernelEdges : public testing::TestWithParam<const KernelEntry*> {};

TEST_P(KernelEdges, EveryOffsetAndShortLengthU8) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  const std::vector<std::uint8_t> host = bytes_for(4096, 1);
  const DeviceBuffer<std::uint8_t> d =
      histeq::test::upload_bytes(host);  // cudaMalloc: 256-byte aligned
  Runner runner;
  for (int bins : {256, 64, 7}) {
    if (e.unsupported(SampleType::u8, bins)) continue;
    for (std::size_t offset = 0; offset < 16; ++offset)
      for (std::size_t n = 1; n <= 80; ++n) {
        SCOPED_TRACE("bins " + std::to_string(bins) + ", offset " + std::to_string(offset) +
                     ", n " + std::to_string(n));
        const Histogram ref =
            histeq::cpu::histogram(host.data() + offset, n, SampleType::u8, bins, 1);
        ASSERT_TRUE(matches(e, runner.run(e, d.get() + offset, n, SampleType::u8, bins), ref, n));
      }
  }
}

TEST_P(KernelEdges, I32ElementOffsets) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  const int bins = 64;
  if (const char* why = e.unsupported(SampleType::i32, bins)) GTEST_SKIP() << why;
  std::vector<std::int32_t> vals(5000);
  for (std::size_t i = 0; i < vals.size(); ++i)
    vals[i] = std::int32_t((i * 37 + i / 9) % 70) - 3;  // some out of range
  std::vector<std::uint8_t> host(vals.size() * 4);
  std::memcpy(host.data(), vals.data(), host.size());
  const DeviceBuffer<std::uint8_t> d = histeq::test::upload_bytes(host);
  Runner runner;
  for (std::size_t off = 1; off <= 3; ++off)
    for (std::size_t n : {std::size_t(1), std::size_t(3), std::size_t(5), std::size_t(17),
                          std::size_t(63), std::size_t(4093), vals.size() - off}) {
      SCOPED_TRACE("element offset " + std::to_string(off) + ", n " + std::to_string(n));
      const Histogram ref =
          histeq::cpu::histogram(host.data() + 4 * off, n, SampleType::i32, bins, 1);
      ASSERT_TRUE(matches(e, runner.run(e, d.get() + 4 * off, n, SampleType::i32, bins), ref, n));
    }
}

TEST_P(KernelEdges, SizesAroundTheKernelsOwnTiles) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  if (e.unsupported(SampleType::u8, 256)) GTEST_SKIP() << e.unsupported(SampleType::u8, 256);
  // The tile: block size (from the launch shape when the kernel has one) × 16 samples/thread.
  int block = 256, grid = 0;
  if (e.shape) {
    HistogramLaunch call;
    call.n = std::size_t(1) << 22;
    call.type = SampleType::u8;
    call.bins = 256;
    try {
      const auto s = e.shape(call);
      if (s.block_size > 0) block = s.block_size;
      grid = s.grid_size;
    } catch (const histeq::Error&) {  // a layout this device cannot hold: keep the defaults
    }
  }
  std::vector<std::size_t> sizes;
  for (std::size_t base :
       {std::size_t(block), std::size_t(block) * 4, std::size_t(block) * 16,
        std::size_t(block) * 16 * 3, std::size_t(block) * 16 * std::size_t(std::max(grid, 1))})
    for (long d : {-1L, 0L, 1L, 15L, 17L}) sizes.push_back(std::size_t(long(base) + d));
  const std::size_t most = *std::max_element(sizes.begin(), sizes.end());
  const std::vector<std::uint8_t> host = bytes_for(most + 16, 2);
  const DeviceBuffer<std::uint8_t> d = histeq::test::upload_bytes(host);
  Runner runner;
  for (std::size_t n : sizes)
    for (std::size_t offset : {std::size_t(0), std::size_t(5)}) {
      SCOPED_TRACE("block " + std::to_string(block) + ", n " + std::to_string(n) + ", offset " +
                   std::to_string(offset));
      const Histogram ref = histeq::cpu::histogram(host.data() + offset, n, SampleType::u8, 256, 1);
      ASSERT_TRUE(matches(e, runner.run(e, d.get() + offset, n, SampleType::u8, 256), ref, n));
    }
}

TEST_P(KernelEdges, PitchedSubImageRowByRow) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  if (e.unsupported(SampleType::u8, 256)) GTEST_SKIP() << e.unsupported(SampleType::u8, 256);
  // A 1003-wide, 67-row image stored with a pitch of 1011 bytes; the sub-image starts at
  // (x0, y0) = (3, 5) and is 517 × 41 (odd width, odd start: no row is 16-byte aligned).
  const std::size_t pitch = 1011, rows = 67, x0 = 3, y0 = 5, w = 517, h = 41;
  const std::vector<std::uint8_t> host = bytes_for(pitch * rows, 3);
  const DeviceBuffer<std::uint8_t> d = histeq::test::upload_bytes(host);
  std::vector<std::uint8_t> sub;
  for (std::size_t y = y0; y < y0 + h; ++y)
    sub.insert(sub.end(), host.begin() + long(y * pitch + x0),
               host.begin() + long(y * pitch + x0 + w));
  const Histogram ref = histeq::cpu::histogram(sub.data(), sub.size(), SampleType::u8, 256, 1);
  Histogram sum(256, 0);
  Runner runner;
  for (std::size_t y = y0; y < y0 + h; ++y) {
    const Histogram row = runner.run(e, d.get() + y * pitch + x0, w, SampleType::u8, 256);
    const Histogram row_ref =
        histeq::cpu::histogram(host.data() + y * pitch + x0, w, SampleType::u8, 256, 1);
    ASSERT_TRUE(matches(e, row, row_ref, w)) << "row " << y;
    for (int b = 0; b < 256; ++b) sum[std::size_t(b)] += row[std::size_t(b)];
  }
  EXPECT_TRUE(matches(e, sum, ref, sub.size()));
}

INSTANTIATE_TEST_SUITE_P(Registry, KernelEdges, testing::ValuesIn(histeq::test::registry_entries()),
                         histeq::test::kernel_param_name);

}  // namespace
