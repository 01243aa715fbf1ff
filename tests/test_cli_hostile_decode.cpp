// test_cli_hostile_decode.cpp — issue 12 against the built `histeq` binary (HISTEQ_CLI), CPU
// backend: every file of the hostile set (tests/hostile_files.hpp) exits 1 with stderr naming
// the file and the defect and leaves the output folder empty; the valid unusual files exit 0.
// Also: decoding does not depend on heap contents (MALLOC_PERTURB_ with two values gives
// byte-identical outputs, every format); SIGXFSZ leaves no temporary file; an output name of
// NAME_MAX bytes works; a report to a full stdout says that the image was written.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "histeq/image_io.hpp"
#include "hostile_files.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {
namespace fs = std::filesystem;
using hostile::Bytes;

constexpr bool kJpegDecoderChecks = true;  // see test_host_decode_checks.cpp

Bytes read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), {});
}
void write_bytes(const fs::path& p, const Bytes& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

struct CliResult {
  int status = -1;
  std::string err;
  long max_rss_kib = 0;  // the child's peak resident memory (getrusage via wait4)
};

class HostileDecode : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("histeq-hd-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "in");
    fs::create_directories(root_ / "out");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string in(const std::string& n) const { return (root_ / "in" / n).string(); }
  std::string out(const std::string& n) const { return (root_ / "out" / n).string(); }
  std::vector<std::string> outputs() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(root_ / "out"))
      v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }
  /// Runs histeq; `child` runs in the child before exec; stdout to `stdout_path` (or /dev/null).
  CliResult run(const std::vector<std::string>& args, const std::function<void()>& child = {},
                const std::string& stdout_path = "/dev/null") {
    const std::string err_path = (root_ / ("stderr-" + std::to_string(calls_++))).string();
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int o = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, 1);
      ::dup2(e, 2);
      if (child) child();
      ::alarm(60);
      std::vector<std::string> copy = args;
      std::string prog = HISTEQ_CLI;
      std::vector<char*> argv{prog.data()};
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(prog.c_str(), argv.data());
      ::_exit(127);
    }
    int st = 0;
    struct rusage ru {};
    ::wait4(pid, &st, 0, &ru);
    CliResult r;
    r.max_rss_kib = ru.ru_maxrss;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    const Bytes e = read_bytes(err_path);
    r.err.assign(e.begin(), e.end());
    return r;
  }
  fs::path root_;
  int calls_ = 0;
};

TEST_F(HostileDecode, EveryHostileFileExitsOneWithItsReasonAndLeavesNothing) {
  for (const hostile::Case& c : hostile::cases()) {
    SCOPED_TRACE(c.name + " (" + c.cls + ")");
    if (c.jpeg && !kJpegDecoderChecks) continue;
    write_bytes(in(c.name), c.bytes);
    const CliResult r = run({"equalize", in(c.name), "-o", out("o.png"), "--backend", "cpu"});
    if (c.jpeg || !c.reason.empty()) {
      EXPECT_EQ(r.status, 1) << r.err;
      EXPECT_NE(r.err.find(in(c.name)), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(c.reason), std::string::npos) << r.err;
      EXPECT_EQ(outputs(), std::vector<std::string>{}) << r.err;
    } else {
      EXPECT_EQ(r.status, 0) << r.err;
      EXPECT_EQ(outputs(), std::vector<std::string>{"o.png"});
      fs::remove(out("o.png"));
    }
  }
}

TEST_F(HostileDecode, TinyFilesDeclaringHugeImagesAndThePngBombStayInLittleMemory) {
  // Each "tiny file, huge image" (16384x16384 declared: 256 MiB to 1 GiB of pixels; the
  // progressive JPEG's coefficient buffer another 512 MiB) and the 1x1 PNG with 8 MiB of IDAT
  // zeros fail with a peak RSS far below what they declare or inflate to (stb 2.27 alone: up to
  // 2.37 GB for these; the baseline JPEG before its size check: 268 MB; the 16-bit PNGs, decoded
  // by libspng: 530 MB gray, 2.1 GB RGBA). 64 MiB covers the tool itself.
  // (test_host_decode_checks limits the address space instead, for decode_image and
  // decode_image16.)
  int n = 0;
  for (const hostile::Case& c : hostile::cases()) {
    if (c.cls != "tiny file, huge image" && c.cls != "PNG decompression bomb") continue;
    SCOPED_TRACE(c.name);
    write_bytes(in(c.name), c.bytes);
    const CliResult r = run({"equalize", in(c.name), "-o", out("o.png"), "--backend", "cpu"});
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_LT(r.max_rss_kib, 64 * 1024) << r.err;
    ++n;
  }
  EXPECT_EQ(n, 10);
}

