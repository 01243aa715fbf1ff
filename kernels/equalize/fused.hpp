// fused.hpp — 8-bit equalization in one cooperative launch (body and design in fused.cuh; the
// masked one in fused_mask.cuh).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "histeq/tuning.hpp"
#include "histeq/types.hpp"

namespace histeq::kernels {

/// True when the current device can run the fused equalizer (cooperative launch); otherwise
/// false and *why says why. Callers fall back to histogram + launch_cdf_lut + launch_apply.
bool fused_equalize_supported(std::string* why = nullptr);

/// out[i] = lut[in[i]] for i in [0,n), lut the equalization LUT (formula f) of in's 256-bin
/// histogram; one launch, async on `stream`.
///  d_hist:      [256] uint64, must be all zero on entry; holds the histogram afterwards.
///  d_next_hist: [256] uint64, zeroed by the kernel for the next call (callers alternate two
///               buffers, so no memset launch is needed), or nullptr.
///  d_lut:       [256] u8, receives the LUT, or nullptr.
/// `in` and `out` may be the same buffer (in place) but must otherwise not overlap, and must
/// have the same address modulo 16. Throws UsageError when they do not, Error (CudaError) when
/// the launch fails.
void launch_fused_equalize(const std::uint8_t* d_in, std::uint8_t* d_out, std::size_t n, Formula f,
                           std::uint64_t* d_hist, std::uint64_t* d_next_hist, std::uint8_t* d_lut,
                           cudaStream_t stream);

/// The masked one-launch equalizer counts with 32-bit vector indices: planes of fewer samples.
inline constexpr std::size_t kFusedMaskMaxSamples = std::size_t(1) << 35;

/// Masked equalization of in[0,n) in one cooperative launch (fused_mask.cu): lut is the
/// equalization LUT of the histogram of the samples in[i] with d_mask[i] != 0, and out[i] =
/// lut[in[i]] for every i. d_mask: n bytes at d_in's address modulo 16; n < kFusedMaskMaxSamples.
/// d_hist, d_next_hist, d_lut as launch_fused_equalize; d_hist_out (or nullptr) receives a copy
/// of the histogram. t.region's fused_shape and full_vectors pick the launch shape and the
/// counting variant (the same bytes). Throws UsageError for a mask of another phase, a plane too
/// large, and as launch_fused_equalize.
void launch_fused_equalize_masked(const std::uint8_t* d_in, std::uint8_t* d_out, std::size_t n,
                                  const std::uint8_t* d_mask, Formula f, std::uint64_t* d_hist,
                                  std::uint64_t* d_next_hist, std::uint64_t* d_hist_out,
                                  std::uint8_t* d_lut, cudaStream_t stream, const Tuning& t);

}  // namespace histeq::kernels
