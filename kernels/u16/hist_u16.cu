// hist_u16 — the 65536-bin histogram of 16-bit samples (the call; the kernels are
// hist_u16_packed.cu's), plus the 16-bit equalization LUT and apply.
// In:  d_in[0,n) u16, device memory, 2-byte aligned, n may be 0.
// Out: d_hist[0,65536) uint64, counts ADDED (caller zeroes once) or written (`assign`). Async on
//      `stream`; no host sync.
// Exact: yes. Supports: u16 samples, 65536 bins (not in the u8/i32 registry: its contract caps
//      bins at kMaxBins = 4096 and has no u16 type). Tuning: kHistU16Policy (policy.hpp).
#include "u16/hist_u16.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "histeq/error.hpp"
#include "histeq/lut16_formula.hpp"
#include "support/cuda_check.hpp"
#include "support/device.hpp"
#include "support/pdl.cuh"
#include "u16/policy.hpp"

namespace histeq::kernels {
namespace {

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
              std::uint32_t* d_scratch, bool assign, const Tuning& t) {
  if (d_hist == nullptr || d_scratch == nullptr || (n > 0 && d_in == nullptr))
    throw UsageError("hist_u16: null device pointer");
  if (reinterpret_cast<std::uintptr_t>(d_in) % 2 != 0)
    throw UsageError("hist_u16: input not 2-byte aligned");
  if (n > 0) {
    hist_u16_packed(d_in, n, d_hist, d_scratch, stream, assign, t);
  } else if (assign) {
    HISTEQ_CUDA_CHECK(cudaMemsetAsync(d_hist, 0, 65536 * sizeof(std::uint64_t), stream));
  }
}

void lut_u16(const std::uint64_t* d_hist, std::uint16_t* d_lut, cudaStream_t stream,
             const Tuning& t) {
  if (d_hist == nullptr || d_lut == nullptr) throw UsageError("lut_u16: null device pointer");
  pdl::launch(pdl::kEqualize16, t, lut_u16_kernel, dim3(1), dim3(1024), 0, stream,
              reinterpret_cast<const unsigned long long*>(d_hist), d_lut);
}

void apply_u16(const std::uint16_t* d_in, std::uint16_t* d_out, std::size_t n,
               const std::uint16_t* d_lut, cudaStream_t stream, const Tuning& t) {
  if (n == 0) return;
  if (d_in == nullptr || d_out == nullptr || d_lut == nullptr)
    throw UsageError("apply_u16: null device pointer");
  const std::size_t grid =
      std::min<std::size_t>(detail::ceil_div(n, 256), std::size_t(detail::sm_count()) * 16);
  pdl::launch(pdl::kEqualize16, t, apply_u16_kernel, dim3(unsigned(grid)), dim3(256), 0, stream,
              d_in, d_out, n, d_lut);
}

}  // namespace histeq::kernels