TEST_F(HostileDecode, DecodedPixelsDoNotDependOnHeapContents) {
  // Every format, valid files: MALLOC_PERTURB_ fills freed and new heap memory with a byte
  // (glibc); two different bytes must give byte-identical outputs. gray equalization keeps
  // every decoded sample visible in the output.
  std::vector<std::pair<std::string, Bytes>> files;
  for (const char* seed :
       {"c3.png", "palette2bit.png", "interlaced.png", "c3.bmp", "c1.bmp", "c3.tga", "c1.tga",
        "still.gif", "gray.pgm", "rgb.ppm", "c3-q95.jpg", "c1-q50.jpg"})
    files.emplace_back(
        seed, read_bytes(test::source_path(std::string("tests/fuzz/corpus/decode/") + seed)));
  for (const hostile::Case& c : hostile::cases())
    if (c.reason.empty() && !c.jpeg) files.emplace_back(c.name, c.bytes);
  for (const auto& [name, bytes] : files) {
    SCOPED_TRACE(name);
    ASSERT_FALSE(bytes.empty());
    write_bytes(in(name), bytes);
    Bytes outs[2];
    const char* perturb[2] = {"1", "254"};
    for (int k = 0; k < 2; ++k) {
      const CliResult r =
          run({"equalize", in(name), "-o", out("o.png"), "--backend", "cpu", "--mode", "rgb"},
              [&] { ::setenv("MALLOC_PERTURB_", perturb[k], 1); });
      ASSERT_EQ(r.status, 0) << r.err;
      outs[k] = read_bytes(out("o.png"));
      fs::remove(out("o.png"));
    }
    EXPECT_FALSE(outs[0].empty());
    EXPECT_EQ(outs[0], outs[1]);
  }
}

TEST_F(HostileDecode, SigxfszLeavesNoTemporaryFile) {
  // RLIMIT_FSIZE of 4 KiB with SIGXFSZ at its default (the process dies of it): the cleanup
  // handler removes the temporary file before the signal ends the process.
  Image noise;
  noise.width = 200;
  noise.height = 200;
  noise.channels = 3;
  noise.pixels.resize(noise.byte_count());
  std::uint32_t x = 99;
  for (auto& p : noise.pixels) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p = std::uint8_t(x);
  }
  write_bytes(in("n.bmp"), encode_image(noise, ".bmp"));
  const CliResult r = run({"equalize", in("n.bmp"), "-o", out("o.png"), "--backend", "cpu"}, [] {
    ::signal(SIGXFSZ, SIG_DFL);
    struct rlimit rl {
      4096, 4096
    };
    ::setrlimit(RLIMIT_FSIZE, &rl);
  });
  EXPECT_EQ(r.status, 128 + SIGXFSZ) << r.err;
  EXPECT_EQ(outputs(), std::vector<std::string>{});
}

TEST_F(HostileDecode, OutputNameOfNameMaxBytesWorks) {
  const long name_max = ::pathconf((root_ / "out").c_str(), _PC_NAME_MAX);
  ASSERT_GT(name_max, 20);
  const std::string name = std::string(std::size_t(name_max) - 4, 'n') + ".png";
  Image img;
  img.width = img.height = 4;
  img.channels = 1;
  img.pixels.assign(16, 0);
  for (int i = 0; i < 16; ++i) img.pixels[std::size_t(i)] = std::uint8_t(i * 9);
  write_bytes(in("i.png"), encode_image(img, ".png"));
  const CliResult r = run({"equalize", in("i.png"), "-o", out(name), "--backend", "cpu"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(outputs(), std::vector<std::string>{name});
}

TEST_F(HostileDecode, JsonToAFullStdoutSaysTheImageWasWritten) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  Image img;
  img.width = img.height = 4;
  img.channels = 1;
  img.pixels.assign(16, 3);
  write_bytes(in("i.png"), encode_image(img, ".png"));
  const CliResult r = run(
      {"equalize", in("i.png"), "-o", out("o.png"), "--backend", "cpu", "--json"}, {}, "/dev/full");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("was written"), std::string::npos) << r.err;
  EXPECT_EQ(outputs(), std::vector<std::string>{"o.png"});
}

}  // namespace
}  // namespace histeq
