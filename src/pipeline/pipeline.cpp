// pipeline.cpp — equalize(): the arrows of DESIGN.md composed, on the GPU or the CPU, with a time
// per stage. Each stage is a function of its own (gpu.hpp / kernels/equalize/stages.hpp on the
// device, cpu.hpp + lut.hpp on the host); this file only orders them, moves the bytes and keeps the
// clock.
//
// Stage timing. CUDA: events recorded on the Equalizer's stream around upload, histogram (for
// colour images this includes extracting the planes: luma or R/G/B, which the histogram needs),
// CDF+LUT, apply and download (pageable host memory). CPU: std::chrono::steady_clock around the
// same stages. total_ms is the wall time of the whole call (device allocation included);
// decode_ms and encode_ms are left to the caller that does the file I/O.
#include "histeq/pipeline.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "equalize/stages.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/planes.hpp"
#include "histogram/registry.hpp"
#include "image_engine.hpp"
#include "support/device_buffer.hpp"

namespace histeq {

namespace {

constexpr int kBins = 256;
void check_image(const Image& in) {
  if (in.channels < 1 || in.channels > 4) {
    throw Error("image has " + std::to_string(in.channels) +
                " channels; expected 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA)");
  }
  if (in.width < 0 || in.height < 0) {
    throw Error("image has negative size " + std::to_string(in.width) + "x" +
                std::to_string(in.height));
  }
  if (in.pixels.size() != in.byte_count()) {
    throw Error("image buffer holds " + std::to_string(in.pixels.size()) + " bytes; " +
                std::to_string(in.width) + "x" + std::to_string(in.height) + "x" +
                std::to_string(in.channels) + " needs " + std::to_string(in.byte_count()));
  }
}

/// Validates a kernel name before any work (also on the CPU backend, so that a typo is the same
/// usage error whichever backend runs). "auto" is always valid.
void check_kernel_name(const std::string& kernel) {
  if (kernel == "auto") return;
  const kernels::KernelEntry& e = kernels::find_kernel(kernel);  // UsageError if unknown
  if (const char* why = e.unsupported(SampleType::u8, kBins)) {
    throw UsageError("kernel '" + kernel + "' cannot equalize 8-bit images (u8, 256 bins): " + why);
  }
}

Image run(const Image& in, const EqualizeOptions& opt, bool apply_luts, EqualizeReport* report) {
  check_image(in);
  check_kernel_name(opt.kernel);
  const Backend backend = resolve_backend(opt.backend);
  EqualizeReport local;
  EqualizeReport& rep = report ? *report : local;
  rep = EqualizeReport{};
  Image out;
  if (backend == Backend::cuda) {
    // One call: copies from and to pageable memory (page-locking a buffer costs more than it
    // saves for one image); the engine's buffers are allocated before its clock starts.
    gpu::ImageEngine engine;
    out = engine.run(in, nullptr, opt, apply_luts, true, rep);
  } else {
    out = cpu::equalize_stages(in, opt, apply_luts, 0, rep);
  }
  return out;
}

}  // namespace

bool cuda_available(std::string* why) {
  try {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();
      if (why) *why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
      return false;
    }
    if (count == 0) {
      if (why) *why = "no CUDA device found";
      return false;
    }
    const cudaError_t p = kernels::probe_device_code();
    if (p != cudaSuccess) {
      if (why) {
        *why = std::string("the device cannot run this build's code (") + cudaGetErrorName(p) +
               ": " + cudaGetErrorString(p) + "); rebuild with CMAKE_CUDA_ARCHITECTURES for it";
      }
      return false;
    }
    return true;
  } catch (const std::exception& ex) {  // never throws (e.g. bad_alloc building the message)
    if (why) *why = ex.what();
    return false;
  } catch (...) {
    return false;
  }
}

Backend resolve_backend(Backend requested, std::string* why_cpu) {
  if (requested == Backend::cpu) return Backend::cpu;
  std::string why;
  if (cuda_available(&why)) return Backend::cuda;
  if (requested == Backend::cuda) {
    throw Error(kNoDeviceForCuda + why + ")");
  }
  if (why_cpu) *why_cpu = why;
  return Backend::cpu;
}

Image equalize(const Image& in, const EqualizeOptions& opt, EqualizeReport* report) {
  return run(in, opt, true, report);
}

std::vector<Histogram> image_histograms(const Image& in, const EqualizeOptions& opt,
                                        EqualizeReport* report) {
  EqualizeReport local;
  EqualizeReport& rep = report ? *report : local;
  run(in, opt, false, &rep);
  return rep.histograms;
}

}  // namespace histeq
