// clahe_hist — CLAHE tile histograms of every tile in one launch, and the per-tile LUTs.
// In:  d_in[0, width·height) u8 or u16 plane, rows contiguous, device memory, any alignment.
// Out: luts[t·bins + v] (t = ty·tiles_x + tx) of the sample type, equal to cpu::clahe_luts.
//      hist (tiles·bins uint32) and tickets (tiles_y uint32) zero on entry, zero again on exit.
//      Async on `stream`; no host sync.
// Exact: yes (integer counts; LUTs by clahe_lut.cuh with clahe_formula.hpp, as the CPU twin).
// Tuning: kClahePolicy (policy.hpp).
// Shape: block b counts a band of consecutive rows of tile row ty = b / bands (at least
// kHistMinBytesPerBlock bytes), so its samples fall into only the tiles_x tiles of that row.
// The band's image rows are one contiguous byte range, read with 16-byte loads (scalar head and
// tail); the column (and so the tile) of each sample is carried incrementally from one division
// per vector. Padding (reflect-101 rows below the image and columns right of it, as OpenCV's
// copyMakeBorder) is counted by the blocks of the rows it belongs to, from reflected indices:
// no padded copy is ever made.
//  8-bit, tiles_x·256·4 bytes <= kHistMaxSharedBytes: the band counts into privatized shared
//    counters (tiles_x × 256), merged with one global atomicAdd per non-zero bin; a per-tile-row
//    ticket lets the last block of the row build that row's LUTs (clip, redistribute, scan) in
//    the same launch, one warp per tile and all tiles at once (warp_tile_lut_u8) — one launch
//    for histograms and LUTs.
//  Wider 8-bit grids: global atomics into the tile counters (L2), then tile_lut_kernel with one
//    block per tile.
//  16-bit (65536 bins: a tile row's counters do not fit in shared memory): one launch by a
//    cluster of blocks per tile (tile_clahe16_cluster_kernel) where the tiles are large enough;
//    else packed or global-atomic tile histograms, then tile_lut_pair_kernel (two blocks per
//    tile, a coalesced walk of the 65536 bins, cluster_tile_lut16).
// Source: OpenCV 4.6 modules/imgproc/src/clahe.cpp (semantics); privatization and the
// last-block ticket as in PMPP 4th ed. ch. 9 and CUDA's threadFenceReduction sample.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "clahe.hpp"
#include "clahe_band.cuh"
#include "clahe_lut.cuh"
#include "common.cuh"
#include "cuda_check.hpp"
#include "histeq/error.hpp"
#include "packed16.cuh"
#include "pdl.cuh"
#include "policy.hpp"

