// clahe_cpu.cpp — the CPU twin of the CLAHE kernels (clahe.hpp, clahe_formula.hpp).
// Tiles are histogrammed straight from the image with reflect-101 coordinates for the padded
// border (no padded copy is made), one tile per task; the apply precomputes the column weights
// once and runs rows in parallel.
#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

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

namespace {
/// The mode rules of planes.hpp for CLAHE, on either sample type.
Mode effective_mode(int channels, Mode requested) {
  return channels == 1
             ? Mode::gray
             : (channels == 2 ? (requested == Mode::gray ? Mode::gray : Mode::luma) : requested);
}
}  // namespace

namespace cpu {
namespace {
namespace cf = clahe_formula;

/// Runs fn(i) for i in [0, n) on up to `threads` threads (0: hardware_concurrency), in
/// contiguous chunks; rethrows the first exception after every thread joined.
template <class Fn>
void parallel_for(std::size_t n, int threads, Fn&& fn) {
  std::size_t t = threads > 0 ? std::size_t(threads) : std::size_t(cpu::usable_cpus());
  t = std::max<std::size_t>(1, std::min(t, n));
  if (t <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::vector<std::exception_ptr> errors(t);
  auto run = [&](std::size_t w) {
    try {
      for (std::size_t i = w * n / t; i < (w + 1) * n / t; ++i) fn(i);
    } catch (...) {
      errors[w] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  std::vector<std::size_t> inline_slices{0};
  for (std::size_t w = 1; w < t; ++w) {
    try {
      pool.emplace_back(run, w);
    } catch (const std::system_error&) {
      inline_slices.push_back(w);
    }
  }
  for (std::size_t w : inline_slices) run(w);
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
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

/// Tile histogram → clip → redistribute → LUT, OpenCV's CLAHE_CalcLut_Body for one tile.
template <class T>
void tile_lut(const T* in, const cf::Geometry& g, int tile, std::vector<int>& hist, T* lut) {
  const int tx = tile % g.tiles_x, ty = tile / g.tiles_x;
  std::fill(hist.begin(), hist.end(), 0);
  const int x0 = tx * g.tile_w, y0 = ty * g.tile_h;
  const int x_in = std::max(0, std::min(g.tile_w, g.width - x0));  // columns inside the image
  for (int yp = y0; yp < y0 + g.tile_h; ++yp) {
    const int y = yp < g.height ? yp : cf::reflect101(yp, g.height);
    const T* row = in + std::size_t(y) * std::size_t(g.width);
    for (int x = x0; x < x0 + x_in; ++x) ++hist[row[x]];
    for (int xp = x0 + x_in; xp < x0 + g.tile_w; ++xp) ++hist[row[cf::reflect101(xp, g.width)]];
  }
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

template <class T>
cf::Geometry luts_of(const T* in, int width, int height, const ClaheOptions& opt,
                     std::vector<T>& luts, T* luts_out, int threads) {
  constexpr int kBins = sizeof(T) == 1 ? 256 : 65536;
  const cf::Geometry g =
      cf::make_geometry(width, height, opt.tiles_x, opt.tiles_y, opt.clip_limit, kBins);
  T* dst = luts_out;
  if (dst == nullptr) {
    luts.assign(std::size_t(g.tiles()) * kBins, T(0));
    dst = luts.data();
  }
  // One task per tile; each worker reuses its histogram through thread_local-free chunks.
  parallel_for(std::size_t(g.tiles()), threads, [&](std::size_t t) {
    thread_local std::vector<int> hist;
    hist.resize(kBins);
    tile_lut(in, g, int(t), hist, dst + t * kBins);
  });
  return g;
}

/// OpenCV's CLAHE_Interpolation_Body.
template <class T>
void interpolate(const T* in, const cf::Geometry& g, const T* luts, T* out, int threads) {
  constexpr int kBins = sizeof(T) == 1 ? 256 : 65536;
  constexpr int kMax = kBins - 1;
  const float inv_tw = cf::inv_size(g.tile_w), inv_th = cf::inv_size(g.tile_h);
  std::vector<cf::Axis> xs(static_cast<std::size_t>(g.width));
  for (int x = 0; x < g.width; ++x) xs[std::size_t(x)] = cf::axis(x, inv_tw, g.tiles_x);
  parallel_for(std::size_t(g.height), threads, [&](std::size_t yi) {
    const int y = int(yi);
    const cf::Axis ya = cf::axis(y, inv_th, g.tiles_y);
    const T* lut1 = luts + std::size_t(ya.t1) * g.tiles_x * kBins;
    const T* lut2 = luts + std::size_t(ya.t2) * g.tiles_x * kBins;
    const T* src = in + yi * std::size_t(g.width);
    T* dst = out + yi * std::size_t(g.width);
    for (int x = 0; x < g.width; ++x) {
      const cf::Axis& xa = xs[std::size_t(x)];
      const int v = src[x];
      const std::size_t i1 = std::size_t(xa.t1) * kBins + v, i2 = std::size_t(xa.t2) * kBins + v;
      dst[x] = static_cast<T>(
          cf::round_sat(cf::blend(lut1[i1], lut1[i2], lut2[i1], lut2[i2], xa, ya), kMax));
    }
  });
}

template <class T>
void plane(const T* in, int width, int height, const ClaheOptions& opt, T* out, int threads) {
  check_plane(in, width, height, out, opt, sizeof(T) == 1 ? 256 : 65536);
  std::vector<T> luts;
  const cf::Geometry g = luts_of<T>(in, width, height, opt, luts, nullptr, threads);
  interpolate(in, g, luts.data(), out, threads);
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
  luts_of(in, width, height, opt, unused, luts, threads);
}
void clahe_luts16(const std::uint16_t* in, int width, int height, const ClaheOptions& opt,
                  std::uint16_t* luts, int threads) {
  check_plane(in, width, height, luts, opt, 65536);
  std::vector<std::uint16_t> unused;
  luts_of(in, width, height, opt, unused, luts, threads);
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

Image clahe_image(const Image& img, const ClaheOptions& opt_in, const PlaneFn8& plane_fn) {
  validate(opt_in);
  if (img.width < 1 || img.height < 1 || img.channels < 1 || img.channels > 4 ||
      img.pixels.size() != img.byte_count()) {
    throw Error("CLAHE: empty or inconsistent image");
  }
  const int c = img.channels;
  const Mode mode = effective_mode(c, opt_in.mode);
  const std::size_t n = img.pixel_count();
  Image out;
  out.width = img.width;
  out.height = img.height;
  out.channels = output_channels(mode, c);
  out.pixels.resize(out.byte_count());
  const int planes = plane_count(mode, c);
  std::vector<std::uint8_t> src(n * std::size_t(planes)), dst(src.size());
  // Planes: gray channel, Y, or R, G, B.
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* p = img.pixels.data() + i * std::size_t(c);
    if (c < 3) {
      src[i] = p[0];
    } else if (planes == 3) {
      for (int k = 0; k < 3; ++k) src[std::size_t(k) * n + i] = p[k];
    } else {
      src[i] = color::luma(p[0], p[1], p[2]);
    }
  }
  for (int k = 0; k < planes; ++k) {
    plane_fn(src.data() + std::size_t(k) * n, dst.data() + std::size_t(k) * n);
  }
  const int oc = out.channels;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* p = img.pixels.data() + i * std::size_t(c);
    std::uint8_t* q = out.pixels.data() + i * std::size_t(oc);
    if (c < 3 || mode == Mode::gray) {
      q[0] = dst[i];
      if (oc == 2) q[1] = p[1];
    } else if (planes == 3) {
      for (int k = 0; k < 3; ++k) q[k] = dst[std::size_t(k) * n + i];
      if (c == 4) q[3] = p[3];
    } else {
      std::uint8_t cr, cb;
      color::chroma(p[0], p[2], src[i], cr, cb);
      color::to_rgb(dst[i], cr, cb, q[0], q[1], q[2]);
      if (c == 4) q[3] = p[3];
    }
  }
  return out;
}

Image16 clahe_image(const Image16& img, const ClaheOptions& opt_in, const PlaneFn16& plane_fn) {
  validate(opt_in);
  if (img.width < 1 || img.height < 1 || img.channels < 1 || img.channels > 4 ||
      img.pixels.size() != img.sample_count()) {
    throw Error("CLAHE: empty or inconsistent image");
  }
  const int c = img.channels;
  Mode mode = effective_mode(c, opt_in.mode);
  if (c >= 3 && mode != Mode::rgb) {
    throw UsageError(std::string("CLAHE of a 16-bit colour image: mode '") + to_string(mode) +
                     "' needs 16-bit YCbCr, which histeq does not have; use mode rgb (or 8 bits)");
  }
  const std::size_t n = img.pixel_count();
  Image16 out;
  out.width = img.width;
  out.height = img.height;
  // Gray and gray+alpha keep their channels (as equalize16 does): the gray channel is the plane,
  // alpha is copied. A 16-bit image has no YCbCr, so no mode narrows it to one channel.
  out.channels = c < 3 ? c : output_channels(mode, c);
  out.pixels.resize(out.sample_count());
  const int planes = c >= 3 ? 3 : 1;
  std::vector<std::uint16_t> src(n), dst(n);
  for (int k = 0; k < planes; ++k) {
    for (std::size_t i = 0; i < n; ++i) src[i] = img.pixels[i * std::size_t(c) + std::size_t(k)];
    plane_fn(src.data(), dst.data());
    for (std::size_t i = 0; i < n; ++i)
      out.pixels[i * std::size_t(out.channels) + std::size_t(k)] = dst[i];
  }
  const int alpha = (c == 2 || c == 4) ? c - 1 : -1;
  if (alpha >= 0 && out.channels == c) {
    for (std::size_t i = 0; i < n; ++i)
      out.pixels[i * std::size_t(c) + std::size_t(alpha)] =
          img.pixels[i * std::size_t(c) + std::size_t(alpha)];
  }
  return out;
}

}  // namespace detail
}  // namespace histeq
