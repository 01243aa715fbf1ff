// stages.cpp — the 8-bit stage sequence on the CPU (cpu::equalize_stages, histeq/cpu.hpp): what
// equalize() and equalize_into() run on the CPU backend and what the executor's CPU workers run
// per image.
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/match.hpp"
#include "histeq/planes.hpp"

namespace histeq::cpu {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

const std::uint64_t* reference_of(const std::vector<Histogram>& ref, std::size_t plane) {
  return ref[ref.size() == 1 ? 0 : plane].data();
}

}  // namespace

void equalize_stages_into(const ImageView<std::uint8_t>& in, const EqualizeOptions& opt,
                          bool apply_luts, int threads, std::uint8_t* out, EqualizeReport& rep) {
  constexpr int kBins = 256;
  const auto t_total = Clock::now();
  const int n_threads = threads > 0 ? threads : usable_cpus();
  const Mode mode = opt.mode.value_or(default_mode(in.channels));
  const std::size_t pixels = in.pixel_count();
  const int planes_n = plane_count(mode, in.channels);
  if (!opt.region.all()) opt.region.check(in.width, in.height, "image");
  if (opt.reference) check_match_reference(*opt.reference, planes_n, kBins);
  rep.backend = "cpu";
  rep.device = "CPU (" + std::to_string(n_threads) + (n_threads == 1 ? " thread)" : " threads)");
  rep.kernel = "cpu";
  rep.mode = mode_that_runs(mode, in.channels);

  auto t0 = Clock::now();
  std::vector<std::uint8_t> planes_buf;
  const std::uint8_t* planes = in.pixels;
  if (in.channels > 1) {
    planes_buf.resize(std::size_t(planes_n) * pixels);
    extract_planes(in.pixels, pixels, in.channels, mode, planes_buf.data(), n_threads, opt.order);
    planes = planes_buf.data();
  }
  rep.histograms.clear();
  for (int p = 0; p < planes_n; ++p) {
    const std::uint8_t* plane = planes + std::size_t(p) * pixels;
    rep.histograms.push_back(opt.region.all()
                                 ? histogram(plane, pixels, SampleType::u8, kBins, n_threads)
                                 : histogram(plane, in.width, in.height, opt.region, n_threads));
  }
  rep.times.histogram_ms = ms_since(t0);

  if (apply_luts) {
    t0 = Clock::now();
    rep.luts.clear();
    for (std::size_t p = 0; p < rep.histograms.size(); ++p) {
      const Histogram& h = rep.histograms[p];
      rep.luts.push_back(opt.reference ? match_lut(h.data(), reference_of(*opt.reference, p))
                                       : make_lut(h.data(), opt.formula));
    }
    rep.times.cdf_lut_ms = ms_since(t0);
    t0 = Clock::now();
    std::vector<std::uint8_t>().swap(planes_buf);
    // cpu::apply reads each pixel before writing it: out may be in.pixels.
    apply(in.pixels, pixels, in.channels, mode, rep.luts.data(), out, n_threads, opt.order);
    rep.times.apply_ms = ms_since(t0);
  }
  rep.times.total_ms = ms_since(t_total);
}

Image equalize_stages(const Image& in, const EqualizeOptions& opt, bool apply, int threads,
                      EqualizeReport& rep) {
  const Mode mode = opt.mode.value_or(default_mode(in.channels));
  Image out;
  if (apply) {
    out.width = in.width;
    out.height = in.height;
    out.channels = output_channels(mode, in.channels);
    out.exif = in.exif;
    out.icc = in.icc;
    out.pixels.resize(in.pixel_count() * std::size_t(out.channels));
  }
  equalize_stages_into({in.pixels.data(), in.width, in.height, in.channels}, opt, apply, threads,
                       out.pixels.data(), rep);
  return out;
}

Image equalize_stages(Image&& in, const EqualizeOptions& opt, bool apply, int threads,
                      EqualizeReport& rep) {
  const Mode mode = opt.mode.value_or(default_mode(in.channels));
  if (!apply || output_channels(mode, in.channels) != in.channels)
    return equalize_stages(static_cast<const Image&>(in), opt, apply, threads, rep);
  // The result over the input's pixels: no second image-sized buffer.
  equalize_stages_into({in.pixels.data(), in.width, in.height, in.channels}, opt, apply, threads,
                       in.pixels.data(), rep);
  return std::move(in);
}

}  // namespace histeq::cpu
