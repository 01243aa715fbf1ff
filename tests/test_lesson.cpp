// test_lesson.cpp — `histeq lesson`: argument parsing, the lesson list, the narration of a run
// (speed-ups, lost counts, the read ceiling) from hand-made cells, CPU-only runs and their
// CSV/JSON, the `contiguous` kernel's registry entry and that `auto` never picks it; GPU runs of
// the three lessons at a small size (skipped without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench.hpp"
#include "bench/lesson.hpp"
#include "cli/cli.hpp"
#include "gpu_test_support.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histogram/registry.hpp"
#include "test_support.hpp"

using namespace histeq;
using histeq::kernels::HistogramLaunch;
using histeq::kernels::KernelEntry;

namespace {

using histeq::test::lines_of;

struct CliRun {
  int status = 0;
  std::string out, err;
};

/// `histeq ARGS...` in process; a usage error becomes status 2 as in main().
CliRun cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  CliRun r;
  try {
    r.status = cli::run(args, out, err);
  } catch (const UsageError& e) {
    r.status = 2;
    err << e.what();
  } catch (const Error& e) {
    r.status = 1;
    err << e.what();
  }
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

/// RFC 4180 records (quoted fields may hold commas and doubled quotes; no embedded newlines in
/// this writer's output).
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> recs;
  for (const std::string& line : lines_of(text)) {
    std::vector<std::string> f(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted) {
        if (c == '"' && i + 1 < line.size() && line[i + 1] == '"')
          f.back() += '"', ++i;
        else if (c == '"')
          quoted = false;
        else
          f.back() += c;
      } else if (c == '"') {
        quoted = true;
      } else if (c == ',') {
        f.emplace_back();
      } else {
        f.back() += c;
      }
    }
    EXPECT_FALSE(quoted) << "unterminated quote: " << line;
    recs.push_back(f);
  }
  return recs;
}

/// A strict JSON reader for the lesson's output: validates the whole text and keeps, for each
/// object of the top-level "rows" array, its scalar members as text.
class Json {
 public:
  explicit Json(std::string s) : s_(std::move(s)) {}
  bool ok() {
    if (!value(0, "")) return false;
    ws();
    return p_ == s_.size();
  }
  std::map<std::string, std::string> top;
  std::vector<std::map<std::string, std::string>> rows;

 private:
  void ws() {
    while (p_ < s_.size() && std::strchr(" \t\r\n", s_[p_])) ++p_;
  }
  bool str(std::string* out) {
    if (p_ >= s_.size() || s_[p_] != '"') return false;
    std::string r;
    for (++p_; p_ < s_.size() && s_[p_] != '"'; ++p_) {
      if (static_cast<unsigned char>(s_[p_]) < 0x20) return false;
      if (s_[p_] == '\\') {
        if (++p_ >= s_.size() || !std::strchr("\"\\/bfnrtu", s_[p_])) return false;
        if (s_[p_] == 'u') p_ += 4;
      }
      r += s_[p_];
    }
    if (p_ >= s_.size()) return false;
    ++p_;
    *out = r;
    return true;
  }
  bool scalar(std::string* out) {
    const std::size_t b = p_;
    for (const char* w : {"true", "false", "null"}) {
      if (s_.compare(p_, std::strlen(w), w) == 0) {
        p_ += std::strlen(w);
        *out = w;
        return true;
      }
    }
    if (p_ < s_.size() && s_[p_] == '-') ++p_;
    if (p_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p_]))) return false;
    while (p_ < s_.size() && std::strchr("0123456789.eE+-", s_[p_])) ++p_;
    *out = s_.substr(b, p_ - b);
    char* end = nullptr;
    std::strtod(out->c_str(), &end);
    return end && *end == '\0';
  }
  // depth 0: the document; a member of the top object named "rows" is the rows array.
  bool value(int depth, const std::string& key,
             std::map<std::string, std::string>* into = nullptr) {
    ws();
    if (p_ >= s_.size()) return false;
    std::string text;
    if (s_[p_] == '{') {
      ++p_;
      std::map<std::string, std::string>* members =
          depth == 0 ? &top : (depth == 2 && key == "rows[]" ? &rows.emplace_back() : nullptr);
      ws();
      if (p_ < s_.size() && s_[p_] == '}') return ++p_, true;
      for (;;) {
        ws();
        std::string k;
        if (!str(&k)) return false;
        ws();
        if (p_ >= s_.size() || s_[p_++] != ':') return false;
        if (!value(depth + 1, k, members)) return false;
        ws();
        if (p_ < s_.size() && s_[p_] == ',') {
          ++p_;
          continue;
        }
        if (p_ < s_.size() && s_[p_] == '}') return ++p_, true;
        return false;
      }
    }
    if (s_[p_] == '[') {
      ++p_;
      ws();
      if (p_ < s_.size() && s_[p_] == ']') return ++p_, true;
      for (;;) {
        if (!value(depth + 1, key + "[]")) return false;
        ws();
        if (p_ < s_.size() && s_[p_] == ',') {
          ++p_;
          continue;
        }
        if (p_ < s_.size() && s_[p_] == ']') return ++p_, true;
        return false;
      }
    }
    const bool ok = s_[p_] == '"' ? str(&text) : scalar(&text);
    if (ok && into) (*into)[key] = text;
    return ok;
  }
  std::string s_;
  std::size_t p_ = 0;
};

