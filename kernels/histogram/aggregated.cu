// aggregated — coarsened + run-length aggregation: a thread keeps (bin, count) of its current run
// of equal bins in registers and does one shared atomicAdd per run instead of one per sample.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment
//      (i32: 4-byte aligned, as any int32_t array; a scalar head/tail covers the rest).
// Out: d_hist[0,bins) uint64, overwritten. Scratch: none. Async on `stream`.
// Exact: yes. Supports: u8 and i32, bins 1..4096 (4·bins ≤ 16 KB of shared memory per block).
// Tuning: AggregatedPolicy (policy.hpp); HistogramLaunch::block_size overrides the block size.
// Runs exist because each thread reads whole 16-byte vectors (16 consecutive u8 samples, 4 i32)
// and walks them in address order; the run is carried from one of its vectors to the next (a
// later vector of the same thread, still coalesced across the warp), so flat image areas and
// constant data cost one atomic per run. Uniform data pays a compare per sample for nothing.
// Source: PMPP 4th ed. ch. 9.7 (aggregation).
#include "histogram/common.cuh"
#include "histogram/contract.hpp"
#include "histogram/policy.hpp"

namespace histeq::kernels {
namespace {

using detail::bin_of;
using detail::kNotCounted;

template <typename T>
__global__ void __launch_bounds__(CommonPolicy::kMaxBlockSize)
    aggregated_kernel(const T* __restrict__ in, std::size_t n, int bins, unsigned long long* hist) {
  extern __shared__ std::uint32_t s_hist[];  // [bins]
  detail::shared_histogram_zero(s_hist, bins);
  int run_bin = kNotCounted;  // bin of the current run (kNotCounted: none, or uncounted samples)
  std::uint32_t run_len = 0;  // samples in it; ≤ the block's share of n (< 2^32, see clamp_grid)
  auto aggregate = [&](T v) {
    const int b = bin_of(v, bins);
    if (b == run_bin) {
      ++run_len;
    } else {
      detail::shared_histogram_add(s_hist, run_bin, run_len);  // skips kNotCounted
      run_bin = b;
      run_len = 1;
    }
  };
  detail::for_each_sample_vectorized<T, AggregatedPolicy::kVectorsInFlight>(in, n, aggregate);
  detail::shared_histogram_add(s_hist, run_bin, run_len);
  detail::shared_histogram_merge(s_hist, bins, hist);
}

template <typename T>
LaunchShape aggregated_shape_typed(const HistogramLaunch& call) {
  const int block = detail::resolve_block_size(call, AggregatedPolicy::kBlockSize);
  const std::size_t smem = std::size_t(call.bins) * sizeof(std::uint32_t);
  const void* kernel = reinterpret_cast<const void*>(aggregated_kernel<T>);
  constexpr std::size_t kSamplesPerThread =
      AggregatedPolicy::kVectorsInFlight * (CommonPolicy::kVectorBytes / sizeof(T));
  std::size_t wanted = detail::resident_blocks(kernel, block, smem);
  const std::size_t useful = detail::ceil_div(call.n, std::size_t(block) * kSamplesPerThread);
  if (wanted > useful) wanted = useful;
  return {kernel, block, detail::clamp_grid(wanted, call.n), smem};
}

LaunchShape aggregated_shape(const HistogramLaunch& call) {
  return call.type == SampleType::u8 ? aggregated_shape_typed<std::uint8_t>(call)
                                     : aggregated_shape_typed<std::int32_t>(call);
}

void aggregated_launch(const HistogramLaunch& call) {
  detail::launch_with_shape(call, "aggregated", aggregated_shape);
}

}  // namespace

extern const KernelEntry kAggregated;
const KernelEntry kAggregated = {
    "aggregated",
    "coarsened + run-length aggregation in registers: one shared atomic per run of equal bins "
    "(fast on blocky/constant data, a compare per sample on noise)",
    true,
    detail::supports_all,
    detail::no_scratch,
    aggregated_launch,
    aggregated_shape,
};

}  // namespace histeq::kernels
