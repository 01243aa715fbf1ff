// bench.cpp — `histeq bench` (histeq/bench.hpp): the sweep, the checks against the CPU reference,
// the CUDA-event timing, and the table/CSV/JSON writers.
#include "histeq/bench.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "histeq/clahe.hpp"
#include "histeq/clahe_gpu.hpp"
#include "histeq/cpu.hpp"
#include "histeq/gpu16.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/lut.hpp"
#include "histeq/image_io.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/planes.hpp"
#include "registry.hpp"
#include "stream_hold.hpp"
#include "stream_read.hpp"

namespace fs = std::filesystem;

namespace histeq::bench {

// ---------------------------------------------------------------------------------------------
// Small text helpers
// ---------------------------------------------------------------------------------------------
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = char(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

const char* type_name(SampleType t) { return t == SampleType::u8 ? "u8" : "i32"; }

/// Integer option value in [lo, hi]; throws UsageError naming the option.
long long parse_int(std::string_view opt, std::string_view text, long long lo, long long hi) {
  const std::string t = trim(text);
  long long v = 0;
  const std::size_t digits_from = (!t.empty() && t[0] == '-') ? 1 : 0;
  bool ok = t.size() > digits_from &&
            t.find_first_not_of("0123456789", digits_from) == std::string::npos;
  if (ok) {
    errno = 0;
    char* end = nullptr;
    v = std::strtoll(t.c_str(), &end, 10);
    ok = errno == 0 && end && *end == '\0';
  }
  if (!ok || v < lo || v > hi) {
    throw UsageError("bad value '" + std::string(text) + "' for --" + std::string(opt) +
                     ": expected an integer in " + std::to_string(lo) + ".." +
                     std::to_string(hi));
  }
  return v;
}

std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                       "0123456789_./,=:+-@%") == std::string::npos;
  if (plain) return s;
  std::string r = "'";
  for (char c : s) {
    if (c == '\'') r += "'\\''";
    else r += c;
  }
  return r + "'";
}

std::string fmt(double v, int decimals) {
  if (v < 0 || !std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

/// Number for CSV/JSON: shortest round-trippable-enough text; `unset` when v < 0.
std::string num(double v, const char* unset) {
  if (v < 0 || !std::isfinite(v)) return unset;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string r = "\"";
  for (char c : s) {
    if (c == '"') r += "\"\"";
    else r += c;
  }
  return r + "\"";
}

std::string json_string(const std::string& s) {
  std::string r = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': r += "\\\""; break;
      case '\\': r += "\\\\"; break;
      case '\n': r += "\\n"; break;
      case '\r': r += "\\r"; break;
      case '\t': r += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          r += buf;
        } else {
          r += char(c);
        }
    }
  }
  return r + "\"";
}

double median_of(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

const char* to_string(Timing t) { return t == Timing::gpu ? "gpu" : "enqueue"; }

const char* to_string(L2 l) { return l == L2::hot ? "hot" : "cold"; }

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t comma = s.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? s.size() : comma;
    std::string item = trim(s.substr(start, end - start));
    if (!item.empty()) out.push_back(std::move(item));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::size_t parse_size(std::string_view text) {
  const std::string s = trim(text);
  std::size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  std::uint64_t mult = 1;
  bool ok = i > 0;
  if (ok && i < s.size()) {
    const std::string suffix = lower(s.substr(i));
    if (suffix == "k") mult = std::uint64_t(1) << 10;
    else if (suffix == "m") mult = std::uint64_t(1) << 20;
    else if (suffix == "g") mult = std::uint64_t(1) << 30;
    else ok = false;
  }
  std::uint64_t v = 0;
  if (ok) {
    for (std::size_t k = 0; k < i && ok; ++k) {
      const std::uint64_t d = std::uint64_t(s[k] - '0');
      if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) ok = false;
      else v = v * 10 + d;
    }
  }
  if (ok && v > std::numeric_limits<std::size_t>::max() / mult) ok = false;
  // Keep n * 4 bytes addressable (i32 samples).
  if (ok && v * mult > (std::numeric_limits<std::size_t>::max() >> 3)) ok = false;
  if (!ok) {
    throw UsageError("bad size '" + std::string(text) +
                     "': expected a count of elements with an optional K, M or G suffix "
                     "(powers of 1024), e.g. 1M, 16M, 1G");
  }
  return std::size_t(v * mult);
}

std::string format_size(std::size_t n) {
  const struct { std::size_t unit; const char* suffix; } units[] = {
      {std::size_t(1) << 30, "G"}, {std::size_t(1) << 20, "M"}, {std::size_t(1) << 10, "K"}};
  for (const auto& u : units) {
    if (n >= u.unit) {
      if (n % u.unit == 0) return std::to_string(n / u.unit) + u.suffix;
      // One decimal when exact to one decimal (67.5M), else the plain count.
      if ((n * 10) % u.unit == 0) {
        const std::size_t tenths = n * 10 / u.unit;
        return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + u.suffix;
      }
      break;
    }
  }
  return std::to_string(n);
}

std::string usage() {
  std::ostringstream o;
  o << "Usage: histeq bench [OPTIONS]\n"
       "\n"
       "Runs histogram kernels over a sweep of synthetic arrays (or decoded images), checks each\n"
       "result against the CPU reference (PASS/FAIL), then times it with CUDA events after a\n"
       "warm-up: median and min in microseconds, GB/s of input, Gelem/s, speed-up over 'atomic'\n"
       "and 'cub', and % of the read bandwidth of a streaming kernel measured in the same run.\n"
       "Cases a kernel does not support, or that do not fit in device memory, are listed as SKIP.\n"
       "Lists are comma-separated; options may repeat; 'all' selects every value.\n"
       "\n"
       "  --kernels LIST    registry kernels and/or 'cpu' (the CPU reference); default all\n"
       "                    (every registry kernel and cpu); 'auto': the default choice, its\n"
       "                    rows say which kernel it chose\n"
       "                    known: cpu, "
    << kernels::kernel_names()
    << ", auto\n"
       "  --type LIST       u8, i32 (int32); default u8,i32\n"
       "  --bins LIST       1..4096 bins (u8: sample v -> bin v*bins/256); default 16,64,256;\n"
       "                    all = 16,64,256,1024,4096\n"
       "  --sizes LIST      elements, with K/M/G suffixes (powers of 1024); default 1M,16M,64M;\n"
       "                    all = 1M,16M,64M,256M,1G\n"
       "  --dist LIST       uniform, hot (90% in bin 0), blocky (runs), natural (smooth 2-D\n"
       "                    field + noise), constant, sequential (i -> bin i % bins); default all\n"
       "  --run-length N    blocky: samples per run (default 64)\n"
       "  --block LIST      block sizes to sweep, 0 = the kernel's tuned default (default 0)\n"
       "  --reps N          timed repeats per cell (default 20)\n"
       "  --warmup N        untimed launches before timing (default 3)\n"
       "  --timing MODE     gpu (default): the stream is held by a blocking kernel while all\n"
       "                    reps are enqueued, so events time GPU execution only (nvbench's\n"
       "                    method); enqueue: launches as the host issues them (includes the\n"
       "                    host's launch gaps where it is slower than the GPU)\n"
       "  --seed N          seed of the synthetic data (default 1)\n"
       "  --images PATH...  image files or folders: the luma/gray plane of each image becomes a\n"
       "                    u8 case of its own (synthetic cases then run only with --dist)\n"
       "  --l2 MODE         hot (back-to-back), cold (L2 flushed before each rep), both\n"
       "  --case lesson     the int-array lesson: 36*192*10240 i32 values i, 64 bins by i % 64\n"
       "                    (every bin must hold 1105920)\n"
       "  --equalize        time the whole equalization (histogram, CDF, LUT, apply) of each u8\n"
       "                    case in device memory: fused single launch, three stages with\n"
       "                    columns / cub, and the CPU backend; checked byte for byte (256 bins)\n"
       "  --clahe           time CLAHE (clip 2, 8x8 tiles) of each u8 case as a square-ish\n"
       "                    gray image in device memory, GPU and CPU; checked byte for byte;\n"
       "                    also 16-bit rows: clahe16:gpu and hist16:gpu (65536 bins)\n"
       "  --csv FILE        one CSV line per cell (with device, commit, command, timestamp)\n"
       "  --json FILE       the same as JSON\n"
       "  --plot FILE.png   throughput against size per kernel and distribution\n"
       "                    (runs bench/plot.py with python3 and python3-matplotlib)\n"
       "  -h, --help        this text\n"
       "\n"
       "Singular and plural spellings are aliases (--kernel, --size, --dists, --blocks ...).\n"
       "Example (a lesson's command line):\n"
       "  histeq bench --type i32 --size 16M --bins 256 --block 256 --reps 10 --dist hot\n"
       "Exit status: 0 all PASS (or SKIP), 1 a FAIL or runtime error, 2 a usage error.\n";
  return o.str();
}