class LessonFiles : public test::TempDirTest {
 protected:
  LessonFiles() : TempDirTest("histeq-test-lesson") {}
};

// ---------------------------------------------------------------------------------------------
// The contiguous kernel in the registry, and auto (no GPU needed).
// ---------------------------------------------------------------------------------------------

TEST(ContiguousKernel, RegistryEntryIsExactSupportsAllAndSitsBeforeCoarsened) {
  const KernelEntry& e = kernels::find_kernel("contiguous");
  EXPECT_STREQ(e.name, "contiguous");
  EXPECT_TRUE(e.exact);
  EXPECT_FALSE(e.zeroed_scratch);
  EXPECT_TRUE(e.launch && e.shape && e.unsupported && e.scratch_bytes);
  for (SampleType t : {SampleType::u8, SampleType::i32}) {
    for (int bins : {1, 16, 64, 256, 1024, kMaxBins}) {
      EXPECT_EQ(e.unsupported(t, bins), nullptr) << bins;
      EXPECT_EQ(e.scratch_bytes(std::size_t(1) << 30, bins, t), 0u);
    }
    EXPECT_NE(e.unsupported(t, 0), nullptr);
    EXPECT_NE(e.unsupported(t, kMaxBins + 1), nullptr);
  }
  // Teaching order: the contiguous partition is shown before the interleaved one.
  const auto& reg = kernels::registry();
  const auto pos = [&](const char* n) {
    return std::find_if(reg.begin(), reg.end(),
                        [&](const KernelEntry& k) { return std::string(k.name) == n; }) -
           reg.begin();
  };
  EXPECT_LT(pos("contiguous"), pos("coarsened"));
  EXPECT_NE(std::string(e.summary).find("contiguous"), std::string::npos);
}

TEST(ContiguousKernel, AutoNeverChoosesIt) {
  for (SampleType t : {SampleType::u8, SampleType::i32}) {
    for (int bins : {1, 2, 16, 63, 64, 65, 255, 256, 257, 1024, kMaxBins}) {
      for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(65536), std::size_t(524289),
                            std::size_t(1) << 20, std::size_t(12) << 20, std::size_t(64) << 20,
                            std::size_t(1) << 32}) {
        HistogramLaunch call;
        call.type = t;
        call.bins = bins;
        call.n = n;
        EXPECT_STRNE(kernels::choose_auto(call).name, "contiguous")
            << to_string(t) << " " << bins << " bins, n " << n;
      }
    }
  }
}

