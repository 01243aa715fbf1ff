// test_host_image_io.cpp — loading and saving (image_io.hpp): round trips per format, the bad
// inputs each with a clear Error naming the file, and the temp-file + rename write path.
// Crafted files (truncated, patched PNG headers) are made here at run time from encoded bytes.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/image16.hpp"
#include "histeq/image_io.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {
namespace fs = std::filesystem;

class ImageIo : public test::TempDirTest {
 protected:
  ImageIo() : TempDirTest("histeq-io-") {}
  void write_bytes(const std::string& p, const std::vector<std::uint8_t>& bytes) const {
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
};

Image test_image(int w, int h, int c, std::uint64_t seed = 1) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels.resize(img.byte_count());
  std::mt19937_64 rng(seed);
  // Smooth + noise, so that JPEG has something realistic to compress.
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        img.pixels[(std::size_t(y) * w + x) * c + k] =
            static_cast<std::uint8_t>((x * 3 + y * 2 + k * 40 + int(rng() % 5)) % 256);
  return img;
}

/// Runs f, expects an exception of type E whose message contains every one of `parts`.
template <class E, class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    const std::string msg = e.what();
    if (std::getenv("HISTEQ_TEST_VERBOSE")) std::printf("  message: %s\n", msg.c_str());
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

void put_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = std::uint8_t(v >> 24);
  p[1] = std::uint8_t(v >> 16);
  p[2] = std::uint8_t(v >> 8);
  p[3] = std::uint8_t(v);
}

/// Rewrites the IHDR of a PNG (signature 8 bytes, then length, "IHDR", 13 bytes of data, CRC)
/// with new dimensions and, when bit_depth > 0, a new bit depth; fixes the CRC.
std::vector<std::uint8_t> patch_ihdr(std::vector<std::uint8_t> png, std::uint32_t w,
                                     std::uint32_t h) {
  EXPECT_EQ(std::memcmp(png.data() + 12, "IHDR", 4), 0);
  put_be32(png.data() + 16, w);
  put_be32(png.data() + 20, h);
  put_be32(png.data() + 29, crc32(png.data() + 12, 17));
  return png;
}

/// A 16-bit PNG written by hand: IHDR (depth 16), one stored (uncompressed) zlib block of the
/// filtered rows, IEND. values[i] are the 16-bit samples, row-major, `c` channels.
std::vector<std::uint8_t> png16(int w, int h, int c, const std::vector<std::uint16_t>& values) {
  auto chunk = [](std::vector<std::uint8_t>& out, const char* type,
                  const std::vector<std::uint8_t>& data) {
    std::uint8_t len[4];
    put_be32(len, std::uint32_t(data.size()));
    out.insert(out.end(), len, len + 4);
    const std::size_t start = out.size();
    out.insert(out.end(), type, type + 4);
    out.insert(out.end(), data.begin(), data.end());
    std::uint8_t crc[4];
    put_be32(crc, crc32(out.data() + start, out.size() - start));
    out.insert(out.end(), crc, crc + 4);
  };
  const std::uint8_t color_type = c == 1 ? 0 : c == 2 ? 4 : c == 3 ? 2 : 6;
  std::vector<std::uint8_t> ihdr(13, 0);
  put_be32(ihdr.data(), std::uint32_t(w));
  put_be32(ihdr.data() + 4, std::uint32_t(h));
  ihdr[8] = 16;
  ihdr[9] = color_type;
  std::vector<std::uint8_t> raw;
  for (int y = 0; y < h; ++y) {
    raw.push_back(0);  // filter: none
    for (int i = 0; i < w * c; ++i) {
      const std::uint16_t v = values[std::size_t(y) * w * c + i];
      raw.push_back(std::uint8_t(v >> 8));
      raw.push_back(std::uint8_t(v));
    }
  }
  // zlib: header, one stored block (raw.size() < 65536 here), Adler-32.
  std::vector<std::uint8_t> z = {0x78, 0x01, 0x01};
  const std::uint16_t n = std::uint16_t(raw.size());
  z.push_back(std::uint8_t(n));
  z.push_back(std::uint8_t(n >> 8));
  z.push_back(std::uint8_t(~n));
  z.push_back(std::uint8_t(std::uint16_t(~n) >> 8));
  z.insert(z.end(), raw.begin(), raw.end());
  std::uint32_t a = 1, b = 0;
  for (std::uint8_t x : raw) {
    a = (a + x) % 65521;
    b = (b + a) % 65521;
  }
  std::uint8_t adler[4];
  put_be32(adler, (b << 16) | a);
  z.insert(z.end(), adler, adler + 4);
  std::vector<std::uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", z);
  chunk(out, "IEND", {});
  return out;
}

// ---- round trips ----

TEST_F(ImageIo, LosslessRoundTripsPngBmpTga) {
  for (const char* ext : {".png", ".PNG", ".bmp", ".tga", ".Tga"}) {
    for (int c = 1; c <= 4; ++c) {
      const std::string e = ext;
      const bool bmp = e == ".bmp";
      if (bmp && (c == 1 || c == 2)) continue;  // BMP stores gray as RGB (RGBA): below
      const Image img = test_image(67, 41, c, std::uint64_t(c));
      const std::string p = path("rt" + std::to_string(c) + ext);
      save_image(img, p);
      const Image back = load_image(p);
      EXPECT_EQ(back.width, img.width) << p;
      EXPECT_EQ(back.height, img.height) << p;
      ASSERT_EQ(back.channels, img.channels) << p;
      EXPECT_EQ(back.pixels, img.pixels) << p;
    }
  }
}

