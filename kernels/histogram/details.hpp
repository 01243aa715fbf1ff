// details.hpp — the occupancy report behind `histeq kernels --details` and the benchmark's JSON:
// for a registry entry and a case (sample type, bins, n), the launch configuration it would use
// and what the CUDA occupancy calculator makes of it.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "histeq/types.hpp"
#include "histogram/contract.hpp"

namespace histeq::kernels {

/// One kernel on one case. Fields are 0 when unsupported or when the entry has no launch shape.
struct KernelDetails {
  std::string name;            ///< registry name
  bool supported = false;      ///< false: `reason` says why (entry.unsupported() or the device)
  std::string reason;          ///< why unsupported, "no launch shape", or a note; "" otherwise
  int block_size = 0;          ///< threads per block of the counting kernel
  int grid_size = 0;           ///< blocks it launches for this n
  std::size_t smem_bytes = 0;  ///< shared memory per block, static + dynamic, bytes
  int regs_per_thread = 0;     ///< cudaFuncAttributes::numRegs of the compiled kernel
  int blocks_per_sm = 0;       ///< cudaOccupancyMaxActiveBlocksPerMultiprocessor
  double occupancy = 0;  ///< theoretical: blocks_per_sm · block_size / max_threads_per_sm, 0..1
  int max_threads_per_sm = 0;  ///< cudaDevAttrMaxThreadsPerMultiProcessor (2048 on the H200)
};

/// The launch configuration of `e` for `bins` bins of `type` samples, n samples, on the current
/// device: entry.shape() (block, grid, shared memory), cudaFuncGetAttributes (registers, static
/// shared memory) and cudaOccupancyMaxActiveBlocksPerMultiprocessor with the dynamic part of the
/// shared memory. Unsupported (type, bins): supported = false with the entry's reason, no CUDA
/// call. No shape (or a shape without a kernel): supported, fields 0, reason "no launch shape".
/// A UsageError from shape() (e.g. the device has less shared memory per block than the layout
/// needs) becomes supported = false with its message. Throws CudaError on CUDA failures (no
/// device, ...).
KernelDetails describe(const KernelEntry& e, SampleType type, int bins, std::size_t n);

/// An aligned text table, one row per entry, columns: kernel, block, grid, smem/block (bytes),
/// regs, blocks/SM, occupancy (percent, one decimal), note (the reason, prefixed with
/// "unsupported: " for unsupported rows). Numbers are right-aligned; missing ones print "-".
/// Ends with a newline; a header line even for an empty list.
std::string format_details(const std::vector<KernelDetails>& rows);

}  // namespace histeq::kernels
