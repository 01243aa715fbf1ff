// coarsened — privatized + many samples per thread: 16-byte loads in an interleaved (grid-stride,
// coalesced) order, a grid that just fills the GPU, so each block zeroes and merges once.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment
//      (i32: 4-byte aligned, as any int32_t array; a scalar head/tail covers the rest).
// Out: d_hist[0,bins) uint64, overwritten. Scratch: none. Async on `stream`.
// Exact: yes. Supports: u8 and i32, bins 1..4096 (4·bins ≤ 16 KB of shared memory per block).
// Tuning: CoarsenedPolicy (policy.hpp); HistogramLaunch::block_size overrides the block size.
// Grid: min(resident blocks of the device (occupancy × SMs), blocks that have work for
// kVectorsInFlight vectors per thread).
// Source: PMPP 4th ed. ch. 9.5–9.6 (thread coarsening, interleaved partitioning).
#include "histogram/common.cuh"
#include "histogram/contract.hpp"
#include "histogram/policy.hpp"

namespace histeq::kernels {
namespace {

using detail::bin_of;

template <typename T>
__global__ void __launch_bounds__(CommonPolicy::kMaxBlockSize)
    coarsened_kernel(const T* __restrict__ in, std::size_t n, int bins, unsigned long long* hist) {
  extern __shared__ std::uint32_t s_hist[];  // [bins]
  detail::shared_histogram_zero(s_hist, bins);
  auto count = [&](T v) { detail::shared_histogram_add(s_hist, bin_of(v, bins)); };
  detail::for_each_sample_vectorized<T, CoarsenedPolicy::kVectorsInFlight>(in, n, count);
  detail::shared_histogram_merge(s_hist, bins, hist);
}

template <typename T>
LaunchShape coarsened_shape_typed(const HistogramLaunch& call) {
  const int block = detail::resolve_block_size(call, CoarsenedPolicy::kBlockSize);
  const std::size_t smem = std::size_t(call.bins) * sizeof(std::uint32_t);
  const void* kernel = reinterpret_cast<const void*>(coarsened_kernel<T>);
  constexpr std::size_t kSamplesPerThread =
      CoarsenedPolicy::kVectorsInFlight * (CommonPolicy::kVectorBytes / sizeof(T));
  std::size_t wanted = detail::resident_blocks(kernel, block, smem);
  const std::size_t useful = detail::ceil_div(call.n, std::size_t(block) * kSamplesPerThread);
  if (wanted > useful) wanted = useful;
  return {kernel, block, detail::clamp_grid(wanted, call.n), smem};
}

LaunchShape coarsened_shape(const HistogramLaunch& call) {
  return call.type == SampleType::u8 ? coarsened_shape_typed<std::uint8_t>(call)
                                     : coarsened_shape_typed<std::int32_t>(call);
}

void coarsened_launch(const HistogramLaunch& call) {
  detail::launch_with_shape(call, "coarsened", coarsened_shape);
}

}  // namespace

extern const KernelEntry kCoarsened;
const KernelEntry kCoarsened = {
    "coarsened",
    "privatized + 16-byte coalesced grid-stride loads, grid filling the SMs: one zero + merge per "
    "resident block; shared atomics on equal bins still serialize",
    true,
    detail::supports_all,
    detail::no_scratch,
    coarsened_launch,
    coarsened_shape,
};

}  // namespace histeq::kernels
