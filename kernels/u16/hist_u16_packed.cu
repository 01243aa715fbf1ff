// hist_u16_packed — the 65536-bin histogram of 16-bit samples with ONE block per SM holding all
// 65536 counters: 16-bit counters packed two to a 32-bit shared word (128 KiB), then the
// per-block partial histograms summed by a second kernel.
// In:  d_in[0,n) u16, 2-byte aligned. Out: d_hist[0,65536) uint64, counts ADDED, or written
//      when `assign` (then d_hist needs no zeroing). Scratch: d_scratch,
//      hist_u16_scratch_words() uint32: per-block partials (any contents) and a 65536-entry
//      uint64 spill (ZERO on first use, left zero). Async; no host sync.
// Exact: yes: the packed counters and their spill rule are packed16.cuh's (a 16-bit half kept
//      below 0x8000, the add that crosses it spilling 32768 into the bin's uint64 spill exactly
//      once). At the end every half is below 0x8000, so two blocks' words add without a carry
//      between halves.
// Why it is fast: the input is read once with 16-byte loads, kPackedVectorsInFlight per thread
//      in flight; each sample costs one shared atomic with no remote (DSMEM) traffic and about
//      seven other instructions (packed16.cuh: one crossing test per vector instead of a compare
//      and branch per sample; ncu, H200, 64M samples: the former 15 instructions per sample kept
//      the integer pipe 64-70 % busy, beside the bank conflicts of the shared atomics), and the
//      words' bank hash (packed16::word_of<true>), which spreads smooth data's neighbouring
//      samples over the banks: the shared atomics of 64M natural samples took 5.2 wavefronts
//      each (3.7 for uniform samples), which set the pace once the instructions were fewer (64M
//      natural 60.6 → 56.3 µs, uniform 51.7 → 53.0, H200). The counters of a block never leave
//      the SM until the end; with kPackedPairs the two blocks of a cluster (sm_90 distributed
//      shared memory) add
//      their words before writing them, so 64 KiB of partials per SM (8.3 MiB for 132 SMs,
//      L2-resident) are written and summed column-wise by the second kernel (16-byte loads, every
//      row of a thread in flight at once), which also adds and clears the spill and writes (or adds
//      to) the histogram: no memset launch.
// Tuning: HistU16Policy::kPacked* (policy.hpp); Hist16Tuning::pairs (histeq/tuning.hpp).
//      Measured: docs/kernels.md,
//      "hist_u16". Source: privatization, PMPP 4th ed. ch. 9; distributed shared memory, the
//      CUDA Programming Guide (thread block clusters); the sub-word counters with a spill to a
//      wider level are this file's.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "support/cuda_check.hpp"
#include "support/device.hpp"
#include "support/pdl.cuh"
#include "u16/hist_u16.hpp"
#include "u16/packed16.cuh"
#include "u16/policy.hpp"

