// clahe_apply_cell — 8-bit CLAHE interpolation by cells: the fast path of clahe_apply.
// In:  d_in[0, width·height) u8 (rows contiguous), width % 16 == 0, d_in and d_out 16-byte
//      aligned; luts[t·256 + v] from clahe_luts. Out: d_out (may equal d_in). Async; no scratch.
// Exact: yes — clahe_formula::axis and OpenCV's blend order with _rn intrinsics, as
//      clahe_apply.cu and the CPU twin; the only changes are exact rewrites: a LUT byte b becomes
//      float(b) as (2^23 + b) − 2^23 (bits 0x4B0000bb, one byte permute and one add), and
//      round_sat(r, 255) for 0 <= r < 2^22 is min((r + 2^23) − 2^23, 255): adding 2^23 rounds r
//      to an integer half to even, as __float2int_rn does. No conversion instruction (16 per SM
//      per clock on sm_90) is left in the per-pixel path.
// Why it is fast: an interpolation CELL is the set of pixels between four tile centres; all of
//      them blend the same four LUTs. One block takes a band of rows of one cell (grid: cells_x
//      by cells_y · chunks), packs the four LUTs into one 32-bit word per value in shared memory
//      (1 KiB: one shared load per pixel instead of four L1/L2 gathers), and each thread owns one
//      16-pixel column slot for all of its rows, so the x weights (axis) of its 16 columns are
//      computed once and kept in registers; per row only the y weights are computed. Reads and
//      writes are 16-byte vectors (byte stores only where a slot straddles a cell edge).
// Tuning: ClahePolicy::kCellPixelsPerBlock, kCellThreads (policy.hpp); ClaheTuning::apply,
//      cell_threads, cell_kpx (histeq/tuning.hpp).
// Source: OpenCV 4.6 modules/imgproc/src/clahe.cpp (CLAHE_Interpolation_Body).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "clahe/clahe.hpp"
#include "clahe/clahe_cells.cuh"
#include "clahe/policy.hpp"
#include "support/cuda_check.hpp"
#include "support/device.hpp"
#include "support/pdl.cuh"

namespace histeq::kernels {
namespace {
namespace cf = histeq::clahe_formula;
using clahe_detail::cell_start;

struct CellArgs {
  int width, height, tiles_x, tiles_y, tile_w, tile_h;
  float inv_tw, inv_th;
  int rows;    ///< rows per block
  int chunks;  ///< blocks per cell row (blockIdx.y = cy · chunks + chunk)
};

__device__ __forceinline__ float byte_float(unsigned packed, unsigned sel) {
  return __fsub_rn(__int_as_float(int(__byte_perm(packed, 0x4B000000u, sel))), 8388608.0f);
}

__global__ void __launch_bounds__(ClahePolicy::kCellThreads)
    apply_cell_kernel(const std::uint8_t* in, std::uint8_t* out,
                      const std::uint8_t* __restrict__ luts, CellArgs a) {
  __shared__ unsigned s_lut[256];
  const int cx = int(blockIdx.x);
  const int cy = int(blockIdx.y) / a.chunks, chunk = int(blockIdx.y) % a.chunks;
  const int x0 = cell_start(cx, a.tile_w, a.inv_tw, a.width);
  const int x1 = cx == a.tiles_x ? a.width : cell_start(cx + 1, a.tile_w, a.inv_tw, a.width);
  const int cy0 = cell_start(cy, a.tile_h, a.inv_th, a.height);
  const int cy1 = cy == a.tiles_y ? a.height : cell_start(cy + 1, a.tile_h, a.inv_th, a.height);
  const int y0 = cy0 + chunk * a.rows;
  const int y1 = min(cy1, y0 + a.rows);
  if (x0 >= x1 || y0 >= y1) return;  // the whole block
  pdl::wait();                       // the LUTs, and the input and output, of the launches before
  {
    const int tx1 = max(cx - 1, 0), tx2 = min(cx, a.tiles_x - 1);
    const int ty1 = max(cy - 1, 0), ty2 = min(cy, a.tiles_y - 1);
    const std::uint8_t* l11 = luts + (std::size_t(ty1) * a.tiles_x + tx1) * 256;
    const std::uint8_t* l12 = luts + (std::size_t(ty1) * a.tiles_x + tx2) * 256;
    const std::uint8_t* l21 = luts + (std::size_t(ty2) * a.tiles_x + tx1) * 256;
    const std::uint8_t* l22 = luts + (std::size_t(ty2) * a.tiles_x + tx2) * 256;
    const int tid = int(threadIdx.y * blockDim.x + threadIdx.x), nt = int(blockDim.x * blockDim.y);
    for (int v = tid; v < 256; v += nt) {
      s_lut[v] = unsigned(__ldg(l11 + v)) | (unsigned(__ldg(l12 + v)) << 8) |
                 (unsigned(__ldg(l21 + v)) << 16) | (unsigned(__ldg(l22 + v)) << 24);
    }
  }
  __syncthreads();
  const int xs = (x0 & ~15) + 16 * int(threadIdx.x);
  if (xs >= x1) return;
  const bool full = xs >= x0 && xs + 16 <= x1;
  float wa[16], wa1[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const cf::Axis xa = cf::axis(xs + j, a.inv_tw, a.tiles_x);
    wa[j] = xa.a;
    wa1[j] = xa.a1;
  }
  for (int y = y0 + int(threadIdx.y); y < y1; y += int(blockDim.y)) {
    const cf::Axis ya = cf::axis(y, a.inv_th, a.tiles_y);
    const std::size_t off = std::size_t(y) * std::size_t(a.width) + std::size_t(xs);
    const uint4 q = *reinterpret_cast<const uint4*>(in + off);
    const unsigned w[4] = {q.x, q.y, q.z, q.w};
    unsigned o[4] = {0, 0, 0, 0};
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const unsigned v = (w[j >> 2] >> (8 * (j & 3))) & 0xFFu;
      const unsigned p = s_lut[v];
      const float top = __fadd_rn(__fmul_rn(byte_float(p, 0x7540), wa1[j]),
                                  __fmul_rn(byte_float(p, 0x7541), wa[j]));
      const float bot = __fadd_rn(__fmul_rn(byte_float(p, 0x7542), wa1[j]),
                                  __fmul_rn(byte_float(p, 0x7543), wa[j]));
      const float r = __fadd_rn(__fmul_rn(top, ya.a1), __fmul_rn(bot, ya.a));
      const unsigned k =
          min(unsigned(__float_as_int(__fadd_rn(r, 8388608.0f)) - 0x4B000000u), 255u);
      o[j >> 2] |= k << (8 * (j & 3));
    }
    if (full) {
      *reinterpret_cast<uint4*>(out + off) = make_uint4(o[0], o[1], o[2], o[3]);
    } else {
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        if (xs + j >= x0 && xs + j < x1) out[off + j] = std::uint8_t(o[j >> 2] >> (8 * (j & 3)));
      }
    }
  }
}

}  // namespace

