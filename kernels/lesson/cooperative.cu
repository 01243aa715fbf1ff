// cooperative — one cooperative launch: per-thread sub-histograms as in perthread, each block
//   writes its per-bin totals to a partial histogram in global memory, a grid-wide barrier
//   (cooperative_groups::this_grid().sync()), then blocks reduce the partials per bin into d_hist.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment.
// Out: d_hist[0,bins) uint64, overwritten (written after the barrier; zeroed when n == 0).
//      Scratch: lesson_max_grid(n) · bins · 4 bytes (uint32 partials[grid][bins]; 0 when n == 0).
//      Async on `stream`; no host sync.
// Exact: yes. Supports: u8 and i32, bins 1..1816 (bins × 32 threads × 4 B ≤ 227 KB of shared
//      memory), on devices with cudaDevAttrCooperativeLaunch: elsewhere launch() throws
//      UsageError naming the device and the missing attribute (unsupported() cannot know the
//      device; `histeq kernels --details` shows the grid it would use). Tuning: block =
//      perthread_default_block(bins) or call.block_size (32..1024); grid =
//      cooperative_grid_size() from cudaOccupancyMaxActiveBlocksPerMultiprocessor × SM count, so
//      the launch never asks for more blocks than can be resident.
// Source: the int-array lesson (count, grid-wide sync with cooperative groups, reduce); CUDA
//      Programming Guide, "Cooperative Groups: grid synchronization".
//
// Builds without relocatable device code (CUDA_SEPARABLE_COMPILATION OFF): grid.sync() needs
// -rdc only before CUDA 11. All blocks must be resident at once for the barrier; that is what
// cudaLaunchCooperativeKernel guarantees and what the grid-sizing rule keeps possible.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "histeq/error.hpp"
#include "histogram/contract.hpp"
#include "lesson/lesson.hpp"
#include "lesson/lesson_common.cuh"
#include "support/cuda_check.hpp"

