// test_host_limits.cpp — the pixel limit (image_io.hpp: kDefaultMaxPixels, the CLI's
// --max-pixels) is read from the header of every input format and enforced before any pixel
// memory is allocated; width × height is computed in 64 bits (no overflow for any header).
// Inputs: the fuzz seed corpus (tests/fuzz/corpus/decode, one small valid file per format) and
// copies of it with patched headers, made here at run time.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/image_io.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {
namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

Bytes seed(const std::string& name) {
  const std::string p = test::source_path("tests/fuzz/corpus/decode/" + name);
  std::ifstream f(p, std::ios::binary);
  Bytes b((std::istreambuf_iterator<char>(f)), {});
  EXPECT_FALSE(b.empty()) << p;
  return b;
}

std::string error_of(const Bytes& b, const std::string& name, std::uint64_t limit) {
  try {
    decode_image(b.data(), b.size(), name, limit);
  } catch (const UsageError& e) {
    ADD_FAILURE() << "a bad file is not a usage error: " << e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void le16(Bytes& b, std::size_t at, std::uint32_t v) {
  b[at] = std::uint8_t(v);
  b[at + 1] = std::uint8_t(v >> 8);
}
void le32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (int k = 0; k < 4; ++k) b[at + k] = std::uint8_t(v >> (8 * k));
}
void be16(Bytes& b, std::size_t at, std::uint32_t v) {
  b[at] = std::uint8_t(v >> 8);
  b[at + 1] = std::uint8_t(v);
}

TEST(Limits, DefaultIsDocumentedValue) {
  // The documented default (image_io.hpp, README, docs/reliability.md): 2^28 pixels.
  EXPECT_EQ(kDefaultMaxPixels, std::uint64_t(1) << 28);
}

TEST(Limits, ExactLimitPassesOneBelowFailsForEveryFormat) {
  for (const char* name : {"c1.png", "c3.bmp", "c4.tga", "c3-q95.jpg", "still.gif", "gray.pgm",
                           "rgb.ppm", "interlaced.png", "animated.gif"}) {
    SCOPED_TRACE(name);
    const Bytes b = seed(name);
    const Image img = decode_image(b.data(), b.size(), name);
    const std::uint64_t pixels = img.pixel_count();
    EXPECT_EQ(decode_image(b.data(), b.size(), name, pixels).pixel_count(), pixels);
    const std::string msg = error_of(b, name, pixels - 1);
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(img.width) + "x" + std::to_string(img.height)),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("over the limit of " + std::to_string(pixels - 1)), std::string::npos)
        << msg;
  }
}

TEST(Limits, HugeHeadersAreRefusedFromTheHeaderInEveryFormat) {
  // Each header claims far more pixels than the default limit while the file stays tiny: the
  // message is the limit's (not stb's "out of memory" after an attempted allocation).
  struct Case {
    const char* seed;
    const char* name;
    void (*patch)(Bytes&);
    const char* dims;
  };
  const Case cases[] = {
      {"c3.bmp", "huge.bmp",
       [](Bytes& b) {
         le32(b, 18, 100000);
         le32(b, 22, 100000);
       },
       "100000x100000"},
      {"c1.tga", "huge.tga",
       [](Bytes& b) {
         le16(b, 12, 65535);
         le16(b, 14, 65535);
       },
       "65535x65535"},
      {"still.gif", "huge.gif",
       [](Bytes& b) {
         le16(b, 6, 65535);
         le16(b, 8, 65535);
       },
       "65535x65535"},
      {"c1-q50.jpg", "huge.jpg",
       [](Bytes& b) {
         for (std::size_t i = 0; i + 9 < b.size(); ++i)
           if (b[i] == 0xFF && b[i + 1] == 0xC0) {  // SOF0: length, precision, height, width
             be16(b, i + 5, 65535);
             be16(b, i + 7, 65535);
             return;
           }
         ADD_FAILURE() << "no SOF0";
       },
       "65535x65535"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Bytes b = seed(c.seed);
    c.patch(b);
    const std::string msg = error_of(b, c.name, kDefaultMaxPixels);
    EXPECT_NE(msg.find(c.name), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.dims), std::string::npos) << msg;
    EXPECT_NE(msg.find("over the limit"), std::string::npos) << msg;
  }
  const std::string pgm = "P5\n50000 60000\n255\n\x01\x02";
  const Bytes b(pgm.begin(), pgm.end());
  const std::string msg = error_of(b, "huge.pgm", kDefaultMaxPixels);
  EXPECT_NE(msg.find("50000x60000 = 3000000000 pixels"), std::string::npos) << msg;
}

