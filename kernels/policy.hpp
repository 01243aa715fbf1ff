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

/// CLAHE (clahe_hist.cu, clahe_lut.cuh, clahe_apply.cu, clahe_apply_cell.cu,
/// clahe_apply_strip.cu). Measured on the H200 with `histeq bench --clahe` and its `--tune`
/// overrides (histeq/tuning.hpp's ClaheTuning; docs/kernels.md, "CLAHE": figures and commits).
struct ClahePolicy {
  /// Tile-histogram kernel: threads per block, and the fewest input bytes one block counts (a
  /// band of rows of one tile row: below this the zeroing and merging of its tiles_x × 256
  /// shared counters costs more than the counting). 16 KiB: at 1M 15.7 µs against 17.5 with
  /// 32 KiB (more blocks), the same at 16M and 64M. The grid is one wave of the blocks that fit
  /// (clahe_hist.cu, run_luts).
  static constexpr int kHistBlockSize = 512;
  static constexpr std::size_t kHistMinBytesPerBlock = std::size_t(16) << 10;
  /// 8-bit planes of at most kClusterMaxPixels (padded): the tile histograms and LUTs by a
  /// cluster of kClusterBands blocks per tile row summing their shared counters through DSMEM
  /// (tile_hist_cluster_kernel), instead of global counters, a fence and a ticket.
  static constexpr int kClusterBands = 8;
  static constexpr std::size_t kClusterMaxPixels = std::size_t(2) << 20;
  /// Most shared memory the privatized (8-bit) histogram may take: tiles_x · 256 · 4 bytes.
  /// Wider grids count with global atomics and build the LUTs in a second launch.
  static constexpr std::size_t kHistMaxSharedBytes = std::size_t(96) << 10;
  /// 16-bit tile histograms in packed 16-bit shared counters (clahe_hist.cu,
  /// tile_hist16_packed_kernel): one block of kPacked16Threads per (tile, part of its rows),
  /// 128 KiB of shared memory, for tiles of at least kPacked16MinTileArea samples (below it the
  /// fixed 128 KiB to clear and write per block outweighs the counting: 1M, 8x8 tiles of 16 Ki
  /// samples, measured 185 µs against 112 with global atomics) and at most
  /// kPacked16MaxPartialBytes of partials; else global atomics into the tile counters.
  static constexpr int kPacked16Threads = 1024;
  static constexpr std::size_t kPacked16MinTileArea = 32768;
  static constexpr std::size_t kPacked16MaxPartialBytes = std::size_t(256) << 20;
  /// 16-bit tile histograms and LUTs in one launch by a cluster of blocks per tile
  /// (tile_clahe16_cluster_kernel), for tiles of at least this many samples; before it, the
  /// packed or atomic histograms, the LUT step and the pairs kernel.
  static constexpr std::size_t kFused16MinTileArea = 4096;
  /// 16-bit apply from LUT pairs (clahe_apply.cu) when the plane has at least this many samples
  /// per pair entry (tiles_y · (tiles_x + 1) · 65536 of them, 18.9 MB for 8x8, written by the
  /// LUT step whatever the plane's size: 16M 544 → 440 µs uniform, 1M 175 → 185 µs).
  static constexpr std::size_t kPairs16MinSamplesPerEntry = 2;
  /// 16-bit apply from LUT pairs by interpolation-cell columns (clahe_apply.cu,
  /// apply_cells16_kernel): threads per block; the grid is one wave of the blocks that fit.
  static constexpr int kCells16Threads = 512;
  /// ... and blocks per SM in its grid (four waves of the three that fit; H200, natural /
  /// uniform µs: 16M 83.9 / 264.8 with one wave, 85.2 / 245.6 with 12 per SM; 64M 234.5 / 960.5
  /// and 220.9 / 877.4; one per SM 115.1 / 212.2 and 360.6 / 743.3).
  static constexpr int kCells16BlocksPerSm = 12;
  /// LUT kernels: threads per block (tile_lut_kernel: one block per 8-bit tile;
  /// tile_lut_pair_kernel: two per 16-bit tile).
  static constexpr int kLutBlockSize = 1024;
  /// Apply: threads per block and blocks per SM of the grid-stride loop.
  static constexpr int kApplyBlockSize = 256;
  static constexpr int kApplyBlocksPerSm = 8;
  /// 8-bit apply by interpolation cells (clahe_apply_cell.cu) from kCellMinPixels pixels up,
  /// when the width is a multiple of 16 and both planes are 16-byte aligned: 60 → 50 µs at
  /// 16M, 203 → 173 at 64M; at 1M the flat kernel was 2 µs faster (its blocks start sooner).
  /// Pixels per block: max(kCellPixelsPerBlock, pixels / (kCellBlocksPerSm · SMs)) (16M: 16 Ki
  /// best of 8/16/48 Ki; 64M: 48 Ki 160 µs against 173 with 16 Ki); about kCellThreads threads
  /// per block (a multiple of the 16-pixel slots of a cell row).
  static constexpr std::size_t kCellMinPixels = std::size_t(4) << 20;
  static constexpr int kCellPixelsPerBlock = 16 << 10;
  static constexpr int kCellBlocksPerSm = 10;
  static constexpr int kCellThreads = 256;
  /// 8-bit apply by row strips (clahe_apply_strip.cu), tried first (16M 44.6 → 32.4 µs, 64M
  /// 145 → 105 µs against the cell kernel; at 1M 15.1 against the flat kernel's 13.8, hence
  /// kStripMinPixels): width a multiple of kStripCols, both planes aligned to its access, tiles
  /// at least kStripMinTileWidth wide (so a slot of columns crosses at most one cell edge), at
  /// least kStripMinPixels pixels. kStripThreads threads side by side per block (kStripCols
  /// columns each); the rows split into ranges of equal height (±1) so that the grid is
  /// kStripWaves full waves of the blocks that fit at once, ranges of at least kStripMinRows
  /// rows; the LUT words of the cells a block spans at most kStripMaxSharedBytes (else fewer
  /// threads, else the cell kernel). Measured in one H200 run (natural 16M / 64M, µs): one wave
  /// 30.8 / 92.4, two waves 32.5 / 91.6; 8 columns per thread (80 registers, 6 blocks per SM)
  /// 31.5 / 95.7 against 16 (128 registers, 4 blocks), since removed.
  static constexpr int kStripThreads = 128;
  static constexpr int kStripCols = 16;
  static constexpr int kStripMinTileWidth = 32;
  static constexpr std::size_t kStripMinPixels = std::size_t(4) << 20;
  static constexpr int kStripMinRows = 8;
  static constexpr int kStripWaves = 1;
  static constexpr std::size_t kStripMaxSharedBytes = std::size_t(32) << 10;
};
inline constexpr ClahePolicy kClahePolicy{};

}  // namespace histeq::kernels

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
