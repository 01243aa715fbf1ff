// bench/args.cpp — `histeq bench` options (bench/bench.hpp): cxxopts parses the command line;
// the functions here turn each option's text into Options, each naming the option it refuses.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "bench/detail.hpp"
#include "histeq/error.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/synthetic.hpp"
#include "histogram/registry.hpp"

namespace fs = std::filesystem;

namespace histeq::bench {

// ---------------------------------------------------------------------------------------------
// Small text helpers
// ---------------------------------------------------------------------------------------------
namespace internal {

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

std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                       "0123456789_./,=:+-@%") == std::string::npos;
  if (plain) return s;
  std::string r = "'";
  for (char c : s) {
    if (c == '\'')
      r += "'\\''";
    else
      r += c;
  }
  return r + "'";
}

std::string fmt(double v, int decimals) {
  if (v < 0 || !std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace internal

using namespace internal;

namespace {

/// Integer option value in [lo, hi]; throws UsageError naming the option.
long long parse_int(std::string_view opt, std::string_view text, long long lo, long long hi) {
  const std::string t = trim(text);
  long long v = 0;
  const std::size_t digits_from = (!t.empty() && t[0] == '-') ? 1 : 0;
  bool ok =
      t.size() > digits_from && t.find_first_not_of("0123456789", digits_from) == std::string::npos;
  if (ok) {
    errno = 0;
    char* end = nullptr;
    v = std::strtoll(t.c_str(), &end, 10);
    ok = errno == 0 && end && *end == '\0';
  }
  if (!ok || v < lo || v > hi) {
    throw UsageError("bad value '" + std::string(text) + "' for --" + std::string(opt) +
                     ": expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v;
}

}  // namespace

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
    if (suffix == "k")
      mult = std::uint64_t(1) << 10;
    else if (suffix == "m")
      mult = std::uint64_t(1) << 20;
    else if (suffix == "g")
      mult = std::uint64_t(1) << 30;
    else
      ok = false;
  }
  std::uint64_t v = 0;
  if (ok) {
    for (std::size_t k = 0; k < i && ok; ++k) {
      const std::uint64_t d = std::uint64_t(s[k] - '0');
      if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10)
        ok = false;
      else
        v = v * 10 + d;
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
  const struct {
    std::size_t unit;
    const char* suffix;
  } units[] = {
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
       "       histeq bench --folder IN... -o OUTDIR [--jobs N] [--decoder auto|cpu|gpu]\n"
       "                    [--backend auto|cpu|cuda] [--tune router.device_start_s=SECONDS]\n"
       "                    [--tune cpu.simd=0|1] [--tune jpeg.progressive=libjpeg|hybrid|gpu]\n"
       "                    [--tune executor.report_window=N] [--tune jpeg.hybrid_decoders=N]\n"
       "                    [--tune jpeg.gpu_huffman_decoders=N] [--tune jpeg.encoder_slots=N]\n"
       "                    [--tune router.encoder_start_s=SECONDS]\n"
       "                    [--tune jpeg.encoder_states=N] [--tune jpeg.early_hybrid=0|1]\n"
       "                    [--tune executor.prefault_mb=MIB] [--tune router.measure=0|1]\n"
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
       "                    columns / cub, and the CPU backend; checked byte for byte (256 bins);\n"
       "                    also masked equalization and matching on the GPU: hist:columns,\n"
       "                    hist:mask, hist:roi, equalize:mask, equalize:roi, match:gpu,\n"
       "                    hist16:mask and hist16:mask:constant (16-bit masked histogram);\n"
       "                    hist:mask-M and equalize:mask-M for M = letterbox, half (the policy)\n"
       "                    and their :full, :3sm, :fused-1024x1, :fused-768x2, :pair,\n"
       "                    :pair-nopdl, :stages variants (the region.* keys of --tune)\n"
       "  --clahe           time CLAHE (clip 2, 8x8 tiles) of each u8 case as a square-ish\n"
       "                    gray image in device memory, GPU and CPU; checked byte for byte;\n"
       "                    also 16-bit rows: clahe16:gpu and hist16:gpu (65536 bins)\n"
       "  --tune KEY=VALUE  a run-time choice of the kernels other than the policy's, for this "
       "run\n"
       "                    (repeatable; comma-separated lists too): to measure a variant beside\n"
       "                    the default. Every choice gives the same bytes; the table header and\n"
       "                    the JSON's \"tuning\" record it. Keys:\n"
    << tune_help()
    << "  --csv FILE        one CSV line per cell (with device, commit, command, timestamp)\n"
       "  --json FILE       the same as JSON\n"
       "  --plot FILE.png   throughput against size per kernel and distribution\n"
       "                    (runs bench/plot.py with python3 and python3-matplotlib)\n"
       "  --folder IN...    no sweep: one batch of 'histeq equalize IN... -o OUTDIR' (the same\n"
       "                    files, outputs and defaults: a folder's own image files, not its\n"
       "                    subfolders', as without -r) through the executor, then what it did:\n"
       "                    files, failures, MP, wall s, MP/s, whether the JPEG device route\n"
       "                    started (or why not), start-up ms, routes, decoders. Exit status 0\n"
       "                    when no file failed, else 1. It takes only these options, the\n"
       "                    --tune keys router.device_start_s, router.encoder_start_s,\n"
       "                    router.measure,\n"
       "                    jpeg.progressive, jpeg.hybrid_decoders,\n"
       "                    jpeg.gpu_huffman_decoders, jpeg.encoder_slots,\n"
       "                    jpeg.encoder_states, jpeg.early_hybrid,\n"
       "                    executor.prefault_mb,\n"
       "                    executor.report_window and cpu.simd,\n"
       "                    and --help:\n"
       "  -o OUTDIR         the output folder (made if missing)\n"
       "  --jobs N          CPU workers (default 0: the cores)\n"
       "  --decoder NAME    auto (default), cpu, gpu: as histeq equalize --decoder\n"
       "  --backend NAME    auto (default), cpu, cuda: as histeq equalize --backend\n"
       "  -h, --help        this text\n"
       "\n"
       "Singular and plural spellings are aliases (--kernel, --size, --dists, --blocks ...).\n"
       "Example (a lesson's command line):\n"
       "  histeq bench --type i32 --size 16M --bins 256 --block 256 --reps 10 --dist hot\n"
       "Exit status: 0 all PASS (or SKIP), 1 a FAIL or runtime error, 2 a usage error.\n";
  return o.str();
}

namespace {

using VS = std::vector<std::string>;

/// --images PATH... takes every argument up to the next one starting with "--" (cxxopts takes
/// one value per option): those go to opt.images; the other arguments are returned.
VS take_images(const VS& args, Options& opt) {
  VS rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--images" || a == "--image") {
      std::size_t j = i + 1;
      for (; j < args.size() && args[j].rfind("--", 0) != 0; ++j) opt.images.push_back(args[j]);
      if (j == i + 1) throw UsageError(a + " needs at least one image file or folder");
      i = j - 1;
    } else if (a.rfind("--images=", 0) == 0 || a.rfind("--image=", 0) == 0) {
      const std::string v = a.substr(a.find('=') + 1);
      if (v.empty()) throw UsageError(a + ": empty path");
      opt.images.push_back(v);
    } else {
      rest.push_back(a);
    }
  }
  return rest;
}

/// --folder IN... takes every argument up to the next option (one starting with "-", so that -o
/// ends it; "-" alone is taken, and refused): those go to opt.folder.inputs; the other arguments
/// are returned.
VS take_folder(const VS& args, Options& opt) {
  VS rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--folder") {
      std::size_t j = i + 1;
      for (; j < args.size() && (args[j].size() < 2 || args[j][0] != '-'); ++j)
        opt.folder.inputs.push_back(args[j]);
      if (j == i + 1) throw UsageError("--folder needs at least one image file or folder");
      i = j - 1;
    } else if (a.rfind("--folder=", 0) == 0) {
      const std::string v = a.substr(a.find('=') + 1);
      if (v.empty()) throw UsageError(a + ": empty path");
      opt.folder.inputs.push_back(v);
    } else {
      rest.push_back(a);
    }
  }
  for (const std::string& in : opt.folder.inputs)
    if (in.empty() || in == "-")
      throw UsageError("--folder takes image files and folders, not '" + in + "'");
  return rest;
}

/// Every option but --images and --folder; list options take text that parse_* splits on
/// commas.
cxxopts::Options make_parser() {
  cxxopts::Options o("histeq bench", "histogram kernel benchmark");
  // clang-format off
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
      ("tune", "", cxxopts::value<VS>())
      ("csv", "", cxxopts::value<std::string>())
      ("json", "", cxxopts::value<std::string>())
      ("plot", "", cxxopts::value<std::string>())
      ("o,output", "", cxxopts::value<std::string>())
      ("jobs", "", cxxopts::value<std::string>())
      ("decoder", "", cxxopts::value<std::string>())
      ("backend", "", cxxopts::value<std::string>())
      ("h,help", "");
  // clang-format on
  return o;
}

cxxopts::ParseResult run_parser(const VS& rest) {
  cxxopts::Options o = make_parser();
  VS argv_s{"histeq bench"};
  argv_s.insert(argv_s.end(), rest.begin(), rest.end());
  std::vector<const char*> argv;
  for (const auto& s : argv_s) argv.push_back(s.c_str());
  std::optional<cxxopts::ParseResult> parsed;
  try {
    parsed.emplace(o.parse(int(argv.size()), argv.data()));
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(e.what());
  }
  if (!parsed->unmatched().empty()) {
    throw UsageError("unexpected argument '" + parsed->unmatched().front() + "'");
  }
  return *parsed;
}

bool given(const cxxopts::ParseResult& r, const char* a, const char* b) {
  return r.count(a) || r.count(b);
}

/// The comma-separated items of an option and its alias; empty when neither was given.
VS items(const cxxopts::ParseResult& r, const char* a, const char* b) {
  VS v;
  for (const char* name : {a, b}) {
    if (!r.count(name)) continue;
    for (const auto& s : r[name].as<VS>()) {
      for (auto& item : split_list(s)) v.push_back(std::move(item));
    }
  }
  if (v.empty() && given(r, a, b)) {
    throw UsageError(std::string("--") + a + " needs at least one value");
  }
  return v;
}

bool is_all(const std::string& s) { return lower(s) == "all"; }

template <class T>
void add_unique(std::vector<T>& v, const std::vector<T>& add) {
  for (const T& x : add) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  }
}

