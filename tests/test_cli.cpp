// test_cli.cpp — the `histeq` command line end to end: spawns the built binary (HISTEQ_CLI) through
// `sh -c` with stdout and stderr captured to files, and checks exit statuses (0 success, 1 runtime
// failure, 2 usage error), messages (they name the file or option and the cause / valid choices),
// that bad input never leaves an output file (not even a temporary one) and never changes the
// input, and the outputs against the OpenCV goldens. A few parsing checks also run in-process
// through histeq::cli::run. GPU-only assertions skip with the reason when no device is usable.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "cli/options.hpp"
#include "histeq/error.hpp"
#include "histeq/executor.hpp"
#include "histeq/image_io.hpp"
#include "histeq/pipeline.hpp"
#include "histogram/registry.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

using histeq::test::file_bytes;
using histeq::test::lines_of;
using histeq::test::Result;
using histeq::test::sample;
using histeq::test::shell_quote;

void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

std::string read_text(const fs::path& p) {
  const auto b = file_bytes(p);
  return std::string(b.begin(), b.end());
}

std::size_t count_of(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

// A scratch folder per test; run() spawns the CLI with its output captured there.
class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "histeq-cli-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << "mkdtemp " << tmpl;
    dir_ = tmpl;
    fs::create_directory(dir_ / "io");
    fs::create_directory(dir_ / "out");
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_ / "out", fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }

  // args: already shell-quoted where needed.
  Result run(const std::string& args) {
    const fs::path o = dir_ / "io" / "stdout", e = dir_ / "io" / "stderr";
    const std::string cmd = shell_quote(HISTEQ_CLI) + " " + args + " >" + shell_quote(o.string()) +
                            " 2>" + shell_quote(e.string());
    const int raw = std::system(cmd.c_str());
    Result r;
    r.status = (raw != -1 && WIFEXITED(raw)) ? WEXITSTATUS(raw) : -1;
    r.out = read_text(o);
    r.err = read_text(e);
    return r;
  }

  fs::path out(const std::string& name) const { return dir_ / "out" / name; }

  // Files in the output folder (a failed run must leave none, temporaries included).
  std::vector<std::string> out_files() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(dir_ / "out")) v.push_back(e.path().filename());
    return v;
  }

  // A failed equalize of `input`: exit `status`, stderr names `input_name`, no file in out/,
  // the input unchanged.
  void expect_fails(const std::string& input, const std::string& extra, int status,
                    const std::string& must_name) {
    std::vector<std::uint8_t> before;
    const bool input_is_file = fs::is_regular_file(input);
    if (input_is_file) before = file_bytes(input);
    const Result r = run("equalize " + shell_quote(input) + " -o " +
                         shell_quote(out("o.png").string()) + " --backend cpu " + extra);
    EXPECT_EQ(r.status, status) << r;
    EXPECT_NE(r.err.find(must_name), std::string::npos)
        << "stderr should name " << must_name << "\n"
        << r;
    EXPECT_EQ(count_of(r.err, "histeq: "), 1u) << "one message, printed once\n" << r;
    EXPECT_TRUE(r.out.empty()) << r;
    EXPECT_TRUE(out_files().empty()) << "left behind: " << out_files().front();
    if (input_is_file) EXPECT_EQ(file_bytes(input), before) << "input modified";
  }

  fs::path dir_;
};

// ---- help, version, usage errors ----

TEST_F(Cli, HelpAndVersionExitZero) {
  Result r = run("--help");
  EXPECT_EQ(r.status, 0) << r;
  for (const char* cmd : {"equalize", "histogram", "kernels", "bench"}) {
    EXPECT_NE(r.out.find(cmd), std::string::npos) << cmd << "\n" << r;
  }
  r = run("--version");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_EQ(r.out.rfind("histeq ", 0), 0u) << r;
  EXPECT_EQ(count_of(r.out.substr(0, r.out.find('\n')), "."), 2u) << "MAJOR.MINOR.PATCH\n" << r;
  EXPECT_NE(r.out.find("\nmemory: glibc malloc with GLIBC_TUNABLES"), std::string::npos) << r;
  for (const char* cmd : {"equalize", "histogram", "kernels"}) {
    r = run(std::string(cmd) + " --help");
    EXPECT_EQ(r.status, 0) << cmd << "\n" << r;
    EXPECT_NE(r.out.find(std::string("histeq ") + cmd), std::string::npos) << r;
    EXPECT_TRUE(r.err.empty()) << r;
  }
}

// --devices' help gives the executor's count of batches the JPEG device route runs at a time
// per GPU (kJpegSlotsPerDevice).
TEST_F(Cli, DevicesHelpGivesTheWorkersPerGpu) {
  const std::string want =
      "runs " + std::to_string(histeq::kJpegSlotsPerDevice) + " batches at a time per GPU";
  for (const char* cmd : {"equalize", "clahe", "histogram"}) {
    const Result r = run(std::string(cmd) + " --help");
    ASSERT_EQ(r.status, 0) << r;
    std::string flat;  // cxxopts wraps the help: compare with the line breaks and indents gone
    for (std::size_t i = 0; i < r.out.size(); ++i) {
      if (r.out[i] == '\n') {
        while (i + 1 < r.out.size() && r.out[i + 1] == ' ') ++i;
        if (!flat.empty() && flat.back() != ' ') flat += ' ';
      } else {
        flat += r.out[i];
      }
    }
    EXPECT_NE(flat.find(want), std::string::npos) << cmd << ": want '" << want << "'\n" << r;
    EXPECT_EQ(flat.find("two workers each"), std::string::npos) << cmd << "\n" << r;
  }
}

