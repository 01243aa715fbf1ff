// test_executor_jpeg_gpu.cpp — JPEG items in the executor (histeq/executor.hpp, JpegRoute):
// on the CPU, the route options and the per-decoder counts; on the GPU (skipped without one or
// without nvJPEG), the nvJPEG route (batched decode, equalize and encode on the device) writes the
// same bytes as the single-file GPU path (gpu::equalize_jpeg_on_device) for every kind of input
// (hardware-decodable, progressive → hybrid, gray, 4:4:4, odd sizes, CMYK → CPU fallback), and a
// PNG output of a JPEG input equals the single-file GPU decode + equalize + PNG encode.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/executor.hpp"
#include "histeq/gpu.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_planes.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/pipeline.hpp"
#include "jpeg_test_support.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace histeq;

namespace {

std::vector<std::uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& b) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

class ExecutorJpeg : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "histeq-exjpeg-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "in");
    auto add = [&](const std::string& name, const std::vector<std::uint8_t>& b) {
      write_bytes(dir_ / "in" / name, b);
      inputs_.push_back((dir_ / "in" / name).string());
    };
    test::MakeOpts base;
    add("rgb420.jpg", test::make_jpeg(test::pattern(640, 480, 3, 1), base));
    add("gray.jpg", test::make_jpeg(test::pattern(300, 200, 1, 2), base));
    test::MakeOpts prog = base;
    prog.progressive = true;
    add("progressive.jpg", test::make_jpeg(test::pattern(400, 300, 3, 3), prog));
    test::MakeOpts s444 = base;
    s444.h_samp = s444.v_samp = 1;
    add("rgb444_odd.jpg", test::make_jpeg(test::pattern(333, 211, 3, 4), s444));
    test::MakeOpts cmyk = base;
    cmyk.cmyk = true;
    add("cmyk.jpg", test::make_jpeg(test::pattern(160, 120, 4, 5), cmyk));
    add("rgb420_b.jpg", test::make_jpeg(test::pattern(1024, 768, 3, 6), base));
    inputs_.push_back(test::source_path("samples/hubble_deep_field.jpg"));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::vector<WorkItem> items(const std::string& sub, const std::string& ext) {
    fs::create_directories(dir_ / sub);
    std::vector<WorkItem> v;
    for (const std::string& in : inputs_) {
      WorkItem w;
      w.input = in;
      w.output = (dir_ / sub / fs::path(in).filename().replace_extension(ext)).string();
      v.push_back(w);
    }
    return v;
  }
  fs::path dir_;
  std::vector<std::string> inputs_;
};

TEST_F(ExecutorJpeg, CpuRouteCountsDecodersAndRefusesGpuWithoutTheCudaBackend) {
  ExecutorOptions o;
  o.op.equalize.backend = Backend::cpu;
  o.jobs = 2;
  o.jpeg = JpegRoute::cpu;
  Executor ex(o);
  const auto its = items("cpu", ".jpg");
  std::size_t ok = 0;
  const BatchSummary s = ex.run(its, [&](const ItemReport& r) {
    if (!r.ok) return;  // CMYK is refused by the equalizer or decoded: either way counted below
    ++ok;
    // colour files in the YCbCr planes (jpeg_planes.hpp), gray and CMYK ones decoded to pixels
    EXPECT_TRUE(r.decoder == "libjpeg-turbo" || r.decoder == "libjpeg-turbo-ycbcr") << r.input;
    EXPECT_EQ(r.encoder, r.decoder) << r.input;
  });
  std::size_t counted = 0;
  for (const auto& [name, n] : s.decoders) counted += n;
  EXPECT_EQ(counted, ok);
  const auto count = [&](const char* name) {
    return s.decoders.count(name) ? s.decoders.at(name) : std::size_t(0);
  };
  EXPECT_EQ(count("libjpeg-turbo") + count("libjpeg-turbo-ycbcr"), ok);
  EXPECT_GT(count("libjpeg-turbo-ycbcr"), 0u);

  ExecutorOptions g;
  g.op.equalize.backend = Backend::cpu;
  g.jpeg = JpegRoute::gpu;
  EXPECT_THROW(Executor{g}, UsageError);  // no nvJPEG build, or the CPU backend: both refused
  g.op.equalize.backend = Backend::automatic;
  g.jpeg_batch = 0;
  EXPECT_THROW(Executor{g}, UsageError);
}

