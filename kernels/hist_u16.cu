// hist_u16 — the 65536-bin histogram of 16-bit samples in one pass, plus the 16-bit LUT and apply.
// In:  d_in[0,n) u16, device memory, 2-byte aligned, n may be 0.
// Out: d_hist[0,65536) uint64, counts ADDED (caller zeroes once). Async on `stream`; no host sync.
// Exact: yes. Supports: u16 samples, 65536 bins (not in the u8/i32 registry: its contract caps
//      bins at kMaxBins = 4096 and has no u16 type). Tuning: kHistU16Policy (policy.hpp).
// Why: 65536 uint32 counters (256 KiB) do not fit one block's shared memory (227 KiB on H100/
//      H200), and 16-bit counters overflow. A thread-block CLUSTER of two blocks (sm_90
//      distributed shared memory) holds them: block r of the pair owns bins [r·32768,
//      (r+1)·32768) in 128 KiB of its shared memory, and both blocks count every sample they
//      read into the owner's counters (atomicAdd through cluster.map_shared_rank). So the input
//      is read exactly once with 16-byte loads, and each cluster merges 65536 counters (non-zero
//      only) into the global histogram at the end. Grid: one block per SM (128 KiB each),
//      grid-stride over the input.
// Source: CUDA Programming Guide, "Distributed Shared Memory" (its histogram example uses the
//      same split of bins over a cluster's blocks); privatization as PMPP 4th ed. ch. 9.
#include "hist_u16.hpp"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "clahe_lut.cuh"
#include "clahe_tuning.hpp"
#include "common.cuh"
#include "cuda_check.hpp"
#include "histeq/error.hpp"
#include "histeq/lut16_formula.hpp"
#include "pdl.cuh"
#include "policy.hpp"

namespace cg = cooperative_groups;

namespace histeq::kernels {
namespace {
using P = HistU16Policy;
constexpr int kHalf = 32768;

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(P::kBlockSize)
    hist_u16_kernel(const std::uint16_t* __restrict__ in, std::size_t n,
                    unsigned long long* __restrict__ hist) {
  extern __shared__ std::uint32_t s_hist[];  // kHalf counters
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  // Two named pointers, not an array: a dynamically indexed array would live in local memory.
  std::uint32_t* const owner0 = cluster.map_shared_rank(s_hist, 0);
  std::uint32_t* const owner1 = cluster.map_shared_rank(s_hist, 1);
  for (int i = threadIdx.x; i < kHalf; i += blockDim.x) s_hist[i] = 0;
  cluster.sync();  // both halves zero before anyone counts into them
  auto count = [&](unsigned v) {
    atomicAdd(((v >> 15) ? owner1 : owner0) + (v & (kHalf - 1)), 1u);
  };
  // 16-byte aligned body with a scalar head and tail.
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(in);
  const std::size_t head = std::min<std::size_t>(n, ((16 - addr % 16) % 16) / 2);
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t threads = std::size_t(gridDim.x) * blockDim.x;
  if (tid < head) count(in[tid]);
  const std::size_t vecs = (n - head) / 8;
  const uint4* v4 = reinterpret_cast<const uint4*>(in + head);
  for (std::size_t k = tid; k < vecs; k += threads) {
    const uint4 q = __ldg(v4 + k);
    const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      count(w[j] & 0xFFFFu);
      count(w[j] >> 16);
    }
  }
  const std::size_t tail = head + vecs * 8 + tid;
  if (tail < n) count(in[tail]);
  cluster.sync();  // every remote add into this block's half has landed
  unsigned long long* mine = hist + std::size_t(rank) * kHalf;
  for (int i = threadIdx.x; i < kHalf; i += blockDim.x) {
    const std::uint32_t c = s_hist[i];
    if (c) atomicAdd(mine + i, static_cast<unsigned long long>(c));
  }
}

/// One block of 1024 threads: v0, N, scan, LUT (equalize16.hpp's formula).
__global__ void __launch_bounds__(1024)
    lut_u16_kernel(const unsigned long long* hist, std::uint16_t* lut) {
  __shared__ unsigned long long s_part[1024];
  __shared__ int s_v0;
  pdl::wait();  // the histogram
  pdl::allow_dependents();
  constexpr int kPer = 65536 / 1024;
  const int b0 = threadIdx.x * kPer;
  unsigned long long mine = 0;
  int first = 65536;
  for (int i = b0; i < b0 + kPer; ++i) {
    const unsigned long long h = hist[i];
    mine += h;
    if (h && first == 65536) first = i;
  }
  if (threadIdx.x == 0) s_v0 = 65536;
  s_part[threadIdx.x] = mine;
  __syncthreads();
  if (first < 65536) atomicMin(&s_v0, first);
  // Inclusive scan of the 1024 per-thread sums (Hillis–Steele in shared memory).
  for (int o = 1; o < 1024; o <<= 1) {
    const unsigned long long add = threadIdx.x >= unsigned(o) ? s_part[threadIdx.x - o] : 0ull;
    __syncthreads();
    s_part[threadIdx.x] += add;
    __syncthreads();
  }
  const unsigned long long total = s_part[1023];
  const int v0 = s_v0;
  unsigned long long cdf = threadIdx.x ? s_part[threadIdx.x - 1] : 0ull;
  if (v0 == 65536 || hist[v0] == total) {  // empty or constant: identity
    for (int i = b0; i < b0 + kPer; ++i) lut[i] = static_cast<std::uint16_t>(i);
    return;
  }
  const unsigned long long h_v0 = hist[v0];
  const float scale = formula16::scale(total, h_v0);
  for (int i = b0; i < b0 + kPer; ++i) {
    cdf += hist[i];
    lut[i] = i <= v0 ? std::uint16_t(0) : formula16::entry(cdf, h_v0, scale);
  }
}

__global__ void apply_u16_kernel(const std::uint16_t* in, std::uint16_t* out, std::size_t n,
                                 const std::uint16_t* __restrict__ lut) {
  pdl::wait();  // the LUT, and the input and output, of the launches before
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    out[i] = __ldg(lut + in[i]);
  }
}

}  // namespace

