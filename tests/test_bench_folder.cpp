// test_bench_folder.cpp — `histeq bench --folder IN... -o OUTDIR`: its options (the sweep's
// refused with it, its own and the router.* keys refused without it), the bytes it writes (those
// of `histeq equalize IN -o OUT`, spawned), its report (files, megapixels, routes, decoders, the
// device route and why it did not start), its exit status.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "histeq/error.hpp"
#include "histeq/executor.hpp"
#include "histeq/image_io.hpp"
#include "histeq/inputs.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace histeq;
using bench::parse_args;

namespace {

using VS = std::vector<std::string>;

std::string q(const std::string& s) { return "'" + s + "'"; }

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// "name  value" lines of a report: name → value (the last one of a name; route and decoder
/// repeat, see lines_named).
std::map<std::string, std::string> facts(const std::string& report) {
  std::map<std::string, std::string> m;
  for (const std::string& line : test::lines_of(report)) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t sp = line.find(' ');
    const std::size_t value = line.find_first_not_of(' ', sp);
    m[line.substr(0, sp)] = value == std::string::npos ? "" : line.substr(value);
  }
  return m;
}

/// The values of every line named `name`.
VS lines_named(const std::string& report, const std::string& name) {
  VS v;
  for (const std::string& line : test::lines_of(report))
    if (line.rfind(name + " ", 0) == 0)
      v.push_back(line.substr(line.find_first_not_of(' ', name.size())));
  return v;
}

/// The leading number of text ("12 files ..." → 12).
double leading(const std::string& text) { return std::strtod(text.c_str(), nullptr); }

class BenchFolder : public test::TempDirTest {
 protected:
  BenchFolder() : TempDirTest("histeq-bench-folder-") {}
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir_ / "in");
    const struct {
      const char* name;
      int w, h, c;
    } files[] = {{"a.jpg", 96, 64, 3},
                 {"b.jpg", 70, 50, 1},
                 {"c.png", 40, 30, 3},
                 {"d.png", 33, 17, 1},
                 {"e.jpeg", 48, 40, 3}};
    unsigned seed = 7;
    for (const auto& f : files) {
      const fs::path p = dir_ / "in" / f.name;
      const std::vector<std::uint8_t> bytes = encode_image(test::pattern(f.w, f.h, f.c, seed++),
                                                           p.extension().string(), EncodeOptions{});
      std::ofstream(p, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
      names_.push_back(f.name);
      megapixels_ += double(f.w) * f.h / 1e6;
      if (p.extension() != ".png") jpeg_megapixels_ += double(f.w) * f.h / 1e6;
    }
  }

  /// bench::main in this process: its status, and what it printed.
  int bench(const VS& args) {
    out_.str("");
    err_.str("");
    return bench::main(args, out_, err_);
  }

  /// `histeq equalize ARGS` spawned (the built tool): its status.
  int cli(const std::string& args) {
    const std::string o = path("cli-stdout.txt"), e = path("cli-stderr.txt");
    const int raw =
        std::system((q(HISTEQ_CLI) + " equalize " + args + " >" + q(o) + " 2>" + q(e)).c_str());
    cli_err_ = slurp(e);
    return raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }

  /// Every file of the inputs has an output in both folders, byte for byte the same.
  void expect_same_outputs(const std::string& a, const std::string& b) {
    for (const std::string& n : names_) {
      ASSERT_TRUE(fs::exists(dir_ / a / n)) << a << "/" << n;
      ASSERT_TRUE(fs::exists(dir_ / b / n)) << b << "/" << n;
      EXPECT_EQ(slurp(dir_ / a / n), slurp(dir_ / b / n)) << n;
    }
    std::size_t count = 0;
    for (const auto& e : fs::directory_iterator(dir_ / a)) count += e.is_regular_file();
    EXPECT_EQ(count, names_.size()) << "no other file in " << a;
  }

  VS names_;
  double megapixels_ = 0;
  double jpeg_megapixels_ = 0;
  std::ostringstream out_, err_;
  std::string cli_err_;
};