Options parse_args(const std::vector<std::string>& args) {
  Options opt;
  {
    std::string cl = "histeq bench";
    for (const auto& a : args) cl += " " + shell_quote(a);
    opt.command_line = cl;
  }

  // --images PATH... takes every argument up to the next option; cxxopts takes one value per
  // option, so those are collected first.
  std::vector<std::string> rest;
  bool images_given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--images" || a == "--image") {
      images_given = true;
      std::size_t j = i + 1;
      for (; j < args.size() && args[j].rfind("--", 0) != 0; ++j) opt.images.push_back(args[j]);
      if (j == i + 1) throw UsageError(a + " needs at least one image file or folder");
      i = j - 1;
    } else if (a.rfind("--images=", 0) == 0 || a.rfind("--image=", 0) == 0) {
      images_given = true;
      const std::string v = a.substr(a.find('=') + 1);
      if (v.empty()) throw UsageError(a + ": empty path");
      opt.images.push_back(v);
    } else {
      rest.push_back(a);
    }
  }
  (void)images_given;

  cxxopts::Options o("histeq bench", "histogram kernel benchmark");
  using VS = std::vector<std::string>;
  o.add_options()
      ("kernels", "", cxxopts::value<VS>())("kernel", "", cxxopts::value<VS>())
      ("types", "", cxxopts::value<VS>())("type", "", cxxopts::value<VS>())
      ("bins", "", cxxopts::value<VS>())("bin", "", cxxopts::value<VS>())
      ("sizes", "", cxxopts::value<VS>())("size", "", cxxopts::value<VS>())
      ("dists", "", cxxopts::value<VS>())("dist", "", cxxopts::value<VS>())
      ("blocks", "", cxxopts::value<VS>())("block", "", cxxopts::value<VS>())
      ("run-length", "", cxxopts::value<std::string>())
      ("reps", "", cxxopts::value<std::string>())
      ("warmup", "", cxxopts::value<std::string>())
      ("seed", "", cxxopts::value<std::string>())
      ("l2", "", cxxopts::value<std::string>())
      ("timing", "", cxxopts::value<std::string>())
      ("case", "", cxxopts::value<std::string>())
      ("equalize", "")
      ("clahe", "")
      ("csv", "", cxxopts::value<std::string>())
      ("json", "", cxxopts::value<std::string>())
      ("plot", "", cxxopts::value<std::string>())
      ("h,help", "");

  std::vector<std::string> argv_s{"histeq bench"};
  argv_s.insert(argv_s.end(), rest.begin(), rest.end());
  std::vector<const char*> argv;
  for (const auto& s : argv_s) argv.push_back(s.c_str());

  std::optional<cxxopts::ParseResult> parsed;
  try {
    parsed.emplace(o.parse(int(argv.size()), argv.data()));
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(e.what());
  }
  const cxxopts::ParseResult& r = *parsed;
  if (!r.unmatched().empty()) {
    throw UsageError("unexpected argument '" + r.unmatched().front() + "'");
  }
  if (r.count("help")) {
    opt.help = true;
    return opt;
  }

  // Collects the items of an option and its alias; empty when neither was given.
  auto items = [&](const char* a, const char* b) {
    std::vector<std::string> v;
    for (const char* name : {a, b}) {
      if (!r.count(name)) continue;
      for (const auto& s : r[name].as<VS>()) {
        for (auto& item : split_list(s)) v.push_back(std::move(item));
      }
    }
    if (v.empty() && (r.count(a) || r.count(b))) {
      throw UsageError(std::string("--") + a + " needs at least one value");
    }
    return v;
  };
  auto is_all = [](const std::string& s) { return lower(s) == "all"; };

  // Kernels: "cpu" first, then registry order; duplicates dropped.
  {
    auto v = items("kernels", "kernel");
    if (v.empty()) v.push_back("all");
    std::set<std::string> want;
    for (const auto& k : v) {
      const std::string name = lower(k);
      if (name == "all") {
        want.insert(kCpuKernel);
        for (const auto& e : kernels::registry()) want.insert(e.name);
        continue;
      }
      bool known = name == kCpuKernel || name == kAutoKernel;
      for (const auto& e : kernels::registry()) known = known || name == e.name;
      if (!known) {
        throw UsageError("unknown kernel '" + k + "' in --kernels; known: cpu, " +
                         kernels::kernel_names() + ", auto, all");
      }
      want.insert(name);
    }
    if (want.count(kCpuKernel)) opt.kernels.push_back(kCpuKernel);
    for (const auto& e : kernels::registry()) {
      if (want.count(e.name)) opt.kernels.push_back(e.name);
    }
    if (want.count(kAutoKernel)) opt.kernels.push_back(kAutoKernel);
  }

  const bool type_given = r.count("types") || r.count("type");
  const bool bins_given = r.count("bins") || r.count("bin");
  const bool sizes_given = r.count("sizes") || r.count("size");
  opt.dists_given = r.count("dists") || r.count("dist");

  if (type_given) {
    opt.types.clear();
    for (const auto& t : items("types", "type")) {
      const std::string s = lower(t);
      std::vector<SampleType> add;
      if (s == "u8") add = {SampleType::u8};
      else if (s == "i32" || s == "int32") add = {SampleType::i32};
      else if (s == "all") add = {SampleType::u8, SampleType::i32};
      else throw UsageError("unknown type '" + t + "' in --type; valid: u8, i32 (int32), all");
      for (auto x : add) {
        if (std::find(opt.types.begin(), opt.types.end(), x) == opt.types.end()) {
          opt.types.push_back(x);
        }
      }
    }
  }
  if (bins_given) {
    opt.bins.clear();
    for (const auto& b : items("bins", "bin")) {
      std::vector<int> add;
      if (is_all(b)) add = {16, 64, 256, 1024, 4096};
      else add = {int(parse_int("bins", b, 1, kMaxBins))};
      for (int x : add) {
        if (std::find(opt.bins.begin(), opt.bins.end(), x) == opt.bins.end()) opt.bins.push_back(x);
      }
    }
  }
  if (sizes_given) {
    opt.sizes.clear();
    for (const auto& s : items("sizes", "size")) {
      std::vector<std::size_t> add;
      if (is_all(s)) {
        add = {std::size_t(1) << 20, std::size_t(16) << 20, std::size_t(64) << 20,
               std::size_t(256) << 20, std::size_t(1) << 30};
      } else {
        add = {parse_size(s)};
      }
      for (auto x : add) {
        if (std::find(opt.sizes.begin(), opt.sizes.end(), x) == opt.sizes.end()) {
          opt.sizes.push_back(x);
        }
      }
    }
  }
  opt.dists = all_distributions();
  if (opt.dists_given) {
    opt.dists.clear();
    for (const auto& d : items("dists", "dist")) {
      std::vector<Distribution> add;
      if (is_all(d)) {
        add = all_distributions();
      } else {
        try {
          add = {parse_distribution(lower(d))};
        } catch (const UsageError&) {
          throw UsageError("unknown distribution '" + d +
                           "' in --dist; valid: uniform, hot, blocky, natural, constant, "
                           "sequential, all");
        }
      }
      for (auto x : add) {
        if (std::find(opt.dists.begin(), opt.dists.end(), x) == opt.dists.end()) {
          opt.dists.push_back(x);
        }
      }
    }
  }
  if (r.count("blocks") || r.count("block")) {
    opt.blocks.clear();
    for (const auto& b : items("blocks", "block")) {
      std::vector<int> add;
      if (is_all(b)) add = {0, 64, 128, 256, 512, 1024};
      else add = {int(parse_int("block", b, 0, 1024))};
      for (int x : add) {
        if (std::find(opt.blocks.begin(), opt.blocks.end(), x) == opt.blocks.end()) {
          opt.blocks.push_back(x);
        }
      }
    }
  }
  if (r.count("run-length")) {
    opt.run_length = std::size_t(
        parse_int("run-length", r["run-length"].as<std::string>(), 1, std::int64_t(1) << 40));
  }
  if (r.count("reps")) opt.reps = int(parse_int("reps", r["reps"].as<std::string>(), 1, 100000));
  if (r.count("warmup")) {
    opt.warmup = int(parse_int("warmup", r["warmup"].as<std::string>(), 0, 100000));
  }
  if (r.count("seed")) {
    const std::string s = trim(r["seed"].as<std::string>());
    const bool digits = !s.empty() && s.size() <= 20 &&
                        s.find_first_not_of("0123456789") == std::string::npos;
    errno = 0;
    const unsigned long long v = digits ? std::strtoull(s.c_str(), nullptr, 10) : 0;
    if (!digits || errno == ERANGE) {
      throw UsageError("bad value '" + s + "' for --seed: expected an unsigned 64-bit integer");
    }
    opt.seed = v;
  }
  if (r.count("l2")) {
    const std::string s = lower(trim(r["l2"].as<std::string>()));
    if (s == "hot") opt.l2 = {L2::hot};
    else if (s == "cold") opt.l2 = {L2::cold};
    else if (s == "both" || s == "all") opt.l2 = {L2::hot, L2::cold};
    else throw UsageError("bad value '" + s + "' for --l2; valid: hot, cold, both");
  }
  if (r.count("timing")) {
    const std::string s = lower(trim(r["timing"].as<std::string>()));
    if (s == "gpu") opt.timing = Timing::gpu;
    else if (s == "enqueue") opt.timing = Timing::enqueue;
    else throw UsageError("bad value '" + s + "' for --timing; valid: gpu, enqueue");
  }
  if (r.count("csv")) opt.csv = r["csv"].as<std::string>();
  if (r.count("json")) opt.json = r["json"].as<std::string>();
  if (r.count("plot")) opt.plot = r["plot"].as<std::string>();
  for (const std::string* f : {&opt.csv, &opt.json, &opt.plot}) {
    if (f->empty() && ((f == &opt.csv && r.count("csv")) || (f == &opt.json && r.count("json")) ||
                       (f == &opt.plot && r.count("plot")))) {
      throw UsageError("--csv, --json and --plot need a file name");
    }
  }
  if (!opt.plot.empty()) {
    const std::string ext = lower(fs::path(opt.plot).extension().string());
    if (ext != ".png") {
      throw UsageError("--plot '" + opt.plot + "': the plot is written as PNG; use a .png name");
    }
  }
  if (r.count("clahe")) {
    if (r.count("equalize")) throw UsageError("--clahe and --equalize: choose one");
    opt.clahe = true;
    if (!type_given) opt.types = {SampleType::u8};
    if (!bins_given) opt.bins = {256};
    for (SampleType t : opt.types) {
      if (t != SampleType::u8) throw UsageError("--clahe works on u8 samples (images); drop --type i32");
    }
    for (int b : opt.bins) {
      if (b != 256) throw UsageError("--clahe works on 8-bit data with 256 bins; drop --bins");
    }
  }
  if (r.count("equalize")) {
    opt.equalize = true;
    if (!type_given) opt.types = {SampleType::u8};
    if (!bins_given) opt.bins = {256};
    for (SampleType t : opt.types) {
      if (t != SampleType::u8) throw UsageError("--equalize works on u8 samples (images); drop --type i32");
    }
    for (int b : opt.bins) {
      if (b != 256) throw UsageError("--equalize equalizes 8-bit data with 256 bins; drop --bins");
    }
  }
  if (r.count("case")) {
    const std::string c = lower(trim(r["case"].as<std::string>()));
    if (c != "lesson") throw UsageError("unknown case '" + c + "' for --case; valid: lesson");
    if (type_given || bins_given || sizes_given || opt.dists_given || !opt.images.empty()) {
      throw UsageError("--case lesson fixes the data (i32, 64 bins, 36*192*10240 sequential "
                       "values); drop --type, --bins, --sizes, --dist and --images");
    }
    opt.lesson = true;
    opt.types = {SampleType::i32};
    opt.bins = {kLessonBins};
    opt.sizes = {kLessonSize};
    opt.dists = {Distribution::sequential};
    opt.dists_given = true;
  }
  // int32 samples are bin indices: every bin count up to kMaxBins is valid for both types
  // (u8 beyond 256 bins leaves bins empty and most kernels SKIP it as unsupported).
  return opt;
}

