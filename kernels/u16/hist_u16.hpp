// hist_u16.hpp — 16-bit (65536-bin) histogram, LUT and apply on the device (hist_u16.cu).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "histeq/tuning.hpp"
#include "histogram/region.hpp"

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

/// The 65536-bin histogram of a 16-bit plane's region (hist_u16_region.cu), written over
/// r.d_hist: hist_u16 on the rows for a rectangle of whole rows without a mask (d_scratch as
/// hist_u16's), else one global atomic per counted sample.
void hist_u16_region(const RegionLaunch& r, std::uint32_t* d_scratch, const Tuning& t = Tuning{});

/// Histogram matching's 65536-level LUT (histeq/match.hpp: match_lut16) of one plane: d_hist
/// and the reference's d_ref (65536 uint64 each, device; the reference counts at least one
/// sample: the caller checks) → d_lut[0,65536). d_scratch: match_lut_u16_scratch_words() uint64.
/// Two launches on `stream` (match_lut16.cu).
void match_lut_u16(const std::uint64_t* d_hist, const std::uint64_t* d_ref, std::uint16_t* d_lut,
                   std::uint64_t* d_scratch, cudaStream_t stream);
std::size_t match_lut_u16_scratch_words();

}  // namespace histeq::kernels
