// cli.cpp — the `histeq` commands: parsing (cxxopts) and the four command bodies.
// No exit(), no error printing: failures are thrown (UsageError → 2, Error → 1) and printed once
// by main(). Notices that are not errors (CPU fallback, racy kernel) go to `err`.
#include "histeq/cli.hpp"

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <future>
#include <iomanip>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <malloc.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <iterator>
#include <map>

#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include "cli_depth.hpp"
#include "details.hpp"
#include "histeq/bench.hpp"
#include "histeq/clahe.hpp"
#include "histeq/error.hpp"
#include "histeq/executor.hpp"
#include "histeq/image_io.hpp"
#include "histeq/lesson.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/planes.hpp"
#include "histeq/types.hpp"
#include "registry.hpp"

#ifndef HISTEQ_VERSION
#define HISTEQ_VERSION "unknown"
#endif

namespace histeq::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

constexpr const char* kCommands = "equalize, clahe, histogram, kernels, bench, lesson";

// cxxopts quotes names with ‘…’; our messages use plain ASCII quotes.
std::string ascii_quotes(std::string s) {
  for (const char* q : {"\xE2\x80\x98", "\xE2\x80\x99"}) {
    for (std::size_t p; (p = s.find(q)) != std::string::npos;) s.replace(p, 3, "'");
  }
  return s;
}

// One command's options plus the list of their names, for "valid options: ..." messages.
struct Command {
  std::string name;
  cxxopts::Options options;
  std::vector<std::string> names;

  Command(const std::string& cmd, const std::string& description)
      : name(cmd), options("histeq " + cmd, description) {
    options.set_width(110);
  }

  // spec as cxxopts: "o,output" or "json".
  template <class V>
  void add(const std::string& spec, const std::string& help, V value,
           const std::string& arg_help = "") {
    options.add_options()(spec, help, value, arg_help);
    const auto comma = spec.find(',');
    names.push_back("--" + (comma == std::string::npos ? spec : spec.substr(comma + 1)));
  }
  void add_flag(const std::string& spec, const std::string& help) {
    options.add_options()(spec, help);
    const auto comma = spec.find(',');
    names.push_back("--" + (comma == std::string::npos ? spec : spec.substr(comma + 1)));
  }

  std::string valid() const {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
  }

  // Parses args (after the command word). Extra positional arguments and cxxopts errors become
  // UsageError naming the command and the valid options.
  cxxopts::ParseResult parse(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    const std::string prog = "histeq " + name;
    argv.push_back(prog.c_str());
    for (const auto& a : args) argv.push_back(a.c_str());
    try {
      cxxopts::ParseResult r = options.parse(static_cast<int>(argv.size()), argv.data());
      if (!r.unmatched().empty()) {
        throw UsageError("unexpected argument '" + r.unmatched().front() + "' for 'histeq " +
                         name + "' (see 'histeq " + name + " --help')");
      }
      return r;
    } catch (const cxxopts::exceptions::no_such_option& e) {
      // cxxopts says "Option 'x' does not exist"; name it as the user typed it.
      const std::string msg = ascii_quotes(e.what());
      const auto a = msg.find('\''), b = msg.rfind('\'');
      std::string opt = (a != std::string::npos && b > a) ? msg.substr(a + 1, b - a - 1) : msg;
      if (!opt.empty() && opt[0] != '-') opt = (opt.size() == 1 ? "-" : "--") + opt;
      throw UsageError("unknown option '" + opt + "' for 'histeq " + name +
                       "'; valid options: " + valid());
    } catch (const cxxopts::exceptions::exception& e) {
      throw UsageError(ascii_quotes(e.what()) + " in 'histeq " + name + "' (see 'histeq " +
                       name + " --help')");
    }
  }
};

// ---- shared option groups ----

void add_kernel_backend(Command& c) {
  c.add("k,kernel", "histogram kernel: auto (the fastest exact one) or a name from 'histeq kernels'",
        cxxopts::value<std::string>()->default_value("auto"), "NAME");
  c.add("b,backend", "where to run: auto (GPU if usable, else CPU), cuda, cpu",
        cxxopts::value<std::string>()->default_value("auto"), "NAME");
  c.add("m,mode", "colour images: luma (Y of YCbCr, default), rgb (each channel), gray (one channel of equalized luma)",
        cxxopts::value<std::string>(), "NAME");
  c.add("max-pixels", "refuse images with more than N pixels (width x height), checked from the header",
        cxxopts::value<std::uint64_t>()->default_value(std::to_string(kDefaultMaxPixels)), "N");
}

void add_depth(Command& c) {
  c.add("depth", "bits per sample to work at and write: 8 (16-bit inputs converted, round(v/257)) or 16 (8-bit inputs widened, v*257, written as 16-bit PNG/PGM/PPM); default: the input's own (16-bit PNG/PGM/PPM stay 16-bit)",
        cxxopts::value<int>(), "BITS");
}

int read_depth(const cxxopts::ParseResult& r) {
  if (!r.count("depth")) return 0;
  const int d = r["depth"].as<int>();
  if (d != 8 && d != 16) throw UsageError("--depth must be 8 or 16, got " + std::to_string(d));
  return d;
}

/// --tiles WxH: W columns by H rows, each 1..kMaxClaheTiles.
void parse_tiles(const std::string& s, ClaheOptions& o) {
  const std::string range = "1.." + std::to_string(kMaxClaheTiles);
  const auto x = s.find_first_of("xX");
  auto side = [&](const std::string& t, int& v) {
    if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError("--tiles takes WxH (columns x rows, each " + range + "), e.g. 8x8; got '" + s + "'");
    const long n = std::stol(t);
    if (n < 1 || n > kMaxClaheTiles)
      throw UsageError("--tiles: each side must be in " + range + ", got '" + s + "'");
    v = int(n);
  };
  if (x == std::string::npos)
    throw UsageError("--tiles takes WxH (columns x rows, each " + range + "), e.g. 8x8; got '" + s + "'");
  side(s.substr(0, x), o.tiles_x);
  side(s.substr(x + 1), o.tiles_y);
}

struct Common {
  EqualizeOptions opt;
  std::uint64_t max_pixels = kDefaultMaxPixels;
  const kernels::KernelEntry* entry = nullptr;  // null for "auto"
};

// Validates kernel/backend/mode/max-pixels (all UsageError) before any work is done.
Common read_common(const cxxopts::ParseResult& r) {
  Common c;
  c.opt.kernel = r["kernel"].as<std::string>();
  if (c.opt.kernel != "auto") c.entry = &kernels::find_kernel(c.opt.kernel);
  c.opt.backend = parse_backend(r["backend"].as<std::string>());
  if (r.count("mode")) c.opt.mode = parse_mode(r["mode"].as<std::string>());
  c.max_pixels = r["max-pixels"].as<std::uint64_t>();
  if (c.max_pixels == 0) throw UsageError("--max-pixels must be at least 1");
  return c;
}

// Resolves --backend; says once on `err` when auto falls back to the CPU. Throws Error when
// cuda was asked for and no device is usable.
void settle_backend(Common& c, std::ostream& err) {
  std::string why;
  const Backend requested = c.opt.backend;
  c.opt.backend = resolve_backend(requested, &why);
  if (requested == Backend::automatic && c.opt.backend == Backend::cpu) {
    err << "histeq: no usable CUDA device (" << (why.empty() ? "unknown reason" : why)
        << "); running on the CPU\n";
  }
}

