// test_kernels.cpp — every registry kernel against the CPU reference (histeq::cpu::histogram).
//
// The sweep: one test per (kernel, sample type, bins) — u8 with 16/64/256 bins, i32 with
// 16/64/256/4096 — looping over the distributions (uniform, hot, blocky, constant, sequential)
// and sizes (0, 1, 255, 256, 257, a prime, 2^20, 2^24). Inputs and CPU references are generated
// once per (type, bins) and shared by all kernels (the tests run in that order). Exact kernels
// must equal the reference bin for bin; a non-exact kernel (racy) only what a race allows: every
// bin ≤ exact, non-zero exactly where the exact bin is, sum ≤ n.
// Also: misaligned input pointers, i32 values outside [0, bins), unusual bin counts, block-size
// overrides, d_hist overwritten (every run poisons it with 0xFF first), n == 0 with a null input,
// the launch shape, and the registry's name lookup.
//
// Nothing here touches CUDA before a test body runs (parameter generators read only the plain
// registry table), so --gtest_list_tests works without a GPU; GPU tests skip with the reason.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_support.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/synthetic.hpp"
#include "histeq/types.hpp"
#include "histogram/contract.hpp"
#include "histogram/policy.hpp"
#include "histogram/registry.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"
#include "test_support.hpp"

namespace {

using histeq::DeviceBuffer;
using histeq::Distribution;
using histeq::Histogram;
using histeq::SampleType;
using histeq::Stream;
using histeq::kernels::HistogramLaunch;
using histeq::kernels::KernelEntry;
using histeq::kernels::LaunchShape;
using histeq::test::run_kernel;

const char* type_name(SampleType t) { return t == SampleType::u8 ? "u8" : "i32"; }

// ---------------------------------------------------------------------------------------------
// Running a kernel and checking its result.
// ---------------------------------------------------------------------------------------------

/// Exact kernels: equal bin for bin. Non-exact: got[b] ≤ ref[b], got[b] == 0 ⇔ ref[b] == 0
/// (every racy store writes a value ≥ 1 read back + 1), Σ got ≤ n.
testing::AssertionResult matches(const KernelEntry& e, const Histogram& got, const Histogram& ref,
                                 std::size_t n) {
  if (got.size() != ref.size()) {
    return testing::AssertionFailure() << "size " << got.size() << " != " << ref.size();
  }
  std::ostringstream bad;
  int nbad = 0;
  for (std::size_t b = 0; b < ref.size(); ++b) {
    const bool ok =
        e.exact ? got[b] == ref[b] : got[b] <= ref[b] && ((got[b] == 0) == (ref[b] == 0));
    if (!ok && nbad++ < 6) bad << " bin " << b << ": got " << got[b] << ", cpu " << ref[b] << ";";
  }
  const std::uint64_t sum = std::accumulate(got.begin(), got.end(), std::uint64_t(0));
  if (!e.exact && sum > n) {
    return testing::AssertionFailure() << "sum " << sum << " > n = " << n;
  }
  if (nbad > 0) {
    return testing::AssertionFailure() << nbad << " of " << ref.size() << " bins wrong"
                                       << (e.exact ? "" : " (race bounds)") << ":" << bad.str();
  }
  return testing::AssertionSuccess();
}

/// Uploads host bytes into a new device buffer (complete before return).
DeviceBuffer<std::uint8_t> upload(const std::vector<std::uint8_t>& host) {
  return histeq::test::upload_bytes(host);
}

// ---------------------------------------------------------------------------------------------
// The sweep's inputs: generated, uploaded and counted on the CPU once per (type, bins).
// ---------------------------------------------------------------------------------------------

const std::vector<Distribution>& sweep_distributions() {
  static const std::vector<Distribution> d = {Distribution::uniform, Distribution::hot,
                                              Distribution::blocky, Distribution::constant,
                                              Distribution::sequential};
  return d;
}

const std::vector<std::size_t>& sweep_sizes() {
  // 65543 and 300007: multi-block grids of the columns kernel's small-input shape (≤ 512 KiB).
  static const std::vector<std::size_t> s = {0,     1,      255,     256,      257,
                                             65543, 300007, 1000003, 1u << 20, 1u << 24};
  return s;
}

struct Input {
  DeviceBuffer<std::uint8_t> device;
  Histogram reference;
};

/// Inputs of one (type, bins) at a time; asking for another (type, bins) drops the previous set
/// (the sweep's tests are ordered by (type, bins), so each set is built once).
class InputCache {
 public:
  const Input& get(Distribution dist, SampleType type, int bins, std::size_t n) {
    if (type != type_ || bins != bins_) {
      inputs_.clear();
      type_ = type;
      bins_ = bins;
    }
    auto key = std::make_pair(dist, n);
    auto it = inputs_.find(key);
    if (it == inputs_.end()) {
      histeq::SyntheticSpec spec;
      spec.dist = dist;
      spec.type = type;
      spec.bins = bins;
      spec.n = n;
      spec.seed = 12345 + n;
      std::vector<std::uint8_t> host = histeq::make_samples(spec);
      if (host.size() != n * histeq::sample_bytes(type)) {
        throw histeq::Error("make_samples returned " + std::to_string(host.size()) +
                            " bytes, expected " + std::to_string(n * histeq::sample_bytes(type)));
      }
      Input in{upload(host), histeq::cpu::histogram(host.data(), n, type, bins)};
      it = inputs_.emplace(key, std::move(in)).first;
    }
    return it->second;
  }
  void clear() {
    inputs_.clear();
    bins_ = 0;
  }

