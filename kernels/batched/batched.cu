// batched — equalization of N gray 8-bit images of any sizes: two launches per table of 64
// images of any sizes, or one launch (a queue) for N images of one size back to back.
// In:  images[i].d_in[0, n_i) u8, device memory, any alignment; n_i may be 0.
// Out: images[i].d_out[0, n_i) = lut_i[d_in] (in place allowed); d_luts[i·256, +256) = lut_i,
//      each byte-identical to the single-image path (histogram → make_lut → apply).
//      Scratch: batch_scratch_bytes(N) zeroed bytes (uint64 histograms + uint32 tickets), left
//      zero. Async on `stream`; no host sync.
// Exact: yes (integer histograms; lut_formula.hpp's formula via cdf_lut.cuh). Tuning:
//      BatchedPolicy (batched.hpp).
// Algorithm: the batch is cut into chunks of kChunkBytes; block b covers one chunk of one image
//      (uniform batches: image = b / blocks_per_image; tables: a binary search over the images'
//      first blocks). Launch 1: each block counts its chunk in a lane-column shared histogram
//      (columns.cuh: conflict-free whatever the data; privatization, PMPP 4th ed. ch. 9.4),
//      adds it to its image's global histogram, and the
//      image's last block (a ticket, as CUB's single-pass decoupled schemes) scans it into the
//      LUT (cub::BlockScan) and zeroes the histogram and ticket for the next call. Launch 2: each
//      block maps its chunk through its image's LUT held in shared memory. Uniform batches run
//      both passes in one launch instead (batch_queued_kernel: a work queue in which image i's
//      apply follows image i + lag's histogram, so image i is re-read from L2, not DRAM).
//      Histogram matching takes the two passes apart (launch_histogram_batch: launch 1's counts
//      into the caller's histograms, no ticket and no LUT; launch_apply_batch: launch 2 with the
//      caller's LUTs), since its LUT needs the reference (launch_match_lut_planes, between them).
#include "batched/batched.hpp"

#include <cooperative_groups.h>

#include <algorithm>
#include <string>

#include "equalize/cdf_lut.cuh"
#include "histeq/error.hpp"
#include "histogram/columns.cuh"
#include "support/cuda_check.hpp"
#include "support/device.hpp"
#include "support/pdl.cuh"