TEST_F(ImageIo, BmpStoresGrayAsEqualRgb) {
  const Image img = test_image(16, 9, 1);
  save_image(img, path("g.bmp"));
  const Image back = load_image(path("g.bmp"));
  ASSERT_EQ(back.pixel_count(), img.pixel_count());
  ASSERT_GE(back.channels, 3);
  for (std::size_t i = 0; i < img.pixel_count(); ++i)
    for (int k = 0; k < 3; ++k) ASSERT_EQ(back.pixels[i * back.channels + k], img.pixels[i]);
}

TEST_F(ImageIo, BmpKeepsTheAlphaOfGrayAlphaAsBgra) {
  // stb_image_write stores 2 channels as 24-bit gray, alpha dropped, while RGBA is 32-bit BGRA:
  // gray+alpha is expanded to RGBA, so the BMP holds the alpha (and gray in R, G and B).
  const Image img = test_image(13, 7, 2);
  save_image(img, path("ga.bmp"));
  const Image back = load_image(path("ga.bmp"));
  ASSERT_EQ(back.width, img.width);
  ASSERT_EQ(back.height, img.height);
  ASSERT_EQ(back.channels, 4);
  for (std::size_t i = 0; i < img.pixel_count(); ++i) {
    for (int k = 0; k < 3; ++k) ASSERT_EQ(back.pixels[i * 4 + k], img.pixels[i * 2]) << i;
    ASSERT_EQ(back.pixels[i * 4 + 3], img.pixels[i * 2 + 1]) << i;
  }
}

TEST_F(ImageIo, EncodedChannelsAreWhatTheFileHolds) {
  // The reports' output_channels: what a decoder reads back from each writer's file.
  for (int c = 1; c <= 4; ++c) {
    const Image img = test_image(9, 5, c);
    for (const char* ext : {".png", ".jpg", ".JPEG", ".bmp", ".tga"}) {
      SCOPED_TRACE(std::string(ext) + ", " + std::to_string(c) + " channels");
      const std::vector<std::uint8_t> b = encode_image(img, ext);
      EXPECT_EQ(decode_image(b.data(), b.size(), "mem").channels, encoded_channels(c, ext));
    }
  }
  EXPECT_EQ(encoded_channels(4, ".jpg"), 3);  // JPEG: alpha dropped
  EXPECT_EQ(encoded_channels(2, "jpeg"), 1);
  EXPECT_EQ(encoded_channels(1, ".bmp"), 3);  // 24-bit BGR, gray in three equal channels
  EXPECT_EQ(encoded_channels(2, ".BMP"), 4);  // 32-bit BGRA
  EXPECT_EQ(encoded_channels(2, ".tga"), 2);
  EXPECT_EQ(encoded_channels(3, ".ppm"), 3);  // 16-bit outputs as they are
}

TEST_F(ImageIo, JpegRoundTripIsClose) {
  for (int c : {1, 3}) {
    const Image img = test_image(64, 48, c);
    for (const char* ext : {".jpg", ".JPEG"}) {
      const std::string p = path(std::string("j") + std::to_string(c) + ext);
      save_image(img, p, 95);
      const Image back = load_image(p);
      ASSERT_EQ(back.width, img.width);
      ASSERT_EQ(back.height, img.height);
      // libjpeg-turbo writes gray as a 1-component JPEG: it comes back with 1 channel.
      ASSERT_EQ(back.channels, c);
      double sum = 0;
      for (std::size_t i = 0; i < img.byte_count(); ++i)
        sum += std::abs(int(back.pixels[i]) - int(img.pixels[i]));
      EXPECT_LT(sum / double(img.byte_count()), 6.0) << p;
    }
  }
  // Lower quality, smaller file.
  const Image img = test_image(128, 128, 3);
  EXPECT_LT(encode_image(img, ".jpg", 20).size(), encode_image(img, ".jpg", 95).size());
  expect_error<UsageError>([&] { encode_image(img, ".jpg", 0); }, {"quality", "0", "1..100"});
  expect_error<UsageError>([&] { encode_image(img, ".jpg", 101); }, {"101"});
}

TEST_F(ImageIo, EncodeDecodeInMemory) {
  const Image img = test_image(10, 7, 4);
  const auto bytes = encode_image(img, "png");
  const Image back = decode_image(bytes.data(), bytes.size(), "mem.png");
  EXPECT_EQ(back.pixels, img.pixels);
  Image bad = img;
  bad.pixels.pop_back();
  expect_error<Error>([&] { encode_image(bad, ".png"); }, {"bytes"});
  bad = img;
  bad.channels = 5;
  expect_error<Error>([&] { encode_image(bad, ".png"); }, {"1..4"});
}

TEST_F(ImageIo, SixteenBitPngIsReducedToEightBits) {
  const int w = 5, h = 3;
  for (int c : {1, 2, 3, 4}) {
    std::vector<std::uint16_t> v(std::size_t(w * h * c));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::uint16_t(i * 4099 + 123);
    write_bytes(path("d16.png"), png16(w, h, c, v));
    const Image img = load_image(path("d16.png"));
    ASSERT_EQ(img.width, w);
    ASSERT_EQ(img.height, h);
    ASSERT_EQ(img.channels, c);
    for (std::size_t i = 0; i < v.size(); ++i)
      ASSERT_EQ(img.pixels[i], v[i] >> 8) << "sample " << i << " of " << c << " channels";
  }
}