 private:
  SampleType type_ = SampleType::u8;
  int bins_ = 0;
  std::map<std::pair<Distribution, std::size_t>, Input> inputs_;
};

InputCache& input_cache() {
  static InputCache cache;
  return cache;
}

// ---------------------------------------------------------------------------------------------
// Parameters (plain data from the registry table; no CUDA).
// ---------------------------------------------------------------------------------------------

struct SweepCase {
  const KernelEntry* entry;
  SampleType type;
  int bins;
};

std::vector<SweepCase> sweep_cases() {
  const std::vector<std::pair<SampleType, int>> configs = {
      {SampleType::u8, 16},  {SampleType::u8, 64},   {SampleType::u8, 256},  {SampleType::i32, 16},
      {SampleType::i32, 64}, {SampleType::i32, 256}, {SampleType::i32, 4096}};
  std::vector<SweepCase> cases;
  for (const auto& [type, bins] : configs) {  // (type, bins) outermost: the cache builds once
    for (const KernelEntry& e : histeq::kernels::registry()) cases.push_back({&e, type, bins});
  }
  return cases;
}

void PrintTo(const SweepCase& c, std::ostream* os) {
  *os << c.entry->name << " " << type_name(c.type) << " " << c.bins << " bins";
}

std::string sweep_name(const testing::TestParamInfo<SweepCase>& info) {
  return histeq::test::name_safe(std::string(info.param.entry->name) + "_" +
                                 type_name(info.param.type) + "_" +
                                 std::to_string(info.param.bins));
}

// ---------------------------------------------------------------------------------------------
// The sweep.
// ---------------------------------------------------------------------------------------------

class KernelSweep : public testing::TestWithParam<SweepCase> {
 public:
  static void TearDownTestSuite() { input_cache().clear(); }
};

TEST_P(KernelSweep, MatchesCpuReference) {
  HISTEQ_REQUIRE_GPU();
  const SweepCase& c = GetParam();
  if (const char* why = c.entry->unsupported(c.type, c.bins)) GTEST_SKIP() << why;
  for (Distribution dist : sweep_distributions()) {
    for (std::size_t n : sweep_sizes()) {
      SCOPED_TRACE(std::string(histeq::to_string(dist)) + ", n = " + std::to_string(n));
      const Input& in = input_cache().get(dist, c.type, c.bins, n);
      const Histogram got = run_kernel(*c.entry, in.device.get(), n, c.type, c.bins);
      EXPECT_TRUE(matches(*c.entry, got, in.reference, n));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, KernelSweep, testing::ValuesIn(sweep_cases()), sweep_name);

// ---------------------------------------------------------------------------------------------
// Per-kernel properties.
// ---------------------------------------------------------------------------------------------

class KernelProps : public testing::TestWithParam<const KernelEntry*> {};

/// Input pointers at every offset 1..15 (u8: bytes; i32: elements, i.e. 4..60 bytes) with sizes
/// around the 16-byte vector width, so scalar heads, vector bodies and tails all occur.
TEST_P(KernelProps, MisalignedInput) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  const std::size_t total = (std::size_t(1) << 20) + 64;
  for (SampleType type : {SampleType::u8, SampleType::i32}) {
    const int bins = type == SampleType::u8 ? 256 : 64;
    if (e.unsupported(type, bins)) continue;
    for (Distribution dist : {Distribution::uniform, Distribution::blocky}) {
      histeq::SyntheticSpec spec;
      spec.dist = dist;
      spec.type = type;
      spec.bins = bins;
      spec.n = total;
      spec.seed = 7;
      spec.run_length = 13;  // runs that straddle vector boundaries
      const std::vector<std::uint8_t> host = histeq::make_samples(spec);
      const DeviceBuffer<std::uint8_t> d = upload(host);
      const std::size_t sb = histeq::sample_bytes(type);
      for (std::size_t offset = 1; offset <= 15; ++offset) {
        for (std::size_t n :
             {std::size_t(0), std::size_t(1), std::size_t(3), std::size_t(15), std::size_t(16),
              std::size_t(17), std::size_t(33), std::size_t(4097), total - offset}) {
          SCOPED_TRACE(std::string(type_name(type)) + " " + histeq::to_string(dist) + ", offset " +
                       std::to_string(offset) + " samples, n = " + std::to_string(n));
          const std::uint8_t* h_in = host.data() + offset * sb;
          const Histogram ref = histeq::cpu::histogram(h_in, n, type, bins);
          const Histogram got = run_kernel(e, d.get() + offset * sb, n, type, bins);
          EXPECT_TRUE(matches(e, got, ref, n));
        }
      }
    }
  }
}

/// An i32 pointer that is not 4-byte aligned is not an int32_t array: the call is refused with
/// a UsageError instead of faulting on the device.
TEST_P(KernelProps, I32PointerNotFourByteAlignedIsRefused) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  // Only the kernels built on kernels/histogram/common.cuh check this in their launch; for another
  // kernel a misaligned load would be a sticky device fault that ends every later test of the
  // binary.
  const std::vector<std::string> checked = {"racy",      "atomic",     "privatized", "contiguous",
                                            "coarsened", "aggregated", "cub"};
  if (std::find(checked.begin(), checked.end(), e.name) == checked.end()) {
    GTEST_SKIP() << e.name << " does not promise to check i32 alignment";
  }
  if (e.unsupported(SampleType::i32, 64)) GTEST_SKIP() << e.unsupported(SampleType::i32, 64);
  const DeviceBuffer<std::uint8_t> d = upload(std::vector<std::uint8_t>(4 * 1024 + 16, 0));
  for (std::size_t offset : {1, 2, 3, 5}) {
    EXPECT_THROW(run_kernel(e, d.get() + offset, 1024, SampleType::i32, 64), histeq::UsageError)
        << "offset " << offset;
  }
}

/// i32 values outside [0, bins) — negative, bins itself, INT_MIN, INT_MAX — are not counted.
TEST_P(KernelProps, I32OutOfRangeNotCounted) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  for (int bins : {1, 16, 4096}) {
    if (e.unsupported(SampleType::i32, bins)) continue;
    SCOPED_TRACE("bins = " + std::to_string(bins));
    const std::size_t n = (std::size_t(1) << 20) + 13;
    std::vector<std::int32_t> v(n);
    std::mt19937 rng(99);
    std::uniform_int_distribution<std::int32_t> wide(-2 * bins, 2 * bins);
    const std::int32_t special[] = {INT_MIN,  INT_MIN + 1, -bins,    -1,          0,
                                    bins - 1, bins,        bins + 1, INT_MAX - 1, INT_MAX};
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = (i % 5 == 0) ? special[(i / 5) % (sizeof(special) / sizeof(special[0]))] : wide(rng);
    }
    Histogram ref(static_cast<std::size_t>(bins), 0);  // independent of cpu::histogram
    std::size_t in_range = 0;
    for (std::int32_t x : v) {
      if (x >= 0 && x < bins) {
        ++ref[static_cast<std::size_t>(x)];
        ++in_range;
      }
    }
    ASSERT_LT(in_range, n);
    std::vector<std::uint8_t> bytes(n * sizeof(std::int32_t));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    const DeviceBuffer<std::uint8_t> d = upload(bytes);
    EXPECT_TRUE(matches(e, run_kernel(e, d.get(), n, SampleType::i32, bins), ref, in_range));
    EXPECT_EQ(histeq::cpu::histogram(bytes.data(), n, SampleType::i32, bins), ref)
        << "CPU reference disagrees with the plain count";
  }
}

