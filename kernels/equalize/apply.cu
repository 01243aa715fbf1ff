// apply — the per-pixel stages: plane extraction before the histogram, LUT application after it.
// In:  d_in[0, pixels·channels) u8 interleaved (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA), device
//      memory, any alignment, pixels may be 0; d_luts[p·256 + v] (apply only).
// Out: extract_planes: d_planes[p·pixels + i], plane_count(mode, channels) planes.
//      apply: d_out[0, pixels·output_channels(mode, channels)), overwritten; alpha copied.
//      Async on `stream`; no host sync; no scratch. Must not overlap d_in.
// Exact: yes — byte for byte cpu::extract_planes / cpu::apply (same color.hpp formulas).
// Tuning: kApplyPolicy, kPlanesPolicy (stages.hpp): grid-stride loops over at most
// blocks_per_sm · SMs blocks. The 1-channel apply reads and writes 16 bytes per thread (uint4)
// from a 16-byte-aligned body with scalar head/tail, and looks up a LUT staged in shared memory.
// Source: PMPP 4th ed. ch. 6 (coalescing, vector access); OpenCV's cv::LUT and
// cv::cvtColor(COLOR_RGB2YCrCb / COLOR_YCrCb2RGB) for the semantics.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "equalize/stages.hpp"
#include "histeq/color.hpp"
#include "histeq/error.hpp"
#include "histeq/planes.hpp"
#include "support/cuda_check.hpp"
#include "support/pdl.cuh"

namespace histeq::kernels {
namespace {

constexpr int kVecBytes = 16;  // one uint4

/// Blocks for `work` items under a policy: enough to cover the work, capped to keep every SM
/// busy with a grid-stride loop (at least 1).
int grid_for(std::size_t work, const StagePolicy& p) {
  int dev = 0, sms = 0;
  HISTEQ_CUDA_CHECK(cudaGetDevice(&dev));
  HISTEQ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const std::size_t cap = std::size_t(sms > 0 ? sms : 1) * std::size_t(p.blocks_per_sm);
  const std::size_t need = (work + std::size_t(p.block_size) - 1) / std::size_t(p.block_size);
  const std::size_t g = need < cap ? need : cap;
  return static_cast<int>(g > 0 ? g : 1);
}

/// Stages `count` bytes of LUTs into shared memory (whole block; ends with a barrier).
__device__ __forceinline__ void stage_luts(std::uint8_t* s_lut, const std::uint8_t* d_luts,
                                           int count) {
  for (int i = threadIdx.x; i < count; i += blockDim.x) s_lut[i] = d_luts[i];
  __syncthreads();
}

__device__ __forceinline__ std::uint32_t map4(std::uint32_t x, const std::uint8_t* lut) {
  return std::uint32_t(lut[x & 0xffu]) | (std::uint32_t(lut[(x >> 8) & 0xffu]) << 8) |
         (std::uint32_t(lut[(x >> 16) & 0xffu]) << 16) | (std::uint32_t(lut[x >> 24]) << 24);
}

/// 1 channel: out[i] = lut[in[i]]. Body: uint4 loads from the first 16-byte boundary of `in`;
/// stores as uint4 when `out` has the same offset mod 16 (kOutAligned), else byte by byte.
/// Launched programmatically (launch_apply_gray) it waits for its producer before any global
/// access; launched plainly the wait returns at once.
template <bool kOutAligned>
__global__ void apply_gray1_kernel(const std::uint8_t* __restrict__ in, std::size_t n,
                                   const std::uint8_t* __restrict__ d_lut,
                                   std::uint8_t* __restrict__ out) {
  __shared__ std::uint8_t s_lut[256];
  pdl::wait();
  stage_luts(s_lut, d_lut, 256);

  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t head =
      (kVecBytes - (reinterpret_cast<std::uintptr_t>(in) & (kVecBytes - 1))) & (kVecBytes - 1);
  if (head > n) head = n;
  const std::size_t nvec = (n - head) / kVecBytes;
  const std::size_t tail = head + nvec * kVecBytes;

  // Scalar head and tail (fewer than 16 bytes each).
  for (std::size_t i = tid; i < head; i += stride) out[i] = s_lut[in[i]];
  for (std::size_t i = tail + tid; i < n; i += stride) out[i] = s_lut[in[i]];

  const uint4* vin = reinterpret_cast<const uint4*>(in + head);
  for (std::size_t k = tid; k < nvec; k += stride) {
    const uint4 w = vin[k];
    uint4 r;
    r.x = map4(w.x, s_lut);
    r.y = map4(w.y, s_lut);
    r.z = map4(w.z, s_lut);
    r.w = map4(w.w, s_lut);
    if constexpr (kOutAligned) {
      reinterpret_cast<uint4*>(out + head)[k] = r;
    } else {
      std::uint8_t* o = out + head + k * kVecBytes;
      const std::uint32_t words[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
      for (int j = 0; j < kVecBytes; ++j) {
        o[j] = static_cast<std::uint8_t>(words[j >> 2] >> (8 * (j & 3)));
      }
    }
  }
}

/// 2..4 channels, one thread per pixel (grid-stride). kPlanes LUTs staged in shared memory.
template <int C, Mode M>
__global__ void apply_pixels_kernel(const std::uint8_t* __restrict__ in, std::size_t pixels,
                                    const std::uint8_t* __restrict__ d_luts,
                                    std::uint8_t* __restrict__ out) {
  constexpr int kPlanes = (C >= 3 && M == Mode::rgb) ? 3 : 1;
  constexpr int kOutC = (M == Mode::gray) ? 1 : C;
  __shared__ std::uint8_t s_lut[kPlanes * 256];
  stage_luts(s_lut, d_luts, kPlanes * 256);

  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < pixels;
       i += stride) {
    const std::uint8_t* p = in + i * C;
    std::uint8_t* o = out + i * kOutC;
    if constexpr (C == 2) {
      o[0] = s_lut[p[0]];
      if constexpr (kOutC == 2) o[1] = p[1];
    } else {
      std::uint8_t r = p[0], g = p[1], b = p[2];
      if constexpr (M == Mode::gray) {
        o[0] = s_lut[color::luma(r, g, b)];
      } else {
        if constexpr (M == Mode::luma) {
          color::equalize_luma(r, g, b, s_lut);
        } else {
          r = s_lut[r];
          g = s_lut[256 + g];
          b = s_lut[512 + b];
        }
        o[0] = r;
        o[1] = g;
        o[2] = b;
        if constexpr (C == 4) o[3] = p[3];
      }
    }
  }
}

/// 2..4 channels → the planes of `M` (planes.hpp).
template <int C, Mode M>
__global__ void planes_kernel(const std::uint8_t* __restrict__ in, std::size_t pixels,
                              std::uint8_t* __restrict__ planes) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < pixels;
       i += stride) {
    const std::uint8_t* p = in + i * C;
    if constexpr (C == 2) {
      planes[i] = p[0];
    } else if constexpr (M == Mode::rgb) {
      planes[i] = p[0];
      planes[pixels + i] = p[1];
      planes[2 * pixels + i] = p[2];
    } else {
      planes[i] = color::luma(p[0], p[1], p[2]);
    }
  }
}

