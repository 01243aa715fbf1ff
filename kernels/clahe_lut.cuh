// clahe_lut.cuh — one tile's clip → redistribution → cumulative sum → LUT, by a whole block
// (OpenCV 4.6 CLAHE_CalcLut_Body, arithmetic in histeq/clahe_formula.hpp), and the kernel that
// runs it with one block per tile.
// In:  hist[0, kBins) uint32 counts of the tile (complete: every block that counts into it has
//      finished and fenced). Out: lut[0, kBins) of T; hist[0, kBins) set back to zero.
// Exact: yes (integer clip and sums; LUT values by clahe_formula::lut_value as the CPU).
// Each thread owns a contiguous run of ceil(kBins / blockDim.x) bins: the clipped excess is one
// block reduction, the cumulative sum one block scan of per-thread totals; the counters are
// read from L2 (__ldcg: they were written by other blocks' atomics), twice, and cleared.
#pragma once
#include <cstdint>

#include "histeq/clahe_formula.hpp"

namespace histeq::kernels::clahe_detail {

/// Sum of v over the block (every thread gets it). Uses s_tmp[0, 33). Ends synchronized.
__device__ __forceinline__ int block_sum(int v, int* s_tmp) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (lane == 0) s_tmp[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int w = lane < warps ? s_tmp[lane] : 0;
    for (int o = 16; o > 0; o >>= 1) w += __shfl_down_sync(0xffffffffu, w, o);
    if (lane == 0) s_tmp[32] = w;
  }
  __syncthreads();
  const int r = s_tmp[32];
  __syncthreads();
  return r;
}

/// Exclusive prefix sum of v over the block in thread order. Uses s_tmp[0, 33). Ends synchronized.
__device__ __forceinline__ int block_exclusive_scan(int v, int* s_tmp) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  int inc = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += n;
  }
  if (lane == 31) s_tmp[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    int w = lane < warps ? s_tmp[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += n;
    }
    if (lane < warps) s_tmp[lane] = w;  // inclusive sums of the warps
  }
  __syncthreads();
  const int r = (warp > 0 ? s_tmp[warp - 1] : 0) + inc - v;
  __syncthreads();
  return r;
}

/// The whole block builds one tile's LUT. blockDim.x must be a multiple of 32.
template <typename T, int kBins>
__device__ void block_tile_lut(std::uint32_t* hist, int clip, float lut_scale, T* lut, int* s_tmp) {
  namespace cf = histeq::clahe_formula;
  const int per = (kBins + int(blockDim.x) - 1) / int(blockDim.x);
  const int b0 = min(kBins, int(threadIdx.x) * per), b1 = min(kBins, b0 + per);
  int batch = 0, residual = 0, step = 1;
  if (clip > 0) {
    int excess = 0;
    for (int i = b0; i < b1; ++i) {
      const int h = int(__ldcg(hist + i));
      excess += h > clip ? h - clip : 0;
    }
    const int clipped = block_sum(excess, s_tmp);
    batch = clipped / kBins;
    residual = clipped - batch * kBins;
    step = cf::residual_step(kBins, residual);
  }
  auto count = [&](int i) {
    int h = int(__ldcg(hist + i));
    if (clip > 0)
      h = (h > clip ? clip : h) + batch + (cf::gets_residual(i, residual, step) ? 1 : 0);
    return h;
  };
  int mine = 0;
  for (int i = b0; i < b1; ++i) mine += count(i);
  int sum = block_exclusive_scan(mine, s_tmp);
  for (int i = b0; i < b1; ++i) {
    sum += count(i);
    lut[i] = static_cast<T>(cf::lut_value(sum, lut_scale, kBins - 1));
  }
  __syncthreads();  // every count() of this tile done before any bin is cleared
  for (int i = b0; i < b1; ++i) hist[i] = 0;
}

