// cli/batch.cpp — the batch of `equalize`, `clahe`, `match` and `histogram` (cli/batch.hpp): the
// executor's options from the command line, the plan of every output before any work, the
// per-file lines and the summary.
#include "cli/batch.hpp"
#include "cli/cli.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <iomanip>
#include <limits>
#include <memory>
#include <ostream>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

#include "cli/report.hpp"
#include "histeq/error.hpp"
#include "histeq/inputs.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/nvjpeg_codec.hpp"

namespace histeq::cli {

std::string with_option_hints(const std::string& message) {
  std::string m = message;
  // The library speaks of what is wrong; the command line names the option that changes it.
  const std::pair<const char*, const char*> phrases[] = {
      {"process it at a depth of 8", "process it at 8 bits (--depth 8)"},
      {"or a depth of 8", "or --depth 8"},
      {"use mode rgb", "use --mode rgb"},
      {"use the formula opencv", "use --formula opencv"},
      {"a colour image: or mode rgb", "a colour image: or --mode rgb"},
      {"a gray result (mode gray)", "a gray result (--mode gray)"},
      {kGiveAnOutputFormat, "add --format "},
  };
  for (const auto& [from, to] : phrases) {
    const std::size_t at = m.find(from);
    if (at != std::string::npos) m.replace(at, std::string(from).size(), to);
  }
  const std::size_t grid = m.find("a CLAHE grid of ");
  if (grid != std::string::npos) {  // "a CLAHE grid of WxH tiles" → "--tile-grid-size WxH"
    const std::size_t end = m.find(" tiles", grid + 16);
    if (end != std::string::npos)
      m.replace(grid, end + 6 - grid, "--tile-grid-size " + m.substr(grid + 16, end - grid - 16));
  }
  const std::size_t mode = m.find("processed per channel: mode ");
  if (mode != std::string::npos) m.insert(mode + 23, "--");
  const bool limit = m.find("pixels, over the limit of") != std::string::npos ||
                     m.find("pixels allowed") != std::string::npos;
  if (!limit || m.find("--max-pixels") != std::string::npos) return m;
  return m + " (--max-pixels N sets the limit, N in 1..18446744073709551615)";
}

namespace {

/// "1 file", "2 files".
std::string plural(std::size_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

/// The progress bar on a terminal: files finished of the total (ExecutorOptions::on_progress),
/// MP/s, ETA.
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
ExecutorOptions executor_options(const cxxopts::ParseResult& r, const Common& cm,
                                 const Operation& op) {
  ExecutorOptions eo;
  eo.op = op;
  eo.op.equalize = cm.opt;
  eo.max_pixels = cm.max_pixels;
  eo.jobs = r["jobs"].as<int>();
  if (eo.jobs < 0 || eo.jobs > kMaxJobs)
    throw UsageError("--jobs takes a whole number in 0.." + std::to_string(kMaxJobs) +
                     " (0: the number of cores), got " + std::to_string(eo.jobs));
  if (r.count("max-inflight-mb")) {  // else 0: the executor's default for its jobs
    const std::size_t mb = r["max-inflight-mb"].as<std::size_t>();
    constexpr std::size_t kMaxMb = std::numeric_limits<std::size_t>::max() >> 20;
    if (mb == 0) throw UsageError("--max-inflight-mb must be at least 1");
    if (mb > kMaxMb)  // its bytes would not fit in 64 bits (the cap would wrap)
      throw UsageError("--max-inflight-mb takes a whole number of megabytes in 1.." +
                       std::to_string(kMaxMb) + ", got " + std::to_string(mb));
    eo.max_inflight_bytes = mb << 20;
  }
  if (r.count("devices")) {
    eo.devices = parse_devices(r["devices"].as<std::string>());
    if (cm.opt.backend == Backend::cpu)  // no CUDA starts: the list would do nothing
      throw UsageError(
          "--devices names CUDA devices, and --backend cpu starts none (leave "
          "--devices out, or use --backend auto or cuda)");
  }
  if (!op.writes()) return eo;
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

/// Every item of the batch, planned before any work by the library (histeq/inputs.hpp): formats,
/// collisions; then nothing to do, which the command line calls an error.
std::vector<WorkItem> plan_items(const cxxopts::ParseResult& r, bool writes,
                                 const std::vector<std::string>& inputs, const std::string& outdir,
                                 const std::string& format, std::vector<UnlistedInput>& unlisted) {
  const bool recursive = r.count("recursive") > 0;
  std::vector<WorkItem> items;
  if (writes) {
    FilePlanOptions po;
    po.output_dir = outdir;
    po.naming.format = format;
    po.recursive = recursive;
    FilePlan plan = plan_files(inputs, po);
    items = std::move(plan.items);
    unlisted = std::move(plan.unlisted);
  } else {
    InputList list = list_inputs(inputs, recursive);
    for (InputFile& f : list.files) items.push_back({std::move(f.input), {}, {}});
    unlisted = std::move(list.unlisted);
  }
  if (items.empty() && !unlisted.empty()) {  // nothing to do but say why: the folder's error
    std::string message = unlisted.front().message();
    for (std::size_t i = 1; i < unlisted.size(); ++i) message += "; " + unlisted[i].message();
    throw Error(message);
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

/// --timing of a batch: per stage the summed milliseconds, the wall time, start-up, decoders.
void print_batch_timing(std::ostream& tout, const BatchSummary& sum, int jobs) {
  const ItemTimes& t = sum.summed;
  // (the items a Ctrl-C stopped before they started ran no stage: not counted here)
  tout << "stage       summed ms  (over " << plural(sum.files - sum.cancelled, "file") << ", "
       << plural(std::size_t(jobs), "worker")
       << (sum.cancelled > 0 ? "; " + std::to_string(sum.cancelled) + " not started" : "") << ")\n";
  const std::pair<const char*, double> rows[] = {
      {"read", t.read_ms},         {"decode", t.decode_ms},     {"upload", t.upload_ms},
      {"equalize", t.equalize_ms}, {"download", t.download_ms}, {"encode", t.encode_ms},
      {"write", t.write_ms}};
  for (const auto& [name, ms] : rows)
    tout << std::left << std::setw(10) << name << std::right << std::setw(12) << num(ms) << '\n';
  tout << std::left << std::setw(10) << "wall" << std::right << std::setw(12)
       << num(sum.wall_s * 1000.0) << '\n';
  if (sum.device_started) {
    tout << "start-up: ";
    if (sum.encoder_ready_ms > 0)
      tout << "the device's encoder ready after " << num(sum.encoder_ready_ms) << " ms, ";
    if (sum.device_init_ms > 0)
      tout << (sum.encoder_ready_ms > 0 ? "its hardware decoder" : "device ready") << " after "
           << num(sum.device_init_ms) << " ms";
    else if (!sum.device_note.empty())
      tout << "no hardware decoder (" << sum.device_note << ")";
    else
      tout << "the device not ready before the run ended";
    tout << " (CUDA context and nvJPEG handle, in the background; the handle "
         << num(sum.nvjpeg_init_ms) << " ms); first file written after " << num(sum.first_file_ms)
         << " ms\n";
  } else
    tout << "start-up: no device route"
         << (sum.device_note.empty() ? "" : " (" + sum.device_note + ")")
         << "; first file written after " << num(sum.first_file_ms) << " ms\n";
  if (sum.device.batches > 0)
    tout << "device route: " << sum.device.files << " files (" << num(sum.device.megapixels, 1)
         << " MP) in " << sum.device.batches << " batches; its slots spent "
         << num(sum.device.decode_ms) << " ms decoding and " << num(sum.device.encode_ms)
         << " ms equalizing and encoding (summed); its files done from "
         << num(sum.device.first_done_ms) << " to " << num(sum.device.last_done_ms) << " ms\n";
  tout << "routes:";
  for (const auto& [route, share] : sum.routes)
    tout << ' ' << route << ' ' << plural(share.files, "file") << " (" << num(share.megapixels, 1)
         << " MP)";
  tout << '\n';
  tout << "decoders:";
  for (const auto& [name, n] : sum.decoders) tout << ' ' << name << ' ' << n;
  tout << '\n';
  tout << "in flight: at most " << sum.peak_busy_workers << " of "
       << plural(std::size_t(jobs), "worker") << " busy at once; peak "
       << num(double(sum.peak_inflight_bytes) / 1048576.0, 1) << " MB of a "
       << (sum.max_inflight_bytes >> 20) << " MB cap (--max-inflight-mb)\n";
}

/// Ctrl-C during a run: the first SIGINT stops it gracefully (the files in progress are
/// finished and written, every finished file reported, the others reported cancelled, the
/// summary printed), then the command ends by SIGINT as an interrupted program does; a second
/// one ends it at once, its temp files removed (install_signal_cleanup). The signal handler
/// writes a byte to a pipe (set_interrupt_pipe); a thread of this object's reads it and cancels
/// the executor. Without a pipe or a thread, Ctrl-C ends the command at once, as before; so it
/// does until arm(), called once the run is under way (Executor::cancel before that would be
/// lost: run() starts uncancelled).
class StopOnCtrlC {
 public:
  explicit StopOnCtrlC(Executor& ex) {
    if (::pipe2(fd_, O_CLOEXEC) != 0) {
      fd_[0] = fd_[1] = -1;
      return;
    }
    try {
      watch_ = std::thread([this, &ex] {
        char c = 0;
        ssize_t n = 0;
        do n = ::read(fd_[0], &c, 1);
        while (n < 0 && errno == EINTR);
        if (n != 1) return;  // the run ended: the write end closed
        interrupted_ = true;
        // The Ctrl-C went to the whole foreground group: a reader of our standard output (`|
        // jq`) is gone too, and a report written to its pipe would end the command by SIGPIPE
        // before the files in progress are written. Ignored, such a write fails (EPIPE).
        struct sigaction ign {};
        ign.sa_handler = SIG_IGN;
        sigemptyset(&ign.sa_mask);
        ::sigaction(SIGPIPE, &ign, nullptr);
        ex.cancel();
      });
    } catch (const std::system_error&) {}
  }
  /// From now on the first SIGINT stops the run (from the executor's before_files, when the run
  /// is under way).
  void arm() {
    if (!watch_.joinable() || armed_) return;
    armed_ = true;
    set_interrupt_pipe(fd_[1]);
  }
  ~StopOnCtrlC() { finish(); }
  StopOnCtrlC(const StopOnCtrlC&) = delete;
  StopOnCtrlC& operator=(const StopOnCtrlC&) = delete;

  /// After the run: SIGINT ends the command at once again, and the thread is gone. Taken back,
  /// the pipe's write end is closed and the thread's read ends; taken by the handler meanwhile,
  /// its byte is on the way and the write end stays open until the thread has read it.
  void finish() {
    const bool handed = armed_ && set_interrupt_pipe(-1) < 0;
    armed_ = false;
    if (!handed) close_fd(fd_[1]);
    if (watch_.joinable()) watch_.join();
    close_fd(fd_[1]);
    close_fd(fd_[0]);
  }
  bool interrupted() const { return interrupted_; }

 private:
  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  int fd_[2] = {-1, -1};
  bool armed_ = false;  ///< the pipe handed to set_interrupt_pipe (and not taken back)
  std::atomic<bool> interrupted_{false};
  std::thread watch_;
};

/// The per-file callback of the executor: progress, errors, one line of text or JSON.
struct ItemPrinter {
  bool json = false;
  bool with_output = false;
  const Operation& op;           ///< its JSON lines say its parameters (put_operation)
  const std::string& mask_name;  ///< --mask as given
  const PrintItem& print_item;
  std::ostream& out;
  std::ostream& err;
  Progress& prog;

  void operator()(const ItemReport& rep) const {
    const std::string error = rep.ok ? std::string() : with_hints(rep.error);
    // (items a Ctrl-C cancelled have no line of their own on stderr: the summary counts them)
    const bool cancelled = !rep.ok && rep.error_kind == ItemError::cancelled;
    if (!rep.ok && !cancelled) {
      prog.clear(err);
      err << "histeq: error: " << one_line(error) << '\n';
    }
    if (json) {
      prog.clear(err);
      out << dump_line(batch_item_json(rep, with_output, error, &op, mask_name)) << '\n';
    } else if (rep.ok && print_item) {
      prog.clear(err);
      print_item(out, rep);
    }
    // Each file's line reaches a pipe (`| tee`, `| jq`, `| head`) when the file is done, not in
    // stdio's 4 KiB blocks at the end: one write per file.
    out.flush();
    prog.update(err);
  }
};

}  // namespace

std::string one_line(const std::string& s) {
  std::string r;
  r.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      r += "\\\\";
    } else if (c == '\n') {
      r += "\\n";
    } else if (c == '\r') {
      r += "\\r";
    } else if (c == '\t') {
      r += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      static const char kHex[] = "0123456789abcdef";
      r += "\\x";
      r += kHex[c >> 4];
      r += kHex[c & 15];
    } else {
      r += ch;
    }
  }
  return r;
}

int run_batch(const cxxopts::ParseResult& r, Common& cm, const Operation& op,
              const std::vector<std::string>& inputs, const std::string& outdir, std::ostream& out,
              std::ostream& err, const PrintItem& print_item) {
  const bool writes = op.writes();
  const bool quiet = r.count("quiet") > 0;
  const bool json = r.count("json") > 0;
  for (const std::string& in : inputs) {
    if (in != "-") continue;
    if (inputs.size() > 1) throw UsageError("'-' (standard input) can only be the one input");
    // The one input, into a folder (-o an existing folder, or a name ending in '/'): an image
    // from standard input has no name to write there under.
    throw UsageError("'-' (standard input) has no file name to write into the folder '" + outdir +
                     "': name the output file (-o " + (fs::path(outdir) / "NAME.png").string() +
                     "), or write standard output (-o - --format FMT)");
  }
  refuse_kernel_on_cpu(cm);
  ExecutorOptions eo = executor_options(r, cm, op);
  std::string format;
  if (writes && r.count("format")) format = parse_format(r["format"].as<std::string>());

  // Plan every output before any work: formats, collisions, options that would do nothing.
  std::vector<UnlistedInput> unlisted;  // folders that could not be listed: each a failure
  const std::vector<WorkItem> items = plan_items(r, writes, inputs, outdir, format, unlisted);
  if (writes) refuse_unused_encode_options(r, items);
  for (const UnlistedInput& u : unlisted) {  // named first, as find and cp -r do; the rest goes on
    err << "histeq: error: " << one_line(u.message()) << '\n';
    if (json) {
      ItemReport folder;  // ok = false
      folder.input = u.path;
      folder.error_kind = ItemError::file;
      folder.error_errno = u.code;
      folder.error_path = u.path;
      out << dump_line(batch_item_json(folder, false, u.message(), nullptr)) << '\n';
    }
  }

  // Large image buffers are freed and allocated again for every file: keep them in the heap
  // instead of returning them to the kernel each time (a fresh mmap costs a page fault per 4 KiB;
  // 18 % of a PNG batch's time in the kernel before this). One arena for every thread: a worker
  // thread's own arena grows in heaps of at most 64 MiB, which glibc unmaps whenever they fall
  // free, whatever the thresholds say, so a progressive JPEG's coefficient arrays (libjpeg
  // allocates them for every file) were faulted in afresh each time: 10 % of its decoding
  // (bench/probes/progressive_probe.cpp). The workers' allocations are few and large.
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);
  ::mallopt(M_TRIM_THRESHOLD, INT_MAX);  // 16 workers' buffers exceed any smaller bound
  ::mallopt(M_ARENA_MAX, 1);
  Progress prog;
  prog.on = !quiet && stderr_is_tty(err);
  prog.total = items.size();
  // The counts of the files finished (in any order), not of those reported: the reports go out
  // in input order, and the files are read largest first. Called only inside ex.run(), so the
  // references to prog and err outlive every call (the executor itself is kept until exit).
  if (prog.on)
    eo.on_progress = [&prog, &err](std::size_t files, double megapixels) {
      prog.done = files;
      prog.mp = megapixels;
      prog.update(err);
    };
  const auto ex_owner = std::make_shared<Executor>(eo);
  Executor& ex = *ex_owner;
  // The output folders once the run can start (no folder left by a run without its device).
  const auto folders = [&] {
    if (writes) make_output_folders(items, outdir);
  };
  // A reader of the reports that quits early (`| head`, `less`): a write to its pipe would end
  // the command by SIGPIPE with files still unwritten. Ignored, such writes fail (EPIPE), the
  // files are all written, and the end says the reports were lost, as a full stdout does.
  if (writes) {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, nullptr);
  }
  // Ctrl-C: the first stops the run gracefully, a second ends the command at once (StopOnCtrlC).
  StopOnCtrlC ctrl_c(ex);
  const auto before_files = [&] {
    ctrl_c.arm();
    folders();
  };
  BatchSummary sum = ex.run(
      items, ItemPrinter{json, writes, op, cm.mask_name, print_item, out, err, prog}, before_files);
  ctrl_c.finish();
  sum.files += unlisted.size();  // an unlisted folder counts as one failed item
  sum.failures += unlisted.size();
  prog.clear(err);
  if (cm.opt.backend == Backend::automatic && !quiet && ex.wanted_device()) {
    const std::string why = ex.cpu_fallback_reason();
    if (!why.empty()) err << "histeq: no usable CUDA device (" << why << "); ran on the CPU\n";
  }
  if (r.count("timing")) print_batch_timing(json ? err : (writes ? out : err), sum, ex.jobs());
  if (json) out << dump_line(batch_summary_json(sum, ex.jobs())) << '\n';
  if (!quiet) {
    const double mps = sum.wall_s > 0 ? sum.megapixels / sum.wall_s : 0;
    err << "histeq: " << plural(sum.files, "file") << ", " << num(sum.megapixels, 1) << " MP in "
        << num(sum.wall_s, 2) << " s, " << num(mps, 1) << " MP/s, "
        << plural(sum.failures - sum.cancelled, "failure");
    if (sum.cancelled > 0) err << ", " << sum.cancelled << " not started";
    err << '\n';
  }
  keep_until_exit(ex_owner);   // its devices, nvJPEG states and buffers go with the process
  if (ctrl_c.interrupted()) {  // (even where every file had finished: the user asked to stop)
    out.flush();
    if (!out) err << "histeq: error: could not write to standard output\n";
    err << "histeq: interrupted\n";
    err.flush();
    std::fflush(nullptr);
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
  return sum.failures > 0 ? 1 : 0;
}

}  // namespace histeq::cli
