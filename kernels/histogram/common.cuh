// common.cuh — device and host helpers shared by the classic histogram kernels (racy, atomic,
// privatized, coarsened, aggregated, cub, columns, contiguous); support/device.hpp has the
// device queries every family shares:
//   * bin_of: the binning rule of types.hpp / contract.hpp, on the device;
//   * the per-block shared-memory uint32 histogram: zero it, merge it into the uint64 global one
//     with one atomicAdd per non-zero bin (privatization, PMPP 4th ed. ch. 9.4);
//   * a grid-stride traversal with 16-byte loads and a scalar head/tail for any alignment
//     (coarsening with interleaved partitioning, PMPP 9.5–9.6);
//   * host-side checks of a call, zeroing of d_hist, block and grid sizing.
// Everything is inline or a template: each kernel file includes this header.
#pragma once
#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "histeq/error.hpp"
#include "histeq/types.hpp"
#include "histogram/contract.hpp"
#include "histogram/policy.hpp"
#include "support/cuda_check.hpp"
#include "support/device.hpp"

namespace histeq::kernels::detail {

static_assert(sizeof(std::uint64_t) == sizeof(unsigned long long),
              "d_hist is passed to atomicAdd as unsigned long long");

// ---------------------------------------------------------------------------------------------
// Binning (types.hpp): u8 v → (v·bins)/256; i32 v → v when 0 ≤ v < bins, else not counted.
// ---------------------------------------------------------------------------------------------

/// Returned by bin_of for a sample that is not counted (i32 outside [0, bins)).
inline constexpr int kNotCounted = -1;

/// u8 sample → bin (v·bins)/256, in 0..bins-1 for bins in 1..kMaxBins (v·bins < 2^20).
__device__ __forceinline__ int bin_of(std::uint8_t v, int bins) {
  return int((unsigned(v) * unsigned(bins)) >> 8);
}

/// i32 sample → bin v when 0 ≤ v < bins, else kNotCounted (one unsigned compare covers v < 0).
__device__ __forceinline__ int bin_of(std::int32_t v, int bins) {
  return unsigned(v) < unsigned(bins) ? int(v) : kNotCounted;
}

// ---------------------------------------------------------------------------------------------
// The per-block shared-memory histogram (uint32 counters, `bins` of them, dynamic shared memory).
// ---------------------------------------------------------------------------------------------

/// Zeroes s_hist[0, bins) cooperatively, then __syncthreads(). Every thread of the block calls it.
__device__ __forceinline__ void shared_histogram_zero(std::uint32_t* s_hist, int bins) {
  for (int b = int(threadIdx.x); b < bins; b += int(blockDim.x)) s_hist[b] = 0;
  __syncthreads();
}

/// Counts one sample's bin (kNotCounted is skipped) with a shared-memory atomic.
__device__ __forceinline__ void shared_histogram_add(std::uint32_t* s_hist, int bin,
                                                     std::uint32_t count = 1) {
  if (bin != kNotCounted) atomicAdd(&s_hist[bin], count);
}

/// __syncthreads(), then adds s_hist[0, bins) into d_hist with one global atomicAdd per non-zero
/// bin. Every thread of the block calls it.
__device__ __forceinline__ void shared_histogram_merge(const std::uint32_t* s_hist, int bins,
                                                       unsigned long long* d_hist) {
  __syncthreads();
  for (int b = int(threadIdx.x); b < bins; b += int(blockDim.x)) {
    const std::uint32_t c = s_hist[b];
    if (c != 0) atomicAdd(&d_hist[b], static_cast<unsigned long long>(c));
  }
}

// ---------------------------------------------------------------------------------------------
// Grid-stride traversal with 16-byte loads (coarsening, interleaved partitioning).
// ---------------------------------------------------------------------------------------------

/// Calls visit(sample) for each sample of a 16-byte vector, in memory order (little endian).
template <typename Visit>
__device__ __forceinline__ void visit_vector(const uint4& v, std::uint8_t*, Visit& visit) {
  const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
#pragma unroll
    for (int k = 0; k < 4; ++k) visit(static_cast<std::uint8_t>(words[w] >> (8 * k)));
  }
}
template <typename Visit>
__device__ __forceinline__ void visit_vector(const uint4& v, std::int32_t*, Visit& visit) {
  visit(static_cast<std::int32_t>(v.x));
  visit(static_cast<std::int32_t>(v.y));
  visit(static_cast<std::int32_t>(v.z));
  visit(static_cast<std::int32_t>(v.w));
}

/// Visits every sample of in[0, n) exactly once across the grid; each thread sees its samples
/// in increasing address order: at most one head sample (before the first 16-byte boundary),
/// then its 16-byte vectors (vector i goes to thread i mod gridDim·blockDim: consecutive threads
/// read consecutive vectors, so each warp load is coalesced), kVectorsInFlight loads issued
/// before any is visited, then at most one tail sample. `in` must be aligned to sizeof(T); any
/// other alignment is fine. visit(T sample) is called per sample.
template <typename T, int kVectorsInFlight, typename Visit>
__device__ __forceinline__ void for_each_sample_vectorized(const T* in, std::size_t n,
                                                           Visit& visit) {
  constexpr std::size_t kPerVector = CommonPolicy::kVectorBytes / sizeof(T);
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t nthreads = std::size_t(gridDim.x) * blockDim.x;

  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(in);
  const std::size_t misalign = addr % CommonPolicy::kVectorBytes;
  std::size_t head = misalign == 0 ? 0 : (CommonPolicy::kVectorBytes - misalign) / sizeof(T);
  if (head > n) head = n;
  const std::size_t nvec = (n - head) / kPerVector;
  const std::size_t tail_begin = head + nvec * kPerVector;

  for (std::size_t i = tid; i < head; i += nthreads) visit(in[i]);

  const uint4* vin = reinterpret_cast<const uint4*>(in + head);
  for (std::size_t base = tid; base < nvec; base += nthreads * kVectorsInFlight) {
    uint4 v[kVectorsInFlight];
#pragma unroll
    for (int u = 0; u < kVectorsInFlight; ++u) {
      const std::size_t i = base + std::size_t(u) * nthreads;
      if (i < nvec) v[u] = __ldg(&vin[i]);
    }
#pragma unroll
    for (int u = 0; u < kVectorsInFlight; ++u) {
      const std::size_t i = base + std::size_t(u) * nthreads;
      if (i < nvec) visit_vector(v[u], static_cast<T*>(nullptr), visit);
    }
  }

  for (std::size_t i = tail_begin + tid; i < n; i += nthreads) visit(in[i]);
}

