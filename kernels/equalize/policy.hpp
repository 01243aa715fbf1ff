// policy.hpp — the tuning numbers of the equalization stages' kernels (CUB's tuning headers'
// shape: the kernels read their launch shape from here).
#pragma once

namespace histeq::kernels {

/// fused (fused.cuh): the single cooperative launch that equalizes 8-bit data. Same shape as
/// columns. Measured (bench/results/h200/equalize.txt, commit 2d459fd): 18.4 µs at 16M and
/// 791 µs at 1 GiB (hot L2), against 20.9 and 796 µs for three launches with columns.
struct FusedPolicy {
  static constexpr int kBlockSize = 1024;
  static constexpr int kVectorsInFlight = 2;
  static constexpr int kBlocksPerSm = 2;
  static constexpr bool kStreamingLoads = false;
};
inline constexpr FusedPolicy kFusedPolicy{};

}  // namespace histeq::kernels

namespace histeq::kernels {

/// match_lut (match_lut.cu): histogram matching's 256-level LUT, one block per plane, one thread
/// per level (a launch of a few microseconds, like cdf_lut; nothing to tune but its shape).
struct MatchLutPolicy {
  static constexpr int kLevels = 256;
};

}  // namespace histeq::kernels
