// test_match_jpeg_gpu.cpp — histogram matching on the executor's JPEG device route
// (src/pipeline/jpeg_device.hpp): the planes the route decodes (nvJPEG's hardware decoder) or is
// given (a CPU worker's libjpeg-turbo planes), their Y (or gray) plane matched on the device and
// the planes encoded by nvJPEG, give byte for byte nvJPEG's encode of the same planes with Y
// matched on the CPU (match_lut of Y's histogram against the reference's luma, the CPU planes
// route's rule); the files the hardware declines (the pixels kind) give the single-file GPU
// path's bytes with the reference; and executor runs (--decoder gpu, and an automatic run large
// enough for the route) write those bytes, and the CPU planes route's where a CPU worker ran the
// file. The equalization through the same helpers is the control. Skips without nvJPEG or a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_test_support.hpp"
#include "histeq/codec_names.hpp"
#include "histeq/cpu.hpp"
#include "histeq/executor.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/jpeg_planes.hpp"
#include "histeq/lut.hpp"
#include "histeq/match.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/planes.hpp"
#include "jpeg_test_support.hpp"
#include "pipeline/jpeg_device.hpp"
#include "support/device_buffer.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

namespace fs = std::filesystem;
using test::Bytes;
using test::make_jpeg;
using test::MakeOpts;
using test::pattern;

const jpeg::EncodeOptions kEnc{95, jpeg::Subsampling::s420};

Bytes read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const Bytes& b) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

/// The LUT the CPU makes for a plane from its histogram: matching's or equalization's.
using LutRule = std::function<Lut(const Histogram&)>;
LutRule matching(const Histogram& ref) {
  return [ref](const Histogram& h) { return match_lut(h.data(), ref.data()); };
}
const LutRule kEqualizing = [](const Histogram& h) { return make_lut(h.data(), Formula::opencv); };

/// A plane through the CPU's rule: lut(histogram(y))[y].
std::vector<std::uint8_t> on_cpu(std::vector<std::uint8_t> y, const LutRule& rule) {
  const Lut lut = rule(cpu::histogram(y.data(), y.size(), SampleType::u8, 256, 1));
  for (std::uint8_t& v : y) v = lut[v];
  return y;
}

/// The planes the hardware decoder makes of a file, plane 0 (Y, or the gray plane) put through
/// the CPU's rule, encoded by nvJPEG.
Bytes hardware_planes_on_cpu(gpu::JpegCodec& codec, const Bytes& file, const LutRule& rule) {
  std::vector<gpu::DevicePlanes> dec = codec.decode_planes({{file.data(), file.size(), "f"}});
  EXPECT_FALSE(dec.at(0).declined);
  gpu::DevicePlanes p = dec[0];
  const std::size_t n = std::size_t(p.width) * std::size_t(p.height);
  const DeviceBuffer<std::uint8_t> y =
      test::upload_bytes(on_cpu(test::download(p.plane[0], n), rule));
  p.plane[0] = y.get();
  return codec.encode_planes({p}, kEnc).at(0);
}

/// The planes libjpeg-turbo decodes (as a CPU worker hands them to the route), each plane's
/// width x height samples on the device, Y put through the CPU's rule, encoded by nvJPEG.
Bytes host_planes_on_cpu(gpu::JpegCodec& codec, const jpeg::Planes& hp, const LutRule& rule) {
  gpu::DevicePlanes p;
  p.width = hp.width;
  p.height = hp.height;
  p.components = 3;
  p.chroma_h = hp.plane[0].h / hp.plane[1].h;
  p.chroma_v = hp.plane[0].v / hp.plane[1].v;
  p.exif = hp.exif;
  p.icc = hp.icc;
  std::vector<DeviceBuffer<std::uint8_t>> d;
  for (int c = 0; c < 3; ++c) {
    const jpeg::Plane& src = hp.plane[c];
    std::vector<std::uint8_t> v;
    for (int y = 0; y < src.height; ++y) v.insert(v.end(), src.row(y), src.row(y) + src.width);
    d.push_back(test::upload_bytes(c == 0 ? on_cpu(std::move(v), rule) : v));
    p.plane[c] = d.back().get();
    p.plane_width[c] = src.width;
    p.plane_height[c] = src.height;
  }
  return codec.encode_planes({p}, kEnc).at(0);
}

