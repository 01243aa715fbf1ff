// histeq/tuning.hpp — the run-time choices of the GPU kernels' paths and launch shapes that a
// caller may override, for measurement and tests. A default-constructed Tuning is the policy: the
// choices measured fastest, made by size and shape (kernels/FAMILY/policy.hpp names each number and
// why). The engines (gpu::Clahe, gpu::Equalizer16, gpu::Equalizer) hold one, set_tuning()
// replaces it; the kernels' entry points take one, defaulted. `histeq bench --tune KEY=VALUE`
// fills one from the command line (bench/tune.cpp lists the keys); nothing reads the environment.
// Every choice gives the same bytes: only the time changes.
#pragma once
#include <cstdint>

namespace histeq {

/// A choice the policy makes by size and shape unless forced on or off.
enum class Choice : std::uint8_t { automatic, on, off };

/// CLAHE (8-bit and 16-bit planes). Numbers of 0 (or -1 where 0 has a meaning) are the policy's.
struct ClaheTuning {
  /// The 8-bit apply kernel: by size and shape (the strip kernel from ClahePolicy::kStripMinPixels,
  /// else the cell kernel from kCellMinPixels, else the flat one), or one forced wherever it can
  /// serve the plane (strip, cell: widths a multiple of 16, 16-byte aligned planes; the next
  /// kernel of that list where it cannot).
  enum class Apply : std::uint8_t { automatic, strip, cell, flat };
  Apply apply = Apply::automatic;
  /// 8-bit planes of at most ClahePolicy::kClusterMaxPixels: the tile histograms and LUTs by a
  /// cluster of blocks per tile row (tile_hist_cluster_kernel); false: by bands and a ticket, as
  /// larger planes.
  bool small_clusters = true;
  int hist_band_kib = 0;       ///< fewest input KiB one tile-histogram block counts
  int hist_blocks_per_sm = 0;  ///< tile-histogram blocks per SM (0: as many as fit at once)
  int strip_rows = 0;          ///< strip apply: rows per range (0: one wave, by occupancy)
  int strip_waves = 0;         ///< strip apply: full waves of blocks
  int cell_threads = 0;        ///< cell apply: about this many threads per block (32..256)
  int cell_kpx = 0;            ///< cell apply: at least this many Ki pixels per block
  /// 16-bit: tile histograms and LUTs in one launch by a cluster of blocks per tile (automatic:
  /// tiles of ClahePolicy::kFused16MinTileArea samples and more, where the clusters fit).
  Choice fused16 = Choice::automatic;
  /// 16-bit tile histograms outside that launch: packed 16-bit shared counters (automatic: tiles
  /// of ClahePolicy::kPacked16MinTileArea samples and more; packed: from 8192) or global atomics.
  enum class Tiles16 : std::uint8_t { automatic, packed, atomic };
  Tiles16 tiles16 = Tiles16::automatic;
  /// 16-bit apply from LUT pairs of neighbouring tiles, two 4-byte gathers per sample instead of
  /// four 2-byte ones (automatic: planes of ClahePolicy::kPairs16MinSamplesPerEntry samples per
  /// pair entry and more).
  Choice pairs16 = Choice::automatic;
  /// 16-bit pair apply by interpolation-cell columns where it applies (false: the flat kernel).
  bool cells16 = true;
  /// That kernel's blocks per SM (-1: ClahePolicy::kCells16BlocksPerSm; 0: as many as fit).
  int cells16_blocks_per_sm = -1;
};

/// The 65536-bin histogram (hist_u16_packed.cu).
struct Hist16Tuning {
  /// Clusters of two blocks add their counters before writing them (false: single blocks, as on a
  /// device where no pair fits).
  bool pairs = true;
};

/// The batched 8-bit equalizer (batched.cu; set through gpu::Equalizer::set_tuning, as the tests
/// do: histeq bench has no batched rows).
struct BatchTuning {
  /// The cluster path's threads per block, 512 or 1024 (0: by image size, BatchedPolicy).
  int cluster_threads = 0;
};

/// Masked and rectangle equalization of a gray plane in device memory (gpu::Equalizer::
/// equalize_gray_region) and the 8-bit region histogram (kernels/histogram/region.cu).
struct RegionTuning {
  /// How the region's equalization runs: automatic (the policy: fused where it can serve the
  /// call, else pair); fused: one cooperative launch that counts, builds the LUT and applies (a
  /// mask alone, whole plane, the mask at the plane's address modulo 16, the input and output at
  /// the same one; elsewhere it runs pair); pair: the histogram launch whose last block builds the
  /// LUT, then the apply launch; stages: histogram (memset + launch), CDF/LUT launch, apply launch.
  enum class Equalize : std::uint8_t { automatic, fused, pair, stages };
  Equalize equalize = Equalize::automatic;
  /// Mask vectors of 16 nonzero bytes counted as unmasked samples (a test per vector that spares
  /// the per-byte mask tests of whole vectors) instead of through the per-byte path.
  bool full_vectors = false;
  /// Blocks per SM of the region histogram's whole-rows kernels: 3 or 4 (0: the policy's,
  /// RegionPolicy::kBlocksPerSm).
  int blocks_per_sm = 0;
  /// The fused path's launch shape (fused_mask.cuh; FusedMaskPolicy): threads per block and
  /// 16-byte vectors kept per thread from the count to the apply.
  enum class FusedShape : std::uint8_t { automatic, t1024_v2, t1024_v1, t768_v2 };
  FusedShape fused_shape = FusedShape::automatic;
};

struct Tuning {
  ClaheTuning clahe;
  Hist16Tuning hist16;
  BatchTuning batch;
  RegionTuning region;
  /// Programmatic dependent launch per launch site: a sum of kernels/support/pdl.cuh's Edge values
  /// (0: none); -1: the sites where it measured faster (pdl::kDefaultEdges).
  std::int32_t pdl_edges = -1;
};

}  // namespace histeq