TEST_F(ImageIo, SixteenBitPngTakesThePngLevel) {
  // --png-level reached only the 8-bit writer: a 16-bit PNG was deflated at libspng's default
  // whatever was asked, level 0 ("stored") included.
  Image16 img;
  img.width = 64;
  img.height = 48;
  img.channels = 3;
  for (int i = 0; i < img.width * img.height * 3; ++i)
    img.pixels.push_back(std::uint16_t((i % 97) * 613 + (i / 192) * 11));
  const std::size_t raw = img.pixels.size() * 2;
  std::vector<std::size_t> sizes;
  for (int level : {0, 1, 9}) {
    const std::vector<std::uint8_t> png = encode_image16(img, ".png", level);
    sizes.push_back(png.size());
    const Image16 back = decode_image16(png.data(), png.size(), "level");
    EXPECT_EQ(back.pixels, img.pixels) << "level " << level;
  }
  EXPECT_GT(sizes[0], raw) << "level 0 stores the rows (and their filter bytes)";
  EXPECT_LT(sizes[1], sizes[0] / 2);
  EXPECT_LE(sizes[2], sizes[1]);
  EXPECT_EQ(encode_image16(img, ".png"), encode_image16(img, ".png", kDefaultPngLevel));
  EXPECT_THROW(encode_image16(img, ".png", 10), UsageError);
  EXPECT_THROW(encode_image16(img, ".png", -1), UsageError);
}

TEST_F(ImageIo, GrayAlphaKeepsTwoChannels) {
  Image img = test_image(13, 11, 2);
  save_image(img, path("ga.png"));
  const Image back = load_image(path("ga.png"));
  EXPECT_EQ(back.channels, 2);
  EXPECT_EQ(back.pixels, img.pixels);
}

TEST_F(ImageIo, SampleImagesLoadWithTheirChannels) {
  EXPECT_EQ(load_image(test::source_path("samples/moon.png")).channels, 1);
  const Image coffee = load_image(test::source_path("samples/coffee.png"));
  EXPECT_EQ(coffee.channels, 3);
  EXPECT_EQ(coffee.width, 600);
  EXPECT_EQ(coffee.height, 400);
  const Image hubble = load_image(test::source_path("samples/hubble_deep_field.jpg"));
  EXPECT_EQ(hubble.width, 1000);
  EXPECT_EQ(hubble.height, 872);
}

/// v as `bytes` little-endian bytes at b[at].
void put_le(std::vector<std::uint8_t>& b, std::size_t at, std::uint32_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) b[at + std::size_t(k)] = std::uint8_t(v >> (8 * k));
}

/// A BMP of `size` zero bytes with its file header and the info header's first fields: `header`
/// bytes long, w x h (bottom-up rows), one plane, `bpp` bits per pixel, pixels at `offset`.
std::vector<std::uint8_t> bmp_headers(int w, int h, std::uint32_t bpp, std::uint32_t header,
                                      std::uint32_t offset, std::uint32_t size) {
  std::vector<std::uint8_t> b(size, 0);
  b[0] = 'B';
  b[1] = 'M';
  put_le(b, 2, size, 4);
  put_le(b, 10, offset, 4);
  put_le(b, 14, header, 4);
  put_le(b, 18, std::uint32_t(w), 4);
  put_le(b, 22, std::uint32_t(h), 4);
  put_le(b, 26, 1, 2);
  put_le(b, 28, bpp, 2);
  return b;
}

/// An 8-bit paletted BMP (BITMAPINFOHEADER) of w x h palette indices, with `colours` palette
/// entries (biClrUsed), entry i being (b, g, r) = palette(i).
std::vector<std::uint8_t> paletted_bmp(int w, int h, int colours,
                                       const std::vector<std::uint8_t>& index,
                                       std::array<std::uint8_t, 3> (*palette)(int)) {
  const int row = (w + 3) / 4 * 4;
  const std::uint32_t offset = 14 + 40 + 4 * std::uint32_t(colours);
  std::vector<std::uint8_t> b = bmp_headers(w, h, 8, 40, offset, offset + std::uint32_t(row * h));
  put_le(b, 46, std::uint32_t(colours), 4);
  for (int i = 0; i < colours; ++i) {
    const auto e = palette(i);
    for (int k = 0; k < 3; ++k) b[54 + 4 * std::size_t(i) + std::size_t(k)] = e[std::size_t(k)];
  }
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      b[offset + std::size_t(h - 1 - y) * std::size_t(row) + std::size_t(x)] =
          index[std::size_t(y) * std::size_t(w) + std::size_t(x)];
  return b;
}

