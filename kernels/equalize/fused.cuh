// fused.cuh — whole 8-bit equalization in ONE cooperative launch: lane-column histogram →
// grid-wide barrier → every block builds the LUT from the global histogram → apply.
// For photo-sized inputs the first tile of every thread stays in registers from the counting
// pass to the apply pass, so an image up to grid·block·kUnroll·16 bytes (≈17 MB on an H200 with
// the default policy) is read from memory once, not twice, and there is a single launch instead
// of histogram + memset + CDF/LUT + apply. The LUT for the apply pass is replicated per lane in
// shared memory (word v·32 + lane), so lookups never conflict on a bank.
// The global histogram must be zero on entry; the kernel zeroes `next_hist` for the next call
// (the caller alternates two buffers), so no memset launch is needed.
// Needs a cooperative launch (grid ≤ co-resident blocks): see launch_fused_equalize.
#pragma once
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "histeq/lut_formula.hpp"
#include "histogram/columns.cuh"

namespace histeq::kernels::fused {

/// Maps the 16 bytes of r through the per-lane replicated LUT.
__device__ __forceinline__ std::uint32_t map_word(const std::uint32_t* lut_lane, std::uint32_t w) {
  return lut_lane[(w & 0xFFu) << 5] | (lut_lane[((w >> 8) & 0xFFu) << 5] << 8) |
         (lut_lane[((w >> 16) & 0xFFu) << 5] << 16) | (lut_lane[(w >> 24) << 5] << 24);
}
__device__ __forceinline__ uint4 map_vec(const std::uint32_t* lut_lane, const uint4& r) {
  return make_uint4(map_word(lut_lane, r.x), map_word(lut_lane, r.y), map_word(lut_lane, r.z),
                    map_word(lut_lane, r.w));
}

template <bool kStream>
__device__ __forceinline__ void store_vec(uint4* p, const uint4& v) {
  if constexpr (kStream)
    __stcs(p, v);
  else
    *p = v;
}

/// Builds the 256-entry LUT from a 256-bin global histogram, with kBlock ≥ 256 threads, and
/// replicates it per lane into rep[v·32 + lane] (8192 words). Formula: lut_formula.hpp.
/// The inclusive scan (the CDF) is a warp-shuffle scan of each warp's 32 bins plus the totals
/// of the warps before it (Harris, Sengupta & Owens, GPU Gems 3 ch. 39; CUB's WarpScan), three
/// block barriers in all; v0, the first non-zero bin, is the number of bins whose CDF is still
/// 0 (__syncthreads_count). The first version used a shared-memory Hillis–Steele scan
/// (16 barriers).
template <int kBlock>
__device__ __forceinline__ void build_lut_replicated(const unsigned long long* hist, Formula f,
                                                     std::uint32_t* rep,
                                                     unsigned long long* cdf /*[256]*/,
                                                     std::uint8_t* lut_out) {
  static_assert(kBlock >= 256 && kBlock % 32 == 0, "one thread per bin");
  __shared__ unsigned long long warp_total[8];
  __shared__ std::uint32_t value_s[256];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  unsigned long long x = t < 256 ? hist[t] : 0ull;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const unsigned long long y = __shfl_up_sync(0xFFFFFFFFu, x, off);
    if (lane >= off) x += y;
  }
  if (t < 256 && lane == 31) warp_total[warp] = x;
  __syncthreads();
  if (t < 256) {
    for (int w = 0; w < warp; ++w) x += warp_total[w];
    cdf[t] = x;
  }
  // Bins before the first non-zero one have CDF 0; the barrier also publishes cdf[].
  const int v0 = __syncthreads_count(t < 256 && x == 0);
  if (t < 256) {
    const unsigned long long total = cdf[255];
    std::uint32_t value;
    if (v0 >= 256 || cdf[v0] == total) {
      value = t;  // empty or constant image: identity
    } else if (t <= v0) {
      value = 0;
    } else {
      const unsigned long long h0 = cdf[v0];  // cdf(v0) = h[v0]
      value = formula::lut_entry(f, x, h0, total, formula::opencv_scale(total, h0));
    }
    value_s[t] = value;
    if (lut_out && blockIdx.x == 0) lut_out[t] = static_cast<std::uint8_t>(value);
  }
  __syncthreads();
  // Replicate: 8192 words, 16-byte stores, all threads.
  uint4* rep4 = reinterpret_cast<uint4*>(rep);
  for (int i = t; i < 256 * 32 / 4; i += kBlock) {
    const std::uint32_t v = value_s[i >> 3];
    rep4[i] = make_uint4(v, v, v, v);
  }
  __syncthreads();
}

