// fused_mask — masked 8-bit equalization in ONE cooperative launch (fused_mask.cuh).
// In:  d_in[0,n) u8 and the mask d_mask[0,n) (nonzero: counted) at d_in's address modulo 16,
//      device memory. Out: d_out[0,n) = lut[d_in], lut the equalization LUT of the counted
//      samples' histogram; d_hist[256] uint64 (zero on entry) holds that histogram, d_hist_out a
//      copy; d_lut[256] the LUT. Async on `stream`.
// Exact: yes (lut_formula.hpp through fused.cuh's LUT builder). Tuning: FusedMaskPolicy,
// RegionTuning::fused_shape and full_vectors.
// Its own translation unit: with a second cooperative kernel beside it, ptxas compiled fused.cu's
// kernel with 8 bytes of spills (no longer inlining the grid barrier's body, it seems).
#include <algorithm>

#include "equalize/fused.hpp"
#include "equalize/fused_mask.cuh"
#include "equalize/policy.hpp"
#include "histeq/error.hpp"
#include "support/cuda_check.hpp"
#include "support/device.hpp"

namespace histeq::kernels {
namespace {

using P = FusedMaskPolicy;
using Shape = RegionTuning::FusedShape;

template <int kBlock, int kUnroll, int kMinBlocks>
const void* kernel_of(bool full) {
  return full ? reinterpret_cast<const void*>(
                    fused::masked_equalize_kernel<kBlock, kUnroll, kMinBlocks, true>)
              : reinterpret_cast<const void*>(
                    fused::masked_equalize_kernel<kBlock, kUnroll, kMinBlocks, false>);
}

struct Launch {
  const void* kernel;
  int block, unroll;
};

Launch pick(const RegionTuning& t) {
  switch (t.fused_shape) {
    case Shape::t1024_v1: return {kernel_of<1024, 1, 2>(t.full_vectors), 1024, 1};
    case Shape::t768_v2: return {kernel_of<768, 2, 2>(t.full_vectors), 768, 2};
    default:
      return {kernel_of<P::kBlockSize, P::kVectorsInFlight, P::kBlocksPerSm>(t.full_vectors),
              P::kBlockSize, P::kVectorsInFlight};
  }
}

}  // namespace

void launch_fused_equalize_masked(const std::uint8_t* d_in, std::uint8_t* d_out, std::size_t n,
                                  const std::uint8_t* d_mask, Formula f, std::uint64_t* d_hist,
                                  std::uint64_t* d_next_hist, std::uint64_t* d_hist_out,
                                  std::uint8_t* d_lut, cudaStream_t stream, const Tuning& t) {
  if (d_hist == nullptr || (n > 0 && (d_in == nullptr || d_out == nullptr || d_mask == nullptr)))
    throw UsageError("fused equalize: null device pointer");
  const auto a = reinterpret_cast<std::uintptr_t>(d_in),
             b = reinterpret_cast<std::uintptr_t>(d_out);
  if (a % 16 != b % 16 || reinterpret_cast<std::uintptr_t>(d_mask) % 16 != a % 16)
    throw UsageError("fused equalize: input, output and mask must have the same address modulo 16");
  if (a != b && a < b + n && b < a + n)
    throw UsageError("fused equalize: input and output overlap without being the same buffer");
  if (n >= kFusedMaskMaxSamples)
    throw UsageError("fused equalize: a masked plane of 2^35 samples or more");
  const Launch l = pick(t.region);
  // Grid: no more blocks than the work needs, never more than are co-resident (a cooperative
  // launch with more fails).
  const std::size_t per_block = std::size_t(l.block) * std::size_t(l.unroll) * 16;
  const std::size_t grid = std::max<std::size_t>(
      1, std::min(detail::ceil_div(n, per_block), detail::resident_blocks(l.kernel, l.block, 0)));
  auto* hist = reinterpret_cast<unsigned long long*>(d_hist);
  auto* next = reinterpret_cast<unsigned long long*>(d_next_hist);
  auto* copy = reinterpret_cast<unsigned long long*>(d_hist_out);
  void* args[] = {&d_in, &d_out, &n, &d_mask, &f, &hist, &next, &copy, &d_lut};
  HISTEQ_CUDA_CHECK(cudaLaunchCooperativeKernel(l.kernel, dim3(unsigned(grid)),
                                                dim3(unsigned(l.block)), args, 0, stream));
}

}  // namespace histeq::kernels
