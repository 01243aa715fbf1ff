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

/// lut[v] of bin v from the histogram's inclusive CDF: cdf_v = cdf(v), v0 = the first non-empty
/// bin (kLutBins for an empty histogram), h_v0 = hist[v0] (any value when v0 == kLutBins),
/// total = cdf(255). Empty or constant histograms map to the identity (OpenCV copies a constant
/// image); bins up to v0 map to 0; the rest take lut_formula.hpp's entry.
__device__ __forceinline__ std::uint8_t lut_value(int v, std::uint64_t cdf_v, int v0,
                                                  std::uint64_t h_v0, std::uint64_t total,
                                                  Formula f) {
  if (v0 == kLutBins || h_v0 == total) return static_cast<std::uint8_t>(v);
  if (v <= v0) return 0;
  return formula::lut_entry(f, cdf_v, h_v0, total, formula::opencv_scale(total, h_v0));
}

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
  const std::uint64_t h_v0 = v0 < kLutBins ? hist_at(v0) : 0;
  lut[v] = lut_value(v, cdf, v0, h_v0, total, f);
}

}  // namespace histeq::kernels::cdf
