// clahe.hpp — the CLAHE kernels' host entry points (clahe_hist.cu, clahe_lut.cu, clahe_apply.cu).
// Stream-ordered, no host sync. The arithmetic is histeq/clahe_formula.hpp, shared with the CPU
// twin (src/cpu/clahe_cpu.cpp), so the results are equal byte for byte.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "histeq/clahe_formula.hpp"

namespace histeq::kernels {

/// Device buffers of one CLAHE call. hist: geometry.tiles() · hist_size uint32 counters, ALL
/// ZERO on entry and left all zero (the LUT step clears what it read); tickets: tiles_y uint32,
/// zero on entry and left zero; luts: tiles() · hist_size entries of the sample type.
struct ClaheBuffers {
  std::uint32_t* hist = nullptr;
  std::uint32_t* tickets = nullptr;
  void* luts = nullptr;
};

/// Tile histograms (reflect-101 padding included) and the per-tile clipped LUTs of a plane
/// d_in[0, width·height) (rows contiguous, any alignment), 8-bit (hist_size 256) or 16-bit
/// (65536), g from clahe_formula::make_geometry. One launch for the 8-bit path when the tile
/// row's privatized histograms fit in shared memory (histogram + LUT fused: the last block of
/// each tile row builds that row's LUTs), two otherwise (histogram, then one block per tile).
void clahe_luts(const void* d_in, const clahe_formula::Geometry& g, const ClaheBuffers& b,
                cudaStream_t stream);

/// The interpolated output d_out[0, width·height) from the LUTs (may equal d_in; must not
/// otherwise overlap it). 16-byte vectors when d_in and d_out are 16-byte aligned.
void clahe_apply(const void* d_in, void* d_out, const clahe_formula::Geometry& g,
                 const void* d_luts, cudaStream_t stream);

/// The 8-bit cell path of clahe_apply (clahe_apply_cell.cu); false, with nothing launched, when
/// it does not apply (width % 16 != 0, unaligned pointers, very wide tiles, switched off).
bool clahe_apply_cell_u8(const std::uint8_t* d_in, std::uint8_t* d_out,
                         const clahe_formula::Geometry& g, const std::uint8_t* d_luts,
                         cudaStream_t stream);

}  // namespace histeq::kernels
