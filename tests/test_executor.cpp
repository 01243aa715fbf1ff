// test_executor.cpp — histeq::Executor in-process: on the CPU backend with a tiny cap on bytes in
// flight (every output still identical to the single-file path, reports in input order, the cap
// respected but one item always admitted), failures isolated, a codec plugged in through the
// hook; histogram matching and a counted region (the pixels route, the library's bytes); on the
// GPU (skipped without one): identical bytes to the CPU, and --devices 0,0 (two workers on one
// GPU).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/executor.hpp"
#include "histeq/image_io.hpp"
#include "histeq/item.hpp"
#include "histeq/jpeg_planes.hpp"
#include "histeq/match.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/planes.hpp"
#include "io/png_fast.hpp"
#include "pipeline/executor_run.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace histeq;

namespace {

std::vector<std::uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "histeq-exec-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "out");
    for (const char* n : {"moon.png", "chelsea.png", "astronaut.png", "coins.png", "camera.png",
                          "coffee.png", "text.png"})
      names_.push_back(n);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  /// `n` copies of one JPEG's bytes as c0.jpg, c1.jpg, ... in the test folder, each written to
  /// out/ under its name.
  std::vector<WorkItem> jpeg_copies(const std::vector<std::uint8_t>& jpg, int n) {
    std::vector<WorkItem> v;
    for (int k = 0; k < n; ++k) {
      const fs::path in = dir_ / ("c" + std::to_string(k) + ".jpg");
      std::ofstream f(in, std::ios::binary);
      f.write(reinterpret_cast<const char*>(jpg.data()), std::streamsize(jpg.size()));
      v.push_back({in.string(), (dir_ / "out" / in.filename()).string(), {}});
    }
    return v;
  }

  std::vector<WorkItem> items(const std::string& sub, const std::string& ext = ".png") {
    fs::create_directories(dir_ / sub);
    std::vector<WorkItem> v;
    for (const auto& n : names_) {
      WorkItem w;
      w.input = test::source_path("samples/" + n);
      w.output = (dir_ / sub / fs::path(n).replace_extension(ext)).string();
      v.push_back(w);
    }
    return v;
  }

  // The single-file path: load_image → equalize (CPU) → encode_image.
  std::vector<std::uint8_t> reference(const WorkItem& w, const EncodeOptions& enc = {}) {
    EqualizeOptions o;
    o.backend = Backend::cpu;
    return encode_image(equalize(load_image(w.input), o), fs::path(w.output).extension().string(),
                        enc);
  }

  fs::path dir_;
  std::vector<std::string> names_;
};

TEST_F(ExecutorTest, CpuWithATinyInflightCapMatchesTheSingleFilePath) {
  ExecutorOptions o;
  o.op.equalize.backend = Backend::cpu;
  o.jobs = 3;
  o.max_inflight_bytes = 1;  // smaller than any item: one at a time, never deadlocked
  Executor ex(o);
  const auto its = items("a");
  std::vector<std::size_t> order;
  const BatchSummary s = ex.run(its, [&](const ItemReport& r) {
    order.push_back(r.index);
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.equalize.backend, "cpu");
    EXPECT_TRUE(r.decoder == "libdeflate-png" || r.decoder == "stb_image") << r.decoder;
  });
  EXPECT_EQ(s.files, its.size());
  EXPECT_EQ(s.failures, 0u);
  ASSERT_EQ(order.size(), its.size());
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i) << "reports in input order";
  for (const WorkItem& w : its) EXPECT_EQ(read_bytes(w.output), reference(w)) << w.input;

  // Peak in flight with a cap of 1 byte is one item at a time: below the whole batch's bytes.
  ExecutorOptions big = o;
  big.max_inflight_bytes = std::size_t(1) << 30;
  Executor ex2(big);
  const BatchSummary s2 = ex2.run(items("b"));
  EXPECT_LT(s.peak_inflight_bytes, s2.peak_inflight_bytes);
  EXPECT_GT(s.peak_inflight_bytes, 0u);
}

// ExecutorOptions::report_window caps the items read and not yet reported: with 2 (and 1, taken
// as 2: the reading order needs a window of one) at most that many workers are ever busy, and
// every item still comes out, in input order, with the single-file path's bytes.
TEST_F(ExecutorTest, AReportWindowCapsTheItemsInFlight) {
  for (std::size_t window : {std::size_t(1), std::size_t(2)}) {
    ExecutorOptions o;
    o.op.equalize.backend = Backend::cpu;
    o.jobs = 3;
    o.report_window = window;
    Executor ex(o);
    const auto its = items("w" + std::to_string(window));
    std::vector<std::size_t> order;
    const BatchSummary s = ex.run(its, [&](const ItemReport& r) {
      order.push_back(r.index);
      EXPECT_TRUE(r.ok) << r.error;
    });
    EXPECT_EQ(s.failures, 0u);
    ASSERT_EQ(order.size(), its.size());
    for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i) << window;
    EXPECT_LE(s.peak_busy_workers, 2) << window;
    for (const WorkItem& w : its) EXPECT_EQ(read_bytes(w.output), reference(w)) << w.input;
  }
}

TEST_F(ExecutorTest, FailuresAreIsolatedAndNameTheFile) {
  ExecutorOptions o;
  o.op.equalize.backend = Backend::cpu;
  o.jobs = 2;
  Executor ex(o);
  auto its = items("c", ".jpg");
  its[2].input = (dir_ / "missing.png").string();
  std::vector<ItemReport> reps;
  const BatchSummary s = ex.run(its, [&](const ItemReport& r) { reps.push_back(r); });
  EXPECT_EQ(s.failures, 1u);
  ASSERT_EQ(reps.size(), its.size());
  EXPECT_FALSE(reps[2].ok);
  EXPECT_NE(reps[2].error.find("missing.png"), std::string::npos) << reps[2].error;
  EXPECT_FALSE(fs::exists(its[2].output));
  for (std::size_t i = 0; i < its.size(); ++i)
    if (i != 2) EXPECT_EQ(read_bytes(its[i].output), reference(its[i])) << its[i].input;
}

