// region — the 256-bin histogram of the pixels a region counts (region.hpp): a rectangle and/or
// a mask of an 8-bit plane, in one pass that reads each counted row's plane and mask bytes once.
// In:  a RegionLaunch (device plane, width x height; the rectangle; the optional device mask).
// Out: d_hist[0,256) uint64, overwritten; region_lut_u8 also the equalization LUT.
// Counting: region_count.cuh (predicated shared adds into columns.cuh's lane-owned columns, so a
// warp's shared atomics never conflict on a bank whatever the data; mask vectors of zeros
// skipped). Exact: yes (uint32 shared counters, at most 2^31 samples per block: the grid is at
// least n / 2^31 blocks). Tuning: RegionPolicy (policy.hpp), RegionTuning (histeq/tuning.hpp).
// Rectangles of whole rows (x = 0, w = width; a mask alone covers every row) are one contiguous
// run: grid-stride 16-byte loads of the plane, and of the mask at the same offset when the two
// share their address modulo 16 (else the mask's bytes are read one by one, still coalesced
// across the warp). Narrower rectangles: each warp takes rows of the rectangle, its lanes the
// row's vectors. Each combination is its own instantiation (no run-time branch in the loop).
// Merge: region_histogram_u8 adds each block's counts into d_hist after a memset;
// region_lut_u8 adds them into zeroed grid state, and the last block to finish (a ticket, as
// columns.cuh's finish_grid) writes d_hist, zeroes the state again and builds the LUT: one launch,
// no memset, no CDF/LUT launch.
#include <algorithm>

#include "equalize/cdf_lut.cuh"
#include "equalize/stages.hpp"
#include "histogram/columns.cuh"
#include "histogram/common.cuh"
#include "histogram/policy.hpp"
#include "histogram/region.hpp"
#include "histogram/region_count.cuh"
#include "support/pdl.cuh"

