// test_host_decode_checks.cpp — issue 12's rule through decode_image: every file of the hostile
// set (tests/hostile_files.hpp, made here byte by byte) is refused with an Error that names the
// file and the defect, or, for the valid unusual files (top-down BMP, 16-bit PNM, maxval 15,
// palette PNG, GIF), decodes to exactly the expected pixels. The JPEGs that fail histeq's
// structure checks are refused by jpeg::read_info too (the nvJPEG route's gate), and the tiny
// files that declare huge images are refused in a child whose address space is limited to
// 64 MiB more than it holds (no large allocation is even asked for).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <new>
#include <string>

#include "histeq/error.hpp"
#include "histeq/image16.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "hostile_files.hpp"
#include "test_support.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HISTEQ_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define HISTEQ_TEST_SANITIZED 1
#endif
#endif

namespace histeq {
namespace {

// stb_image 2.27 decoded the hostile JPEGs from zero fill or uninitialized tables; the
// libjpeg-turbo decoder (issue 17, src/io/jpeg_codec.cpp) refuses them, with histeq's structure
// checks (decode_checks_jpeg.cpp) before it.
constexpr bool kJpegDecoderChecks = true;

bool is_pnm_name(const std::string& name) {
  const std::string ext = name.size() > 4 ? name.substr(name.size() - 4) : "";
  return ext == ".pgm" || ext == ".ppm";
}

/// `decode` (decode_image or decode_image16 of hostile case `c`, named `name`) must throw an
/// Error that names the file and holds the case's reason.
template <typename Decode>
void expect_refused(const hostile::Case& c, const std::string& name, Decode decode) {
  try {
    const auto img = decode();
    ADD_FAILURE() << "decoded to " << img.width << "x" << img.height << "x" << img.channels
                  << " instead of failing with '" << c.reason << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'" + name + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.reason), std::string::npos) << msg;
  }
}

TEST(DecodeChecks, EveryHostileFileIsRefusedWithItsReasonOrDecodesExactly) {
  int checked = 0;
  for (const hostile::Case& c : hostile::cases()) {
    SCOPED_TRACE(c.name + " (" + c.cls + ")");
    if (c.jpeg && !kJpegDecoderChecks) continue;
    const std::string name = "in/" + c.name;
    if (c.jpeg || !c.reason.empty()) {
      expect_refused(c, name, [&] { return decode_image(c.bytes.data(), c.bytes.size(), name); });
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

TEST(DecodeChecks, SixteenBitPnmDecoderRefusesWhatTheEightBitOneRefuses) {
  // decode_image16 (the command line's path for PGM/PPM with maxval > 255, and --depth 8's) must
  // refuse every hostile PNM with the reason decode_image gives: it clamped a sample above maxval
  // to maxval, and named neither maxval 0 nor the short data as decode_image does. The valid ones
  // decode to the same shape, each sample round(v * 65535 / maxval).
  int checked = 0;
  for (const hostile::Case& c : hostile::cases()) {
    if (!is_pnm_name(c.name)) continue;
    SCOPED_TRACE(c.name + " (" + c.cls + ")");
    const std::string name = "in/" + c.name;
    if (!c.reason.empty()) {
      expect_refused(c, name, [&] { return decode_image16(c.bytes.data(), c.bytes.size(), name); });
    } else {
      const Image16 img = decode_image16(c.bytes.data(), c.bytes.size(), name);
      EXPECT_EQ(img.width, c.width);
      EXPECT_EQ(img.height, c.height);
      EXPECT_EQ(img.channels, c.channels);
      EXPECT_EQ(narrow_to_8(img).pixels, c.pixels);
    }
    ++checked;
  }
  EXPECT_GE(checked, 10);
  // A 16-bit sample above maxval, the QA case: P5 3x1, maxval 1000, samples 0, 256, 65535.
  const hostile::Bytes over = hostile::pnm("P5\n3 1\n1000\n", {0, 0, 1, 0, 0xFF, 0xFF});
  EXPECT_THROW(decode_image16(over.data(), over.size(), "m.pgm"), Error);
  // At maxval itself it decodes: 1000 -> 65535, 256 -> round(256 * 65535 / 1000) = 16777.
  const hostile::Bytes at = hostile::pnm("P5\n3 1\n1000\n", {0, 0, 1, 0, 0x03, 0xE8});
  EXPECT_EQ(decode_image16(at.data(), at.size(), "m.pgm").pixels,
            (std::vector<std::uint16_t>{0, 16777, 65535}));
}

TEST(DecodeChecks, JpegStructureFailuresAreRefusedByReadInfoToo) {
  // jpeg::read_info is what the nvJPEG route (nvjpeg_codec.cpp) reads before it hands a file to
  // nvJPEG; a throw sends the file to jpeg::decode, which refuses it. So every JPEG that fails
  // the structure checks (no scan, a component no scan covers, too few entropy-coded bytes for
  // the declared size) must make read_info throw, naming the file and the reason.
  int n = 0;
  for (const hostile::Case& c : hostile::cases()) {
    const bool structure = c.cls == "JPEG without a scan" ||
                           c.cls == "JPEG components never scanned" ||
                           (c.jpeg && c.cls == "tiny file, huge image");
    if (!structure || !jpeg::is_jpeg(c.bytes.data(), c.bytes.size())) continue;
    SCOPED_TRACE(c.name);
    try {
      const jpeg::Info info = jpeg::read_info(c.bytes.data(), c.bytes.size(), "in/" + c.name);
      ADD_FAILURE() << "read_info passed a " << info.width << "x" << info.height << " file";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'in/" + c.name + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.reason), std::string::npos) << e.what();
    }
    ++n;
  }
  EXPECT_EQ(n, 7);
}

std::uint64_t address_space_bytes() {
  std::ifstream f("/proc/self/statm");  // first field: the whole address space, in pages
  std::uint64_t pages = 0;
  f >> pages;
  return pages * std::uint64_t(::sysconf(_SC_PAGESIZE));
}

TEST(DecodeChecks, TinyFilesDeclaringHugeImagesNeverAskForMuchMemory) {
#ifdef HISTEQ_TEST_SANITIZED
  GTEST_SKIP() << "a sanitizer reserves terabytes of address space: RLIMIT_AS cannot be used";
#endif
  // Each tiny file that declares 16384x16384 (256 MiB to 1 GiB of pixels; libjpeg's
  // progressive coefficient buffer another 512 MiB) and the PNG bomb are decoded in a child
  // whose address space may grow by 64 MiB only (RLIMIT_AS: any larger mmap or brk fails,
  // whether its pages would be touched or not). The child first checks that a 256 MiB
  // allocation fails there (the limit is real), then that decode_image throws histeq::Error
  // with the case's reason, not std::bad_alloc.
  int n = 0;
  for (const hostile::Case& c : hostile::cases()) {
    if (c.cls != "tiny file, huge image" && c.cls != "PNG decompression bomb") continue;
    SCOPED_TRACE(c.name);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const rlim_t cap = rlim_t(address_space_bytes() + (std::uint64_t(64) << 20));
      const struct rlimit rl { cap, cap };
      if (::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(2);
      try {
        const std::size_t big = std::size_t(256) << 20;
        std::unique_ptr<std::uint8_t[]> p(new std::uint8_t[big]);
        volatile std::uint8_t* touch = p.get();
        touch[big - 1] = 1;
        ::_exit(3);  // the limit did not bite
      } catch (const std::bad_alloc&) {}
      // Every PNG through the 16-bit decoder (libspng) too: the command line's path for
      // 16-bit files, also for --depth 16. libspng inflates only the bytes the header needs, so
      // the bomb costs it nothing: it may decode the one pixel (what follows is ignored, as
      // libpng ignores it), but must not ask for memory.
      const bool png = c.name.size() > 4 && c.name.compare(c.name.size() - 4, 4, ".png") == 0;
      for (int depth : {8, 16}) {
        if (depth == 16 && !png) break;
        try {
          if (depth == 8)
            decode_image(c.bytes.data(), c.bytes.size(), c.name);
          else
            decode_image16(c.bytes.data(), c.bytes.size(), c.name);
          if (depth == 8 || c.cls != "PNG decompression bomb") ::_exit(4);
        } catch (const Error& e) {
          if (std::string(e.what()).find(c.reason) == std::string::npos) ::_exit(5);
        } catch (const std::bad_alloc&) {
          ::_exit(6);
        } catch (...) {
          ::_exit(7);
        }
      }
      ::_exit(0);
    }
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st)) << "child died of signal " << WTERMSIG(st);
    EXPECT_EQ(WEXITSTATUS(st), 0)
        << "2: setrlimit failed, 3: a 256 MiB allocation succeeded under the limit, 4: decoded, "
           "5: refused for another reason, 6: std::bad_alloc (a large allocation was asked for), "
           "7: another exception";
    ++n;
  }
  EXPECT_EQ(n, 10);
}

TEST(DecodeChecks, SixteenBitPngDecoderRefusesWhatTheEightBitOneRefuses) {
  // decode_image16 (libspng: the command line's path for 16-bit PNGs) must refuse a bad CRC in
  // any chunk (IDAT and IEND too: libspng never reads the CRCs after the image data), a missing
  // IEND, cut image data and a tiny file declaring a huge image, with decode_image's reasons
  // (the 16-bit files exited 0, or allocated 2 GiB before failing).
  int checked = 0;
  for (const hostile::Case& c : hostile::cases()) {
    const bool chunk_class = c.name.rfind("png16-", 0) == 0 || c.name == "png-no-iend.png" ||
                             c.name == "png-tiny-declares-16384.png" ||
                             c.name == "png-idat-zlib-cut.png";
    if (!chunk_class) continue;
    SCOPED_TRACE(c.name + " (" + c.cls + ")");
    const std::string name = "in/" + c.name;
    ASSERT_FALSE(c.reason.empty());
    expect_refused(c, name, [&] { return decode_image(c.bytes.data(), c.bytes.size(), name); });
    expect_refused(c, name, [&] { return decode_image16(c.bytes.data(), c.bytes.size(), name); });
    ++checked;
  }
  EXPECT_EQ(checked, 9);
  // A valid 16-bit PNG decodes; every cut of it (at 1/8 .. 7/8, and one byte short) is refused.
  Image16 img;
  img.width = 7;
  img.height = 5;
  img.channels = 2;
  for (std::size_t i = 0; i < img.sample_count(); ++i)
    img.pixels.push_back(std::uint16_t(i * 2311 + 17));
  const std::vector<std::uint8_t> file = encode_image16(img, ".png");
  EXPECT_EQ(decode_image16(file.data(), file.size(), "ok.png").pixels, img.pixels);
  for (std::size_t n :
       {file.size() / 8, file.size() / 4, file.size() / 2, file.size() * 7 / 8, file.size() - 1}) {
    SCOPED_TRACE("cut to " + std::to_string(n) + " of " + std::to_string(file.size()));
    EXPECT_THROW(decode_image16(file.data(), n, "cut.png"), Error);
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
