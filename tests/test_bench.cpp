// test_bench.cpp — `histeq bench`: argument parsing, the synthetic distributions, the skip rules,
// the derived figures, the CSV/JSON/table shapes, CPU-only runs, and a small GPU sweep that must
// PASS everywhere (skipped without a GPU).
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/synthetic.hpp"
#include "histeq/tuning.hpp"
#include "histogram/registry.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace histeq;
using histeq::bench::Cell;
using histeq::bench::Options;
using histeq::bench::parse_args;
using histeq::bench::RunInfo;
using histeq::test::parse_csv;

namespace {

// ----- small helpers ------------------------------------------------------------------------

/// Bin of sample i under the types.hpp rules (written here independently of the library).
int bin_of(const std::vector<std::uint8_t>& data, SampleType t, int bins, std::size_t i) {
  if (t == SampleType::u8) return int((unsigned(data[i]) * unsigned(bins)) / 256u);
  std::int32_t v;
  std::memcpy(&v, data.data() + 4 * i, 4);
  return v;
}

std::vector<std::uint64_t> count_bins(const std::vector<std::uint8_t>& data, SampleType t,
                                      int bins) {
  const std::size_t n = data.size() / sample_bytes(t);
  std::vector<std::uint64_t> h(std::size_t(bins), 0);
  for (std::size_t i = 0; i < n; ++i) {
    const int b = bin_of(data, t, bins, i);
    EXPECT_GE(b, 0);
    EXPECT_LT(b, bins);
    if (b >= 0 && b < bins) ++h[std::size_t(b)];
  }
  return h;
}

std::vector<std::uint8_t> make(Distribution d, SampleType t, int bins, std::size_t n,
                               std::uint64_t seed = 1, std::size_t run = 64) {
  SyntheticSpec s;
  s.dist = d;
  s.type = t;
  s.bins = bins;
  s.n = n;
  s.seed = seed;
  s.run_length = run;
  return make_samples(s);
}

struct BenchRun {
  int status;
  std::string out, err;
};
BenchRun run_bench(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int st = bench::main(args, out, err);
  return {st, out.str(), err.str()};
}

std::size_t count_of(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() /
          ("histeq-test-bench-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// A strict little JSON checker (RFC 8259 grammar, no extensions). Records the number of
/// elements of every array that is the value of a key named "cells".
class JsonCheck {
 public:
  explicit JsonCheck(const std::string& s) : s_(s) {}
  bool ok() {
    ws();
    if (!value("")) return false;
    ws();
    return p_ == s_.size();
  }
  long cells = -1;
  std::vector<std::map<std::string, std::string>> cell_scalars;  // top-level scalars per cell

 private:
  void ws() {
    while (p_ < s_.size() && std::strchr(" \t\r\n", s_[p_])) ++p_;
  }
  bool lit(const char* w) {
    const std::size_t n = std::strlen(w);
    if (s_.compare(p_, n, w) != 0) return false;
    p_ += n;
    return true;
  }
  bool str(std::string* out) {
    if (p_ >= s_.size() || s_[p_] != '"') return false;
    ++p_;
    std::string r;
    while (p_ < s_.size() && s_[p_] != '"') {
      const unsigned char c = static_cast<unsigned char>(s_[p_]);
      if (c < 0x20) return false;
      if (c == '\\') {
        ++p_;
        if (p_ >= s_.size()) return false;
        const char e = s_[p_];
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k) {
            if (p_ + k >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[p_ + k]))) {
              return false;
            }
          }
          p_ += 4;
        } else if (!std::strchr("\"\\/bfnrt", e)) {
          return false;
        }
        r += e;
      } else {
        r += char(c);
      }
      ++p_;
    }
    if (p_ >= s_.size()) return false;
    ++p_;
    if (out) *out = r;
    return true;
  }
  bool number(std::string* out) {
    const std::size_t b = p_;
    if (p_ < s_.size() && s_[p_] == '-') ++p_;
    if (p_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p_]))) return false;
    if (s_[p_] == '0')
      ++p_;
    else
      while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
    if (p_ < s_.size() && s_[p_] == '.') {
      ++p_;
      if (p_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p_]))) return false;
      while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
    }
    if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
      ++p_;
      if (p_ < s_.size() && (s_[p_] == '+' || s_[p_] == '-')) ++p_;
      if (p_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p_]))) return false;
      while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
    }
    if (out) *out = s_.substr(b, p_ - b);
    return true;
  }
  bool value(const std::string& key, std::map<std::string, std::string>* scalars = nullptr) {
    ws();
    if (p_ >= s_.size()) return false;
    const char c = s_[p_];
    std::string text;
    bool ok;
    if (c == '{') {
      ok = object(key == "cells[]");
    } else if (c == '[') {
      ok = array(key);
    } else if (c == '"') {
      ok = str(&text);
    } else if (c == 't') {
      ok = lit("true"), text = "true";
    } else if (c == 'f') {
      ok = lit("false"), text = "false";
    } else if (c == 'n') {
      ok = lit("null"), text = "null";
    } else {
      ok = number(&text);
    }
    if (ok && scalars && c != '{' && c != '[') (*scalars)[key] = text;
    return ok;
  }
  bool object(bool is_cell) {
    ++p_;
    std::map<std::string, std::string> scalars;
    ws();
    if (p_ < s_.size() && s_[p_] == '}') {
      ++p_;
      if (is_cell) cell_scalars.push_back(scalars);
      return true;
    }
    for (;;) {
      ws();
      std::string k;
      if (!str(&k)) return false;
      ws();
      if (p_ >= s_.size() || s_[p_] != ':') return false;
      ++p_;
      if (!value(k, is_cell ? &scalars : nullptr)) return false;
      ws();
      if (p_ < s_.size() && s_[p_] == ',') {
        ++p_;
        continue;
      }
      if (p_ < s_.size() && s_[p_] == '}') {
        ++p_;
        if (is_cell) cell_scalars.push_back(scalars);
        return true;
      }
      return false;
    }
  }
  bool array(const std::string& key) {
    ++p_;
    long n = 0;
    ws();
    if (p_ < s_.size() && s_[p_] == ']') {
      ++p_;
      if (key == "cells") cells = 0;
      return true;
    }
    for (;;) {
      if (!value(key == "cells" ? "cells[]" : "")) return false;
      ++n;
      ws();
      if (p_ < s_.size() && s_[p_] == ',') {
        ++p_;
        continue;
      }
      if (p_ < s_.size() && s_[p_] == ']') {
        ++p_;
        if (key == "cells") cells = n;
        return true;
      }
      return false;
    }
  }
  const std::string s_;
  std::size_t p_ = 0;
};

