// clahe_cpu.cpp — the CPU twin of the CLAHE kernels (clahe.hpp, clahe_formula.hpp).
// Tiles are histogrammed straight from the image with reflect-101 coordinates for the padded
// border (no padded copy is made), one tile per task; 8-bit tiles count into four interleaved
// sub-histograms (as cpu_backend.cpp: a run of equal samples does not chain every increment on
// the previous store to the same counter).
// The apply precomputes the column weights once, walks each row span by span (a span: the
// columns between two tile centres, whose four LUTs are fixed) and runs rows in parallel. On
// x86-64 with AVX2 (checked at run time; cpu::set_simd(false) forces the portable loop) eight
// pixels at a time: their LUT entries gathered from 32-bit copies of the LUTs (16-bit: from the
// LUTs themselves), then clahe_formula::blend's float32 operations, one rounding each, in its
// order (multiplies and adds, never fused: the target is avx2 without fma), and the conversion
// that rounds half to even under the default rounding mode, as round_sat's rint. Same bytes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HISTEQ_CLAHE_AVX2 1
#endif

#include "cpu/parallel.hpp"
#include "histeq/clahe.hpp"
#include "histeq/clahe_formula.hpp"
#include "histeq/color.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/planes.hpp"

namespace histeq {

void validate(const ClaheOptions& opt) {
  if (!std::isfinite(opt.clip_limit)) {
    throw UsageError("CLAHE clip limit must be a finite number (0 = no clipping), got " +
                     std::to_string(opt.clip_limit));
  }
  for (int t : {opt.tiles_x, opt.tiles_y}) {
    if (t < 1 || t > kMaxClaheTiles) {
      throw UsageError("CLAHE tile grid " + std::to_string(opt.tiles_x) + "x" +
                       std::to_string(opt.tiles_y) + " is outside 1.." +
                       std::to_string(kMaxClaheTiles) + " per side");
    }
  }
}

void validate(const ClaheOptions& opt, int bins) {
  validate(opt);
  const std::uint64_t entries =
      std::uint64_t(opt.tiles_x) * std::uint64_t(opt.tiles_y) * std::uint64_t(bins);
  if (entries > kMaxClaheLutEntries) {
    throw UsageError("CLAHE tile grid " + std::to_string(opt.tiles_x) + "x" +
                     std::to_string(opt.tiles_y) + " needs " + std::to_string(entries) +
                     " LUT entries at " + std::to_string(bins) + " bins, more than the " +
                     std::to_string(kMaxClaheLutEntries) + " allowed");
  }
}

namespace cpu {
namespace {
namespace cf = clahe_formula;

/// Samples below which a plane's CLAHE runs on the calling thread (starting a thread costs
/// more than the work it would take), and the least each further thread gets.
constexpr std::size_t kMinSamplesPerThread = std::size_t(1) << 16;

/// The threads for a plane of `samples` samples: at most `threads` (0: usable_cpus()), each
/// with at least kMinSamplesPerThread of them.
int threads_for(std::size_t samples, int threads) {
  const std::size_t t = threads > 0 ? std::size_t(threads) : std::size_t(cpu::usable_cpus());
  return int(std::max<std::size_t>(1, std::min(t, samples / kMinSamplesPerThread)));
}

/// Runs fn(i) for i in [0, n) on up to `threads` threads (0: usable_cpus()), in contiguous
/// chunks, on the calling thread and the backend's pool (cpu/parallel.hpp); rethrows the first
/// exception after every chunk has finished.
template <class Fn>
void parallel_for(std::size_t n, int threads, Fn&& fn) {
  std::size_t t = threads > 0 ? std::size_t(threads) : std::size_t(cpu::usable_cpus());
  t = std::max<std::size_t>(1, std::min(t, n));
  if (t <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  parallel::run_tasks(t, int(t), [&](std::size_t w) {
    for (std::size_t i = w * n / t; i < (w + 1) * n / t; ++i) fn(i);
  });
}

void check_plane(const void* in, int width, int height, const void* out, const ClaheOptions& opt,
                 int bins) {
  validate(opt, bins);
  if (width < 1 || height < 1) {
    throw UsageError("CLAHE of an empty plane (" + std::to_string(width) + "x" +
                     std::to_string(height) + ")");
  }
  if (in == nullptr || out == nullptr) throw UsageError("CLAHE: null plane pointer");
}

/// Clip → redistribute → LUT of one tile's histogram hist[0, bins) (overwritten): the rest of
/// OpenCV's CLAHE_CalcLut_Body.
template <class T>
void finish_lut(int* hist, const cf::Geometry& g, T* lut) {
  const int bins = g.hist_size;
  if (g.clip > 0) {
    int clipped = 0;
    for (int i = 0; i < bins; ++i) {
      if (hist[i] > g.clip) {
        clipped += hist[i] - g.clip;
        hist[i] = g.clip;
      }
    }
    const int batch = clipped / bins;
    int residual = clipped - batch * bins;
    for (int i = 0; i < bins; ++i) hist[i] += batch;
    if (residual != 0) {
      const int step = cf::residual_step(bins, residual);
      for (int i = 0; i < bins && residual > 0; i += step, --residual) ++hist[i];
    }
  }
  const int maxval = bins - 1;
  int sum = 0;
  for (int i = 0; i < bins; ++i) {
    sum += hist[i];
    lut[i] = static_cast<T>(cf::lut_value(sum, g.lut_scale, maxval));
  }
}

/// The part of padded row y (reflect-101 past the image) in tile column tx, counted into h.
/// 8-bit: h holds four interleaved sub-histograms of 256 (8 samples per 64-bit load).
template <class T>
void count_row(const T* row, const cf::Geometry& g, int tx, int* h) {
  const int x0 = tx * g.tile_w;
  const int x_end = x0 + std::max(0, std::min(g.tile_w, g.width - x0));  // inside the image
  int x = x0;
  if constexpr (sizeof(T) == 1) {
    for (; x + 8 <= x_end; x += 8) {
      std::uint64_t w;
      std::memcpy(&w, row + x, 8);
      ++h[w & 0xff];
      ++h[256 + ((w >> 8) & 0xff)];
      ++h[512 + ((w >> 16) & 0xff)];
      ++h[768 + ((w >> 24) & 0xff)];
      ++h[(w >> 32) & 0xff];
      ++h[256 + ((w >> 40) & 0xff)];
      ++h[512 + ((w >> 48) & 0xff)];
      ++h[768 + (w >> 56)];
    }
  }
  for (; x < x_end; ++x) ++h[row[x]];
  for (int xp = x_end; xp < x0 + g.tile_w; ++xp) ++h[row[cf::reflect101(xp, g.width)]];
}

/// The LUTs of tiles [tx0, tx1) of tile row ty. 8-bit: the tiles are counted together, row by
/// row of the image (reads stay sequential: a tile alone would read a short piece of each row,
/// a new page per row, which the prefetchers follow badly), into four sub-histograms each.
/// 16-bit: one tile at a time (65536 counters each).
template <class T>
void band_luts(const T* in, const cf::Geometry& g, int ty, int tx0, int tx1, std::vector<int>& hist,
               T* luts) {
  const int y0 = ty * g.tile_h;
  const std::size_t bins = std::size_t(g.hist_size);
  auto rows = [&](int tx_first, int tx_last, int* h, std::size_t stride) {
    for (int yp = y0; yp < y0 + g.tile_h; ++yp) {
      const int y = yp < g.height ? yp : cf::reflect101(yp, g.height);
      const T* row = in + std::size_t(y) * std::size_t(g.width);
      for (int tx = tx_first; tx < tx_last; ++tx)
        count_row(row, g, tx, h + std::size_t(tx - tx_first) * stride);
    }
  };
  if constexpr (sizeof(T) == 1) {
    constexpr std::size_t kStride = 4 * 256;
    hist.assign(std::size_t(tx1 - tx0) * kStride, 0);
    rows(tx0, tx1, hist.data(), kStride);
    for (int tx = tx0; tx < tx1; ++tx) {
      int* h = hist.data() + std::size_t(tx - tx0) * kStride;
      for (int i = 0; i < 256; ++i) h[i] += h[256 + i] + h[512 + i] + h[768 + i];
      finish_lut(h, g, luts + (std::size_t(ty) * std::size_t(g.tiles_x) + tx) * bins);
    }
  } else {
    for (int tx = tx0; tx < tx1; ++tx) {
      hist.assign(bins, 0);
      rows(tx, tx + 1, hist.data(), bins);
      finish_lut(hist.data(), g, luts + (std::size_t(ty) * std::size_t(g.tiles_x) + tx) * bins);
    }
  }
}

/// Every tile's LUT of the plane `in` (geometry g) into dst (tiles · bins entries).
template <class T>
void luts_of(const T* in, const cf::Geometry& g, T* dst, int threads) {
  // Tasks: a tile row each, cut into column groups when there are fewer tile rows than workers
  // (8-bit; 16-bit tiles are one task each).
  threads = threads_for(std::size_t(g.width) * std::size_t(g.height), threads);
  const int workers = threads;
  const int groups = sizeof(T) == 1
                         ? std::min(g.tiles_x, std::max(1, (workers + g.tiles_y - 1) / g.tiles_y))
                         : g.tiles_x;
  parallel_for(std::size_t(g.tiles_y) * std::size_t(groups), threads, [&](std::size_t task) {
    thread_local std::vector<int> hist;
    const int ty = int(task / std::size_t(groups)), k = int(task % std::size_t(groups));
    band_luts(in, g, ty, k * g.tiles_x / groups, (k + 1) * g.tiles_x / groups, hist, dst);
  });
}

/// Masked CLAHE (clahe.hpp): whether each pixel of the image is counted, one byte per pixel.
std::vector<std::uint8_t> counted_flags(const Region& region, int width, int height) {
  std::vector<std::uint8_t> f(std::size_t(width) * std::size_t(height));
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      f[std::size_t(y) * std::size_t(width) + std::size_t(x)] = region.counts(x, y, width) ? 1 : 0;
  return f;
}

/// The masked LUT of tile (tx, ty): the tile's counted pixels of the padded image (a padded
/// position takes the flag and the sample of the pixel reflect-101 maps it to) counted into
/// hist, clipped and scaled by their number; the identity when the tile counts none.
template <class T>
void masked_tile_lut(const T* in, const std::uint8_t* flags, const cf::Geometry& g,
                     double clip_limit, int tx, int ty, std::vector<int>& hist, T* lut) {
  hist.assign(std::size_t(g.hist_size), 0);
  int counted = 0;
  for (int yp = ty * g.tile_h; yp < (ty + 1) * g.tile_h; ++yp) {
    const int y = yp < g.height ? yp : cf::reflect101(yp, g.height);
    const std::size_t row = std::size_t(y) * std::size_t(g.width);
    for (int xp = tx * g.tile_w; xp < (tx + 1) * g.tile_w; ++xp) {
      const std::size_t i = row + std::size_t(xp < g.width ? xp : cf::reflect101(xp, g.width));
      if (flags[i] != 0) {
        ++hist[in[i]];
        ++counted;
      }
    }
  }
  if (counted == 0) {
    for (int v = 0; v < g.hist_size; ++v) lut[v] = static_cast<T>(v);
    return;
  }
  cf::Geometry gt = g;
  cf::count_tile(gt, clip_limit, counted);
  finish_lut(hist.data(), gt, lut);
}

/// luts_of for a region (not all, already checked): one task per tile.
template <class T>
void masked_luts_of(const T* in, const cf::Geometry& g, const Region& region, double clip_limit,
                    T* dst, int threads) {
  constexpr int kBins = sizeof(T) == 1 ? 256 : 65536;
  const std::vector<std::uint8_t> flags = counted_flags(region, g.width, g.height);
  threads = threads_for(std::size_t(g.width) * std::size_t(g.height), threads);
  parallel_for(std::size_t(g.tiles()), threads, [&](std::size_t t) {
    thread_local std::vector<int> hist;
    masked_tile_lut(in, flags.data(), g, clip_limit, int(t % std::size_t(g.tiles_x)),
                    int(t / std::size_t(g.tiles_x)), hist, dst + t * std::size_t(kBins));
  });
}

/// The LUTs of a plane: the masked path only for a region that is not every pixel.
template <class T>
cf::Geometry plane_luts(const T* in, int width, int height, const ClaheOptions& opt,
                        std::vector<T>& luts, T* luts_out, int threads) {
  constexpr int kBins = sizeof(T) == 1 ? 256 : 65536;
  if (!opt.region.all()) opt.region.check(width, height, "CLAHE");
  const cf::Geometry g =
      cf::make_geometry(width, height, opt.tiles_x, opt.tiles_y, opt.clip_limit, kBins);
  T* dst = luts_out;
  if (dst == nullptr) {
    luts.assign(std::size_t(g.tiles()) * kBins, T(0));
    dst = luts.data();
  }
  if (opt.region.all())
    luts_of(in, g, dst, threads);
  else
    masked_luts_of(in, g, opt.region, opt.clip_limit, dst, threads);
  return g;
}

/// The columns between two tile centres share their four LUTs: [x0, x1) with tiles t1, t2.
struct Span {
  int x0, x1, t1, t2;
};

/// The interpolation coordinates of every column (cf::axis) and the spans they make.
struct Columns {
  std::vector<cf::Axis> axes;
  std::vector<float> a, a1;  // the axes' weights, contiguous (the vector loop loads them)
  std::vector<Span> spans;
};

Columns columns_of(const cf::Geometry& g) {
  Columns c;
  const float inv_tw = cf::inv_size(g.tile_w);
  c.axes.resize(std::size_t(g.width));
  c.a.resize(std::size_t(g.width));
  c.a1.resize(std::size_t(g.width));
  for (int x = 0; x < g.width; ++x) {
    const cf::Axis ax = cf::axis(x, inv_tw, g.tiles_x);
    c.axes[std::size_t(x)] = ax;
    c.a[std::size_t(x)] = ax.a;
    c.a1[std::size_t(x)] = ax.a1;
    if (c.spans.empty() || c.spans.back().t1 != ax.t1 || c.spans.back().t2 != ax.t2) {
      c.spans.push_back({x, x + 1, ax.t1, ax.t2});
    } else {
      c.spans.back().x1 = x + 1;
    }
  }
  return c;
}

/// One row, columns [x0, x1) of a span: lut11/12 the LUTs of the span's tiles in the upper
/// tile row, lut21/22 in the lower one; OpenCV's CLAHE_Interpolation_Body per pixel.
template <class T, class L>
void blend_columns(const T* src, T* dst, int x0, int x1, const Columns& c, const L* lut11,
                   const L* lut12, const L* lut21, const L* lut22, const cf::Axis& ya) {
  constexpr int kMax = sizeof(T) == 1 ? 255 : 65535;
  for (int x = x0; x < x1; ++x) {
    const int v = src[x];
    dst[x] = static_cast<T>(cf::round_sat(
        cf::blend(int(lut11[v]), int(lut12[v]), int(lut21[v]), int(lut22[v]), c.axes[x], ya),
        kMax));
  }
}

#if HISTEQ_CLAHE_AVX2
bool use_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has && cpu::simd();
}

/// Eight entries of a LUT at the samples idx: 32-bit entries (8-bit LUTs widened), or 16-bit
/// entries read as the low half of a 32-bit load (the LUT buffer has one entry of padding).
template <class L>
__attribute__((target("avx2"))) inline __m256 gather(const L* lut, __m256i idx) {
  if constexpr (sizeof(L) == 4) {
    return _mm256_cvtepi32_ps(_mm256_i32gather_epi32(reinterpret_cast<const int*>(lut), idx, 4));
  } else {
    const __m256i w = _mm256_i32gather_epi32(reinterpret_cast<const int*>(lut), idx, 2);
    return _mm256_cvtepi32_ps(_mm256_and_si256(w, _mm256_set1_epi32(0xffff)));
  }
}

/// blend_columns, eight pixels per step (see the top of the file); the tail by the scalar loop.
template <class T, class L>
__attribute__((target("avx2"))) void blend_columns_avx2(const T* src, T* dst, int x0, int x1,
                                                        const Columns& c, const L* lut11,
                                                        const L* lut12, const L* lut21,
                                                        const L* lut22, const cf::Axis& ya) {
  const __m256 ya_v = _mm256_set1_ps(ya.a), ya1_v = _mm256_set1_ps(ya.a1);
  int x = x0;
  for (; x + 8 <= x1; x += 8) {
    __m256i idx;
    if constexpr (sizeof(T) == 1) {
      idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + x)));
    } else {
      idx = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + x)));
    }
    const __m256 xa = _mm256_loadu_ps(c.a.data() + x), xa1 = _mm256_loadu_ps(c.a1.data() + x);
    const __m256 top = _mm256_add_ps(_mm256_mul_ps(gather(lut11, idx), xa1),
                                     _mm256_mul_ps(gather(lut12, idx), xa));
    const __m256 bot = _mm256_add_ps(_mm256_mul_ps(gather(lut21, idx), xa1),
                                     _mm256_mul_ps(gather(lut22, idx), xa));
    const __m256 res = _mm256_add_ps(_mm256_mul_ps(top, ya1_v), _mm256_mul_ps(bot, ya_v));
    const __m256i r = _mm256_cvtps_epi32(res);  // round half to even (default MXCSR)
    const __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    if constexpr (sizeof(T) == 1) {
      const __m128i w = _mm_packs_epi32(lo, hi);  // saturation to 0..255 in two steps
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + x), _mm_packus_epi16(w, w));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + x), _mm_packus_epi32(lo, hi));
    }
  }
  blend_columns(src, dst, x, x1, c, lut11, lut12, lut21, lut22, ya);
}
#endif

