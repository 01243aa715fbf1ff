// cub — the library baseline: cub::DeviceHistogram::HistogramEven with 32-bit counters.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment
//      (i32: 4-byte aligned, as any int32_t array).
// Out: d_hist[0,bins) uint64, overwritten. CUB counts into uint32 counters in scratch (its
//      common, fast configuration: 64-bit shared-memory counters would make every shared atomic
//      a compare-and-swap loop, measured 8x slower on the H200), then a small kernel widens them
//      into d_hist. n ≥ 2^32 (a bin could overflow 32 bits) counts straight into uint64.
//      Scratch: CUB's temporary storage for (n, bins, type), asked from CUB itself, plus the
//      uint32 counters. Async on `stream`.
// Exact: yes. Supports: u8 and i32, bins 1..4096.
// Binning equals ours exactly: levels are ints, so CUB bins integrally,
//      bin = (v − lower)·(num_levels − 1) / (upper − lower), and drops v ∉ [lower, upper):
//      u8:  lower 0, upper 256, num_levels bins+1 → (v·bins)/256 (CUB counts 256 byte values in
//           shared memory, then maps each to its output bin with this formula);
//      i32: lower 0, upper bins, num_levels bins+1 → v for 0 ≤ v < bins, others not counted.
// Tuning: CUB's own policy (cub/device/dispatch/tuning/tuning_histogram.cuh); block_size ignored.
// Above 256 bins (i32) CUB privatizes in global memory (scratch grows with the grid).
// Source: CUB, cub::DeviceHistogram (NVIDIA CCCL, shipped with the CUDA toolkit).
#include <cub/device/device_histogram.cuh>

#include <cstdint>
#include <string>

#include "histogram/common.cuh"
#include "histogram/contract.hpp"

namespace histeq::kernels {
namespace {

/// Counts that fit 32-bit counters for sure.
bool narrow_counters(std::size_t n) { return n < (std::size_t(1) << 32); }

/// One HistogramEven call (a size query when temp == nullptr). OffsetT is int64, so n is not
/// limited to 2^31.
template <typename T, typename CounterT>
cudaError_t cub_histogram(void* temp, std::size_t& temp_bytes, const void* d_in, std::size_t n,
                          int bins, CounterT* d_counts, cudaStream_t stream) {
  const int lower = 0;
  const int upper = sizeof(T) == 1 ? 256 : bins;
  return cub::DeviceHistogram::HistogramEven(temp, temp_bytes, static_cast<const T*>(d_in),
                                             d_counts, bins + 1, lower, upper,
                                             static_cast<std::int64_t>(n), stream);
}

template <typename CounterT>
cudaError_t cub_dispatch(void* temp, std::size_t& temp_bytes, const void* d_in, std::size_t n,
                         int bins, SampleType type, CounterT* d_counts, cudaStream_t stream) {
  return type == SampleType::u8
             ? cub_histogram<std::uint8_t>(temp, temp_bytes, d_in, n, bins, d_counts, stream)
             : cub_histogram<std::int32_t>(temp, temp_bytes, d_in, n, bins, d_counts, stream);
}

constexpr std::size_t kAlign = 256;
std::size_t counters_bytes(int bins) {
  return detail::ceil_div(std::size_t(bins) * sizeof(unsigned), kAlign) * kAlign;
}

std::size_t cub_temp_bytes(std::size_t n, int bins, SampleType type) {
  std::size_t bytes = 0;
  if (narrow_counters(n)) {
    HISTEQ_CUDA_CHECK(
        cub_dispatch<unsigned>(nullptr, bytes, nullptr, n, bins, type, nullptr, nullptr));
  } else {
    HISTEQ_CUDA_CHECK(
        cub_dispatch<unsigned long long>(nullptr, bytes, nullptr, n, bins, type, nullptr, nullptr));
  }
  return bytes;
}

std::size_t cub_scratch_bytes(std::size_t n, int bins, SampleType type) {
  if (n == 0) return 0;  // launch does not call CUB for an empty input
  return counters_bytes(bins) + cub_temp_bytes(n, bins, type);
}

__global__ void widen_counts(const unsigned* __restrict__ counts, int bins,
                             unsigned long long* __restrict__ hist) {
  for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < bins; b += gridDim.x * blockDim.x) {
    hist[b] = counts[b];
  }
}

void cub_launch(const HistogramLaunch& call) {
  detail::check_call(call, "cub");
  if (call.n == 0) {
    detail::zero_histogram(call);
    return;
  }
  std::size_t bytes = cub_temp_bytes(call.n, call.bins, call.type);
  auto* hist = reinterpret_cast<unsigned long long*>(call.d_hist);
  if (!narrow_counters(call.n)) {
    HISTEQ_CUDA_CHECK(cub_dispatch(call.d_scratch, bytes, call.d_in, call.n, call.bins, call.type,
                                   hist, call.stream));
    return;
  }
  auto* counts = static_cast<unsigned*>(call.d_scratch);
  void* temp = static_cast<char*>(call.d_scratch) + counters_bytes(call.bins);
  HISTEQ_CUDA_CHECK(
      cub_dispatch(temp, bytes, call.d_in, call.n, call.bins, call.type, counts, call.stream));
  constexpr int kThreads = 256;
  widen_counts<<<int(detail::ceil_div(std::size_t(call.bins), kThreads)), kThreads, 0,
                 call.stream>>>(counts, call.bins, hist);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

/// CUB launches its own kernels (init + sweep) with its own policy; there is no single
/// __global__ of ours to report, so the shape is empty (kernel == nullptr).
LaunchShape cub_shape(const HistogramLaunch&) { return {}; }

}  // namespace

extern const KernelEntry kCub;
const KernelEntry kCub = {
    "cub",
    "cub::DeviceHistogram::HistogramEven, the library baseline: shared-memory privatization up to "
    "256 bins, global-memory privatization above",
    true,
    detail::supports_all,
    cub_scratch_bytes,
    cub_launch,
    cub_shape,
};

}  // namespace histeq::kernels
