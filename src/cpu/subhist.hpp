// cpu/subhist.hpp — the CPU histograms' inner step (cpu_backend.cpp, region.cpp): eight samples
// of one 64-bit word counted into four 256-bin sub-histograms (h0..h3 in turn), two
// samples per sub-histogram, so that a run of equal values does not chain every increment on
// the previous store to the same counter.
#pragma once
#include <cstdint>

namespace histeq::cpu {

/// h_k[byte j of a] += 1 for the eight bytes j of a (little-endian order), k = j mod 4.
inline void count_word8(std::uint64_t a, std::uint32_t* h0, std::uint32_t* h1, std::uint32_t* h2,
                        std::uint32_t* h3) {
  ++h0[a & 0xff];
  ++h1[(a >> 8) & 0xff];
  ++h2[(a >> 16) & 0xff];
  ++h3[(a >> 24) & 0xff];
  ++h0[(a >> 32) & 0xff];
  ++h1[(a >> 40) & 0xff];
  ++h2[(a >> 48) & 0xff];
  ++h3[a >> 56];
}

}  // namespace histeq::cpu