TEST_F(Cli, UsageErrorsExitTwoAndNameTheChoices) {
  const std::string in = shell_quote(sample("camera.png"));
  const std::string o = " -o " + shell_quote(out("o.png").string());
  struct Case {
    std::string args, names, choices;
  } cases[] = {
      {"", "no command", "equalize"},
      {"frobnicate", "'frobnicate'", "equalize"},
      {"--bogus", "'--bogus'", "--help"},
      {"equalize " + in + o + " --bogus", "bogus", "--kernel"},
      {"equalize " + in + o + " --kernel nosuch", "'nosuch'", "known"},
      {"equalize " + in + o + " --mode sepia", "'sepia'", "luma"},
      {"equalize " + in + o + " --formula magic", "'magic'", "opencv"},
      {"equalize " + in + o + " --backend opencl", "'opencl'", "cuda"},
      {"equalize " + in + " -o " + shell_quote(out("o.webp").string()), ".webp", ".png"},
      {"equalize " + in + o + " --quality 0", "--quality", "1..100"},
      {"equalize " + in + o + " --quality many", "many", "--help"},
      {"equalize " + o, "missing INPUT", "usage"},
      {"equalize " + in, "missing -o", "usage"},
      {"equalize " + in + " -o", "-o/--output needs a value", "OUTPUT"},
      {"equalize " + in + " --output", "-o/--output needs a value", "OUTPUT"},
      {"clahe " + in + o + " --tiles", "--tiles needs a value", "WxH"},
      {"equalize " + in + " extra" + o, "'extra'", "--help"},
      {"histogram", "missing INPUT", "usage"},
      {"histogram " + in + " --mode sepia", "'sepia'", "luma"},
      {"kernels --bins 0", "--bins", "4096"},
      {"kernels --type f64", "'f64'", "u8"},
      {"kernels --size 1X", "'1X'", "16M"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << c.args << "\n" << r;
    EXPECT_NE(r.err.find(c.choices), std::string::npos) << c.args << "\n" << r;
    EXPECT_EQ(count_of(r.err, "histeq: "), 1u) << c.args << "\n" << r;
    EXPECT_TRUE(out_files().empty()) << c.args;
  }
}

TEST(CliInProcess, ThrowsUsageErrorWithoutPrinting) {
  std::ostringstream out, err;
  EXPECT_THROW(histeq::cli::run({"equalize", "x.png", "-o", "y.gif"}, out, err),
               histeq::UsageError);
  EXPECT_THROW(histeq::cli::run({"nosuch"}, out, err), histeq::UsageError);
  EXPECT_THROW(histeq::cli::run({"histogram", "--kernel"}, out, err), histeq::UsageError);
  EXPECT_TRUE(err.str().empty()) << err.str();
  EXPECT_EQ(histeq::cli::run({"--version"}, out, err), 0);
  EXPECT_EQ(out.str().rfind("histeq ", 0), 0u);
}

// ---- bad input: exit 1, the file and the cause named, nothing written, input untouched ----

TEST_F(Cli, MissingFile) { expect_fails((dir_ / "nope.png").string(), "", 1, "nope.png"); }

TEST_F(Cli, Directory) {
  // A folder into one image file name is a usage error (a folder input is a batch, whose -o
  // names the output folder), whatever the folder is called.
  fs::create_directory(dir_ / "adir.png");
  expect_fails((dir_ / "adir.png").string(), "", 2,
               "'" + (dir_ / "adir.png").string() + "' is a folder");
}

TEST_F(Cli, EmptyFile) {
  write_bytes(dir_ / "empty.png", {});
  expect_fails((dir_ / "empty.png").string(), "", 1, "empty.png");
}

TEST_F(Cli, NotAnImage) {
  const std::string text = "this is a text file, not an image\n";
  write_bytes(dir_ / "notes.png", std::vector<std::uint8_t>(text.begin(), text.end()));
  expect_fails((dir_ / "notes.png").string(), "", 1, "notes.png");
}

TEST_F(Cli, TruncatedPng) {
  auto b = file_bytes(sample("camera.png"));
  ASSERT_GT(b.size(), 1000u);
  b.resize(b.size() / 2);
  write_bytes(dir_ / "cut.png", b);
  expect_fails((dir_ / "cut.png").string(), "", 1, "cut.png");
}

TEST_F(Cli, TruncatedJpeg) {
  auto b = file_bytes(sample("hubble_deep_field.jpg"));
  ASSERT_GT(b.size(), 1000u);
  b.resize(b.size() / 2);
  write_bytes(dir_ / "cut.jpg", b);
  expect_fails((dir_ / "cut.jpg").string(), "", 1, "cut.jpg");
}

// A PNG whose header says width 0 (valid signature, IHDR with a correct CRC, IDAT, IEND).
std::vector<std::uint8_t> zero_width_png() {
  auto crc32 = [](const std::vector<std::uint8_t>& d, std::size_t from) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::size_t i = from; i < d.size(); ++i) {
      c ^= d[i];
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
  };
  std::vector<std::uint8_t> f = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  auto be32 = [](std::vector<std::uint8_t>& v, std::uint32_t x) {
    for (int s = 24; s >= 0; s -= 8) v.push_back(std::uint8_t(x >> s));
  };
  auto chunk = [&](const char* type, const std::vector<std::uint8_t>& data) {
    be32(f, std::uint32_t(data.size()));
    std::vector<std::uint8_t> td(type, type + 4);
    td.insert(td.end(), data.begin(), data.end());
    f.insert(f.end(), td.begin(), td.end());
    be32(f, crc32(td, 0));
  };
  std::vector<std::uint8_t> ihdr;
  be32(ihdr, 0);                             // width
  be32(ihdr, 16);                            // height
  ihdr.insert(ihdr.end(), {8, 0, 0, 0, 0});  // 8-bit gray, deflate, no filter, no interlace
  chunk("IHDR", ihdr);
  chunk("IDAT", {0x78, 0x9C, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01});  // zlib of nothing
  chunk("IEND", {});
  return f;
}

