// test_jpeg_hybrid_gpu.cpp — progressive JPEGs through nvJPEG's hybrid decoder
// (pipeline/nvjpeg_hybrid.hpp): the planes it leaves on the device have decode_planes' geometry
// and libjpeg-turbo's samples within a few levels (its inverse DCT is nvJPEG's: the figure is
// printed, and bench/probes/hybrid_probe.cu measures it on photographs; a misplaced or
// misread plane is tens of levels off), the files it must not take come back null, and the
// executor's route with ExecutorOptions::progressive hybrid or gpu writes outputs of the same size
// whose pixels stay within the CPU planes route's. GPU cases skip without a device or without
// nvJPEG.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "histeq/executor.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/jpeg_planes.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "jpeg_test_support.hpp"
#include "pipeline/nvjpeg_hybrid.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace histeq;

namespace {

#define REQUIRE_HYBRID()                                              \
  do {                                                                \
    HISTEQ_REQUIRE_GPU();                                             \
    if (!gpu::hybrid_built()) GTEST_SKIP() << "built without nvJPEG"; \
  } while (0)

std::vector<std::uint8_t> progressive(int w, int h, int hs, int vs, int seed) {
  test::MakeOpts o;
  o.progressive = true;
  o.h_samp = hs;
  o.v_samp = vs;
  return test::make_jpeg(test::pattern(w, h, 3, seed), o);
}

/// The planes on the device, each plane_width x plane_height, copied to the host.
std::vector<std::vector<std::uint8_t>> to_host(const gpu::HybridPlanes& p) {
  cudaStream_t s = nullptr;
  EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);
  p.wait_on(s);
  std::vector<std::vector<std::uint8_t>> out(3);
  for (int c = 0; c < 3; ++c) {
    out[c].resize(std::size_t(p.plane_width[c]) * std::size_t(p.plane_height[c]));
    EXPECT_EQ(cudaMemcpyAsync(out[c].data(), p.plane[c], out[c].size(), cudaMemcpyDeviceToHost, s),
              cudaSuccess);
  }
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
  return out;
}

TEST(HybridDecoder, PlanesHaveDecodePlanesGeometryAndLibjpegSamplesWithinAFewLevels) {
  REQUIRE_HYBRID();
  for (const bool gpu_huffman : {false, true}) {
    SCOPED_TRACE(gpu_huffman ? "GPU Huffman decoding" : "hybrid");
    gpu::HybridDecoder dec(gpu::make_jpeg_handles(0), gpu_huffman);
    struct Case {
      int w, h, hs, vs;
    };
    // 4:2:0, 4:2:2, 4:4:4; odd sizes (the chroma planes round up)
    for (const Case& k :
         {Case{640, 480, 2, 2}, Case{333, 211, 2, 2}, Case{401, 300, 2, 1}, Case{257, 129, 1, 1}}) {
      SCOPED_TRACE(std::to_string(k.w) + "x" + std::to_string(k.h) + " " + std::to_string(k.hs) +
                   "x" + std::to_string(k.vs));
      const auto bytes = progressive(k.w, k.h, k.hs, k.vs, k.w);
      const jpeg::Planes want = jpeg::decode_planes(bytes.data(), bytes.size(), "test.jpg");
      ASSERT_EQ(want.width, k.w);
      std::unique_ptr<gpu::HybridPlanes> got = dec.decode(bytes.data(), bytes.size(), 1u << 28);
      ASSERT_NE(got, nullptr);
      EXPECT_EQ(got->width, k.w);
      EXPECT_EQ(got->height, k.h);
      EXPECT_EQ(got->chroma_h, k.hs);
      EXPECT_EQ(got->chroma_v, k.vs);
      const auto host = to_host(*got);
      int worst = 0;
      double sum = 0, n = 0;
      for (int c = 0; c < 3; ++c) {
        const jpeg::Plane& w = want.plane[c];
        ASSERT_EQ(got->plane_width[c], w.width) << "plane " << c;
        ASSERT_EQ(got->plane_height[c], w.height) << "plane " << c;
        for (int y = 0; y < w.height; ++y)
          for (int x = 0; x < w.width; ++x) {
            const int d = std::abs(int(host[c][std::size_t(y) * std::size_t(w.width) + x]) -
                                   int(w.row(y)[x]));
            worst = std::max(worst, d);
            sum += d;
            n += 1;
          }
      }
      std::cout << (gpu_huffman ? "[ gpu-hyb ] " : "[ hybrid  ] ") << k.w << "x" << k.h << " "
                << k.hs << "x" << k.vs << ": largest difference from libjpeg-turbo's planes "
                << worst << ", mean " << sum / n << "\n";
      EXPECT_LE(worst, 16);
      EXPECT_LT(sum / n, 1.0);
    }
  }
}