/// Test files: colour at 4:4:4, 4:2:2, 4:2:0 (odd sizes), gray, and the bundled photograph.
std::vector<std::pair<std::string, Bytes>> files() {
  std::vector<std::pair<std::string, Bytes>> v;
  const Image colour = pattern(333, 217, 3, 9);
  for (auto [h, vv, tag] : {std::tuple{1, 1, "444"}, {2, 1, "422"}, {2, 2, "420"}}) {
    MakeOpts o;
    o.h_samp = h;
    o.v_samp = vv;
    v.emplace_back(std::string("pattern-") + tag, make_jpeg(colour, o));
  }
  v.emplace_back("pattern-gray", make_jpeg(pattern(301, 199, 1, 4)));
  v.emplace_back("hubble", read_bytes(test::source_path("samples/hubble_deep_field.jpg")));
  return v;
}

std::shared_ptr<const MatchReference> coffee() {
  return std::make_shared<const MatchReference>(load_image(test::source_path("samples/coffee.png")),
                                                "coffee.png");
}

/// Runs `jobs` through a JpegDevices route with `opt`, waiting for every one to come back.
void run_route(detail::JpegDevices::Options opt, std::vector<detail::DeviceJob>& jobs) {
  std::mutex mu;
  std::condition_variable cv;
  std::size_t back = 0;
  detail::JpegDevices dev(std::move(opt), [&](detail::DeviceJob*) {
    std::lock_guard<std::mutex> lock(mu);
    ++back;
    cv.notify_all();
  });
  ASSERT_EQ(dev.wait_started(), detail::JpegDevices::State::ready) << dev.failure();
  for (detail::DeviceJob& j : jobs) dev.push(&j);
  dev.set_feeding(false);
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return back == jobs.size(); });
}

// Both kinds of the route, matching and (the control) equalizing: each file's planes kind (the
// hardware's planes) and, for the colour files, its host-planes kind (libjpeg-turbo's planes,
// and its coefficients with the device's inverse DCT) in batches of 3 on two slots, against
// nvJPEG's encode of the same planes with Y put through the CPU's rule.
TEST(MatchJpegGpu, BothKindsOfTheRouteEqualTheCpusRuleOnTheSamePlanes) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::Equalizer eq;
  gpu::JpegCodec codec(eq.stream());
  if (!codec.hardware_available()) GTEST_SKIP() << "this GPU has no JPEG engine";
  const auto reference = coffee();
  const Histogram ref = reference->histograms(Mode::luma, 3, 8)->at(0);
  const auto inputs = files();
  for (const bool match : {true, false}) {
    SCOPED_TRACE(match ? "matching" : "equalizing (the control)");
    const LutRule rule = match ? matching(ref) : kEqualizing;
    std::vector<detail::DeviceJob> jobs;
    std::vector<ItemReport> reps;
    std::vector<std::string> tags;
    for (const auto& [tag, bytes] : inputs) {
      detail::DeviceJob j;
      j.bytes = &bytes;
      j.name = tag;
      j.out_ext = ".jpg";
      j.planes = true;
      j.megapixels = 0.1;
      jobs.push_back(j);
      tags.push_back(tag + " (hardware planes)");
      const jpeg::Info info = jpeg::read_info(bytes.data(), bytes.size(), tag);
      if (info.components != 3 || !jpeg::planes_route(info, kEnc, jpeg::Orientation::apply))
        continue;
      j.planes = false;
      j.host_planes =
          std::make_shared<jpeg::Planes>(jpeg::decode_planes(bytes.data(), bytes.size(), tag));
      jobs.push_back(j);
      tags.push_back(tag + " (host planes)");
      // its coefficients, the inverse DCT on the device: the same planes, the same bytes
      j.host_planes.reset();
      j.host_coefs = std::make_shared<jpeg::Coefficients>(
          jpeg::decode_coefficients(bytes.data(), bytes.size(), tag));
      jobs.push_back(j);
      tags.push_back(tag + " (host coefficients)");
    }
    reps.resize(jobs.size());  // up to three jobs per input
    for (std::size_t i = 0; i < jobs.size(); ++i) jobs[i].rep = &reps[i];
    detail::JpegDevices::Options o;
    o.encode = kEnc;
    o.batch = 3;
    o.slots = 2;
    if (match) o.reference = reference;
    run_route(o, jobs);
    std::size_t k = 0;
    for (const auto& [tag, bytes] : inputs) {
      for (; k < jobs.size() && jobs[k].name == tag; ++k) {
        const detail::DeviceJob& j = jobs[k];
        ASSERT_EQ(j.status, detail::DeviceJob::Status::done) << tags[k] << ": " << j.error;
        EXPECT_EQ(reps[k].equalize.backend, "cuda") << tags[k];
        const Bytes want =
            tags[k].find("host") != std::string::npos
                ? host_planes_on_cpu(codec, jpeg::decode_planes(bytes.data(), bytes.size(), tag),
                                     rule)
                : hardware_planes_on_cpu(codec, bytes, rule);
        EXPECT_EQ(j.encoded, want) << tags[k];
      }
    }
    EXPECT_EQ(k, jobs.size());
  }
}

