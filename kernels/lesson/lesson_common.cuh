// lesson_common.cuh — pieces shared by the int-array lesson's kernels (perthread.cu,
// tworeduce.cu, cooperative.cu, shortcounters.cu): the sample walk (alignment, head/tail,
// vector loads, periodic flushes), the per-bin reductions, and the cached device queries the
// launch configuration needs. Internal to those four files.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "histeq/error.hpp"
#include "histogram/contract.hpp"
#include "lesson/lesson.hpp"
#include "support/cuda_check.hpp"

namespace histeq::kernels::lesson_detail {

// ------------------------------------------------------------------------------------------
// Device side
// ------------------------------------------------------------------------------------------

/// The u8 binning rule of types.hpp: sample v → bin (v · bins) / 256.
__device__ __forceinline__ unsigned u8_bin(unsigned v, unsigned bins) { return (v * bins) >> 8; }

template <typename Sink>
__device__ __forceinline__ void count_u8_word(unsigned w, unsigned bins, Sink& sink) {
  sink(u8_bin(w & 0xFFu, bins));
  sink(u8_bin((w >> 8) & 0xFFu, bins));
  sink(u8_bin((w >> 16) & 0xFFu, bins));
  sink(u8_bin(w >> 24, bins));
}

template <typename Sink>
__device__ __forceinline__ void count_i32(int v, unsigned bins, Sink& sink) {
  if (unsigned(v) < bins) sink(unsigned(v));  // negative v wraps to a huge unsigned: not counted
}

/// Walks d_in[0, n) over the whole grid and calls sink(bin) for every counted sample this thread
/// holds. Works for any n (0 included) and any alignment of d_in: the bytes before the first
/// 16-byte boundary (head) and after the last whole vector (tail) are read one sample at a time,
/// at most one head and one tail sample per thread; the rest is read as uint4 / int4 vectors,
/// block b taking vectors [b·B, b·B + B), then [b·B + G·B, ...) (grid-stride by blocks). An i32
/// array that is not even 4-byte aligned is read with byte loads.
///
/// Needs blockDim.x ≥ 16 (head and tail).
/// kFlushEvery > 0: calls flush() — every thread of the block, the same number of times, since
/// the loop bounds depend only on blockIdx — so that no thread counts more than kFlushEvery
/// samples between two flushes (the final flush is the caller's). kFlushEvery must be ≥ 2 + the
/// samples per vector (16 for u8).
template <SampleType T, int kFlushEvery, typename Sink, typename Flush>
__device__ __forceinline__ void visit_samples(const void* d_in, std::size_t n, int bins, Sink& sink,
                                              Flush& flush) {
  const unsigned ubins = unsigned(bins);
  const std::size_t B = blockDim.x;
  const std::size_t gtid = std::size_t(blockIdx.x) * B + threadIdx.x;
  const std::size_t grid_threads = std::size_t(gridDim.x) * B;
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(d_in);
  int pending = 0;  // samples any thread may have counted since the last flush (block-uniform)

  // The body: vectors [0, nvec) of `spv` samples each; load(i) counts vector i.
  auto body = [&](std::size_t nvec, int spv, auto&& load) {
    for (std::size_t base = std::size_t(blockIdx.x) * B; base < nvec; base += grid_threads) {
      if constexpr (kFlushEvery > 0) {
        if (pending + spv > kFlushEvery) {
          flush();
          pending = 0;
        }
      }
      const std::size_t i = base + threadIdx.x;
      if (i < nvec) load(i);
      pending += spv;
    }
  };

  if constexpr (T == SampleType::u8) {
    const auto* p = static_cast<const std::uint8_t*>(d_in);
    std::size_t head = (16 - (addr & 15)) & 15;
    if (head > n) head = n;
    const std::size_t nvec = (n - head) / 16;
    const std::size_t tail = head + nvec * 16;
    if (gtid < head) sink(u8_bin(p[gtid], ubins));
    if (gtid < n - tail) sink(u8_bin(p[tail + gtid], ubins));
    pending = 2;
    const uint4* v = reinterpret_cast<const uint4*>(p + head);
    body(nvec, 16, [&](std::size_t i) {
      const uint4 q = __ldg(v + i);
      count_u8_word(q.x, ubins, sink);
      count_u8_word(q.y, ubins, sink);
      count_u8_word(q.z, ubins, sink);
      count_u8_word(q.w, ubins, sink);
    });
  } else if ((addr & 3) == 0) {
    const auto* p = static_cast<const std::int32_t*>(d_in);
    std::size_t head = ((16 - (addr & 15)) & 15) / 4;
    if (head > n) head = n;
    const std::size_t nvec = (n - head) / 4;
    const std::size_t tail = head + nvec * 4;
    if (gtid < head) count_i32(p[gtid], ubins, sink);
    if (gtid < n - tail) count_i32(p[tail + gtid], ubins, sink);
    pending = 2;
    const int4* v = reinterpret_cast<const int4*>(p + head);
    body(nvec, 4, [&](std::size_t i) {
      const int4 q = __ldg(v + i);
      count_i32(q.x, ubins, sink);
      count_i32(q.y, ubins, sink);
      count_i32(q.z, ubins, sink);
      count_i32(q.w, ubins, sink);
    });
  } else {
    // int32 samples at an address that is not a multiple of 4: assemble each from its bytes
    // (little-endian, as the host wrote them).
    const auto* p = static_cast<const std::uint8_t*>(d_in);
    body(n, 1, [&](std::size_t i) {
      const std::uint8_t* s = p + 4 * i;
      const unsigned w =
          unsigned(s[0]) | (unsigned(s[1]) << 8) | (unsigned(s[2]) << 16) | (unsigned(s[3]) << 24);
      count_i32(int(w), ubins, sink);
    });
  }
}

/// A flush that does nothing (designs whose counters cannot overflow).
struct NoFlush {
  __device__ void operator()() const {}
};

/// The per-thread sub-histogram count of perthread, tworeduce and cooperative: zeroes
/// counters[bins][blockDim.x] (uint32, shared memory), counts this thread's samples into
/// counters[bin · blockDim.x + threadIdx.x] — a warp's threads hit 32 different banks, and no
/// atomics are needed — and ends with __syncthreads(), ready for reduce_rows().
template <SampleType T>
__device__ __forceinline__ void count_per_thread(const void* d_in, std::size_t n, int bins,
                                                 std::uint32_t* counters) {
  const int B = blockDim.x;
  for (int i = threadIdx.x; i < bins * B; i += B) counters[i] = 0;
  __syncthreads();
  std::uint32_t* mine = counters + threadIdx.x;
  auto sink = [&](unsigned bin) { mine[bin * B] += 1; };
  NoFlush flush;
  visit_samples<T, 0>(d_in, n, bins, sink, flush);
  __syncthreads();
}

/// Per-bin sums of a bins × width matrix of uint32 counters in shared memory (row b = bin b,
/// column = thread: the per-thread sub-histogram layout). One warp per bin; the warp's lanes read
/// consecutive words (no bank conflicts) and __reduce_add_sync combines them. out(b, sum) is
/// called by lane 0 of the warp that owns bin b. Only the blockDim.x / 32 full warps take part
/// (a block size that is not a multiple of 32 leaves its last, partial warp idle here); needs
/// blockDim.x ≥ 32.
template <typename Out>
__device__ __forceinline__ void reduce_rows(const std::uint32_t* rows, int bins, int width,
                                            Out&& out) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = blockDim.x >> 5;
  if (warp >= nwarps) return;
  for (int b = warp; b < bins; b += nwarps) {
    const std::uint32_t* row = rows + std::size_t(b) * width;
    std::uint32_t s = 0;
    for (int j = lane; j < width; j += 32) s += row[j];
    s = __reduce_add_sync(0xFFFFFFFFu, s);
    if (lane == 0) out(b, s);
  }
}

