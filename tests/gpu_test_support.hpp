// gpu_test_support.hpp — device helpers shared by the GPU test files: upload, download, and one
// registry kernel run with a poisoned histogram. Header-only (inline); only for test binaries
// that link histeq_lib.
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "histeq/types.hpp"
#include "histogram/contract.hpp"
#include "histogram/registry.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"

namespace histeq::test {

/// Copies host samples into a new device byte buffer, `offset` bytes in (to test misaligned
/// inputs; the buffer holds offset + the data). Complete on return.
///
/// The cudaDeviceSynchronize is needed: a cudaMemcpy from pageable host memory to the device
/// returns once the data is in the driver's staging buffer, possibly before the DMA to the
/// destination has finished (CUDA Runtime API, "API synchronization behavior"), and only the
/// legacy default stream is ordered after it. Kernels here run on non-blocking streams, which
/// are not: without the sync a kernel may read the buffer's old contents.
template <typename T>
DeviceBuffer<std::uint8_t> upload_bytes(const std::vector<T>& host, std::size_t offset = 0) {
  const std::size_t bytes = host.size() * sizeof(T);
  DeviceBuffer<std::uint8_t> d(bytes + offset);
  if (bytes) {
    HISTEQ_CUDA_CHECK(cudaMemcpy(d.get() + offset, host.data(), bytes, cudaMemcpyHostToDevice));
    HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return d;
}

/// Copies host values into a new typed device buffer. Complete on return (see upload_bytes).
template <typename T>
DeviceBuffer<T> upload_typed(const std::vector<T>& v) {
  DeviceBuffer<T> d(v.size());
  if (!v.empty()) {
    HISTEQ_CUDA_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return d;
}

/// count values from device memory (synchronous; callers sync their streams first).
template <typename T>
std::vector<T> download(const T* d, std::size_t count) {
  std::vector<T> v(count);
  if (count) HISTEQ_CUDA_CHECK(cudaMemcpy(v.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

/// Runs `e` through the registry's checked entry point on a new non-blocking stream, with d_hist
/// poisoned (0xFF bytes) first, and returns the downloaded histogram. block_size 0: the kernel's
/// default.
inline Histogram run_kernel(const kernels::KernelEntry& e, const void* d_in, std::size_t n,
                            SampleType type, int bins, int block_size = 0) {
  Stream stream;
  DeviceBuffer<std::uint64_t> d_hist(static_cast<std::size_t>(bins));
  DeviceBuffer<std::uint8_t> scratch(e.scratch_bytes(n, bins, type));
  HISTEQ_CUDA_CHECK(cudaMemsetAsync(d_hist.get(), 0xFF, d_hist.bytes(), stream.get()));
  kernels::prepare_scratch(e, scratch.get(), scratch.bytes(), stream.get());
  kernels::HistogramLaunch call;
  call.d_in = d_in;
  call.n = n;
  call.type = type;
  call.bins = bins;
  call.d_hist = d_hist.get();
  call.d_scratch = scratch.get();
  call.stream = stream.get();
  call.block_size = block_size;
  kernels::run_histogram(e, call);
  Histogram h(static_cast<std::size_t>(bins));
  HISTEQ_CUDA_CHECK(cudaMemcpyAsync(h.data(), d_hist.get(), d_hist.bytes(), cudaMemcpyDeviceToHost,
                                    stream.get()));
  stream.sync();
  return h;
}

/// Every registry entry, as the parameters of a kernel-parameterized test suite (the table is
/// plain data: safe in a parameter generator, nothing touches CUDA).
inline std::vector<const kernels::KernelEntry*> registry_entries() {
  std::vector<const kernels::KernelEntry*> v;
  for (const kernels::KernelEntry& e : kernels::registry()) v.push_back(&e);
  return v;
}

/// A test-name-safe form of any label (non-alphanumerics become '_').
inline std::string name_safe(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

/// The parameter name of a kernel-parameterized test: the kernel's name.
inline std::string kernel_param_name(
    const testing::TestParamInfo<const kernels::KernelEntry*>& info) {
  return name_safe(info.param->name);
}

}  // namespace histeq::test

namespace histeq::kernels {
/// Prints a registry entry by its name in test listings (found by ADL on KernelEntry).
inline void PrintTo(const KernelEntry* e, std::ostream* os) { *os << (e ? e->name : "null"); }
}  // namespace histeq::kernels