// on_progress counts the files as they finish, in any order, while the reports wait for input
// order: the files are read largest first, so the first report (moon, the sixth largest of the
// seven photos) comes after at least five have finished (one worker: each thread finishes an item
// before it takes the next, so of the five taken before moon at most one is unfinished). A file
// that fails counts among the files, not the megapixels.
TEST_F(ExecutorTest, ProgressCountsFinishedFilesBeforeTheirReports) {
  ExecutorOptions o;
  o.op.equalize.backend = Backend::cpu;
  o.jobs = 1;
  std::vector<std::pair<std::size_t, double>> told;
  o.on_progress = [&](std::size_t files, double mp) { told.emplace_back(files, mp); };
  Executor ex(o);
  auto its = items("p");
  WorkItem missing;
  missing.input = (dir_ / "missing.png").string();
  missing.output = (dir_ / "p" / "missing.png").string();
  its.push_back(missing);
  std::size_t at_first_report = 0;
  std::vector<ItemReport> reps;
  const BatchSummary s = ex.run(its, [&](const ItemReport& r) {
    if (reps.empty()) at_first_report = told.empty() ? 0 : told.back().first;
    reps.push_back(r);
  });
  ASSERT_EQ(reps.size(), its.size());
  EXPECT_EQ(s.failures, 1u);
  EXPECT_GE(at_first_report, 5u);
  ASSERT_FALSE(told.empty());
  for (std::size_t k = 1; k < told.size(); ++k) {
    EXPECT_GT(told[k].first, told[k - 1].first);
    EXPECT_GE(told[k].second, told[k - 1].second);
  }
  EXPECT_EQ(told.back().first, its.size());
  EXPECT_NEAR(told.back().second, s.megapixels, 1e-9);
  EXPECT_GT(s.megapixels, 0);
}

// A decoder that refuses one file with a cause that does not name it.
struct UnnamedFailure : Codec {
  std::string name() const override { return "unnamed"; }
  bool decode(const std::uint8_t*, std::size_t, const std::string& name, std::uint64_t,
              Image*) override {
    if (name.find("moon") != std::string::npos) throw UsageError("no name in this cause");
    return false;
  }
};

// A failure whose cause does not name the file (here a codec's; in the CLI an encoder refusing
// the image's channels) is reported with the input's path in front, so every failed item names
// its file; causes that name it already are left as they are.
TEST_F(ExecutorTest, AFailureThatDoesNotNameTheFileGetsItsPath) {
  ExecutorOptions o;
  o.op.equalize.backend = Backend::cpu;
  o.codecs.push_back(std::make_shared<UnnamedFailure>());
  Executor ex(o);
  auto its = items("n");
  its[1].input = (dir_ / "missing.png").string();
  std::vector<ItemReport> reps;
  ex.run(its, [&](const ItemReport& r) { reps.push_back(r); });
  ASSERT_EQ(reps.size(), its.size());
  ASSERT_FALSE(reps[0].ok);
  EXPECT_EQ(reps[0].error, "'" + its[0].input + "': no name in this cause");
  ASSERT_FALSE(reps[1].ok);
  EXPECT_EQ(reps[1].error, "cannot read '" + its[1].input + "': no such file")
      << "already named: left as it is";
  for (std::size_t i = 2; i < reps.size(); ++i) EXPECT_TRUE(reps[i].ok) << reps[i].error;
}

// A codec through the hook: counts its encodes and writes stb's PNG with a marker in front.
struct MarkingCodec : Codec {
  std::atomic<int> encodes{0};
  std::string name() const override { return "marking"; }
  bool encode(const Image& img, const std::string& ext, const EncodeOptions& opt,
              std::vector<std::uint8_t>* out) override {
    if (ext != ".png") return false;
    ++encodes;
    *out = {'M'};
    const auto b = encode_image(img, ext, opt);
    out->insert(out->end(), b.begin(), b.end());
    return true;
  }
};

TEST_F(ExecutorTest, CodecHookTakesTheStage) {
  auto codec = std::make_shared<MarkingCodec>();
  ExecutorOptions o;
  o.op.equalize.backend = Backend::cpu;
  o.codecs.push_back(codec);
  Executor ex(o);
  auto its = items("d");
  its[0].format = ".bmp";  // not taken by the codec: stb_image_write writes it
  std::vector<std::string> encoders;
  ex.run(its, [&](const ItemReport& r) { encoders.push_back(r.encoder); });
  EXPECT_EQ(codec->encodes.load(), int(its.size()) - 1);
  EXPECT_EQ(encoders[0], "stb_image_write");
  EXPECT_EQ(encoders[1], "marking");
  EXPECT_EQ(read_bytes(its[1].output).front(), 'M');
}

TEST_F(ExecutorTest, HistogramTaskMatchesImageHistograms) {
  ExecutorOptions o;
  o.op.kind = OpKind::histogram;
  o.op.equalize.backend = Backend::cpu;
  o.op.equalize.mode = Mode::rgb;
  Executor ex(o);
  std::vector<WorkItem> its;
  for (const auto& n : names_) its.push_back({test::source_path("samples/" + n), "", ""});
  ex.run(its, [&](const ItemReport& r) {
    ASSERT_TRUE(r.ok) << r.error;
    EqualizeOptions eo;
    eo.backend = Backend::cpu;
    eo.mode = Mode::rgb;
    EXPECT_EQ(r.equalize.histograms, image_histograms(load_image(r.input), eo)) << r.input;
  });
}

// A JPEG's plan has its size from the header (which the router and the byte budget weigh), on
// every route; its budget counts the file on the planes route (the planes exist only while a
// worker decodes it), the file, the pixels twice and a plane on the pixels route.
TEST_F(ExecutorTest, AJpegsPlanHasItsSizeAndCountsItsSamples) {
  const Image img = load_image(test::source_path("samples/chelsea.png"));
  const std::vector<std::uint8_t> jpg = encode_image(img, ".jpg", EncodeOptions{});
  const std::size_t px = std::size_t(img.width) * std::size_t(img.height);
  Operation op;
  op.equalize.backend = Backend::cpu;
  const ItemPlan planes = plan_item(jpg.data(), jpg.size(), op, ".jpg", {}, kDefaultMaxPixels, {});
  EXPECT_EQ(planes.format, "jpeg");
  EXPECT_EQ(planes.width, img.width);
  EXPECT_EQ(planes.height, img.height);
  EXPECT_EQ(planes.channels, 3);
  EXPECT_DOUBLE_EQ(planes.megapixels(), double(px) / 1e6);
  ASSERT_EQ(planes.route, ItemRoute::jpeg_planes);
  EXPECT_EQ(planes.cost, jpg.size());
  Operation clahe = op;
  clahe.kind = OpKind::clahe;
  const ItemPlan pixels =
      plan_item(jpg.data(), jpg.size(), clahe, ".jpg", {}, kDefaultMaxPixels, {});
  EXPECT_EQ(pixels.route, ItemRoute::pixels);
  EXPECT_EQ(pixels.width, img.width);
  EXPECT_EQ(pixels.cost, jpg.size() + px * 3 * 2 + px);
  // a JPEG whose header is cut before its frame: no size, the file alone
  const std::size_t cut = 20;
  const ItemPlan none = plan_item(jpg.data(), cut, op, ".jpg", {}, kDefaultMaxPixels, {});
  EXPECT_EQ(none.width, 0);
  EXPECT_EQ(none.cost, cut);
  // a frame header declaring 60000 x 60000, past --max-pixels: the decoder refuses it, so the
  // budget counts the file alone (not 25 GB that would drain the run before it)
  std::vector<std::uint8_t> huge = jpg;
  std::size_t sof = 2;
  while (sof + 9 < huge.size() &&
         !(huge[sof] == 0xFF &&
           (huge[sof + 1] == 0xC0 || huge[sof + 1] == 0xC1 || huge[sof + 1] == 0xC2)))
    ++sof;
  ASSERT_LT(sof + 9, huge.size());
  for (const std::size_t at : {sof + 5, sof + 7}) {  // height, width: 60000 = 0xEA60
    huge[at] = 0xEA;
    huge[at + 1] = 0x60;
  }
  const ItemPlan big =
      plan_item(huge.data(), huge.size(), clahe, ".jpg", {}, kDefaultMaxPixels, {});
  EXPECT_EQ(big.width, 60000);
  EXPECT_EQ(big.cost, huge.size());
  const ItemPlan allowed =
      plan_item(huge.data(), huge.size(), clahe, ".jpg", {}, std::uint64_t(1) << 32, {});
  EXPECT_GT(allowed.cost, std::size_t(60000) * 60000);
}

