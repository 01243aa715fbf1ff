// hist_u16_packed — the 65536-bin histogram of 16-bit samples with ONE block per SM holding all
// 65536 counters: 16-bit counters packed two to a 32-bit shared word (128 KiB), then the
// per-block partial histograms summed by a second kernel.
// In:  d_in[0,n) u16, 2-byte aligned. Out: d_hist[0,65536) uint64, counts ADDED (the caller
//      zeroes). Scratch: d_partials, hist_u16_scratch_words() uint32. Async; no host sync.
// Exact: yes. Word i holds bin i (low half) and bin i + 32768 (high half), so neighbouring
//      values (smooth images) fall in neighbouring banks. A 16-bit half is kept below 2^15 + 2^15:
//      the one atomicAdd whose returned half is 0x7FFF (the add that takes it to 0x8000)
//      subtracts 0x8000 from that half at once and adds 32768 to the global bin. Between those
//      two instructions of one thread the half would need 32768 more increments to carry into
//      the neighbour, i.e. 32768 serialized shared atomics on one address while one warp waits
//      for one dependent instruction: the detection fires exactly once per crossing, and the
//      counts are exact.
// Why it is fast: the input is read once with 16-byte loads, kPackedVectorsInFlight per thread
//      in flight (the loads, not the atomics, set the pace); each sample costs one shared
//      atomic with no remote (DSMEM) traffic, and the counters of a block never leave the SM
//      until the end: 128 KiB of partials per block (16.5 MiB for 132 SMs, L2-resident), summed
//      column-wise by 32 warps per 32 words (coalesced).
// Tuning: HistU16Policy::kPacked* (policy.hpp; HISTEQ_HIST16, HISTEQ_HIST16_VIF in
//      clahe_tuning.hpp). Measured: docs/kernels.md, "hist_u16". Source: privatization, PMPP
//      4th ed. ch. 9; the sub-word counters with a spill to a wider level are this file's.
#include <cuda_runtime.h>

#include <algorithm>

#include "clahe_tuning.hpp"
#include "common.cuh"
#include "cuda_check.hpp"
#include "hist_u16.hpp"
#include "policy.hpp"

