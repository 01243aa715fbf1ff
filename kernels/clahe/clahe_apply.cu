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
// 8-bit planes whose width is a multiple of 16 (16-byte aligned) go to the faster strip kernel
// (clahe_apply_strip.cu: tiles at least ClahePolicy::kStripMinTileWidth wide, from
// kStripMinPixels pixels) or the per-cell kernel (clahe_apply_cell.cu, from kCellMinPixels).
// Source: OpenCV 4.6 modules/imgproc/src/clahe.cpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "clahe/clahe.hpp"
#include "clahe/clahe_cells.cuh"
#include "clahe/policy.hpp"
#include "histeq/error.hpp"
#include "support/cuda_check.hpp"
#include "support/device.hpp"
#include "support/pdl.cuh"

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

/// The x side of interpolate_pair carried along a run of columns without conversions:
/// float(x) is exact and grows by 1, tf = x · inv − 0.5 as axis computes it, and floor(tf)
/// (t1, ft1 its float) steps by at most one per column (inv = 1 / tile <= 1).
struct XCursor {
  float xf, ft1, next, inv;
  int t1;
  float xa, xa1, cxa, cxa1;  ///< the current column's weights a, 1 − a, −2^23·a, −2^23·(1 − a)
  __device__ __forceinline__ void start(int x) {
    xf = __int2float_rn(x);
    t1 = __float2int_rd(__fsub_rn(__fmul_rn(xf, inv), 0.5f));
    ft1 = __int2float_rn(t1);
    next = __fadd_rn(ft1, 1.0f);
  }
  /// The weights of column xf (t1 steps when floor(tf) does), then xf moves to the next column.
  __device__ __forceinline__ void step() {
    const float tf = __fsub_rn(__fmul_rn(xf, inv), 0.5f);
    if (tf >= next) {
      ++t1;
      ft1 = next;
      next = __fadd_rn(next, 1.0f);
    }
    weights(tf);
  }
  /// step() where the caller knows that t1 does not change (the column stays in its cell).
  __device__ __forceinline__ void step_in_cell() { weights(__fsub_rn(__fmul_rn(xf, inv), 0.5f)); }
  /// t1 of column x + k − 1 as start() computes it: equal to t1 when the k columns from start()'s
  /// x share one interpolation cell (floor(tf) is non-decreasing in x).
  __device__ __forceinline__ int t1_at(int k) const {
    return __float2int_rd(__fsub_rn(__fmul_rn(__fadd_rn(xf, float(k - 1)), inv), 0.5f));
  }

 private:
  __device__ __forceinline__ void weights(float tf) {
    xa = __fsub_rn(tf, ft1);
    xa1 = __fsub_rn(1.0f, xa);
    cxa = __fmul_rn(xa, -8388608.0f);
    cxa1 = __fmul_rn(xa1, -8388608.0f);
    xf = __fadd_rn(xf, 1.0f);
  }
};

/// OpenCV's blend of the biased LUT floats l = 2^23 + value at the cursor's weights, as the
/// bits of r + 2^23 (see lut_sample).
__device__ __forceinline__ unsigned blend_biased(float l11, float l12, float l21, float l22,
                                                 const XCursor& c, float ya, float ya1) {
  const float top = __fadd_rn(__fmaf_rn(l11, c.xa1, c.cxa1), __fmaf_rn(l12, c.xa, c.cxa));
  const float bot = __fadd_rn(__fmaf_rn(l21, c.xa1, c.cxa1), __fmaf_rn(l22, c.xa, c.cxa));
  const float r = __fadd_rn(__fmul_rn(top, ya1), __fmul_rn(bot, ya));
  return __float_as_uint(__fadd_rn(r, 8388608.0f));
}