namespace histeq::kernels {
namespace {

using P = BatchedPolicy;
static_assert(P::kBlockSize == cdf::kLutBins, "one thread per bin in the last block's scan");
static_assert(P::kBlockSize % 32 == 0, "whole warps (lane columns)");
constexpr unsigned kColumnWords = columns::kSmemWords;  // 256 values × 32 lane columns, 32 KB

/// The part of one image a block covers: [begin, end) of image `image` (the map's own index).
struct Piece {
  const std::uint8_t* in;
  std::uint8_t* out;
  std::size_t begin, end;
  unsigned image;
  unsigned blocks_of_image;
};

/// count images of n bytes each, back to back.
struct UniformMap {
  const std::uint8_t* in;
  std::uint8_t* out;
  std::size_t n;
  unsigned blocks_per_image;
  __device__ Piece at(unsigned block) const {
    const unsigned i = block / blocks_per_image;
    const std::size_t begin = std::size_t(block - i * blocks_per_image) * P::kChunkBytes;
    const std::size_t off = std::size_t(i) * n;
    return {in + off, out + off, begin, min(begin + P::kChunkBytes, n), i, blocks_per_image};
  }
};

/// Up to kTableImages images of any sizes, described in the launch's parameters.
struct TableMap {
  int count;
  const std::uint8_t* in[P::kTableImages];
  std::uint8_t* out[P::kTableImages];
  std::size_t n[P::kTableImages];
  unsigned first_block[P::kTableImages + 1];  ///< prefix sums of blocks per image
  __device__ Piece at(unsigned block) const {
    int lo = 0, hi = count - 1;  // last image with first_block <= block (skips empty images)
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (first_block[mid] <= block)
        lo = mid;
      else
        hi = mid - 1;
    }
    const std::size_t begin = std::size_t(block - first_block[lo]) * P::kChunkBytes;
    return {in[lo],       out[lo],
            begin,        min(begin + P::kChunkBytes, n[lo]),
            unsigned(lo), first_block[lo + 1] - first_block[lo]};
  }
};

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

__device__ __forceinline__ unsigned map_word(const std::uint8_t* lut, unsigned a) {
  return unsigned(lut[a & 0xFFu]) | unsigned(lut[(a >> 8) & 0xFFu]) << 8 |
         unsigned(lut[(a >> 16) & 0xFFu]) << 16 | unsigned(lut[a >> 24]) << 24;
}

/// Zeroes the block's lane-column histogram (once per launch: count_chunk leaves it zero).
__device__ __forceinline__ void zero_columns(std::uint32_t* s_cols) {
  for (unsigned k = threadIdx.x; k < kColumnWords; k += P::kBlockSize) s_cols[k] = 0;
  __syncthreads();
}

/// The block's part of the counting: src[0,len) into the block's lane-column histogram s_cols
/// (word v·32 + lane, columns.cuh's layout: the 32 lanes of a warp always hit 32 different banks,
/// whatever the data), 16-byte loads when src is aligned; then each thread sums (and zeroes,
/// for the next chunk) one value's 32 columns and adds the sum into the image's global histogram
/// h[256].
__device__ __forceinline__ void count_into(const std::uint8_t* src, std::size_t len,
                                           std::uint32_t* s_cols, unsigned long long* h) {
  const unsigned t = threadIdx.x;
  const unsigned lane = t & 31u;
  std::uint32_t* col = s_cols + lane;
  std::size_t scalar_from = 0;
  if (aligned16(src)) {
    const std::size_t vectors = len / 16;
    const uint4* v = reinterpret_cast<const uint4*>(src);
#pragma unroll
    for (int k = 0; k < P::kVectorsPerThread; ++k) {
      const std::size_t j = std::size_t(k) * P::kBlockSize + t;
      if (j < vectors) {
        const uint4 x = __ldcg(v + j);  // not __ldg: in place, the apply writes these bytes later
        columns::count_word_u8(col, x.x);
        columns::count_word_u8(col, x.y);
        columns::count_word_u8(col, x.z);
        columns::count_word_u8(col, x.w);
      }
    }
    scalar_from = vectors * 16;
  }
  for (std::size_t j = scalar_from + t; j < len; j += P::kBlockSize) {
    columns::count_value(col, src[j]);
  }
  __syncthreads();

  // Thread t sums value t's 32 columns, starting at its own lane's column so that the 32 lanes
  // of a warp read 32 different banks, and leaves them zero.
  std::uint32_t sum = 0;
  std::uint32_t* row = s_cols + t * columns::kColumns;
#pragma unroll
  for (unsigned c = 0; c < columns::kColumns; ++c) {
    const unsigned k = (c + lane) & 31u;
    sum += row[k];
    row[k] = 0;
  }
  if (sum != 0) atomicAdd(&h[t], static_cast<unsigned long long>(sum));
}

/// count_into, then the image's LUT: returns true in every thread of the image's last block to
/// get here, after it has written the image's LUT (lut[256]) and zeroed h and the ticket for the
/// next call.
__device__ __forceinline__ bool count_chunk(const std::uint8_t* src, std::size_t len,
                                            std::uint32_t* s_cols, unsigned long long* h,
                                            unsigned* ticket, unsigned blocks_of_image, Formula f,
                                            std::uint8_t* lut, cdf::TempStorage& tmp,
                                            bool& s_last) {
  count_into(src, len, s_cols, h);
  const unsigned t = threadIdx.x;
  // The image's last block to finish turns its histogram into the LUT (threadFenceReduction).
  __threadfence();
  __syncthreads();
  if (t == 0) s_last = atomicAdd(ticket, 1u) == blocks_of_image - 1;
  __syncthreads();
  if (!s_last) return false;
  __threadfence();
  const std::uint64_t count = __ldcg(&h[t]);
  cdf::block_cdf_lut(
      count, [h](int v) { return std::uint64_t(__ldcg(&h[v])); }, f, lut, tmp);
  __syncthreads();  // every thread has read h[v0] before it is zeroed
  h[t] = 0;         // zeroed scratch: ready for the next call
  if (t == 0) *ticket = 0;
  __threadfence();  // the LUT and the zeroes before whatever the caller signals next
  __syncthreads();
  return true;
}

/// dst[0,len) = s_lut[src[0,len)], 16-byte loads and stores when both are aligned (kStream:
/// the stores with the evict-first hint, __stcs).
template <bool kStream = false>
__device__ __forceinline__ void apply_chunk(const std::uint8_t* src, std::uint8_t* dst,
                                            std::size_t len, const std::uint8_t* s_lut) {
  const unsigned t = threadIdx.x;
  std::size_t scalar_from = 0;
  if (aligned16(src) && aligned16(dst)) {
    const std::size_t vectors = len / 16;
    const uint4* vin = reinterpret_cast<const uint4*>(src);
    uint4* vout = reinterpret_cast<uint4*>(dst);
#pragma unroll
    for (int k = 0; k < P::kVectorsPerThread; ++k) {
      const std::size_t j = std::size_t(k) * P::kBlockSize + t;
      if (j < vectors) {
        uint4 x = vin[j];
        x.x = map_word(s_lut, x.x);
        x.y = map_word(s_lut, x.y);
        x.z = map_word(s_lut, x.z);
        x.w = map_word(s_lut, x.w);
        if constexpr (kStream)
          __stcs(vout + j, x);
        else
          vout[j] = x;
      }
    }
    scalar_from = vectors * 16;
  }
  for (std::size_t j = scalar_from + t; j < len; j += P::kBlockSize) dst[j] = s_lut[src[j]];
}

template <typename Map>
__global__ void __launch_bounds__(P::kBlockSize)
    batch_histogram_lut_kernel(Map map, Formula f, unsigned long long* hist, unsigned* tickets,
                               std::uint8_t* luts) {
  __shared__ std::uint32_t s_cols[kColumnWords];
  __shared__ cdf::TempStorage tmp;
  __shared__ bool s_last;
  pdl::allow_dependents();  // the apply may be scheduled meanwhile
  zero_columns(s_cols);
  const Piece p = map.at(blockIdx.x);
  count_chunk(p.in + p.begin, p.end - p.begin, s_cols, hist + std::size_t(p.image) * cdf::kLutBins,
              &tickets[p.image], p.blocks_of_image, f, luts + std::size_t(p.image) * cdf::kLutBins,
              tmp, s_last);
}

/// Matching's first launch (launch_histogram_batch): each block counts its chunk into its
/// image's histogram hists[image·256] (zeroed before); no LUT, which needs the reference.
template <typename Map>
__global__ void __launch_bounds__(P::kBlockSize)
    batch_histogram_kernel(Map map, unsigned long long* hists) {
  __shared__ std::uint32_t s_cols[kColumnWords];
  zero_columns(s_cols);
  const Piece p = map.at(blockIdx.x);
  count_into(p.in + p.begin, p.end - p.begin, s_cols, hists + std::size_t(p.image) * cdf::kLutBins);
}

/// Block b takes chunk gridDim.x − 1 − b (the chunks counted last are the likeliest still in L2
/// when a batch outgrows it, e.g. 64 × 1 MB against 60 MB) and stores with the evict-first hint,
/// so that the outputs do not push the inputs still to be read out of L2 (64 × 1M on the H200,
/// from Python: 87.1 → 82.7 µs against the plain order and stores).
template <typename Map>
__global__ void __launch_bounds__(P::kBlockSize)
    batch_apply_kernel(Map map, const std::uint8_t* luts) {
  __shared__ std::uint8_t s_lut[cdf::kLutBins];
  pdl::wait();  // the LUTs, and the images, of the launches before
  const Piece p = map.at(gridDim.x - 1 - blockIdx.x);
  s_lut[threadIdx.x] = luts[std::size_t(p.image) * cdf::kLutBins + threadIdx.x];
  __syncthreads();
  apply_chunk<true>(p.in + p.begin, p.out + p.begin, p.end - p.begin, s_lut);
}

/// The order of a uniform batch's work in the queued kernel: phases of blocks_per_image items,
/// "histogram image i" (H i) and "apply image i" (A i), A i placed `lag` phases after H i:
/// H0 … H(lag-1), then H(lag) A0 H(lag+1) A1 …, then the last A's.
struct PhaseOrder {
  unsigned count, lag;
  /// (is_apply, image) of phase q, q < 2·count.
  __device__ void at(unsigned q, bool& apply, unsigned& image) const {
    if (q < lag) {
      apply = false;
      image = q;
    } else if (q < lag + 2 * (count - lag)) {
      const unsigned r = q - lag;
      apply = (r & 1u) != 0;
      image = apply ? r / 2 : lag + r / 2;
    } else {
      apply = true;
      image = count - lag + (q - lag - 2 * (count - lag));
    }
  }
};

/// One launch for a uniform batch: a queue of items claimed in order with one atomic per item
/// (so every item before a claimed one is held by a running block); histogram items never wait,
/// and an apply item waits (spinning on its image's ready flag) only for histogram items claimed
/// before it — so the launch cannot deadlock whatever the grid size. The lag keeps an image's
/// bytes in L2 between its two passes: the batch is read from DRAM about once.
__global__ void __launch_bounds__(P::kBlockSize)
    batch_queued_kernel(UniformMap map, PhaseOrder order, Formula f, unsigned long long* hist,
                        unsigned* tickets, std::uint8_t* luts, unsigned* ready, unsigned epoch,
                        unsigned* work) {
  __shared__ std::uint32_t s_cols[kColumnWords];
  __shared__ cdf::TempStorage tmp;
  __shared__ std::uint8_t s_lut[cdf::kLutBins];
  __shared__ unsigned s_item;
  __shared__ bool s_last;
  const unsigned t = threadIdx.x;
  zero_columns(s_cols);
  const unsigned per_image = map.blocks_per_image;
  const unsigned total = 2 * order.count * per_image;
  for (;;) {
    if (t == 0) s_item = atomicAdd(&work[0], 1u);
    __syncthreads();
    const unsigned item = s_item;
    if (item >= total) break;
    bool apply;
    unsigned image;
    order.at(item / per_image, apply, image);
    const Piece p = map.at(image * per_image + item % per_image);
    std::uint8_t* lut = luts + std::size_t(image) * cdf::kLutBins;
    if (!apply) {
      if (count_chunk(p.in + p.begin, p.end - p.begin, s_cols,
                      hist + std::size_t(image) * cdf::kLutBins, &tickets[image], per_image, f, lut,
                      tmp, s_last) &&
          t == 0) {
        atomicExch(&ready[image], epoch);  // after count_chunk's fence: the LUT is visible
      }
    } else {
      if (t == 0) {
        while (atomicAdd(&ready[image], 0u) != epoch) __nanosleep(64);
        __threadfence();
      }
      __syncthreads();
      s_lut[t] = __ldcg(lut + t);
      __syncthreads();
      apply_chunk(p.in + p.begin, p.out + p.begin, p.end - p.begin, s_lut);
    }
    __syncthreads();  // s_item, s_cols, tmp and s_lut are reused by the next item
  }
  // The last block out resets the queue for the next launch (every block has made its last
  // claim before it counts itself out).
  if (t == 0) {
    __threadfence();
    if (atomicAdd(&work[1], 1u) == gridDim.x - 1) {
      work[0] = 0;
      work[1] = 0;
    }
  }
}

/// The warp that builds an image's LUT from its histogram s_hist[256] (lane l scans bins 8l ..
/// 8l + 7, then the 32 lane totals are scanned with shuffles): s_cdf = the inclusive CDF,
/// returns (in every lane) v0, the first non-empty bin (kLutBins when empty); total = cdf(255).
__device__ __forceinline__ int warp_cdf(const std::uint32_t* s_hist, std::uint32_t* s_cdf,
                                        std::uint32_t& total) {
  constexpr unsigned kFull = 0xFFFFFFFFu;
  constexpr int kPerLane = cdf::kLutBins / 32;
  const unsigned lane = threadIdx.x & 31u;
  std::uint32_t c[kPerLane];
  std::uint32_t run = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    run += s_hist[lane * kPerLane + i];
    c[i] = run;
  }
  std::uint32_t incl = run;
#pragma unroll
  for (unsigned o = 1; o < 32; o <<= 1) {
    const std::uint32_t y = __shfl_up_sync(kFull, incl, o);
    if (lane >= o) incl += y;
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) s_cdf[lane * kPerLane + i] = incl - run + c[i];
  total = __shfl_sync(kFull, incl, 31);
  const unsigned nonzero = __ballot_sync(kFull, run != 0);
  if (nonzero == 0) return cdf::kLutBins;
  const int first_lane = __ffs(int(nonzero)) - 1;
  // The first lane with counts finds its first non-empty bin (c[] is its running sum).
  int v0 = kPerLane;
#pragma unroll
  for (int i = kPerLane - 1; i >= 0; --i) {
    if (c[i] != 0) v0 = i;
  }
  return first_lane * kPerLane + __shfl_sync(kFull, v0, first_lane);
}

