// cdf_lut — CDF (inclusive scan of 256 bins) and equalization LUT, one block per plane.
// In:  d_hist[p·256 + b] uint64 counts (device), p < planes. planes may be 0.
// Out: d_luts[p·256 + v] u8 (device), overwritten; equal to histeq::make_lut for every plane.
//      Async on `stream`; no host sync; no scratch.
// Exact: yes (uint64 scan; the per-entry formula is lut_formula.hpp, shared with the host).
// Algorithm: histogram equalization (Gonzalez & Woods, Digital Image Processing, §3.3) in the
// form of OpenCV's cv::equalizeHist; block-wide scan: cub::BlockScan (CCCL). v0 (first non-zero
// bin) = number of bins whose CDF is 0, since the CDF is monotone (one __syncthreads_count).
#include <cub/block/block_scan.cuh>

#include "cuda_check.hpp"
#include "histeq/error.hpp"
#include "histeq/lut_formula.hpp"
#include "stages.hpp"

namespace histeq::kernels {
namespace {

constexpr int kLutBins = 256;  // the LUT is for 8-bit samples: one thread per bin

__global__ void __launch_bounds__(kLutBins)
cdf_lut_kernel(const std::uint64_t* __restrict__ d_hist, std::uint8_t* __restrict__ d_luts,
               Formula f) {
  using Scan = cub::BlockScan<std::uint64_t, kLutBins>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ std::uint64_t s_total;

  const int v = threadIdx.x;
  const std::uint64_t* hist = d_hist + std::size_t(blockIdx.x) * kLutBins;
  std::uint8_t* lut = d_luts + std::size_t(blockIdx.x) * kLutBins;

  const std::uint64_t h = hist[v];
  std::uint64_t cdf = 0;
  Scan(scan_storage).InclusiveSum(h, cdf);
  if (v == kLutBins - 1) s_total = cdf;
  // v0 = first bin with h > 0 = count of bins with cdf == 0 (also a barrier for s_total).
  const int v0 = __syncthreads_count(cdf == 0);
  const std::uint64_t total = s_total;

  if (v0 == kLutBins) {  // empty histogram: identity
    lut[v] = static_cast<std::uint8_t>(v);
    return;
  }
  const std::uint64_t h_v0 = hist[v0];
  if (h_v0 == total) {  // constant image: identity (OpenCV copies it)
    lut[v] = static_cast<std::uint8_t>(v);
    return;
  }
  if (v <= v0) {  // bins below v0 never occur; v0 itself maps to 0
    lut[v] = 0;
    return;
  }
  const float scale = formula::opencv_scale(total, h_v0);
  lut[v] = formula::lut_entry(f, cdf, h_v0, total, scale);
}

}  // namespace

void launch_cdf_lut_planes(const std::uint64_t* d_hist, int planes, std::uint8_t* d_luts,
                           Formula f, cudaStream_t stream) {
  if (planes < 0) throw UsageError("cdf_lut: planes must be >= 0, got " + std::to_string(planes));
  if (planes == 0) return;
  cdf_lut_kernel<<<planes, kLutBins, 0, stream>>>(d_hist, d_luts, f);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

void launch_cdf_lut(const std::uint64_t* d_hist256, std::uint8_t* d_lut, Formula f,
                    cudaStream_t stream) {
  launch_cdf_lut_planes(d_hist256, 1, d_lut, f, stream);
}

cudaError_t probe_device_code() {
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, cdf_lut_kernel);
  if (e != cudaSuccess) cudaGetLastError();  // do not leave the error for the next check
  return e;
}

}  // namespace histeq::kernels