// ---------------------------------------------------------------------------------------------
// Skip rules, derived figures, writers
// ---------------------------------------------------------------------------------------------

std::string skip_reason(const char* unsupported, std::size_t needed_bytes,
                        std::size_t free_bytes) {
  if (unsupported) return std::string("unsupported: ") + unsupported;
  if (needed_bytes > free_bytes) {
    auto mib = [](std::size_t b) { return fmt(double(b) / double(1 << 20), 1); };
    return "needs " + mib(needed_bytes) + " MiB of device memory, " + mib(free_bytes) +
           " MiB free";
  }
  return {};
}

void compute_derived(std::vector<Cell>& cells, double read_bw_gbps) {
  auto same_case = [](const Cell& a, const Cell& b) {
    return a.type == b.type && a.bins == b.bins && a.n == b.n && a.dist == b.dist && a.l2 == b.l2;
  };
  auto find_ref = [&](const Cell& c, const char* kernel) -> const Cell* {
    const Cell* fallback = nullptr;
    for (const Cell& r : cells) {
      if (r.kernel != kernel || r.status != "PASS" || r.median_us <= 0 || !same_case(r, c)) {
        continue;
      }
      if (r.block == c.block) return &r;
      if (r.block == 0) fallback = &r;
    }
    return fallback;
  };
  for (Cell& c : cells) {
    c.speedup_atomic = c.speedup_cub = c.pct_read_bw = -1;
    if (c.status != "PASS" || c.median_us <= 0) continue;
    if (const Cell* a = find_ref(c, "atomic")) c.speedup_atomic = a->median_us / c.median_us;
    if (const Cell* b = find_ref(c, "cub")) c.speedup_cub = b->median_us / c.median_us;
    if (read_bw_gbps > 0 && c.gbps >= 0 && c.kernel != kCpuKernel) {
      c.pct_read_bw = 100.0 * c.gbps / read_bw_gbps;
    }
  }
}

