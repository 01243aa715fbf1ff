// clahe_band.cuh — what one block of the CLAHE tile-histogram kernel counts: every sample of the
// padded rows [yp0, yp1) of one tile row, with its tile column, split over `threads` threads
// (thread `tid` visits its share). Host and device (HISTEQ_HD), so that a CPU test can run the
// very decomposition the kernel runs (tests/test_host_clahe_band.cpp) and compare the tile
// histograms with the CPU twin's.
//  1. The band's image rows [yp0, min(yp1, height)) are one contiguous range: 16-byte vectors
//     from the first 16-byte-aligned address, scalar head and tail; the column of each sample
//     is carried from one division per vector (wrap at the row end, next tile at each boundary).
//     Fast path (`fast`, the default): when the range starts 16-byte aligned and both the width
//     and the tile width are multiples of the vector's samples, no vector crosses a row or a
//     tile, so its tile column is computed once and its samples counted with no checks.
//  2. The right padding of those rows, columns [width, padded_w), reflect-101.
//  3. Padded rows below the image inside [yp0, yp1), whole padded rows, reflect-101.
#pragma once
#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "histeq/clahe_formula.hpp"
#include "histeq/hd.hpp"

namespace histeq::kernels::clahe_detail {

template <typename T>
HISTEQ_HD uint4 load_vector(const uint4* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

/// Whether Count also takes a sample as one index tx·256 + v (8-bit counters: count.index(i)),
/// so that the fast path forms it with one byte permute from the loaded word.
template <typename Count, typename = void>
struct HasIndex {
  static constexpr bool value = false;
};
template <typename Count>
struct HasIndex<Count, decltype(std::declval<const Count&>().index(0u))> {
  static constexpr bool value = true;
};

/// The 16 samples of vector q, all of tile column tx: count(tx, v) each, or for 8-bit samples
/// and a Count with index() on the device, count.index(v | tx << 8) with the index made by one
/// PRMT per sample (byte k of the word, then tx's low byte, then zero bytes: tx < 256 here).
template <typename T, typename Count>
HISTEQ_HD void count_vector(const uint4& q, int tx, Count& count) {
  constexpr int kPer = 16 / int(sizeof(T));
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 1 && HasIndex<Count>::value) {
    const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int j = 0; j < 16; ++j)
      count.index(__byte_perm(w[j >> 2], unsigned(tx), 0x5540u | unsigned(j & 3)));
    return;
  }
#endif
  T vals[kPer];
  std::memcpy(vals, &q, sizeof(q));
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int j = 0; j < kPer; ++j) count(tx, int(vals[j]));
}

