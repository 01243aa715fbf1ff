// clahe_apply_strip — 8-bit CLAHE interpolation by row strips: the default apply for planes
// whose width is a multiple of 16 and whose tiles are at least kStripMinTileWidth wide.
// In:  d_in[0, width·height) u8 (rows contiguous), width % kCols == 0, d_in and d_out aligned
//      to kCols = 16 bytes (columns per thread, ClahePolicy::kStripCols); luts[t·256 + v] from
//      clahe_luts. Out: d_out (may equal d_in). Async; no scratch.
// Exact: yes — the arithmetic of clahe_apply_cell.cu (clahe_formula::axis for the weights,
//      OpenCV's blend order with _rn intrinsics, the exact byte→float and round_sat rewrites),
//      so equal byte for byte to the CPU twin and OpenCV 4.6.
// Why it is fast (against the per-cell kernel, which measured 21.2 M warp instructions for a
//      16M plane where its pixel loop needs about 13 M: a third went to per-block set-up and
//      to lanes left idle by cells narrower than a block's slots, ncu on the H200):
//      - a block is T threads side by side: thread i owns the kCols columns
//        [x0 + kCols·i, +kCols) for every row of the block's range, so a warp reads and writes
//        32·kCols contiguous bytes per row and every lane has work except at the right edge;
//      - the rows are cut into ranges of equal height (±1 row), one per block row of the grid,
//        as many as make the grid one full wave of the blocks that fit at once (the kernel's
//        occupancy): every SM maps the same number of pixels and none waits on a tail (the
//        former grid of fixed 16-row strips per cell row left the SMs idle 20 % of the time,
//        ncu, H200, 16M);
//      - per cell row a range meets, the block packs only the LUT words of the cells it spans,
//        one word per (cell, value) holding the four tiles' LUT bytes, from 4-byte loads, in
//        shared memory; per pixel one shared load;
//      - the x weights of a thread's columns and the cell of each are computed once, then
//        every row costs only its y weights; two rows in flight per thread;
//      - a slot crosses at most one cell edge (tiles >= kStripMinTileWidth): warps with no
//        crossing lane run the loop with one LUT base per thread; a warp with one runs the
//        same loop with a per-pixel base;
//      - loads and stores evict-first (__ldcs / __stcs: each byte is read and written once here;
//        64M natural / uniform 100.2 / 109.1 → 93.8 / 101.2 µs, 16M 32.4 → 31.6, H200).
// Tuning: ClahePolicy::kStrip* (policy.hpp); ClaheTuning::apply, strip_rows, strip_waves
//      (histeq/tuning.hpp).
// Source: OpenCV 4.6 modules/imgproc/src/clahe.cpp (CLAHE_Interpolation_Body).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "clahe/clahe.hpp"
#include "clahe/clahe_cells.cuh"
#include "clahe/policy.hpp"
#include "support/cuda_check.hpp"
#include "support/device.hpp"
#include "support/pdl.cuh"

