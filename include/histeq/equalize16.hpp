// histeq/equalize16.hpp — global histogram equalization of 16-bit samples (65536 levels).
//
// OpenCV's equalizeHist has no 16-bit case; this is its formula (lut_formula.hpp, opencv) over
// 65536 levels instead of 256. With h the 65536-bin histogram of N samples, v0 the first bin
// with h[v0] > 0 and cdf(v) = h[0] + ... + h[v]:
//     scale  = float32(65535) / float32(N − h[v0])
//     lut[v] = round-half-even(float32(float32(cdf(v) − h[v0]) · scale)),  v > v0;  lut[v0] = 0
// (bins below v0 never occur and map to 0); an empty or constant input maps to itself. As in
// the 8-bit formula, cdf − h[v0] is exact in float32 only up to 2^24 (16 M samples).
// The formula itself (formula16, kBins16) is in histeq/lut16_formula.hpp (core), which the
// 16-bit kernels share.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "histeq/image16.hpp"
#include "histeq/lut16_formula.hpp"
#include "histeq/match.hpp"
#include "histeq/types.hpp"

namespace histeq {

/// The 16-bit LUT (65536 entries) of a 65536-bin histogram, by the formula above.
std::vector<std::uint16_t> make_lut16(const std::uint64_t* hist65536);

namespace cpu {
/// 65536-bin histogram of n 16-bit samples (threads: 0 = hardware_concurrency).
Histogram histogram16(const std::uint16_t* in, std::size_t n, int threads = 0);
/// Equalizes a 16-bit image: gray (and gray+alpha) on its gray channel, colour images per
/// channel (mode rgb; luma throws UsageError: no 16-bit YCbCr), gray mode on colour throws too.
/// Alpha passed through (in every mode: the command line and Python give gray+alpha with mode
/// gray its gray channel alone by passing that channel here). Throws Error for an empty image.
Image16 equalize16(const Image16& img, Mode mode = Mode::rgb, int threads = 0);
/// The same with the pixels the histograms count (`region`) and, when `reference` is given,
/// histogram matching (match_lut16 to its histograms: one per plane, or one for all). A region
/// that does not fit or counts nothing throws UsageError (Region::check); a reference of another
/// plane count or not 65536 bins throws Error.
Image16 equalize16(const Image16& img, Mode mode, int threads, const Region& region,
                   const std::vector<Histogram>* reference);
/// The 65536-bin histograms of the counted pixels of a 16-bit plane (width x height samples).
Histogram histogram16(const std::uint16_t* plane, int width, int height, const Region& region,
                      int threads = 0);
}  // namespace cpu

}  // namespace histeq