/// d_hist[b] = Σ_k partials[k · bins + b] over k in [0, rows), for bins b = blockIdx.x,
/// blockIdx.x + gridDim.x, ...: one block per bin, threads striding over the rows (L2 reads,
/// since other SMs wrote the partials), a warp-shuffle and shared-memory reduction in uint64.
/// warp_sums: 32 uint64 of shared memory. Overwrites d_hist (no atomics).
__device__ __forceinline__ void reduce_partials(const std::uint32_t* partials, int rows, int bins,
                                                std::uint64_t* d_hist,
                                                unsigned long long* warp_sums) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = blockDim.x >> 5;  // full warps only; a partial last warp just waits
  const bool in_full_warp = warp < nwarps;
  for (int b = blockIdx.x; b < bins; b += gridDim.x) {
    if (in_full_warp) {
      unsigned long long s = 0;
      for (int k = threadIdx.x; k < rows; k += nwarps * 32) {
        s += __ldcg(partials + std::size_t(k) * bins + b);
      }
      for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xFFFFFFFFu, s, off);
      if (lane == 0) warp_sums[warp] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long total = 0;
      for (int w = 0; w < nwarps; ++w) total += warp_sums[w];
      d_hist[b] = total;
    }
    __syncthreads();
  }
}

// ------------------------------------------------------------------------------------------
// Host side
// ------------------------------------------------------------------------------------------