/// --backend auto on one file: CUDA's start-up (0.2-0.35 s for the context on the H200 machine,
/// more than the CPU needs to equalize any photo) runs on a background thread while the file is
/// read and decoded on the CPU. settle() takes the GPU only when that start-up has finished and
/// found a usable device, else the CPU: the same bytes either way (the backends are exact twins),
/// and the image never waits for the GPU. The thread is joined when the probe is destroyed.
class BackendProbe {
 public:
  explicit BackendProbe(bool start) {
    if (start)
      f_ = std::async(std::launch::async, [] {
        Result r;
        r.backend = resolve_backend(Backend::automatic, &r.why);
        return r;
      });
    started_ = f_.valid();
  }
  bool started() const { return started_; }
  /// Sets c.opt.backend (once; later calls do nothing). wait: block until the probe is done.
  void settle(Common& c, std::ostream& err, bool wait) {
    if (!f_.valid()) return;
    if (!wait && f_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      c.opt.backend = Backend::cpu;
      late_err_ = &err;  // when the probe ends without a device, say so then (~BackendProbe)
      return;
    }
    const Result r = f_.get();
    c.opt.backend = r.backend;
    if (r.backend == Backend::cpu) say_why(err, r.why, "running");
  }
  ~BackendProbe() {
    if (!late_err_ || !f_.valid()) return;
    try {
      const Result r = f_.get();
      if (r.backend == Backend::cpu) say_why(*late_err_, r.why, "ran");
    } catch (...) {  // a destructor: the message is not worth an exception
    }
  }
  BackendProbe(const BackendProbe&) = delete;
  BackendProbe& operator=(const BackendProbe&) = delete;

 private:
  struct Result {
    Backend backend = Backend::cpu;
    std::string why;
  };
  static void say_why(std::ostream& err, const std::string& why, const char* verb) {
    err << "histeq: no usable CUDA device (" << (why.empty() ? "unknown reason" : why) << "); " << verb
        << " on the CPU\n";
  }
  std::future<Result> f_;
  bool started_ = false;
  std::ostream* late_err_ = nullptr;
};

void warn_inexact(const Common& c, std::ostream& err) {
  if (c.entry && !c.entry->exact) {
    err << "histeq: warning: kernel '" << c.entry->name
        << "' is not exact (unsynchronized updates lose counts); never use it for real output\n";
  }
}

void report_lost(const Common& c, const EqualizeReport& rep, std::uint64_t total,
                 std::ostream& err) {
  if (!c.entry || c.entry->exact) return;
  if (rep.backend != "cuda") {
    err << "histeq: kernel '" << c.entry->name << "' runs only on the GPU; the CPU counted exactly\n";
    return;
  }
  err << "histeq: kernel '" << c.entry->name << "' lost " << rep.racy_lost << " of " << total
      << " counts";
  if (total > 0) {
    err << " (" << std::fixed << std::setprecision(2) << 100.0 * double(rep.racy_lost) / double(total)
        << "%)";
  }
  err << '\n';
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          o += buf;
        } else {
          o += static_cast<char>(ch);
        }
    }
  }
  return o;
}

std::string num(double v, int prec = 3) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}


// ---- batch (several inputs, folders, stdin/stdout) ----

namespace fs = std::filesystem;

void add_batch_options(Command& c, bool equalize) {
  c.add_flag("r,recursive", "folder inputs: descend into subfolders (outputs keep the relative path)");
  c.add("jobs", "CPU worker threads for a batch (0: the number of cores)",
        cxxopts::value<int>()->default_value("0"), "N");
  c.add("max-inflight-mb", "cap on the megabytes of images in flight in a batch (default: max(256, 128 x jobs), at most a quarter of the memory)",
        cxxopts::value<std::size_t>(), "MB");
  c.add("devices", "CUDA device ordinals for a batch, one worker each (e.g. 0,1 or 0,0); default: all (two workers each when nvJPEG takes the JPEGs)",
        cxxopts::value<std::string>(), "LIST");
  c.add_flag("quiet", "no notes, no progress bar, no summary line on stderr (errors still)");
  if (equalize) {
    c.add("format", "output format of every file: png, jpg, bmp, tga; pgm, ppm for 16-bit outputs (default: each input's own; required with -o -)",
          cxxopts::value<std::string>(), "FMT");
    c.add("png-level", "PNG deflate level 0..9 (libdeflate; 0: stored, 9: smallest)",
          cxxopts::value<int>()->default_value(std::to_string(kDefaultPngLevel)), "L");
  }
}

std::string lower_ext(const fs::path& p) {
  std::string e = p.extension().string();
  for (char& ch : e) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return e;
}

bool readable_ext(const std::string& e) {
  static const char* k[] = {".png", ".jpg", ".jpeg", ".bmp", ".tga", ".gif", ".pnm", ".pgm", ".ppm"};
  for (const char* x : k)
    if (e == x) return true;
  return false;
}
bool writable_ext(const std::string& e) {
  return e == ".png" || e == ".jpg" || e == ".jpeg" || e == ".bmp" || e == ".tga";
}

/// --format NAME → ".ext" (UsageError for others).
std::string parse_format(const std::string& f) {
  std::string e = f;
  for (char& ch : e) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  if (!e.empty() && e[0] == '.') e.erase(0, 1);
  if (e == "png" || e == "jpg" || e == "bmp" || e == "tga") return "." + e;
  if (e == "jpeg") return ".jpg";
  if (e == "pgm" || e == "ppm") return "." + e;  // 16-bit outputs only (cli_depth.cpp)
  throw UsageError("unknown --format '" + f + "' (valid: png, jpg, bmp, tga; pgm, ppm for 16-bit outputs)");
}

std::vector<int> parse_devices(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) {
    char* end = nullptr;
    const long d = std::strtol(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0' || d < 0 || d > 1024)
      throw UsageError("--devices takes CUDA device ordinals separated by commas, e.g. 0,1; got '" + s + "'");
    v.push_back(int(d));
  }
  if (v.empty()) throw UsageError("--devices: empty list");
  return v;
}

/// One input file and the path of its output relative to the output folder.
struct Planned {
  std::string input;
  fs::path rel;
};

/// The files of the inputs: a file as itself (its name), a folder's image files by their
/// extension (sorted; recursive with -r) with the path under the folder.
std::vector<Planned> collect_inputs(const std::vector<std::string>& inputs, bool recursive) {
  std::vector<Planned> v;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<Planned> found;
      auto take = [&](const fs::directory_entry& e) {
        std::error_code ec2;
        if (!e.is_regular_file(ec2) || !readable_ext(lower_ext(e.path()))) return;
        found.push_back({e.path().string(), e.path().lexically_relative(in)});
      };
      if (recursive) {
        for (fs::recursive_directory_iterator it(in, fs::directory_options::skip_permission_denied, ec), end;
             !ec && it != end; it.increment(ec))
          take(*it);
      } else {
        for (fs::directory_iterator it(in, ec), end; !ec && it != end; it.increment(ec)) take(*it);
      }
      if (ec) throw Error("cannot list folder '" + in + "': " + ec.message());
      std::sort(found.begin(), found.end(),
                [](const Planned& a, const Planned& b) { return a.input < b.input; });
      v.insert(v.end(), found.begin(), found.end());
    } else {
      v.push_back({in, fs::path(in).filename()});
    }
  }
  return v;
}

