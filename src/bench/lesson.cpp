// lesson.cpp — `histeq lesson`: the three lessons as guided experiments (bench/lesson.hpp).
// The measuring is the benchmark's (bench::measure); this file chooses what runs, and turns the
// cells into one narrated line per step.
#include "bench/lesson.hpp"

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/csv_text.hpp"
#include "bench/json_text.hpp"
#include "histeq/error.hpp"
#include "histeq/pipeline.hpp"
#include "histogram/details.hpp"
#include "histogram/registry.hpp"

namespace fs = std::filesystem;

namespace histeq::lesson {
namespace {

const char* type_name(SampleType t) { return t == SampleType::u8 ? "u8" : "i32"; }

std::string fmt(double v, int decimals) {
  if (v < 0 || !std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

/// Speed-up as "12.3x" (two significant decimals below 10).
std::string times(double v) {
  if (v < 0 || !std::isfinite(v)) return "-";
  return fmt(v, v < 10 ? 2 : 1) + "x";
}

std::string num(double v, const char* unset) {
  if (v < 0 || !std::isfinite(v)) return unset;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789_./,=:+-@%") == std::string::npos) {
    return s;
  }
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

/// "1,234,567".
std::string grouped(std::uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(std::size_t(i), ",");
  return s;
}

std::vector<Lesson> make_lessons() {
  std::vector<Lesson> all;
  {
    Lesson l;
    l.name = "atomics";
    l.title = "racy -> atomic -> privatized -> contiguous vs interleaved coarsening -> aggregated";
    l.source = "PMPP 4th ed. ch. 9 (histogram: atomics and privatization)";
    l.type = SampleType::u8;
    l.bins = {256};
    l.sizes = {std::size_t(64) << 20};
    l.dists = {Distribution::uniform, Distribution::hot, Distribution::blocky};
    l.photo = true;
    l.steps = {
        {bench::kCpuKernel, "the CPU reference: one pass over the samples"},
        {"racy", "GPU: a thread per sample, unsynchronized ++ on global counters"},
        {"atomic", "the ++ becomes one global atomicAdd"},
        {"privatized", "a shared-memory histogram per block, merged once"},
        {"contiguous", "coarsened: resident grid, thread t reads [t*k, (t+1)*k)"},
        {"coarsened", "interleaved: thread t reads t, t+T, t+2T, ..."},
        {"aggregated", "runs of equal bins: one atomic per run"},
    };
    all.push_back(l);
  }
  {
    Lesson l;
    l.name = "bins";
    l.title = "CPU vs global atomic vs shared memory over bins, sizes and hot data";
    l.source = "\"lesson 12\": histogram and atomic optimisation (int arrays)";
    l.type = SampleType::i32;
    l.bins = {16, 64, 256};
    l.sizes = {std::size_t(1) << 20, std::size_t(16) << 20, std::size_t(64) << 20};
    l.dists = {Distribution::uniform, Distribution::hot};
    l.steps = {
        {bench::kCpuKernel, "the CPU reference: one pass over the samples"},
        {"atomic", "GPU: one global atomicAdd per sample"},
        {"privatized", "shared-memory histogram per block, then a merge"},
    };
    all.push_back(l);
  }
  {
    Lesson l;
    l.name = "subhist";
    l.title =
        "64 bins without atomics: per-thread sub-histograms, two kernels, cooperative, "
        "short counters";
    l.source = "the 64-bin int-array blog (36*192*10240 values i, bin i % 64)";
    l.type = SampleType::i32;
    l.bins = {bench::kLessonBins};
    l.sizes = {bench::kLessonSize};
    l.dists = {Distribution::sequential};
    l.steps = {
        {bench::kCpuKernel, "the CPU reference: one pass over the samples"},
        {"atomic", "GPU baseline: one global atomicAdd per sample"},
        {"perthread", "a private sub-histogram per thread, no atomics while counting"},
        {"tworeduce", "blocks write partials, a second kernel sums them"},
        {"cooperative", "one launch: grid.sync() replaces the second kernel"},
        {"shortcounters", "8-bit per-thread counters: a quarter of the shared memory"},
    };
    all.push_back(l);
  }
  return all;
}

/// Where the default photo is looked for, in order: samples/ beside the executable's folder (the
/// build tree in a clone), the installed share/histeq/samples/ (cmake --install puts it there),
/// then samples/ under the current folder.
std::vector<fs::path> photo_places() {
  std::vector<fs::path> places;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    places.push_back(exe.parent_path().parent_path() / "samples");
    places.push_back(exe.parent_path() / "samples");
    places.push_back(exe.parent_path().parent_path() / "share" / "histeq" / "samples");
  }
  places.push_back(fs::path("samples"));
  return places;
}

constexpr const char* kPhoto = "hubble_deep_field.jpg";

/// The default photo (kPhoto in one of photo_places()); "" when none is found.
std::string default_photo() {
  std::error_code ec;
  for (const auto& dir : photo_places()) {
    if (fs::is_regular_file(dir / kPhoto, ec)) return (dir / kPhoto).string();
  }
  return {};
}

/// bench/lesson_plot.py: $HISTEQ_LESSON_PLOT_SCRIPT, next to the executable's folder or under
/// the current folder; "" when none exists.
std::string find_plot_script() {
  std::vector<fs::path> candidates;
  if (const char* p = std::getenv("HISTEQ_LESSON_PLOT_SCRIPT"); p && *p) candidates.emplace_back(p);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path() / "bench" / "lesson_plot.py");
    candidates.push_back(exe.parent_path() / "bench" / "lesson_plot.py");
    candidates.push_back(exe.parent_path().parent_path() / "share" / "histeq" / "lesson_plot.py");
  }
  candidates.push_back(fs::path("bench") / "lesson_plot.py");
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c, ec)) return c.string();
  }
  return {};
}

