// bench/report.cpp — what `histeq bench` reports (bench/bench.hpp): the derived figures
// (speed-ups, share of read bandwidth), the aligned table, the CSV, the JSON
// (nlohmann::ordered_json, one serializer per report type), the output files and the plot.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>

#include "bench/csv_text.hpp"
#include "bench/detail.hpp"
#include "bench/json_text.hpp"
#include "histeq/error.hpp"

namespace fs = std::filesystem;

namespace histeq::bench {

using namespace internal;

namespace {

/// Number for CSV: up to 6 significant digits; "" when v < 0 (unset) or not finite.
std::string num(double v) {
  if (v < 0 || !std::isfinite(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

/// Number for JSON: null when v < 0 (unset) or not finite.
nlohmann::ordered_json json_num(double v) {
  if (v < 0 || !std::isfinite(v)) return nullptr;
  return v;
}

/// JSON string, or null when empty.
nlohmann::ordered_json json_text_or_null(const std::string& s) {
  if (s.empty()) return nullptr;
  return s;
}

}  // namespace

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
  if (!info.tuning.empty()) os << "# tuning (not the policy): " << info.tuning << '\n';
  os << "# " << info.command_line;
  if (!info.commit.empty()) os << "  (commit " << info.commit << ")";
  os << '\n';

  const std::vector<std::string> head = {
      "kernel", "type", "bins",    "size",     "dist",  "block", "l2",   "status", "med_us",
      "min_us", "GB/s", "Gelem/s", "x_atomic", "x_cub", "%read", "lost", "launch"};
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
}  // namespace

void write_csv(std::ostream& os, const RunInfo& info, const std::vector<Cell>& cells) {
  os << kCsvHeader << '\n';
  for (const Cell& c : cells) {
    os << csv_text::field(c.kernel) << ',' << type_name(c.type) << ',' << c.bins << ',' << c.n
       << ',' << c.n * sample_bytes(c.type) << ',' << csv_text::field(c.dist) << ',' << c.block
       << ',' << c.l2 << ',' << c.status << ',' << num(c.median_us) << ',' << num(c.min_us) << ','
       << num(c.gbps) << ',' << num(c.gelems) << ',' << num(c.speedup_atomic) << ','
       << num(c.speedup_cub) << ',' << num(c.pct_read_bw) << ',' << c.lost << ',' << c.launch_block
       << ',' << c.launch_grid << ',' << c.launch_smem << ',' << c.reps << ','
       << csv_text::field(c.reason) << ',' << csv_text::field(info.device) << ','
       << csv_text::field(info.commit) << ',' << csv_text::field(info.timestamp) << ','
       << num(info.read_bw_gbps) << ',' << csv_text::field(info.command_line) << ',' << info.timing
       << '\n';
  }
}

namespace {

nlohmann::ordered_json to_json(const Cell& c) {
  nlohmann::ordered_json j{
      {"kernel", c.kernel},
      {"type", type_name(c.type)},
      {"bins", c.bins},
      {"size", c.n},
      {"bytes", c.n * sample_bytes(c.type)},
      {"dist", c.dist},
      {"block", c.block},
      {"l2", c.l2},
      {"status", c.status},
      {"reason", json_text_or_null(c.reason)},
      {"median_us", json_num(c.median_us)},
      {"min_us", json_num(c.min_us)},
      {"gbps", json_num(c.gbps)},
      {"gelems", json_num(c.gelems)},
      {"speedup_vs_atomic", json_num(c.speedup_atomic)},
      {"speedup_vs_cub", json_num(c.speedup_cub)},
      {"pct_of_read_bw", json_num(c.pct_read_bw)},
      {"lost", c.lost},
      {"launch", {{"block", c.launch_block}, {"grid", c.launch_grid}, {"smem", c.launch_smem}}},
      {"reps", c.reps},
  };
  // an image case names its file: the exact bytes too when they are not UTF-8
  if (!json_text::is_utf8(c.dist)) j["dist_bytes_hex"] = json_text::hex_bytes(c.dist);
  return j;
}

nlohmann::ordered_json to_json(const RunInfo& info, const std::vector<Cell>& cells) {
  nlohmann::ordered_json cell_array = nlohmann::ordered_json::array();
  for (const Cell& c : cells) cell_array.push_back(to_json(c));
  nlohmann::ordered_json j{
      {"device", info.device},
      {"commit", json_text_or_null(info.commit)},
      {"command", info.command_line},
      {"timestamp", info.timestamp},
      {"read_bw_gbps", json_num(info.read_bw_gbps)},
      {"timing", info.timing},
      {"launch_floor_us", json_num(info.launch_floor_us)},
      {"gpu_skipped", json_text_or_null(info.gpu_skipped)},
      {"tuning", json_text_or_null(info.tuning)},
      {"cells", std::move(cell_array)},
  };
  if (!json_text::is_utf8(info.command_line)) {
    j["command_bytes_hex"] = json_text::hex_bytes(info.command_line);
  }
  return j;
}

}  // namespace

void write_json(std::ostream& os, const RunInfo& info, const std::vector<Cell>& cells) {
  // replace: a byte that is not valid UTF-8 (a Latin-1 file name) becomes U+FFFD, so the
  // output stays valid JSON instead of throwing type_error 316.
  os << to_json(info, cells).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
     << '\n';
}

namespace {

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

}  // namespace

namespace internal {

void check_writable(const std::string& path, const std::string& what) {
  auto fail = [&](const std::string& why) {
    throw Error("cannot write " + what + " file '" + path + "': " + why);
  };
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) fail("it is a folder");
  if (fs::exists(st)) {
    if (::access(path.c_str(), W_OK) != 0) fail("it is not writable");
    return;
  }
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec)) fail("folder '" + dir.string() + "' does not exist");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    fail("folder '" + dir.string() + "' is not writable");
  }
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
    const std::string cmd =
        "python3 " + shell_quote(script) + " " + shell_quote(csv) + " -o " + shell_quote(opt.plot);
    ok = std::system(cmd.c_str()) == 0;
  }
  if (!tmp.empty()) fs::remove(tmp);
  if (ok) {
    err << "plot written to " << opt.plot << '\n';
    return;
  }
  err << "note: no plot made ("
      << (!have_python     ? "python3 not found"
          : script.empty() ? "bench/plot.py not found"
                           : "bench/plot.py failed")
      << "); to draw it: write the CSV with --csv FILE.csv, install python3-matplotlib "
         "(apt-get install python3-matplotlib), then run\n"
         "  python3 bench/plot.py FILE.csv -o "
      << shell_quote(opt.plot) << '\n';
}

}  // namespace internal
}  // namespace histeq::bench