/// The string as JSON: invalid UTF-8 bytes become U+FFFD (dump's replace handler) and
/// key + "_bytes_hex" holds the exact bytes in hex.
void put_path(nlohmann::ordered_json& j, const std::string& key, const std::string& s) {
  j[key] = s;
  try {
    (void)nlohmann::json(s).dump();
  } catch (const nlohmann::json::type_error&) {
    static const char* hex = "0123456789abcdef";
    std::string h;
    for (unsigned char ch : s) {
      h += hex[ch >> 4];
      h += hex[ch & 15];
    }
    j[key + "_bytes_hex"] = h;
  }
}

std::string dump_line(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

nlohmann::ordered_json times_json(const ItemTimes& t) {
  nlohmann::ordered_json j;
  j["read"] = round3(t.read_ms);
  j["decode"] = round3(t.decode_ms);
  j["upload"] = round3(t.upload_ms);
  j["equalize"] = round3(t.equalize_ms);
  j["download"] = round3(t.download_ms);
  j["encode"] = round3(t.encode_ms);
  j["write"] = round3(t.write_ms);
  return j;
}

struct Progress {
  bool on = false;
  std::size_t total = 0, done = 0;
  double mp = 0;
  Clock::time_point t0 = Clock::now();
  void update(std::ostream& err) {
    if (!on) return;
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double rate = s > 0 ? mp / s : 0;
    const double eta = done > 0 ? s / double(done) * double(total - done) : 0;
    err << "\r\033[K[" << done << "/" << total << "] " << num(rate, 1) << " MP/s, ETA "
        << num(eta, 0) << " s" << std::flush;
  }
  void clear(std::ostream& err) {
    if (on) err << "\r\033[K" << std::flush;
  }
};

bool stderr_is_tty(std::ostream& err) { return &err == &std::cerr && ::isatty(STDERR_FILENO); }

/// Runs a batch for `equalize` (outdir given) or `histogram` (outdir empty).
// NOLINTNEXTLINE(readability-function-size): over 120 lines, to be split (issue 13)
int run_batch(const cxxopts::ParseResult& r, Common& cm, Task task,
              const std::vector<std::string>& inputs, const std::string& outdir,
              std::ostream& out, std::ostream& err, const std::function<void(std::ostream&, const ItemReport&)>& print_item,
              const ExecutorOptions::ItemOp& item_op = {}) {
  const bool quiet = r.count("quiet") > 0;
  const bool json = r.count("json") > 0;
  const bool timing = r.count("timing") > 0;
  for (const std::string& in : inputs)
    if (in == "-") throw UsageError("'-' (standard input) can only be the one input");

  ExecutorOptions eo;
  eo.task = task;
  eo.item_op = item_op;
  eo.equalize = cm.opt;
  eo.max_pixels = cm.max_pixels;
  eo.jobs = r["jobs"].as<int>();
  if (eo.jobs < 0) throw UsageError("--jobs must be at least 1 (0: the number of cores)");
  if (r.count("max-inflight-mb")) {  // else 0: the executor's default for its jobs
    const std::size_t mb = r["max-inflight-mb"].as<std::size_t>();
    if (mb == 0) throw UsageError("--max-inflight-mb must be at least 1");
    eo.max_inflight_bytes = mb << 20;
  }
  if (r.count("devices")) eo.devices = parse_devices(r["devices"].as<std::string>());

  std::string format;
  if (task == Task::equalize) {
    if (r.count("format")) format = parse_format(r["format"].as<std::string>());
    eo.encode.quality = r["quality"].as<int>();
    eo.encode.png_level = r["png-level"].as<int>();
    if (eo.encode.png_level < 0 || eo.encode.png_level > 9)
      throw UsageError("--png-level must be in 0..9, got " + std::to_string(eo.encode.png_level));
    eo.encode.subsampling = jpeg::parse_subsampling(r["subsampling"].as<std::string>());
    const std::string dec = r["decoder"].as<std::string>();
    if (dec == "gpu") {
      if (!gpu::nvjpeg_built())
        throw UsageError("--decoder gpu: this histeq was built without nvJPEG (valid here: auto, cpu)");
      if (cm.opt.backend == Backend::cpu)
        throw UsageError("--decoder gpu needs the CUDA backend (not --backend cpu)");
      eo.jpeg = JpegRoute::gpu;
    } else if (dec == "cpu") {
      eo.jpeg = JpegRoute::cpu;
    } else if (dec != "auto") {
      throw UsageError("unknown --decoder '" + dec + "' (valid: auto, gpu, cpu)");
    }
  }

  // Plan every output before any work: formats, collisions.
  const std::vector<Planned> planned = collect_inputs(inputs, r.count("recursive") > 0);
  std::vector<WorkItem> items;
  std::map<std::string, std::string> seen;  // output → input
  for (const Planned& p : planned) {
    WorkItem w;
    w.input = p.input;
    if (task == Task::equalize) {
      fs::path rel = p.rel;
      if (!format.empty()) {
        rel.replace_extension(format);
      } else if (!writable_ext(lower_ext(rel))) {
        throw UsageError("cannot write '" + p.input + "' in its own format (" +
                         (rel.extension().empty() ? std::string("no extension") : rel.extension().string()) +
                         "; histeq writes png, jpg, bmp, tga): add --format png (or jpg, bmp, tga)");
      }
      w.output = (fs::path(outdir) / rel).lexically_normal().string();
      w.format = format;
      const auto [at, fresh] = seen.emplace(w.output, p.input);
      if (!fresh)
        throw UsageError("'" + at->second + "' and '" + p.input + "' would both be written to '" +
                         w.output + "'; rename one, or use separate runs");
    }
    items.push_back(std::move(w));
  }
  if (items.empty()) throw UsageError("no image files in the inputs (folders are searched for .png .jpg .jpeg .bmp .tga .gif .pnm .pgm .ppm; -r for subfolders)");
  if (task == Task::equalize) {
    std::error_code ec;
    for (const WorkItem& w : items) {
      const fs::path parent = fs::path(w.output).parent_path();
      if (!parent.empty() && !fs::is_directory(parent)) {
        fs::create_directories(parent, ec);
        if (ec) throw Error("cannot create folder '" + parent.string() + "': " + ec.message());
      }
    }
  }

  // Large image buffers are freed and allocated again for every file: keep them in the heap
  // instead of returning them to the kernel each time (a fresh mmap costs a page fault per 4 KiB;
  // 18 % of a PNG batch's time in the kernel before this).
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 512 << 20);
  Executor ex(eo);
  Progress prog;
  prog.on = !quiet && stderr_is_tty(err);
  prog.total = items.size();
  const BatchSummary sum = ex.run(items, [&](const ItemReport& rep) {
    ++prog.done;
    if (rep.ok) prog.mp += double(rep.width) * rep.height / 1e6;
    if (!rep.ok) {
      prog.clear(err);
      err << "histeq: error: " << rep.error << '\n';
    }
    if (json) {
      nlohmann::ordered_json j;
      put_path(j, "input", rep.input);
      if (task == Task::equalize) put_path(j, "output", rep.output);
      j["ok"] = rep.ok;
      if (!rep.ok) {
        j["error"] = rep.error;
      } else {
        j["width"] = rep.width;
        j["height"] = rep.height;
        j["channels"] = rep.channels;
        if (task == Task::equalize) j["output_channels"] = rep.output_channels;
        j["bit_depth"] = rep.bit_depth;
        j["mode"] = to_string(rep.equalize.mode);
        j["kernel"] = rep.equalize.kernel;
        j["backend"] = rep.equalize.backend;
        j["device"] = rep.equalize.device;
        j["decoder"] = rep.decoder;
        if (task == Task::equalize) {
          j["encoder"] = rep.encoder;
          j["output_bytes"] = rep.output_bytes;
        } else {
          j["histograms"] = rep.equalize.histograms;
        }
        j["racy_lost"] = rep.equalize.racy_lost;
        j["times_ms"] = times_json(rep.times);
      }
      prog.clear(err);
      out << dump_line(j) << '\n';
    } else if (rep.ok && print_item) {
      prog.clear(err);
      print_item(out, rep);
    }
    prog.update(err);
  });
  prog.clear(err);
  const double mps = sum.wall_s > 0 ? sum.megapixels / sum.wall_s : 0;
  if (cm.opt.backend == Backend::automatic && !quiet) {
    const std::string why = ex.cpu_fallback_reason();
    if (!why.empty()) err << "histeq: no usable CUDA device (" << why << "); ran on the CPU\n";
  }
  if (timing) {
    std::ostream& tout = json ? err : (task == Task::equalize ? out : err);
    const ItemTimes& t = sum.summed;
    tout << "stage       summed ms  (over " << sum.files << " files, " << ex.jobs()
         << " workers)\n";
    const std::pair<const char*, double> rows[] = {
        {"read", t.read_ms},         {"decode", t.decode_ms},     {"upload", t.upload_ms},
        {"equalize", t.equalize_ms}, {"download", t.download_ms}, {"encode", t.encode_ms},
        {"write", t.write_ms}};
    for (const auto& [name, ms] : rows)
      tout << std::left << std::setw(10) << name << std::right << std::setw(12) << num(ms) << '\n';
    tout << std::left << std::setw(10) << "wall" << std::right << std::setw(12)
         << num(sum.wall_s * 1000.0) << '\n';
    tout << "start-up: devices " << num(sum.device_init_ms) << " ms (CUDA context, streams; in the "
         << "background), nvJPEG handles " << num(sum.nvjpeg_init_ms) << " ms; first file written after "
         << num(sum.first_file_ms) << " ms\n";
    tout << "decoders:";
    for (const auto& [name, n] : sum.decoders) tout << ' ' << name << ' ' << n;
    tout << '\n';
    tout << "in flight: at most " << sum.peak_busy_workers << " of " << ex.jobs()
         << " workers busy at once; peak " << num(double(sum.peak_inflight_bytes) / 1048576.0, 1)
         << " MB of a " << (sum.max_inflight_bytes >> 20) << " MB cap (--max-inflight-mb)\n";
  }
  if (json) {
    nlohmann::ordered_json s;
    s["summary"] = {{"files", sum.files},
                    {"failures", sum.failures},
                    {"megapixels", round3(sum.megapixels)},
                    {"seconds", round3(sum.wall_s)},
                    {"mp_per_s", round3(mps)}};
    const ItemTimes& t = sum.summed;
    s["summary"]["summed_ms"] = {{"read", round3(t.read_ms)},         {"decode", round3(t.decode_ms)},
                                 {"upload", round3(t.upload_ms)},     {"equalize", round3(t.equalize_ms)},
                                 {"download", round3(t.download_ms)}, {"encode", round3(t.encode_ms)},
                                 {"write", round3(t.write_ms)}};
    s["summary"]["jobs"] = ex.jobs();
    s["summary"]["peak_busy_workers"] = sum.peak_busy_workers;
    s["summary"]["decoders"] = sum.decoders;
    s["summary"]["device_init_ms"] = round3(sum.device_init_ms);
    s["summary"]["nvjpeg_init_ms"] = round3(sum.nvjpeg_init_ms);
    s["summary"]["first_file_ms"] = round3(sum.first_file_ms);
    out << dump_line(s) << '\n';
  }
  if (!quiet) {
    err << "histeq: " << sum.files << " files, " << num(sum.megapixels, 1) << " MP in "
        << num(sum.wall_s, 2) << " s, " << num(mps, 1) << " MP/s, " << sum.failures
        << (sum.failures == 1 ? " failure" : " failures") << '\n';
  }
  return sum.failures > 0 ? 1 : 0;
}

