// test_jpeg_planes_gpu.cpp — the device's stored-planes route for JPEGs: the chroma averaged down
// on the device equals jpeg::average_down byte for byte; the hardware decoder's planes against
// libjpeg-turbo's (the largest difference is printed, for docs/benchmarks.md); the files it
// declines; the route's output against the CPU's stored-planes route; and the executor's device
// route (started by a run large enough for it) writing what the single-file GPU path writes.
// Skips without nvJPEG in the build or without a usable GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "equalize/chroma.hpp"
#include "histeq/executor.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/jpeg_planes.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/pipeline.hpp"
#include "jpeg_test_support.hpp"
#include "support/device_buffer.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

namespace fs = std::filesystem;
using test::Bytes;
using test::make_jpeg;
using test::MakeOpts;
using test::pattern;

std::vector<std::uint8_t> to_host(const std::uint8_t* d, std::size_t n) {
  std::vector<std::uint8_t> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

/// A plane of libjpeg's (rows `stride` apart) without its padding.
std::vector<std::uint8_t> unpadded(const jpeg::Plane& p) {
  std::vector<std::uint8_t> v;
  for (int y = 0; y < p.height; ++y) v.insert(v.end(), p.row(y), p.row(y) + p.width);
  return v;
}

int max_diff(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  int m = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::abs(int(a[i]) - int(b[i])));
  return m;
}