/// The cluster path: cluster c (blocks c·k .. c·k + k − 1, k = the cluster's size) equalizes
/// image c of n bytes (n % 16 == 0, 16-byte aligned). Block r of the cluster holds vectors
/// [r·per, (r+1)·per) of the image, per = ceil(n/16 / k) ≤ kClusterThreads · kClusterVectors, in
/// registers: loaded once (evict-first: nothing reads them again), counted into the block's
/// lane-column histogram, folded to 256 counts; cluster barrier; each block sums the k blocks'
/// counts through distributed shared memory (Hopper thread-block clusters, CUDA C++ Programming
/// Guide "Distributed Shared Memory"), one warp scans them into the LUT (the same lut_value as
/// every path), and every thread maps the vectors it holds and stores them (evict-first). The
/// image is read from DRAM once; there is no second pass, no global atomic and no scratch.
template <int T>
__global__ void __launch_bounds__(T, 1024 / T)
    batch_cluster_kernel(const std::uint8_t* in, std::uint8_t* out, std::size_t n, Formula f,
                         std::uint8_t* luts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  constexpr int V = P::kClusterVectors;
  __shared__ std::uint32_t s_cols[kColumnWords];
  __shared__ std::uint32_t s_part[cdf::kLutBins];  // this block's counts, read by the cluster
  __shared__ std::uint32_t s_hist[cdf::kLutBins];  // the image's counts
  __shared__ std::uint32_t s_cdf[cdf::kLutBins];
  __shared__ std::uint8_t s_lut[cdf::kLutBins];
  __shared__ int s_v0;
  __shared__ std::uint32_t s_total;
  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned t = threadIdx.x;
  const unsigned k = cluster.num_blocks(), rank = cluster.block_rank();
  const std::size_t image = blockIdx.x / k;
  const std::size_t vectors = n / 16, per = (vectors + k - 1) / k;
  const std::size_t first = min(vectors, per * rank);
  const unsigned len = unsigned(min(vectors, first + per) - first);
  const uint4* vin = reinterpret_cast<const uint4*>(in + image * n) + first;
  uint4* vout = reinterpret_cast<uint4*>(out + image * n) + first;

  uint4 x[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const unsigned i = unsigned(j) * T + t;
    if (i < len) x[j] = __ldcs(vin + i);
  }
  for (unsigned w = t; w < kColumnWords; w += T) s_cols[w] = 0;
  __syncthreads();
  std::uint32_t* col = s_cols + (t & 31u);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if (unsigned(j) * T + t < len) {
      columns::count_word_u8(col, x[j].x);
      columns::count_word_u8(col, x[j].y);
      columns::count_word_u8(col, x[j].z);
      columns::count_word_u8(col, x[j].w);
    }
  }
  __syncthreads();
  if (t < cdf::kLutBins) {  // value t's 32 columns, from the thread's own lane: no conflicts
    const std::uint32_t* row = s_cols + t * columns::kColumns;
    std::uint32_t sum = 0;
#pragma unroll
    for (unsigned c = 0; c < columns::kColumns; ++c) sum += row[(c + t) & 31u];
    s_part[t] = sum;
  }
  cluster.sync();  // every block's s_part is written (and every block of the cluster runs)
  if (t < cdf::kLutBins) {
    std::uint32_t h = 0;
    for (unsigned r = 0; r < k; ++r) h += cluster.map_shared_rank(s_part, r)[t];
    s_hist[t] = h;
  }
  cluster.barrier_arrive();  // done with the other blocks' s_part; waited for before exit
  __syncthreads();
  if (t < 32) {
    std::uint32_t total = 0;
    const int v0 = warp_cdf(s_hist, s_cdf, total);
    if (t == 0) {
      s_v0 = v0;
      s_total = total;
    }
  }
  __syncthreads();
  if (t < cdf::kLutBins) {
    const int v0 = s_v0;
    const std::uint8_t e =
        cdf::lut_value(int(t), s_cdf[t], v0, v0 < cdf::kLutBins ? s_hist[v0] : 0, s_total, f);
    s_lut[t] = e;
    if (rank == 0) luts[image * cdf::kLutBins + t] = e;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const unsigned i = unsigned(j) * T + t;
    if (i < len) {
      uint4 y;
      y.x = map_word(s_lut, x[j].x);
      y.y = map_word(s_lut, x[j].y);
      y.z = map_word(s_lut, x[j].z);
      y.w = map_word(s_lut, x[j].w);
      __stcs(vout + i, y);
    }
  }
  cluster.barrier_wait();  // no block leaves while another may still read its s_part