std::string panel_of(const std::string& dist) {
  const std::string img = "image:";
  return dist.rfind(img, 0) == 0 ? "photo:" + dist.substr(img.size()) : dist;
}

std::string case_label(SampleType t, int bins, std::size_t n) {
  return std::string(type_name(t)) + ", " + std::to_string(bins) + " bins, " +
         bench::format_size(n);
}

/// The facts one step's sentence may use: the rows of its case, and the same kernel's rows on
/// the other cases of the run.
struct Context {
  const std::vector<Row>* all = nullptr;  // every row so far plus this case's rows
  double read_bw = -1;
  const Row* find(const Row& like, const std::string& kernel, const std::string& panel) const {
    for (const Row& r : *all) {
      if (r.kernel == kernel && r.panel == panel && r.type == like.type && r.bins == like.bins &&
          r.n == like.n && r.median_us > 0) {
        return &r;
      }
    }
    return nullptr;
  }
  const Row* same_case(const Row& like, const std::string& kernel) const {
    return find(like, kernel, like.panel);
  }
};

std::string pct_ceiling(const Row& r, double read_bw) {
  if (r.gbps < 0) return "";
  std::string s = fmt(r.gbps, 0) + " GB/s";
  if (r.pct_read_bw >= 0 && read_bw > 0) {
    s += ", " + fmt(r.pct_read_bw, 0) + "% of the " + fmt(read_bw, 0) + " GB/s read ceiling";
  }
  return s;
}

/// The ratio b/a as "3.2x slower/faster than NAME".
std::string versus(double this_us, const Row* other, const std::string& what) {
  if (!other || other->median_us <= 0 || this_us <= 0) return "";
  const double r = other->median_us / this_us;
  return r >= 1 ? times(r) + " faster than " + what : times(1 / r) + " slower than " + what;
}

std::string join_facts(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    s += (s.empty() ? "" : "; ") + p;
  }
  return s;
}