/// Kernels: "cpu" first, then registry order, then "auto"; duplicates dropped.
void parse_kernels(const cxxopts::ParseResult& r, Options& opt) {
  VS v = items(r, "kernels", "kernel");
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

void parse_types(const cxxopts::ParseResult& r, Options& opt) {
  if (!given(r, "types", "type")) return;
  opt.types.clear();
  for (const auto& t : items(r, "types", "type")) {
    const std::string s = lower(t);
    if (s == "u8")
      add_unique(opt.types, {SampleType::u8});
    else if (s == "i32" || s == "int32")
      add_unique(opt.types, {SampleType::i32});
    else if (s == "all")
      add_unique(opt.types, {SampleType::u8, SampleType::i32});
    else
      throw UsageError("unknown type '" + t + "' in --type; valid: u8, i32 (int32), all");
  }
}

void parse_bins(const cxxopts::ParseResult& r, Options& opt) {
  if (!given(r, "bins", "bin")) return;
  opt.bins.clear();
  for (const auto& b : items(r, "bins", "bin")) {
    if (is_all(b))
      add_unique(opt.bins, {16, 64, 256, 1024, 4096});
    else
      add_unique(opt.bins, {int(parse_int("bins", b, 1, kMaxBins))});
  }
}

void parse_sizes(const cxxopts::ParseResult& r, Options& opt) {
  if (!given(r, "sizes", "size")) return;
  opt.sizes.clear();
  for (const auto& s : items(r, "sizes", "size")) {
    if (is_all(s)) {
      add_unique(opt.sizes, {std::size_t(1) << 20, std::size_t(16) << 20, std::size_t(64) << 20,
                             std::size_t(256) << 20, std::size_t(1) << 30});
    } else {
      add_unique(opt.sizes, {parse_size(s)});
    }
  }
}

void parse_dists(const cxxopts::ParseResult& r, Options& opt) {
  opt.dists = all_distributions();
  opt.dists_given = given(r, "dists", "dist");
  if (!opt.dists_given) return;
  opt.dists.clear();
  for (const auto& d : items(r, "dists", "dist")) {
    if (is_all(d)) {
      add_unique(opt.dists, all_distributions());
      continue;
    }
    try {
      add_unique(opt.dists, {parse_distribution(lower(d))});
    } catch (const UsageError&) {
      throw UsageError("unknown distribution '" + d +
                       "' in --dist; valid: uniform, hot, blocky, natural, constant, "
                       "sequential, all");
    }
  }
}

void parse_blocks(const cxxopts::ParseResult& r, Options& opt) {
  if (!given(r, "blocks", "block")) return;
  opt.blocks.clear();
  for (const auto& b : items(r, "blocks", "block")) {
    if (is_all(b))
      add_unique(opt.blocks, {0, 64, 128, 256, 512, 1024});
    else
      add_unique(opt.blocks, {int(parse_int("block", b, 0, 1024))});
  }
}

std::uint64_t parse_seed(const std::string& text) {
  const std::string s = trim(text);
  const bool digits =
      !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  const unsigned long long v = digits ? std::strtoull(s.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE) {
    throw UsageError("bad value '" + s + "' for --seed: expected an unsigned 64-bit integer");
  }
  return v;
}

/// --run-length, --reps, --warmup, --seed, --l2, --timing.
void parse_scalars(const cxxopts::ParseResult& r, Options& opt) {
  auto text = [&](const char* name) { return r[name].as<std::string>(); };
  if (r.count("run-length")) {
    opt.run_length =
        std::size_t(parse_int("run-length", text("run-length"), 1, std::int64_t(1) << 40));
  }
  if (r.count("reps")) opt.reps = int(parse_int("reps", text("reps"), 1, 100000));
  if (r.count("warmup")) opt.warmup = int(parse_int("warmup", text("warmup"), 0, 100000));
  if (r.count("seed")) opt.seed = parse_seed(text("seed"));
  if (r.count("l2")) {
    const std::string s = lower(trim(text("l2")));
    if (s == "hot")
      opt.l2 = {L2::hot};
    else if (s == "cold")
      opt.l2 = {L2::cold};
    else if (s == "both" || s == "all")
      opt.l2 = {L2::hot, L2::cold};
    else
      throw UsageError("bad value '" + s + "' for --l2; valid: hot, cold, both");
  }
  if (r.count("timing")) {
    const std::string s = lower(trim(text("timing")));
    if (s == "gpu")
      opt.timing = Timing::gpu;
    else if (s == "enqueue")
      opt.timing = Timing::enqueue;
    else
      throw UsageError("bad value '" + s + "' for --timing; valid: gpu, enqueue");
  }
}

/// --csv, --json, --plot: file names (checked for writing before the sweep, in bench.cpp).
void parse_outputs(const cxxopts::ParseResult& r, Options& opt) {
  for (auto [name, field] :
       {std::pair{"csv", &opt.csv}, std::pair{"json", &opt.json}, std::pair{"plot", &opt.plot}}) {
    if (!r.count(name)) continue;
    *field = r[name].as<std::string>();
    if (field->empty()) throw UsageError("--csv, --json and --plot need a file name");
  }
  if (!opt.plot.empty()) {
    const std::string ext = lower(fs::path(opt.plot).extension().string());
    if (ext != ".png") {
      throw UsageError("--plot '" + opt.plot + "': the plot is written as PNG; use a .png name");
    }
  }
}

/// --equalize: u8 and 256 bins only (the defaults become those).
void apply_equalize(const cxxopts::ParseResult& r, Options& opt) {
  if (!r.count("equalize")) return;
  opt.equalize = true;
  if (!given(r, "types", "type")) opt.types = {SampleType::u8};
  if (!given(r, "bins", "bin")) opt.bins = {256};
  for (SampleType t : opt.types) {
    if (t != SampleType::u8) {
      throw UsageError("--equalize works on u8 samples (images); drop --type i32");
    }
  }
  for (int b : opt.bins) {
    if (b != 256) throw UsageError("--equalize equalizes 8-bit data with 256 bins; drop --bins");
  }
}

/// --clahe: u8 and 256 bins only (the defaults become those); not with --equalize.
void apply_clahe(const cxxopts::ParseResult& r, Options& opt) {
  if (!r.count("clahe")) return;
  if (r.count("equalize")) throw UsageError("--clahe and --equalize: choose one");
  opt.clahe = true;
  if (!given(r, "types", "type")) opt.types = {SampleType::u8};
  if (!given(r, "bins", "bin")) opt.bins = {256};
  for (SampleType t : opt.types) {
    if (t != SampleType::u8) {
      throw UsageError("--clahe works on u8 samples (images); drop --type i32");
    }
  }
  for (int b : opt.bins) {
    if (b != 256) throw UsageError("--clahe works on 8-bit data with 256 bins; drop --bins");
  }
}

/// --tune KEY=VALUE...: applied in order (a later value of a key wins).
void parse_tune(const cxxopts::ParseResult& r, Options& opt) {
  if (!r.count("tune")) return;
  for (const auto& s : r["tune"].as<VS>()) {
    for (const std::string& kv : split_list(s)) apply_tune(opt.tune, kv);
  }
}

/// --case lesson fixes the data: i32, 64 bins, kLessonSize sequential values.
void apply_case(const cxxopts::ParseResult& r, Options& opt) {
  if (!r.count("case")) return;
  const std::string c = lower(trim(r["case"].as<std::string>()));
  if (c != "lesson") throw UsageError("unknown case '" + c + "' for --case; valid: lesson");
  if (given(r, "types", "type") || given(r, "bins", "bin") || given(r, "sizes", "size") ||
      opt.dists_given || !opt.images.empty()) {
    throw UsageError(
        "--case lesson fixes the data (i32, 64 bins, 36*192*10240 sequential "
        "values); drop --type, --bins, --sizes, --dist and --images");
  }
  opt.lesson = true;
  opt.types = {SampleType::i32};
  opt.bins = {kLessonBins};
  opt.sizes = {kLessonSize};
  opt.dists = {Distribution::sequential};
  opt.dists_given = true;
}

/// The --tune keys of the executor (--folder runs only): router.*, jpeg.* and executor.*.
bool executor_key(const std::string& key_value) {
  return key_value.rfind("router.", 0) == 0 || key_value.rfind("jpeg.", 0) == 0 ||
         key_value.rfind("executor.", 0) == 0;
}

/// Without --folder: its options and the router.* keys are refused.
void refuse_folder_options(const cxxopts::ParseResult& r, const Options& opt) {
  const std::pair<const char*, const char*> folder_only[] = {
      {"output", "-o"}, {"jobs", "--jobs"}, {"decoder", "--decoder"}, {"backend", "--backend"}};
  for (const auto& [name, spelled] : folder_only)
    if (r.count(name))
      throw UsageError(std::string(spelled) +
                       " goes with --folder (a batch through the executor), not the kernel sweep");
  for (const std::string& kv : opt.tune.given)
    if (executor_key(kv))
      throw UsageError("--tune " + kv + " tunes the executor: it applies to --folder runs only");
}

/// --folder: the sweep's options are refused, then -o, --jobs, --decoder, --backend and --tune
/// (router.*, jpeg.*, executor.* and cpu.simd only).
void parse_folder(const cxxopts::ParseResult& r, Options& opt) {
  const char* sweep[] = {"kernels",    "kernel",   "types",  "type", "bins",   "bin",
                         "sizes",      "size",     "dists",  "dist", "blocks", "block",
                         "run-length", "reps",     "warmup", "seed", "l2",     "timing",
                         "case",       "equalize", "clahe",  "csv",  "json",   "plot"};
  for (const char* name : sweep)
    if (r.count(name))
      throw UsageError(std::string("--folder runs one batch through the executor; --") + name +
                       " belongs to the kernel sweep (drop it, or drop --folder)");
  if (!opt.images.empty())
    throw UsageError(
        "--folder and --images: choose one (--folder runs a batch, --images adds cases to the "
        "kernel sweep)");
  if (!r.count("output") || r["output"].as<std::string>().empty())
    throw UsageError("--folder needs -o OUTDIR, the folder the outputs are written to");
  opt.folder.output = r["output"].as<std::string>();
  if (opt.folder.output == "-")  // equalize's batch refuses it too: a folder, not a stream
    throw UsageError(
        "--folder writes one output file per input: -o - (standard output) cannot "
        "take them; -o names a folder");
  if (r.count("jobs"))
    opt.folder.jobs = int(parse_int("jobs", r["jobs"].as<std::string>(), 0, kMaxJobs));
  if (r.count("decoder")) {
    const std::string d = lower(trim(r["decoder"].as<std::string>()));
    if (d == "auto")
      opt.folder.decoder = JpegRoute::automatic;
    else if (d == "cpu")
      opt.folder.decoder = JpegRoute::cpu;
    else if (d == "gpu")
      opt.folder.decoder = JpegRoute::gpu;
    else
      throw UsageError("bad value '" + d + "' for --decoder; valid: auto, cpu, gpu");
  }
  if (r.count("backend")) {
    const std::string b = lower(trim(r["backend"].as<std::string>()));
    if (b != "auto" && b != "cpu" && b != "cuda")
      throw UsageError("bad value '" + b + "' for --backend; valid: auto, cpu, cuda");
    opt.folder.backend = parse_backend(b);
  }
  if (opt.folder.decoder == JpegRoute::gpu) {  // as equalize refuses them, before any work
    if (!gpu::nvjpeg_built())
      throw UsageError(
          "--decoder gpu: this histeq was built without nvJPEG (valid here: auto, cpu)");
    if (opt.folder.backend == Backend::cpu)
      throw UsageError("--decoder gpu needs the CUDA backend (not --backend cpu)");
  }
  parse_tune(r, opt);
  for (const std::string& kv : opt.tune.given)
    if (!executor_key(kv) && kv.rfind("cpu.simd=", 0) != 0)
      throw UsageError("--tune " + kv +
                       " tunes the kernel sweep; with --folder the keys are router.*, jpeg.*, "
                       "executor.* and cpu.simd");
}

}  // namespace

Options parse_args(const std::vector<std::string>& args) {
  Options opt;
  opt.command_line = "histeq bench";
  for (const auto& a : args) opt.command_line += " " + shell_quote(a);

  const cxxopts::ParseResult r = run_parser(take_images(take_folder(args, opt), opt));
  if (r.count("help")) {
    opt.help = true;
    return opt;
  }
  if (!opt.folder.inputs.empty()) {
    parse_folder(r, opt);
    return opt;
  }
  parse_kernels(r, opt);
  parse_types(r, opt);
  parse_bins(r, opt);
  parse_sizes(r, opt);
  parse_dists(r, opt);
  parse_blocks(r, opt);
  parse_scalars(r, opt);
  parse_outputs(r, opt);
  parse_tune(r, opt);
  refuse_folder_options(r, opt);
  apply_clahe(r, opt);
  apply_equalize(r, opt);
  apply_case(r, opt);
  // int32 samples are bin indices: every bin count up to kMaxBins is valid for both types
  // (u8 beyond 256 bins leaves bins empty and most kernels SKIP it as unsupported).
  return opt;
}

}  // namespace histeq::bench