TEST(JpegPlanesGpu, AverageDownEqualsTheCpuByteForByte) {
  HISTEQ_REQUIRE_NVJPEG();
  const int sizes[][2] = {{1, 1}, {2, 2}, {3, 5}, {17, 9}, {64, 33}, {333, 217}, {1000, 1}};
  const int factors[][2] = {{1, 1}, {2, 1}, {1, 2}, {2, 2}};
  for (const auto& sz : sizes) {
    const Image img = pattern(sz[0], sz[1], 1, unsigned(sz[0] * 7 + sz[1]));
    jpeg::Plane src;
    src.width = sz[0];
    src.height = sz[1];
    src.stride = std::size_t(sz[0]);
    src.rows = sz[1];
    src.data.reset(new std::uint8_t[img.pixels.size()]);
    std::copy(img.pixels.begin(), img.pixels.end(), src.data.get());
    DeviceBuffer<std::uint8_t> d_src(img.pixels.size());
    ASSERT_EQ(cudaMemcpy(d_src.get(), img.pixels.data(), img.pixels.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    for (const auto& f : factors) {
      jpeg::Plane want;
      jpeg::average_down(src, f[0], f[1], &want);
      const std::size_t n = std::size_t(want.width) * std::size_t(want.height);
      DeviceBuffer<std::uint8_t> d_dst(n);
      kernels::launch_average_down(d_src.get(), sz[0], sz[1], std::size_t(sz[0]), f[0], f[1],
                                   d_dst.get(), std::size_t(want.width), nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(to_host(d_dst.get(), n), unpadded(want))
          << sz[0] << "x" << sz[1] << " by " << f[0] << "x" << f[1];
    }
  }
}

/// Test files: colour at 4:4:4, 4:2:2, 4:2:0 (odd sizes), gray, and the bundled photograph.
struct Sample {
  std::string tag;
  Bytes bytes;
};
std::vector<Sample> samples() {
  std::vector<Sample> v;
  const Image colour = pattern(333, 217, 3);
  for (auto [h, vv, tag] : {std::tuple{1, 1, "444"}, {2, 1, "422"}, {2, 2, "420"}}) {
    MakeOpts o;
    o.h_samp = h;
    o.v_samp = vv;
    v.push_back({std::string("pattern-") + tag, make_jpeg(colour, o)});
  }
  v.push_back({"pattern-gray", make_jpeg(pattern(301, 199, 1))});
  std::ifstream f(test::source_path("samples/hubble_deep_field.jpg"), std::ios::binary);
  v.push_back({"hubble_deep_field.jpg", Bytes((std::istreambuf_iterator<char>(f)), {})});
  return v;
}

TEST(JpegPlanesGpu, HardwarePlanesAgainstLibjpegTurbo) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::Equalizer eq;
  gpu::JpegCodec codec(eq.stream());
  if (!codec.hardware_available()) GTEST_SKIP() << "this GPU has no JPEG engine";
  const std::vector<Sample> files = samples();
  std::vector<gpu::JpegInput> in;
  for (const Sample& s : files) in.push_back({s.bytes.data(), s.bytes.size(), s.tag});
  const std::vector<gpu::DevicePlanes> got = codec.decode_planes(in);
  ASSERT_EQ(got.size(), files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    const gpu::DevicePlanes& p = got[i];
    ASSERT_FALSE(p.declined) << files[i].tag;
    const jpeg::Info info = jpeg::read_info(in[i].data, in[i].size, files[i].tag);
    EXPECT_EQ(p.width, info.width);
    EXPECT_EQ(p.height, info.height);
    EXPECT_EQ(p.components, info.components);
    std::vector<std::vector<std::uint8_t>> ref;
    if (info.components == 1) {
      ref.push_back(jpeg::decode(in[i].data, in[i].size, files[i].tag).pixels);
    } else {
      const jpeg::Planes lp = jpeg::decode_planes(in[i].data, in[i].size, files[i].tag);
      for (const jpeg::Plane& pl : lp.plane) ref.push_back(unpadded(pl));
    }
    for (int c = 0; c < p.components; ++c) {
      const std::size_t n = std::size_t(p.plane_width[c]) * std::size_t(p.plane_height[c]);
      ASSERT_EQ(n, ref[std::size_t(c)].size()) << files[i].tag << " plane " << c;
      const int d = max_diff(to_host(p.plane[c], n), ref[std::size_t(c)]);
      std::printf("[ measure  ] %-22s plane %d %4dx%-4d max |hardware - libjpeg-turbo| = %d\n",
                  files[i].tag.c_str(), c, p.plane_width[c], p.plane_height[c], d);
      EXPECT_LE(d, gpu::kMaxPlaneDiffFromLibjpeg) << files[i].tag << " plane " << c;
    }
  }
}

// encode_planes writes the same bytes whatever the addresses of the planes it is given: planes
// packed end to end after an image of odd size start at odd addresses, which nvjpegEncodeYUV
// refused (NVJPEG_STATUS_INVALID_PARAMETER); the codec copies such planes to aligned scratch.
TEST(JpegPlanesGpu, EncodePlanesTakesPlanesAtAnyAddress) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::Equalizer eq;
  gpu::JpegCodec codec(eq.stream());
  if (!codec.hardware_available()) GTEST_SKIP() << "this GPU has no JPEG engine";
  const std::vector<Sample> files = samples();
  for (const Sample& s : files) {
    const std::vector<gpu::DevicePlanes> dec =
        codec.decode_planes({{s.bytes.data(), s.bytes.size(), s.tag}});
    ASSERT_EQ(dec.size(), 1u);
    ASSERT_FALSE(dec[0].declined) << s.tag;
    const gpu::DevicePlanes p = dec[0];
    std::size_t total = 0;
    for (int c = 0; c < p.components; ++c)
      total += std::size_t(p.plane_width[c]) * std::size_t(p.plane_height[c]);
    // The reference: the planes where decode_planes put them (each on a 256-byte boundary).
    const std::vector<std::uint8_t> want =
        codec.encode_planes({p}, {95, jpeg::Subsampling::s420}).at(0);
    for (std::size_t shift : {std::size_t(0), std::size_t(1), std::size_t(64), std::size_t(255)}) {
      DeviceBuffer<std::uint8_t> buf(total + 3 * 256 + shift);
      gpu::DevicePlanes q = p;
      std::uint8_t* at = buf.get() + shift;
      for (int c = 0; c < p.components; ++c) {
        const std::size_t n = std::size_t(p.plane_width[c]) * std::size_t(p.plane_height[c]);
        // On the codec's stream: a cudaMemcpy between device buffers does not wait for its
        // end, and the codec's stream does not wait for the legacy default stream.
        ASSERT_EQ(cudaMemcpyAsync(at, p.plane[c], n, cudaMemcpyDeviceToDevice, eq.stream()),
                  cudaSuccess);
        q.plane[c] = at;
        at += n;  // end to end: the next plane starts wherever this one ends
      }
      const std::vector<std::vector<std::uint8_t>> got =
          codec.encode_planes({q}, {95, jpeg::Subsampling::s420});
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0], want) << s.tag << ", planes from offset " << shift;
    }
  }
}

