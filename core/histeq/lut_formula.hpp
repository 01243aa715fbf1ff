// histeq/lut_formula.hpp — the CDF → LUT formulas, one definition for host and device.
//
// With a 256-bin histogram h of N pixels, v0 the first bin with h[v0] > 0, and
// cdf(v) = h[0] + ... + h[v]:
//  opencv (default): exactly cv::equalizeHist (OpenCV 4.x, modules/imgproc/src/histogram.cpp):
//      scale  = float32(255) / float32(N − h[v0])
//      lut[v] = round-half-even(float32(float32(cdf(v) − h[v0]) · scale)),  v > v0;  lut[v0] = 0.
//  exact: the same mapping in exact integer arithmetic, rounding half up:
//      lut[v] = floor(((cdf(v) − h[v0]) · 510 + d) / (2d)),  d = N − h[v0].
//  The two differ where float32 rounding moves a product across .5 (e.g. a product that is
//  exactly k + .5 goes to the even neighbour in opencv and up in exact), or where cdf − h[v0]
//  exceeds 2^24 and is no longer exact in float32 (images over 16 megapixels).
//  A constant image (h[v0] == N) maps to itself: lut[v] = v. Bins below v0 never occur; they map
//  to 0.
#pragma once
#include <cstdint>

#include "histeq/hd.hpp"
#include "histeq/types.hpp"

namespace histeq::formula {

/// Scale factor of the opencv formula: 255 / (N − h[v0]) in float32, IEEE round-to-nearest.
HISTEQ_HD float opencv_scale(std::uint64_t total, std::uint64_t h_v0) {
  const float d = static_cast<float>(total - h_v0);
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(255.0f, d);
#else
  return 255.0f / d;
#endif
}

/// One LUT entry. cdf_v = cdf(v); h_v0 = h[v0]; total = N. Caller guarantees v >= v0 and
/// h_v0 < total (not a constant image).
HISTEQ_HD std::uint8_t lut_entry(Formula f, std::uint64_t cdf_v, std::uint64_t h_v0,
                                 std::uint64_t total, float scale) {
  const std::uint64_t c = cdf_v - h_v0;
  if (f == Formula::exact) {
    const std::uint64_t d = total - h_v0;
    const std::uint64_t r = (c * 510u + d) / (2u * d);
    return static_cast<std::uint8_t>(r > 255u ? 255u : r);
  }
#if defined(__CUDA_ARCH__)
  const float p = __fmul_rn(__ull2float_rn(c), scale);
  const int r = __float2int_rn(p);  // round half to even, as cvRound
#else
  const float p = static_cast<float>(c) * scale;
  const int r = static_cast<int>(__builtin_rintf(p));  // default rounding mode: half to even
#endif
  return static_cast<std::uint8_t>(r < 0 ? 0 : (r > 255 ? 255 : r));
}

}  // namespace histeq::formula
