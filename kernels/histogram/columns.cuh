// columns.cuh — the lane-owned shared-memory column histogram, as templates so that the registry
// entry (columns.cu), the fused equalizer and the tuning probe (bench/probes/) share one body.
//
// Layout: one block-private histogram of 256 raw sample values × 32 lane columns of uint32,
// word (v·32 + lane) (32 KB). Lane l of every warp only touches column l, so the 32 lanes of a
// warp always hit 32 different banks, whatever the data (hot and constant inputs included):
// a warp's shared atomic is one conflict-free wavefront. Warps of one block share columns, so
// the adds are shared atomics (native ATOMS on sm_90). Raw byte values are counted; the fold
// to `bins` bins happens once per block at the merge, so any bins ≤ 256 costs nothing extra.
// Input is read with 16-byte loads, kUnroll of them in flight per thread, streaming (evict-first)
// since every byte is read once; scalar head/tail make any alignment and size work.
// Ideas: Gómez-Luna et al., "An optimized approach to histogram computation on GPU" (replicated
// sub-histograms, bank-aware layout); PMPP 4th ed. ch. 9 (privatization, coarsening).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace histeq::kernels::columns {

inline constexpr int kValues = 256;  // raw sample values counted per block
inline constexpr int kColumns = 32;  // one column per lane
inline constexpr int kSmemWords = kValues * kColumns;

/// Adds one sample value (0..255) to the calling lane's column.
__device__ __forceinline__ void count_value(std::uint32_t* lane_col, std::uint32_t v) {
  atomicAdd(lane_col + (v << 5), 1u);
}

/// u8: the four bytes of a 32-bit word.
__device__ __forceinline__ void count_word_u8(std::uint32_t* lane_col, std::uint32_t w) {
  count_value(lane_col, w & 0xFFu);
  count_value(lane_col, (w >> 8) & 0xFFu);
  count_value(lane_col, (w >> 16) & 0xFFu);
  count_value(lane_col, w >> 24);
}

/// i32: one sample, counted only when it is a valid bin index (< bins ≤ 256).
__device__ __forceinline__ void count_i32(std::uint32_t* lane_col, int v, int bins) {
  if (static_cast<unsigned>(v) < static_cast<unsigned>(bins)) count_value(lane_col, unsigned(v));
}

template <typename T>
struct Vec;
template <>
struct Vec<std::uint8_t> {
  using type = uint4;
  static constexpr int kPer = 16;
  __device__ __forceinline__ static void count(std::uint32_t* c, const uint4& r, int) {
    count_word_u8(c, r.x);
    count_word_u8(c, r.y);
    count_word_u8(c, r.z);
    count_word_u8(c, r.w);
  }
  __device__ __forceinline__ static void count1(std::uint32_t* c, std::uint8_t v, int) {
    count_value(c, v);
  }
};
template <>
struct Vec<std::int32_t> {
  using type = int4;
  static constexpr int kPer = 4;
  __device__ __forceinline__ static void count(std::uint32_t* c, const int4& r, int bins) {
    count_i32(c, r.x, bins);
    count_i32(c, r.y, bins);
    count_i32(c, r.z, bins);
    count_i32(c, r.w, bins);
  }
  __device__ __forceinline__ static void count1(std::uint32_t* c, std::int32_t v, int bins) {
    count_i32(c, v, bins);
  }
};

/// The input split for vector loads: [0,head) scalar, then nvec aligned vectors, then a scalar
/// tail of < kPer samples.
template <typename T>
struct Split {
  std::size_t head, nvec, tail_start;
  __device__ __forceinline__ Split(const T* in, std::size_t n) {
    constexpr std::size_t kAlign = 16;
    const std::size_t mis = reinterpret_cast<std::uintptr_t>(in) % kAlign;
    // T-aligned pointers only (a misaligned int32 pointer is not a valid int32 array).
    head = mis == 0 ? 0 : (kAlign - mis) / sizeof(T);
    if (head > n) head = n;
    nvec = (n - head) / Vec<T>::kPer;
    tail_start = head + nvec * Vec<T>::kPer;
  }
};

/// 16-byte load: streaming (evict-first, for inputs much larger than L2, read once) or default
/// caching (inputs that fit in L2, so a second pass such as apply, or a repeat, hits L2).
template <bool kStream, typename VT>
__device__ __forceinline__ VT load_vec(const VT* p) {
  if constexpr (kStream)
    return __ldcs(p);
  else
    return __ldg(p);
}