namespace histeq::kernels {

int cooperative_grid_size(int sm_count, int blocks_per_sm, std::size_t n, int block) {
  if (sm_count < 1 || blocks_per_sm < 1 || block < 1) {
    throw Error("kernel 'cooperative': no block of " + std::to_string(block) +
                " threads can be resident (sm_count " + std::to_string(sm_count) +
                ", blocks per SM " + std::to_string(blocks_per_sm) +
                "), so a cooperative launch is impossible");
  }
  const std::size_t resident = std::size_t(sm_count) * std::size_t(blocks_per_sm);
  const std::size_t per_block = std::size_t(block) * kLessonSamplesPerThread;
  const std::size_t work = n / per_block + (n % per_block != 0);
  const std::size_t g = std::min({resident, work, std::size_t(kLessonMaxGrid)});
  return int(std::max<std::size_t>(g, 1));
}

namespace {

namespace cg = cooperative_groups;

constexpr int kCooperativeMaxBins = int(kLessonSmemPerBlockLimit / (32 * 4));

template <SampleType T>
__global__ void __launch_bounds__(1024)
    cooperative_kernel(const void* d_in, std::size_t n, int bins, std::uint32_t* partials,
                       std::uint64_t* d_hist) {
  extern __shared__ __align__(16) unsigned char cooperative_smem[];
  auto* counters = reinterpret_cast<std::uint32_t*>(cooperative_smem);  // [bins][blockDim.x]
  lesson_detail::count_per_thread<T>(d_in, n, bins, counters);
  std::uint32_t* row = partials + std::size_t(blockIdx.x) * bins;
  lesson_detail::reduce_rows(counters, bins, blockDim.x,
                             [&](int bin, std::uint32_t s) { row[bin] = s; });

  // Every block's partials are written and visible to the whole grid after this barrier; the
  // block's counters are dead, so their shared memory holds the reduction's warp sums.
  cg::this_grid().sync();
  lesson_detail::reduce_partials(partials, gridDim.x, bins, d_hist,
                                 reinterpret_cast<unsigned long long*>(cooperative_smem));
}

struct Config {
  const void* kernel;
  int block;
  int grid;
  std::size_t smem;
};

Config cooperative_config(const HistogramLaunch& c) {
  Config cfg;
  cfg.kernel = c.type == SampleType::u8
                   ? reinterpret_cast<const void*>(&cooperative_kernel<SampleType::u8>)
                   : reinterpret_cast<const void*>(&cooperative_kernel<SampleType::i32>);
  cfg.block =
      lesson_detail::checked_block("cooperative", c.block_size, perthread_default_block(c.bins));
  // The counters, or the 32 uint64 warp sums of the final reduction if that is more.
  cfg.smem = std::max<std::size_t>(std::size_t(c.bins) * std::size_t(cfg.block) * 4,
                                   32 * sizeof(unsigned long long));
  const int bps = lesson_detail::blocks_per_sm("cooperative", cfg.kernel, cfg.block, cfg.smem);
  cfg.grid =
      cooperative_grid_size(lesson_detail::current_device_limits().sm_count, bps, c.n, cfg.block);
  return cfg;
}

const char* cooperative_unsupported(SampleType, int bins) {
  if (bins < 1) return "bins must be at least 1";
  if (bins > kCooperativeMaxBins) {
    return "per-thread uint32 sub-histograms need bins x threads x 4 bytes of shared memory; "
           "more than 1816 bins exceed 227 KB even with one warp (32 threads) per block";
  }
  return nullptr;
}

std::size_t cooperative_scratch(std::size_t n, int bins, SampleType) {
  if (n == 0) return 0;
  return std::size_t(lesson_max_grid(n)) * std::size_t(bins) * sizeof(std::uint32_t);
}

void cooperative_launch(const HistogramLaunch& c) {
  const lesson_detail::DeviceLimits lim = lesson_detail::current_device_limits();
  if (!lim.cooperative) {
    throw UsageError("kernel 'cooperative' needs a cooperative launch, which CUDA device " +
                     std::to_string(lim.device) +
                     " does not offer (cudaDevAttrCooperativeLaunch is 0); choose another "
                     "kernel, e.g. tworeduce");
  }
  const Config cfg = cooperative_config(c);
  if (c.n == 0) {
    HISTEQ_CUDA_CHECK(
        cudaMemsetAsync(c.d_hist, 0, std::size_t(c.bins) * sizeof(std::uint64_t), c.stream));
    return;
  }
  // uint32 partials: no block may count more than kLessonMaxBlockShare samples. Only a device
  // with very few resident blocks and an input far beyond its memory could get here.
  if (c.n / std::size_t(cfg.grid) >= kLessonMaxBlockShare) {
    throw Error("kernel 'cooperative': " + std::to_string(c.n) + " samples over " +
                std::to_string(cfg.grid) +
                " resident blocks would overflow its 32-bit per-block counts; use tworeduce");
  }
  const void* in = c.d_in;
  std::size_t n = c.n;
  int bins = c.bins;
  auto* partials = static_cast<std::uint32_t*>(c.d_scratch);
  std::uint64_t* hist = c.d_hist;
  void* args[] = {&in, &n, &bins, &partials, &hist};
  HISTEQ_CUDA_CHECK(cudaLaunchCooperativeKernel(cfg.kernel, dim3(cfg.grid), dim3(cfg.block), args,
                                                cfg.smem, c.stream));
}

LaunchShape cooperative_shape(const HistogramLaunch& c) {
  const Config cfg = cooperative_config(c);
  return LaunchShape{cfg.kernel, cfg.block, cfg.grid, cfg.smem};
}

}  // namespace

const KernelEntry kCooperative = {
    "cooperative",
    "one cooperative launch: per-thread sub-histograms, partials to global memory, grid.sync(), "
    "per-bin reduction; grid limited to the blocks that can be resident at once",
    true,
    cooperative_unsupported,
    cooperative_scratch,
    cooperative_launch,
    cooperative_shape,
};

}  // namespace histeq::kernels