TEST_F(Cli, ZeroSize) {
  write_bytes(dir_ / "zero.png", zero_width_png());
  expect_fails((dir_ / "zero.png").string(), "", 1, "zero.png");
}

TEST_F(Cli, OverThePixelLimit) {
  const fs::path in = dir_ / "camera.png";
  fs::copy_file(sample("camera.png"), in);
  expect_fails(in.string(), "--max-pixels 100", 1, "camera.png");
  const Result r = run("histogram " + shell_quote(in.string()) + " --backend cpu --max-pixels 100");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("100"), std::string::npos) << "names the limit\n" << r;
}

TEST_F(Cli, OutputFolderMissing) {
  const std::string o = (dir_ / "out" / "no" / "such" / "o.png").string();
  const Result r = run("equalize " + shell_quote(sample("camera.png")) + " -o " + shell_quote(o) +
                       " --backend cpu");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find(o), std::string::npos) << r;
  EXPECT_TRUE(out_files().empty());
}

TEST_F(Cli, OutputFolderNotWritableProc) {
  // /proc refuses new files even for root.
  const Result r = run("equalize " + shell_quote(sample("camera.png")) +
                       " -o /proc/histeq-test-out.png --backend cpu");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("/proc/histeq-test-out.png"), std::string::npos) << r;
}

TEST_F(Cli, OutputFolderNotWritable) {
  if (geteuid() == 0) {
    GTEST_SKIP() << "running as root, which may write into a read-only folder anyway "
                    "(OutputFolderNotWritableProc covers the case with /proc)";
  }
  fs::permissions(dir_ / "out", fs::perms::owner_read | fs::perms::owner_exec);
  const Result r = run("equalize " + shell_quote(sample("camera.png")) + " -o " +
                       shell_quote(out("o.png").string()) + " --backend cpu");
  fs::permissions(dir_ / "out", fs::perms::owner_all);
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find(out("o.png").string()), std::string::npos) << r;
  EXPECT_TRUE(out_files().empty());
}

TEST_F(Cli, UnknownOutputExtensionDoesNoWork) {
  // A missing input and a bad extension: the extension is checked first (exit 2).
  const Result r = run("equalize " + shell_quote((dir_ / "nope.png").string()) + " -o " +
                       shell_quote(out("o.xyz").string()));
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find(".xyz"), std::string::npos) << r;
  EXPECT_TRUE(out_files().empty());
}

// ---- results ----

// Decoded pixels of `a` equal those of `b` (both through histeq::load_image).
void expect_same_pixels(const std::string& a, const std::string& b) {
  const histeq::Image x = histeq::load_image(a), y = histeq::load_image(b);
  ASSERT_EQ(x.width, y.width);
  ASSERT_EQ(x.height, y.height);
  ASSERT_EQ(x.channels, y.channels);
  EXPECT_TRUE(x.pixels == y.pixels) << a << " differs from " << b;
}

// An existing output that is not a regular file is written as cp writes it: a FIFO (standing in
// for /dev/null and other devices, which a test should not touch) gets the image through the
// pipe and stays a FIFO; `-o FIFO --format png` as `-o /dev/null --format png` would be used.
TEST_F(Cli, OutputFifoIsWrittenNotReplaced) {
  const std::string in = shell_quote(sample("coins.png"));
  ASSERT_EQ(run("equalize " + in + " -o " + shell_quote(out("ref.png").string()) + " --backend cpu")
                .status,
            0);
  const std::vector<std::uint8_t> ref = file_bytes(out("ref.png"));
  for (const char* name : {"f.png", "sink"}) {
    SCOPED_TRACE(name);
    const fs::path f = dir_ / name;
    ASSERT_EQ(::mkfifo(f.c_str(), 0644), 0);
    histeq::test::FifoReader reader(f);
    const Result r = run("equalize " + in + " -o " + shell_quote(f.string()) + " --backend cpu" +
                         (std::string(name) == "sink" ? " --format png" : ""));
    const std::vector<std::uint8_t> got = reader.finish();
    EXPECT_EQ(r.status, 0) << r;
    EXPECT_TRUE(fs::is_fifo(f)) << "replaced by a regular file";
    EXPECT_EQ(got, ref);
  }
  EXPECT_EQ(out_files(), std::vector<std::string>{"ref.png"}) << "no temporary file";
}