TEST(Limits, ProductIsComputedIn64Bits) {
  // 2^16 × 2^16 wraps to 0 in 32 bits, and 2^31-1 squared needs 62 bits: both must be over
  // the limit with the exact product in the message, and a limit of 2^64-1 lets the header
  // through to the decoder (which then fails for its own reason, without a crash).
  Bytes png = seed("c1.png");
  auto ihdr = [&](std::uint32_t w, std::uint32_t h) {
    Bytes p = png;
    for (int k = 0; k < 4; ++k) {
      p[16 + k] = std::uint8_t(w >> (24 - 8 * k));
      p[20 + k] = std::uint8_t(h >> (24 - 8 * k));
    }
    std::uint32_t c = 0xFFFFFFFFu;  // the IHDR's CRC-32 again (type + 13 data bytes)
    for (int i = 12; i < 29; ++i) {
      c ^= p[std::size_t(i)];
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    c ^= 0xFFFFFFFFu;
    for (int k = 0; k < 4; ++k) p[29 + std::size_t(k)] = std::uint8_t(c >> (24 - 8 * k));
    return p;
  };
  std::string msg = error_of(ihdr(1u << 16, 1u << 16), "wrap.png", kDefaultMaxPixels);
  EXPECT_NE(msg.find("65536x65536 = 4294967296 pixels"), std::string::npos) << msg;
  msg = error_of(ihdr(0x7FFFFFFF, 0x7FFFFFFF), "big.png", kDefaultMaxPixels);
  EXPECT_NE(msg.find("= 4611686014132420609 pixels"), std::string::npos) << msg;
  msg = error_of(ihdr(0x7FFFFFFF, 0x7FFFFFFF), "big.png", ~std::uint64_t(0));
  EXPECT_NE(msg.find("big.png"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("over the limit"), std::string::npos) << msg;
}

TEST(Limits, PngWithABadCrcIsRefused) {
  // stb_image does not check CRCs; image_io does (a flipped bit must not decode silently).
  Bytes png = seed("c3.png");
  png[png.size() - 20] ^= 0x01;  // inside the IDAT's data
  const std::string msg = error_of(png, "flip.png", kDefaultMaxPixels);
  EXPECT_NE(msg.find("flip.png"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CRC mismatch in chunk 'IDAT'"), std::string::npos) << msg;
}

TEST(Limits, PngChunkLongerThanTheFileIsRefusedBeforeAllocating) {
  // stb_image 2.27 grows its IDAT buffer to the declared chunk length (up to 2 GiB) before it
  // reads the bytes (fuzzer finding 6): the declared length is checked against the file first.
  Bytes png = seed("c3.png");
  std::size_t at = 0;
  for (std::size_t i = 8; i + 8 <= png.size(); i += 1)
    if (std::memcmp(png.data() + i + 4, "IDAT", 4) == 0) {
      at = i;
      break;
    }
  ASSERT_GT(at, 0u);
  png[at] = 0x7F;  // length 0x7F......: about 2 GiB
  const std::string msg = error_of(png, "long.png", kDefaultMaxPixels);
  EXPECT_NE(msg.find("long.png"), std::string::npos) << msg;
  EXPECT_NE(msg.find("declares more bytes than the file holds in chunk 'IDAT'"), std::string::npos)
      << msg;
}

TEST(Limits, ZeroSizeHeadersAreRefusedInEveryFormat) {
  Bytes bmp = seed("c3.bmp");
  le32(bmp, 18, 0);
  Bytes gif = seed("still.gif");
  le16(gif, 6, 0);
  Bytes tga = seed("c1.tga");
  le16(tga, 14, 0);
  const std::string pgm_s = "P5\n0 4\n255\n";
  const Bytes pgm(pgm_s.begin(), pgm_s.end());
  for (const auto& [b, name] : {std::pair<const Bytes&, const char*>{bmp, "zero.bmp"},
                                {gif, "zero.gif"},
                                {tga, "zero.tga"},
                                {pgm, "zero.pgm"}}) {
    const std::string msg = error_of(b, name, kDefaultMaxPixels);
    EXPECT_FALSE(msg.empty()) << name << " decoded";
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

TEST(Limits, FilesLargerThanTheDecoderTakesAreRefusedBeforeReading) {
  // A sparse file of 2^31 bytes: refused from its size (fstat), nothing is read or allocated.
  const fs::path p =
      fs::temp_directory_path() / ("histeq-big-" + std::to_string(::getpid()) + ".png");
  {
    std::ofstream f(p, std::ios::binary);
    f.write("\x89PNG", 4);
  }
  std::error_code ec;
  fs::resize_file(p, (std::uintmax_t(1) << 31) + 16, ec);
  if (ec) GTEST_SKIP() << "cannot make a sparse 2 GiB file here: " << ec.message();
  try {
    load_image(p.string());
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("too large"), std::string::npos) << msg;
  }
  fs::remove(p);
}

}  // namespace
}  // namespace histeq