// ----- argument parsing ---------------------------------------------------------------------

TEST(BenchArgs, SizesWithSuffixes) {
  EXPECT_EQ(bench::parse_size("1M"), std::size_t(1) << 20);
  EXPECT_EQ(bench::parse_size("16m"), std::size_t(16) << 20);
  EXPECT_EQ(bench::parse_size("1G"), std::size_t(1) << 30);
  EXPECT_EQ(bench::parse_size("4K"), std::size_t(4096));
  EXPECT_EQ(bench::parse_size("123"), std::size_t(123));
  EXPECT_EQ(bench::parse_size(" 2M "), std::size_t(2) << 20);
  EXPECT_EQ(bench::parse_size("0"), std::size_t(0));
  for (const char* bad :
       {"", "M", "1.5M", "12X", "-1", "1MB", "1 M", "99999999999999999999", "17179869184G"}) {
    EXPECT_THROW(bench::parse_size(bad), UsageError) << bad;
  }
}

TEST(BenchArgs, FormatSizeRoundTrips) {
  for (const char* s : {"1K", "1M", "16M", "64M", "1G", "1000", "3"}) {
    EXPECT_EQ(bench::format_size(bench::parse_size(s)), s);
  }
  EXPECT_EQ(bench::format_size(bench::kLessonSize), "67.5M");
}

TEST(BenchArgs, SplitList) {
  EXPECT_EQ(bench::split_list("a,b, c,,"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(bench::split_list("").empty());
}

TEST(BenchArgs, Defaults) {
  const Options o = parse_args({});
  EXPECT_FALSE(o.help);
  ASSERT_FALSE(o.kernels.empty());
  EXPECT_EQ(o.kernels.front(), "cpu");
  EXPECT_EQ(o.kernels.size(), kernels::registry().size() + 1);
  EXPECT_EQ(o.sizes, (std::vector<std::size_t>{1u << 20, 16u << 20, 64u << 20}));
  EXPECT_EQ(o.dists, all_distributions());
  EXPECT_EQ(o.blocks, std::vector<int>{0});
  EXPECT_EQ(o.l2, std::vector<bench::L2>{bench::L2::hot});
  EXPECT_FALSE(o.lesson);
}

TEST(BenchArgs, LessonCommandLine) {
  const Options o = parse_args({"--type", "i32", "--size", "16M", "--bins", "256", "--block", "256",
                                "--reps", "10", "--dist", "hot"});
  EXPECT_EQ(o.types, std::vector<SampleType>{SampleType::i32});
  EXPECT_EQ(o.sizes, std::vector<std::size_t>{std::size_t(16) << 20});
  EXPECT_EQ(o.bins, std::vector<int>{256});
  EXPECT_EQ(o.blocks, std::vector<int>{256});
  EXPECT_EQ(o.reps, 10);
  EXPECT_EQ(o.dists, std::vector<Distribution>{Distribution::hot});
  EXPECT_NE(o.command_line.find("--size 16M"), std::string::npos) << o.command_line;
}

TEST(BenchArgs, ListsRepeatsAliasesAndAll) {
  if (kernels::registry().empty()) GTEST_SKIP() << "built without CUDA: no registry kernels";
  Options o = parse_args(
      {"--bins",       "16,64",  "--bin",    "256",  "--bins",  "64",     "--sizes",
       "1K,2K",        "--size", "3K",       "--l2", "both",    "--seed", "18446744073709551615",
       "--run-length", "7",      "--warmup", "0",    "--types", "all"});
  EXPECT_EQ(o.bins, (std::vector<int>{16, 64, 256}));
  EXPECT_EQ(o.sizes, (std::vector<std::size_t>{1024, 2048, 3072}));
  EXPECT_EQ(o.l2, (std::vector<bench::L2>{bench::L2::hot, bench::L2::cold}));
  EXPECT_EQ(o.seed, 18446744073709551615ull);
  EXPECT_EQ(o.run_length, 7u);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.types, (std::vector<SampleType>{SampleType::u8, SampleType::i32}));

  o = parse_args({"--dist", "all", "--sizes", "all", "--bins", "all", "--blocks", "0,128"});
  EXPECT_EQ(o.dists.size(), all_distributions().size());
  EXPECT_EQ(o.sizes.size(), 5u);
  EXPECT_EQ(o.sizes.back(), std::size_t(1) << 30);
  EXPECT_EQ(o.bins.back(), kMaxBins);
  EXPECT_EQ(o.blocks, (std::vector<int>{0, 128}));

  o = parse_args({"--kernels", "cpu"});
  EXPECT_EQ(o.kernels, std::vector<std::string>{"cpu"});
  o = parse_args({"--kernel", "all,cpu", "--kernels", "cpu"});
  EXPECT_EQ(o.kernels.size(), kernels::registry().size() + 1);  // no duplicates
  for (const auto& e : kernels::registry()) {
    o = parse_args({"--kernels", e.name});
    EXPECT_EQ(o.kernels, std::vector<std::string>{e.name});
  }
  // Timing: held stream (GPU time) unless asked otherwise.
  EXPECT_EQ(parse_args({}).timing, bench::Timing::gpu);
  EXPECT_EQ(parse_args({"--timing", "enqueue"}).timing, bench::Timing::enqueue);
  EXPECT_EQ(parse_args({"--timing", "GPU"}).timing, bench::Timing::gpu);
  // auto is not part of 'all'; asked for, it comes after the registry kernels.
  o = parse_args({"--kernels", "auto,columns,cpu"});
  EXPECT_EQ(o.kernels, (std::vector<std::string>{"cpu", "columns", "auto"}));
}

TEST(BenchArgs, ImagesTakeSeveralPaths) {
  const Options o =
      parse_args({"--images", "a.png", "dir/", "b.jpg", "--reps", "3", "--image=c,d.png"});
  EXPECT_EQ(o.images, (std::vector<std::string>{"a.png", "dir/", "b.jpg", "c,d.png"}));
  EXPECT_EQ(o.reps, 3);
}

TEST(BenchArgs, CaseLesson) {
  const Options o = parse_args({"--case", "lesson"});
  EXPECT_TRUE(o.lesson);
  EXPECT_EQ(o.types, std::vector<SampleType>{SampleType::i32});
  EXPECT_EQ(o.bins, std::vector<int>{64});
  EXPECT_EQ(o.sizes, std::vector<std::size_t>{std::size_t(36) * 192 * 10240});
  EXPECT_EQ(o.dists, std::vector<Distribution>{Distribution::sequential});
  EXPECT_EQ(bench::kLessonPerBin, 1105920u);
}

TEST(BenchArgs, BadValuesExitTwoWithOneMessage) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--bins", "0"}, "'0'"},
      {{"--bins", "5000"}, "5000"},
      {{"--bins", "x"}, "'x'"},
      {{"--type", "u16"}, "u16"},
      {{"--dist", "gaussian"}, "gaussian"},
      {{"--l2", "warm"}, "warm"},
      {{"--timing", "wall"}, "wall"},
      {{"--reps", "0"}, "--reps"},
      {{"--warmup", "-1"}, "--warmup"},
      {{"--seed", "abc"}, "abc"},
      {{"--sizes", "12X"}, "12X"},
      {{"--kernels", "nosuch"}, "nosuch"},
      {{"--block", "2048"}, "2048"},
      {{"--run-length", "0"}, "--run-length"},
      {{"--plot", "out.jpg"}, "out.jpg"},
      {{"--case", "other"}, "other"},
      {{"--case", "lesson", "--type", "u8"}, "--case lesson"},
      {{"--frobnicate"}, "frobnicate"},
      {{"stray"}, "stray"},
      {{"--images"}, "--images"},
      {{"--bins"}, "bins"},
  };
  for (const auto& [args, needle] : bad) {
    const BenchRun r = run_bench(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.status, 2) << joined;
    EXPECT_NE(r.err.find(needle), std::string::npos) << joined << "→ " << r.err;
    EXPECT_EQ(count_of(r.err, "histeq bench:"), 1u) << r.err;
    EXPECT_TRUE(r.out.empty()) << joined;
  }
  // The message names the valid choices.
  EXPECT_NE(run_bench({"--dist", "gaussian"}).err.find("sequential"), std::string::npos);
  EXPECT_NE(run_bench({"--kernels", "nosuch"}).err.find("cpu"), std::string::npos);
}