namespace histeq::kernels {
namespace {
using P = HistU16Policy;
constexpr int kWords = 32768;

__device__ __forceinline__ void count_packed(std::uint32_t* s, unsigned v,
                                             unsigned long long* hist) {
  const unsigned word = v & 0x7FFFu;
  const bool high = (v & 0x8000u) != 0;
  const unsigned inc = high ? 0x10000u : 1u;
  const unsigned old = atomicAdd(s + word, inc);
  const unsigned half = high ? (old >> 16) : (old & 0xFFFFu);
  if (half == 0x7FFFu) {
    atomicSub(s + word, inc << 15);
    atomicAdd(hist + v, 32768ull);
  }
}

__device__ __forceinline__ void count_vector(std::uint32_t* s, const uint4& q,
                                             unsigned long long* hist) {
  const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    count_packed(s, w[j] & 0xFFFFu, hist);
    count_packed(s, w[j] >> 16, hist);
  }
}

template <int kIn>
__global__ void __launch_bounds__(P::kPackedBlockSize, 1)
    hist_u16_packed_kernel(const std::uint16_t* __restrict__ in, std::size_t n,
                           unsigned long long* __restrict__ hist,
                           std::uint32_t* __restrict__ partials) {
  extern __shared__ std::uint32_t s_words[];
  for (int i = threadIdx.x; i < kWords; i += blockDim.x) s_words[i] = 0;
  __syncthreads();
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(in);
  const std::size_t head = std::min<std::size_t>(n, ((16 - addr % 16) % 16) / 2);
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t threads = std::size_t(gridDim.x) * blockDim.x;
  if (tid < head) count_packed(s_words, in[tid], hist);
  const std::size_t vecs = (n - head) / 8;
  const uint4* v4 = reinterpret_cast<const uint4*>(in + head);
  std::size_t k = tid;
  for (; k + (kIn - 1) * threads < vecs; k += kIn * threads) {
    uint4 q[kIn];
#pragma unroll
    for (int i = 0; i < kIn; ++i) q[i] = __ldg(v4 + k + i * threads);
#pragma unroll
    for (int i = 0; i < kIn; ++i) count_vector(s_words, q[i], hist);
  }
  for (; k < vecs; k += threads) count_vector(s_words, __ldg(v4 + k), hist);
  const std::size_t tail = head + vecs * 8 + tid;
  if (tail < n) count_packed(s_words, in[tail], hist);
  __syncthreads();
  std::uint32_t* mine = partials + std::size_t(blockIdx.x) * kWords;
  for (int i = threadIdx.x; i < kWords; i += blockDim.x) mine[i] = s_words[i];
}

/// blockDim (32, 32): lane = word of a group of 32, warp = a stride over the partials.
__global__ void __launch_bounds__(1024)
    hist_u16_sum_kernel(const std::uint32_t* __restrict__ partials, int blocks,
                        unsigned long long* __restrict__ hist) {
  __shared__ unsigned s_lo[32][33], s_hi[32][33];
  const int word = int(blockIdx.x) * 32 + int(threadIdx.x);
  unsigned lo = 0, hi = 0;
  for (int b = int(threadIdx.y); b < blocks; b += 32) {
    const unsigned w = __ldcg(partials + std::size_t(b) * kWords + word);
    lo += w & 0xFFFFu;
    hi += w >> 16;
  }
  s_lo[threadIdx.y][threadIdx.x] = lo;
  s_hi[threadIdx.y][threadIdx.x] = hi;
  __syncthreads();
  if (threadIdx.y == 0) {
    unsigned long long tl = 0, th = 0;
    for (int r = 0; r < 32; ++r) {
      tl += s_lo[r][threadIdx.x];
      th += s_hi[r][threadIdx.x];
    }
    // Sole writer of these bins in this launch (the overflow atomics came before, in order).
    hist[word] += tl;
    hist[word + kWords] += th;
  }
}

int packed_grid(std::size_t n) {
  const std::size_t per_block = std::size_t(P::kPackedBlockSize) * 8 * P::kMinVectorsPerThread;
  return int(std::max<std::size_t>(
      1, std::min<std::size_t>(std::size_t(detail::sm_count()), detail::ceil_div(n, per_block))));
}

}  // namespace

std::size_t hist_u16_scratch_words() { return std::size_t(detail::sm_count()) * kWords; }

void hist_u16_packed(const std::uint16_t* d_in, std::size_t n, std::uint64_t* d_hist,
                     std::uint32_t* d_partials, cudaStream_t stream) {
  const int grid = packed_grid(n);
  const std::size_t smem = kWords * sizeof(std::uint32_t);
  const bool eight = clahe_tuning().hist16_vectors == 8;
  const auto kernel = eight ? hist_u16_packed_kernel<8> : hist_u16_packed_kernel<4>;
  static bool attr = false;  // once per process (same device assumed, as hist_u16)
  if (!attr) {
    for (const void* k : {reinterpret_cast<const void*>(hist_u16_packed_kernel<4>),
                          reinterpret_cast<const void*>(hist_u16_packed_kernel<8>)}) {
      HISTEQ_CUDA_CHECK(
          cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    }
    attr = true;
  }
  auto* hist = reinterpret_cast<unsigned long long*>(d_hist);
  kernel<<<unsigned(grid), P::kPackedBlockSize, smem, stream>>>(d_in, n, hist, d_partials);
  HISTEQ_CUDA_CHECK_LAUNCH();
  hist_u16_sum_kernel<<<kWords / 32, dim3(32, 32), 0, stream>>>(d_partials, grid, hist);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace histeq::kernels
