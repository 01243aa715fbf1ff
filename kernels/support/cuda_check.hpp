// cuda_check.hpp — every CUDA runtime call is checked where it happens and turned into a
// histeq::CudaError (or DeviceOutOfMemory) carrying the call, file:line and CUDA's message.
#pragma once
#include <cuda_runtime_api.h>

#include <string>

#include "histeq/error.hpp"

namespace histeq::detail {

[[noreturn]] inline void throw_cuda(cudaError_t code, const char* call, const char* file,
                                    int line) {
  std::string msg = std::string("CUDA error in ") + call + " at " + file + ":" +
                    std::to_string(line) + ": " + cudaGetErrorName(code) + ": " +
                    cudaGetErrorString(code);
  if (code == cudaErrorMemoryAllocation) {
    throw DeviceOutOfMemory(msg + " (" + kGpuOutOfMemory + ")", int(code));
  }
  throw CudaError(msg, int(code));
}

}  // namespace histeq::detail

#define HISTEQ_CUDA_CHECK(call)                                             \
  do {                                                                      \
    cudaError_t histeq_err_ = (call);                                       \
    if (histeq_err_ != cudaSuccess) {                                       \
      ::histeq::detail::throw_cuda(histeq_err_, #call, __FILE__, __LINE__); \
    }                                                                       \
  } while (0)

/// After a kernel launch: reports launch-configuration errors at the launch site.
#define HISTEQ_CUDA_CHECK_LAUNCH() HISTEQ_CUDA_CHECK(cudaGetLastError())
