// A CPU-only program on the installed histeq::host: loads an image, equalizes its gray plane
// with the CPU backend (histogram -> LUT -> apply), saves it, reads it back, and checks that the
// result spans 0..255 and that the saved file holds exactly what was computed.
#include <histeq/cpu.hpp>
#include <histeq/error.hpp>
#include <histeq/image_io.hpp>
#include <histeq/lut.hpp>

#include <algorithm>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IN OUT.png\n", argv[0]);
    return 2;
  }
  try {
    const histeq::Image in = histeq::load_image(argv[1]);
    histeq::Image gray;
    gray.width = in.width;
    gray.height = in.height;
    gray.channels = 1;
    gray.pixels.resize(in.pixel_count());
    histeq::cpu::extract_planes(in.pixels.data(), in.pixel_count(), in.channels, histeq::Mode::gray,
                                gray.pixels.data());
    const histeq::Histogram h =
        histeq::cpu::histogram(gray.pixels.data(), gray.pixels.size(), histeq::SampleType::u8, 256);
    const histeq::Lut lut = histeq::make_lut(h.data(), histeq::Formula::opencv);
    histeq::Image out = gray;
    histeq::cpu::apply(gray.pixels.data(), gray.pixel_count(), 1, histeq::Mode::gray, &lut,
                       out.pixels.data());
    histeq::save_image(out, argv[2]);
    const histeq::Image back = histeq::load_image(argv[2]);
    const auto [lo, hi] = std::minmax_element(out.pixels.begin(), out.pixels.end());
    std::printf("host consumer: %dx%d, output %d..%d\n", out.width, out.height, *lo, *hi);
    if (back.pixels != out.pixels) return 1;
    return *lo == 0 && *hi == 255 ? 0 : 1;
  } catch (const histeq::Error& e) {
    std::fprintf(stderr, "host consumer: %s\n", e.what());
    return 1;
  }
}