std::string why_of(const Row& r, const Context& ctx) {
  if (r.status == "SKIP") return "skipped: " + r.note;
  if (r.status == "FAIL" && r.kernel != "racy")
    return "its histogram differs from the CPU's: " + r.note;
  std::string ceiling = pct_ceiling(r, ctx.read_bw);
  const std::string k = r.kernel;
  if (k == bench::kCpuKernel) {
    return "the reference every GPU step is compared with, " +
           fmt(double(r.n) / (r.median_us * 1e3), 2) + " G samples/s on the host";
  }
  if (k == "racy") {
    if (r.status == "FAIL" && r.lost == 0) return "a bin exceeds the exact count: " + r.note;
    if (r.lost > 0) {
      return "lost " + grouped(r.lost) + " of " + grouped(r.n) + " counts (" +
             fmt(100.0 * double(r.lost) / double(r.n), 2) +
             "%): two threads read the same counter and one increment overwrites the other";
    }
    return "lost no counts on these data this time (few collisions), which nothing guarantees";
  }
  if (k == "atomic") {
    std::string s = "every sample is one atomic on a global counter: " + ceiling;
    const Row* uni = ctx.find(r, "atomic", "uniform");
    if (uni && &*uni != &r && r.panel != "uniform") {
      s += "; " + versus(r.median_us, uni, "on uniform data") +
           (r.median_us > uni->median_us ? ": atomics on one bin serialize in L2" : "");
    }
    return s;
  }
  if (k == "privatized") {
    std::string s = "shared-memory atomics, then " + grouped(std::uint64_t(r.grid)) + " blocks × " +
                    std::to_string(r.bins) + " bins to zero and merge (" +
                    grouped(std::uint64_t(r.grid) * std::uint64_t(r.bins)) +
                    " global atomics at most for " + grouped(r.n) + " samples)";
    return join_facts({s, ceiling});
  }
  if (k == "contiguous") {
    const std::size_t threads =
        std::size_t(std::max(r.grid, 1)) * std::size_t(std::max(r.block, 1));
    const std::size_t vectors = r.n * sample_bytes(r.type) / 16;
    const std::size_t k_vec = (vectors + threads - 1) / threads;
    return join_facts({std::to_string(r.grid) + "×" + std::to_string(r.block) +
                           " threads each read " + std::to_string(k_vec * 16) +
                           " consecutive bytes, so a warp's 32 loads land " +
                           std::to_string(k_vec * 16) + " bytes apart",
                       ceiling});
  }
  if (k == "coarsened") {
    return join_facts({"the same grid reading interleaved, a warp loads 512 neighbouring bytes: " +
                           versus(r.median_us, ctx.same_case(r, "contiguous"), "contiguous"),
                       ceiling});
  }
  if (k == "aggregated") {
    return join_facts({"one atomic per run of equal bins, for a compare per sample: " +
                           versus(r.median_us, ctx.same_case(r, "coarsened"), "coarsened") +
                           " on these data",
                       ceiling});
  }
  if (k == "perthread" || k == "tworeduce" || k == "cooperative" || k == "shortcounters") {
    std::string occ = r.occupancy >= 0 ? "occupancy " + fmt(100 * r.occupancy, 0) + "%" : "";
    if (!occ.empty() && k == "perthread") occ += " (bins × threads × 4 B of shared memory)";
    if (!occ.empty() && k == "shortcounters") occ += " (1-byte counters)";
    std::string cmp;
    if (k == "tworeduce") cmp = versus(r.median_us, ctx.same_case(r, "perthread"), "perthread");
    if (k == "cooperative") cmp = versus(r.median_us, ctx.same_case(r, "tworeduce"), "tworeduce");
    if (k == "shortcounters") cmp = versus(r.median_us, ctx.same_case(r, "perthread"), "perthread");
    return join_facts({occ, cmp, ceiling});
  }
  return ceiling;
}

}  // namespace

const std::vector<Lesson>& lessons() {
  static const std::vector<Lesson> all = make_lessons();
  return all;
}

const Lesson& find_lesson(const std::string& name) {
  std::string names;
  for (const Lesson& l : lessons()) {
    if (l.name == name) return l;
    names += (names.empty() ? "" : ", ") + l.name;
  }
  throw UsageError("unknown lesson '" + name + "'; lessons: " + names);
}

