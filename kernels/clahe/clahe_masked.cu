// clahe_masked — masked CLAHE's tile histograms and LUTs (ClaheOptions::region, clahe.hpp): the
// counted pixels of each tile of the padded image, then each tile's clip, redistribution and LUT
// from their number N (the identity for N = 0). The existing apply kernels interpolate.
// In:  d_in[0, width·height) u8 or u16 plane, rows contiguous; the region (ClaheRegion): a
//      rectangle and an optional mask of width·height bytes, nonzero: counted. hist: tiles·bins
//      uint32 counters, zero on entry, zero again on exit (the LUT kernel clears what it read).
// Out: luts[t·bins + v] of the sample type, equal to cpu::clahe_luts with the region.
// Exact: yes (integer counts; the clip limit in double and the LUT scale in float32 with one
//      rounding per operation, as clahe_formula::clip_of / count_tile on the host).
// Tuning: kClahePolicy (policy.hpp): kMaskedHistThreads, kMaskedHistRows, kMaskedLutThreads.
// Shape: the histogram kernel runs a block per kMaskedHistRows padded rows (a grid-stride loop
// over row groups), its threads striding over the padded columns; each padded position maps to
// the pixel reflect-101 gives it (no padded copy); rows outside the rectangle are skipped whole,
// and a counted pixel adds one to its tile's bin in global memory (L2 atomics). The LUT kernel runs
// a block per tile: each thread owns a contiguous run of bins, the clipped excess and the run sums
// are block sums and a block scan, and the residual goes by clahe_formula::gets_residual (OpenCV's
// loop in closed form).
#include <cuda_runtime.h>

#include <cstdint>

#include "clahe/clahe.hpp"
#include "clahe/policy.hpp"
#include "histeq/error.hpp"
#include "support/cuda_check.hpp"

