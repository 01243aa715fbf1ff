// perthread — a private uint32 sub-histogram per thread in shared memory; no atomics while
//   counting; a per-bin reduction in the block; one global atomicAdd per bin per block.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment.
// Out: d_hist[0,bins) uint64, overwritten (zeroed with cudaMemsetAsync on the stream first).
//      Scratch: none. Async on `stream`; no host sync.
// Exact: yes. Supports: u8 and i32, bins 1..1816 (bins × 32 threads × 4 B ≤ 227 KB of shared
//      memory). Tuning: block = perthread_default_block(bins) (128 threads for ≤ 96 bins), or
//      call.block_size (32..1024); grid = lesson_grid_size() (one full wave, capped by the
//      work). Source: the int-array lesson (per-thread sub-histograms, 64 bins); the bin-major,
//      thread-fastest layout as in the CUDA samples' histogram64 (NVIDIA cuda-samples).
//
// Layout: counters[bin · blockDim + tid]. A warp's 32 threads always touch 32 different banks
// (bank = tid mod 32 whatever the bins), so counting has neither atomics nor bank conflicts. The
// price is bins · blockDim · 4 bytes of shared memory per block — 32 KB for 64 bins × 128 threads
// — which caps the resident blocks per SM (docs/kernels.md works out the H200's numbers).
// Counters are uint32 and a block never counts more than kLessonMaxBlockShare (2^31) samples,
// so neither a thread's counter nor a block's per-bin sum can overflow.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "histeq/error.hpp"
#include "histogram/contract.hpp"
#include "lesson/lesson.hpp"
#include "lesson/lesson_common.cuh"
#include "support/cuda_check.hpp"

namespace histeq::kernels {

// ---- the grid and block rules shared by the lesson kernels (declared in lesson.hpp) ----

namespace {
std::size_t ceil_div(std::size_t a, std::size_t b) { return a / b + (a % b != 0); }
}  // namespace

int lesson_grid_size(int sm_count, int blocks_per_sm, std::size_t n, int block) {
  if (sm_count < 1 || blocks_per_sm < 1 || block < 1) {
    throw Error("lesson kernel grid: need sm_count, blocks_per_sm and block ≥ 1 (got " +
                std::to_string(sm_count) + ", " + std::to_string(blocks_per_sm) + ", " +
                std::to_string(block) + ")");
  }
  const std::size_t wave = std::size_t(sm_count) * std::size_t(blocks_per_sm);
  const std::size_t work = ceil_div(n, std::size_t(block) * kLessonSamplesPerThread);
  std::size_t g = std::min({wave, work, std::size_t(kLessonMaxGrid)});
  g = std::max({g, ceil_div(n, kLessonMaxBlockShare), std::size_t(1)});
  return int(std::min<std::size_t>(g, 0x7FFFFFFF));
}

int lesson_max_grid(std::size_t n) {
  const std::size_t work = ceil_div(n, 32 * kLessonSamplesPerThread);  // smallest block: 32
  std::size_t g = std::min(work, std::size_t(kLessonMaxGrid));
  g = std::max({g, ceil_div(n, kLessonMaxBlockShare), std::size_t(1)});
  return int(std::min<std::size_t>(g, 0x7FFFFFFF));
}

int perthread_default_block(int bins) {
  for (int b : {128, 64}) {
    if (std::size_t(bins) * std::size_t(b) * 4 <= 48 * 1024) return b;
  }
  return 32;
}

namespace {

constexpr int kPerthreadMaxBins = int(kLessonSmemPerBlockLimit / (32 * 4));
static_assert(kPerthreadMaxBins == 1816, "update the reason string and docs/kernels.md");

template <SampleType T>
__global__ void __launch_bounds__(1024)
    perthread_kernel(const void* d_in, std::size_t n, int bins, unsigned long long* d_hist) {
  extern __shared__ __align__(16) unsigned char perthread_smem[];
  auto* counters = reinterpret_cast<std::uint32_t*>(perthread_smem);  // [bins][blockDim.x]
  lesson_detail::count_per_thread<T>(d_in, n, bins, counters);
  lesson_detail::reduce_rows(counters, bins, blockDim.x, [&](int bin, std::uint32_t s) {
    if (s != 0) atomicAdd(d_hist + bin, static_cast<unsigned long long>(s));
  });
}

struct Config {
  const void* kernel;
  int block;
  int grid;
  std::size_t smem;
};

Config perthread_config(const HistogramLaunch& c) {
  Config cfg;
  cfg.kernel = c.type == SampleType::u8
                   ? reinterpret_cast<const void*>(&perthread_kernel<SampleType::u8>)
                   : reinterpret_cast<const void*>(&perthread_kernel<SampleType::i32>);
  cfg.block =
      lesson_detail::checked_block("perthread", c.block_size, perthread_default_block(c.bins));
  cfg.smem = std::size_t(c.bins) * std::size_t(cfg.block) * 4;
  const int bps = lesson_detail::blocks_per_sm("perthread", cfg.kernel, cfg.block, cfg.smem);
  if (bps < 1) {
    throw UsageError("kernel 'perthread': a block of " + std::to_string(cfg.block) +
                     " threads with " + std::to_string(cfg.smem) +
                     " bytes of shared memory does not fit on an SM of this device");
  }
  cfg.grid = lesson_grid_size(lesson_detail::current_device_limits().sm_count, bps, c.n, cfg.block);
  return cfg;
}

const char* perthread_unsupported(SampleType, int bins) {
  if (bins < 1) return "bins must be at least 1";
  if (bins > kPerthreadMaxBins) {
    return "per-thread uint32 sub-histograms need bins x threads x 4 bytes of shared memory; "
           "more than 1816 bins exceed 227 KB even with one warp (32 threads) per block";
  }
  return nullptr;
}

std::size_t perthread_scratch(std::size_t, int, SampleType) { return 0; }

void perthread_launch(const HistogramLaunch& c) {
  const Config cfg = perthread_config(c);
  HISTEQ_CUDA_CHECK(
      cudaMemsetAsync(c.d_hist, 0, std::size_t(c.bins) * sizeof(std::uint64_t), c.stream));
  if (c.n == 0) return;
  auto* hist = reinterpret_cast<unsigned long long*>(c.d_hist);
  if (c.type == SampleType::u8) {
    perthread_kernel<SampleType::u8>
        <<<cfg.grid, cfg.block, cfg.smem, c.stream>>>(c.d_in, c.n, c.bins, hist);
  } else {
    perthread_kernel<SampleType::i32>
        <<<cfg.grid, cfg.block, cfg.smem, c.stream>>>(c.d_in, c.n, c.bins, hist);
  }
  HISTEQ_CUDA_CHECK_LAUNCH();
}

LaunchShape perthread_shape(const HistogramLaunch& c) {
  const Config cfg = perthread_config(c);
  return LaunchShape{cfg.kernel, cfg.block, cfg.grid, cfg.smem};
}

}  // namespace

const KernelEntry kPerthread = {
    "perthread",
    "per-thread uint32 sub-histograms in shared memory (bin-major, conflict-free), no atomics "
    "while counting; bins x threads x 4 B of shared memory per block caps occupancy",
    true,
    perthread_unsupported,
    perthread_scratch,
    perthread_launch,
    perthread_shape,
};

}  // namespace histeq::kernels
