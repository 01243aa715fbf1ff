// match.cuh — one entry of histogram matching's LUT on the device (histeq/match.hpp's rule,
// scikit-image's `_match_cumulative_cdf` for unsigned integers): NumPy's `np.interp` of a source
// quantile over the reference's occupied levels, rounded half to even. Shared by the 256-level
// kernel (match_lut.cu) and the 65536-level one (u16/match_lut16.cu).
//
// Every double operation is an explicit round-to-nearest intrinsic, in the host rule's order,
// so that nvcc cannot contract a multiply and an add into one fused operation: the device LUT
// equals match_lut / match_lut16 byte for byte.
#pragma once
#include <cstdint>

namespace histeq::kernels::match {

/// A cumulative count as a quantile: cum / total in double (both exact below 2^53).
__device__ __forceinline__ double quantile(unsigned long long cum, unsigned long long total) {
  return __ddiv_rn(__ull2double_rn(cum), __ull2double_rn(total));
}

/// The LUT entry of a source quantile x over the reference's k >= 1 occupied levels: q_at(j) is
/// the quantile of the j-th occupied level (strictly increasing, the last 1.0), level_at(j) the
/// level. np.interp: x below q_at(0) gives level_at(0); x at or above the last quantile the last
/// level; an exact hit that level; else slope · (x − q_j) + r_j with slope = (r_{j+1} − r_j) /
/// (q_{j+1} − q_j), each operation rounded once; then rint (half to even).
template <typename QAt, typename LevelAt>
__device__ __forceinline__ int entry(double x, int k, QAt q_at, LevelAt level_at) {
  int lo = 0, hi = k;  // lo = how many quantiles are <= x
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (q_at(mid) <= x)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return level_at(0);
  if (lo == k) return level_at(k - 1);
  const int j = lo - 1;
  const double qj = q_at(j);
  const int rj = level_at(j);
  if (qj == x) return rj;
  const double r0 = double(rj);
  const double slope =
      __ddiv_rn(__dsub_rn(double(level_at(j + 1)), r0), __dsub_rn(q_at(j + 1), qj));
  return __double2int_rn(__dadd_rn(__dmul_rn(slope, __dsub_rn(x, qj)), r0));
}

}  // namespace histeq::kernels::match
