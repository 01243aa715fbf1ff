// test_host_fuzz_replay.cpp — replays the decode fuzzer's seed corpus (tests/fuzz/corpus/decode)
// and every crash regression (tests/fuzz/crashes/decode) through the fuzzer's own per-input
// function (fuzz/fuzz_one.hpp), in the ordinary g++ build, on every CI run: no crash, and each
// input either rejected with an Error naming it or decoded to a sane image (w*h*c == bytes).
// The fuzzer itself needs clang (tests/fuzz/README.md); this test does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_one.hpp"
#include "histeq/image_io.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {
namespace fs = std::filesystem;

using test::files_in;

std::vector<std::uint8_t> bytes_of(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(f), {});
}

TEST(FuzzReplay, SeedCorpusDecodesAndEqualizes) {
  const auto seeds = files_in("tests/fuzz/corpus/decode");
  ASSERT_GE(seeds.size(), 20u) << "seed corpus missing: tests/fuzz/corpus/decode";
  for (const auto& p : seeds) {
    SCOPED_TRACE(p.string());
    const auto b = bytes_of(p);
    // Every seed is a valid image of a format histeq reads: it must decode, not be rejected.
    EXPECT_EQ(fuzz::decode_equalize_one(b.data(), b.size()), fuzz::Outcome::decoded);
  }
}

TEST(FuzzReplay, SeedCorpusCoversEveryFormatAndChannelCount) {
  int channels_seen[5] = {0, 0, 0, 0, 0};
  std::vector<std::string> exts;
  for (const auto& p : files_in("tests/fuzz/corpus/decode")) {
    const auto b = bytes_of(p);
    const Image img = decode_image(b.data(), b.size(), p.string());
    ++channels_seen[img.channels];
    exts.push_back(p.extension().string());
  }
  for (int c = 1; c <= 4; ++c) EXPECT_GT(channels_seen[c], 0) << c << " channels";
  for (const char* e : {".png", ".jpg", ".bmp", ".tga", ".gif", ".pgm", ".ppm"})
    EXPECT_NE(std::find(exts.begin(), exts.end(), e), exts.end()) << e;
}

TEST(FuzzReplay, CrashRegressionsAreRejectedOrSane) {
  const auto crashes = files_in("tests/fuzz/crashes/decode");
  for (const auto& p : crashes) {
    SCOPED_TRACE(p.string());
    const auto b = bytes_of(p);
    fuzz::decode_equalize_one(b.data(), b.size());  // aborts on a broken invariant
  }
  SUCCEED() << crashes.size() << " regression inputs replayed";
}

TEST(FuzzReplay, MinimizedFuzzCorpusIsRejectedOrSane) {
  // tests/fuzz/corpus/decode-min: the fuzz_decode corpus, minimized with -merge=1 (issue 12;
  // scripts/fuzz_long.sh prints the merge command after each campaign).
  const auto inputs = files_in("tests/fuzz/corpus/decode-min");
  EXPECT_GE(inputs.size(), 100u) << "minimized corpus missing: tests/fuzz/corpus/decode-min";
  for (const auto& p : inputs) {
    SCOPED_TRACE(p.string());
    const auto b = bytes_of(p);
    fuzz::decode_equalize_one(b.data(), b.size());  // aborts on a broken invariant
  }
}

TEST(FuzzReplay, DhtWithMoreThan256CodesIsRefusedBeforeStbSeesIt) {
  // Both fuzzer findings: the plain one, and the same behind 122 fill bytes before the SOI.
  for (const char* name :
       {"jpeg-dht-over-256-codes.jpg", "jpeg-dht-over-256-after-fill-bytes.jpg"}) {
    SCOPED_TRACE(name);
    const fs::path p = test::source_path(std::string("tests/fuzz/crashes/decode/") + name);
    ASSERT_TRUE(fs::exists(p));
    const auto b = bytes_of(p);
    try {
      decode_image(b.data(), b.size(), "dht.jpg");
      ADD_FAILURE() << "decoded";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("dht.jpg"), std::string::npos) << msg;
      EXPECT_NE(msg.find("Huffman"), std::string::npos) << msg;
    }
  }
}

TEST(FuzzReplay, TruncationsAndBitFlipsOfEverySeedNeverCrash) {
  // A cheap deterministic mutation sweep of the seeds (every prefix length up to 64 bytes and a
  // few thousand single-byte changes): the same invariants as the fuzzer.
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int decoded = 0, rejected = 0;
  for (const auto& p : files_in("tests/fuzz/corpus/decode")) {
    const auto b = bytes_of(p);
    for (std::size_t n = 1; n < std::min<std::size_t>(b.size(), 64); ++n)
      (fuzz::decode_equalize_one(b.data(), n) == fuzz::Outcome::decoded ? decoded : rejected)++;
    for (int k = 0; k < 100; ++k) {
      auto m = b;
      m[next() % m.size()] = static_cast<std::uint8_t>(next());
      (fuzz::decode_equalize_one(m.data(), m.size()) == fuzz::Outcome::decoded ? decoded
                                                                               : rejected)++;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(decoded, 0);
}

}  // namespace
}  // namespace histeq