/// The four per-tile LUTs that the samples of one interpolation cell blend: rows l1 (tile row
/// t1) and l2 (t2), tile columns t1 and t1 + 1 of the cell clamped to [0, tiles_x − 1].
/// blend(): interpolate() of value v at the cursor's column without conversions (the rewrites of
/// pair_sample): biased LUT floats 0x4B000000 | l, l·x as fma(2^23 + l, x, −2^23·x), cvRound(r)
/// as the low bits of r + 2^23 (0 <= r < maxval + 0.5: no saturation).
template <typename T>
struct CellLuts {
  static constexpr unsigned kBins = sizeof(T) == 1 ? 256u : 65536u;
  const T *p11, *p12, *p21, *p22;
  __device__ __forceinline__ CellLuts(const T* l1, const T* l2, int t1, int tiles_x) {
    const int a = t1 < 0 ? 0 : t1, b = t1 + 1 > tiles_x - 1 ? tiles_x - 1 : t1 + 1;
    p11 = l1 + std::size_t(a) * kBins;
    p12 = l1 + std::size_t(b) * kBins;
    p21 = l2 + std::size_t(a) * kBins;
    p22 = l2 + std::size_t(b) * kBins;
  }
  __device__ __forceinline__ unsigned blend(unsigned v, const XCursor& c, float ya,
                                            float ya1) const {
    const auto biased = [](unsigned l) { return __int_as_float(int(0x4B000000u | l)); };
    return blend_biased(biased(__ldg(p11 + v)), biased(__ldg(p12 + v)), biased(__ldg(p21 + v)),
                        biased(__ldg(p22 + v)), c, ya, ya1) &
           (kBins - 1u);
  }
};

/// One sample v at the next column of the cursor (which steps), from the per-tile LUT rows l1
/// and l2 (CellLuts).
template <typename T>
__device__ __forceinline__ unsigned lut_sample(const T* __restrict__ l1, const T* __restrict__ l2,
                                               int tiles_x, XCursor& c, float ya, float ya1,
                                               unsigned v) {
  c.step();
  return CellLuts<T>(l1, l2, c.t1, tiles_x).blend(v, c, ya, ya1);
}

/// 16-bit from the LUT pairs (clahe_pair_lut_words): sample v of column x in interpolation cell
/// cx reads pair[ty1 row][cx][v] and pair[ty2 row][cx][v], each the two tiles' LUT values of
/// that cell (low: tile t1, high: tile t2), so two 4-byte gathers replace four 2-byte ones and
/// each touches one 32-byte sector instead of two. The cell is t1 + 1 between the tiles and
/// 0 / tiles_x at the left / right edges (t1 == t2 there: either cell holds that tile twice).
/// Same arithmetic as interpolate().
__device__ __forceinline__ std::uint16_t interpolate_pair(const std::uint32_t* __restrict__ p1,
                                                          const std::uint32_t* __restrict__ p2,
                                                          const ApplyArgs& a, int x,
                                                          const cf::Axis& ya, int v) {
  const cf::Axis xa = cf::axis(x, a.inv_tw, a.tiles_x);
  const int cx = xa.t1 != xa.t2 ? xa.t1 + 1 : (xa.t1 == 0 ? 0 : a.tiles_x);
  const std::size_t i = std::size_t(cx) * 65536 + std::size_t(v);
  const std::uint32_t w1 = __ldg(p1 + i), w2 = __ldg(p2 + i);
  const float r =
      cf::blend(int(w1 & 0xFFFFu), int(w1 >> 16), int(w2 & 0xFFFFu), int(w2 >> 16), xa, ya);
  return static_cast<std::uint16_t>(cf::round_sat(r, 65535));
}

/// One sample v at the cursor's column: LUT pair words of rows ty1 (p1) and ty2 (p2) at cell
/// t1 + 1 (t1 in [−1, tiles_x − 1], so the cell needs no clamp); OpenCV's blend with the exact
/// rewrites of clahe_apply_strip.cu: l·x as fma(2^23 + l, x, −2^23·x) (2^23 + l exact for l <
/// 2^23) and cvRound(r) as the low 16 bits of r + 2^23 (0 <= r < 65535.5: no saturation).
__device__ __forceinline__ unsigned pair_sample(const std::uint32_t* __restrict__ p1,
                                                const std::uint32_t* __restrict__ p2, XCursor& c,
                                                float ya, float ya1, unsigned v) {
  c.step();
  const std::size_t i = std::size_t(c.t1 + 1) * 65536 + v;
  const unsigned w1 = __ldg(p1 + i), w2 = __ldg(p2 + i);
  const float l11 = __int_as_float(int(__byte_perm(w1, 0x4B000000u, 0x7610))),
              l12 = __int_as_float(int(__byte_perm(w1, 0x4B000000u, 0x7632))),
              l21 = __int_as_float(int(__byte_perm(w2, 0x4B000000u, 0x7610))),
              l22 = __int_as_float(int(__byte_perm(w2, 0x4B000000u, 0x7632)));
  return blend_biased(l11, l12, l21, l22, c, ya, ya1) & 0xFFFFu;
}