namespace histeq::kernels {
namespace {
namespace cf = histeq::clahe_formula;
using P = ClahePolicy;

struct HistArgs {
  cf::Geometry g;
  int bands;          ///< blocks per tile row
  int rows_per_band;  ///< padded rows per block (the last band of a tile row may have fewer)
};

/// Counts one sample v of tile column tx of the block's tile row.
template <typename T, bool kShared>
struct Counter {
  std::uint32_t* base;  ///< shared tiles_x·bins, or the global counters of the tile row
  int bins;
  __device__ __forceinline__ void operator()(int tx, int v) const {
    atomicAdd(base + std::size_t(tx) * bins + v, 1u);
  }
  /// 8-bit shared counters: sample index tx·256 + v (clahe_band.cuh's count_vector).
  template <typename U = T, typename = std::enable_if_t<sizeof(U) == 1 && kShared>>
  __device__ __forceinline__ void index(unsigned i) const {
    atomicAdd(base + i, 1u);
  }
};

template <typename T, bool kShared>
__global__ void __launch_bounds__(P::kHistBlockSize, 4)
    tile_hist_kernel(const T* __restrict__ in, HistArgs a, std::uint32_t* hist,
                     std::uint32_t* tickets, T* luts) {
  static_assert(!kShared || sizeof(T) == 1, "shared tile-row counters: 8-bit only");
  extern __shared__ std::uint32_t s_hist[];
  __shared__ bool s_last;
  const cf::Geometry& g = a.g;
  constexpr int kBins = sizeof(T) == 1 ? 256 : 65536;
  const int ty = int(blockIdx.x) / a.bands, band = int(blockIdx.x) % a.bands;
  const int yp0 = ty * g.tile_h + band * a.rows_per_band;
  const int yp1 = min(yp0 + a.rows_per_band, (ty + 1) * g.tile_h);
  std::uint32_t* row_hist = hist + std::size_t(ty) * g.tiles_x * kBins;
  if constexpr (kShared) {
    for (int i = threadIdx.x; i < g.tiles_x * kBins; i += blockDim.x) s_hist[i] = 0;
    __syncthreads();
  }
  Counter<T, kShared> count{kShared ? s_hist : row_hist, kBins};
  clahe_detail::visit_band(in, g, yp0, yp1, threadIdx.x, blockDim.x, count);
  pdl::allow_dependents();  // counted: the next launch (LUTs or apply) may be scheduled
  if constexpr (kShared) {
    __syncthreads();
    for (int i = threadIdx.x; i < g.tiles_x * kBins; i += blockDim.x) {
      const std::uint32_t c = s_hist[i];
      if (c) atomicAdd(row_hist + i, c);
    }
    // Last block of the tile row builds its LUTs. One thread fences, after the barrier (as
    // cooperative groups' grid sync does: the barrier orders the block's adds before its fence),
    // instead of every thread waiting on its own adds (ncu, H200, 16M: 1.5 cycles of membar
    // stall per issued instruction).
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      s_last = atomicAdd(tickets + ty, 1u) == unsigned(a.bands - 1);
    }
    __syncthreads();
    if (s_last) {
      // One warp per tile of the row, all in parallel (clahe_lut.cuh): no block barriers.
      __threadfence();
      const int warps = int(blockDim.x) >> 5;
      for (int tx = int(threadIdx.x >> 5); tx < g.tiles_x; tx += warps) {
        const std::size_t t = std::size_t(ty) * g.tiles_x + tx;
        clahe_detail::warp_tile_lut_u8(hist + t * kBins, g.clip, g.lut_scale,
                                       reinterpret_cast<std::uint8_t*>(luts) + t * kBins);
      }
      if (threadIdx.x == 0) tickets[ty] = 0;
    }
  }
}

/// 8-bit, small planes: a thread-block cluster of kClusterBands blocks per tile row. Rank r
/// counts band r of the row's padded rows into its own shared tiles_x × 256 counters; after one
/// cluster barrier, warp w of rank r builds the LUT of tile r + kClusterBands·(w + k·warps)
/// from the sum of that tile's counters over the cluster's shared memories (DSMEM: each lane
/// reads its 8 bins of every rank with two 16-byte loads). No global counters, fences or
/// tickets: at 1M the latency chain of merging through L2 atomics, fencing, taking the ticket and
/// reading the counters back was most of the 7.1 µs histogram launch (ncu, H200).
template <int kRanks>
__global__ void __cluster_dims__(kRanks, 1, 1) __launch_bounds__(P::kHistBlockSize)
    tile_hist_cluster_kernel(const std::uint8_t* __restrict__ in, cf::Geometry g,
                             std::uint8_t* luts) {
  extern __shared__ std::uint32_t s_hist[];
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const int ty = int(blockIdx.x) / kRanks;
  const int rows = (g.tile_h + kRanks - 1) / kRanks;
  const int yp0 = ty * g.tile_h + int(rank) * rows;
  const int yp1 = min(yp0 + rows, (ty + 1) * g.tile_h);
  for (int i = threadIdx.x; i < g.tiles_x * 256; i += blockDim.x) s_hist[i] = 0;
  __syncthreads();
  Counter<std::uint8_t, true> count{s_hist, 256};
  if (yp0 < yp1) clahe_detail::visit_band(in, g, yp0, yp1, threadIdx.x, blockDim.x, count);
  // No pdl::allow_dependents(): the apply (one vector per thread, one wave) is launched as
  // these blocks exit, so its blocks spread evenly (placed during the counting they piled onto
  // the SMs this 64-block grid leaves idle: 1M 14.4 against 13.4 µs, H200).
  cluster.sync();  // every rank's counts complete and visible through DSMEM
  const int lane = int(threadIdx.x & 31), warps = int(blockDim.x >> 5);
  for (int tx = int(rank) + kRanks * int(threadIdx.x >> 5); tx < g.tiles_x; tx += kRanks * warps) {
    int h[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (unsigned r = 0; r < unsigned(kRanks); ++r) {
      const uint4* p =
          reinterpret_cast<const uint4*>(cluster.map_shared_rank(s_hist, r) + tx * 256) + lane * 2;
      const uint4 qa = p[0], qb = p[1];
      h[0] += int(qa.x), h[1] += int(qa.y), h[2] += int(qa.z), h[3] += int(qa.w);
      h[4] += int(qb.x), h[5] += int(qb.y), h[6] += int(qb.z), h[7] += int(qb.w);
    }
    clahe_detail::warp_lut_u8(h, g.clip, g.lut_scale,
                              luts + (std::size_t(ty) * g.tiles_x + tx) * 256);
  }
  cluster.sync();  // no block leaves while another still reads its counters
}

/// The spill of packed 16-bit tile counters (packed16.cuh: word i holds bin i in the low half,
/// bin i + 32768 in the high half; the add that takes a half to 0x8000 takes 0x8000 back and
/// hands 32768 here): added to the tile's global counter of that bin, `spill`, which is zero on
/// entry. A spill also sets *spilled (shared) and fences, so that a block of the same cluster sees
/// the global add after the next cluster barrier.
struct TileSpill {
  std::uint32_t* spill;
  int* spilled;
  __device__ __forceinline__ void operator()(unsigned v) const {
    atomicAdd(spill + v, 32768u);
    *spilled = 1;
    __threadfence();
  }
};

/// Counts the padded rows [yp0, yp1) of tile column tx into the packed words s (packed16.cuh).
/// Where the tile lies inside the image, its columns start 16-byte aligned and the width is a
/// multiple of 8 (kVector), the block's threads walk the rows' 16-byte vectors in one flat loop
/// with four loads in flight each. Otherwise warps take rows; the lanes of a warp read the row's
/// image columns with 16-byte loads (scalar head and tail) and its reflect-101 right padding
/// from reflected indices; padded rows below the image are the reflected image rows.
__device__ __forceinline__ void count_rows16(const std::uint16_t* __restrict__ in,
                                             const cf::Geometry& g, int tx, int yp0, int yp1,
                                             std::uint32_t* s_words, std::uint32_t* spill,
                                             int* spilled) {
  if (yp0 >= yp1) return;  // a part below its tile (parts = ceil-divided rows) counts nothing
  TileSpill sp{spill, spilled};
  const int xp0 = tx * g.tile_w, xp1 = xp0 + g.tile_w;
  const int c1 = min(xp1, g.width);  // image columns [xp0, c1), padding [max(xp0, width), xp1)
  const std::uintptr_t first =
      reinterpret_cast<std::uintptr_t>(in + std::size_t(max(yp0, 0)) * g.width + xp0);
  if (xp1 <= g.width && yp1 <= g.height && g.width % 8 == 0 && g.tile_w % 8 == 0 &&
      first % 16 == 0) {
    const int per_row = g.tile_w / 8, stride = g.width / 8;
    const unsigned total = unsigned(yp1 - yp0) * unsigned(per_row);
    const uint4* base = reinterpret_cast<const uint4*>(first);
    const unsigned step = blockDim.x;
    auto at = [&](unsigned k) {
      const unsigned r = k / unsigned(per_row);
      return base + std::size_t(r) * stride + (k - r * unsigned(per_row));
    };
    unsigned k = threadIdx.x;
    for (; k + 3 * step < total; k += 4 * step) {
      uint4 q[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) q[j] = __ldg(at(k + j * step));
#pragma unroll
      for (int j = 0; j < 4; ++j) packed16::count_vector(s_words, q[j], sp);
    }
    for (; k < total; k += step) packed16::count_vector(s_words, __ldg(at(k)), sp);
    return;
  }
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  const int warps = int(blockDim.x >> 5);
  for (int yp = yp0 + warp; yp < yp1; yp += warps) {
    const int y = yp < g.height ? yp : cf::reflect101(yp, g.height);
    const std::uint16_t* row = in + std::size_t(y) * std::size_t(g.width);
    if (xp0 < c1) {
      const std::uint16_t* base = row + xp0;
      const int total = c1 - xp0;
      const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(base);
      const int head = min(total, int(((16 - addr % 16) % 16) / 2));
      if (lane < head) packed16::count_one(s_words, base[lane], sp);
      const int vecs = (total - head) / 8;
      const uint4* v4 = reinterpret_cast<const uint4*>(base + head);
      int k = lane;
      for (; k + 32 < vecs; k += 64) {
        const uint4 qa = __ldg(v4 + k), qb = __ldg(v4 + k + 32);
        packed16::count_vector(s_words, qa, sp);
        packed16::count_vector(s_words, qb, sp);
      }
      for (; k < vecs; k += 32) packed16::count_vector(s_words, __ldg(v4 + k), sp);
      for (int i = head + vecs * 8 + lane; i < total; i += 32)
        packed16::count_one(s_words, base[i], sp);
    }
    for (int xp = max(xp0, g.width) + lane; xp < xp1; xp += 32) {
      packed16::count_one(s_words, row[cf::reflect101(xp, g.width)], sp);
    }
  }
}

/// Packed 16-bit tile histograms: block b counts the padded rows [yp0, yp1) (part b % parts of
/// tile b / parts) over the tile's padded columns into 32768 shared words (count_rows16), then
/// writes the words to its partial row.
__global__ void __launch_bounds__(P::kPacked16Threads, 1)
    tile_hist16_packed_kernel(const std::uint16_t* __restrict__ in, cf::Geometry g, int parts,
                              int rows_per_part, std::uint32_t* hist,
                              std::uint32_t* __restrict__ partials) {
  extern __shared__ std::uint32_t s_words[];
  __shared__ int s_spilled;
  for (int i = int(threadIdx.x); i < 32768; i += int(blockDim.x)) s_words[i] = 0;
  __syncthreads();
  const int t = int(blockIdx.x) / parts, part = int(blockIdx.x) % parts;
  const int ty = t / g.tiles_x, tx = t % g.tiles_x;
  const int yp0 = ty * g.tile_h + part * rows_per_part;
  const int yp1 = min(yp0 + rows_per_part, (ty + 1) * g.tile_h);
  count_rows16(in, g, tx, yp0, yp1, s_words, hist + std::size_t(t) * 65536, &s_spilled);
  pdl::allow_dependents();  // counted: the LUT step may be scheduled
  __syncthreads();
  std::uint32_t* mine = partials + std::size_t(blockIdx.x) * 32768;
  for (int i = int(threadIdx.x) * 4; i < 32768; i += int(blockDim.x) * 4) {
    *reinterpret_cast<uint4*>(mine + i) = *reinterpret_cast<const uint4*>(s_words + i);
  }
}

/// 16-bit CLAHE tile histograms AND LUTs in one launch: a thread-block cluster of kRanks blocks
/// per tile (blockIdx.x / kRanks), each counting 1 / kRanks of the tile's padded rows into its
/// own packed shared words (count_rows16), so the input is read once and no partial histograms
/// go through L2. After a cluster barrier each rank sums the packed words of the bins it owns
/// over the cluster's shared memories (DSMEM; the ownership and layout are described at the
/// exchange below), adds the tile's global spill counters if any block spilled (and clears
/// them), and runs block_tile_lut_coalesced's arithmetic on its bins from shared memory, four
/// bins per lane: the clip, the redistribution (the clipped excess summed over the cluster
/// through DSMEM), the cumulative sum (offset by the other ranks' totals, DSMEM), the LUT. Where
/// `pairs` is given it then writes the LUT pairs (clahe_pair_lut_words) as whole words, each
/// cell's by the second of its two tiles to finish (a ticket per cell and rank in `tickets`,
/// which are zero on entry and left zero). Replaces the packed histograms and their 16.8 MB of
/// partials, the LUT step's two passes over them from L2 and the pairs kernel: one launch
/// instead of three before the apply (16M, 8x8 tiles, H200: 39 µs against about 90).
template <int kRanks>
__global__ void __cluster_dims__(kRanks, 1, 1) __launch_bounds__(P::kPacked16Threads, 1)
    tile_clahe16_cluster_kernel(const std::uint16_t* __restrict__ in, cf::Geometry g,
                                std::uint32_t* hist, std::uint32_t* tickets, std::uint16_t* luts,
                                std::uint32_t* pairs) {
  static_assert(kRanks >= 2 && kRanks <= 8 && (kRanks & (kRanks - 1)) == 0, "2, 4 or 8 ranks");
  constexpr int kOwned = 65536 / kRanks;  // bins of one rank
  extern __shared__ std::uint32_t s_words[];
  __shared__ int s_tmp[33];
  __shared__ int s_share[4];  // [0] a spill happened, [1] clipped excess, [2..3] segment totals
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  {
    uint4* w4 = reinterpret_cast<uint4*>(s_words);
    for (int i = int(threadIdx.x); i < 8192; i += int(blockDim.x)) w4[i] = make_uint4(0, 0, 0, 0);
  }
  if (threadIdx.x == 0) s_share[0] = 0;
  __syncthreads();
  const int t = int(blockIdx.x) / kRanks;
  const int ty = t / g.tiles_x, tx = t % g.tiles_x;
  const int rows = (g.tile_h + kRanks - 1) / kRanks;
  const int yp0 = ty * g.tile_h + int(rank) * rows;
  const int yp1 = min(yp0 + rows, (ty + 1) * g.tile_h);
  std::uint32_t* spill = hist + std::size_t(t) * 65536;
  count_rows16(in, g, tx, yp0, yp1, s_words, spill, &s_share[0]);  // nothing where yp0 >= yp1
  cluster.sync();  // every rank's counts complete and visible (spills fenced)
  bool spilled = false;
#pragma unroll
  for (int r = 0; r < kRanks; ++r) spilled |= *cluster.map_shared_rank(&s_share[0], r) != 0;

  // The rank's bins: kSegs segments of kSeg bins, segment q starting at bin seg_bin(q), and
  // where their counts are in shared memory (count4). Two ranks: rank r owns the words
  // [r·16384, (r+1)·16384), so both halves of each: bins [r·16384, +16384) (segment 0, low
  // halves) and [32768 + r·16384, +16384) (segment 1, high halves); it adds the partner's
  // words of that range to its own in place (64 KiB through DSMEM; two halves below 0x8000 sum
  // below 0x10000, so no carry) and the partner reads only the other range. More ranks: rank r
  // owns the bins [r·B, (r+1)·B), B = 65536 / kRanks, all in one half of the words
  // [(r·B) & 0x7FFF, +B): it sums that half over the cluster into registers (16-byte DSMEM
  // loads) and, after a second barrier, keeps the B uint32 counts in its own shared memory.
  constexpr int kSegs = kRanks == 2 ? 2 : 1;
  constexpr int kSeg = kOwned / kSegs;  // bins of one segment
  const auto seg_bin = [&](int q) {
    return kRanks == 2 ? q * 32768 + int(rank) * 16384 : int(rank) * kOwned;
  };
  if constexpr (kRanks == 2) {
    const int j0 = int(rank) * 16384;
    const std::uint32_t* other = cluster.map_shared_rank(s_words, rank ^ 1u);
    for (int j = j0 + 4 * int(threadIdx.x); j < j0 + 16384; j += 4 * int(blockDim.x)) {
      uint4 q = *reinterpret_cast<const uint4*>(s_words + j);
      const uint4 e = *reinterpret_cast<const uint4*>(other + j);
      q.x += e.x, q.y += e.y, q.z += e.z, q.w += e.w;
      *reinterpret_cast<uint4*>(s_words + j) = q;
    }
  } else {
    constexpr int kVecs = kOwned / (4 * P::kPacked16Threads);  // 16-byte words per thread
    const int j0 = seg_bin(0) & 0x7FFF;
    const unsigned shift = unsigned(seg_bin(0) >> 15) * 16u;
    unsigned c[4 * kVecs];
#pragma unroll
    for (int k = 0; k < 4 * kVecs; ++k) c[k] = 0;
#pragma unroll
    for (int r = 0; r < kRanks; ++r) {
      const std::uint32_t* src =
          (r == int(rank) ? s_words : cluster.map_shared_rank(s_words, unsigned(r))) + j0;
#pragma unroll
      for (int k = 0; k < kVecs; ++k) {
        const uint4 q =
            *reinterpret_cast<const uint4*>(src + 4 * (int(threadIdx.x) + k * P::kPacked16Threads));
        c[4 * k + 0] += (q.x >> shift) & 0xFFFFu;
        c[4 * k + 1] += (q.y >> shift) & 0xFFFFu;
        c[4 * k + 2] += (q.z >> shift) & 0xFFFFu;
        c[4 * k + 3] += (q.w >> shift) & 0xFFFFu;
      }
    }
    cluster.sync();  // every rank has read the words it needs: each may now reuse its own
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int o = 4 * (int(threadIdx.x) + k * P::kPacked16Threads);
      *reinterpret_cast<uint4*>(s_words + o) =
          make_uint4(c[4 * k], c[4 * k + 1], c[4 * k + 2], c[4 * k + 3]);
    }
  }
  __syncthreads();
  // The counts of bins o..o+3 of segment q (o a multiple of 4), with the tile's global spill
  // counters where a block spilled (cleared when `clear`: the last read of them).
  const auto count4 = [&](int q, int o, bool clear) {
    uint4 h;
    if constexpr (kRanks == 2) {
      const uint4 w = *reinterpret_cast<const uint4*>(s_words + int(rank) * 16384 + o);
      const unsigned sh = 16u * unsigned(q);
      h = make_uint4((w.x >> sh) & 0xFFFFu, (w.y >> sh) & 0xFFFFu, (w.z >> sh) & 0xFFFFu,
                     (w.w >> sh) & 0xFFFFu);
    } else {
      h = *reinterpret_cast<const uint4*>(s_words + o);
    }
    if (spilled) {
      uint4* sp = reinterpret_cast<uint4*>(spill + seg_bin(q) + o);
      const uint4 e = __ldcg(sp);
      h.x += e.x, h.y += e.y, h.z += e.z, h.w += e.w;
      if (clear) *sp = make_uint4(0, 0, 0, 0);
    }
    return h;
  };

  // The LUT of the owned bins (block_tile_lut_coalesced's arithmetic, from shared memory).
  // Warp w owns a contiguous chunk of one segment, walked 128 bins at a time: lane l takes the
  // four bins 4l..4l+3 of each step (one 16-byte shared load), sums them in order and joins one
  // warp scan, so the scan's shuffles are paid once per four bins.
  const int clip = g.clip;
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  constexpr int kWarps = P::kPacked16Threads / 32;
  constexpr int kChunk = kOwned / kWarps;  // bins of one warp (a multiple of 128)
  const int seg = warp / (kWarps / kSegs);
  const int o0 = (warp % (kWarps / kSegs)) * kChunk, o1 = o0 + kChunk;
  int excess = 0, kept = 0;
  for (int o = o0 + 4 * lane; o < o1; o += 128) {
    const uint4 q = count4(seg, o, false);
    const int h[4] = {int(q.x), int(q.y), int(q.z), int(q.w)};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (clip > 0) {
        excess += h[j] > clip ? h[j] - clip : 0;
        kept += h[j] > clip ? clip : h[j];
      } else {
        kept += h[j];
      }
    }
  }
  int batch = 0, residual = 0, step = 1;
  if (clip > 0) {
    const int mine_excess = clahe_detail::block_sum(excess, s_tmp);
    if (threadIdx.x == 0) s_share[1] = mine_excess;
    cluster.sync();
    int clipped = 0;
#pragma unroll
    for (int r = 0; r < kRanks; ++r) clipped += *cluster.map_shared_rank(&s_share[1], r);
    batch = clipped / 65536;
    residual = clipped - batch * 65536;
    step = cf::residual_step(65536, residual);
  }
  const clahe_detail::ResidualTest gets(residual, step);
  int mine = kept;
  if (clip > 0) {
    mine += batch * (kChunk / 32);
    for (int o = o0 + 4 * lane; o < o1; o += 128)
      mine += __popc(gets.group4(unsigned(seg_bin(seg) + o)));
  }
  // Clipped sums before each warp: the block's scan of the warps' totals (segment 0's warps
  // first), made global with the totals of every rank's segments before this one (DSMEM).
  const int warp_total = int(__reduce_add_sync(0xffffffffu, unsigned(mine)));
  int before = clahe_detail::block_exclusive_scan(lane == 0 ? warp_total : 0, s_tmp);
  const int seg0_total = clahe_detail::block_sum(lane == 0 && seg == 0 ? warp_total : 0, s_tmp);
  const int block_total = clahe_detail::block_sum(lane == 0 ? warp_total : 0, s_tmp);
  if (threadIdx.x == 0) {
    s_share[2] = seg0_total;
    s_share[3] = block_total - seg0_total;
  }
  cluster.sync();
  if (seg == 1) before -= seg0_total;  // the scan's offset within segment 1
  for (int r = 0; r < kRanks; ++r) {
    const int* other = cluster.map_shared_rank(&s_share[2], unsigned(r));
    if (r < int(rank)) before += other[seg];  // the same segment of lower ranks
    if (seg == 1) before += other[0];         // every rank's segment 0
  }
  cluster.sync();  // no block leaves, or rewrites s_share, while another still reads it
  int carry = __shfl_sync(0xffffffffu, before, 0);
  std::uint16_t* lut = luts + std::size_t(t) * 65536;
  for (int o = o0 + 4 * lane; o < o1; o += 128) {
    const int i = seg_bin(seg) + o;
    const uint4 q = count4(seg, o, true);
    int c[4] = {int(q.x), int(q.y), int(q.z), int(q.w)};
    if (clip > 0) {
      const unsigned extra = gets.group4(unsigned(i));
#pragma unroll
      for (int j = 0; j < 4; ++j)
        c[j] = (c[j] > clip ? clip : c[j]) + batch + int((extra >> j) & 1u);
    }
    c[1] += c[0];
    c[2] += c[1];
    c[3] += c[2];
    int inc = c[3];
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, inc, d);
      if (lane >= d) inc += n;
    }
    const int base = carry + inc - c[3];
    unsigned v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = unsigned(cf::lut_value(base + c[j], g.lut_scale, 65535));
    *reinterpret_cast<uint2*>(lut + i) = make_uint2(v[0] | v[1] << 16, v[2] | v[3] << 16);
    carry += __shfl_sync(0xffffffffu, inc, 31);
  }
  if (pairs == nullptr) return;

  // The LUT pairs of the cells this tile is in, whole 4-byte words at a time (a tile's 2-byte
  // halves of them alone would make every sector a partial write: 13 µs of the 16M call on
  // the H200). Cell tx + 1 pairs this tile (low half) with tile tx + 1, cell tx pairs tile
  // tx − 1 with it (high half); for each, per rank, the second of the two tiles' blocks to
  // finish its LUT bins takes the cell's ticket and writes the words of those bins from both
  // LUTs (threadFenceReduction's last-block pattern: no block waits for another). The edge
  // cells 0 and tiles_x hold one tile twice and are written by that tile alone.
  __shared__ int s_cells[2];
  __syncthreads();  // every LUT store of the block issued
  if (threadIdx.x == 0) {
    __threadfence();  // ... and visible before either ticket is taken
    std::uint32_t* row_tickets = tickets + std::size_t(ty) * std::size_t(g.tiles_x + 1) * kRanks;
    auto second = [&](int cell) {
      std::uint32_t* tk = row_tickets + std::size_t(cell) * kRanks + rank;
      if (atomicAdd(tk, 1u) != 1u) return -1;
      *tk = 0;          // left zero for the next call
      __threadfence();  // the partner's LUT bins are read after its ticket
      return cell;
    };
    s_cells[0] = tx == 0 ? 0 : second(tx);
    s_cells[1] = tx == g.tiles_x - 1 ? g.tiles_x : second(tx + 1);
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int cell = s_cells[k];
    if (cell < 0) continue;
    const std::size_t row = std::size_t(ty) * g.tiles_x;
    const std::uint16_t* lo = luts + (row + std::size_t(max(cell - 1, 0))) * 65536;
    const std::uint16_t* hi = luts + (row + std::size_t(min(cell, g.tiles_x - 1))) * 65536;
    uint4* dst = reinterpret_cast<uint4*>(
        pairs + (std::size_t(ty) * std::size_t(g.tiles_x + 1) + std::size_t(cell)) * 65536);
    // All of a thread's loads first (kOwned / 4096 steps of 4 bins), then its stores: one L2
    // round trip per cell instead of one per step.
    constexpr int kSteps = kOwned / (4 * P::kPacked16Threads);
    uint2 l[kSteps], h[kSteps];
#pragma unroll
    for (int j = 0; j < kSteps; ++j) {
      const int o = 4 * (int(threadIdx.x) + j * P::kPacked16Threads);
      const int i = seg_bin(o / kSeg) + o % kSeg;
      l[j] = __ldcg(reinterpret_cast<const uint2*>(lo + i));
      h[j] = __ldcg(reinterpret_cast<const uint2*>(hi + i));
    }
#pragma unroll
    for (int j = 0; j < kSteps; ++j) {
      const int o = 4 * (int(threadIdx.x) + j * P::kPacked16Threads);
      const int i = seg_bin(o / kSeg) + o % kSeg;
      dst[i / 4] =
          make_uint4(__byte_perm(l[j].x, h[j].x, 0x5410), __byte_perm(l[j].x, h[j].x, 0x7632),
                     __byte_perm(l[j].y, h[j].y, 0x5410), __byte_perm(l[j].y, h[j].y, 0x7632));
    }
  }
}