TEST_F(Cli, EqualizeCpuMatchesOpenCvGolden) {
  const Result r = run("equalize " + shell_quote(sample("camera.png")) + " -o " +
                       shell_quote(out("camera.png").string()) + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_TRUE(r.err.empty()) << "an explicit --backend cpu needs no notice\n" << r;
  expect_same_pixels(out("camera.png").string(),
                     histeq::test::source_path("tests/data/golden-opencv-4.6/camera.png"));
  EXPECT_EQ(out_files(), std::vector<std::string>{"camera.png"}) << "no temporaries left";
}

TEST_F(Cli, OutputMayEqualInput) {
  const fs::path p = dir_ / "out" / "moon.png";
  fs::copy_file(sample("moon.png"), p);
  const Result r = run("equalize " + shell_quote(p.string()) + " -o " + shell_quote(p.string()) +
                       " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  expect_same_pixels(p.string(),
                     histeq::test::source_path("tests/data/golden-opencv-4.6/moon.png"));
  EXPECT_EQ(out_files(), std::vector<std::string>{"moon.png"}) << "no temporaries left";
}

TEST_F(Cli, JsonIsOneObjectWithTheDocumentedKeys) {
  const Result r = run("equalize " + shell_quote(sample("coins.png")) + " -o " +
                       shell_quote(out("c.jpg").string()) + " --backend cpu --json --timing");
  ASSERT_EQ(r.status, 0) << r;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.front(), '{') << r;
  EXPECT_EQ(r.out.substr(r.out.find_last_not_of('\n'), 1), "}") << r;
  EXPECT_EQ(count_of(r.out, "\n"), 1u) << "one line\n" << r;
  EXPECT_EQ(count_of(r.out, "{"), count_of(r.out, "}")) << r;
  for (const char* key : {"width", "height", "channels", "mode", "kernel", "backend", "device",
                          "times_ms", "decode", "upload", "histogram", "cdf_lut", "apply",
                          "download", "encode", "total", "histogram_gbps", "racy_lost"}) {
    EXPECT_NE(r.out.find(std::string("\"") + key + "\":"), std::string::npos) << key << "\n" << r;
  }
  const histeq::Image in = histeq::load_image(sample("coins.png"));
  EXPECT_NE(r.out.find("\"width\":" + std::to_string(in.width) + ","), std::string::npos) << r;
  EXPECT_NE(r.out.find("\"height\":" + std::to_string(in.height) + ","), std::string::npos) << r;
  EXPECT_NE(r.out.find("\"backend\":\"cpu\""), std::string::npos) << r;
  EXPECT_NE(r.err.find("histogram"), std::string::npos) << "--timing table goes to stderr\n" << r;
}

/// A w x h image of c channels with every value of a ramp (alpha, when present, a second ramp).
histeq::Image ramp_image(int w, int h, int c) {
  histeq::Image img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels.resize(img.byte_count());
  for (std::size_t i = 0; i < img.pixels.size(); ++i)
    img.pixels[i] = std::uint8_t((i * 37 + i / std::size_t(c) * 11) % 251);
  return img;
}