TEST(BenchArgs, Help) {
  const BenchRun r = run_bench({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("Usage: histeq bench"), std::string::npos);
  EXPECT_NE(r.out.find("--case lesson"), std::string::npos);
  EXPECT_TRUE(r.err.empty());
}

// --tune KEY=VALUE: each key sets its field of the run's Tuning (the rest stay the policy's),
// repeated and comma-separated items apply in order, and a bad item is a usage error naming
// the keys or the valid values; --help lists every key.
/// Each `--tune ITEM` is a usage error whose message names its needle (the valid values), and
/// `--help` names every key.
void expect_tune_refused(const std::vector<std::pair<std::string, std::string>>& refused,
                         const std::vector<const char*>& help_keys) {
  for (const auto& [item, needle] : refused) {
    try {
      bench::parse_args({"--tune", item});
      ADD_FAILURE() << item << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  const BenchRun help = run_bench({"--help"});
  for (const char* key : help_keys) EXPECT_NE(help.out.find(key), std::string::npos) << key;
}

TEST(BenchArgs, TuneSetsTheKernelsChoices) {
  const bench::Options policy = bench::parse_args({});
  EXPECT_TRUE(policy.tune.given.empty());
  EXPECT_EQ(policy.tune.gpu.clahe.apply, ClaheTuning::Apply::automatic);
  EXPECT_EQ(policy.tune.gpu.pdl_edges, -1);
  EXPECT_TRUE(policy.tune.cpu_simd);

  const bench::Options o = bench::parse_args(
      {"--clahe", "--tune", "clahe.apply=strip,pdl=0", "--tune", "clahe16.tiles=atomic", "--tune",
       "clahe16.fused=off", "--tune", "hist16.pairs=0", "--tune", "cpu.simd=0", "--tune",
       "clahe.strip_waves=2", "--tune", "clahe.apply=cell"});
  EXPECT_EQ(o.tune.gpu.clahe.apply, ClaheTuning::Apply::cell) << "the later item wins";
  EXPECT_EQ(o.tune.gpu.pdl_edges, 0);
  EXPECT_EQ(o.tune.gpu.clahe.tiles16, ClaheTuning::Tiles16::atomic);
  EXPECT_EQ(o.tune.gpu.clahe.fused16, Choice::off);
  EXPECT_EQ(o.tune.gpu.clahe.pairs16, Choice::automatic) << "untouched";
  EXPECT_FALSE(o.tune.gpu.hist16.pairs);
  EXPECT_FALSE(o.tune.cpu_simd);
  EXPECT_EQ(o.tune.gpu.clahe.strip_waves, 2);
  EXPECT_EQ(o.tune.given.size(), 8u);
  EXPECT_EQ(bench::parse_args({"--tune", "pdl=all"}).tune.gpu.pdl_edges, 0x7FFFFFFF);

  expect_tune_refused({{"clahe.nosuch=1", "clahe.apply"},
                       {"pdl", "KEY=VALUE"},
                       {"clahe.apply=fast", "strip"},
                       {"clahe.strip_waves=-1", "0..64"},
                       {"hist16.pairs=2", "0, 1"},
                       {"clahe16.pairs=maybe", "auto"}},
                      {"clahe.apply=", "clahe16.cells=", "hist16.pairs=", "pdl=", "cpu.simd="});
}

// The region.* keys set RegionTuning (masked equalization's path and the region histogram's
// variants), which the --equalize rows hist:mask-M / equalize:mask-M compare; bad values are
// usage errors naming the valid ones.
TEST(BenchArgs, TuneSetsTheRegionChoices) {
  const bench::Options policy = bench::parse_args({});
  EXPECT_EQ(policy.tune.gpu.region.equalize, RegionTuning::Equalize::automatic);
  EXPECT_FALSE(policy.tune.gpu.region.full_vectors);
  EXPECT_EQ(policy.tune.gpu.region.blocks_per_sm, 0);
  EXPECT_EQ(policy.tune.gpu.region.fused_shape, RegionTuning::FusedShape::automatic);
  const bench::Options o =
      bench::parse_args({"--equalize", "--tune", "region.equalize=pair,region.full_vectors=1",
                         "--tune", "region.blocks_per_sm=3", "--tune", "region.fused_shape=768x2"});
  EXPECT_EQ(o.tune.gpu.region.equalize, RegionTuning::Equalize::pair);
  EXPECT_TRUE(o.tune.gpu.region.full_vectors);
  EXPECT_EQ(o.tune.gpu.region.blocks_per_sm, 3);
  EXPECT_EQ(o.tune.gpu.region.fused_shape, RegionTuning::FusedShape::t768_v2);
  EXPECT_EQ(bench::parse_args({"--tune", "region.equalize=stages"}).tune.gpu.region.equalize,
            RegionTuning::Equalize::stages);
  EXPECT_EQ(bench::parse_args({"--tune", "region.fused_shape=1024x1"}).tune.gpu.region.fused_shape,
            RegionTuning::FusedShape::t1024_v1);
  expect_tune_refused({{"region.equalize=fast", "stages"},
                       {"region.blocks_per_sm=2", "0, 3, 4"},
                       {"region.blocks_per_sm=5", "0..4"},
                       {"region.full_vectors=yes", "0, 1"},
                       {"region.fused_shape=512x4", "768x2"}},
                      {"region.equalize=", "region.full_vectors=", "region.blocks_per_sm=",
                       "region.fused_shape=", "equalize:mask-M"});
}

// The tuning of a run is in its records; CPU rows run with the CPU backend's SIMD switch as
// given, and the switch is back as it was afterwards.
TEST(BenchRun, TuningIsRecorded) {
  const std::string json = temp_path("tune.json");
  const BenchRun r =
      run_bench({"--kernels", "cpu",        "--type",  "u8",       "--bins", "256",      "--sizes",
                 "64K",       "--dist",     "uniform", "--reps",   "1",      "--warmup", "0",
                 "--tune",    "cpu.simd=0", "--tune",  "pdl=none", "--json", json});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("# tuning (not the policy): cpu.simd=0 pdl=none"), std::string::npos)
      << r.out;
  EXPECT_EQ(nlohmann::json::parse(slurp(json)).at("tuning"), "cpu.simd=0 pdl=none");
  EXPECT_TRUE(cpu::simd());
  const std::string plain = temp_path("plain.json");
  EXPECT_EQ(run_bench({"--kernels", "cpu", "--sizes", "1000", "--reps", "1", "--warmup", "0",
                       "--dist", "uniform", "--bins", "16", "--json", plain})
                .status,
            0);
  EXPECT_TRUE(nlohmann::json::parse(slurp(plain)).at("tuning").is_null());
  fs::remove(json);
  fs::remove(plain);
}

// ----- the distributions --------------------------------------------------------------------

TEST(Synthetic, HotPutsTheFractionInBinZero) {
  for (SampleType t : {SampleType::u8, SampleType::i32}) {
    for (int bins : {16, 256}) {
      const std::size_t n = 1 << 20;
      const auto h = count_bins(make(Distribution::hot, t, bins, n), t, bins);
      const double expected = 0.9 + 0.1 / bins;  // 90% plus bin 0's share of the uniform rest
      EXPECT_NEAR(double(h[0]) / double(n), expected, 0.005) << to_string(t) << " " << bins;
      // The rest is spread: every bin is reached.
      EXPECT_EQ(std::count(h.begin(), h.end(), 0u), 0);
    }
  }
  SyntheticSpec s;
  s.dist = Distribution::hot;
  s.n = 100000;
  s.hot_fraction = 0.5;
  const auto h = count_bins(make_samples(s), SampleType::u8, 256);
  EXPECT_NEAR(double(h[0]) / 100000.0, 0.5 + 0.5 / 256, 0.01);
}

TEST(Synthetic, SequentialIsExactlyFlat) {
  for (SampleType t : {SampleType::u8, SampleType::i32}) {
    for (int bins : {1, 16, 64, 100, 256}) {
      const auto h =
          count_bins(make(Distribution::sequential, t, bins, std::size_t(bins) * 1000), t, bins);
      for (int b = 0; b < bins; ++b) ASSERT_EQ(h[b], 1000u) << to_string(t) << " " << bins;
    }
  }
  const auto h = count_bins(make(Distribution::sequential, SampleType::i32, 4096, 4096 * 7),
                            SampleType::i32, 4096);
  EXPECT_EQ(std::count(h.begin(), h.end(), 7u), 4096);
  // The lesson's element i is in bin i % 64.
  const auto d = make(Distribution::sequential, SampleType::i32, 64, 1000);
  for (std::size_t i = 0; i < 1000; ++i) ASSERT_EQ(bin_of(d, SampleType::i32, 64, i), int(i % 64));
}

TEST(Synthetic, BlockyRunsHaveTheAskedLength) {
  for (SampleType t : {SampleType::u8, SampleType::i32}) {
    for (std::size_t run : {1u, 37u, 64u}) {
      const std::size_t n = 200 * run + run / 2;  // last run cut short
      const auto d = make(Distribution::blocky, t, 256, n, 3, run);
      const std::size_t sb = sample_bytes(t);
      std::size_t changes = 0;
      for (std::size_t i = 1; i < n; ++i) {
        const bool same = std::memcmp(&d[i * sb], &d[(i - 1) * sb], sb) == 0;
        if (i % run != 0)
          ASSERT_TRUE(same) << "run broken at " << i << " (run " << run << ")";
        else
          changes += !same;
      }
      // New runs draw a new bin: with 256 bins nearly every boundary changes value.
      EXPECT_GT(changes, (n / run) * 9 / 10) << run;
    }
  }
}

TEST(Synthetic, ConstantIsOneBin) {
  for (SampleType t : {SampleType::u8, SampleType::i32}) {
    for (int bins : {1, 16, 256}) {
      const auto h = count_bins(make(Distribution::constant, t, bins, 5000), t, bins);
      EXPECT_EQ(h[std::size_t(bins / 2)], 5000u) << to_string(t) << " " << bins;
    }
  }
}

TEST(Synthetic, NaturalIsSmooth) {
  const std::size_t n = 1 << 20;
  auto mean_step = [&](Distribution d) {
    const auto v = make(d, SampleType::u8, 256, n, 5);
    double s = 0;
    for (std::size_t i = 1; i < n; ++i) s += std::abs(int(v[i]) - int(v[i - 1]));
    return s / double(n - 1);
  };
  const double nat = mean_step(Distribution::natural), uni = mean_step(Distribution::uniform);
  EXPECT_LT(nat, 0.1 * uni) << "natural " << nat << " uniform " << uni;
  // ... yet not flat: it spans a good part of the range.
  const auto h =
      count_bins(make(Distribution::natural, SampleType::u8, 256, n, 5), SampleType::u8, 256);
  EXPECT_GT(256 - std::count(h.begin(), h.end(), 0u), 100);
}

TEST(Synthetic, UniformReachesEveryBin) {
  for (SampleType t : {SampleType::u8, SampleType::i32}) {
    for (int bins : {7, 100, 256}) {
      const std::size_t n = std::size_t(bins) * 400;
      const auto h = count_bins(make(Distribution::uniform, t, bins, n), t, bins);
      for (int b = 0; b < bins; ++b) {
        EXPECT_GT(h[b], 200u) << to_string(t) << " " << bins << " bin " << b;
        EXPECT_LT(h[b], 600u) << to_string(t) << " " << bins << " bin " << b;
      }
    }
  }
  // i32 with the most bins stays inside [0, bins).
  count_bins(make(Distribution::uniform, SampleType::i32, kMaxBins, 100000), SampleType::i32,
             kMaxBins);
}

TEST(Synthetic, SeedDecidesTheData) {
  for (Distribution d :
       {Distribution::uniform, Distribution::hot, Distribution::blocky, Distribution::natural}) {
    const auto a = make(d, SampleType::u8, 256, 100000, 11);
    EXPECT_EQ(a, make(d, SampleType::u8, 256, 100000, 11)) << to_string(d);
    EXPECT_NE(a, make(d, SampleType::u8, 256, 100000, 12)) << to_string(d);
  }
}

TEST(Synthetic, ThreadSplitDoesNotChangeTheData) {
  // A large array is filled by several threads, a small one by one: the shared prefix agrees.
  for (Distribution d : {Distribution::uniform, Distribution::hot, Distribution::blocky}) {
    const auto big = make(d, SampleType::i32, 256, std::size_t(5) << 20, 2);
    const auto small = make(d, SampleType::i32, 256, 1000, 2);
    EXPECT_TRUE(std::equal(small.begin(), small.end(), big.begin())) << to_string(d);
    const auto tail = make(d, SampleType::i32, 256, (std::size_t(5) << 20) - 1, 2);
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), big.begin())) << to_string(d);
  }
}