/// One WARP builds one 8-bit tile's LUT (256 bins, 8 per lane: two 16-byte loads from L2), with
/// warp shuffles only — no __syncthreads, so the warps of a block build several tiles at once.
/// Same arithmetic as block_tile_lut (clip, residual, inclusive sums, lut_value); hist and lut
/// 16-byte aligned. hist set back to zero.
__device__ __forceinline__ void warp_tile_lut_u8(std::uint32_t* hist, int clip, float lut_scale,
                                                 std::uint8_t* lut) {
  namespace cf = histeq::clahe_formula;
  const int lane = threadIdx.x & 31;
  const uint4* h4 = reinterpret_cast<const uint4*>(hist) + lane * 2;
  const uint4 qa = __ldcg(h4), qb = __ldcg(h4 + 1);
  int h[8] = {int(qa.x), int(qa.y), int(qa.z), int(qa.w),
              int(qb.x), int(qb.y), int(qb.z), int(qb.w)};
  const int b0 = lane * 8;
  if (clip > 0) {
    int excess = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) excess += h[j] > clip ? h[j] - clip : 0;
    const int clipped = int(__reduce_add_sync(0xffffffffu, unsigned(excess)));
    const int batch = clipped / 256, residual = clipped - batch * 256;
    const int step = cf::residual_step(256, residual);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      h[j] =
          (h[j] > clip ? clip : h[j]) + batch + (cf::gets_residual(b0 + j, residual, step) ? 1 : 0);
    }
  }
  int mine = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) mine += h[j];
  int inc = mine;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += n;
  }
  int sum = inc - mine;
  unsigned lo = 0, hi = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    sum += h[j];
    const unsigned v = unsigned(cf::lut_value(sum, lut_scale, 255));
    if (j < 4)
      lo |= v << (8 * j);
    else
      hi |= v << (8 * (j - 4));
  }
  reinterpret_cast<uint2*>(lut)[lane] = make_uint2(lo, hi);
  uint4* w4 = reinterpret_cast<uint4*>(hist) + lane * 2;
  w4[0] = make_uint4(0, 0, 0, 0);
  w4[1] = make_uint4(0, 0, 0, 0);
}

/// block_tile_lut for many bins (16-bit): warp w owns the contiguous bins [w·chunk, (w+1)·chunk),
/// chunk = kBins / warps, and its lanes walk them 32 at a time, so every counter load and LUT
/// store of a warp is one coalesced 128-byte (64-byte) access; the cumulative sum is a warp
/// scan per 32 bins carried along the chunk, offset by one block scan of the warps' totals.
/// kBins must be a multiple of 32 · warps. Same arithmetic and result as block_tile_lut.
template <typename T, int kBins>
__device__ void block_tile_lut_coalesced(std::uint32_t* hist, int clip, float lut_scale, T* lut,
                                         int* s_tmp) {
  namespace cf = histeq::clahe_formula;
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5),
            warps = int(blockDim.x >> 5);
  const int chunk = kBins / warps, c0 = warp * chunk, c1 = c0 + chunk;
  int batch = 0, residual = 0, step = 1;
  if (clip > 0) {
    int excess = 0;
    for (int i = c0 + lane; i < c1; i += 32) {
      const int h = int(__ldcg(hist + i));
      excess += h > clip ? h - clip : 0;
    }
    const int clipped = block_sum(excess, s_tmp);
    batch = clipped / kBins;
    residual = clipped - batch * kBins;
    step = cf::residual_step(kBins, residual);
  }
  auto count = [&](int i) {
    int h = int(__ldcg(hist + i));
    if (clip > 0)
      h = (h > clip ? clip : h) + batch + (cf::gets_residual(i, residual, step) ? 1 : 0);
    return h;
  };
  int mine = 0;
  for (int i = c0 + lane; i < c1; i += 32) mine += count(i);
  const int warp_total = int(__reduce_add_sync(0xffffffffu, unsigned(mine)));
  const int before = block_exclusive_scan(lane == 0 ? warp_total : 0, s_tmp);
  int carry = __shfl_sync(0xffffffffu, before, 0);
  for (int base = c0; base < c1; base += 32) {
    int inc = count(base + lane);
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, inc, o);
      if (lane >= o) inc += n;
    }
    lut[base + lane] = static_cast<T>(cf::lut_value(carry + inc, lut_scale, kBins - 1));
    carry += __shfl_sync(0xffffffffu, inc, 31);
  }
  __syncthreads();  // every count() of this tile done before any bin is cleared
  for (int i = c0 + lane; i < c1; i += 32) hist[i] = 0;
}

/// One block per tile: blockIdx.x = tile index. `coalesced`: block_tile_lut_coalesced where it
/// applies (many bins), else block_tile_lut.
template <typename T, int kBins>
__global__ void __launch_bounds__(1024)
    tile_lut_kernel(std::uint32_t* hist, int clip, float lut_scale, T* luts, bool coalesced) {
  __shared__ int s_tmp[33];
  const std::size_t t = blockIdx.x;
  if (kBins >= 32 * 32 && kBins % blockDim.x == 0 && coalesced) {
    block_tile_lut_coalesced<T, kBins>(hist + t * kBins, clip, lut_scale, luts + t * kBins, s_tmp);
  } else {
    block_tile_lut<T, kBins>(hist + t * kBins, clip, lut_scale, luts + t * kBins, s_tmp);
  }
}

}  // namespace histeq::kernels::clahe_detail
