// hist_u16_region — the 65536-bin histogram of the samples a region counts (a rectangle and/or a
// mask of a 16-bit plane; histogram/region.hpp's RegionLaunch).
// In:  a RegionLaunch (device u16 plane, 2-byte aligned; the rectangle; the optional mask).
// Out: d_hist[0,65536) uint64, overwritten. Async on the stream. Exact: yes.
// A rectangle of whole rows without a mask is one contiguous run: hist_u16 (the packed shared
// counters). Otherwise a memset and one launch: each warp takes rows of the rectangle, its lanes
// the row's samples (coalesced 2-byte loads, the mask's bytes beside them), one global 64-bit
// atomic per counted sample. Tuning: HistU16RegionPolicy (policy.hpp).
#include <algorithm>

#include "histeq/error.hpp"
#include "histogram/region.hpp"
#include "support/cuda_check.hpp"
#include "support/device.hpp"
#include "u16/hist_u16.hpp"
#include "u16/policy.hpp"

namespace histeq::kernels {
namespace {

constexpr int kBlock = HistU16RegionPolicy::kBlockSize;

__global__ void __launch_bounds__(kBlock)
    hist_u16_region_kernel(const std::uint16_t* __restrict__ plane, int width, int x, int y, int w,
                           int h, const std::uint8_t* __restrict__ mask,
                           unsigned long long* d_hist) {
  const int lane = int(threadIdx.x % 32);
  const int warps = int(gridDim.x) * (kBlock / 32);
  // Rows and columns are warp-uniform loops (every lane takes each step, counted or not), so the
  // whole warp takes part in each __match_any_sync.
  for (int r = int(blockIdx.x) * (kBlock / 32) + int(threadIdx.x / 32); r < h; r += warps) {
    const std::size_t off = std::size_t(y + r) * std::size_t(width) + std::size_t(x);
    const std::uint16_t* p = plane + off;
    const std::uint8_t* m = mask ? mask + off : nullptr;
    for (int c0 = 0; c0 < w; c0 += 32) {
      const int c = c0 + lane;
      const bool counted = c < w && (m == nullptr || __ldg(&m[c]) != 0);
      // A lane not counted holds 65536, which no sample equals: it groups only with its like.
      const unsigned v = counted ? unsigned(__ldg(&p[c])) : 65536u;
      const unsigned group = __match_any_sync(0xFFFFFFFFu, v);
      if (counted && lane == __ffs(group) - 1)
        atomicAdd(&d_hist[v], static_cast<unsigned long long>(__popc(group)));
    }
  }
}

}  // namespace

void hist_u16_region(const RegionLaunch& r, std::uint32_t* d_scratch, const Tuning& t) {
  if (r.d_hist == nullptr || (r.w > 0 && r.h > 0 && r.d_plane == nullptr))
    throw UsageError("hist_u16_region: null device pointer");
  if (r.x < 0 || r.y < 0 || r.w < 0 || r.h < 0 || r.x + r.w > r.width || r.y + r.h > r.height)
    throw UsageError("hist_u16_region: the rectangle is not inside the plane");
  const auto* plane = static_cast<const std::uint16_t*>(r.d_plane);
  if (r.d_mask == nullptr && r.x == 0 && r.w == r.width) {
    hist_u16(plane + std::size_t(r.y) * std::size_t(r.width), std::size_t(r.w) * std::size_t(r.h),
             r.d_hist, r.stream, d_scratch, /*assign=*/true, t);
    return;
  }
  HISTEQ_CUDA_CHECK(cudaMemsetAsync(r.d_hist, 0, 65536 * sizeof(std::uint64_t), r.stream));
  if (r.w == 0 || r.h == 0) return;
  const std::size_t grid =
      std::min(detail::ceil_div(std::size_t(r.h), kBlock / 32),
               std::size_t(detail::sm_count()) * HistU16RegionPolicy::kBlocksPerSm);
  hist_u16_region_kernel<<<unsigned(grid), kBlock, 0, r.stream>>>(
      plane, r.width, r.x, r.y, r.w, r.h, r.d_mask,
      reinterpret_cast<unsigned long long*>(r.d_hist));
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace histeq::kernels