TEST(Synthetic, RejectsBadSpecs) {
  EXPECT_THROW(make(Distribution::uniform, SampleType::u8, 0, 10), UsageError);
  EXPECT_THROW(make(Distribution::uniform, SampleType::u8, kMaxBins + 1, 10), UsageError);
  EXPECT_THROW(make(Distribution::blocky, SampleType::u8, 16, 10, 1, 0), UsageError);
  EXPECT_THROW(parse_distribution("gauss"), UsageError);
  for (Distribution d : all_distributions()) EXPECT_EQ(parse_distribution(to_string(d)), d);
  EXPECT_TRUE(make(Distribution::natural, SampleType::u8, 256, 0).empty());
}

// ----- skip rules and derived figures -------------------------------------------------------

const char* u8_only_256(SampleType t, int bins) {
  if (t == SampleType::u8 && bins > 256) return "u8 samples reach at most 256 bins";
  return nullptr;
}

TEST(BenchSkip, UnsupportedAndTooLarge) {
  const std::size_t gib = std::size_t(1) << 30;
  const std::string a = bench::skip_reason(u8_only_256(SampleType::u8, 1024), 0, gib);
  EXPECT_NE(a.find("unsupported"), std::string::npos) << a;
  EXPECT_NE(a.find("256 bins"), std::string::npos) << a;
  EXPECT_EQ(bench::skip_reason(u8_only_256(SampleType::i32, 1024), 0, gib), "");
  const std::string b = bench::skip_reason(nullptr, 4 * gib, gib);
  EXPECT_NE(b.find("4096.0 MiB"), std::string::npos) << b;
  EXPECT_NE(b.find("1024.0 MiB free"), std::string::npos) << b;
  EXPECT_EQ(bench::skip_reason(nullptr, gib, 4 * gib), "");
  // Every registry entry that refuses a case gets a SKIP with its own reason.
  for (const auto& e : kernels::registry()) {
    for (SampleType t : {SampleType::u8, SampleType::i32}) {
      for (int bins : {1, 256, 257, kMaxBins}) {
        const char* why = e.unsupported(t, bins);
        const std::string r = bench::skip_reason(why, 0, gib);
        EXPECT_EQ(r.empty(), why == nullptr) << e.name;
      }
    }
  }
}

