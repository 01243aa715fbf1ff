// histeq/clahe_formula.hpp — the arithmetic of OpenCV 4.6's CLAHE (modules/imgproc/src/clahe.cpp:
// CLAHE_Impl::apply, CLAHE_CalcLut_Body, CLAHE_Interpolation_Body), one definition for host and
// device so that the CPU backend and the CUDA kernels give the same bytes.
//
// For a W×H image, a grid of tiles_x × tiles_y tiles and hist_size bins (256 for 8-bit, 65536
// for 16-bit):
//  - If tiles_x divides W and tiles_y divides H, tiles are W/tiles_x × H/tiles_y. Otherwise the
//    image is padded at the right by tiles_x − W % tiles_x columns and at the bottom by
//    tiles_y − H % tiles_y rows (BORDER_REFLECT_101; note: a full extra tiles_x columns when only
//    the height does not divide, as OpenCV does) and the tiles are the padded size / tiles.
//  - clip = clip_limit > 0 ? max(1, int(clip_limit · tile_area / hist_size)) : 0 (no clipping),
//    computed in double as OpenCV does; a clip at or above tile_area is 0 too (no bin can pass
//    it, so nothing changes but the conversion, which OpenCV leaves undefined for huge limits).
//  - Per tile: histogram; if clip > 0: every bin above clip is cut to clip, the excess summed
//    (clipped), every bin gets clipped / hist_size, and the residual r = clipped % hist_size
//    goes one each to bins 0, s, 2s, ... (r of them, s = max(hist_size / r, 1)).
//  - LUT: lut[i] = saturate(rint_even(float(cdf(i)) · lut_scale)), lut_scale = float(hist_size −
//    1) / tile_area (float32).
//  - Apply: bilinear between the LUTs of the four nearest tile centres, in float32, with
//    OpenCV's evaluation order (blend() below), rounded half to even and saturated.
// Every float operation below is a single IEEE round-to-nearest operation (no FMA contraction:
// the device code spells the intrinsics out; host code must be compiled without
// -ffp-contract=fast on targets with FMA — x86-64 without -mfma has none).
#pragma once
#include <cstdint>

#include "histeq/hd.hpp"

namespace histeq::clahe_formula {

/// OpenCV's borderInterpolate for BORDER_REFLECT_101 (…cba|abcd|dcb…), any p, len >= 1.
HISTEQ_HD int reflect101(int p, int len) {
  if (len == 1) return 0;
  while (p < 0 || p >= len) {
    if (p < 0)
      p = -p;
    else
      p = 2 * len - 2 - p;
  }
  return p;
}

/// The tile grid of one call (all ints, all on the padded image).
struct Geometry {
  int width = 0, height = 0;       ///< the image
  int tiles_x = 0, tiles_y = 0;    ///< the grid
  int tile_w = 0, tile_h = 0;      ///< one tile of the (padded) image
  int padded_w = 0, padded_h = 0;  ///< tiles_x · tile_w, tiles_y · tile_h (>= width, height)
  int hist_size = 0;               ///< 256 or 65536
  int clip = 0;                    ///< integer clip limit; 0 = no clipping
  float lut_scale = 0.f;           ///< (hist_size − 1) / tile area, float32
  bool padded() const { return padded_w != width || padded_h != height; }
  int tiles() const { return tiles_x * tiles_y; }
};

/// The integer clip limit of a tile of `area` counted pixels: 0 (no clipping) for clip_limit <= 0
/// or a clip at or above the area.
inline int clip_of(double clip_limit, int area, int hist_size) {
  if (!(clip_limit > 0.0)) return 0;
  const double c = clip_limit * area / hist_size;
  return c >= double(area) ? 0 : (c < 1.0 ? 1 : static_cast<int>(c));
}

/// The geometry OpenCV 4.6 derives for (width, height, grid, clip_limit, hist_size). Caller
/// checks width, height, tiles >= 1.
inline Geometry make_geometry(int width, int height, int tiles_x, int tiles_y, double clip_limit,
                              int hist_size) {
  Geometry g;
  g.width = width;
  g.height = height;
  g.tiles_x = tiles_x;
  g.tiles_y = tiles_y;
  g.hist_size = hist_size;
  if (width % tiles_x == 0 && height % tiles_y == 0) {
    g.padded_w = width;
    g.padded_h = height;
  } else {
    g.padded_w = width + tiles_x - width % tiles_x;
    g.padded_h = height + tiles_y - height % tiles_y;
  }
  g.tile_w = g.padded_w / tiles_x;
  g.tile_h = g.padded_h / tiles_y;
  const int area = g.tile_w * g.tile_h;
  g.lut_scale = static_cast<float>(hist_size - 1) / static_cast<float>(area);
  // A clip at or above the tile's pixel count cannot cut any bin: no clipping (0), the same
  // bytes, and no float-to-int conversion out of range (--clip 1e12 was undefined behaviour,
  // INT_MIN and so the strongest clipping on x86).
  g.clip = clip_of(clip_limit, area, hist_size);
  return g;
}

/// Masked CLAHE (clahe.hpp): the tile's clip and LUT scale from its counted pixels `count` (> 0)
/// in place of the tile area, by the same formulas.
inline void count_tile(Geometry& g, double clip_limit, int count) {
  g.lut_scale = static_cast<float>(g.hist_size - 1) / static_cast<float>(count);
  g.clip = clip_of(clip_limit, count, g.hist_size);
}

/// Bins that get one more count of the residual: i = k·step for k < residual.
HISTEQ_HD int residual_step(int hist_size, int residual) {
  const int s = residual > 0 ? hist_size / residual : 1;
  return s < 1 ? 1 : s;
}
HISTEQ_HD bool gets_residual(int i, int residual, int step) {
  return residual > 0 && i % step == 0 && i / step < residual;
}

/// saturate_cast<T>(float) of OpenCV: round half to even, clamp to [0, maxval].
HISTEQ_HD int round_sat(float v, int maxval) {
#if defined(__CUDA_ARCH__)
  const int r = __float2int_rn(v);
#else
  const int r = static_cast<int>(__builtin_rintf(v));
#endif
  return r < 0 ? 0 : (r > maxval ? maxval : r);
}

/// One LUT entry from the clipped cumulative count `sum`.
HISTEQ_HD int lut_value(int sum, float lut_scale, int maxval) {
#if defined(__CUDA_ARCH__)
  return round_sat(__fmul_rn(__int2float_rn(sum), lut_scale), maxval);
#else
  return round_sat(static_cast<float>(sum) * lut_scale, maxval);
#endif
}

/// 1 / tile size in float32 (inv_tw, inv_th of OpenCV).
HISTEQ_HD float inv_size(int t) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(1.0f, __int2float_rn(t));
#else
  return 1.0f / static_cast<float>(t);
#endif
}