TEST_F(ExecutorJpeg, GpuRouteWritesTheSingleFileGpuBytes) {
  HISTEQ_REQUIRE_GPU();
  if (!gpu::nvjpeg_built()) GTEST_SKIP() << "built without nvJPEG";
  for (int batch : {1, 4}) {
    ExecutorOptions o;
    o.op.equalize.backend = Backend::cuda;
    o.jpeg = JpegRoute::gpu;
    o.jobs = 4;
    o.jpeg_batch = batch;
    Executor ex(o);
    const auto its = items("gpu" + std::to_string(batch), ".jpg");
    std::vector<ItemReport> reps;
    const BatchSummary s = ex.run(its, [&](const ItemReport& r) { reps.push_back(r); });
    ASSERT_EQ(reps.size(), its.size());
    EXPECT_GT(s.nvjpeg_init_ms, 0.0);
    gpu::Equalizer eq;
    gpu::JpegCodec codec(eq.stream());
    EqualizeOptions eo;
    eo.backend = Backend::cuda;
    for (std::size_t i = 0; i < its.size(); ++i) {
      const auto in = read_bytes(its[i].input);
      std::string why;
      gpu::JpegOnDevice ref;
      try {
        ref = gpu::equalize_jpeg_on_device(eq, codec, {in.data(), in.size(), its[i].input}, eo,
                                           {95, jpeg::Subsampling::s420});
      } catch (const std::exception& e) {
        why = e.what();
      }
      if (!why.empty()) {  // the single-file path refuses it: so must the batch
        EXPECT_FALSE(reps[i].ok) << its[i].input << ": single-file error " << why;
        continue;
      }
      ASSERT_TRUE(reps[i].ok) << reps[i].error;
      EXPECT_EQ(reps[i].decoder, ref.decoder) << its[i].input;
      EXPECT_EQ(reps[i].encoder, "nvjpeg") << its[i].input;
      EXPECT_EQ(reps[i].width, ref.width);
      EXPECT_EQ(reps[i].output_channels, ref.out_channels);
      EXPECT_EQ(read_bytes(its[i].output), ref.bytes) << its[i].input << " (batch " << batch << ")";
    }
    std::size_t counted = 0;
    for (const auto& [name, n] : s.decoders) counted += n;
    EXPECT_EQ(counted, its.size() - s.failures);
    // The route's share and when it delivered: its first and last file done, within the run.
    EXPECT_EQ(s.device.files, its.size() - s.failures);
    EXPECT_GT(s.device.batches, 0u);
    EXPECT_GT(s.device.first_done_ms, 0.0);
    EXPECT_LE(s.device.first_done_ms, s.device.last_done_ms);
    EXPECT_LE(s.device.last_done_ms, s.wall_s * 1000.0);
  }
}

TEST_F(ExecutorJpeg, GpuRouteToPngEqualsDecodeEqualizeEncode) {
  HISTEQ_REQUIRE_GPU();
  if (!gpu::nvjpeg_built()) GTEST_SKIP() << "built without nvJPEG";
  ExecutorOptions o;
  o.op.equalize.backend = Backend::cuda;
  o.jpeg = JpegRoute::gpu;
  o.jobs = 3;
  Executor ex(o);
  const auto its = items("png", ".png");
  std::vector<ItemReport> reps;
  ex.run(its, [&](const ItemReport& r) { reps.push_back(r); });
  gpu::JpegCodec codec(nullptr);
  EqualizeOptions eo;
  eo.backend = Backend::cuda;
  for (std::size_t i = 0; i < its.size(); ++i) {
    const auto in = read_bytes(its[i].input);
    Image img;
    try {
      img = codec.decode_to_host({in.data(), in.size(), its[i].input});
    } catch (const std::exception& e) {
      EXPECT_FALSE(reps[i].ok) << e.what();
      continue;
    }
    ASSERT_TRUE(reps[i].ok) << reps[i].error;
    EXPECT_EQ(read_bytes(its[i].output), encode_image(equalize(img, eo), ".png", EncodeOptions{}))
        << its[i].input;
  }
}

