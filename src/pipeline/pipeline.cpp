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

#include "device_buffer.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/planes.hpp"
#include "registry.hpp"
#include "stages.hpp"

namespace histeq {

namespace {

constexpr int kBins = 256;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

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

int cpu_threads() { return cpu::usable_cpus(); }

std::uint64_t sum_of(const Histogram& h) {
  std::uint64_t s = 0;
  for (std::uint64_t c : h) s += c;
  return s;
}

/// What both equalize() and image_histograms() do; `apply_luts` false stops after the histogram.
struct Run {
  ImageView<std::uint8_t> in;
  const EqualizeOptions& opt;
  Mode mode;
  int planes;
  int out_channels;
  std::size_t pixels;
  std::uint8_t* out;  ///< pixels · out_channels bytes (apply_luts only)
};

void run_cpu(const Run& r, bool apply_luts, EqualizeReport& rep) {
  const auto t_total = Clock::now();
  const int threads = cpu_threads();
  rep.backend = "cpu";
  rep.device = "CPU (" + std::to_string(threads) + (threads == 1 ? " thread)" : " threads)");
  rep.kernel = "cpu";

  // Histogram (with plane extraction for 2–4 channels).
  auto t0 = Clock::now();
  std::vector<std::uint8_t> planes_buf;
  const std::uint8_t* planes = r.in.pixels;
  if (r.in.channels > 1) {
    planes_buf.resize(std::size_t(r.planes) * r.pixels);
    cpu::extract_planes(r.in.pixels, r.pixels, r.in.channels, r.mode, planes_buf.data(), threads,
                        r.opt.order);
    planes = planes_buf.data();
  }
  rep.histograms.clear();
  for (int p = 0; p < r.planes; ++p) {
    rep.histograms.push_back(cpu::histogram(planes + std::size_t(p) * r.pixels, r.pixels,
                                            SampleType::u8, kBins, threads));
  }
  rep.times.histogram_ms = ms_since(t0);

  if (apply_luts) {
    t0 = Clock::now();
    rep.luts.clear();
    for (const Histogram& h : rep.histograms) rep.luts.push_back(make_lut(h.data(), r.opt.formula));
    rep.times.cdf_lut_ms = ms_since(t0);

    t0 = Clock::now();
    cpu::apply(r.in.pixels, r.pixels, r.in.channels, r.mode, rep.luts.data(), r.out, threads,
               r.opt.order);
    rep.times.apply_ms = ms_since(t0);
  }
  rep.times.total_ms = ms_since(t_total);
}

/// A copy of n pixels of `channels` (3 or 4) interleaved samples with the first and third
/// channels swapped (BGR ↔ RGB), for the device stages, which take RGB.
std::vector<std::uint8_t> swap_red_blue(const std::uint8_t* p, std::size_t n, int channels) {
  std::vector<std::uint8_t> v(p, p + n * std::size_t(channels));
  for (std::size_t i = 0; i < n; ++i) std::swap(v[i * channels], v[i * channels + 2]);
  return v;
}

void run_cuda(const Run& r, bool apply_luts, EqualizeReport& rep) {
  const auto t_total = Clock::now();
  rep.backend = "cuda";
  rep.device = gpu::device_name();

  gpu::Equalizer eq;
  const cudaStream_t s = eq.stream();
  const std::size_t in_bytes = r.in.sample_count();
  const std::size_t out_bytes = r.pixels * std::size_t(r.out_channels);
  // BGR in luma or gray mode: the device stages compute luma from RGB, so they get a swapped
  // copy (and luma mode's result is swapped back below).
  const bool swap = r.opt.order == ChannelOrder::bgr && r.in.channels >= 3 && r.mode != Mode::rgb;
  std::vector<std::uint8_t> swapped;
  if (swap) swapped = swap_red_blue(r.in.pixels, r.pixels, r.in.channels);
  const std::uint8_t* host_in = swap ? swapped.data() : r.in.pixels;

  // Allocate everything before the clock starts (allocation is not a pipeline stage).
  DeviceBuffer<std::uint8_t> d_in(in_bytes);
  DeviceBuffer<std::uint8_t> d_planes(r.in.channels > 1 ? std::size_t(r.planes) * r.pixels : 0);
  DeviceBuffer<std::uint8_t> d_out(apply_luts ? out_bytes : 0);
  std::uint64_t* d_hist = eq.device_hist(r.planes);
  std::uint8_t* d_luts = eq.device_lut(r.planes);
  const std::uint8_t* planes = r.in.channels > 1 ? d_planes.get() : d_in.get();

  Event e_start, e_up, e_hist, e_lut, e_apply, e_down;
  e_start.record(s);
  if (in_bytes > 0) {
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(d_in.get(), host_in, in_bytes, cudaMemcpyHostToDevice, s));
  }
  e_up.record(s);

