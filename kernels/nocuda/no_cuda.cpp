// no_cuda.cpp (CPU-only builds) — the kernels' host entry points in a build without CUDA
// (HISTEQ_CUDA=OFF; cuda_runtime_api.h beside this file stands in for the runtime). The registry
// is empty (there are no GPU histogram kernels to name), the device-code probe says why no GPU
// can be used, and every launch throws the CudaError a device call makes in this build. None of
// them is reached from the CPU paths: histeq::cuda_available() is false, so nothing asks for
// the device.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "batched/batched.hpp"
#include "clahe/clahe.hpp"
#include "equalize/chroma.hpp"
#include "equalize/fused.hpp"
#include "equalize/stages.hpp"
#include "histeq/error.hpp"
#include "histogram/details.hpp"
#include "histogram/region.hpp"
#include "histogram/registry.hpp"
#include "jpeg/idct.hpp"
#include "support/cuda_check.hpp"
#include "support/stream_hold.hpp"
#include "support/stream_read.hpp"
#include "u16/hist_u16.hpp"

namespace histeq::kernels {
namespace {

/// What every launch does in this build: the CudaError of a device call without a device.
[[noreturn]] void no_gpu(const char* what) {
  detail::throw_cuda(cudaErrorNoDevice, what, __FILE__, __LINE__);
}

}  // namespace

// ---- registry.hpp ----
const std::vector<KernelEntry>& registry() {
  static const std::vector<KernelEntry> none;
  return none;
}
const KernelEntry& find_kernel(std::string_view name) {
  throw UsageError("unknown kernel '" + std::string(name) +
                   "': histeq was built without CUDA (HISTEQ_CUDA=OFF), so it has no GPU "
                   "histogram kernels; use kernel auto");
}
std::string kernel_names() { return ""; }
const KernelEntry& choose_auto(const HistogramLaunch&) { no_gpu("choose_auto"); }
void prepare_scratch(const KernelEntry&, void*, std::size_t, cudaStream_t) {
  no_gpu("prepare_scratch");
}
void run_histogram(const KernelEntry&, const HistogramLaunch&) { no_gpu("run_histogram"); }

// ---- stages.hpp ----
void launch_cdf_lut(const std::uint64_t*, std::uint8_t*, Formula, cudaStream_t) {
  no_gpu("launch_cdf_lut");
}
void launch_cdf_lut_planes(const std::uint64_t*, int, std::uint8_t*, Formula, cudaStream_t) {
  no_gpu("launch_cdf_lut_planes");
}
void launch_extract_planes(const std::uint8_t*, std::size_t, int, Mode, std::uint8_t*,
                           cudaStream_t) {
  no_gpu("launch_extract_planes");
}
void launch_apply(const std::uint8_t*, std::size_t, int, Mode, const std::uint8_t*, std::uint8_t*,
                  cudaStream_t) {
  no_gpu("launch_apply");
}
void launch_apply_gray(const std::uint8_t*, std::size_t, const std::uint8_t*, std::uint8_t*,
                       cudaStream_t, unsigned, const Tuning&) {
  no_gpu("launch_apply_gray");
}
void launch_match_lut_planes(const std::uint64_t*, int, const std::uint64_t*, bool, std::uint8_t*,
                             cudaStream_t) {
  no_gpu("launch_match_lut_planes");
}
cudaError_t probe_device_code() { return cudaErrorNoDevice; }

// ---- region.hpp ----
void region_histogram_u8(const RegionLaunch&, const Tuning&) { no_gpu("region_histogram_u8"); }
std::size_t region_state_bytes() { return 0; }
void region_lut_u8(const RegionLaunch&, void*, Formula, std::uint8_t*, const Tuning&) {
  no_gpu("region_lut_u8");
}

// ---- idct.hpp ----
void idct_plane(const IdctPlane&, cudaStream_t) { no_gpu("idct_plane"); }

// ---- batched.hpp ----
std::size_t batch_scratch_bytes(std::size_t) { return 0; }
void launch_equalize_batch(const BatchImage*, std::size_t, Formula, std::uint8_t*, void*,
                           std::size_t, cudaStream_t, const Tuning&) {
  no_gpu("launch_equalize_batch");
}
void launch_histogram_batch(const BatchImage*, std::size_t, std::uint64_t*, cudaStream_t) {
  no_gpu("launch_histogram_batch");
}
void launch_apply_batch(const BatchImage*, std::size_t, const std::uint8_t*, cudaStream_t,
                        const Tuning&) {
  no_gpu("launch_apply_batch");
}
void launch_equalize_batch_uniform(const std::uint8_t*, std::uint8_t*, std::size_t, std::size_t,
                                   Formula, std::uint8_t*, void*, std::size_t, unsigned,
                                   cudaStream_t) {
  no_gpu("launch_equalize_batch_uniform");
}
void launch_equalize_batch_uniform_pair(const std::uint8_t*, std::uint8_t*, std::size_t,
                                        std::size_t, Formula, std::uint8_t*, void*, std::size_t,
                                        cudaStream_t, const Tuning&) {
  no_gpu("launch_equalize_batch_uniform_pair");
}
int cluster_batch_threads(std::size_t, const Tuning&) { return 0; }
int cluster_batch_blocks(const std::uint8_t*, const std::uint8_t*, std::size_t, std::size_t,
                         const Tuning&) {
  return 0;
}
void launch_equalize_batch_uniform_cluster(const std::uint8_t*, std::uint8_t*, std::size_t,
                                           std::size_t, Formula, std::uint8_t*, cudaStream_t,
                                           const Tuning&) {
  no_gpu("launch_equalize_batch_uniform_cluster");
}
BatchPath choose_batch_path(const std::uint8_t*, const std::uint8_t*, std::size_t, std::size_t,
                            const Tuning&) {
  return BatchPath::two_launch;
}

// ---- fused.hpp ----
bool fused_equalize_supported(std::string* why) {
  if (why) *why = cudaGetErrorString(cudaErrorNoDevice);
  return false;
}
void launch_fused_equalize(const std::uint8_t*, std::uint8_t*, std::size_t, Formula, std::uint64_t*,
                           std::uint64_t*, std::uint8_t*, cudaStream_t) {
  no_gpu("launch_fused_equalize");
}
void launch_fused_equalize_masked(const std::uint8_t*, std::uint8_t*, std::size_t,
                                  const std::uint8_t*, Formula, std::uint64_t*, std::uint64_t*,
                                  std::uint64_t*, std::uint8_t*, cudaStream_t, const Tuning&) {
  no_gpu("launch_fused_equalize_masked");
}

// ---- hist_u16.hpp ----
void hist_u16(const std::uint16_t*, std::size_t, std::uint64_t*, cudaStream_t, std::uint32_t*, bool,
              const Tuning&) {
  no_gpu("hist_u16");
}
std::size_t hist_u16_scratch_words() { return 0; }
void hist_u16_packed(const std::uint16_t*, std::size_t, std::uint64_t*, std::uint32_t*,
                     cudaStream_t, bool, const Tuning&) {
  no_gpu("hist_u16_packed");
}
void hist_u16_region(const RegionLaunch&, std::uint32_t*, const Tuning&) {
  no_gpu("hist_u16_region");
}
void match_lut_u16(const std::uint64_t*, const std::uint64_t*, std::uint16_t*, std::uint64_t*,
                   cudaStream_t) {
  no_gpu("match_lut_u16");
}
std::size_t match_lut_u16_scratch_words() { return 0; }
void lut_u16(const std::uint64_t*, std::uint16_t*, cudaStream_t, const Tuning&) {
  no_gpu("lut_u16");
}
void apply_u16(const std::uint16_t*, std::uint16_t*, std::size_t, const std::uint16_t*,
               cudaStream_t, const Tuning&) {
  no_gpu("apply_u16");
}

// ---- clahe.hpp ----
std::size_t clahe_partial_words(const clahe_formula::Geometry&, const Tuning&) { return 0; }
std::size_t clahe_ticket_words(const clahe_formula::Geometry&) { return 0; }
std::size_t clahe_pair_lut_words(const clahe_formula::Geometry&) { return 0; }
bool clahe_uses_pair_luts(const clahe_formula::Geometry&, const Tuning&) { return false; }
void clahe_luts(const void*, const clahe_formula::Geometry&, const ClaheBuffers&, cudaStream_t,
                const Tuning&) {
  no_gpu("clahe_luts");
}
void clahe_apply(const void*, void*, const clahe_formula::Geometry&, const void*, cudaStream_t,
                 const void*, const Tuning&) {
  no_gpu("clahe_apply");
}
void clahe_masked_luts(const void*, const ClaheRegion&, const clahe_formula::Geometry&, double,
                       std::uint32_t*, void*, cudaStream_t) {
  no_gpu("clahe_masked_luts");
}
bool clahe_apply_strip_u8(const std::uint8_t*, std::uint8_t*, const clahe_formula::Geometry&,
                          const std::uint8_t*, cudaStream_t, const Tuning&) {
  no_gpu("clahe_apply_strip_u8");
}
bool clahe_apply_cell_u8(const std::uint8_t*, std::uint8_t*, const clahe_formula::Geometry&,
                         const std::uint8_t*, cudaStream_t, const Tuning&) {
  no_gpu("clahe_apply_cell_u8");
}

// ---- chroma.hpp ----
void launch_average_down(const std::uint8_t*, int, int, std::size_t, int, int, std::uint8_t*,
                         std::size_t, cudaStream_t) {
  no_gpu("launch_average_down");
}

// ---- details.hpp ----
KernelDetails describe(const KernelEntry&, SampleType, int, std::size_t) { no_gpu("describe"); }
std::string format_details(const std::vector<KernelDetails>&) { return ""; }

// ---- stream_read.hpp, stream_hold.hpp (the benchmark's) ----
void launch_stream_read(const void*, std::size_t, unsigned*, int, int, cudaStream_t) {
  no_gpu("launch_stream_read");
}
StreamHold::StreamHold(cudaStream_t, double) { no_gpu("StreamHold"); }
StreamHold::~StreamHold() = default;
void StreamHold::release() {}
bool StreamHold::timed_out() const { return false; }
void launch_empty(cudaStream_t) { no_gpu("launch_empty"); }

}  // namespace histeq::kernels
