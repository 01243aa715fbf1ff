// cli/batch.cpp — the batch of `equalize`, `clahe` and `histogram` (cli/batch.hpp): the
// executor's options from the command line, the plan of every output before any work, the
// per-file lines and the summary.
#include "cli/batch.hpp"
#include "cli/cli.hpp"

#include <malloc.h>

#include <algorithm>
#include <iomanip>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <utility>

#include "cli/report.hpp"
#include "histeq/error.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/nvjpeg_codec.hpp"

namespace histeq::cli {

std::string with_limit_hint(const std::string& message) {
  const bool limit = message.find("pixels, over the limit of") != std::string::npos ||
                     message.find("pixels allowed") != std::string::npos;
  if (!limit || message.find("--max-pixels") != std::string::npos) return message;
  return message + " (--max-pixels N sets the limit, N in 1..18446744073709551615)";
}

namespace {

/// One input file and the path of its output relative to the output folder.
struct Planned {
  std::string input;
  fs::path rel;
};

/// The files of the inputs: a file as itself (its name), a folder's image files by their
/// extension (sorted; recursive with -r) with the path under the folder. The walk of -r does not
/// enter the output folder `outdir` (empty: none) when it lies inside an input folder, compared
/// by canonical path: a second run of `equalize d -r -o d/out` must not take the first run's
/// outputs as inputs (and write d/out/out/...).
std::vector<Planned> collect_inputs(const std::vector<std::string>& inputs, bool recursive,
                                    const std::string& outdir) {
  std::error_code oec;
  const fs::path out_canon = outdir.empty() ? fs::path() : fs::weakly_canonical(outdir, oec);
  auto is_output_folder = [&](const fs::directory_entry& e) {
    std::error_code ec2;
    if (out_canon.empty() || oec || !e.is_directory(ec2)) return false;
    const fs::path c = fs::canonical(e.path(), ec2);
    return !ec2 && c == out_canon;
  };
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
        for (fs::recursive_directory_iterator
                 it(in, fs::directory_options::skip_permission_denied, ec),
             end;
             !ec && it != end; it.increment(ec)) {
          if (is_output_folder(*it)) {
            it.disable_recursion_pending();
            continue;
          }
          take(*it);
        }
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

/// "1 file", "2 files".
std::string plural(std::size_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
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

/// --jobs, --max-inflight-mb, --devices, and for equalize the encoder and --decoder.
ExecutorOptions executor_options(const cxxopts::ParseResult& r, const Common& cm, Task task,
                                 const ExecutorOptions::ItemOp& item_op) {
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
  if (task != Task::equalize) return eo;
  eo.encode.quality = read_quality(r);
  eo.encode.png_level = read_png_level(r);
  eo.encode.subsampling = jpeg::parse_subsampling(r["subsampling"].as<std::string>());
  const std::string dec = r["decoder"].as<std::string>();
  if (dec == "gpu") {
    if (!gpu::nvjpeg_built())
      throw UsageError(
          "--decoder gpu: this histeq was built without nvJPEG (valid here: auto, cpu)");
    if (cm.opt.backend == Backend::cpu)
      throw UsageError("--decoder gpu needs the CUDA backend (not --backend cpu)");
    eo.jpeg = JpegRoute::gpu;
  } else if (dec == "cpu") {
    eo.jpeg = JpegRoute::cpu;
  } else if (dec != "auto") {
    throw UsageError("unknown --decoder '" + dec + "' (valid: auto, gpu, cpu)");
  }
  return eo;
}

/// The output of one planned input (equalize): under outdir, in --format or the input's own.
std::string output_of(const Planned& p, const std::string& outdir, const std::string& format) {
  fs::path rel = p.rel;
  if (!format.empty()) {
    rel.replace_extension(format);
  } else if (!writable_ext(lower_ext(rel))) {
    throw UsageError(
        "cannot write '" + p.input + "' in its own format (" +
        (rel.extension().empty() ? std::string("no extension") : rel.extension().string()) +
        "; histeq writes png, jpg, bmp, tga, pgm, ppm, pnm): add --format png (or jpg, bmp, tga, "
        "pnm)");
  }
  return (fs::path(outdir) / rel).lexically_normal().string();
}

/// Every item of the batch, planned before any work: formats, collisions, nothing to do.
std::vector<WorkItem> plan_items(const cxxopts::ParseResult& r, Task task,
                                 const std::vector<std::string>& inputs, const std::string& outdir,
                                 const std::string& format) {
  const std::vector<Planned> planned = collect_inputs(inputs, r.count("recursive") > 0, outdir);
  std::vector<WorkItem> items;
  std::map<std::string, std::string> seen;  // output → input
  for (const Planned& p : planned) {
    WorkItem w;
    w.input = p.input;
    if (task == Task::equalize) {
      w.output = output_of(p, outdir, format);
      w.format = format;
      const auto [at, fresh] = seen.emplace(w.output, p.input);
      if (!fresh)
        throw UsageError("'" + at->second + "' and '" + p.input + "' would both be written to '" +
                         w.output + "'; rename one, or use separate runs");
    }
    items.push_back(std::move(w));
  }
  if (items.empty())
    throw UsageError(
        "no image files in the inputs (folders are searched for .png .jpg .jpeg .bmp .tga .gif "
        ".pnm .pgm .ppm; -r for subfolders)");
  return items;
}

/// --quality/--subsampling when no output is JPEG, --png-level when none is PNG: refused.
void refuse_unused_encode_options(const cxxopts::ParseResult& r,
                                  const std::vector<WorkItem>& items) {
  std::string jpeg_out, png_out, other;
  for (const WorkItem& w : items) {
    const std::string e = lower_ext(fs::path(w.output));
    if (jpeg_ext(e))
      jpeg_out = e;
    else if (e == ".png")
      png_out = e;
    else
      other = e;
  }
  if (jpeg_out.empty()) refuse_jpeg_options(r, png_out.empty() ? other : png_out);
  if (png_out.empty()) refuse_png_options(r, jpeg_out.empty() ? other : jpeg_out);
}

void make_output_folders(const std::vector<WorkItem>& items) {
  std::error_code ec;
  for (const WorkItem& w : items) {
    const fs::path parent = fs::path(w.output).parent_path();
    if (!parent.empty() && !fs::is_directory(parent)) {
      fs::create_directories(parent, ec);
      if (ec) throw Error("cannot create folder '" + parent.string() + "': " + ec.message());
    }
  }
}

/// --timing of a batch: per stage the summed milliseconds, the wall time, start-up, decoders.
void print_batch_timing(std::ostream& tout, const BatchSummary& sum, int jobs) {
  const ItemTimes& t = sum.summed;
  tout << "stage       summed ms  (over " << plural(sum.files, "file") << ", "
       << plural(std::size_t(jobs), "worker") << ")\n";
  const std::pair<const char*, double> rows[] = {
      {"read", t.read_ms},         {"decode", t.decode_ms},     {"upload", t.upload_ms},
      {"equalize", t.equalize_ms}, {"download", t.download_ms}, {"encode", t.encode_ms},
      {"write", t.write_ms}};
  for (const auto& [name, ms] : rows)
    tout << std::left << std::setw(10) << name << std::right << std::setw(12) << num(ms) << '\n';
  tout << std::left << std::setw(10) << "wall" << std::right << std::setw(12)
       << num(sum.wall_s * 1000.0) << '\n';
  tout << "start-up: devices " << num(sum.device_init_ms) << " ms (CUDA context, streams; in the "
       << "background), nvJPEG handles " << num(sum.nvjpeg_init_ms)
       << " ms; first file written after " << num(sum.first_file_ms) << " ms\n";
  tout << "decoders:";
  for (const auto& [name, n] : sum.decoders) tout << ' ' << name << ' ' << n;
  tout << '\n';
  tout << "in flight: at most " << sum.peak_busy_workers << " of " << jobs
       << " workers busy at once; peak " << num(double(sum.peak_inflight_bytes) / 1048576.0, 1)
       << " MB of a " << (sum.max_inflight_bytes >> 20) << " MB cap (--max-inflight-mb)\n";
}

/// The per-file callback of the executor: progress, errors, one line of text or JSON.
struct ItemPrinter {
  bool json = false;
  bool with_output = false;
  const ClaheOptions* clahe = nullptr;  ///< a clahe batch: its JSON lines say so
  const PrintItem& print_item;
  std::ostream& out;
  std::ostream& err;
  Progress& prog;

  void operator()(const ItemReport& rep) const {
    ++prog.done;
    const std::string error = rep.ok ? std::string() : with_hints(rep.error);
    if (rep.ok) prog.mp += double(rep.width) * rep.height / 1e6;
    if (!rep.ok) {
      prog.clear(err);
      err << "histeq: error: " << error << '\n';
    }
    if (json) {
      prog.clear(err);
      out << dump_line(batch_item_json(rep, with_output, error, clahe)) << '\n';
    } else if (rep.ok && print_item) {
      prog.clear(err);
      print_item(out, rep);
    }
    prog.update(err);
  }
};

}  // namespace

int run_batch(const cxxopts::ParseResult& r, Common& cm, Task task,
              const std::vector<std::string>& inputs, const std::string& outdir, std::ostream& out,
              std::ostream& err, const PrintItem& print_item,
              const ExecutorOptions::ItemOp& item_op, const ClaheOptions* clahe) {
  const bool quiet = r.count("quiet") > 0;
  const bool json = r.count("json") > 0;
  for (const std::string& in : inputs)
    if (in == "-") throw UsageError("'-' (standard input) can only be the one input");
  refuse_kernel_on_cpu(cm);
  const ExecutorOptions eo = executor_options(r, cm, task, item_op);
  std::string format;
  if (task == Task::equalize && r.count("format"))
    format = parse_format(r["format"].as<std::string>());

  // Plan every output before any work: formats, collisions, options that would do nothing.
  const std::vector<WorkItem> items = plan_items(r, task, inputs, outdir, format);
  if (task == Task::equalize) {
    refuse_unused_encode_options(r, items);
    make_output_folders(items);
  }

  // Large image buffers are freed and allocated again for every file: keep them in the heap
  // instead of returning them to the kernel each time (a fresh mmap costs a page fault per 4 KiB;
  // 18 % of a PNG batch's time in the kernel before this).
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 512 << 20);
  const auto ex_owner = std::make_shared<Executor>(eo);
  Executor& ex = *ex_owner;
  Progress prog;
  prog.on = !quiet && stderr_is_tty(err);
  prog.total = items.size();
  const BatchSummary sum =
      ex.run(items, ItemPrinter{json, task == Task::equalize, clahe, print_item, out, err, prog});
  prog.clear(err);
  if (cm.opt.backend == Backend::automatic && !quiet) {
    const std::string why = ex.cpu_fallback_reason();
    if (!why.empty()) err << "histeq: no usable CUDA device (" << why << "); ran on the CPU\n";
  }
  if (r.count("timing"))
    print_batch_timing(json ? err : (task == Task::equalize ? out : err), sum, ex.jobs());
  if (json) out << dump_line(batch_summary_json(sum, ex.jobs())) << '\n';
  if (!quiet) {
    const double mps = sum.wall_s > 0 ? sum.megapixels / sum.wall_s : 0;
    err << "histeq: " << plural(sum.files, "file") << ", " << num(sum.megapixels, 1) << " MP in "
        << num(sum.wall_s, 2) << " s, " << num(mps, 1) << " MP/s, "
        << plural(sum.failures, "failure") << '\n';
  }
  keep_until_exit(ex_owner);  // its devices, nvJPEG states and buffers go with the process
  return sum.failures > 0 ? 1 : 0;
}

}  // namespace histeq::cli
