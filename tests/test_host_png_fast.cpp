// test_host_png_fast.cpp — the fast PNG decoder (png_fast.cpp) that decode_image and the batch
// executor use for the common PNG: the pixels are stb_image's (compiled here, this test's own
// static copy) for every channel count and filter type, and the files it must not take (data
// after the zlib stream, a tiny file declaring a huge image) are declined without memory cost
// and refused by decode_image as before.
#include <gtest/gtest.h>
#include <libdeflate.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/image_io.hpp"
#include "io/png_fast.hpp"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#endif
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_ONLY_PNG
#include <stb_image.h>
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace histeq {
namespace {
namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

Bytes read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

std::uint32_t be32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | p[3];
}
void put_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = std::uint8_t(v >> 24), p[1] = std::uint8_t(v >> 16), p[2] = std::uint8_t(v >> 8),
  p[3] = std::uint8_t(v);
}

/// stb_image's decode of a PNG (channels as in the file), or an empty image.
Image stb_decode(const Bytes& png) {
  int w = 0, h = 0, c = 0;
  stbi_uc* px = stbi_load_from_memory(png.data(), int(png.size()), &w, &h, &c, 0);
  Image img;
  if (!px) return img;
  img.width = w, img.height = h, img.channels = c;
  img.pixels.assign(px, px + std::size_t(w) * h * c);
  stbi_image_free(px);
  return img;
}

/// A PNG written by stb_image_write with `filter` on every row (0..4), or its per-row choice (-1);
/// smooth samples, or uniformly random ones (every Paeth tie and wrap-around).
Bytes stb_png(int w, int h, int c, int filter, std::uint32_t seed, bool noise = false) {
  std::mt19937 rng(seed);
  Bytes px(std::size_t(w) * h * c);
  for (std::size_t i = 0; i < px.size(); ++i)
    px[i] = noise ? std::uint8_t(rng()) : std::uint8_t(i % 7 * 30 + rng() % 9);
  stbi_write_force_png_filter = filter;
  Bytes out;
  stbi_write_png_to_func(
      [](void* ctx, void* data, int size) {
        auto* v = static_cast<Bytes*>(ctx);
        v->insert(v->end(), static_cast<std::uint8_t*>(data),
                  static_cast<std::uint8_t*>(data) + size);
      },
      &out, w, h, c, px.data(), w * c);
  return out;
}

void expect_same_as_stb(const Bytes& png, const std::string& what, bool fast_takes_it) {
  SCOPED_TRACE(what);
  const Image ref = stb_decode(png);
  ASSERT_FALSE(ref.pixels.empty()) << stbi_failure_reason();
  const Image got = decode_image(png.data(), png.size(), what);
  EXPECT_EQ(got.width, ref.width);
  EXPECT_EQ(got.height, ref.height);
  EXPECT_EQ(got.channels, ref.channels);
  EXPECT_TRUE(got.pixels == ref.pixels);
  Image fast_img;
  const bool took =
      make_fast_png_decoder()->decode(png.data(), png.size(), what, kDefaultMaxPixels, &fast_img);
  EXPECT_EQ(took, fast_takes_it);
  if (took) EXPECT_TRUE(fast_img.pixels == ref.pixels);
}

TEST(PngFast, SamePixelsAsStbForEveryChannelCountAndFilter) {
  std::uint32_t seed = 1;
  for (int c = 1; c <= 4; ++c)
    for (int filter = -1; filter <= 4; ++filter)
      for (const auto& s : {std::pair<int, int>{1, 1}, {1, 9}, {9, 1}, {37, 23}, {300, 17}})
        expect_same_as_stb(stb_png(s.first, s.second, c, filter, seed++),
                           std::to_string(s.first) + "x" + std::to_string(s.second) + "x" +
                               std::to_string(c) + " filter " + std::to_string(filter),
                           true);
}