// A region changes the plan: a colour JPEG to JPEG in luma mode, which an equalization takes on
// the stored-planes route (and on the device route when the device takes JPEGs), runs on the
// pixels route; histogram matching is planned as the equalization is (it matches the stored Y),
// at 8 bits. The executor's output is the library's stage sequence with that region, and the
// CPU planes route's matching of Y, byte for byte.
TEST_F(ExecutorTest, ARegionRunsOnThePixelsRouteAndMatchingWhereEqualizationRuns) {
  const Image img = load_image(test::source_path("samples/chelsea.png"));
  const std::vector<std::uint8_t> jpg = encode_image(img, ".jpg", EncodeOptions{});
  Operation op;
  op.equalize.backend = Backend::cpu;
  RouteChoice choice;
  ItemPlan p = plan_item(jpg.data(), jpg.size(), op, ".jpg", {}, kDefaultMaxPixels, choice);
  ASSERT_TRUE(p.cpu_planes) << "the plain equalization takes the planes route";
  ASSERT_EQ(p.route, ItemRoute::jpeg_planes);
  Operation masked = op;
  masked.equalize.region.roi = Roi{10, 20, 200, 100};
  Operation match = op;
  match.kind = OpKind::match;
  match.reference = std::make_shared<const MatchReference>(
      load_image(test::source_path("samples/coffee.png")), "coffee.png");
  Operation match16 = match;
  match16.depth = 16;
  const RouteChoice device_planes{true, false, true}, device_all{true, true, true};
  for (const RouteChoice c : {choice, device_planes, device_all}) {
    const ItemPlan eq = plan_item(jpg.data(), jpg.size(), op, ".jpg", {}, kDefaultMaxPixels, c);
    p = plan_item(jpg.data(), jpg.size(), masked, ".jpg", {}, kDefaultMaxPixels, c);
    EXPECT_FALSE(p.cpu_planes);
    EXPECT_FALSE(p.device_planes);
    EXPECT_EQ(p.route, ItemRoute::pixels);
    p = plan_item(jpg.data(), jpg.size(), match, ".jpg", {}, kDefaultMaxPixels, c);
    EXPECT_TRUE(p.cpu_planes);
    EXPECT_EQ(p.device_planes, eq.device_planes);
    EXPECT_EQ(p.route, eq.route);
    EXPECT_EQ(p.cost, eq.cost);
    p = plan_item(jpg.data(), jpg.size(), match16, ".jpg", {}, kDefaultMaxPixels, c);
    EXPECT_FALSE(p.cpu_planes);
    EXPECT_FALSE(p.device_planes);
    EXPECT_EQ(p.route, ItemRoute::pixels);
  }
  // With the device taking JPEGs, matching goes there (its planes where nvJPEG is built).
  p = plan_item(jpg.data(), jpg.size(), match, ".jpg", {}, kDefaultMaxPixels, device_all);
  EXPECT_EQ(p.route, ItemRoute::jpeg_device);
  p = plan_item(jpg.data(), jpg.size(), match, ".jpg", {}, kDefaultMaxPixels, device_planes);
  EXPECT_EQ(p.device_planes, gpu::nvjpeg_built());
  EXPECT_EQ(p.route, gpu::nvjpeg_built() ? ItemRoute::jpeg_device : ItemRoute::jpeg_planes);

  {
    std::ofstream f(dir_ / "c.jpg", std::ios::binary);
    f.write(reinterpret_cast<const char*>(jpg.data()), std::streamsize(jpg.size()));
  }
  const Image decoded = load_image((dir_ / "c.jpg").string());
  for (const Operation& o : {masked, match}) {
    ExecutorOptions eo;
    eo.op = o;
    eo.jobs = 2;
    Executor ex(eo);
    const std::string out = (dir_ / "out" / "c.jpg").string();
    const BatchSummary s = ex.run({{(dir_ / "c.jpg").string(), out, {}}}, [&](const ItemReport& r) {
      EXPECT_TRUE(r.ok) << r.error;
      EXPECT_EQ(r.route, o.reference ? "jpeg-planes" : "pixels");
    });
    EXPECT_EQ(s.failures, 0u);
    EqualizeOptions lo = o.equalize;
    if (o.reference) {  // Y of the stored planes matched to the reference's luma
      lo.reference = o.reference->histograms(Mode::luma, 3, 8);
      std::vector<std::uint8_t> want;
      ASSERT_TRUE(equalize_jpeg_planes(jpg.data(), jpg.size(), "c.jpg", lo,
                                       {95, jpeg::Subsampling::s420}, kDefaultMaxPixels, &want,
                                       nullptr, nullptr, nullptr));
      EXPECT_EQ(read_bytes(out), want);
      continue;
    }
    lo.mode = Mode::luma;
    EqualizeReport rep;
    const Image want = cpu::equalize_stages(decoded, lo, true, 1, rep);
    EXPECT_EQ(read_bytes(out), encode_image(want, ".jpg", EncodeOptions{}));
  }
}