/// The 16-bit LUT pairs (clahe_pair_lut_words) from the finished per-tile LUTs: word
/// (ty, cx, v) = lut[ty][max(cx − 1, 0)][v] | lut[ty][min(cx, tiles_x − 1)][v] << 16. Each
/// thread reads four values of both tiles (8-byte loads) and writes four words (16 bytes).
__global__ void __launch_bounds__(256)
    pair_luts16_kernel(const std::uint16_t* __restrict__ luts, int tiles_x, int tiles_y,
                       std::uint32_t* __restrict__ pairs) {
  pdl::wait();  // the LUT step's luts
  pdl::allow_dependents();
  const std::size_t quads = std::size_t(tiles_y) * std::size_t(tiles_x + 1) * 16384;
  for (std::size_t k = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; k < quads;
       k += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t cell = k / 16384, v = (k % 16384) * 4;
    const int ty = int(cell / std::size_t(tiles_x + 1)), cx = int(cell % std::size_t(tiles_x + 1));
    const int t1 = ty * tiles_x + max(cx - 1, 0), t2 = ty * tiles_x + min(cx, tiles_x - 1);
    const uint2 a = __ldg(reinterpret_cast<const uint2*>(luts + std::size_t(t1) * 65536 + v));
    const uint2 b = __ldg(reinterpret_cast<const uint2*>(luts + std::size_t(t2) * 65536 + v));
    reinterpret_cast<uint4*>(pairs)[k] =
        make_uint4(__byte_perm(a.x, b.x, 0x5410), __byte_perm(a.x, b.x, 0x7632),
                   __byte_perm(a.y, b.y, 0x5410), __byte_perm(a.y, b.y, 0x7632));
  }
}