// ---------------------------------------------------------------------------------------------
// Host side.
// ---------------------------------------------------------------------------------------------

/// The call's block size, or `policy_default` when it is 0. Throws UsageError outside
/// 1..CommonPolicy::kMaxBlockSize.
inline int resolve_block_size(const HistogramLaunch& call, int policy_default) {
  const int b = call.block_size == 0 ? policy_default : call.block_size;
  if (b < 1 || b > CommonPolicy::kMaxBlockSize) {
    throw UsageError("block size must be 1.." + std::to_string(CommonPolicy::kMaxBlockSize) +
                     " (0: the kernel's default), got " + std::to_string(call.block_size));
  }
  return b;
}

/// Checks what the registry's run_histogram does not: pointers present, i32 input aligned to 4
/// bytes (an int32_t array; a byte-offset i32 pointer cannot be loaded on the GPU). Throws
/// UsageError naming the problem.
inline void check_call(const HistogramLaunch& call, const char* kernel) {
  const std::string who = std::string("kernel '") + kernel + "': ";
  if (call.d_hist == nullptr) throw UsageError(who + "d_hist is null");
  if (call.n > 0 && call.d_in == nullptr) {
    throw UsageError(who + "d_in is null with n = " + std::to_string(call.n));
  }
  if (call.type == SampleType::i32 &&
      reinterpret_cast<std::uintptr_t>(call.d_in) % alignof(std::int32_t) != 0) {
    throw UsageError(who + "i32 samples must be 4-byte aligned (an int32_t array)");
  }
}

/// d_hist[0, bins) = 0, async on the call's stream.
inline void zero_histogram(const HistogramLaunch& call) {
  HISTEQ_CUDA_CHECK(
      cudaMemsetAsync(call.d_hist, 0, std::size_t(call.bins) * sizeof(std::uint64_t), call.stream));
}

inline unsigned long long* global_histogram(const HistogramLaunch& call) {
  return reinterpret_cast<unsigned long long*>(call.d_hist);
}

/// `wanted` blocks, raised so that no block counts more than kMaxSamplesPerBlock of n samples
/// (uint32 shared counters), and kept in 1..INT_MAX (the grid's x limit is 2^31 − 1).
inline int clamp_grid(std::size_t wanted, std::size_t n) {
  std::size_t g = wanted;
  const std::size_t floor_blocks = ceil_div(n, CommonPolicy::kMaxSamplesPerBlock);
  if (g < floor_blocks) g = floor_blocks;
  if (g < 1) g = 1;
  if (g > std::size_t(INT_MAX)) g = std::size_t(INT_MAX);
  return int(g);
}

/// KernelEntry::unsupported for a kernel that serves both sample types and every bin count of
/// the contract (1..kMaxBins).
inline const char* supports_all(SampleType, int bins) {
  return bins < 1 || bins > kMaxBins ? "bins must be 1..4096 (kMaxBins)" : nullptr;
}

/// KernelEntry::scratch_bytes for a kernel that needs no scratch memory.
inline std::size_t no_scratch(std::size_t, int, SampleType) { return 0; }

/// The kernel of a two-type template family for the call's sample type.
template <typename KernelU8, typename KernelI32>
inline const void* pick(SampleType type, KernelU8 u8, KernelI32 i32) {
  return type == SampleType::u8 ? reinterpret_cast<const void*>(u8)
                                : reinterpret_cast<const void*>(i32);
}

/// The launch of the one-pass kernels whose signature is (const T* in, size_t n, int bins,
/// unsigned long long* hist) and which add into a zeroed d_hist (racy, atomic, privatized,
/// coarsened, aggregated): checks the call, zeroes d_hist, then, for n > 0, launches
/// shape(call).kernel — the instantiation for call.type that the shape picked — as
/// grid_size × block_size threads with smem_bytes of dynamic shared memory on call.stream.
inline void launch_with_shape(const HistogramLaunch& call, const char* name,
                              LaunchShape (*shape)(const HistogramLaunch&)) {
  check_call(call, name);
  zero_histogram(call);
  if (call.n == 0) return;
  const LaunchShape s = shape(call);
  const void* in = call.d_in;
  std::size_t n = call.n;
  int bins = call.bins;
  unsigned long long* hist = global_histogram(call);
  void* args[] = {&in, &n, &bins, &hist};
  HISTEQ_CUDA_CHECK(cudaLaunchKernel(s.kernel, dim3(unsigned(s.grid_size)),
                                     dim3(unsigned(s.block_size)), args, s.smem_bytes,
                                     call.stream));
}

}  // namespace histeq::kernels::detail