std::string list_lessons() {
  std::ostringstream o;
  o << "Lessons (run one with 'histeq lesson NAME'; docs/lessons.md explains them):\n";
  for (const Lesson& l : lessons()) {
    o << "  " << l.name << std::string(l.name.size() < 9 ? 9 - l.name.size() : 1, ' ') << l.title
      << "\n           from " << l.source << "\n";
  }
  return o.str();
}

std::string usage() {
  return "Usage: histeq lesson [NAME] [--size N] [--image FILE] [--plot FILE.png]\n"
         "                     [--csv FILE] [--json FILE] [--reps N]\n"
         "\n"
         "Runs one lesson's progression of histogram kernels as a narrated experiment: each\n"
         "step is checked against the CPU histogram (PASS/FAIL) and timed like 'histeq bench'\n"
         "(CUDA events, median of --reps), then printed as one line: what changed, the time,\n"
         "the speed-up over the previous step and over 'atomic', and why, from this run's\n"
         "numbers (lost counts, occupancy, GB/s against the read ceiling measured in the run).\n"
         "Without NAME: the list of lessons. Without a GPU: only the CPU step runs (exit 0).\n"
         "\n"
         "  NAME              atomics, bins or subhist\n"
         "  --size N          samples per case, K/M/G suffixes (default: the lesson's sizes)\n"
         "  --image FILE      atomics: the photo (default samples/hubble_deep_field.jpg)\n"
         "  --plot FILE.png   speed-up over atomic per step, one panel per distribution\n"
         "                    (runs bench/lesson_plot.py with python3 and matplotlib)\n"
         "  --csv FILE        one CSV line per step and case\n"
         "  --json FILE       the same as JSON\n"
         "  --reps N          timed repeats per step (default 10)\n"
         "  -h, --help        this text\n"
         "\n"
         "Exit status: 0 every exact step PASSed (or no GPU), 1 a FAIL or runtime error,\n"
         "2 a usage error.\n";
}

Options parse_args(const std::vector<std::string>& args) {
  Options opt;
  opt.command_line = "histeq lesson";
  for (const auto& a : args) opt.command_line += " " + shell_quote(a);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::string value;
    bool has_value = false;
    if (a.rfind("--", 0) == 0) {
      const auto eq = a.find('=');
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        has_value = true;
      }
    }
    auto take = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      opt.help = true;
      return opt;
    }
    if (a == "--size") {
      const std::string v = take();
      opt.size = bench::parse_size(v);
      if (opt.size == 0) throw UsageError("bad value '" + v + "' for --size: at least 1 sample");
    } else if (a == "--image") {
      opt.image = take();
      if (opt.image.empty()) throw UsageError("--image needs a file name");
    } else if (a == "--plot" || a == "--csv" || a == "--json") {
      std::string& f = a == "--plot" ? opt.plot : a == "--csv" ? opt.csv : opt.json;
      f = take();
      if (f.empty()) throw UsageError(a + " needs a file name");
    } else if (a == "--reps") {
      const std::string v = take();
      char* end = nullptr;
      const long r = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || !end || *end != '\0' || r < 1 || r > 100000) {
        throw UsageError("bad value '" + v + "' for --reps: expected an integer in 1..100000");
      }
      opt.reps = int(r);
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("unknown option '" + a +
                       "'; valid: --size, --image, --plot, --csv, --json, --reps, --help");
    } else if (opt.name.empty()) {
      opt.name = a;
      find_lesson(a);  // throws naming the lessons
    } else {
      throw UsageError("one lesson at a time: '" + opt.name + "' and '" + a + "'");
    }
  }
  if (!opt.image.empty() && !opt.name.empty() && !find_lesson(opt.name).photo) {
    throw UsageError("--image applies to the lessons with a photo (atomics), not '" + opt.name +
                     "'");
  }
  if (!opt.plot.empty()) {
    const std::string ext = fs::path(opt.plot).extension().string();
    if (ext != ".png" && ext != ".PNG") {
      throw UsageError("--plot writes a PNG: give a FILE.png, got '" + opt.plot + "'");
    }
  }
  if (opt.name.empty() && (opt.size || !opt.image.empty() || !opt.plot.empty() ||
                           !opt.csv.empty() || !opt.json.empty())) {
    throw UsageError("options need a lesson: histeq lesson NAME [OPTIONS] (see 'histeq lesson')");
  }
  return opt;
}