/// Where the flat apply reads its LUT values: the per-tile LUTs (LutRows: four gathers per
/// sample) or, 16-bit, the LUT pairs (PairRows: two). row_of(t): tile row t's values; fast():
/// one sample at an XCursor (the vector path, no conversions); slow(): one sample from
/// clahe_formula directly (scalar path and tails). Both give the same value.
template <typename T>
struct LutRows {
  static constexpr std::size_t kBins = sizeof(T) == 1 ? 256 : 65536;
  static constexpr bool kCellRun = true;  ///< has cell_run()
  const T* luts;
  int tiles_x;
  __device__ const T* row_of(int t) const { return luts + std::size_t(t) * tiles_x * kBins; }
  /// fast() for k samples of one row that lie in the cursor's interpolation cell: the four LUT
  /// rows are found once, so a sample costs its weights, four gathers and the blend (the flat
  /// apply of a 1M plane, H200: 61 instructions per sample in fast(), about half of them the
  /// per-sample tile clamps and 64-bit indices).
  __device__ void cell_run(const T* l1, const T* l2, XCursor& c, float ya, float ya1, T* vals,
                           int k) const {
    const CellLuts<T> cell(l1, l2, c.t1, tiles_x);
#pragma unroll
    for (int j = 0; j < k; ++j) {
      c.step_in_cell();
      vals[j] = static_cast<T>(cell.blend(vals[j], c, ya, ya1));
    }
  }
  __device__ unsigned fast(const T* l1, const T* l2, XCursor& c, float ya, float ya1,
                           unsigned v) const {
    return lut_sample(l1, l2, tiles_x, c, ya, ya1, v);
  }
  __device__ T slow(const ApplyArgs& a, int x, const cf::Axis& ya, int v) const {
    return interpolate(luts, a, x, ya, v);
  }
};

struct PairRows {
  static constexpr bool kCellRun = false;
  const std::uint32_t* pairs;
  int tiles_x;
  __device__ const std::uint32_t* row_of(int t) const {
    return pairs + std::size_t(t) * std::size_t(tiles_x + 1) * 65536;
  }
  __device__ unsigned fast(const std::uint32_t* p1, const std::uint32_t* p2, XCursor& c, float ya,
                           float ya1, unsigned v) const {
    return pair_sample(p1, p2, c, ya, ya1, v);
  }
  __device__ std::uint16_t slow(const ApplyArgs& a, int x, const cf::Axis& ya, int v) const {
    return interpolate_pair(row_of(ya.t1), row_of(ya.t2), a, x, ya, v);
  }
};

/// Grid-stride flat apply: each thread takes one 16-byte vector (16 u8 or 8 u16 samples) when
/// both pointers are 16-byte aligned (kVector), else one sample; the vector's samples walk the
/// columns with an XCursor, continuing on the next row where a vector crosses one.
template <typename T, bool kVector, typename Rows>
__global__ void __launch_bounds__(P::kApplyBlockSize)
    apply_kernel(const T* in, T* out, Rows rows, ApplyArgs a) {
  constexpr int kPer = kVector ? 16 / int(sizeof(T)) : 1;
  const std::size_t n = std::size_t(a.width) * std::size_t(a.height);
  const std::size_t items = kVector ? n / kPer : n;
  pdl::wait();  // the LUTs, and the input and output, of the launches before
  for (std::size_t k = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; k < items;
       k += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t i0 = k * kPer;
    int y = int(unsigned(i0) / unsigned(a.width)),
        x = int(unsigned(i0) - unsigned(y) * unsigned(a.width));
    cf::Axis ya = cf::axis(y, a.inv_th, a.tiles_y);
    if constexpr (kVector) {
      uint4 q = reinterpret_cast<const uint4*>(in)[k];
      T* vals = reinterpret_cast<T*>(&q);
      XCursor c;
      c.inv = a.inv_tw;
      c.start(x);
      auto r1 = rows.row_of(ya.t1), r2 = rows.row_of(ya.t2);
      if constexpr (Rows::kCellRun) {
        // The vector in one row and one interpolation cell: most vectors of a plane.
        if (x + kPer <= a.width && c.t1_at(kPer) == c.t1) {
          rows.cell_run(r1, r2, c, ya.a, ya.a1, vals, kPer);
          reinterpret_cast<uint4*>(out)[k] = q;
          continue;
        }
      }
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        if (x == a.width) {  // the vector continues on the next row
          x = 0;
          ++y;
          ya = cf::axis(y, a.inv_th, a.tiles_y);
          r1 = rows.row_of(ya.t1);
          r2 = rows.row_of(ya.t2);
          c.start(0);
        }
        vals[j] = static_cast<T>(rows.fast(r1, r2, c, ya.a, ya.a1, unsigned(vals[j])));
        ++x;
      }
      reinterpret_cast<uint4*>(out)[k] = q;
    } else {
      out[i0] = rows.slow(a, x, ya, int(in[i0]));
    }
  }
  // The vector path's tail (n % kPer samples), by the first threads.
  if constexpr (kVector) {
    const std::size_t i = items * kPer + std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) {
      const int y = int(unsigned(i) / unsigned(a.width)),
                x = int(unsigned(i) - unsigned(y) * unsigned(a.width));
      out[i] = rows.slow(a, x, cf::axis(y, a.inv_th, a.tiles_y), int(in[i]));
    }
  }
}

