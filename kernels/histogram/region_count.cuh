// region_count.cuh — the counting step of the region histogram (region.cu) and of the masked
// one-launch equalizer (equalize/fused_mask.cuh): the samples of a run of an 8-bit plane where
// a mask is nonzero, added into columns.cuh's lane-owned shared columns (word v·32 + lane).
//
// Per 16-byte vector of samples and the 16 mask bytes at the same offsets:
//  * a mask vector of zeros only is skipped: no atomic at all (a letterbox's borders, the outside
//    of a disc; the test is one OR of the four words);
//  * kFull: a mask vector without a zero byte is counted as plain samples (RegionTuning::
//    full_vectors: a test per vector against the per-byte tests it spares);
//  * otherwise every sample's add runs, adding 1 where its mask byte is nonzero and 0 where it is
//    zero (the 0/1 of four samples come from one word of bit arithmetic): no branch per sample.
//    (The first version wrapped each add in `if (mask byte)`; nvcc branched around every add,
//    each branch with its own address arithmetic and reconvergence barrier: about 12
//    instructions a sample against 4 unmasked. A predicated add written in PTX fared no better:
//    ptxas turned the predicate back into branches to sink the address arithmetic.)
// The adds are `red.shared.add.u32` at shared-window addresses: value v's word of lane l's
// column is cols + l·4 + v·128, one byte extract and one LEA from the word of four samples.
// Loads are 16 bytes wide for the plane and, where the mask has the plane's address modulo 16
// (MaskRead::vectors), for the mask; otherwise the mask's 16 bytes of a vector are read one by
// one (MaskRead::bytes, still coalesced across the warp). Scalar head and tail (fewer than 16
// samples each) make any alignment and length work.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace histeq::kernels::region {

/// How the mask of a run is read: no mask (every sample counts), 16 bytes at a time at the
/// samples' offsets (same address modulo 16), or byte by byte.
enum class MaskRead { none, vectors, bytes };

/// The calling lane's column in the block's columns (columns.cuh), as a shared-window address:
/// value v's word is at base + v·128.
struct Lane {
  unsigned base;  ///< the columns' word 0 plus the lane's offset in a row of 32 words (lane · 4)
};

__device__ __forceinline__ Lane lane_of(const std::uint32_t* cols) {
  return {static_cast<unsigned>(__cvta_generic_to_shared(cols)) + (threadIdx.x & 31u) * 4u};
}

/// Sample k (0..3, little endian) of w: one instruction (a mask, a shift or a byte permute).
template <int k>
__device__ __forceinline__ unsigned sample(unsigned w) {
  if constexpr (k == 0) return w & 0xFFu;
  if constexpr (k == 3) return w >> 24;
  return __byte_perm(w, 0, 0x4440 + k);
}

/// The address of the word that counts sample k of w in the lane's column (sample · 128 + base:
/// one LEA).
template <int k>
__device__ __forceinline__ unsigned slot(const Lane& l, unsigned w) {
  return l.base + (sample<k>(w) << 7);
}

__device__ __forceinline__ void add1(unsigned addr) {
  asm volatile("red.shared.add.u32 [%0], 1;" ::"r"(addr));
}

/// Adds n (0 or 1) at addr: an add that always runs, so that no branch surrounds it.
__device__ __forceinline__ void add_n(unsigned addr, unsigned n) {
  asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(addr), "r"(n));
}