Cell timed(const std::string& kernel, double median_us, const std::string& dist = "uniform",
           int block = 0) {
  Cell c;
  c.kernel = kernel;
  c.n = 1 << 20;
  c.dist = dist;
  c.block = block;
  c.status = "PASS";
  c.median_us = c.min_us = median_us;
  c.gbps = double(c.n) / (median_us * 1e3);
  c.gelems = c.gbps;
  c.reps = 5;
  return c;
}

TEST(BenchDerived, SpeedupsAndShareOfReadBandwidth) {
  std::vector<Cell> cells = {timed("atomic", 100), timed("cub", 20), timed("fast", 10),
                             timed("fast", 5, "hot"), timed("cpu", 50)};
  cells.back().l2 = "-";
  Cell skipped = timed("slow", 1);
  skipped.status = "SKIP";
  skipped.median_us = -1;
  cells.push_back(skipped);
  bench::compute_derived(cells, 1000.0);
  EXPECT_DOUBLE_EQ(cells[2].speedup_atomic, 10.0);
  EXPECT_DOUBLE_EQ(cells[2].speedup_cub, 2.0);
  EXPECT_DOUBLE_EQ(cells[0].speedup_atomic, 1.0);
  EXPECT_NEAR(cells[2].pct_read_bw, 100.0 * cells[2].gbps / 1000.0, 1e-9);
  EXPECT_LT(cells[3].speedup_atomic, 0);  // no atomic row for "hot"
  EXPECT_LT(cells[4].pct_read_bw, 0);     // CPU rows: no share of the GPU's bandwidth
  EXPECT_LT(cells[5].speedup_atomic, 0);
  // A block-size sweep compares with atomic at the same block, else atomic's default block.
  std::vector<Cell> sweep = {timed("atomic", 100, "uniform", 0),
                             timed("atomic", 50, "uniform", 256), timed("fast", 10, "uniform", 256),
                             timed("fast", 10, "uniform", 512)};
  bench::compute_derived(sweep, -1);
  EXPECT_DOUBLE_EQ(sweep[2].speedup_atomic, 5.0);
  EXPECT_DOUBLE_EQ(sweep[3].speedup_atomic, 10.0);
  EXPECT_LT(sweep[2].pct_read_bw, 0);  // no read-bandwidth figure
}

// ----- output shapes ------------------------------------------------------------------------

std::vector<Cell> sample_cells() {
  std::vector<Cell> cells = {timed("atomic", 100), timed("cub", 20)};
  Cell s = timed("privatized", 1);
  s.status = "SKIP";
  s.median_us = s.min_us = s.gbps = s.gelems = -1;
  s.bins = 4096;
  s.reason = "unsupported: \"u8\", at most 256 bins";
  cells.push_back(s);
  Cell f = timed("racy", 3);
  f.status = "FAIL";
  f.lost = 12345;
  f.launch_block = 256;
  f.launch_grid = 528;
  f.launch_smem = 1024;
  f.reason = "bin 3: got 5,\nexpected <= 4";
  cells.push_back(f);
  bench::compute_derived(cells, 3000);
  return cells;
}