/// What the launch configuration needs to know about the current device (queried once per
/// device; cudaDeviceGetAttribute only).
struct DeviceLimits {
  int device = -1;
  int sm_count = 0;
  int smem_per_block_optin = 0;  ///< cudaDevAttrMaxSharedMemoryPerBlockOptin, bytes
  bool cooperative = false;      ///< cudaDevAttrCooperativeLaunch
};

inline DeviceLimits current_device_limits() {
  static std::mutex mu;
  static std::vector<DeviceLimits> cache;
  int dev = 0;
  HISTEQ_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  for (const DeviceLimits& d : cache) {
    if (d.device == dev) return d;
  }
  DeviceLimits d;
  d.device = dev;
  int coop = 0;
  HISTEQ_CUDA_CHECK(cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, dev));
  HISTEQ_CUDA_CHECK(cudaDeviceGetAttribute(&d.smem_per_block_optin,
                                           cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  HISTEQ_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
  d.cooperative = coop != 0;
  cache.push_back(d);
  return d;
}

/// Resident blocks per SM of `kernel` with `block` threads and `dyn_smem` bytes of dynamic
/// shared memory (cudaOccupancyMaxActiveBlocksPerMultiprocessor), cached per (device, kernel,
/// block, dyn_smem): every input of the query is in the key, so no configuration can be served
/// another's answer. Throws UsageError when dyn_smem exceeds the device's per-block limit (`who`
/// names the kernel in the message).
///
/// Side effect, on every call (cache hit or not): when dyn_smem is above the 48 KB that needs no
/// opt-in, it (re)raises the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize to what the
/// device allows, so that the layout can be both measured and launched whatever happened to the
/// attribute since the first query (describe() in details.cu sets it too, a device reset clears
/// it). The attribute only bounds the launch's dynamic shared memory; it changes neither the
/// kernel's results nor the occupancy of a given (block, dyn_smem).
inline int blocks_per_sm(const char* who, const void* kernel, int block, std::size_t dyn_smem) {
  struct Entry {
    int device;
    const void* kernel;
    int block;
    std::size_t smem;
    int result;
    int max_dynamic;  ///< opt-in limit minus the kernel's static shared memory, bytes
  };
  static std::mutex mu;
  static std::vector<Entry> cache;
  const DeviceLimits lim = current_device_limits();
  if (dyn_smem > std::size_t(lim.smem_per_block_optin)) {
    throw UsageError(std::string("kernel '") + who + "' needs " + std::to_string(dyn_smem) +
                     " bytes of shared memory per block with " + std::to_string(block) +
                     " threads; this device allows " + std::to_string(lim.smem_per_block_optin) +
                     " (use fewer bins, a smaller block size, or another kernel)");
  }
  // Dynamic shared memory a kernel may use without the opt-in attribute (48 KB, less its static
  // shared memory: the lesson kernels have none, so 48 KB exactly).
  constexpr std::size_t kNoOptinDynamic = 48 * 1024;
  std::lock_guard<std::mutex> lock(mu);
  for (const Entry& k : cache) {
    if (k.device == lim.device && k.kernel == kernel && k.block == block && k.smem == dyn_smem) {
      if (dyn_smem > kNoOptinDynamic) {
        HISTEQ_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               k.max_dynamic));
      }
      return k.result;
    }
  }
  cudaFuncAttributes attr{};
  HISTEQ_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  const int allowed = lim.smem_per_block_optin - int(attr.sharedSizeBytes);
  if (dyn_smem > std::size_t(allowed)) {
    throw UsageError(std::string("kernel '") + who + "' needs " + std::to_string(dyn_smem) +
                     " bytes of dynamic shared memory per block with " + std::to_string(block) +
                     " threads besides its " + std::to_string(attr.sharedSizeBytes) +
                     " static bytes; this device allows " +
                     std::to_string(lim.smem_per_block_optin) + " in all");
  }
  if (attr.maxDynamicSharedSizeBytes < allowed) {
    HISTEQ_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, allowed));
  }
  int bps = 0;
  HISTEQ_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kernel, block, dyn_smem));
  cache.push_back(Entry{lim.device, kernel, block, dyn_smem, bps, allowed});
  return bps;
}

/// The block size of a call: `deflt` when requested is 0, else `requested`, which must be in
/// [32, 1024] (UsageError otherwise). Any size works; multiples of 32 keep the layouts free of
/// bank conflicts.
inline int checked_block(const char* who, int requested, int deflt) {
  if (requested == 0) return deflt;
  if (requested < 32 || requested > 1024) {
    throw UsageError(std::string("kernel '") + who + "': block size must be in 32..1024, got " +
                     std::to_string(requested));
  }
  return requested;
}

}  // namespace histeq::kernels::lesson_detail