/// A 32-bit BMP of w x h BGRA pixels: BI_RGB with a 40-byte header (masks 0), or BI_BITFIELDS
/// with a 108-byte (V4) header and the masks given (alpha_mask 0: no alpha).
std::vector<std::uint8_t> bmp32(int w, int h, const std::vector<std::uint8_t>& bgra, bool bitfields,
                                std::uint32_t alpha_mask) {
  const std::uint32_t header = bitfields ? 108 : 40, offset = 14 + header;
  std::vector<std::uint8_t> b =
      bmp_headers(w, h, 32, header, offset, offset + std::uint32_t(4 * w * h));
  put_le(b, 30, bitfields ? 3 : 0, 4);
  if (bitfields) {
    put_le(b, 54, 0x00FF0000u, 4);
    put_le(b, 58, 0x0000FF00u, 4);
    put_le(b, 62, 0x000000FFu, 4);
    put_le(b, 66, alpha_mask, 4);
  }
  for (int y = 0; y < h; ++y)
    for (std::size_t k = 0; k < 4 * std::size_t(w); ++k)
      b[offset + std::size_t(h - 1 - y) * 4 * std::size_t(w) + k] =
          bgra[std::size_t(y) * 4 * std::size_t(w) + k];
  return b;
}

// A 32-bit BI_RGB BMP has three channels, as OpenCV's imread reads it: the format leaves its
// fourth byte unused (stb_image took it for alpha, so `-o x.ppm` was refused for an alpha the
// file does not have). A BI_BITFIELDS file with an alpha mask keeps its alpha; one without
// an alpha mask is RGB.
TEST_F(ImageIo, ThirtyTwoBitBmpsHaveAlphaOnlyWhereTheirMasksSaySo) {
  const int w = 9, h = 5;
  std::vector<std::uint8_t> bgra(4 * std::size_t(w) * std::size_t(h));
  for (std::size_t i = 0; i < bgra.size(); ++i) bgra[i] = std::uint8_t(i * 37 + 11);
  const auto rgb_at = [&](const Image& img, std::size_t i, int k) {
    return img.pixels[i * std::size_t(img.channels) + std::size_t(k)];
  };
  for (const std::uint8_t fourth : {std::uint8_t(0), std::uint8_t(200)}) {
    std::vector<std::uint8_t> px = bgra;
    for (std::size_t i = 3; i < px.size(); i += 4) px[i] = fourth;
    const auto file = bmp32(w, h, px, false, 0);
    const Image img = decode_image(file.data(), file.size(), "rgb32.bmp");
    ASSERT_EQ(img.channels, 3) << int(fourth);
    for (std::size_t i = 0; i < std::size_t(w) * std::size_t(h); ++i)
      for (int k = 0; k < 3; ++k) ASSERT_EQ(rgb_at(img, i, k), px[i * 4 + std::size_t(2 - k)]) << i;
  }
  const auto with_alpha = bmp32(w, h, bgra, true, 0xFF000000u);
  const Image a = decode_image(with_alpha.data(), with_alpha.size(), "argb.bmp");
  ASSERT_EQ(a.channels, 4);
  for (std::size_t i = 0; i < std::size_t(w) * std::size_t(h); ++i) {
    for (int k = 0; k < 3; ++k) ASSERT_EQ(rgb_at(a, i, k), bgra[i * 4 + std::size_t(2 - k)]) << i;
    ASSERT_EQ(rgb_at(a, i, 3), bgra[i * 4 + 3]) << i;
  }
  const auto no_alpha = bmp32(w, h, bgra, true, 0);
  EXPECT_EQ(decode_image(no_alpha.data(), no_alpha.size(), "xrgb.bmp").channels, 3);
  // Every pixel comes from the file: a cut one, one whose data offset points into its header
  // and one whose header claims a huge image are errors, never three channels of whatever.
  const auto rgb32 = bmp32(w, h, bgra, false, 0);
  for (const std::size_t cut :
       {std::size_t(40), rgb32.size() - 1, rgb32.size() - 4 * std::size_t(w)}) {
    const std::vector<std::uint8_t> part(rgb32.begin(), rgb32.begin() + std::ptrdiff_t(cut));
    EXPECT_THROW(decode_image(part.data(), part.size(), "cut.bmp"), Error) << cut;
  }
  std::vector<std::uint8_t> into_header = rgb32;
  into_header[10] = 20;  // the pixel data "at" byte 20
  EXPECT_THROW(decode_image(into_header.data(), into_header.size(), "offset.bmp"), Error);
  std::vector<std::uint8_t> huge = rgb32;
  huge[21] = 0x40;  // width 0x40000009
  huge[25] = 0x40;  // height 0x40000005
  EXPECT_THROW(decode_image(huge.data(), huge.size(), "huge.bmp"), Error);
}

