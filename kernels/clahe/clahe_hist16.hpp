// clahe_hist16.hpp — what clahe_hist.cu and clahe_hist16.cu call of each other (CLAHE's tile
// histograms and LUTs of 8-bit and 16-bit planes; the entry point is clahe.hpp's clahe_luts).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "clahe/clahe.hpp"
#include "histeq/clahe_formula.hpp"
#include "histeq/tuning.hpp"

namespace histeq::kernels::clahe_detail {

/// The 16-bit tile histograms, LUTs and, where b.pair_luts is given, LUT pairs (clahe_hist16.cu).
void run_luts16(const std::uint16_t* d_in, const clahe_formula::Geometry& g, const ClaheBuffers& b,
                cudaStream_t stream, const Tuning& t);

/// The 16-bit tile histograms by bands counting into the global tile counters with atomics
/// (clahe_hist.cu's banded kernel), for tiles too small for the packed counters.
void launch_tile_hist_atomic16(const std::uint16_t* d_in, const clahe_formula::Geometry& g,
                               const ClaheBuffers& b, cudaStream_t stream, const Tuning& t);

}  // namespace histeq::kernels::clahe_detail
