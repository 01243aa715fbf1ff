// jpeg_planes.cpp — luma mode in a JPEG's own YCbCr planes (histeq/jpeg_planes.hpp), on the CPU
// (the cpu room: the codec through its public header, histogram and LUT from the CPU backend).
#include "histeq/jpeg_planes.hpp"

#include <chrono>

#include "histeq/cpu.hpp"
#include "histeq/lut.hpp"
#include "histeq/match.hpp"

namespace histeq {
namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

bool jpeg_planes_backend(Backend requested) { return requested != Backend::cuda; }

bool jpeg_planes_route(const std::uint8_t* data, std::size_t size, const EqualizeOptions& opt,
                       const jpeg::EncodeOptions& enc) {
  if ((opt.mode && *opt.mode != Mode::luma) || opt.kernel != "auto") return false;
  jpeg::Info info;
  return jpeg::read_header(data, size, &info) &&
         jpeg::planes_route(info, enc, jpeg::Orientation::apply);
}

bool equalize_jpeg_planes(const std::uint8_t* data, std::size_t size, const std::string& name,
                          const EqualizeOptions& opt, const jpeg::EncodeOptions& enc,
                          std::uint64_t max_pixels, std::vector<std::uint8_t>* encoded,
                          EqualizeReport* report, int* width, int* height) {
  const auto t_total = Clock::now();
  jpeg::DecodeOptions dec;
  dec.max_pixels = max_pixels;
  dec.orientation = jpeg::Orientation::apply;  // a rotation to apply: off the route (below)
  jpeg::Planes p = jpeg::decode_planes(data, size, name, dec);
  if (p.width == 0) return false;
  EqualizeReport local;
  EqualizeReport& rep = report ? *report : local;
  rep = EqualizeReport{};
  rep.backend = "cpu";
  rep.device = "CPU (1 thread)";
  rep.kernel = "cpu";
  rep.mode = Mode::luma;
  rep.times.decode_ms = ms_since(t_total);
  jpeg::Plane& y = p.plane[0];

  auto t = Clock::now();
  rep.histograms.push_back(
      cpu::histogram_rows(y.data.get(), std::size_t(y.width), std::size_t(y.height), y.stride));
  rep.times.histogram_ms = ms_since(t);
  t = Clock::now();
  // Matching (opt.reference: the reference's luma histogram, checked by the caller): Y to it.
  rep.luts.push_back(opt.reference ? match_lut(rep.histograms[0].data(), (*opt.reference)[0].data())
                                   : make_lut(rep.histograms[0].data(), opt.formula));
  rep.times.cdf_lut_ms = ms_since(t);
  t = Clock::now();
  // The whole buffer, padding included: the padding repeats edge samples, and the LUT of an
  // edge sample is what the encoder's own edge padding would repeat.
  cpu::apply(y.data.get(), y.stride * std::size_t(y.rows), 1, Mode::gray, rep.luts.data(),
             y.data.get(), 1);
  rep.times.apply_ms = ms_since(t);

  t = Clock::now();
  *encoded = jpeg::encode_planes(p, enc);
  rep.times.encode_ms = ms_since(t);
  rep.times.total_ms = ms_since(t_total);
  if (width) *width = p.width;
  if (height) *height = p.height;
  return true;
}

}  // namespace histeq