#endif
}

std::size_t blocks_for(std::size_t n) { return (n + P::kChunkBytes - 1) / P::kChunkBytes; }

constexpr std::size_t kNoImage = ~std::size_t(0);

/// Refuses null pointers and overlapping (not identical) buffers, naming `what` and, where it
/// is one of a batch, the image (the message built only when it throws: this runs per image).
void check_overlap(const std::uint8_t* in, const std::uint8_t* out, std::size_t n,
                   const std::string& what, std::size_t image = kNoImage) {
  const auto a = reinterpret_cast<std::uintptr_t>(in), b = reinterpret_cast<std::uintptr_t>(out);
  const bool null = n > 0 && (in == nullptr || out == nullptr);
  if (!null && !(a != b && a < b + n && b < a + n)) return;
  const std::string who = image == kNoImage ? what : what + ": image " + std::to_string(image);
  if (null) throw UsageError(who + ": null device pointer");
  throw UsageError(who + ": input and output overlap without being the same buffer");
}

constexpr std::size_t kMaxGrid = 0x7FFFFFFF;

/// The apply launch of a batch: image i's chunks through its LUT luts[i·256] (after the launch
/// before it in the stream, programmatically where the edge is on).
template <typename Map>
void launch_apply(const Map& map, std::size_t blocks, const std::uint8_t* luts, cudaStream_t stream,
                  const Tuning& t) {
  pdl::launch(pdl::kBatchApply, t, batch_apply_kernel<Map>, dim3(unsigned(blocks)),
              dim3(P::kBlockSize), 0, stream, map, luts);
}