TEST(HybridDecoder, BackToBackFilesEachGetTheirOwnPlanes) {
  REQUIRE_HYBRID();
  for (const bool gpu_huffman : {false, true}) {
    SCOPED_TRACE(gpu_huffman ? "GPU Huffman decoding" : "hybrid");
    gpu::HybridDecoder dec(gpu::make_jpeg_handles(0), gpu_huffman);
    // Decoded one after the other without waiting (the host phase of each file beside the device
    // phase of the one before), then each compared with the same file decoded alone.
    std::vector<std::vector<std::uint8_t>> files;
    for (int i = 0; i < 5; ++i) files.push_back(progressive(320 + 16 * i, 240, 2, 2, 10 + i));
    std::vector<std::unique_ptr<gpu::HybridPlanes>> all;
    for (const auto& f : files) all.push_back(dec.decode(f.data(), f.size(), 1u << 28));
    for (std::size_t i = 0; i < files.size(); ++i) {
      ASSERT_NE(all[i], nullptr);
      const auto together = to_host(*all[i]);
      all[i].reset();
      auto alone_planes = dec.decode(files[i].data(), files[i].size(), 1u << 28);
      ASSERT_NE(alone_planes, nullptr);
      EXPECT_EQ(together, to_host(*alone_planes)) << "file " << i;
    }
  }
}

// Where the GPU has a JPEG engine the decoders are made on its hardware-backend handle; a
// device's handles made without it (make_jpeg_handles(device, false): the default-backend
// handle alone, as on a GPU without an engine) give the same planes, byte for byte, and so does
// a decoder with the GPU's Huffman decoding, growing files and shrinking ones through the same
// decoder (its buffers reused and regrown).
TEST(HybridDecoder, HardwareHandleDefaultHandleAndGpuHuffmanGiveTheSamePlanes) {
  REQUIRE_HYBRID();
  auto with_engine = gpu::make_jpeg_handles(0);
  gpu::HybridDecoder a(with_engine);
  auto without_engine = gpu::make_jpeg_handles(0, false);
  gpu::HybridDecoder b(without_engine);
  gpu::HybridDecoder c(with_engine, true);     // the GPU's Huffman decoding
  gpu::HybridDecoder d(without_engine, true);  // and on the default-backend handle
  EXPECT_FALSE(a.gpu_huffman());
  EXPECT_TRUE(c.gpu_huffman());
  int k = 0;
  for (const auto& [w, h, hs, vs] : {std::array<int, 4>{320, 240, 2, 2},
                                     {1280, 720, 2, 1},
                                     {200, 150, 1, 1},
                                     {1600, 1200, 2, 2},
                                     {96, 64, 2, 2}}) {
    const auto f = progressive(w, h, hs, vs, 40 + k++);
    auto pa = a.decode(f.data(), f.size(), 1u << 28);
    auto pb = b.decode(f.data(), f.size(), 1u << 28);
    auto pc = c.decode(f.data(), f.size(), 1u << 28);
    auto pd = d.decode(f.data(), f.size(), 1u << 28);
    ASSERT_NE(pa, nullptr) << w << "x" << h;
    ASSERT_NE(pb, nullptr) << w << "x" << h;
    ASSERT_NE(pc, nullptr) << w << "x" << h;
    ASSERT_NE(pd, nullptr) << w << "x" << h;
    const auto planes = to_host(*pa);
    EXPECT_EQ(planes, to_host(*pb)) << w << "x" << h;
    EXPECT_EQ(planes, to_host(*pc)) << w << "x" << h << " (GPU Huffman decoding)";
    EXPECT_EQ(planes, to_host(*pd)) << w << "x" << h << " (GPU Huffman, default handle)";
  }
}

