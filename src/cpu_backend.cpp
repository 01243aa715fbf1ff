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
// time; the environment variable HISTEQ_CPU_NO_SIMD forces the portable 64-bit-word loop).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

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

/// Worker count for `work` items: at most `threads` (0 → usable_cpus()), and no thread
/// gets fewer than `min_per_thread` items.
int worker_count(std::size_t work, int threads, std::size_t min_per_thread) {
  std::size_t t = threads > 0 ? std::size_t(threads) : std::size_t(usable_cpus());
  if (t == 0) t = 1;
  const std::size_t by_work = std::max<std::size_t>(1, work / std::max<std::size_t>(1, min_per_thread));
  return static_cast<int>(std::min(t, by_work));
}

/// Runs fn(worker, begin, end) on `workers` contiguous slices of [0, n); worker 0 is the caller.
/// A slice whose thread cannot be started runs on the caller; an exception in any slice is
/// rethrown here after every thread has joined.
template <class Fn>
void parallel_slices(std::size_t n, int workers, Fn&& fn) {
  if (workers <= 1) {
    fn(0, std::size_t(0), n);
    return;
  }
  const std::size_t per = n / std::size_t(workers), extra = n % std::size_t(workers);
  auto begin_of = [&](std::size_t w) { return w * per + std::min(w, extra); };
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
  auto run = [&](int w) {
    try {
      fn(w, begin_of(std::size_t(w)), begin_of(std::size_t(w) + 1));
    } catch (...) {
      errors[std::size_t(w)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  std::vector<int> inline_slices{0};
  pool.reserve(std::size_t(workers) - 1);
  for (int w = 1; w < workers; ++w) {
    try {
      pool.emplace_back(run, w);
    } catch (const std::system_error&) {  // no more threads: do it here
      inline_slices.push_back(w);
    }
  }
  for (int w : inline_slices) run(w);
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

constexpr int kSub = 4;                            // sub-histograms per thread
constexpr std::size_t kFlush = std::size_t(1) << 30;  // samples per block: < 2^32 per counter

/// Counts bytes [begin, end) by raw value into acc[256].
void count_u8(const std::uint8_t* p, std::size_t begin, std::size_t end, std::uint64_t* acc) {
  std::vector<std::uint32_t> sub(kSub * 256);
  std::uint32_t* h0 = sub.data();
  std::uint32_t* h1 = h0 + 256;
  std::uint32_t* h2 = h1 + 256;
  std::uint32_t* h3 = h2 + 256;
  while (begin < end) {
    const std::size_t stop = std::min(end, begin + kFlush);
    std::size_t i = begin;
    for (; i + 16 <= stop; i += 16) {
      std::uint64_t a, b;
      std::memcpy(&a, p + i, 8);
      std::memcpy(&b, p + i + 8, 8);
      ++h0[a & 0xff];          ++h1[(a >> 8) & 0xff];
      ++h2[(a >> 16) & 0xff];  ++h3[(a >> 24) & 0xff];
      ++h0[(a >> 32) & 0xff];  ++h1[(a >> 40) & 0xff];
      ++h2[(a >> 48) & 0xff];  ++h3[a >> 56];
      ++h0[b & 0xff];          ++h1[(b >> 8) & 0xff];
      ++h2[(b >> 16) & 0xff];  ++h3[(b >> 24) & 0xff];
      ++h0[(b >> 32) & 0xff];  ++h1[(b >> 40) & 0xff];
      ++h2[(b >> 48) & 0xff];  ++h3[b >> 56];
    }
    for (; i < stop; ++i) ++h0[p[i]];
    for (int v = 0; v < 256; ++v) {
      acc[v] += std::uint64_t(h0[v]) + h1[v] + h2[v] + h3[v];
      h0[v] = h1[v] = h2[v] = h3[v] = 0;
    }
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
    const __mmask64 top = _mm512_movepi8_mask(x);            // index bit 7
    _mm512_storeu_si512(out + i, _mm512_mask_blend_epi8(top, lo, hi));
  }
  for (; i < e; ++i) out[i] = lut[in[i]];
}
bool cpu_has_vbmi() {
  static const bool has = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw");
  return has;
}
#endif

/// out[i] = lut[in[i]] for i in [b, e): 8 samples per 64-bit load and store. The LUT is copied
/// to the stack so the compiler knows the stores to `out` cannot change it.
void map_bytes(const std::uint8_t* in, std::uint8_t* out, std::size_t b, std::size_t e,
               const std::uint8_t* lut_in) {
#if HISTEQ_HAVE_VBMI_PATH
  if (cpu_has_vbmi() && !std::getenv("HISTEQ_CPU_NO_SIMD"))
    return map_bytes_vbmi(in, out, b, e, lut_in);
#endif
  std::uint8_t lut[256];
  std::memcpy(lut, lut_in, 256);
  std::size_t i = b;
  for (; i + 8 <= e; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, in + i, 8);
    const std::uint64_t r = std::uint64_t(lut[w & 0xff]) |
                            std::uint64_t(lut[(w >> 8) & 0xff]) << 8 |
                            std::uint64_t(lut[(w >> 16) & 0xff]) << 16 |
                            std::uint64_t(lut[(w >> 24) & 0xff]) << 24 |
                            std::uint64_t(lut[(w >> 32) & 0xff]) << 32 |
                            std::uint64_t(lut[(w >> 40) & 0xff]) << 40 |
                            std::uint64_t(lut[(w >> 48) & 0xff]) << 48 |
                            std::uint64_t(lut[w >> 56]) << 56;
    std::memcpy(out + i, &r, 8);
  }
  for (; i < e; ++i) out[i] = lut[in[i]];
}

constexpr std::size_t kMinHistPerThread = std::size_t(1) << 16;
constexpr std::size_t kMinPixelsPerThread = std::size_t(1) << 15;

}  // namespace

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

void extract_planes(const std::uint8_t* in, std::size_t pixels, int channels, Mode mode,
                    std::uint8_t* planes, int threads) {
  if (channels < 1 || channels > 4)
    throw Error("extract_planes: " + std::to_string(channels) + " channels (valid: 1..4)");
  const std::size_t c = std::size_t(channels);
  const int workers = worker_count(pixels, threads, kMinPixelsPerThread);
  parallel_slices(pixels, workers, [&](int, std::size_t b, std::size_t e) {
    if (channels == 1) {
      std::memcpy(planes + b, in + b, e - b);
    } else if (channels == 2) {
      for (std::size_t i = b; i < e; ++i) planes[i] = in[2 * i];
    } else if (mode == Mode::rgb) {
      std::uint8_t* r = planes;
      std::uint8_t* g = planes + pixels;
      std::uint8_t* bl = planes + 2 * pixels;
      for (std::size_t i = b; i < e; ++i) {
        const std::uint8_t* px = in + i * c;
        r[i] = px[0];
        g[i] = px[1];
        bl[i] = px[2];
      }
    } else {
      for (std::size_t i = b; i < e; ++i) {
        const std::uint8_t* px = in + i * c;
        planes[i] = color::luma(px[0], px[1], px[2]);
      }
    }
  });
}

void apply(const std::uint8_t* in, std::size_t pixels, int channels, Mode mode, const Lut* luts,
           std::uint8_t* out, int threads) {
  if (channels < 1 || channels > 4)
    throw Error("apply: " + std::to_string(channels) + " channels (valid: 1..4)");
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
    switch (mode) {
      case Mode::gray:
        for (std::size_t i = b; i < e; ++i) {
          const std::uint8_t* px = in + i * c;
          out[i] = l0[color::luma(px[0], px[1], px[2])];
        }
        break;
      case Mode::rgb: {
        const std::uint8_t* l1 = luts[1].data();
        const std::uint8_t* l2 = luts[2].data();
        for (std::size_t i = b; i < e; ++i) {
          const std::uint8_t* px = in + i * c;
          std::uint8_t* o = out + i * c;
          o[0] = l0[px[0]];
          o[1] = l1[px[1]];
          o[2] = l2[px[2]];
          if (c == 4) o[3] = px[3];
        }
        break;
      }
      case Mode::luma:
        for (std::size_t i = b; i < e; ++i) {
          const std::uint8_t* px = in + i * c;
          std::uint8_t* o = out + i * c;
          std::uint8_t r = px[0], g = px[1], bl = px[2];
          color::equalize_luma(r, g, bl, l0);
          o[0] = r;
          o[1] = g;
          o[2] = bl;
          if (c == 4) o[3] = px[3];
        }
        break;
    }
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
