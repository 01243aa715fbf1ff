// synthetic.cpp — synthetic sample arrays for the tests and the benchmark (synthetic.hpp).
//
// Every sample is a pure function of (spec, index): a counter-based generator (SplitMix64's
// finalizer applied to seed ⊕ index, Steele, Lea & Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014) gives the random bits, so the data do not depend on how the array is
// split over threads, and the same seed always gives the same bytes.
//
// Bin → value: i32 samples are the bin index itself. A u8 sample for target bin b (bins ≤ 256)
// is a byte v in that bin under the rule bin = (v·bins)/256, i.e. v ∈ [lo(b), lo(b+1)) with
// lo(b) = ceil(b·256/bins); every bin owns at least one byte value when bins ≤ 256. For u8 with
// bins > 256 only 256 bins are reachable, so the value is floor(b·256/bins) (spread over 0..255).
#include "histeq/synthetic.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <thread>

#include "histeq/error.hpp"

namespace histeq {

namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

/// SplitMix64 finalizer: a bijective, well-mixed 64-bit hash.
inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Random 64 bits for stream `stream` at index i, under `seed`.
inline std::uint64_t rand_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  return mix64(mix64(seed * kGolden + stream) + (i + 1) * kGolden);
}

/// Uniform integer in [0, m) from 32 random bits (Lemire's multiply-shift; bias < m/2^32).
inline std::uint32_t below(std::uint64_t r, std::uint32_t m) {
  return std::uint32_t(((r >> 32) * std::uint64_t(m)) >> 32);
}

/// Uniform double in [0, 1) from the top 53 bits.
inline double unit(std::uint64_t r) { return double(r >> 11) * 0x1.0p-53; }

/// Smallest byte value in bin b (bins ≤ 256); lo(bins) = 256.
inline int u8_lo(int b, int bins) { return (b * 256 + bins - 1) / bins; }

/// Byte value that lands in bin b; `r` picks one of the bin's values (any r for a fixed one).
inline std::uint8_t u8_value(int b, int bins, std::uint64_t r) {
  if (bins > 256) return std::uint8_t((std::int64_t(b) * 256) / bins);
  const int lo = u8_lo(b, bins);
  const int width = u8_lo(b + 1, bins) - lo;  // ≥ 1 for bins ≤ 256
  return std::uint8_t(lo + int(below(r, std::uint32_t(width))));
}

/// The smooth 2-D field of `natural`: separable low-frequency waves (precomputed per column and
/// per row) and a product term, scaled into [0, 1) before noise.
struct NaturalField {
  std::size_t width = 1;
  std::vector<float> col_a, col_b, row_a, row_b;

  NaturalField(std::size_t n, std::uint64_t seed) {
    width = std::max<std::size_t>(1, std::size_t(std::llround(std::sqrt(double(n)))));
    const std::size_t height = std::max<std::size_t>(1, (n + width - 1) / width);
    const double two_pi = 6.283185307179586;
    // 1–3 periods across the image, random phases: a few soft gradients and blobs.
    auto param = [&](std::uint64_t k) { return unit(rand_at(seed, 0xF1E1D, k)); };
    const double fx1 = 1.0 + 2.0 * param(0), fy1 = 1.0 + 2.0 * param(1);
    const double fx2 = 1.0 + 2.0 * param(2), fy2 = 1.0 + 2.0 * param(3);
    const double px1 = two_pi * param(4), py1 = two_pi * param(5);
    const double px2 = two_pi * param(6), py2 = two_pi * param(7);
    col_a.resize(width);
    col_b.resize(width);
    row_a.resize(height);
    row_b.resize(height);
    for (std::size_t x = 0; x < width; ++x) {
      const double t = double(x) / double(width);
      col_a[x] = float(std::sin(two_pi * fx1 * t + px1));
      col_b[x] = float(std::sin(two_pi * fx2 * t + px2));
    }
    for (std::size_t y = 0; y < height; ++y) {
      const double t = double(y) / double(height);
      row_a[y] = float(std::sin(two_pi * fy1 * t + py1));
      row_b[y] = float(std::sin(two_pi * fy2 * t + py2));
    }
  }

  /// Field value in [0, 1) at sample i, with noise of ±2% of the range from `r`.
  double at(std::size_t i, std::uint64_t r) const {
    const std::size_t x = i % width, y = i / width;
    // Terms in [-1, 1]; weights sum to 0.45, so the smooth part lies in [0.05, 0.95].
    double v = 0.5 + 0.18 * col_a[x] + 0.12 * row_a[y] + 0.15 * col_b[x] * row_b[y];
    v += 0.04 * (unit(r) - 0.5);
    return std::clamp(v, 0.0, std::nextafter(1.0, 0.0));
  }
};