TEST_F(ExecutorTest, MatchingAFolderGivesTheLibrarysBytes) {
  ExecutorOptions o;
  o.op.kind = OpKind::match;
  o.op.equalize.backend = Backend::cpu;
  o.op.reference = std::make_shared<const MatchReference>(
      load_image(test::source_path("samples/camera.png")), "camera.png");
  o.jobs = 3;
  Executor ex(o);
  const auto its = items("m");
  const BatchSummary s = ex.run(its, [](const ItemReport& r) { EXPECT_TRUE(r.ok) << r.error; });
  EXPECT_EQ(s.failures, 0u);
  for (const WorkItem& w : its) {
    const Image in = load_image(w.input);
    EqualizeOptions lo = o.op.equalize;
    const Mode m = default_mode(in.channels);
    lo.reference = o.op.reference->histograms(m, in.channels, 8);
    EqualizeReport rep;
    EXPECT_TRUE(load_image(w.output).pixels == cpu::equalize_stages(in, lo, true, 1, rep).pixels)
        << w.input;
  }
  // Without a reference the executor refuses the operation before any work.
  ExecutorOptions none = o;
  none.op.reference.reset();
  EXPECT_THROW(Executor{none}, UsageError);
}

// Each failed item says what kind of failure it was (ItemReport::error_kind, from the exception's
// type), so that callers (the Python package) need not read the message: a missing input and an
// output that is a folder are file failures with their errno and path, bytes that are no image
// a decode failure; a good item none.
TEST_F(ExecutorTest, FailedItemsNameTheirKindOfFailure) {
  fs::create_directories(dir_ / "kinds" / "taken.png");  // an output path that is a folder
  const fs::path junk = dir_ / "kinds" / "junk.png";
  std::ofstream(junk, std::ios::binary) << "not an image at all";
  // A JPEG cut short, to a JPEG: the CPU's planes route refuses its data (a decode failure too).
  const auto jpg = read_bytes(test::source_path("samples/hubble_deep_field.jpg"));
  const fs::path cut = dir_ / "kinds" / "cut.jpg";
  std::ofstream(cut, std::ios::binary)
      .write(reinterpret_cast<const char*>(jpg.data()), std::streamsize(jpg.size() / 3));
  std::vector<WorkItem> its(5);
  its[4].input = cut.string();
  its[4].output = (dir_ / "kinds" / "cut_out.jpg").string();
  its[0].input = (dir_ / "kinds" / "missing.png").string();
  its[0].output = (dir_ / "kinds" / "out0.png").string();
  its[1].input = test::source_path("samples/moon.png");
  its[1].output = (dir_ / "kinds" / "taken.png").string();
  its[2].input = junk.string();
  its[2].output = (dir_ / "kinds" / "out2.png").string();
  its[3].input = test::source_path("samples/coins.png");
  its[3].output = (dir_ / "kinds" / "out3.png").string();
  ExecutorOptions o;
  o.op.equalize.backend = Backend::cpu;
  o.jobs = 2;
  Executor ex(o);
  std::vector<ItemReport> reps;
  ex.run(its, [&](const ItemReport& r) { reps.push_back(r); });
  ASSERT_EQ(reps.size(), 5u);
  EXPECT_EQ(reps[0].error_kind, ItemError::file) << reps[0].error;
  EXPECT_EQ(reps[0].error_errno, ENOENT);
  EXPECT_EQ(reps[0].error_path, its[0].input);
  EXPECT_EQ(reps[1].error_kind, ItemError::file) << reps[1].error;
  EXPECT_EQ(reps[1].error_errno, EISDIR);
  EXPECT_EQ(reps[1].error_path, its[1].output);
  EXPECT_FALSE(reps[2].ok);
  EXPECT_EQ(reps[2].error_kind, ItemError::decode) << reps[2].error;
  EXPECT_EQ(reps[2].error_errno, 0);
  EXPECT_TRUE(reps[3].ok) << reps[3].error;
  EXPECT_EQ(reps[3].error_kind, ItemError::none);
  EXPECT_FALSE(reps[4].ok);
  EXPECT_EQ(reps[4].error_kind, ItemError::decode) << reps[4].error;
  EXPECT_STREQ(to_string(ItemError::file), "file");
  EXPECT_STREQ(to_string(ItemError::cancelled), "cancelled");
}

