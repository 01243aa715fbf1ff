// test_host_decode_checks.cpp — issue 12's rule through decode_image: every file of the hostile
// set (tests/hostile_files.hpp, made here byte by byte) is refused with an Error that names the
// file and the defect, or, for the valid unusual files (top-down BMP, 16-bit PNM, maxval 15,
// palette PNG, GIF), decodes to exactly the expected pixels. The JPEG classes wait for the
// libjpeg-turbo decoder (see kJpegDecoderChecks).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "histeq/error.hpp"
#include "histeq/image_io.hpp"
#include "hostile_files.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

// stb_image 2.27 decoded the hostile JPEGs from zero fill or uninitialized tables; the
// libjpeg-turbo decoder (issue 17, src/io/jpeg_codec.cpp) refuses them (but see Case::known_gap).
constexpr bool kJpegDecoderChecks = true;

TEST(DecodeChecks, EveryHostileFileIsRefusedWithItsReasonOrDecodesExactly) {
  int checked = 0;
  for (const hostile::Case& c : hostile::cases()) {
    SCOPED_TRACE(c.name + " (" + c.cls + ")");
    if (c.jpeg && !kJpegDecoderChecks) continue;
    if (c.known_gap) {
      std::printf("known gap, not checked: %s (%s)\n", c.name.c_str(), c.cls.c_str());
      continue;
    }
    const std::string name = "in/" + c.name;
    if (c.jpeg || !c.reason.empty()) {
      try {
        const Image img = decode_image(c.bytes.data(), c.bytes.size(), name);
        ADD_FAILURE() << "decoded to " << img.width << "x" << img.height << "x" << img.channels
                      << " instead of failing with '" << c.reason << "'";
      } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("'" + name + "'"), std::string::npos) << msg;
        EXPECT_NE(msg.find(c.reason), std::string::npos) << msg;
      }
    } else {
      const Image img = decode_image(c.bytes.data(), c.bytes.size(), name);
      EXPECT_EQ(img.width, c.width);
      EXPECT_EQ(img.height, c.height);
      EXPECT_EQ(img.channels, c.channels);
      EXPECT_EQ(img.pixels, c.pixels);
    }
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

TEST(DecodeChecks, KnownGapStillDecodes) {
  // Documents the one known gap (docs/reliability.md §6): when this fails, the JPEG decoder has
  // learnt to refuse the file: clear Case::known_gap in hostile_files.hpp.
  for (const hostile::Case& c : hostile::cases()) {
    if (!c.known_gap) continue;
    SCOPED_TRACE(c.name);
    EXPECT_NO_THROW(decode_image(c.bytes.data(), c.bytes.size(), c.name));
  }
}

TEST(DecodeChecks, EveryValidFileCutShortIsRefused) {
  // Each valid file cut at 1/8 .. 7/8 of its length (pixel data lost) and by the last byte of a
  // PNM/PNG (a sample, or IEND) fails: no format may fill the missing data in. (A BMP's last
  // row padding, a GIF's trailer and the bits after the LZW end code hold no pixel.)
  int cuts = 0;
  for (const hostile::Case& c : hostile::cases()) {
    if (!c.reason.empty() || c.jpeg) continue;
    std::vector<std::size_t> sizes;
    for (int k = 1; k < 8; ++k) sizes.push_back(c.bytes.size() * std::size_t(k) / 8);
    if (c.name.find(".p") != std::string::npos) sizes.push_back(c.bytes.size() - 1);
    for (std::size_t n : sizes) {
      SCOPED_TRACE(c.name + " cut to " + std::to_string(n) + " of " +
                   std::to_string(c.bytes.size()));
      EXPECT_THROW(decode_image(c.bytes.data(), n, "cut"), Error);
      ++cuts;
    }
  }
  EXPECT_GT(cuts, 50);
}

TEST(DecodeChecks, CommittedHostileFilesAreTheGeneratorsAndAreRefused) {
  // tests/fuzz/crashes/decode/hostile-* (replayed by test_host_fuzz_replay and used as fuzz
  // seeds) are exactly what make_hostile_files writes; each is refused from the file too.
  int files = 0;
  for (const hostile::Case& c : hostile::cases()) {
    if (c.bytes.size() > 65536) continue;  // not committed (make_hostile_files skips it)
    SCOPED_TRACE(c.name);
    const std::string path = test::source_path("tests/fuzz/crashes/decode/hostile-" + c.name);
    std::ifstream f(path, std::ios::binary);
    ASSERT_TRUE(f) << path << " missing: build/tests/make_hostile_files tests/fuzz/crashes/decode";
    const hostile::Bytes b((std::istreambuf_iterator<char>(f)), {});
    EXPECT_EQ(b, c.bytes) << "regenerate: build/tests/make_hostile_files tests/fuzz/crashes/decode";
    if (!c.reason.empty() && !c.jpeg) EXPECT_THROW(load_image(path), Error);
    ++files;
  }
  EXPECT_GE(files, 35);
}

TEST(DecodeChecks, CutJpegIsNotReportedAsAnotherFormat) {
  // stb 2.27 left its PNG probe's "bad png sig" as the reason for a cut JPEG.
  std::ifstream f(test::source_path("tests/fuzz/corpus/decode/c3-q95.jpg"), std::ios::binary);
  hostile::Bytes b((std::istreambuf_iterator<char>(f)), {});
  ASSERT_GT(b.size(), 300u);
  b.resize(300);
  try {
    decode_image(b.data(), b.size(), "cut.jpg");
    FAIL() << "decoded";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("png"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("JPEG"), std::string::npos) << e.what();
  }
}

TEST(DecodeChecks, PngBombIsRefusedWithoutInflatingIt) {
  // The 8 MiB-of-zeros stream for a 1x1 image: refused naming the bound (2 bytes needed).
  for (const hostile::Case& c : hostile::cases()) {
    if (c.name != "png-bomb-1x1-8mib.png") continue;
    try {
      decode_image(c.bytes.data(), c.bytes.size(), "bomb.png");
      FAIL() << "the bomb decoded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("more than the 2 bytes the header needs"),
                std::string::npos)
          << e.what();
    }
    return;
  }
  FAIL() << "no bomb case";
}

}  // namespace
}  // namespace histeq