  if (r.in.channels > 1) {
    eq.extract_planes(d_in.get(), r.pixels, r.in.channels, r.mode, d_planes.get());
  }
  std::string ran;
  for (int p = 0; p < r.planes; ++p) {
    ran = eq.histogram(r.opt.kernel, planes + std::size_t(p) * r.pixels, r.pixels, SampleType::u8,
                       kBins, d_hist + std::size_t(p) * kBins, r.opt.block_size);
  }
  e_hist.record(s);
  rep.kernel = ran.empty() ? r.opt.kernel : ran;

  if (apply_luts) {
    eq.cdf_lut(d_hist, r.planes, r.opt.formula, d_luts);
    e_lut.record(s);
    eq.apply(d_in.get(), r.pixels, r.in.channels, r.mode, d_luts, d_out.get());
    e_apply.record(s);
    if (out_bytes > 0) {
      HISTEQ_CUDA_CHECK(cudaMemcpyAsync(r.out, d_out.get(), out_bytes, cudaMemcpyDeviceToHost, s));
    }
    e_down.record(s);
  }

  // The small per-plane results for the report (after the timed region).
  std::vector<std::uint64_t> h_hist(std::size_t(r.planes) * kBins);
  HISTEQ_CUDA_CHECK(cudaMemcpyAsync(h_hist.data(), d_hist, h_hist.size() * sizeof(std::uint64_t),
                                    cudaMemcpyDeviceToHost, s));
  std::vector<std::uint8_t> h_lut;
  if (apply_luts) {
    h_lut.resize(std::size_t(r.planes) * kBins);
    HISTEQ_CUDA_CHECK(
        cudaMemcpyAsync(h_lut.data(), d_luts, h_lut.size(), cudaMemcpyDeviceToHost, s));
  }
  eq.synchronize();
  if (apply_luts && swap && r.out_channels >= 3) {
    for (std::size_t i = 0; i < r.pixels; ++i)
      std::swap(r.out[i * r.out_channels], r.out[i * r.out_channels + 2]);
  }

  rep.times.upload_ms = e_up.since(e_start);
  rep.times.histogram_ms = e_hist.since(e_up);
  if (apply_luts) {
    rep.times.cdf_lut_ms = e_lut.since(e_hist);
    rep.times.apply_ms = e_apply.since(e_lut);
    rep.times.download_ms = e_down.since(e_apply);
  }

  rep.histograms.clear();
  rep.luts.clear();
  for (int p = 0; p < r.planes; ++p) {
    rep.histograms.emplace_back(h_hist.begin() + std::ptrdiff_t(p) * kBins,
                                h_hist.begin() + std::ptrdiff_t(p + 1) * kBins);
    if (apply_luts) {
      Lut l;
      std::copy(h_lut.begin() + std::ptrdiff_t(p) * kBins,
                h_lut.begin() + std::ptrdiff_t(p + 1) * kBins, l.begin());
      rep.luts.push_back(l);
    }
  }
  rep.times.total_ms = ms_since(t_total);
}

/// The run on a checked view; `out` receives the image when apply_luts (else unused).
void run(const ImageView<std::uint8_t>& in, const EqualizeOptions& opt, bool apply_luts,
         std::uint8_t* out, EqualizeReport* report) {
  check_kernel_name(opt.kernel);
  const Backend backend = resolve_backend(opt.backend);
  const Mode mode = opt.mode.value_or(default_mode(in.channels));
  const Run r{in,
              opt,
              mode,
              plane_count(mode, in.channels),
              output_channels(mode, in.channels),
              in.pixel_count(),
              out};

  EqualizeReport local;
  EqualizeReport& rep = report ? *report : local;
  rep = EqualizeReport{};
  rep.mode = mode;

  if (backend == Backend::cuda) {
    run_cuda(r, apply_luts, rep);
  } else {
    run_cpu(r, apply_luts, rep);
  }

  rep.racy_lost = 0;
  if (rep.backend == "cuda" && !kernels::find_kernel(rep.kernel).exact) {
    for (const Histogram& h : rep.histograms) {
      const std::uint64_t s = sum_of(h);
      rep.racy_lost += s < r.pixels ? r.pixels - s : 0;
    }
  }
}

ImageView<std::uint8_t> view_of(const Image& in) {
  return {in.pixels.data(), in.width, in.height, in.channels};
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
    throw Error("--backend cuda: no usable CUDA device (" + why + ")");
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
