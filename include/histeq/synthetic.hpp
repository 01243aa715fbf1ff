// histeq/synthetic.hpp — synthetic sample arrays for the tests and the benchmark.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "histeq/types.hpp"

namespace histeq {

/// How samples are distributed over the bins (`bins` bins; for u8, values are chosen so that
/// they land in the intended bin under the u8 binning rule of types.hpp):
///  uniform    — independent, uniform over all bins.
///  hot        — 90% of samples in bin 0, the rest uniform (atomic contention on one bin).
///  blocky     — runs of `run_length` equal samples, each run's bin uniform (flat image areas).
///  natural    — a smooth 2-D field (width ≈ sqrt(n)) plus noise, as in photographs.
///  constant   — every sample in one bin (bin bins/2).
///  sequential — sample i in bin i % bins: exactly flat (the int-array lesson's 64-bin array).
enum class Distribution : std::uint8_t { uniform, hot, blocky, natural, constant, sequential };

const char* to_string(Distribution d);
/// Throws UsageError naming the valid choices.
Distribution parse_distribution(std::string_view s);
/// Every distribution, in the order above.
const std::vector<Distribution>& all_distributions();

struct SyntheticSpec {
  Distribution dist = Distribution::uniform;
  SampleType type = SampleType::u8;
  int bins = 256;               ///< 1..kMaxBins (u8: values still span 0..255)
  std::size_t n = 0;            ///< number of samples
  std::uint64_t seed = 1;       ///< same seed, same data
  std::size_t run_length = 64;  ///< blocky: samples per run
  double hot_fraction = 0.9;    ///< hot: share of samples in bin 0
};

/// n samples as raw bytes (n * sample_bytes(type)); i32 samples are native-endian int32_t.
/// Deterministic for a given spec; threaded for large n.
std::vector<std::uint8_t> make_samples(const SyntheticSpec& spec);

}  // namespace histeq