// An 8-bit BMP with a gray palette is one gray channel, as OpenCV's imread reads it (stb_image
// gives it as RGB); a colour palette keeps three channels.
TEST_F(ImageIo, GrayPaletteBmpsAreOneChannel) {
  const int w = 13, h = 7, colours = 16;
  std::vector<std::uint8_t> index(std::size_t(w) * std::size_t(h));
  for (std::size_t i = 0; i < index.size(); ++i) index[i] = std::uint8_t(i * 5 % colours);
  const auto gray = paletted_bmp(w, h, colours, index, [](int i) {
    const auto v = std::uint8_t(i * 17);
    return std::array<std::uint8_t, 3>{v, v, v};
  });
  const Image g = decode_image(gray.data(), gray.size(), "gray.bmp");
  ASSERT_EQ(g.channels, 1);
  ASSERT_EQ(g.width, w);
  for (std::size_t i = 0; i < index.size(); ++i) EXPECT_EQ(g.pixels[i], index[i] * 17) << i;
  const auto colour = paletted_bmp(w, h, colours, index, [](int i) {
    const auto v = std::uint8_t(i * 17);
    return std::array<std::uint8_t, 3>{v, v, std::uint8_t(i == 15 ? 0 : v)};  // one entry red-less
  });
  const Image c = decode_image(colour.data(), colour.size(), "colour.bmp");
  EXPECT_EQ(c.channels, 3);
  // A biClrUsed beyond 2^8 is read as 256 entries (OpenCV's reading; the palette check stays
  // inside the file), a header size past the end or a cut palette is no gray palette, and a
  // file cut in its pixels is an error: every sample comes from the file or none is given.
  std::vector<std::uint8_t> huge_used = gray;
  for (int k = 0; k < 4; ++k) huge_used[46 + std::size_t(k)] = 0xFF;
  try {
    const Image h2 = decode_image(huge_used.data(), huge_used.size(), "used.bmp");
    EXPECT_TRUE(h2.channels == 1 || h2.channels == 3);
  } catch (const Error&) {}
  std::vector<std::uint8_t> big_header = gray;
  big_header[17] = 0x7F;  // biSize 0x7F000028
  try {
    const Image b = decode_image(big_header.data(), big_header.size(), "header.bmp");
    EXPECT_NE(b.channels, 1) << "no gray palette is read from outside the file";
  } catch (const Error&) {}
  for (std::size_t cut : {std::size_t(40), std::size_t(54 + 30), gray.size() - 10}) {
    const std::vector<std::uint8_t> part(gray.begin(), gray.begin() + std::ptrdiff_t(cut));
    EXPECT_THROW(decode_image(part.data(), part.size(), "cut.bmp"), Error) << cut;
  }
}

// stb_image gives every GIF as RGBA: an opaque GIF comes back as RGB, one whose palette is gray
// as one gray channel (as ImageMagick reads them), the same samples.
TEST_F(ImageIo, OpaqueGifsKeepNoAlphaAndGrayOnesOneChannel) {
  const std::string src = test::source_path("tests/fuzz/corpus/decode/still.gif");
  std::ifstream f(src, std::ios::binary);
  std::vector<std::uint8_t> colour((std::istreambuf_iterator<char>(f)), {});
  ASSERT_GT(colour.size(), 13u + 12u);
  ASSERT_EQ(colour[10] & 0x80, 0x80) << "a global colour table of 4 entries";
  const Image c = decode_image(colour.data(), colour.size(), "still.gif");
  EXPECT_EQ(c.channels, 3);
  std::vector<std::uint8_t> gray = colour;
  for (int e = 0; e < 4; ++e)  // each palette entry (r, g, b) made (r, r, r)
    gray[13 + 3 * e + 1] = gray[13 + 3 * e + 2] = gray[13 + 3 * e];
  const Image g = decode_image(gray.data(), gray.size(), "gray.gif");
  ASSERT_EQ(g.channels, 1);
  ASSERT_EQ(g.pixel_count(), c.pixel_count());
  for (std::size_t i = 0; i < g.pixel_count(); ++i) EXPECT_EQ(g.pixels[i], c.pixels[3 * i]) << i;
}

TEST_F(ImageIo, OutputMayBeTheInputFile) {
  const Image a = test_image(30, 20, 3, 1), b = test_image(30, 20, 3, 2);
  const std::string p = path("same.png");
  save_image(a, p);
  Image in = load_image(p);
  for (auto& x : in.pixels) x = static_cast<std::uint8_t>(255 - x);
  save_image(in, p);
  EXPECT_EQ(load_image(p).pixels, in.pixels);
  EXPECT_EQ(listing(), std::vector<std::string>{"same.png"}) << "temp file left behind";
  (void)b;
}

TEST_F(ImageIo, RelativePathWithoutFolderWritesToCurrentDirectory) {
  const fs::path old = fs::current_path();
  fs::current_path(dir_);
  save_image(test_image(4, 4, 1), "plain.png");
  fs::current_path(old);
  EXPECT_TRUE(fs::exists(dir_ / "plain.png"));
}

TEST_F(ImageIo, SavedFileHasTheUsualPermissions) {
  save_image(test_image(4, 4, 1), path("perm.png"));
  const auto perms = fs::status(path("perm.png")).permissions();
  EXPECT_NE(perms & fs::perms::owner_read, fs::perms::none);
  EXPECT_NE(perms & fs::perms::owner_write, fs::perms::none);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (!(mask & 0044)) EXPECT_NE(perms & fs::perms::others_read, fs::perms::none) << "left 0600";
}

// ---- bad input ----

TEST_F(ImageIo, MissingFile) {
  const std::string p = path("nope.png");
  expect_error<FileError>([&] { load_image(p); }, {"cannot read", p});
  try {
    load_image(p);
  } catch (const FileError& e) {  // the errno and the path, for the binding's OSError
    EXPECT_EQ(e.code(), ENOENT);
    EXPECT_EQ(e.path(), p);
  }
  expect_error<FileError>([&] { load_image16(p); }, {p});
}

TEST_F(ImageIo, Directory) {
  expect_error<FileError>([&] { load_image(dir_.string()); },
                          {"cannot read", dir_.string(), "directory"});
  try {
    load_image(dir_.string());
  } catch (const FileError& e) {
    EXPECT_EQ(e.code(), EISDIR);
  }
}

