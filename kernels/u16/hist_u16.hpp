// hist_u16.hpp — 16-bit (65536-bin) histogram, LUT and apply on the device (hist_u16.cu).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "histeq/tuning.hpp"

namespace histeq::kernels {

/// Histogram of d_in[0,n) u16 (any 2-byte alignment) ADDED into d_hist[0,65536) uint64 (the
/// caller zeroes it), or written over it when `assign`. Async on `stream`. Exact. d_scratch:
/// hist_u16_scratch_words() uint32, ZERO before its first use (and left zero where it must be).
/// The kernels are hist_u16_packed.cu's; t: Hist16Tuning::pairs and the programmatic launch of
/// the sum kernel.
void hist_u16(const std::uint16_t* d_in, std::size_t n, std::uint64_t* d_hist, cudaStream_t stream,
              std::uint32_t* d_scratch, bool assign = false, const Tuning& t = Tuning{});

/// uint32 words of scratch hist_u16's packed variant needs: 128 KiB per SM of partials and a
/// 65536-entry uint64 spill.
std::size_t hist_u16_scratch_words();

/// The packed variant itself (hist_u16_packed.cu): n > 0, d_in 2-byte aligned.
void hist_u16_packed(const std::uint16_t* d_in, std::size_t n, std::uint64_t* d_hist,
                     std::uint32_t* d_scratch, cudaStream_t stream, bool assign = false,
                     const Tuning& t = Tuning{});

/// The 16-bit equalization LUT (equalize16.hpp) of a 65536-bin histogram, one block.
void lut_u16(const std::uint64_t* d_hist, std::uint16_t* d_lut, cudaStream_t stream,
             const Tuning& t = Tuning{});

/// d_out[i] = d_lut[d_in[i]], i < n (d_out may equal d_in).
void apply_u16(const std::uint16_t* d_in, std::uint16_t* d_out, std::size_t n,
               const std::uint16_t* d_lut, cudaStream_t stream, const Tuning& t = Tuning{});

}  // namespace histeq::kernels