// A route started without its decode slots (the executor's encoder-only start): its encoder slot
// runs from the context and the handle on, equalizes and encodes what CPU workers decoded (host
// planes and coefficients, the same bytes as the CPU's rule on those planes), and makes no
// hardware decode state until decoders are wanted; then the route is ready and the hardware's
// planes kind runs too.
TEST(MatchJpegGpu, TheEncoderSlotRunsWorkerDecodedJobsBeforeTheDecoders) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::Equalizer eq;
  gpu::JpegCodec codec(eq.stream());
  if (!codec.hardware_available()) GTEST_SKIP() << "this GPU has no JPEG engine";
  const auto inputs = files();
  std::vector<std::pair<std::string, const Bytes*>> colour;
  for (const auto& [tag, bytes] : inputs) {
    const jpeg::Info info = jpeg::read_info(bytes.data(), bytes.size(), tag);
    if (info.components == 3 && jpeg::planes_route(info, kEnc, jpeg::Orientation::apply))
      colour.emplace_back(tag, &bytes);
  }
  ASSERT_GE(colour.size(), 3u);
  std::mutex mu;
  std::condition_variable cv;
  std::size_t back = 0;
  detail::JpegDevices::Options o;
  o.encode = kEnc;
  o.batch = 3;
  o.slots = 2;
  o.encoder_slots = 1;
  o.decoders = false;
  detail::JpegDevices dev(o, [&](detail::DeviceJob*) {
    std::lock_guard<std::mutex> lock(mu);
    ++back;
    cv.notify_all();
  });
  ASSERT_EQ(dev.wait_started(), detail::JpegDevices::State::encoding) << dev.failure();
  EXPECT_TRUE(dev.encodes());
  // (bounded: a job the route never hands back fails the test instead of hanging it)
  const auto wait_back = [&](std::size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(120), [&] { return back == n; });
  };
  std::vector<detail::DeviceJob> jobs(2 * colour.size() + 1);
  std::vector<ItemReport> reps(jobs.size());
  for (std::size_t i = 0; i < 2 * colour.size(); ++i) {
    const auto& [tag, bytes] = colour[i / 2];
    detail::DeviceJob& j = jobs[i];
    j.bytes = bytes;
    j.name = tag;
    j.out_ext = ".jpg";
    j.megapixels = 0.1;
    j.rep = &reps[i];
    if (i % 2 == 0)
      j.host_planes =
          std::make_shared<jpeg::Planes>(jpeg::decode_planes(bytes->data(), bytes->size(), tag));
    else
      j.host_coefs = std::make_shared<jpeg::Coefficients>(
          jpeg::decode_coefficients(bytes->data(), bytes->size(), tag));
    dev.push(&j);
  }
  dev.set_feeding(false);
  ASSERT_TRUE(wait_back(2 * colour.size())) << "the route did not hand every job back";
  EXPECT_EQ(dev.state(), detail::JpegDevices::State::encoding) << "no decoder was wanted";
  EXPECT_GT(dev.encoder_ready_ms(), 0.0);
  EXPECT_EQ(dev.ready_ms(), 0.0);
  for (std::size_t i = 0; i < 2 * colour.size(); ++i) {
    const auto& [tag, bytes] = colour[i / 2];
    ASSERT_EQ(jobs[i].status, detail::DeviceJob::Status::done) << tag << ": " << jobs[i].error;
    EXPECT_EQ(jobs[i].encoded,
              host_planes_on_cpu(codec, jpeg::decode_planes(bytes->data(), bytes->size(), tag),
                                 kEqualizing))
        << tag << (i % 2 ? " (host coefficients)" : " (host planes)");
  }
  dev.want_decoders();
  ASSERT_EQ(dev.wait_started(), detail::JpegDevices::State::ready) << dev.failure();
  EXPECT_GE(dev.ready_ms(), dev.encoder_ready_ms());
  detail::DeviceJob& hw = jobs.back();
  hw.bytes = colour.front().second;
  hw.name = colour.front().first;
  hw.out_ext = ".jpg";
  hw.planes = true;
  hw.megapixels = 0.1;
  hw.rep = &reps.back();
  dev.push(&hw);
  ASSERT_TRUE(wait_back(jobs.size())) << "the route did not hand every job back";
  ASSERT_EQ(hw.status, detail::DeviceJob::Status::done) << hw.error;
  EXPECT_EQ(reps.back().decoder, histeq::codec::kNvjpegHardware);
  EXPECT_EQ(hw.encoded, hardware_planes_on_cpu(codec, *hw.bytes, kEqualizing));
}