template <typename Map>
void launch_pair(const Map& map, std::size_t blocks, Formula f, unsigned long long* hist,
                 unsigned* tickets, std::uint8_t* luts, cudaStream_t stream, const Tuning& t) {
  if (blocks == 0) return;
  if (blocks > kMaxGrid) throw UsageError("equalize_batch: batch too large for one grid");
  batch_histogram_lut_kernel<Map>
      <<<unsigned(blocks), P::kBlockSize, 0, stream>>>(map, f, hist, tickets, luts);
  HISTEQ_CUDA_CHECK_LAUNCH();
  launch_apply(map, blocks, luts, stream, t);
}

/// The map of the table of images[base, base + kTableImages) (of `count`), checked as `what`;
/// *blocks: its blocks.
TableMap table_at(const BatchImage* images, std::size_t count, std::size_t base,
                  std::size_t* blocks, const std::string& what) {
  TableMap map{};
  map.count = int(std::min<std::size_t>(P::kTableImages, count - base));
  std::size_t b = 0;
  for (int k = 0; k < map.count; ++k) {
    const BatchImage& im = images[base + std::size_t(k)];
    check_overlap(im.d_in, im.d_out, im.n, what, base + std::size_t(k));
    map.in[k] = im.d_in;
    map.out[k] = im.d_out;
    map.n[k] = im.n;
    map.first_block[k] = unsigned(b);
    b += blocks_for(im.n);
    if (b > kMaxGrid) throw UsageError(what + ": batch too large for one grid");
  }
  map.first_block[map.count] = unsigned(b);
  *blocks = b;
  return map;
}

