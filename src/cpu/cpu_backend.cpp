// cpu_backend.cpp — the CPU backend: histogram, plane extraction and LUT application on the host.
// It is the byte-exact reference for the device kernels and the fallback when no GPU is usable.
//
// Histogram: the same privatization as the GPU kernels, one level up (Kirk, Hwu & El Hajj,
// Programming Massively Parallel Processors, 4th ed., ch. 9): each thread counts a contiguous
// chunk into private sub-histograms, and the private copies are summed once per bin at the end.
// Within a thread, four interleaved 32-bit sub-histograms take consecutive samples in turn, so a
// run of equal values does not chain every increment on the previous store to the same counter
// (store-to-load forwarding stalls); u8 samples are read 8 at a time with one 64-bit load.
// u8 samples are always counted by raw value (256 counters) and folded to `bins` afterwards with
// the binning rule of types.hpp, so every bin count costs the same as 256.
// Apply of a gray LUT uses AVX-512 VBMI byte permutes where the CPU has them (checked at run
// time; cpu::set_simd(false) forces the portable 64-bit-word loop).
// Colour images (3–4 channels): the per-pixel loops are templated on the channel count (constant
// strides, no per-pixel branch on mode or alpha). Luma (extract_planes, gray mode) and luma mode's
// colour round trip have two implementations with the same bytes as color::luma and
// color::equalize_luma (tests/test_host_cpu_exact.cpp checks all 2^24 colours on both):
//  - x86-64 with AVX2 (checked at run time): color.hpp's own functions in loops over blocks of
//    pixels that GCC and Clang vectorize (8 pixels per 256-bit operation) — exact by
//    construction, it is the same integer code;
//  - elsewhere, or after cpu::set_simd(false): scalar loops over small tables of color.hpp's
//    fixed-point terms (LumaTables), a few loads and adds per pixel instead of a dozen multiplies,
//    roundings and saturations; each entry is the integer the formula computes.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "cpu/parallel.hpp"
#include "cpu/subhist.hpp"
#include "histeq/color.hpp"
#include "histeq/cpu.hpp"

#include <sched.h>
#include "histeq/error.hpp"
#include "histeq/planes.hpp"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