// The device route's start rule: finite seconds >= 0, the policy's by default.
TEST_F(ExecutorTest, TheDeviceStartRuleIsValidated) {
  EXPECT_EQ(ExecutorOptions{}.device_start_cpu_s, kDeviceStartCpuS);
  for (const double bad : {-1.0, -1e-9, std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    ExecutorOptions o;
    o.device_start_cpu_s = bad;
    try {
      Executor ex(o);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("device_start_cpu_s"), std::string::npos) << e.what();
    }
  }
  for (const double good : {0.0, 0.25, 1e9}) {
    ExecutorOptions o;
    o.device_start_cpu_s = good;
    EXPECT_NO_THROW(Executor{o}) << good;
  }
  // and the encoder's: the same, by its own name; its slots >= 0
  EXPECT_EQ(ExecutorOptions{}.encoder_start_cpu_s, kEncoderStartCpuS);
  EXPECT_LT(kEncoderStartCpuS, kDeviceStartCpuS) << "the policy has an encoder-only band";
  for (const double bad : {-1.0, std::nan(""), HUGE_VAL}) {
    ExecutorOptions o;
    o.encoder_start_cpu_s = bad;
    try {
      Executor ex(o);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("encoder_start_cpu_s"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(ExecutorOptions{}.encoder_slots, kJpegEncoderSlotsPerDevice);
  ExecutorOptions slots;
  slots.encoder_slots = -1;
  EXPECT_THROW(Executor{slots}, UsageError);
  slots.encoder_slots = 0;
  EXPECT_NO_THROW(Executor{slots});
  EXPECT_EQ(ExecutorOptions{}.encoder_states, 0) << "the policy's";
  ExecutorOptions states;
  states.encoder_states = -1;
  EXPECT_THROW(Executor{states}, UsageError);
  states.encoder_states = 2;
  EXPECT_NO_THROW(Executor{states});
}

// The count of hybrid decoders: >= 0 (0: the policy's).
TEST_F(ExecutorTest, TheHybridDecoderCountIsValidated) {
  ExecutorOptions o;
  o.hybrid_decoders = -1;
  try {
    Executor ex(o);
    ADD_FAILURE() << "accepted -1";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("hybrid decoders"), std::string::npos) << e.what();
  }
  for (const int good : {0, 1, 8}) {
    o.hybrid_decoders = good;
    EXPECT_NO_THROW(Executor{o}) << good;
  }
  o.gpu_huffman_decoders = -1;  // and the count of GPU Huffman ones among them
  try {
    Executor ex(o);
    ADD_FAILURE() << "accepted -1 GPU Huffman decoders";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU Huffman decoders"), std::string::npos) << e.what();
  }
  for (const int good : {0, 2}) {
    o.gpu_huffman_decoders = good;
    EXPECT_NO_THROW(Executor{o}) << good;
  }
}

// The rule weighs the run's JPEGs (from their headers) against the CPU workers at the router's
// assumed rate: one JPEG of W x H pixels with one worker starts the device route (backend auto,
// decoder auto) under W*H/1e6 / kCpuMpPerWorker seconds, and not from there; 0 starts it for
// any JPEG. Where no device can run, it started and failed (the note says why) and the CPU ran
// the file, the same bytes; with no nvJPEG in the build it is never in play.
TEST_F(ExecutorTest, TheDeviceStartRuleWeighsTheJpegsAgainstTheCpuWorkers) {
  const Image img = load_image(test::source_path("samples/chelsea.png"));
  const std::vector<std::uint8_t> jpg = encode_image(img, ".jpg", EncodeOptions{});
  {
    std::ofstream f(dir_ / "c.jpg", std::ios::binary);
    f.write(reinterpret_cast<const char*>(jpg.data()), std::streamsize(jpg.size()));
  }
  const double cpu_s = double(img.pixel_count()) / 1e6 / detail::kCpuMpPerWorker;
  std::string why;
  const bool gpu = test::gpu_available(&why);
  int runs = 0;
  const auto run = [&](double start_s, double encoder_s = kEncoderStartCpuS,
                       int encoder_slots = kJpegEncoderSlotsPerDevice) {
    ExecutorOptions o;
    o.jobs = 1;
    o.device_start_cpu_s = start_s;
    o.encoder_start_cpu_s = encoder_s;
    o.encoder_slots = encoder_slots;
    o.router_measures = false;  // (the assumed rate alone: the next test measures)
    Executor ex(o);
    const std::string out = (dir_ / "out" / ("c" + std::to_string(runs++) + ".jpg")).string();
    const BatchSummary s = ex.run({{(dir_ / "c.jpg").string(), out, {}}},
                                  [](const ItemReport& r) { EXPECT_TRUE(r.ok) << r.error; });
    EXPECT_EQ(s.failures, 0u);
    if (!gpu) EXPECT_EQ(read_bytes(out), read_bytes(dir_ / "out" / "c0.jpg")) << start_s;
    return s;
  };
  const BatchSummary policy = run(kDeviceStartCpuS), above = run(cpu_s * 1.02),
                     below = run(cpu_s * 0.98), zero = run(0);
  for (const BatchSummary* s : {&policy, &above}) {
    EXPECT_FALSE(s->device_started);
    EXPECT_EQ(s->device_note.rfind("not started", 0) == 0, gpu::nvjpeg_built()) << s->device_note;
  }
  // A start that failed (no usable device) is no route that ran: not started, and says why.
  for (const BatchSummary* s : {&below, &zero}) {
    EXPECT_EQ(s->device_started, gpu::nvjpeg_built() && gpu) << s->device_note;
    EXPECT_EQ(s->device_note.find("not started"), std::string::npos) << s->device_note;
    if (gpu::nvjpeg_built() && !gpu)
      EXPECT_EQ(s->device_note.rfind("failed: ", 0), 0u) << s->device_note;
    if (gpu) EXPECT_TRUE(s->device_note.empty()) << s->device_note;
  }
  // Between the encoder's rule and the whole route's, the encoder alone starts: the CPU worker
  // decodes (no hardware decoder is made, nothing is queued for it).
  const BatchSummary encoder = run(cpu_s * 1.02, cpu_s * 0.98);
  EXPECT_EQ(encoder.device_started, gpu::nvjpeg_built() && gpu) << encoder.device_note;
  if (gpu::nvjpeg_built() && !gpu)
    EXPECT_EQ(encoder.device_note.rfind("failed: ", 0), 0u) << encoder.device_note;
  if (gpu) {
    EXPECT_EQ(encoder.device_note.rfind("encoder only: ", 0), 0u) << encoder.device_note;
    EXPECT_EQ(encoder.device_init_ms, 0.0) << "no hardware decoder";
    EXPECT_EQ(encoder.routes.count("jpeg-device"), 0u);
  }
  // ... and with no encoder slot, or a rule not below the whole route's, nothing starts.
  for (const BatchSummary& s : {run(cpu_s * 1.02, 0, 0), run(cpu_s * 1.02, cpu_s * 1.03)})
    EXPECT_FALSE(s.device_started) << s.device_note;
}

// ExecutorOptions::router_measures: where the run's JPEGs would need more than the encoder's
// start rule at the assumed rate but not at the fastest (kCpuMpPerWorkerFast), the router waits
// for the rate the workers measure on their first files, says it in the note, and starts the
// route's encoder alone only where the JPEGs need more than the rule at that rate. Six copies of
// one JPEG, one worker, the rule just under what the assumed rate needs: a worker here runs such a
// file at over 100 MP/s, so the router does not start it (its decision is checked against the
// rate it says, whatever that is). With the assumed rate alone, the encoder starts.
TEST_F(ExecutorTest, TheRouterWaitsForTheWorkersRateWhereTheAssumedOneIsNotClear) {
  if (!gpu::nvjpeg_built()) GTEST_SKIP() << "no nvJPEG in the build: no device route to weigh";
  const Image img = load_image(test::source_path("samples/chelsea.png"));
  const std::vector<std::uint8_t> jpg = encode_image(img, ".jpg", EncodeOptions{});
  const std::vector<WorkItem> items = jpeg_copies(jpg, 6);
  const double mp = 6 * double(img.pixel_count()) / 1e6;
  const double start_s = 0.98 * mp / detail::kCpuMpPerWorker;  // (over mp / the fastest rate)
  ASSERT_GT(start_s, mp / detail::kCpuMpPerWorkerFast);
  std::string why;
  const bool gpu = test::gpu_available(&why);
  const auto run = [&](bool measure) {
    ExecutorOptions o;
    o.jobs = 1;
    o.encoder_start_cpu_s = start_s;  // (the whole route's rule, two seconds, far off)
    o.router_measures = measure;
    Executor ex(o);
    const BatchSummary s = ex.run(items, [](const ItemReport& r) { EXPECT_TRUE(r.ok) << r.error; });
    EXPECT_EQ(s.failures, 0u);
    return s;
  };
  const BatchSummary measured = run(true);
  const std::string& note = measured.device_note;
  const std::string said = " MP/s each their first files say";
  const std::size_t at = note.find(said);
  if (note.rfind("not started: ", 0) == 0) {
    ASSERT_NE(at, std::string::npos) << note;
    const std::size_t from = note.rfind("at the ", at);
    ASSERT_NE(from, std::string::npos) << note;
    const double rate = std::stod(note.substr(from + 7, at - from - 7));
    EXPECT_GE(rate * start_s, mp * 0.99) << note;  // (the note's rate is rounded)
    EXPECT_FALSE(measured.device_started);
  } else {  // slower than the rule needs (a loaded machine): started, or failed without a GPU
    EXPECT_EQ(measured.device_started, gpu) << note;
    EXPECT_EQ(note.rfind(gpu ? "encoder only: " : "failed: ", 0), 0u) << note;
    if (gpu) EXPECT_NE(note.find(" ms into the run"), std::string::npos) << note;
  }
  // The assumed rate alone starts the encoder at once.
  const BatchSummary assumed = run(false);
  EXPECT_EQ(assumed.device_started, gpu) << assumed.device_note;
  EXPECT_EQ(assumed.device_note.rfind(gpu ? "encoder only: " : "failed: ", 0), 0u)
      << assumed.device_note;
  for (const WorkItem& w : items) EXPECT_TRUE(fs::exists(w.output)) << w.output;
}

// The executor puts a match on the JPEG device route wherever it puts an equalization: with
// --decoder auto a run of JPEGs weighs the device route (too small here: "not started", so no
// device is touched, with a GPU or without), and leaves it out of play (no note) for a counted
// region, a depth of 16, the CPU backend and --decoder cpu, as for an equalization.
TEST_F(ExecutorTest, MatchingIsWeighedForTheJpegDeviceRouteAsEqualizationIs) {
  const std::vector<std::uint8_t> jpg =
      encode_image(load_image(test::source_path("samples/chelsea.png")), ".jpg", EncodeOptions{});
  {
    std::ofstream f(dir_ / "c.jpg", std::ios::binary);
    f.write(reinterpret_cast<const char*>(jpg.data()), std::streamsize(jpg.size()));
  }
  const auto weighed = [&](const ExecutorOptions& o, const char* out = "c.jpg") {
    Executor ex(o);
    const BatchSummary s = ex.run({{(dir_ / "c.jpg").string(), (dir_ / "out" / out).string(), {}}},
                                  [](const ItemReport& r) { EXPECT_TRUE(r.ok) << r.error; });
    EXPECT_FALSE(s.device_started);
    return s.device_note.find("not started") != std::string::npos;
  };
  ExecutorOptions eq;
  eq.jobs = 1;
  ExecutorOptions match = eq;
  match.op.kind = OpKind::match;
  match.op.reference = std::make_shared<const MatchReference>(
      load_image(test::source_path("samples/coffee.png")), "coffee.png");
  EXPECT_EQ(weighed(eq), gpu::nvjpeg_built());
  EXPECT_EQ(weighed(match), weighed(eq));
  ExecutorOptions o = match;
  o.op.equalize.region.roi = Roi{0, 0, 50, 50};
  EXPECT_FALSE(weighed(o)) << "a region";
  o = match;
  EXPECT_EQ(weighed(o, "c.png"), gpu::nvjpeg_built()) << "a PNG output at 8 bits";
  o.op.depth = 16;
  EXPECT_FALSE(weighed(o, "c.png")) << "a depth of 16";
  o = match;
  o.op.equalize.backend = Backend::cpu;
  EXPECT_FALSE(weighed(o)) << "the CPU backend";
  o = match;
  o.jpeg = JpegRoute::cpu;
  EXPECT_FALSE(weighed(o)) << "--decoder cpu";
}

// The fast PNG decoder either declines a file or gives exactly stb_image's pixels: every PNG of
// the samples, the goldens and the fuzz corpora (damaged files included), whole and truncated,
// and with one byte flipped in the image data.
TEST(FastPng, DeclinesOrMatchesStbOnEveryPngWeHave) {
  const auto dec = make_fast_png_decoder();
  std::vector<fs::path> files;
  for (const char* dir : {"samples", "tests/data", "tests/fuzz"}) {
    const fs::path root = test::source_path(dir);
    if (!fs::exists(root)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      if (!e.is_regular_file()) continue;
      const auto b = read_bytes(e.path());
      if (b.size() >= 8 && b[0] == 0x89 && b[1] == 'P') files.push_back(e.path());
    }
  }
  ASSERT_GT(files.size(), 10u);
  int taken = 0;
  for (const fs::path& f : files) {
    const auto whole = read_bytes(f);
    std::vector<std::vector<std::uint8_t>> variants = {whole};
    variants.emplace_back(whole.begin(), whole.begin() + std::ptrdiff_t(whole.size() * 2 / 3));
    auto flipped = whole;
    flipped[flipped.size() / 2] ^= 0x10;
    variants.push_back(flipped);
    for (const auto& v : variants) {
      Image fast;
      if (!dec->decode(v.data(), v.size(), f.string(), kDefaultMaxPixels, &fast)) continue;
      ++taken;
      Image ref;
      ASSERT_NO_THROW(ref = decode_image(v.data(), v.size(), f.string())) << f;
      EXPECT_EQ(fast.width, ref.width) << f;
      EXPECT_EQ(fast.height, ref.height) << f;
      EXPECT_EQ(fast.channels, ref.channels) << f;
      EXPECT_TRUE(fast.pixels == ref.pixels) << f;
    }
    // Over the pixel limit: declined (stb reports it with the limit in the message).
    Image img;
    EXPECT_FALSE(dec->decode(whole.data(), whole.size(), f.string(), 0, &img)) << f;
  }
  EXPECT_GT(taken, 5) << "the common PNGs are taken";
}

// ---- GPU (skipped without a usable device) ----

TEST_F(ExecutorTest, GpuOutputsIdenticalToCpuAndTwoWorkersOnOneDevice) {
  HISTEQ_REQUIRE_GPU();
  for (const std::vector<int>& devs : {std::vector<int>{}, std::vector<int>{0, 0}}) {
    ExecutorOptions o;
    o.op.equalize.backend = Backend::cuda;
    o.devices = devs;
    o.jobs = 4;
    o.max_inflight_bytes = std::size_t(4) << 20;
    Executor ex(o);
    const std::string sub = devs.empty() ? "g1" : "g00";
    const auto its = items(sub);
    const BatchSummary s = ex.run(its, [&](const ItemReport& r) {
      EXPECT_TRUE(r.ok) << r.error;
      EXPECT_EQ(r.equalize.backend, "cuda") << r.input;
    });
    EXPECT_EQ(s.failures, 0u);
    for (const WorkItem& w : its) EXPECT_EQ(read_bytes(w.output), reference(w)) << w.input;
  }
}

TEST_F(ExecutorTest, GpuAutoBackendGivesTheSameBytesWhicheverBackendRanEachItem) {
  HISTEQ_REQUIRE_GPU();
  ExecutorOptions o;  // backend auto: early items may run on the CPU while CUDA starts
  o.jobs = 2;
  Executor ex(o);
  const auto its = items("auto");
  ex.run(its);
  EXPECT_EQ(ex.cpu_fallback_reason(), "");
  for (const WorkItem& w : its) EXPECT_EQ(read_bytes(w.output), reference(w)) << w.input;
}

TEST_F(ExecutorTest, CudaBackendWithoutADeviceFailsTheRun) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a CUDA device is present; this checks the no-GPU path";
  ExecutorOptions o;
  o.op.equalize.backend = Backend::cuda;
  Executor ex(o);
  EXPECT_THROW(ex.run(items("nogpu")), Error);
}

}  // namespace

