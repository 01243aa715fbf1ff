// test_host_png_write.cpp — histeq's own 8-bit PNG writer (png_write.cpp, write_png8 behind
// encode_image(".png")) against what it replaced: stb_image_write 1.16's stbi_write_png_to_func
// with stbi_write_force_png_filter = 4, its STBIW_ZLIB_COMPRESS hook on libdeflate's zlib
// compressor at the same level and STBIW_CRC32 on libdeflate_crc32, then png::insert_iccp. The
// reference is compiled here from the same system header (this test's own static copy of stb).
// Every file must be byte for byte the reference's, for many shapes (1x1, 1xN, Nx1, odd widths),
// 1-4 channels, levels 0 and 2-9, with and without an ICC profile, and decode back to the
// pixels. Level 1 (the default) compresses with ISA-L in strips (png_deflate.cpp): there every
// chunk but IDAT is the reference's, and IDAT's zlib stream inflates to the reference's filtered
// rows. png::zlib_strips itself: any strip size joins into one valid stream of the rows.
#include <gtest/gtest.h>
#include <libdeflate.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <thread>

#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "io/png_deflate.hpp"

namespace {
int g_ref_level = 1;  // the reference hook's level (set before each reference encode)

// As image_io.cpp's former hook: a zlib stream at g_ref_level by libdeflate, in a malloc'd
// buffer that stb frees.
unsigned char* ref_png_deflate(unsigned char* data, int data_len, int* out_len, int /*quality*/) {
  libdeflate_compressor* c = libdeflate_alloc_compressor(g_ref_level);
  if (!c) return nullptr;
  const std::size_t bound = libdeflate_zlib_compress_bound(c, std::size_t(data_len));
  auto* out = static_cast<unsigned char*>(std::malloc(bound));
  const std::size_t n =
      out ? libdeflate_zlib_compress(c, data, std::size_t(data_len), out, bound) : 0;
  libdeflate_free_compressor(c);
  if (n == 0 || n > std::size_t(INT_MAX)) {
    std::free(out);
    return nullptr;
  }
  *out_len = int(n);
  return out;
}
}  // namespace

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#endif
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#define STBIW_ZLIB_COMPRESS ref_png_deflate
#define STBIW_CRC32(buffer, len) libdeflate_crc32(0, (buffer), std::size_t(len))
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace histeq {
namespace {

/// The PNG that encode_image(".png") wrote before histeq's own writer.
std::vector<std::uint8_t> reference_png(const Image& img, int level) {
  stbi_write_force_png_filter = 4;
  g_ref_level = level;
  std::vector<std::uint8_t> out;
  const int ok = stbi_write_png_to_func(
      [](void* ctx, void* data, int size) {
        auto* v = static_cast<std::vector<std::uint8_t>*>(ctx);
        v->insert(v->end(), static_cast<std::uint8_t*>(data),
                  static_cast<std::uint8_t*>(data) + size);
      },
      &out, img.width, img.height, img.channels, img.pixels.data(), img.width * img.channels);
  if (!ok) return {};
  if (jpeg::icc_fits(img.icc, img.channels)) png::insert_iccp(out, img.icc);
  return out;
}

enum class Content { random, few_values, extremes, gradient };

Image make_image(int w, int h, int c, Content content, std::uint32_t seed) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels.resize(img.byte_count());
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < img.pixels.size(); ++i) {
    switch (content) {
      case Content::random: img.pixels[i] = std::uint8_t(rng()); break;
      case Content::few_values: img.pixels[i] = std::uint8_t(rng() % 3); break;  // Paeth ties
      case Content::extremes: {  // 0, 1, 254, 255: the largest distances, wrap-around
        static const std::uint8_t v[4] = {0, 1, 254, 255};
        img.pixels[i] = v[rng() % 4];
        break;
      }
      case Content::gradient: {
        const std::size_t x = (i / std::size_t(c)) % std::size_t(w), y = i / (std::size_t(c) * w);
        img.pixels[i] = std::uint8_t(x * 3 + y * 5 + (i % std::size_t(c)) * 40 + rng() % 2);
        break;
      }
    }
  }
  return img;
}

/// An ICC profile header naming `space` ("GRAY" or "RGB "), padded with bytes that compress.
std::vector<std::uint8_t> fake_icc(const char* space, std::size_t size = 600) {
  std::vector<std::uint8_t> icc(size);
  for (std::size_t i = 0; i < size; ++i) icc[i] = std::uint8_t(i * 7 % 13);
  std::memcpy(icc.data() + 16, space, 4);
  return icc;
}