void write_table(std::ostream& os, const RunInfo& info, const std::vector<Cell>& cells) {
  os << "# histeq bench on " << info.device;
  if (info.read_bw_gbps > 0) {
    os << "; read bandwidth " << fmt(info.read_bw_gbps, 1) << " GB/s (streaming 16-byte loads)";
  }
  if (info.gpu_skipped.empty()) os << "; timing " << info.timing;
  if (info.launch_floor_us > 0) os << "; empty launch " << fmt(info.launch_floor_us, 1) << " us";
  os << '\n';
  if (!info.gpu_skipped.empty()) os << "# GPU kernels skipped: " << info.gpu_skipped << '\n';
  os << "# " << info.command_line;
  if (!info.commit.empty()) os << "  (commit " << info.commit << ")";
  os << '\n';

  const std::vector<std::string> head = {"kernel", "type",   "bins",    "size",   "dist",
                                         "block",  "l2",     "status",  "med_us", "min_us",
                                         "GB/s",   "Gelem/s", "x_atomic", "x_cub", "%read",
                                         "lost",   "launch"};
  std::vector<std::vector<std::string>> rows;
  rows.push_back(head);
  for (const Cell& c : cells) {
    std::string launch = "-";
    if (c.launch_block > 0 || c.launch_grid > 0) {
      launch = std::to_string(c.launch_grid) + "x" + std::to_string(c.launch_block) + "," +
               std::to_string(c.launch_smem) + "B";
    }
    rows.push_back({c.kernel, type_name(c.type), std::to_string(c.bins), format_size(c.n), c.dist,
                    c.kernel == kCpuKernel ? "-" : (c.block ? std::to_string(c.block) : "def"),
                    c.l2, c.status, fmt(c.median_us, 1), fmt(c.min_us, 1), fmt(c.gbps, 1),
                    fmt(c.gelems, 2), fmt(c.speedup_atomic, 2), fmt(c.speedup_cub, 2),
                    fmt(c.pct_read_bw, 1), c.lost ? std::to_string(c.lost) : "-", launch});
  }
  std::vector<std::size_t> w(head.size(), 0);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  }
  // Text columns left-aligned, numbers right-aligned.
  auto left = [](std::size_t i) { return i == 0 || i == 1 || i == 4 || i == 6 || i == 7; };
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (std::size_t i = 0; i < rows[r].size(); ++i) {
      const std::string& s = rows[r][i];
      const std::string pad(w[i] - s.size(), ' ');
      if (i) line += "  ";
      line += left(i) ? s + pad : pad + s;
    }
    if (r > 0 && !cells[r - 1].reason.empty()) {
      std::string reason = cells[r - 1].reason;  // one line per cell
      std::replace(reason.begin(), reason.end(), '\n', ' ');
      std::replace(reason.begin(), reason.end(), '\r', ' ');
      line += "  " + reason;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << '\n';
  }
}

namespace {
const char* const kCsvHeader =
    "kernel,type,bins,size,bytes,dist,block,l2,status,median_us,min_us,gbps,gelems,"
    "speedup_vs_atomic,speedup_vs_cub,pct_of_read_bw,lost,launch_block,launch_grid,launch_smem,"
    "reps,reason,device,commit,timestamp,read_bw_gbps,command,timing";
}

void write_csv(std::ostream& os, const RunInfo& info, const std::vector<Cell>& cells) {
  os << kCsvHeader << '\n';
  for (const Cell& c : cells) {
    os << csv_field(c.kernel) << ',' << type_name(c.type) << ',' << c.bins << ',' << c.n << ','
       << c.n * sample_bytes(c.type) << ',' << csv_field(c.dist) << ',' << c.block << ','
       << c.l2 << ',' << c.status << ',' << num(c.median_us, "") << ',' << num(c.min_us, "")
       << ',' << num(c.gbps, "") << ',' << num(c.gelems, "") << ','
       << num(c.speedup_atomic, "") << ',' << num(c.speedup_cub, "") << ','
       << num(c.pct_read_bw, "") << ',' << c.lost << ',' << c.launch_block << ','
       << c.launch_grid << ',' << c.launch_smem << ',' << c.reps << ',' << csv_field(c.reason)
       << ',' << csv_field(info.device) << ',' << csv_field(info.commit) << ','
       << csv_field(info.timestamp) << ',' << num(info.read_bw_gbps, "") << ','
       << csv_field(info.command_line) << ',' << info.timing << '\n';
  }
}

void write_json(std::ostream& os, const RunInfo& info, const std::vector<Cell>& cells) {
  os << "{\n  \"device\": " << json_string(info.device)
     << ",\n  \"commit\": " << (info.commit.empty() ? "null" : json_string(info.commit))
     << ",\n  \"command\": " << json_string(info.command_line)
     << ",\n  \"timestamp\": " << json_string(info.timestamp)
     << ",\n  \"read_bw_gbps\": " << num(info.read_bw_gbps, "null")
     << ",\n  \"timing\": " << json_string(info.timing)
     << ",\n  \"launch_floor_us\": " << num(info.launch_floor_us, "null")
     << ",\n  \"gpu_skipped\": "
     << (info.gpu_skipped.empty() ? "null" : json_string(info.gpu_skipped))
     << ",\n  \"cells\": [";
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = cells[i];
    os << (i ? ",\n" : "\n") << "    {\"kernel\": " << json_string(c.kernel)
       << ", \"type\": " << json_string(type_name(c.type)) << ", \"bins\": " << c.bins
       << ", \"size\": " << c.n << ", \"bytes\": " << c.n * sample_bytes(c.type)
       << ", \"dist\": " << json_string(c.dist) << ", \"block\": " << c.block
       << ", \"l2\": " << json_string(c.l2) << ", \"status\": " << json_string(c.status)
       << ", \"reason\": " << (c.reason.empty() ? "null" : json_string(c.reason))
       << ", \"median_us\": " << num(c.median_us, "null")
       << ", \"min_us\": " << num(c.min_us, "null") << ", \"gbps\": " << num(c.gbps, "null")
       << ", \"gelems\": " << num(c.gelems, "null")
       << ", \"speedup_vs_atomic\": " << num(c.speedup_atomic, "null")
       << ", \"speedup_vs_cub\": " << num(c.speedup_cub, "null")
       << ", \"pct_of_read_bw\": " << num(c.pct_read_bw, "null") << ", \"lost\": " << c.lost
       << ", \"launch\": {\"block\": " << c.launch_block << ", \"grid\": " << c.launch_grid
       << ", \"smem\": " << c.launch_smem << "}, \"reps\": " << c.reps << "}";
  }
  os << (cells.empty() ? "]\n}\n" : "\n  ]\n}\n");
}

// ---------------------------------------------------------------------------------------------
// The sweep
// ---------------------------------------------------------------------------------------------
namespace {

/// One data set: every kernel × block × L2 state runs on it.
struct DataCase {
  SampleType type = SampleType::u8;
  int bins = 256;
  std::size_t n = 0;
  std::string label;                  ///< distribution name or image:<file>
  std::optional<Distribution> dist;   ///< synthetic
  const std::vector<std::uint8_t>* plane = nullptr;  ///< image plane (u8)
};

std::string iso_utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string detect_commit() {
  if (const char* c = std::getenv("HISTEQ_COMMIT"); c && *c) return c;
  std::string out;
  if (FILE* p = ::popen("git rev-parse --short HEAD 2>/dev/null", "r")) {
    char buf[128];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

bool is_image_name(const fs::path& p) {
  static const std::set<std::string> exts = {".png", ".jpg", ".jpeg", ".bmp", ".tga", ".gif",
                                             ".pgm", ".ppm", ".pnm", ".psd", ".hdr", ".pic"};
  return exts.count(lower(p.extension().string())) > 0;
}

/// Files named by --images: files as given, folders expanded to their image files (sorted).
std::vector<std::string> expand_images(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> in_dir;
      for (const auto& e : fs::directory_iterator(p, ec)) {
        if (e.is_regular_file(ec) && is_image_name(e.path())) in_dir.push_back(e.path().string());
      }
      if (ec) throw Error("cannot list folder '" + p + "': " + ec.message());
      std::sort(in_dir.begin(), in_dir.end());
      if (in_dir.empty()) throw Error("folder '" + p + "' holds no image files");
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      throw Error("image '" + p + "' does not exist");
    }
  }
  return files;
}

/// Why a result differs from the reference, or "" when it is acceptable. Exact kernels must
/// match bin for bin; a non-exact one may only lose counts (every bin ≤ the exact one).
std::string compare(const Histogram& got, const Histogram& ref, bool exact, std::uint64_t* lost) {
  std::size_t bad = 0, first = 0;
  std::uint64_t sum_got = 0, sum_ref = 0;
  for (std::size_t b = 0; b < ref.size(); ++b) {
    sum_got += got[b];
    sum_ref += ref[b];
    const bool wrong = exact ? got[b] != ref[b] : got[b] > ref[b];
    if (wrong && bad++ == 0) first = b;
  }
  if (lost) *lost = sum_ref >= sum_got ? sum_ref - sum_got : 0;
  if (!bad) return {};
  return std::to_string(bad) + " bin(s) " + (exact ? "differ" : "exceed the exact count") +
         "; first: bin " + std::to_string(first) + " = " + std::to_string(got[first]) +
         ", expected " + (exact ? "" : "<= ") + std::to_string(ref[first]);
}

struct Gpu {
  std::string name;
  int l2_bytes = 0;
  Stream stream;
  DeviceBuffer<std::uint64_t> hist{std::size_t(kMaxBins)};
  DeviceBuffer<std::uint8_t> flush;  ///< cold L2: written before each timed rep
};

std::size_t free_device_bytes() {
  std::size_t free_b = 0, total_b = 0;
  HISTEQ_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return free_b;
}

/// Cells whose stream hold timed out (reported at the end of the run).
int g_hold_timeouts = 0;

/// µs of each of `reps` runs of `launch` on stream s, each between its own pair of events,
/// after `warmup` untimed runs; `before(r)` runs before run r's launch, outside the timing (the
/// cold-L2 flush), for warm-up and timed runs alike. With
/// Timing::gpu the stream is held (kernels::StreamHold) while a batch of reps is enqueued, so
/// no rep waits for the host; with Timing::enqueue the reps run as the host issues them.
std::vector<double> time_reps(cudaStream_t s, int warmup, int reps, Timing timing,
                              const std::function<void(int)>& before,
                              const std::function<void()>& launch, std::ostream* err = nullptr) {
  for (int i = 0; i < warmup; ++i) {
    if (before) before(i);
    launch();
  }
  constexpr int kBatch = 32;  // a few hundred queued operations at most while held
  std::vector<Event> start(std::size_t(std::max(reps, 0))), stop(start.size());
  bool timed_out = false;
  for (int b = 0; b < reps; b += kBatch) {
    std::unique_ptr<kernels::StreamHold> hold;
    if (timing == Timing::gpu) hold = std::make_unique<kernels::StreamHold>(s);
    for (int r = b; r < std::min(reps, b + kBatch); ++r) {
      if (before) before(r);
      start[std::size_t(r)].record(s);
      launch();
      stop[std::size_t(r)].record(s);
    }
    if (hold) {
      hold->release();
      HISTEQ_CUDA_CHECK(cudaStreamSynchronize(s));
      timed_out = timed_out || hold->timed_out();
    }
  }
  if (timed_out) {
    ++g_hold_timeouts;
    if (err) {
      *err << "note: the stream hold timed out before all reps were enqueued; those reps "
              "include host launch gaps\n";
    }
  }
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    us.push_back(1000.0 * stop[std::size_t(r)].since(start[std::size_t(r)]));
  }
  return us;
}

