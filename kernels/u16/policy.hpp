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

namespace histeq::kernels {

/// match_lut_u16 (match_lut16.cu): histogram matching's 65536-level LUT. The scan kernel is one
/// block walking tiles of kScanThreads · kBinsPerThread bins (each thread a run of
/// kBinsPerThread consecutive bins: 16-byte loads, neighbours adjacent), its scans cub's
/// warp-scans variant (the default raking one keeps a raking segment of 64-bit counts per thread
/// and, under the 64-register cap of 1024 threads, spilled); the entry kernel one thread per
/// level. sm_90: 46 registers, no spill (4 bins per thread: 64 and a spill).
struct MatchLut16Policy {
  static constexpr int kScanThreads = 1024;
  static constexpr int kBinsPerThread = 2;
  static constexpr int kEntryThreads = 256;
};

/// hist_u16_region (hist_u16_region.cu): the 65536-bin histogram of a rectangle and/or a mask.
/// A warp walks a row of the rectangle (rows spread over the grid's warps), one global 64-bit
/// atomic per distinct counted value of each warp step (65536 counters fit no block's shared
/// memory as uint32; lanes of equal values aggregated with __match_any_sync).
struct HistU16RegionPolicy {
  static constexpr int kBlockSize = 256;
  static constexpr int kBlocksPerSm = 8;
};

}  // namespace histeq::kernels