TEST(BenchFolderArgs, ParsesTheFolderRunAndItsOptions) {
  const bench::Options o =
      parse_args({"--folder", "a", "b/", "-o", "out", "--jobs", "3", "--decoder", "cpu",
                  "--backend", "cpu", "--tune", "router.device_start_s=0.5,cpu.simd=0"});
  EXPECT_EQ(o.folder.inputs, (VS{"a", "b/"}));
  EXPECT_EQ(o.folder.output, "out");
  EXPECT_EQ(o.folder.jobs, 3);
  EXPECT_EQ(o.folder.decoder, JpegRoute::cpu);
  EXPECT_EQ(o.folder.backend, Backend::cpu);
  ASSERT_TRUE(o.tune.device_start_s.has_value());
  EXPECT_EQ(*o.tune.device_start_s, 0.5);
  EXPECT_FALSE(o.tune.cpu_simd);
  EXPECT_EQ(o.tune.given, (VS{"router.device_start_s=0.5", "cpu.simd=0"}));

  const bench::Options d = parse_args({"--folder=in", "--output", "out"});
  EXPECT_EQ(d.folder.inputs, VS{"in"});
  EXPECT_EQ(d.folder.jobs, 0);
  EXPECT_EQ(d.folder.decoder, JpegRoute::automatic);
  EXPECT_EQ(d.folder.backend, Backend::automatic);
  EXPECT_FALSE(d.tune.device_start_s.has_value()) << "the policy's unless given";
  EXPECT_EQ(parse_args({"--folder", "in", "-o", "o", "--tune", "router.device_start_s=0"})
                .tune.device_start_s.value_or(-1),
            0.0);
  EXPECT_TRUE(parse_args({"--kernels", "cpu"}).folder.inputs.empty());
  EXPECT_EQ(d.tune.progressive, ExecutorOptions{}.progressive) << "the policy's unless given";
  EXPECT_EQ(parse_args({"--folder", "in", "-o", "o", "--tune", "jpeg.progressive=libjpeg"})
                .tune.progressive,
            ProgressiveJpeg::libjpeg);
  EXPECT_EQ(parse_args({"--folder", "in", "-o", "o", "--tune",
                        "jpeg.progressive=libjpeg,jpeg.progressive=hybrid"})
                .tune.progressive,
            ProgressiveJpeg::hybrid);
  EXPECT_EQ(
      parse_args({"--folder", "in", "-o", "o", "--tune", "jpeg.progressive=gpu"}).tune.progressive,
      ProgressiveJpeg::gpu);
  EXPECT_EQ(d.tune.report_window, 0u) << "the policy's unless given";
  EXPECT_EQ(parse_args({"--folder", "in", "-o", "o", "--tune", "executor.report_window=4096"})
                .tune.report_window,
            4096u);
  EXPECT_EQ(d.tune.hybrid_decoders, 0) << "the policy's unless given";
  EXPECT_EQ(ExecutorOptions{}.hybrid_decoders, 0);
  EXPECT_EQ(parse_args({"--folder", "in", "-o", "o", "--tune", "jpeg.hybrid_decoders=4"})
                .tune.hybrid_decoders,
            4);
  EXPECT_FALSE(d.tune.encoder_start_s) << "the policy's unless given";
  EXPECT_FALSE(d.tune.encoder_slots) << "the policy's unless given";
  EXPECT_EQ(*parse_args({"--folder", "in", "-o", "o", "--tune", "router.encoder_start_s=0.5"})
                 .tune.encoder_start_s,
            0.5);
  EXPECT_EQ(*parse_args({"--folder", "in", "-o", "o", "--tune", "jpeg.encoder_slots=0"})
                 .tune.encoder_slots,
            0);
  EXPECT_FALSE(d.tune.encoder_states) << "the policy's unless given";
  EXPECT_EQ(*parse_args({"--folder", "in", "-o", "o", "--tune", "jpeg.encoder_states=4"})
                 .tune.encoder_states,
            4);
  EXPECT_EQ(d.tune.gpu_huffman_decoders, 0) << "the policy's unless given";
  EXPECT_EQ(ExecutorOptions{}.gpu_huffman_decoders, 0);
  EXPECT_EQ(parse_args({"--folder", "in", "-o", "o", "--tune", "jpeg.gpu_huffman_decoders=6"})
                .tune.gpu_huffman_decoders,
            6);
  EXPECT_EQ(d.tune.early_hybrid, ExecutorOptions{}.early_hybrid) << "the policy's unless given";
  EXPECT_FALSE(
      parse_args({"--folder", "in", "-o", "o", "--tune", "jpeg.early_hybrid=0"}).tune.early_hybrid);
  EXPECT_EQ(d.tune.router_measures, ExecutorOptions{}.router_measures) << "the policy's";
  EXPECT_FALSE(
      parse_args({"--folder", "in", "-o", "o", "--tune", "router.measure=0"}).tune.router_measures);
  EXPECT_THROW(parse_args({"--folder", "in", "-o", "o", "--tune", "router.measure=2"}), UsageError);
  EXPECT_EQ(d.tune.prefault_mb, 0u) << "none unless given";
  EXPECT_EQ(parse_args({"--folder", "in", "-o", "o", "--tune", "executor.prefault_mb=2048"})
                .tune.prefault_mb,
            2048u);
}

