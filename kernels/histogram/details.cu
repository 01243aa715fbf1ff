// details.cu — the occupancy report (details.hpp): launch shape + compiled attributes +
// the CUDA occupancy calculator, per kernel and case; and its text table.
// Source: CUDA Runtime API, "Occupancy" (cudaOccupancyMaxActiveBlocksPerMultiprocessor) and
// cudaFuncGetAttributes; the int-array lesson's point that shared memory per block sets how many
// threads an SM can hold.
#include "histogram/details.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>

#include "histeq/error.hpp"
#include "support/cuda_check.hpp"

namespace histeq::kernels {

KernelDetails describe(const KernelEntry& e, SampleType type, int bins, std::size_t n) {
  KernelDetails d;
  d.name = e.name;
  if (const char* why = e.unsupported(type, bins)) {
    d.supported = false;
    d.reason = why;
    return d;
  }
  d.supported = true;
  if (e.shape == nullptr) {
    d.reason = "no launch shape";
    return d;
  }
  HistogramLaunch call;
  call.n = n;
  call.type = type;
  call.bins = bins;
  LaunchShape s;
  try {
    s = e.shape(call);
  } catch (const UsageError& ex) {
    d.supported = false;
    d.reason = ex.what();
    return d;
  }
  if (s.kernel == nullptr) {
    d.reason = "no launch shape";
    return d;
  }

  int dev = 0;
  HISTEQ_CUDA_CHECK(cudaGetDevice(&dev));
  HISTEQ_CUDA_CHECK(
      cudaDeviceGetAttribute(&d.max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev));
  cudaFuncAttributes attr{};
  HISTEQ_CUDA_CHECK(cudaFuncGetAttributes(&attr, s.kernel));

  d.block_size = s.block_size;
  d.grid_size = s.grid_size;
  d.smem_bytes = s.smem_bytes;
  d.regs_per_thread = attr.numRegs;
  const std::size_t dyn =
      s.smem_bytes > attr.sharedSizeBytes ? s.smem_bytes - attr.sharedSizeBytes : 0;
  // A layout above 48 KB needs the opt-in attribute before the calculator will count it (the
  // kernel's own launch sets it too; setting it here changes nothing else).
  if (dyn > std::size_t(attr.maxDynamicSharedSizeBytes)) {
    int optin = 0;
    HISTEQ_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (dyn + attr.sharedSizeBytes > std::size_t(optin)) {
      d.supported = false;
      d.reason = std::to_string(s.smem_bytes) + " bytes of shared memory per block exceed the " +
                 std::to_string(optin) + " this device allows";
      return d;
    }
    HISTEQ_CUDA_CHECK(
        cudaFuncSetAttribute(s.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dyn)));
  }
  if (s.block_size > 0) {
    HISTEQ_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&d.blocks_per_sm, s.kernel,
                                                                    s.block_size, dyn));
  }
  if (d.max_threads_per_sm > 0) {
    d.occupancy = double(d.blocks_per_sm) * d.block_size / d.max_threads_per_sm;
  }
  if (d.blocks_per_sm == 0) d.reason = "no block of this shape fits on an SM";
  return d;
}

namespace {

std::string num(long long v, bool known) { return known ? std::to_string(v) : "-"; }

std::string percent(double occ, bool known) {
  if (!known) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", occ * 100.0);
  return buf;
}

}  // namespace

std::string format_details(const std::vector<KernelDetails>& rows) {
  const std::vector<std::string> header = {"kernel", "block",     "grid",      "smem/block",
                                           "regs",   "blocks/SM", "occupancy", "note"};
  std::vector<std::vector<std::string>> cells;
  cells.push_back(header);
  for (const KernelDetails& d : rows) {
    const bool known = d.supported && d.block_size > 0;
    std::string note = d.supported ? d.reason : "unsupported: " + d.reason;
    cells.push_back({d.name, num(d.block_size, known), num(d.grid_size, known),
                     num((long long)d.smem_bytes, known), num(d.regs_per_thread, known),
                     num(d.blocks_per_sm, known), percent(d.occupancy, known), note});
  }
  const std::size_t cols = header.size();
  std::vector<std::size_t> width(cols, 0);
  for (const auto& r : cells) {
    for (std::size_t c = 0; c < cols; ++c) width[c] = std::max(width[c], r[c].size());
  }
  std::string out;
  for (const auto& r : cells) {
    std::string line;
    for (std::size_t c = 0; c < cols; ++c) {
      const std::string& v = r[c];
      if (c > 0) line += "  ";
      const std::string pad(width[c] - v.size(), ' ');
      if (c == 0) {
        line += v + pad;  // name: left-aligned
      } else if (c + 1 == cols) {
        line += v;  // note: last, unpadded
      } else {
        line += pad + v;  // numbers: right-aligned
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace histeq::kernels