namespace histeq::cpu {
namespace {

/// set_simd's switch.
std::atomic<bool> g_simd{true};

/// Worker count for `work` items: at most `threads` (0 → usable_cpus()), and no thread
/// gets fewer than `min_per_thread` items.
int worker_count(std::size_t work, int threads, std::size_t min_per_thread) {
  std::size_t t = threads > 0 ? std::size_t(threads) : std::size_t(usable_cpus());
  if (t == 0) t = 1;
  const std::size_t by_work =
      std::max<std::size_t>(1, work / std::max<std::size_t>(1, min_per_thread));
  return static_cast<int>(std::min(t, by_work));
}

/// Runs fn(worker, begin, end) on `workers` contiguous slices of [0, n), on the calling thread
/// and the backend's thread pool (cpu/parallel.hpp); an exception in any slice is rethrown here
/// after every slice has finished.
template <class Fn>
void parallel_slices(std::size_t n, int workers, Fn&& fn) {
  if (workers <= 1) {
    fn(0, std::size_t(0), n);
    return;
  }
  const std::size_t per = n / std::size_t(workers), extra = n % std::size_t(workers);
  auto begin_of = [&](std::size_t w) { return w * per + std::min(w, extra); };
  parallel::run_tasks(std::size_t(workers), workers,
                      [&](std::size_t w) { fn(int(w), begin_of(w), begin_of(w + 1)); });
}

constexpr int kSub = 4;                               // sub-histograms per thread
constexpr std::size_t kFlush = std::size_t(1) << 30;  // samples per block: < 2^32 per counter

/// Adds bytes [begin, end) of p to four interleaved sub-histograms h[0..4*256).
inline void count_into(const std::uint8_t* p, std::size_t begin, std::size_t end,
                       std::uint32_t* h) {
  std::uint32_t* h0 = h;
  std::uint32_t* h1 = h0 + 256;
  std::uint32_t* h2 = h1 + 256;
  std::uint32_t* h3 = h2 + 256;
  std::size_t i = begin;
  for (; i + 16 <= end; i += 16) {
    std::uint64_t a, b;
    std::memcpy(&a, p + i, 8);
    std::memcpy(&b, p + i + 8, 8);
    count_word8(a, h0, h1, h2, h3);
    count_word8(b, h0, h1, h2, h3);
  }
  for (; i < end; ++i) ++h0[p[i]];
}

/// acc[v] += the four sub-histograms' counts of v, which are then cleared.
inline void flush_into(std::uint32_t* h, std::uint64_t* acc) {
  for (int v = 0; v < 256; ++v) {
    acc[v] += std::uint64_t(h[v]) + h[256 + v] + h[512 + v] + h[768 + v];
    h[v] = h[256 + v] = h[512 + v] = h[768 + v] = 0;
  }
}

/// Counts bytes [begin, end) by raw value into acc[256].
void count_u8(const std::uint8_t* p, std::size_t begin, std::size_t end, std::uint64_t* acc) {
  std::vector<std::uint32_t> sub(kSub * 256);
  while (begin < end) {
    const std::size_t stop = std::min(end, begin + kFlush);
    count_into(p, begin, stop, sub.data());
    flush_into(sub.data(), acc);
    begin = stop;
  }
}

/// Counts int32 samples [begin, end) with 0 <= v < bins into acc[bins]; others go to a discard
/// counter (branch-free).
void count_i32(const std::int32_t* p, std::size_t begin, std::size_t end, int bins,
               std::uint64_t* acc) {
  const std::size_t stride = std::size_t(bins) + 1;  // + the discard counter
  const std::uint32_t ub = static_cast<std::uint32_t>(bins);
  std::vector<std::uint32_t> sub(kSub * stride);
  std::uint32_t* h0 = sub.data();
  std::uint32_t* h1 = h0 + stride;
  std::uint32_t* h2 = h1 + stride;
  std::uint32_t* h3 = h2 + stride;
  auto idx = [ub](std::int32_t v) {
    const std::uint32_t u = static_cast<std::uint32_t>(v);
    return u < ub ? u : ub;
  };
  while (begin < end) {
    const std::size_t stop = std::min(end, begin + kFlush);
    std::size_t i = begin;
    for (; i + 4 <= stop; i += 4) {
      ++h0[idx(p[i])];
      ++h1[idx(p[i + 1])];
      ++h2[idx(p[i + 2])];
      ++h3[idx(p[i + 3])];
    }
    for (; i < stop; ++i) ++h0[idx(p[i])];
    for (int v = 0; v < bins; ++v) acc[v] += std::uint64_t(h0[v]) + h1[v] + h2[v] + h3[v];
    std::fill(sub.begin(), sub.end(), 0u);
    begin = stop;
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define HISTEQ_HAVE_VBMI_PATH 1
/// out[i] = lut[in[i]] with AVX-512 VBMI: the 256-entry LUT lives in four 64-byte registers;
/// two 2-register byte permutes (vpermi2b) look up 64 samples in each 128-entry half and the
/// samples' top bit picks the half. Selected at run time (cpu_has_vbmi).
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void map_bytes_vbmi(
    const std::uint8_t* in, std::uint8_t* out, std::size_t b, std::size_t e,
    const std::uint8_t* lut) {
  const __m512i t0 = _mm512_loadu_si512(lut), t1 = _mm512_loadu_si512(lut + 64);
  const __m512i t2 = _mm512_loadu_si512(lut + 128), t3 = _mm512_loadu_si512(lut + 192);
  std::size_t i = b;
  for (; i + 64 <= e; i += 64) {
    const __m512i x = _mm512_loadu_si512(in + i);
    const __m512i lo = _mm512_permutex2var_epi8(t0, x, t1);  // index bits 0..6
    const __m512i hi = _mm512_permutex2var_epi8(t2, x, t3);
    const __mmask64 top = _mm512_movepi8_mask(x);  // index bit 7
    _mm512_storeu_si512(out + i, _mm512_mask_blend_epi8(top, lo, hi));
  }
  for (; i < e; ++i) out[i] = lut[in[i]];
}
bool cpu_has_vbmi() {
  static const bool has =
      __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw");
  return has;
}
#endif

/// out[i] = lut[in[i]] for i in [b, e): 8 samples per 64-bit load and store. The LUT is copied
/// to the stack so the compiler knows the stores to `out` cannot change it.
void map_bytes(const std::uint8_t* in, std::uint8_t* out, std::size_t b, std::size_t e,
               const std::uint8_t* lut_in) {
#if HISTEQ_HAVE_VBMI_PATH
  if (cpu_has_vbmi() && g_simd.load(std::memory_order_relaxed))
    return map_bytes_vbmi(in, out, b, e, lut_in);
#endif
  std::uint8_t lut[256];
  std::memcpy(lut, lut_in, 256);
  std::size_t i = b;
  for (; i + 8 <= e; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, in + i, 8);
    const std::uint64_t r =
        std::uint64_t(lut[w & 0xff]) | std::uint64_t(lut[(w >> 8) & 0xff]) << 8 |
        std::uint64_t(lut[(w >> 16) & 0xff]) << 16 | std::uint64_t(lut[(w >> 24) & 0xff]) << 24 |
        std::uint64_t(lut[(w >> 32) & 0xff]) << 32 | std::uint64_t(lut[(w >> 40) & 0xff]) << 40 |
        std::uint64_t(lut[(w >> 48) & 0xff]) << 48 | std::uint64_t(lut[w >> 56]) << 56;
    std::memcpy(out + i, &r, 8);
  }
  for (; i < e; ++i) out[i] = lut[in[i]];
}

// ---- colour images (3–4 channels) ----

/// color.hpp's luma and luma-mode round trip as tables, built once from color.hpp's functions.
/// Why each lookup is exact (all arithmetic in int, no overflow: |sums| < 2^23):
///  - Y = descale14(luma_sum(r, g, b)) and luma_sum is linear, so
///    y_r[r] + y_g[g] + y_b[b] with y_r[r] = luma_sum(r, 0, 0) + 2^13 (descale14's rounding),
///    y_g[g] = luma_sum(0, g, 0), y_b[b] = luma_sum(0, 0, b) is the same integer as
///    luma_sum(r, g, b) + 2^13, and Y is that >> 14.
///  - Cr depends on R − Y only, Cb on B − Y only (color::chroma), so for d = −255..255 the Cr
///    and Cb of R − Y = d and B − Y = d are chroma(d, d, 0): the same (R − Y)·11682 and
///    (B − Y)·9241 products.
///  - R's term depends on Cr only and B's on Cb only: r_term[d] = color::r_term(Cr of d),
///    b_term[d] = color::b_term(Cb of d), indexed by R − Y and B − Y directly (Cr and Cb
///    themselves are never needed per pixel).
///  - G's term is descale14(g_cr(Cr) + g_cb(Cb)): rounded once from a sum of a Cr part and a Cb
///    part, so those two parts are tabulated (g_cr[d], g_cb[d]) and the sum is rounded per pixel.
///  - sat[v + kSatBias] = color::sat_u8(v) for every v that Y' + term can reach: Y' is 0..255
///    and |term| <= 228 (r_term <= 180, g_term <= 136, b_term <= 227 in magnitude), so
///    −228..483 fits in the 768 entries. kSatBias is added to r_term and b_term in the table,
///    and to g_cb as kSatBias · 2^14, which adds exactly kSatBias after the >> 14 of descale14
///    (a multiple of 2^14 passes through an arithmetic shift unchanged).
/// Tables with index d are stored from d = −255 and used through pointers to their d = 0 entry.
struct LumaTables {
  static constexpr int kSatBias = 256;
  std::int32_t y_r[256], y_g[256], y_b[256];
  std::int16_t r_term[511], b_term[511];
  std::int32_t g_cr[511], g_cb[511];
  std::uint8_t sat[768];

  LumaTables() {
    for (int v = 0; v < 256; ++v) {
      y_r[v] = color::luma_sum(v, 0, 0) + (1 << 13);
      y_g[v] = color::luma_sum(0, v, 0);
      y_b[v] = color::luma_sum(0, 0, v);
    }
    for (int d = -255; d <= 255; ++d) {
      const int k = d + 255;
      std::uint8_t cr, cb;
      color::chroma(d, d, 0, cr, cb);
      r_term[k] = static_cast<std::int16_t>(color::r_term(cr) + kSatBias);
      b_term[k] = static_cast<std::int16_t>(color::b_term(cb) + kSatBias);
      g_cr[k] = color::g_cr(cr);
      g_cb[k] = color::g_cb(cb) + (kSatBias << 14);
    }
    for (int v = 0; v < 768; ++v) sat[v] = color::sat_u8(v - kSatBias);
  }
};
const LumaTables& luma_tables() {
  static const LumaTables tables;  // thread-safe initialisation (C++11 statics)
  return tables;
}

/// Y of one pixel from the tables (equal to color::luma(r, g, b)).
inline int table_luma(const LumaTables& t, int r, int g, int b) {
  return (t.y_r[r] + t.y_g[g] + t.y_b[b]) >> 14;
}

/// planes[i] = Y of pixel i, for i in [b, e), C = 3 or 4 channels, red at channel R (0 for
/// RGB, 2 for BGR; blue at 2 − R).
template <int C, int R>
void luma_plane(const std::uint8_t* in, std::uint8_t* y, std::size_t b, std::size_t e) {
  const LumaTables& t = luma_tables();
  for (std::size_t i = b; i < e; ++i) {
    const std::uint8_t* px = in + i * C;
    y[i] = static_cast<std::uint8_t>(table_luma(t, px[R], px[1], px[2 - R]));
  }
}

/// The three colour planes of pixels [b, e) (rgb mode), C = 3 or 4 channels. Inlined into
/// rgb_planes_avx2 too (below), where it vectorizes.
template <int C>
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
inline void
rgb_planes(const std::uint8_t* in, std::uint8_t* r, std::uint8_t* g, std::uint8_t* bl,
           std::size_t b, std::size_t e) {
  for (std::size_t i = b; i < e; ++i) {
    const std::uint8_t* px = in + i * C;
    r[i] = px[0];
    g[i] = px[1];
    bl[i] = px[2];
  }
}

/// Gray mode of a colour image: out[i] = lut[Y of pixel i] (red at channel R).
template <int C, int R>
void apply_gray(const std::uint8_t* in, std::uint8_t* out, std::size_t b, std::size_t e,
                const std::uint8_t* lut_in) {
  const LumaTables& t = luma_tables();
  std::uint8_t lut[256];
  std::memcpy(lut, lut_in, 256);
  for (std::size_t i = b; i < e; ++i) {
    const std::uint8_t* px = in + i * C;
    out[i] = lut[table_luma(t, px[R], px[1], px[2 - R])];
  }
}

/// Rgb mode: each colour channel through its own LUT, alpha copied. Each pixel is read whole
/// before it is written, so in == out works.
template <int C>
void apply_rgb(const std::uint8_t* in, std::uint8_t* out, std::size_t b, std::size_t e,
               const Lut* luts) {
  std::uint8_t lut[3][256];
  for (int p = 0; p < 3; ++p) std::memcpy(lut[p], luts[p].data(), 256);
  for (std::size_t i = b; i < e; ++i) {
    const std::uint8_t* px = in + i * C;
    std::uint8_t* o = out + i * C;
    const std::uint8_t r = px[0], g = px[1], bl = px[2];
    if (C == 4) o[3] = px[3];
    o[0] = lut[0][r];
    o[1] = lut[1][g];
    o[2] = lut[2][bl];
  }
}

/// Luma mode: color::equalize_luma of every pixel through the tables (see LumaTables), alpha
/// copied; red at channel R. Each pixel is read whole before it is written, so in == out works.
/// kPlane: `y_src` is not a LUT but the new luma of each pixel, y_src[i] (replace_luma).
template <int C, int R, bool kPlane = false>
void apply_luma(const std::uint8_t* in, std::uint8_t* out, std::size_t b, std::size_t e,
                const std::uint8_t* y_src) {
  const LumaTables& t = luma_tables();
  std::uint8_t lut[256];
  if (!kPlane) std::memcpy(lut, y_src, 256);
  const std::int16_t* r_term = t.r_term + 255;  // indexed by R − Y
  const std::int16_t* b_term = t.b_term + 255;  // by B − Y
  const std::int32_t* g_cr = t.g_cr + 255;
  const std::int32_t* g_cb = t.g_cb + 255;
  const std::uint8_t* sat = t.sat;
  for (std::size_t i = b; i < e; ++i) {
    const std::uint8_t* px = in + i * C;
    std::uint8_t* o = out + i * C;
    const int r = px[R], g = px[1], bl = px[2 - R];
    const int y = table_luma(t, r, g, bl);
    const int dr = r - y, db = bl - y;
    const int y2 = kPlane ? y_src[i] : lut[y];
    if (C == 4) o[3] = px[3];
    o[R] = sat[y2 + r_term[dr]];
    o[1] = sat[y2 + color::descale14(g_cr[dr] + g_cb[db])];
    o[2 - R] = sat[y2 + b_term[db]];
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define HISTEQ_HAVE_AVX2_PATH 1
// The AVX2 build of the colour loops. Each loop is color.hpp's scalar code on one pixel; the
// compiler vectorizes it because the target attribute of the entry points below allows AVX2 and
// the generic loops (always_inline) are compiled inside them. Loops that vectorize read and write
// whole blocks: the input pixels are first split into local planes, so the stores into `out` can
// never change what is still to be read (in == out, the executor's in-place apply, is safe and
// needs no run-time overlap check that would fall back to scalar code).
#define HISTEQ_INLINE __attribute__((always_inline)) inline

constexpr int kBlock = 512;  // pixels per block: 6 local planes of 512 bytes stay in L1

/// The planes of pixels [0, n) of `in` (C channels, red at channel R) into r, g, b (, a) and
/// their Y.
template <int C, int R>
HISTEQ_INLINE void split_block(const std::uint8_t* in, int n, std::uint8_t* r, std::uint8_t* g,
                               std::uint8_t* b, std::uint8_t* a, std::uint8_t* y) {
  for (int i = 0; i < n; ++i) {
    const std::uint8_t* px = in + std::size_t(i) * C;
    r[i] = px[R];
    g[i] = px[1];
    b[i] = px[2 - R];
    if (C == 4) a[i] = px[3];
    y[i] = color::luma(r[i], g[i], b[i]);
  }
}

/// out[i] = lut[in[i]] for i in [0, n): 8 samples per 64-bit word (the one step that does not
/// vectorize without byte gathers).
HISTEQ_INLINE void lookup_block(const std::uint8_t* in, std::uint8_t* out, int n,
                                const std::uint8_t* lut) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w, o = 0;
    std::memcpy(&w, in + i, 8);
    for (int k = 0; k < 8; ++k) o |= std::uint64_t(lut[(w >> (8 * k)) & 0xff]) << (8 * k);
    std::memcpy(out + i, &o, 8);
  }
  for (; i < n; ++i) out[i] = lut[in[i]];
}

/// Y of pixels [b, e) into y[b, e) (extract_planes, luma and gray modes).
template <int C, int R>
__attribute__((target("avx2"))) void luma_plane_avx2(const std::uint8_t* in, std::uint8_t* y,
                                                     std::size_t b, std::size_t e) {
  alignas(32) std::uint8_t r[kBlock], g[kBlock], bl[kBlock], a[kBlock], yb[kBlock];
  for (std::size_t i = b; i < e; i += kBlock) {
    const int n = static_cast<int>(std::min<std::size_t>(kBlock, e - i));
    split_block<C, R>(in + i * C, n, r, g, bl, a, yb);
    std::memcpy(y + i, yb, std::size_t(n));
  }
}

/// rgb_planes (above), compiled for AVX2.
template <int C>
__attribute__((target("avx2"))) void rgb_planes_avx2(const std::uint8_t* in, std::uint8_t* r,
                                                     std::uint8_t* g, std::uint8_t* bl,
                                                     std::size_t b, std::size_t e) {
  rgb_planes<C>(in, r, g, bl, b, e);
}

/// Gray mode: out[i] = lut[Y of pixel i] for [b, e).
template <int C, int R>
__attribute__((target("avx2"))) void apply_gray_avx2(const std::uint8_t* in, std::uint8_t* out,
                                                     std::size_t b, std::size_t e,
                                                     const std::uint8_t* lut_in) {
  std::uint8_t lut[256];
  std::memcpy(lut, lut_in, 256);
  alignas(32) std::uint8_t r[kBlock], g[kBlock], bl[kBlock], a[kBlock], y[kBlock];
  for (std::size_t i = b; i < e; i += kBlock) {
    const int n = static_cast<int>(std::min<std::size_t>(kBlock, e - i));
    split_block<C, R>(in + i * C, n, r, g, bl, a, y);
    lookup_block(y, out + i, n, lut);
  }
}

/// Luma mode, per block: split into planes and Y; Y' = lut[Y]; then color::chroma of the
/// original pixel and color::to_rgb with Y' (color::equalize_luma step by step), interleaved
/// into out with alpha (red at channel R). kPlane: Y' = y_src[i] instead (replace_luma).
template <int C, int R, bool kPlane = false>
__attribute__((target("avx2"))) void apply_luma_avx2(const std::uint8_t* in, std::uint8_t* out,
                                                     std::size_t b, std::size_t e,
                                                     const std::uint8_t* y_src) {
  std::uint8_t lut[256];
  if (!kPlane) std::memcpy(lut, y_src, 256);
  alignas(32) std::uint8_t r[kBlock], g[kBlock], bl[kBlock], a[kBlock], y[kBlock], y2[kBlock];
  for (std::size_t i = b; i < e; i += kBlock) {
    const int n = static_cast<int>(std::min<std::size_t>(kBlock, e - i));
    split_block<C, R>(in + i * C, n, r, g, bl, a, y);
    if (kPlane) {
      std::memcpy(y2, y_src + i, std::size_t(n));
    } else {
      lookup_block(y, y2, n, lut);
    }
    std::uint8_t* o = out + i * C;
    for (int k = 0; k < n; ++k) {
      std::uint8_t cr, cb;
      color::chroma(r[k], bl[k], y[k], cr, cb);
      color::to_rgb(y2[k], cr, cb, o[k * C + R], o[k * C + 1], o[k * C + 2 - R]);
      if (C == 4) o[k * C + 3] = a[k];
    }
  }
}

bool use_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has && g_simd.load(std::memory_order_relaxed);
}
#undef HISTEQ_INLINE
#endif

/// f(C, R) with C = channels (3 or 4) and R = the red channel's index (0: RGB, 2: BGR) as
/// compile-time constants (std::integral_constant), for the per-pixel colour loops.
template <class F>
void colour_case(int channels, ChannelOrder order, F&& f) {
  using C3 = std::integral_constant<int, 3>;
  using C4 = std::integral_constant<int, 4>;
  using R0 = std::integral_constant<int, 0>;
  using R2 = std::integral_constant<int, 2>;
  const bool bgr = order == ChannelOrder::bgr;
  if (channels == 3) {
    bgr ? f(C3{}, R2{}) : f(C3{}, R0{});
  } else {
    bgr ? f(C4{}, R2{}) : f(C4{}, R0{});
  }
}

constexpr std::size_t kMinHistPerThread = std::size_t(1) << 16;
constexpr std::size_t kMinPixelsPerThread = std::size_t(1) << 15;

}  // namespace

void set_simd(bool on) { g_simd.store(on, std::memory_order_relaxed); }
bool simd() { return g_simd.load(std::memory_order_relaxed); }

Histogram histogram(const void* in, std::size_t n, SampleType type, int bins, int threads) {
  if (bins < 1 || bins > kMaxBins)
    throw UsageError("histogram bins " + std::to_string(bins) + " out of range (valid: 1.." +
                     std::to_string(kMaxBins) + ")");
  Histogram out(std::size_t(bins), 0);
  if (n == 0) return out;
  if (in == nullptr) throw Error("histogram: null input for " + std::to_string(n) + " samples");
  const int workers = worker_count(n, threads, kMinHistPerThread);
  const std::size_t width = type == SampleType::u8 ? 256 : std::size_t(bins);
  std::vector<std::uint64_t> partial(std::size_t(workers) * width, 0);
  parallel_slices(n, workers, [&](int w, std::size_t b, std::size_t e) {
    std::uint64_t* acc = partial.data() + std::size_t(w) * width;
    if (type == SampleType::u8)
      count_u8(static_cast<const std::uint8_t*>(in), b, e, acc);
    else
      count_i32(static_cast<const std::int32_t*>(in), b, e, bins, acc);
  });
  if (type == SampleType::u8) {
    for (int w = 0; w < workers; ++w)
      for (int v = 0; v < 256; ++v)
        out[std::size_t((v * bins) / 256)] += partial[std::size_t(w) * 256 + std::size_t(v)];
  } else {
    for (int w = 0; w < workers; ++w)
      for (std::size_t v = 0; v < width; ++v) out[v] += partial[std::size_t(w) * width + v];
  }
  return out;
}

Histogram histogram_rows(const std::uint8_t* p, std::size_t width, std::size_t height,
                         std::size_t stride) {
  std::vector<std::uint64_t> acc(256, 0);
  std::vector<std::uint32_t> sub(kSub * 256, 0);
  std::size_t pending = 0;  // samples in the 32-bit sub-histograms since their last flush
  for (std::size_t y = 0; y < height; ++y) {
    if (pending + width > kFlush) {
      flush_into(sub.data(), acc.data());
      pending = 0;
    }
    count_into(p + y * stride, 0, width, sub.data());
    pending += width;
  }
  flush_into(sub.data(), acc.data());
  return Histogram(acc.begin(), acc.end());
}

void extract_planes(const std::uint8_t* in, std::size_t pixels, int channels, Mode mode,
                    std::uint8_t* planes, int threads, ChannelOrder order) {
  if (channels < 1 || channels > 4)
    throw Error("extract_planes: " + std::to_string(channels) + " channels (valid: 1..4)");
#if HISTEQ_HAVE_AVX2_PATH
  const bool avx2 = use_avx2();
#endif
  const int workers = worker_count(pixels, threads, kMinPixelsPerThread);
  parallel_slices(pixels, workers, [&](int, std::size_t b, std::size_t e) {
    if (channels == 1) {
      std::memcpy(planes + b, in + b, e - b);
    } else if (channels == 2) {
      for (std::size_t i = b; i < e; ++i) planes[i] = in[2 * i];
    } else if (mode == Mode::rgb) {  // the channels in memory order, whatever `order` says
      std::uint8_t* r = planes;
      std::uint8_t* g = planes + pixels;
      std::uint8_t* bl = planes + 2 * pixels;
#if HISTEQ_HAVE_AVX2_PATH
      if (avx2) {
        channels == 3 ? rgb_planes_avx2<3>(in, r, g, bl, b, e)
                      : rgb_planes_avx2<4>(in, r, g, bl, b, e);
        return;
      }
#endif
      channels == 3 ? rgb_planes<3>(in, r, g, bl, b, e) : rgb_planes<4>(in, r, g, bl, b, e);
    } else {
      colour_case(channels, order, [&](auto c, auto r) {
        constexpr int C = decltype(c)::value, R = decltype(r)::value;
#if HISTEQ_HAVE_AVX2_PATH
        if (avx2) return luma_plane_avx2<C, R>(in, planes, b, e);
#endif
        luma_plane<C, R>(in, planes, b, e);
      });
    }
  });
}

void apply(const std::uint8_t* in, std::size_t pixels, int channels, Mode mode, const Lut* luts,
           std::uint8_t* out, int threads, ChannelOrder order) {
  if (channels < 1 || channels > 4)
    throw Error("apply: " + std::to_string(channels) + " channels (valid: 1..4)");
#if HISTEQ_HAVE_AVX2_PATH
  const bool avx2 = use_avx2();
#endif
  const std::size_t c = std::size_t(channels);
  const std::size_t oc = std::size_t(output_channels(mode, channels));
  const int workers = worker_count(pixels, threads, kMinPixelsPerThread);
  parallel_slices(pixels, workers, [&](int, std::size_t b, std::size_t e) {
    const std::uint8_t* l0 = luts[0].data();
    if (channels < 3) {  // gray (+ alpha): one plane
      if (c == 1) {
        map_bytes(in, out, b, e, l0);
      } else if (oc == 1) {
        for (std::size_t i = b; i < e; ++i) out[i] = l0[in[2 * i]];
      } else {
        for (std::size_t i = b; i < e; ++i) {
          out[2 * i] = l0[in[2 * i]];
          out[2 * i + 1] = in[2 * i + 1];
        }
      }
      return;
    }
    if (mode == Mode::rgb) {  // each channel through its plane's LUT, in memory order
      c == 4 ? apply_rgb<4>(in, out, b, e, luts) : apply_rgb<3>(in, out, b, e, luts);
      return;
    }
    colour_case(channels, order, [&](auto cc, auto r) {
      constexpr int C = decltype(cc)::value, R = decltype(r)::value;
#if HISTEQ_HAVE_AVX2_PATH
      if (avx2) {
        return mode == Mode::gray ? apply_gray_avx2<C, R>(in, out, b, e, l0)
                                  : apply_luma_avx2<C, R>(in, out, b, e, l0);
      }
#endif
      mode == Mode::gray ? apply_gray<C, R>(in, out, b, e, l0)
                         : apply_luma<C, R>(in, out, b, e, l0);
    });
  });
}

void replace_luma(const std::uint8_t* in, std::size_t pixels, int channels, const std::uint8_t* y,
                  std::uint8_t* out, int threads, ChannelOrder order) {
  if (channels != 3 && channels != 4)
    throw Error("replace_luma: " + std::to_string(channels) + " channels (valid: 3, 4)");
#if HISTEQ_HAVE_AVX2_PATH
  const bool avx2 = use_avx2();
#endif
  const int workers = worker_count(pixels, threads, kMinPixelsPerThread);
  parallel_slices(pixels, workers, [&](int, std::size_t b, std::size_t e) {
    colour_case(channels, order, [&](auto cc, auto r) {
      constexpr int C = decltype(cc)::value, R = decltype(r)::value;
#if HISTEQ_HAVE_AVX2_PATH
      if (avx2) return apply_luma_avx2<C, R, true>(in, out, b, e, y);
#endif
      apply_luma<C, R, true>(in, out, b, e, y);
    });
  });
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? int(n) : 1;
}

}  // namespace histeq::cpu
