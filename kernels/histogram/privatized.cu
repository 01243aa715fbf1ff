// privatized — one shared-memory uint32 histogram per block, merged with one global atomic per bin.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment
//      (i32: 4-byte aligned, as any int32_t array).
// Out: d_hist[0,bins) uint64, overwritten. Scratch: none. Async on `stream`.
// Exact: yes. Supports: u8 and i32, bins 1..4096 (4·bins ≤ 16 KB of shared memory per block).
// Tuning: PrivatizedPolicy (policy.hpp); HistogramLaunch::block_size overrides the block size.
// One sample per thread, ceil(n / block) blocks: contention moves from L2 to shared memory, but
// every block zeroes and merges all `bins` counters for only `block` samples (see coarsened).
// Source: PMPP 4th ed. ch. 9.4 (privatization).
#include "histogram/common.cuh"
#include "histogram/contract.hpp"
#include "histogram/policy.hpp"

namespace histeq::kernels {
namespace {

using detail::bin_of;

template <typename T>
__global__ void __launch_bounds__(CommonPolicy::kMaxBlockSize)
    privatized_kernel(const T* __restrict__ in, std::size_t n, int bins, unsigned long long* hist) {
  extern __shared__ std::uint32_t s_hist[];  // [bins]
  detail::shared_histogram_zero(s_hist, bins);
  // One sample per thread when the grid covers n (the usual case); the stride only matters when
  // ceil(n / block) exceeds the grid's x limit.
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    detail::shared_histogram_add(s_hist, bin_of(__ldg(&in[i]), bins));
  }
  detail::shared_histogram_merge(s_hist, bins, hist);
}

LaunchShape privatized_shape(const HistogramLaunch& call) {
  const int block = detail::resolve_block_size(call, PrivatizedPolicy::kBlockSize);
  const std::size_t smem = std::size_t(call.bins) * sizeof(std::uint32_t);
  return {detail::pick(call.type, privatized_kernel<std::uint8_t>, privatized_kernel<std::int32_t>),
          block, detail::clamp_grid(detail::ceil_div(call.n, std::size_t(block)), call.n), smem};
}

void privatized_launch(const HistogramLaunch& call) {
  detail::launch_with_shape(call, "privatized", privatized_shape);
}

}  // namespace

extern const KernelEntry kPrivatized;
const KernelEntry kPrivatized = {
    "privatized",
    "per-block shared-memory histogram, merged once per bin: cheap shared atomics, but every "
    "block of one sample per thread pays a full zero + merge",
    true,
    detail::supports_all,
    detail::no_scratch,
    privatized_launch,
    privatized_shape,
};

}  // namespace histeq::kernels