/// µs of an empty kernel between two events (median): the launch floor of this machine.
double measure_launch_floor(Gpu& g, Timing timing, std::ostream& err) {
  const cudaStream_t s = g.stream.get();
  const double med = median_of(time_reps(s, 3, 31, timing, nullptr,
                                         [&] { kernels::launch_empty(s); }, &err));
  err << "launch floor: " << fmt(med, 2) << " us (an empty kernel between two events, median of 31)\n";
  return med;
}

/// GB/s of the streaming read kernel over a buffer much larger than L2 (median of reps).
double measure_read_bandwidth(Gpu& g, Timing timing, std::ostream& err) {
  std::size_t bytes = std::max<std::size_t>(std::size_t(512) << 20, std::size_t(g.l2_bytes) * 8);
  bytes = std::min(bytes, free_device_bytes() / 4) / 16 * 16;
  if (bytes < (std::size_t(16) << 20)) {
    err << "note: too little free device memory to measure the read bandwidth\n";
    return -1;
  }
  DeviceBuffer<std::uint8_t> buf(bytes);
  DeviceBuffer<unsigned> sink(1);
  HISTEQ_CUDA_CHECK(cudaMemsetAsync(buf.get(), 0x5A, bytes, g.stream.get()));
  const cudaStream_t s = g.stream.get();
  constexpr int kReps = 15;
  const std::vector<double> us = time_reps(s, 3, kReps, timing, nullptr, [&] {
    kernels::launch_stream_read(buf.get(), bytes, sink.get(), 0, 256, s);
  }, &err);
  const double med = median_of(us);
  const double gbps = med > 0 ? double(bytes) / (med * 1e3) : -1;
  err << "read bandwidth: " << fmt(gbps, 1) << " GB/s (streaming 16-byte loads over "
      << bytes / (1 << 20) << " MiB, median of " << kReps << ")\n";
  return gbps;
}

void set_times(Cell& c, const std::vector<double>& us) {
  c.reps = int(us.size());
  c.median_us = median_of(us);
  c.min_us = us.empty() ? -1 : *std::min_element(us.begin(), us.end());
  if (c.median_us > 0) {
    c.gbps = double(c.n * sample_bytes(c.type)) / (c.median_us * 1e3);
    c.gelems = double(c.n) / (c.median_us * 1e3);
  }
}

/// Writes the cold-L2 flush buffer (before rep r) when l2 is cold; nothing when hot.
std::function<void(int)> l2_flush(L2 l2, Gpu& g, cudaStream_t s) {
  if (l2 != L2::cold || g.flush.bytes() == 0) return nullptr;
  return [&g, s](int r) {
    HISTEQ_CUDA_CHECK(cudaMemsetAsync(g.flush.get(), r & 0xFF, g.flush.bytes(), s));
  };
}

/// µs per timed launch: `warmup` launches, then `reps` launches each between two events
/// (time_reps: held stream with Timing::gpu).
std::vector<double> time_kernel(const kernels::KernelEntry& e, const kernels::HistogramLaunch& call,
                                const Options& opt, L2 l2, Gpu& g) {
  return time_reps(call.stream, opt.warmup, opt.reps, opt.timing, l2_flush(l2, g, call.stream),
                   [&] { kernels::run_histogram(e, call); });
}

class Sweep {
 public:
  explicit Sweep(const Options& opt) : opt_(opt) {}

  std::vector<Cell> cells;
  bool any_fail = false;

  void start_gpu(Gpu* g) { gpu_ = g; }

  void run_case(const DataCase& dc, const std::uint8_t* data) {
    const Histogram ref = cpu::histogram(data, dc.n, dc.type, dc.bins);
    std::string case_fail;
    if (opt_.lesson) {
      for (std::size_t b = 0; b < ref.size(); ++b) {
        if (ref[b] != kLessonPerBin) {
          case_fail = "lesson array: bin " + std::to_string(b) + " holds " +
                      std::to_string(ref[b]) + ", expected " + std::to_string(kLessonPerBin);
          break;
        }
      }
    }
    if (opt_.equalize) {
      run_equalize(dc, data, ref);
      return;
    }
    if (opt_.clahe) {
      run_clahe(dc, data);
      return;
    }
    const bool want_cpu =
        !gpu_ || std::find(opt_.kernels.begin(), opt_.kernels.end(), kCpuKernel) !=
                     opt_.kernels.end();
    if (want_cpu) run_cpu(dc, data, ref, case_fail);
    if (gpu_) run_gpu(dc, data, ref, case_fail);
  }

 private:
  Cell base(const DataCase& dc, const std::string& kernel, int block, const std::string& l2) {
    Cell c;
    c.kernel = kernel;
    c.type = dc.type;
    c.bins = dc.bins;
    c.n = dc.n;
    c.dist = dc.label;
    c.block = block;
    c.l2 = l2;
    return c;
  }

  void add(Cell c) {
    if (c.status == "FAIL") any_fail = true;
    cells.push_back(std::move(c));
  }

