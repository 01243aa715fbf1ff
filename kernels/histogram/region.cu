// region — the 256-bin histogram of the pixels a region counts (region.hpp): a rectangle and/or
// a mask of an 8-bit plane, in one pass that reads each counted row's plane and mask bytes once.
// In:  a RegionLaunch (device plane, width x height; the rectangle; the optional device mask).
// Out: d_hist[0,256) uint64, overwritten (a memset, then block merges with one atomic per bin).
// Counting: columns.cuh's lane-owned shared columns (word v·32 + lane), so a warp's shared
// atomics never conflict on a bank whatever the data, as in the registry's columns kernel.
// Exact: yes (uint32 shared counters, at most 2^31 samples per block: the grid is at least
// n / 2^31 blocks). Tuning: RegionPolicy (policy.hpp).
// Rectangles of whole rows (x = 0, w = width; a mask alone covers every row) are one contiguous
// run: grid-stride 16-byte loads of the plane, and of the mask at the same offset when the two
// share their address modulo 16 (else the mask's bytes are read one by one, still coalesced
// across the warp). Narrower rectangles: each warp takes rows of the rectangle, its lanes the
// row's vectors.
#include <algorithm>

#include "histogram/columns.cuh"
#include "histogram/common.cuh"
#include "histogram/policy.hpp"
#include "histogram/region.hpp"