/// OpenCV's CLAHE_Interpolation_Body over the plane, rows in parallel. luts: tiles · bins
/// entries of type L (8-bit: the LUTs widened to int32 for the vector loop's gathers; 16-bit:
/// the LUTs, with one entry of padding after them).
template <class T, class L>
void interpolate(const T* in, const cf::Geometry& g, const L* luts, T* out, int threads) {
  constexpr std::size_t kBins = sizeof(T) == 1 ? 256 : 65536;
  const float inv_th = cf::inv_size(g.tile_h);
  const Columns cols = columns_of(g);
  threads = threads_for(std::size_t(g.width) * std::size_t(g.height), threads);
#if HISTEQ_CLAHE_AVX2
  const bool avx2 = use_avx2();
#endif
  parallel_for(std::size_t(g.height), threads, [&](std::size_t yi) {
    const cf::Axis ya = cf::axis(int(yi), inv_th, g.tiles_y);
    const L* lut1 = luts + std::size_t(ya.t1) * std::size_t(g.tiles_x) * kBins;
    const L* lut2 = luts + std::size_t(ya.t2) * std::size_t(g.tiles_x) * kBins;
    const T* src = in + yi * std::size_t(g.width);
    T* dst = out + yi * std::size_t(g.width);
    for (const Span& sp : cols.spans) {
      const std::size_t o1 = std::size_t(sp.t1) * kBins, o2 = std::size_t(sp.t2) * kBins;
#if HISTEQ_CLAHE_AVX2
      if (avx2) {
        blend_columns_avx2(src, dst, sp.x0, sp.x1, cols, lut1 + o1, lut1 + o2, lut2 + o1, lut2 + o2,
                           ya);
        continue;
      }
#endif
      blend_columns(src, dst, sp.x0, sp.x1, cols, lut1 + o1, lut1 + o2, lut2 + o1, lut2 + o2, ya);
    }
  });
}