/// Standard input, whole.
std::vector<std::uint8_t> read_stdin() {
  std::vector<std::uint8_t> v;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("cannot read standard input: ") + std::strerror(errno));
    }
    if (n == 0) break;
    v.insert(v.end(), buf, buf + n);
  }
  if (v.empty()) throw Error("cannot read standard input: it is empty");
  return v;
}


// ---- equalize ----

/// The extension of a path, lower case, with its dot ("" when none).
std::string fs_extension_lower(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  const std::size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string e = path.substr(dot);
  for (char& ch : e) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return e;
}

/// The per-file operation of clahe / 16-bit equalize (cli_depth.hpp) from the parsed options.
ItemOpOptions item_op_options(const cxxopts::ParseResult& r, const Common& cm, ItemOpKind kind) {
  ItemOpOptions io;
  io.kind = kind;
  io.equalize = cm.opt;
  io.max_pixels = cm.max_pixels;
  io.depth = read_depth(r);
  if (kind == ItemOpKind::histogram) return io;
  io.encode.quality = r["quality"].as<int>();
  io.encode.png_level = r["png-level"].as<int>();
  io.encode.subsampling = jpeg::parse_subsampling(r["subsampling"].as<std::string>());
  if (kind == ItemOpKind::clahe) {
    io.clahe.clip_limit = r["clip"].as<double>();
    if (!(io.clahe.clip_limit >= 0) || !std::isfinite(io.clahe.clip_limit)) {
      std::ostringstream v;
      v << io.clahe.clip_limit;
      throw UsageError("--clip must be a finite number >= 0 (OpenCV's clipLimit; 0: no clipping), got " +
                       v.str());
    }
    parse_tiles(r["tiles"].as<std::string>(), io.clahe);
    validate(io.clahe);
  }
  return io;
}

bool pnm_ext(std::string e) {
  for (char& ch : e) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return e == ".pgm" || e == ".ppm";
}

ExecutorOptions::ItemOp make_item_op(ItemOpOptions io, const cxxopts::ParseResult& r) {
  io.spread_over_devices = true;
  if (r.count("devices")) io.devices = parse_devices(r["devices"].as<std::string>());
  return [io](const std::vector<std::uint8_t>& bytes, const std::string& ext, ItemReport& rep,
              std::vector<std::uint8_t>* encoded) {
    if (!needs_item_op(io, is_16bit_data(bytes.data(), bytes.size())) && !pnm_ext(ext)) return false;
    *encoded = run_item(io, bytes.data(), bytes.size(), rep.input, ext, rep);
    return true;
  };
}

std::string clahe_summary(const ClaheOptions& o) {
  std::ostringstream s;
  s << "clip " << o.clip_limit << ", tiles " << o.tiles_x << "x" << o.tiles_y;
  return s.str();
}