bench::Options bench_options(const Lesson& lesson, const Options& opt, const std::string& photo) {
  bench::Options b;
  b.command_line = opt.command_line;
  for (const Step& s : lesson.steps) b.kernels.push_back(s.kernel);
  b.types = {lesson.type};
  b.bins = lesson.bins;
  b.sizes = opt.size ? std::vector<std::size_t>{opt.size} : lesson.sizes;
  b.dists = lesson.dists;
  b.dists_given = true;
  b.reps = opt.reps;
  b.warmup = opt.warmup;
  if (!photo.empty()) b.images = {photo};
  return b;
}

std::vector<Row> narrate(const Lesson& lesson, const bench::RunInfo& info,
                         const std::vector<bench::Cell>& cells,
                         const std::map<std::string, double>& occupancy) {
  std::vector<Row> rows;
  rows.reserve(cells.size());
  // The cases in the order of their first cell.
  struct Key {
    SampleType type;
    int bins;
    std::size_t n;
    std::string dist;
  };
  std::vector<Key> keys;
  for (const bench::Cell& c : cells) {
    const bool seen = std::any_of(keys.begin(), keys.end(), [&](const Key& k) {
      return k.type == c.type && k.bins == c.bins && k.n == c.n && k.dist == c.dist;
    });
    if (!seen) keys.push_back({c.type, c.bins, c.n, c.dist});
  }
  Context ctx;
  ctx.all = &rows;
  ctx.read_bw = info.read_bw_gbps;
  for (const Key& key : keys) {
    const std::size_t first = rows.size();
    for (std::size_t s = 0; s < lesson.steps.size(); ++s) {
      const Step& step = lesson.steps[s];
      const auto it = std::find_if(cells.begin(), cells.end(), [&](const bench::Cell& c) {
        return c.kernel == step.kernel && c.type == key.type && c.bins == key.bins &&
               c.n == key.n && c.dist == key.dist;
      });
      if (it == cells.end()) continue;
      const bench::Cell& c = *it;
      Row r;
      r.panel = panel_of(c.dist);
      r.case_label = case_label(c.type, c.bins, c.n);
      r.type = c.type;
      r.bins = c.bins;
      r.n = c.n;
      r.step = int(s) + 1;
      r.kernel = step.kernel;
      r.change = step.change;
      r.status = c.status;
      r.note = c.reason;
      r.lost = c.lost;
      // Against the CPU histogram: equal or not (racy may PASS bench's "only lost counts").
      if (r.status == "PASS" && r.lost > 0) {
        r.status = "FAIL";
        r.note = "lost " + grouped(r.lost) + " counts";
      }
      r.median_us = c.median_us;
      r.gbps = c.kernel == bench::kCpuKernel ? -1 : c.gbps;
      r.pct_read_bw = c.kernel == bench::kCpuKernel ? -1 : c.pct_read_bw;
      r.grid = c.launch_grid;
      r.block = c.launch_block;
      if (const auto o = occupancy.find(c.kernel); o != occupancy.end()) r.occupancy = o->second;
      rows.push_back(r);
    }
    // Speed-ups and the read ceiling, within the case.
    const Row* atomic = nullptr;
    for (std::size_t i = first; i < rows.size(); ++i) {
      if (rows[i].kernel == "atomic" && rows[i].median_us > 0) atomic = &rows[i];
    }
    double prev_us = -1;
    for (std::size_t i = first; i < rows.size(); ++i) {
      Row& r = rows[i];
      if (r.median_us > 0) {
        if (prev_us > 0) r.speedup_prev = prev_us / r.median_us;
        if (atomic) r.speedup_atomic = atomic->median_us / r.median_us;
        prev_us = r.median_us;
      }
      if (atomic && info.read_bw_gbps > 0) {
        const double ceiling_us = double(r.n * sample_bytes(r.type)) / (info.read_bw_gbps * 1e3);
        if (ceiling_us > 0) r.ceiling_speedup = atomic->median_us / ceiling_us;
      }
    }
    for (std::size_t i = first; i < rows.size(); ++i) rows[i].why = why_of(rows[i], ctx);
  }
  return rows;
}

