// histeq/lut.hpp — host CDF and LUT (the reference that the device kernels must equal).
#pragma once
#include <array>
#include <cstdint>

#include "histeq/types.hpp"

namespace histeq {

/// A 256-entry lookup table: out = lut[in].
using Lut = std::array<std::uint8_t, 256>;

/// Inclusive prefix sum of a 256-bin histogram: cdf[v] = hist[0] + ... + hist[v].
std::array<std::uint64_t, 256> cumulate(const std::uint64_t* hist256);

/// The equalization LUT of a 256-bin histogram with the given formula (lut_formula.hpp).
/// A constant or empty histogram gives the identity.
Lut make_lut(const std::uint64_t* hist256, Formula formula);

}  // namespace histeq
