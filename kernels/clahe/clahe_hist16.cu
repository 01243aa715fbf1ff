// clahe_hist16 — CLAHE's 16-bit tile histograms and per-tile LUTs (65536 bins: a tile row's
// counters do not fit in shared memory), and the LUT pairs of the 16-bit apply. Called by
// clahe_luts (clahe_hist.cu); the same In / Out / Exact as there.
//  Tiles of ClahePolicy::kFused16MinTileArea samples and more: one launch by a thread-block
//    cluster of 2, 4 or 8 blocks per tile (tile_clahe16_cluster_kernel): packed 16-bit shared
//    counters (packed16.cuh) summed through distributed shared memory, the LUT of each rank's
//    bins, and the LUT pairs written by the second tile of each cell to finish.
//  Else the tile histograms (packed shared counters with per-block partials where the tiles are
//    large enough, tile_hist16_packed_kernel; else global atomics, clahe_hist.cu's banded
//    kernel), the LUT step by a cluster of two blocks per tile (tile_lut_pair_kernel) and, where
//    wanted, the pairs (pair_luts16_kernel).
// Tuning: kClahePolicy (policy.hpp); ClaheTuning::fused16, tiles16, pairs16 (histeq/tuning.hpp).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "clahe/clahe.hpp"
#include "clahe/clahe_hist16.hpp"
#include "clahe/clahe_lut.cuh"
#include "clahe/policy.hpp"
#include "histeq/error.hpp"
#include "support/cuda_check.hpp"
#include "support/device.hpp"
#include "support/pdl.cuh"
#include "u16/packed16.cuh"

namespace histeq::kernels {
namespace {
namespace cf = histeq::clahe_formula;
using P = ClahePolicy;

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

/// The bins one rank of tile_clahe16_cluster_kernel's cluster of kRanks blocks owns, and where
/// their counts are in its shared memory once gather_owned16 has run: kSegs segments of kSeg
/// bins, segment q starting at bin seg_bin(q). Two ranks: rank r owns the words
/// [r·16384, (r+1)·16384), so both halves of each: bins [r·16384, +16384) (segment 0, low
/// halves) and [32768 + r·16384, +16384) (segment 1, high halves). More ranks: rank r owns the
/// bins [r·B, (r+1)·B), B = 65536 / kRanks, all in one half of the words [(r·B) & 0x7FFF, +B),
/// kept as B uint32 counts.
template <int kRanks>
struct Owned16 {
  static constexpr int kOwned = 65536 / kRanks;  ///< bins of one rank
  static constexpr int kSegs = kRanks == 2 ? 2 : 1;
  static constexpr int kSeg = kOwned / kSegs;  ///< bins of one segment
  unsigned rank;
  std::uint32_t* s_words;  ///< this block's packed words (counts after gather_owned16)
  std::uint32_t* spill;    ///< the tile's global spill counters (65536)
  bool spilled;            ///< a block of the cluster spilled into them

