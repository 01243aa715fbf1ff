// packed16.cuh — the counting primitives of 65536 16-bit counters packed two to a 32-bit shared
// word (128 KiB of one block's shared memory), shared by the 65536-bin histogram
// (hist_u16_packed.cu) and the 16-bit CLAHE tile histograms (clahe_hist.cu).
// Layout: word i holds bin i in its low half and bin i + 32768 in its high half, so neighbouring
// values of smooth images fall in neighbouring banks.
// Exactness: every half is kept below 0x8000 between adds. The add that takes a half from 0x7FFF
// to 0x8000 is the one whose result has that half's top bit set where its operand had it clear
// (bit 15 or 31 of (old + inc) & ~old: an add to one half never changes the other half's bits,
// since no half reaches 0xFFFF); that thread subtracts 0x8000 from the half and hands 32768 to the
// caller's `spill(v)` (a wider counter of bin v). Between the crossing add and its subtract lie
// at most the other seven adds of the thread's vector and the re-test of its earlier ones (with
// their spills): the half would need 32768 more increments of that one bin in that window to
// carry into its neighbour (as with a test per add, this rests on that window being short, not
// on a hardware guarantee). An add that lands while another
// thread's crossing is not yet taken back sees the top bit already set and spills nothing, so each
// crossing spills exactly once and the counts are exact.
// Why it is fast: the 65536-bin histogram of 64M samples is bound by the shared atomics (their
// bank conflicts) and the integer pipe (ncu, H200: 15 instructions per sample, ALU pipe 64-70 %
// busy, with one test and branch per sample). Here a sample costs its word index, its increment
// (one PRMT that spreads the sign of the sample's top byte, one LOP3), the add, and two integer
// ops that fold the add's flip bits into one word; the vector's eight adds are tested once.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace histeq::kernels::packed16 {

/// Bits 15 and 31: the top bit of each half.
constexpr unsigned kTopBits = 0x80008000u;

/// The word of sample v: v & 0x7FFF, or with kHash that with its low 5 bits (its bank) XORed with
/// bits 8-12 of v. The hash permutes each aligned group of 32 words (bits 8-12 are the group's),
/// and is its own inverse: word_of<true>(w) is the bin (below 32768) of word w. It spreads
/// samples whose low bytes agree and high bytes differ, which smooth 16-bit data gives neighbouring
/// lanes, over the banks.
template <bool kHash>
__device__ __forceinline__ unsigned word_of(unsigned v) {
  return kHash ? (v ^ ((v >> 8) & 0x1Fu)) & 0x7FFFu : v & 0x7FFFu;
}

/// The increment of sample v in its word: 1 for bins below 32768, 0x10000 above.
__device__ __forceinline__ unsigned inc_of(unsigned v) { return v & 0x8000u ? 0x10000u : 1u; }

/// inc_of for the sample in half kHalf of x (0: bits 0-15, 1: bits 16-31): PRMT in its sign mode
/// copies the top bit of the sample into every bit, then one LOP3 picks 0x10000 or 1.
template <int kHalf>
__device__ __forceinline__ unsigned inc_of_half(unsigned x) {
  unsigned s;
  asm("prmt.b32 %0, %1, 0, %2;" : "=r"(s) : "r"(x), "n"(kHalf ? 0xBBBB : 0x9999));
  return (s & 0x10000u) | (~s & 1u);
}

/// The bits that the add of inc to old set: bit 15 or 31 of it marks a crossing (header).
__device__ __forceinline__ unsigned flips(unsigned old, unsigned inc) { return (old + inc) & ~old; }

/// One sample, its crossing tested at once (the scalar heads and tails).
template <bool kHash = false, typename Spill>
__device__ __forceinline__ void count_one(std::uint32_t* s, unsigned v, Spill& spill) {
  const unsigned inc = inc_of(v);
  const unsigned word = word_of<kHash>(v);
  const unsigned old = atomicAdd(s + word, inc);
  if (flips(old, inc) & kTopBits) {
    atomicSub(s + word, inc << 15);
    spill(v);
  }
}

/// The 8 samples of one 16-byte vector: the eight adds, each add's flips folded into one word,
/// and one test for the vector; the rare vector with a crossing tests its adds again from their
/// returned values (kept in registers) and spills. (A compare and branch per sample, as
/// count_one does, cost 15 instructions per sample against about 8: docs/kernels.md.)
template <bool kHash = false, typename Spill>
__device__ __forceinline__ void count_vector(std::uint32_t* s, const uint4& q, Spill& spill) {
  const unsigned w[4] = {q.x, q.y, q.z, q.w};
  unsigned old[8], acc = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const unsigned x = w[j >> 1];
    const unsigned inc = j & 1 ? inc_of_half<1>(x) : inc_of_half<0>(x);
    const unsigned word = word_of<kHash>(j & 1 ? x >> 16 : x);
    old[j] = atomicAdd(s + word, inc);
    acc |= flips(old[j], inc);
  }
  if (acc & kTopBits) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const unsigned v = j & 1 ? w[j >> 1] >> 16 : w[j >> 1] & 0xFFFFu;
      const unsigned inc = inc_of(v);
      if (flips(old[j], inc) & kTopBits) {
        atomicSub(s + word_of<kHash>(v), inc << 15);
        spill(v);
      }
    }
  }
}

}  // namespace histeq::kernels::packed16