// Records how many decodes run at once; each waits (up to a generous limit, not a timing
// assertion: only a way to let the others arrive) until `target` are inside, then declines so the
// built-in decoder runs. With a budget that admits fewer items than workers the peak stays below.
struct ConcurrencyProbe : Codec {
  explicit ConcurrencyProbe(int t) : target(t) {}
  int target;
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0, peak = 0;
  std::string name() const override { return "probe"; }
  bool decode(const std::uint8_t*, std::size_t, const std::string&, std::uint64_t,
              Image*) override {
    std::unique_lock<std::mutex> lock(mu);
    peak = std::max(peak, ++inside);
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(20), [&] { return peak >= target; });
    --inside;
    return false;
  }
};

TEST_F(ExecutorTest, DefaultBudgetKeepsEveryWorkerBusyOnBigImages) {
  // 4 RGB images of 2900x2900 (25 MB decoded each): the default cap for 4 jobs must admit all
  // four at once (the former 256 MiB default with a 3x-decoded estimate admitted two).
  constexpr int kJobs = 4, kW = 2900, kH = 2900;
  Image big;
  big.width = kW;
  big.height = kH;
  big.channels = 3;
  big.pixels.resize(std::size_t(kW) * kH * 3);
  for (std::size_t i = 0; i < big.pixels.size(); ++i) big.pixels[i] = std::uint8_t((i / 3) % 251);
  EncodeOptions fast;
  fast.png_level = 1;
  const std::vector<std::uint8_t> png = encode_image(big, ".png", fast);
  std::vector<WorkItem> its;
  for (int i = 0; i < kJobs; ++i) {
    WorkItem w;
    w.input = (dir_ / ("big" + std::to_string(i) + ".png")).string();
    w.output = (dir_ / "out" / ("big" + std::to_string(i) + ".bmp")).string();  // quick to write
    std::ofstream(w.input, std::ios::binary)
        .write(reinterpret_cast<const char*>(png.data()), std::streamsize(png.size()));
    its.push_back(w);
  }
  auto probe = std::make_shared<ConcurrencyProbe>(kJobs);
  ExecutorOptions o;
  o.op.equalize.backend = Backend::cpu;
  o.jobs = kJobs;
  o.codecs.push_back(probe);
  Executor ex(o);
  const BatchSummary s = ex.run(its);
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(s.max_inflight_bytes, default_max_inflight_bytes(kJobs));
  EXPECT_EQ(probe->peak, kJobs) << "decodes running at once; cap " << (s.max_inflight_bytes >> 20)
                                << " MB, peak in flight " << (s.peak_inflight_bytes >> 20) << " MB";
  EXPECT_EQ(s.peak_busy_workers, kJobs);
  // The cap is still a cap: one smaller than an item runs the items one at a time.
  auto probe1 = std::make_shared<ConcurrencyProbe>(kJobs);
  o.codecs = {probe1};
  o.max_inflight_bytes = std::size_t(40) << 20;
  Executor ex1(o);
  probe1->target = 1;  // do not wait: one at a time is what is expected
  const BatchSummary s1 = ex1.run(its);
  EXPECT_EQ(s1.failures, 0u);
  EXPECT_EQ(probe1->peak, 1);
  EXPECT_EQ(s1.peak_busy_workers, 1);  // each item alone costs more than the cap
}

