// clahe_lut.cuh — one tile's clip → redistribution → cumulative sum → LUT (OpenCV 4.6
// CLAHE_CalcLut_Body, arithmetic in histeq/clahe_formula.hpp): by a whole block (8-bit tiles whose
// counters are in L2), by one warp (8-bit counts in registers), and by the two blocks of a
// thread-block cluster (16-bit: 65536 bins, each block half of them).
// In:  the tile's uint32 counts (complete: every block that counts into them has finished and
//      fenced). Out: the LUT of the sample type; the counters read from L2 set back to zero.
// Exact: yes (integer clip and sums; LUT values by clahe_formula::lut_value as the CPU).
#pragma once
#include <cooperative_groups.h>

#include <cstdint>

#include "histeq/clahe_formula.hpp"

namespace histeq::kernels::clahe_detail {

/// Where the 16-bit LUT step reads counts besides the tile counters: the packed tile
/// histograms' rows (clahe_hist.cu), `parts` rows per tile, row t·parts + p holding bin i in
/// half i >> 15 of word i & 0x7FFF (partials nullptr: the counters hold everything).
struct LutSources {
  const std::uint32_t* partials = nullptr;
  int parts = 0;
};

/// One tile's view of LutSources.
struct TileSources {
  const std::uint32_t* part = nullptr;  ///< the tile's first partial row
  int parts = 0;
  __device__ TileSources(const LutSources& s, std::size_t t) {
    if (s.partials != nullptr) {
      part = s.partials + t * std::size_t(s.parts) * 32768;
      parts = s.parts;
    }
  }
  /// The tile's count of bin i: its counter (from L2) plus its partial halves.
  __device__ __forceinline__ int count(const std::uint32_t* hist, int i) const {
    int h = int(__ldcg(hist + i));
    if (part != nullptr) {
      const unsigned shift = unsigned(i >> 15) * 16u;
      for (int p = 0; p < parts; ++p) {
        h += int((__ldcg(part + std::size_t(p) * 32768 + (i & 0x7FFF)) >> shift) & 0xFFFFu);
      }
    }
    return h;
  }
};

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

/// The whole block builds one tile's LUT from its counters in L2 (read twice, __ldcg: other
/// blocks' atomics wrote them), then clears them. Each thread owns a contiguous run of
/// ceil(kBins / blockDim.x) bins: the clipped excess is one block reduction, the cumulative sum
/// one block scan of per-thread totals. blockDim.x must be a multiple of 32.
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

/// One WARP builds one 8-bit tile's LUT from counts already in registers (lane l holds bins
/// [8l, 8l + 8) in h), with warp shuffles only — no __syncthreads, so the warps of a block build
/// several tiles at once. Same arithmetic as block_tile_lut (clip, residual, inclusive sums,
/// lut_value); lut 8-byte aligned.
__device__ __forceinline__ void warp_lut_u8(int (&h)[8], int clip, float lut_scale,
                                            std::uint8_t* lut) {
  namespace cf = histeq::clahe_formula;
  const int lane = threadIdx.x & 31;
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
}

/// warp_lut_u8 from a tile's counters in L2 (two 16-byte loads per lane; hist 16-byte aligned),
/// set back to zero.
__device__ __forceinline__ void warp_tile_lut_u8(std::uint32_t* hist, int clip, float lut_scale,
                                                 std::uint8_t* lut) {
  const int lane = threadIdx.x & 31;
  const uint4* h4 = reinterpret_cast<const uint4*>(hist) + lane * 2;
  const uint4 qa = __ldcg(h4), qb = __ldcg(h4 + 1);
  int h[8] = {int(qa.x), int(qa.y), int(qa.z), int(qa.w),
              int(qb.x), int(qb.y), int(qb.z), int(qb.w)};
  warp_lut_u8(h, clip, lut_scale, lut);
  uint4* w4 = reinterpret_cast<uint4*>(hist) + lane * 2;
  w4[0] = make_uint4(0, 0, 0, 0);
  w4[1] = make_uint4(0, 0, 0, 0);
}

/// cf::gets_residual(i, residual, step) for 0 <= i < 65536 without a division: floor(i / step)
/// as umulhi(i, ceil(2^32 / step)), exact because i · step < 2^32 (the error of the rounded-up
/// reciprocal times i stays below 1 / step).
struct ResidualTest {
  int residual = 0, step = 1;
  unsigned magic = 0;
  __device__ ResidualTest(int r, int s) : residual(r), step(s) {
    magic = s > 1 ? 0xFFFFFFFFu / unsigned(s) + 1u : 0u;
  }
  __device__ __forceinline__ bool operator()(int i) const {
    if (residual <= 0) return false;
    if (step == 1) return i < residual;
    const unsigned q = __umulhi(unsigned(i), magic);
    return unsigned(i) == q * unsigned(step) && int(q) < residual;
  }
  /// The four tests of bins i..i+3 (i < 65533) as bits 0..3. From step 4 on at most one of
  /// them is a multiple of step: k = ceil(i / step), bin k·step if k < residual.
  __device__ __forceinline__ unsigned group4(unsigned i) const {
    if (residual <= 0) return 0u;
    if (step < 4) {
      return ((*this)(int(i)) ? 1u : 0u) | ((*this)(int(i + 1)) ? 2u : 0u) |
             ((*this)(int(i + 2)) ? 4u : 0u) | ((*this)(int(i + 3)) ? 8u : 0u);
    }
    const unsigned q = __umulhi(i, magic);
    const unsigned k = q + (q * unsigned(step) != i ? 1u : 0u);
    const unsigned d = k * unsigned(step) - i;
    return d < 4u && int(k) < residual ? 1u << d : 0u;
  }
};

/// The LUT of one 16-bit tile (65536 bins) by the two blocks of a thread-block cluster, rank r
/// owning bins [r·32768, (r+1)·32768): warp w of a block owns a contiguous chunk of its bins and
/// its lanes walk them 32 at a time, so every counter load and LUT store of a warp is one
/// coalesced access; the cumulative sum is a warp scan per 32 bins carried along the chunk,
/// offset by one block scan of the warps' totals and, for rank 1, by rank 0's total (read from
/// its shared memory through DSMEM, as is the partner's clipped excess). The counts are read
/// twice (clipped excess and clipped sums in one pass, then the scan), each time kGroup steps of
/// 32 bins at once, so a thread has kGroup · (1 + parts) loads in flight instead of one chain of
/// dependent L2 round trips (ncu, H200, 8x8 tiles, 16M: 193 µs for the former three passes of
/// one step at a time in one block per tile); the residual test is division-free. 32768 must be
/// a multiple of 32 · kGroup · warps. Same arithmetic and result as block_tile_lut.
__device__ inline void cluster_tile_lut16(std::uint32_t* hist, int clip, float lut_scale,
                                          std::uint16_t* lut, int* s_tmp, const TileSources& src) {
  namespace cf = histeq::clahe_formula;
  constexpr int kBins = 65536;
  constexpr int kGroup = 8;
  __shared__ int s_share[2];  // [0]: this block's clipped excess, [1]: its clipped total
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5),
            warps = int(blockDim.x >> 5);
  auto cluster = cooperative_groups::this_cluster();
  const unsigned rank = cluster.block_rank();
  const int chunk = kBins / 2 / warps;
  const int c0 = int(rank) * (kBins / 2) + warp * chunk, c1 = c0 + chunk;
  // Pass 1: the clipped excess and the sum of min(h, clip) (of h without clipping).
  int excess = 0, kept = 0;
  for (int base = c0; base < c1; base += 32 * kGroup) {
    int h[kGroup];
#pragma unroll
    for (int k = 0; k < kGroup; ++k) h[k] = src.count(hist, base + 32 * k + lane);
#pragma unroll
    for (int k = 0; k < kGroup; ++k) {
      if (clip > 0) {
        excess += h[k] > clip ? h[k] - clip : 0;
        kept += h[k] > clip ? clip : h[k];
      } else {
        kept += h[k];
      }
    }
  }
  int batch = 0, residual = 0, step = 1;
  if (clip > 0) {
    int clipped = block_sum(excess, s_tmp);
    if (threadIdx.x == 0) s_share[0] = clipped;
    cluster.sync();
    clipped += *cluster.map_shared_rank(&s_share[0], rank ^ 1u);
    batch = clipped / kBins;
    residual = clipped - batch * kBins;
    step = cf::residual_step(kBins, residual);
  }
  const ResidualTest gets(residual, step);
  int mine = kept;
  if (clip > 0) {
    mine += batch * (chunk / 32);
    for (int i = c0 + lane; i < c1; i += 32) mine += gets(i) ? 1 : 0;
  }
  const int warp_total = int(__reduce_add_sync(0xffffffffu, unsigned(mine)));
  int before = block_exclusive_scan(lane == 0 ? warp_total : 0, s_tmp);
  {
    // Rank 1's bins follow rank 0's: add rank 0's clipped total.
    const int block_total = block_sum(lane == 0 ? warp_total : 0, s_tmp);
    if (threadIdx.x == 0) s_share[1] = block_total;
    cluster.sync();
    if (rank == 1) before += *cluster.map_shared_rank(&s_share[1], 0u);
    cluster.sync();  // the partner's shared words are read before either block goes on
  }
  int carry = __shfl_sync(0xffffffffu, before, 0);
  // Pass 2: the clipped counts again, scanned.
  for (int base = c0; base < c1; base += 32 * kGroup) {
    int h[kGroup];
#pragma unroll
    for (int k = 0; k < kGroup; ++k) h[k] = src.count(hist, base + 32 * k + lane);
#pragma unroll
    for (int k = 0; k < kGroup; ++k) {
      const int i = base + 32 * k + lane;
      int inc = h[k];
      if (clip > 0) inc = (inc > clip ? clip : inc) + batch + (gets(i) ? 1 : 0);
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += n;
      }
      lut[i] = static_cast<std::uint16_t>(cf::lut_value(carry + inc, lut_scale, kBins - 1));
      carry += __shfl_sync(0xffffffffu, inc, 31);
    }
  }
  __syncthreads();  // every count of this block's bins read before any is cleared
  for (int i = c0 + lane; i < c1; i += 32) hist[i] = 0;
}

}  // namespace histeq::kernels::clahe_detail
