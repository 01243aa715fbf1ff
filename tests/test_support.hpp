// test_support.hpp — helpers shared by the test files.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "histeq/types.hpp"

namespace histeq::test {

/// True when a CUDA device is usable; otherwise false and `why` holds the reason.
bool gpu_available(std::string* why);

/// Absolute path of a file under the source tree (samples/, tests/data/ ...).
std::string source_path(const std::string& rel);

/// samples/NAME under the source tree.
inline std::string sample(const std::string& name) { return source_path("samples/" + name); }

/// The lines of a text (without their newlines).
std::vector<std::string> lines_of(const std::string& text);

/// `s` quoted for a POSIX shell command line (single quotes; a quote inside as '\'').
std::string shell_quote(const std::string& s);

/// An RFC 4180 CSV text as rows of fields (quoted fields may hold commas, doubled quotes and line
/// breaks); an unterminated quoted field is a test failure.
std::vector<std::vector<std::string>> parse_csv(const std::string& text);

/// A file's bytes (empty when it cannot be read).
std::vector<std::uint8_t> file_bytes(const std::filesystem::path& p);

/// What a spawned CLI run gave: its exit status and captured standard output and error.
struct Result {
  int status = -1;
  std::string out, err;
};
/// For failure messages: the status, the first 3000 characters of stdout, all of stderr.
std::ostream& operator<<(std::ostream& os, const Result& r);

/// ../shared next to the checkout (natural images and goldens), or "" when absent.
std::string shared_dir();

/// The regular files directly under a folder of the source tree (dot files left out), sorted;
/// empty when the folder does not exist.
std::vector<std::filesystem::path> files_in(const std::string& rel);

/// The reading end of a FIFO, drained on a thread of its own, so that a writer (this process or a
/// spawned one) never waits on a full pipe. Opened without blocking: a test whose writer never
/// opens the FIFO (it replaced it, say) gets no bytes instead of hanging.
class FifoReader {
 public:
  explicit FifoReader(const std::filesystem::path& fifo);
  ~FifoReader();
  FifoReader(const FifoReader&) = delete;
  FifoReader& operator=(const FifoReader&) = delete;
  /// Call once the writer is done: reads what is left and returns every byte that came.
  std::vector<std::uint8_t> finish();

 private:
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::vector<std::uint8_t> data_;
  std::thread thread_;
};

/// A fixture with a fresh, empty temporary folder per test (named after the prefix, the process
/// and the test), removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  explicit TempDirTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override;
  void TearDown() override;
  /// The path of `name` inside the folder.
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  /// The names in the folder, sorted.
  std::vector<std::string> listing() const;

  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

/// A deterministic, textured, asymmetric test image (no two quadrants alike).
inline Image pattern(int w, int h, int c, unsigned seed = 1) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels.resize(img.byte_count());
  unsigned s = seed;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) {
        s = s * 1103515245u + 12345u;
        const int smooth = (x * 255 / std::max(1, w - 1) * (k + 1) + y * 3) & 255;
        img.pixels[(std::size_t(y) * w + x) * c + k] = std::uint8_t(
            (smooth * 3 + int((s >> 16) & 63)) / 4 + (x < w / 3 && y < h / 2 ? 60 : 0));
      }
  return img;
}

}  // namespace histeq::test

/// In a GPU test: skip with the reason when no device is usable.
#define HISTEQ_REQUIRE_GPU()                                                                      \
  do {                                                                                            \
    std::string why_;                                                                             \
    if (!::histeq::test::gpu_available(&why_)) GTEST_SKIP() << "no usable CUDA device: " << why_; \
  } while (0)
