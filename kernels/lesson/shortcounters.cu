// shortcounters — the CUDA samples' histogram64 design: per-thread 8-bit counters packed four
//   to a 32-bit word in shared memory, flushed into the block's uint32 histogram (also shared
//   memory) before any counter could wrap, then merged with one global atomicAdd per bin.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment.
// Out: d_hist[0,bins) uint64, overwritten (zeroed with cudaMemsetAsync on the stream first).
//      Scratch: none. Async on `stream`; no host sync.
// Exact: yes. Supports: u8 and i32, bins 1..1760 (bins × (128 + 4) bytes ≤ 227 KB of shared
//      memory). Tuning: block kShortcountersBlock (128) or call.block_size (32..1024; rows are
//      padded to a multiple of 128 bytes); flush every kShortcountersFlushInterval (255) samples
//      per thread; grid = lesson_grid_size(). Source: histogram64 in NVIDIA's cuda-samples
//      (Podlozhnyuk, "Histogram calculation in CUDA", 2007: 8-bit per-thread counters,
//      thread-position permutation); the int-array lesson's "short counters" variant.
//
// Layout: counter of thread t for bin b is byte b · W + pos(t), W = B rounded up to 128, with
// pos(t) = (t & ~127) | (t mod 32) · 4 | (t mod 128) / 32: the 32 threads of a warp own byte k of
// 32 consecutive words, so they always touch 32 different banks. A quarter of perthread's shared
// memory per thread: 64 bins × 128 threads = 8 KB, so 16 blocks (2048 threads) fit on an SM.
// Counting is a byte read-modify-write, no atomics. Every thread counts at most 255 samples
// between flushes (the loop bound is per block, so all threads flush together); a flush sums each
// bin's bytes (one warp per bin, conflict-free) into the uint32 block histogram and clears them.
#include <cuda_runtime.h>

#include <cstdint>

#include "histeq/error.hpp"
#include "histogram/contract.hpp"
#include "lesson/lesson.hpp"
#include "lesson/lesson_common.cuh"
#include "support/cuda_check.hpp"