TEST(HybridDecoder, DecodersSharingTheDevicesHandlesDecodeOnThreadsAtOnce) {
  REQUIRE_HYBRID();
  for (const bool gpu_huffman : {false, true}) {
    SCOPED_TRACE(gpu_huffman ? "GPU Huffman decoding" : "hybrid");
    // As the route's CPU workers do: one decoder per thread, all on one set of handles (one
    // default-backend handle), decoding at the same time; each file's planes equal the planes of
    // the same file decoded by a decoder alone.
    std::vector<std::vector<std::uint8_t>> files;
    for (int i = 0; i < 4; ++i) files.push_back(progressive(480 + 8 * i, 320, 2, 2, 40 + i));
    std::vector<std::vector<std::vector<std::uint8_t>>> alone;
    {
      gpu::HybridDecoder dec(gpu::make_jpeg_handles(0));
      for (const auto& f : files) {
        auto p = dec.decode(f.data(), f.size(), 1u << 28);
        ASSERT_NE(p, nullptr);
        alone.push_back(to_host(*p));
      }
    }
    constexpr int kThreads = 4;
    std::vector<std::unique_ptr<gpu::HybridDecoder>> decoders;
    {
      auto handles = gpu::make_jpeg_handles(0);
      for (int t = 0; t < kThreads; ++t)
        decoders.push_back(std::make_unique<gpu::HybridDecoder>(handles, gpu_huffman));
    }  // the decoders keep the handles they share alive
    std::vector<std::vector<std::vector<std::vector<std::uint8_t>>>> got(kThreads);
    std::vector<int> failed(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        gpu::HybridDecoder& dec = *decoders[std::size_t(t)];
        for (int r = 0; r < 3; ++r)
          for (std::size_t i = 0; i < files.size(); ++i) {
            const auto& f = files[(i + std::size_t(t)) % files.size()];
            auto p = dec.decode(f.data(), f.size(), 1u << 28);
            if (!p) {
              ++failed[std::size_t(t)];
              continue;
            }
            got[std::size_t(t)].push_back(to_host(*p));
          }
      });
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(failed[std::size_t(t)], 0) << "thread " << t;
      ASSERT_EQ(got[std::size_t(t)].size(), 3 * files.size());
      for (std::size_t k = 0; k < got[std::size_t(t)].size(); ++k)
        EXPECT_EQ(got[std::size_t(t)][k], alone[(k + std::size_t(t)) % files.size()])
            << "thread " << t << ", decode " << k;
    }
  }
}