/// Zeroes the block's columns. Caller syncs.
template <int kBlock>
__device__ __forceinline__ void zero_columns(std::uint32_t* cols) {
  uint4* c4 = reinterpret_cast<uint4*>(cols);
  for (int i = threadIdx.x; i < kSmemWords / 4; i += kBlock) c4[i] = make_uint4(0, 0, 0, 0);
}

/// Counts this block's share of in[0,n) into cols (grid-stride over 16-byte vectors, kUnroll
/// loads in flight per thread). Blocks `first_block`.. of a grid of `grid` blocks take part.
/// kPrefetch: software pipelining — the next tile's loads are issued before the current tile is
/// counted, so a thread never waits a full memory latency between tiles (twice the registers).
template <typename T, int kBlock, int kUnroll, bool kStream = true, bool kPrefetch = false>
__device__ __forceinline__ void count_block(const T* __restrict__ in, std::size_t n, int bins,
                                            std::uint32_t* cols, unsigned block, unsigned grid) {
  using V = Vec<T>;
  using VT = typename V::type;
  std::uint32_t* lane_col = cols + (threadIdx.x & 31);
  const Split<T> s(in, n);
  const std::size_t gtid = std::size_t(block) * kBlock + threadIdx.x;
  if (gtid < s.head) V::count1(lane_col, in[gtid], bins);
  if (gtid < n - s.tail_start) V::count1(lane_col, in[s.tail_start + gtid], bins);

  const VT* __restrict__ vin = reinterpret_cast<const VT*>(in + s.head);
  const std::size_t stride = std::size_t(grid) * kBlock;
  const std::size_t tile = kUnroll * stride;
  std::size_t i = gtid;
  if constexpr (kPrefetch) {
    if (i + (kUnroll - 1) * stride < s.nvec) {
      VT cur[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) cur[u] = load_vec<kStream>(vin + i + u * stride);
      for (;;) {
        const std::size_t next = i + tile;
        const bool more = next + (kUnroll - 1) * stride < s.nvec;
        VT nxt[kUnroll];
        if (more) {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) nxt[u] = load_vec<kStream>(vin + next + u * stride);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) V::count(lane_col, cur[u], bins);
        i = next;
        if (!more) break;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) cur[u] = nxt[u];
      }
    }
  } else {
    for (; i + (kUnroll - 1) * stride < s.nvec; i += tile) {
      VT r[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) r[u] = load_vec<kStream>(vin + i + u * stride);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) V::count(lane_col, r[u], bins);
    }
  }
  for (; i < s.nvec; i += stride) V::count(lane_col, load_vec<kStream>(vin + i), bins);
}

/// Sum of value v's 32 columns; lanes start at different columns so a warp reading 32 values at
/// once hits 32 different banks.
__device__ __forceinline__ std::uint32_t column_sum(const std::uint32_t* cols, int v) {
  std::uint32_t s = 0;
#pragma unroll 8
  for (int j = 0; j < kColumns; ++j) s += cols[(v << 5) + ((j + v) & 31)];
  return s;
}

/// Calls f(v, count) once for each raw value v (0..255) with the block's count of v. With 256,
/// 512 or 1024 threads each value's 32 columns are summed by kBlock / 256 threads together
/// (thread t sums 32 / (kBlock/256) columns of value t / (kBlock/256), then the partial sums
/// meet by warp shuffles), so the chain of shared loads per thread is up to 4× shorter than one
/// thread reading all 32; other block sizes (probes) loop with column_sum. Lanes of a warp start
/// at different columns, so each load step hits 32 different banks. Every thread of the block
/// must call it (it shuffles). Measured (docs/probes/2026-11-30-tail-probe.txt, M0 → M1, and
/// fused opt=1 in -2.txt): 0–0.3 µs per launch at 64K–64M, within noise at some sizes.
template <int kBlock, typename F>
__device__ __forceinline__ void for_each_value_sum(const std::uint32_t* cols, F&& f) {
  if constexpr (kBlock == 256 || kBlock == 512 || kBlock == 1024) {
    constexpr int kPer = kBlock / kValues;  // threads per value
    constexpr int kSpan = kColumns / kPer;  // columns per thread
    const int t = threadIdx.x, value = t / kPer, part = t % kPer;
    std::uint32_t s = 0;
#pragma unroll
    for (int j = 0; j < kSpan; ++j) s += cols[(value << 5) + ((part * kSpan + j + value) & 31)];
#pragma unroll
    for (int off = kPer / 2; off > 0; off >>= 1) s += __shfl_down_sync(0xFFFFFFFFu, s, off);
    if (part == 0) f(value, s);
  } else {
    for (int v = threadIdx.x; v < kValues; v += kBlock) f(v, column_sum(cols, v));
  }
}

