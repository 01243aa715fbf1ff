// make_synthetic.cpp — writes the synthetic sample images of samples/ (gray PNGs):
//   blocky.png    flat 16×16 tiles of a few gray levels: long runs of equal pixels (the case
//                 the `aggregated` kernel is for) and a histogram of a few spikes.
//   hot.png       90% of the pixels exactly 0 (one hot bin: atomic contention on bin 0), the rest
//                 soft bright blobs.
//   gradient.png  a smooth, low-contrast diagonal ramp (values ~90..165) with mild noise:
//                 equalization stretches it over 0..255.
// Deterministic (fixed seeds). Usage: make_synthetic OUTPUT_DIR [SIZE]   (SIZE default 256)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>

#include "histeq/image_io.hpp"

namespace {

histeq::Image gray(int size) {
  histeq::Image img;
  img.width = img.height = size;
  img.channels = 1;
  img.pixels.assign(img.byte_count(), 0);
  return img;
}

histeq::Image blocky(int size) {
  histeq::Image img = gray(size);
  std::mt19937 rng(101);
  const std::uint8_t levels[] = {20, 45, 70, 100, 140, 180, 215, 240};
  const int tile = 16, tiles = (size + tile - 1) / tile;
  for (int ty = 0; ty < tiles; ++ty)
    for (int tx = 0; tx < tiles; ++tx) {
      const std::uint8_t v = levels[rng() % 8];
      for (int y = ty * tile; y < std::min(size, (ty + 1) * tile); ++y)
        for (int x = tx * tile; x < std::min(size, (tx + 1) * tile); ++x)
          img.pixels[std::size_t(y) * size + x] = v;
    }
  return img;
}

histeq::Image hot(int size) {
  histeq::Image img = gray(size);
  std::mt19937 rng(202);
  const std::size_t n = img.pixel_count(), target = n / 10;  // 10% non-zero
  std::size_t lit = 0;
  while (lit < target) {  // blobs until 10% of the pixels are lit
    const int cx = int(rng() % unsigned(size)), cy = int(rng() % unsigned(size));
    const int r = 3 + int(rng() % 10);
    const int peak = 120 + int(rng() % 136);
    for (int y = std::max(0, cy - r); y < std::min(size, cy + r + 1) && lit < target; ++y)
      for (int x = std::max(0, cx - r); x < std::min(size, cx + r + 1) && lit < target; ++x) {
        const double d = std::hypot(x - cx, y - cy) / r;
        if (d > 1) continue;
        std::uint8_t& p = img.pixels[std::size_t(y) * size + x];
        const int v = std::max<int>(1, int(peak * (1 - 0.7 * d)));
        if (p == 0) ++lit;
        p = static_cast<std::uint8_t>(std::max<int>(p, v));
      }
  }
  return img;
}

histeq::Image gradient(int size) {
  histeq::Image img = gray(size);
  std::mt19937 rng(303);
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) {
      const double t = double(x + y) / double(2 * size - 2);            // 0..1 along the diagonal
      const double wave = 6 * std::sin(x * 0.05) * std::cos(y * 0.04);  // soft texture
      const double v = 90 + 75 * t + wave + double(int(rng() % 5) - 2);
      img.pixels[std::size_t(y) * size + x] =
          static_cast<std::uint8_t>(std::lround(std::min(255.0, std::max(0.0, v))));
    }
  return img;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR [SIZE]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int size = argc == 3 ? std::atoi(argv[2]) : 256;
  if (size < 16 || size > 16384) {
    std::fprintf(stderr, "make_synthetic: SIZE %s out of range (16..16384)\n", argv[2]);
    return 2;
  }
  try {
    histeq::save_image(blocky(size), dir + "/blocky.png");
    histeq::save_image(hot(size), dir + "/hot.png");
    histeq::save_image(gradient(size), dir + "/gradient.png");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_synthetic: %s\n", e.what());
    return 1;
  }
  return 0;
}