std::string describe(const Image& img, int level, const char* what) {
  return std::to_string(img.width) + "x" + std::to_string(img.height) + "x" +
         std::to_string(img.channels) + " level " + std::to_string(level) + " " + what +
         (img.icc.empty() ? "" : " with ICC");
}

std::uint32_t be32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | p[3];
}

/// A PNG's chunks but IDAT (each: type, data, CRC as written) and the concatenated IDAT data.
struct PngParts {
  std::vector<std::vector<std::uint8_t>> others;
  std::vector<std::uint8_t> zlib;
};
PngParts split_png(const std::vector<std::uint8_t>& png) {
  PngParts p;
  std::size_t pos = 8;
  while (pos + 12 <= png.size()) {
    const std::size_t n = be32(png.data() + pos);
    const std::uint8_t* type = png.data() + pos + 4;
    EXPECT_EQ(libdeflate_crc32(0, type, n + 4), be32(type + 4 + n)) << "chunk CRC";
    if (std::memcmp(type, "IDAT", 4) == 0)
      p.zlib.insert(p.zlib.end(), type + 4, type + 4 + n);
    else
      p.others.emplace_back(type, type + 8 + n);
    pos += 12 + n;
  }
  EXPECT_EQ(pos, png.size());
  return p;
}

/// The zlib stream inflated (its Adler-32 checked by libdeflate), `size` bytes expected.
std::vector<std::uint8_t> inflate_zlib(const std::vector<std::uint8_t>& z, std::size_t size) {
  std::vector<std::uint8_t> out(size);
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  std::size_t got = 0;
  const libdeflate_result r =
      libdeflate_zlib_decompress(d, z.data(), z.size(), out.data(), size, &got);
  libdeflate_free_decompressor(d);
  EXPECT_EQ(r, LIBDEFLATE_SUCCESS);
  EXPECT_EQ(got, size);
  return out;
}

/// Encodes with histeq and the reference; expects the same bytes (level 1: the same chunks and
/// the same filtered rows in IDAT's stream) and the pixels (and profile) back from decode_image.
void expect_same_png(const Image& img, int level, const char* what) {
  SCOPED_TRACE(describe(img, level, what));
  EncodeOptions opt;
  opt.png_level = level;
  const std::vector<std::uint8_t> ours = encode_image(img, ".png", opt);
  const std::vector<std::uint8_t> ref = reference_png(img, level);
  ASSERT_FALSE(ref.empty());
  if (level == png::kStripPngLevel) {
    const PngParts a = split_png(ours), b = split_png(ref);
    ASSERT_TRUE(a.others == b.others) << "a chunk other than IDAT differs";
    const std::size_t raw =
        (img.byte_count() / std::size_t(img.height) + 1) * std::size_t(img.height);
    ASSERT_TRUE(inflate_zlib(a.zlib, raw) == inflate_zlib(b.zlib, raw))
        << "IDAT's stream holds other filtered rows than the reference's";
  } else {
    ASSERT_EQ(ours.size(), ref.size());
    const auto diff = std::mismatch(ours.begin(), ours.end(), ref.begin());
    ASSERT_TRUE(diff.first == ours.end())
        << "first different byte at offset " << (diff.first - ours.begin());
  }
  const Image back = decode_image(ours.data(), ours.size(), "written.png");
  ASSERT_EQ(back.width, img.width);
  ASSERT_EQ(back.height, img.height);
  ASSERT_EQ(back.channels, img.channels);
  ASSERT_TRUE(back.pixels == img.pixels);
  EXPECT_EQ(back.icc,
            jpeg::icc_fits(img.icc, img.channels) ? img.icc : std::vector<std::uint8_t>{});
}

TEST(PngWrite, SameBytesAsStbForEveryShapeChannelsAndLevel) {
  const int shapes[][2] = {{1, 1},   {1, 2},   {2, 1},   {1, 37},  {37, 1},  {3, 3},
                           {5, 4},   {15, 2},  {16, 3},  {17, 5},  {31, 33}, {33, 31},
                           {64, 64}, {100, 1}, {1, 100}, {257, 3}, {1001, 7}};
  std::uint32_t seed = 1;
  for (const auto& s : shapes)
    for (int c = 1; c <= 4; ++c)
      for (int level = 0; level <= 9; ++level) {
        expect_same_png(make_image(s[0], s[1], c, Content::random, seed++), level, "random");
        expect_same_png(make_image(s[0], s[1], c, Content::few_values, seed++), level,
                        "few values");
        if (HasFatalFailure()) return;
      }
}

