// idct — a JPEG component's inverse DCT on the device (idct.hpp). The arithmetic is
// histeq/idct_formula.hpp's (libjpeg's islow method), shared with the host: pass 1 by columns,
// one thread per column of a block, the workspace in shared memory; pass 2 by rows, one thread
// per row, eight samples stored at once. Then the plane's padding: each sample right of the
// component's width or below its height takes the last column's or row's (clamped source).
// Exact: yes (integer arithmetic, the host's definition). Tuning: IdctPolicy (policy.hpp).
#include <algorithm>
#include <string>

#include "histeq/error.hpp"
#include "histeq/idct_formula.hpp"
#include "jpeg/idct.hpp"
#include "jpeg/policy.hpp"
#include "support/cuda_check.hpp"
#include "support/device.hpp"

namespace histeq::kernels {
namespace {

constexpr int kPerCta = IdctPolicy::kBlocksPerCta;

__global__ void __launch_bounds__(kPerCta * 8)
    idct_kernel(const std::int16_t* __restrict__ coef, const __grid_constant__ IdctQuant quant,
                int blocks_w, std::size_t blocks, std::uint8_t* __restrict__ plane,
                std::size_t stride) {
  // 16-byte aligned: each thread stores a uint4 into it (an int16 array is only 2-byte aligned
  // by its type, and ptxas may place it at any such offset).
  __shared__ __align__(16) std::int16_t c[kPerCta][64];
  __shared__ std::int32_t ws[kPerCta][64];
  __shared__ std::uint16_t q[64];
  const int local = int(threadIdx.x / 8), lane = int(threadIdx.x % 8);
  const std::size_t block = std::size_t(blockIdx.x) * kPerCta + std::size_t(local);
  if (threadIdx.x < 64) q[threadIdx.x] = quant.q[threadIdx.x];
  if (block < blocks) {  // each thread loads one row of eight coefficients (16 bytes)
    const uint4 v = reinterpret_cast<const uint4*>(coef + block * 64)[lane];
    reinterpret_cast<uint4*>(c[local])[lane] = v;
  }
  __syncthreads();
  const bool valid = block < blocks;
  if (valid) idct_formula::idct_column(c[local], q, lane, ws[local]);
  __syncwarp();  // every lane of the warp here: a block's eight threads share one warp
  if (!valid) return;
  const std::size_t by = block / std::size_t(blocks_w), bx = block % std::size_t(blocks_w);
  std::uint8_t out[8];
  idct_formula::idct_row(ws[local] + 8 * lane, out);
  std::uint8_t* dst = plane + (by * 8 + std::size_t(lane)) * stride + bx * 8;
  uint2 packed;
  packed.x =
      unsigned(out[0]) | unsigned(out[1]) << 8 | unsigned(out[2]) << 16 | unsigned(out[3]) << 24;
  packed.y =
      unsigned(out[4]) | unsigned(out[5]) << 8 | unsigned(out[6]) << 16 | unsigned(out[7]) << 24;
  *reinterpret_cast<uint2*>(dst) = packed;  // stride and bx * 8 are multiples of 8
}

/// Grid: x over a row's samples (kPadThreads each), y over the rows (grid-stride).
__global__ void pad_kernel(std::uint8_t* __restrict__ plane, std::size_t stride, int rows,
                           int width, int height) {
  const std::size_t x = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= stride) return;
  const std::size_t sx = x < std::size_t(width) ? x : std::size_t(width - 1);
  for (int y = int(blockIdx.y); y < rows; y += int(gridDim.y)) {
    if (x < std::size_t(width) && y < height) continue;
    const std::size_t sy = std::size_t(y < height ? y : height - 1);
    // Reads only samples inside width x height, which no thread writes.
    plane[std::size_t(y) * stride + x] = plane[sy * stride + sx];
  }
}

}  // namespace

void idct_plane(const IdctPlane& p, cudaStream_t stream) {
  if (p.d_coef == nullptr || p.d_plane == nullptr)
    throw UsageError("idct_plane: null device pointer");
  if (p.blocks_w < 1 || p.blocks_h < 1 || p.width < 1 || p.height < 1 || p.stride % 8 != 0 ||
      std::size_t(p.blocks_w) * 8 > p.stride || std::size_t(p.blocks_h) * 8 > std::size_t(p.rows) ||
      p.width > p.blocks_w * 8 || p.height > p.blocks_h * 8)
    throw UsageError("idct_plane: " + std::to_string(p.blocks_w) + "x" +
                     std::to_string(p.blocks_h) + " blocks of a " + std::to_string(p.width) + "x" +
                     std::to_string(p.height) + " component do not fit a plane of " +
                     std::to_string(p.stride) + " x " + std::to_string(p.rows));
  if (reinterpret_cast<std::uintptr_t>(p.d_coef) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(p.d_plane) % 8 != 0)
    throw UsageError("idct_plane: coefficients must be 16-byte and the plane 8-byte aligned");
  const std::size_t blocks = std::size_t(p.blocks_w) * std::size_t(p.blocks_h);
  idct_kernel<<<unsigned(detail::ceil_div(blocks, kPerCta)), kPerCta * 8, 0, stream>>>(
      p.d_coef, p.quant, p.blocks_w, blocks, p.d_plane, p.stride);
  HISTEQ_CUDA_CHECK_LAUNCH();
  if (!p.pad) return;
  const dim3 grid(unsigned(detail::ceil_div(p.stride, IdctPolicy::kPadThreads)),
                  unsigned(std::min(p.rows, 65535)));
  pad_kernel<<<grid, IdctPolicy::kPadThreads, 0, stream>>>(p.d_plane, p.stride, p.rows, p.width,
                                                           p.height);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace histeq::kernels
