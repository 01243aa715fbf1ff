// region_test_support.hpp — what the tests of counted regions and of tuned kernel paths share:
// the masks of every kind they count (mask_of) and a named Tuning to run a parameterized test
// under (Config). Header-only; only for test binaries.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>

#include "histeq/image_io.hpp"
#include "histeq/tuning.hpp"

namespace histeq::test {

/// Mask kinds: 0 a disc (255 inside); 1 random pixels of random nonzero values; 2 every pixel
/// (7); 3 one pixel; 4 the central 80 % of rows and columns (a letterbox); 5 runs of 16 and 48
/// pixels on and off along the buffer (whole zero, whole nonzero and mixed 16-byte vectors at
/// any phase); 6 nothing.
inline std::shared_ptr<const Image> mask_of(int w, int h, int kind, std::uint32_t seed) {
  std::mt19937 rng(seed);
  auto m = std::make_shared<Image>();
  m->width = w;
  m->height = h;
  m->channels = 1;
  m->pixels.assign(std::size_t(w) * std::size_t(h), 0);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const std::size_t i = std::size_t(y) * std::size_t(w) + std::size_t(x);
      const int dx = 2 * x - w, dy = 2 * y - h;
      std::uint8_t v = 0;
      switch (kind) {
        case 0: v = dx * dx + dy * dy < w * h / 2 ? 255 : 0; break;
        case 1: v = std::uint8_t(rng() % 3 == 0 ? 1 + rng() % 255 : 0); break;
        case 2: v = 7; break;
        case 3: v = (x == w / 2 && y == h / 3) ? 1 : 0; break;
        case 4: v = x >= w / 10 && x < w - w / 10 && y >= h / 10 && y < h - h / 10 ? 1 : 0; break;
        case 5:
          v = (i / 16) % 4 == 1 ? std::uint8_t(0x80 + i % 3) : (i / 48) % 2 == 0 ? 0 : 1;
          break;
        default: break;
      }
      m->pixels[i] = v;
    }
  return m;
}
inline constexpr int kMaskKinds = 7;

/// A tuning a parameterized test runs under: its name (the test's suffix) and tuning.
struct Config {
  const char* name;
  Tuning tuning;
};
inline void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

/// A Config named `name` whose tuning `set` changes from the defaults.
template <typename Set>
Config config(const char* name, Set set) {
  Config c{name, Tuning{}};
  set(c.tuning);
  return c;
}

}  // namespace histeq::test