/// 16-bit apply from the LUT pairs by interpolation-cell columns: block (cx, r) maps the
/// 8-sample vectors whose first column lies in cell column cx (columns [x0, x1) of cx, from
/// clahe_cells.cuh) for the rows of range r (rows [r·height/ranges, (r+1)·height/ranges)).
/// Every sample of a block's rows then reads the pair words of one or two cell columns only
/// (a vector that reaches into the next cell reads that one for its last samples), so the
/// L1 of an SM holds the part of those tables its samples touch, where the flat grid-stride
/// kernel spreads a block's vectors over every cell of half a row. Width a multiple of 8, both
/// planes 16-byte aligned. Same arithmetic as pair_sample.
__global__ void __launch_bounds__(P::kCells16Threads)
    apply_cells16_kernel(const std::uint16_t* in, std::uint16_t* out, PairRows rows, ApplyArgs a,
                         int tile_w, int ranges) {
  const int cx = int(blockIdx.x) % (a.tiles_x + 1), r = int(blockIdx.x) / (a.tiles_x + 1);
  const int x0 = clahe_detail::cell_start(cx, tile_w, a.inv_tw, a.width);
  const int x1 =
      cx == a.tiles_x ? a.width : clahe_detail::cell_start(cx + 1, tile_w, a.inv_tw, a.width);
  const int v0 = (x0 + 7) / 8, v1 = (x1 + 7) / 8;  // vectors whose first column is in [x0, x1)
  const int y0 = int(std::int64_t(r) * a.height / ranges),
            y1 = int(std::int64_t(r + 1) * a.height / ranges);
  pdl::wait();  // the LUT pairs, and the input and output, of the launches before
  const int per_row = v1 - v0;
  if (per_row <= 0) return;
  const unsigned total = unsigned(y1 - y0) * unsigned(per_row);
  const int stride = a.width / 8;
  // Vector k of the block: its row y, its index v in the row, and its place in the plane.
  struct Place {
    int y, v;
    std::size_t at;
  };
  const auto place = [&](unsigned k) {
    const int dy = int(k / unsigned(per_row));
    const int y = y0 + dy, v = v0 + int(k - unsigned(dy) * unsigned(per_row));
    return Place{y, v, std::size_t(y) * std::size_t(stride) + std::size_t(v)};
  };
  const uint4* in4 = reinterpret_cast<const uint4*>(in);
  for (unsigned k = threadIdx.x; k < total; k += blockDim.x) {
    const Place p = place(k);
    const int y = p.y, v = p.v;
    const std::size_t at = p.at;
    const uint4 q = __ldcs(in4 + at);
    const cf::Axis ya = cf::axis(y, a.inv_th, a.tiles_y);
    const std::uint32_t* p1 = rows.row_of(ya.t1);
    const std::uint32_t* p2 = rows.row_of(ya.t2);
    XCursor c;
    c.inv = a.inv_tw;
    c.start(8 * v);
    unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned lo = pair_sample(p1, p2, c, ya.a, ya.a1, w[j] & 0xFFFFu);
      const unsigned hi = pair_sample(p1, p2, c, ya.a, ya.a1, w[j] >> 16);
      w[j] = lo | hi << 16;
    }
    __stcs(reinterpret_cast<uint4*>(out) + at, make_uint4(w[0], w[1], w[2], w[3]));
  }
}

