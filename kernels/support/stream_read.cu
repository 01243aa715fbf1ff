// stream_read.cu — read-bandwidth ceiling for the benchmark (see stream_read.hpp).
// Each thread keeps four independent 16-byte loads in flight per iteration (memory-level
// parallelism, as in the STREAM/BabelStream "read" kernels and NVIDIA's bandwidthTest idea of a
// pure copy with the write removed), so the DRAM pipe stays full at modest occupancy.
#include "support/stream_read.hpp"

#include <cstdint>

#include "support/cuda_check.hpp"

namespace histeq::kernels {

namespace {

constexpr unsigned kMagic = 0x9E3779B9u;

__global__ void stream_read_kernel(const uint4* __restrict__ in, std::size_t words,
                                   const unsigned char* __restrict__ tail, std::size_t tail_bytes,
                                   unsigned* __restrict__ sink) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + 3 * stride < words; i += 4 * stride) {
    const uint4 a = __ldcs(in + i);
    const uint4 b = __ldcs(in + i + stride);
    const uint4 c = __ldcs(in + i + 2 * stride);
    const uint4 d = __ldcs(in + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
    acc ^= c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < words; i += stride) {
    const uint4 a = __ldcs(in + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  const std::size_t t = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < tail_bytes) acc ^= tail[t];
  if (acc == kMagic) *sink = acc;
}

}  // namespace

void launch_stream_read(const void* d_in, std::size_t bytes, unsigned* d_sink, int grid, int block,
                        cudaStream_t stream) {
  if (bytes == 0) return;
  if (block <= 0) block = 256;
  if (grid <= 0) {
    int dev = 0, sms = 0;
    HISTEQ_CUDA_CHECK(cudaGetDevice(&dev));
    HISTEQ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    grid = 8 * sms;
  }
  const std::size_t words = bytes / 16;
  const auto* base = static_cast<const unsigned char*>(d_in);
  stream_read_kernel<<<grid, block, 0, stream>>>(static_cast<const uint4*>(d_in), words,
                                                 base + words * 16, bytes % 16, d_sink);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace histeq::kernels
