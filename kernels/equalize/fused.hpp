// fused.hpp — 8-bit equalization in one cooperative launch (body and design in fused.cuh).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

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

}  // namespace histeq::kernels