TEST_F(ImageIo, EmptyFile) {
  write_bytes(path("empty.png"), {});
  expect_error<DecodeError>([&] { load_image(path("empty.png")); },
                            {"cannot decode", path("empty.png"), "the file is empty"});
  expect_error<DecodeError>([&] { load_image16(path("empty.png")); }, {path("empty.png")});
  // From memory too, at both depths: the same words
  const std::uint8_t none[1] = {0};
  expect_error<DecodeError>([&] { decode_image(none, 0, "mem.png"); },
                            {"cannot decode 'mem.png': the file is empty"});
  expect_error<DecodeError>([&] { decode_image16(none, 0, "mem.png"); },
                            {"cannot decode 'mem.png': the file is empty"});
}

// A file larger than the decoder takes is refused from its size before anything is read (a
// sparse file: no 2 GiB written), as a decode error, not a file error.
TEST_F(ImageIo, AFileLargerThanTheDecoderTakesIsADecodeErrorBeforeReading) {
  const std::string big = path("big.png");
  {
    std::ofstream f(big, std::ios::binary);
    f << "x";
  }
  std::error_code ec;
  fs::resize_file(big, std::uintmax_t(INT_MAX) + 1, ec);
  if (ec) GTEST_SKIP() << "no sparse file here: " << ec.message();
  expect_error<DecodeError>([&] { load_image(big); },
                            {"cannot decode", big, "2147483648 bytes is too large to decode"});
  fs::remove(big);
}

TEST_F(ImageIo, NotAnImage) {
  const std::string text = "this is a text file, not an image\n";
  write_bytes(path("notes.png"), std::vector<std::uint8_t>(text.begin(), text.end()));
  expect_error<DecodeError>([&] { load_image(path("notes.png")); },
                            {path("notes.png"), "is not a decodable image"});
  expect_error<DecodeError>([&] { load_image16(path("notes.png")); }, {path("notes.png")});
}

TEST_F(ImageIo, WriteFailuresAreFileErrorsWithTheirErrno) {
  const Image img = test_image(4, 4, 1);
  const std::string missing = path("no/such/folder/x.png");
  try {
    save_image(img, missing);
    FAIL() << "no exception";
  } catch (const FileError& e) {
    EXPECT_EQ(e.code(), ENOENT) << e.what();
    EXPECT_EQ(e.path(), missing);
  }
  fs::create_directory(path("folder.png"));  // a folder where the file would go
  try {
    save_image(img, path("folder.png"));
    FAIL() << "no exception";
  } catch (const FileError& e) {
    EXPECT_EQ(e.code(), EISDIR) << e.what();
  }
}

TEST_F(ImageIo, TruncatedPngAndJpeg) {
  const Image img = test_image(64, 64, 3);
  for (const char* ext : {".png", ".jpg"}) {
    const auto full = encode_image(img, ext);
    for (std::size_t keep : {full.size() / 2, std::size_t(40), std::size_t(8)}) {
      const std::string p = path(std::string("cut") + std::to_string(keep) + ext);
      write_bytes(p, std::vector<std::uint8_t>(full.begin(), full.begin() + std::ptrdiff_t(keep)));
      expect_error<DecodeError>([&] { load_image(p); }, {p, "is not a decodable image: "});
    }
  }
}

TEST_F(ImageIo, CorruptPng) {
  auto bytes = encode_image(test_image(64, 64, 3), ".png");
  // Garble the compressed data (after the IHDR chunk: 8 + 25 bytes).
  for (std::size_t i = 41; i < bytes.size() - 12; i += 3) bytes[i] ^= 0x5A;
  write_bytes(path("bad.png"), bytes);
  expect_error<Error>([&] { load_image(path("bad.png")); },
                      {path("bad.png"), "not a decodable image"});
}

TEST_F(ImageIo, ZeroWidthOrHeight) {
  const auto png = encode_image(test_image(8, 8, 1), ".png");
  for (auto wh : {std::pair<std::uint32_t, std::uint32_t>{0, 8}, {8, 0}}) {
    const std::string p = path("zero" + std::to_string(wh.first) + ".png");
    write_bytes(p, patch_ihdr(png, wh.first, wh.second));
    expect_error<Error>(
        [&] { load_image(p); },
        {p, "zero width or height", std::to_string(wh.first) + "x" + std::to_string(wh.second)});
  }
}

TEST_F(ImageIo, OverThePixelLimitBeforeDecoding) {
  // 20000 × 20000 gray = 4·10^8 pixels > 2^28: the header says so, and the check comes before
  // any pixel memory (the IDAT is the 8×8 one, so decoding would fail differently).
  const auto png = encode_image(test_image(8, 8, 1), ".png");
  write_bytes(path("huge.png"), patch_ihdr(png, 20000, 20000));
  expect_error<Error>([&] { load_image(path("huge.png")); },
                      {path("huge.png"), "20000x20000", std::to_string(kDefaultMaxPixels)});
  // A caller's smaller limit.
  save_image(test_image(300, 200, 3), path("mid.png"));
  expect_error<Error>([&] { load_image(path("mid.png"), 300 * 200 - 1); },
                      {"300x200", std::to_string(300 * 200 - 1)});
  EXPECT_EQ(load_image(path("mid.png"), 300 * 200).pixel_count(), 300u * 200u);
  // Dimensions whose product overflows 32 bits are still compared correctly.
  write_bytes(path("wide.png"), patch_ihdr(png, 1u << 16, 1u << 16));
  expect_error<Error>([&] { load_image(path("wide.png")); },
                      {path("wide.png"), "65536x65536 = 4294967296 pixels"});
  write_bytes(path("widest.png"), patch_ihdr(png, 0x7FFFFFFFu, 0x7FFFFFFFu));
  expect_error<Error>([&] { load_image(path("widest.png")); },
                      {path("widest.png"), "2147483647x2147483647", "over the limit"});
}

