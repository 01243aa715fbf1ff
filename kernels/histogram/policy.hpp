// policy.hpp — every tuning number of the classic histogram kernels, one struct per kernel (the
// shape of CUB's tuning_histogram.cuh: the kernels read their launch shape from here and contain
// no literal block sizes, unroll factors or grid multipliers).
//
// Units: threads per block, 16-byte vectors per thread per loop trip, blocks per SM.
#pragma once
#include <cstddef>

namespace histeq::kernels {

/// Limits shared by every kernel of this family.
struct CommonPolicy {
  /// Largest block a caller may request (HistogramLaunch::block_size); every __global__ is
  /// compiled with __launch_bounds__(kMaxBlockSize) so that any size in 1..kMaxBlockSize launches.
  static constexpr int kMaxBlockSize = 1024;
  /// Most samples one block counts into its uint32 shared-memory histogram; grids are made at
  /// least ceil(n / kMaxSamplesPerBlock) blocks so that no shared counter can overflow.
  static constexpr std::size_t kMaxSamplesPerBlock = std::size_t(1) << 31;
  /// Bytes of one wide load (uint4 / int4).
  static constexpr int kVectorBytes = 16;
};

/// racy: grid-stride loop, one unsynchronized read-modify-write on the global histogram per sample.
struct RacyPolicy {
  static constexpr int kBlockSize = 256;
  static constexpr int kMaxBlocksPerSm = 8;  ///< grid = min(ceil(n / block), SMs × this)
};

/// atomic: grid-stride loop, one global atomicAdd per sample (PMPP 9.3).
struct AtomicPolicy {
  static constexpr int kBlockSize = 256;
  static constexpr int kMaxBlocksPerSm = 8;  ///< grid = min(ceil(n / block), SMs × this)
};

/// privatized: one sample per thread, one block per kBlockSize samples (PMPP 9.4); every block
/// pays for zeroing and merging its whole shared histogram, which is the lesson of this kernel.
struct PrivatizedPolicy {
  static constexpr int kBlockSize = 256;
};

/// coarsened: grid sized to the resident blocks of all SMs (occupancy query), each thread reads
/// 16-byte vectors in an interleaved (grid-stride, coalesced) order, kVectorsInFlight loads
/// issued before any of them is counted (PMPP 9.5–9.6).
struct CoarsenedPolicy {
  static constexpr int kBlockSize = 512;
  static constexpr int kVectorsInFlight = 4;
};

/// aggregated: coarsened traversal plus a per-thread run (bin, count) in registers; one shared
/// atomicAdd per run of equal bins (PMPP 9.7). Fewer loads in flight: the run logic is serial.
struct AggregatedPolicy {
  static constexpr int kBlockSize = 512;
  static constexpr int kVectorsInFlight = 2;
};

inline constexpr CommonPolicy kCommonPolicy{};
inline constexpr RacyPolicy kRacyPolicy{};
inline constexpr AtomicPolicy kAtomicPolicy{};
inline constexpr PrivatizedPolicy kPrivatizedPolicy{};
inline constexpr CoarsenedPolicy kCoarsenedPolicy{};
inline constexpr AggregatedPolicy kAggregatedPolicy{};

}  // namespace histeq::kernels