/// Bin counts off the sweep's grid (1, 3, 255, 1000, 4096), both types where supported.
TEST_P(KernelProps, UnusualBinCounts) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  const std::size_t n = (std::size_t(1) << 20) + 5;
  for (SampleType type : {SampleType::u8, SampleType::i32}) {
    for (int bins : {1, 3, 255, 1000, 4096}) {
      if (e.unsupported(type, bins)) continue;
      for (Distribution dist : {Distribution::uniform, Distribution::blocky}) {
        SCOPED_TRACE(std::string(type_name(type)) + ", bins = " + std::to_string(bins) + ", " +
                     histeq::to_string(dist));
        histeq::SyntheticSpec spec;
        spec.dist = dist;
        spec.type = type;
        spec.bins = bins;
        spec.n = n;
        spec.seed = 3;
        const std::vector<std::uint8_t> host = histeq::make_samples(spec);
        const DeviceBuffer<std::uint8_t> d = upload(host);
        const Histogram ref = histeq::cpu::histogram(host.data(), n, type, bins);
        EXPECT_TRUE(matches(e, run_kernel(e, d.get(), n, type, bins), ref, n));
      }
    }
  }
}

/// HistogramLaunch::block_size overrides the tuned default (kernels that report a shape), the
/// result stays right, and an impossible block size is a UsageError.
TEST_P(KernelProps, BlockSizeOverride) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  const std::size_t n = (std::size_t(1) << 20) + 3;
  for (auto [type, bins] : {std::pair{SampleType::u8, 256}, std::pair{SampleType::i32, 4096}}) {
    if (e.unsupported(type, bins)) continue;
    histeq::SyntheticSpec spec;
    spec.type = type;
    spec.bins = bins;
    spec.n = n;
    const std::vector<std::uint8_t> host = histeq::make_samples(spec);
    const DeviceBuffer<std::uint8_t> d = upload(host);
    const Histogram ref = histeq::cpu::histogram(host.data(), n, type, bins);
    // A kernel may refuse a block size its layout cannot take (columns: 256/512/1024 only;
    // per-thread sub-histograms: what fits in shared memory): then shape() and the launch must
    // both refuse it with a UsageError, never run it wrongly.
    HistogramLaunch probe;
    probe.n = n;
    probe.type = type;
    probe.bins = bins;
    auto shape_block = [&](int block) -> int {  // -1: refused
      HistogramLaunch call = probe;
      call.block_size = block;
      try {
        return e.shape(call).block_size;
      } catch (const histeq::UsageError&) {
        return -1;
      }
    };
    // Does the kernel take block_size at all? (cub does not; it reports no shape.)
    const bool honors = shape_block(1024) == 1024 || shape_block(96) == 96;
    int ran = 0;
    for (int block : {32, 96, 256, 512, 1000, 1024}) {
      SCOPED_TRACE(std::string(type_name(type)) + ", block " + std::to_string(block));
      const int got = shape_block(block);
      if (got == -1) {
        EXPECT_THROW(run_kernel(e, d.get(), n, type, bins, block), histeq::UsageError);
        continue;
      }
      if (honors) EXPECT_EQ(got, block);
      EXPECT_TRUE(matches(e, run_kernel(e, d.get(), n, type, bins, block), ref, n));
      ++ran;
    }
    EXPECT_GT(ran, 0) << "the kernel refused every block size";
    if (honors) {  // a kernel that takes block_size must refuse one no GPU can launch
      EXPECT_THROW(run_kernel(e, d.get(), n, type, bins, 4096), histeq::UsageError);
    }
  }
}