// A progressive file whose entropy-coded data was overwritten in its middle (the markers and
// the EOI intact), which libjpeg-turbo refuses (its data warnings are errors): GPU Huffman
// decoding, the policy's decoder for progressive files on the device route, must refuse it too
// (null: the CPU decoder then names the defect), not hand over planes made of whatever it
// decoded. nvJPEG's hybrid backend (the Huffman decoding on the CPU: histeq bench --tune
// jpeg.progressive=hybrid, and the single-file GPU path's progressive files) decodes such data
// without an error: on an H100 it handed back all 6 variants (docs/reliability.md). Each
// backend's count is printed; both must still decode the intact file.
TEST(HybridDecoder, RefusesEntropyDataLibjpegRefuses) {
  REQUIRE_HYBRID();
  const auto good = progressive(640, 480, 2, 2, 7);
  std::vector<std::vector<std::uint8_t>> refused;
  for (int v = 0; v < 24 && refused.size() < 6; ++v) {
    const auto bad = test::overwrite_last_scan(good, v);
    try {
      (void)jpeg::decode_planes(bad.data(), bad.size(), "bad.jpg");
    } catch (const std::exception&) {
      refused.push_back(bad);
    }
  }
  ASSERT_FALSE(refused.empty()) << "no overwrite made libjpeg-turbo refuse the file";
  for (const bool gpu_huffman : {false, true}) {
    gpu::HybridDecoder dec(gpu::make_jpeg_handles(0), gpu_huffman);
    int handed = 0;
    for (const auto& bad : refused)
      if (dec.decode(bad.data(), bad.size(), 1u << 28)) ++handed;
    std::cout << (gpu_huffman ? "[ gpu-hyb ] " : "[ hybrid  ] ") << handed << " of "
              << refused.size() << " files libjpeg-turbo refuses came back as planes\n";
    if (gpu_huffman) EXPECT_EQ(handed, 0) << "GPU Huffman decoding";
    EXPECT_NE(dec.decode(good.data(), good.size(), 1u << 28), nullptr);  // still decodes
  }
}

TEST(HybridDecoder, RefusesWhatItMustNotTake) {
  REQUIRE_HYBRID();
  for (const bool gpu_huffman : {false, true}) {
    SCOPED_TRACE(gpu_huffman ? "GPU Huffman decoding" : "hybrid");
    gpu::HybridDecoder dec(gpu::make_jpeg_handles(0), gpu_huffman);
    const auto good = progressive(200, 150, 2, 2, 3);
    auto cut = good;
    cut.resize(cut.size() / 2);  // no EOI: libjpeg-turbo names the truncation
    EXPECT_EQ(dec.decode(cut.data(), cut.size(), 1u << 28), nullptr);
    test::MakeOpts g;
    g.progressive = true;
    const auto gray = test::make_jpeg(test::pattern(200, 150, 1, 4), g);
    EXPECT_EQ(dec.decode(gray.data(), gray.size(), 1u << 28), nullptr);       // not 3 components
    EXPECT_EQ(dec.decode(good.data(), good.size(), 200 * 150 - 1), nullptr);  // over the limit
    const std::uint8_t junk[] = {0xFF, 0xD8, 0xFF, 0xD9};
    EXPECT_EQ(dec.decode(junk, sizeof junk, 1u << 28), nullptr);
    // and it still decodes after all that
    EXPECT_NE(dec.decode(good.data(), good.size(), 1u << 28), nullptr);
  }
}

TEST(HybridDecoder, KeepsExifAndIcc) {
  REQUIRE_HYBRID();
  gpu::HybridDecoder dec(gpu::make_jpeg_handles(0));
  auto bytes = progressive(240, 160, 2, 2, 5);
  // Orientation 1 (the device route takes only unrotated files): a minimal little-endian TIFF.
  const std::vector<std::uint8_t> exif = {'E', 'x', 'i', 'f', 0, 0,    'I', 'I', 42, 0, 8,
                                          0,   0,   0,   1,   0, 0x12, 1,   3,   0,  1, 0,
                                          0,   0,   1,   0,   0, 0,    0,   0,   0,  0};
  std::vector<std::uint8_t> icc(70000);  // an RGB profile's header, in two APP2 segments
  for (std::size_t i = 0; i < icc.size(); ++i) icc[i] = std::uint8_t(i * 7 + 3);
  icc[0] = 0;
  icc[1] = std::uint8_t(icc.size() >> 16);
  icc[2] = std::uint8_t(icc.size() >> 8);
  icc[3] = std::uint8_t(icc.size());
  std::memcpy(&icc[16], "RGB ", 4);
  jpeg::insert_metadata(bytes, exif, icc, 3);
  auto got = dec.decode(bytes.data(), bytes.size(), 1u << 28);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->exif, exif);
  EXPECT_EQ(got->icc, icc);
}