TEST_F(Cli, OutputChannelsAreThoseOfTheFileWritten) {
  // --json's output_channels (and the text line's count) said 4 for RGBA written as JPEG, 2 for
  // gray+alpha as JPEG, although JPEG drops alpha; and a gray+alpha BMP lost its alpha (24-bit)
  // while RGBA kept it (32-bit). Now the count is the file's, and gray+alpha BMP is 32-bit BGRA.
  histeq::save_image(ramp_image(24, 16, 4), (dir_ / "rgba.png").string());
  histeq::save_image(ramp_image(24, 16, 2), (dir_ / "ga.png").string());
  histeq::save_image(ramp_image(24, 16, 1), (dir_ / "g.png").string());
  const struct {
    const char* in;
    const char* out;
    const char* extra;
    int channels;
  } cases[] = {
      {"rgba.png", "a.jpg", "", 3},
      {"ga.png", "b.jpg", "", 1},
      {"ga.png", "c.bmp", "", 4},
      {"rgba.png", "d.bmp", "", 4},
      {"g.png", "e.bmp", "", 3},
      {"ga.png", "f.tga", "", 2},
      {"rgba.png", "g.png", "", 4},
      {"rgba.png", "h.png", "--mode gray", 1},
      {"rgba.png", "i.jpg", "--mode rgb", 3},
  };
  for (const auto& c : cases) {
    for (const char* cmd : {"equalize", "clahe"}) {  // the 8-bit path and the per-file operation
      SCOPED_TRACE(std::string(cmd) + " " + c.in + " -> " + c.out + " " + c.extra);
      const fs::path o = out(c.out);
      const Result r = run(std::string(cmd) + " " + shell_quote((dir_ / c.in).string()) + " -o " +
                           shell_quote(o.string()) + " --backend cpu --json " + c.extra);
      ASSERT_EQ(r.status, 0) << r;
      const nlohmann::json j = nlohmann::json::parse(r.out);
      const histeq::Image back = histeq::load_image(o.string());
      EXPECT_EQ(back.channels, c.channels);
      EXPECT_EQ(j["output_channels"], c.channels) << r;
      const Result t = run(std::string(cmd) + " " + shell_quote((dir_ / c.in).string()) + " -o " +
                           shell_quote(o.string()) + " --backend cpu " + c.extra);
      ASSERT_EQ(t.status, 0) << t;
      EXPECT_NE(t.out.find(", " + std::to_string(c.channels) + " channel"), std::string::npos) << t;
      fs::remove(o);
    }
  }
  // The BMP of gray+alpha holds the equalized gray in R, G and B and the alpha unchanged.
  const Result r = run("equalize " + shell_quote((dir_ / "ga.png").string()) + " -o " +
                       shell_quote(out("ga.bmp").string()) + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  ASSERT_EQ(run("equalize " + shell_quote((dir_ / "ga.png").string()) + " -o " +
                shell_quote(out("ga-eq.png").string()) + " --backend cpu")
                .status,
            0);
  const histeq::Image bmp = histeq::load_image(out("ga.bmp").string());
  const histeq::Image png = histeq::load_image(out("ga-eq.png").string());
  ASSERT_EQ(bmp.channels, 4);
  ASSERT_EQ(png.channels, 2);
  for (std::size_t i = 0; i < png.pixel_count(); ++i) {
    for (int k = 0; k < 3; ++k) ASSERT_EQ(bmp.pixels[i * 4 + k], png.pixels[i * 2]) << i;
    ASSERT_EQ(bmp.pixels[i * 4 + 3], png.pixels[i * 2 + 1]) << i;
  }
}

TEST_F(Cli, TimingTableHasEveryStage) {
  const Result r = run("equalize " + shell_quote(sample("chelsea.png")) + " -o " +
                       shell_quote(out("c.png").string()) + " --backend cpu --timing");
  ASSERT_EQ(r.status, 0) << r;
  for (const char* stage :
       {"decode", "upload", "histogram", "CDF+LUT", "apply", "download", "encode", "total"}) {
    EXPECT_NE(r.out.find(stage), std::string::npos) << stage << "\n" << r;
  }
  EXPECT_NE(r.out.find("GB/s"), std::string::npos) << r;
}

// Sum of column `col` (1-based after the bin) of a CSV body.
TEST_F(Cli, HistogramCsvGray) {
  const Result r = run("histogram " + shell_quote(sample("coins.png")) + " --backend cpu --csv");
  ASSERT_EQ(r.status, 0) << r;
  const auto ls = lines_of(r.out);
  ASSERT_EQ(ls.size(), 257u) << r;
  EXPECT_EQ(ls[0], "bin,count");
  std::uint64_t sum = 0;
  for (int b = 0; b < 256; ++b) {
    const std::string& l = ls[std::size_t(b) + 1];
    const auto comma = l.find(',');
    ASSERT_NE(comma, std::string::npos) << l;
    EXPECT_EQ(l.substr(0, comma), std::to_string(b));
    sum += std::stoull(l.substr(comma + 1));
  }
  const histeq::Image in = histeq::load_image(sample("coins.png"));
  EXPECT_EQ(sum, in.pixel_count());
}

// --timing on one file: the stages on stderr (stdout keeps the histogram alone).
TEST_F(Cli, HistogramTimingOfOneFile) {
  for (const char* extra : {"", " --roi 0,0,40,30"}) {
    const Result r = run("histogram " + shell_quote(sample("coins.png")) +
                         " --backend cpu --csv --timing" + extra);
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_EQ(lines_of(r.out).size(), 257u) << r;
    for (const char* stage : {"stage", "read", "decode", "histogram", "total"})
      EXPECT_NE(r.err.find(stage), std::string::npos) << stage << "\n" << r;
  }
}

TEST_F(Cli, HistogramCsvRgbHasThreeColumns) {
  const Result r =
      run("histogram " + shell_quote(sample("chelsea.png")) + " --backend cpu --csv --mode rgb");
  ASSERT_EQ(r.status, 0) << r;
  const auto ls = lines_of(r.out);
  ASSERT_EQ(ls.size(), 257u) << r;
  EXPECT_EQ(ls[0], "bin,r,g,b");
  std::uint64_t sums[3] = {0, 0, 0};
  for (std::size_t i = 1; i < ls.size(); ++i) {
    std::istringstream in(ls[i]);
    std::string f;
    std::getline(in, f, ',');
    for (auto& s : sums) {
      ASSERT_TRUE(std::getline(in, f, ',')) << ls[i];
      s += std::stoull(f);
    }
  }
  const histeq::Image in = histeq::load_image(sample("chelsea.png"));
  for (auto s : sums) EXPECT_EQ(s, in.pixel_count());
}

TEST_F(Cli, HistogramPlainHasOneLinePerBin) {
  const Result r = run("histogram " + shell_quote(sample("moon.png")) + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(lines_of(r.out).size(), 256u) << r;
}

TEST_F(Cli, KernelsListsEveryRegistryName) {
  const Result r = run("kernels");
  ASSERT_EQ(r.status, 0) << r;
  const auto ls = lines_of(r.out);
  std::set<std::string> first_words;
  for (const auto& l : ls) first_words.insert(l.substr(0, l.find(' ')));
  for (const auto& e : histeq::kernels::registry()) {
    EXPECT_TRUE(first_words.count(e.name)) << e.name << " missing\n" << r;
    EXPECT_NE(r.out.find(e.summary), std::string::npos) << e.name << "\n" << r;
  }
  if (histeq::kernels::registry().empty()) GTEST_SKIP() << "the registry has no kernels yet";
}

TEST_F(Cli, BenchIsDispatched) {
  Result r = run("bench --help");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_NE((r.out + r.err).find("bench"), std::string::npos) << r;
  r = run("bench --no-such-bench-option");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("no-such-bench-option"), std::string::npos) << r;
}

// ---- backend choice ----

TEST_F(Cli, BackendAutoWithoutGpuSaysSoOnce) {
  std::string why;
  if (histeq::cuda_available(&why)) GTEST_SKIP() << "a CUDA device is usable; no fallback to check";
  const Result r = run("equalize " + shell_quote(sample("moon.png")) + " -o " +
                       shell_quote(out("m.png").string()));
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(count_of(r.err, "CPU"), 1u) << r;
  EXPECT_EQ(count_of(r.err, "histeq: "), 1u) << r;
}

TEST_F(Cli, QuietSilencesTheNotesOfOneFile) {
  // Without a GPU the note "no usable CUDA device" is what --quiet must hold back (with one, the
  // run has no note to print): either way stderr holds nothing, and the report still prints.
  for (const std::string cmd : {"equalize", "clahe"}) {
    const Result r = run(cmd + " " + shell_quote(sample("moon.png")) + " -o " +
                         shell_quote(out(cmd + ".png").string()) + " --quiet");
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_EQ(r.err, "") << cmd << "\n" << r;
    EXPECT_NE(r.out.find(cmd + ".png"), std::string::npos) << r;
  }
  const Result h = run("histogram " + shell_quote(sample("moon.png")) + " --quiet");
  ASSERT_EQ(h.status, 0) << h;
  EXPECT_EQ(h.err, "") << h;
}

TEST_F(Cli, BackendCudaWithoutGpuIsAnError) {
  std::string why;
  if (histeq::cuda_available(&why)) GTEST_SKIP() << "a CUDA device is usable";
  const Result r = run("equalize " + shell_quote(sample("moon.png")) + " -o " +
                       shell_quote(out("m.png").string()) + " --backend cuda");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find(histeq::kNoDeviceForCuda), std::string::npos) << r;
  EXPECT_NE(r.err.find("--backend cuda"), std::string::npos) << "the CLI's hint\n" << r;
  EXPECT_TRUE(out_files().empty());
}

