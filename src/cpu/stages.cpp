// stages.cpp — the 8-bit stage sequence on the CPU (cpu::equalize_stages, histeq/cpu.hpp): what
// equalize() runs on the CPU backend and what the executor's CPU workers run per image.
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "histeq/cpu.hpp"
#include "histeq/planes.hpp"

namespace histeq::cpu {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// in: the input; reuse: the same image when its buffer may take the result, else null.
Image run_stages(const Image& in, Image* reuse, const EqualizeOptions& opt, bool apply_luts,
                 int threads, EqualizeReport& rep) {
  constexpr int kBins = 256;
  const auto t_total = Clock::now();
  const int n_threads = threads > 0 ? threads : usable_cpus();
  const Mode mode = opt.mode.value_or(default_mode(in.channels));
  const std::size_t pixels = in.pixel_count();
  const int planes_n = plane_count(mode, in.channels);
  rep.backend = "cpu";
  rep.device = "CPU (" + std::to_string(n_threads) + (n_threads == 1 ? " thread)" : " threads)");
  rep.kernel = "cpu";
  rep.mode = mode;

  auto t0 = Clock::now();
  std::vector<std::uint8_t> planes_buf;
  const std::uint8_t* planes = in.pixels.data();
  if (in.channels > 1) {
    planes_buf.resize(std::size_t(planes_n) * pixels);
    extract_planes(in.pixels.data(), pixels, in.channels, mode, planes_buf.data(), n_threads);
    planes = planes_buf.data();
  }
  rep.histograms.clear();
  for (int p = 0; p < planes_n; ++p)
    rep.histograms.push_back(
        histogram(planes + std::size_t(p) * pixels, pixels, SampleType::u8, kBins, n_threads));
  rep.times.histogram_ms = ms_since(t0);

  Image out;
  if (apply_luts) {
    t0 = Clock::now();
    rep.luts.clear();
    for (const Histogram& h : rep.histograms) rep.luts.push_back(make_lut(h.data(), opt.formula));
    rep.times.cdf_lut_ms = ms_since(t0);
    t0 = Clock::now();
    std::vector<std::uint8_t>().swap(planes_buf);
    const int out_ch = output_channels(mode, in.channels);
    if (reuse && out_ch == in.channels) {
      // cpu::apply reads each pixel before writing it: in == out is safe when the channel
      // counts match (each slice touches only its own pixels).
      apply(reuse->pixels.data(), pixels, in.channels, mode, rep.luts.data(), reuse->pixels.data(),
            n_threads);
      out = std::move(*reuse);
    } else {
      out.width = in.width;
      out.height = in.height;
      out.channels = out_ch;
      out.exif = in.exif;
      out.icc = in.icc;
      out.pixels.resize(pixels * std::size_t(out_ch));
      apply(in.pixels.data(), pixels, in.channels, mode, rep.luts.data(), out.pixels.data(),
            n_threads);
    }
    rep.times.apply_ms = ms_since(t0);
  }
  rep.times.total_ms = ms_since(t_total);
  return out;
}

}  // namespace

Image equalize_stages(const Image& in, const EqualizeOptions& opt, bool apply, int threads,
                      EqualizeReport& rep) {
  return run_stages(in, nullptr, opt, apply, threads, rep);
}

Image equalize_stages(Image&& in, const EqualizeOptions& opt, bool apply, int threads,
                      EqualizeReport& rep) {
  return run_stages(in, &in, opt, apply, threads, rep);
}

}  // namespace histeq::cpu