TEST(PngFast, SamePixelsAsStbOnNoiseForEveryFilter) {
  // The SSE2 unfilter (3- and 4-byte pixels) and the scalar one (1 and 2) on random samples:
  // rows of every length modulo the pixel size, first rows and columns included.
  std::uint32_t seed = 100;
  for (int c = 1; c <= 4; ++c)
    for (int filter = 0; filter <= 4; ++filter)
      for (const auto& s : {std::pair<int, int>{1, 3}, {2, 5}, {5, 4}, {64, 3}, {257, 11}})
        expect_same_as_stb(stb_png(s.first, s.second, c, filter, seed++, true),
                           "noise " + std::to_string(s.first) + "x" + std::to_string(s.second) +
                               "x" + std::to_string(c) + " filter " + std::to_string(filter),
                           true);
}

TEST(PngFast, SamePixelsAsStbForTheSamples) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(HISTEQ_SOURCE_DIR) / "samples")) {
    if (e.path().extension() != ".png") continue;
    const Bytes png = read_bytes(e.path());
    // The samples are 8-bit gray or RGB(A) without palette: all for the fast decoder.
    expect_same_as_stb(png, e.path().filename().string(), png[24] == 8 && png[25] != 3);
    ++n;
  }
  EXPECT_GE(n, 5);
}

TEST(PngFast, DataAfterTheZlibStreamIsDeclinedAndRefusedAsBefore) {
  // A valid file whose IDAT carries 4 more bytes after the zlib stream (chunk length and CRC
  // fixed): libdeflate stops at the stream's end, but decode_image refuses the file (its Adler-32
  // check reads the last four bytes of the image data), so the fast decoder must decline it.
  Image img;
  img.width = 7, img.height = 5, img.channels = 3;
  img.pixels.resize(img.byte_count());
  for (std::size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = std::uint8_t(i * 13);
  Bytes png = encode_image(img, ".png");
  ASSERT_EQ(std::memcmp(png.data() + 37, "IDAT", 4), 0);
  const std::uint32_t n = be32(png.data() + 33);
  const std::size_t data_end = 41 + n;
  png.erase(png.begin() + long(data_end), png.begin() + long(data_end) + 4);  // the old CRC
  png.insert(png.begin() + long(data_end), {1, 2, 3, 4});
  put_be32(png.data() + 33, n + 4);
  std::uint8_t crc[4];
  put_be32(crc, std::uint32_t(libdeflate_crc32(0, png.data() + 37, n + 8)));
  png.insert(png.begin() + long(data_end) + 4, crc, crc + 4);

  Image out;
  EXPECT_FALSE(
      make_fast_png_decoder()->decode(png.data(), png.size(), "x.png", kDefaultMaxPixels, &out));
  try {
    decode_image(png.data(), png.size(), "trailing.png");
    ADD_FAILURE() << "decoded a PNG with data after its zlib stream";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Adler-32"), std::string::npos) << e.what();
  }
}

TEST(PngFast, TinyFileDeclaringAHugeImageIsDeclinedWithoutTouchingMemory) {
  // 168 bytes declaring 16384x16384 gray (256 MiB of rows): the decoder must see that so little
  // data cannot hold the image before it allocates (it used to zero a 256 MiB buffer first).
  const Bytes png = read_bytes(fs::path(HISTEQ_SOURCE_DIR) /
                               "tests/fuzz/crashes/decode/hostile-png-tiny-declares-16384.png");
  ASSERT_GT(png.size(), 33u);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // a child, so that the high-water mark is this decode's alone
    struct rusage before {
    }, after{};
    ::getrusage(RUSAGE_SELF, &before);
    Image out;
    const bool took = make_fast_png_decoder()->decode(png.data(), png.size(), "tiny.png",
                                                      kDefaultMaxPixels, &out);
    ::getrusage(RUSAGE_SELF, &after);
    const long grew_kib = after.ru_maxrss - before.ru_maxrss;
    ::_exit(took ? 3 : grew_kib > 32 * 1024 ? 4 : 0);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "3: decoded, 4: the resident memory grew by more than 32 MiB";
  try {
    decode_image(png.data(), png.size(), "tiny.png");
    ADD_FAILURE() << "decoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated PNG"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace histeq