TEST_F(ExecutorJpeg, GpuMixedFolderAndAutoRouteGiveTheBytesOfTheRouteThatRan) {
  HISTEQ_REQUIRE_GPU();
  if (!gpu::nvjpeg_built()) GTEST_SKIP() << "built without nvJPEG";
  // PNG items borrow the device workers while their JPEG threads run batches: nothing may wait
  // forever, and every item must come out.
  for (const char* n : {"moon.png", "chelsea.png", "astronaut.png", "coffee.png"})
    inputs_.push_back(test::source_path(std::string("samples/") + n));
  for (JpegRoute route : {JpegRoute::gpu, JpegRoute::automatic}) {
    ExecutorOptions o;
    o.op.equalize.backend = route == JpegRoute::gpu ? Backend::cuda : Backend::automatic;
    o.jpeg = route;
    o.jobs = 6;
    o.jpeg_batch = 3;
    Executor ex(o);
    const auto its = items(route == JpegRoute::gpu ? "mixed-gpu" : "mixed-auto", ".jpg");
    std::vector<ItemReport> reps;
    const BatchSummary s = ex.run(its, [&](const ItemReport& r) { reps.push_back(r); });
    ASSERT_EQ(reps.size(), its.size());
    gpu::Equalizer eq;
    gpu::JpegCodec codec(eq.stream());
    EqualizeOptions gpu_opt;
    gpu_opt.backend = Backend::cuda;
    EqualizeOptions cpu_opt;
    cpu_opt.backend = Backend::cpu;
    for (std::size_t i = 0; i < its.size(); ++i) {
      const ItemReport& r = reps[i];
      if (!r.ok) {  // only what the single-file paths refuse too (the CMYK test file)
        EXPECT_NE(r.error.find(fs::path(its[i].input).filename().string()), std::string::npos)
            << r.error;
        continue;
      }
      const auto in = read_bytes(its[i].input);
      std::vector<std::uint8_t> want;
      const bool gpu_decoded = r.decoder.rfind("nvjpeg", 0) == 0;
      if (gpu_decoded) {  // the device route: as the single-file GPU path
        EXPECT_EQ(r.encoder, "nvjpeg") << its[i].input;
        want = gpu::equalize_jpeg_on_device(eq, codec, {in.data(), in.size(), its[i].input},
                                            gpu_opt, {95, jpeg::Subsampling::s420})
                   .bytes;
      } else if (r.encoder == "nvjpeg") {  // a CPU decode (PNG, progressive, CMYK) equalized and
                                           // encoded on the device
        want = codec.encode(equalize(load_image(its[i].input), cpu_opt),
                            {95, jpeg::Subsampling::s420});
      } else if (r.decoder == "libjpeg-turbo-ycbcr") {  // on the CPU in the YCbCr planes
        EXPECT_EQ(route, JpegRoute::automatic) << "--backend cuda equalizes on the GPU";
        EXPECT_EQ(r.encoder, r.decoder);
        EXPECT_TRUE(equalize_jpeg_planes(in.data(), in.size(), its[i].input, cpu_opt,
                                         {95, jpeg::Subsampling::s420}, kDefaultMaxPixels, &want,
                                         nullptr, nullptr, nullptr));
      } else {  // a CPU decode: the same pixels whichever backend equalized them
        EXPECT_TRUE(r.decoder == "libjpeg-turbo" || r.decoder == "libdeflate-png" ||
                    r.decoder == "stb_image")
            << r.decoder;
        want = encode_image(equalize(load_image(its[i].input), cpu_opt), ".jpg", EncodeOptions{});
      }
      EXPECT_EQ(read_bytes(its[i].output), want)
          << its[i].input << " decoder " << r.decoder << " encoder " << r.encoder;
      if (fs::path(its[i].input).extension() == ".png")
        EXPECT_FALSE(gpu_decoded) << "a PNG input never takes the JPEG route";
      if (route == JpegRoute::automatic && its[i].input.find("progressive") != std::string::npos)
        EXPECT_NE(r.decoder, "nvjpeg-hw")
            << "progressive files: the CPU workers (hybrid or libjpeg-turbo)";
    }
    EXPECT_LE(s.failures, 1u);
  }
}