namespace histeq::kernels {
namespace {

using region::MaskRead;
constexpr int kBins = 256;
constexpr int kBlock = RegionPolicy::kBlockSize;
constexpr int kVector = CommonPolicy::kVectorBytes;

struct Args {
  const std::uint8_t* plane;
  int width, x, y, w, h;
  const std::uint8_t* mask;  ///< null for MaskRead::none
  unsigned long long* hist;
  columns::GridState* state;  ///< null: add into hist (zeroed by the caller)
  Formula formula;
  std::uint8_t* lut;  ///< with state: the LUT the last block builds, or null
};

/// The last block of the grid (a ticket on the zeroed state, as columns::finish_grid) moves the
/// accumulated counts into a.hist, zeroing the state for the next call, and builds a.lut.
__device__ __forceinline__ void finish_last(const Args& a) {
  __shared__ bool last;
  __shared__ unsigned long long cdf[kBins];
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicInc(&a.state->ticket, gridDim.x - 1) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int t = int(threadIdx.x);
  unsigned long long c = 0;
  if (t < kBins) {
    c = atomicExch(&a.state->acc[t], 0ull);
    a.hist[t] = c;
  }
  if (a.lut == nullptr) return;
  const std::uint32_t v = cdf::warp_scan_lut_entry<kBlock>(c, a.formula, cdf);
  if (t < kBins) a.lut[t] = static_cast<std::uint8_t>(v);
}

template <MaskRead kMask, bool kRows, bool kFull, int kMinBlocks>
__global__ void __launch_bounds__(kBlock, kMinBlocks) region_hist_kernel(Args a) {
  __shared__ __align__(16) std::uint32_t cols[columns::kSmemWords];
  columns::zero_columns<kBlock>(cols);
  pdl::wait();  // launched programmatically after the previous call's apply, which reads a.lut
  __syncthreads();
  const region::Lane lane = region::lane_of(cols);
  if constexpr (!kRows) {
    const std::size_t off = std::size_t(a.y) * std::size_t(a.width);
    region::count_run<RegionPolicy::kVectorsInFlight, kMask, kFull>(
        lane, a.plane + off, kMask == MaskRead::none ? nullptr : a.mask + off,
        std::size_t(a.h) * std::size_t(a.width), std::size_t(blockIdx.x) * kBlock + threadIdx.x,
        std::size_t(gridDim.x) * kBlock);
  } else {
    const int warps = int(gridDim.x) * (kBlock / 32);
    for (int r = int(blockIdx.x) * (kBlock / 32) + int(threadIdx.x / 32); r < a.h; r += warps) {
      const std::size_t off = std::size_t(a.y + r) * std::size_t(a.width) + std::size_t(a.x);
      region::count_run<1, kMask, kFull>(lane, a.plane + off,
                                         kMask == MaskRead::none ? nullptr : a.mask + off,
                                         std::size_t(a.w), threadIdx.x % 32, 32);
    }
  }
  __syncthreads();
  if (a.state == nullptr) {
    columns::for_each_value_sum<kBlock>(cols, [&a](int v, std::uint32_t c) {
      if (c != 0) atomicAdd(&a.hist[v], static_cast<unsigned long long>(c));
    });
    return;
  }
  columns::for_each_value_sum<kBlock>(cols, [&a](int v, std::uint32_t c) {
    if (c != 0) columns::add_to_grid(a.state, v, c);
  });
  finish_last(a);
}

using Kernel = void (*)(Args);

template <MaskRead kMask, bool kRows, int kMinBlocks>
Kernel with_full(bool full) {
  if constexpr (kMask == MaskRead::none)
    return region_hist_kernel<kMask, kRows, false, kMinBlocks>;
  else
    return full ? region_hist_kernel<kMask, kRows, true, kMinBlocks>
                : region_hist_kernel<kMask, kRows, false, kMinBlocks>;
}

template <MaskRead kMask>
Kernel with_layout(bool rows, bool full, int blocks_per_sm) {
  if (rows) return with_full<kMask, true, RegionPolicy::kRowsBlocksPerSm>(full);
  return blocks_per_sm == 3 ? with_full<kMask, false, 3>(full)
                            : with_full<kMask, false, RegionPolicy::kBlocksPerSm>(full);
}

/// The instantiation for the region's mask reading and layout and t's RegionTuning.
Kernel pick(MaskRead m, bool rows, const RegionTuning& t) {
  switch (m) {
    case MaskRead::none: return with_layout<MaskRead::none>(rows, false, t.blocks_per_sm);
    case MaskRead::vectors:
      return with_layout<MaskRead::vectors>(rows, t.full_vectors, t.blocks_per_sm);
    default: return with_layout<MaskRead::bytes>(rows, t.full_vectors, t.blocks_per_sm);
  }
}

void check(const RegionLaunch& r) {
  if (r.d_hist == nullptr || (r.w > 0 && r.h > 0 && r.d_plane == nullptr))
    throw UsageError("region histogram: null device pointer");
  if (r.x < 0 || r.y < 0 || r.w < 0 || r.h < 0 || r.x + r.w > r.width || r.y + r.h > r.height)
    throw UsageError("region histogram: the rectangle is not inside the plane");
}

/// Launches the region's kernel (r.w, r.h > 0) with the merge `a` asks for.
void launch(const RegionLaunch& r, Args a, const Tuning& t, pdl::Edge edge) {
  const bool rows = !(r.x == 0 && r.w == r.width);
  const auto* plane = static_cast<const std::uint8_t*>(r.d_plane);
  MaskRead m = MaskRead::none;
  if (r.d_mask != nullptr)
    m = (reinterpret_cast<std::uintptr_t>(plane) - reinterpret_cast<std::uintptr_t>(r.d_mask)) %
                    kVector ==
                0
            ? MaskRead::vectors
            : MaskRead::bytes;
  const Kernel k = pick(m, rows, t.region);
  const std::size_t n = std::size_t(r.w) * std::size_t(r.h);
  // Work per block: whole rows, kBlock threads' vectors; else kBlock / 32 rows.
  const std::size_t wanted = rows ? detail::ceil_div(std::size_t(r.h), kBlock / 32)
                                  : detail::ceil_div(n, std::size_t(kBlock) * kVector);
  // At most the blocks resident at once (occupancy x SMs, as the device reports it).
  std::size_t grid =
      std::min(wanted, detail::resident_blocks(reinterpret_cast<const void*>(k), kBlock, 0));
  grid = std::max({grid, detail::ceil_div(n, CommonPolicy::kMaxSamplesPerBlock), std::size_t(1)});
  a.plane = plane;
  a.width = r.width;
  a.x = r.x;
  a.y = r.y;
  a.w = r.w;
  a.h = r.h;
  a.mask = r.d_mask;
  a.hist = reinterpret_cast<unsigned long long*>(r.d_hist);
  pdl::launch(edge, t, k, dim3(unsigned(grid)), dim3(kBlock), 0, r.stream, a);
}

}  // namespace

void region_histogram_u8(const RegionLaunch& r, const Tuning& t) {
  check(r);
  HISTEQ_CUDA_CHECK(cudaMemsetAsync(r.d_hist, 0, kBins * sizeof(std::uint64_t), r.stream));
  if (r.w == 0 || r.h == 0) return;
  Args a{};
  launch(r, a, t, pdl::Edge(0));
}

std::size_t region_state_bytes() { return sizeof(columns::GridState); }

void region_lut_u8(const RegionLaunch& r, void* d_state, Formula f, std::uint8_t* d_lut,
                   const Tuning& t) {
  check(r);
  if (d_state == nullptr) throw UsageError("region histogram: null state");
  if (r.w == 0 || r.h == 0) {  // nothing counted: an empty histogram and the identity LUT
    HISTEQ_CUDA_CHECK(cudaMemsetAsync(r.d_hist, 0, kBins * sizeof(std::uint64_t), r.stream));
    if (d_lut != nullptr) launch_cdf_lut(r.d_hist, d_lut, f, r.stream);
    return;
  }
  Args a{};
  a.state = static_cast<columns::GridState*>(d_state);
  a.formula = f;
  a.lut = d_lut;
  launch(r, a, t, pdl::kRegionEqualize);
}

}  // namespace histeq::kernels