namespace histeq::kernels {
namespace {
namespace cg = cooperative_groups;
using P = HistU16Policy;
constexpr int kWords = 32768;
constexpr int kBins = 65536;

/// Adds a crossing's 32768 to the bin's global spill counter (packed16.cuh).
struct GlobalSpill {
  unsigned long long* spill;
  __device__ __forceinline__ void operator()(unsigned v) const { atomicAdd(spill + v, 32768ull); }
};

/// Counts this block's share of d_in into s_words (zeroed here), kIn 16-byte loads in flight per
/// thread, the words hashed (packed16::word_of<true>). Ends synchronized.
__device__ __forceinline__ void count_block(const std::uint16_t* __restrict__ in, std::size_t n,
                                            std::uint32_t* s_words, unsigned long long* d_spill) {
  constexpr int kIn = P::kPackedVectorsInFlight;
  GlobalSpill spill{d_spill};
  for (int i = threadIdx.x; i < kWords; i += blockDim.x) s_words[i] = 0;
  __syncthreads();
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(in);
  const std::size_t head = std::min<std::size_t>(n, ((16 - addr % 16) % 16) / 2);
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t threads = std::size_t(gridDim.x) * blockDim.x;
  if (tid < head) packed16::count_one<true>(s_words, in[tid], spill);
  const std::size_t vecs = (n - head) / 8;
  const uint4* v4 = reinterpret_cast<const uint4*>(in + head);
  std::size_t k = tid;
  for (; k + (kIn - 1) * threads < vecs; k += kIn * threads) {
    uint4 q[kIn];
#pragma unroll
    for (int i = 0; i < kIn; ++i) q[i] = __ldg(v4 + k + i * threads);
#pragma unroll
    for (int i = 0; i < kIn; ++i) packed16::count_vector<true>(s_words, q[i], spill);
  }
  for (; k < vecs; k += threads) packed16::count_vector<true>(s_words, __ldg(v4 + k), spill);
  const std::size_t tail = head + vecs * 8 + tid;
  if (tail < n) packed16::count_one<true>(s_words, in[tail], spill);
  __syncthreads();
}

__global__ void __launch_bounds__(P::kPackedBlockSize, 1)
    hist_u16_packed_kernel(const std::uint16_t* __restrict__ in, std::size_t n,
                           unsigned long long* __restrict__ spill,
                           std::uint32_t* __restrict__ partials) {
  extern __shared__ std::uint32_t s_words[];
  count_block(in, n, s_words, spill);
  // No pdl::allow_dependents(): the sum kernel (one wave) is launched as these blocks exit.
  std::uint32_t* mine = partials + std::size_t(blockIdx.x) * kWords;
  for (int i = threadIdx.x; i < kWords; i += blockDim.x) mine[i] = s_words[i];
}

/// The same with clusters of two: block r of a cluster adds words [r·16384, (r+1)·16384) of
/// both blocks' counters (its own and its partner's, through DSMEM) into partial row
/// blockIdx.x / 2. Halves are below 0x8000 at the end, so the packed sum has no carry.
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(P::kPackedBlockSize, 1)
    hist_u16_pair_kernel(const std::uint16_t* __restrict__ in, std::size_t n,
                         unsigned long long* __restrict__ spill,
                         std::uint32_t* __restrict__ partials) {
  extern __shared__ std::uint32_t s_words[];
  count_block(in, n, s_words, spill);
  // No pdl::allow_dependents(): the sum kernel (one wave) is launched as these blocks exit.
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // both blocks' counts complete
  const unsigned rank = cluster.block_rank();
  const std::uint32_t* other = cluster.map_shared_rank(s_words, rank ^ 1u);
  std::uint32_t* row = partials + std::size_t(blockIdx.x / 2) * kWords;
  const int w0 = int(rank) * (kWords / 2), w1 = w0 + kWords / 2;
  for (int i = w0 + int(threadIdx.x) * 4; i < w1; i += int(blockDim.x) * 4) {
    const uint4 a = *reinterpret_cast<const uint4*>(s_words + i);
    const uint4 b = *reinterpret_cast<const uint4*>(other + i);
    *reinterpret_cast<uint4*>(row + i) = make_uint4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
  }
  cluster.sync();  // the partner has read this block's counters before it exits
}

/// blockDim (kSumQuads, kSumGroups): thread (q, g) owns the 4 words of quad q of the block's
/// 128 words (one 16-byte load per row) over the rows g, g + kSumGroups, ...; with 16 groups and
/// kSumLoads loads in flight, every row a thread reads (up to 80 rows: 66 on 132 SMs) is
/// requested at once, so the partials cost one L2 round trip. The groups' sums meet in shared
/// memory; the kSumParts threads t = kSumParts·b + part finish bin b of the block's 256 (quad
/// b % 32, word (b / 32) % 4, half b / 128), each over its share of the groups, then a shuffle.
/// hist[bin] (+)= the rows' halves + spill[bin]; spill[bin] = 0. The spill (and, when adding, the
/// histogram) is loaded before the partials, so its round trip overlaps theirs. (Before: 8 groups
/// per block, 2-3 dependent rounds of loads, then the spill's own round trip: 7.3-7.6 µs under ncu
/// at 64M, 3-4 warps per scheduler issuing on 11 % of the cycles, H200. The first shape, 1024
/// threads per 32 words with one 4-byte load each: 11.7 µs.)
constexpr int kSumQuads = 32, kSumGroups = 16, kSumLoads = 5;
constexpr int kSumParts = kSumQuads * kSumGroups / 256;  // threads per bin at the end
static_assert(kSumParts == 2, "the shuffle below joins two parts");
__global__ void __launch_bounds__(kSumQuads* kSumGroups, 2)
    hist_u16_sum_kernel(const std::uint32_t* __restrict__ partials, int rows,
                        unsigned long long* __restrict__ spill,
                        unsigned long long* __restrict__ hist, bool assign) {
  // [half·4 + word][group][quad], two words of padding per group: the two parts of a bin read
  // groups 8 apart, 8·34 ≡ 16 banks apart, so a warp's 16 bins of each part (16 consecutive
  // quads) fill the 32 banks once (with 33, as first written, 8·33 ≡ 8: two-way conflicts).
  __shared__ unsigned s_sum[8][kSumGroups][kSumQuads + 2];
  pdl::wait();  // the counting kernel's partials and spill
  pdl::allow_dependents();
  const int q = int(threadIdx.x), grp = int(threadIdx.y);
  const int t = grp * kSumQuads + q;
  const int b = t / kSumParts, part = t % kSumParts;  // the bin this thread helps to finish
  const int kb = b / kSumQuads, qb = b % kSumQuads;
  const unsigned word = (blockIdx.x * unsigned(kSumQuads) + unsigned(qb)) * 4 + unsigned(kb & 3);
  const std::size_t bin =
      std::size_t(packed16::word_of<true>(word)) + (kb >= 4 ? std::size_t(kWords) : 0);
  unsigned long long base = 0;
  if (part == 0) base = __ldcg(spill + bin) + (assign ? 0ull : hist[bin]);
  const std::size_t word0 = (std::size_t(blockIdx.x) * kSumQuads + std::size_t(q)) * 4;
  unsigned lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
  for (int b0 = grp; b0 < rows; b0 += kSumGroups * kSumLoads) {
    uint4 w[kSumLoads];
#pragma unroll
    for (int u = 0; u < kSumLoads; ++u) {
      const int r = b0 + u * kSumGroups;
      w[u] =
          r < rows
              ? __ldcg(reinterpret_cast<const uint4*>(partials + std::size_t(r) * kWords + word0))
              : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kSumLoads; ++u) {
      const unsigned v[4] = {w[u].x, w[u].y, w[u].z, w[u].w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        lo[k] += v[k] & 0xFFFFu;
        hi[k] += v[k] >> 16;
      }
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    s_sum[k][grp][q] = lo[k];
    s_sum[4 + k][grp][q] = hi[k];
  }
  __syncthreads();
  // A half of a row is below 0x10000 (two blocks' halves, each below 0x8000), so a bin's sum
  // over fewer than 65536 rows fits 32 bits; the spilled counts are in `base`.
  unsigned sum = 0;
#pragma unroll
  for (int i = 0; i < kSumGroups / kSumParts; ++i) {
    sum += s_sum[kb][part * (kSumGroups / kSumParts) + i][qb];
  }
  sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
  if (part == 0) {
    spill[bin] = 0;
    hist[bin] = base + sum;  // sole writer of this bin in this launch
  }
}

/// Blocks: one per SM (pairs: two per cluster, as many clusters as can be resident at once, so
/// that no cluster waits for a second wave), no more than the work needs.
int packed_grid(std::size_t n, int max_blocks, bool pairs) {
  const std::size_t per_block = std::size_t(P::kPackedBlockSize) * 8 * P::kMinVectorsPerThread;
  int grid = int(std::max<std::size_t>(
      1, std::min<std::size_t>(std::size_t(max_blocks), detail::ceil_div(n, per_block))));
  if (pairs) grid = std::max(2, grid / 2 * 2);
  return grid;
}

/// Most blocks of a pair kernel resident at once: 2 × cudaOccupancyMaxActiveClusters.
template <typename K>
int resident_pair_blocks(K kernel, std::size_t smem) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(detail::sm_count()), 1, 1);
  cfg.blockDim = dim3(unsigned(P::kPackedBlockSize), 1, 1);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, reinterpret_cast<const void*>(kernel), &cfg) !=
          cudaSuccess ||
      clusters < 1) {
    cudaGetLastError();
    return 0;  // cannot tell: the caller runs without pairs
  }
  return std::min(2 * clusters, detail::sm_count() / 2 * 2);
}