namespace histeq::kernels {

/// columns (columns.cuh): lane-owned shared-memory columns, 16-byte loads. Measured on the H200
/// (docs/probes/2026-11-29-small-probe.txt): 1024 threads × 2 vectors in flight × 2 blocks per
/// SM was best or within 2% of best from 4M to 1G; caching loads (not evict-first) let small
/// inputs stay in L2 for the apply pass and cost nothing at 1G.
struct ColumnsPolicy {
  static constexpr int kBlockSize = 1024;
  static constexpr int kVectorsInFlight = 2;
  static constexpr int kBlocksPerSm = 2;
  static constexpr bool kStreamingLoads = false;
  /// Inputs of at most kSmallInputBytes (and no block size asked for) run with kSmallBlockSize
  /// threads and kSmallVectorsInFlight: 4× more blocks than the default shape gives them, so
  /// more SMs share the count. Measured on the H200 (docs/probes/2026-11-30-tail-probe*.txt,
  /// gpu timing): 64K u8 5.66–5.79 µs against 6.40–6.59 for 1024 × 2, 256K 5.82–5.98 against
  /// 6.46–6.62; at 1M the small shape was 0.3–0.4 µs slower (so the threshold is below 1M).
  static constexpr std::size_t kSmallInputBytes = std::size_t(512) << 10;
  static constexpr int kSmallBlockSize = 512;
  static constexpr int kSmallVectorsInFlight = 1;
};
inline constexpr ColumnsPolicy kColumnsPolicy{};

/// auto (registry.cu, choose_auto): below these many samples, u8 with fewer than 256 bins and
/// i32 with ≤ 64 bins go to the coarsened kernel (the lane columns' per-block fold and 32 KB to
/// clear cost more than they save there). Measured on the H200 (commit 64c218a,
/// bench/results/h200/fold.txt and default.txt): u8 16/64 bins — coarsened 3–10 % faster at
/// 1M–8M, columns 7–11 % faster at 16M (threshold between the two); i32 16/64 bins — coarsened
/// 4–7 % faster at 2M, columns 3–9 % faster from 4M.
inline constexpr std::size_t kAutoFoldMinSamplesU8 = std::size_t(12) << 20;
inline constexpr std::size_t kAutoFoldMinSamplesI32 = std::size_t(4) << 20;

/// auto: at most these many samples with at most these many bins go to the privatized kernel,
/// and inputs of at most ColumnsPolicy::kSmallInputBytes (bins ≤ 256) to columns before the
/// fold rule above applies. Fitted on the H200 run of commit f1b4578 (fold step, 16/64 bins):
/// at 64K samples privatized 5.2–5.6 µs where columns took 5.6–6.0 and coarsened 6.1–6.5
/// (exception: 64 bins on uniform data, columns 0.4 µs faster); at 256K privatized already
/// 6.5–10 µs and columns (small shape) the fastest or within 5 % for u8. Checked on a new run
/// (210b185, bench/results/h200/fold.txt): 77 of 84 cells within 5 % (docs/kernels.md, "auto").
inline constexpr int kAutoPrivatizedMaxBins = 64;
inline constexpr std::size_t kAutoPrivatizedMaxSamples = std::size_t(64) << 10;

}  // namespace histeq::kernels

namespace histeq::kernels {

/// region (region.cu): the 256-bin histogram of a rectangle and/or a mask of an 8-bit plane.
/// Rectangles of whole rows (and a mask alone) are one contiguous run: a grid-stride walk with
/// 16-byte loads of the plane and of the mask together (one pass, no masked copy), grid filling
/// the SMs. Other rectangles: a warp per row of the rectangle. Counting into columns.cuh's
/// lane-owned columns (32 KiB per block). kBlocksPerSm is the kernels' __launch_bounds__ minimum,
/// one instantiation per mask reading and layout (region_count.cuh): 4 blocks of 512 threads cap
/// them at 32 registers, which the whole-rows kernels meet without spilling on sm_90; the
/// warp-per-row kernels with 16-byte mask loads spill 4 bytes there, so those run at
/// kRowsBlocksPerSm (42 registers, 40 used). RegionTuning::blocks_per_sm = 3 runs the whole-rows
/// kernels at 3 as well (the bound of the single kernel that served every case before). The grid
/// is sized from the occupancy the device reports.
struct RegionPolicy {
  static constexpr int kBlockSize = 512;
  static constexpr int kBlocksPerSm = 4;
  static constexpr int kRowsBlocksPerSm = 3;
  static constexpr int kVectorsInFlight = 2;
};
inline constexpr RegionPolicy kRegionPolicy{};

}  // namespace histeq::kernels
