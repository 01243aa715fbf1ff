// clahe_cells.cuh — interpolation cells of the CLAHE apply (clahe_apply_cell.cu,
// clahe_apply_strip.cu): the positions between two tile centres along one axis, where the pixels
// blend the same pair of tiles. Cell c holds the positions whose floor(p · inv − 0.5) is c − 1
// (cell 0: the positions before the first tile centre; cell `tiles`: those after the last),
// computed with the very float operations of clahe_formula::axis, so that the cell edges are
// exactly where the per-pixel formula changes tiles.
#pragma once
#include <cuda_runtime.h>

namespace histeq::kernels::clahe_detail {

/// floor(p · inv − 0.5) as clahe_formula::axis computes it (before clamping).
__device__ __forceinline__ int raw_t1(int p, float inv) {
  return __float2int_rd(__fsub_rn(__fmul_rn(__int2float_rn(p), inv), 0.5f));
}

/// The cell of position p: raw_t1 + 1, clamped to [0, tiles].
__device__ __forceinline__ int cell_of(int p, float inv, int tiles) {
  const int c = raw_t1(p, inv) + 1;
  return c < 0 ? 0 : (c > tiles ? tiles : c);
}

/// First position p in [0, len] whose raw_t1 is >= c − 1: the start of cell c (cell 0 starts
/// at 0). raw_t1 is non-decreasing in p, so a walk from the real-valued boundary (c − 0.5) ·
/// tile finds it in a step or two.
__device__ __forceinline__ int cell_start(int c, int tile, float inv, int len) {
  if (c <= 0) return 0;
  int p = int((static_cast<long long>(2 * c - 1) * tile) / 2);
  p = p < 0 ? 0 : (p > len ? len : p);
  while (p > 0 && raw_t1(p - 1, inv) >= c - 1) --p;
  while (p < len && raw_t1(p, inv) < c - 1) ++p;
  return p;
}

}  // namespace histeq::kernels::clahe_detail
