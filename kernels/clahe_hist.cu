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
//  16-bit (65536 bins: a tile row's counters do not fit in shared memory) and wider 8-bit
//    grids: global atomics into the tile counters (L2), then tile_lut_kernel with one block per
//    tile (16-bit: a coalesced walk of the 65536 bins, block_tile_lut_coalesced).
// Source: OpenCV 4.6 modules/imgproc/src/clahe.cpp (semantics); privatization and the
// last-block ticket as in PMPP 4th ed. ch. 9 and CUDA's threadFenceReduction sample.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "clahe.hpp"
#include "clahe_band.cuh"
#include "clahe_lut.cuh"
#include "clahe_tuning.hpp"
#include "common.cuh"
#include "cuda_check.hpp"
#include "histeq/error.hpp"
#include "policy.hpp"

namespace histeq::kernels {
namespace {
namespace cf = histeq::clahe_formula;
using P = ClahePolicy;

struct HistArgs {
  cf::Geometry g;
  int bands;          ///< blocks per tile row
  int rows_per_band;  ///< padded rows per block (the last band of a tile row may have fewer)
  bool warp_luts;     ///< 8-bit: the last block builds the row's LUTs one warp per tile
  bool fast_visit;    ///< visit_band's whole-vector fast path where it applies
};

/// Counts one sample v of tile column tx of the block's tile row.
template <typename T, bool kShared>
struct Counter {
  std::uint32_t* base;  ///< shared tiles_x·bins, or the global counters of the tile row
  int bins;
  __device__ __forceinline__ void operator()(int tx, int v) const {
    atomicAdd(base + std::size_t(tx) * bins + v, 1u);
  }
};

template <typename T, bool kShared>
__global__ void __launch_bounds__(P::kHistBlockSize)
    tile_hist_kernel(const T* __restrict__ in, HistArgs a, std::uint32_t* hist,
                     std::uint32_t* tickets, T* luts) {
  extern __shared__ std::uint32_t s_hist[];
  __shared__ int s_tmp[33];
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
  clahe_detail::visit_band(in, g, yp0, yp1, threadIdx.x, blockDim.x, count, a.fast_visit);
  if constexpr (kShared) {
    __syncthreads();
    for (int i = threadIdx.x; i < g.tiles_x * kBins; i += blockDim.x) {
      const std::uint32_t c = s_hist[i];
      if (c) atomicAdd(row_hist + i, c);
    }
    // Last block of the tile row builds its LUTs.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(tickets + ty, 1u) == unsigned(a.bands - 1);
    __syncthreads();
    if (s_last && sizeof(T) == 1 && a.warp_luts) {
      // One warp per tile of the row, all in parallel (clahe_lut.cuh): no block barriers.
      __threadfence();
      const int warps = int(blockDim.x) >> 5;
      for (int tx = int(threadIdx.x >> 5); tx < g.tiles_x; tx += warps) {
        const std::size_t t = std::size_t(ty) * g.tiles_x + tx;
        clahe_detail::warp_tile_lut_u8(hist + t * kBins, g.clip, g.lut_scale,
                                       reinterpret_cast<std::uint8_t*>(luts) + t * kBins);
      }
      if (threadIdx.x == 0) tickets[ty] = 0;
    } else if (s_last) {
      __threadfence();
      for (int tx = 0; tx < g.tiles_x; ++tx) {
        const std::size_t t = std::size_t(ty) * g.tiles_x + tx;
        clahe_detail::block_tile_lut<T, kBins>(hist + t * kBins, g.clip, g.lut_scale,
                                               luts + t * kBins, s_tmp);
      }
      if (threadIdx.x == 0) tickets[ty] = 0;
    }
  }
}

template <typename T>
void run_luts(const T* d_in, const cf::Geometry& g, const ClaheBuffers& b, cudaStream_t stream) {
  constexpr int kBins = sizeof(T) == 1 ? 256 : 65536;
  const std::size_t shared_bytes = std::size_t(g.tiles_x) * kBins * sizeof(std::uint32_t);
  const bool privatized = kBins == 256 && shared_bytes <= P::kHistMaxSharedBytes;
  // Bands: enough blocks to fill the GPU, none smaller than kHistMinBytesPerBlock.
  const std::size_t row_bytes = std::size_t(g.padded_w) * sizeof(T);
  const ClaheTuning& tune = clahe_tuning();
  const int min_rows = int(std::max<std::size_t>(1, tune.hist_min_bytes / row_bytes));
  const clahe_detail::Bands split = clahe_detail::split_bands(
      g.tile_h, g.tiles_y, tune.hist_blocks_per_sm * detail::sm_count(), min_rows);
  const int bands = split.bands, rows = split.rows;
  HistArgs a{g, bands, rows, tune.warp_luts, tune.fast_visit};
  const dim3 grid(unsigned(std::size_t(bands) * g.tiles_y));
  T* luts = static_cast<T*>(b.luts);
  if (privatized) {
    const auto kernel = tile_hist_kernel<T, true>;
    if (shared_bytes > 48 * 1024) {
      HISTEQ_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             int(shared_bytes)));
    }
    kernel<<<grid, P::kHistBlockSize, shared_bytes, stream>>>(d_in, a, b.hist, b.tickets, luts);
    HISTEQ_CUDA_CHECK_LAUNCH();
    return;
  }
  tile_hist_kernel<T, false>
      <<<grid, P::kHistBlockSize, 0, stream>>>(d_in, a, b.hist, b.tickets, luts);
  HISTEQ_CUDA_CHECK_LAUNCH();
  clahe_detail::tile_lut_kernel<T, kBins><<<unsigned(g.tiles()), P::kLutBlockSize, 0, stream>>>(
      b.hist, g.clip, g.lut_scale, luts, tune.coalesced_lut16);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace

void clahe_luts(const void* d_in, const cf::Geometry& g, const ClaheBuffers& b,
                cudaStream_t stream) {
  if (g.width < 1 || g.height < 1 || g.tiles_x < 1 || g.tiles_y < 1) {
    throw UsageError("CLAHE: empty plane or grid");
  }
  if (d_in == nullptr || b.hist == nullptr || b.tickets == nullptr || b.luts == nullptr) {
    throw UsageError("CLAHE: null device pointer");
  }
  if (g.hist_size == 256) {
    run_luts(static_cast<const std::uint8_t*>(d_in), g, b, stream);
  } else if (g.hist_size == 65536) {
    run_luts(static_cast<const std::uint16_t*>(d_in), g, b, stream);
  } else {
    throw UsageError("CLAHE: hist_size must be 256 or 65536");
  }
}

}  // namespace histeq::kernels
