// match_lut16 — histogram matching's LUT for 65536 levels (histeq/match.hpp: match_lut16).
// In:  d_hist[0,65536) uint64: the counted histogram of one plane; d_ref[0,65536) uint64: the
//      reference's histogram, at least one count (the caller checks). Device memory.
// Out: d_lut[0,65536) u16, overwritten; equal to match_lut16(src, ref). Async on `stream`.
// Scratch: match_lut_u16_scratch_words() uint64 (any contents; written before it is read).
// Exact: yes (uint64 scans; quantiles and interpolation in double with explicit round-to-nearest
// operations, equalize/match.cuh).
// Two launches. (1) One block (kMatchScanThreads): the reference's occupied levels compacted in
// level order (tiles of kScanThreads · kBinsPerThread bins: an exclusive scan of the counts and one
// of the occupied flags per tile, carried across tiles), their quantiles, and the source's
// inclusive cumulative counts, all into scratch. (2) One thread per level: its quantile, a binary
// search over the reference's quantiles (L2-resident), the entry.
#include <cub/block/block_scan.cuh>

#include "equalize/match.cuh"
#include "histeq/error.hpp"
#include "support/cuda_check.hpp"
#include "u16/hist_u16.hpp"
#include "u16/policy.hpp"

namespace histeq::kernels {
namespace {

constexpr int kLevels = 65536;
constexpr int kThreads = MatchLut16Policy::kScanThreads;
constexpr int kPer = MatchLut16Policy::kBinsPerThread;
constexpr int kTile = kThreads * kPer;
static_assert(kLevels % kTile == 0, "whole tiles");
// Warp scans, not the default raking: the raking segment of 64-bit counts spilled (policy.hpp).
using ScanCount = cub::BlockScan<unsigned long long, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
using ScanFlag = cub::BlockScan<int, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;

/// The scratch's parts (uint64 words): the reference's quantiles (double bits) in occupied order,
/// the source's cumulative counts, the occupied levels (uint32, two per word), then the number of
/// occupied levels and the source's total.
struct Scratch {
  unsigned long long* q;
  unsigned long long* src_cum;
  std::uint32_t* level;
  unsigned long long* k_and_total;
  __host__ __device__ explicit Scratch(unsigned long long* s)
      : q(s),
        src_cum(s + kLevels),
        level(reinterpret_cast<std::uint32_t*>(s + 2 * kLevels)),
        k_and_total(s + 2 * kLevels + kLevels / 2) {}
};

__global__ void __launch_bounds__(kThreads)
    match_scan16_kernel(const unsigned long long* __restrict__ src,
                        const unsigned long long* __restrict__ ref, unsigned long long* scratch) {
  __shared__ typename ScanCount::TempStorage scan_count;
  __shared__ typename ScanFlag::TempStorage scan_flag;
  const Scratch sc(scratch);
  const int t = int(threadIdx.x);
  // The reference: cumulative counts of its occupied levels, compacted in level order.
  unsigned long long carry = 0;
  int carry_k = 0;
  for (int tile = 0; tile < kLevels; tile += kTile) {
    const int base = tile + t * kPer;
    unsigned long long h[kPer];
    unsigned long long sum = 0;
    int flags = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      h[i] = ref[base + i];
      sum += h[i];
      flags += h[i] != 0 ? 1 : 0;
    }
    unsigned long long pre = 0, tile_sum = 0;
    int k = 0, tile_k = 0;
    ScanCount(scan_count).ExclusiveSum(sum, pre, tile_sum);
    ScanFlag(scan_flag).ExclusiveSum(flags, k, tile_k);
    unsigned long long cum = carry + pre;
    k += carry_k;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      cum += h[i];
      if (h[i] != 0) {
        sc.q[k] = cum;  // the count now, its quantile below once the total is known
        sc.level[k] = std::uint32_t(base + i);
        ++k;
      }
    }
    carry += tile_sum;
    carry_k += tile_k;
    __syncthreads();  // the scans' temporary storage is reused
  }
  const unsigned long long ref_total = carry;
  const int occupied = carry_k;
  // The source's inclusive cumulative counts.
  carry = 0;
  for (int tile = 0; tile < kLevels; tile += kTile) {
    const int base = tile + t * kPer;
    unsigned long long h[kPer];
    unsigned long long sum = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      h[i] = src[base + i];
      sum += h[i];
    }
    unsigned long long pre = 0, tile_sum = 0;
    ScanCount(scan_count).ExclusiveSum(sum, pre, tile_sum);
    unsigned long long cum = carry + pre;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      cum += h[i];
      sc.src_cum[base + i] = cum;
    }
    carry += tile_sum;
    __syncthreads();
  }
  __syncthreads();  // every count of sc.q written (global memory, visible to the block now)
  if (ref_total > 0)
    for (int j = t; j < occupied; j += kThreads)
      sc.q[j] = __double_as_longlong(match::quantile(sc.q[j], ref_total));
  if (t == 0) {
    sc.k_and_total[0] = static_cast<unsigned long long>(occupied);
    sc.k_and_total[1] = carry;
  }
}

__global__ void __launch_bounds__(MatchLut16Policy::kEntryThreads)
    match_entry16_kernel(const unsigned long long* __restrict__ scratch, std::uint16_t* lut) {
  const Scratch sc(const_cast<unsigned long long*>(scratch));
  const int v = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (v >= kLevels) return;
  const int occupied = int(sc.k_and_total[0]);
  const unsigned long long total = sc.k_and_total[1];
  if (total == 0 || occupied == 0) {  // an empty source: the identity
    lut[v] = static_cast<std::uint16_t>(v);
    return;
  }
  const unsigned long long* q = sc.q;
  const std::uint32_t* level = sc.level;
  const int e = match::entry(
      match::quantile(sc.src_cum[v], total), occupied,
      [q](int j) { return __longlong_as_double(static_cast<long long>(q[j])); },
      [level](int j) { return int(level[j]); });
  lut[v] = static_cast<std::uint16_t>(e);
}

}  // namespace

std::size_t match_lut_u16_scratch_words() { return 2 * std::size_t(kLevels) + kLevels / 2 + 2; }

void match_lut_u16(const std::uint64_t* d_hist, const std::uint64_t* d_ref, std::uint16_t* d_lut,
                   std::uint64_t* d_scratch, cudaStream_t stream) {
  if (d_hist == nullptr || d_ref == nullptr || d_lut == nullptr || d_scratch == nullptr)
    throw UsageError("match_lut_u16: null device pointer");
  auto* scratch = reinterpret_cast<unsigned long long*>(d_scratch);
  match_scan16_kernel<<<1, kThreads, 0, stream>>>(
      reinterpret_cast<const unsigned long long*>(d_hist),
      reinterpret_cast<const unsigned long long*>(d_ref), scratch);
  HISTEQ_CUDA_CHECK_LAUNCH();
  constexpr int kEntry = MatchLut16Policy::kEntryThreads;
  match_entry16_kernel<<<kLevels / kEntry, kEntry, 0, stream>>>(scratch, d_lut);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace histeq::kernels