/// The single-file report of the clahe / 16-bit path (text, --timing, --json).
void print_item_op_report(const cxxopts::ParseResult& r, const ItemOpOptions& io,
                          const std::string& input, const std::string& output,
                          const ItemReport& rep, double total_ms, std::ostream& out,
                          std::ostream& err) {
  const bool json = r.count("json") > 0;
  const bool clahe = io.kind == ItemOpKind::clahe;
  const ItemTimes& t = rep.times;
  std::ostream& rout = output == "-" ? err : out;
  if (r.count("timing")) {
    std::ostream& tout = (json || output == "-") ? err : out;
    const std::pair<const char*, double> rows[] = {{"decode", t.decode_ms},
                                                   {clahe ? "clahe" : "equalize", t.equalize_ms},
                                                   {"encode", t.encode_ms},
                                                   {"total", total_ms}};
    tout << "stage            ms\n";
    for (const auto& [name, ms] : rows)
      tout << std::left << std::setw(10) << name << std::right << std::setw(9) << num(ms) << '\n';
  }
  const EqualizeReport& er = rep.equalize;
  if (json) {
    nlohmann::ordered_json j;
    put_path(j, "input", input);
    put_path(j, "output", output);
    j["width"] = rep.width;
    j["height"] = rep.height;
    j["channels"] = rep.channels;
    j["output_channels"] = rep.output_channels;
    j["bit_depth"] = rep.bit_depth;
    j["operation"] = clahe ? "clahe" : "equalize";
    if (clahe) {
      j["clip_limit"] = io.clahe.clip_limit;
      j["tiles_x"] = io.clahe.tiles_x;
      j["tiles_y"] = io.clahe.tiles_y;
    }
    j["mode"] = to_string(er.mode);
    j["kernel"] = er.kernel;
    j["backend"] = er.backend;
    j["device"] = er.device;
    j["times_ms"] = {{"decode", round3(t.decode_ms)},
                     {"equalize", round3(t.equalize_ms)},
                     {"encode", round3(t.encode_ms)},
                     {"total", round3(total_ms)}};
    j["decoder"] = rep.decoder;
    j["encoder"] = rep.encoder;
    rout << dump_line(j) << '\n';
  } else if (!r.count("quiet") || output != "-") {
    rout << output << ": " << rep.width << "x" << rep.height << ", " << rep.output_channels
         << (rep.output_channels == 1 ? " channel" : " channels") << ", " << rep.bit_depth
         << "-bit, ";
    if (clahe) rout << "clahe " << clahe_summary(io.clahe) << ", ";
    rout << "mode " << to_string(er.mode) << ", kernel " << er.kernel << " on " << er.device
         << ", " << num(total_ms, 1) << " ms\n";
  }
}

