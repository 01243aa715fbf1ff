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

/// The LUT entry of bin t = threadIdx.x (< 256) of a 256-bin histogram in a block of kBlock ≥ 256
/// threads (lut_value's entries, as block_cdf_lut): thread t passes count = hist[t], threads from
/// 256 on pass 0 and get 0; every thread of the block calls it (it holds block barriers). The
/// inclusive scan (the CDF, left in cdf[0,256), shared memory) is a warp-shuffle scan of each
/// warp's 32 bins plus the totals of the warps before it (Harris, Sengupta & Owens, GPU Gems 3
/// ch. 39; CUB's WarpScan), three block barriers in all; v0, the first non-zero bin, is the
/// number of bins whose CDF is still 0 (__syncthreads_count). For blocks larger than
/// block_cdf_lut's 256 threads: the fused equalizers and the region histogram's last block.
template <int kBlock>
__device__ __forceinline__ std::uint32_t warp_scan_lut_entry(unsigned long long count, Formula f,
                                                             unsigned long long* cdf) {
  static_assert(kBlock >= kLutBins && kBlock % 32 == 0, "one thread per bin");
  __shared__ unsigned long long warp_total[kLutBins / 32];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  unsigned long long x = count;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const unsigned long long y = __shfl_up_sync(0xFFFFFFFFu, x, off);
    if (lane >= off) x += y;
  }
  if (t < kLutBins && lane == 31) warp_total[warp] = x;
  __syncthreads();
  if (t < kLutBins) {
    for (int w = 0; w < warp; ++w) x += warp_total[w];
    cdf[t] = x;
  }
  // Bins before the first non-zero one have CDF 0; the barrier also publishes cdf[].
  const int v0 = __syncthreads_count(t < kLutBins && x == 0);
  if (t >= kLutBins) return 0;
  const unsigned long long total = cdf[kLutBins - 1];
  if (v0 >= kLutBins || cdf[v0] == total) return std::uint32_t(t);  // empty or constant: identity
  if (t <= v0) return 0;
  const unsigned long long h0 = cdf[v0];  // cdf(v0) = h[v0]
  return formula::lut_entry(f, x, h0, total, formula::opencv_scale(total, h0));
}

}  // namespace histeq::kernels::cdf
