// racy — the lesson's unsynchronized read-modify-write (h[b] = h[b] + 1) on the global histogram.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment
//      (i32: 4-byte aligned, as any int32_t array).
// Out: d_hist[0,bins) uint64, overwritten. Every bin ≤ its exact count (a lost update only ever
//      drops increments) and non-zero exactly where the exact count is. Scratch: none.
//      Async on `stream`.
// Exact: no — concurrent increments of one bin overwrite each other; the pipeline reports the
//      lost counts. Supports: u8 and i32, bins 1..4096. Tuning: RacyPolicy (policy.hpp).
// Source: PMPP 4th ed. ch. 9.2 (read-modify-write races, the reason for atomics).
#include "histogram/common.cuh"
#include "histogram/contract.hpp"
#include "histogram/policy.hpp"

namespace histeq::kernels {
namespace {

using detail::bin_of;
using detail::kNotCounted;

/// Grid-stride loop; the volatile pointer keeps each increment a real load + store to memory,
/// so the race of the lesson is what runs (no atomics, no caching of a bin in a register). An
/// aligned 64-bit store never tears, so every stored value is some earlier value + 1.
template <typename T>
__global__ void __launch_bounds__(CommonPolicy::kMaxBlockSize)
    racy_kernel(const T* __restrict__ in, std::size_t n, int bins, unsigned long long* hist) {
  volatile unsigned long long* h = hist;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int b = bin_of(in[i], bins);
    if (b != kNotCounted) h[b] = h[b] + 1;
  }
}

LaunchShape racy_shape(const HistogramLaunch& call) {
  const int block = detail::resolve_block_size(call, RacyPolicy::kBlockSize);
  std::size_t wanted = detail::ceil_div(call.n, std::size_t(block));
  const std::size_t cap = std::size_t(detail::sm_count()) * RacyPolicy::kMaxBlocksPerSm;
  if (wanted > cap) wanted = cap;
  return {detail::pick(call.type, racy_kernel<std::uint8_t>, racy_kernel<std::int32_t>), block,
          detail::clamp_grid(wanted, call.n), 0};
}

void racy_launch(const HistogramLaunch& call) {
  detail::launch_with_shape(call, "racy", racy_shape);
}

}  // namespace

extern const KernelEntry kRacy;
const KernelEntry kRacy = {
    "racy",
    "unsynchronized read-modify-write on the global histogram: loses counts under contention "
    "(the lesson's bug, not exact)",
    false,
    detail::supports_all,
    detail::no_scratch,
    racy_launch,
    racy_shape,
};

}  // namespace histeq::kernels
