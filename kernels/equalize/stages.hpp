// stages.hpp — the device stages around the histogram: plane extraction, CDF + LUT, and apply.
// Each is one small launch, asynchronous on `stream`, with no host synchronization; each has a
// CPU twin (histeq::make_lut, histeq::cpu::extract_planes, histeq::cpu::apply) that it equals
// byte for byte, because both call the same HISTEQ_HD formulas (lut_formula.hpp, color.hpp).
// Pipeline (DESIGN.md): upload → extract_planes → histogram (registry) → cdf_lut → apply →
// download.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "histeq/tuning.hpp"
#include "histeq/types.hpp"

namespace histeq::kernels {

/// Tuning numbers of the stages (one place, as CUB's policy structs; no literals in kernels).
struct StagePolicy {
  int block_size;     ///< threads per block of the per-pixel kernels
  int blocks_per_sm;  ///< grid = min(work / block_size, blocks_per_sm · SMs), grid-stride loops
};
inline constexpr StagePolicy kApplyPolicy{256, 8};
inline constexpr StagePolicy kPlanesPolicy{256, 8};

/// CDF + LUT of one 256-bin histogram: d_lut[v] = make_lut(d_hist256, f)[v] for v in 0..255.
/// In: d_hist256[256] uint64 (device). Out: d_lut[256] u8 (device), overwritten.
/// One block of 256 threads: inclusive scan (cub::BlockScan), total = cdf[255],
/// v0 = number of bins with cdf == 0 (__syncthreads_count), then lut_entry per bin.
void launch_cdf_lut(const std::uint64_t* d_hist256, std::uint8_t* d_lut, Formula f,
                    cudaStream_t stream);

/// The same for `planes` histograms at once: d_hist[p·256 + b] → d_luts[p·256 + v], p < planes
/// (one block per plane). planes == 0 launches nothing.
void launch_cdf_lut_planes(const std::uint64_t* d_hist, int planes, std::uint8_t* d_luts, Formula f,
                           cudaStream_t stream);

/// Histogram matching's LUTs (histeq/match.hpp: match_lut) of `planes` 256-bin histograms:
/// d_hist[p·256 + b] and the reference's d_ref[p·256 + b] (one_reference: d_ref[b] for every
/// plane) → d_luts[p·256 + v]. Each reference histogram must count at least one pixel (the
/// caller checks: match_lut throws for an empty one); an empty source histogram gives the
/// identity. One block per plane; planes == 0 launches nothing.
void launch_match_lut_planes(const std::uint64_t* d_hist, int planes, const std::uint64_t* d_ref,
                             bool one_reference, std::uint8_t* d_luts, cudaStream_t stream);

/// The planes a mode histograms (planes.hpp), as cpu::extract_planes:
/// d_planes[p·pixels + i] = plane p of pixel i. 1 channel: a copy (the pipeline uses the input
/// directly instead); 2: the gray channel; 3–4 in luma/gray mode: luma (color::luma);
/// 3–4 in rgb mode: R, G, B planes. d_planes holds plane_count(mode, channels)·pixels bytes.
/// d_in, d_planes: device memory, any alignment. pixels may be 0. Throws UsageError for channels
/// outside 1..4.
void launch_extract_planes(const std::uint8_t* d_in, std::size_t pixels, int channels, Mode mode,
                           std::uint8_t* d_planes, cudaStream_t stream);

/// Writes the equalized image, as cpu::apply: d_luts[p·256 + v] is the LUT of plane p.
///  1 channel (any mode): out = lut[in], 16-byte vector loads/stores with scalar head and tail
///    (any alignment of d_in and d_out), the LUT in shared memory.
///  2 channels: gray through the LUT, alpha copied (gray mode: 1 output channel, alpha dropped).
///  3–4, luma: color::equalize_luma (Y through the LUT, Cr/Cb kept); rgb: channel c through
///    LUT c; gray: 1 output channel, lut[luma]. Alpha copied unchanged.
/// d_out holds pixels · output_channels(mode, channels) bytes and must not overlap d_in.
/// Throws UsageError for channels outside 1..4.
void launch_apply(const std::uint8_t* d_in, std::size_t pixels, int channels, Mode mode,
                  const std::uint8_t* d_luts, std::uint8_t* d_out, cudaStream_t stream);

/// launch_apply's 1-channel case (out = lut[in]), d_lut one 256-entry LUT, launched
/// programmatically (support/pdl.cuh) after the kernel before it on the stream where pdl_edge is
/// one of t's edges (its producer's writes are visible to it; it starts as the producer's blocks
/// exit), else plainly. n may be 0 (nothing is launched).
void launch_apply_gray(const std::uint8_t* d_in, std::size_t n, const std::uint8_t* d_lut,
                       std::uint8_t* d_out, cudaStream_t stream, unsigned pdl_edge,
                       const Tuning& t);

/// cudaSuccess when this library's device code can run on the current device (it was built for
/// the device's architecture and a context can be created); otherwise the error (e.g.
/// cudaErrorNoKernelImageForDevice). Clears the error it causes. Used by cuda_available().
cudaError_t probe_device_code();

}  // namespace histeq::kernels