void write_text(std::ostream& os, const Lesson& lesson, const bench::RunInfo& info,
                const std::vector<Row>& rows) {
  os << "lesson " << lesson.name << ": " << lesson.title << "\n"
     << "from " << lesson.source << "\n"
     << "device: " << info.device;
  if (info.read_bw_gbps > 0) {
    os << " | read ceiling " << fmt(info.read_bw_gbps, 0)
       << " GB/s (streaming 16-byte loads, this run)";
  }
  if (info.launch_floor_us > 0) os << " | launch floor " << fmt(info.launch_floor_us, 2) << " us";
  os << " | commit " << (info.commit.empty() ? "unknown" : info.commit) << "\n";
  if (!info.gpu_skipped.empty()) {
    os << "GPU steps skipped: " << info.gpu_skipped << "; running the CPU steps only\n";
  }
  std::string current;
  std::size_t kw = 4;
  std::size_t cw = 12;
  for (const Row& r : rows) {
    kw = std::max(kw, r.kernel.size());
    cw = std::max(cw, r.change.size());
  }
  for (const Row& r : rows) {
    const std::string title = r.panel + " (" + r.case_label + ")";
    if (title != current) {
      current = title;
      os << "\n== " << title << " ==\n"
         << "  # " << std::string("step") + std::string(kw - 4, ' ') << "  "
         << std::string("what changed") + std::string(cw - 12, ' ') << "       time"
         << "  vs prev  vs atomic  check  why\n";
    }
    char step[8];
    std::snprintf(step, sizeof step, "%3d", r.step);
    std::string time = r.median_us > 0 ? fmt(r.median_us, r.median_us < 100 ? 1 : 0) + " us" : "-";
    os << step << " " << r.kernel << std::string(kw - r.kernel.size(), ' ') << "  " << r.change
       << std::string(cw - r.change.size(), ' ') << "  "
       << std::string(time.size() < 9 ? 9 - time.size() : 0, ' ') << time << "  "
       << std::string(7 - std::min<std::size_t>(7, times(r.speedup_prev).size()), ' ')
       << times(r.speedup_prev) << "  "
       << std::string(9 - std::min<std::size_t>(9, times(r.speedup_atomic).size()), ' ')
       << times(r.speedup_atomic) << "  " << r.status
       << std::string(r.status.size() < 5 ? 5 - r.status.size() : 0, ' ') << "  " << r.why << "\n";
  }
  if (rows.empty()) os << "\n(no rows)\n";
}

namespace {
const char* const kCsvHeader =
    "lesson,panel,case,type,bins,size,bytes,step,kernel,change,status,median_us,speedup_prev,"
    "speedup_atomic,gbps,pct_of_read_bw,ceiling_speedup,lost,occupancy,grid,block,why,note,"
    "device,commit,read_bw_gbps,command";
}

void write_csv(std::ostream& os, const Lesson& lesson, const bench::RunInfo& info,
               const std::vector<Row>& rows) {
  os << kCsvHeader << '\n';
  for (const Row& r : rows) {
    os << lesson.name << ',' << csv_text::field(r.panel) << ',' << csv_text::field(r.case_label)
       << ',' << type_name(r.type) << ',' << r.bins << ',' << r.n << ','
       << r.n * sample_bytes(r.type) << ',' << r.step << ',' << csv_text::field(r.kernel) << ','
       << csv_text::field(r.change) << ',' << r.status << ',' << num(r.median_us, "") << ','
       << num(r.speedup_prev, "") << ',' << num(r.speedup_atomic, "") << ',' << num(r.gbps, "")
       << ',' << num(r.pct_read_bw, "") << ',' << num(r.ceiling_speedup, "") << ',' << r.lost << ','
       << num(r.occupancy, "") << ',' << r.grid << ',' << r.block << ',' << csv_text::field(r.why)
       << ',' << csv_text::field(r.note) << ',' << csv_text::field(info.device) << ','
       << csv_text::field(info.commit) << ',' << num(info.read_bw_gbps, "") << ','
       << csv_text::field(info.command_line) << '\n';
  }
}