/// The interpolation coordinates of position p (x or y) along an axis of `tiles` tiles of size
/// 1/inv: neighbour tiles t1 <= t2 (clamped to the grid) and weights a (of t2), a1 = 1 − a.
struct Axis {
  int t1, t2;
  float a, a1;
};
HISTEQ_HD Axis axis(int p, float inv, int tiles) {
#if defined(__CUDA_ARCH__)
  const float tf = __fsub_rn(__fmul_rn(__int2float_rn(p), inv), 0.5f);
  const int t1 = __float2int_rd(tf);
  const float a = __fsub_rn(tf, __int2float_rn(t1));
  const float a1 = __fsub_rn(1.0f, a);
#else
  const float tf = static_cast<float>(p) * inv - 0.5f;
  const float fl = __builtin_floorf(tf);
  const int t1 = static_cast<int>(fl);
  const float a = tf - static_cast<float>(t1);
  const float a1 = 1.0f - a;
#endif
  Axis r;
  r.t1 = t1 < 0 ? 0 : t1;
  r.t2 = t1 + 1 > tiles - 1 ? tiles - 1 : t1 + 1;
  r.a = a;
  r.a1 = a1;
  return r;
}

/// OpenCV's blend: (l11·xa1 + l12·xa)·ya1 + (l21·xa1 + l22·xa)·ya, left to right, each step
/// rounded to float32 (l11: LUT of tile (ty1, tx1), l12: (ty1, tx2), l21: (ty2, tx1), l22: (ty2,
/// tx2)).
HISTEQ_HD float blend(int l11, int l12, int l21, int l22, const Axis& x, const Axis& y) {
#if defined(__CUDA_ARCH__)
  const float top =
      __fadd_rn(__fmul_rn(__int2float_rn(l11), x.a1), __fmul_rn(__int2float_rn(l12), x.a));
  const float bot =
      __fadd_rn(__fmul_rn(__int2float_rn(l21), x.a1), __fmul_rn(__int2float_rn(l22), x.a));
  return __fadd_rn(__fmul_rn(top, y.a1), __fmul_rn(bot, y.a));
#else
  const float top = static_cast<float>(l11) * x.a1 + static_cast<float>(l12) * x.a;
  const float bot = static_cast<float>(l21) * x.a1 + static_cast<float>(l22) * x.a;
  return top * y.a1 + bot * y.a;
#endif
}

}  // namespace histeq::clahe_formula