/// kStop (timing probes only; 0 in the library): where the kernel stops, to time its stages by
/// difference — 1: after counting (no merge), 2: after the merge into the global histogram,
/// 3: after the grid barrier, 4: after building the LUT, 5: the whole kernel without the grid
/// barrier (wrong results: what the barrier costs).
template <int kBlock, int kUnroll, int kMinBlocks, bool kStream = false, int kStop = 0>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    equalize_kernel(const std::uint8_t* __restrict__ in, std::uint8_t* __restrict__ out,
                    std::size_t n, Formula f, unsigned long long* __restrict__ hist,
                    unsigned long long* __restrict__ next_hist,
                    std::uint8_t* __restrict__ lut_out) {
  namespace cg = cooperative_groups;
  using namespace columns;
  __shared__ __align__(16) std::uint32_t cols[kSmemWords];
  __shared__ unsigned long long scan[256];
  zero_columns<kBlock>(cols);
  __syncthreads();

  std::uint32_t* lane_col = cols + (threadIdx.x & 31);
  const Split<std::uint8_t> s(in, n);
  const std::size_t gtid = std::size_t(blockIdx.x) * kBlock + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * kBlock;
  if (gtid < s.head) count_value(lane_col, in[gtid]);
  if (gtid < n - s.tail_start) count_value(lane_col, in[s.tail_start + gtid]);
  const uint4* __restrict__ vin = reinterpret_cast<const uint4*>(in + s.head);
  uint4* __restrict__ vout = reinterpret_cast<uint4*>(out + s.head);

  // Phase 1: count. The first tile stays in registers for phase 3.
  uint4 keep[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const std::size_t i = gtid + u * stride;
    if (i < s.nvec) keep[u] = load_vec<kStream>(vin + i);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    if (gtid + u * stride < s.nvec) Vec<std::uint8_t>::count(lane_col, keep[u], 256);
  }
  std::size_t i = gtid + kUnroll * stride;
  for (; i + (kUnroll - 1) * stride < s.nvec; i += kUnroll * stride) {
    uint4 r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) r[u] = load_vec<kStream>(vin + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) Vec<std::uint8_t>::count(lane_col, r[u], 256);
  }
  for (; i < s.nvec; i += stride)
    Vec<std::uint8_t>::count(lane_col, load_vec<kStream>(vin + i), 256);
  __syncthreads();
  if (kStop == 1) {  // probe: keep the counts alive, skip the rest
    if (column_sum(cols, threadIdx.x & 255) == 0xFFFFFFFFu) hist[0] = 1;
    return;
  }
  for_each_value_sum<kBlock>(cols, [&](int v, std::uint32_t c) {
    if (c) atomicAdd(hist + v, static_cast<unsigned long long>(c));
  });
  if (blockIdx.x == 0 && next_hist) {
    for (int v = threadIdx.x; v < kValues; v += kBlock) next_hist[v] = 0;
  }
  __syncthreads();  // cols is reused for the LUT below
  if (kStop == 2) return;
  if (kStop != 5) cg::this_grid().sync();
  if (kStop == 3) return;

  // Phase 2: every block builds the LUT from the finished histogram.
  build_lut_replicated<kBlock>(hist, f, cols, scan, lut_out);
  const std::uint32_t* lut_lane = cols + (threadIdx.x & 31);

  if (kStop == 4) return;
    // Phase 3: apply; the kept tile first, then the rest re-read.
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const std::size_t j = gtid + u * stride;
    if (j < s.nvec) store_vec<kStream>(vout + j, map_vec(lut_lane, keep[u]));
  }
  for (std::size_t j = gtid + kUnroll * stride; j < s.nvec; j += stride) {
    store_vec<kStream>(vout + j, map_vec(lut_lane, load_vec<kStream>(vin + j)));
  }
  if (gtid < s.head) out[gtid] = static_cast<std::uint8_t>(lut_lane[in[gtid] << 5]);
  if (gtid < n - s.tail_start) {
    out[s.tail_start + gtid] = static_cast<std::uint8_t>(lut_lane[in[s.tail_start + gtid] << 5]);
  }
}

}  // namespace histeq::kernels::fused