/// Calls count(tx, v) for every sample of the band that thread tid of `threads` owns.
template <typename T, typename Count>
HISTEQ_HD void visit_band(const T* in, const histeq::clahe_formula::Geometry& g, int yp0, int yp1,
                          unsigned tid, unsigned threads, Count& count, bool fast = true) {
  namespace cf = histeq::clahe_formula;
  const int w = g.width;
  const int r0 = yp0, r1 = yp1 < g.height ? yp1 : g.height;
  if (r0 < r1) {
    const T* base = in + std::size_t(r0) * std::size_t(w);
    const unsigned total = unsigned(r1 - r0) * unsigned(w);
    auto run = [&](unsigned i0, const T* vals, int k) {
      int c = int(i0 % unsigned(w));
      int tx = c / g.tile_w;
      int next = (tx + 1) * g.tile_w;
      for (int j = 0; j < k; ++j) {
        if (c == w) {
          c = 0;
          tx = 0;
          next = g.tile_w;
        }
        if (c == next) {
          ++tx;
          next += g.tile_w;
        }
        count(tx, int(vals[j]));
        ++c;
      }
    };
    constexpr int kPer = 16 / int(sizeof(T));
    const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(base);
    const unsigned head_all = unsigned(((16 - addr % 16) % 16) / sizeof(T));
    const unsigned h = head_all < total ? head_all : total;
    for (unsigned i = tid; i < h; i += threads) run(i, base + i, 1);
    const unsigned vecs = (total - h) / kPer;
    unsigned vecs_done = 0;
    const uint4* vin = reinterpret_cast<const uint4*>(base + h);
    if (fast && h == 0 && w % kPer == 0 && g.tile_w % kPer == 0 &&
        std::uint64_t(w) * std::uint64_t(g.tile_w) <= (std::uint64_t(1) << 32)) {
      // Rows and tiles are whole vectors: one tile column per vector, no per-sample checks.
      // kInFlight vectors loaded before any is counted (the same vectors, counted in the same
      // order, as one at a time): one 16-byte load in flight per thread left the kernel
      // latency-bound (ncu, H200: 19 cycles per issued instruction, a third of them waiting
      // on memory). No division per vector: the column of vector v, (v·kPer) mod w, is
      // carried from vector to vector (a thread's vectors are `threads` apart: the column
      // advances by `step` and wraps at most once), and its tile is col / tile_w as
      // umulhi(col, ceil(2^32 / tile_w)), exact for col · tile_w < 2^32 (col < w and
      // w · tile_w <= 2^32: the error col·e / 2^32, e < tile_w, stays below 1 / tile_w).
      // The general division had cost about 40 instructions per vector (SASS, sm_90).
      constexpr unsigned kInFlight = 4;
      const unsigned uw = unsigned(w);
      const unsigned step = (threads * unsigned(kPer)) % uw;
      const unsigned magic = unsigned(0xFFFFFFFFu / unsigned(g.tile_w)) + 1u;
      const auto tile_of = [magic](unsigned c) { return int((std::uint64_t(c) * magic) >> 32); };
      const auto advance = [step, uw](unsigned c) {
        c += step;
        return c >= uw ? c - uw : c;
      };
      unsigned v = tid;
      unsigned col = (tid * unsigned(kPer)) % uw;
      for (; v + (kInFlight - 1) * threads < vecs; v += kInFlight * threads) {
        uint4 qs[kInFlight];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (unsigned i = 0; i < kInFlight; ++i) qs[i] = load_vector<T>(vin + v + i * threads);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (unsigned i = 0; i < kInFlight; ++i) {
          count_vector<T>(qs[i], tile_of(col), count);
          col = advance(col);
        }
      }
      for (; v < vecs; v += threads) {
        count_vector<T>(load_vector<T>(vin + v), tile_of(col), count);
        col = advance(col);
      }
      vecs_done = vecs;
    }
    for (unsigned v = tid + vecs_done; v < vecs; v += threads) {
      const uint4 q = load_vector<T>(vin + v);
      T vals[kPer];
      std::memcpy(vals, &q, sizeof(q));
      run(h + v * kPer, vals, kPer);
    }
    for (unsigned i = h + vecs * kPer + tid; i < total; i += threads) run(i, base + i, 1);
  }
  const int padw = g.padded_w - w;
  if (padw > 0 && r0 < r1) {
    const unsigned items = unsigned(r1 - r0) * unsigned(padw);
    for (unsigned k = tid; k < items; k += threads) {
      const int y = r0 + int(k / unsigned(padw)), xp = w + int(k % unsigned(padw));
      count(xp / g.tile_w, int(in[std::size_t(y) * w + cf::reflect101(xp, w)]));
    }
  }
  const int q0 = yp0 > g.height ? yp0 : g.height;
  if (q0 < yp1) {
    const unsigned items = unsigned(yp1 - q0) * unsigned(g.padded_w);
    for (unsigned k = tid; k < items; k += threads) {
      const int y = cf::reflect101(q0 + int(k / unsigned(g.padded_w)), g.height);
      const int xp = int(k % unsigned(g.padded_w));
      const int x = xp < w ? xp : cf::reflect101(xp, w);
      count(xp / g.tile_w, int(in[std::size_t(y) * w + x]));
    }
  }
}

/// The band split of clahe_hist.cu: blocks per tile row and padded rows per block, from the
/// number of blocks wanted (at most that many where min_rows allows: the kernel asks for the
/// blocks that fit on the device at once, so that no partial second wave runs alone) and the
/// fewest rows a block should get.
struct Bands {
  int bands, rows;
};
inline Bands split_bands(int tile_h, int tiles_y, int target_blocks, int min_rows) {
  int bands = target_blocks / tiles_y;
  if (bands < 1) bands = 1;
  int rows = (tile_h + bands - 1) / bands;
  if (rows < min_rows) rows = min_rows;
  if (rows > tile_h) rows = tile_h;
  bands = (tile_h + rows - 1) / rows;
  return {bands, rows};
}

}  // namespace histeq::kernels::clahe_detail