/// The cell path of clahe_apply for 8-bit planes; false (nothing launched) when it does not
/// apply: width not a multiple of 16, a pointer not 16-byte aligned, tiles wider than about
/// 16 · kCellThreads pixels, or a grid too tall for one launch.
bool clahe_apply_cell_u8(const std::uint8_t* d_in, std::uint8_t* d_out, const cf::Geometry& g,
                         const std::uint8_t* d_luts, cudaStream_t stream, const Tuning& t) {
  using Apply = ClaheTuning::Apply;
  const ClaheTuning& tune = t.clahe;
  const std::size_t pixels = std::size_t(g.width) * std::size_t(g.height);
  if (tune.apply == Apply::flat ||
      (tune.apply == Apply::automatic && pixels < ClahePolicy::kCellMinPixels))
    return false;
  if (g.hist_size != 256 || g.width % 16 != 0) return false;
  if (reinterpret_cast<std::uintptr_t>(d_in) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(d_out) % 16 != 0) {
    return false;
  }
  const int slots =
      (g.tile_w + 15) / 16 + 2;  // a cell is at most tile_w + 1 wide, plus misalignment
  if (slots > ClahePolicy::kCellThreads) return false;
  const int threads = tune.cell_threads > 0 ? tune.cell_threads : ClahePolicy::kCellThreads;
  const int lanes = std::max(1, threads / slots);
  const int cells_x = g.tiles_x + 1, cells_y = g.tiles_y + 1;
  const std::size_t per_block = std::max<std::size_t>(
      tune.cell_kpx > 0 ? std::size_t(tune.cell_kpx) << 10
                        : std::size_t(ClahePolicy::kCellPixelsPerBlock),
      pixels / (std::size_t(ClahePolicy::kCellBlocksPerSm) * std::size_t(detail::sm_count())));
  int rows = int(std::max<std::size_t>(1, per_block / std::size_t(g.tile_w)));
  // At least about 4 blocks per SM: split cells into fewer rows when the image is small.
  const long long cell_rows = static_cast<long long>(cells_x) * cells_y * (g.tile_h + 2);
  const long long want = 4LL * detail::sm_count();
  rows = int(std::max<long long>(1, std::min<long long>(rows, cell_rows / want)));
  rows = std::max(rows, std::min(lanes, g.tile_h + 2));
  const int chunks = (g.tile_h + 2 + rows - 1) / rows;
  if (static_cast<long long>(cells_y) * chunks > 65535) return false;
  const CellArgs a{g.width,
                   g.height,
                   g.tiles_x,
                   g.tiles_y,
                   g.tile_w,
                   g.tile_h,
                   cf::inv_size(g.tile_w),
                   cf::inv_size(g.tile_h),
                   rows,
                   chunks};
  const dim3 grid{unsigned(cells_x), unsigned(cells_y * chunks), 1u};
  const dim3 block{unsigned(slots), unsigned(lanes), 1u};
  pdl::launch(pdl::kStripApply8, t, apply_cell_kernel, grid, block, 0, stream, d_in, d_out, d_luts,
              a);
  return true;
}

}  // namespace histeq::kernels