template <class T>
void plane(const T* in, int width, int height, const ClaheOptions& opt, T* out, int threads) {
  check_plane(in, width, height, out, opt, sizeof(T) == 1 ? 256 : 65536);
  std::vector<T> luts;
  const cf::Geometry g = plane_luts<T>(in, width, height, opt, luts, nullptr, threads);
  if constexpr (sizeof(T) == 1) {
    const std::vector<std::int32_t> wide(luts.begin(), luts.end());
    interpolate(in, g, wide.data(), out, threads);
  } else {
    luts.push_back(0);  // the padding the vector loop's 32-bit loads of 16-bit entries read
    interpolate(in, g, luts.data(), out, threads);
  }
}

}  // namespace

void clahe_plane(const std::uint8_t* in, int width, int height, const ClaheOptions& opt,
                 std::uint8_t* out, int threads) {
  plane(in, width, height, opt, out, threads);
}
void clahe_plane16(const std::uint16_t* in, int width, int height, const ClaheOptions& opt,
                   std::uint16_t* out, int threads) {
  plane(in, width, height, opt, out, threads);
}
void clahe_luts(const std::uint8_t* in, int width, int height, const ClaheOptions& opt,
                std::uint8_t* luts, int threads) {
  check_plane(in, width, height, luts, opt, 256);
  std::vector<std::uint8_t> unused;
  plane_luts(in, width, height, opt, unused, luts, threads);
}
void clahe_luts16(const std::uint16_t* in, int width, int height, const ClaheOptions& opt,
                  std::uint16_t* luts, int threads) {
  check_plane(in, width, height, luts, opt, 65536);
  std::vector<std::uint16_t> unused;
  plane_luts(in, width, height, opt, unused, luts, threads);
}

