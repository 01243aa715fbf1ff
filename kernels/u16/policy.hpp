// policy.hpp — the tuning numbers of the 65536-bin histogram (CUB's tuning headers' shape).
#pragma once

namespace histeq::kernels {

/// hist_u16 (hist_u16_packed.cu): 65536 16-bit counters packed two to a word in one block's
/// 128 KiB of shared memory, per-block partials summed by a second kernel (64M samples: 63-70 µs
/// on the H200, against 404-425 for the first kernel, a two-block cluster of 32-bit counters
/// since removed: docs/kernels.md).
struct HistU16Policy {
  /// A block gets at least this many 16-byte vectors per thread before the grid grows (small
  /// inputs use fewer SMs: zeroing and merging 128 KiB per block is the fixed cost).
  static constexpr int kMinVectorsPerThread = 4;
  static constexpr int kPackedBlockSize = 1024;
  /// 16-byte loads in flight per thread (8 measured 1-2 µs slower at 64M).
  static constexpr int kPackedVectorsInFlight = 4;
  /// Clusters of two add their counters through DSMEM before writing (half the partials: 64M
  /// 75.9 → 74.6 µs); the single-block kernel where no pair fits.
  static constexpr bool kPackedPairs = true;
};
inline constexpr HistU16Policy kHistU16Policy{};

}  // namespace histeq::kernels