namespace histeq::kernels {
namespace {

constexpr int kShortcountersBlock = 128;
constexpr int kShortcountersMaxBins = int(kLessonSmemPerBlockLimit / (128 + 4));
static_assert(kShortcountersMaxBins == 1760, "update the reason string and docs/kernels.md");
static_assert(kShortcountersFlushInterval <= 255, "8-bit counters hold at most 255");

/// Row width in bytes of the 8-bit counters for `block` threads: the permutation works on
/// groups of 128 threads, so rows are padded to a multiple of 128 bytes.
__host__ __device__ constexpr int counter_row_bytes(int block) { return (block + 127) / 128 * 128; }

/// Adds every thread's 8-bit counters into block_hist and clears them. counters: bins rows of
/// `words` 32-bit words (a multiple of 32). One full warp per bin; lane j takes words j, j + 32,
/// ... of the row (a partial last warp of the block stays idle).
__device__ __forceinline__ void flush_counters(std::uint32_t* counter_words,
                                               std::uint32_t* block_hist, int bins, int words) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = blockDim.x >> 5;
  if (warp >= nwarps) return;
  for (int b = warp; b < bins; b += nwarps) {
    std::uint32_t* row = counter_words + std::size_t(b) * words;
    std::uint32_t s = 0;
    for (int j = lane; j < words; j += 32) {
      const std::uint32_t w = row[j];
      row[j] = 0;
      const std::uint32_t pairs = (w & 0x00FF00FFu) + ((w >> 8) & 0x00FF00FFu);  // 2 × 16 bit
      s += (pairs & 0xFFFFu) + (pairs >> 16);
    }
    s = __reduce_add_sync(0xFFFFFFFFu, s);
    if (lane == 0) block_hist[b] += s;
  }
}

template <SampleType T>
__global__ void __launch_bounds__(1024)
    shortcounters_kernel(const void* d_in, std::size_t n, int bins, unsigned long long* d_hist) {
  extern __shared__ __align__(16) unsigned char shortcounters_smem[];
  auto* block_hist = reinterpret_cast<std::uint32_t*>(shortcounters_smem);  // [bins]
  std::uint8_t* counters = shortcounters_smem + std::size_t(bins) * 4;      // [bins][W] bytes
  auto* counter_words = reinterpret_cast<std::uint32_t*>(counters);
  const int B = blockDim.x;
  const int W = counter_row_bytes(B);
  const int t = threadIdx.x;

  const int total_words = bins + bins * (W / 4);
  auto* all_words = reinterpret_cast<std::uint32_t*>(shortcounters_smem);
  for (int i = t; i < total_words; i += B) all_words[i] = 0;
  __syncthreads();

  const int pos = (t & ~127) | ((t & 31) << 2) | ((t & 127) >> 5);
  std::uint8_t* mine = counters + pos;
  auto sink = [&](unsigned bin) { mine[bin * W] += 1; };
  auto flush = [&]() {
    __syncthreads();
    flush_counters(counter_words, block_hist, bins, W / 4);
    __syncthreads();
  };
  lesson_detail::visit_samples<T, kShortcountersFlushInterval>(d_in, n, bins, sink, flush);
  flush();

  for (int b = t; b < bins; b += B) {
    const std::uint32_t s = block_hist[b];
    if (s != 0) atomicAdd(d_hist + b, static_cast<unsigned long long>(s));
  }
}

struct Config {
  const void* kernel;
  int block;
  int grid;
  std::size_t smem;
};

Config shortcounters_config(const HistogramLaunch& c) {
  Config cfg;
  cfg.kernel = c.type == SampleType::u8
                   ? reinterpret_cast<const void*>(&shortcounters_kernel<SampleType::u8>)
                   : reinterpret_cast<const void*>(&shortcounters_kernel<SampleType::i32>);
  cfg.block = lesson_detail::checked_block("shortcounters", c.block_size, kShortcountersBlock);
  cfg.smem = std::size_t(c.bins) * (4 + std::size_t(counter_row_bytes(cfg.block)));
  const int bps = lesson_detail::blocks_per_sm("shortcounters", cfg.kernel, cfg.block, cfg.smem);
  if (bps < 1) {
    throw UsageError("kernel 'shortcounters': a block of " + std::to_string(cfg.block) +
                     " threads with " + std::to_string(cfg.smem) +
                     " bytes of shared memory does not fit on an SM of this device");
  }
  cfg.grid = lesson_grid_size(lesson_detail::current_device_limits().sm_count, bps, c.n, cfg.block);
  return cfg;
}

const char* shortcounters_unsupported(SampleType, int bins) {
  if (bins < 1) return "bins must be at least 1";
  if (bins > kShortcountersMaxBins) {
    return "8-bit per-thread counters plus a uint32 block histogram need bins x (threads + 4) "
           "bytes of shared memory; more than 1760 bins exceed 227 KB with 128 threads per block";
  }
  return nullptr;
}

std::size_t shortcounters_scratch(std::size_t, int, SampleType) { return 0; }

void shortcounters_launch(const HistogramLaunch& c) {
  const Config cfg = shortcounters_config(c);
  HISTEQ_CUDA_CHECK(
      cudaMemsetAsync(c.d_hist, 0, std::size_t(c.bins) * sizeof(std::uint64_t), c.stream));
  if (c.n == 0) return;
  auto* hist = reinterpret_cast<unsigned long long*>(c.d_hist);
  if (c.type == SampleType::u8) {
    shortcounters_kernel<SampleType::u8>
        <<<cfg.grid, cfg.block, cfg.smem, c.stream>>>(c.d_in, c.n, c.bins, hist);
  } else {
    shortcounters_kernel<SampleType::i32>
        <<<cfg.grid, cfg.block, cfg.smem, c.stream>>>(c.d_in, c.n, c.bins, hist);
  }
  HISTEQ_CUDA_CHECK_LAUNCH();
}

LaunchShape shortcounters_shape(const HistogramLaunch& c) {
  const Config cfg = shortcounters_config(c);
  return LaunchShape{cfg.kernel, cfg.block, cfg.grid, cfg.smem};
}

}  // namespace

const KernelEntry kShortcounters = {
    "shortcounters",
    "CUDA samples' histogram64: per-thread 8-bit counters (4 per word, conflict-free), flushed "
    "every 255 samples into a uint32 block histogram; a quarter of perthread's shared memory",
    true,
    shortcounters_unsupported,
    shortcounters_scratch,
    shortcounters_launch,
    shortcounters_shape,
};

}  // namespace histeq::kernels
