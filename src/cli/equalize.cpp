// cli/equalize.cpp — `histeq equalize`, `histeq clahe` and `histeq match`: one file (8-bit
// equalize here; CLAHE, matching, a counted region and 16-bit through the per-file operation of
// cli/depth.hpp), or a batch (cli/batch.hpp).
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <future>
#include <iomanip>
#include <memory>
#include <new>
#include <ostream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "cli/batch.hpp"
#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/report.hpp"
#include "histeq/codec_names.hpp"
#include "histeq/error.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/jpeg_planes.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/planes.hpp"

namespace histeq::cli {
namespace {

std::string equalize_description(OpKind kind) {
  if (kind == OpKind::match)
    return "Histogram matching: maps each image's levels so that their distribution follows the "
           "reference image's (scikit-image's match_histograms, rounded to the input's type), per "
           "channel with --mode rgb or on Y of YCbCr (luma, the default for colour). Same inputs, "
           "outputs and batch options as 'histeq equalize'.";
  return kind == OpKind::clahe
             ? "Contrast-limited adaptive histogram equalization (CLAHE), byte for byte "
               "OpenCV 4.6's createCLAHE(clipLimit, tileGridSize).apply() on gray and 16-bit "
               "images (colour: on Y of YCbCr, or per channel with --mode rgb). Same inputs, "
               "outputs and batch options as 'histeq equalize'."
             : "Equalizes the histogram of an 8- or 16-bit image (PNG, JPEG, BMP, TGA, GIF, "
               "PNM in; PNG, JPEG, BMP, TGA, PGM/PPM/PNM out; 16-bit PNG/PGM/PPM stay 16-bit).";
}

void add_equalize_options(Command& c, OpKind kind) {
  const bool clahe = kind == OpKind::clahe;
  add_inputs(c);
  c.add("o,output",
        "output image (one input; the format follows the extension .png .jpg .jpeg .bmp .tga .pgm "
        ".ppm .pnm; may equal INPUT; '-': standard output, needs --format), or the output folder "
        "(several inputs or a folder; created if missing)",
        cxxopts::value<std::string>(), "OUTPUT");
  add_kernel_backend(c, kind,
                     clahe ? "histogram kernel: auto only (the tile histograms have their own "
                             "kernels)"
                           : "");
  add_batch_options(c, true);
  add_depth(c, /*writes=*/true);
  if (clahe) {
    c.add("clip-limit",
          "contrast limit, OpenCV's clipLimit and its default: each tile's histogram is clipped "
          "at max(1, int(C * tile pixels / bins)) and the excess redistributed; 0 or less: no "
          "clipping (2 to 4 suit photographs)",
          cxxopts::value<double>()->default_value("40"), "C");
    c.add("clip", "the same as --clip-limit", cxxopts::value<double>(), "C");
    c.add("tile-grid-size",
          "tile grid, OpenCV's tileGridSize: W columns by H rows, each 1.." +
              std::to_string(kMaxClaheTiles) + "; N: NxN",
          cxxopts::value<std::string>()->default_value("8x8"), "WxH");
    c.add("tiles", "the same as --tile-grid-size", cxxopts::value<std::string>(), "WxH");
    add_region_options(c, /*writes=*/true, /*tiles=*/true);
  } else if (kind == OpKind::match) {
    c.add("reference",
          "the reference image (8 or 16 bits, any size): its histogram per channel (--mode rgb) or "
          "of its luma; a gray reference serves every plane",
          cxxopts::value<std::string>(), "REF");
  } else {
    c.add("f,formula",
          "CDF->LUT formula: opencv (cv::equalizeHist, float32) or exact (integer, round half up)",
          cxxopts::value<std::string>()->default_value("opencv"), "NAME");
    add_region_options(c, /*writes=*/true);
  }
  c.add("q,quality", "JPEG quality 1..100", cxxopts::value<int>()->default_value("95"), "Q");
  c.add("decoder",
        kind == OpKind::clahe
            ? "JPEG codec: auto or cpu, both libjpeg-turbo (clahe decodes and encodes JPEG on "
              "the CPU)"
        : kind == OpKind::match
            ? "JPEG codec: auto (nvJPEG for the JPEGs of a batch large enough or on the GPU "
              "backend, where this build has it; else libjpeg-turbo), gpu (a batch of several "
              "files or a folder: nvJPEG decode and encode; inputs it cannot take fall back to "
              "libjpeg-turbo), cpu (libjpeg-turbo)"
            : "JPEG codec: auto (nvJPEG when the GPU backend runs and this build has it, else "
              "libjpeg-turbo), gpu (nvJPEG decode and encode; inputs it cannot take fall back "
              "to libjpeg-turbo), cpu (libjpeg-turbo)",
        cxxopts::value<std::string>()->default_value("auto"), "NAME");
  c.add(
      "subsampling",
      "JPEG chroma subsampling of a colour output: 444, 422 or 420 (gray JPEGs have one component)",
      cxxopts::value<std::string>()->default_value("420"), "S");
  c.add_flag("timing",
             kind != OpKind::equalize
                 ? "print a table of milliseconds per stage (a batch: per stage the sum over the "
                   "files, and the wall time)"
                 : "print a table of milliseconds per stage and the histogram's GB/s (a batch: "
                   "per stage the sum over the files, and the wall time)");
  c.add_flag("json",
             "print the report as one JSON object on stdout (the --timing table, if asked, goes to "
             "stderr); a batch: one object per file per line, then a summary object");
  c.add_flag("h,help", "print this help");
  c.options.parse_positional({"input"});
  c.options.positional_help(kind == OpKind::match ? "INPUT... -o OUTPUT --reference REF"
                                                  : "INPUT... -o OUTPUT");
}

/// True when the command line is a batch: several inputs, or a folder input / an existing folder
/// as -o, or -o ending in '/', or one missing input named as no image file (a mistyped folder, as
/// the batch's plan reads it) with an -o that is no image file name. Refuses
/// several inputs, or a folder, into one image file name (-o with an image extension that is not an
/// existing folder): a usage error, before any work.
bool is_batch(const std::string& cmd, const std::vector<std::string>& inputs,
              const std::string& output) {
  std::error_code ec;
  const std::string& input = inputs.front();
  const bool out_is_image_name = writable_ext(lower_ext(fs::path(output)));
  const bool out_is_dir = output != "-" && fs::is_directory(output, ec);
  if (inputs.size() > 1 && out_is_image_name && !out_is_dir) {
    std::string names;
    for (std::size_t i = 0; i < inputs.size() && i < 3; ++i)
      names += (i ? ", '" : "'") + inputs[i] + "'";
    if (inputs.size() > 3) names += ", ...";
    throw UsageError("several inputs (" + names + ") but -o '" + output +
                     "' is an image file name; with several inputs -o names the output folder "
                     "(see 'histeq " +
                     cmd + " --help')");
  }
  const bool in_is_dir = input != "-" && fs::is_directory(input, ec);
  if (in_is_dir && out_is_image_name && !out_is_dir)
    throw UsageError("'" + input + "' is a folder but -o '" + output +
                     "' is an image file name; with a folder input -o names the output folder "
                     "(see 'histeq " +
                     cmd + " --help')");
  // One input that is not there and is named as no image file, into an -o that is no image file
  // name: a folder mistyped, said as the batch says it ("no such folder (or file)"), not as an
  // -o without an image extension.
  const bool in_missing = input != "-" && !readable_ext(lower_ext(fs::path(input))) &&
                          !fs::exists(fs::symlink_status(input, ec));
  return inputs.size() > 1 || (!output.empty() && output.back() == '/') || in_is_dir ||
         (!out_is_image_name && (out_is_dir || in_missing));
}

/// What a report line says of the operation besides the mode: CLAHE's parameters, matching's
/// reference, the counted region ("" for a plain equalization).
std::string operation_words(const ItemOpOptions& io, const Common& cm) {
  std::string s;
  if (io.op.kind == OpKind::clahe) s = "clahe " + clahe_summary(io.op.clahe);
  if (io.op.kind == OpKind::match && io.op.reference) s = "match to " + io.op.reference->name();
  const std::string region = region_summary(cm);
  if (!region.empty()) s += (s.empty() ? "" : ", ") + region;
  return s;
}

/// Common and the operation of `kind` from the options (the region, the reference decoded).
ItemOpOptions read_operation(const cxxopts::ParseResult& r, OpKind kind, Common& cm) {
  if (kind == OpKind::equalize) cm.opt.formula = parse_formula(r["formula"].as<std::string>());
  if (kind == OpKind::equalize || kind == OpKind::clahe) read_region(r, cm);
  return item_op_options(r, cm, kind);
}

int run_equalize_batch(const cxxopts::ParseResult& r, OpKind kind,
                       const std::vector<std::string>& inputs, const std::string& output,
                       std::ostream& out, std::ostream& err) {
  if (output == "-")
    throw UsageError(inputs.size() == 1 ? "-o - (standard output) takes one image file, and '" +
                                              inputs.front() + "' is a folder"
                                        : std::string("-o - (standard output) takes exactly one "
                                                      "input"));
  Common cm = read_common(r);
  read_quality(r);
  const ItemOpOptions io = read_operation(r, kind, cm);
  warn_inexact(cm, err);
  // clahe, match, a region: each line says so, as the single-file report does
  const std::string words = operation_words(io, cm);
  const std::string op = words.empty() ? words : ", " + words;
  return run_batch(
      r, cm, io.op, inputs, output, out, err, [op](std::ostream& o, const ItemReport& rep) {
        o << one_line(rep.output) << ": " << rep.width << "x" << rep.height << ", "
          << rep.output_channels << (rep.output_channels == 1 ? " channel" : " channels")
          << (rep.bit_depth == 16 ? ", 16-bit" : "") << op << ", mode "
          << to_string(rep.equalize.mode) << ", kernel " << rep.equalize.kernel << " on "
          << rep.equalize.device << " (decoder " << rep.decoder << ", encoder " << rep.encoder
          << ")\n";
      });
}

/// --backend auto on one file: CUDA's start-up (0.2-0.35 s for the context on the H200 machine,
/// more than the CPU needs to equalize any photo) runs on a background thread while the file is
/// read and decoded on the CPU. settle() takes the GPU only when that start-up has finished and
/// found a usable device, else the CPU: the same bytes either way (the backends are exact twins),
/// and the image never waits for the GPU. Nor does the process, when it ends with std::_Exit
/// (the histeq command): the thread is detached, and a context still starting when the file is
/// done is left to the process's end. The late "ran on the CPU" note waits only for the device
/// count (cuda_device_count, at most kLateNoteWait): without a device the probe ends at once
/// and the note follows; with one, a probe still running is not waited for, and its rare note
/// (a device that cannot run this build's code) is not given. An embedding caller that returns
/// from main joins the thread in the destructor instead, so that no CUDA call outlives it.
class BackendProbe {
 public:
  BackendProbe(bool start, bool quiet) : quiet_(quiet) {
    if (!start) return;
    try {
      auto st = std::make_shared<State>();
      std::future<Result> f = st->done.get_future();
      std::thread t([st] {
        Result r;
        try {
          st->devices.store(cuda_device_count());
          r.backend = resolve_backend(Backend::automatic, &r.why);
        } catch (const std::exception& e) {  // e.g. bad_alloc: the CPU, and why
          r.backend = Backend::cpu;
          r.why = e.what();
        }
        if (st->devices.load() < 0) st->devices.store(0);
        st->done.set_value(std::move(r));
      });
      if (exit_without_teardown())
        t.detach();
      else
        thread_ = std::move(t);
      state_ = std::move(st);
      f_ = std::move(f);
    } catch (const std::system_error&) {  // no thread to spare: settled before decoding
    }
    started_ = f_.valid();
  }
  bool started() const { return started_; }
  /// Sets c.opt.backend (once; later calls do nothing). wait: block until the probe is done.
  void settle(Common& c, std::ostream& err, bool wait) {
    if (!f_.valid()) return;
    if (!wait && f_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      c.opt.backend = Backend::cpu;
      if (!quiet_) late_err_ = &err;  // a probe ending without a device: said then (~BackendProbe)
      return;
    }
    const Result r = f_.get();
    c.opt.backend = r.backend;
    if (r.backend == Backend::cpu) say_why(err, r.why, "running");
  }
  ~BackendProbe() {
    if (late_err_ && f_.valid()) {
      try {
        const auto until = std::chrono::steady_clock::now() + kLateNoteWait;
        while (state_->devices.load() < 0 && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        const bool device = state_->devices.load() > 0;
        if ((!device && f_.wait_until(until) == std::future_status::ready) ||
            (device && f_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)) {
          const Result r = f_.get();
          if (r.backend == Backend::cpu) say_why(*late_err_, r.why, "ran");
        }
      } catch (...) {  // a destructor: the message is not worth an exception
      }
    }
    if (thread_.joinable()) thread_.join();
  }
  BackendProbe(const BackendProbe&) = delete;
  BackendProbe& operator=(const BackendProbe&) = delete;

 private:
  struct Result {
    Backend backend = Backend::cpu;
    std::string why;
  };
  struct State {
    std::promise<Result> done;
    std::atomic<int> devices{-1};  ///< -1 until the driver has counted them
  };
  static constexpr std::chrono::milliseconds kLateNoteWait{100};
  static void say_why(std::ostream& err, const std::string& why, const char* verb) {
    err << "histeq: no usable CUDA device (" << (why.empty() ? "unknown reason" : why) << "); "
        << verb << " on the CPU\n";
  }
  bool quiet_ = false;
  std::shared_ptr<State> state_;
  std::future<Result> f_;
  std::thread thread_;
  bool started_ = false;
  std::ostream* late_err_ = nullptr;
};

/// The single-file path's settled options: everything checked before the input is read.
struct Single {
  std::string input, output, name, out_ext;
  Common cm;
  ItemOpOptions io;
  EncodeOptions enc;
  bool json = false, timing = false, quiet = false;
  /// The image goes to standard output (-o -, or a name for it: /dev/stdout, /proc/self/fd/1):
  /// the report then goes to standard error, so that the stream holds the image only.
  bool to_stdout = false;
  bool gpu_jpeg = false;                ///< nvJPEG for JPEG files (see settle_single)
  std::unique_ptr<BackendProbe> probe;  ///< --backend auto: settled once the file is decoded

