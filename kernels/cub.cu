// cub — the library baseline: cub::DeviceHistogram::HistogramEven with 64-bit counters.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment
//      (i32: 4-byte aligned, as any int32_t array).
// Out: d_hist[0,bins) uint64, overwritten (CUB's own init kernel zeroes it; we also zero it, so
//      n == 0 needs no CUB call). Scratch: CUB's temporary storage for (n, bins, type), asked
//      from CUB itself (depends on the device's SM count). Async on `stream`.
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

#include "common.cuh"
#include "contract.hpp"

namespace histeq::kernels {
namespace {

/// One HistogramEven call (a size query when temp == nullptr). OffsetT is int64, so n is not
/// limited to 2^31; counters are unsigned long long, so d_hist is written directly.
template <typename T>
cudaError_t cub_histogram(void* temp, std::size_t& temp_bytes, const void* d_in, std::size_t n,
                          int bins, std::uint64_t* d_hist, cudaStream_t stream) {
  const int lower = 0;
  const int upper = sizeof(T) == 1 ? 256 : bins;
  return cub::DeviceHistogram::HistogramEven(
      temp, temp_bytes, static_cast<const T*>(d_in),
      reinterpret_cast<unsigned long long*>(d_hist), bins + 1, lower, upper,
      static_cast<std::int64_t>(n), stream);
}

cudaError_t cub_dispatch(void* temp, std::size_t& temp_bytes, const void* d_in, std::size_t n,
                         int bins, SampleType type, std::uint64_t* d_hist, cudaStream_t stream) {
  return type == SampleType::u8
             ? cub_histogram<std::uint8_t>(temp, temp_bytes, d_in, n, bins, d_hist, stream)
             : cub_histogram<std::int32_t>(temp, temp_bytes, d_in, n, bins, d_hist, stream);
}

std::size_t cub_scratch_bytes(std::size_t n, int bins, SampleType type) {
  if (n == 0) return 0;  // launch does not call CUB for an empty input
  std::size_t bytes = 0;
  HISTEQ_CUDA_CHECK(cub_dispatch(nullptr, bytes, nullptr, n, bins, type, nullptr, nullptr));
  return bytes;
}

void cub_launch(const HistogramLaunch& call) {
  detail::check_call(call, "cub");
  detail::zero_histogram(call);
  if (call.n == 0) return;
  std::size_t bytes = cub_scratch_bytes(call.n, call.bins, call.type);
  HISTEQ_CUDA_CHECK(cub_dispatch(call.d_scratch, bytes, call.d_in, call.n, call.bins, call.type,
                                 call.d_hist, call.stream));
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