/// n == 0 with a null input: d_hist (poisoned) comes back all zero.
TEST_P(KernelProps, EmptyInputZeroesHistogram) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  for (auto [type, bins] : {std::pair{SampleType::u8, 256}, std::pair{SampleType::i32, 4096}}) {
    if (e.unsupported(type, bins)) continue;
    EXPECT_EQ(run_kernel(e, nullptr, 0, type, bins), Histogram(static_cast<std::size_t>(bins), 0))
        << type_name(type);
  }
}

/// The same d_hist used twice gives the same counts (overwritten, not accumulated).
TEST_P(KernelProps, HistogramOverwrittenNotAccumulated) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  if (!e.exact || e.unsupported(SampleType::u8, 64)) GTEST_SKIP() << "exact u8/64 kernels only";
  histeq::SyntheticSpec spec;
  spec.bins = 64;
  spec.n = 100003;
  const std::vector<std::uint8_t> host = histeq::make_samples(spec);
  const DeviceBuffer<std::uint8_t> d = upload(host);
  Stream stream;
  DeviceBuffer<std::uint64_t> d_hist(64);
  DeviceBuffer<std::uint8_t> scratch(e.scratch_bytes(spec.n, 64, SampleType::u8));
  histeq::kernels::prepare_scratch(e, scratch.get(), scratch.bytes(), stream.get());
  HistogramLaunch call;
  call.d_in = d.get();
  call.n = spec.n;
  call.bins = 64;
  call.d_hist = d_hist.get();
  call.d_scratch = scratch.get();
  call.stream = stream.get();
  histeq::kernels::run_histogram(e, call);
  histeq::kernels::run_histogram(e, call);
  Histogram got(64);
  HISTEQ_CUDA_CHECK(cudaMemcpyAsync(got.data(), d_hist.get(), d_hist.bytes(),
                                    cudaMemcpyDeviceToHost, stream.get()));
  stream.sync();
  EXPECT_EQ(got, histeq::cpu::histogram(host.data(), spec.n, SampleType::u8, 64));
}