RunInfo sample_info() {
  RunInfo info;
  info.device = "NVIDIA H200";
  info.commit = "abc1234";
  info.command_line = "histeq bench --images 'my, \"file\".png'";
  info.timestamp = "2025-01-01T00:00:00Z";
  info.read_bw_gbps = 3000;
  return info;
}

TEST(BenchOutput, CsvHasAHeaderAndOneLinePerCell) {
  const auto cells = sample_cells();
  std::ostringstream os;
  bench::write_csv(os, sample_info(), cells);
  const auto rows = parse_csv(os.str());
  ASSERT_EQ(rows.size(), cells.size() + 1);
  const auto& head = rows[0];
  EXPECT_EQ(head[0], "kernel");
  for (const char* col : {"type",           "bins",           "size",
                          "dist",           "block",          "l2",
                          "status",         "median_us",      "min_us",
                          "gbps",           "gelems",         "speedup_vs_atomic",
                          "speedup_vs_cub", "pct_of_read_bw", "lost",
                          "launch_block",   "launch_grid",    "launch_smem",
                          "device",         "commit",         "command",
                          "timestamp"}) {
    EXPECT_NE(std::find(head.begin(), head.end(), col), head.end()) << col;
  }
  auto col = [&](const char* name) {
    return std::size_t(std::find(head.begin(), head.end(), name) - head.begin());
  };
  for (std::size_t r = 1; r < rows.size(); ++r) {
    ASSERT_EQ(rows[r].size(), head.size()) << "line " << r;
    EXPECT_EQ(rows[r][col("kernel")], cells[r - 1].kernel);
    EXPECT_EQ(rows[r][col("status")], cells[r - 1].status);
    EXPECT_EQ(rows[r][col("device")], "NVIDIA H200");
    EXPECT_EQ(rows[r][col("command")], sample_info().command_line);
    EXPECT_EQ(rows[r][col("reason")], cells[r - 1].reason);
  }
  EXPECT_EQ(rows[3][col("median_us")], "");  // SKIP: not timed
  EXPECT_EQ(rows[4][col("lost")], "12345");
  EXPECT_EQ(rows[4][col("launch_grid")], "528");
  EXPECT_EQ(std::stod(rows[2][col("speedup_vs_atomic")]), 5.0);
}

TEST(BenchOutput, JsonParsesWithOneRecordPerCell) {
  const auto cells = sample_cells();
  std::ostringstream os;
  bench::write_json(os, sample_info(), cells);
  const std::string text = os.str();
  JsonCheck j(text);
  ASSERT_TRUE(j.ok()) << text;
  EXPECT_EQ(j.cells, long(cells.size()));
  ASSERT_EQ(j.cell_scalars.size(), cells.size());
  for (std::size_t i = 0; i < cells.size(); ++i) {
    EXPECT_EQ(j.cell_scalars[i]["kernel"], cells[i].kernel);
    EXPECT_EQ(j.cell_scalars[i]["status"], cells[i].status);
    for (const char* k :
         {"type", "bins", "size", "dist", "block", "l2", "median_us", "min_us", "gbps", "gelems",
          "speedup_vs_atomic", "speedup_vs_cub", "pct_of_read_bw", "lost"}) {
      EXPECT_EQ(j.cell_scalars[i].count(k), 1u) << k;
    }
  }
  EXPECT_EQ(j.cell_scalars[2]["median_us"], "null");
  EXPECT_NE(text.find("\"device\": \"NVIDIA H200\""), std::string::npos);
  EXPECT_NE(text.find("\"commit\": \"abc1234\""), std::string::npos);
  // Empty table: still valid JSON.
  std::ostringstream empty;
  bench::write_json(empty, RunInfo{}, {});
  JsonCheck je(empty.str());
  EXPECT_TRUE(je.ok()) << empty.str();
  EXPECT_EQ(je.cells, 0);
}

TEST(BenchOutput, TableIsAlignedWithOneLinePerCell) {
  const auto cells = sample_cells();
  std::ostringstream os;
  bench::write_table(os, sample_info(), cells);
  std::vector<std::string> lines;
  std::istringstream is(os.str());
  for (std::string l; std::getline(is, l);) lines.push_back(l);
  std::vector<std::string> body;
  for (const auto& l : lines) {
    if (l.rfind("#", 0) != 0) body.push_back(l);
  }
  // One header line and one line per cell (the FAIL reason's newline is flattened).
  ASSERT_EQ(body.size(), cells.size() + 1) << os.str();
  EXPECT_EQ(body[0].rfind("kernel", 0), 0u);
  const std::size_t status_col = body[0].find("status");
  ASSERT_NE(status_col, std::string::npos);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    EXPECT_EQ(body[i + 1].rfind(cells[i].kernel, 0), 0u) << body[i + 1];
    EXPECT_EQ(body[i + 1].substr(status_col, 4), cells[i].status.substr(0, 4)) << body[i + 1];
  }
  EXPECT_NE(os.str().find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(os.str().find("3000.0 GB/s"), std::string::npos);
  EXPECT_NE(os.str().find("unsupported"), std::string::npos);
}

// ----- whole runs on the CPU (and the GPU when there is one) -----------------------------------

TEST(BenchRun, CpuReferenceRowsAndFiles) {
  const std::string csv = temp_path("cpu.csv"), json = temp_path("cpu.json");
  const BenchRun r = run_bench({"--kernels", "cpu", "--type", "u8,i32", "--bins", "64,4096",
                                "--sizes", "64K,1000", "--dist", "uniform,hot", "--reps", "2",
                                "--warmup", "0", "--csv", csv, "--json", json});
  EXPECT_EQ(r.status, 0) << r.err;
  const auto rows = parse_csv(slurp(csv));
  ASSERT_EQ(rows.size(), 1u + 2 * 2 * 2 * 2);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][0], "cpu");
    EXPECT_EQ(rows[i][8], "PASS");
  }
  JsonCheck j(slurp(json));
  EXPECT_TRUE(j.ok());
  EXPECT_EQ(j.cells, 16);
  EXPECT_NE(r.out.find("cpu"), std::string::npos);
  EXPECT_NE(r.err.find("[16/16]"), std::string::npos) << r.err;  // progress on stderr
  fs::remove(csv);
  fs::remove(json);
}

