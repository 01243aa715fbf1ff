// histeq/color.hpp — RGB ↔ YCrCb (BT.601 full range) in OpenCV's 8-bit fixed point
// (cv::COLOR_RGB2YCrCb / COLOR_YCrCb2RGB, modules/imgproc/src/color_yuv.simd.hpp: 14-bit
// coefficients, rounding by adding 2^13 before the shift). One definition for host and device.
#pragma once
#include <cstdint>

#include "histeq/hd.hpp"

namespace histeq::color {

HISTEQ_HD int descale14(int x) { return (x + (1 << 13)) >> 14; }
HISTEQ_HD std::uint8_t sat_u8(int x) {
  return static_cast<std::uint8_t>(x < 0 ? 0 : (x > 255 ? 255 : x));
}

/// Y = 0.299 R + 0.587 G + 0.114 B, in 14-bit fixed point: descale14(luma_sum(r, g, b)).
/// luma_sum is linear, so luma_sum(r, 0, 0) + luma_sum(0, g, 0) + luma_sum(0, 0, b) is the same
/// integer (the CPU backend tabulates the three terms).
HISTEQ_HD int luma_sum(int r, int g, int b) { return r * 4899 + g * 9617 + b * 1868; }
HISTEQ_HD std::uint8_t luma(int r, int g, int b) {
  return static_cast<std::uint8_t>(descale14(luma_sum(r, g, b)));
}

/// Cr = (R − Y)·0.713 + 128, Cb = (B − Y)·0.564 + 128.
HISTEQ_HD void chroma(int r, int b, int y, std::uint8_t& cr, std::uint8_t& cb) {
  cr = sat_u8(descale14((r - y) * 11682 + (128 << 14)));
  cb = sat_u8(descale14((b - y) * 9241 + (128 << 14)));
}

/// What to_rgb adds to Y for each channel, before saturation. G's term is rounded once from the
/// sum of a Cr part and a Cb part (g_cr + g_cb), so it is not a sum of two rounded terms; the CPU
/// backend tabulates the parts (cpu_backend.cpp).
HISTEQ_HD int r_term(int cr) { return descale14((cr - 128) * 22987); }
HISTEQ_HD int g_cr(int cr) { return (cr - 128) * -11698; }
HISTEQ_HD int g_cb(int cb) { return (cb - 128) * -5636; }
HISTEQ_HD int g_term(int cr, int cb) { return descale14(g_cb(cb) + g_cr(cr)); }
HISTEQ_HD int b_term(int cb) { return descale14((cb - 128) * 29049); }

/// Back to RGB: R = Y + 1.403 (Cr−128), G = Y − 0.714 (Cr−128) − 0.344 (Cb−128),
/// B = Y + 1.773 (Cb−128).
HISTEQ_HD void to_rgb(int y, int cr, int cb, std::uint8_t& r, std::uint8_t& g, std::uint8_t& b) {
  r = sat_u8(y + r_term(cr));
  g = sat_u8(y + g_term(cr, cb));
  b = sat_u8(y + b_term(cb));
}

/// The luma mode's whole per-pixel map: equalize Y through lut, keep Cr and Cb.
HISTEQ_HD void equalize_luma(std::uint8_t& r, std::uint8_t& g, std::uint8_t& b,
                             const std::uint8_t* lut) {
  const int y = luma(r, g, b);
  std::uint8_t cr, cb;
  chroma(r, b, y, cr, cb);
  to_rgb(lut[y], cr, cb, r, g, b);
}

}  // namespace histeq::color