namespace histeq::kernels {
namespace {
namespace cf = histeq::clahe_formula;
using P = ClahePolicy;

template <typename T>
__global__ void masked_hist_kernel(const T* __restrict__ in, ClaheRegion r, cf::Geometry g,
                                   std::uint32_t* __restrict__ hist) {
  const int x_end = r.x + r.width, y_end = r.y + r.height;
  for (int r0 = int(blockIdx.x) * P::kMaskedHistRows; r0 < g.padded_h;
       r0 += int(gridDim.x) * P::kMaskedHistRows) {
    const int r_end = r0 + P::kMaskedHistRows < g.padded_h ? r0 + P::kMaskedHistRows : g.padded_h;
    for (int yp = r0; yp < r_end; ++yp) {
      const int y = yp < g.height ? yp : cf::reflect101(yp, g.height);
      if (y < r.y || y >= y_end) continue;  // the same for the whole block: no divergence
      const std::size_t row = std::size_t(y) * std::size_t(g.width);
      const std::size_t tile_row = std::size_t(yp / g.tile_h) * std::size_t(g.tiles_x);
      for (int xp = int(threadIdx.x); xp < g.padded_w; xp += int(blockDim.x)) {
        const int x = xp < g.width ? xp : cf::reflect101(xp, g.width);
        if (x < r.x || x >= x_end) continue;
        if (r.mask != nullptr && r.mask[row + std::size_t(x)] == 0) continue;
        const std::size_t t = tile_row + std::size_t(xp / g.tile_w);
        atomicAdd(hist + t * std::size_t(g.hist_size) + std::size_t(in[row + std::size_t(x)]), 1u);
      }
    }
  }
}

/// Sum of v over the block (every thread gets it); s holds 33 values. Ends synchronized.
__device__ __forceinline__ long long block_sum(long long v, long long* s) {
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int warps = int(blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) s[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    long long w = 0;
    for (int i = 0; i < warps; ++i) w += s[i];
    s[32] = w;
  }
  __syncthreads();
  return s[32];
}

template <typename T>
__global__ void masked_lut_kernel(cf::Geometry g, double clip_limit,
                                  std::uint32_t* __restrict__ hist, T* __restrict__ luts) {
  __shared__ long long s_sum[33];
  __shared__ int s_prefix[P::kMaskedLutThreads];
  const int bins = g.hist_size;
  const int per = bins / int(blockDim.x);  // bins per thread (blockDim divides bins)
  const int i0 = int(threadIdx.x) * per;
  std::uint32_t* h = hist + std::size_t(blockIdx.x) * std::size_t(bins);
  T* lut = luts + std::size_t(blockIdx.x) * std::size_t(bins);
  long long mine = 0;
  for (int i = i0; i < i0 + per; ++i) mine += h[i];
  const long long n = block_sum(mine, s_sum);
  if (n == 0) {
    for (int i = i0; i < i0 + per; ++i) lut[i] = T(i);
    return;
  }
  const int count = int(n);
  int clip = 0;
  if (clip_limit > 0.0) {
    const double c = __ddiv_rn(__dmul_rn(clip_limit, double(count)), double(bins));
    clip = c >= double(count) ? 0 : (c < 1.0 ? 1 : int(c));
  }
  int batch = 0, residual = 0, step = 1;
  if (clip > 0) {
    long long excess = 0;
    for (int i = i0; i < i0 + per; ++i) {
      const int v = int(h[i]);
      if (v > clip) excess += v - clip;
    }
    const int clipped = int(block_sum(excess, s_sum));
    batch = clipped / bins;
    residual = clipped - batch * bins;
    step = cf::residual_step(bins, residual);
  }
  auto final_count = [&](int i) {
    int v = int(h[i]);
    if (clip > 0) {
      v = (v > clip ? clip : v) + batch;
      if (cf::gets_residual(i, residual, step)) ++v;
    }
    return v;
  };
  int run = 0;
  for (int i = i0; i < i0 + per; ++i) run += final_count(i);
  s_prefix[threadIdx.x] = run;
  __syncthreads();
  if (threadIdx.x == 0) {  // exclusive scan of the runs (at most kMaskedLutThreads of them)
    int acc = 0;
    for (int k = 0; k < int(blockDim.x); ++k) {
      const int r = s_prefix[k];
      s_prefix[k] = acc;
      acc += r;
    }
  }
  __syncthreads();
  const float scale = __fdiv_rn(__int2float_rn(bins - 1), __int2float_rn(count));
  int sum = s_prefix[threadIdx.x];
  for (int i = i0; i < i0 + per; ++i) {
    sum += final_count(i);
    lut[i] = T(cf::lut_value(sum, scale, bins - 1));
  }
  __syncthreads();  // every thread has read its bins: clear them
  for (int i = i0; i < i0 + per; ++i) h[i] = 0;
}

template <typename T>
void run_masked(const T* d_in, const ClaheRegion& r, const cf::Geometry& g, double clip_limit,
                std::uint32_t* hist, T* luts, cudaStream_t stream) {
  const int groups = (g.padded_h + P::kMaskedHistRows - 1) / P::kMaskedHistRows;
  const unsigned grid =
      unsigned(groups < P::kMaskedHistMaxBlocks ? groups : P::kMaskedHistMaxBlocks);
  masked_hist_kernel<T><<<grid, P::kMaskedHistThreads, 0, stream>>>(d_in, r, g, hist);
  HISTEQ_CUDA_CHECK_LAUNCH();
  masked_lut_kernel<T>
      <<<unsigned(g.tiles()), P::kMaskedLutThreads, 0, stream>>>(g, clip_limit, hist, luts);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace

void clahe_masked_luts(const void* d_in, const ClaheRegion& region, const cf::Geometry& g,
                       double clip_limit, std::uint32_t* hist, void* luts, cudaStream_t stream) {
  if (g.width < 1 || g.height < 1 || g.tiles_x < 1 || g.tiles_y < 1)
    throw UsageError("CLAHE: empty plane or grid");
  if (d_in == nullptr || hist == nullptr || luts == nullptr)
    throw UsageError("CLAHE: null device pointer");
  const ClaheRegion& r = region;
  if (r.x < 0 || r.y < 0 || r.width < 1 || r.height < 1 || r.x > g.width - r.width ||
      r.y > g.height - r.height)
    throw UsageError("CLAHE: the region's rectangle is empty or not inside the plane");
  if (g.hist_size == 256) {
    run_masked(static_cast<const std::uint8_t*>(d_in), r, g, clip_limit, hist,
               static_cast<std::uint8_t*>(luts), stream);
  } else if (g.hist_size == 65536) {
    run_masked(static_cast<const std::uint16_t*>(d_in), r, g, clip_limit, hist,
               static_cast<std::uint16_t*>(luts), stream);
  } else {
    throw UsageError("CLAHE: hist_size must be 256 or 65536");
  }
}

}  // namespace histeq::kernels
