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

/// Y = 0.299 R + 0.587 G + 0.114 B, in 14-bit fixed point.
HISTEQ_HD std::uint8_t luma(int r, int g, int b) {
  return static_cast<std::uint8_t>(descale14(r * 4899 + g * 9617 + b * 1868));
}

/// Cr = (R − Y)·0.713 + 128, Cb = (B − Y)·0.564 + 128.
HISTEQ_HD void chroma(int r, int b, int y, std::uint8_t& cr, std::uint8_t& cb) {
  cr = sat_u8(descale14((r - y) * 11682 + (128 << 14)));
  cb = sat_u8(descale14((b - y) * 9241 + (128 << 14)));
}

/// Back to RGB: R = Y + 1.403 (Cr−128), G = Y − 0.714 (Cr−128) − 0.344 (Cb−128),
/// B = Y + 1.773 (Cb−128).
HISTEQ_HD void to_rgb(int y, int cr, int cb, std::uint8_t& r, std::uint8_t& g, std::uint8_t& b) {
  const int dcr = cr - 128, dcb = cb - 128;
  r = sat_u8(y + descale14(dcr * 22987));
  g = sat_u8(y + descale14(dcb * -5636 + dcr * -11698));
  b = sat_u8(y + descale14(dcb * 29049));
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