// NOLINTNEXTLINE(readability-function-size): over 120 lines, to be split (issue 13)
int cmd_equalize(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                 bool clahe = false) {
  const std::string cmd = clahe ? "clahe" : "equalize";
  Command c(cmd, clahe
                     ? "Contrast-limited adaptive histogram equalization (CLAHE), byte for byte "
                       "OpenCV 4.6's createCLAHE(clipLimit, tileGridSize).apply() on gray and 16-bit "
                       "images (colour: on Y of YCbCr, or per channel with --mode rgb). Same inputs, "
                       "outputs and batch options as 'histeq equalize'."
                     : "Equalizes the histogram of an 8- or 16-bit image (PNG, JPEG, BMP, TGA, GIF, "
                       "PNM in; PNG, JPEG, BMP, TGA out; 16-bit PNG/PGM/PPM stay 16-bit).");
  c.options.add_options()("input", "input images or folders ('-': standard input)",
                          cxxopts::value<std::vector<std::string>>());
  c.add("o,output", "output image (one input; the format follows the extension .png .jpg .jpeg .bmp .tga; may equal INPUT; '-': standard output, needs --format), or the output folder (several inputs or a folder; created if missing)",
        cxxopts::value<std::string>(), "OUTPUT");
  add_kernel_backend(c);
  add_batch_options(c, true);
  add_depth(c);
  if (clahe) {
    c.add("clip", "contrast limit, OpenCV's clipLimit: each tile's histogram is clipped at max(1, int(C * tile pixels / bins)) and the excess redistributed; 0: no clipping; >= 0",
          cxxopts::value<double>()->default_value("2.0"), "C");
    c.add("tiles", "tile grid, OpenCV's tileGridSize: W columns by H rows, each 1.." + std::to_string(kMaxClaheTiles),
          cxxopts::value<std::string>()->default_value("8x8"), "WxH");
  } else {
    c.add("f,formula", "CDF->LUT formula: opencv (cv::equalizeHist, float32) or exact (integer, round half up)",
          cxxopts::value<std::string>()->default_value("opencv"), "NAME");
  }
  c.add("q,quality", "JPEG quality 1..100", cxxopts::value<int>()->default_value("95"), "Q");
  c.add("decoder", "JPEG codec: auto (nvJPEG when the GPU backend runs and this build has it, else libjpeg-turbo), gpu (nvJPEG decode and encode; inputs it cannot take fall back to libjpeg-turbo), cpu (libjpeg-turbo)",
        cxxopts::value<std::string>()->default_value("auto"), "NAME");
  c.add("subsampling", "JPEG chroma subsampling of a colour output: 444, 422 or 420 (gray JPEGs have one component)",
        cxxopts::value<std::string>()->default_value("420"), "S");
  c.add_flag("timing", "print a table of milliseconds per stage and the histogram's GB/s (a batch: per stage the sum over the files, and the wall time)");
  c.add_flag("json", "print the report as one JSON object on stdout (the --timing table, if asked, goes to stderr); a batch: one object per file per line, then a summary object");
  c.add_flag("h,help", "print this help");
  c.options.parse_positional({"input"});
  c.options.positional_help("INPUT... -o OUTPUT");

  const cxxopts::ParseResult r = c.parse(args);
  if (r.count("help")) {
    out << c.options.help();
    return 0;
  }
  if (!r.count("input")) throw UsageError(cmd + ": missing INPUT (usage: histeq " + cmd + " INPUT -o OUTPUT)");
  if (!r.count("output")) throw UsageError(cmd + ": missing -o OUTPUT (usage: histeq " + cmd + " INPUT -o OUTPUT)");
  if (clahe && r["kernel"].as<std::string>() != "auto")
    throw UsageError("--kernel: clahe computes its tile histograms with its own kernels (valid: auto)");
  if (clahe && r["decoder"].as<std::string>() == "gpu")
    throw UsageError("--decoder gpu: clahe decodes JPEG with libjpeg-turbo (valid: auto, cpu)");
  const std::vector<std::string> inputs = r["input"].as<std::vector<std::string>>();
  const std::string& input = inputs.front();
  const std::string output = r["output"].as<std::string>();
  {
    std::error_code ec;
    // A batch: several inputs, or a folder input / an existing folder as -o (unless -o has an
    // image extension: then it is the one output file, and a folder there is an error as before),
    // or -o ending in '/'.
    const bool out_is_image_name = writable_ext(lower_ext(fs::path(output)));
    const bool out_is_dir = output != "-" && fs::is_directory(output, ec);
    const bool batch = inputs.size() > 1 || (!output.empty() && output.back() == '/') ||
                       (!out_is_image_name &&
                        ((input != "-" && fs::is_directory(input, ec)) || out_is_dir));
    if (inputs.size() > 1 && out_is_image_name && !out_is_dir) {
      std::string names;
      for (std::size_t i = 0; i < inputs.size() && i < 3; ++i)
        names += (i ? ", '" : "'") + inputs[i] + "'";
      if (inputs.size() > 3) names += ", ...";
      throw UsageError("several inputs (" + names + ") but -o '" + output +
                       "' is an image file name; with several inputs -o names the output folder "
                       "(see 'histeq " + cmd + " --help')");
    }
    if (batch) {
      if (output == "-") throw UsageError("-o - (standard output) takes exactly one input");
      Common cm = read_common(r);
      if (!clahe) cm.opt.formula = parse_formula(r["formula"].as<std::string>());
      const int quality = r["quality"].as<int>();
      if (quality < 1 || quality > 100)
        throw UsageError("--quality must be in 1..100, got " + std::to_string(quality));
      const ItemOpOptions io =
          item_op_options(r, cm, clahe ? ItemOpKind::clahe : ItemOpKind::equalize);
      warn_inexact(cm, err);
      return run_batch(
          r, cm, Task::equalize, inputs, output, out, err,
          [](std::ostream& o, const ItemReport& rep) {
            o << rep.output << ": " << rep.width << "x" << rep.height << ", "
              << rep.output_channels << (rep.output_channels == 1 ? " channel" : " channels")
              << (rep.bit_depth == 16 ? ", 16-bit" : "") << ", mode "
              << to_string(rep.equalize.mode) << ", kernel " << rep.equalize.kernel << " on "
              << rep.equalize.device << " (decoder " << rep.decoder << ", encoder "
              << rep.encoder << ")\n";
          },
          make_item_op(io, r));
    }
  }
  // One input, one output file: as before, plus '-' for standard input/output.
  EncodeOptions enc;
  enc.png_level = r["png-level"].as<int>();
  if (enc.png_level < 0 || enc.png_level > 9)
    throw UsageError("--png-level must be in 0..9, got " + std::to_string(enc.png_level));
  std::string out_ext;
  if (r.count("format")) {
    out_ext = parse_format(r["format"].as<std::string>());
  } else if (output == "-") {
    throw UsageError("-o - (standard output) needs --format png|jpg|bmp|tga");
  } else {
    out_ext = fs::path(output).extension().string();
    // before any work: an unknown extension is a usage error (.pgm/.ppm: 16-bit outputs)
    if (lower_ext(fs::path(output)) != ".pgm" && lower_ext(fs::path(output)) != ".ppm")
      check_output_path(output);
  }
  Common cm = read_common(r);
  if (!clahe) cm.opt.formula = parse_formula(r["formula"].as<std::string>());
  ItemOpOptions io = item_op_options(r, cm, clahe ? ItemOpKind::clahe : ItemOpKind::equalize);
  const int quality = r["quality"].as<int>();
  if (quality < 1 || quality > 100) {
    throw UsageError("--quality must be in 1..100, got " + std::to_string(quality));
  }
  const jpeg::Subsampling subsampling = jpeg::parse_subsampling(r["subsampling"].as<std::string>());
  const bool json = r.count("json") > 0;
  const bool timing = r.count("timing") > 0;

  const std::string decoder_arg = r["decoder"].as<std::string>();
  if (decoder_arg != "auto" && decoder_arg != "gpu" && decoder_arg != "cpu")
    throw UsageError("unknown --decoder '" + decoder_arg + "' (valid: auto, gpu, cpu)");
  if (decoder_arg == "gpu" && !gpu::nvjpeg_built())
    throw UsageError("--decoder gpu: this histeq was built without nvJPEG (valid here: auto, cpu)");

  // --backend auto: settled once the file is decoded (BackendProbe); --decoder gpu needs to know now.
  BackendProbe probe(cm.opt.backend == Backend::automatic && decoder_arg != "gpu");
  if (!probe.started()) settle_backend(cm, err);
  warn_inexact(cm, err);
  if (decoder_arg == "gpu" && cm.opt.backend != Backend::cuda)
    throw Error("--decoder gpu needs the CUDA backend, but it runs on the CPU (--backend cpu or no usable GPU)");
  // nvJPEG for JPEG files when asked (gpu) or when the GPU backend was asked for (--backend
  // cuda, --decoder auto). With --backend auto one file is decoded and encoded by libjpeg-turbo:
  // nvJPEG's handles alone take longer to create (about 0.3 s each) than any photo's decode.
  const bool gpu_jpeg = gpu::nvjpeg_built() && cm.opt.backend == Backend::cuda && decoder_arg != "cpu" &&
                        !probe.started();

  const std::string ext = fs_extension_lower(out_ext);
  const bool jpg_out = ext == ".jpg" || ext == ".jpeg";
  const Clock::time_point t_start = Clock::now();
  std::string decoder = "stb_image";
  std::string encoder = jpg_out ? "libjpeg-turbo" : "stb_image_write";
  Image in;   // on the device path: shape and metadata only (the pixels stay on the GPU)
  Image eq;
  EqualizeReport rep;
  double decode_ms = 0;
  bool done = false;  // equalized and written on the device path
  const std::string name = input == "-" ? "(standard input)" : input;
  const std::vector<std::uint8_t> bytes = input == "-" ? read_stdin() : read_image_file(input);
  const auto emit = [&](const std::vector<std::uint8_t>& encoded) {
    if (output == "-") {
      out.write(reinterpret_cast<const char*>(encoded.data()), std::streamsize(encoded.size()));
      out.flush();
      if (!out) throw Error("could not write to standard output");
    } else {
      write_file_atomic(output, encoded.data(), encoded.size());
    }
  };
  {  // CLAHE, 16-bit inputs, --depth 16: the per-file operation (the same as in a batch)
    probe.settle(cm, err, /*wait=*/false);
    io.equalize = cm.opt;  // the backend as settled
    if (needs_item_op(io, is_16bit_data(bytes.data(), bytes.size())) || pnm_ext(out_ext)) {
      ItemReport ir;
      emit(run_item(io, bytes.data(), bytes.size(), name, out_ext, ir));
      print_item_op_report(r, io, input, output, ir, ms_since(t_start), out, err);
      return 0;
    }
  }
  if (jpeg::is_jpeg(bytes.data(), bytes.size())) decoder = "libjpeg-turbo";
  std::unique_ptr<gpu::Equalizer> geq;
  std::unique_ptr<gpu::JpegCodec> codec;
  if (gpu_jpeg && jpeg::is_jpeg(bytes.data(), bytes.size())) {
    geq = std::make_unique<gpu::Equalizer>();
    gpu::JpegCodecOptions jo;
    jo.max_pixels = cm.max_pixels;
    codec = std::make_unique<gpu::JpegCodec>(geq->stream(), jo);
    if (jpg_out) {  // JPEG → JPEG: decode, equalize and encode on the device
      const gpu::JpegOnDevice d = gpu::equalize_jpeg_on_device(
          *geq, *codec, {bytes.data(), bytes.size(), name}, cm.opt, {quality, subsampling}, &rep);
      emit(d.bytes);
      in.width = eq.width = d.width;
      in.height = eq.height = d.height;
      in.channels = d.channels;
      eq.channels = d.out_channels;
      decoder = d.decoder;
      encoder = "nvjpeg";
      decode_ms = d.decode_ms;
      rep.times.encode_ms = d.encode_ms;
      done = true;
    } else {
      in = codec->decode_to_host({bytes.data(), bytes.size(), name}, &decoder);
    }
  } else {
    in = decode_image(bytes.data(), bytes.size(), name, cm.max_pixels);
  }
  if (!done) {
    decode_ms = ms_since(t_start);
    probe.settle(cm, err, /*wait=*/false);
    eq = equalize(in, cm.opt, &rep);
    const Clock::time_point t_enc = Clock::now();
    if (jpg_out && gpu_jpeg) {
      if (!codec) codec = std::make_unique<gpu::JpegCodec>(nullptr, gpu::JpegCodecOptions{});
      emit(codec->encode(eq, {quality, subsampling}));
      encoder = "nvjpeg";
    } else {
      enc.quality = quality;
      enc.subsampling = subsampling;
      emit(encode_image(eq, out_ext, enc));
    }
    rep.times.encode_ms = ms_since(t_enc);
  }
  rep.times.decode_ms = decode_ms;
  rep.times.total_ms = ms_since(t_start);  // wall time from decode start to encode end

  const int planes = plane_count(rep.mode, in.channels);
  report_lost(cm, rep, std::uint64_t(in.pixel_count()) * std::uint64_t(planes), err);

  const StageTimes& t = rep.times;
  const double hist_bytes = double(in.pixel_count()) * planes;
  const double gbps = t.histogram_ms > 0 ? hist_bytes / (t.histogram_ms * 1e6) : NAN;
  const bool on_cpu = rep.backend != "cuda";

  std::ostream& rout = output == "-" ? err : out;  // stdout holds the image
  if (timing) {
    std::ostream& tout = (json || output == "-") ? err : out;
    const struct {
      const char* name;
      double ms;
      bool device_only;
    } rows[] = {{"decode", t.decode_ms, false},     {"upload", t.upload_ms, true},
                {"histogram", t.histogram_ms, false}, {"CDF+LUT", t.cdf_lut_ms, false},
                {"apply", t.apply_ms, false},       {"download", t.download_ms, true},
                {"encode", t.encode_ms, false},     {"total", t.total_ms, false}};
    tout << "stage            ms\n";
    for (const auto& row : rows) {
      tout << std::left << std::setw(10) << row.name << std::right << std::setw(9);
      if (row.device_only && on_cpu) {
        tout << "-";
      } else {
        tout << num(row.ms);
      }
      if (std::string(row.name) == "histogram" && std::isfinite(gbps)) {
        tout << "  " << num(gbps, 2) << " GB/s (" << std::uint64_t(hist_bytes) << " bytes)";
      }
      tout << '\n';
    }
  }
  if (json) {
    rout << "{\"input\":\"" << json_escape(input) << "\",\"output\":\"" << json_escape(output)
        << "\",\"width\":" << in.width << ",\"height\":" << in.height
        << ",\"channels\":" << in.channels << ",\"output_channels\":" << eq.channels
        << ",\"mode\":\"" << to_string(rep.mode) << "\",\"formula\":\""
        << to_string(cm.opt.formula) << "\",\"kernel\":\"" << json_escape(rep.kernel)
        << "\",\"backend\":\"" << json_escape(rep.backend) << "\",\"device\":\""
        << json_escape(rep.device) << "\",\"racy_lost\":" << rep.racy_lost
        << ",\"times_ms\":{\"decode\":" << num(t.decode_ms) << ",\"upload\":" << num(t.upload_ms)
        << ",\"histogram\":" << num(t.histogram_ms) << ",\"cdf_lut\":" << num(t.cdf_lut_ms)
        << ",\"apply\":" << num(t.apply_ms) << ",\"download\":" << num(t.download_ms)
        << ",\"encode\":" << num(t.encode_ms) << ",\"total\":" << num(t.total_ms)
        << "},\"histogram_bytes\":" << std::uint64_t(hist_bytes)
        << ",\"histogram_gbps\":" << num(gbps, 3) << ",\"decoder\":\"" << decoder
        << "\",\"encoder\":\"" << encoder << "\"}\n";
  } else if (!r.count("quiet") || output != "-") {
    rout << output << ": " << eq.width << "x" << eq.height << ", " << eq.channels
        << (eq.channels == 1 ? " channel" : " channels") << ", mode " << to_string(rep.mode)
        << ", kernel " << rep.kernel << " on " << rep.device << ", " << num(t.total_ms, 1)
        << " ms";
    if (decoder != "stb_image") rout << " (decoder " << decoder << ", encoder " << encoder << ")";
    rout << '\n';
  }
  // The output is committed by now: a report that cannot be written (a full or closed stdout)
  // is an error that says so, rather than one that reads as if nothing had been written.
  out.flush();
  if (!out)
    throw Error("the image " + output + " was written, but the report could not be written to "
                "standard output (full or closed)");
  return 0;
}

