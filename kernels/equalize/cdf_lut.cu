// cdf_lut — CDF (inclusive scan of 256 bins) and equalization LUT, one block per plane.
// In:  d_hist[p·256 + b] uint64 counts (device), p < planes. planes may be 0.
// Out: d_luts[p·256 + v] u8 (device), overwritten; equal to histeq::make_lut for every plane.
//      Async on `stream`; no host sync; no scratch.
// Exact: yes (uint64 scan; the per-entry formula is lut_formula.hpp, shared with the host).
// Algorithm: histogram equalization (Gonzalez & Woods, Digital Image Processing, §3.3) in the
// form of OpenCV's cv::equalizeHist; block-wide scan: cub::BlockScan (CCCL). v0 (first non-zero
// bin) = number of bins whose CDF is 0, since the CDF is monotone (one __syncthreads_count).
#include "equalize/cdf_lut.cuh"
#include "equalize/stages.hpp"
#include "histeq/error.hpp"
#include "support/cuda_check.hpp"

namespace histeq::kernels {
namespace {

using cdf::kLutBins;

__global__ void __launch_bounds__(kLutBins)
    cdf_lut_kernel(const std::uint64_t* __restrict__ d_hist, std::uint8_t* __restrict__ d_luts,
                   Formula f) {
  __shared__ cdf::TempStorage tmp;
  const std::uint64_t* hist = d_hist + std::size_t(blockIdx.x) * kLutBins;
  std::uint8_t* lut = d_luts + std::size_t(blockIdx.x) * kLutBins;
  cdf::block_cdf_lut(
      hist[threadIdx.x], [hist](int v) { return hist[v]; }, f, lut, tmp);
}

}  // namespace

void launch_cdf_lut_planes(const std::uint64_t* d_hist, int planes, std::uint8_t* d_luts, Formula f,
                           cudaStream_t stream) {
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