// A device route whose start failed (no usable device) takes no more files: the reader queues them
// for the CPU workers in reading order, so reports keep their order and a cancel() from the first
// report still finds files not started (the route used to hand each one back to the front of the
// workers' queue, the last read taken first).
TEST_F(ExecutorTest, AFailedDeviceRouteLeavesTheFilesToTheCpuInOrder) {
  if (!gpu::nvjpeg_built()) GTEST_SKIP() << "no nvJPEG in the build: no device route";
  std::string why;
  if (test::gpu_available(&why)) GTEST_SKIP() << "a usable GPU: the route runs";
  const std::vector<std::uint8_t> jpg =
      encode_image(load_image(test::source_path("samples/chelsea.png")), ".jpg", EncodeOptions{});
  const std::vector<WorkItem> its = jpeg_copies(jpg, 40);
  ExecutorOptions o;
  o.jobs = 1;
  o.device_start_cpu_s = 0;  // the whole route at once: it fails here
  Executor ex(o);
  // One worker runs them in reading order (the same sizes: input order): written in that order,
  // but where a file's write (on a thread without the slot) outlasts the next file's work.
  const BatchSummary all = ex.run(its);
  EXPECT_EQ(all.failures, 0u);
  EXPECT_EQ(all.device_note.rfind("failed: ", 0), 0u) << all.device_note;
  // The runtime's cause, as the CLI's note on stderr gives it (it said "no CUDA device found"
  // where the runtime had said the driver was missing or too old).
  std::string cause;
  if (!cuda_available(&cause) && cause.rfind("the device cannot run", 0) != 0)
    EXPECT_EQ(all.device_note, "failed: " + cause);
  std::size_t inversions = 0;
  for (std::size_t k = 1; k < its.size(); ++k)
    inversions += fs::last_write_time(its[k - 1].output) > fs::last_write_time(its[k].output);
  EXPECT_LT(inversions, its.size() / 4) << "files written out of their reading order";
  for (const WorkItem& w : its) fs::remove(w.output);
  std::size_t cancelled = 0, next = 0;
  const BatchSummary s = ex.run(its, [&](const ItemReport& r) {
    EXPECT_EQ(r.index, next++);
    if (r.index == 0) ex.cancel();
    if (!r.ok) {
      EXPECT_EQ(r.error_kind, ItemError::cancelled) << r.error;
      ++cancelled;
    }
  });
  EXPECT_EQ(next, its.size());
  EXPECT_EQ(s.device_note.rfind("failed: ", 0), 0u) << s.device_note;
  EXPECT_GT(cancelled, 0u) << "one worker: files had not started";
}