template <int kRanks>
void set_fused16_smem() {
  const auto kernel = reinterpret_cast<const void*>(tile_clahe16_cluster_kernel<kRanks>);
  detail::per_device_once(kernel, [kernel] {
    HISTEQ_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           32768 * int(sizeof(std::uint32_t))));
    return 0;
  });
}

/// Whether clusters of kRanks tile_clahe16_cluster_kernel blocks fit the current device
/// (compute capability 9.0 or later, cudaOccupancyMaxActiveClusters > 0; memoized per device).
template <int kRanks>
bool fused16_fits() {
  static const char tag = 0;
  return detail::per_device_once(&tag, [] {
           if (!detail::sm90_or_newer()) return 0;
           set_fused16_smem<kRanks>();
           cudaLaunchConfig_t cfg{};
           cfg.gridDim = dim3(kRanks);
           cfg.blockDim = dim3(P::kPacked16Threads);
           cfg.dynamicSmemBytes = 32768 * sizeof(std::uint32_t);
           return detail::clusters_fit(
                      reinterpret_cast<const void*>(tile_clahe16_cluster_kernel<kRanks>), cfg)
                      ? 1
                      : 0;
         }) != 0;
}

/// Blocks per tile of the fused 16-bit path (tile_clahe16_cluster_kernel): the power of two in
/// [2, 8] nearest below SMs / tiles, so that the clusters fill the GPU; 0 where the path does
/// not apply (8-bit, switched off, tiles smaller than ClahePolicy::kFused16MinTileArea unless
/// forced, clusters that do not fit the device).
int fused16_ranks(const cf::Geometry& g, const ClaheTuning& t) {
  if (g.hist_size != 65536 || t.fused16 == Choice::off) return 0;
  const std::size_t area = std::size_t(g.tile_w) * std::size_t(g.tile_h);
  if (t.fused16 == Choice::automatic && area < P::kFused16MinTileArea) return 0;
  const int per = detail::sm_count() / std::max(1, g.tiles());
  const int ranks = per >= 8 ? 8 : (per >= 4 ? 4 : 2);
  const bool fits =
      ranks == 8 ? fused16_fits<8>() : (ranks == 4 ? fused16_fits<4>() : fused16_fits<2>());
  return fits ? ranks : 0;
}