/// Lets both counting kernels take smem bytes of dynamic shared memory.
void allow_shared(std::size_t smem) {
  for (const void* k : {reinterpret_cast<const void*>(hist_u16_packed_kernel),
                        reinterpret_cast<const void*>(hist_u16_pair_kernel)}) {
    HISTEQ_CUDA_CHECK(
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  }
}

}  // namespace

std::size_t hist_u16_scratch_words() {
  return std::size_t(detail::sm_count()) * kWords + 2 * std::size_t(kBins);
}

void hist_u16_packed(const std::uint16_t* d_in, std::size_t n, std::uint64_t* d_hist,
                     std::uint32_t* d_scratch, cudaStream_t stream, bool assign, const Tuning& t) {
  const std::size_t smem = kWords * sizeof(std::uint32_t);
  // Per device (a launch on another GPU of the process does not inherit the limit).
  const int pair_blocks =
      detail::per_device_once(reinterpret_cast<const void*>(hist_u16_pair_kernel), [&] {
        allow_shared(smem);
        return resident_pair_blocks(hist_u16_pair_kernel, smem);
      });
  const bool pairs = P::kPackedPairs && t.hist16.pairs && pair_blocks >= 2;
  const int grid = packed_grid(n, pairs ? pair_blocks : detail::sm_count(), pairs);
  auto* spill =
      reinterpret_cast<unsigned long long*>(d_scratch + std::size_t(detail::sm_count()) * kWords);
  auto* hist = reinterpret_cast<unsigned long long*>(d_hist);
  const auto kernel = pairs ? hist_u16_pair_kernel : hist_u16_packed_kernel;
  kernel<<<unsigned(grid), P::kPackedBlockSize, smem, stream>>>(d_in, n, spill, d_scratch);
  HISTEQ_CUDA_CHECK_LAUNCH();
  const int rows = pairs ? grid / 2 : grid;
  pdl::launch(pdl::kHist16Sum, t, hist_u16_sum_kernel, dim3(kWords / 4 / kSumQuads),
              dim3(kSumQuads, kSumGroups), 0, stream, static_cast<const std::uint32_t*>(d_scratch),
              rows, spill, hist, assign);
}

}  // namespace histeq::kernels