// Numbers of seconds >= 0 as strtod reads them, at the edges: -0 is 0 (the report prints 0, not
// -0), and a value too small for a normal double is still such a number.
TEST(BenchFolderArgs, TakesEveryNumberOfSecondsAtLeastZero) {
  const auto start_s = [](const std::string& v) {
    return parse_args({"--folder", "in", "-o", "o", "--tune", "router.device_start_s=" + v})
        .tune.device_start_s.value_or(-1);
  };
  EXPECT_EQ(start_s("-0"), 0.0);
  EXPECT_FALSE(std::signbit(start_s("-0")));
  EXPECT_FALSE(std::signbit(start_s("-0.0e5")));
  EXPECT_GT(start_s("1e-320"), 0.0);
  EXPECT_LT(start_s("1e-320"), 1e-300);
  EXPECT_EQ(start_s("1e308"), 1e308);
}

// Each refusal names what is wrong; bench::main says it and returns 2.
TEST(BenchFolderArgs, RefusesWhatDoesNotGoTogether) {
  const std::vector<std::pair<VS, std::string>> bad = {
      {{"--folder", "in", "-o", "o", "--kernels", "cpu"}, "--kernels"},
      {{"--folder", "in", "-o", "o", "--sizes", "1M"}, "--sizes"},
      {{"--folder", "in", "-o", "o", "--equalize"}, "--equalize"},
      {{"--folder", "in", "-o", "o", "--clahe"}, "--clahe"},
      {{"--folder", "in", "-o", "o", "--csv", "x.csv"}, "--csv"},
      {{"--folder", "in", "-o", "o", "--images", "x.png"}, "--images"},
      {{"--folder", "in"}, "-o OUTDIR"},
      {{"--folder"}, "at least one"},
      {{"--folder", "-", "-o", "o"}, "'-'"},
      {{"--folder", "in", "-o", "-"}, "-o -"},
      {{"--folder", "in", "-o", "o", "--tune", "pdl=none"}, "pdl=none"},
      {{"--folder", "in", "-o", "o", "--jobs", "-1"}, "--jobs"},
      {{"--folder", "in", "-o", "o", "--jobs", "many"}, "--jobs"},
      {{"--folder", "in", "-o", "o", "--decoder", "nvjpeg"}, "--decoder"},
      {{"--folder", "in", "-o", "o", "--backend", "gpu"}, "--backend"},
      {{"--folder", "in", "-o", "o", "--decoder", "gpu", "--backend", "cpu"}, "--decoder gpu"},
      {{"--folder", "in", "-o", "o", "--tune", "router.device_start_s=-1"}, "-1"},
      {{"--folder", "in", "-o", "o", "--tune", "router.device_start_s=nan"}, "nan"},
      {{"--folder", "in", "-o", "o", "--tune", "router.device_start_s=inf"}, "inf"},
      {{"--folder", "in", "-o", "o", "--tune", "router.device_start_s=1e999"}, "1e999"},
      {{"--folder", "in", "-o", "o", "--tune", "router.device_start_s=2s"}, "2s"},
      {{"--folder", "in", "-o", "o", "--tune", "router.device_start_s=-1e-400"}, "-1e-400"},
      {{"--folder", "in", "-o", "o", "--tune", "router.start=1"}, "router.start"},
      {{"--tune", "router.device_start_s=1"}, "--folder"},
      {{"--tune", "jpeg.progressive=hybrid"}, "--folder"},
      {{"--tune", "executor.report_window=512"}, "--folder"},
      {{"--folder", "in", "-o", "o", "--tune", "executor.report_window=-1"}, "0..1048576"},
      {{"--tune", "jpeg.hybrid_decoders=4"}, "--folder"},
      {{"--folder", "in", "-o", "o", "--tune", "jpeg.hybrid_decoders=-1"}, "0..1024"},
      {{"--tune", "jpeg.gpu_huffman_decoders=4"}, "--folder"},
      {{"--tune", "router.encoder_start_s=1"}, "--folder"},
      {{"--folder", "in", "-o", "o", "--tune", "router.encoder_start_s=-1"}, "-1"},
      {{"--tune", "jpeg.encoder_slots=1"}, "--folder"},
      {{"--folder", "in", "-o", "o", "--tune", "jpeg.encoder_slots=17"}, "0..16"},
      {{"--tune", "jpeg.encoder_states=2"}, "--folder"},
      {{"--folder", "in", "-o", "o", "--tune", "jpeg.encoder_states=-1"}, "0..64"},
      {{"--folder", "in", "-o", "o", "--tune", "jpeg.gpu_huffman_decoders=-1"}, "0..1024"},
      {{"--folder", "in", "-o", "o", "--tune", "jpeg.progressive=nvjpeg"}, "libjpeg, hybrid, gpu"},
      {{"--sizes", "1M", "--tune", "router.device_start_s=0"}, "--folder"},
      {{"-o", "out"}, "-o"},
      {{"--jobs", "2"}, "--jobs"},
      {{"--decoder", "cpu"}, "--decoder"},
      {{"--backend", "cpu"}, "--backend"},
  };
  for (const auto& [args, named] : bad) {
    std::string all;
    for (const std::string& a : args) all += a + " ";
    try {
      parse_args(args);
      ADD_FAILURE() << "accepted: " << all;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << all << ": " << e.what();
    }
    std::ostringstream out, err;
    EXPECT_EQ(bench::main(args, out, err), 2) << all;
    EXPECT_NE(err.str().find("histeq bench: "), std::string::npos) << all;
    EXPECT_TRUE(out.str().empty()) << all;
  }
}

