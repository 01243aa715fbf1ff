// match_lut — histogram matching's LUT for 256 levels (histeq/match.hpp: match_lut), one block
// per plane.
// In:  d_hist[p·256 + b] uint64: the counted histogram of plane p (device), p < planes;
//      d_ref[p·ref_stride + b] uint64: the reference's histogram for plane p (ref_stride 0: one
//      for every plane), each with at least one count (the caller checks).
// Out: d_luts[p·256 + v] u8 (device), overwritten; equal to match_lut(src_p, ref_p).
//      Async on `stream`; no host sync; no scratch.
// Exact: yes (uint64 scans; the quantiles and the interpolation in double with explicit
// round-to-nearest operations, match.cuh). One block of 256 threads, thread v owns level v:
// inclusive scans of both histograms (cub::BlockScan), the reference's occupied levels compacted
// into shared memory by an exclusive scan of their flags, then a binary search per level.
#include <cub/block/block_scan.cuh>

#include "equalize/match.cuh"
#include "equalize/policy.hpp"
#include "equalize/stages.hpp"
#include "histeq/error.hpp"
#include "support/cuda_check.hpp"

namespace histeq::kernels {
namespace {

constexpr int kLevels = MatchLutPolicy::kLevels;
using ScanCount = cub::BlockScan<unsigned long long, kLevels>;
using ScanFlag = cub::BlockScan<int, kLevels>;

__global__ void __launch_bounds__(kLevels)
    match_lut_kernel(const unsigned long long* __restrict__ d_hist,
                     const unsigned long long* __restrict__ d_ref, std::size_t ref_stride,
                     std::uint8_t* __restrict__ d_luts) {
  __shared__ typename ScanCount::TempStorage scan_ref, scan_src;
  __shared__ typename ScanFlag::TempStorage scan_flag;
  __shared__ double s_q[kLevels];
  __shared__ int s_level[kLevels];
  const int v = int(threadIdx.x);
  const unsigned long long* ref = d_ref + std::size_t(blockIdx.x) * ref_stride;
  const unsigned long long* src = d_hist + std::size_t(blockIdx.x) * kLevels;
  std::uint8_t* lut = d_luts + std::size_t(blockIdx.x) * kLevels;

  const unsigned long long r = ref[v];
  unsigned long long r_cum = 0, r_total = 0;
  ScanCount(scan_ref).InclusiveSum(r, r_cum, r_total);
  int k = 0, occupied = 0;
  ScanFlag(scan_flag).ExclusiveSum(r != 0 ? 1 : 0, k, occupied);
  if (r != 0) {
    s_level[k] = v;
    s_q[k] = match::quantile(r_cum, r_total);
  }
  unsigned long long s_cum = 0, s_total = 0;
  ScanCount(scan_src).InclusiveSum(src[v], s_cum, s_total);
  __syncthreads();                          // s_q, s_level
  if (s_total == 0 || occupied == 0) {      // an empty source: the identity (an empty reference is
    lut[v] = static_cast<std::uint8_t>(v);  // refused by the caller before the launch)
    return;
  }
  const double* q = s_q;
  const int* level = s_level;
  const int e = match::entry(
      match::quantile(s_cum, s_total), occupied, [q](int j) { return q[j]; },
      [level](int j) { return level[j]; });
  lut[v] = static_cast<std::uint8_t>(e);
}

}  // namespace

void launch_match_lut_planes(const std::uint64_t* d_hist, int planes, const std::uint64_t* d_ref,
                             bool one_reference, std::uint8_t* d_luts, cudaStream_t stream) {
  if (planes < 0) throw UsageError("match_lut: planes must be >= 0, got " + std::to_string(planes));
  if (planes == 0) return;
  if (d_hist == nullptr || d_ref == nullptr || d_luts == nullptr)
    throw UsageError("match_lut: null device pointer");
  match_lut_kernel<<<planes, kLevels, 0, stream>>>(
      reinterpret_cast<const unsigned long long*>(d_hist),
      reinterpret_cast<const unsigned long long*>(d_ref), one_reference ? 0 : std::size_t(kLevels),
      d_luts);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace histeq::kernels