// encode_planes with a few encoder states (JpegCodecOptions::encoder_states: the images of a
// call encoded that many at a time) writes, image for image, the bytes it writes with one state
// per image: a state reused within a call starts each image afresh. The batch mixes samplings
// (4:4:4 and 4:2:2 averaged down to the 4:2:0 output), gray and sizes, twice over, so every state
// is reused.
TEST(JpegPlanesGpu, EncodePlanesWritesTheSameBytesWithFewerStates) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::Equalizer eq;
  gpu::JpegCodec codec(eq.stream());
  if (!codec.hardware_available()) GTEST_SKIP() << "this GPU has no JPEG engine";
  const std::vector<Sample> files = samples();
  std::vector<gpu::JpegInput> in;
  for (int round = 0; round < 2; ++round)
    for (const Sample& s : files) in.push_back({s.bytes.data(), s.bytes.size(), s.tag});
  const std::vector<gpu::DevicePlanes> planes = codec.decode_planes(in);
  ASSERT_EQ(planes.size(), in.size());
  for (const gpu::DevicePlanes& p : planes) ASSERT_FALSE(p.declined);
  {
    const jpeg::Subsampling ss = jpeg::Subsampling::s420;  // (finer outputs need finer inputs)
    const std::vector<std::vector<std::uint8_t>> want = codec.encode_planes(planes, {95, ss});
    ASSERT_EQ(want.size(), in.size());
    for (const int states : {1, 2, 3, int(in.size()) + 1}) {
      gpu::JpegCodecOptions o;
      o.encoder_states = states;
      gpu::JpegCodec few(eq.stream(), o);  // on the decoder's stream: its planes are ready
      const std::vector<std::vector<std::uint8_t>> got = few.encode_planes(planes, {95, ss});
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_FALSE(got[i].empty());
        EXPECT_EQ(got[i], want[i]) << in[i].name << " (image " << i << "), " << states
                                   << " states, " << jpeg::to_string(ss);
      }
    }
  }
}

TEST(JpegPlanesGpu, FilesTheHardwareDoesNotTakeAreDeclined) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::JpegCodec codec(nullptr);
  if (!codec.hardware_available()) GTEST_SKIP() << "this GPU has no JPEG engine";
  const Image colour = pattern(96, 64, 3);
  MakeOpts prog;
  prog.progressive = true;
  MakeOpts s411;
  s411.h_samp = 4;
  s411.v_samp = 1;
  const Bytes good = make_jpeg(colour);
  const Bytes truncated(good.begin(), good.begin() + std::ptrdiff_t(good.size() * 2 / 3));
  const std::vector<Bytes> files = {make_jpeg(colour, prog), make_jpeg(colour, s411), truncated,
                                    good};
  std::vector<gpu::JpegInput> in;
  for (const Bytes& b : files) in.push_back({b.data(), b.size(), "f"});
  const std::vector<gpu::DevicePlanes> got = codec.decode_planes(in);
  EXPECT_TRUE(got[0].declined) << "progressive";
  EXPECT_TRUE(got[1].declined) << "4:1:1";
  EXPECT_TRUE(got[2].declined) << "truncated: the CPU decoder names it";
  EXPECT_FALSE(got[3].declined) << "baseline 4:2:0";
}

/// Mean absolute difference of two decoded images of the same shape.
double mean_abs(const Image& a, const Image& b) {
  EXPECT_EQ(a.pixels.size(), b.pixels.size());
  double s = 0;
  for (std::size_t i = 0; i < std::min(a.pixels.size(), b.pixels.size()); ++i)
    s += std::abs(int(a.pixels[i]) - int(b.pixels[i]));
  return a.pixels.empty() ? 0 : s / double(a.pixels.size());
}