// Files whose entropy-coded data libjpeg-turbo refuses (its data warnings are errors): the CPU
// route fails every one. On a GPU, nvJPEG's hardware decoder and its hybrid backend decode such
// data without an error (on an H100 the single-file GPU path decoded all 16: nvjpeg-hw for the
// baseline files, nvjpeg-hybrid for the progressive ones; docs/reliability.md), so the device
// route and the single-file GPU path may write them; what they may not do is hand a file nvJPEG
// refused to anything but libjpeg-turbo's refusal: each such file fails, and each one written
// names an nvJPEG decoder. How many each path wrote, and with which decoder, is printed.
TEST_F(ExecutorJpeg, EntropyDataLibjpegRefusesFailsOnTheCpuRouteAndOnlyNvjpegDecodesIt) {
  struct Kind {
    const char* name;
    int w, h, channels, hs, vs;
    bool progressive;
  };
  std::vector<std::string> bad_inputs;
  for (const Kind k :
       {Kind{"b420", 640, 480, 3, 2, 2, false}, Kind{"b444", 333, 211, 3, 1, 1, false},
        Kind{"gray", 400, 300, 1, 1, 1, false}, Kind{"p420", 640, 480, 3, 2, 2, true}}) {
    test::MakeOpts mo;
    mo.h_samp = k.hs;
    mo.v_samp = k.vs;
    mo.progressive = k.progressive;
    const auto good = test::make_jpeg(test::pattern(k.w, k.h, k.channels, 9), mo);
    int kept = 0;
    for (int v = 0; v < 24 && kept < 4; ++v) {
      const auto bad = test::overwrite_last_scan(good, v);
      try {
        (void)decode_image(bad.data(), bad.size(), "bad.jpg");
        continue;  // libjpeg-turbo decodes this one cleanly: not a refused file
      } catch (const std::exception&) {}
      const fs::path p = dir_ / "in" / (std::string(k.name) + "_" + std::to_string(v) + ".jpg");
      write_bytes(p, bad);
      bad_inputs.push_back(p.string());
      ++kept;
    }
  }
  ASSERT_GE(bad_inputs.size(), 8u) << "too few overwrites made libjpeg-turbo refuse the file";
  inputs_ = bad_inputs;
  {
    ExecutorOptions c;
    c.jpeg = JpegRoute::cpu;
    c.jobs = 2;
    Executor ex(c);
    const auto its = items("cpu", ".jpg");
    ex.run(its, [](const ItemReport& r) { EXPECT_FALSE(r.ok) << r.input; });
  }
  HISTEQ_REQUIRE_GPU();
  if (!gpu::nvjpeg_built()) GTEST_SKIP() << "built without nvJPEG";
  ExecutorOptions o;  // the device route for every JPEG, as --decoder gpu runs a batch
  o.jpeg = JpegRoute::gpu;
  o.jobs = 4;
  Executor ex(o);
  const auto its = items("device", ".jpg");
  std::vector<ItemReport> reps;
  ex.run(its, [&](const ItemReport& r) { reps.push_back(r); });
  ASSERT_EQ(reps.size(), its.size());
  std::map<std::string, int> written;
  for (const ItemReport& r : reps) {
    if (!r.ok) continue;
    ++written[r.decoder];
    EXPECT_EQ(r.decoder.rfind("nvjpeg", 0), 0u)
        << r.input << ": written by decoder " << r.decoder << " (route " << r.route << ")";
  }
  std::cout << "[ device  ] of " << reps.size() << " files libjpeg-turbo refuses, written:";
  for (const auto& [name, n] : written) std::cout << ' ' << name << ' ' << n;
  std::cout << '\n';
  gpu::Equalizer eq;
  gpu::JpegCodec codec(eq.stream());
  EqualizeOptions eo;
  eo.backend = Backend::cuda;
  std::map<std::string, int> decoded;
  for (const std::string& in_path : bad_inputs) {
    const auto in = read_bytes(in_path);
    try {
      const gpu::JpegOnDevice r = gpu::equalize_jpeg_on_device(
          eq, codec, {in.data(), in.size(), in_path}, eo, {95, jpeg::Subsampling::s420});
      ++decoded[r.decoder];
      EXPECT_EQ(r.decoder.rfind("nvjpeg", 0), 0u) << in_path << ": decoded by " << r.decoder;
    } catch (const std::exception&) {}
  }
  std::cout << "[ single  ] of " << bad_inputs.size() << " files libjpeg-turbo refuses, decoded:";
  for (const auto& [name, n] : decoded) std::cout << ' ' << name << ' ' << n;
  std::cout << '\n';
}

}  // namespace