TEST_F(ExecutorTest, CancelStopsStartingFilesAndTheNextRunStartsAfresh) {
  std::vector<WorkItem> its;
  for (int k = 0; k < 30; ++k)
    for (const auto& n : names_) {
      WorkItem w;
      w.input = test::source_path("samples/" + n);
      w.output = (dir_ / "out" / (std::to_string(k) + "-" + fs::path(n).stem().string() + ".png"))
                     .string();
      its.push_back(w);
    }
  ExecutorOptions o;
  o.op.equalize.backend = Backend::cpu;
  o.jobs = 1;
  Executor ex(o);
  // Cancelled from the first report: the files in progress finish, the others are not started.
  std::size_t ok = 0, cancelled = 0, next = 0;
  const BatchSummary s = ex.run(its, [&](const ItemReport& r) {
    EXPECT_EQ(r.index, next++) << "in input order still";
    if (r.index == 0) ex.cancel();
    if (r.ok) {
      ++ok;
      EXPECT_TRUE(fs::exists(r.output)) << r.output;
    } else {
      EXPECT_EQ(r.error, "'" + r.input + "': cancelled");
      EXPECT_EQ(r.error_kind, ItemError::cancelled);
      EXPECT_FALSE(fs::exists(r.output)) << r.output;
      ++cancelled;
    }
  });
  EXPECT_EQ(next, its.size());
  EXPECT_GE(ok, 1u);
  EXPECT_GT(cancelled, 0u) << "one worker: files had not started";
  EXPECT_EQ(s.failures, cancelled);
  // The next run is not cancelled, nor is one after a cancel() that came with no run.
  ex.cancel();
  std::size_t again = 0;
  ex.run(its, [&](const ItemReport& r) { again += r.ok ? 1 : 0; });
  EXPECT_EQ(again, its.size());
  // Cancelled before any file is read (during the run's checks and before_files): nothing is
  // read, nothing written, every item reported cancelled.
  const fs::path none = dir_ / "none";
  std::vector<WorkItem> elsewhere = its;
  for (WorkItem& w : elsewhere) w.output = (none / fs::path(w.output).filename()).string();
  std::size_t cancelled_early = 0;
  ex.run(
      elsewhere, [&](const ItemReport& r) { cancelled_early += r.ok ? 0 : 1; },
      [&] { ex.cancel(); });
  EXPECT_EQ(cancelled_early, elsewhere.size());
  EXPECT_FALSE(fs::exists(none));
  // From another thread, while the run goes: it returns, each item written or cancelled.
  std::size_t written = 0, stopped = 0;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    ex.cancel();
  });
  ex.run(its, [&](const ItemReport& r) {
    if (r.ok)
      ++written;
    else if (r.error == "'" + r.input + "': cancelled")
      ++stopped;
  });
  canceller.join();
  EXPECT_EQ(written + stopped, its.size());
}

TEST_F(ExecutorTest, ManyItemsOfMixedSizesReportInInputOrder) {
  // More items than the report window (16 here; the policy's is larger than this test's
  // items), of different sizes: the reader takes the largest first within windows of 8; every
  // report must still come in input order, and nothing deadlocks.
  std::vector<WorkItem> its;
  for (int k = 0; k < 15; ++k)
    for (const auto& n : names_) {
      WorkItem w;
      w.input = test::source_path("samples/" + n);
      w.output = (dir_ / "out" / (std::to_string(k) + "-" + fs::path(n).stem().string() + ".bmp"))
                     .string();
      its.push_back(w);
    }
  ExecutorOptions o;
  o.op.equalize.backend = Backend::cpu;
  o.jobs = 2;
  o.report_window = 16;
  Executor ex(o);
  std::size_t next = 0;
  const BatchSummary s = ex.run(its, [&](const ItemReport& r) {
    EXPECT_EQ(r.index, next) << r.input;
    ++next;
    EXPECT_TRUE(r.ok) << r.error;
  });
  EXPECT_EQ(next, its.size());
  EXPECT_EQ(s.failures, 0u);
}

namespace histeq {
namespace {

// --backend auto runs PNG batches on the CPU (no CUDA start-up: the CPU equalizes a photo in a
// few ms, a context costs 0.3 s), and starts the device route for JPEGs only when the run is
// large enough for its start-up to pay; --decoder gpu starts it whatever the size.
TEST_F(ExecutorTest, AutoStartsTheDeviceRouteOnlyWhenItPays) {
  HISTEQ_REQUIRE_GPU();
  ExecutorOptions o;
  o.jobs = 2;
  Executor ex(o);  // --backend auto
  const auto pngs = items("png");
  BatchSummary s = ex.run(pngs, [&](const ItemReport& r) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.equalize.backend, "cpu") << r.input;
  });
  EXPECT_FALSE(s.device_started);
  EXPECT_EQ(s.device_init_ms, 0.0);
  for (const WorkItem& w : pngs) EXPECT_EQ(read_bytes(w.output), reference(w)) << w.input;
  fs::create_directories(dir_ / "jpg");
  const std::vector<WorkItem> one_jpeg = {{test::source_path("samples/hubble_deep_field.jpg"),
                                           (dir_ / "jpg" / "hubble.jpg").string(), ""}};
  s = ex.run(one_jpeg, [&](const ItemReport& r) { EXPECT_TRUE(r.ok) << r.error; });
  EXPECT_FALSE(s.device_started) << "one small JPEG: the CPU finishes before a device is ready";
  EXPECT_NE(s.device_note.find("not started"), std::string::npos) << s.device_note;
  if (!gpu::nvjpeg_built()) return;
  ExecutorOptions g;
  g.op.equalize.backend = Backend::cuda;
  g.jpeg = JpegRoute::gpu;
  Executor exg(g);
  s = exg.run(one_jpeg, [&](const ItemReport& r) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.route, "jpeg-device");
  });
  EXPECT_TRUE(s.device_started);
  EXPECT_GT(s.device_init_ms, 0.0);
}

}  // namespace
}  // namespace histeq