// The library's messages name no option; the CLI adds the option that bears on each (and
// leaves other messages, and messages that already name it, as they are).
TEST(CliHints, NameTheOptionsBehindLibraryMessages) {
  using histeq::cli::with_hints;
  const std::string no_cuda = std::string(histeq::kNoDeviceForCuda) + "no driver)";
  EXPECT_EQ(with_hints(no_cuda).rfind(no_cuda, 0), 0u) << "the library's message first";
  EXPECT_NE(with_hints(no_cuda).find("--backend cuda"), std::string::npos);
  EXPECT_EQ(with_hints(with_hints(no_cuda)), with_hints(no_cuda)) << "one hint";
  const std::string no_jpeg = std::string(histeq::kNoDeviceForGpuJpeg) + "no driver)";
  EXPECT_NE(with_hints(no_jpeg).find("--decoder gpu"), std::string::npos);
  const std::string oom = std::string(histeq::kGpuOutOfMemory) + ": needed 8 bytes";
  EXPECT_NE(with_hints(oom).find("--backend cpu"), std::string::npos);
  const std::string device =
      std::string(histeq::kNoDeviceForCuda) + "no CUDA device 7 (1 visible))";
  EXPECT_NE(with_hints(device).find("--devices"), std::string::npos);
  EXPECT_EQ(with_hints("cannot open 'x.png'"), "cannot open 'x.png'");
}

TEST_F(Cli, KernelDetailsWithoutGpuIsAnError) {
  std::string why;
  if (histeq::cuda_available(&why)) GTEST_SKIP() << "a CUDA device is usable";
  const Result r = run("kernels --details");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("needs a CUDA device"), std::string::npos) << r;
}

TEST_F(Cli, RacyKernelWarnsAndReportsLostCounts) {
  bool has_racy = false;
  for (const auto& e : histeq::kernels::registry()) has_racy |= std::string(e.name) == "racy";
  if (!has_racy) GTEST_SKIP() << "no 'racy' kernel in the registry";
  std::string why;
  if (!histeq::cuda_available(&why)) GTEST_SKIP() << "no usable CUDA device: " << why;
  const Result r = run("equalize " + shell_quote(sample("moon.png")) + " -o " +
                       shell_quote(out("m.png").string()) + " --kernel racy --backend cuda");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_NE(r.err.find("not exact"), std::string::npos) << r;
  EXPECT_NE(r.err.find("lost"), std::string::npos) << r;
}

TEST_F(Cli, GpuEqualizeMatchesCpu) {
  HISTEQ_REQUIRE_GPU();
  for (const char* s : {"camera.png", "chelsea.png"}) {
    const Result g = run("equalize " + shell_quote(sample(s)) + " -o " +
                         shell_quote(out("g.png").string()) + " --backend cuda");
    ASSERT_EQ(g.status, 0) << g;
    const Result c = run("equalize " + shell_quote(sample(s)) + " -o " +
                         shell_quote(out("c.png").string()) + " --backend cpu");
    ASSERT_EQ(c.status, 0) << c;
    expect_same_pixels(out("g.png").string(), out("c.png").string());
  }
}

}  // namespace

// ---- issue 13: JSON from nlohmann with non-UTF-8 names; every option acts or is refused ----

