// test_jpeg_gpu.cpp — gpu::JpegCodec (nvJPEG): decode within kMaxDiffFromLibjpeg of
// libjpeg-turbo's decode (the largest difference is printed, for docs/), the hardware and hybrid
// routes, per-image routing of a batch with unsupported images mixed in (progressive, CMYK,
// arithmetic, EXIF-rotated, truncated, 12-bit), and the encoder (gray 4:0:0, 4:4:4/4:2:2/4:2:0,
// metadata). Skips without nvJPEG in the build or without a usable GPU.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/pipeline.hpp"
#include "jpeg_test_support.hpp"
#include "support/device_buffer.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

using test::Bytes;
using test::make_jpeg;
using test::MakeOpts;
using test::pattern;

Image download(const gpu::DeviceImage& d) {
  Image img;
  img.width = d.width;
  img.height = d.height;
  img.channels = d.channels;
  img.pixels.resize(d.byte_count());
  if (!img.pixels.empty())
    EXPECT_EQ(cudaMemcpy(img.pixels.data(), d.pixels, img.pixels.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
  return img;
}

int max_diff(const Image& a, const Image& b) {
  EXPECT_EQ(a.pixels.size(), b.pixels.size());
  int m = 0;
  for (std::size_t i = 0; i < a.pixels.size() && i < b.pixels.size(); ++i)
    m = std::max(m, std::abs(int(a.pixels[i]) - int(b.pixels[i])));
  return m;
}

Bytes read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// Compares one nvJPEG-decoded image with libjpeg-turbo's decode of the same bytes.
void expect_close(const gpu::DeviceImage& d, const Bytes& j, const std::string& tag) {
  ASSERT_TRUE(d.error.empty()) << tag << ": " << d.error;
  const Image ref = jpeg::decode(j.data(), j.size(), tag);
  ASSERT_EQ(d.width, ref.width) << tag;
  ASSERT_EQ(d.height, ref.height) << tag;
  ASSERT_EQ(d.channels, ref.channels) << tag;
  const int diff = max_diff(download(d), ref);
  std::printf("[ measure  ] %-28s decoder %-14s %dx%dx%d  max |nvJPEG - libjpeg-turbo| = %d\n",
              tag.c_str(), d.decoder.c_str(), d.width, d.height, d.channels, diff);
  if (d.decoder == "libjpeg-turbo") EXPECT_EQ(diff, 0) << tag;
  EXPECT_LE(diff, gpu::kMaxDiffFromLibjpeg) << tag << " (" << d.decoder << ")";
}

TEST(JpegGpu, SamplesAndEverySamplingWithinTheBound) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::JpegCodec codec(nullptr);
  std::vector<Bytes> files;
  std::vector<std::string> tags;
  files.push_back(read_bytes(test::source_path("samples/hubble_deep_field.jpg")));
  tags.push_back("hubble_deep_field.jpg");
  const Image smooth = pattern(333, 217, 3);
  for (jpeg::Subsampling s :
       {jpeg::Subsampling::s444, jpeg::Subsampling::s422, jpeg::Subsampling::s420}) {
    files.push_back(jpeg::encode(smooth, {95, s}));
    tags.push_back(std::string("pattern-") + jpeg::to_string(s));
  }
  files.push_back(jpeg::encode(pattern(301, 199, 1)));
  tags.push_back("pattern-gray");
  std::vector<gpu::JpegInput> in;
  for (std::size_t i = 0; i < files.size(); ++i)
    in.push_back({files[i].data(), files[i].size(), tags[i]});
  const std::vector<gpu::DeviceImage> out = codec.decode(in);
  ASSERT_EQ(out.size(), in.size());
  const bool hw = codec.hardware_available();
  std::printf("[ measure  ] hardware decoder available: %s; handle flags: %s\n", hw ? "yes" : "no",
              codec.handle_flags().c_str());
  for (std::size_t i = 0; i < out.size(); ++i) {
    expect_close(out[i], files[i], tags[i]);
    if (out[i].channels == 3)
      EXPECT_EQ(out[i].decoder, hw ? "nvjpeg-hw" : "nvjpeg-hybrid") << tags[i];
    else
      EXPECT_EQ(out[i].decoder.rfind("nvjpeg-", 0), 0u) << tags[i] << ": " << out[i].decoder;
  }
}

TEST(JpegGpu, MeasureAFolderOfPhotos) {
  // The measurement behind kMaxDiffFromLibjpeg: HISTEQ_JPEG_DIR=folder of .jpg photos.
  HISTEQ_REQUIRE_NVJPEG();
  const char* dir = std::getenv("HISTEQ_JPEG_DIR");
  if (!dir) GTEST_SKIP() << "set HISTEQ_JPEG_DIR to a folder of JPEG photos to measure";
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string ext = e.path().extension().string();
    for (char& ch : ext) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (e.is_regular_file() && (ext == ".jpg" || ext == ".jpeg"))
      names.push_back(e.path().string());
  }
  std::sort(names.begin(), names.end());
  gpu::JpegCodec codec(nullptr);
  for (const std::string& n : names) {
    const Bytes b = read_bytes(n);
    const auto out = codec.decode({{b.data(), b.size(), n}});
    expect_close(out[0], b, std::filesystem::path(n).filename().string());
  }
  std::printf("[ measure  ] handle flags: %s\n", codec.handle_flags().c_str());
}