template <typename T, typename Rows>
void launch_apply(bool vec, unsigned grid, const T* d_in, T* d_out, const Rows& rows,
                  const ApplyArgs& a, cudaStream_t stream, pdl::Edge edge, const Tuning& t) {
  pdl::launch(edge, t, vec ? apply_kernel<T, true, Rows> : apply_kernel<T, false, Rows>, dim3(grid),
              dim3(P::kApplyBlockSize), 0, stream, d_in, d_out, rows, a);
}

template <typename T>
void run_apply(const T* d_in, T* d_out, const cf::Geometry& g, const T* luts, cudaStream_t stream,
               const Tuning& t, const std::uint32_t* pairs = nullptr) {
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
  if constexpr (sizeof(T) == 2) {
    if (pairs != nullptr && vec && g.width % 8 == 0 && t.clahe.cells16) {
      const auto kernel = apply_cells16_kernel;
      const int per_sm = t.clahe.cells16_blocks_per_sm < 0 ? P::kCells16BlocksPerSm
                                                           : t.clahe.cells16_blocks_per_sm;
      const std::size_t target =
          per_sm > 0 ? std::size_t(per_sm) * std::size_t(detail::sm_count())
                     : detail::resident_blocks(reinterpret_cast<const void*>(kernel),
                                               P::kCells16Threads, 0);
      const int columns = g.tiles_x + 1;
      const int ranges = int(std::max<std::size_t>(
          1, std::min<std::size_t>(std::size_t(g.height),
                                   detail::ceil_div(target, std::size_t(columns)))));
      pdl::launch(pdl::kCellApply16, t, kernel, dim3(unsigned(columns * ranges)),
                  dim3(P::kCells16Threads), 0, stream, d_in, d_out, PairRows{pairs, g.tiles_x}, a,
                  g.tile_w, ranges);
      return;
    }
    if (pairs != nullptr) {
      launch_apply(vec, grid, d_in, d_out, PairRows{pairs, g.tiles_x}, a, stream, pdl::kPairApply16,
                   t);
      return;
    }
  }
  launch_apply(vec, grid, d_in, d_out, LutRows<T>{luts, g.tiles_x}, a, stream,
               sizeof(T) == 1 ? pdl::kFlatApply8 : pdl::kFlatApply16, t);
}

}  // namespace

void clahe_apply(const void* d_in, void* d_out, const cf::Geometry& g, const void* d_luts,
                 cudaStream_t stream, const void* d_pair_luts, const Tuning& t) {
  if (g.width < 1 || g.height < 1) throw UsageError("CLAHE apply: empty plane");
  if (d_in == nullptr || d_out == nullptr || d_luts == nullptr) {
    throw UsageError("CLAHE apply: null device pointer");
  }
  if (g.hist_size == 256) {
    if (clahe_apply_strip_u8(static_cast<const std::uint8_t*>(d_in),
                             static_cast<std::uint8_t*>(d_out), g,
                             static_cast<const std::uint8_t*>(d_luts), stream, t)) {
      return;
    }
    if (clahe_apply_cell_u8(static_cast<const std::uint8_t*>(d_in),
                            static_cast<std::uint8_t*>(d_out), g,
                            static_cast<const std::uint8_t*>(d_luts), stream, t)) {
      return;
    }
    run_apply(static_cast<const std::uint8_t*>(d_in), static_cast<std::uint8_t*>(d_out), g,
              static_cast<const std::uint8_t*>(d_luts), stream, t);
  } else if (g.hist_size == 65536) {
    run_apply(static_cast<const std::uint16_t*>(d_in), static_cast<std::uint16_t*>(d_out), g,
              static_cast<const std::uint16_t*>(d_luts), stream, t,
              static_cast<const std::uint32_t*>(d_pair_luts));
  } else {
    throw UsageError("CLAHE apply: hist_size must be 256 or 65536");
  }
}

}  // namespace histeq::kernels