TEST(BenchRun, WithoutGpuSaysOnceThatGpuKernelsWereSkipped) {
  std::string why;
  if (histeq::test::gpu_available(&why)) GTEST_SKIP() << "a GPU is present";
  const BenchRun r = run_bench(
      {"--bins", "256", "--sizes", "4K", "--dist", "uniform", "--type", "u8", "--reps", "1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count_of(r.err, "GPU kernels skipped"), 1u) << r.err;
  EXPECT_NE(r.out.find("cpu"), std::string::npos);
  for (const auto& e : kernels::registry()) {
    EXPECT_EQ(r.out.find(std::string("\n") + e.name + " "), std::string::npos) << e.name;
  }
}

TEST(BenchRun, LessonCaseOnTheCpu) {
  const BenchRun r =
      run_bench({"--case", "lesson", "--kernels", "cpu", "--reps", "1", "--warmup", "0"});
  EXPECT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("67.5M"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
}

TEST(BenchRun, ImagesFromAFolder) {
  const std::string dir = histeq::test::source_path("samples");
  std::size_t images = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    images += ext == ".png" || ext == ".jpg" || ext == ".jpeg";
  }
  if (images == 0) GTEST_SKIP() << "no images under " << dir;
  const std::string csv = temp_path("img.csv");
  const BenchRun r = run_bench(
      {"--kernels", "cpu", "--bins", "256", "--reps", "1", "--images", dir, "--csv", csv});
  EXPECT_EQ(r.status, 0) << r.err;
  const auto rows = parse_csv(slurp(csv));
  EXPECT_GE(rows.size(), 1 + images);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][5].rfind("image:", 0), 0u) << rows[i][5];
  }
  fs::remove(csv);
  // A missing image is a runtime error, said once.
  const BenchRun m = run_bench({"--kernels", "cpu", "--images", "/nonexistent/x.png"});
  EXPECT_EQ(m.status, 1);
  EXPECT_EQ(count_of(m.err, "x.png"), 1u) << m.err;
}

TEST(BenchRun, PlotIsDrawnOrExplained) {
  const std::string png = temp_path("plot.png");
  const BenchRun r = run_bench({"--kernels", "cpu", "--bins", "256", "--type", "u8", "--sizes",
                                "1K,64K", "--dist", "uniform,hot", "--reps", "1", "--plot", png});
  EXPECT_EQ(r.status, 0) << r.err;
  if (fs::exists(png)) {
    const std::string head = slurp(png).substr(0, 8);
    EXPECT_EQ(head, std::string("\x89PNG\r\n\x1a\n", 8));
    fs::remove(png);
  } else {
    EXPECT_NE(r.err.find("bench/plot.py"), std::string::npos) << r.err;
  }
}

TEST(BenchRun, UnwritableCsvIsARuntimeError) {
  const BenchRun r =
      run_bench({"--kernels", "cpu", "--sizes", "1K", "--dist", "uniform", "--bins", "16", "--type",
                 "u8", "--reps", "1", "--csv", "/nonexistent/dir/x.csv"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(count_of(r.err, "x.csv"), 1u) << r.err;
}

TEST(BenchGpu, SmallSweepPassesEverywhere) {
  HISTEQ_REQUIRE_GPU();
  const std::string csv = temp_path("gpu.csv");
  const BenchRun r = run_bench({"--kernels", "all,auto", "--type", "u8,i32", "--bins",
                                "1,16,256,4096", "--sizes", "0,1,257,1000,1M", "--dist", "all",
                                "--reps", "2", "--warmup", "1", "--l2", "both", "--csv", csv});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  const auto rows = parse_csv(slurp(csv));
  ASSERT_GT(rows.size(), 1u);
  const auto& head = rows[0];
  auto col = [&](const char* name) {
    return std::size_t(std::find(head.begin(), head.end(), name) - head.begin());
  };
  std::set<std::string> passed;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const std::string& st = row[col("status")];
    EXPECT_TRUE(st == "PASS" || st == "SKIP") << row[col("kernel")] << ": " << row[col("reason")];
    if (st == "SKIP") {
      EXPECT_EQ(row[col("reason")].rfind("unsupported", 0), 0u) << row[col("reason")];
    } else {
      passed.insert(row[col("kernel")]);
      EXPECT_FALSE(row[col("median_us")].empty());
      if (row[col("kernel")] == "auto") {  // names the registry kernel it ran
        const std::string& why = row[col("reason")];
        ASSERT_EQ(why.rfind("auto chose ", 0), 0u) << why;
        EXPECT_NO_THROW(kernels::find_kernel(why.substr(11))) << why;
      }
    }
    if (row[col("kernel")] != "racy") EXPECT_EQ(row[col("lost")], "0");
  }
  // Every kernel passes somewhere (each supports at least u8 with 256 bins).
  for (const auto& e : kernels::registry()) EXPECT_EQ(passed.count(e.name), 1u) << e.name;
  EXPECT_EQ(passed.count("auto"), 1u);
  EXPECT_NE(r.err.find("read bandwidth"), std::string::npos);
  fs::remove(csv);

  // The lessons' command line and the int-array lesson.
  const BenchRun lesson_cl =
      run_bench({"--type", "i32", "--size", "16M", "--bins", "256", "--block", "256", "--reps", "3",
                 "--dist", "hot", "--timing", "enqueue"});
  EXPECT_EQ(lesson_cl.status, 0) << lesson_cl.out << lesson_cl.err;
  const BenchRun lesson = run_bench({"--case", "lesson", "--reps", "2", "--warmup", "1"});
  EXPECT_EQ(lesson.status, 0) << lesson.out << lesson.err;
}

}  // namespace

// ----- JSON through nlohmann, the build's commit, the timing column, outputs checked first ----

namespace {

/// Runs `git ARGS` in `dir` quietly; true on success.
bool git(const std::string& dir, const std::string& args) {
  const std::string cmd = "git -C '" + dir + "' " + args + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

/// Sets (or, with nullptr, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_.c_str(), old_.c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

/// Changes the current folder for one scope.
class ScopedCwd {
 public:
  explicit ScopedCwd(const fs::path& to) : old_(fs::current_path()) { fs::current_path(to); }
  ~ScopedCwd() { fs::current_path(old_); }

 private:
  fs::path old_;
};

}  // namespace

TEST(BenchJson, NonUtf8TextIsReplacedAndStillParses) {
  auto cells = sample_cells();
  cells[0].dist = "image:caf\xE9.png";  // Latin-1 é: not valid UTF-8
  cells[1].reason = "bad \xFF\xFE bytes and a \x01 control";
  RunInfo info = sample_info();
  info.command_line = "histeq bench --images caf\xE9.png";
  std::ostringstream os;
  bench::write_json(os, info, cells);
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(os.str())) << os.str();  // strict UTF-8 parser
  ASSERT_EQ(j["cells"].size(), cells.size());
  EXPECT_EQ(j["cells"][0]["dist"], "image:caf\xEF\xBF\xBD.png");  // U+FFFD for the 0xE9
  EXPECT_EQ(j["cells"][1]["reason"], "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes and a \x01 control");
  EXPECT_EQ(j["command"], "histeq bench --images caf\xEF\xBF\xBD.png");
  // ... and the exact bytes, in hex, beside the names that are not UTF-8 (only those)
  EXPECT_EQ(j["cells"][0]["dist_bytes_hex"], "696d6167653a636166e92e706e67");
  EXPECT_FALSE(j["cells"][1].contains("dist_bytes_hex"));
  EXPECT_EQ(j["command_bytes_hex"],
            "6869737465712062656e6368202d2d696d61676573206361"
            "66e92e706e67");
  EXPECT_TRUE(j["cells"][2]["median_us"].is_null());  // unset numbers are null
  for (std::size_t i = 0; i < cells.size(); ++i) {
    EXPECT_EQ(j["cells"][i]["kernel"], cells[i].kernel);
    EXPECT_EQ(j["cells"][i]["bins"], cells[i].bins);
  }
}