TEST(PngWrite, SameBytesAsStbForTiesExtremesAndGradients) {
  std::uint32_t seed = 100;
  for (int c = 1; c <= 4; ++c)
    for (int level : {0, 1, 6, 9})
      for (Content content : {Content::few_values, Content::extremes, Content::gradient}) {
        expect_same_png(make_image(123, 45, c, content, seed++), level, "content");
        if (HasFatalFailure()) return;
      }
}

TEST(PngWrite, SameBytesAsStbWithAndWithoutAnIccProfile) {
  std::uint32_t seed = 200;
  for (int c = 1; c <= 4; ++c)
    for (int level = 0; level <= 9; ++level) {
      Image img = make_image(29, 11, c, Content::gradient, seed++);
      img.icc = fake_icc(c <= 2 ? "GRAY" : "RGB ");  // fits: an iCCP chunk after IHDR
      expect_same_png(img, level, "fitting profile");
      img.icc = fake_icc(c <= 2 ? "RGB " : "GRAY");  // does not fit: no iCCP chunk
      expect_same_png(img, level, "profile of the wrong colour space");
      img.icc = fake_icc(c <= 2 ? "GRAY" : "RGB ", 70000);  // larger than one 64K block
      expect_same_png(img, level, "large profile");
      if (HasFatalFailure()) return;
    }
}

TEST(PngWrite, SameBytesAsStbForALargerImage) {
  // Long rows: the 16-byte steps and their tails for every channel count, a few levels.
  std::uint32_t seed = 300;
  for (int c = 1; c <= 4; ++c)
    for (int level : {0, 1, 9}) {
      expect_same_png(make_image(1531, 67, c, Content::random, seed++), level, "large random");
      expect_same_png(make_image(1531, 67, c, Content::gradient, seed++), level, "large gradient");
      if (HasFatalFailure()) return;
    }
}

TEST(PngWrite, DefaultLevelInSeveralStripsOfOneImage) {
  // 2400x1000 RGBA and 1500x1000 RGB: 9.6 and 4.5 MB of rows, 3 and 2 strips of 4 MiB.
  std::uint32_t seed = 400;
  for (const auto& s : {std::array<int, 3>{2400, 1000, 4}, {1500, 1000, 3}})
    for (Content content : {Content::random, Content::gradient}) {
      expect_same_png(make_image(s[0], s[1], s[2], content, seed++), 1, "strips");
      if (HasFatalFailure()) return;
    }
}

TEST(PngDeflate, StripsOfAnySizeJoinIntoOneStreamOfTheRows) {
  // Rows of random bytes with runs (matches reaching into the previous strip's history), strips
  // of one row, of fewer bytes than the 32 KiB window (the dictionary spans several strips), and
  // larger; the same bytes from every thread that writes them at once.
  std::mt19937 rng(7);
  for (const std::size_t row : {std::size_t(1), std::size_t(7), std::size_t(3001)}) {
    const std::size_t rows = 40000 / row + 3;
    std::vector<std::uint8_t> data(rows * row);
    for (std::size_t i = 0; i < data.size(); ++i)
      data[i] = i % 97 < 60 ? std::uint8_t(i / 97 % 5) : std::uint8_t(rng());
    const png::FillRows fill = [&](std::size_t y0, std::size_t y1, std::uint8_t* dst) {
      std::memcpy(dst, data.data() + y0 * row, (y1 - y0) * row);
    };
    for (const std::size_t strip :
         {std::size_t(1), std::size_t(5000), std::size_t(70000), png::kStripBytes}) {
      SCOPED_TRACE("row " + std::to_string(row) + " strip " + std::to_string(strip));
      const std::vector<std::uint8_t> z = png::zlib_strips(rows, row, fill, strip);
      ASSERT_GE(z.size(), 6u);
      EXPECT_EQ(z[0], 0x78);
      EXPECT_EQ((z[0] << 8 | z[1]) % 31, 0);
      EXPECT_TRUE(inflate_zlib(z, data.size()) == data);
      std::vector<std::vector<std::uint8_t>> again(4);
      std::vector<std::thread> th;
      for (auto& a : again) th.emplace_back([&] { a = png::zlib_strips(rows, row, fill, strip); });
      for (auto& t : th) t.join();
      for (const auto& a : again) EXPECT_TRUE(a == z) << "other bytes on another run";
    }
  }
}

