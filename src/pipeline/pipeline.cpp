// pipeline.cpp — equalize(): the arrows of DESIGN.md composed, on the GPU or the CPU, with a time
// per stage. Each stage is a function of its own (gpu.hpp / kernels/stages.hpp on the device,
// cpu.hpp + lut.hpp on the host); this file only orders them, moves the bytes and keeps the clock.
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

namespace histeq {

namespace {

constexpr int kBins = 256;
void check_image(const ImageView<std::uint8_t>& in) {
  if (in.channels < 1 || in.channels > 4) {
    throw Error("image has " + std::to_string(in.channels) +
                " channels; expected 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA)");
  }
  if (in.width < 0 || in.height < 0) {
    throw Error("image has negative size " + std::to_string(in.width) + "x" +
                std::to_string(in.height));
  }
  if (in.pixels == nullptr && in.sample_count() > 0) throw Error("image: null pixels");
}

void check_image(const Image& in) {
  check_image(ImageView<std::uint8_t>{in.pixels.data(), in.width, in.height, in.channels});
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

/// The run on a checked view; `out` receives the image when apply_luts (else unused).
void run(const ImageView<std::uint8_t>& in, const EqualizeOptions& opt, bool apply_luts,
         std::uint8_t* out, EqualizeReport* report) {
  check_kernel_name(opt.kernel);
  const Backend backend = resolve_backend(opt.backend);
  EqualizeReport local;
  EqualizeReport& rep = report ? *report : local;
  rep = EqualizeReport{};
  if (backend == Backend::cuda) {
    // One call: copies from and to pageable memory (page-locking a buffer costs more than it
    // saves for one image).
    gpu::ImageEngine engine;
    engine.run_into(in, opt, apply_luts, out, rep);
  } else {
    cpu::equalize_stages_into(in, opt, apply_luts, 0, out, rep);
  }
}

ImageView<std::uint8_t> view_of(const Image& in) {
  return {in.pixels.data(), in.width, in.height, in.channels};
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

bool cuda_exclusive_process_device() {
  const int count = cuda_device_count();
  for (int d = 0; d < count; ++d) {
    int mode = 0;
    if (cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, d) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    if (mode == cudaComputeModeExclusiveProcess) return true;
  }
  return false;
}

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
  check_image(in);
  const Mode mode = opt.mode.value_or(default_mode(in.channels));
  Image out;
  out.width = in.width;
  out.height = in.height;
  out.channels = output_channels(mode, in.channels);
  out.pixels.resize(in.pixel_count() * std::size_t(out.channels));
  run(view_of(in), opt, true, out.pixels.data(), report);
  // metadata travels with the pixels (an encoder drops what no longer fits)
  out.exif = in.exif;
  out.icc = in.icc;
  return out;
}

void equalize_into(const ImageView<std::uint8_t>& in, const EqualizeOptions& opt, std::uint8_t* out,
                   EqualizeReport* report) {
  check_image(in);
  if (out == nullptr && in.sample_count() > 0) throw Error("equalize_into: null output");
  run(in, opt, true, out, report);
}

std::vector<Histogram> image_histograms(const Image& in, const EqualizeOptions& opt,
                                        EqualizeReport* report) {
  check_image(in);
  return image_histograms(view_of(in), opt, report);
}

std::vector<Histogram> image_histograms(const ImageView<std::uint8_t>& in,
                                        const EqualizeOptions& opt, EqualizeReport* report) {
  check_image(in);
  EqualizeReport local;
  EqualizeReport& rep = report ? *report : local;
  run(in, opt, false, nullptr, &rep);
  return rep.histograms;
}

}  // namespace histeq