TEST(JpegGpu, HybridRouteWhenTheHardwareDecoderIsOff) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::JpegCodecOptions o;
  o.use_hardware = false;
  gpu::JpegCodec codec(nullptr, o);
  const Bytes base = jpeg::encode(pattern(128, 96, 3));
  MakeOpts p;
  p.progressive = true;
  const Bytes prog = make_jpeg(pattern(128, 96, 3), p);
  const auto out =
      codec.decode({{base.data(), base.size(), "base"}, {prog.data(), prog.size(), "prog"}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].decoder, "nvjpeg-hybrid");
  EXPECT_EQ(out[1].decoder, "nvjpeg-hybrid");
  expect_close(out[0], base, "hybrid-baseline");
  expect_close(out[1], prog, "hybrid-progressive");
}

TEST(JpegGpu, BatchWithUnsupportedImagesIsRoutedPerImage) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::JpegCodec codec(nullptr);
  std::vector<Bytes> f;
  std::vector<std::string> tag;
  auto add = [&](Bytes b, const char* t) {
    f.push_back(std::move(b));
    tag.push_back(t);
  };
  add(jpeg::encode(pattern(200, 120, 3)), "baseline-a");
  MakeOpts prog;
  prog.progressive = true;
  add(make_jpeg(pattern(160, 100, 3), prog), "progressive");
  Image cmyk = pattern(64, 48, 4);
  MakeOpts c;
  c.cmyk = true;
  add(make_jpeg(cmyk, c), "cmyk");
  MakeOpts a;
  a.arithmetic = true;
  add(make_jpeg(pattern(80, 64, 3), a), "arithmetic");
  add(jpeg::encode(pattern(90, 70, 1)), "baseline-gray");
  Bytes cut = jpeg::encode(pattern(200, 120, 3));
  cut.resize(cut.size() * 2 / 3);
  add(cut, "truncated");
  Bytes deep = jpeg::encode(pattern(16, 16, 1));
  for (std::size_t i = 2; i + 4 < deep.size(); ++i)
    if (deep[i] == 0xFF && deep[i + 1] == 0xC0) {
      deep[i + 4] = 12;
      break;
    }
  add(deep, "12-bit");
  add(jpeg::encode(pattern(210, 130, 3), {90, jpeg::Subsampling::s444}), "baseline-b");

  std::vector<gpu::JpegInput> in;
  for (std::size_t i = 0; i < f.size(); ++i)
    in.push_back({f[i].data(), f[i].size(), tag[i] + ".jpg"});
  const auto out = codec.decode(in);
  ASSERT_EQ(out.size(), f.size());
  const std::string gpu_baseline = codec.hardware_available() ? "nvjpeg-hw" : "nvjpeg-hybrid";
  for (std::size_t i = 0; i < out.size(); ++i) {
    SCOPED_TRACE(tag[i]);
    if (tag[i] == "truncated") {
      EXPECT_NE(out[i].error.find("truncated"), std::string::npos) << out[i].error;
      EXPECT_NE(out[i].error.find("truncated.jpg"), std::string::npos) << out[i].error;
      continue;
    }
    if (tag[i] == "12-bit") {
      EXPECT_NE(out[i].error.find("12-bit"), std::string::npos) << out[i].error;
      continue;
    }
    if (tag[i] == "baseline-a" || tag[i] == "baseline-b") EXPECT_EQ(out[i].decoder, gpu_baseline);
    if (tag[i] == "baseline-gray")
      EXPECT_EQ(out[i].decoder.rfind("nvjpeg-", 0), 0u) << out[i].decoder;
    if (tag[i] == "progressive") EXPECT_EQ(out[i].decoder, "nvjpeg-hybrid");
    if (tag[i] == "cmyk" || tag[i] == "arithmetic") EXPECT_EQ(out[i].decoder, "libjpeg-turbo");
    expect_close(out[i], f[i], tag[i]);
  }
  // The codec is reused: a second, different batch decodes into the same buffers correctly.
  const auto again = codec.decode({in[4], in[0]});
  expect_close(again[0], f[4], "again-gray");
  expect_close(again[1], f[0], "again-baseline");
}

