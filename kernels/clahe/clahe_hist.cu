// clahe_hist — CLAHE's tile histograms and per-tile LUTs: the entry point clahe_luts, and the
// 8-bit kernels (the 16-bit ones are clahe_hist16.cu's).
// In:  d_in[0, width·height) u8 or u16 plane, rows contiguous, device memory, any alignment.
// Out: luts[t·bins + v] (t = ty·tiles_x + tx) of the sample type, equal to cpu::clahe_luts.
//      hist (tiles·bins uint32) and tickets (clahe_ticket_words) zero on entry, zero again on
//      exit. Async on `stream`; no host sync.
// Exact: yes (integer counts; LUTs by clahe_lut.cuh with clahe_formula.hpp, as the CPU twin).
// Tuning: kClahePolicy (policy.hpp); ClaheTuning (histeq/tuning.hpp).
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
//    for histograms and LUTs. Small planes: a cluster of blocks per tile row instead
//    (tile_hist_cluster_kernel).
//  Wider 8-bit grids: global atomics into the tile counters (L2), then tile_lut_kernel with one
//    block per tile.
//  16-bit (65536 bins: a tile row's counters do not fit in shared memory): clahe_hist16.cu; its
//    global-atomic tile histograms are this file's banded kernel (launch_tile_hist_atomic16).
// Source: OpenCV 4.6 modules/imgproc/src/clahe.cpp (semantics); privatization and the
// last-block ticket as in PMPP 4th ed. ch. 9 and CUDA's threadFenceReduction sample.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "clahe/clahe.hpp"
#include "clahe/clahe_band.cuh"
#include "clahe/clahe_hist16.hpp"
#include "clahe/clahe_lut.cuh"
#include "clahe/policy.hpp"
#include "histeq/error.hpp"
#include "support/cuda_check.hpp"
#include "support/device.hpp"
#include "support/pdl.cuh"

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

}  // namespace

namespace clahe_detail {

void launch_tile_hist_atomic16(const std::uint16_t* d_in, const cf::Geometry& g,
                               const ClaheBuffers& b, cudaStream_t stream, const Tuning& t) {
  const auto kernel = tile_hist_kernel<std::uint16_t, false>;
  const HistArgs a = band_args(g, 2, reinterpret_cast<const void*>(kernel), 0, t.clahe);
  kernel<<<unsigned(std::size_t(a.bands) * g.tiles_y), P::kHistBlockSize, 0, stream>>>(
      d_in, a, b.hist, b.tickets, static_cast<std::uint16_t*>(b.luts));
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace clahe_detail

std::size_t clahe_ticket_words(const cf::Geometry& g) {
  const std::size_t fused =
      g.hist_size == 65536 ? std::size_t(g.tiles_y) * std::size_t(g.tiles_x + 1) * 8 : 0;
  return std::max(std::size_t(g.tiles_y), fused);
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
    clahe_detail::run_luts16(static_cast<const std::uint16_t*>(d_in), g, b, stream, t);
  } else {
    throw UsageError("CLAHE: hist_size must be 256 or 65536");
  }
}

}  // namespace histeq::kernels