/// The zeroed scratch, laid out by its capacity C (not by the call's count, so that calls of
/// different counts never see each other's flags as counts): hist[C·256] uint64, tickets[C],
/// ready[C] (uniform batches' per-image epoch flags), work[2] (the queue counters).
struct Scratch {
  unsigned long long* hist;
  unsigned* tickets;
  unsigned* ready;
  unsigned* work;
  std::size_t capacity;
};
constexpr std::size_t kPerImageBytes = cdf::kLutBins * sizeof(std::uint64_t) + 2 * sizeof(unsigned);
constexpr std::size_t kFixedBytes = 2 * sizeof(unsigned);

Scratch split(void* d, std::size_t bytes, std::size_t count) {
  const std::size_t cap = bytes < kFixedBytes ? 0 : (bytes - kFixedBytes) / kPerImageBytes;
  if (d == nullptr || cap < count) {
    throw UsageError("equalize_batch: scratch of " + std::to_string(bytes) + " bytes holds " +
                     std::to_string(cap) + " images, " + std::to_string(count) + " needed");
  }
  auto* hist = static_cast<unsigned long long*>(d);
  auto* tickets = reinterpret_cast<unsigned*>(hist + cap * cdf::kLutBins);
  return {hist, tickets, tickets + cap, tickets + 2 * cap, cap};
}

}  // namespace

std::size_t batch_scratch_bytes(std::size_t count) { return kFixedBytes + count * kPerImageBytes; }

void launch_equalize_batch(const BatchImage* images, std::size_t count, Formula f,
                           std::uint8_t* d_luts, void* d_zeroed_scratch, std::size_t scratch_bytes,
                           cudaStream_t stream, const Tuning& t) {
  if (count == 0) return;
  if (images == nullptr || d_luts == nullptr) throw UsageError("equalize_batch: null pointer");
  const Scratch s = split(d_zeroed_scratch, scratch_bytes, count);
  for (std::size_t base = 0; base < count; base += P::kTableImages) {
    std::size_t blocks = 0;
    const TableMap map = table_at(images, count, base, &blocks, "equalize_batch");
    launch_pair(map, blocks, f, s.hist + base * cdf::kLutBins, s.tickets + base,
                d_luts + base * cdf::kLutBins, stream, t);
  }
}