Image clahe(const Image& img, const ClaheOptions& opt, int threads) {
  return detail::clahe_image(img, opt, [&](const std::uint8_t* in, std::uint8_t* out) {
    clahe_plane(in, img.width, img.height, opt, out, threads);
  });
}
Image16 clahe(const Image16& img, const ClaheOptions& opt, int threads) {
  return detail::clahe_image(img, opt, [&](const std::uint16_t* in, std::uint16_t* out) {
    clahe_plane16(in, img.width, img.height, opt, out, threads);
  });
}

}  // namespace cpu

namespace detail {
namespace {

void check_view(int width, int height, int channels, const void* in, const void* out) {
  if (width < 1 || height < 1 || channels < 1 || channels > 4 || in == nullptr || out == nullptr) {
    throw Error("CLAHE: empty or inconsistent image");
  }
}

}  // namespace

void clahe_into(const ImageView<std::uint8_t>& img, const ClaheOptions& opt_in, std::uint8_t* out,
                const PlaneFn8& plane_fn) {
  validate(opt_in);
  check_view(img.width, img.height, img.channels, img.pixels, out);
  const int c = img.channels;
  const Mode mode = mode_that_runs(opt_in.mode, c);
  const std::size_t n = img.pixel_count();
  const std::uint8_t* in = img.pixels;
  if (c == 1) {  // the plane itself, in place: no copy
    plane_fn(in, out);
    return;
  }
  const int planes = plane_count(mode, c);
  // Planes: the gray channel, Y (in the image's channel order) or the colour channels.
  std::vector<std::uint8_t> src(n * std::size_t(planes));
  cpu::extract_planes(in, n, c, mode, src.data(), 0, opt_in.order);
  if (mode == Mode::gray) {  // one output channel: the plane's CLAHE itself
    plane_fn(src.data(), out);
    return;
  }
  std::vector<std::uint8_t> dst(src.size());
  for (int k = 0; k < planes; ++k) {
    plane_fn(src.data() + std::size_t(k) * n, dst.data() + std::size_t(k) * n);
  }
  if (c == 2) {  // gray + alpha
    for (std::size_t i = 0; i < n; ++i) {
      out[2 * i] = dst[i];
      out[2 * i + 1] = in[2 * i + 1];
    }
  } else if (planes == 3) {  // rgb: each channel from its plane, alpha copied
    for (std::size_t i = 0; i < n; ++i) {
      std::uint8_t* q = out + i * std::size_t(c);
      for (int k = 0; k < 3; ++k) q[k] = dst[std::size_t(k) * n + i];
      if (c == 4) q[3] = in[i * 4 + 3];
    }
  } else {  // luma: Y replaced, chroma and alpha kept
    cpu::replace_luma(in, n, c, dst.data(), out, 0, opt_in.order);
  }
}

Image clahe_image(const Image& img, const ClaheOptions& opt, const PlaneFn8& plane_fn) {
  validate(opt);
  if (img.width < 1 || img.height < 1 || img.channels < 1 || img.channels > 4 ||
      img.pixels.size() != img.byte_count()) {
    throw Error("CLAHE: empty or inconsistent image");
  }
  Image out;
  out.width = img.width;
  out.height = img.height;
  out.channels = output_channels(mode_that_runs(opt.mode, img.channels), img.channels);
  out.pixels.resize(out.byte_count());
  clahe_into(ImageView<std::uint8_t>{img.pixels.data(), img.width, img.height, img.channels}, opt,
             out.pixels.data(), plane_fn);
  return out;
}

void clahe_into(const ImageView<std::uint16_t>& img, const ClaheOptions& opt_in, std::uint16_t* out,
                const PlaneFn16& plane_fn) {
  validate(opt_in);
  check_view(img.width, img.height, img.channels, img.pixels, out);
  const int c = img.channels;
  const Mode mode = mode_that_runs(opt_in.mode, c);
  if (c >= 3 && mode != Mode::rgb) {
    throw UsageError(std::string("CLAHE of a 16-bit colour image: mode '") + to_string(mode) +
                     "' needs 16-bit YCbCr, which histeq does not have; use mode rgb (or 8 bits)");
  }
  const std::size_t n = img.pixel_count();
  const std::uint16_t* in = img.pixels;
  if (c == 1) {  // the plane itself, in place: no copy
    plane_fn(in, out);
    return;
  }
  // Gray and gray+alpha keep their channels (as equalize16 does): the gray channel is the plane,
  // alpha is copied. A 16-bit image has no YCbCr, so no mode narrows it to one channel.
  const int planes = c >= 3 ? 3 : 1;
  std::vector<std::uint16_t> src(n), dst(n);
  for (int k = 0; k < planes; ++k) {
    for (std::size_t i = 0; i < n; ++i) src[i] = in[i * std::size_t(c) + std::size_t(k)];
    plane_fn(src.data(), dst.data());
    for (std::size_t i = 0; i < n; ++i) out[i * std::size_t(c) + std::size_t(k)] = dst[i];
  }
  const int alpha = (c == 2 || c == 4) ? c - 1 : -1;
  if (alpha >= 0) {
    for (std::size_t i = 0; i < n; ++i)
      out[i * std::size_t(c) + std::size_t(alpha)] = in[i * std::size_t(c) + std::size_t(alpha)];
  }
}

Image16 clahe_image(const Image16& img, const ClaheOptions& opt, const PlaneFn16& plane_fn) {
  validate(opt);
  if (img.width < 1 || img.height < 1 || img.channels < 1 || img.channels > 4 ||
      img.pixels.size() != img.sample_count()) {
    throw Error("CLAHE: empty or inconsistent image");
  }
  Image16 out;
  out.width = img.width;
  out.height = img.height;
  out.channels = img.channels;
  out.pixels.resize(out.sample_count());
  clahe_into(ImageView<std::uint16_t>{img.pixels.data(), img.width, img.height, img.channels}, opt,
             out.pixels.data(), plane_fn);
  return out;
}

}  // namespace detail
}  // namespace histeq
