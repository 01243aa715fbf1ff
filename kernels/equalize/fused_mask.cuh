// fused_mask.cuh — masked 8-bit equalization in ONE cooperative launch: fused.cuh's shape (count
// into lane columns → grid-wide barrier → every block builds the LUT → apply, the first tile of
// every thread kept in registers from the count to the apply), with the count of
// region_count.cuh: only the samples whose mask byte is nonzero are counted (16-byte loads of the
// mask beside the plane's, mask vectors of zeros skipped, per-sample predicated adds), and the LUT
// applies to every sample. The mask must have the plane's address modulo 16 (the launcher falls
// back otherwise); a mask alone over the whole plane (a rectangle runs the pair path).
// The global histogram must be zero on entry; the kernel zeroes `next_hist` for the next call
// (the caller alternates two buffers, as for fused.cuh) and copies the histogram to hist_out.
#pragma once
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "equalize/fused.cuh"
#include "histogram/columns.cuh"
#include "histogram/region_count.cuh"

namespace histeq::kernels::fused {

template <int kBlock, int kUnroll, int kMinBlocks, bool kFull>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    masked_equalize_kernel(const std::uint8_t* __restrict__ in, std::uint8_t* __restrict__ out,
                           std::size_t n, const std::uint8_t* __restrict__ mask, Formula f,
                           unsigned long long* __restrict__ hist,
                           unsigned long long* __restrict__ next_hist,
                           unsigned long long* __restrict__ hist_out,
                           std::uint8_t* __restrict__ lut_out) {
  namespace cg = cooperative_groups;
  using namespace columns;
  using region::MaskRead;
  __shared__ __align__(16) std::uint32_t cols[kSmemWords];
  __shared__ unsigned long long scan[256];
  zero_columns<kBlock>(cols);
  __syncthreads();

  const region::Lane lane = region::lane_of(cols);
  const Split<std::uint8_t> s(in, n);
  // 32-bit vector indices (n < kFusedMaskMaxSamples: nvec < 2^31, so no index below passes
  // 2^32), registers for the kept tile.
  const unsigned nvec = unsigned(s.nvec);
  const unsigned gtid = blockIdx.x * kBlock + threadIdx.x;
  const unsigned stride = gridDim.x * kBlock;
  if (gtid < s.head) region::count_one<MaskRead::vectors>(lane, in, mask, gtid);
  if (gtid < n - s.tail_start)
    region::count_one<MaskRead::vectors>(lane, in, mask, s.tail_start + gtid);
  const uint4* __restrict__ vin = reinterpret_cast<const uint4*>(in + s.head);
  const uint4* __restrict__ vmask = reinterpret_cast<const uint4*>(mask + s.head);

  // Phase 1: count. The first tile of samples stays in registers for phase 3; its mask does not.
  uint4 keep[kUnroll];
  {
    uint4 mk[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const unsigned i = gtid + u * stride;
      if (i < nvec) {
        keep[u] = __ldg(vin + i);
        mk[u] = __ldg(vmask + i);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (gtid + u * stride < nvec) region::count_vec_masked<kFull>(lane, keep[u], mk[u]);
    }
  }
  // The rest one vector at a time: the kept tile holds 4·kUnroll registers through this loop, and
  // kUnroll vectors in flight here spilled 64 bytes under the 32-register bound.
  for (unsigned i = gtid + kUnroll * stride; i < nvec; i += stride)
    region::count_vec_masked<kFull>(lane, __ldg(vin + i), __ldg(vmask + i));
  __syncthreads();
  for_each_value_sum<kBlock>(cols, [&](int v, std::uint32_t c) {
    if (c) atomicAdd(hist + v, static_cast<unsigned long long>(c));
  });
  if (blockIdx.x == 0 && next_hist) {
    for (int v = threadIdx.x; v < kValues; v += kBlock) next_hist[v] = 0;
  }
  __syncthreads();  // cols is reused for the LUT below
  cg::this_grid().sync();

  // Phase 2: every block builds the LUT from the finished histogram; block 0 copies it out.
  if (hist_out && blockIdx.x == 0) {
    for (int v = threadIdx.x; v < kValues; v += kBlock) hist_out[v] = hist[v];
  }
  build_lut_replicated<kBlock>(hist, f, cols, scan, lut_out);
  const std::uint32_t* lut_lane = cols + (threadIdx.x & 31);

  // Phase 3: apply to every sample; the kept tile first, then the rest re-read.
  uint4* __restrict__ vout = reinterpret_cast<uint4*>(out + s.head);
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const unsigned j = gtid + u * stride;
    if (j < nvec) store_vec<false>(vout + j, map_vec(lut_lane, keep[u]));
  }
  for (unsigned j = gtid + kUnroll * stride; j < nvec; j += stride)
    store_vec<false>(vout + j, map_vec(lut_lane, __ldg(vin + j)));
  if (gtid < s.head) out[gtid] = static_cast<std::uint8_t>(lut_lane[in[gtid] << 5]);
  if (gtid < n - s.tail_start) {
    out[s.tail_start + gtid] = static_cast<std::uint8_t>(lut_lane[in[s.tail_start + gtid] << 5]);
  }
}

}  // namespace histeq::kernels::fused