namespace histeq::kernels {
namespace {

constexpr int kBins = 256;
constexpr int kBlock = RegionPolicy::kBlockSize;
constexpr int kVector = CommonPolicy::kVectorBytes;

/// Counts the four bytes of a word of samples whose mask bytes (the same positions of m) are
/// nonzero, into the calling lane's column s (columns.cuh: word v·32 + lane).
__device__ __forceinline__ void count_word(unsigned v, unsigned m, std::uint32_t* s) {
#pragma unroll
  for (int k = 0; k < 4; ++k)
    if ((m >> (8 * k)) & 0xFFu) columns::count_value(s, (v >> (8 * k)) & 0xFFu);
}

/// Counts p[i] for i < n where the mask (if any) is nonzero, into the calling lane's column s;
/// thread `tid` of `nthreads` takes the head bytes before p's first 16-byte boundary, the
/// vectors i ≡ tid, and the tail bytes.
template <int kInFlight>
__device__ __forceinline__ void count_run(const std::uint8_t* __restrict__ p,
                                          const std::uint8_t* __restrict__ m, std::size_t n,
                                          std::size_t tid, std::size_t nthreads, std::uint32_t* s) {
  const std::size_t misalign = reinterpret_cast<std::uintptr_t>(p) % kVector;
  const std::size_t head = std::min<std::size_t>(misalign == 0 ? 0 : kVector - misalign, n);
  const std::size_t nvec = (n - head) / kVector;
  const std::size_t tail = head + nvec * kVector;
  for (std::size_t i = tid; i < head; i += nthreads)
    if (m == nullptr || m[i] != 0) columns::count_value(s, p[i]);
  const uint4* vp = reinterpret_cast<const uint4*>(p + head);
  const bool vector_mask =
      m != nullptr && reinterpret_cast<std::uintptr_t>(m + head) % kVector == 0;
  const uint4* vm = vector_mask ? reinterpret_cast<const uint4*>(m + head) : nullptr;
  for (std::size_t base = tid; base < nvec; base += nthreads * kInFlight) {
    uint4 v[kInFlight], mk[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const std::size_t i = base + std::size_t(u) * nthreads;
      if (i < nvec) {
        v[u] = __ldg(&vp[i]);
        if (vector_mask) mk[u] = __ldg(&vm[i]);
      }
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const std::size_t i = base + std::size_t(u) * nthreads;
      if (i >= nvec) continue;
      if (m == nullptr) {
        columns::count_word_u8(s, v[u].x);
        columns::count_word_u8(s, v[u].y);
        columns::count_word_u8(s, v[u].z);
        columns::count_word_u8(s, v[u].w);
      } else if (vector_mask) {
        count_word(v[u].x, mk[u].x, s);
        count_word(v[u].y, mk[u].y, s);
        count_word(v[u].z, mk[u].z, s);
        count_word(v[u].w, mk[u].w, s);
      } else {
        const std::uint8_t* mb = m + head + i * kVector;
        const unsigned words[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const unsigned mw = unsigned(mb[4 * w]) | unsigned(mb[4 * w + 1]) << 8 |
                              unsigned(mb[4 * w + 2]) << 16 | unsigned(mb[4 * w + 3]) << 24;
          count_word(words[w], mw, s);
        }
      }
    }
  }
  for (std::size_t i = tail + tid; i < n; i += nthreads)
    if (m == nullptr || m[i] != 0) columns::count_value(s, p[i]);
}

__global__ void __launch_bounds__(kBlock, RegionPolicy::kBlocksPerSm)
    region_hist_kernel(const std::uint8_t* __restrict__ plane, int width, int x, int y, int w,
                       int h, const std::uint8_t* __restrict__ mask, bool whole_rows,
                       unsigned long long* d_hist) {
  __shared__ __align__(16) std::uint32_t cols[columns::kSmemWords];
  columns::zero_columns<kBlock>(cols);
  __syncthreads();
  std::uint32_t* mine = cols + threadIdx.x % 32;  // the lane's column
  if (whole_rows) {
    const std::size_t off = std::size_t(y) * std::size_t(width);
    count_run<RegionPolicy::kVectorsInFlight>(
        plane + off, mask ? mask + off : nullptr, std::size_t(h) * std::size_t(width),
        std::size_t(blockIdx.x) * kBlock + threadIdx.x, std::size_t(gridDim.x) * kBlock, mine);
  } else {
    const int lane = int(threadIdx.x % 32);
    const int warps = int(gridDim.x) * (kBlock / 32);
    for (int r = int(blockIdx.x) * (kBlock / 32) + int(threadIdx.x / 32); r < h; r += warps) {
      const std::size_t off = std::size_t(y + r) * std::size_t(width) + std::size_t(x);
      count_run<1>(plane + off, mask ? mask + off : nullptr, std::size_t(w), std::size_t(lane), 32,
                   mine);
    }
  }
  __syncthreads();
  columns::for_each_value_sum<kBlock>(cols, [d_hist](int v, std::uint32_t c) {
    if (c != 0) atomicAdd(&d_hist[v], static_cast<unsigned long long>(c));
  });
}

}  // namespace

void region_histogram_u8(const RegionLaunch& r) {
  if (r.d_hist == nullptr || (r.w > 0 && r.h > 0 && r.d_plane == nullptr))
    throw UsageError("region histogram: null device pointer");
  if (r.x < 0 || r.y < 0 || r.w < 0 || r.h < 0 || r.x + r.w > r.width || r.y + r.h > r.height)
    throw UsageError("region histogram: the rectangle is not inside the plane");
  HISTEQ_CUDA_CHECK(cudaMemsetAsync(r.d_hist, 0, kBins * sizeof(std::uint64_t), r.stream));
  if (r.w == 0 || r.h == 0) return;
  const bool whole_rows = r.x == 0 && r.w == r.width;
  const std::size_t n = std::size_t(r.w) * std::size_t(r.h);
  // Work per block: whole rows, kBlock threads' vectors; else kBlock / 32 rows.
  const std::size_t wanted = whole_rows ? detail::ceil_div(n, std::size_t(kBlock) * kVector)
                                        : detail::ceil_div(std::size_t(r.h), kBlock / 32);
  // At most the blocks resident at once (occupancy x SMs, as the device reports it).
  std::size_t grid = std::min(
      wanted,
      detail::resident_blocks(reinterpret_cast<const void*>(region_hist_kernel), kBlock, 0));
  grid = std::max({grid, detail::ceil_div(n, CommonPolicy::kMaxSamplesPerBlock), std::size_t(1)});
  region_hist_kernel<<<unsigned(grid), kBlock, 0, r.stream>>>(
      static_cast<const std::uint8_t*>(r.d_plane), r.width, r.x, r.y, r.w, r.h, r.d_mask,
      whole_rows, reinterpret_cast<unsigned long long*>(r.d_hist));
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace histeq::kernels