namespace histeq::kernels {
namespace {
namespace cf = histeq::clahe_formula;
using clahe_detail::cell_of;
using clahe_detail::cell_start;
using P = ClahePolicy;

struct StripArgs {
  int width, height, tiles_x, tiles_y, tile_w, tile_h;
  float inv_tw, inv_th;
  int strips;  ///< row ranges (gridDim.y): range r is rows [r·height/strips, (r+1)·height/strips)
};

/// Columns per thread: one 16-byte access per row.
constexpr int kCols = P::kStripCols;
static_assert(kCols == 16, "one uint4 per row slot");

/// The float 2^23 + b of LUT byte `sel` of the packed word p (bits 0x4B0000bb).
__device__ __forceinline__ float biased(unsigned p, unsigned sel) {
  return __int_as_float(int(__byte_perm(p, 0x4B000000u, sel)));
}

/// The x weights of a thread's kCols columns: a, a1 = 1 − a (clahe_formula::axis) and
/// −2^23·a, −2^23·a1.
struct XWeights {
  float a[kCols], a1[kCols], ca[kCols], ca1[kCols];
};

/// kCols bytes of one row as 32-bit words: one 16-byte access, evict-first.
struct Row {
  unsigned w[kCols / 4];
  __device__ __forceinline__ void load(const std::uint8_t* p) {
    const uint4 q = __ldcs(reinterpret_cast<const uint4*>(p));
    std::memcpy(w, &q, sizeof(q));
  }
  __device__ __forceinline__ void store(std::uint8_t* p) const {
    uint4 q;
    std::memcpy(&q, w, sizeof(q));
    __stcs(reinterpret_cast<uint4*>(p), q);
  }
};

/// Output byte k (0..255) of one pixel, in the low byte of the returned float's bits.
/// OpenCV's blend (l11·xa1 + l12·xa)·ya1 + (l21·xa1 + l22·xa)·ya, each step rounded to float32,
/// rewritten exactly:
///  - l·x as fma(2^23 + l, x, −2^23·x): the exact value of the fma is l·x (2^23·x is exact in
///    float32, a power-of-two scaling), rounded once, as the product l·x is; so one byte permute
///    and one fma per LUT byte, no conversion and no separate multiply;
///  - cvRound(r) as r + 2^23 (round half to even), whose bits are 0x4B0000kk: 0 <= r and r <
///    255 · (1 + 2^-24)^6 < 255.5 (the weights of each blend sum to at most 1 + 2^-24), so the
///    saturation to 255 never acts and k is the low byte.
__device__ __forceinline__ float blend_packed(unsigned p, float xa, float xa1, float cxa,
                                              float cxa1, float ya, float ya1) {
  const float top =
      __fadd_rn(__fmaf_rn(biased(p, 0x7540), xa1, cxa1), __fmaf_rn(biased(p, 0x7541), xa, cxa));
  const float bot =
      __fadd_rn(__fmaf_rn(biased(p, 0x7542), xa1, cxa1), __fmaf_rn(biased(p, 0x7543), xa, cxa));
  const float r = __fadd_rn(__fmul_rn(top, ya1), __fmul_rn(bot, ya));
  return __fadd_rn(r, 8388608.0f);
}

/// clahe_formula::axis(y).a and .a1 (the row's cell fixes the tiles), one conversion.
__device__ __forceinline__ void y_weights(int y, float inv, float& ya, float& ya1) {
  const float tf = __fsub_rn(__fmul_rn(__int2float_rn(y), inv), 0.5f);
  ya = __fsub_rn(tf, floorf(tf));
  ya1 = __fsub_rn(1.0f, ya);
}

/// kCols pixels of one row. LUT index v + 256·cell from one PRMT (the cell in byte 1); kSplit:
/// pixels j >= split use cell_a + 1 (the next cell), the others cell_a.
template <bool kSplit>
__device__ __forceinline__ Row map_row(const Row& q, const unsigned* s_lut, unsigned cell_a,
                                       int split, const XWeights& x, float ya, float ya1) {
  float f[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const unsigned cell = kSplit && j >= split ? cell_a + 1 : cell_a;
    // byte 0: sample j & 3 of word j >> 2; byte 1: the cell (< 256); bytes 2, 3: zero.
    const unsigned idx = __byte_perm(q.w[j >> 2], cell, 0x5540u | unsigned(j & 3));
    f[j] = blend_packed(s_lut[idx], x.a[j], x.a1[j], x.ca[j], x.ca1[j], ya, ya1);
  }
  Row r;
#pragma unroll
  for (int k = 0; k < kCols / 4; ++k) {
    const unsigned lo =
        __byte_perm(__float_as_uint(f[4 * k]), __float_as_uint(f[4 * k + 1]), 0x0040u);
    const unsigned hi =
        __byte_perm(__float_as_uint(f[4 * k + 2]), __float_as_uint(f[4 * k + 3]), 0x0040u);
    r.w[k] = __byte_perm(lo, hi, 0x5410u);
  }
  return r;
}

/// Rows [y0, y1) of one cell row, the thread's kCols columns from xs: two rows in flight (one
/// row mapped while the next row's load is in flight measured slower: 16M 32.7 against 31.6 µs,
/// 64M 98.6 against 93.8, H200).
template <bool kSplit>
__device__ __forceinline__ void strip_rows(const std::uint8_t* in, std::uint8_t* out,
                                           const StripArgs& a, int xs, int y0, int y1,
                                           const unsigned* s_lut, unsigned cell_a, int split,
                                           const XWeights& x) {
  const std::size_t pitch = std::size_t(a.width);
  int y = y0;
  for (; y + 1 < y1; y += 2) {
    const std::size_t o0 = std::size_t(y) * pitch + std::size_t(xs), o1 = o0 + pitch;
    Row q0, q1;
    q0.load(in + o0);
    q1.load(in + o1);
    float ya0, ya0_1, ya1, ya1_1;
    y_weights(y, a.inv_th, ya0, ya0_1);
    y_weights(y + 1, a.inv_th, ya1, ya1_1);
    const Row r0 = map_row<kSplit>(q0, s_lut, cell_a, split, x, ya0, ya0_1);
    const Row r1 = map_row<kSplit>(q1, s_lut, cell_a, split, x, ya1, ya1_1);
    r0.store(out + o0);
    r1.store(out + o1);
  }
  if (y < y1) {
    const std::size_t o0 = std::size_t(y) * pitch + std::size_t(xs);
    Row q0;
    q0.load(in + o0);
    float ya0, ya0_1;
    y_weights(y, a.inv_th, ya0, ya0_1);
    map_row<kSplit>(q0, s_lut, cell_a, split, x, ya0, ya0_1).store(out + o0);
  }
}

/// Block (bx, r): the columns [bx·T·kCols, +T·kCols) of the rows of range r (StripArgs::strips
/// ranges of equal height ±1, one per block row of the grid, sized so that the grid is one full
/// wave: every SM gets the same number of rows, none waits on a tail). A range may cross
/// cell-row edges: the LUT words are packed again for each cell row it meets.
/// At most 128 registers: 4 blocks of kStripThreads per SM (capped for 5, or 8 columns per thread
/// with 80 registers and 6 blocks, measured slower: docs/kernels.md).
__global__ void __launch_bounds__(P::kStripThreads, 4)
    apply_strip_kernel(const std::uint8_t* in, std::uint8_t* out,
                       const std::uint8_t* __restrict__ luts, StripArgs a) {
  extern __shared__ unsigned s_lut[];  // [cells of this block][256]
  const long long h = a.height;
  const int y_begin = int(h * blockIdx.y / a.strips);
  const int y_end = int(h * (blockIdx.y + 1) / a.strips);
  if (y_begin >= y_end) return;  // the whole block
  const int bx0 = int(blockIdx.x) * int(blockDim.x) * kCols;
  const int bx1 = min(a.width, bx0 + int(blockDim.x) * kCols);
  const int c_lo = cell_of(bx0, a.inv_tw, a.tiles_x);
  const int c_hi = cell_of(bx1 - 1, a.inv_tw, a.tiles_x);
  const int xs = bx0 + kCols * int(threadIdx.x);
  // The x weights of the thread's columns as clahe_formula::axis computes them, with one
  // conversion per column: float(xs + j) is exact, and floor(tf) as a float is the float of
  // axis's __float2int_rd(tf). The cell of column x is floor(tf) + 1 (tf >= -0.5 and
  // x < width <= padded_w keep it in [0, tiles_x] without clamping), so the slot crosses into
  // the next cell where floor(tf) changes (at most once: cells are wider than kCols).
  XWeights x;
  const float xs_f = __int2float_rn(xs);
  float fl0 = 0.f;
  int split = kCols;
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const float tf = __fsub_rn(__fmul_rn(__fadd_rn(xs_f, float(j)), a.inv_tw), 0.5f);
    const float fl = floorf(tf);
    x.a[j] = __fsub_rn(tf, fl);
    x.a1[j] = __fsub_rn(1.0f, x.a[j]);
    x.ca[j] = __fmul_rn(x.a[j], -8388608.0f);
    x.ca1[j] = __fmul_rn(x.a1[j], -8388608.0f);
    if (j == 0)
      fl0 = fl;
    else if (split == kCols && fl != fl0)
      split = j;
  }
  const unsigned cell_a = unsigned(__float2int_rz(fl0) + 1 - c_lo);
  const bool active = xs < a.width;
  // Warps with no lane crossing a cell edge take the loop with one LUT base per thread.
  const bool any_split = __any_sync(0xFFFFFFFFu, active && split < kCols);
  pdl::wait();  // the LUTs, and the input and output, of the launches before
  // The range's rows by cell row.
  for (int y0 = y_begin; y0 < y_end;) {
    const int cy = cell_of(y0, a.inv_th, a.tiles_y);
    const int y1 =
        cy == a.tiles_y ? y_end : min(y_end, cell_start(cy + 1, a.tile_h, a.inv_th, a.height));
    {
      // Pack the four LUT bytes of every (cell, value) of this block for cell row cy: 4 values
      // per work item, from one 4-byte load per tile.
      const int ty1 = max(cy - 1, 0), ty2 = min(cy, a.tiles_y - 1);
      const int items = (c_hi - c_lo + 1) * 64;
      for (int it = int(threadIdx.x); it < items; it += int(blockDim.x)) {
        const int c = c_lo + it / 64, v4 = (it % 64) * 4;
        const int tx1 = max(c - 1, 0), tx2 = min(c, a.tiles_x - 1);
        const auto word = [&](int ty, int tx) {
          return __ldg(reinterpret_cast<const unsigned*>(
              luts + (std::size_t(ty) * a.tiles_x + tx) * 256 + v4));
        };
        const unsigned l11 = word(ty1, tx1), l12 = word(ty1, tx2), l21 = word(ty2, tx1),
                       l22 = word(ty2, tx2);
        // Transpose 4×4 bytes: word k holds value v4 + k of the four tiles.
        const unsigned lo_a = __byte_perm(l11, l12, 0x5140), lo_b = __byte_perm(l21, l22, 0x5140);
        const unsigned hi_a = __byte_perm(l11, l12, 0x7362), hi_b = __byte_perm(l21, l22, 0x7362);
        uint4 r;
        r.x = __byte_perm(lo_a, lo_b, 0x5410);
        r.y = __byte_perm(lo_a, lo_b, 0x7632);
        r.z = __byte_perm(hi_a, hi_b, 0x5410);
        r.w = __byte_perm(hi_a, hi_b, 0x7632);
        *reinterpret_cast<uint4*>(s_lut + (c - c_lo) * 256 + v4) = r;
      }
    }
    __syncthreads();
    if (active) {
      if (any_split) {
        strip_rows<true>(in, out, a, xs, y0, y1, s_lut, cell_a, split, x);
      } else {
        strip_rows<false>(in, out, a, xs, y0, y1, s_lut, cell_a, split, x);
      }
    }
    __syncthreads();  // every thread is done with this cell row's words before the next packing
    y0 = y1;
  }
}

/// Host twin of cell_of (the same float32 operations: host code is built without FMA).
int host_cell_of(int p, float inv, int tiles) {
  const int c = int(std::floor(float(p) * inv - 0.5f)) + 1;
  return c < 0 ? 0 : (c > tiles ? tiles : c);
}

}  // namespace

