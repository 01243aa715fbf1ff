// atomic — one global atomicAdd per sample on the uint64 histogram.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment
//      (i32: 4-byte aligned, as any int32_t array).
// Out: d_hist[0,bins) uint64, overwritten. Scratch: none. Async on `stream`.
// Exact: yes. Supports: u8 and i32, bins 1..4096. Tuning: AtomicPolicy (policy.hpp).
// Slow where many samples share a bin: atomics on one address serialize in the L2.
// Source: PMPP 4th ed. ch. 9.3 (atomic operations and a basic histogram kernel).
#include "histogram/common.cuh"
#include "histogram/contract.hpp"
#include "histogram/policy.hpp"

namespace histeq::kernels {
namespace {

using detail::bin_of;
using detail::kNotCounted;

template <typename T>
__global__ void __launch_bounds__(CommonPolicy::kMaxBlockSize)
    atomic_kernel(const T* __restrict__ in, std::size_t n, int bins, unsigned long long* hist) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int b = bin_of(in[i], bins);
    if (b != kNotCounted) atomicAdd(&hist[b], 1ull);
  }
}

LaunchShape atomic_shape(const HistogramLaunch& call) {
  const int block = detail::resolve_block_size(call, AtomicPolicy::kBlockSize);
  std::size_t wanted = detail::ceil_div(call.n, std::size_t(block));
  const std::size_t cap = std::size_t(detail::sm_count()) * AtomicPolicy::kMaxBlocksPerSm;
  if (wanted > cap) wanted = cap;
  return {detail::pick(call.type, atomic_kernel<std::uint8_t>, atomic_kernel<std::int32_t>), block,
          detail::clamp_grid(wanted, call.n), 0};
}

void atomic_launch(const HistogramLaunch& call) {
  detail::launch_with_shape(call, "atomic", atomic_shape);
}

}  // namespace

extern const KernelEntry kAtomic;
const KernelEntry kAtomic = {
    "atomic",
    "one global atomicAdd per sample: exact, but atomics on the same bin serialize in L2 "
    "(slow on hot or constant data)",
    true,
    detail::supports_all,
    detail::no_scratch,
    atomic_launch,
    atomic_shape,
};

}  // namespace histeq::kernels