/// The contiguous partition's edges: n near multiples of the resident grid's threads × a vector
/// (± a sample, ± a vector and a sample), so that the vectors split evenly or unevenly over the
/// threads and head and tail samples exist, at two block sizes and two alignments; every sample
/// must be counted exactly once, as the CPU counts it.
TEST(ContiguousKernel, PartitionEdgesCountEverySampleOnce) {
  HISTEQ_REQUIRE_GPU();
  const KernelEntry& e = kernels::find_kernel("contiguous");
  for (SampleType t : {SampleType::u8, SampleType::i32}) {
    const std::size_t sb = sample_bytes(t);
    const std::size_t per_vec = 16 / sb;
    for (int block : {32, 512}) {
      HistogramLaunch probe;
      probe.type = t;
      probe.bins = 64;
      probe.block_size = block;
      probe.n = std::size_t(1) << 26;  // large: the grid is the resident blocks
      const std::size_t threads = std::size_t(e.shape(probe).grid_size) * std::size_t(block);
      std::vector<std::size_t> sizes = {1, per_vec - 1, per_vec, per_vec + 1, 1000};
      for (std::size_t k : {std::size_t(1), std::size_t(3)}) {
        for (long d : {-17L, -1L, 0L, 1L, 17L}) {
          sizes.push_back(std::size_t(long(k * threads * per_vec) + d));
        }
      }
      const std::size_t max_n = *std::max_element(sizes.begin(), sizes.end());
      std::vector<std::uint8_t> host((max_n + 16) * sb);
      for (std::size_t i = 0; i < max_n + 16; ++i) {
        if (t == SampleType::u8) {
          host[i] = std::uint8_t((i * 2654435761u) >> 13);
        } else {
          const std::int32_t v = std::int32_t((i * 2654435761u) % 80) - 8;  // some out of range
          std::memcpy(&host[i * 4], &v, 4);
        }
      }
      const DeviceBuffer<std::uint8_t> d = test::upload_bytes(host);
      for (std::size_t n : sizes) {
        for (std::size_t offset : {std::size_t(0), std::size_t(3)}) {
          SCOPED_TRACE(std::string(to_string(t)) + " block " + std::to_string(block) + " n " +
                       std::to_string(n) + " offset " + std::to_string(offset));
          const std::uint8_t* h_in = host.data() + offset * sb;
          const Histogram ref = cpu::histogram(h_in, n, t, 64);
          EXPECT_EQ(test::run_kernel(e, d.get() + offset * sb, n, t, 64, block), ref);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Parsing and the list (no GPU needed).
// ---------------------------------------------------------------------------------------------

TEST(LessonArgs, ParsesEveryOption) {
  const lesson::Options o =
      lesson::parse_args({"atomics", "--size", "16M", "--image", "x.png", "--plot", "p.png",
                          "--csv", "a.csv", "--json=a.json", "--reps", "7"});
  EXPECT_EQ(o.name, "atomics");
  EXPECT_EQ(o.size, std::size_t(16) << 20);
  EXPECT_EQ(o.image, "x.png");
  EXPECT_EQ(o.plot, "p.png");
  EXPECT_EQ(o.csv, "a.csv");
  EXPECT_EQ(o.json, "a.json");
  EXPECT_EQ(o.reps, 7);
  EXPECT_FALSE(o.help);
  EXPECT_NE(o.command_line.find("histeq lesson atomics"), std::string::npos);
  EXPECT_TRUE(lesson::parse_args({"--help"}).help);
  EXPECT_TRUE(lesson::parse_args({}).name.empty());
}

TEST(LessonArgs, RejectsBadInputNamingTheProblem) {
  struct Bad {
    std::vector<std::string> args;
    const char* says;
  };
  const std::vector<Bad> bad = {
      {{"nope"}, "atomics, bins, subhist"},      {{"atomics", "--fast"}, "--fast"},
      {{"atomics", "--size"}, "needs a value"},  {{"atomics", "--size", "12Q"}, "12Q"},
      {{"atomics", "--size", "0"}, "--size"},    {{"atomics", "--reps", "0"}, "--reps"},
      {{"atomics", "--reps", "x"}, "--reps"},    {{"atomics", "--plot", "p.jpg"}, "PNG"},
      {{"bins", "--image", "x.png"}, "--image"}, {{"atomics", "bins"}, "one lesson"},
      {{"--size", "1M"}, "need a lesson"},
  };
  for (const Bad& b : bad) {
    std::string all;
    for (const auto& a : b.args) all += a + " ";
    try {
      lesson::parse_args(b.args);
      ADD_FAILURE() << "accepted: " << all;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << all << ": " << e.what();
    }
  }
}

TEST(LessonCli, WithoutNameListsEveryLessonAndExitsZero) {
  const CliRun r = cli({"lesson"});
  EXPECT_EQ(r.status, 0) << r.err;
  for (const lesson::Lesson& l : lesson::lessons()) {
    EXPECT_NE(r.out.find("  " + l.name + " "), std::string::npos) << l.name << "\n" << r.out;
  }
  const CliRun h = cli({"lesson", "--help"});
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.out.find("Usage: histeq lesson"), std::string::npos);
  EXPECT_EQ(cli({"lesson", "nope"}).status, 2);
  EXPECT_NE(cli({"--help"}).out.find("histeq lesson"), std::string::npos);
}

TEST(LessonTable, StepsAreRegistryKernelsAndEachLessonHasAtomicAndTheCpu) {
  ASSERT_EQ(lesson::lessons().size(), 3u);
  for (const lesson::Lesson& l : lesson::lessons()) {
    SCOPED_TRACE(l.name);
    bool atomic = false, cpu = false;
    for (const lesson::Step& s : l.steps) {
      EXPECT_FALSE(s.change.empty());
      if (s.kernel == bench::kCpuKernel) {
        cpu = true;
        continue;
      }
      atomic |= s.kernel == "atomic";
      const KernelEntry& e = kernels::find_kernel(s.kernel);  // throws if unknown
      EXPECT_EQ(e.unsupported(l.type, l.bins.back()), nullptr) << s.kernel;
    }
    EXPECT_TRUE(atomic);
    EXPECT_TRUE(cpu);
    EXPECT_FALSE(l.dists.empty());
    EXPECT_FALSE(l.sizes.empty());
  }
  // The chapter's central comparison: contiguous immediately before coarsened.
  const auto& steps = lesson::find_lesson("atomics").steps;
  const auto c = std::find_if(steps.begin(), steps.end(),
                              [](const lesson::Step& s) { return s.kernel == "contiguous"; });
  ASSERT_NE(c, steps.end());
  ASSERT_NE(c + 1, steps.end());
  EXPECT_EQ((c + 1)->kernel, "coarsened");
}

TEST(LessonTable, BenchOptionsRunTheStepsOnTheLessonsData) {
  const lesson::Lesson& l = lesson::find_lesson("atomics");
  lesson::Options o;
  o.reps = 4;
  bench::Options b = lesson::bench_options(l, o, "photo.jpg");
  ASSERT_EQ(b.kernels.size(), l.steps.size());
  for (std::size_t i = 0; i < l.steps.size(); ++i) EXPECT_EQ(b.kernels[i], l.steps[i].kernel);
  EXPECT_EQ(b.sizes, l.sizes);
  EXPECT_EQ(b.images, std::vector<std::string>{"photo.jpg"});
  EXPECT_TRUE(b.dists_given);  // synthetic cases as well as the photo
  EXPECT_EQ(b.reps, 4);
  o.size = 12345;
  b = lesson::bench_options(lesson::find_lesson("bins"), o, "");
  EXPECT_EQ(b.sizes, std::vector<std::size_t>{12345});
  EXPECT_TRUE(b.images.empty());
  EXPECT_EQ(b.bins, (std::vector<int>{16, 64, 256}));
}

// ---------------------------------------------------------------------------------------------
// The narration, from hand-made cells (what a GPU run produces).
// ---------------------------------------------------------------------------------------------

bench::Cell cell(const std::string& kernel, const std::string& dist, double us,
                 std::uint64_t lost = 0) {
  bench::Cell c;
  c.kernel = kernel;
  c.type = SampleType::u8;
  c.bins = 256;
  c.n = std::size_t(64) << 20;
  c.dist = dist;
  c.status = "PASS";
  c.median_us = us;
  c.gbps = double(c.n) / (us * 1e3);
  c.pct_read_bw = c.gbps / 4000.0 * 100;
  c.lost = lost;
  c.launch_grid = 264;
  c.launch_block = 512;
  return c;
}

TEST(LessonNarrate, SpeedUpsLostCountsAndCeilingFromTheCells) {
  const lesson::Lesson& l = lesson::find_lesson("atomics");
  bench::RunInfo info;
  info.device = "test GPU";
  info.read_bw_gbps = 4000;
  std::vector<bench::Cell> cells;
  for (const std::string& d : {"uniform", "hot"}) {
    const double hot = d == "hot" ? 10 : 1;
    cells.push_back(cell("cpu", d, 20000));
    cells.push_back(cell("racy", d, 150 * hot, d == "hot" ? 12345 : 0));
    cells.push_back(cell("atomic", d, 200 * hot));
    cells.push_back(cell("privatized", d, 100));
    cells.push_back(cell("contiguous", d, 80));
    cells.push_back(cell("coarsened", d, 40));
    cells.push_back(cell("aggregated", d, 50));
  }
  cells.push_back(cell("atomic", "image:moon.png", 10));
  const std::vector<lesson::Row> rows = lesson::narrate(l, info, cells, {{"coarsened", 0.5}});
  ASSERT_EQ(rows.size(), cells.size());

  auto find = [&](const std::string& panel, const std::string& k) -> const lesson::Row& {
    for (const auto& r : rows)
      if (r.panel == panel && r.kernel == k) return r;
    ADD_FAILURE() << panel << " " << k;
    return rows.front();
  };
  // Order: cases in order, steps in the lesson's order.
  EXPECT_EQ(rows[0].kernel, "cpu");
  EXPECT_EQ(rows[0].step, 1);
  EXPECT_EQ(rows[6].kernel, "aggregated");
  EXPECT_EQ(rows[6].step, 7);
  EXPECT_EQ(rows.back().panel, "photo:moon.png");

  const auto& priv = find("uniform", "privatized");
  EXPECT_DOUBLE_EQ(priv.speedup_atomic, 2.0);
  EXPECT_DOUBLE_EQ(priv.speedup_prev, 200.0 / 100.0);
  EXPECT_DOUBLE_EQ(find("uniform", "coarsened").speedup_prev, 2.0);
  EXPECT_DOUBLE_EQ(find("uniform", "aggregated").speedup_prev, 0.8);
  EXPECT_DOUBLE_EQ(find("uniform", "cpu").speedup_prev, -1);
  EXPECT_DOUBLE_EQ(find("uniform", "cpu").speedup_atomic, 200.0 / 20000.0);
  // The read ceiling: 64 MiB at 4000 GB/s, as a speed-up over atomic's 200 us.
  const double ceiling_us = double(std::size_t(64) << 20) / (4000 * 1e3);
  EXPECT_NEAR(priv.ceiling_speedup, 200.0 / ceiling_us, 1e-9);
  EXPECT_DOUBLE_EQ(find("uniform", "coarsened").occupancy, 0.5);
  EXPECT_LT(find("uniform", "atomic").occupancy, 0);

  // racy: equal to the CPU when it lost nothing; FAIL with its lost counts otherwise.
  EXPECT_EQ(find("uniform", "racy").status, "PASS");
  const auto& racy = find("hot", "racy");
  EXPECT_EQ(racy.status, "FAIL");
  EXPECT_EQ(racy.lost, 12345u);
  EXPECT_NE(racy.why.find("12,345"), std::string::npos) << racy.why;

  // The sentences use this run's facts.
  EXPECT_NE(find("hot", "atomic").why.find("slower than on uniform"), std::string::npos)
      << find("hot", "atomic").why;
  EXPECT_NE(find("uniform", "coarsened").why.find("2.00x faster than contiguous"),
            std::string::npos)
      << find("uniform", "coarsened").why;
  EXPECT_NE(find("uniform", "contiguous").why.find("% of the 4000 GB/s read ceiling"),
            std::string::npos)
      << find("uniform", "contiguous").why;
  // The photo has only atomic: no previous step.
  EXPECT_DOUBLE_EQ(rows.back().speedup_atomic, 1.0);
  EXPECT_DOUBLE_EQ(rows.back().speedup_prev, -1);

  // Text: one title per case, one line per row.
  std::ostringstream text;
  lesson::write_text(text, l, info, rows);
  const std::string t = text.str();
  std::size_t titles = 0;
  for (const auto& line : lines_of(t)) titles += line.rfind("== ", 0) == 0;
  EXPECT_EQ(titles, 3u) << t;
  EXPECT_NE(t.find("read ceiling 4000 GB/s"), std::string::npos) << t;
}

// ---------------------------------------------------------------------------------------------
// CPU-only runs (the GPU steps are skipped without a GPU; with one, these run the whole lesson
// at a small size).
// ---------------------------------------------------------------------------------------------

TEST_F(LessonFiles, SmallRunWritesOneLinePerStepAndParsableCsvAndJson) {
  const std::string csv = path("bins.csv"), json = path("bins.json");
  const CliRun r =
      cli({"lesson", "bins", "--size", "64K", "--reps", "2", "--csv", csv, "--json", json});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  std::string why;
  const bool gpu = test::gpu_available(&why);
  const std::size_t steps_run = gpu ? 3 : 1;
  const std::size_t cases = 3 * 2;  // bins 16/64/256 × uniform/hot

  // Text: a title per case, then one line per step; each ends its check column with PASS.
  std::size_t titles = 0, step_lines = 0;
  for (const std::string& line : lines_of(r.out)) {
    if (line.rfind("== ", 0) == 0) ++titles;
    if (line.size() > 4 && line[2] >= '1' && line[2] <= '9' && line[3] == ' ') {
      ++step_lines;
      EXPECT_NE(line.find("  PASS  "), std::string::npos) << line;
    }
  }
  EXPECT_EQ(titles, cases) << r.out;
  EXPECT_EQ(step_lines, cases * steps_run) << r.out;
  if (!gpu) {
    EXPECT_NE(r.out.find("GPU steps skipped"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("GPU steps skipped"), r.out.rfind("GPU steps skipped")) << "said once";
  }

  const auto recs = parse_csv(slurp(csv));
  ASSERT_EQ(recs.size(), 1 + cases * steps_run);
  const auto& head = recs[0];
  auto col = [&](const char* name) {
    const auto it = std::find(head.begin(), head.end(), name);
    EXPECT_NE(it, head.end()) << name;
    return std::size_t(it - head.begin());
  };
  const std::size_t kernel = col("kernel"), status = col("status"), median = col("median_us"),
                    size = col("size"), lesson_col = col("lesson");
  for (std::size_t i = 1; i < recs.size(); ++i) {
    ASSERT_EQ(recs[i].size(), head.size()) << "line " << i;
    EXPECT_EQ(recs[i][status], "PASS");
    EXPECT_EQ(recs[i][size], "65536");
    EXPECT_EQ(recs[i][lesson_col], "bins");
    EXPECT_GT(std::strtod(recs[i][median].c_str(), nullptr), 0.0) << recs[i][kernel];
  }

  Json j(slurp(json));
  ASSERT_TRUE(j.ok()) << slurp(json);
  EXPECT_EQ(j.top["lesson"], "bins");
  EXPECT_EQ(j.top["gpu_skipped"] == "null", gpu);
  ASSERT_EQ(j.rows.size(), cases * steps_run);
  for (const auto& row : j.rows) {
    EXPECT_EQ(row.at("status"), "PASS");
    EXPECT_EQ(row.at("size"), "65536");
    EXPECT_FALSE(row.at("why").empty());
  }
}

TEST_F(LessonFiles, EveryLessonRunsAtASmallSize) {
  std::string why;
  const bool gpu = test::gpu_available(&why);
  for (const lesson::Lesson& l : lesson::lessons()) {
    SCOPED_TRACE(l.name);
    const CliRun r = cli({"lesson", l.name, "--size", "100003", "--reps", "2"});
    EXPECT_EQ(r.status, 0) << r.err << r.out;
    for (const lesson::Step& s : l.steps) {
      if (!gpu && s.kernel != bench::kCpuKernel) continue;
      EXPECT_NE(r.out.find(" " + s.kernel + " "), std::string::npos) << s.kernel << "\n" << r.out;
    }
    // Every exact step matched the CPU histogram.
    for (const std::string& line : lines_of(r.out)) {
      if (line.find("  FAIL  ") != std::string::npos) {
        EXPECT_NE(line.find(" racy "), std::string::npos) << "an exact step FAILed: " << line;
      }
    }
  }
}

TEST_F(LessonFiles, MissingImageIsAnError) {
  const CliRun r = cli({"lesson", "atomics", "--size", "4K", "--image", path("none.png")});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("none.png"), std::string::npos) << r.err;
}

/// Run where no samples/ folder is in reach (not beside the executable, not installed, not under
/// the current folder), `lesson atomics` says that it has no photo case, where it looked and
/// how to give one; with --image the photo case runs.
TEST_F(LessonFiles, NoPhotoCaseIsSaidWithThePlacesAndTheOption) {
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(path(""));
  const CliRun r = cli({"lesson", "atomics", "--size", "4K", "--reps", "2"});
  const CliRun with = cli({"lesson", "atomics", "--size", "4K", "--reps", "2", "--image",
                           test::source_path("samples/hubble_deep_field.jpg")});
  std::filesystem::current_path(before);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("no photo case"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hubble_deep_field.jpg"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("share/histeq/samples"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--image FILE"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("photo:"), std::string::npos) << r.out;
  ASSERT_EQ(with.status, 0) << with.err << with.out;
  EXPECT_NE(with.out.find("photo:hubble_deep_field.jpg"), std::string::npos) << with.out;
  EXPECT_EQ(with.err.find("no photo case"), std::string::npos) << with.err;
}

/// --plot without a GPU draws nothing (the picture shows speed-ups over atomic) and says so,
/// naming the file it did not write.
TEST_F(LessonFiles, PlotWithoutAGpuSaysNoPictureWasWritten) {
  std::string why;
  if (test::gpu_available(&why)) GTEST_SKIP() << "a GPU is usable: the plot has GPU steps";
  const std::string png = path("atomics.png");
  const CliRun r = cli({"lesson", "atomics", "--size", "4K", "--reps", "2", "--plot", png});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("no picture written to " + png), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(png));
}

/// The plot script reads the CSV the command writes (skipped where python3 or matplotlib is
/// missing; the command then prints how to draw it by hand).
TEST_F(LessonFiles, PlotScriptDrawsTheNarratedCsv) {
  if (std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 with matplotlib not available";
  }
  const lesson::Lesson& l = lesson::find_lesson("atomics");
  bench::RunInfo info;
  info.device = "test GPU";
  info.read_bw_gbps = 4000;
  std::vector<bench::Cell> cells;
  for (const std::string& d : {"uniform", "hot", "blocky", "image:moon.png"}) {
    for (const lesson::Step& s : l.steps) cells.push_back(cell(s.kernel, d, 10 + s.change.size()));
  }
  cells[1].lost = 99;
  const auto rows = lesson::narrate(l, info, cells, {});
  {
    std::ofstream f(path("l.csv"));
    lesson::write_csv(f, l, info, rows);
  }
  const std::string cmd = "python3 " + test::source_path("bench/lesson_plot.py") + " " +
                          path("l.csv") + " -o " + path("l.png") + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string png = slurp(path("l.png"));
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
}

}  // namespace

// The JSON comes from nlohmann::json: a photo whose name is not valid UTF-8 (Latin-1 0xE9)
// still gives valid JSON, the byte replaced by U+FFFD.
TEST(LessonJson, NonUtf8PhotoNameStillParses) {
  lesson::Row r;
  r.panel = "photo:caf\xE9.png";
  r.case_label = "u8, 256 bins, 1M";
  r.kernel = "atomic";
  r.status = "PASS";
  r.median_us = 12.5;
  bench::RunInfo info;
  info.device = "CPU (2 threads)";
  info.command_line = "histeq lesson atomics --image caf\xE9.png";
  std::ostringstream os;
  lesson::write_json(os, lesson::find_lesson("atomics"), info, {r});
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(os.str())) << os.str();
  ASSERT_EQ(j["rows"].size(), 1u);
  EXPECT_EQ(j["rows"][0]["panel"], "photo:caf\xEF\xBF\xBD.png");
  EXPECT_EQ(j["rows"][0]["median_us"], 12.5);
  EXPECT_TRUE(j["rows"][0]["speedup_prev"].is_null());
  EXPECT_EQ(j["lesson"], "atomics");
  EXPECT_EQ(j["command"], "histeq lesson atomics --image caf\xEF\xBF\xBD.png");
}