namespace {

using Json = nlohmann::ordered_json;

/// JSON number, or null when v < 0 (unset) or not finite.
Json json_num(double v) {
  if (v < 0 || !std::isfinite(v)) return nullptr;
  return v;
}

/// JSON string, or null when empty.
Json json_text_or_null(const std::string& s) {
  if (s.empty()) return nullptr;
  return s;
}

Json to_json(const Row& r) {
  return Json{
      {"panel", r.panel},
      {"case", r.case_label},
      {"type", type_name(r.type)},
      {"bins", r.bins},
      {"size", r.n},
      {"step", r.step},
      {"kernel", r.kernel},
      {"change", r.change},
      {"status", r.status},
      {"median_us", json_num(r.median_us)},
      {"speedup_prev", json_num(r.speedup_prev)},
      {"speedup_atomic", json_num(r.speedup_atomic)},
      {"gbps", json_num(r.gbps)},
      {"pct_of_read_bw", json_num(r.pct_read_bw)},
      {"ceiling_speedup", json_num(r.ceiling_speedup)},
      {"lost", r.lost},
      {"occupancy", json_num(r.occupancy)},
      {"grid", r.grid},
      {"block", r.block},
      {"why", r.why},
      {"note", json_text_or_null(r.note)},
  };
}

}  // namespace

void write_json(std::ostream& os, const Lesson& lesson, const bench::RunInfo& info,
                const std::vector<Row>& rows) {
  Json row_array = Json::array();
  for (const Row& r : rows) row_array.push_back(to_json(r));
  Json j{
      {"lesson", lesson.name},
      {"title", lesson.title},
      {"source", lesson.source},
      {"device", info.device},
      {"commit", json_text_or_null(info.commit)},
      {"command", info.command_line},
      {"timestamp", info.timestamp},
      {"read_bw_gbps", json_num(info.read_bw_gbps)},
      {"launch_floor_us", json_num(info.launch_floor_us)},
      {"gpu_skipped", json_text_or_null(info.gpu_skipped)},
      {"rows", std::move(row_array)},
  };
  if (!json_text::is_utf8(info.command_line)) {
    j["command_bytes_hex"] = json_text::hex_bytes(info.command_line);
  }
  // Bytes that are not valid UTF-8 (a Latin-1 photo name) become U+FFFD: always valid JSON,
  // and the command's exact bytes are in command_bytes_hex.
  os << j.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';
}

namespace {

void write_file(const std::string& path, const std::string& what,
                const std::function<void(std::ostream&)>& body) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("cannot write " + what + " file '" + path + "': cannot open it for writing");
  body(f);
  f.flush();
  if (!f) throw Error("cannot write " + what + " file '" + path + "': write failed (disk full?)");
}

/// Runs bench/lesson_plot.py on the rows' CSV; says why not, and how to draw it by hand, when it
/// cannot (no GPU rows, no python3, no matplotlib, no script).
void make_plot(const Options& opt, const Lesson& lesson, const bench::RunInfo& info,
               const std::vector<Row>& rows, std::ostream& err) {
  if (!info.gpu_skipped.empty()) {
    err << "note: no picture written to " << opt.plot
        << ": the plot shows speed-ups over atomic, and without a GPU only the CPU step ran\n";
    return;
  }
  const std::string script = find_plot_script();
  const bool have_python = std::system("command -v python3 >/dev/null 2>&1") == 0;
  const bool have_mpl =
      have_python && std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") == 0;
  int rc = -1;
  if (!script.empty() && have_mpl) {
    std::string csv = opt.csv;
    std::string tmp;
    if (csv.empty()) {
      tmp = (fs::temp_directory_path() / ("histeq-lesson-" + std::to_string(::getpid()) + ".csv"))
                .string();
      write_file(tmp, "CSV", [&](std::ostream& os) { write_csv(os, lesson, info, rows); });
      csv = tmp;
    }
    const std::string cmd = "python3 " + shell_quote(script) + " " + shell_quote(csv) + " -o " +
                            shell_quote(opt.plot) + " >/dev/null";
    rc = std::system(cmd.c_str());
    if (!tmp.empty()) fs::remove(tmp);
  }
  if (rc == 0) {
    err << "plot written to " << opt.plot << '\n';
    return;
  }
  err << "note: no picture written to " << opt.plot << " ("
      << (!have_python     ? "python3 not found"
          : !have_mpl      ? "matplotlib not found for python3"
          : script.empty() ? "bench/lesson_plot.py not found"
                           : "bench/lesson_plot.py failed, its message is above")
      << "); to draw it: install matplotlib (apt-get install python3-matplotlib, or pip install "
         "matplotlib), then run\n  python3 bench/lesson_plot.py "
      << (opt.csv.empty() ? std::string("FILE.csv") : shell_quote(opt.csv)) << " -o "
      << shell_quote(opt.plot)
      << (opt.csv.empty() ? "   (FILE.csv: rerun with --csv FILE.csv)" : "") << '\n';
}