void launch_histogram_batch(const BatchImage* images, std::size_t count, std::uint64_t* d_hists,
                            cudaStream_t stream) {
  if (count == 0) return;
  if (images == nullptr || d_hists == nullptr) throw UsageError("histogram_batch: null pointer");
  HISTEQ_CUDA_CHECK(
      cudaMemsetAsync(d_hists, 0, count * cdf::kLutBins * sizeof(std::uint64_t), stream));
  auto* hists = reinterpret_cast<unsigned long long*>(d_hists);
  for (std::size_t base = 0; base < count; base += P::kTableImages) {
    std::size_t blocks = 0;
    const TableMap map = table_at(images, count, base, &blocks, "histogram_batch");
    if (blocks == 0) continue;
    batch_histogram_kernel<TableMap>
        <<<unsigned(blocks), P::kBlockSize, 0, stream>>>(map, hists + base * cdf::kLutBins);
    HISTEQ_CUDA_CHECK_LAUNCH();
  }
}

void launch_apply_batch(const BatchImage* images, std::size_t count, const std::uint8_t* d_luts,
                        cudaStream_t stream, const Tuning& t) {
  if (count == 0) return;
  if (images == nullptr || d_luts == nullptr) throw UsageError("apply_batch: null pointer");
  for (std::size_t base = 0; base < count; base += P::kTableImages) {
    std::size_t blocks = 0;
    const TableMap map = table_at(images, count, base, &blocks, "apply_batch");
    if (blocks > 0) launch_apply(map, blocks, d_luts + base * cdf::kLutBins, stream, t);
  }
}