  /// --equalize: the whole equalization of one u8 case, on the CPU and (with a GPU) fused and
  /// in three stages, each output compared byte for byte with the CPU's.
  void run_equalize(const DataCase& dc, const std::uint8_t* data, const Histogram& ref) {
    const Lut lut = make_lut(ref.data(), Formula::opencv);
    std::vector<std::uint8_t> want(dc.n), got(dc.n);
    {
      Cell c = base(dc, "equalize:cpu", 0, "-");
      std::vector<double> us;
      for (int r = 0; r < opt_.warmup + opt_.reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        const Histogram h = cpu::histogram(data, dc.n, SampleType::u8, 256);
        const Lut l = make_lut(h.data(), Formula::opencv);
        cpu::apply(data, dc.n, 1, Mode::gray, &l, want.data());
        const auto t1 = std::chrono::steady_clock::now();
        if (r >= opt_.warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      std::vector<std::uint8_t> direct(dc.n);
      cpu::apply(data, dc.n, 1, Mode::gray, &lut, direct.data());
      c.status = direct == want ? "PASS" : "FAIL";
      if (c.status == "FAIL") c.reason = "CPU equalize is not deterministic";
      set_times(c, us);
      add(std::move(c));
    }
    if (!gpu_) return;
    std::string why = skip_reason(nullptr, 2 * dc.n, free_device_bytes());
    if (!why.empty()) {
      for (const char* k : {"equalize:fused", "equalize:columns", "equalize:cub"}) {
        add_all(dc, k, "SKIP", "input " + why);
      }
      return;
    }
    DeviceBuffer<std::uint8_t> d_in(dc.n), d_out(dc.n);
    if (dc.n) HISTEQ_CUDA_CHECK(cudaMemcpy(d_in.get(), data, dc.n, cudaMemcpyHostToDevice));
    // A pageable-memory copy may return before the data lands, and the Equalizer's stream is
    // non-blocking (not ordered after the legacy stream): wait for the copy.
    HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
    gpu::Equalizer eq;
    const cudaStream_t s = eq.stream();
    for (const char* kernel : {"auto", "columns", "cub"}) {
      // Check once.
      std::string ran = eq.equalize_gray(d_in.get(), d_out.get(), dc.n, Formula::opencv, kernel);
      eq.synchronize();
      if (dc.n) HISTEQ_CUDA_CHECK(cudaMemcpy(got.data(), d_out.get(), dc.n, cudaMemcpyDeviceToHost));
      std::string reason;
      if (got != want) {
        std::size_t i = 0;
        while (got[i] == want[i]) ++i;
        reason = "output differs from the CPU at byte " + std::to_string(i) + ": " +
                 std::to_string(got[i]) + " vs " + std::to_string(want[i]);
      }
      for (L2 l : opt_.l2) {
        const std::vector<double> us =
            time_reps(s, opt_.warmup, opt_.reps, opt_.timing, l2_flush(l, *gpu_, s), [&] {
              eq.equalize_gray(d_in.get(), d_out.get(), dc.n, Formula::opencv, kernel);
            });
        Cell c = base(dc, "equalize:" + ran, 0, to_string(l));
        c.status = reason.empty() ? "PASS" : "FAIL";
        c.reason = reason;
        set_times(c, us);
        add(std::move(c));
      }
    }
  }

  /// --clahe: CLAHE (clip 2, 8x8) of one u8 case as a w × h image, w = floor(sqrt(n)), on the
  /// CPU and (with a GPU) with gpu::Clahe, the GPU output compared byte for byte.
  void run_clahe(const DataCase& dc, const std::uint8_t* data) {
    const int w = std::max(1, int(std::sqrt(double(dc.n))));
    const int h = int(dc.n / std::size_t(w));
    const std::size_t m = std::size_t(w) * std::size_t(h);
    ClaheOptions o;  // clip 2.0, 8x8
    std::vector<std::uint8_t> want(m), got(m);
    if (m == 0 || h < 1) {
      add_all(dc, "clahe:cpu", "SKIP", "empty case");
      return;
    }
    {
      Cell c = base(dc, "clahe:cpu", 0, "-");
      std::vector<double> us;
      for (int r = 0; r < opt_.warmup + opt_.reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        cpu::clahe_plane(data, w, h, o, want.data());
        const auto t1 = std::chrono::steady_clock::now();
        if (r >= opt_.warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      c.status = "PASS";
      set_times(c, us);
      add(std::move(c));
    }
    if (!gpu_) return;
    std::string why = skip_reason(nullptr, 2 * m, free_device_bytes());
    if (!why.empty()) {
      add_all(dc, "clahe:gpu", "SKIP", "input " + why);
      return;
    }
    DeviceBuffer<std::uint8_t> d_in(m), d_out(m);
    HISTEQ_CUDA_CHECK(cudaMemcpy(d_in.get(), data, m, cudaMemcpyHostToDevice));
    HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());  // the engine's stream is non-blocking
    gpu::Clahe engine;
    const cudaStream_t s = engine.stream();
    engine.apply(d_in.get(), d_out.get(), w, h, o);
    engine.synchronize();
    HISTEQ_CUDA_CHECK(cudaMemcpy(got.data(), d_out.get(), m, cudaMemcpyDeviceToHost));
    std::string reason;
    if (got != want) {
      std::size_t i = 0;
      while (got[i] == want[i]) ++i;
      reason = "output differs from the CPU at byte " + std::to_string(i) + ": " +
               std::to_string(got[i]) + " vs " + std::to_string(want[i]);
    }
    for (L2 l : opt_.l2) {
      const std::vector<double> us =
          time_reps(s, opt_.warmup, opt_.reps, opt_.timing, l2_flush(l, *gpu_, s),
                    [&] { engine.apply(d_in.get(), d_out.get(), w, h, o); });
      Cell c = base(dc, "clahe:gpu", 0, to_string(l));
      c.status = reason.empty() ? "PASS" : "FAIL";
      c.reason = reason;
      set_times(c, us);
      add(std::move(c));
    }
    run_clahe16(dc, data, w, h);
  }

  /// --clahe, 16-bit rows: the case's bytes made into m u16 samples (high byte the sample, low
  /// byte the sample half the case away), timed as 16-bit CLAHE ("clahe16:gpu", checked against
  /// cpu::clahe_plane16) and as the 65536-bin histogram alone ("hist16:gpu", checked against
  /// cpu::histogram16). gbps of these rows counts 2 bytes per sample (size stays in samples).
  void run_clahe16(const DataCase& dc, const std::uint8_t* data, int w, int h) {
    const std::size_t m = std::size_t(w) * std::size_t(h);
    std::string why = skip_reason(nullptr, 4 * m + (std::size_t(64) << 23), free_device_bytes());
    if (!why.empty()) {
      add_all(dc, "clahe16:gpu", "SKIP", "input " + why);
      return;
    }
    std::vector<std::uint16_t> src(m), want(m), got(m);
    for (std::size_t i = 0; i < m; ++i)
      src[i] = static_cast<std::uint16_t>((data[i] << 8) | data[(i + m / 2) % m]);
    ClaheOptions o;
    cpu::clahe_plane16(src.data(), w, h, o, want.data());
    DeviceBuffer<std::uint16_t> d_in(m), d_out(m);
    HISTEQ_CUDA_CHECK(cudaMemcpy(d_in.get(), src.data(), m * 2, cudaMemcpyHostToDevice));
    HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
    auto first_diff = [](const auto& a, const auto& b) {
      std::size_t i = 0;
      while (i < a.size() && a[i] == b[i]) ++i;
      return i == a.size() ? std::string()
                           : "differs from the CPU at " + std::to_string(i) + ": " +
                                 std::to_string(a[i]) + " vs " + std::to_string(b[i]);
    };
    auto row = [&](const std::string& kernel, L2 l, const std::string& reason,
                   const std::vector<double>& us) {
      Cell c = base(dc, kernel, 0, to_string(l));
      c.bins = 65536;
      c.status = reason.empty() ? "PASS" : "FAIL";
      c.reason = reason;
      set_times(c, us);
      if (c.median_us > 0) c.gbps = double(2 * m) / (c.median_us * 1e3);
      add(std::move(c));
    };
    {
      gpu::Clahe engine;
      const cudaStream_t s = engine.stream();
      engine.apply16(d_in.get(), d_out.get(), w, h, o);
      engine.synchronize();
      HISTEQ_CUDA_CHECK(cudaMemcpy(got.data(), d_out.get(), m * 2, cudaMemcpyDeviceToHost));
      const std::string reason = first_diff(got, want);
      for (L2 l : opt_.l2) {
        row("clahe16:gpu", l, reason,
            time_reps(s, opt_.warmup, opt_.reps, opt_.timing, l2_flush(l, *gpu_, s),
                      [&] { engine.apply16(d_in.get(), d_out.get(), w, h, o); }));
      }
    }
    {
      gpu::Equalizer16 eq;
      const cudaStream_t s = eq.stream();
      DeviceBuffer<std::uint64_t> d_hist(65536);
      eq.histogram(d_in.get(), m, d_hist.get());
      eq.synchronize();
      std::vector<std::uint64_t> hg(65536);
      HISTEQ_CUDA_CHECK(cudaMemcpy(hg.data(), d_hist.get(), hg.size() * 8, cudaMemcpyDeviceToHost));
      const std::string reason = first_diff(hg, cpu::histogram16(src.data(), m));
      for (L2 l : opt_.l2) {
        row("hist16:gpu", l, reason,
            time_reps(s, opt_.warmup, opt_.reps, opt_.timing, l2_flush(l, *gpu_, s),
                      [&] { eq.histogram(d_in.get(), m, d_hist.get()); }));
      }
    }
  }

  void run_cpu(const DataCase& dc, const std::uint8_t* data, const Histogram& ref,
               const std::string& case_fail) {
    Cell c = base(dc, kCpuKernel, 0, "-");
    Histogram got;
    for (int i = 0; i < opt_.warmup; ++i) got = cpu::histogram(data, dc.n, dc.type, dc.bins);
    std::vector<double> us;
    for (int r = 0; r < opt_.reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      got = cpu::histogram(data, dc.n, dc.type, dc.bins);
      const auto t1 = std::chrono::steady_clock::now();
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    // The reference is the same function: this checks that it is deterministic.
    const std::string diff = compare(got, ref, true, nullptr);
    c.status = diff.empty() && case_fail.empty() ? "PASS" : "FAIL";
    c.reason = !case_fail.empty() ? case_fail : diff;
    set_times(c, us);
    add(std::move(c));
  }

  /// Rows for every block × L2 state of one kernel, all with the same status and reason.
  void add_all(const DataCase& dc, const std::string& kernel, const std::string& status,
               const std::string& reason) {
    for (int block : opt_.blocks) {
      for (L2 l : opt_.l2) {
        Cell c = base(dc, kernel, block, to_string(l));
        c.status = status;
        c.reason = reason;
        add(std::move(c));
      }
    }
  }

  void run_gpu(const DataCase& dc, const std::uint8_t* data, const Histogram& ref,
               const std::string& case_fail) {
    std::vector<const kernels::KernelEntry*> entries;
    std::vector<std::string> labels;  // the row's kernel name: the entry's, or "auto"
    for (const auto& name : opt_.kernels) {
      if (name == kCpuKernel) continue;
      if (name == kAutoKernel) {
        kernels::HistogramLaunch probe;
        probe.n = dc.n;
        probe.type = dc.type;
        probe.bins = dc.bins;
        try {
          entries.push_back(&kernels::choose_auto(probe));
        } catch (const UsageError& ex) {
          add_all(dc, kAutoKernel, "SKIP", ex.what());
          continue;
        }
      } else {
        entries.push_back(&kernels::find_kernel(name));
      }
      labels.push_back(name);
    }
    if (entries.empty()) return;

    const std::size_t in_bytes = dc.n * sample_bytes(dc.type);
    std::string why = skip_reason(nullptr, in_bytes, free_device_bytes());
    DeviceBuffer<std::uint8_t> d_in;
    if (why.empty()) {
      try {
        d_in = DeviceBuffer<std::uint8_t>(in_bytes);
      } catch (const DeviceOutOfMemory& e) {
        why = std::string("input does not fit: ") + e.what();
      }
    }
    if (!why.empty()) {
      for (const auto& label : labels) add_all(dc, label, "SKIP", "input " + why);
      return;
    }
    if (in_bytes) {
      HISTEQ_CUDA_CHECK(cudaMemcpy(d_in.get(), data, in_bytes, cudaMemcpyHostToDevice));
      // The kernels run on a non-blocking stream: make sure the pageable copy has landed.
      HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
    }

    for (std::size_t k = 0; k < entries.size(); ++k) {
      const kernels::KernelEntry* e = entries[k];
      const std::string& label = labels[k];
      const std::size_t scratch = e->scratch_bytes(dc.n, dc.bins, dc.type);
      std::string skip = skip_reason(e->unsupported(dc.type, dc.bins), scratch,
                                     free_device_bytes());
      if (!skip.empty() && e->unsupported(dc.type, dc.bins) == nullptr) skip = "scratch " + skip;
      DeviceBuffer<std::uint8_t> d_scratch;
      if (skip.empty()) {
        try {
          d_scratch = DeviceBuffer<std::uint8_t>(scratch);
          kernels::prepare_scratch(*e, d_scratch.get(), d_scratch.bytes(), gpu_->stream.get());
        } catch (const DeviceOutOfMemory& ex) {
          skip = std::string("scratch does not fit: ") + ex.what();
        }
      }
      if (!skip.empty()) {
        add_all(dc, label, "SKIP", skip);
        continue;
      }
      for (int block : opt_.blocks) run_kernel(dc, *e, block, d_in.get(), d_scratch.get(), ref,
                                               case_fail, label);
    }
  }

  void run_kernel(const DataCase& dc, const kernels::KernelEntry& e, int block, const void* d_in,
                  void* d_scratch, const Histogram& ref, const std::string& case_fail,
                  const std::string& label) {
    // auto rows: the kernel it chose, as the row's note.
    const std::string note = label == e.name ? "" : std::string("auto chose ") + e.name;
    kernels::HistogramLaunch call;
    call.d_in = d_in;
    call.n = dc.n;
    call.type = dc.type;
    call.bins = dc.bins;
    call.d_hist = gpu_->hist.get();
    call.d_scratch = d_scratch;
    call.stream = gpu_->stream.get();
    call.block_size = block;

    kernels::LaunchShape shape;
    if (e.shape) {
      try {
        shape = e.shape(call);
      } catch (const Error&) {
        // A shape the kernel refuses shows up as the launch's own error below.
      }
    }
    auto fill_shape = [&](Cell& c) {
      c.launch_block = shape.block_size;
      c.launch_grid = shape.grid_size;
      c.launch_smem = shape.smem_bytes;
    };

    // 1. Check: one launch, downloaded and compared with the CPU reference.
    Histogram got(std::size_t(dc.bins), 0);
    std::uint64_t lost = 0;
    std::string diff;
    try {
      kernels::run_histogram(e, call);
      HISTEQ_CUDA_CHECK(cudaMemcpyAsync(got.data(), call.d_hist, got.size() * sizeof(std::uint64_t),
                                        cudaMemcpyDeviceToHost, call.stream));
      HISTEQ_CUDA_CHECK(cudaStreamSynchronize(call.stream));
      diff = compare(got, ref, e.exact, &lost);
    } catch (const UsageError& ex) {
      // The kernel refuses this call (e.g. a block size it cannot use): not a failure.
      for (L2 l : opt_.l2) {
        Cell c = base(dc, label, block, to_string(l));
        c.status = "SKIP";
        c.reason = ex.what();
        add(std::move(c));
      }
      return;
    } catch (const Error& ex) {
      diff = ex.what();
    }
    if (!case_fail.empty() && diff.empty()) diff = case_fail;

    for (L2 l : opt_.l2) {
      Cell c = base(dc, label, block, to_string(l));
      fill_shape(c);
      c.lost = lost;
      if (!diff.empty()) {
        c.status = "FAIL";
        c.reason = diff;
        add(std::move(c));
        continue;
      }
      // 2. Time.
      try {
        set_times(c, time_kernel(e, call, opt_, l, *gpu_));
        c.status = "PASS";
        c.reason = note;
      } catch (const Error& ex) {
        c.status = "FAIL";
        c.reason = std::string("while timing: ") + ex.what();
      }
      add(std::move(c));
    }
  }

  const Options& opt_;
  Gpu* gpu_ = nullptr;
};

/// Finds bench/plot.py: $HISTEQ_PLOT_SCRIPT, next to the executable's folder (build tree or
/// install tree), or under the current folder. "" when none exists.
std::string find_plot_script() {
  std::vector<fs::path> candidates;
  if (const char* p = std::getenv("HISTEQ_PLOT_SCRIPT"); p && *p) candidates.emplace_back(p);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path dir = exe.parent_path();
    candidates.push_back(dir.parent_path() / "bench" / "plot.py");
    candidates.push_back(dir / "bench" / "plot.py");
    candidates.push_back(dir.parent_path() / "share" / "histeq" / "plot.py");
  }
  candidates.push_back(fs::path("bench") / "plot.py");
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c, ec)) return c.string();
  }
  return {};
}