/// Target bin of sample i.
struct BinPicker {
  const SyntheticSpec& s;
  const NaturalField* field;
  std::uint32_t hot_threshold;  // hot: r's low 32 bits below this → bin 0
  bool all_hot;                 // hot_fraction == 1

  int operator()(std::size_t i, std::uint64_t r) const {
    const auto bins = std::uint32_t(s.bins);
    switch (s.dist) {
      case Distribution::uniform: return int(below(r, bins));
      case Distribution::hot:
        if (all_hot || std::uint32_t(r) < hot_threshold) return 0;
        return int(below(r, bins));
      case Distribution::blocky: return int(below(rand_at(s.seed, 0xB10C, i / s.run_length), bins));
      case Distribution::natural: return std::min(int(field->at(i, r) * double(bins)), s.bins - 1);
      case Distribution::constant: return s.bins / 2;
      case Distribution::sequential: return int(i % bins);
    }
    return 0;
  }
};

void fill_range(const SyntheticSpec& s, const BinPicker& pick, std::uint8_t* out, std::size_t begin,
                std::size_t end) {
  if (s.type == SampleType::i32) {
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint64_t r = rand_at(s.seed, 0, i);
      const std::int32_t v = pick(i, r);
      std::memcpy(out + i * 4, &v, 4);
    }
    return;
  }
  // Runs of blocky samples keep one byte value (an equal-valued run, as a flat image area);
  // sequential and constant use the bin's lowest value.
  const bool fixed_value = s.dist == Distribution::constant || s.dist == Distribution::sequential;
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint64_t r = rand_at(s.seed, 0, i);
    const int b = pick(i, r);
    std::uint64_t vr = rand_at(s.seed, 0x7A1E, i);
    if (fixed_value) vr = 0;
    if (s.dist == Distribution::blocky) vr = rand_at(s.seed, 0x7A1E, i / s.run_length);
    out[i] = u8_value(b, s.bins, vr);
  }
}

}  // namespace

const char* to_string(Distribution d) {
  switch (d) {
    case Distribution::uniform: return "uniform";
    case Distribution::hot: return "hot";
    case Distribution::blocky: return "blocky";
    case Distribution::natural: return "natural";
    case Distribution::constant: return "constant";
    case Distribution::sequential: return "sequential";
  }
  return "?";
}

const std::vector<Distribution>& all_distributions() {
  static const std::vector<Distribution> all = {Distribution::uniform,  Distribution::hot,
                                                Distribution::blocky,   Distribution::natural,
                                                Distribution::constant, Distribution::sequential};
  return all;
}

Distribution parse_distribution(std::string_view s) {
  for (Distribution d : all_distributions()) {
    if (s == to_string(d)) return d;
  }
  throw UsageError("unknown distribution '" + std::string(s) +
                   "'; valid: uniform, hot, blocky, natural, constant, sequential");
}

std::vector<std::uint8_t> make_samples(const SyntheticSpec& spec) {
  if (spec.bins < 1 || spec.bins > kMaxBins) {
    throw UsageError("bins must be in 1.." + std::to_string(kMaxBins) + ", got " +
                     std::to_string(spec.bins));
  }
  if (spec.dist == Distribution::blocky && spec.run_length == 0) {
    throw UsageError("run length of the blocky distribution must be at least 1, got 0");
  }
  if (!(spec.hot_fraction >= 0.0 && spec.hot_fraction <= 1.0)) {
    throw UsageError("hot fraction must be in [0, 1], got " + std::to_string(spec.hot_fraction));
  }
  std::vector<std::uint8_t> out(spec.n * sample_bytes(spec.type));
  if (spec.n == 0) return out;

  std::unique_ptr<NaturalField> field;
  if (spec.dist == Distribution::natural) field = std::make_unique<NaturalField>(spec.n, spec.seed);
  const double thr = std::min(spec.hot_fraction * 4294967296.0, 4294967295.0);
  const BinPicker pick{spec, field.get(), std::uint32_t(thr), spec.hot_fraction >= 1.0};

  // Threads only pay off on large arrays; the data do not depend on the split.
  constexpr std::size_t kPerThreadMin = std::size_t(1) << 20;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  threads = unsigned(std::min<std::size_t>(threads, (spec.n + kPerThreadMin - 1) / kPerThreadMin));
  if (threads <= 1) {
    fill_range(spec, pick, out.data(), 0, spec.n);
    return out;
  }
  std::vector<std::thread> pool;
  pool.reserve(threads);
  const std::size_t chunk = (spec.n + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t) {
    const std::size_t b = std::min(spec.n, t * chunk), e = std::min(spec.n, b + chunk);
    try {
      pool.emplace_back([&, b, e] { fill_range(spec, pick, out.data(), b, e); });
    } catch (const std::system_error&) {  // no more threads: this range here
      fill_range(spec, pick, out.data(), b, e);
    }
  }
  for (auto& th : pool) th.join();
  return out;
}

}  // namespace histeq