/// 1 in each byte of m that is nonzero, 0 in each other byte: (b & 0x7F) + 0x7F carries into
/// bit 7 exactly when the low seven bits are not all zero, and | b adds bit 7 itself.
__device__ __forceinline__ unsigned nonzero_bytes(unsigned m) {
  return ((((m & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | m) >> 7) & 0x01010101u;
}

/// One sample value v (0..255).
__device__ __forceinline__ void count_value(const Lane& l, unsigned v) { add1(l.base + (v << 7)); }
/// v where its mask byte mb is nonzero.
__device__ __forceinline__ void count_value_if(const Lane& l, unsigned v, unsigned mb) {
  add_n(l.base + (v << 7), mb != 0 ? 1u : 0u);
}

__device__ __forceinline__ void count_word(const Lane& l, unsigned w) {
  add1(slot<0>(l, w));
  add1(slot<1>(l, w));
  add1(slot<2>(l, w));
  add1(slot<3>(l, w));
}

/// The samples of w whose byte of m (same position) is nonzero: each add is of 1 or 0.
__device__ __forceinline__ void count_word_if(const Lane& l, unsigned w, unsigned m) {
  const unsigned f = nonzero_bytes(m);
  add_n(slot<0>(l, w), sample<0>(f));
  add_n(slot<1>(l, w), sample<1>(f));
  add_n(slot<2>(l, w), sample<2>(f));
  add_n(slot<3>(l, w), sample<3>(f));
}

__device__ __forceinline__ void count_vec(const Lane& l, const uint4& v) {
  count_word(l, v.x);
  count_word(l, v.y);
  count_word(l, v.z);
  count_word(l, v.w);
}

/// Nonzero exactly when a byte of x is zero (the bit-twiddling "haszero" test: the lowest zero
/// byte always sets its top bit; bits above it may be set too, which does not change the answer).
__device__ __forceinline__ unsigned zero_byte(unsigned x) {
  return (x - 0x01010101u) & ~x & 0x80808080u;
}

/// The samples of v whose mask byte in m is nonzero.
template <bool kFull>
__device__ __forceinline__ void count_vec_masked(const Lane& l, const uint4& v, const uint4& m) {
  if ((m.x | m.y | m.z | m.w) == 0) return;
  if constexpr (kFull) {
    if ((zero_byte(m.x) | zero_byte(m.y) | zero_byte(m.z) | zero_byte(m.w)) == 0) {
      count_vec(l, v);
      return;
    }
  }
  count_word_if(l, v.x, m.x);
  count_word_if(l, v.y, m.y);
  count_word_if(l, v.z, m.z);
  count_word_if(l, v.w, m.w);
}

/// The 16 mask bytes at m (any alignment) as a vector, little endian as a 16-byte load gives them.
__device__ __forceinline__ uint4 mask_bytes(const std::uint8_t* __restrict__ m) {
  unsigned w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    w[k] = unsigned(__ldg(m + 4 * k)) | unsigned(__ldg(m + 4 * k + 1)) << 8 |
           unsigned(__ldg(m + 4 * k + 2)) << 16 | unsigned(__ldg(m + 4 * k + 3)) << 24;
  return make_uint4(w[0], w[1], w[2], w[3]);
}

/// Sample i of the run, where its mask byte (if any) is nonzero.
template <MaskRead kMask>
__device__ __forceinline__ void count_one(const Lane& l, const std::uint8_t* __restrict__ p,
                                          const std::uint8_t* __restrict__ m, std::size_t i) {
  if constexpr (kMask == MaskRead::none)
    count_value(l, __ldg(p + i));
  else
    count_value_if(l, __ldg(p + i), __ldg(m + i));
}

/// kInFlight vectors of the run and their mask vectors (vectors i + u·nthreads, u < kInFlight),
/// all loads issued before any is counted.
template <int kInFlight, MaskRead kMask, bool kFull>
__device__ __forceinline__ void count_vectors(const Lane& l, const uint4* __restrict__ vp,
                                              const std::uint8_t* __restrict__ m, std::size_t i,
                                              std::size_t nthreads) {
  uint4 v[kInFlight], mk[kInFlight];
#pragma unroll
  for (int u = 0; u < kInFlight; ++u) {
    const std::size_t j = i + std::size_t(u) * nthreads;
    v[u] = __ldg(vp + j);
    if constexpr (kMask == MaskRead::vectors) mk[u] = __ldg(reinterpret_cast<const uint4*>(m) + j);
    if constexpr (kMask == MaskRead::bytes) mk[u] = mask_bytes(m + j * 16);
  }
#pragma unroll
  for (int u = 0; u < kInFlight; ++u) {
    if constexpr (kMask == MaskRead::none)
      count_vec(l, v[u]);
    else
      count_vec_masked<kFull>(l, v[u], mk[u]);
  }
}

/// Counts p[i] for i < n where m[i] is nonzero (every i for MaskRead::none; m is then unused),
/// into the lane's column. Thread `tid` of `nthreads` takes the head samples before p's first
/// 16-byte boundary, the vectors i ≡ tid (mod nthreads), kInFlight at a time, and the tail.
/// MaskRead::vectors needs m at p's address modulo 16.
template <int kInFlight, MaskRead kMask, bool kFull>
__device__ __forceinline__ void count_run(const Lane& l, const std::uint8_t* __restrict__ p,
                                          const std::uint8_t* __restrict__ m, std::size_t n,
                                          std::size_t tid, std::size_t nthreads) {
  constexpr std::size_t kVector = 16;
  const std::size_t misalign = reinterpret_cast<std::uintptr_t>(p) % kVector;
  const std::size_t head = misalign == 0 ? 0 : (kVector - misalign < n ? kVector - misalign : n);
  const std::size_t nvec = (n - head) / kVector;
  const std::size_t tail = head + nvec * kVector;
  for (std::size_t i = tid; i < head; i += nthreads) count_one<kMask>(l, p, m, i);
  for (std::size_t i = tail + tid; i < n; i += nthreads) count_one<kMask>(l, p, m, i);
  const uint4* vp = reinterpret_cast<const uint4*>(p + head);
  const std::uint8_t* vm = kMask == MaskRead::none ? nullptr : m + head;
  std::size_t i = tid;
  for (; i + std::size_t(kInFlight - 1) * nthreads < nvec; i += std::size_t(kInFlight) * nthreads)
    count_vectors<kInFlight, kMask, kFull>(l, vp, vm, i, nthreads);
  for (; i < nvec; i += nthreads) count_vectors<1, kMask, kFull>(l, vp, vm, i, nthreads);
}

}  // namespace histeq::kernels::region