/// zeroed_scratch kernels (contract.hpp): one scratch buffer, zeroed once, serves a sequence of
/// calls of different sizes (so different grids), types and bin counts; every result is exact
/// and the buffer is all zero again after every call — the last-block ticket wrapped and the
/// accumulator was emptied.
TEST_P(KernelProps, ZeroedScratchIsLeftZero) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  if (!e.zeroed_scratch) GTEST_SKIP() << e.name << " does not use zeroed scratch";
  struct Step {
    SampleType type;
    int bins;
    std::size_t n;
    histeq::Distribution dist;
  };
  const std::vector<Step> steps = {
      {SampleType::u8, 256, std::size_t(1) << 24, histeq::Distribution::uniform},
      {SampleType::u8, 256, 1, histeq::Distribution::uniform},
      {SampleType::u8, 16, 4099, histeq::Distribution::hot},
      {SampleType::u8, 256, (std::size_t(1) << 20) + 7, histeq::Distribution::natural},
      {SampleType::i32, 64, 100003, histeq::Distribution::uniform},
      {SampleType::u8, 256, std::size_t(1) << 24, histeq::Distribution::constant},
  };
  std::size_t bytes = 0;
  for (const Step& st : steps) bytes = std::max(bytes, e.scratch_bytes(st.n, st.bins, st.type));
  ASSERT_GT(bytes, 0u) << "a zeroed_scratch kernel must ask for scratch";
  Stream stream;
  DeviceBuffer<std::uint8_t> scratch(bytes);
  histeq::kernels::prepare_scratch(e, scratch.get(), scratch.bytes(), stream.get());
  DeviceBuffer<std::uint64_t> d_hist{std::size_t(histeq::kMaxBins)};
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Step& st = steps[i];
    if (e.unsupported(st.type, st.bins)) continue;
    SCOPED_TRACE("step " + std::to_string(i));
    histeq::SyntheticSpec spec;
    spec.type = st.type;
    spec.bins = st.bins;
    spec.n = st.n;
    spec.dist = st.dist;
    spec.seed = 7 + i;
    const std::vector<std::uint8_t> host = histeq::make_samples(spec);
    const DeviceBuffer<std::uint8_t> d = upload(host);
    HISTEQ_CUDA_CHECK(cudaMemsetAsync(d_hist.get(), 0xFF, d_hist.bytes(), stream.get()));
    HistogramLaunch call;
    call.d_in = d.get();
    call.n = st.n;
    call.type = st.type;
    call.bins = st.bins;
    call.d_hist = d_hist.get();
    call.d_scratch = scratch.get();
    call.stream = stream.get();
    histeq::kernels::run_histogram(e, call);
    Histogram got(std::size_t(st.bins));
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(got.data(), d_hist.get(), got.size() * 8,
                                      cudaMemcpyDeviceToHost, stream.get()));
    std::vector<std::uint8_t> left(bytes);
    HISTEQ_CUDA_CHECK(
        cudaMemcpyAsync(left.data(), scratch.get(), bytes, cudaMemcpyDeviceToHost, stream.get()));
    stream.sync();
    EXPECT_EQ(got, histeq::cpu::histogram(host.data(), st.n, st.type, st.bins));
    const auto nonzero =
        std::count_if(left.begin(), left.end(), [](std::uint8_t b) { return b != 0; });
    EXPECT_EQ(nonzero, 0) << "scratch bytes not zero after the call";
  }
}

