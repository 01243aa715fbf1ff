// policy.hpp — every tuning number of the CLAHE kernels, each with the measurement that chose it
// (CUB's tuning headers' shape). The run-time choices a caller may override are
// histeq/tuning.hpp's ClaheTuning; its defaults are this policy.
#pragma once
#include <cstddef>

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
  /// Masked CLAHE (clahe_masked.cu), not measured yet: the histogram kernel's threads per
  /// block (striding over the padded columns), padded rows per block and most blocks (a
  /// grid-stride loop beyond); the LUT kernel's threads per tile (they divide 256 and 65536).
  static constexpr int kMaskedHistThreads = 256;
  static constexpr int kMaskedHistRows = 4;
  static constexpr int kMaskedHistMaxBlocks = 1 << 16;
  static constexpr int kMaskedLutThreads = 256;
};
inline constexpr ClahePolicy kClahePolicy{};

}  // namespace histeq::kernels