std::vector<std::uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// An output the device route wrote from a decoder's planes against the CPU planes route's
/// (libjpeg-turbo's planes and encoder): the same size, pixels within a level or two on average
/// (two decoders and two encoders apart; a misplaced plane is tens of levels off).
void expect_within_cpu_planes_route(const ItemReport& r, const WorkItem& item) {
  EXPECT_EQ(r.route, "jpeg-planes");
  EXPECT_EQ(r.encoder, "nvjpeg");
  const auto in = read_bytes(item.input);
  EqualizeOptions cpu;
  cpu.backend = Backend::cpu;
  std::vector<std::uint8_t> want;
  ASSERT_TRUE(equalize_jpeg_planes(in.data(), in.size(), item.input, cpu,
                                   {95, jpeg::Subsampling::s420}, kDefaultMaxPixels, &want, nullptr,
                                   nullptr, nullptr));
  const auto got = read_bytes(item.output);
  const Image a = decode_image(got.data(), got.size(), item.output);
  const Image b = decode_image(want.data(), want.size(), "want.jpg");
  ASSERT_EQ(a.width, b.width);
  ASSERT_EQ(a.height, b.height);
  ASSERT_EQ(a.channels, b.channels);
  double sum = 0;
  for (std::size_t k = 0; k < a.pixels.size(); ++k)
    sum += std::abs(int(a.pixels[k]) - int(b.pixels[k]));
  EXPECT_LT(sum / double(a.pixels.size()), 1.5) << item.input;
}