// The pixels kind (a file the hardware decoder declines, or a PNG output) matches the decoded
// pixels by the stage sequence with the reference's histograms for the image's mode: the bytes
// of the single-file GPU path given that reference.
TEST(MatchJpegGpu, ThePixelsKindEqualsTheSingleFileGpuPath) {
  HISTEQ_REQUIRE_NVJPEG();
  gpu::Equalizer eq;
  gpu::JpegCodec codec(eq.stream());
  const auto reference = coffee();
  MakeOpts prog;
  prog.progressive = true;
  const std::vector<std::pair<std::string, Bytes>> inputs = {
      {"progressive", make_jpeg(pattern(400, 300, 3, 3), prog)},
      {"progressive-gray", make_jpeg(pattern(200, 150, 1, 5), prog)},
      {"baseline", make_jpeg(pattern(320, 240, 3, 6))}};
  std::vector<detail::DeviceJob> jobs(inputs.size());
  std::vector<ItemReport> reps(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    jobs[i].bytes = &inputs[i].second;
    jobs[i].name = inputs[i].first;
    jobs[i].out_ext = ".jpg";
    jobs[i].rep = &reps[i];
  }
  detail::JpegDevices::Options o;
  o.encode = kEnc;
  o.reference = reference;
  run_route(o, jobs);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string& name = inputs[i].first;
    ASSERT_EQ(jobs[i].status, detail::DeviceJob::Status::done) << name << ": " << jobs[i].error;
    EqualizeOptions eo;
    eo.backend = Backend::cuda;
    const int channels = reps[i].channels;
    eo.reference = reference->histograms(default_mode(channels), channels, 8);
    const Bytes& in = inputs[i].second;
    const gpu::JpegOnDevice want =
        gpu::equalize_jpeg_on_device(eq, codec, {in.data(), in.size(), name}, eo, kEnc);
    EXPECT_EQ(jobs[i].encoded, want.bytes) << name;
    EXPECT_EQ(reps[i].decoder, want.decoder) << name;
  }
}

class MatchJpegFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "histeq-matchjpeg-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "in");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::vector<WorkItem> items(const std::string& sub) {
    fs::create_directories(dir_ / sub);
    std::vector<WorkItem> v;
    for (const auto& e : fs::directory_iterator(dir_ / "in"))
      v.push_back({e.path().string(), (dir_ / sub / e.path().filename()).string(), ""});
    return v;
  }
  fs::path dir_;
};

// --decoder gpu (every JPEG on the device route) on a folder: the files the hardware takes are
// matched in their planes, the others as pixels; each equals the helpers' or the single-file GPU
// path's bytes, in batches of 1 and 4.
TEST_F(MatchJpegFolder, DecoderGpuWritesTheRoutesBytes) {
  HISTEQ_REQUIRE_NVJPEG();
  MakeOpts prog;
  prog.progressive = true;
  MakeOpts s444;
  s444.h_samp = s444.v_samp = 1;
  write_bytes(dir_ / "in" / "rgb420.jpg", make_jpeg(pattern(640, 480, 3, 1)));
  write_bytes(dir_ / "in" / "gray.jpg", make_jpeg(pattern(300, 200, 1, 2)));
  write_bytes(dir_ / "in" / "progressive.jpg", make_jpeg(pattern(400, 300, 3, 3), prog));
  write_bytes(dir_ / "in" / "rgb444_odd.jpg", make_jpeg(pattern(333, 211, 3, 4), s444));
  write_bytes(dir_ / "in" / "hubble.jpg",
              read_bytes(test::source_path("samples/hubble_deep_field.jpg")));
  const auto reference = coffee();
  gpu::Equalizer eq;
  gpu::JpegCodec codec(eq.stream());
  if (!codec.hardware_available()) GTEST_SKIP() << "this GPU has no JPEG engine";
  for (int batch : {1, 4}) {
    ExecutorOptions o;
    o.op.kind = OpKind::match;
    o.op.reference = reference;
    o.op.equalize.backend = Backend::cuda;
    o.jpeg = JpegRoute::gpu;
    o.jobs = 3;
    o.jpeg_batch = batch;
    Executor ex(o);
    const auto its = items("out" + std::to_string(batch));
    std::vector<ItemReport> reps(its.size());
    const BatchSummary s = ex.run(its, [&](const ItemReport& r) { reps[r.index] = r; });
    EXPECT_EQ(s.failures, 0u);
    EXPECT_TRUE(s.device_started);
    std::size_t planes = 0;
    for (std::size_t i = 0; i < its.size(); ++i) {
      const ItemReport& r = reps[i];
      ASSERT_TRUE(r.ok) << r.error;
      EXPECT_EQ(r.route, "jpeg-device") << its[i].input;
      EXPECT_EQ(r.encoder, "nvjpeg") << its[i].input;
      const Bytes in = read_bytes(its[i].input);
      Bytes want;
      // The planes kind: what plan_item gives the device's planes (and the hardware decoded);
      // else the pixels kind.
      const bool candidate = gpu::planes_candidate(
          jpeg::read_info(in.data(), in.size(), its[i].input), kEnc, kDefaultMaxPixels);
      if (candidate && r.decoder == "nvjpeg-hw") {
        ++planes;
        want = hardware_planes_on_cpu(codec, in,
                                      matching(reference->histograms(Mode::luma, 3, 8)->at(0)));
      } else {
        EqualizeOptions eo;
        eo.backend = Backend::cuda;
        eo.reference = reference->histograms(default_mode(r.channels), r.channels, 8);
        want =
            gpu::equalize_jpeg_on_device(eq, codec, {in.data(), in.size(), its[i].input}, eo, kEnc)
                .bytes;
      }
      EXPECT_EQ(read_bytes(its[i].output), want)
          << its[i].input << " (decoder " << r.decoder << ", batch " << batch << ")";
    }
    EXPECT_GE(planes, 3u) << "the generated baseline files in their planes";
  }
}