void write_file(const std::string& path, const std::string& what,
                const std::function<void(std::ostream&)>& body) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("cannot write " + what + " file '" + path + "': cannot open it for writing");
  body(f);
  f.flush();
  if (!f) throw Error("cannot write " + what + " file '" + path + "': write failed (disk full?)");
}

/// Runs bench/plot.py on a CSV; prints how to do it by hand when it cannot.
void make_plot(const Options& opt, const RunInfo& info, const std::vector<Cell>& cells,
               std::ostream& err) {
  std::string csv = opt.csv;
  std::string tmp;
  if (csv.empty()) {
    tmp = (fs::temp_directory_path() / ("histeq-bench-" + std::to_string(::getpid()) + ".csv"))
              .string();
    write_file(tmp, "CSV", [&](std::ostream& os) { write_csv(os, info, cells); });
    csv = tmp;
  }
  const std::string script = find_plot_script();
  const bool have_python = std::system("command -v python3 >/dev/null 2>&1") == 0;
  bool ok = false;
  if (!script.empty() && have_python) {
    const std::string cmd = "python3 " + shell_quote(script) + " " + shell_quote(csv) + " -o " +
                            shell_quote(opt.plot);
    ok = std::system(cmd.c_str()) == 0;
  }
  if (!tmp.empty()) fs::remove(tmp);
  if (ok) {
    err << "plot written to " << opt.plot << '\n';
    return;
  }
  err << "note: no plot made (" << (!have_python ? "python3 not found"
                                    : script.empty() ? "bench/plot.py not found"
                                                     : "bench/plot.py failed")
      << "); to draw it: write the CSV with --csv FILE.csv, install python3-matplotlib "
         "(apt-get install python3-matplotlib), then run\n"
         "  python3 bench/plot.py FILE.csv -o "
      << shell_quote(opt.plot) << '\n';
}

}  // namespace