int run(const Options& opt, std::ostream& out, std::ostream& err) {
  const Lesson& lesson = find_lesson(opt.name);
  std::string photo;
  if (lesson.photo) {
    photo = opt.image.empty() ? default_photo() : opt.image;
    if (!opt.image.empty() && !fs::exists(opt.image)) {
      throw Error("image '" + opt.image + "' does not exist");
    }
    if (photo.empty()) {
      std::string looked;
      for (const auto& dir : photo_places()) looked += (looked.empty() ? "" : ", ") + dir.string();
      err << "note: no photo case: " << kPhoto << " is in none of " << looked
          << " (pass --image FILE)\n";
    }
  }
  const bench::Options b = bench_options(lesson, opt, photo);
  // The sweep's progress (device, read ceiling, one line per case) goes to `err` on a GPU; without
  // one it would repeat what the header says, so it is shown only on an error.
  std::ostringstream bench_log;
  const bool gpu = cuda_available();
  const bench::Measured m = bench::measure(b, gpu ? err : bench_log);
  // No GPU: write_text says so once, in its header ("GPU steps skipped: ...").
  std::map<std::string, double> occupancy;
  if (m.info.gpu_skipped.empty() && !m.error) {
    const std::size_t n = b.sizes.back();
    for (const Step& s : lesson.steps) {
      if (s.kernel == bench::kCpuKernel) continue;
      try {
        const kernels::KernelDetails d =
            kernels::describe(kernels::find_kernel(s.kernel), lesson.type, lesson.bins.back(), n);
        if (d.supported && d.max_threads_per_sm > 0) occupancy[s.kernel] = d.occupancy;
      } catch (const Error&) {
        // Occupancy is a detail of the sentence; the step's time still stands.
      }
    }
  }
  const std::vector<Row> rows = narrate(lesson, m.info, m.cells, occupancy);
  write_text(out, lesson, m.info, rows);
  if (!opt.csv.empty()) {
    write_file(opt.csv, "CSV", [&](std::ostream& os) { write_csv(os, lesson, m.info, rows); });
  }
  if (!opt.json.empty()) {
    write_file(opt.json, "JSON", [&](std::ostream& os) { write_json(os, lesson, m.info, rows); });
  }
  if (!opt.plot.empty()) make_plot(opt, lesson, m.info, rows, err);
  bool fail = m.error;
  for (const Row& r : rows) fail = fail || (r.status == "FAIL" && r.kernel != "racy");
  if (m.error && !gpu) err << bench_log.str();
  return fail ? 1 : 0;
}

}  // namespace

int main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Options opt;
  try {
    opt = parse_args(args);
  } catch (const std::exception& e) {
    err << "histeq lesson: " << e.what() << " (see 'histeq lesson --help')\n";
    return 2;
  }
  if (opt.help) {
    out << usage();
    return 0;
  }
  if (opt.name.empty()) {
    out << list_lessons();
    return 0;
  }
  try {
    return run(opt, out, err);
  } catch (const UsageError& e) {
    err << "histeq lesson: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    err << "histeq lesson: error: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace histeq::lesson
