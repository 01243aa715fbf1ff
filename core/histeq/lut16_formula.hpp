// histeq/lut16_formula.hpp — the 16-bit equalization LUT formula (equalize16.hpp describes it),
// one definition for the host (cpu::equalize16, make_lut16) and the device
// (kernels/u16/hist_u16.cu). Core room: the standard library only.
#pragma once
#include <cstdint>

#include "histeq/hd.hpp"

namespace histeq {

inline constexpr int kBins16 = 65536;

namespace formula16 {
/// scale = 65535 / (N − h[v0]) in float32 (IEEE round to nearest).
HISTEQ_HD float scale(std::uint64_t total, std::uint64_t h_v0) {
  const float d = static_cast<float>(total - h_v0);
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(65535.0f, d);
#else
  return 65535.0f / d;
#endif
}
/// lut[v] for v > v0 from cdf(v).
HISTEQ_HD std::uint16_t entry(std::uint64_t cdf_v, std::uint64_t h_v0, float scale) {
  const std::uint64_t c = cdf_v - h_v0;
#if defined(__CUDA_ARCH__)
  const int r = __float2int_rn(__fmul_rn(__ull2float_rn(c), scale));
#else
  const int r = static_cast<int>(__builtin_rintf(static_cast<float>(c) * scale));
#endif
  return static_cast<std::uint16_t>(r < 0 ? 0 : (r > 65535 ? 65535 : r));
}
}  // namespace formula16

}  // namespace histeq
