// region.cpp — histograms of the counted pixels of a plane (masked equalization: histeq/match.hpp's
// Region; cpu::histogram and cpu::histogram16 with a region, histeq/cpu.hpp and equalize16.hpp).
//
// One pass over the counted rows: a rectangle alone counts its rows' bytes as the whole-image
// histogram does (cpu::histogram_rows); a mask is read with its plane, 8 mask bytes at a time: a
// word of zero skips 8 pixels, a word without a zero byte counts 8 pixels as the whole-image
// histogram does, and a mixed word adds (mask != 0) to each pixel's level, no branch depending
// on a mask byte (16-bit planes: the skip, then (mask != 0) per pixel). Each thread counts a
// band of rows into its own histogram; 8-bit levels go to four interleaved 32-bit
// sub-histograms (as cpu_backend.cpp's counting, so that a run of equal values does not chain
// every increment on the last store), flushed before they can overflow.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/parallel.hpp"
#include "cpu/subhist.hpp"
#include "histeq/cpu.hpp"
#include "histeq/equalize16.hpp"

namespace histeq::cpu {
namespace {

constexpr std::size_t kMinCountedPerThread = std::size_t(1) << 16;
constexpr std::size_t kFlush = std::size_t(1) << 30;  // samples between flushes: < 2^32 per counter

/// The counted rectangle (the region's, or the whole plane).
struct Rect {
  std::size_t x = 0, y = 0, w = 0, h = 0;
};
Rect rect_of(const Region& region, int width, int height) {
  if (!region.roi) return {0, 0, std::size_t(width), std::size_t(height)};
  const Roi& r = *region.roi;
  return {std::size_t(r.x), std::size_t(r.y), std::size_t(r.width), std::size_t(r.height)};
}

/// Bands of rows: how many threads count, at least kMinCountedPerThread samples each.
int band_count(const Rect& r, int threads) {
  const std::size_t t = threads > 0 ? std::size_t(threads) : std::size_t(usable_cpus());
  const std::size_t by_work = std::max<std::size_t>(1, r.w * r.h / kMinCountedPerThread);
  return int(std::max<std::size_t>(1, std::min({t, by_work, r.h})));
}

/// Runs fn(band, first row, end row) for `bands` bands of the rectangle's rows, on the pool.
template <class Fn>
void for_bands(const Rect& r, int bands, Fn&& fn) {
  parallel::run_tasks(std::size_t(bands), bands, [&](std::size_t b) {
    fn(b, r.y + b * r.h / std::size_t(bands), r.y + (b + 1) * r.h / std::size_t(bands));
  });
}

constexpr std::uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;

std::uint64_t load8(const std::uint8_t* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}
/// Whether none of a word's 8 bytes is zero.
bool all_nonzero(std::uint64_t w) { return ((w - kOnes) & ~w & kHighs) == 0; }

/// h[k][p[i]] += (m[i] != 0) for i in [0, n), k cycling over the four sub-histograms: a word
/// of 8 mask bytes that are all zero is skipped, one with no zero byte counted as the whole
/// image is, a mixed one byte by byte without a branch.
void count_masked(const std::uint8_t* p, const std::uint8_t* m, std::size_t n, std::uint32_t* h) {
  std::uint32_t* h0 = h;
  std::uint32_t* h1 = h0 + 256;
  std::uint32_t* h2 = h1 + 256;
  std::uint32_t* h3 = h2 + 256;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t w = load8(m + i);
    if (w == 0) continue;
    if (all_nonzero(w)) {
      count_word8(load8(p + i), h0, h1, h2, h3);
      continue;
    }
    const std::uint8_t* q = p + i;
    const std::uint8_t* k = m + i;
    h0[q[0]] += k[0] != 0;
    h1[q[1]] += k[1] != 0;
    h2[q[2]] += k[2] != 0;
    h3[q[3]] += k[3] != 0;
    h0[q[4]] += k[4] != 0;
    h1[q[5]] += k[5] != 0;
    h2[q[6]] += k[6] != 0;
    h3[q[7]] += k[7] != 0;
  }
  for (; i < n; ++i) h0[p[i]] += m[i] != 0;
}

void flush(std::uint32_t* h, std::uint64_t* acc) {
  for (int v = 0; v < 256; ++v) {
    acc[v] += std::uint64_t(h[v]) + h[256 + v] + h[512 + v] + h[768 + v];
    h[v] = h[256 + v] = h[512 + v] = h[768 + v] = 0;
  }
}

/// The masked 8-bit histogram of rows [y0, y1) of the rectangle into acc[256].
void masked_rows8(const std::uint8_t* plane, const std::uint8_t* mask, std::size_t width,
                  const Rect& r, std::size_t y0, std::size_t y1, std::uint64_t* acc) {
  std::vector<std::uint32_t> sub(4 * 256, 0);
  std::size_t pending = 0;
  for (std::size_t y = y0; y < y1; ++y) {
    if (pending + r.w > kFlush) {
      flush(sub.data(), acc);
      pending = 0;
    }
    const std::size_t at = y * width + r.x;
    count_masked(plane + at, mask + at, r.w, sub.data());
    pending += r.w;
  }
  flush(sub.data(), acc);
}

/// The masked 16-bit histogram of rows [y0, y1) of the rectangle into acc[65536].
void masked_rows16(const std::uint16_t* plane, const std::uint8_t* mask, std::size_t width,
                   const Rect& r, std::size_t y0, std::size_t y1, std::uint64_t* acc) {
  for (std::size_t y = y0; y < y1; ++y) {
    const std::uint16_t* p = plane + y * width + r.x;
    const std::uint8_t* m = mask + y * width + r.x;
    std::size_t i = 0;
    for (; i + 8 <= r.w; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, m + i, 8);
      if (w == 0) continue;
      for (std::size_t k = i; k < i + 8; ++k) acc[p[k]] += m[k] != 0;
    }
    for (; i < r.w; ++i) acc[p[i]] += m[i] != 0;
  }
}