void launch_fused16(int ranks, const std::uint16_t* d_in, const cf::Geometry& g,
                    const ClaheBuffers& b, cudaStream_t stream) {
  const std::size_t smem = 32768 * sizeof(std::uint32_t);
  const dim3 grid(unsigned(g.tiles() * ranks)), block(P::kPacked16Threads);
  auto* luts = static_cast<std::uint16_t*>(b.luts);
  std::uint32_t* pairs = b.pair_luts;
  if (ranks == 8) {
    set_fused16_smem<8>();
    tile_clahe16_cluster_kernel<8>
        <<<grid, block, smem, stream>>>(d_in, g, b.hist, b.tickets, luts, pairs);
  } else if (ranks == 4) {
    set_fused16_smem<4>();
    tile_clahe16_cluster_kernel<4>
        <<<grid, block, smem, stream>>>(d_in, g, b.hist, b.tickets, luts, pairs);
  } else {
    set_fused16_smem<2>();
    tile_clahe16_cluster_kernel<2>
        <<<grid, block, smem, stream>>>(d_in, g, b.hist, b.tickets, luts, pairs);
  }
  HISTEQ_CUDA_CHECK_LAUNCH();
}

/// Parts per tile of the packed 16-bit path (0: the path does not apply).
int packed16_parts(const cf::Geometry& g, const ClaheTuning& t) {
  using Tiles16 = ClaheTuning::Tiles16;
  if (g.hist_size != 65536 || t.tiles16 == Tiles16::atomic) return 0;
  const std::size_t area = std::size_t(g.tile_w) * std::size_t(g.tile_h);
  if (area < (t.tiles16 == Tiles16::packed ? 8192 : P::kPacked16MinTileArea)) return 0;
  const int tiles = g.tiles();
  int parts = std::max(1, detail::sm_count() / tiles);
  parts = std::min(parts, std::max(1, g.tile_h / 32));  // at least 32 rows per part
  if (std::size_t(tiles) * std::size_t(parts) * 32768 * 4 > P::kPacked16MaxPartialBytes) return 0;
  return parts;
}

