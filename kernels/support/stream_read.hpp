// stream_read.hpp — the benchmark's read-bandwidth ceiling: a kernel that only streams a buffer
// in from device memory (16-byte loads, grid-stride) and writes nothing in practice. Its GB/s,
// measured in the same run as the histogram kernels, is what "% of read bandwidth" refers to.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace histeq::kernels {

/// Reads d_in[0, bytes) (16-byte aligned, as cudaMalloc returns) with 16-byte vector loads;
/// bytes that do not fill a last 16-byte word are read too (one byte at a time). d_sink: one
/// unsigned of device memory, written only if the XOR of everything read equals a fixed magic
/// value (so the loads cannot be optimized away, yet nothing is written for the usual buffers).
/// grid/block: launch shape (grid 0 → 8 blocks per SM of the current device). Async on `stream`.
void launch_stream_read(const void* d_in, std::size_t bytes, unsigned* d_sink, int grid, int block,
                        cudaStream_t stream);

}  // namespace histeq::kernels