  __device__ __forceinline__ int seg_bin(int q) const {
    return kRanks == 2 ? q * 32768 + int(rank) * 16384 : int(rank) * kOwned;
  }
  /// The counts of bins o..o+3 of segment q (o a multiple of 4), with the tile's global spill
  /// counters where a block spilled (cleared when `clear`: the last read of them).
  __device__ __forceinline__ uint4 count4(int q, int o, bool clear) const {
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
  }
};

/// Sums the packed words of the bins this rank owns over the cluster's shared memories (DSMEM).
/// Two ranks: adds the partner's words of its range to its own in place (64 KiB through DSMEM;
/// two halves below 0x8000 sum below 0x10000, so no carry), and the partner reads only the
/// other range. More ranks: sums its half of the words over the cluster into registers
/// (16-byte DSMEM loads) and, after a second barrier, keeps the counts in its own shared
/// memory. Ends synchronized.
template <int kRanks>
__device__ __forceinline__ void gather_owned16(cooperative_groups::cluster_group& cluster,
                                               const Owned16<kRanks>& own) {
  std::uint32_t* s_words = own.s_words;
  const unsigned rank = own.rank;
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
    constexpr int kVecs = Owned16<kRanks>::kOwned / (4 * P::kPacked16Threads);  // per thread
    const int j0 = own.seg_bin(0) & 0x7FFF;
    const unsigned shift = unsigned(own.seg_bin(0) >> 15) * 16u;
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
}

/// The LUT of the bins this rank owns (cluster_tile_lut16's arithmetic, from shared memory): the
/// clip, the redistribution (the clipped excess summed over the cluster through DSMEM), the
/// cumulative sum (offset by the other ranks' totals, DSMEM), the LUT values into lut (the
/// tile's 65536 entries). Warp w owns a contiguous chunk of one segment, walked 128 bins at a
/// time: lane l takes the four bins 4l..4l+3 of each step (one 16-byte shared load), sums them
/// in order and joins one warp scan, so the scan's shuffles are paid once per four bins.
/// s_tmp: 33 ints; s_share[1..3]: this block's clipped excess and segment totals, read by the
/// other ranks.
template <int kRanks>
__device__ __forceinline__ void owned_lut16(cooperative_groups::cluster_group& cluster,
                                            const Owned16<kRanks>& own, int clip, float lut_scale,
                                            std::uint16_t* lut, int* s_tmp, int* s_share) {
  constexpr int kWarps = P::kPacked16Threads / 32;
  constexpr int kSegs = Owned16<kRanks>::kSegs;
  constexpr int kChunk = Owned16<kRanks>::kOwned / kWarps;  // bins of one warp (a multiple of 128)
  const unsigned rank = own.rank;
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  const int seg = warp / (kWarps / kSegs);
  const int o0 = (warp % (kWarps / kSegs)) * kChunk, o1 = o0 + kChunk;
  int excess = 0, kept = 0;
  for (int o = o0 + 4 * lane; o < o1; o += 128) {
    const uint4 q = own.count4(seg, o, false);
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
      mine += __popc(gets.group4(unsigned(own.seg_bin(seg) + o)));
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
  for (int o = o0 + 4 * lane; o < o1; o += 128) {
    const int i = own.seg_bin(seg) + o;
    const uint4 q = own.count4(seg, o, true);
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
    for (int j = 0; j < 4; ++j) v[j] = unsigned(cf::lut_value(base + c[j], lut_scale, 65535));
    *reinterpret_cast<uint2*>(lut + i) = make_uint2(v[0] | v[1] << 16, v[2] | v[3] << 16);
    carry += __shfl_sync(0xffffffffu, inc, 31);
  }
}

/// The LUT pairs of the cells tile (ty, tx) is in, whole 4-byte words at a time (a tile's 2-byte
/// halves of them alone would make every sector a partial write: 13 µs of the 16M call on the
/// H200). Cell tx + 1 pairs this tile (low half) with tile tx + 1, cell tx pairs tile tx − 1
/// with it (high half); for each, per rank, the second of the two tiles' blocks to finish its
/// LUT bins takes the cell's ticket and writes the words of those bins from both LUTs
/// (threadFenceReduction's last-block pattern: no block waits for another). The edge cells 0
/// and tiles_x hold one tile twice and are written by that tile alone.
template <int kRanks>
__device__ __forceinline__ void write_pairs16(const Owned16<kRanks>& own, const cf::Geometry& g,
                                              int ty, int tx, std::uint32_t* tickets,
                                              const std::uint16_t* luts, std::uint32_t* pairs) {
  constexpr int kSeg = Owned16<kRanks>::kSeg;
  const unsigned rank = own.rank;
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
    constexpr int kSteps = Owned16<kRanks>::kOwned / (4 * P::kPacked16Threads);
    uint2 l[kSteps], h[kSteps];
#pragma unroll
    for (int j = 0; j < kSteps; ++j) {
      const int o = 4 * (int(threadIdx.x) + j * P::kPacked16Threads);
      const int i = own.seg_bin(o / kSeg) + o % kSeg;
      l[j] = __ldcg(reinterpret_cast<const uint2*>(lo + i));
      h[j] = __ldcg(reinterpret_cast<const uint2*>(hi + i));
    }
#pragma unroll
    for (int j = 0; j < kSteps; ++j) {
      const int o = 4 * (int(threadIdx.x) + j * P::kPacked16Threads);
      const int i = own.seg_bin(o / kSeg) + o % kSeg;
      dst[i / 4] =
          make_uint4(__byte_perm(l[j].x, h[j].x, 0x5410), __byte_perm(l[j].x, h[j].x, 0x7632),
                     __byte_perm(l[j].y, h[j].y, 0x5410), __byte_perm(l[j].y, h[j].y, 0x7632));
    }
  }
}

/// 16-bit CLAHE tile histograms AND LUTs in one launch: a thread-block cluster of kRanks blocks
/// per tile (blockIdx.x / kRanks), each counting 1 / kRanks of the tile's padded rows into its
/// own packed shared words (count_rows16), so the input is read once and no partial histograms
/// go through L2. After a cluster barrier each rank sums the packed words of the bins it owns
/// over the cluster's shared memories (gather_owned16, Owned16), adds the tile's global spill
/// counters if any block spilled (and clears them), and builds the LUT of its bins
/// (owned_lut16). Where `pairs` is given it then writes the LUT pairs (clahe_pair_lut_words) as
/// whole words, each cell's by the second of its two tiles to finish (write_pairs16; a ticket
/// per cell and rank in `tickets`, which are zero on entry and left zero). Replaces the packed
/// histograms and their 16.8 MB of partials, the LUT step's two passes over them from L2 and
/// the pairs kernel: one launch instead of three before the apply (16M, 8x8 tiles, H200: 39 µs
/// against about 90).
template <int kRanks>
__global__ void __cluster_dims__(kRanks, 1, 1) __launch_bounds__(P::kPacked16Threads, 1)
    tile_clahe16_cluster_kernel(const std::uint16_t* __restrict__ in, cf::Geometry g,
                                std::uint32_t* hist, std::uint32_t* tickets, std::uint16_t* luts,
                                std::uint32_t* pairs) {
  static_assert(kRanks >= 2 && kRanks <= 8 && (kRanks & (kRanks - 1)) == 0, "2, 4 or 8 ranks");
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
  const Owned16<kRanks> own{rank, s_words, spill, spilled};
  gather_owned16(cluster, own);
  owned_lut16(cluster, own, g.clip, g.lut_scale, luts + std::size_t(t) * 65536, s_tmp, s_share);
  if (pairs == nullptr) return;
  write_pairs16(own, g, ty, tx, tickets, luts, pairs);
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

}  // namespace

/// 16-bit: one launch by tile clusters where they apply (fused16_ranks), else the tile
/// histograms (packed shared counters with per-block partials where the tiles are large enough,
/// packed16_parts; else global atomics), the LUT step by a cluster of two blocks per tile
/// (tile_lut_pair_kernel) and, where b.pair_luts is given, the LUT pairs.
void clahe_detail::run_luts16(const std::uint16_t* d_in, const cf::Geometry& g,
                              const ClaheBuffers& b, cudaStream_t stream, const Tuning& t) {
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
    clahe_detail::launch_tile_hist_atomic16(d_in, g, b, stream, t);
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

std::size_t clahe_partial_words(const cf::Geometry& g, const Tuning& t) {
  if (fused16_ranks(g, t.clahe) > 0) return 0;
  return std::size_t(g.tiles()) * std::size_t(packed16_parts(g, t.clahe)) * 32768;
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

}  // namespace histeq::kernels