/// 8-bit grids too wide for the one-launch path: the LUTs from the global tile counters, one
/// block per tile (blockIdx.x = tile index; clahe_lut.cuh, block_tile_lut).
__global__ void __launch_bounds__(P::kLutBlockSize)
    tile_lut_kernel(std::uint32_t* hist, int clip, float lut_scale, std::uint8_t* luts) {
  __shared__ int s_tmp[33];
  pdl::wait();  // the tile histograms
  pdl::allow_dependents();
  const std::size_t t = blockIdx.x;
  clahe_detail::block_tile_lut<std::uint8_t, 256>(hist + t * 256, clip, lut_scale, luts + t * 256,
                                                  s_tmp);
}

/// 16-bit: the LUTs from the tile counters (and the packed partials, where given), two blocks
/// per tile (a cluster; blockIdx.x / 2 = tile index), each half the bins (clahe_lut.cuh,
/// cluster_tile_lut16).
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(P::kLutBlockSize)
    tile_lut_pair_kernel(std::uint32_t* hist, int clip, float lut_scale, std::uint16_t* luts,
                         clahe_detail::LutSources sources) {
  __shared__ int s_tmp[33];
  pdl::wait();  // the tile histograms
  pdl::allow_dependents();
  const std::size_t t = blockIdx.x / 2;
  const clahe_detail::TileSources src(sources, t);
  clahe_detail::cluster_tile_lut16(hist + t * 65536, clip, lut_scale, luts + t * 65536, s_tmp, src);
}