TEST(JpegGpu, ScansWithoutTheirHuffmanTablesGoToLibjpegTurbo) {
  // libjpeg-turbo decodes them with T.81's standard tables (defined pixels); nvJPEG is not asked.
  HISTEQ_REQUIRE_NVJPEG();
  gpu::JpegCodec codec(nullptr);
  const Bytes with = make_jpeg(pattern(64, 48, 3));  // libjpeg's standard tables
  const Bytes without = test::without_huffman_tables(with);
  const auto out = codec.decode(
      {{with.data(), with.size(), "with.jpg"}, {without.data(), without.size(), "without.jpg"}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].error.empty()) << out[0].error;
  EXPECT_EQ(out[0].decoder.rfind("nvjpeg-", 0), 0u) << out[0].decoder;
  EXPECT_TRUE(out[1].error.empty()) << out[1].error;
  EXPECT_EQ(out[1].decoder, "libjpeg-turbo");
}

TEST(JpegGpu, FilesFailingTheStructureChecksNeverReachNvjpeg) {
  // jpeg::read_info, the route's gate, refuses a JPEG whose structure cannot give every pixel;
  // the file goes to the CPU decoder, which refuses it with the reason (issue 12). Before, each
  // of these passed read_info (it read only up to the SOF) and went to nvJPEG.
  HISTEQ_REQUIRE_NVJPEG();
  gpu::JpegCodec codec(nullptr);
  MakeOpts two;
  two.scans = {test::scan({0, 1}, 0, 63), test::scan({2}, 0, 63)};
  MakeOpts prog;
  prog.scans = {test::scan({0, 1}, 0, 0), test::scan({2}, 0, 0), test::scan({0}, 1, 63),
                test::scan({1}, 1, 63), test::scan({2}, 1, 63)};
  auto drop_cr = [](const test::JpegPiece& p) {
    return std::find(p.scan_ids.begin(), p.scan_ids.end(), 3) != p.scan_ids.end();
  };
  Bytes tiny = jpeg::encode(pattern(16, 16, 1));  // its SOF made to say 16384x16384
  for (std::size_t i = 2; i + 8 < tiny.size(); ++i)
    if (tiny[i] == 0xFF && tiny[i + 1] == 0xC0) {
      tiny[i + 5] = tiny[i + 7] = 0x40;
      tiny[i + 6] = tiny[i + 8] = 0x00;
      break;
    }
  const std::vector<std::pair<Bytes, std::string>> files{
      {test::without_scans(make_jpeg(pattern(64, 48, 3), two), drop_cr),
       "component 3 (id 3) is never covered by a scan"},
      {test::without_scans(make_jpeg(pattern(64, 48, 3), prog), drop_cr),
       "component 3 (id 3) is never covered by a scan"},
      {test::without_scans(jpeg::encode(pattern(64, 48, 3)),
                           [](const test::JpegPiece&) { return true; }),
       "SOS"},
      {tiny, "declares 16384x16384"},
      {jpeg::encode(pattern(64, 48, 3)), ""}};
  std::vector<gpu::JpegInput> in;
  for (std::size_t i = 0; i < files.size(); ++i)
    in.push_back({files[i].first.data(), files[i].first.size(), "s" + std::to_string(i) + ".jpg"});
  const auto out = codec.decode(in);
  ASSERT_EQ(out.size(), files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    SCOPED_TRACE(in[i].name);
    if (files[i].second.empty()) {
      EXPECT_TRUE(out[i].error.empty()) << out[i].error;
      EXPECT_EQ(out[i].decoder.rfind("nvjpeg-", 0), 0u) << out[i].decoder;
      continue;
    }
    EXPECT_EQ(out[i].decoder.find("nvjpeg"), std::string::npos) << out[i].decoder;
    EXPECT_NE(out[i].error.find("'" + in[i].name + "'"), std::string::npos) << out[i].error;
    EXPECT_NE(out[i].error.find(files[i].second), std::string::npos) << out[i].error;
  }
}

TEST(JpegGpu, RotatedPhotoGoesToTheCpuDecoderAndIsUpright) {
  HISTEQ_REQUIRE_NVJPEG();
  Image img = pattern(64, 32, 3);
  img.exif = {'E',  'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12,
              0x01, 3,   0,   1,   0, 0, 0,   6,   0,  0, 0, 0, 0, 0, 0};  // IFD0: Orientation 6
  const Bytes j = jpeg::encode(img);
  gpu::JpegCodec codec(nullptr);
  std::string decoder;
  const Image shown = codec.decode_to_host({j.data(), j.size(), "rot.jpg"}, &decoder);
  EXPECT_EQ(decoder, "libjpeg-turbo");
  EXPECT_EQ(shown.width, 32);
  EXPECT_EQ(shown.height, 64);
  EXPECT_EQ(jpeg::exif_orientation(shown.exif), 1);
}

