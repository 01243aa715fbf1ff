// jpeg_planes_probe.cpp — luma mode of colour JPEGs two ways, on the CPU, one thread: in the
// file's YCbCr planes (equalize_jpeg_planes) and through decoded RGB pixels (decode, equalize,
// encode: OpenCV's YCrCb round trip). Prints per file the time of each route and how far each
// route's decoded output is from the ideal (luma mode applied to the decoded input pixels, before
// any re-encoding), and how far the two outputs are from each other.
//
//   cmake --build build --target histeq_lib histeq_host
//   g++ -O2 -std=c++17 bench/probes/jpeg_planes_probe.cpp -Iinclude -Icore \
//       build/libhisteq.a build/libhisteq_host.a -L/usr/local/cuda/lib64 -lcudart \
//       -ljpeg -ldeflate -lisal -lspng -lpthread -ldl -lrt -o /tmp/jpeg_planes_probe
//   /tmp/jpeg_planes_probe photos/*.jpg
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "histeq/image_io.hpp"
#include "histeq/jpeg_planes.hpp"
#include "histeq/pipeline.hpp"

using namespace histeq;
using Clock = std::chrono::steady_clock;

namespace {
std::vector<std::uint8_t> read_file(const char* p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
struct Distance {
  double mean = 0, over3 = 0;  // mean |difference| in levels; % of samples more than 3 apart
  int max = 0;
};
Distance distance(const Image& a, const Image& b) {
  Distance d;
  std::size_t over = 0;
  for (std::size_t i = 0; i < a.pixels.size(); ++i) {
    const int v = std::abs(int(a.pixels[i]) - int(b.pixels[i]));
    d.mean += v;
    over += v > 3;
    d.max = std::max(d.max, v);
  }
  d.mean /= double(a.pixels.size());
  d.over3 = 100.0 * double(over) / double(a.pixels.size());
  return d;
}
}  // namespace

int main(int argc, char** argv) {
  std::printf(
      "| file | sampling | planes ms | RGB route ms | planes vs ideal: mean, >3 | RGB route "
      "vs ideal: mean, >3 | planes vs RGB route: mean, max |\n|---|---|---:|---:|---|---|---|\n");
  double t_planes = 0, t_rgb = 0;
  for (int i = 1; i < argc; ++i) {
    const std::vector<std::uint8_t> b = read_file(argv[i]);
    EqualizeOptions o;
    o.backend = Backend::cpu;
    const jpeg::EncodeOptions enc;  // q95, 4:2:0
    if (!jpeg_planes_route(b.data(), b.size(), o, enc)) {
      std::printf("| %s | (not the planes route) |\n", argv[i]);
      continue;
    }
    jpeg::Info info;
    jpeg::read_header(b.data(), b.size(), &info);
    auto t = Clock::now();
    std::vector<std::uint8_t> a;
    if (!equalize_jpeg_planes(b.data(), b.size(), argv[i], o, enc, kDefaultMaxPixels, &a, nullptr,
                              nullptr, nullptr)) {
      std::printf("| %s | (a marker after the frame header: not the planes route) |\n", argv[i]);
      continue;
    }
    const double ta = ms_since(t);
    t = Clock::now();
    const Image in = decode_image(b.data(), b.size(), argv[i], kDefaultMaxPixels);
    const Image ideal = equalize(in, o);
    const std::vector<std::uint8_t> r = jpeg::encode(ideal, enc);
    const double tr = ms_since(t);
    t_planes += ta;
    t_rgb += tr;
    const Image da = decode_image(a.data(), a.size(), "planes", kDefaultMaxPixels);
    const Image dr = decode_image(r.data(), r.size(), "rgb", kDefaultMaxPixels);
    const Distance pa = distance(da, ideal), pr = distance(dr, ideal), ar = distance(da, dr);
    std::printf("| %s | %s | %.1f | %.1f | %.2f, %.1f %% | %.2f, %.1f %% | %.2f, %d |\n", argv[i],
                info.subsampling.c_str(), ta, tr, pa.mean, pa.over3, pr.mean, pr.over3, ar.mean,
                ar.max);
  }
  std::printf("\nsum: planes %.0f ms, RGB route %.0f ms (one thread each)\n", t_planes, t_rgb);
}
