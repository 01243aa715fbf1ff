// fuzz_decode.cpp — libFuzzer harness: bytes → decode_image only (the pre-checks of
// src/io/decode_checks.cpp, histeq's PNM decoder and stb_image), limit 2^14 pixels. Much faster per
// input than fuzz_decode_equalize (no equalize, no encode), for the long campaigns
// (scripts/fuzz_long.sh). A rejection must be a histeq::Error naming the input; a decoded image
// must have the shape it claims. Built with -DHISTEQ_FUZZ=ON and clang (tests/fuzz/README.md).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "histeq/error.hpp"
#include "histeq/image_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const histeq::Image img =
        histeq::decode_image(data, size, "fuzz-input", std::uint64_t(1) << 14);
    if (img.width <= 0 || img.height <= 0 || img.channels < 1 || img.channels > 4 ||
        std::uint64_t(img.width) * std::uint64_t(img.height) > (std::uint64_t(1) << 14) ||
        img.pixels.size() != img.byte_count()) {
      std::fprintf(stderr, "decoded shape broken: %dx%dx%d, %zu bytes\n", img.width, img.height,
                   img.channels, img.pixels.size());
      std::abort();
    }
    volatile unsigned sum = 0;  // touch every byte (MSan/valgrind would see uninitialized ones)
    for (std::uint8_t b : img.pixels) sum = sum + b;
  } catch (const histeq::Error& e) {
    if (std::string(e.what()).find("fuzz-input") == std::string::npos) {
      std::fprintf(stderr, "rejection does not name the input: %s\n", e.what());
      std::abort();
    }
  }
  return 0;
}