// ---- output paths ----

TEST_F(ImageIo, UnknownExtensionIsUsageError) {
  const Image img = test_image(4, 4, 1);
  for (const char* name : {"out.gif", "out.webp", "out", "out.png.txt"}) {
    const std::string p = path(name);
    expect_error<UsageError>([&] { check_output_path(p); }, {p, ".png", ".jpg", ".bmp", ".tga"});
    expect_error<UsageError>([&] { save_image(img, p); }, {p});
  }
  EXPECT_TRUE(listing().empty()) << "a file was created";
  for (const char* name : {"a.png", "a.JPG", "a.jpeg", "a.bmp", "a.TGA"})
    EXPECT_NO_THROW(check_output_path(path(name)));
}

TEST_F(ImageIo, MissingOutputFolder) {
  const std::string p = path("no/such/folder/out.png");
  expect_error<Error>([&] { save_image(test_image(4, 4, 1), p); }, {p, "does not exist"});
  EXPECT_TRUE(listing().empty());
}

TEST_F(ImageIo, OutputFolderIsAFile) {
  write_bytes(path("file"), {1, 2, 3});
  const std::string p = path("file/out.png");
  expect_error<Error>([&] { save_image(test_image(4, 4, 1), p); }, {p, "not a folder"});
  EXPECT_EQ(listing(), std::vector<std::string>{"file"});
}

TEST_F(ImageIo, OutputIsADirectory) {
  fs::create_directory(path("d.png"));
  expect_error<Error>([&] { save_image(test_image(4, 4, 1), path("d.png")); },
                      {path("d.png"), "directory"});
  EXPECT_EQ(listing(), std::vector<std::string>{"d.png"});
}