TEST(BenchJson, ImageWithALatin1NameGivesValidJson) {
  const fs::path dir = temp_path("latin1-images");
  fs::create_directories(dir);
  const fs::path img = dir / "caf\xE9.png";
  fs::copy_file(histeq::test::source_path("samples/coins.png"), img,
                fs::copy_options::overwrite_existing);
  const std::string json = temp_path("latin1.json");
  const BenchRun r = run_bench({"--kernels", "cpu", "--bins", "256", "--reps", "1", "--warmup", "0",
                                "--images", img.string(), "--json", json});
  EXPECT_EQ(r.status, 0) << r.err;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(slurp(json))) << slurp(json);
  ASSERT_EQ(j["cells"].size(), 1u);
  EXPECT_EQ(j["cells"][0]["dist"], "image:caf\xEF\xBF\xBD.png");
  fs::remove_all(dir);
  fs::remove(json);
}

TEST(BenchCommit, IsTheBuildsNotTheCurrentFoldersRepository) {
  const std::string built = bench::build_commit();
  ASSERT_FALSE(built.empty());
  EXPECT_EQ(built.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                    "0123456789._+-"),
            std::string::npos)
      << built;
  if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git not installed";
  // A repository of its own as the current folder: its commit must not be recorded.
  const fs::path repo = temp_path("other-repo");
  fs::remove_all(repo);
  fs::create_directories(repo);
  ASSERT_TRUE(git(repo.string(), "init -q"));
  ASSERT_TRUE(git(repo.string(), "-c user.name=t -c user.email=t@t commit -q --allow-empty -m x"));
  const ScopedEnv no_override("HISTEQ_COMMIT", nullptr);
  const std::string csv = temp_path("commit.csv");
  BenchRun r;
  {
    const ScopedCwd in_repo(repo);
    r = run_bench({"--kernels", "cpu", "--sizes", "1K", "--dist", "uniform", "--bins", "16",
                   "--type", "u8", "--reps", "1", "--csv", csv});
  }
  EXPECT_EQ(r.status, 0) << r.err;
  const auto rows = parse_csv(slurp(csv));
  ASSERT_EQ(rows.size(), 2u);
  const auto& head = rows[0];
  const std::size_t col = std::size_t(std::find(head.begin(), head.end(), "commit") - head.begin());
  ASSERT_LT(col, head.size());
  EXPECT_EQ(rows[1][col], built);
  EXPECT_NE(r.out.find("(commit " + built + ")"), std::string::npos) << r.out;
  // The explicit override still wins (scripts that record where a binary came from).
  {
    const ScopedEnv override_commit("HISTEQ_COMMIT", "feedbee");
    EXPECT_EQ(bench::run_commit(), "feedbee");
  }
  fs::remove_all(repo);
  fs::remove(csv);
}

TEST(BenchTiming, SaysCpuWhenNothingWasTimedOnAGpu) {
  const std::string csv = temp_path("timing.csv"), json = temp_path("timing.json");
  // --kernels cpu: only the CPU reference runs, with or without a GPU.
  const BenchRun r =
      run_bench({"--kernels", "cpu", "--sizes", "1K", "--dist", "uniform,hot", "--bins", "16",
                 "--type", "u8", "--reps", "1", "--timing", "gpu", "--csv", csv, "--json", json});
  EXPECT_EQ(r.status, 0) << r.err;
  const auto rows = parse_csv(slurp(csv));
  ASSERT_EQ(rows.size(), 3u);
  const auto& head = rows[0];
  const std::size_t col = std::size_t(std::find(head.begin(), head.end(), "timing") - head.begin());
  ASSERT_LT(col, head.size());
  for (std::size_t i = 1; i < rows.size(); ++i) EXPECT_EQ(rows[i][col], "cpu");
  EXPECT_EQ(nlohmann::json::parse(slurp(json))["timing"], "cpu");
  EXPECT_EQ(r.out.find("; timing gpu"), std::string::npos) << r.out;
  fs::remove(csv);
  fs::remove(json);
}

TEST(BenchTiming, SaysTheModeWhenAGpuTimedTheCells) {
  HISTEQ_REQUIRE_GPU();
  const std::string json = temp_path("timing-gpu.json");
  const BenchRun r =
      run_bench({"--kernels", "atomic", "--sizes", "64K", "--dist", "uniform", "--bins", "256",
                 "--type", "u8", "--reps", "2", "--timing", "enqueue", "--json", json});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(json))["timing"], "enqueue");
  fs::remove(json);
}

TEST(BenchOutputs, UnwritablePathsAreRefusedBeforeTheSweep) {
  const fs::path dir = temp_path("outdir");
  fs::create_directories(dir);
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--csv", "/nonexistent/dir/x.csv"}, "x.csv"},
      {{"--json", "/nonexistent/dir/y.json"}, "y.json"},
      {{"--json", dir.string()}, "outdir"},  // a folder of that name
      {{"--plot", "/nonexistent/dir/z.png"}, "z.png"},
  };
  for (const auto& [extra, needle] : bad) {
    std::vector<std::string> args = {"--kernels", "cpu", "--sizes", "1K", "--dist", "uniform",
                                     "--bins",    "16",  "--type",  "u8", "--reps", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    const BenchRun r = run_bench(args);
    EXPECT_EQ(r.status, 1) << extra[1];
    EXPECT_EQ(count_of(r.err, needle), 1u) << r.err;
    EXPECT_EQ(count_of(r.err, "cannot write"), 1u) << r.err;
    EXPECT_EQ(r.err.find("[1/1]"), std::string::npos) << "the sweep ran: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  // A writable path in an existing folder is not created before the sweep has run.
  const std::string ok = (dir / "ok.csv").string();
  const BenchRun r = run_bench({"--kernels", "cpu", "--sizes", "1K", "--dist", "uniform", "--bins",
                                "16", "--type", "u8", "--reps", "1", "--csv", ok});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(ok));
  fs::remove_all(dir);
}