  /// The backend as the probe has it now (no wait); the per-file operation follows it.
  void settle_probe(std::ostream& err) {
    probe->settle(cm, quiet ? discarded_stream() : err, /*wait=*/false);
    io.op.equalize = cm.opt;
  }
};

/// True when `path` is the file standard output is open on (the same device and inode).
bool names_standard_output(const std::string& path) {
  struct stat named {
  }, out{};
  return ::stat(path.c_str(), &named) == 0 && ::fstat(STDOUT_FILENO, &out) == 0 &&
         named.st_dev == out.st_dev && named.st_ino == out.st_ino;
}

/// --format against the name of one output file: an image extension naming another format
/// (`-o x.jpg --format png` would put PNG bytes in a .jpg file) is a usage error naming both.
/// .jpg and .jpeg are one format; .pnm goes with pgm and ppm (and --format pnm with .pgm and
/// .ppm), which it picks by channels. A name without an image extension takes the format given
/// (`-o -`, `-o /dev/stdout`, `-o out.bin`).
void refuse_contradicting_format(const std::string& given, const std::string& ext,
                                 const std::string& output) {
  if (output == "-") return;
  const std::string named = lower_ext(fs::path(output));
  if (!writable_ext(named)) return;
  const std::string as_format = parse_format(named);  // ".jpeg" -> ".jpg"
  const bool netpbm = pnm_ext(as_format) && pnm_ext(ext) && (as_format == ".pnm" || ext == ".pnm");
  if (as_format == ext || netpbm) return;
  throw UsageError("--format " + given + " contradicts the output name '" + output + "' (a " +
                   named.substr(1) + " file); name the output ." + ext.substr(1) +
                   ", or leave --format out");
}

Single settle_single(const cxxopts::ParseResult& r, OpKind kind, const std::string& input,
                     const std::string& output, std::ostream& err) {
  Single s;
  s.input = input;
  s.output = output;
  s.name = input == "-" ? "(standard input)" : input;
  s.enc.png_level = read_png_level(r);
  if (r.count("format")) {
    s.out_ext = parse_format(r["format"].as<std::string>());
    refuse_contradicting_format(r["format"].as<std::string>(), s.out_ext, output);
  } else if (output == "-") {
    throw UsageError(std::string("-o - (standard output) needs --format FMT (FMT: ") +
                     kOutputFormats + ")");
  } else {
    s.out_ext = fs::path(output).extension().string();
    // A name without an extension that is not there is most often an output folder to be.
    std::error_code ec;
    const bool folder_to_be =
        input != "-" && !output.empty() && !fs::exists(fs::symlink_status(output, ec));
    if (s.out_ext.empty())
      throw UsageError("-o '" + output +
                       "' has no extension to give the output format: name the file .png, "
                       ".jpg, .jpeg, .bmp, .tga, .pgm, .ppm or .pnm, or add --format FMT" +
                       (folder_to_be
                            ? "; for an output folder write '" + output + "/' (created if missing)"
                            : std::string()));
    check_output_path(output);  // before any work: an unknown extension is a usage error
  }
  if (output == "-" && stdout_closed_at_start())  // the image would go to /dev/null
    throw Error("-o -: standard output is closed, so the image has nowhere to go (give -o a file)");
  s.cm = read_common(r);
  s.io = read_operation(r, kind, s.cm);
  s.enc.quality = read_quality(r);
  s.enc.subsampling = jpeg::parse_subsampling(r["subsampling"].as<std::string>());
  refuse_jpeg_options(r, s.out_ext);
  refuse_png_options(r, s.out_ext);
  refuse_kernel_on_cpu(s.cm);
  refuse_batch_only_options(r);
  s.json = r.count("json") > 0;
  s.to_stdout = output == "-" || names_standard_output(output);
  s.timing = r.count("timing") > 0;
  s.quiet = r.count("quiet") > 0;

  const std::string decoder_arg = r["decoder"].as<std::string>();
  if (decoder_arg != "auto" && decoder_arg != "gpu" && decoder_arg != "cpu")
    throw UsageError("unknown --decoder '" + decoder_arg + "' (valid: auto, gpu, cpu)");
  if (decoder_arg == "gpu" && !gpu::nvjpeg_built())
    throw UsageError("--decoder gpu: this histeq was built without nvJPEG (valid here: auto, cpu)");
  if (decoder_arg == "gpu" && s.cm.opt.backend == Backend::cpu)  // as a batch says it
    throw UsageError("--decoder gpu needs the CUDA backend (not --backend cpu)");
  // --backend auto: settled once the file is decoded (BackendProbe); --decoder gpu needs to know
  // now.
  s.probe = std::make_unique<BackendProbe>(
      s.cm.opt.backend == Backend::automatic && decoder_arg != "gpu", s.quiet);
  // --decoder gpu without a device fails below, naming why (no "running on the CPU" note first)
  std::string no_device;
  if (!s.probe->started() && decoder_arg == "gpu")
    s.cm.opt.backend = resolve_backend(s.cm.opt.backend, &no_device);
  else if (!s.probe->started())
    settle_backend(s.cm, s.quiet ? discarded_stream() : err);
  warn_inexact(s.cm, err);
  if (decoder_arg == "gpu" && s.cm.opt.backend != Backend::cuda)
    throw Error("--decoder gpu needs the CUDA backend, and there is no usable CUDA device (" +
                (no_device.empty() ? std::string("unknown reason") : no_device) + ")");
  // nvJPEG for JPEG files when asked (gpu) or when the GPU backend was asked for (--backend
  // cuda, --decoder auto). With --backend auto one file is decoded and encoded by libjpeg-turbo:
  // nvJPEG's handles alone take longer to create (about 0.3 s each) than any photo's decode.
  s.gpu_jpeg = gpu::nvjpeg_built() && s.cm.opt.backend == Backend::cuda && decoder_arg != "cpu" &&
               !s.probe->started();
  s.io.op.equalize = s.cm.opt;  // the backend as settled (or not yet: settle_probe)
  return s;
}

/// Writes the encoded output to the file (atomically) or to standard output.
void emit(const Single& s, const std::vector<std::uint8_t>& encoded, std::ostream& out) {
  if (s.output == "-") {
    out.write(reinterpret_cast<const char*>(encoded.data()), std::streamsize(encoded.size()));
    out.flush();
    if (!out) throw Error("could not write to standard output");
  } else {
    write_file_atomic(s.output, encoded.data(), encoded.size());
  }
}

/// The single-file report of the per-file operation: clahe, match, a region, 16 bits (text,
/// --timing, --json).
void print_item_op_report(const Single& s, const ItemReport& rep, double total_ms, bool jpeg_input,
                          std::ostream& out, std::ostream& err) {
  const ItemTimes& t = rep.times;
  std::ostream& rout = s.to_stdout ? err : out;
  if (s.timing) {
    std::ostream& tout = (s.json || s.to_stdout) ? err : out;
    print_stage_table(tout, {{"decode", t.decode_ms},
                             {to_string(s.io.op.kind), t.equalize_ms},
                             {"encode", t.encode_ms},
                             {"total", total_ms}});
  }
  const EqualizeReport& er = rep.equalize;
  if (s.json) {
    rout << dump_line(item_op_json(s.io, s.cm.mask_name, s.input, s.output, rep, total_ms)) << '\n';
  } else if (!s.quiet || !s.to_stdout) {
    rout << s.output << ": " << rep.width << "x" << rep.height << ", " << rep.output_channels
         << (rep.output_channels == 1 ? " channel" : " channels") << ", " << rep.bit_depth
         << "-bit, ";
    const std::string words = operation_words(s.io, s.cm);
    if (!words.empty()) rout << words << ", ";
    rout << "mode " << to_string(er.mode) << ", kernel " << er.kernel << " on " << er.device << ", "
         << num(total_ms, 1) << " ms";
    // a JPEG input names its codecs, as report_single's line does
    if (jpeg_input) rout << " (decoder " << rep.decoder << ", encoder " << rep.encoder << ")";
    rout << '\n';
  }
}

/// The 8-bit single-file result: the images' shapes, the report, the codecs used.
struct Equalized {
  Image in;  ///< on the device path: shape and metadata only (the pixels stay on the GPU)
  Image eq;
  EqualizeReport rep;
  std::string decoder, encoder;  ///< as the reports name them (codec_names.hpp)
  bool jpeg_input = false;       ///< the text line names the codecs of a JPEG input
};

/// JPEG in, nvJPEG available: decode on the device; JPEG out too: equalize and encode there.
/// False when the device path did not write the output (the host equalizes and encodes).
bool equalize_jpeg_on_device(const Single& s, const std::vector<std::uint8_t>& bytes, bool jpg_out,
                             std::unique_ptr<gpu::JpegCodec>& codec, Equalized& e,
                             std::ostream& out) {
  auto geq = std::make_unique<gpu::Equalizer>();
  gpu::JpegCodecOptions jo;
  jo.max_pixels = s.cm.max_pixels;
  codec = std::make_unique<gpu::JpegCodec>(geq->stream(), jo);
  if (!jpg_out) {
    e.in = codec->decode_to_host({bytes.data(), bytes.size(), s.name}, &e.decoder);
    return false;
  }
  const gpu::JpegOnDevice d =
      gpu::equalize_jpeg_on_device(*geq, *codec, {bytes.data(), bytes.size(), s.name}, s.cm.opt,
                                   {s.enc.quality, s.enc.subsampling}, &e.rep);
  emit(s, d.bytes, out);
  e.in.width = e.eq.width = d.width;
  e.in.height = e.eq.height = d.height;
  e.in.channels = d.channels;
  e.eq.channels = d.out_channels;
  e.decoder = d.decoder;
  e.encoder = codec::kNvjpeg;
  e.rep.times.decode_ms = d.decode_ms;
  e.rep.times.encode_ms = d.encode_ms;
  keep_until_exit(std::shared_ptr<gpu::Equalizer>(std::move(geq)));
  return true;
}

/// Decodes, equalizes and encodes one 8-bit image; writes the output. t_start: before the
/// input was read (the decode and total times include reading it).
Equalized equalize_one(Single& s, const std::vector<std::uint8_t>& bytes, Clock::time_point t_start,
                       std::ostream& out, std::ostream& err) {
  const bool jpg_out = jpeg_ext(fs_extension_lower(s.out_ext));
  Equalized e;
  e.encoder = codec::encoder_name(s.out_ext, s.enc.png_level);
  const bool is_jpeg = jpeg::is_jpeg(bytes.data(), bytes.size());
  e.jpeg_input = is_jpeg;
  std::unique_ptr<gpu::JpegCodec> codec;
  bool done = false;  // equalized and written on the device path
  const jpeg::EncodeOptions enc{s.enc.quality, s.enc.subsampling};
  std::vector<std::uint8_t> planes_out;
  int w = 0, h = 0;
  if (is_jpeg && jpg_out && !s.gpu_jpeg && jpeg_planes_backend(s.cm.opt.backend) &&
      jpeg_planes_route(bytes.data(), bytes.size(), s.cm.opt, enc) &&
      equalize_jpeg_planes(bytes.data(), bytes.size(), s.name, s.cm.opt, enc, s.cm.max_pixels,
                           &planes_out, &e.rep, &w, &h)) {
    // luma mode in the file's own YCbCr planes, as the executor does (jpeg_planes.hpp)
    const double read_ms = ms_since(t_start) - e.rep.times.total_ms;
    s.settle_probe(err);
    emit(s, planes_out, out);
    e.in.width = e.eq.width = w;
    e.in.height = e.eq.height = h;
    e.in.channels = e.eq.channels = 3;
    e.decoder = e.encoder = codec::kLibjpegTurboYcbcr;
    e.rep.times.decode_ms += read_ms;
    e.rep.times.total_ms = ms_since(t_start);
    return e;
  }
  if (s.gpu_jpeg && is_jpeg) {
    done = equalize_jpeg_on_device(s, bytes, jpg_out, codec, e, out);
  } else {
    e.in = decode_image(bytes.data(), bytes.size(), s.name, s.cm.max_pixels, &e.decoder);
  }
  if (!done) {
    const double decode_ms = ms_since(t_start);
    s.settle_probe(err);
    e.eq = equalize(e.in, s.cm.opt, &e.rep);
    const Clock::time_point t_enc = Clock::now();
    if (jpg_out && s.gpu_jpeg) {
      if (!codec) codec = std::make_unique<gpu::JpegCodec>(nullptr, gpu::JpegCodecOptions{});
      emit(s, codec->encode(e.eq, {s.enc.quality, s.enc.subsampling}), out);
      e.encoder = codec::kNvjpeg;
    } else {
      emit(s, encode_image(e.eq, s.out_ext, s.enc), out);
    }
    e.rep.times.encode_ms = ms_since(t_enc);
    e.rep.times.decode_ms = decode_ms;
  }
  e.rep.times.total_ms = ms_since(t_start);  // wall time from decode start to encode end
  keep_until_exit(std::shared_ptr<gpu::JpegCodec>(std::move(codec)));
  return e;
}

/// --timing of one 8-bit file: a row per stage, the histogram's GB/s.
void print_single_timing(std::ostream& tout, const StageTimes& t, bool on_cpu, double hist_bytes,
                         double gbps) {
  const struct {
    const char* name;
    double ms;
    bool device_only;
  } rows[] = {{"decode", t.decode_ms, false},       {"upload", t.upload_ms, true},
              {"histogram", t.histogram_ms, false}, {"CDF+LUT", t.cdf_lut_ms, false},
              {"apply", t.apply_ms, false},         {"download", t.download_ms, true},
              {"encode", t.encode_ms, false},       {"total", t.total_ms, false}};
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

/// The report of one 8-bit file: the lost counts of a racy kernel, --timing, --json or a line.
void report_single(const Single& s, const Equalized& e, std::ostream& out, std::ostream& err) {
  const int planes = plane_count(e.rep.mode, e.in.channels);
  report_lost(s.cm, e.rep, std::uint64_t(e.in.pixel_count()) * std::uint64_t(planes), err);
  const StageTimes& t = e.rep.times;
  const double hist_bytes = double(e.in.pixel_count()) * planes;
  const double gbps = t.histogram_ms > 0 ? hist_bytes / (t.histogram_ms * 1e6) : NAN;
  std::ostream& rout = s.to_stdout ? err : out;  // stdout holds the image
  // The channels of the file written (a JPEG drops alpha, a BMP is BGR or BGRA), not of the image
  const int out_channels = encoded_channels(e.eq.channels, s.out_ext);
  if (s.timing) {
    print_single_timing((s.json || s.to_stdout) ? err : out, t, e.rep.backend != "cuda", hist_bytes,
                        gbps);
  }
  if (s.json) {
    EqualizeFacts f;
    f.input = s.input;
    f.output = s.output;
    f.width = e.in.width;
    f.height = e.in.height;
    f.channels = e.in.channels;
    f.output_channels = out_channels;
    f.formula = s.cm.opt.formula;
    f.decoder = e.decoder;
    f.encoder = e.encoder;
    f.histogram_bytes = hist_bytes;
    f.histogram_gbps = gbps;
    rout << dump_line(equalize_json(f, e.rep)) << '\n';
  } else if (!s.quiet || !s.to_stdout) {
    rout << s.output << ": " << e.eq.width << "x" << e.eq.height << ", " << out_channels
         << (out_channels == 1 ? " channel" : " channels") << ", mode " << to_string(e.rep.mode)
         << ", kernel " << e.rep.kernel << " on " << e.rep.device << ", " << num(t.total_ms, 1)
         << " ms";
    if (e.jpeg_input) rout << " (decoder " << e.decoder << ", encoder " << e.encoder << ")";
    rout << '\n';
  }
}

/// One input, one output file, plus '-' for standard input/output.
int run_single(const cxxopts::ParseResult& r, OpKind kind, const std::string& input,
               const std::string& output, std::ostream& out, std::ostream& err) {
  Single s = settle_single(r, kind, input, output, err);
  try {
    const Clock::time_point t_start = Clock::now();
    const std::vector<std::uint8_t> bytes = input == "-" ? read_stdin() : read_image_file(input);
    // CLAHE, match, a region, 16-bit inputs, --depth 16: the per-file operation (as a batch)
    s.settle_probe(err);
    if (needs_item_op(s.io, is_16bit_data(bytes.data(), bytes.size()))) {
      ItemReport ir;
      emit(s, run_item(s.io, bytes.data(), bytes.size(), s.name, s.out_ext, ir), out);
      print_item_op_report(s, ir, ms_since(t_start), jpeg::is_jpeg(bytes.data(), bytes.size()), out,
                           err);
    } else {
      report_single(s, equalize_one(s, bytes, t_start, out, err), out, err);
    }
  } catch (const std::bad_alloc&) {
    throw Error("'" + s.name + "': out of memory");
  } catch (const UsageError&) {
    throw;
  } catch (const CudaError&) {
    throw;
  } catch (const Error& e) {  // an encoder out of memory says the image's size, not its file
    const std::string m = e.what();
    if (m.find("out of memory") == std::string::npos || m.find("'" + s.name + "'") != m.npos ||
        m.find("'" + output + "'") != m.npos)
      throw;
    throw Error("'" + s.name + "': " + m);
  }
  // The output is committed by now: a report that cannot be written (a full or closed stdout)
  // is an error that says so, rather than one that reads as if nothing had been written.
  out.flush();
  if (!out && output != "-")
    throw Error("the image " + output +
                " was written, but the report could not be written to "
                "standard output (full or closed)");
  return 0;
}

}  // namespace

int cmd_equalize(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                 OpKind kind) {
  const std::string cmd = to_string(kind);
  Command c(cmd, equalize_description(kind));
  add_equalize_options(c, kind);
  const cxxopts::ParseResult r = c.parse(args);
  if (r.count("help")) {
    out << c.options.help();
    return 0;
  }
  const std::string usage = "(usage: histeq " + cmd + " INPUT -o OUTPUT" +
                            (kind == OpKind::match ? " --reference REF)" : ")");
  if (!r.count("input")) throw UsageError(cmd + ": missing INPUT " + usage);
  if (!r.count("output")) throw UsageError(cmd + ": missing -o OUTPUT " + usage);
  if (kind == OpKind::match && !r.count("reference"))
    throw UsageError(cmd + ": missing --reference REF, the image to match " + usage);
  if (kind == OpKind::clahe && r["kernel"].as<std::string>() != "auto")
    throw UsageError(
        "--kernel: clahe computes its tile histograms with its own kernels (valid: auto)");
  const bool region = r.count("mask") > 0 || r.count("roi") > 0;
  const bool gpu_decoder = r["decoder"].as<std::string>() == "gpu";
  if ((kind == OpKind::clahe || region) && gpu_decoder)
    throw UsageError(
        "--decoder gpu: " +
        (region ? std::string("an equalization with --mask or --roi") : std::string(cmd)) +
        " decodes JPEG with libjpeg-turbo (valid: auto, cpu)");
  const std::vector<std::string> inputs = inputs_of(r);
  const std::string output = r["output"].as<std::string>();
  if (is_batch(cmd, inputs, output)) return run_equalize_batch(r, kind, inputs, output, out, err);
  // A match of one file runs the item's plan on the CPU (run_item); a batch's JPEGs take the
  // executor's device route as an equalization's do.
  if (kind == OpKind::match && gpu_decoder)
    throw UsageError(
        "--decoder gpu: match decodes one file's JPEG with libjpeg-turbo; several files or a "
        "folder take the GPU's JPEG route (valid for one file: auto, cpu)");
  return run_single(r, kind, inputs.front(), output, out, err);
}

}  // namespace histeq::cli