namespace issue13 {

class CliOptions : public Cli {};

// A file name with byte 0xE9 (Latin-1 é): the single-file --json report is still valid JSON
// (a strict UTF-8 parser takes it), the name written with U+FFFD plus its exact bytes in hex.
TEST_F(CliOptions, SingleFileJsonWithNonUtf8NameParses) {
  const fs::path in = dir_ / "caf\xE9.png";
  fs::copy_file(sample("coins.png"), in);
  const fs::path o = out("r\xE9sultat.png");
  const Result r = run("equalize " + shell_quote(in.string()) + " -o " + shell_quote(o.string()) +
                       " --backend cpu --json");
  ASSERT_EQ(r.status, 0) << r;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << r;
  EXPECT_EQ(j["input"], (dir_ / "caf\xEF\xBF\xBD.png").string());  // U+FFFD for the 0xE9
  std::string hex;
  for (unsigned char ch : in.string()) {
    static const char* digits = "0123456789abcdef";
    hex += digits[ch >> 4];
    hex += digits[ch & 15];
  }
  EXPECT_EQ(j["input_bytes_hex"], hex);
  EXPECT_TRUE(j.contains("output_bytes_hex")) << r;
  EXPECT_EQ(j["width"], 384);
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["formula"], "opencv");
  EXPECT_TRUE(j["times_ms"].contains("histogram")) << r;
  EXPECT_TRUE(fs::exists(o));
  // A valid UTF-8 name has no _bytes_hex key.
  const Result plain = run("equalize " + shell_quote(sample("coins.png")) + " -o " +
                           shell_quote(out("plain.png").string()) + " --backend cpu --json");
  ASSERT_EQ(plain.status, 0) << plain;
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("input_bytes_hex")) << plain;
}

// Options that used to do nothing are refused (exit 2, nothing written) naming the option and
// what would make it act.
TEST_F(CliOptions, OptionsThatWouldDoNothingAreRefused) {
  const std::string in = shell_quote(sample("coins.png"));
  struct Case {
    std::string args, names, hint;
  };
  const std::vector<Case> cases = {
      {"equalize " + in + " -o " + shell_quote(out("a.png").string()) + " --quality 50",
       "--quality", "JPEG"},
      {"equalize " + in + " -o " + shell_quote(out("a.png").string()) + " --subsampling 444",
       "--subsampling", "JPEG"},
      {"equalize " + in + " -o " + shell_quote(out("a.jpg").string()) + " --png-level 3",
       "--png-level", "PNG"},
      {"equalize " + in + " -o " + shell_quote(out("a.png").string()) + " --kernel columns",
       "--kernel columns", "--backend cpu"},
      {"histogram " + in + " --kernel columns", "--kernel columns", "--backend cpu"},
      // a batch: every output is PNG, so --quality cannot act; --kernel on the CPU neither
      {"equalize " + in + " " + shell_quote(sample("camera.png")) + " -o " +
           shell_quote(out("many").string()) + " --quality 50",
       "--quality", "JPEG"},
      {"equalize " + in + " " + shell_quote(sample("camera.png")) + " -o " +
           shell_quote(out("many").string()) + " --kernel atomic",
       "--kernel atomic", "--backend cpu"},
      // batch-only options on one input file
      {"equalize " + in + " -o " + shell_quote(out("a.png").string()) + " --jobs 4", "--jobs",
       "batch"},
      {"clahe " + in + " -o " + shell_quote(out("a.png").string()) + " --devices 0", "--devices",
       "batch"},
      {"equalize " + in + " -o " + shell_quote(out("a.png").string()) + " --max-inflight-mb 64",
       "--max-inflight-mb", "batch"},
      {"histogram " + in + " --jobs 2", "--jobs", "batch"},
      {"kernels --type i32", "--type", "--details"},
      {"kernels --bins 64", "--bins", "--details"},
      {"kernels --size 1M", "--size", "--details"},
  };
  for (const Case& c : cases) {
    // A CPU-only build (HISTEQ_CUDA=OFF) has no registry kernel to name.
    if (histeq::kernels::registry().empty() && c.args.find("--kernel ") != std::string::npos) {
      continue;
    }
    const std::string args = c.args + (c.args.rfind("kernels", 0) == 0 ? "" : " --backend cpu");
    const Result r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << args << "\n" << r;
    EXPECT_NE(r.err.find(c.hint), std::string::npos) << args << "\n" << r;
    EXPECT_TRUE(out_files().empty()) << args;
  }
  // ... and act where they can: --quality on a JPEG output, --png-level on a PNG output.
  const Result q = run("equalize " + in + " -o " + shell_quote(out("q.jpg").string()) +
                       " --backend cpu --quality 50");
  EXPECT_EQ(q.status, 0) << q;
  const Result p = run("equalize " + in + " -o " + shell_quote(out("p.png").string()) +
                       " --backend cpu --png-level 9");
  EXPECT_EQ(p.status, 0) << p;
}