/// The tile-histogram kernel's bands (HistArgs) for `counted` (tile_hist_kernel<T, ...>, with
/// smem bytes of dynamic shared memory): enough blocks to fill the GPU, none smaller than
/// ClaheTuning::hist_band_kib. One full wave: the blocks of `counted` that fit on the device at
/// once (its occupancy: 4 blocks of 512 per SM on sm_90 at 32 registers), or
/// hist_blocks_per_sm per SM. The former fixed 4 per SM, when only 3 fitted (40 registers), left
/// 116 of 512 blocks of a 16M plane to a second wave that ran alone on a quarter of the warps
/// (ncu, H200).
HistArgs band_args(const cf::Geometry& g, std::size_t sample_bytes, const void* counted,
                   std::size_t smem, const ClaheTuning& t) {
  const std::size_t min_bytes =
      t.hist_band_kib > 0 ? std::size_t(t.hist_band_kib) << 10 : P::kHistMinBytesPerBlock;
  const std::size_t row_bytes = std::size_t(g.padded_w) * sample_bytes;
  const int min_rows = int(std::max<std::size_t>(1, min_bytes / row_bytes));
  const std::size_t target =
      t.hist_blocks_per_sm > 0 ? std::size_t(t.hist_blocks_per_sm) * std::size_t(detail::sm_count())
                               : detail::resident_blocks(counted, P::kHistBlockSize, smem);
  const clahe_detail::Bands split = clahe_detail::split_bands(
      g.tile_h, g.tiles_y, int(std::min<std::size_t>(target, 1u << 30)), min_rows);
  return HistArgs{g, split.bands, split.rows};
}

/// Lets `kernel` take smem bytes of dynamic shared memory where that is over the default 48 KiB.
void allow_shared(const void* kernel, std::size_t smem) {
  if (smem > 48 * 1024) {
    HISTEQ_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  }
}

/// 8-bit: grids whose tile row's counters fit in shared memory (kHistMaxSharedBytes) in one
/// launch — small planes by a cluster per tile row (tile_hist_cluster_kernel), the others by
/// bands whose last block builds the row's LUTs (tile_hist_kernel<u8, true>); wider grids count
/// into the global tile counters, then one block per tile builds the LUTs (tile_lut_kernel).
void run_luts8(const std::uint8_t* d_in, const cf::Geometry& g, const ClaheBuffers& b,
               cudaStream_t stream, const Tuning& t) {
  const std::size_t shared_bytes = std::size_t(g.tiles_x) * 256 * sizeof(std::uint32_t);
  auto* luts = static_cast<std::uint8_t*>(b.luts);
  if (shared_bytes <= P::kHistMaxSharedBytes) {
    constexpr int kRanks = P::kClusterBands;
    if (t.clahe.small_clusters &&
        std::size_t(g.padded_w) * std::size_t(g.padded_h) <= P::kClusterMaxPixels &&
        g.tile_h >= kRanks) {
      const auto kernel = tile_hist_cluster_kernel<kRanks>;
      allow_shared(reinterpret_cast<const void*>(kernel), shared_bytes);
      kernel<<<unsigned(g.tiles_y * kRanks), P::kHistBlockSize, shared_bytes, stream>>>(d_in, g,
                                                                                        luts);
      HISTEQ_CUDA_CHECK_LAUNCH();
      return;
    }
    const auto kernel = tile_hist_kernel<std::uint8_t, true>;
    allow_shared(reinterpret_cast<const void*>(kernel), shared_bytes);
    const HistArgs a =
        band_args(g, 1, reinterpret_cast<const void*>(kernel), shared_bytes, t.clahe);
    kernel<<<unsigned(std::size_t(a.bands) * g.tiles_y), P::kHistBlockSize, shared_bytes, stream>>>(
        d_in, a, b.hist, b.tickets, luts);
    HISTEQ_CUDA_CHECK_LAUNCH();
    return;
  }
  const auto kernel = tile_hist_kernel<std::uint8_t, false>;
  const HistArgs a = band_args(g, 1, reinterpret_cast<const void*>(kernel), 0, t.clahe);
  kernel<<<unsigned(std::size_t(a.bands) * g.tiles_y), P::kHistBlockSize, 0, stream>>>(
      d_in, a, b.hist, b.tickets, luts);
  HISTEQ_CUDA_CHECK_LAUNCH();
  pdl::launch(pdl::kLutStep, t, tile_lut_kernel, dim3(unsigned(g.tiles())), dim3(P::kLutBlockSize),
              0, stream, b.hist, g.clip, g.lut_scale, luts);
}

