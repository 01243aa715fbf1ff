// fused — histogram → CDF → LUT → apply for 8-bit data in ONE cooperative launch (fused.cuh).
// In:  d_in[0,n) u8, device memory. Out: d_out[0,n) u8 equalized; d_hist[256] uint64 (zero on
//      entry) holds the histogram; d_lut[256] the LUT. Async on `stream`.
// Exact: yes (same LUT formulas as the CPU, lut_formula.hpp). Tuning: kFusedPolicy.
// Source: grid-wide barrier from CUDA cooperative groups; lane columns as columns.cuh.
#include "equalize/fused.hpp"

#include <algorithm>

#include "equalize/fused.cuh"
#include "equalize/policy.hpp"
#include "histeq/error.hpp"
#include "support/cuda_check.hpp"
#include "support/device.hpp"

namespace histeq::kernels {
namespace {
using P = FusedPolicy;
constexpr auto kKernel =
    fused::equalize_kernel<P::kBlockSize, P::kVectorsInFlight, P::kBlocksPerSm, P::kStreamingLoads>;
}  // namespace

bool fused_equalize_supported(std::string* why) {
  int dev = 0, coop = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = "no usable CUDA device";
    return false;
  }
  if (!coop) {
    if (why)
      *why = "the device cannot launch cooperative kernels (cudaDevAttrCooperativeLaunch = 0)";
    return false;
  }
  return true;
}

void launch_fused_equalize(const std::uint8_t* d_in, std::uint8_t* d_out, std::size_t n, Formula f,
                           std::uint64_t* d_hist, std::uint64_t* d_next_hist, std::uint8_t* d_lut,
                           cudaStream_t stream) {
  if (d_hist == nullptr || (n > 0 && (d_in == nullptr || d_out == nullptr))) {
    throw UsageError("fused equalize: null device pointer");
  }
  const auto a = reinterpret_cast<std::uintptr_t>(d_in),
             b = reinterpret_cast<std::uintptr_t>(d_out);
  if (a % 16 != b % 16) {
    throw UsageError("fused equalize: input and output must have the same address modulo 16");
  }
  if (a != b && a < b + n && b < a + n) {
    throw UsageError("fused equalize: input and output overlap without being the same buffer");
  }
  // Grid: no more blocks than the work needs, never more than are co-resident (a cooperative
  // launch with more fails).
  const std::size_t per_block = std::size_t(P::kBlockSize) * P::kVectorsInFlight * 16;
  const std::size_t resident =
      detail::resident_blocks(reinterpret_cast<const void*>(kKernel), P::kBlockSize, 0);
  const std::size_t grid =
      std::max<std::size_t>(1, std::min(detail::ceil_div(n, per_block), resident));
  auto* hist = reinterpret_cast<unsigned long long*>(d_hist);
  auto* next = reinterpret_cast<unsigned long long*>(d_next_hist);
  void* args[] = {&d_in, &d_out, &n, &f, &hist, &next, &d_lut};
  HISTEQ_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kKernel),
                                                dim3(unsigned(grid)), dim3(P::kBlockSize), args, 0,
                                                stream));
}

}  // namespace histeq::kernels
