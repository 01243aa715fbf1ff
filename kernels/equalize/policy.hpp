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

/// fused_mask (fused_mask.cuh): the masked one-launch equalizer, fused's shape: 1024 threads, 2
/// blocks per SM (32 registers), two vectors kept per thread. The count holds the kept tile's mask
/// vectors beside it: ptxas (sm_90) spills 8 bytes, stored before the count loop and reloaded
/// around it, none in it. RegionTuning::fused_shape also builds 1024 threads with one vector kept
/// (no spill, half the tile kept) and 768 threads with two (40 registers, no spill, 1536 threads
/// per SM).
struct FusedMaskPolicy {
  static constexpr int kBlockSize = 1024;
  static constexpr int kVectorsInFlight = 2;
  static constexpr int kBlocksPerSm = 2;
};
inline constexpr FusedMaskPolicy kFusedMaskPolicy{};

}  // namespace histeq::kernels

namespace histeq::kernels {

/// match_lut (match_lut.cu): histogram matching's 256-level LUT, one block per plane, one thread
/// per level (a launch of a few microseconds, like cdf_lut; nothing to tune but its shape).
struct MatchLutPolicy {
  static constexpr int kLevels = 256;
};

}  // namespace histeq::kernels