/// Sums the bands' histograms.
Histogram sum_parts(const std::vector<std::uint64_t>& parts, int bands, std::size_t bins) {
  Histogram h(bins, 0);
  for (int b = 0; b < bands; ++b)
    for (std::size_t v = 0; v < bins; ++v) h[v] += parts[std::size_t(b) * bins + v];
  return h;
}

}  // namespace

Histogram histogram(const std::uint8_t* plane, int width, int height, const Region& region,
                    int threads) {
  const std::size_t w = std::size_t(width);
  if (region.all()) return histogram(plane, w * std::size_t(height), SampleType::u8, 256, threads);
  const Rect r = rect_of(region, width, height);
  if (!region.mask && r.w == w)  // whole rows: one contiguous block
    return histogram(plane + r.y * w, r.w * r.h, SampleType::u8, 256, threads);
  const int bands = band_count(r, threads);
  std::vector<std::uint64_t> parts(std::size_t(bands) * 256, 0);
  const std::uint8_t* mask = region.mask ? region.mask->pixels.data() : nullptr;
  for_bands(r, bands, [&](std::size_t b, std::size_t y0, std::size_t y1) {
    std::uint64_t* acc = parts.data() + b * 256;
    if (mask) {
      masked_rows8(plane, mask, w, r, y0, y1, acc);
      return;
    }
    const Histogram h = histogram_rows(plane + y0 * w + r.x, r.w, y1 - y0, w);
    for (std::size_t v = 0; v < 256; ++v) acc[v] += h[v];
  });
  return sum_parts(parts, bands, 256);
}

Histogram histogram16(const std::uint16_t* plane, int width, int height, const Region& region,
                      int threads) {
  const std::size_t w = std::size_t(width);
  if (region.all()) return histogram16(plane, w * std::size_t(height), threads);
  const Rect r = rect_of(region, width, height);
  if (!region.mask && r.w == w) return histogram16(plane + r.y * w, r.w * r.h, threads);
  const int bands = band_count(r, threads);
  const std::size_t bins = kBins16;
  std::vector<std::uint64_t> parts(std::size_t(bands) * bins, 0);
  const std::uint8_t* mask = region.mask ? region.mask->pixels.data() : nullptr;
  for_bands(r, bands, [&](std::size_t b, std::size_t y0, std::size_t y1) {
    std::uint64_t* acc = parts.data() + b * bins;
    if (mask) {
      masked_rows16(plane, mask, w, r, y0, y1, acc);
      return;
    }
    for (std::size_t y = y0; y < y1; ++y) {
      const std::uint16_t* p = plane + y * w + r.x;
      for (std::size_t i = 0; i < r.w; ++i) ++acc[p[i]];
    }
  });
  return sum_parts(parts, bands, bins);
}

}  // namespace histeq::cpu