TEST(JpegPlanesGpu, TheRouteAgainstTheCpuStoredPlanesRoute) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::Equalizer eq;
  gpu::JpegCodec codec(eq.stream());
  if (!codec.hardware_available()) GTEST_SKIP() << "this GPU has no JPEG engine";
  EqualizeOptions opt;
  opt.backend = Backend::cuda;
  for (const Sample& s : samples()) {
    for (jpeg::Subsampling out : {jpeg::Subsampling::s420, jpeg::Subsampling::s444}) {
      const jpeg::EncodeOptions enc{95, out};
      const jpeg::Info info = jpeg::read_info(s.bytes.data(), s.bytes.size(), s.tag);
      if (info.components == 3 && !jpeg::planes_route(info, enc, jpeg::Orientation::apply))
        continue;  // the output would need finer chroma than the file holds
      const gpu::JpegOnDevice d = gpu::equalize_jpeg_on_device(
          eq, codec, {s.bytes.data(), s.bytes.size(), s.tag}, opt, enc);
      EXPECT_EQ(d.decoder, "nvjpeg-hw") << s.tag;
      std::vector<std::uint8_t> cpu;
      if (info.components == 3) {
        ASSERT_TRUE(equalize_jpeg_planes(s.bytes.data(), s.bytes.size(), s.tag, EqualizeOptions{},
                                         enc, kDefaultMaxPixels, &cpu, nullptr, nullptr, nullptr));
      } else {
        EqualizeOptions c;
        c.backend = Backend::cpu;
        cpu = jpeg::encode(equalize(jpeg::decode(s.bytes.data(), s.bytes.size(), s.tag), c), enc);
      }
      const Image a = jpeg::decode(d.bytes.data(), d.bytes.size(), "device");
      const Image b = jpeg::decode(cpu.data(), cpu.size(), "cpu");
      ASSERT_EQ(a.width, b.width);
      ASSERT_EQ(a.height, b.height);
      ASSERT_EQ(a.channels, b.channels);
      const double m = mean_abs(a, b);
      const double size_ratio = double(d.bytes.size()) / double(cpu.size());
      std::printf(
          "[ measure  ] %-22s out %s: mean |device - CPU route| = %.3f, size %.3f of the "
          "CPU route's\n",
          s.tag.c_str(), jpeg::to_string(out), m, size_ratio);
      EXPECT_LT(m, 1.5) << s.tag;
      EXPECT_GT(size_ratio, 0.8) << s.tag;
      EXPECT_LT(size_ratio, 1.25) << s.tag;
      // the metadata travels
      EXPECT_EQ(jpeg::decode(d.bytes.data(), d.bytes.size(), "x").exif,
                jpeg::decode(s.bytes.data(), s.bytes.size(), "x").exif);
    }
  }
}

