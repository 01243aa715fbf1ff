// columns — lane-owned shared-memory columns: a block histogram of 256 values × 32 lanes, so a
//           warp's 32 shared atomics always hit 32 different banks; 16-byte loads, several in
//           flight per thread; one global atomic per value per block.
// In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment
//      (u8; i32 must be 4-byte aligned).
// Out: d_hist[0,bins) uint64, overwritten by the last block to finish (no memset launch).
//      Scratch: columns::GridState (2 KB accumulator + ticket), zeroed_scratch: zero on entry,
//      zero again on return (prepare_scratch once per allocation). Async on `stream`.
// Exact: yes. Supports: bins 1..256 (u8 and i32): the columns hold 256 raw values.
// Tuning: kColumnsPolicy (policy.hpp); block sizes 256, 512 or 1024; inputs ≤ 512 KiB get a
//         shape of more, smaller blocks unless a block size is asked for.
// Source: bank-aware replicated sub-histograms after Gómez-Luna et al., "An optimized approach
//         to histogram computation on GPU" (2013); privatization and coarsening from PMPP 4th
//         ed. ch. 9; body in columns.cuh.
#include "histogram/columns.cuh"
#include "histogram/common.cuh"
#include "histogram/contract.hpp"
#include "histogram/policy.hpp"
#include "support/cuda_check.hpp"

namespace histeq::kernels {
namespace {

using P = ColumnsPolicy;

template <typename T, int kBlock, int kUnroll = P::kVectorsInFlight>
const void* kernel_for() {
  constexpr int kMin = P::kBlocksPerSm * P::kBlockSize / kBlock;
  return reinterpret_cast<const void*>(
      columns::histogram_kernel<T, kBlock, kUnroll, kMin, P::kStreamingLoads>);
}

/// The instantiation for a call's shape: the small-input shape (policy.hpp) or the block size.
template <typename T>
const void* kernel_for_block(bool small, int block) {
  if (small) return kernel_for<T, P::kSmallBlockSize, P::kSmallVectorsInFlight>();
  switch (block) {
    case 256: return kernel_for<T, 256>();
    case 512: return kernel_for<T, 512>();
    case 1024: return kernel_for<T, 1024>();
    default:
      throw UsageError("kernel 'columns' runs with block size 256, 512 or 1024 (0: default " +
                       std::to_string(P::kBlockSize) + "), got " + std::to_string(block));
  }
}

std::size_t scratch(std::size_t, int, SampleType) { return sizeof(columns::GridState); }

const char* unsupported(SampleType, int bins) {
  return bins < 1 || bins > columns::kValues
             ? "the lane columns hold 256 values (32 KB of shared memory per block); bins 1..256"
             : nullptr;
}

LaunchShape shape(const HistogramLaunch& c) {
  const bool small = c.block_size == 0 && c.n * sample_bytes(c.type) <= P::kSmallInputBytes;
  const int block = small ? P::kSmallBlockSize : detail::resolve_block_size(c, P::kBlockSize);
  const int unroll = small ? P::kSmallVectorsInFlight : P::kVectorsInFlight;
  const void* k = c.type == SampleType::u8 ? kernel_for_block<std::uint8_t>(small, block)
                                           : kernel_for_block<std::int32_t>(small, block);
  const std::size_t per_block = std::size_t(block) * unroll * (c.type == SampleType::u8 ? 16 : 4);
  const std::size_t wanted =
      std::min(detail::ceil_div(c.n, per_block), detail::resident_blocks(k, block, 0));
  LaunchShape s;
  s.kernel = k;
  s.block_size = block;
  s.grid_size = detail::clamp_grid(wanted, c.n);
  s.smem_bytes = columns::kSmemWords * sizeof(std::uint32_t);
  return s;
}

void launch(const HistogramLaunch& c) {
  detail::check_call(c, "columns");
  if (c.n == 0) {
    detail::zero_histogram(c);
    return;
  }
  const LaunchShape s = shape(c);
  void* hist = detail::global_histogram(c);
  std::size_t n = c.n;
  int bins = c.bins;
  const void* in = c.d_in;
  void* state = c.d_scratch;
  void* args[] = {&in, &n, &bins, &hist, &state};
  HISTEQ_CUDA_CHECK(
      cudaLaunchKernel(s.kernel, dim3(s.grid_size), dim3(s.block_size), args, 0, c.stream));
}

}  // namespace

extern const KernelEntry kColumns = {
    "columns",
    "lane-owned shared columns (bin x 32 + lane): no bank conflicts on any data; 16-byte loads, "
    "2 in flight; last block writes the result (one launch, no memset)",
    true,
    unsupported,
    scratch,
    launch,
    shape,
    /*zeroed_scratch=*/true};

}  // namespace histeq::kernels
