// clahe_apply — CLAHE's bilinear interpolation between the four nearest tiles' LUTs.
// In:  d_in[0, width·height) u8 or u16 plane (rows contiguous), d_luts[t·bins + v] from
//      clahe_luts. Out: d_out[0, width·height), overwritten; d_out may be d_in (each output
//      depends only on the input at the same index). Async on `stream`; no scratch.
// Exact: yes — clahe_formula::axis / blend / round_sat, the same float32 operations in the same
//      order as the CPU twin and OpenCV's CLAHE_Interpolation_Body (explicit _rn intrinsics, so
//      nvcc cannot contract them into FMAs).
// Tuning: kClahePolicy.kApply*: grid-stride loop; each thread takes one 16-byte vector (16 u8 or
//      8 u16 samples) when both pointers are 16-byte aligned, else one sample. Row and column
//      come from one division per vector, then advance incrementally; the LUTs (tiles·256 bytes
//      for 8-bit: 16 KiB for 8×8) stay in L1/L2 and are read with __ldg.
// 8-bit planes of at least ClahePolicy::kCellMinPixels pixels whose width is a multiple of 16
// (16-byte aligned) go to the faster per-cell kernel instead (clahe_apply_cell.cu).
// Source: OpenCV 4.6 modules/imgproc/src/clahe.cpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "clahe.hpp"
#include "common.cuh"
#include "cuda_check.hpp"
#include "histeq/error.hpp"
#include "policy.hpp"

namespace histeq::kernels {
namespace {
namespace cf = histeq::clahe_formula;
using P = ClahePolicy;

struct ApplyArgs {
  int width, height, tiles_x, tiles_y;
  float inv_tw, inv_th;
};

template <typename T>
__device__ __forceinline__ T interpolate(const T* __restrict__ luts, const ApplyArgs& a, int x,
                                         const cf::Axis& ya, int v) {
  constexpr int kBins = sizeof(T) == 1 ? 256 : 65536;
  const cf::Axis xa = cf::axis(x, a.inv_tw, a.tiles_x);
  const T* l1 = luts + std::size_t(ya.t1) * a.tiles_x * kBins;
  const T* l2 = luts + std::size_t(ya.t2) * a.tiles_x * kBins;
  const std::size_t i1 = std::size_t(xa.t1) * kBins + v, i2 = std::size_t(xa.t2) * kBins + v;
  const float r = cf::blend(__ldg(l1 + i1), __ldg(l1 + i2), __ldg(l2 + i1), __ldg(l2 + i2), xa, ya);
  return static_cast<T>(cf::round_sat(r, kBins - 1));
}

template <typename T, bool kVector>
__global__ void __launch_bounds__(P::kApplyBlockSize)
    apply_kernel(const T* in, T* out, const T* __restrict__ luts, ApplyArgs a) {
  constexpr int kPer = kVector ? 16 / int(sizeof(T)) : 1;
  const std::size_t n = std::size_t(a.width) * std::size_t(a.height);
  const std::size_t items = kVector ? n / kPer : n;
  for (std::size_t k = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; k < items;
       k += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t i0 = k * kPer;
    int y = int(unsigned(i0) / unsigned(a.width)),
        x = int(unsigned(i0) - unsigned(y) * unsigned(a.width));
    cf::Axis ya = cf::axis(y, a.inv_th, a.tiles_y);
    if constexpr (kVector) {
      uint4 q = reinterpret_cast<const uint4*>(in)[k];
      T* vals = reinterpret_cast<T*>(&q);
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        if (x == a.width) {
          x = 0;
          ++y;
          ya = cf::axis(y, a.inv_th, a.tiles_y);
        }
        vals[j] = interpolate(luts, a, x, ya, int(vals[j]));
        ++x;
      }
      reinterpret_cast<uint4*>(out)[k] = q;
    } else {
      out[i0] = interpolate(luts, a, x, ya, int(in[i0]));
    }
  }
  // The vector path's tail (n % kPer samples), by the first threads.
  if constexpr (kVector) {
    const std::size_t tail0 = items * kPer;
    const std::size_t i = tail0 + std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) {
      const int y = int(unsigned(i) / unsigned(a.width)),
                x = int(unsigned(i) - unsigned(y) * unsigned(a.width));
      out[i] = interpolate(luts, a, x, cf::axis(y, a.inv_th, a.tiles_y), int(in[i]));
    }
  }
}

template <typename T>
void run_apply(const T* d_in, T* d_out, const cf::Geometry& g, const T* luts, cudaStream_t stream) {
  const ApplyArgs a{
      g.width, g.height, g.tiles_x, g.tiles_y, cf::inv_size(g.tile_w), cf::inv_size(g.tile_h)};
  const std::size_t n = std::size_t(g.width) * g.height;
  if (n >= (std::size_t(1) << 32)) throw UsageError("CLAHE apply: more than 2^32 - 1 samples");
  const bool vec = reinterpret_cast<std::uintptr_t>(d_in) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(d_out) % 16 == 0;
  const std::size_t per = vec ? 16 / sizeof(T) : 1;
  const std::size_t work = std::max<std::size_t>(1, n / per);
  const std::size_t cap = std::size_t(P::kApplyBlocksPerSm) * detail::sm_count();
  const unsigned grid = unsigned(std::max<std::size_t>(
      1, std::min(cap, detail::ceil_div(work, std::size_t(P::kApplyBlockSize)))));
  if (vec) {
    apply_kernel<T, true><<<grid, P::kApplyBlockSize, 0, stream>>>(d_in, d_out, luts, a);
  } else {
    apply_kernel<T, false><<<grid, P::kApplyBlockSize, 0, stream>>>(d_in, d_out, luts, a);
  }
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace

void clahe_apply(const void* d_in, void* d_out, const cf::Geometry& g, const void* d_luts,
                 cudaStream_t stream) {
  if (g.width < 1 || g.height < 1) throw UsageError("CLAHE apply: empty plane");
  if (d_in == nullptr || d_out == nullptr || d_luts == nullptr) {
    throw UsageError("CLAHE apply: null device pointer");
  }
  if (g.hist_size == 256) {
    if (clahe_apply_cell_u8(static_cast<const std::uint8_t*>(d_in),
                            static_cast<std::uint8_t*>(d_out), g,
                            static_cast<const std::uint8_t*>(d_luts), stream)) {
      return;
    }
    run_apply(static_cast<const std::uint8_t*>(d_in), static_cast<std::uint8_t*>(d_out), g,
              static_cast<const std::uint8_t*>(d_luts), stream);
  } else if (g.hist_size == 65536) {
    run_apply(static_cast<const std::uint16_t*>(d_in), static_cast<std::uint16_t*>(d_out), g,
              static_cast<const std::uint16_t*>(d_luts), stream);
  } else {
    throw UsageError("CLAHE apply: hist_size must be 256 or 65536");
  }
}

}  // namespace histeq::kernels
