// stream_hold.cu — the benchmark's blocking kernel (stream_hold.hpp).
#include "support/stream_hold.hpp"

#include <cstdint>

#include "support/cuda_check.hpp"

namespace histeq::kernels {
namespace {

__device__ __forceinline__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void hold_kernel(volatile int* flags, std::uint64_t timeout_ns) {
  const std::uint64_t t0 = global_ns();
  while (flags[0] == 0) {
    if (global_ns() - t0 > timeout_ns) {
      flags[1] = 1;
      return;
    }
  }
}

__global__ void empty_kernel() {}

}  // namespace

void launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  HISTEQ_CUDA_CHECK_LAUNCH();
}

StreamHold::StreamHold(cudaStream_t stream, double timeout_s) : stream_(stream) {
  void* p = nullptr;
  HISTEQ_CUDA_CHECK(cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocMapped));
  flags_ = static_cast<volatile int*>(p);
  flags_[0] = 0;
  flags_[1] = 0;
  void* dev = nullptr;
  HISTEQ_CUDA_CHECK(cudaHostGetDevicePointer(&dev, p, 0));
  hold_kernel<<<1, 1, 0, stream>>>(static_cast<volatile int*>(dev),
                                   static_cast<std::uint64_t>(timeout_s * 1e9));
  HISTEQ_CUDA_CHECK_LAUNCH();
}

StreamHold::~StreamHold() {
  if (flags_ == nullptr) return;
  flags_[0] = 1;
  // The kernel may still read the flag: wait for it before freeing the memory.
  cudaStreamSynchronize(stream_);
  cudaFreeHost(const_cast<int*>(flags_));
}

void StreamHold::release() { flags_[0] = 1; }

bool StreamHold::timed_out() const { return flags_[1] != 0; }

}  // namespace histeq::kernels
