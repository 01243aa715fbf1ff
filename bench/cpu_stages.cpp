// cpu_stages.cpp — single-image timing of the CPU backend's stages (cpu.hpp): extract_planes,
// histogram, make_lut and apply, in ns per pixel, as the batch executor calls them (one thread
// per image by default). Not a test: it prints numbers and checks nothing.
//
//   build/bench_cpu_stages [--input FILE] [--width W] [--height H] [--mode luma|rgb|gray]
//                          [--channels 1..4] [--threads T] [--reps N] [--in-place]
//                          [--png-level L] [--noise A]
//
// The image is FILE (default samples/astronaut.png) resized, nearest neighbour, to W×H (default
// 4704×3136 = 14.75 MP, a phone photo), with --channels channels (default 3; alpha, when added, is
// a gradient). Each stage runs --reps times (default 7) on the same buffers; the median and the
// minimum per stage are printed, and the median of the per-repetition totals.
// With --png-level L (0..9), each repetition also times encode_image(image, ".png") at level L
// (the writer of `histeq equalize ... -o OUT.png`, on the calling thread), printed in ms with
// the file's size and FNV-1a checksum (equal before/after when the writer's bytes are).
// --noise A adds a fixed pseudo-random -A..A to every sample (clamped; default 0): the resized
// sample is made of flat 9x6 blocks, which deflate squeezes to 2 % of its size, where a
// photograph's PNG keeps about 60 % (--noise 6 gives that, for timing the PNG encode).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "histeq/cpu.hpp"
#include "histeq/image_io.hpp"
#include "histeq/lut.hpp"
#include "histeq/planes.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr,
               "bench_cpu_stages: %s\nusage: bench_cpu_stages [--input FILE] [--width W] "
               "[--height H] [--mode luma|rgb|gray] [--channels 1..4] [--threads T] [--reps N] "
               "[--in-place] [--png-level L] [--noise A]\n",
               msg);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace histeq;
  std::string input = std::string(HISTEQ_SOURCE_DIR) + "/samples/astronaut.png";
  int width = 4704, height = 3136, channels = 3, threads = 1, reps = 7;
  Mode mode = Mode::luma;
  bool in_place = false;
  int png_level = -1;  // -1: no PNG timing
  int noise = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--input")
      input = next();
    else if (a == "--width")
      width = std::atoi(next());
    else if (a == "--height")
      height = std::atoi(next());
    else if (a == "--channels")
      channels = std::atoi(next());
    else if (a == "--threads")
      threads = std::atoi(next());
    else if (a == "--reps")
      reps = std::atoi(next());
    else if (a == "--mode")
      mode = parse_mode(next());
    else if (a == "--in-place")
      in_place = true;
    else if (a == "--png-level")
      png_level = std::atoi(next());
    else if (a == "--noise")
      noise = std::atoi(next());
    else
      usage(("unknown argument " + a).c_str());
  }
  if (width < 1 || height < 1 || channels < 1 || channels > 4 || reps < 1 || threads < 0 ||
      png_level < -1 || png_level > 9 || noise < 0 || noise > 255)
    usage("bad value");

  // The test image: the source resized (nearest neighbour), its channels mapped onto `channels`.
  const Image src = load_image(input);
  Image img;
  img.width = width;
  img.height = height;
  img.channels = channels;
  img.pixels.resize(img.byte_count());
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const std::uint8_t* s =
          &src.pixels[(std::size_t(y) * std::size_t(src.height) / std::size_t(height) *
                           std::size_t(src.width) +
                       std::size_t(x) * std::size_t(src.width) / std::size_t(width)) *
                      std::size_t(src.channels)];
      std::uint8_t* d = &img.pixels[(std::size_t(y) * std::size_t(width) + std::size_t(x)) *
                                    std::size_t(channels)];
      for (int c = 0; c < channels; ++c) {
        if (c == 3 || (c == 1 && channels == 2))
          d[c] = static_cast<std::uint8_t>((x + y) & 0xff);  // alpha
        else
          d[c] = s[std::min(c, std::min(src.channels, 3) - 1)];
      }
    }

  if (noise > 0) {
    std::uint64_t state = 88172645463325252ull;  // xorshift64: the same noise on every run
    for (std::uint8_t& v : img.pixels) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      const int d = int(state % std::uint64_t(2 * noise + 1)) - noise;
      v = static_cast<std::uint8_t>(std::clamp(int(v) + d, 0, 255));
    }
  }
  const std::size_t px = img.pixel_count();
  const int np = plane_count(mode, channels);
  const int oc = output_channels(mode, channels);
  std::vector<std::uint8_t> planes(px * std::size_t(np));
  std::vector<std::uint8_t> out(in_place ? 0 : px * std::size_t(oc));
  std::vector<std::uint8_t> work = img.pixels;  // the input of apply when --in-place
  if (in_place && oc != channels) usage("--in-place needs as many output channels as input");
  std::vector<double> t_planes, t_hist, t_lut, t_apply, t_total, t_png;
  std::vector<std::uint8_t> png;
  for (int r = 0; r < reps; ++r) {
    if (in_place) work = img.pixels;
    const auto t0 = Clock::now();
    if (channels > 1)
      cpu::extract_planes(img.pixels.data(), px, channels, mode, planes.data(), threads);
    const std::uint8_t* pl = channels > 1 ? planes.data() : img.pixels.data();
    const auto t1 = Clock::now();
    std::vector<Histogram> hists;
    for (int p = 0; p < np; ++p)
      hists.push_back(cpu::histogram(pl + std::size_t(p) * px, px, SampleType::u8, 256, threads));
    const auto t2 = Clock::now();
    std::vector<Lut> luts;
    for (const Histogram& h : hists) luts.push_back(make_lut(h.data(), Formula::opencv));
    const auto t3 = Clock::now();
    if (in_place)
      cpu::apply(work.data(), px, channels, mode, luts.data(), work.data(), threads);
    else
      cpu::apply(img.pixels.data(), px, channels, mode, luts.data(), out.data(), threads);
    const auto t4 = Clock::now();
    auto ns = [px](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double, std::nano>(b - a).count() / double(px);
    };
    t_planes.push_back(ns(t0, t1));
    t_hist.push_back(ns(t1, t2));
    t_lut.push_back(ns(t2, t3));
    t_apply.push_back(ns(t3, t4));
    t_total.push_back(ns(t0, t4));
    if (png_level >= 0) {
      EncodeOptions eo;
      eo.png_level = png_level;
      const auto p0 = Clock::now();
      png = encode_image(img, ".png", eo);
      t_png.push_back(std::chrono::duration<double, std::milli>(Clock::now() - p0).count());
    }
  }
  // A checksum of the output, so that before/after runs can be compared by eye as well.
  const std::vector<std::uint8_t>& res = in_place ? work : out;
  std::uint64_t sum = 1469598103934665603ull;
  for (std::uint8_t b : res) sum = (sum ^ b) * 1099511628211ull;
  std::printf("image %dx%d (%.2f MP), %d channel(s), mode %s, threads %d, %d reps%s%s\n", width,
              height, double(px) / 1e6, channels, to_string(mode), threads, reps,
              in_place ? ", apply in place" : "",
              noise ? (", noise +-" + std::to_string(noise)).c_str() : "");
  std::printf("%-16s %10s %10s\n", "ns/pixel", "median", "min");
  auto row = [](const char* name, const std::vector<double>& v) {
    std::printf("%-16s %10.3f %10.3f\n", name, median(v), *std::min_element(v.begin(), v.end()));
  };
  row("extract_planes", t_planes);
  row("histogram", t_hist);
  row("make_lut", t_lut);
  row("apply", t_apply);
  row("total", t_total);
  std::printf("output FNV-1a %016llx\n", static_cast<unsigned long long>(sum));
  if (png_level >= 0) {
    std::uint64_t psum = 1469598103934665603ull;
    for (std::uint8_t b : png) psum = (psum ^ b) * 1099511628211ull;
    std::printf("png encode, level %d, ms: median %.1f, min %.1f; %zu bytes, FNV-1a %016llx\n",
                png_level, median(t_png), *std::min_element(t_png.begin(), t_png.end()), png.size(),
                static_cast<unsigned long long>(psum));
  }
  return 0;
}
