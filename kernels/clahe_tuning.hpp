// clahe_tuning.hpp — the run-time shape of the CLAHE and 16-bit histogram kernels: the defaults of
// ClahePolicy / HistU16Policy (policy.hpp), each overridable by an environment variable so that
// one benchmark run on the GPU machine can measure every variant (read once per process):
//   HISTEQ_CLAHE_APPLY=strip|cell|grid  8-bit apply: row strips (clahe_apply_strip.cu), per-cell
//                                   blocks with the 2×2 LUTs packed in shared memory, or the
//                                   flat grid-stride kernel, wherever each applies (default: by
//                                   size and shape, ClahePolicy::kStrip* / kCellMinPixels)
//   HISTEQ_CLAHE_LUT=nocluster      8-bit small planes: tile histograms through global counters
//                                   instead of a cluster of blocks per tile row
//   HISTEQ_CLAHE_STRIP_ROWS=N       8-bit strip apply: rows per block (default: by occupancy)
//   HISTEQ_CLAHE_STRIP_WAVES=N      8-bit strip apply: full waves of blocks (default kStripWaves)
//   HISTEQ_CLAHE_CELL_THREADS=N     8-bit cell apply: about N threads per block (<= kCellThreads)
//   HISTEQ_CLAHE_BAND_KB=N          fewest input KiB one tile-histogram block counts
//   HISTEQ_CLAHE_HIST_BPS=N         tile-histogram blocks aimed at per SM (default: as many as
//                                   fit, the kernel's occupancy)
//   HISTEQ_CLAHE_APPLY_KPX=N        8-bit cell apply: at least about N Ki pixels per block
//   HISTEQ_CLAHE_HIST16=packed|atomic  16-bit tile histograms: packed shared counters per tile
//                                   (default where the tiles are large enough; `packed`: from
//                                   8192 samples per tile) or global atomics
//   HISTEQ_CLAHE_FUSED16=0|1        16-bit tile histograms and LUTs in one launch, a cluster of
//                                   2-8 blocks per tile (tile_clahe16_cluster_kernel; default:
//                                   from ClahePolicy::kFused16MinTileArea samples per tile, `1`
//                                   for every tile size, `0` never)
//   HISTEQ_CLAHE_CELLS16=0|1        16-bit apply from LUT pairs by cell columns
//                                   (apply_cells16_kernel; default 1 where it applies) or the
//                                   flat grid-stride kernel
//   HISTEQ_CLAHE_CELLS16_BPS=N      that kernel's blocks per SM in the grid (0: as many as fit
//                                   at once; default ClahePolicy::kCells16BlocksPerSm)
//   HISTEQ_CLAHE_PAIRS16=0|1        16-bit apply: LUT pairs of neighbouring tiles, two 4-byte
//                                   gathers per sample, or four 2-byte gathers (default: pairs
//                                   from ClahePolicy::kPairs16MinSamplesPerEntry samples per
//                                   pair entry)
//   HISTEQ_HIST16_PAIRS=0|1         packed: two blocks of a cluster add their counters before
//                                   writing them (default 1)
//   HISTEQ_PDL=MASK                 programmatic dependent launch per launch site (pdl.cuh's
//                                   Edge values summed; 0: none; default kDefaultEdges)
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "policy.hpp"

namespace histeq::kernels {

struct ClaheTuning {
  std::size_t hist_min_bytes = ClahePolicy::kHistMinBytesPerBlock;
  int hist_blocks_per_sm = 0;  ///< 0: the kernel's occupancy
  bool cluster_luts = true;    ///< 8-bit small planes: tile_hist_cluster_kernel
  int apply_pixels_per_block = ClahePolicy::kCellPixelsPerBlock;
  int apply_mode = 0;   ///< 0: by size and shape, 2: strip, 1: cell, -1: grid
  int strip_rows = 0;   ///< 0: by size
  int strip_waves = 0;  ///< 0: ClahePolicy::kStripWaves
  int cell_threads = ClahePolicy::kCellThreads;
  bool hist16_pairs = HistU16Policy::kPackedPairs;
  int packed16 = -1;  ///< 16-bit CLAHE tile histograms: -1 packed by tile area, 0 atomic, 1 packed
  int fused16 = -1;   ///< 16-bit CLAHE histograms + LUTs by tile clusters: -1 by tile area, 0, 1
  int pair_luts16 = -1;  ///< 16-bit CLAHE apply from LUT pairs: -1 by size, 0 off, 1 on
  int cells16 = 1;       ///< 16-bit pair apply by cell columns (1) or flat (0)
  int cells16_blocks_per_sm = ClahePolicy::kCells16BlocksPerSm;  ///< 0: the kernel's occupancy
};

inline const ClaheTuning& clahe_tuning() {
  static const ClaheTuning t = [] {
    ClaheTuning r;
    auto num = [](const char* name, long lo, long hi, long def) {
      const char* v = std::getenv(name);
      if (v == nullptr || *v == 0) return def;
      const long x = std::strtol(v, nullptr, 10);
      return x < lo ? lo : (x > hi ? hi : x);
    };
    auto is = [](const char* name, const char* value) {
      const char* v = std::getenv(name);
      return v != nullptr && std::strcmp(v, value) == 0;
    };
    r.hist_min_bytes =
        std::size_t(num("HISTEQ_CLAHE_BAND_KB", 1, 1 << 20, long(r.hist_min_bytes >> 10))) << 10;
    r.hist_blocks_per_sm = int(num("HISTEQ_CLAHE_HIST_BPS", 0, 64, r.hist_blocks_per_sm));
    r.apply_pixels_per_block =
        int(num("HISTEQ_CLAHE_APPLY_KPX", 1, 1 << 16, r.apply_pixels_per_block >> 10)) << 10;
    if (is("HISTEQ_CLAHE_LUT", "nocluster")) r.cluster_luts = false;
    if (is("HISTEQ_CLAHE_APPLY", "grid")) r.apply_mode = -1;
    if (is("HISTEQ_CLAHE_APPLY", "cell")) r.apply_mode = 1;
    if (is("HISTEQ_CLAHE_APPLY", "strip")) r.apply_mode = 2;
    r.strip_rows = int(num("HISTEQ_CLAHE_STRIP_ROWS", 0, 4096, 0));
    r.strip_waves = int(num("HISTEQ_CLAHE_STRIP_WAVES", 0, 64, 0));
    r.cell_threads =
        int(num("HISTEQ_CLAHE_CELL_THREADS", 32, ClahePolicy::kCellThreads, r.cell_threads));
    if (is("HISTEQ_CLAHE_HIST16", "atomic")) r.packed16 = 0;
    if (is("HISTEQ_CLAHE_HIST16", "packed")) r.packed16 = 1;
    r.pair_luts16 = int(num("HISTEQ_CLAHE_PAIRS16", 0, 1, -1));
    r.fused16 = int(num("HISTEQ_CLAHE_FUSED16", 0, 1, -1));
    r.cells16 = int(num("HISTEQ_CLAHE_CELLS16", 0, 1, 1));
    r.cells16_blocks_per_sm = int(num("HISTEQ_CLAHE_CELLS16_BPS", 0, 64, r.cells16_blocks_per_sm));
    r.hist16_pairs = num("HISTEQ_HIST16_PAIRS", 0, 1, r.hist16_pairs ? 1 : 0) == 1;
    return r;
  }();
  return t;
}

}  // namespace histeq::kernels
