// device.hpp — host-side helpers every kernel family's launch code shares: the current device's
// SM count and compute capability, how many blocks (or clusters) of a kernel fit at once, and
// per-device one-time settings. Host only (the CUDA runtime API).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "support/cuda_check.hpp"

namespace histeq::kernels::detail {

inline std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

/// Streaming multiprocessors of the current device.
inline int sm_count() {
  int dev = 0, sms = 0;
  HISTEQ_CUDA_CHECK(cudaGetDevice(&dev));
  HISTEQ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

/// Blocks of `kernel` that fit on the whole device at once (occupancy × SMs), at least 1.
/// Memoized per (device, kernel, block, shared memory): the occupancy query costs host time on
/// every launch otherwise, which shows at the small sizes the benchmark measures.
inline std::size_t resident_blocks(const void* kernel, int block, std::size_t dynamic_smem) {
  int dev = 0;
  HISTEQ_CUDA_CHECK(cudaGetDevice(&dev));
  using Key = std::tuple<int, const void*, int, std::size_t>;
  static std::mutex mutex;
  static std::map<Key, std::size_t> memo;
  const Key key{dev, kernel, block, dynamic_smem};
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = memo.find(key);
    if (it != memo.end()) return it->second;
  }
  int per_sm = 0;
  HISTEQ_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, dynamic_smem));
  if (per_sm < 1) per_sm = 1;
  const std::size_t blocks = std::size_t(per_sm) * std::size_t(sm_count());
  std::lock_guard<std::mutex> lock(mutex);
  memo.emplace(key, blocks);
  return blocks;
}

/// Whether the current device is of compute capability 9.0 or newer: thread-block clusters,
/// distributed shared memory, programmatic dependent launch (pdl.cuh). A kernel built for sm_90
/// only must not be touched (cudaFuncSetAttribute, occupancy queries) on an older device.
inline bool sm90_or_newer() {
  int dev = 0, major = 0;
  HISTEQ_CUDA_CHECK(cudaGetDevice(&dev));
  HISTEQ_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  return major >= 9;
}

/// Whether at least one cluster of `kernel` launched as `cfg` (its cluster dimension attribute,
/// or the kernel's __cluster_dims__) fits on the current device, by
/// cudaOccupancyMaxActiveClusters; a shape the query rejects does not fit. Call only where
/// sm90_or_newer(), after the kernel's attributes are set.
inline bool clusters_fit(const void* kernel, const cudaLaunchConfig_t& cfg) {
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();  // an unsupported shape is an answer, not an error
    return false;
  }
  return clusters > 0;
}

/// f() computed once per (current device, tag) and remembered (thread-safe): for per-device
/// settings such as cudaFuncSetAttribute's shared-memory limit, which a launch on another GPU
/// of the same process does not inherit, and per-device queries.
template <typename F>
int per_device_once(const void* tag, F f) {
  int dev = 0;
  HISTEQ_CUDA_CHECK(cudaGetDevice(&dev));
  using Key = std::pair<int, const void*>;
  static std::mutex mutex;
  static std::map<Key, int> memo;
  std::lock_guard<std::mutex> lock(mutex);  // held across f: a second thread waits, not repeats
  const Key key{dev, tag};
  auto it = memo.find(key);
  if (it != memo.end()) return it->second;
  const int v = f();
  memo.emplace(key, v);
  return v;
}

}  // namespace histeq::kernels::detail