/// Bin of raw value v for the sample type (u8: (v·bins)/256; i32: v is already the bin).
template <typename T>
__device__ __forceinline__ int fold(int v, int bins) {
  return sizeof(T) == 1 ? (v * bins) >> 8 : v;
}

/// Grid-wide state of one histogram call, in the caller's scratch (all zero on entry, all zero
/// again when the last block is done): an accumulator per bin and the last-block ticket.
struct GridState {
  unsigned long long acc[kValues];
  unsigned ticket;
};

/// Adds this block's count c of bin b to the grid accumulator (global 64-bit atomic).
__device__ __forceinline__ void add_to_grid(GridState* g, int b, std::uint32_t c) {
  atomicAdd(&g->acc[b], static_cast<unsigned long long>(c));
}

/// The last-block-done merge (the CUDA samples' threadFenceReduction pattern): after every
/// thread of the block has added its counts to g->acc, the block takes a ticket; the block that
/// draws the last one (gridDim.x − 1) moves acc[0,bins) into hist and zeroes acc. atomicInc with
/// limit gridDim.x − 1 wraps the ticket back to 0, so the state is zero again for the next
/// call and no memset launch is needed. Returns after the copy in the last block.
/// One fence per block, not per thread: the block's adds are ordered before thread 0's fence by
/// the barrier, and the fence is cumulative (cooperative_groups' grid sync does the same:
/// bar.sync, then thread 0 fences and takes the ticket). Measured 0.2–0.3 µs faster than a fence
/// in every thread (docs/probes/2026-11-30-tail-probe.txt, M1 → M2).
__device__ __forceinline__ void finish_grid(GridState* g, int bins,
                                            unsigned long long* __restrict__ hist) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicInc(&g->ticket, gridDim.x - 1) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) hist[b] = atomicExch(&g->acc[b], 0ull);
}

/// The registry kernel: count, sum each value's 32 columns (for_each_value_sum), fold the 256
/// values to `bins` bins in shared memory (u8 with fewer than 256 bins: several values share a
/// bin, and folding them here keeps the global atomics at one per bin per block — folding in
/// global memory made 16 bins 3x slower), then one global 64-bit atomicAdd per non-zero bin per
/// block into the grid accumulator, and the last block writes d_hist (finish_grid): one launch,
/// no memset of d_hist before it.
template <typename T, int kBlock, int kUnroll, int kMinBlocks, bool kStream = true,
          bool kPrefetch = false>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    histogram_kernel(const T* __restrict__ in, std::size_t n, int bins,
                     unsigned long long* __restrict__ hist, GridState* __restrict__ grid_state) {
  __shared__ __align__(16) std::uint32_t cols[kSmemWords];
  __shared__ std::uint32_t folded[kValues];
  zero_columns<kBlock>(cols);
  for (int b = threadIdx.x; b < kValues; b += kBlock) folded[b] = 0;
  __syncthreads();
  count_block<T, kBlock, kUnroll, kStream, kPrefetch>(in, n, bins, cols, blockIdx.x, gridDim.x);
  __syncthreads();
  const bool fold_needed = sizeof(T) == 1 && bins < kValues;
  for_each_value_sum<kBlock>(cols, [&](int v, std::uint32_t c) {
    if (c == 0) return;
    if (fold_needed) {
      atomicAdd(&folded[fold<T>(v, bins)], c);
    } else {
      add_to_grid(grid_state, v, c);
    }
  });
  if (fold_needed) {
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += kBlock) {
      if (folded[b]) add_to_grid(grid_state, b, folded[b]);
    }
  }
  finish_grid(grid_state, bins, hist);
}

}  // namespace histeq::kernels::columns
