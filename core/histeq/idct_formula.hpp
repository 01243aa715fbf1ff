// histeq/idct_formula.hpp — the JPEG inverse DCT of one 8x8 block as libjpeg's "islow" method
// computes it (JDCT_ISLOW, the default of libjpeg-turbo's decoder and the one histeq's decoders
// ask for): the Loeffler-Ligtenberg-Moschytz factorization in 32-bit-scaled integers, 13
// fractional bits for the constants, 2 extra bits kept between the column and the row pass, the
// result level-shifted by 128 and clamped to 0..255. One definition for the host and the
// device (HISTEQ_HD), so that planes made from a file's coefficients on either equal the
// samples libjpeg-turbo's own decoder writes, byte for byte, for every block of valid JPEG data
// (libjpeg-turbo's SIMD and C versions agree there). Coefficients far outside what any 8-bit
// image quantizes to (a damaged file) may come out differently from libjpeg-turbo's, whose C
// and SIMD versions themselves differ there (one wraps, one saturates); this one saturates.
#pragma once
#include <cstddef>
#include <cstdint>

#include "histeq/hd.hpp"

namespace histeq::idct_formula {

/// The fixed-point constants: round(c * 2^13) for the cosines of the factorization.
constexpr int kConstBits = 13;
constexpr int kPass1Bits = 2;
constexpr std::int64_t kC0_298631336 = 2446;
constexpr std::int64_t kC0_390180644 = 3196;
constexpr std::int64_t kC0_541196100 = 4433;
constexpr std::int64_t kC0_765366865 = 6270;
constexpr std::int64_t kC0_899976223 = 7373;
constexpr std::int64_t kC1_175875602 = 9633;
constexpr std::int64_t kC1_501321110 = 12299;
constexpr std::int64_t kC1_847759065 = 15137;
constexpr std::int64_t kC1_961570560 = 16069;
constexpr std::int64_t kC2_053119869 = 16819;
constexpr std::int64_t kC2_562915447 = 20995;
constexpr std::int64_t kC3_072711026 = 25172;

/// x / 2^n rounded half up (an arithmetic shift after adding half).
HISTEQ_HD std::int64_t descale(std::int64_t x, int n) {
  return (x + (std::int64_t(1) << (n - 1))) >> n;
}

/// The one-dimensional transform of eight inputs s[0..8) (dequantized, or the first pass's
/// output) into the eight sums a caller descales: out[k] for k = 0..7, still scaled by
/// 2^kConstBits. The even part from s0, s2, s4, s6; the odd part from s1, s3, s5, s7.
HISTEQ_HD void idct_1d(std::int64_t s0, std::int64_t s1, std::int64_t s2, std::int64_t s3,
                       std::int64_t s4, std::int64_t s5, std::int64_t s6, std::int64_t s7,
                       std::int64_t* out) {
  // even part
  const std::int64_t z1 = (s2 + s6) * kC0_541196100;
  const std::int64_t e2 = z1 - s6 * kC1_847759065;
  const std::int64_t e3 = z1 + s2 * kC0_765366865;
  const std::int64_t e0 = (s0 + s4) * (std::int64_t(1) << kConstBits);
  const std::int64_t e1 = (s0 - s4) * (std::int64_t(1) << kConstBits);
  const std::int64_t t10 = e0 + e3, t13 = e0 - e3, t11 = e1 + e2, t12 = e1 - e2;
  // odd part
  std::int64_t o0 = s7, o1 = s5, o2 = s3, o3 = s1;
  std::int64_t a = o0 + o3, b = o1 + o2, c = o0 + o2, d = o1 + o3;
  const std::int64_t z5 = (c + d) * kC1_175875602;
  o0 *= kC0_298631336;
  o1 *= kC2_053119869;
  o2 *= kC3_072711026;
  o3 *= kC1_501321110;
  a *= -kC0_899976223;
  b *= -kC2_562915447;
  c = c * -kC1_961570560 + z5;
  d = d * -kC0_390180644 + z5;
  o0 += a + c;
  o1 += b + d;
  o2 += b + c;
  o3 += a + d;
  out[0] = t10 + o3;
  out[7] = t10 - o3;
  out[1] = t11 + o2;
  out[6] = t11 - o2;
  out[2] = t12 + o1;
  out[5] = t12 - o1;
  out[3] = t13 + o0;
  out[4] = t13 - o0;
}

/// Pass 1 of a block, column `col`: the dequantized column of `coef` (64 coefficients in natural,
/// row-major order) times `quant` (natural order) into ws[8k + col], k = 0..7, kPass1Bits extra
/// bits kept, as libjpeg's int workspace holds them.
HISTEQ_HD void idct_column(const std::int16_t* coef, const std::uint16_t* quant, int col,
                           std::int32_t* ws) {
  std::int64_t s[8];
  for (int k = 0; k < 8; ++k) s[k] = std::int64_t(coef[8 * k + col]) * quant[8 * k + col];
  std::int64_t r[8];
  idct_1d(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], r);
  for (int k = 0; k < 8; ++k)
    ws[8 * k + col] = std::int32_t(descale(r[k], kConstBits - kPass1Bits));
}

/// Pass 2 of a block, one row: the eight workspace values of the row → eight samples at out
/// (level-shifted by 128, clamped to 0..255).
HISTEQ_HD void idct_row(const std::int32_t* w, std::uint8_t* out) {
  std::int64_t r[8];
  idct_1d(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], r);
  for (int k = 0; k < 8; ++k) {
    const std::int64_t v = descale(r[k], kConstBits + kPass1Bits + 3) + 128;
    out[k] = std::uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
  }
}

/// One block: `coef` (64 quantized coefficients in natural, row-major order, as libjpeg keeps
/// them) times `quant` (the component's table, natural order) → 8x8 samples at out (rows
/// `stride` bytes apart).
HISTEQ_HD void idct_islow_block(const std::int16_t* coef, const std::uint16_t* quant,
                                std::uint8_t* out, std::size_t stride) {
  std::int32_t ws[64];
  for (int col = 0; col < 8; ++col) idct_column(coef, quant, col, ws);
  for (int row = 0; row < 8; ++row) idct_row(ws + 8 * row, out + std::size_t(row) * stride);
}

}  // namespace histeq::idct_formula