// A value cxxopts cannot read: the message names the option and its range, not only the value.
TEST_F(CliOptions, ParseErrorsNameTheOptionAndTheRange) {
  const std::string in =
      shell_quote(sample("coins.png")) + " -o " + shell_quote(out("a.png").string());
  struct Case {
    std::string args, names, range;
  };
  const std::vector<Case> cases = {
      {"equalize " + in + " --max-pixels -1", "--max-pixels", "1..18446744073709551615"},
      {"equalize " + in + " --max-pixels=-1", "--max-pixels", "1..18446744073709551615"},
      {"equalize " + in + " --jobs lots", "--jobs", "0..1024"},
      {"equalize " + in + " -q high", "--quality", "1..100"},
      {"equalize " + in + " -qhigh", "--quality", "1..100"},  // joined to the short option
      {"equalize " + in + " -q90x", "--quality", "1..100"},
      {"equalize " + in + " --png-level 12", "--png-level", "0..9"},
      {"equalize " + in + " --depth x", "--depth", "8 or 16"},
      {"clahe " + in + " --clip abc", "--clip", "a finite number"},
      // Numbers with anything after them, hexadecimal or with a suffix (cxxopts took "0x10" as
      // 16 for the whole-number options, and a stream read "2abc" as 2 for --clip).
      {"equalize " + in + " --max-pixels 1M", "--max-pixels", "1..18446744073709551615"},
      {"equalize " + in + " --max-pixels 100k", "--max-pixels", "1..18446744073709551615"},
      {"equalize " + in + " --max-pixels 0x100000", "--max-pixels", "1..18446744073709551615"},
      {"equalize " + in + " --max-pixels 1e6", "--max-pixels", "1..18446744073709551615"},
      {"equalize " + in + " --max-pixels ' 100000'", "--max-pixels", "1..18446744073709551615"},
      {"equalize " + in + " --max-inflight-mb 0x10", "--max-inflight-mb", "1..17592186044415"},
      {"equalize " + in + " --max-inflight-mb 64M", "--max-inflight-mb", "1..17592186044415"},
      {"equalize " + in + " --max-inflight-mb 64.5", "--max-inflight-mb", "1..17592186044415"},
      {"equalize " + in + " --jobs 0x2", "--jobs", "0..1024"},
      {"equalize " + in + " --jobs -1", "--jobs", "0..1024"},
      {"equalize " + in + " -q 0x5f", "--quality", "1..100"},
      {"equalize " + in + " --png-level 0x1", "--png-level", "0..9"},
      {"equalize " + in + " --depth 0x10", "--depth", "8 or 16"},
      {"clahe " + in + " --clip 0x10", "--clip", "a finite number"},
      {"clahe " + in + " --clip 2,5", "--clip", "a finite number"},
      {"clahe " + in + " --clip 2abc", "--clip", "a finite number"},
      {"kernels --details --bins 0x40", "--bins", "1..4096"},
  };
  for (const Case& c : cases) {
    const bool kernels = c.args.rfind("kernels", 0) == 0;  // no --backend there
    const Result r = run(c.args + (kernels ? "" : " --backend cpu"));
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << c.args << "\n" << r;
    EXPECT_NE(r.err.find(c.range), std::string::npos) << c.args << "\n" << r;
    EXPECT_EQ(r.err.find("failed to parse"), std::string::npos) << c.args << "\n" << r;
    EXPECT_TRUE(out_files().empty()) << c.args;
  }
  // --devices: decimal ordinals only (strtol also took " 1" and "+1").
  for (const char* d : {"' 0'", "+0", "0x0", "0,", "0,,1", "1a"}) {
    const Result r = run("equalize " + shell_quote(sample("coins.png")) + " " +
                         shell_quote(sample("camera.png")) + " -o " +
                         shell_quote(out("many").string()) + " --backend cpu --devices " + d);
    EXPECT_EQ(r.status, 2) << d << "\n" << r;
    EXPECT_NE(r.err.find("--devices takes CUDA device ordinals"), std::string::npos) << d << r;
  }
}

// The pixel limit's error names the option that sets it, for one file and in a batch.
TEST_F(CliOptions, PixelLimitErrorNamesMaxPixels) {
  const Result one = run("equalize " + shell_quote(sample("coins.png")) + " -o " +
                         shell_quote(out("a.png").string()) + " --backend cpu --max-pixels 100");
  EXPECT_EQ(one.status, 1) << one;
  EXPECT_NE(one.err.find("over the limit of 100 pixels"), std::string::npos) << one;
  EXPECT_NE(one.err.find("--max-pixels"), std::string::npos) << one;
  const Result batch =
      run("equalize " + shell_quote(sample("coins.png")) + " " + shell_quote(sample("camera.png")) +
          " -o " + shell_quote(out("b").string()) + " --backend cpu --max-pixels 100 --json");
  EXPECT_EQ(batch.status, 1) << batch;
  EXPECT_EQ(count_of(batch.err, "--max-pixels"), 2u) << batch;
  const std::vector<std::string> lines = lines_of(batch.out);
  ASSERT_EQ(lines.size(), 3u) << batch;
  EXPECT_NE(nlohmann::json::parse(lines[0])["error"].get<std::string>().find("--max-pixels"),
            std::string::npos)
      << batch;
}

// `histeq help CMD` prints exactly what `histeq CMD --help` prints, for every command.
TEST_F(CliOptions, HelpCommandIsCommandHelp) {
  for (const char* cmd : {"equalize", "clahe", "histogram", "kernels", "bench", "lesson"}) {
    const Result a = run(std::string("help ") + cmd);
    const Result b = run(std::string(cmd) + " --help");
    EXPECT_EQ(a.status, 0) << cmd << "\n" << a;
    EXPECT_EQ(a.out, b.out) << cmd;
    EXPECT_NE(a.out, run("--help").out) << cmd << ": not the general help";
  }
}

}  // namespace issue13