TEST(PngDeflate, TheSameRowsGiveTheSameBytesOnEveryThread) {
  // igzip's level 1 (ISA-L 2.30 and later) hashes the third byte of a stream that starts without
  // history from the isal_zstream's address, so that the bytes of a stream whose third byte
  // starts a repeat depended on where the stream was (each thread has its own). Rows of a
  // repeated 5-byte pattern after two bytes, on two threads at once: the same bytes every time.
  std::mt19937 rng(11);
  constexpr int kInputs = 3000;
  std::vector<std::vector<std::uint8_t>> rows(kInputs, std::vector<std::uint8_t>(64));
  for (auto& r : rows) {
    const std::uint8_t p[5] = {std::uint8_t(rng()), std::uint8_t(rng()), std::uint8_t(rng()),
                               std::uint8_t(rng()), std::uint8_t(rng())};
    r[0] = std::uint8_t(rng());
    r[1] = std::uint8_t(rng());
    for (std::size_t i = 2; i < r.size(); ++i) r[i] = p[(i - 2) % 5];
  }
  const auto compress_all = [&](std::vector<std::vector<std::uint8_t>>* out) {
    for (const auto& r : rows) {
      const png::FillRows fill = [&](std::size_t, std::size_t, std::uint8_t* dst) {
        std::memcpy(dst, r.data(), r.size());
      };
      out->push_back(png::zlib_strips(1, r.size(), fill));
    }
  };
  std::vector<std::vector<std::uint8_t>> a, b;
  std::thread ta(compress_all, &a), tb(compress_all, &b);
  ta.join();
  tb.join();
  ASSERT_EQ(a.size(), rows.size());
  ASSERT_EQ(b.size(), rows.size());
  int differ = 0;
  for (int i = 0; i < kInputs; ++i) {
    differ += a[std::size_t(i)] != b[std::size_t(i)];
    EXPECT_TRUE(inflate_zlib(a[std::size_t(i)], 64) == rows[std::size_t(i)]) << i;
  }
  EXPECT_EQ(differ, 0) << "of " << kInputs << " inputs compressed on two threads";
}

TEST(PngWrite, FileLayoutIsSignatureIhdrIdatIend) {
  Image img = make_image(7, 5, 3, Content::random, 9);
  const std::vector<std::uint8_t> png = encode_image(img, ".png");
  auto be32 = [&](std::size_t at) {
    return std::uint32_t(png[at]) << 24 | std::uint32_t(png[at + 1]) << 16 |
           std::uint32_t(png[at + 2]) << 8 | png[at + 3];
  };
  ASSERT_GE(png.size(), 8u + 25 + 12 + 12);
  EXPECT_EQ(std::memcmp(png.data(), "\x89PNG\r\n\x1a\n", 8), 0);
  EXPECT_EQ(be32(8), 13u);
  EXPECT_EQ(std::memcmp(png.data() + 12, "IHDR", 4), 0);
  EXPECT_EQ(be32(16), 7u);
  EXPECT_EQ(be32(20), 5u);
  EXPECT_EQ(png[24], 8);  // depth
  EXPECT_EQ(png[25], 2);  // RGB
  EXPECT_EQ(std::memcmp(png.data() + 37, "IDAT", 4), 0);
  const std::uint32_t idat = be32(33);
  EXPECT_EQ(png.size(), 33 + 12 + std::size_t(idat) + 12);
  EXPECT_EQ(std::memcmp(png.data() + png.size() - 8, "IEND", 4), 0);
  // Every chunk's CRC.
  for (std::size_t at = 8; at + 12 <= png.size(); at += 12 + be32(at))
    EXPECT_EQ(libdeflate_crc32(0, png.data() + at + 4, be32(at) + 4), be32(at + 8 + be32(at)));
  // Every row's filter type byte is 4 (Paeth), row 0 included.
  std::vector<std::uint8_t> raw((7 * 3 + 1) * 5);
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  ASSERT_NE(d, nullptr);
  std::size_t got = 0;
  EXPECT_EQ(libdeflate_zlib_decompress(d, png.data() + 41, idat, raw.data(), raw.size(), &got),
            LIBDEFLATE_SUCCESS);
  libdeflate_free_decompressor(d);
  EXPECT_EQ(got, raw.size());
  for (int y = 0; y < 5; ++y) EXPECT_EQ(raw[std::size_t(y) * 22], 4) << "row " << y;
}

}  // namespace
}  // namespace histeq
