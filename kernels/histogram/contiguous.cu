// contiguous — the coarsened kernel with CONTIGUOUS partitioning: the lesson's counter-example.
// Thread t of the grid counts the 16-byte vectors [t·k, (t+1)·k) of the input (k = the vectors
// divided among the grid's threads, rounded up), so the 32 loads a warp issues together land k
// vectors (k·16 bytes) apart instead of side by side: each needs its own memory transaction and
// coalescing is lost. Everything else is `coarsened`'s: the same grid (the resident blocks of the
// device), the same block size and loads in flight (CoarsenedPolicy), the same per-block
// shared-memory histogram merged once per block. Comparing the two isolates the partitioning.
// Never chosen by `auto` (registry.cu): it exists to be measured against `coarsened`.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment
//      (i32: 4-byte aligned, as any int32_t array; a scalar head/tail covers the rest).
// Out: d_hist[0,bins) uint64, overwritten. Scratch: none. Async on `stream`.
// Exact: yes. Supports: u8 and i32, bins 1..4096 (4·bins ≤ 16 KB of shared memory per block).
// Tuning: CoarsenedPolicy (policy.hpp), deliberately the same as coarsened;
// HistogramLaunch::block_size overrides the block size.
// Source: PMPP 4th ed. ch. 9.5 (thread coarsening with contiguous partitioning, Fig. 9.10) and
// 9.6 (why interleaved partitioning is preferred on a GPU).
#include "histogram/common.cuh"
#include "histogram/contract.hpp"
#include "histogram/policy.hpp"

namespace histeq::kernels {
namespace {

using detail::bin_of;

/// Visits every sample of in[0, n) exactly once across the grid: at most one head sample per
/// thread (before the first 16-byte boundary), then thread t's contiguous share of the 16-byte
/// vectors, [t·k, min((t+1)·k, nvec)) with k = ceil(nvec / threads), kVectorsInFlight loads
/// issued before any is visited, then the scalar tail (grid-stride). `in` must be aligned to
/// sizeof(T).
template <typename T, int kVectorsInFlight, typename Visit>
__device__ __forceinline__ void for_each_sample_contiguous(const T* in, std::size_t n,
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
  const std::size_t per_thread = (nvec + nthreads - 1) / nthreads;  // k
  const std::size_t begin = tid * per_thread < nvec ? tid * per_thread : nvec;
  const std::size_t end = nvec - begin < per_thread ? nvec : begin + per_thread;
  for (std::size_t base = begin; base < end; base += kVectorsInFlight) {
    uint4 v[kVectorsInFlight];
#pragma unroll
    for (int u = 0; u < kVectorsInFlight; ++u) {
      if (base + u < end) v[u] = __ldg(&vin[base + u]);
    }
#pragma unroll
    for (int u = 0; u < kVectorsInFlight; ++u) {
      if (base + u < end) detail::visit_vector(v[u], static_cast<T*>(nullptr), visit);
    }
  }

  for (std::size_t i = tail_begin + tid; i < n; i += nthreads) visit(in[i]);
}

template <typename T>
__global__ void __launch_bounds__(CommonPolicy::kMaxBlockSize)
    contiguous_kernel(const T* __restrict__ in, std::size_t n, int bins, unsigned long long* hist) {
  extern __shared__ std::uint32_t s_hist[];  // [bins]
  detail::shared_histogram_zero(s_hist, bins);
  auto count = [&](T v) { detail::shared_histogram_add(s_hist, bin_of(v, bins)); };
  for_each_sample_contiguous<T, CoarsenedPolicy::kVectorsInFlight>(in, n, count);
  detail::shared_histogram_merge(s_hist, bins, hist);
}

/// coarsened's grid rule (see coarsened.cu), applied to contiguous_kernel.
template <typename T>
LaunchShape contiguous_shape_typed(const HistogramLaunch& call) {
  const int block = detail::resolve_block_size(call, CoarsenedPolicy::kBlockSize);
  const std::size_t smem = std::size_t(call.bins) * sizeof(std::uint32_t);
  const void* kernel = reinterpret_cast<const void*>(contiguous_kernel<T>);
  constexpr std::size_t kSamplesPerThread =
      CoarsenedPolicy::kVectorsInFlight * (CommonPolicy::kVectorBytes / sizeof(T));
  std::size_t wanted = detail::resident_blocks(kernel, block, smem);
  const std::size_t useful = detail::ceil_div(call.n, std::size_t(block) * kSamplesPerThread);
  if (wanted > useful) wanted = useful;
  return {kernel, block, detail::clamp_grid(wanted, call.n), smem};
}

LaunchShape contiguous_shape(const HistogramLaunch& call) {
  return call.type == SampleType::u8 ? contiguous_shape_typed<std::uint8_t>(call)
                                     : contiguous_shape_typed<std::int32_t>(call);
}

void contiguous_launch(const HistogramLaunch& call) {
  detail::launch_with_shape(call, "contiguous", contiguous_shape);
}

}  // namespace

extern const KernelEntry kContiguous;
const KernelEntry kContiguous = {
    "contiguous",
    "coarsened with contiguous partitioning (thread t reads [t*k, (t+1)*k)): a warp's loads land "
    "k*16 B apart, not coalesced; the lesson's counter-example, never chosen by auto",
    true,
    detail::supports_all,
    detail::no_scratch,
    contiguous_launch,
    contiguous_shape,
};

}  // namespace histeq::kernels