void hist_u16(const std::uint16_t* d_in, std::size_t n, std::uint64_t* d_hist, cudaStream_t stream,
              std::uint32_t* d_scratch, bool assign) {
  if (d_hist == nullptr || (n > 0 && d_in == nullptr))
    throw UsageError("hist_u16: null device pointer");
  if (reinterpret_cast<std::uintptr_t>(d_in) % 2 != 0)
    throw UsageError("hist_u16: input not 2-byte aligned");
  if (n > 0 && d_scratch != nullptr && clahe_tuning().hist16_packed) {
    hist_u16_packed(d_in, n, d_hist, d_scratch, stream, assign);
    return;
  }
  if (assign) {
    HISTEQ_CUDA_CHECK(cudaMemsetAsync(d_hist, 0, 65536 * sizeof(std::uint64_t), stream));
  }
  if (n == 0) return;
  const std::size_t smem = kHalf * sizeof(std::uint32_t);
  detail::per_device_once(reinterpret_cast<const void*>(hist_u16_kernel), [&] {
    HISTEQ_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(hist_u16_kernel),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    return 0;
  });
  // One block per SM, an even count (clusters of two), no more than the work needs.
  const std::size_t per_block = std::size_t(P::kBlockSize) * 8 * P::kMinVectorsPerThread;
  std::size_t grid =
      std::min<std::size_t>(std::size_t(detail::sm_count()), detail::ceil_div(n, per_block));
  grid = std::max<std::size_t>(2, (grid + 1) / 2 * 2);
  hist_u16_kernel<<<unsigned(grid), P::kBlockSize, smem, stream>>>(
      d_in, n, reinterpret_cast<unsigned long long*>(d_hist));
  HISTEQ_CUDA_CHECK_LAUNCH();
}

void lut_u16(const std::uint64_t* d_hist, std::uint16_t* d_lut, cudaStream_t stream) {
  if (d_hist == nullptr || d_lut == nullptr) throw UsageError("lut_u16: null device pointer");
  pdl::launch(pdl::kEqualize16, lut_u16_kernel, dim3(1), dim3(1024), 0, stream,
              reinterpret_cast<const unsigned long long*>(d_hist), d_lut);
}

void apply_u16(const std::uint16_t* d_in, std::uint16_t* d_out, std::size_t n,
               const std::uint16_t* d_lut, cudaStream_t stream) {
  if (n == 0) return;
  if (d_in == nullptr || d_out == nullptr || d_lut == nullptr)
    throw UsageError("apply_u16: null device pointer");
  const std::size_t grid =
      std::min<std::size_t>(detail::ceil_div(n, 256), std::size_t(detail::sm_count()) * 16);
  pdl::launch(pdl::kEqualize16, apply_u16_kernel, dim3(unsigned(grid)), dim3(256), 0, stream, d_in,
              d_out, n, d_lut);
}

}  // namespace histeq::kernels