/// The launch shape names a real kernel that can be resident with that block and shared memory.
TEST_P(KernelProps, LaunchShapeIsLaunchable) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = *GetParam();
  for (auto [type, bins] : {std::pair{SampleType::u8, 256}, std::pair{SampleType::i32, 4096}}) {
    if (e.unsupported(type, bins)) continue;
    HistogramLaunch call;
    call.n = std::size_t(1) << 24;
    call.type = type;
    call.bins = bins;
    const LaunchShape s = e.shape(call);
    if (s.kernel == nullptr) continue;  // library kernels (cub) report no shape of their own
    SCOPED_TRACE(type_name(type));
    EXPECT_GT(s.block_size, 0);
    EXPECT_GT(s.grid_size, 0);
    cudaFuncAttributes attr{};
    ASSERT_EQ(cudaFuncGetAttributes(&attr, s.kernel), cudaSuccess);
    EXPECT_LE(s.block_size, attr.maxThreadsPerBlock);
    const std::size_t dynamic =
        s.smem_bytes >= attr.sharedSizeBytes ? s.smem_bytes - attr.sharedSizeBytes : 0;
    int per_sm = 0;
    ASSERT_EQ(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, s.kernel, s.block_size, dynamic),
        cudaSuccess);
    EXPECT_GE(per_sm, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, KernelProps, testing::ValuesIn(histeq::test::registry_entries()),
                         histeq::test::kernel_param_name);

// ---------------------------------------------------------------------------------------------
// The registry (no GPU needed).
// ---------------------------------------------------------------------------------------------

TEST(KernelRegistry, UnknownNameThrowsUsageErrorListingNames) {
  try {
    histeq::kernels::find_kernel("nope");
    FAIL() << "find_kernel(\"nope\") did not throw";
  } catch (const histeq::UsageError& err) {
    const std::string msg = err.what();
    EXPECT_NE(msg.find("nope"), std::string::npos) << msg;
    for (const KernelEntry& e : histeq::kernels::registry()) {
      EXPECT_NE(msg.find(e.name), std::string::npos) << msg << " lacks " << e.name;
    }
  }
}