// An automatic run large enough for the device route (60 x 6 MP for one CPU worker: 20 photos
// under three names each): the route's files are the hardware planes matched, the files a CPU
// worker decoded and the device matched and encoded are libjpeg-turbo's planes matched, and
// the files the CPU ran alone are the CPU planes route's bytes. The device's context exists
// before the run (the codec below), so the route is ready long before one worker is through
// the folder (20 x 6 MP alone took a fast host's worker 0.87 s, under the suite's load, before
// the route had taken a file). The wall times of the match and of the equalization of the same
// folder are printed (measures, not assertions).
TEST_F(MatchJpegFolder, AutoRunLargeEnoughMatchesOnTheDeviceRoute) {
  HISTEQ_REQUIRE_NVJPEG();
  for (int k = 0; k < 20; ++k) {
    MakeOpts o;
    o.h_samp = k % 3 == 0 ? 1 : 2;
    o.v_samp = k % 3 == 2 ? 2 : 1;
    const Bytes bytes = make_jpeg(pattern(3000, 2000, 3, unsigned(k + 1)), o);
    for (const char* name : {"p", "q", "r"})
      write_bytes(dir_ / "in" / (name + std::to_string(k) + ".jpg"), bytes);
  }
  gpu::Equalizer eq;
  gpu::JpegCodec codec(eq.stream());
  const auto reference = coffee();
  const Histogram ref = reference->histograms(Mode::luma, 3, 8)->at(0);
  ExecutorOptions o;
  o.jobs = 1;
  o.op.kind = OpKind::match;
  o.op.reference = reference;
  const auto its = items("match");
  std::vector<ItemReport> reps(its.size());
  BatchSummary s;
  {
    Executor ex(o);
    s = ex.run(its, [&](const ItemReport& r) { reps[r.index] = r; });
  }
  ASSERT_TRUE(s.device_started) << s.device_note;
  std::size_t on_device = 0, split = 0, cpu_only = 0;
  EqualizeOptions cpu_opt;
  cpu_opt.reference = reference->histograms(Mode::luma, 3, 8);
  for (std::size_t i = 0; i < its.size(); ++i) {
    const ItemReport& r = reps[i];
    ASSERT_TRUE(r.ok) << r.error;
    const Bytes in = read_bytes(its[i].input);
    Bytes want;
    if (r.route == "jpeg-device") {
      ++on_device;
      want = hardware_planes_on_cpu(codec, in, matching(ref));
    } else if (r.encoder == "nvjpeg") {  // the planes decoded by a CPU worker, matched and
      ++split;                           // encoded on the device
      // the planes, or a progressive file's coefficients and the device's inverse DCT: the
      // same samples
      EXPECT_TRUE(r.decoder == "libjpeg-turbo-ycbcr" || r.decoder == "libjpeg-turbo-coefficients")
          << r.decoder;
      want = host_planes_on_cpu(codec, jpeg::decode_planes(in.data(), in.size(), its[i].input),
                                matching(ref));
    } else {
      ++cpu_only;
      EXPECT_EQ(r.route, "jpeg-planes");
      ASSERT_TRUE(equalize_jpeg_planes(in.data(), in.size(), its[i].input, cpu_opt, kEnc,
                                       kDefaultMaxPixels, &want, nullptr, nullptr, nullptr));
    }
    EXPECT_EQ(read_bytes(its[i].output), want) << its[i].input << " (" << r.route << ")";
  }
  EXPECT_GT(on_device + split, 0u);
  ExecutorOptions e = o;
  e.op.kind = OpKind::equalize;
  e.op.reference.reset();
  BatchSummary se;
  {
    Executor ex(e);
    se = ex.run(items("equalize"));
  }
  EXPECT_EQ(se.failures, 0u);
  std::printf(
      "[ measure  ] match: %zu of %zu files on the device route, %zu decoded on the CPU and "
      "matched and encoded on the device, %zu on the CPU; %.2f s wall; the equalization of the "
      "same folder %.2f s wall (%zu files on the device route)\n",
      on_device, its.size(), split, cpu_only, s.wall_s, se.wall_s,
      se.routes.count("jpeg-device") ? se.routes.at("jpeg-device").files : std::size_t(0));
}

}  // namespace
}  // namespace histeq