TEST(JpegGpu, EncodeRoundTrip) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::JpegCodec codec(nullptr);
  Image rgb = pattern(257, 129, 3);
  rgb.icc.assign(600, 7);
  std::memcpy(&rgb.icc[16], "RGB ", 4);
  rgb.exif = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0};
  const struct {
    jpeg::Subsampling s;
    const char* name;
  } cases[] = {{jpeg::Subsampling::s444, "4:4:4"},
               {jpeg::Subsampling::s422, "4:2:2"},
               {jpeg::Subsampling::s420, "4:2:0"}};
  for (const auto& cs : cases) {
    const Bytes j = codec.encode(rgb, {95, cs.s});
    const jpeg::Info info = jpeg::read_info(j.data(), j.size(), "enc");
    EXPECT_EQ(info.components, 3);
    EXPECT_EQ(info.subsampling, cs.name);
    const Image back = jpeg::decode(j.data(), j.size(), "enc");
    EXPECT_TRUE(back.icc == rgb.icc);
    EXPECT_TRUE(back.exif == rgb.exif);
    const int d = max_diff(back, Image{rgb.width, rgb.height, 3, rgb.pixels, {}, {}});
    std::printf("[ measure  ] nvJPEG encode q95 %s: max |decoded - original| = %d, %zu bytes\n",
                cs.name, d, j.size());
    // Same size of error as libjpeg's own encoder at q95 on this image (+ a margin of 50 %).
    const Bytes lj = jpeg::encode(rgb, {95, cs.s});
    const int dl = max_diff(jpeg::decode(lj.data(), lj.size(), "lj"),
                            Image{rgb.width, rgb.height, 3, rgb.pixels, {}, {}});
    EXPECT_LE(d, dl + dl / 2 + 2) << cs.name << " libjpeg: " << dl;
  }
  const Image gray = pattern(100, 60, 1);
  const Bytes jg = codec.encode(gray, {95});
  EXPECT_EQ(jpeg::read_info(jg.data(), jg.size(), "g").components, 1);
  const Image gback = jpeg::decode(jg.data(), jg.size(), "g");
  EXPECT_EQ(gback.channels, 1);
  EXPECT_THROW(codec.encode(gray, {0}), UsageError);
}

TEST(JpegGpu, EqualizeOnDeviceEqualsTheHostPipelineOnTheSameDecode) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::Equalizer eq;
  gpu::JpegCodec codec(eq.stream());
  const Bytes files[] = {read_bytes(test::source_path("samples/hubble_deep_field.jpg")),
                         jpeg::encode(pattern(321, 123, 1))};
  for (const Bytes& f : files) {
    for (Mode mode : {Mode::luma, Mode::rgb, Mode::gray}) {
      const auto dec = codec.decode({{f.data(), f.size(), "x.jpg"}});
      ASSERT_TRUE(dec[0].error.empty()) << dec[0].error;
      const Image host = download(dec[0]);
      EqualizeOptions opt;
      opt.backend = Backend::cuda;
      opt.mode = mode;
      EqualizeReport want_rep, got_rep;
      const Image want = equalize(host, opt, &want_rep);
      DeviceBuffer<std::uint8_t> d_out(want.byte_count());
      gpu::equalize_on_device(eq, dec[0], opt, d_out.get(), &got_rep);
      Image got = want;
      ASSERT_EQ(
          cudaMemcpy(got.pixels.data(), d_out.get(), got.pixels.size(), cudaMemcpyDeviceToHost),
          cudaSuccess);
      EXPECT_TRUE(got.pixels == want.pixels) << "mode " << to_string(mode);
      EXPECT_EQ(got_rep.histograms, want_rep.histograms);
      EXPECT_EQ(got_rep.kernel, want_rep.kernel);
    }
  }
  // The whole JPEG → JPEG path: the output decodes to the equalized image (within JPEG loss).
  jpeg::EncodeOptions enc;
  const gpu::JpegOnDevice r = gpu::equalize_jpeg_on_device(
      eq, codec, {files[0].data(), files[0].size(), "hubble.jpg"}, EqualizeOptions{}, enc);
  EXPECT_EQ(r.width, 1000);
  EXPECT_EQ(r.out_channels, 3);
  const jpeg::Info info = jpeg::read_info(r.bytes.data(), r.bytes.size(), "out");
  EXPECT_EQ(info.subsampling, "4:2:0");
  EXPECT_EQ(info.width, r.width);
}

}  // namespace
}  // namespace histeq