/// The strip path of clahe_apply for 8-bit planes; false (nothing launched) when it does not
/// apply: width not a multiple of the columns per thread, a pointer not aligned to them, tiles
/// narrower than kStripMinTileWidth, or a block's LUTs over kStripMaxSharedBytes.
bool clahe_apply_strip_u8(const std::uint8_t* d_in, std::uint8_t* d_out, const cf::Geometry& g,
                          const std::uint8_t* d_luts, cudaStream_t stream, const Tuning& t) {
  using Apply = ClaheTuning::Apply;
  const ClaheTuning& tune = t.clahe;
  if (tune.apply != Apply::automatic && tune.apply != Apply::strip) return false;
  constexpr int cols = kCols;
  if (g.hist_size != 256 || g.width % cols != 0 || g.tile_w < P::kStripMinTileWidth) return false;
  if (reinterpret_cast<std::uintptr_t>(d_in) % cols != 0 ||
      reinterpret_cast<std::uintptr_t>(d_out) % cols != 0) {
    return false;
  }
  const std::size_t pixels = std::size_t(g.width) * std::size_t(g.height);
  if (tune.apply == Apply::automatic && pixels < P::kStripMinPixels) return false;
  const int slots = g.width / cols;
  const float inv_tw = cf::inv_size(g.tile_w);
  // Threads per block: kStripThreads (fewer for narrow images), halved while the LUT words of
  // the cells a block spans exceed kStripMaxSharedBytes. One cell of margin: the host's cell
  // boundaries could differ from the device's by one position.
  int threads = std::min(P::kStripThreads, ((slots + 31) / 32) * 32);
  int blocks_x = 0;
  std::size_t smem = 0;
  for (;;) {
    blocks_x = (slots + threads - 1) / threads;
    int cells = 1;
    for (int b = 0; b < blocks_x; ++b) {
      const int x0 = b * threads * cols, x1 = std::min(g.width, x0 + threads * cols);
      cells = std::max(
          cells, host_cell_of(x1 - 1, inv_tw, g.tiles_x) - host_cell_of(x0, inv_tw, g.tiles_x) + 2);
    }
    smem = std::size_t(std::min(cells, g.tiles_x + 1)) * 256 * sizeof(unsigned);
    if (smem <= P::kStripMaxSharedBytes || threads <= 32) break;
    threads /= 2;
  }
  if (smem > P::kStripMaxSharedBytes) return false;
  const auto kernel = apply_strip_kernel;
  if (smem > 48 * 1024) {
    HISTEQ_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  }
  // Row ranges: as many as make the grid kStripWaves full waves of the blocks that fit on the
  // device at once (its occupancy, not a guess), each at least kStripMinRows rows where the
  // image is tall enough, at most the image's rows.
  const std::size_t resident =
      detail::resident_blocks(reinterpret_cast<const void*>(kernel), threads, smem);
  const int waves = tune.strip_waves > 0 ? tune.strip_waves : P::kStripWaves;
  std::size_t strips = std::max<std::size_t>(1, std::size_t(waves) * resident / blocks_x);
  if (tune.strip_rows > 0) strips = (std::size_t(g.height) + tune.strip_rows - 1) / tune.strip_rows;
  strips = std::min<std::size_t>(strips, std::max(1, g.height / P::kStripMinRows));
  strips = std::min<std::size_t>(strips, 65535);
  const StripArgs a{g.width,    g.height, g.tiles_x, g.tiles_y,
                    g.tile_w,   g.tile_h, inv_tw,    cf::inv_size(g.tile_h),
                    int(strips)};
  const dim3 grid{unsigned(blocks_x), unsigned(strips), 1u};
  pdl::launch(pdl::kStripApply8, t, kernel, grid, dim3(unsigned(threads)), smem, stream, d_in,
              d_out, d_luts, a);
  return true;
}

}  // namespace histeq::kernels