// ---- histogram ----

int cmd_histogram(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Command c("histogram",
            "Prints the 256-bin histogram of an image's planes: one plane (gray, or Y for luma "
            "and gray modes) or three (R, G, B for --mode rgb on a colour image).");
  c.options.add_options()("input", "input images or folders ('-': standard input)",
                          cxxopts::value<std::vector<std::string>>());
  add_kernel_backend(c);
  add_batch_options(c, false);
  add_depth(c);
  c.add_flag("csv", "CSV: header 'bin,count' (three planes: 'bin,r,g,b'), then one line per bin; several files: a block per file with a first column 'file'");
  c.add_flag("json", "several files: one JSON object per file per line (JSON Lines), then a summary object");
  c.add_flag("timing", "several files: per stage the summed milliseconds and the wall time (stderr)");
  c.add_flag("h,help", "print this help");
  c.options.parse_positional({"input"});
  c.options.positional_help("INPUT...");

  const cxxopts::ParseResult r = c.parse(args);
  if (r.count("help")) {
    out << c.options.help();
    return 0;
  }
  if (!r.count("input")) throw UsageError("histogram: missing INPUT (usage: histeq histogram INPUT)");
  const std::vector<std::string> inputs = r["input"].as<std::vector<std::string>>();
  const std::string& input = inputs.front();
  Common cm = read_common(r);
  const bool csv = r.count("csv") > 0;
  ItemOpOptions io = item_op_options(r, cm, ItemOpKind::histogram);
  {
    std::error_code ec;
    if (inputs.size() > 1 || (input != "-" && fs::is_directory(input, ec)) || r.count("json")) {
      if (input == "-" && inputs.size() == 1)
        throw UsageError("histogram --json reads files, not standard input");
      warn_inexact(cm, err);
      return run_batch(r, cm, Task::histogram, inputs, "", out, err,
                       [csv](std::ostream& o, const ItemReport& rep) {
                         const auto& hs = rep.equalize.histograms;
                         const char sep = csv ? ',' : ' ';
                         if (csv) o << (hs.size() == 3 ? "file,bin,r,g,b" : "file,bin,count") << '\n';
                         else o << "==> " << rep.input << " <==\n";
                         const std::size_t bins = hs.empty() ? 256 : hs.front().size();
                         for (std::size_t b = 0; b < bins; ++b) {
                           if (csv) o << rep.input << ',';
                           o << b;
                           for (const Histogram& h : hs) o << sep << (b < h.size() ? h[b] : 0);
                           o << '\n';
                         }
                       },
                       make_item_op(io, r));
    }
  }

  settle_backend(cm, err);
  warn_inexact(cm, err);
  const std::vector<std::uint8_t> bytes = input == "-" ? read_stdin() : read_image_file(input);
  const std::string name = input == "-" ? "(standard input)" : input;
  std::vector<Histogram> hs;
  io.equalize = cm.opt;  // the backend as settled
  if (needs_item_op(io, is_16bit_data(bytes.data(), bytes.size()))) {  // 65536 bins
    ItemReport ir;
    run_item(io, bytes.data(), bytes.size(), name, "", ir);
    hs = std::move(ir.equalize.histograms);
  } else {
    const Image in = decode_image(bytes.data(), bytes.size(), name, cm.max_pixels);
    EqualizeReport rep;
    hs = image_histograms(in, cm.opt, &rep);
    report_lost(cm, rep, std::uint64_t(in.pixel_count()) * hs.size(), err);
  }

  const char sep = csv ? ',' : ' ';
  if (csv) out << (hs.size() == 3 ? "bin,r,g,b" : "bin,count") << '\n';
  const std::size_t bins = hs.empty() ? 256 : hs.front().size();
  for (std::size_t b = 0; b < bins; ++b) {
    out << b;
    for (const Histogram& h : hs) out << sep << (b < h.size() ? h[b] : 0);
    out << '\n';
  }
  return 0;
}