TEST_F(ImageIo, OutputFolderNotWritable) {
  // As root permissions do not stop writes; /proc refuses new files for everyone.
  if (::geteuid() != 0) {
    fs::create_directory(path("ro"));
    fs::permissions(path("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    const std::string p = path("ro/out.png");
    expect_error<Error>([&] { save_image(test_image(4, 4, 1), p); }, {p, "cannot create"});
    fs::permissions(path("ro"), fs::perms::owner_all);
    EXPECT_TRUE(fs::is_empty(path("ro")));
  }
  if (fs::is_directory("/proc/self")) {
    expect_error<Error>([&] { save_image(test_image(4, 4, 1), "/proc/self/histeq-out.png"); },
                        {"/proc/self/histeq-out.png", "cannot create"});
  }
}

// ---- outputs that are not regular files ----

// An existing output that is not a regular file (a FIFO here; a character device such as
// /dev/null takes the same path) is opened and written as cp writes it: no temporary file
// renamed over it, so the FIFO's reader gets the image and the FIFO stays a FIFO. The same for
// the 16-bit writer and through a symlink; a FIFO without write permission is refused.
TEST_F(ImageIo, AnExistingFifoIsWrittenInPlaceNotReplaced) {
  const std::string p = path("sink.png");
  ASSERT_EQ(::mkfifo(p.c_str(), 0644), 0);
  const Image img = test_image(300, 200, 3);  // more than a pipe holds at once
  {
    test::FifoReader reader(p);
    save_image(img, p);
    EXPECT_EQ(reader.finish(), encode_image(img, ".png"));
  }
  EXPECT_TRUE(fs::is_fifo(p)) << "replaced by a regular file";
  EXPECT_EQ(listing(), std::vector<std::string>{"sink.png"}) << "temp file left behind";

  Image16 img16;
  img16.width = 70;
  img16.height = 50;
  img16.channels = 1;
  img16.pixels.resize(img16.sample_count());
  for (std::size_t i = 0; i < img16.pixels.size(); ++i) img16.pixels[i] = std::uint16_t(i * 37);
  ASSERT_EQ(::symlink("sink.png", path("link.png").c_str()), 0);
  {
    test::FifoReader reader(p);
    save_image16(img16, path("link.png"));
    EXPECT_EQ(reader.finish(), encode_image16(img16, ".png"));
  }
  EXPECT_TRUE(fs::is_fifo(p));
  EXPECT_TRUE(fs::is_symlink(path("link.png")));

  ASSERT_EQ(::chmod(p.c_str(), 0444), 0);
  expect_error<Error>([&] { save_image(img, p); }, {p, "read-only"});
  EXPECT_TRUE(fs::is_fifo(p));
}

// A name for a descriptor (/proc/self/fd/N, /dev/stdout) of a pipe: the kernel follows it to
// the pipe, which has no name to rename over; it is written in place, as cp writes it (it was
// followed by hand to "pipe:[N]" and refused).
TEST_F(ImageIo, AProcFdLinkToAPipeIsWrittenInPlace) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::vector<std::uint8_t> bytes = encode_image(test_image(20, 10, 1), ".png");
  ASSERT_LT(bytes.size(), 60000u);  // fits in the pipe: no reader thread needed
  write_file_atomic("/proc/self/fd/" + std::to_string(fds[1]), bytes.data(), bytes.size());
  ::close(fds[1]);
  std::vector<std::uint8_t> got(bytes.size() + 1);
  std::size_t n = 0;
  for (ssize_t k; (k = ::read(fds[0], got.data() + n, got.size() - n)) > 0;) n += std::size_t(k);
  ::close(fds[0]);
  got.resize(n);
  EXPECT_EQ(got, bytes);
}

// An output that is a dangling symlink is refused, as GNU cp refuses to write through one: the
// link's target was created. The link stays as it was; nothing else is made.
TEST_F(ImageIo, ADanglingSymlinkOutputIsRefused) {
  ASSERT_EQ(::symlink("nothing.png", path("link.png").c_str()), 0);
  expect_error<Error>([&] { save_image(test_image(4, 4, 1), path("link.png")); },
                      {path("link.png"), "dangling symbolic link", "nothing.png"});
  EXPECT_EQ(listing(), std::vector<std::string>{"link.png"});
  EXPECT_EQ(fs::read_symlink(path("link.png")), fs::path("nothing.png"));
}

// Overwriting keeps the old file's permission bits and, where the process may set them, its
// owner and group (root: any; here as root, the file of another user stays that user's).
TEST_F(ImageIo, OverwritingKeepsTheModeAndTheOwnerWherePermitted) {
  const std::string p = path("o.png");
  save_image(test_image(4, 4, 1), p);
  ASSERT_EQ(::chmod(p.c_str(), 0604), 0);
  const bool root = ::geteuid() == 0;
  if (root) ASSERT_EQ(::chown(p.c_str(), 65534, 65533), 0);
  struct stat before {};
  ASSERT_EQ(::stat(p.c_str(), &before), 0);
  save_image(test_image(5, 5, 1), p);
  struct stat after {};
  ASSERT_EQ(::stat(p.c_str(), &after), 0);
  EXPECT_EQ(load_image(p).width, 5);
  EXPECT_EQ(after.st_mode & 07777, 0604u);
  EXPECT_EQ(after.st_uid, before.st_uid);
  EXPECT_EQ(after.st_gid, before.st_gid);
  EXPECT_EQ(listing(), std::vector<std::string>{"o.png"});
}

// ---- binary PGM/PPM out ----

// 8-bit PGM/PPM are written as histeq reads them (maxval 255): .pgm for gray, .ppm for colour,
// .pnm either; a colour image as .pgm, gray as .ppm or alpha in any of them is a UsageError that
// names the extension that fits.
TEST_F(ImageIo, EightBitPgmPpmPnmRoundTrip) {
  const Image g = test_image(31, 17, 1), c = test_image(31, 17, 3);
  const struct {
    const Image& img;
    const char* ext;
    const char* magic;
  } cases[] = {{g, ".pgm", "P5"}, {c, ".ppm", "P6"}, {g, ".pnm", "P5"}, {c, ".PNM", "P6"}};
  for (const auto& k : cases) {
    SCOPED_TRACE(k.ext);
    const std::vector<std::uint8_t> b = encode_image(k.img, k.ext);
    const std::string head = std::string(k.magic) + "\n31 17\n255\n";
    ASSERT_GE(b.size(), head.size());
    EXPECT_EQ(std::string(b.begin(), b.begin() + std::ptrdiff_t(head.size())), head);
    const Image back = decode_image(b.data(), b.size(), "mem", kDefaultMaxPixels);
    EXPECT_EQ(back.channels, k.img.channels);
    EXPECT_EQ(back.pixels, k.img.pixels);
  }
  save_image(c, path("c.ppm"));
  EXPECT_EQ(load_image(path("c.ppm")).pixels, c.pixels);
  expect_error<UsageError>([&] { encode_image(c, ".pgm"); }, {".pgm", "colour", ".ppm", ".pnm"});
  expect_error<UsageError>([&] { encode_image(g, ".ppm"); }, {".ppm", "gray", ".pgm"});
  expect_error<UsageError>([&] { encode_image(test_image(4, 4, 4), ".pnm"); }, {"alpha", ".png"});
}

TEST_F(ImageIo, ShortWriteLeavesNothingAndKeepsTheOldFile) {
  // A file-size limit makes write() fail part way (EFBIG), as a full disk would (ENOSPC).
  const std::string p = path("full.png");
  const Image old_img = test_image(8, 8, 1);
  save_image(old_img, p);
  const auto old_bytes = encode_image(old_img, ".png");
  Image big = test_image(512, 512, 3);
  for (auto& x : big.pixels) x = static_cast<std::uint8_t>(std::rand());  // incompressible
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  std::string msg;
  try {
    save_image(big, p);
  } catch (const Error& e) {
    threw = true;
    msg = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  ASSERT_TRUE(threw);
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
  EXPECT_NE(msg.find("write"), std::string::npos) << msg;
  EXPECT_EQ(listing(), std::vector<std::string>{"full.png"}) << "temp file left behind";
  EXPECT_EQ(load_image(p).pixels, old_img.pixels) << "the old file was damaged";
  (void)old_bytes;
}

}  // namespace
}  // namespace histeq
