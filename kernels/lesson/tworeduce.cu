// tworeduce — per-thread sub-histograms as in perthread, but each block writes its per-bin
//   totals to a partial histogram in global memory (no global atomics at all); a second kernel
//   reduces the partials per bin into d_hist.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment.
// Out: d_hist[0,bins) uint64, overwritten (written by the reduce kernel; zeroed when n == 0).
//      Scratch: lesson_max_grid(n) · bins · 4 bytes (uint32 partials[grid][bins]; 0 when n == 0).
//      Async on `stream` (two kernels in stream order); no host sync.
// Exact: yes. Supports: u8 and i32, bins 1..1816 (bins × 32 threads × 4 B ≤ 227 KB of shared
//      memory). Tuning: count block = perthread_default_block(bins) or call.block_size
//      (32..1024); grid = lesson_grid_size(); reduce block kTworeduceReduceBlock, one block per
//      bin.
// Source: the int-array lesson (partial histograms reduced by a second kernel); the CUDA samples'
//      histogram64 (NVIDIA cuda-samples: partial histograms, then mergeHistogram64Kernel).
//
// The counting kernel's block b writes partials[b · bins + bin] (every bin, zeros included), so
// the scratch needs no clearing. The reduce kernel reads column `bin` of partials[grid][bins]
// with one block per bin and a uint64 block reduction, and writes d_hist[bin]. The second
// launch costs a kernel boundary (a few µs) and grid · bins · 4 bytes of L2 traffic, but no
// atomics; docs/kernels.md compares it with perthread's grid · bins global atomics.
#include <cuda_runtime.h>

#include <cstdint>

#include "histeq/error.hpp"
#include "histogram/contract.hpp"
#include "lesson/lesson.hpp"
#include "lesson/lesson_common.cuh"
#include "support/cuda_check.hpp"

namespace histeq::kernels {
namespace {

constexpr int kTworeduceMaxBins = int(kLessonSmemPerBlockLimit / (32 * 4));
constexpr int kTworeduceReduceBlock = 256;

template <SampleType T>
__global__ void __launch_bounds__(1024)
    tworeduce_count(const void* d_in, std::size_t n, int bins, std::uint32_t* partials) {
  extern __shared__ __align__(16) unsigned char tworeduce_smem[];
  auto* counters = reinterpret_cast<std::uint32_t*>(tworeduce_smem);  // [bins][blockDim.x]
  lesson_detail::count_per_thread<T>(d_in, n, bins, counters);
  std::uint32_t* row = partials + std::size_t(blockIdx.x) * bins;
  lesson_detail::reduce_rows(counters, bins, blockDim.x,
                             [&](int bin, std::uint32_t s) { row[bin] = s; });
}

__global__ void __launch_bounds__(kTworeduceReduceBlock)
    tworeduce_reduce(const std::uint32_t* partials, int rows, int bins, std::uint64_t* d_hist) {
  __shared__ unsigned long long warp_sums[32];
  lesson_detail::reduce_partials(partials, rows, bins, d_hist, warp_sums);
}

struct Config {
  const void* kernel;
  int block;
  int grid;
  std::size_t smem;
};

Config tworeduce_config(const HistogramLaunch& c) {
  Config cfg;
  cfg.kernel = c.type == SampleType::u8
                   ? reinterpret_cast<const void*>(&tworeduce_count<SampleType::u8>)
                   : reinterpret_cast<const void*>(&tworeduce_count<SampleType::i32>);
  cfg.block =
      lesson_detail::checked_block("tworeduce", c.block_size, perthread_default_block(c.bins));
  cfg.smem = std::size_t(c.bins) * std::size_t(cfg.block) * 4;
  const int bps = lesson_detail::blocks_per_sm("tworeduce", cfg.kernel, cfg.block, cfg.smem);
  if (bps < 1) {
    throw UsageError("kernel 'tworeduce': a block of " + std::to_string(cfg.block) +
                     " threads with " + std::to_string(cfg.smem) +
                     " bytes of shared memory does not fit on an SM of this device");
  }
  cfg.grid = lesson_grid_size(lesson_detail::current_device_limits().sm_count, bps, c.n, cfg.block);
  return cfg;
}

const char* tworeduce_unsupported(SampleType, int bins) {
  if (bins < 1) return "bins must be at least 1";
  if (bins > kTworeduceMaxBins) {
    return "per-thread uint32 sub-histograms need bins x threads x 4 bytes of shared memory; "
           "more than 1816 bins exceed 227 KB even with one warp (32 threads) per block";
  }
  return nullptr;
}

std::size_t tworeduce_scratch(std::size_t n, int bins, SampleType) {
  if (n == 0) return 0;
  return std::size_t(lesson_max_grid(n)) * std::size_t(bins) * sizeof(std::uint32_t);
}

void tworeduce_launch(const HistogramLaunch& c) {
  const Config cfg = tworeduce_config(c);
  if (c.n == 0) {
    HISTEQ_CUDA_CHECK(
        cudaMemsetAsync(c.d_hist, 0, std::size_t(c.bins) * sizeof(std::uint64_t), c.stream));
    return;
  }
  if (cfg.grid > lesson_max_grid(c.n)) {  // cannot happen: lesson_grid_size ≤ lesson_max_grid
    throw Error("kernel 'tworeduce': grid of " + std::to_string(cfg.grid) +
                " blocks exceeds its scratch bound");
  }
  auto* partials = static_cast<std::uint32_t*>(c.d_scratch);
  if (c.type == SampleType::u8) {
    tworeduce_count<SampleType::u8>
        <<<cfg.grid, cfg.block, cfg.smem, c.stream>>>(c.d_in, c.n, c.bins, partials);
  } else {
    tworeduce_count<SampleType::i32>
        <<<cfg.grid, cfg.block, cfg.smem, c.stream>>>(c.d_in, c.n, c.bins, partials);
  }
  HISTEQ_CUDA_CHECK_LAUNCH();
  tworeduce_reduce<<<c.bins, kTworeduceReduceBlock, 0, c.stream>>>(partials, cfg.grid, c.bins,
                                                                   c.d_hist);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

LaunchShape tworeduce_shape(const HistogramLaunch& c) {
  const Config cfg = tworeduce_config(c);
  return LaunchShape{cfg.kernel, cfg.block, cfg.grid, cfg.smem};
}

}  // namespace

const KernelEntry kTworeduce = {
    "tworeduce",
    "per-thread sub-histograms; blocks write uint32 partial histograms to global memory (no "
    "atomics) and a second kernel sums them per bin",
    true,
    tworeduce_unsupported,
    tworeduce_scratch,
    tworeduce_launch,
    tworeduce_shape,
};

}  // namespace histeq::kernels