/// The auto rule (docs/kernels.md, "auto"; thresholds in policy.hpp): coarsened above 256 bins;
/// privatized for few bins and samples (≤ 64 bins, ≤ 64K samples); columns for inputs of at most
/// 512 KiB; coarsened for fewer bins (u8 < 256, i32 ≤ 64) below 12M (u8) / 4M (i32) samples;
/// columns otherwise. The sizes listed sit on both sides of each threshold. Always an exact kernel
/// that supports the call. No GPU needed.
TEST(KernelRegistry, AutoChoosesBySizeAndBins) {
  using histeq::kernels::ColumnsPolicy;
  for (SampleType t : {SampleType::u8, SampleType::i32}) {
    for (int bins : {1, 16, 64, 65, 255, 256, 257, 1024, 4096}) {
      for (std::size_t n :
           {std::size_t(0), std::size_t(1000), std::size_t(65536), std::size_t(65537),
            std::size_t(131072), std::size_t(131073), std::size_t(524288), std::size_t(524289),
            std::size_t(1) << 20, (std::size_t(4) << 20) - 1, std::size_t(4) << 20,
            std::size_t(8) << 20, (std::size_t(12) << 20) - 1, std::size_t(12) << 20,
            std::size_t(1) << 30}) {
        HistogramLaunch call;
        call.n = n;
        call.type = t;
        call.bins = bins;
        const KernelEntry& e = histeq::kernels::choose_auto(call);
        SCOPED_TRACE(std::string(type_name(t)) + " bins " + std::to_string(bins) + " n " +
                     std::to_string(n));
        EXPECT_TRUE(e.exact);
        EXPECT_EQ(e.unsupported(t, bins), nullptr);
        const std::size_t bytes = n * (t == SampleType::u8 ? 1 : 4);
        const bool few = t == SampleType::u8 ? bins < 256 : bins <= 64;
        const bool below_fold = n < (t == SampleType::u8 ? histeq::kernels::kAutoFoldMinSamplesU8
                                                         : histeq::kernels::kAutoFoldMinSamplesI32);
        const char* want = "columns";
        if (bins > 256)
          want = "coarsened";
        else if (bins <= histeq::kernels::kAutoPrivatizedMaxBins &&
                 n <= histeq::kernels::kAutoPrivatizedMaxSamples)
          want = "privatized";
        else if (bytes <= ColumnsPolicy::kSmallInputBytes)
          want = "columns";
        else if (few && below_fold)
          want = "coarsened";
        EXPECT_STREQ(e.name, want);
      }
    }
  }
}

/// The same rule as fixed rows, written out by hand (not derived from the constants), so that a
/// change of a threshold in policy.hpp shows up here as a deliberate edit.
TEST(KernelRegistry, AutoChoiceFixedRows) {
  struct Row {
    SampleType type;
    int bins;
    std::size_t n;
    const char* kernel;
  };
  const Row rows[] = {
      {SampleType::u8, 256, 1000, "columns"},        {SampleType::u8, 64, 1000, "privatized"},
      {SampleType::u8, 16, 65536, "privatized"},     {SampleType::u8, 16, 65537, "columns"},
      {SampleType::u8, 64, 524288, "columns"},       {SampleType::u8, 64, 524289, "coarsened"},
      {SampleType::u8, 255, 65536, "columns"},       {SampleType::u8, 255, 1 << 20, "coarsened"},
      {SampleType::u8, 16, 12 << 20, "columns"},     {SampleType::u8, 256, 1 << 30, "columns"},
      {SampleType::u8, 257, 1000, "coarsened"},      {SampleType::i32, 64, 65536, "privatized"},
      {SampleType::i32, 64, 131072, "columns"},      {SampleType::i32, 64, 131073, "coarsened"},
      {SampleType::i32, 65, 1 << 20, "columns"},     {SampleType::i32, 16, 4 << 20, "columns"},
      {SampleType::i32, 4096, 1 << 24, "coarsened"},
  };
  for (const Row& r : rows) {
    HistogramLaunch call;
    call.n = r.n;
    call.type = r.type;
    call.bins = r.bins;
    EXPECT_STREQ(histeq::kernels::choose_auto(call).name, r.kernel)
        << type_name(r.type) << " bins " << r.bins << " n " << r.n;
  }
}