// A run with more JPEG megapixels than one CPU worker finishes in about two seconds
// (kDeviceStartCpuS, at the router's assumed rate) starts the device route with --backend auto;
// what it writes equals the single-file GPU path's bytes, and what the CPU workers took equals the
// CPU's stored-planes route.
TEST(JpegPlanesGpu, AutoRunLargeEnoughStartsTheDeviceRoute) {
  HISTEQ_REQUIRE_NVJPEG();
  const fs::path dir =
      fs::temp_directory_path() / ("histeq-planes-gpu-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  std::vector<WorkItem> items;
  for (int k = 0; k < 20; ++k) {  // 20 x 6 MP, every fourth progressive
    MakeOpts o;
    o.h_samp = k % 3 == 0 ? 1 : 2;
    o.v_samp = k % 3 == 2 ? 2 : 1;
    o.progressive = k % 4 == 3;
    const Bytes b = make_jpeg(pattern(3000, 2000, 3, unsigned(k + 1)), o);
    const std::string name = "p" + std::to_string(k) + ".jpg";
    std::ofstream(dir / "in" / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
    items.push_back({(dir / "in" / name).string(), (dir / "out" / name).string(), ""});
  }
  ExecutorOptions o;
  o.jobs = 1;                 // the break-even is per CPU worker: 120 MP is over it for one
  o.router_measures = false;  // (at the assumed rate: a fast worker would finish it sooner)
  // libjpeg-turbo's coefficients for the progressive files, whose planes are the CPU route's
  // (nvJPEG's hybrid decoder, the default, differs by a level: test_jpeg_hybrid_gpu)
  o.progressive = ProgressiveJpeg::libjpeg;
  Executor ex(o);
  std::vector<ItemReport> reps;
  const BatchSummary s = ex.run(items, [&](const ItemReport& r) { reps.push_back(r); });
  ASSERT_TRUE(s.device_started) << s.device_note;
  ASSERT_EQ(reps.size(), items.size());
  gpu::Equalizer eq;
  gpu::JpegCodec codec(eq.stream());
  std::size_t on_device = 0, split = 0, split_coefficients = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const ItemReport& r = reps[i];
    ASSERT_TRUE(r.ok) << r.error;
    std::ifstream f(items[i].input, std::ios::binary);
    const Bytes in((std::istreambuf_iterator<char>(f)), {});
    std::ifstream g(items[i].output, std::ios::binary);
    const Bytes got((std::istreambuf_iterator<char>(g)), {});
    std::vector<std::uint8_t> want;
    if (r.route == "jpeg-device") {
      ++on_device;
      EqualizeOptions eo;
      eo.backend = Backend::cuda;
      want = gpu::equalize_jpeg_on_device(eq, codec, {in.data(), in.size(), items[i].input}, eo,
                                          {95, jpeg::Subsampling::s420})
                 .bytes;
      EXPECT_EQ(got, want) << items[i].input << " (" << r.route << ")";
      continue;
    }
    EXPECT_EQ(r.route, "jpeg-planes");
    // the planes on the CPU, or (split to the device) a progressive file's coefficients there
    // and its inverse DCT on the device (the same samples)
    const bool progressive = i % 4 == 3;
    const bool coefficients = r.decoder == "libjpeg-turbo-coefficients";
    EXPECT_TRUE(r.decoder == "libjpeg-turbo-ycbcr" || coefficients) << r.decoder;
    if (coefficients) EXPECT_EQ(r.encoder, "nvjpeg") << items[i].input;
    if (r.encoder == "nvjpeg") EXPECT_EQ(coefficients, progressive) << items[i].input;
    split_coefficients += coefficients ? 1 : 0;
    ASSERT_TRUE(equalize_jpeg_planes(in.data(), in.size(), items[i].input, EqualizeOptions{},
                                     {95, jpeg::Subsampling::s420}, kDefaultMaxPixels, &want,
                                     nullptr, nullptr, nullptr));
    if (r.encoder == "libjpeg-turbo-ycbcr") {  // all on the CPU
      EXPECT_EQ(got, want) << items[i].input;
      continue;
    }
    // The CPU decoded the planes, the device equalized and encoded them (nvJPEG's encoder):
    // the CPU route's pixels up to the two encoders' rounding.
    ++split;
    EXPECT_EQ(r.encoder, "nvjpeg") << items[i].input;
    const Image a = jpeg::decode(got.data(), got.size(), "split");
    const Image b = jpeg::decode(want.data(), want.size(), "cpu");
    ASSERT_EQ(a.pixels.size(), b.pixels.size());
    EXPECT_LT(mean_abs(a, b), 1.5) << items[i].input;
    const double ratio = double(got.size()) / double(want.size());
    EXPECT_GT(ratio, 0.8) << items[i].input;
    EXPECT_LT(ratio, 1.25) << items[i].input;
  }
  std::printf(
      "[ measure  ] %zu of %zu files on the device route, %zu decoded on the CPU and "
      "encoded on the device (%zu of them progressive, their inverse DCT there too); device "
      "ready after %.0f ms\n",
      on_device, items.size(), split, split_coefficients, s.device_init_ms);
  EXPECT_EQ(s.routes.count("jpeg-device") ? s.routes.at("jpeg-device").files : 0u, on_device);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace histeq
