// test_cli_jpeg.cpp — `histeq equalize` with JPEG files end to end (the built tool, HISTEQ_CLI):
// a rotated phone photo comes out upright with its EXIF (orientation 1) and ICC profile; a gray
// JPEG stays 1 channel (in the report and in the file); --subsampling; --decoder; the report
// names the decoder; a gray JPEG equalized on the CPU equals the equalization of libjpeg-turbo's
// decode (which test_host_jpeg checks equal to djpeg's, i.e. OpenCV's imread).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/pipeline.hpp"
#include "jpeg_test_support.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

using histeq::test::Result;

using test::Bytes;

class CliJpeg : public test::TempDirTest {
 protected:
  CliJpeg() : TempDirTest("histeq-cli-jpeg") {}
  static std::string q(const std::string& s) { return "'" + s + "'"; }
  static std::string slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  Result run(const std::string& args) {
    const std::string o = path("stdout.txt"), e = path("stderr.txt");
    const int raw = std::system((q(HISTEQ_CLI) + " " + args + " >" + q(o) + " 2>" + q(e)).c_str());
    Result r;
    r.status = (raw != -1 && WIFEXITED(raw)) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(o);
    r.err = slurp(e);
    return r;
  }
  void write(const std::string& name, const Bytes& b) {
    std::ofstream(path(name), std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  }
  Bytes read(const std::string& name) {
    const std::string s = slurp(path(name));
    return Bytes(s.begin(), s.end());
  }
};

std::ostream& operator<<(std::ostream& o, const Result& r) {
  return o << "status " << r.status << "\nstdout: " << r.out << "\nstderr: " << r.err;
}

TEST_F(CliJpeg, RotatedPhotoComesOutUprightWithItsMetadata) {
  Image img = test::pattern(64, 32, 3);
  img.exif = {'E',  'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12,
              0x01, 3,   0,   1,   0, 0, 0,   6,   0,  0, 0, 0, 0, 0, 0};  // IFD0: Orientation 6
  img.icc.assign(700, 9);
  std::memcpy(&img.icc[16], "RGB ", 4);
  write("phone.jpg", jpeg::encode(img));
  const Result r2 = run("equalize " + q(path("phone.jpg")) + " -o " + q(path("out.jpg")) +
                        " --backend cpu --json");
  ASSERT_EQ(r2.status, 0) << r2;
  EXPECT_NE(r2.out.find("\"width\":32,\"height\":64"), std::string::npos) << r2;
  // its stored planes, turned (64 x 32 in whole 4:2:0 chroma samples)
  EXPECT_NE(r2.out.find("\"decoder\":\"libjpeg-turbo-ycbcr\""), std::string::npos) << r2;
  EXPECT_NE(r2.out.find("\"encoder\":\"libjpeg-turbo-ycbcr\""), std::string::npos) << r2;
  const Bytes o = read("out.jpg");
  const jpeg::Info info = jpeg::read_info(o.data(), o.size(), "out.jpg");
  EXPECT_EQ(info.width, 32);
  EXPECT_EQ(info.height, 64);
  EXPECT_EQ(info.orientation, 1);
  EXPECT_EQ(info.subsampling, "4:2:0");
  const Image back = jpeg::decode(o.data(), o.size(), "out.jpg");
  EXPECT_TRUE(back.icc == img.icc);
  EXPECT_FALSE(back.exif.empty());
}

TEST_F(CliJpeg, GrayJpegStaysOneChannelAndSubsamplingOption) {
  write("g.jpg", jpeg::encode(test::pattern(40, 30, 1)));
  Result r =
      run("equalize " + q(path("g.jpg")) + " -o " + q(path("g-eq.jpg")) + " --backend cpu --json");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_NE(r.out.find("\"channels\":1,\"output_channels\":1"), std::string::npos) << r;
  Bytes o = read("g-eq.jpg");
  EXPECT_EQ(jpeg::read_info(o.data(), o.size(), "g").components, 1);
  // Text report names the decoder for JPEG inputs.
  r = run("equalize " + q(path("g.jpg")) + " -o " + q(path("g2.png")) + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_NE(r.out.find("decoder libjpeg-turbo"), std::string::npos) << r;

  write("c.jpg", jpeg::encode(test::pattern(48, 32, 3)));
  r = run("equalize " + q(path("c.jpg")) + " -o " + q(path("c444.jpg")) +
          " --backend cpu --subsampling 444");
  ASSERT_EQ(r.status, 0) << r;
  o = read("c444.jpg");
  EXPECT_EQ(jpeg::read_info(o.data(), o.size(), "c").subsampling, "4:4:4");
  r = run("equalize " + q(path("c.jpg")) + " -o " + q(path("x.jpg")) +
          " --backend cpu --subsampling 411");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("444, 422, 420"), std::string::npos) << r;
  r = run("equalize " + q(path("c.jpg")) + " -o " + q(path("x.jpg")) + " --decoder fast");
  EXPECT_EQ(r.status, 2) << r;
  // --decoder gpu with --backend cpu: a usage error, nvJPEG built or not (as in a batch).
  r = run("equalize " + q(path("c.jpg")) + " -o " + q(path("x.jpg")) +
          " --backend cpu --decoder gpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("--decoder gpu"), std::string::npos) << r;
  EXPECT_NE(r.err.find(gpu::nvjpeg_built() ? "not --backend cpu" : "without nvJPEG"),
            std::string::npos)
      << r;
}

// --decoder gpu on a folder where no CUDA device is usable: one error before any file (as
// --backend cuda's), naming the option and the device's trouble, and no output; not an error
// per file followed by "ran on the CPU".
TEST_F(CliJpeg, GpuDecoderOnAFolderWithoutADeviceIsOneErrorBeforeAnyFile) {
  if (!gpu::nvjpeg_built()) GTEST_SKIP() << "built without nvJPEG: --decoder gpu is a usage error";
  if (test::gpu_available(nullptr)) GTEST_SKIP() << "a CUDA device is usable here";
  std::filesystem::create_directories(path("in"));
  write("in/a.jpg", jpeg::encode(test::pattern(48, 32, 3)));
  write("in/b.jpg", jpeg::encode(test::pattern(40, 24, 3)));
  for (const char* cmd : {"equalize", "match"}) {
    SCOPED_TRACE(cmd);
    const std::string out = path(std::string("out-") + cmd);
    const Result r =
        run(std::string(cmd) + " " + q(path("in")) + " -o " + q(out) +
            (std::string(cmd) == "match" ? " --reference " + q(path("in/a.jpg")) : "") +
            " --decoder gpu");
    EXPECT_EQ(r.status, 1) << r;
    EXPECT_NE(r.err.find("no usable CUDA device for GPU JPEG decoding"), std::string::npos) << r;
    EXPECT_NE(r.err.find("asked for by --decoder gpu"), std::string::npos) << r;
    EXPECT_EQ(r.err.find("a.jpg"), std::string::npos) << r;  // no file's error
    EXPECT_EQ(r.err.find("ran on the CPU"), std::string::npos) << r;
    EXPECT_FALSE(std::filesystem::exists(out + "/a.jpg")) << r;
  }
  // One file: the error alone, without a "running on the CPU" note before it.
  const Result one =
      run("equalize " + q(path("in/a.jpg")) + " -o " + q(path("one.png")) + " --decoder gpu");
  EXPECT_EQ(one.status, 1) << one;
  EXPECT_NE(
      one.err.find("--decoder gpu needs the CUDA backend, and there is no usable CUDA device ("),
      std::string::npos)
      << one;
  EXPECT_EQ(one.err.find("unknown reason"), std::string::npos) << one;  // the device's trouble
  EXPECT_EQ(one.err.find("running on the CPU"), std::string::npos) << one;
  EXPECT_FALSE(std::filesystem::exists(path("one.png"))) << one;
}

TEST_F(CliJpeg, GrayJpegEqualizedOnTheCpuEqualsEqualizingLibjpegsDecode) {
  const Bytes j = test::make_jpeg(test::pattern(97, 61, 1));
  write("in.jpg", j);
  const Result r =
      run("equalize " + q(path("in.jpg")) + " -o " + q(path("eq.png")) + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  EqualizeOptions opt;
  opt.backend = Backend::cpu;
  const Image want = equalize(jpeg::decode(j.data(), j.size(), "in.jpg"), opt);
  const Image got = load_image(path("eq.png"));
  EXPECT_EQ(got.channels, 1);
  EXPECT_TRUE(got.pixels == want.pixels);
}

TEST_F(CliJpeg, HubbleEqualsOpenCvsGoldenByteForByte) {
  // tests/data/golden-opencv-5.0/README.md: cv2.imread + equalizeHist of Y (luma mode).
  const Result r = run("equalize " + q(test::source_path("samples/hubble_deep_field.jpg")) +
                       " -o " + q(path("h.png")) + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  const Image got = load_image(path("h.png"));
  const Image want =
      load_image(test::source_path("tests/data/golden-opencv-5.0/hubble_deep_field.png"));
  ASSERT_EQ(got.width, want.width);
  ASSERT_EQ(got.channels, want.channels);
  int worst = 0;
  for (std::size_t i = 0; i < got.pixels.size(); ++i)
    worst = std::max(worst, std::abs(int(got.pixels[i]) - int(want.pixels[i])));
  EXPECT_EQ(worst, 0);  // measured: 0 (stb_image's decoder: 20)
}

TEST_F(CliJpeg, PngIccProfileIsKept) {
  Image img = test::pattern(20, 20, 3);
  img.icc.assign(900, 3);
  std::memcpy(&img.icc[16], "RGB ", 4);
  write("in.png", encode_image(img, ".png"));
  const Result r =
      run("equalize " + q(path("in.png")) + " -o " + q(path("out.png")) + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  const Bytes o = read("out.png");
  EXPECT_TRUE(png::read_iccp(o.data(), o.size()) == img.icc);
  // --mode gray: an RGB profile does not describe a gray image: dropped.
  const Result g = run("equalize " + q(path("in.png")) + " -o " + q(path("gray.png")) +
                       " --backend cpu --mode gray");
  ASSERT_EQ(g.status, 0) << g;
  const Bytes og = read("gray.png");
  EXPECT_TRUE(png::read_iccp(og.data(), og.size()).empty());
}

TEST_F(CliJpeg, VersionListsTheCodecs) {
  const Result r = run("--version");
  ASSERT_EQ(r.status, 0) << r;
  // By the names the reports give them (histeq/codec_names.hpp).
  for (const char* name : {"libjpeg-turbo", "libjpeg-turbo-ycbcr", "libdeflate-png", "isa-l-png",
                           "libspng", "histeq-pnm", "stb_image", "stb_image_write"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name << "\n" << r;
  EXPECT_EQ(r.out.find("nvjpeg-hw") != std::string::npos, gpu::nvjpeg_built()) << r;
}

}  // namespace
}  // namespace histeq
