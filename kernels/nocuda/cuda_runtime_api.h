// cuda_runtime_api.h (CPU-only builds) — the part of the CUDA runtime's host API that histeq's
// host code calls, as seen on a machine that has no CUDA device: every call that would reach a
// device fails with cudaErrorNoDevice, whose message says that histeq was built without CUDA.
//
// Only on the include path of a build configured with HISTEQ_CUDA=OFF (CMakeLists.txt), where
// it stands in for the toolkit's header of the same name, so that the host code that drives the
// GPU (src/pipeline, src/bench, the CLI's device paths, the Python binding) compiles unchanged;
// none of it runs, because histeq::cuda_available() is false and every device path starts from
// it. The kernels' host entry points are in no_cuda.cpp beside this file. Declared here from the
// runtime's documented interface (names, argument order); the values of the enumerators are this
// file's own.
#pragma once
#include <cstddef>

struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;

enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNoDevice = 100,
  cudaErrorNoKernelImageForDevice = 209,
  cudaErrorCooperativeLaunchTooLarge = 720,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaMemoryType : int {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};

enum cudaDeviceAttr : int {
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrL2CacheSize = 38,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrCooperativeLaunch = 95,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
  cudaDevAttrComputeMode = 20,
};

enum cudaComputeMode {
  cudaComputeModeDefault = 0,
  cudaComputeModeExclusive = 1,
  cudaComputeModeProhibited = 2,
  cudaComputeModeExclusiveProcess = 3,
};

struct cudaPointerAttributes {
  cudaMemoryType type = cudaMemoryTypeUnregistered;
  int device = 0;
  void* devicePointer = nullptr;
  void* hostPointer = nullptr;
};

struct cudaDeviceProp {
  char name[256] = {};
  std::size_t totalGlobalMem = 0;
  int multiProcessorCount = 0;
  int major = 0;
  int minor = 0;
  int l2CacheSize = 0;
  int maxThreadsPerMultiProcessor = 0;
  std::size_t sharedMemPerBlockOptin = 0;
};

struct cudaFuncAttributes {
  int numRegs = 0;
  std::size_t sharedSizeBytes = 0;
  int maxThreadsPerBlock = 0;
};

#define cudaStreamLegacy (reinterpret_cast<cudaStream_t>(0x1))
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02
#define cudaDeviceScheduleBlockingSync 0x04

namespace histeq::nocuda {
/// What every call below returns: no device (this build has no CUDA).
inline cudaError_t no_device() { return cudaErrorNoDevice; }
}  // namespace histeq::nocuda

inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    default: return "cudaError";
  }
}
inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error"
                          : "histeq was built without CUDA (HISTEQ_CUDA=OFF): no GPU code";
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }

inline cudaError_t cudaGetDeviceCount(int* count) {
  if (count) *count = 0;
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaGetDevice(int* device) {
  if (device) *device = 0;
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaSetDevice(int) { return histeq::nocuda::no_device(); }
inline cudaError_t cudaSetDeviceFlags(unsigned) { return histeq::nocuda::no_device(); }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp*, int) {
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr, int) {
  if (value) *value = 0;
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaDeviceSynchronize() { return histeq::nocuda::no_device(); }
inline cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  if (free_bytes) *free_bytes = 0;
  if (total_bytes) *total_bytes = 0;
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes*, const void*) {
  return histeq::nocuda::no_device();
}

inline cudaError_t cudaMalloc(void** p, std::size_t) {
  if (p) *p = nullptr;
  return histeq::nocuda::no_device();
}
template <class T>
cudaError_t cudaMalloc(T** p, std::size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
inline cudaError_t cudaFree(void*) { return cudaSuccess; }  // nothing was ever allocated
inline cudaError_t cudaMallocHost(void** p, std::size_t) {
  if (p) *p = nullptr;
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaFreeHost(void*) { return cudaSuccess; }
inline cudaError_t cudaMemcpy(void*, const void*, std::size_t, cudaMemcpyKind) {
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaMemcpyAsync(void*, const void*, std::size_t, cudaMemcpyKind,
                                   cudaStream_t = nullptr) {
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaMemcpy2DAsync(void*, std::size_t, const void*, std::size_t, std::size_t,
                                     std::size_t, cudaMemcpyKind, cudaStream_t = nullptr) {
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaMemset(void*, int, std::size_t) { return histeq::nocuda::no_device(); }
inline cudaError_t cudaMemsetAsync(void*, int, std::size_t, cudaStream_t = nullptr) {
  return histeq::nocuda::no_device();
}

inline cudaError_t cudaStreamCreate(cudaStream_t* s) {
  if (s) *s = nullptr;
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  return cudaStreamCreate(s);
}
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return histeq::nocuda::no_device(); }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0) {
  return histeq::nocuda::no_device();
}

inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  if (e) *e = nullptr;
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = nullptr) {
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return histeq::nocuda::no_device(); }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  if (ms) *ms = 0.f;
  return histeq::nocuda::no_device();
}

inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes*, const void*) {
  return histeq::nocuda::no_device();
}
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int,
                                                                 std::size_t) {
  if (blocks) *blocks = 0;
  return histeq::nocuda::no_device();
}