/// 16-bit: one launch by tile clusters where they apply (fused16_ranks), else the tile
/// histograms (packed shared counters with per-block partials where the tiles are large enough,
/// packed16_parts; else global atomics), the LUT step by a cluster of two blocks per tile
/// (tile_lut_pair_kernel) and, where b.pair_luts is given, the LUT pairs.
void run_luts16(const std::uint16_t* d_in, const cf::Geometry& g, const ClaheBuffers& b,
                cudaStream_t stream, const Tuning& t) {
  if (const int ranks = fused16_ranks(g, t.clahe); ranks > 0) {
    launch_fused16(ranks, d_in, g, b, stream);
    return;
  }
  auto* luts = static_cast<std::uint16_t*>(b.luts);
  const int parts = b.partials != nullptr ? packed16_parts(g, t.clahe) : 0;
  if (parts > 0) {
    const int rows = (g.tile_h + parts - 1) / parts;
    const std::size_t smem = 32768 * sizeof(std::uint32_t);
    detail::per_device_once(reinterpret_cast<const void*>(tile_hist16_packed_kernel), [&] {
      HISTEQ_CUDA_CHECK(
          cudaFuncSetAttribute(reinterpret_cast<const void*>(tile_hist16_packed_kernel),
                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
      return 0;
    });
    tile_hist16_packed_kernel<<<unsigned(g.tiles() * parts), P::kPacked16Threads, smem, stream>>>(
        d_in, g, parts, rows, b.hist, b.partials);
    HISTEQ_CUDA_CHECK_LAUNCH();
  } else {
    const auto kernel = tile_hist_kernel<std::uint16_t, false>;
    const HistArgs a = band_args(g, 2, reinterpret_cast<const void*>(kernel), 0, t.clahe);
    kernel<<<unsigned(std::size_t(a.bands) * g.tiles_y), P::kHistBlockSize, 0, stream>>>(
        d_in, a, b.hist, b.tickets, luts);
    HISTEQ_CUDA_CHECK_LAUNCH();
  }
  const clahe_detail::LutSources src{parts > 0 ? b.partials : nullptr, parts};
  pdl::launch(pdl::kLutStep, t, tile_lut_pair_kernel, dim3(unsigned(2 * g.tiles())),
              dim3(P::kLutBlockSize), 0, stream, b.hist, g.clip, g.lut_scale, luts, src);
  if (b.pair_luts != nullptr) {
    const std::size_t quads = clahe_pair_lut_words(g) / 4;
    const unsigned blocks = unsigned(
        std::min<std::size_t>(detail::ceil_div(quads, 256), std::size_t(detail::sm_count()) * 8));
    pdl::launch(pdl::kPairLuts, t, pair_luts16_kernel, dim3(blocks), dim3(256), 0, stream,
                static_cast<const std::uint16_t*>(luts), g.tiles_x, g.tiles_y, b.pair_luts);
  }
}

}  // namespace

std::size_t clahe_partial_words(const cf::Geometry& g, const Tuning& t) {
  if (fused16_ranks(g, t.clahe) > 0) return 0;
  return std::size_t(g.tiles()) * std::size_t(packed16_parts(g, t.clahe)) * 32768;
}

std::size_t clahe_ticket_words(const cf::Geometry& g) {
  const std::size_t fused =
      g.hist_size == 65536 ? std::size_t(g.tiles_y) * std::size_t(g.tiles_x + 1) * 8 : 0;
  return std::max(std::size_t(g.tiles_y), fused);
}

std::size_t clahe_pair_lut_words(const cf::Geometry& g) {
  return g.hist_size == 65536 ? std::size_t(g.tiles_y) * std::size_t(g.tiles_x + 1) * 65536 : 0;
}

bool clahe_uses_pair_luts(const cf::Geometry& g, const Tuning& t) {
  if (g.hist_size != 65536 || t.clahe.pairs16 == Choice::off) return false;
  const std::size_t samples = std::size_t(g.width) * std::size_t(g.height);
  return t.clahe.pairs16 == Choice::on ||
         samples >= P::kPairs16MinSamplesPerEntry * clahe_pair_lut_words(g);
}

void clahe_luts(const void* d_in, const cf::Geometry& g, const ClaheBuffers& b, cudaStream_t stream,
                const Tuning& t) {
  if (g.width < 1 || g.height < 1 || g.tiles_x < 1 || g.tiles_y < 1) {
    throw UsageError("CLAHE: empty plane or grid");
  }
  if (d_in == nullptr || b.hist == nullptr || b.tickets == nullptr || b.luts == nullptr) {
    throw UsageError("CLAHE: null device pointer");
  }
  if (g.hist_size == 256) {
    run_luts8(static_cast<const std::uint8_t*>(d_in), g, b, stream, t);
  } else if (g.hist_size == 65536) {
    run_luts16(static_cast<const std::uint16_t*>(d_in), g, b, stream, t);
  } else {
    throw UsageError("CLAHE: hist_size must be 256 or 65536");
  }
}

}  // namespace histeq::kernels
