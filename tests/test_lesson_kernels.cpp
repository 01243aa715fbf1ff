// test_lesson_kernels.cpp — the int-array lesson's designs (perthread, tworeduce, cooperative,
// shortcounters) and the occupancy report (details.hpp).
//
// CPU-only: the grid-sizing rules (cooperative_grid_size, lesson_grid_size, lesson_max_grid),
// the supported-bins limits against the shared-memory arithmetic, describe() on unsupported
// cases and format_details() on made-up rows.
// GPU (skipped with the reason where no device is usable): the lesson's named case (36 × 192 ×
// 10240 int32 values i % 64, 64 bins, every bin 1,105,920) on every exact registry kernel that
// takes i32 with 64 bins; constant inputs far longer than an 8-bit counter's range, with many
// samples per thread, on shortcounters and perthread; the cooperative launch on a large input;
// describe() on the device; a sequence of configurations per lesson kernel that must not leak
// into each other. The per-distribution sweep of every registry kernel (these included)
// is in test_kernels.cpp.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_support.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/types.hpp"
#include "histogram/contract.hpp"
#include "histogram/details.hpp"
#include "histogram/registry.hpp"
#include "lesson/lesson.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"
#include "test_support.hpp"

namespace {

using histeq::DeviceBuffer;
using histeq::Histogram;
using histeq::SampleType;
using histeq::Stream;
using histeq::kernels::HistogramLaunch;
using histeq::kernels::KernelDetails;
using histeq::kernels::KernelEntry;
using histeq::kernels::LaunchShape;

const std::vector<const KernelEntry*>& lesson_kernels() {
  static const std::vector<const KernelEntry*> v = {
      &histeq::kernels::kPerthread, &histeq::kernels::kTworeduce, &histeq::kernels::kCooperative,
      &histeq::kernels::kShortcounters};
  return v;
}

std::size_t ceil_div(std::size_t a, std::size_t b) { return a / b + (a % b != 0); }

/// Uploads samples `offset` bytes into a new device buffer, complete before return (see
/// gpu_test_support.hpp for why the copy must be waited for).
template <typename T>
DeviceBuffer<std::uint8_t> upload(const std::vector<T>& host, std::size_t offset = 0) {
  return histeq::test::upload_bytes(host, offset);
}

using histeq::test::run_kernel;

LaunchShape shape_of(const KernelEntry& e, std::size_t n, SampleType type, int bins,
                     int block_size = 0) {
  HistogramLaunch call;
  call.n = n;
  call.type = type;
  call.bins = bins;
  call.block_size = block_size;
  return e.shape(call);
}

// ---------------------------------------------------------------------------------------------
// Grid-sizing rules (CPU).
// ---------------------------------------------------------------------------------------------

const std::vector<std::size_t>& sample_counts() {
  static const std::vector<std::size_t> v = {0,
                                             1,
                                             31,
                                             63,
                                             64,
                                             65,
                                             8191,
                                             8192,
                                             8193,
                                             1u << 20,
                                             1u << 24,
                                             70778880,
                                             std::size_t(1) << 34,
                                             std::size_t(1) << 42};
  return v;
}

TEST(CooperativeGridSize, NeverMoreThanResidentNorMoreThanTheWork) {
  for (int sms : {1, 2, 7, 132}) {
    for (int bps : {1, 2, 6, 16, 32}) {
      for (int block : {32, 96, 128, 1024}) {
        for (std::size_t n : sample_counts()) {
          SCOPED_TRACE("sms " + std::to_string(sms) + ", blocks/SM " + std::to_string(bps) +
                       ", block " + std::to_string(block) + ", n " + std::to_string(n));
          const int g = histeq::kernels::cooperative_grid_size(sms, bps, n, block);
          EXPECT_GE(g, 1);
          EXPECT_LE(g, sms * bps) << "a cooperative launch larger than what is resident fails";
          EXPECT_LE(std::size_t(g), std::max<std::size_t>(1, ceil_div(n, std::size_t(block))))
              << "more blocks than work";
          EXPECT_LE(g, histeq::kernels::kLessonMaxGrid);
          EXPECT_LE(g, histeq::kernels::lesson_max_grid(n)) << "beyond scratch_bytes' bound";
          // Enough work: the whole device (up to the cap) takes part.
          const std::size_t per_block =
              std::size_t(block) * histeq::kernels::kLessonSamplesPerThread;
          if (n >= std::size_t(sms) * bps * per_block) {
            EXPECT_EQ(g, std::min(sms * bps, histeq::kernels::kLessonMaxGrid));
          }
        }
      }
    }
  }
}

TEST(CooperativeGridSize, NothingResidentIsAnError) {
  EXPECT_THROW(histeq::kernels::cooperative_grid_size(132, 0, 1000, 128), histeq::Error);
  EXPECT_THROW(histeq::kernels::cooperative_grid_size(0, 4, 1000, 128), histeq::Error);
  EXPECT_THROW(histeq::kernels::cooperative_grid_size(132, 4, 1000, 0), histeq::Error);
}

TEST(LessonGridSize, OneWaveAtMostUnlessBlockCountsWouldOverflow) {
  using histeq::kernels::kLessonMaxBlockShare;
  for (int sms : {1, 7, 132}) {
    for (int bps : {1, 6, 16}) {
      for (int block : {32, 96, 128, 1024}) {
        for (std::size_t n : sample_counts()) {
          SCOPED_TRACE("sms " + std::to_string(sms) + ", blocks/SM " + std::to_string(bps) +
                       ", block " + std::to_string(block) + ", n " + std::to_string(n));
          const int g = histeq::kernels::lesson_grid_size(sms, bps, n, block);
          EXPECT_GE(g, 1);
          EXPECT_LE(g, histeq::kernels::lesson_max_grid(n)) << "beyond scratch_bytes' bound";
          // No block counts more than kLessonMaxBlockShare samples (uint32 per-block sums).
          EXPECT_LE(ceil_div(n, std::size_t(g)), kLessonMaxBlockShare);
          if (ceil_div(n, kLessonMaxBlockShare) <= std::size_t(sms) * bps) {
            EXPECT_LE(g, sms * bps);
            EXPECT_LE(std::size_t(g), std::max<std::size_t>(1, ceil_div(n, std::size_t(block))));
          }
        }
      }
    }
  }
  EXPECT_THROW(histeq::kernels::lesson_grid_size(132, 0, 1000, 128), histeq::Error);
}

TEST(LessonScratch, CoversTheLargestGridAndIsZeroForNoInput) {
  for (const KernelEntry* e : lesson_kernels()) {
    SCOPED_TRACE(e->name);
    for (SampleType type : {SampleType::u8, SampleType::i32}) {
      EXPECT_EQ(e->scratch_bytes(0, 64, type), 0u);
      const std::size_t s = e->scratch_bytes(std::size_t(1) << 24, 64, type);
      if (s != 0) {  // tworeduce, cooperative: uint32 partials[grid][bins]
        EXPECT_EQ(s, std::size_t(histeq::kernels::lesson_max_grid(std::size_t(1) << 24)) * 64 * 4);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Supported bins follow from the shared-memory layout (CPU).
// ---------------------------------------------------------------------------------------------

TEST(LessonSupport, BinLimitsFollowSharedMemory) {
  const std::size_t limit = histeq::kernels::kLessonSmemPerBlockLimit;
  // perthread / tworeduce / cooperative: bins × 32 threads × 4 bytes at the smallest block.
  const int per_thread_max = int(limit / (32 * 4));
  // shortcounters: bins × (128 bytes of counters + 4 bytes of block histogram).
  const int short_max = int(limit / (128 + 4));
  for (const KernelEntry* e : lesson_kernels()) {
    const int max_bins = std::string(e->name) == "shortcounters" ? short_max : per_thread_max;
    for (SampleType type : {SampleType::u8, SampleType::i32}) {
      SCOPED_TRACE(std::string(e->name) + " " + histeq::to_string(type));
      for (int bins : {1, 16, 64, 256, max_bins}) {
        EXPECT_EQ(e->unsupported(type, bins), nullptr) << bins << " bins";
      }
      for (int bins : {max_bins + 1, histeq::kMaxBins}) {
        const char* why = e->unsupported(type, bins);
        ASSERT_NE(why, nullptr) << bins << " bins";
        EXPECT_NE(std::string(why).find("shared memory"), std::string::npos) << why;
      }
    }
    EXPECT_TRUE(e->exact);
    EXPECT_NE(e->shape, nullptr);
  }
}

TEST(LessonSupport, EveryLessonKernelIsInTheRegistry) {
  for (const KernelEntry* e : lesson_kernels()) {
    EXPECT_EQ(histeq::kernels::find_kernel(e->name).launch, e->launch) << e->name;
  }
}

// ---------------------------------------------------------------------------------------------
// The details report (CPU parts).
// ---------------------------------------------------------------------------------------------

TEST(Details, UnsupportedCaseNeedsNoDevice) {
  for (const KernelEntry* e : lesson_kernels()) {
    const KernelDetails d =
        histeq::kernels::describe(*e, SampleType::i32, histeq::kMaxBins, std::size_t(1) << 20);
    EXPECT_EQ(d.name, e->name);
    EXPECT_FALSE(d.supported);
    EXPECT_EQ(d.reason, e->unsupported(SampleType::i32, histeq::kMaxBins));
    EXPECT_EQ(d.block_size, 0);
    EXPECT_EQ(d.grid_size, 0);
    EXPECT_EQ(d.occupancy, 0.0);
  }
}

TEST(Details, EntryWithoutShapeIsSupportedWithZeros) {
  KernelEntry e = histeq::kernels::kPerthread;
  e.name = "noshape";
  e.shape = nullptr;
  const KernelDetails d = histeq::kernels::describe(e, SampleType::u8, 256, 1000);
  EXPECT_TRUE(d.supported);
  EXPECT_EQ(d.reason, "no launch shape");
  EXPECT_EQ(d.block_size, 0);
  EXPECT_EQ(d.smem_bytes, 0u);
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < s.size()) {
    const std::size_t end = s.find('\n', start);
    lines.push_back(s.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

TEST(Details, FormatAlignsColumns) {
  KernelDetails a;
  a.name = "perthread";
  a.supported = true;
  a.block_size = 128;
  a.grid_size = 792;
  a.smem_bytes = 32768;
  a.regs_per_thread = 29;
  a.blocks_per_sm = 6;
  a.max_threads_per_sm = 2048;
  a.occupancy = 6.0 * 128 / 2048;
  KernelDetails b;
  b.name = "a_much_longer_kernel_name";
  b.supported = true;
  b.block_size = 1024;
  b.grid_size = 4;
  b.smem_bytes = 100;
  b.regs_per_thread = 255;
  b.blocks_per_sm = 2;
  b.max_threads_per_sm = 2048;
  b.occupancy = 1.0;
  KernelDetails c;
  c.name = "big";
  c.supported = false;
  c.reason = "needs too much shared memory";
  KernelDetails d;
  d.name = "cub";
  d.supported = true;
  d.reason = "no launch shape";

  const std::string table = histeq::kernels::format_details({a, b, c, d});
  const std::vector<std::string> lines = split_lines(table);
  ASSERT_EQ(lines.size(), 5u) << table;
  EXPECT_EQ(table.back(), '\n');
  // The header names every column.
  for (const char* col :
       {"kernel", "block", "grid", "smem/block", "regs", "blocks/SM", "occupancy", "note"}) {
    EXPECT_NE(lines[0].find(col), std::string::npos) << col;
  }
  // Right-aligned numbers: the end of the "occupancy" header is where every row's occupancy
  // value ends.
  const std::size_t occ_end = lines[0].find("occupancy") + std::string("occupancy").size();
  EXPECT_EQ(lines[1].substr(0, occ_end).substr(occ_end - 5), "37.5%") << table;
  EXPECT_EQ(lines[2].substr(0, occ_end).substr(occ_end - 6), "100.0%") << table;
  const std::size_t grid_end = lines[0].find("grid") + 4;
  EXPECT_EQ(lines[1].substr(grid_end - 3, 3), "792") << table;
  EXPECT_EQ(lines[2].substr(grid_end - 1, 1), "4") << table;
  // Every row starts with its name, padded to the longest.
  EXPECT_EQ(lines[1].rfind("perthread ", 0), 0u);
  EXPECT_EQ(lines[2].rfind("a_much_longer_kernel_name ", 0), 0u);
  // Unsupported and shapeless rows: dashes and the reason.
  EXPECT_NE(lines[3].find("unsupported: needs too much shared memory"), std::string::npos);
  EXPECT_NE(lines[3].find(" - "), std::string::npos);
  EXPECT_NE(lines[4].find("no launch shape"), std::string::npos);
  EXPECT_EQ(lines[4].find("unsupported"), std::string::npos);
  // The smem column holds the exact byte count.
  EXPECT_NE(lines[1].find(" 32768 "), std::string::npos);
}

TEST(Details, FormatEmptyListIsJustTheHeader) {
  const std::vector<std::string> lines = split_lines(histeq::kernels::format_details({}));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("kernel", 0), 0u);
}

// ---------------------------------------------------------------------------------------------
// GPU: the lesson's named case.
// ---------------------------------------------------------------------------------------------

/// The lesson's array: 36 × 192 × 10240 int32 elements, element i holding i % 64 (the lesson's
/// binning, already applied), 64 bins: every bin exactly n / 64 = 110,592 × 10 = 1,105,920.
TEST(LessonCase, Int32Array64BinsEveryBinExact) {
  HISTEQ_REQUIRE_GPU();
  constexpr std::size_t n = std::size_t(36) * 192 * 10240;
  constexpr int bins = 64;
  static_assert(n % bins == 0 && n / bins == 110592 * 10, "the lesson's numbers");
  std::vector<std::int32_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = std::int32_t(i % bins);
  const DeviceBuffer<std::uint8_t> d = upload(host);

  int ran = 0;
  for (const KernelEntry& e : histeq::kernels::registry()) {
    if (!e.exact || e.unsupported(SampleType::i32, bins)) continue;
    SCOPED_TRACE(e.name);
    const Histogram got = run_kernel(e, d.get(), n, SampleType::i32, bins);
    for (int b = 0; b < bins; ++b) {
      EXPECT_EQ(got[std::size_t(b)], n / bins) << "bin " << b;
    }
    ++ran;
  }
  for (const KernelEntry* e : lesson_kernels()) {
    EXPECT_EQ(e->unsupported(SampleType::i32, bins), nullptr) << e->name << " must run the case";
  }
  EXPECT_GE(ran, int(lesson_kernels().size()));
}

// ---------------------------------------------------------------------------------------------
// GPU: counters cannot overflow.
// ---------------------------------------------------------------------------------------------

/// Every sample in one bin: each thread's counter for that bin gets every sample the thread
/// reads. With 2^20 samples the block totals pass 2^8 and 2^16 many times over; with the large
/// inputs every thread reads several times kShortcountersFlushInterval samples (checked from the
/// launch shape), so an 8-bit counter that were not flushed in time would wrap.
void expect_constant_counts_exact(const KernelEntry& e, SampleType type, int bins, std::size_t n,
                                  bool check_many_per_thread) {
  SCOPED_TRACE(std::string(e.name) + " " + histeq::to_string(type) + " " + std::to_string(bins) +
               " bins, n " + std::to_string(n));
  const int value = type == SampleType::u8 ? 200 : bins / 2 + 1;
  const int bin = type == SampleType::u8 ? (value * bins) / 256 : value;
  if (check_many_per_thread) {
    const LaunchShape s = shape_of(e, n, type, bins);
    ASSERT_GT(s.grid_size, 0);
    const std::size_t per_thread = n / (std::size_t(s.grid_size) * std::size_t(s.block_size));
    ASSERT_GT(per_thread, std::size_t(histeq::kernels::kShortcountersFlushInterval))
        << "input too short to overflow an unflushed 8-bit counter";
  }
  // Offset by one sample so that the head/tail paths run too.
  const std::size_t offset = histeq::sample_bytes(type);
  DeviceBuffer<std::uint8_t> d;
  if (type == SampleType::u8) {
    d = upload(std::vector<std::uint8_t>(n, std::uint8_t(value)), offset);
  } else {
    d = upload(std::vector<std::int32_t>(n, value), offset);
  }
  const Histogram got = run_kernel(e, d.get() + offset, n, type, bins);
  Histogram want(std::size_t(bins), 0);
  want[std::size_t(bin)] = n;
  EXPECT_EQ(got, want);
}

TEST(CounterOverflow, ConstantInputCountsExactly) {
  HISTEQ_REQUIRE_GPU();
  for (const KernelEntry* e : {&histeq::kernels::kShortcounters, &histeq::kernels::kPerthread}) {
    for (int bins : {64, 256}) {
      expect_constant_counts_exact(*e, SampleType::u8, bins, std::size_t(1) << 20, false);
      expect_constant_counts_exact(*e, SampleType::i32, bins, std::size_t(1) << 20, false);
    }
    expect_constant_counts_exact(*e, SampleType::u8, 64, (std::size_t(1) << 28) + 7, true);
    expect_constant_counts_exact(*e, SampleType::i32, 64, (std::size_t(1) << 27) + 3, true);
  }
}

/// Misaligned int32 samples (address not a multiple of 4) take the byte-assembling path; long
/// enough that shortcounters flushes there too (one sample per iteration).
TEST(CounterOverflow, MisalignedInt32Exact) {
  HISTEQ_REQUIRE_GPU();
  const std::size_t n = (std::size_t(1) << 22) + 1;
  std::vector<std::int32_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = std::int32_t((i * 2654435761u) % 80) - 8;
  const Histogram want = histeq::cpu::histogram(host.data(), n, SampleType::i32, 64);
  const DeviceBuffer<std::uint8_t> d = upload(host, 1);
  for (const KernelEntry* e : lesson_kernels()) {
    SCOPED_TRACE(e->name);
    EXPECT_EQ(run_kernel(*e, d.get() + 1, n, SampleType::i32, 64), want);
  }
}

// ---------------------------------------------------------------------------------------------
// GPU: the cooperative launch.
// ---------------------------------------------------------------------------------------------

TEST(Cooperative, LargeInputLaunchesAndCountsExactly) {
  HISTEQ_REQUIRE_GPU();
  int dev = 0, coop = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  const KernelEntry& e = histeq::kernels::kCooperative;
  const std::size_t n = (std::size_t(1) << 28) + 5;
  if (!coop) {
    // The documented behaviour where the device cannot launch cooperatively.
    EXPECT_THROW(run_kernel(e, nullptr, 0, SampleType::u8, 256), histeq::UsageError);
    GTEST_SKIP() << "device " << dev << " has no cooperative launch";
  }
  std::vector<std::uint8_t> host(n);
  std::uint64_t x = 88172645463325252ull;
  for (std::uint8_t& v : host) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = std::uint8_t(x >> 32);
  }
  const DeviceBuffer<std::uint8_t> d = upload(host);
  for (int bins : {64, 256}) {
    SCOPED_TRACE(std::to_string(bins) + " bins");
    const LaunchShape s = shape_of(e, n, SampleType::u8, bins);
    int bps = 0;
    const std::size_t dyn = s.smem_bytes;  // the cooperative kernel has no static shared memory
    ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, s.kernel, s.block_size, dyn),
              cudaSuccess);
    EXPECT_GE(bps, 1);
    EXPECT_LE(s.grid_size, sms * bps) << "grid larger than what can be resident";
    EXPECT_GT(s.grid_size, 1);
    EXPECT_EQ(run_kernel(e, d.get(), n, SampleType::u8, bins),
              histeq::cpu::histogram(host.data(), n, SampleType::u8, bins));
  }
}

// ---------------------------------------------------------------------------------------------
// GPU: describe().
// ---------------------------------------------------------------------------------------------

void expect_sane(const KernelDetails& d) {
  EXPECT_TRUE(d.supported) << d.reason;
  EXPECT_GT(d.block_size, 0);
  EXPECT_GT(d.grid_size, 0);
  EXPECT_GT(d.regs_per_thread, 0);
  EXPECT_GE(d.blocks_per_sm, 1);
  EXPECT_GT(d.max_threads_per_sm, 0);
  EXPECT_GT(d.occupancy, 0.0);
  EXPECT_LE(d.occupancy, 1.0);
  EXPECT_DOUBLE_EQ(d.occupancy, double(d.blocks_per_sm) * d.block_size / d.max_threads_per_sm);
}

TEST(Details, DescribeLessonKernelsOnTheDevice) {
  HISTEQ_REQUIRE_GPU();
  const std::size_t n = std::size_t(36) * 192 * 10240;
  for (const KernelEntry* e : lesson_kernels()) {
    for (int bins : {64, 256}) {
      SCOPED_TRACE(std::string(e->name) + ", " + std::to_string(bins) + " bins");
      const KernelDetails d = histeq::kernels::describe(*e, SampleType::i32, bins, n);
      expect_sane(d);
      EXPECT_GT(d.smem_bytes, 0u);
      // The per-thread layouts: at least bins × block bytes of shared memory per block, and so
      // no more resident blocks than the SM's shared memory holds.
      EXPECT_GE(d.smem_bytes, std::size_t(bins) * std::size_t(d.block_size));
      int dev = 0, smem_sm = 0;
      ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
      ASSERT_EQ(cudaDeviceGetAttribute(&smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev),
                cudaSuccess);
      EXPECT_LE(std::size_t(d.blocks_per_sm) * d.smem_bytes, std::size_t(smem_sm));
    }
  }
}

TEST(Details, DescribeEveryRegistryKernel) {
  HISTEQ_REQUIRE_GPU();
  std::vector<KernelDetails> rows;
  for (const KernelEntry& e : histeq::kernels::registry()) {
    SCOPED_TRACE(e.name);
    const KernelDetails d = histeq::kernels::describe(e, SampleType::u8, 256, 1u << 24);
    EXPECT_EQ(d.name, e.name);
    if (!d.supported) {
      EXPECT_FALSE(d.reason.empty());
    } else if (d.block_size > 0) {
      expect_sane(d);
    } else {
      EXPECT_EQ(d.reason, "no launch shape");
    }
    rows.push_back(d);
  }
  const std::string table = histeq::kernels::format_details(rows);
  for (const KernelEntry& e : histeq::kernels::registry()) {
    EXPECT_NE(table.find(e.name), std::string::npos) << e.name;
  }
}

// ---------------------------------------------------------------------------------------------
// GPU: nothing leaks from one call to the next.
// ---------------------------------------------------------------------------------------------

/// One call of the sequence: sample type, bins, requested block size (0: the default), sample
/// count, byte offset of the input from the cudaMalloc'd base, and constant (every u8 sample 200)
/// or pseudo-random samples (i32: in [-8, bins + 8), so some are not counted).
struct SequenceCase {
  SampleType type;
  int bins;
  int block;
  std::size_t n;
  std::size_t offset_bytes;
  bool constant;
};

std::string describe_case(const SequenceCase& c) {
  return std::string(histeq::to_string(c.type)) + " " + std::to_string(c.bins) + " bins, block " +
         std::to_string(c.block) + ", n " + std::to_string(c.n) + ", offset " +
         std::to_string(c.offset_bytes);
}

/// The samples of `c` as the bytes the device reads (little-endian int32 for i32).
std::vector<std::uint8_t> sequence_input(const SequenceCase& c, std::uint64_t seed) {
  std::vector<std::uint8_t> bytes(c.n * histeq::sample_bytes(c.type));
  std::uint64_t x = seed | 1;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (std::size_t i = 0; i < c.n; ++i) {
    if (c.type == SampleType::u8) {
      bytes[i] = c.constant ? std::uint8_t(200) : std::uint8_t(next() >> 40);
    } else {
      const std::int32_t v =
          c.constant ? c.bins / 2 : std::int32_t(next() % std::uint64_t(c.bins + 16)) - 8;
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  }
  return bytes;
}

bool same_shape(const LaunchShape& a, const LaunchShape& b) {
  return a.kernel == b.kernel && a.block_size == b.block_size && a.grid_size == b.grid_size &&
         a.smem_bytes == b.smem_bytes;
}

/// Each lesson kernel runs a sequence of different (type, bins, block size, n, alignment)
/// configurations — default and explicit blocks, a block that is not a multiple of 32, > 48 KB
/// (opt-in) and small shared-memory layouts, misaligned i32 — then the first configuration
/// again: on a freshly uploaded input and on the first input still in device memory. Every
/// result must equal the CPU histogram, and the first configuration's launch shape must be what
/// it was before the sequence (no cached query, attribute or layout of one configuration may be
/// served to another). The first configuration is the one that once failed after the other
/// tests had run (perthread, u8, 64 bins, 2^20 constant samples, offset 1 byte).
TEST(LessonSequence, ConfigurationsDoNotLeakIntoEachOther) {
  HISTEQ_REQUIRE_GPU();
  int dev = 0, coop = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev), cudaSuccess);

  const SequenceCase first = {SampleType::u8, 64, 0, std::size_t(1) << 20, 1, true};
  const std::vector<SequenceCase> sequence = {
      first,
      {SampleType::i32, 256, 256, (std::size_t(3) << 18) + 5, 0, false},
      {SampleType::u8, 1000, 32, (std::size_t(1) << 22) + 3, 3, false},  // > 48 KB of smem
      {SampleType::u8, 7, 1024, 12345, 5, false},
      {SampleType::i32, 1, 96, 65537, 1, false},  // misaligned i32; partial last warp
      {SampleType::i32, 64, 0, std::size_t(1) << 20, 4, true},
      {SampleType::u8, 256, 64, 999999, 0, false},
      first,
  };

  int ran = 0;
  for (const KernelEntry* e : lesson_kernels()) {
    if (e == &histeq::kernels::kCooperative && !coop) continue;  // Cooperative.* covers that
    SCOPED_TRACE(e->name);
    const LaunchShape first_shape = shape_of(*e, first.n, first.type, first.bins, first.block);
    const std::vector<std::uint8_t> first_host = sequence_input(first, 1);
    const DeviceBuffer<std::uint8_t> first_dev = upload(first_host, first.offset_bytes);

    std::uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (const SequenceCase& c : sequence) {
      SCOPED_TRACE(describe_case(c));
      ASSERT_EQ(e->unsupported(c.type, c.bins), nullptr);
      const std::vector<std::uint8_t> host = sequence_input(c, seed += 0x1234567);
      const DeviceBuffer<std::uint8_t> d = upload(host, c.offset_bytes);
      const Histogram want = histeq::cpu::histogram(host.data(), c.n, c.type, c.bins);
      // A block size whose per-thread layout does not fit in shared memory (e.g. perthread,
      // i32, 256 bins × 256 threads = 256 KB) is refused by shape and launch alike.
      bool refused = false;
      try {
        shape_of(*e, c.n, c.type, c.bins, c.block);
      } catch (const histeq::UsageError&) {
        refused = true;
      }
      if (refused) {
        EXPECT_THROW(run_kernel(*e, d.get() + c.offset_bytes, c.n, c.type, c.bins, c.block),
                     histeq::UsageError);
        ++ran;
        continue;
      }
      EXPECT_EQ(run_kernel(*e, d.get() + c.offset_bytes, c.n, c.type, c.bins, c.block), want);
      // The shape of a call is a function of the call alone.
      EXPECT_TRUE(same_shape(shape_of(*e, c.n, c.type, c.bins, c.block),
                             shape_of(*e, c.n, c.type, c.bins, c.block)));
      ++ran;
    }

    // The first configuration again, on its original buffer, after everything else.
    const Histogram again = run_kernel(*e, first_dev.get() + first.offset_bytes, first.n,
                                       first.type, first.bins, first.block);
    Histogram want(std::size_t(first.bins), 0);
    want[std::size_t(200 * first.bins / 256)] = first.n;
    EXPECT_EQ(again, want);
    EXPECT_EQ(again, histeq::cpu::histogram(first_host.data(), first.n, first.type, first.bins));
    EXPECT_TRUE(same_shape(shape_of(*e, first.n, first.type, first.bins, first.block), first_shape))
        << "the launch shape of the first configuration changed after the sequence";
  }
  EXPECT_GE(ran, 3 * int(sequence.size()));
}

}  // namespace
