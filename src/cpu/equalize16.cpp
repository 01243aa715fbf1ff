// equalize16.cpp — 16-bit histogram and equalization on the CPU (equalize16.hpp).
#include "histeq/equalize16.hpp"
#include "histeq/cpu.hpp"

#include <algorithm>
#include <string>
#include <system_error>
#include <thread>

#include "histeq/error.hpp"

namespace histeq {

std::vector<std::uint16_t> make_lut16(const std::uint64_t* hist) {
  std::vector<std::uint16_t> lut(kBins16);
  std::uint64_t total = 0;
  for (int v = 0; v < kBins16; ++v) total += hist[v];
  int v0 = 0;
  while (v0 < kBins16 && hist[v0] == 0) ++v0;
  if (v0 == kBins16 || hist[v0] == total) {
    for (int v = 0; v < kBins16; ++v) lut[std::size_t(v)] = static_cast<std::uint16_t>(v);
    return lut;
  }
  const std::uint64_t h_v0 = hist[v0];
  const float s = formula16::scale(total, h_v0);
  std::uint64_t cdf = 0;
  for (int v = 0; v < kBins16; ++v) {
    cdf += hist[v];
    lut[std::size_t(v)] = v <= v0 ? 0 : formula16::entry(cdf, h_v0, s);
  }
  return lut;
}

namespace cpu {
namespace {}  // namespace

Histogram histogram16(const std::uint16_t* in, std::size_t n, int threads) {
  std::size_t t = threads > 0 ? std::size_t(threads) : std::size_t(cpu::usable_cpus());
  t = std::max<std::size_t>(1, std::min<std::size_t>(t, n / (1 << 16) + 1));
  std::vector<Histogram> parts(t, Histogram(kBins16, 0));
  auto work = [&](std::size_t w) {
    // The bounds and the counters' address in locals: n and t are size_t, the counters
    // uint64_t, the same type, so a bound read through the capture would be reloaded (and
    // divided) after every increment.
    std::uint64_t* h = parts[w].data();
    const std::size_t begin = w * n / t, end = (w + 1) * n / t;
    for (std::size_t i = begin; i < end; ++i) ++h[in[i]];
  };
  std::vector<std::thread> pool;
  std::vector<std::size_t> here{0};  // slices this thread counts
  for (std::size_t w = 1; w < t; ++w) {
    try {
      pool.emplace_back(work, w);
    } catch (const std::system_error&) {  // no more threads: counted here
      here.push_back(w);
    }
  }
  for (std::size_t w : here) work(w);
  for (auto& th : pool) th.join();
  Histogram h(kBins16, 0);
  for (const Histogram& p : parts)
    for (int v = 0; v < kBins16; ++v) h[std::size_t(v)] += p[std::size_t(v)];
  return h;
}

Image16 equalize16(const Image16& img, Mode mode, int threads) {
  return equalize16(img, mode, threads, Region{}, nullptr);
}

Image16 equalize16(const Image16& img, Mode mode, int threads, const Region& region,
                   const std::vector<Histogram>* reference) {
  if (img.width < 1 || img.height < 1 || img.channels < 1 || img.channels > 4 ||
      img.pixels.size() != img.sample_count()) {
    throw Error("equalize: empty or inconsistent 16-bit image");
  }
  const int c = img.channels;
  if (c >= 3 && mode != Mode::rgb) {
    throw UsageError(std::string("16-bit colour images are equalized per channel: mode '") +
                     to_string(mode) + "' needs 16-bit YCbCr; use mode rgb (or 8 bits)");
  }
  const int planes = c >= 3 ? 3 : 1;
  if (!region.all()) region.check(img.width, img.height, "image");
  if (reference) check_match_reference(*reference, planes, kBins16);
  const std::size_t n = img.pixel_count();
  Image16 out = img;
  std::vector<std::uint16_t> plane(n);
  for (int k = 0; k < planes; ++k) {
    for (std::size_t i = 0; i < n; ++i) plane[i] = img.pixels[i * std::size_t(c) + std::size_t(k)];
    const Histogram h = region.all()
                            ? histogram16(plane.data(), n, threads)
                            : histogram16(plane.data(), img.width, img.height, region, threads);
    const std::uint64_t* ref =
        reference ? (*reference)[reference->size() == 1 ? 0 : std::size_t(k)].data() : nullptr;
    const std::vector<std::uint16_t> lut = ref ? match_lut16(h.data(), ref) : make_lut16(h.data());
    for (std::size_t i = 0; i < n; ++i)
      out.pixels[i * std::size_t(c) + std::size_t(k)] = lut[plane[i]];
  }
  return out;
}

}  // namespace cpu
}  // namespace histeq