// ---- kernels ----

int cmd_kernels(const std::vector<std::string>& args, std::ostream& out, std::ostream& /*err*/) {
  Command c("kernels",
            "Lists the histogram kernels of the registry: name, exact or not, and the idea in one "
            "line. --details adds each kernel's launch shape and occupancy on this GPU.");
  c.add_flag("details", "per kernel: block size, grid, shared memory per block, registers per thread, resident blocks per SM, theoretical occupancy (needs a GPU)");
  c.add("type", "sample type for --details: u8 or i32",
        cxxopts::value<std::string>()->default_value("u8"), "T");
  c.add("bins", "bins for --details (1..4096)", cxxopts::value<int>()->default_value("256"), "N");
  c.add("size", "number of samples for --details (sets the grid); K/M/G suffixes as in bench",
        cxxopts::value<std::string>()->default_value("16M"), "N");
  c.add_flag("h,help", "print this help");

  const cxxopts::ParseResult r = c.parse(args);
  if (r.count("help")) {
    out << c.options.help();
    return 0;
  }
  const SampleType type = parse_sample_type(r["type"].as<std::string>());
  const int bins = r["bins"].as<int>();
  if (bins < 1 || bins > kMaxBins) {
    throw UsageError("--bins must be in 1.." + std::to_string(kMaxBins) + ", got " +
                     std::to_string(bins));
  }
  const std::uint64_t size = bench::parse_size(r["size"].as<std::string>());
  const auto& reg = kernels::registry();

  if (!r.count("details")) {
    std::size_t w = 4;
    for (const auto& e : reg) w = std::max(w, std::string(e.name).size());
    out << std::left << std::setw(int(w)) << "name" << "  exact  summary\n";
    for (const auto& e : reg) {
      out << std::left << std::setw(int(w)) << e.name << "  " << std::setw(5)
          << (e.exact ? "yes" : "no") << "  " << e.summary << '\n';
    }
    if (reg.empty()) out << "(no kernels registered)\n";
    return 0;
  }

  std::string why;
  if (!cuda_available(&why)) throw Error("kernels --details needs a CUDA device: " + why);
  std::vector<kernels::KernelDetails> ds;
  for (const auto& e : reg) ds.push_back(kernels::describe(e, type, bins, std::size_t(size)));
  out << "kernels for " << size << " " << to_string(type) << " samples, " << bins << " bins:\n"
      << kernels::format_details(ds);
  return 0;
}

// ---- bench ----

int cmd_bench(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return histeq::bench::main(args, out, err);
}

}  // namespace

std::string usage() {
  return "histeq " HISTEQ_VERSION
         " - histogram equalization and CLAHE of 8- and 16-bit images on the GPU (CUDA), with a CPU backend\n"
         "\n"
         "Usage:\n"
         "  histeq equalize INPUT -o OUTPUT [--kernel NAME] [--backend auto|cuda|cpu]\n"
         "                  [--mode luma|rgb|gray] [--formula opencv|exact] [--timing] [--json]\n"
         "                  [--quality Q] [--subsampling 444|422|420] [--decoder auto|gpu|cpu]\n"
         "                  [--png-level L] [--format png|jpg|bmp|tga] [--max-pixels N]\n"
         "  histeq equalize INPUT... -o FOLDER [-r] [--format FMT] [--jobs N] [--max-inflight-mb MB]\n"
         "                  [--devices LIST] [--quiet] [--json] [--timing] [options above]\n"
         "  histeq equalize - -o - --format FMT      (standard input to standard output)\n"
         "  histeq clahe INPUT... -o OUTPUT [--clip C] [--tiles WxH] [options of equalize]\n"
         "  histeq histogram INPUT... [-r] [--kernel NAME] [--backend ...] [--mode ...] [--csv] [--json]\n"
         "  (equalize, clahe, histogram: [--depth 8|16]; 16-bit PNG/PGM/PPM stay 16-bit)\n"
         "  histeq kernels [--details] [--type u8|i32] [--bins N] [--size N]\n"
         "  histeq bench [ARGS...]        (see 'histeq bench --help')\n"
         "  histeq lesson [NAME] [...]    guided experiments (see 'histeq lesson --help')\n"
         "  histeq --help | --version | COMMAND --help | help COMMAND\n"
         "\n"
         "Exit status: 0 success, 1 runtime failure (bad input file, I/O, CUDA; in a batch: any file\n"
         "failed), 2 usage error.\n";
}

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    throw UsageError(std::string("no command given; commands: ") + kCommands +
                     " (see 'histeq --help')");
  }
  const std::string& cmd = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "help" && !rest.empty() && rest.front()[0] != '-') {  // histeq help COMMAND
    std::vector<std::string> h{rest.front(), "--help"};
    if (rest.front() == "bench" || rest.front() == "lesson" || rest.front() == "kernels" ||
        rest.front() == "equalize" || rest.front() == "clahe" || rest.front() == "histogram")
      return run(h, out, err);
    throw UsageError("help: unknown command '" + rest.front() + "'; commands: " + kCommands);
  }
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    out << usage();
    return 0;
  }
  if (cmd == "--version" || cmd == "-V" || cmd == "version") {
    out << "histeq " HISTEQ_VERSION "\n"
        << "codecs: JPEG libjpeg-turbo (CPU)" << (gpu::nvjpeg_built() ? ", nvJPEG (GPU)" : "")
        << "; PNG, BMP, TGA, GIF, PNM stb_image; 16-bit PNG libspng, 16-bit PGM/PPM\n";
    return 0;
  }
  if (cmd == "equalize") return cmd_equalize(rest, out, err);
  if (cmd == "clahe") return cmd_equalize(rest, out, err, true);
  if (cmd == "histogram") return cmd_histogram(rest, out, err);
  if (cmd == "kernels") return cmd_kernels(rest, out, err);
  if (cmd == "bench") return cmd_bench(rest, out, err);
  if (cmd == "lesson") return histeq::lesson::main(rest, out, err);
  if (!cmd.empty() && cmd[0] == '-') {
    throw UsageError("unknown option '" + cmd + "'; valid before a command: --help, --version");
  }
  throw UsageError("unknown command '" + cmd + "'; commands: " + kCommands);
}

}  // namespace histeq::cli