TEST(BenchFolderArgs, HelpDescribesTheFolderRunAndTheRouterKey) {
  const std::string u = bench::usage();
  EXPECT_NE(u.find("--folder IN..."), std::string::npos);
  EXPECT_NE(u.find("router.device_start_s="), std::string::npos);
  EXPECT_NE(u.find("[--tune cpu.simd=0|1]"), std::string::npos) << "the other key it takes";
  EXPECT_NE(u.find("not its\n                    subfolders'"), std::string::npos)
      << "folders are not walked into: " << u;
  EXPECT_NE(bench::tune_help().find("router.device_start_s=SECONDS"), std::string::npos);
  std::ostringstream policy;
  policy << "default " << kDeviceStartCpuS << ")";
  EXPECT_NE(bench::tune_help().find(policy.str()), std::string::npos) << bench::tune_help();
}

// The same files, the same outputs, the same bytes as the command line's batch; the report says
// what ran.
TEST_F(BenchFolder, WritesWhatEqualizeWritesAndReportsTheRun) {
  ASSERT_EQ(cli(q(path("in")) + " -o " + q(path("cli")) + " --backend cpu --quiet"), 0) << cli_err_;
  ASSERT_EQ(bench({"--folder", path("in"), "-o", path("bench"), "--backend", "cpu"}), 0)
      << out_.str() << err_.str();
  expect_same_outputs("cli", "bench");
  const std::string r = out_.str();
  const auto f = facts(r);
  EXPECT_EQ(f.at("files"), std::to_string(names_.size()) + " (0 failed)") << r;
  EXPECT_NEAR(leading(f.at("megapixels")), megapixels_, 0.0006) << r;
  EXPECT_GT(leading(f.at("wall_s")), 0.0) << r;
  EXPECT_EQ(f.at("device").rfind("not in play", 0), 0u) << "the CPU backend: " << r;
  EXPECT_NE(f.at("device_start_s").find("(the policy)"), std::string::npos) << r;
  EXPECT_EQ(f.at("progressive"), "gpu (nvJPEG's GPU Huffman decoding) (the policy)") << r;
  EXPECT_EQ(f.at("tune"), "none (the policy)") << r;
  for (const char* k : {"mp_per_s", "device_init_ms", "nvjpeg_init_ms", "first_file_ms"})
    EXPECT_EQ(f.count(k), 1u) << k << ": " << r;
  double files = 0, mp = 0, decoded = 0;
  for (const std::string& v : lines_named(r, "route")) {
    std::istringstream in(v);
    std::string route, word;
    double n = 0, m = 0;
    in >> route >> n >> word >> m;
    EXPECT_TRUE(route == "jpeg-planes" || route == "pixels") << v;
    files += n;
    mp += m;
  }
  for (const std::string& v : lines_named(r, "decoder")) decoded += leading(v.substr(v.find(' ')));
  EXPECT_EQ(files, double(names_.size())) << r;
  EXPECT_NEAR(mp, megapixels_, 0.003) << r;
  EXPECT_EQ(decoded, double(names_.size())) << r;
  EXPECT_EQ(r.rfind("# histeq bench on ", 0), 0u) << r;
  EXPECT_NE(r.find("(commit " + bench::run_commit() + ")"), std::string::npos) << r;
  EXPECT_NE(r.find("--folder " + path("in")), std::string::npos) << "the command line: " << r;
  EXPECT_EQ(f.count("prefault_ms"), 0u) << "none unless asked: " << r;
  // executor.prefault_mb: the heap written first, its time said apart, the same outputs.
  out_.str("");
  ASSERT_EQ(bench({"--folder", path("in"), "-o", path("bench2"), "--backend", "cpu", "--tune",
                   "executor.prefault_mb=64"}),
            0)
      << out_.str() << err_.str();
  expect_same_outputs("cli", "bench2");
  const auto g = facts(out_.str());
  ASSERT_EQ(g.count("prefault_ms"), 1u) << out_.str();
  EXPECT_GT(leading(g.at("prefault_ms")), 0.0) << out_.str();
  EXPECT_NE(g.at("prefault_ms").find("64 MiB"), std::string::npos) << out_.str();
}

