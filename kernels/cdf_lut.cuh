// cdf_lut.cuh — the block-wide CDF + LUT of one 256-bin histogram, one thread per bin: shared by
// the per-plane cdf_lut kernel (cdf_lut.cu) and the batched equalizer's last block per image
// (batched.cu). Inclusive scan with cub::BlockScan; v0 (first non-zero bin) = number of bins
// whose CDF is 0, since the CDF is monotone (one __syncthreads_count); the entry formula is
// lut_formula.hpp's, shared with the host (histeq::make_lut).
#pragma once
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "histeq/lut_formula.hpp"

namespace histeq::kernels::cdf {

inline constexpr int kLutBins = 256;  // the LUT is for 8-bit samples: one thread per bin
using Scan = cub::BlockScan<std::uint64_t, kLutBins>;

struct TempStorage {
  typename Scan::TempStorage scan;
  std::uint64_t total;
};

/// Every thread of a 256-thread block calls it with h = hist[threadIdx.x] and gets
/// lut[threadIdx.x] written (= make_lut(hist, f)[threadIdx.x]). hist_at(v) reads bin v of the
/// same histogram (the caller's memory).
template <typename HistAt>
__device__ __forceinline__ void block_cdf_lut(std::uint64_t h, HistAt hist_at, Formula f,
                                              std::uint8_t* lut, TempStorage& tmp) {
  const int v = threadIdx.x;
  std::uint64_t cdf = 0;
  Scan(tmp.scan).InclusiveSum(h, cdf);
  if (v == kLutBins - 1) tmp.total = cdf;
  // v0 = first bin with h > 0 = count of bins with cdf == 0 (also a barrier for tmp.total).
  const int v0 = __syncthreads_count(cdf == 0);
  const std::uint64_t total = tmp.total;

  if (v0 == kLutBins) {  // empty histogram: identity
    lut[v] = static_cast<std::uint8_t>(v);
    return;
  }
  const std::uint64_t h_v0 = hist_at(v0);
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

}  // namespace histeq::kernels::cdf
