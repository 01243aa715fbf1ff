// lut.cpp — host CDF and LUT: the reference the device CDF/LUT kernels are compared against.
// The per-entry formula lives in lut_formula.hpp (shared with the device); this file only walks
// the 256 bins. Algorithm: histogram equalization (Gonzalez & Woods, Digital Image Processing,
// §3.3) in the form of OpenCV's cv::equalizeHist (modules/imgproc/src/histogram.cpp).
#include "histeq/lut.hpp"

#include "histeq/lut_formula.hpp"

namespace histeq {

std::array<std::uint64_t, 256> cumulate(const std::uint64_t* hist256) {
  std::array<std::uint64_t, 256> cdf{};
  std::uint64_t sum = 0;
  for (int v = 0; v < 256; ++v) {
    sum += hist256[v];
    cdf[v] = sum;
  }
  return cdf;
}

Lut make_lut(const std::uint64_t* hist256, Formula f) {
  Lut lut{};
  const auto cdf = cumulate(hist256);
  const std::uint64_t total = cdf[255];
  int v0 = 0;
  while (v0 < 256 && hist256[v0] == 0) ++v0;
  if (v0 == 256 || hist256[v0] == total) {  // empty or constant: identity (OpenCV copies it)
    for (int v = 0; v < 256; ++v) lut[v] = static_cast<std::uint8_t>(v);
    return lut;
  }
  const std::uint64_t h_v0 = hist256[v0];
  const float scale = formula::opencv_scale(total, h_v0);
  for (int v = 0; v < v0; ++v) lut[v] = 0;  // never occur
  lut[v0] = 0;
  for (int v = v0 + 1; v < 256; ++v) lut[v] = formula::lut_entry(f, cdf[v], h_v0, total, scale);
  return lut;
}

}  // namespace histeq