/// columns' launch shape (policy.hpp, ColumnsPolicy): inputs of at most kSmallInputBytes get
/// kSmallBlockSize threads per block and a grid of one block per kSmallBlockSize ×
/// kSmallVectorsInFlight vectors, unless the caller asks for a block size; larger inputs get
/// the default block.
TEST(KernelRegistry, ColumnsShapeSmallInputsGetSmallerBlocks) {
  HISTEQ_REQUIRE_GPU();
  using P = histeq::kernels::ColumnsPolicy;
  const KernelEntry& e = histeq::kernels::find_kernel("columns");
  ASSERT_NE(e.shape, nullptr);
  struct Case {
    SampleType type;
    std::size_t n;
    int ask;
    int block;
    std::size_t grid;
  };
  const std::size_t small_u8 = P::kSmallInputBytes, small_i32 = P::kSmallInputBytes / 4;
  const std::size_t per_small_u8 = std::size_t(P::kSmallBlockSize) * P::kSmallVectorsInFlight * 16;
  const std::size_t per_small_i32 = std::size_t(P::kSmallBlockSize) * P::kSmallVectorsInFlight * 4;
  for (const Case& c :
       {Case{SampleType::u8, 65536, 0, P::kSmallBlockSize, 65536 / per_small_u8},
        Case{SampleType::u8, small_u8, 0, P::kSmallBlockSize, small_u8 / per_small_u8},
        Case{SampleType::i32, small_i32, 0, P::kSmallBlockSize, small_i32 / per_small_i32},
        Case{SampleType::u8, 65536, 256, 256, 0},
        Case{SampleType::u8, small_u8 + 1, 0, P::kBlockSize, 0},
        Case{SampleType::i32, small_i32 + 1, 0, P::kBlockSize, 0},
        Case{SampleType::u8, std::size_t(1) << 24, 0, P::kBlockSize, 0}}) {
    HistogramLaunch call;
    call.n = c.n;
    call.type = c.type;
    call.bins = 256;
    call.block_size = c.ask;
    const LaunchShape s = e.shape(call);
    SCOPED_TRACE(std::string(type_name(c.type)) + " n " + std::to_string(c.n) + " block asked " +
                 std::to_string(c.ask));
    EXPECT_EQ(s.block_size, c.block);
    if (c.grid) {
      EXPECT_EQ(std::size_t(s.grid_size), c.grid);
    }
  }
}

/// Kernels whose entry sets zeroed_scratch ask for scratch (the state lives there).
TEST(KernelRegistry, ZeroedScratchKernelsAskForScratch) {
  for (const KernelEntry& e : histeq::kernels::registry()) {
    if (!e.zeroed_scratch) continue;
    EXPECT_GT(e.scratch_bytes(1, 256, SampleType::u8), 0u) << e.name;
    EXPECT_EQ(e.scratch_bytes(1, 256, SampleType::u8),
              e.scratch_bytes(std::size_t(1) << 32, 256, SampleType::u8))
        << e.name << ": the state does not grow with n";
  }
}

TEST(KernelRegistry, ClassicKernelsPresentWithSaneEntries) {
  const auto& reg = histeq::kernels::registry();
  for (const char* name :
       {"racy", "atomic", "privatized", "contiguous", "coarsened", "aggregated", "cub"}) {
    const KernelEntry& e = histeq::kernels::find_kernel(name);
    EXPECT_STREQ(e.name, name);
    EXPECT_EQ(e.exact, std::string(name) != "racy") << name;
    EXPECT_EQ(e.unsupported(SampleType::u8, 256), nullptr) << name;
    EXPECT_EQ(e.unsupported(SampleType::i32, 4096), nullptr) << name;
    EXPECT_NE(e.unsupported(SampleType::i32, histeq::kMaxBins + 1), nullptr) << name;
  }
  std::vector<std::string> names;
  for (const KernelEntry& e : reg) {
    ASSERT_NE(e.name, nullptr);
    const std::string n = e.name;
    EXPECT_FALSE(n.empty());
    for (char c : n)
      EXPECT_TRUE(std::islower(static_cast<unsigned char>(c)) ||
                  std::isdigit(static_cast<unsigned char>(c)) || c == '_')
          << n;
    EXPECT_TRUE(e.summary != nullptr && std::strlen(e.summary) > 0) << n;
    EXPECT_TRUE(e.unsupported && e.scratch_bytes && e.launch && e.shape) << n;
    names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << "duplicate names";
}

}  // namespace