// router.device_start_s=0 asks for the device route whatever the size: here (no GPU) it still
// runs every file on the CPU, with the same bytes, and says why the device did not run; the
// policy's rule does not even start it for these few pixels, and says so.
TEST_F(BenchFolder, DeviceStartZeroRunsAndSaysWhyWithoutADevice) {
  std::string why;
  const bool gpu = test::gpu_available(&why);
  ASSERT_EQ(bench({"--folder", path("in"), "-o", path("cpu"), "--backend", "cpu"}), 0)
      << err_.str();
  ASSERT_EQ(bench({"--folder", path("in"), "-o", path("policy")}), 0) << err_.str();
  auto f = facts(out_.str());
  if (gpu::nvjpeg_built()) {  // the JPEGs' megapixels as they are, not rounded down to 0
    const std::string hold = "not started: the JPEGs hold ";
    ASSERT_EQ(f.at("device").rfind(hold, 0), 0u) << out_.str();
    EXPECT_NEAR(leading(f.at("device").substr(hold.size())), jpeg_megapixels_,
                jpeg_megapixels_ / 100)
        << out_.str();
  } else {
    EXPECT_EQ(f.at("device").rfind("not in play", 0), 0u) << out_.str();
  }
  expect_same_outputs("cpu", "policy");

  ASSERT_EQ(
      bench({"--folder", path("in"), "-o", path("zero"), "--tune", "router.device_start_s=0"}), 0)
      << out_.str() << err_.str();
  const std::string r = out_.str();
  f = facts(r);
  EXPECT_EQ(f.at("files"), std::to_string(names_.size()) + " (0 failed)") << r;
  EXPECT_EQ(f.at("tune"), "router.device_start_s=0") << r;
  EXPECT_NE(r.find("# tuning (not the policy): router.device_start_s=0"), std::string::npos) << r;
  EXPECT_EQ(f.at("device_start_s").rfind("0 (the policy's: ", 0), 0u) << r;
  if (!gpu::nvjpeg_built()) {
    EXPECT_EQ(f.at("device").rfind("not in play", 0), 0u) << r;
  } else if (gpu) {
    EXPECT_EQ(f.at("device"), "started") << r;
  } else {
    EXPECT_EQ(f.at("device").rfind("failed (", 0), 0u) << r;
    EXPECT_NE(f.at("device").find("the CPU workers ran its files"), std::string::npos) << r;
    EXPECT_EQ(f.at("cuda").rfind("no usable CUDA device (", 0), 0u) << r;
    for (const std::string& v : lines_named(r, "route")) EXPECT_NE(v.rfind("jpeg-device", 0), 0u);
    expect_same_outputs("cpu", "zero");
  }
}