void launch_equalize_batch_uniform(const std::uint8_t* d_in, std::uint8_t* d_out, std::size_t count,
                                   std::size_t n, Formula f, std::uint8_t* d_luts,
                                   void* d_zeroed_scratch, std::size_t scratch_bytes,
                                   unsigned epoch, cudaStream_t stream) {
  if (count == 0 || n == 0) return;
  if (d_luts == nullptr) throw UsageError("equalize_batch: null pointer");
  if (epoch == 0) throw UsageError("equalize_batch: epoch 0 is the flags' initial value");
  check_overlap(d_in, d_out, count * n, "equalize_batch");
  const std::size_t per_image = blocks_for(n);
  if (per_image > kMaxGrid || count > kMaxGrid / (2 * per_image)) {
    throw UsageError("equalize_batch: batch too large for one queue");
  }
  const Scratch s = split(d_zeroed_scratch, scratch_bytes, count);
  const UniformMap map{d_in, d_out, n, unsigned(per_image)};
  const std::size_t resident =
      detail::resident_blocks(reinterpret_cast<const void*>(batch_queued_kernel), P::kBlockSize, 0);
  const std::size_t items = 2 * count * per_image;
  const std::size_t grid = std::max<std::size_t>(1, std::min(items, resident));
  // Lag: the apply of image i is queued after the histogram of image i + lag: at least the
  // images the grid has in flight at once (so an apply rarely waits), at most what keeps
  // kLagBytes of them in L2 between their two passes.
  const std::size_t in_flight = (grid + per_image - 1) / per_image + 1;
  const std::size_t by_l2 = std::max<std::size_t>(1, P::kLagBytes / n);
  const std::size_t lag = std::min(count, std::max(in_flight, by_l2));
  const PhaseOrder order{unsigned(count), unsigned(lag)};
  batch_queued_kernel<<<unsigned(grid), P::kBlockSize, 0, stream>>>(
      map, order, f, s.hist, s.tickets, d_luts, s.ready, epoch, s.work);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

void launch_equalize_batch_uniform_pair(const std::uint8_t* d_in, std::uint8_t* d_out,
                                        std::size_t count, std::size_t n, Formula f,
                                        std::uint8_t* d_luts, void* d_zeroed_scratch,
                                        std::size_t scratch_bytes, cudaStream_t stream,
                                        const Tuning& t) {
  if (count == 0 || n == 0) return;
  if (d_luts == nullptr) throw UsageError("equalize_batch: null pointer");
  check_overlap(d_in, d_out, count * n, "equalize_batch");
  const std::size_t per_image = blocks_for(n);
  if (per_image > kMaxGrid || count > kMaxGrid / per_image) {
    throw UsageError("equalize_batch: batch too large for one grid");
  }
  const Scratch s = split(d_zeroed_scratch, scratch_bytes, count);
  const UniformMap map{d_in, d_out, n, unsigned(per_image)};
  launch_pair(map, count * per_image, f, s.hist, s.tickets, d_luts, stream, t);
}

namespace {

using ClusterKernel = void (*)(const std::uint8_t*, std::uint8_t*, std::size_t, Formula,
                               std::uint8_t*);
ClusterKernel cluster_kernel(int threads) {
  return threads == P::kClusterThreadsSmall ? batch_cluster_kernel<P::kClusterThreadsSmall>
                                            : batch_cluster_kernel<P::kClusterThreads>;
}

/// The launch configuration of `clusters` clusters of k blocks of `threads` threads (the
/// attribute lives beside the configuration that points at it).
struct ClusterLaunch {
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr{};
  ClusterLaunch(int threads, int k, std::size_t clusters, cudaStream_t stream) {
    cfg.gridDim = dim3(unsigned(clusters * std::size_t(k)));
    cfg.blockDim = dim3(unsigned(threads));
    cfg.stream = stream;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = unsigned(k);
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

/// Whether clusters of k batch_cluster_kernel blocks of `threads` threads fit the current device
/// (memoized per device, size and k): compute capability 9.0 or later and
/// cudaOccupancyMaxActiveClusters > 0.
bool cluster_fits(int threads, int k) {
  static const char tags[2][P::kMaxClusterBlocks + 1] = {};
  return detail::per_device_once(&tags[threads == P::kClusterThreads ? 1 : 0][k], [threads, k] {
           if (!detail::sm90_or_newer()) return 0;
           if (k > 8) {
             HISTEQ_CUDA_CHECK(cudaFuncSetAttribute(
                 cluster_kernel(threads), cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
           }
           ClusterLaunch l(threads, k, 1, nullptr);
           return detail::clusters_fit(reinterpret_cast<const void*>(cluster_kernel(threads)),
                                       l.cfg)
                      ? 1
                      : 0;
         }) != 0;
}

}  // namespace

int cluster_batch_threads(std::size_t n, const Tuning& t) {
  if (t.batch.cluster_threads == P::kClusterThreadsSmall ||
      t.batch.cluster_threads == P::kClusterThreads) {
    return t.batch.cluster_threads;
  }
  const std::size_t small_holds =
      std::size_t(P::kMaxClusterBlocks) * P::kClusterThreadsSmall * P::kClusterVectors * 16;
  return n <= small_holds ? P::kClusterThreadsSmall : P::kClusterThreads;
}

int cluster_batch_blocks(const std::uint8_t* d_in, const std::uint8_t* d_out, std::size_t count,
                         std::size_t n, const Tuning& t) {
  const auto aligned = [](const void* p) {
    return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
  };
  if (count == 0 || n % 16 != 0 || n < P::kClusterMinBytes || !aligned(d_in) || !aligned(d_out)) {
    return 0;
  }
  const int threads = cluster_batch_threads(n, t);
  const std::size_t block_bytes = std::size_t(threads) * P::kClusterVectors * 16;
  for (int k = 1; k <= P::kMaxClusterBlocks; k *= 2) {
    if (n <= std::size_t(k) * block_bytes) {
      if (count > kMaxGrid / std::size_t(k) || !cluster_fits(threads, k)) return 0;
      return k;
    }
  }
  return 0;
}

void launch_equalize_batch_uniform_cluster(const std::uint8_t* d_in, std::uint8_t* d_out,
                                           std::size_t count, std::size_t n, Formula f,
                                           std::uint8_t* d_luts, cudaStream_t stream,
                                           const Tuning& t) {
  if (count == 0 || n == 0) return;
  if (d_luts == nullptr) throw UsageError("equalize_batch: null pointer");
  check_overlap(d_in, d_out, count * n, "equalize_batch");
  const int k = cluster_batch_blocks(d_in, d_out, count, n, t);
  if (k == 0) {
    throw UsageError("equalize_batch: the cluster path cannot serve " + std::to_string(count) +
                     " images of " + std::to_string(n) + " bytes here (cluster_batch_blocks)");
  }
  const int threads = cluster_batch_threads(n, t);
  ClusterLaunch l(threads, k, count, stream);
  HISTEQ_CUDA_CHECK(cudaLaunchKernelEx(&l.cfg, cluster_kernel(threads), d_in, d_out, n, f, d_luts));
}

BatchPath choose_batch_path(const std::uint8_t* d_in, const std::uint8_t* d_out, std::size_t count,
                            std::size_t n, const Tuning& t) {
  if (cluster_batch_blocks(d_in, d_out, count, n, t) > 0) return BatchPath::cluster;
  return count * n >= P::kQueuedMinBytes ? BatchPath::queued : BatchPath::two_launch;
}

}  // namespace histeq::kernels