Measured measure(const Options& opt, std::ostream& err) {
  RunInfo info;
  info.command_line = opt.command_line;
  info.timestamp = iso_utc_now();
  info.commit = detect_commit();
  info.timing = to_string(opt.timing);

  // Validate the image paths before any long work.
  const std::vector<std::string> image_files = expand_images(opt.images);

  std::string why;
  const bool gpu = cuda_available(&why);
  std::unique_ptr<Gpu> g;
  Sweep sweep(opt);
  bool had_error = false;
  try {
    if (gpu) {
      g = std::make_unique<Gpu>();
      int dev = 0;
      HISTEQ_CUDA_CHECK(cudaGetDevice(&dev));
      cudaDeviceProp prop{};
      HISTEQ_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
      HISTEQ_CUDA_CHECK(cudaDeviceGetAttribute(&g->l2_bytes, cudaDevAttrL2CacheSize, dev));
      info.device = prop.name;
      err << "device: " << prop.name << " (" << prop.multiProcessorCount << " SMs, L2 "
          << g->l2_bytes / (1 << 20) << " MiB)\n";
      if (std::find(opt.l2.begin(), opt.l2.end(), L2::cold) != opt.l2.end()) {
        g->flush = DeviceBuffer<std::uint8_t>(std::size_t(std::max(g->l2_bytes, 1 << 20)) * 2);
      }
      info.read_bw_gbps = measure_read_bandwidth(*g, opt.timing, err);
      info.launch_floor_us = measure_launch_floor(*g, opt.timing, err);
      sweep.start_gpu(g.get());
    } else {
      info.gpu_skipped = "no usable CUDA device (" + why + ")";
      const unsigned t = std::max(1u, std::thread::hardware_concurrency());
      info.device = "CPU (" + std::to_string(t) + " threads)";
      err << "note: GPU kernels skipped: " << info.gpu_skipped
          << "; running the CPU reference only\n";
    }

    // The cases: synthetic (unless only images were asked for), then the images.
    std::vector<DataCase> cases;
    if (image_files.empty() || opt.dists_given) {
      for (SampleType t : opt.types) {
        for (int bins : opt.bins) {
          for (std::size_t n : opt.sizes) {
            for (Distribution d : opt.dists) {
              DataCase dc;
              dc.type = t;
              dc.bins = bins;
              dc.n = n;
              dc.dist = d;
              dc.label = to_string(d);
              cases.push_back(dc);
            }
          }
        }
      }
    }
    const std::size_t synthetic_cases = cases.size();
    const std::size_t total = synthetic_cases + image_files.size() * opt.bins.size();
    std::size_t done = 0;
    auto progress = [&](const DataCase& dc) {
      err << "[" << ++done << "/" << total << "] " << type_name(dc.type) << " " << dc.bins
          << " bins " << format_size(dc.n) << " " << dc.label << '\n';
      err.flush();
    };

    for (const DataCase& dc : cases) {
      progress(dc);
      SyntheticSpec spec;
      spec.dist = *dc.dist;
      spec.type = dc.type;
      spec.bins = dc.bins;
      spec.n = dc.n;
      spec.seed = opt.seed;
      spec.run_length = opt.run_length;
      const std::vector<std::uint8_t> data = make_samples(spec);
      sweep.run_case(dc, data.data());
    }
    for (const auto& file : image_files) {
      const Image img = load_image(file);
      std::vector<std::uint8_t> plane(img.pixel_count());
      cpu::extract_planes(img.pixels.data(), img.pixel_count(), img.channels,
                          default_mode(img.channels), plane.data());
      for (int bins : opt.bins) {
        DataCase dc;
        dc.type = SampleType::u8;
        dc.bins = bins;
        dc.n = plane.size();
        dc.label = "image:" + fs::path(file).filename().string();
        progress(dc);
        sweep.run_case(dc, plane.data());
      }
    }
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    err << "histeq bench: error: " << e.what() << '\n';
    had_error = true;
  } catch (const std::bad_alloc&) {
    err << "histeq bench: error: out of host memory\n";
    had_error = true;
  }

  compute_derived(sweep.cells, info.read_bw_gbps);
  return {std::move(info), std::move(sweep.cells), had_error, sweep.any_fail};
}

namespace {

int run(const Options& opt, std::ostream& out, std::ostream& err) {
  Measured m = measure(opt, err);
  const RunInfo& info = m.info;
  write_table(out, info, m.cells);
  if (!opt.csv.empty()) {
    write_file(opt.csv, "CSV", [&](std::ostream& os) { write_csv(os, info, m.cells); });
  }
  if (!opt.json.empty()) {
    write_file(opt.json, "JSON", [&](std::ostream& os) { write_json(os, info, m.cells); });
  }
  if (!opt.plot.empty()) make_plot(opt, info, m.cells, err);

  std::size_t pass = 0, fail = 0, skip = 0;
  for (const Cell& c : m.cells) {
    pass += c.status == "PASS";
    fail += c.status == "FAIL";
    skip += c.status == "SKIP";
  }
  if (g_hold_timeouts > 0) {
    err << "note: " << g_hold_timeouts << " timed batches outran the stream hold; their times "
        << "include host launch gaps\n";
  }
  err << pass << " PASS, " << fail << " FAIL, " << skip << " SKIP\n";
  return (m.error || m.any_fail) ? 1 : 0;
}

}  // namespace

int main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Options opt;
  try {
    opt = parse_args(args);
  } catch (const std::exception& e) {
    err << "histeq bench: " << e.what() << " (see 'histeq bench --help')\n";
    return 2;
  }
  if (opt.help) {
    out << usage();
    return 0;
  }
  try {
    return run(opt, out, err);
  } catch (const UsageError& e) {
    err << "histeq bench: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    err << "histeq bench: error: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace histeq::bench
