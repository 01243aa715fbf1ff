// clahe.hpp — the CLAHE kernels' host entry points (clahe_hist.cu, clahe_apply.cu,
// clahe_apply_strip.cu, clahe_apply_cell.cu, clahe_masked.cu). Stream-ordered, no host sync. The
// arithmetic is histeq/clahe_formula.hpp, shared with the CPU twin (src/cpu/clahe_cpu.cpp), so the
// results are equal byte for byte. Each takes the Tuning (histeq/tuning.hpp) that the engine holds:
// the policy unless a benchmark or test overrides a choice; every choice gives the same bytes.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "histeq/clahe_formula.hpp"
#include "histeq/tuning.hpp"

namespace histeq::kernels {

/// Device buffers of one CLAHE call. hist: geometry.tiles() · hist_size uint32 counters, ALL
/// ZERO on entry and left all zero (the LUT step clears what it read); tickets:
/// clahe_ticket_words(g) uint32, zero on entry and left zero; luts: tiles() · hist_size entries
/// of the sample type.
struct ClaheBuffers {
  std::uint32_t* hist = nullptr;
  std::uint32_t* tickets = nullptr;
  void* luts = nullptr;
  /// 16-bit, optional: clahe_partial_words(g) uint32 of any contents (the packed tile
  /// histograms' per-block partials; the path is taken only when this is given and
  /// clahe_partial_words(g) > 0), and clahe_pair_lut_words(g) uint32 for the LUT pairs of
  /// clahe_apply's 16-bit path (written when given).
  std::uint32_t* partials = nullptr;
  std::uint32_t* pair_luts = nullptr;
};

/// uint32 words of ClaheBuffers::partials the 16-bit packed tile histograms need; 0 where that
/// path does not apply (8-bit, the one-launch tile clusters, tiles of fewer than
/// ClahePolicy::kPacked16MinTileArea samples).
std::size_t clahe_partial_words(const clahe_formula::Geometry& g, const Tuning& t = Tuning{});

/// uint32 words of ClaheBuffers::tickets: one per tile row (8-bit), one per (tile row, cell
/// column, cluster rank) for the 16-bit one-launch path.
std::size_t clahe_ticket_words(const clahe_formula::Geometry& g);

/// uint32 words of ClaheBuffers::pair_luts (16-bit): per tile row, per interpolation cell
/// column cx in [0, tiles_x], per value v, the LUT values of the cell's two tiles
/// (max(cx − 1, 0) in the low half, min(cx, tiles_x − 1) in the high half).
std::size_t clahe_pair_lut_words(const clahe_formula::Geometry& g);

/// Whether a 16-bit plane of geometry g is applied from LUT pairs (then clahe_luts writes them
/// where ClaheBuffers::pair_luts is given): ClaheTuning::pairs16, automatic from
/// ClahePolicy::kPairs16MinSamplesPerEntry samples per pair entry. False for 8-bit planes.
bool clahe_uses_pair_luts(const clahe_formula::Geometry& g, const Tuning& t = Tuning{});

/// Tile histograms (reflect-101 padding included) and the per-tile clipped LUTs of a plane
/// d_in[0, width·height) (rows contiguous, any alignment), 8-bit (hist_size 256) or 16-bit
/// (65536), g from clahe_formula::make_geometry. One launch for the 8-bit path when the tile
/// row's privatized histograms fit in shared memory (histogram + LUT fused: the last block of
/// each tile row builds that row's LUTs), two otherwise (histogram, then one block per tile).
void clahe_luts(const void* d_in, const clahe_formula::Geometry& g, const ClaheBuffers& b,
                cudaStream_t stream, const Tuning& t = Tuning{});

/// The interpolated output d_out[0, width·height) from the LUTs (may equal d_in; must not
/// otherwise overlap it). 16-byte vectors when d_in and d_out are 16-byte aligned. 16-bit with
/// d_pair_luts (ClaheBuffers::pair_luts after clahe_luts): two 4-byte gathers per sample
/// instead of four 2-byte ones.
void clahe_apply(const void* d_in, void* d_out, const clahe_formula::Geometry& g,
                 const void* d_luts, cudaStream_t stream, const void* d_pair_luts = nullptr,
                 const Tuning& t = Tuning{});

/// The counted pixels of masked CLAHE on the device: those of the rectangle [x, x + width) x
/// [y, y + height) (inside the plane) where mask (the plane's width·height bytes in device
/// memory, rows contiguous; nullptr: every pixel of the rectangle) is nonzero.
struct ClaheRegion {
  const std::uint8_t* mask = nullptr;
  int x = 0, y = 0, width = 0, height = 0;
};

/// Masked CLAHE (ClaheOptions::region; clahe_masked.cu): the LUTs of the tiles' counted pixels
/// (the padding takes the counted flags of the pixels reflect-101 maps it to); hist:
/// tiles·bins uint32, zero on entry and left zero; luts as clahe_luts's (equal to
/// cpu::clahe_luts with the region; the identity for a tile with no counted pixel).
/// clip_limit: ClaheOptions::clip_limit (the clip is computed per tile). UsageError for a
/// rectangle not inside the plane or empty.
void clahe_masked_luts(const void* d_in, const ClaheRegion& region,
                       const clahe_formula::Geometry& g, double clip_limit, std::uint32_t* hist,
                       void* luts, cudaStream_t stream);
/// The 8-bit strip path of clahe_apply (clahe_apply_strip.cu); false, with nothing launched,
/// when it does not apply (width % 16 != 0, unaligned pointers, tiles narrower than
/// ClahePolicy::kStripMinTileWidth, a small plane, another kernel forced by t).
bool clahe_apply_strip_u8(const std::uint8_t* d_in, std::uint8_t* d_out,
                          const clahe_formula::Geometry& g, const std::uint8_t* d_luts,
                          cudaStream_t stream, const Tuning& t);

/// The 8-bit cell path of clahe_apply (clahe_apply_cell.cu); false, with nothing launched, when
/// it does not apply (width % 16 != 0, unaligned pointers, very wide tiles, a small plane, the
/// flat kernel forced by t).
bool clahe_apply_cell_u8(const std::uint8_t* d_in, std::uint8_t* d_out,
                         const clahe_formula::Geometry& g, const std::uint8_t* d_luts,
                         cudaStream_t stream, const Tuning& t);

}  // namespace histeq::kernels