void check_channels(int channels, const char* stage) {
  if (channels < 1 || channels > 4) {
    throw UsageError(std::string(stage) + ": channels must be 1..4 (gray, gray+alpha, RGB, " +
                     "RGBA), got " + std::to_string(channels));
  }
}

template <int C>
void launch_apply_c(const std::uint8_t* d_in, std::size_t pixels, Mode mode,
                    const std::uint8_t* d_luts, std::uint8_t* d_out, cudaStream_t s) {
  const int grid = grid_for(pixels, kApplyPolicy);
  const int block = kApplyPolicy.block_size;
  switch (mode) {
    case Mode::luma:
      apply_pixels_kernel<C, Mode::luma><<<grid, block, 0, s>>>(d_in, pixels, d_luts, d_out);
      break;
    case Mode::rgb:
      apply_pixels_kernel<C, Mode::rgb><<<grid, block, 0, s>>>(d_in, pixels, d_luts, d_out);
      break;
    case Mode::gray:
      apply_pixels_kernel<C, Mode::gray><<<grid, block, 0, s>>>(d_in, pixels, d_luts, d_out);
      break;
  }
}

template <int C>
void launch_planes_c(const std::uint8_t* d_in, std::size_t pixels, Mode mode,
                     std::uint8_t* d_planes, cudaStream_t s) {
  const int grid = grid_for(pixels, kPlanesPolicy);
  const int block = kPlanesPolicy.block_size;
  if (C >= 3 && mode == Mode::rgb) {
    planes_kernel<C, Mode::rgb><<<grid, block, 0, s>>>(d_in, pixels, d_planes);
  } else {
    planes_kernel<C, Mode::luma><<<grid, block, 0, s>>>(d_in, pixels, d_planes);
  }
}

}  // namespace

void launch_extract_planes(const std::uint8_t* d_in, std::size_t pixels, int channels, Mode mode,
                           std::uint8_t* d_planes, cudaStream_t stream) {
  check_channels(channels, "extract_planes");
  if (pixels == 0) return;
  switch (channels) {
    case 1:
      HISTEQ_CUDA_CHECK(cudaMemcpyAsync(d_planes, d_in, pixels, cudaMemcpyDeviceToDevice, stream));
      return;
    case 2: launch_planes_c<2>(d_in, pixels, mode, d_planes, stream); break;
    case 3: launch_planes_c<3>(d_in, pixels, mode, d_planes, stream); break;
    default: launch_planes_c<4>(d_in, pixels, mode, d_planes, stream); break;
  }
  HISTEQ_CUDA_CHECK_LAUNCH();
}

void launch_apply_gray(const std::uint8_t* d_in, std::size_t n, const std::uint8_t* d_lut,
                       std::uint8_t* d_out, cudaStream_t stream, unsigned pdl_edge,
                       const Tuning& t) {
  if (n == 0) return;
  const int grid = grid_for((n + kVecBytes - 1) / kVecBytes, kApplyPolicy);
  const bool same_offset =
      ((reinterpret_cast<std::uintptr_t>(d_out) - reinterpret_cast<std::uintptr_t>(d_in)) &
       (kVecBytes - 1)) == 0;
  pdl::launch(pdl::Edge(pdl_edge), t,
              same_offset ? apply_gray1_kernel<true> : apply_gray1_kernel<false>,
              dim3(unsigned(grid)), dim3(unsigned(kApplyPolicy.block_size)), 0, stream, d_in, n,
              d_lut, d_out);
}

void launch_apply(const std::uint8_t* d_in, std::size_t pixels, int channels, Mode mode,
                  const std::uint8_t* d_luts, std::uint8_t* d_out, cudaStream_t stream) {
  check_channels(channels, "apply");
  if (pixels == 0) return;
  switch (channels) {
    case 1: launch_apply_gray(d_in, pixels, d_luts, d_out, stream, 0, Tuning{}); return;
    case 2: launch_apply_c<2>(d_in, pixels, mode, d_luts, d_out, stream); break;
    case 3: launch_apply_c<3>(d_in, pixels, mode, d_luts, d_out, stream); break;
    default: launch_apply_c<4>(d_in, pixels, mode, d_luts, d_out, stream); break;
  }
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace histeq::kernels
