// device_buffer.hpp — RAII owners for device memory, streams and events. Every cudaMalloc of the
// project lives here; destructors never throw.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

#include "support/cuda_check.hpp"

namespace histeq {

/// Move-only owner of `count` elements of T in device memory (uninitialized).
/// Throws DeviceOutOfMemory naming the size when the allocation fails.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count == 0) return;
    cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(T));
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error state
      std::size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw DeviceOutOfMemory(std::string(kGpuOutOfMemory) + ": needed " +
                                  std::to_string(count * sizeof(T)) + " bytes, " +
                                  std::to_string(free_b) + " of " + std::to_string(total_b) +
                                  " bytes free on the device",
                              int(e));
    }
    if (e != cudaSuccess) detail::throw_cuda(e, "cudaMalloc", __FILE__, __LINE__);
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }

  T* get() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }
  void reset() noexcept {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    count_ = 0;
  }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

/// Owner of a non-blocking CUDA stream.
class Stream {
 public:
  Stream() { HISTEQ_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s_) cudaStreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const noexcept { return s_; }
  void sync() const { HISTEQ_CUDA_CHECK(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_ = nullptr;
};

/// Owner of a CUDA event (timing enabled).
class Event {
 public:
  Event() { HISTEQ_CUDA_CHECK(cudaEventCreate(&e_)); }
  ~Event() {
    if (e_) cudaEventDestroy(e_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const noexcept { return e_; }
  void record(cudaStream_t s) { HISTEQ_CUDA_CHECK(cudaEventRecord(e_, s)); }
  /// Milliseconds from `start` to this event; synchronizes on this event.
  float since(const Event& start) const {
    HISTEQ_CUDA_CHECK(cudaEventSynchronize(e_));
    float ms = 0;
    HISTEQ_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
    return ms;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace histeq