TEST_F(BenchFolder, AFileThatFailsMakesTheStatusOne) {
  std::ofstream(dir_ / "in" / "broken.png", std::ios::binary) << "not a PNG at all";
  EXPECT_EQ(bench({"--folder", path("in"), "-o", path("out"), "--backend", "cpu"}), 1);
  const auto f = facts(out_.str());
  EXPECT_EQ(f.at("files"), std::to_string(names_.size() + 1) + " (1 failed)") << out_.str();
  EXPECT_NE(err_.str().find("broken.png"), std::string::npos) << err_.str();
  for (const std::string& n : names_) EXPECT_TRUE(fs::exists(dir_ / "out" / n)) << n;
}

TEST_F(BenchFolder, NothingToDoIsRefused) {
  fs::create_directories(dir_ / "empty");
  EXPECT_EQ(bench({"--folder", path("empty"), "-o", path("out")}), 2);
  EXPECT_NE(err_.str().find("no image files"), std::string::npos) << err_.str();
  EXPECT_EQ(bench({"--folder", path("missing"), "-o", path("out")}), 1);
  EXPECT_NE(err_.str().find("missing"), std::string::npos) << err_.str();
  EXPECT_TRUE(out_.str().empty()) << out_.str();
}

// A file histeq cannot write in its own format (a GIF among the photos): the plan refuses the run
// (exit 2, as equalize's batch without --format), and the way out it names is one bench takes:
// bench --folder has no --format.
TEST_F(BenchFolder, AFileOfAFormatHisteqDoesNotWriteNamesAWayOutBenchHas) {
  std::ofstream(dir_ / "in" / "f.gif", std::ios::binary) << "GIF89a";
  EXPECT_EQ(bench({"--folder", path("in"), "-o", path("out")}), 2);
  EXPECT_NE(err_.str().find("f.gif"), std::string::npos) << err_.str();
  EXPECT_EQ(err_.str().find(kGiveAnOutputFormat), std::string::npos) << err_.str();
  EXPECT_NE(err_.str().find("no --format"), std::string::npos) << err_.str();
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

// Options that cannot go together are refused before the output folder is made, as in
// equalize's batch.
TEST_F(BenchFolder, AUsageErrorMakesNoOutputFolder) {
  EXPECT_EQ(
      bench({"--folder", path("in"), "-o", path("out"), "--decoder", "gpu", "--backend", "cpu"}),
      2);
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

}  // namespace
