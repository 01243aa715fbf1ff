// contract.hpp — what every histogram kernel promises, and the registry entry that describes it.
//
// Every kernel file starts with a block that states, for that kernel:
//   In:  d_in[0,n) samples (u8, or i32 bin indices), device memory, n may be 0, any alignment.
//   Out: d_hist[0,bins) uint64, overwritten (not accumulated). Scratch: scratch_bytes(n,bins,type)
//        bytes of device memory, contents undefined on entry — except for kernels whose entry
//        sets zeroed_scratch: their scratch must be all zero on entry (cudaMemset once, when it
//        is allocated: prepare_scratch in registry.hpp) and they leave it all zero when they
//        finish, so the next call needs no memset. Async on `stream`; no host sync.
//   Exact: yes/no. Supports: which types and bins. Tuning: its policy struct. Source: where the
//        algorithm comes from.
// Binning (types.hpp): u8 sample v → bin (v·bins)/256; i32 sample v → bin v if 0 ≤ v < bins,
// otherwise not counted.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "histeq/types.hpp"

namespace histeq::kernels {

/// One histogram call.
struct HistogramLaunch {
  const void* d_in = nullptr;
  std::size_t n = 0;
  SampleType type = SampleType::u8;
  int bins = 256;
  std::uint64_t* d_hist = nullptr;  ///< [bins], overwritten
  void* d_scratch = nullptr;        ///< at least entry.scratch_bytes(n, bins, type) bytes
  cudaStream_t stream = nullptr;
  int block_size = 0;  ///< 0: the kernel's tuned default
};

/// The launch configuration a kernel would use for a call (for `kernels --details`, the
/// benchmark's JSON and the occupancy report). kernel: the __global__ function that does the
/// counting, for cudaFuncGetAttributes / cudaOccupancyMaxActiveBlocksPerMultiprocessor.
struct LaunchShape {
  const void* kernel = nullptr;
  int block_size = 0;
  int grid_size = 0;
  std::size_t smem_bytes = 0;  ///< dynamic + static shared memory per block
};

/// A registry entry. Plain data: the table in registry.cu lists them explicitly.
struct KernelEntry {
  const char* name;     ///< lowercase word: CLI value, test parameter, benchmark axis
  const char* summary;  ///< one line: the idea and why it is fast or slow
  bool exact;           ///< false only for the racy demo
  /// nullptr when (type, bins) is supported, else the reason it is not.
  const char* (*unsupported)(SampleType type, int bins);
  std::size_t (*scratch_bytes)(std::size_t n, int bins, SampleType type);
  void (*launch)(const HistogramLaunch& call);
  LaunchShape (*shape)(const HistogramLaunch& call);
  /// true: d_scratch must be all zero on entry and is all zero again when the kernel has
  /// finished (it holds a grid-wide accumulator and a last-block ticket that the kernel resets).
  /// One such buffer may serve every zeroed_scratch kernel in turn on one stream, never two
  /// launches that may run at the same time. A kernel that faults leaves it undefined.
  bool zeroed_scratch = false;
};

}  // namespace histeq::kernels