/// Runs `inputs` through `ex` into dir/NAME-ATTEMPT until a report meets `wanted` (the device
/// route comes up in the background), at most 20 times, checking each such output against the
/// CPU planes route's; returns the reports of every run.
template <class Wanted>
std::vector<ItemReport> run_until(Executor& ex, const std::vector<std::string>& inputs,
                                  const fs::path& dir, const std::string& name, Wanted wanted,
                                  bool* seen) {
  std::vector<ItemReport> all;
  *seen = false;
  for (int attempt = 0; attempt < 20 && !*seen; ++attempt) {
    const fs::path out = dir / (name + "-" + std::to_string(attempt));
    fs::create_directories(out);
    std::vector<WorkItem> items;
    for (const std::string& in : inputs) {
      WorkItem w;
      w.input = in;
      w.output = (out / fs::path(in).filename()).string();
      items.push_back(w);
    }
    std::vector<ItemReport> reps;
    ex.run(items, [&](const ItemReport& r) { reps.push_back(r); });
    EXPECT_EQ(reps.size(), items.size());
    for (std::size_t i = 0; i < reps.size() && i < items.size(); ++i) {
      EXPECT_TRUE(reps[i].ok) << reps[i].input << ": " << reps[i].error;
      if (!wanted(reps[i])) continue;
      *seen = true;
      expect_within_cpu_planes_route(reps[i], items[i]);
    }
    all.insert(all.end(), reps.begin(), reps.end());
    if (!*seen) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return all;
}

TEST(HybridRoute, ProgressiveFilesThroughTheHybridDecoderStayWithinTheCpuPlanesRoute) {
  REQUIRE_HYBRID();
  std::string tmpl = (fs::path(::testing::TempDir()) / "histeq-hybrid-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  fs::create_directories(dir / "in");
  std::vector<std::string> inputs;
  for (int i = 0; i < 12; ++i) {
    const fs::path p = dir / "in" / ("p" + std::to_string(i) + ".jpg");
    const auto b = progressive(480 + 32 * (i % 3), 360, i % 2 ? 2 : 1, i % 2 ? 2 : 1, 20 + i);
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
    inputs.push_back(p.string());
  }
  // The policy's decoders (one for each worker that asks), two made on the route's thread
  // (ExecutorOptions::hybrid_decoders), and the GPU's Huffman decoding.
  struct Run_ {
    ProgressiveJpeg how;
    int count;
    const char* decoder;
  };
  for (const Run_ k : {Run_{ProgressiveJpeg::hybrid, 0, "nvjpeg-hybrid"},
                       Run_{ProgressiveJpeg::hybrid, 2, "nvjpeg-hybrid"},
                       Run_{ProgressiveJpeg::gpu, 0, "nvjpeg-gpu-hybrid"},
                       Run_{ProgressiveJpeg::gpu, 2, "nvjpeg-gpu-hybrid"}}) {
    const int count = k.count;
    SCOPED_TRACE(std::string(k.decoder) + ", hybrid_decoders " + std::to_string(count));
    ExecutorOptions o;  // the defaults' route: automatic, the device route started at once
    o.jobs = 4;
    o.device_start_cpu_s = 0;
    o.progressive = k.how;
    o.hybrid_decoders = count;
    Executor ex(o);
    // The device route starts with the executor's earliest run() and comes up in the background:
    // runs repeat (each writing every output) until the progressive files went through the hybrid
    // decoder.
    bool hybrid = false;
    run_until(
        ex, inputs, dir, "out" + std::to_string(int(k.how)) + std::to_string(count),
        [&](const ItemReport& r) { return r.decoder == k.decoder; }, &hybrid);
    EXPECT_TRUE(hybrid) << "the device route never took a progressive file through the hybrid "
                           "decoder";
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// ExecutorOptions::early_hybrid: in a route started with its encoder alone (no hardware decoder),
// a CPU worker hands baseline colour JPEGs to the GPU Huffman decoder once the encoder runs, and
// their outputs stay within the CPU planes route's; without it, no baseline file goes through a
// hybrid decoder (libjpeg-turbo's planes go to the encoder).
TEST(HybridRoute, BaselineFilesGoToTheGpuHuffmanDecoderWhileTheEncoderRunsAlone) {
  REQUIRE_HYBRID();
  std::string tmpl = (fs::path(::testing::TempDir()) / "histeq-early-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  fs::create_directories(dir / "in");
  std::vector<std::string> inputs;
  for (int i = 0; i < 12; ++i) {
    const fs::path p = dir / "in" / ("b" + std::to_string(i) + ".jpg");
    test::MakeOpts mo;
    mo.h_samp = i % 3 ? 2 : 1;
    mo.v_samp = i % 3 == 1 ? 2 : 1;
    const auto b = test::make_jpeg(test::pattern(640 + 16 * (i % 4), 400, 3, 40 + i), mo);
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
    inputs.push_back(p.string());
  }
  for (const bool early : {true, false}) {
    SCOPED_TRACE(early ? "early_hybrid" : "no early_hybrid");
    ExecutorOptions o;
    o.jobs = 4;
    o.device_start_cpu_s = 1e9;  // never the whole route
    o.encoder_start_cpu_s = 0;   // the encoder alone for any JPEG
    o.router_measures = false;   // ... at once, not once the workers have timed their files
    o.early_hybrid = early;
    Executor ex(o);
    bool seen = false;
    const std::vector<ItemReport> reps = run_until(
        ex, inputs, dir, early ? "early" : "late",
        [early](const ItemReport& r) {
          return early ? r.decoder == "nvjpeg-gpu-hybrid" : r.encoder == "nvjpeg";
        },
        &seen);
    if (early) {
      EXPECT_TRUE(seen) << "no baseline file went through the GPU Huffman decoder";
      continue;
    }
    // Without it: the encoder took files (libjpeg-turbo's planes), no decoder of nvJPEG did.
    EXPECT_TRUE(seen) << "the encoder never took a file";
    for (const ItemReport& r : reps)
      EXPECT_EQ(r.decoder.rfind("nvjpeg", 0), std::string::npos) << r.input << ": " << r.decoder;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
