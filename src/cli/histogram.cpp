// cli/histogram.cpp — `histeq histogram`: the 256-bin (16-bit inputs: 65536-bin) histogram of
// an image's planes as text or CSV; several files or --json: a batch (cli/batch.hpp).
#include <chrono>
#include <cstdint>
#include <new>
#include <ostream>
#include <string>
#include <vector>

#include "bench/csv_text.hpp"
#include "cli/batch.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "histeq/error.hpp"
#include "histeq/image_io.hpp"

namespace histeq::cli {

int cmd_histogram(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Command c("histogram",
            "Prints the histogram of an image's planes, 256 bins (65536 for a 16-bit image): "
            "one plane (gray, or Y for luma and gray modes) or three (R, G, B for --mode rgb on "
            "a colour image); with --mask or --roi, of the counted pixels only.");
  add_inputs(c);
  add_kernel_backend(c, OpKind::histogram);
  add_batch_options(c, false);
  add_depth(c, /*writes=*/false);
  add_region_options(c, /*writes=*/false);
  c.add_flag("csv",
             "CSV: header 'bin,count' (three planes: 'bin,r,g,b'), then one line per bin; several "
             "files: a block per file with a first column 'file'");
  c.add_flag("json",
             "one JSON object per file per line (JSON Lines), then a summary object (files, not "
             "standard input)");
  c.add_flag("timing",
             "per stage the milliseconds (several files: summed over the files, and the wall "
             "time) on stderr");
  c.add_flag("h,help", "print this help");
  c.options.parse_positional({"input"});
  c.options.positional_help("INPUT...");

  const cxxopts::ParseResult r = c.parse(args);
  if (r.count("help")) {
    out << c.options.help();
    return 0;
  }
  if (!r.count("input"))
    throw UsageError("histogram: missing INPUT (usage: histeq histogram INPUT)");
  const std::vector<std::string> inputs = inputs_of(r);
  const std::string& input = inputs.front();
  Common cm = read_common(r);
  read_region(r, cm);
  const bool csv = r.count("csv") > 0;
  if (csv && r.count("json"))  // --json's objects hold the bins: --csv would do nothing
    throw UsageError("--csv and --json are two ways to print the bins: give one of them");
  ItemOpOptions io = item_op_options(r, cm, OpKind::histogram);
  {
    std::error_code ec;
    if (inputs.size() > 1 || (input != "-" && fs::is_directory(input, ec)) || r.count("json")) {
      if (input == "-" && inputs.size() == 1)
        throw UsageError("histogram --json reads files, not standard input");
      warn_inexact(cm, err);
      return run_batch(r, cm, io.op, inputs, "", out, err,
                       [csv](std::ostream& o, const ItemReport& rep) {
                         const auto& hs = rep.equalize.histograms;
                         const char sep = csv ? ',' : ' ';
                         if (csv)
                           o << (hs.size() == 3 ? "file,bin,r,g,b" : "file,bin,count") << '\n';
                         else
                           o << "==> " << one_line(rep.input) << " <==\n";
                         const std::size_t bins = hs.empty() ? 256 : hs.front().size();
                         for (std::size_t b = 0; b < bins; ++b) {
                           if (csv) o << csv_text::field(rep.input) << ',';
                           o << b;
                           for (const Histogram& h : hs) o << sep << (b < h.size() ? h[b] : 0);
                           o << '\n';
                         }
                       });
    }
  }

  refuse_kernel_on_cpu(cm);
  refuse_batch_only_options(r);
  settle_backend(cm, r.count("quiet") ? discarded_stream() : err);
  warn_inexact(cm, err);
  const std::string name = input == "-" ? "(standard input)" : input;
  std::vector<Histogram> hs;
  io.op.equalize = cm.opt;  // the backend as settled
  using Clock = std::chrono::steady_clock;
  const auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  const Clock::time_point t0 = Clock::now();
  double read_ms = 0, decode_ms = 0, histogram_ms = 0;
  try {
    const std::vector<std::uint8_t> bytes = input == "-" ? read_stdin() : read_image_file(input);
    const Clock::time_point t1 = Clock::now();
    read_ms = ms(t0, t1);
    // 65536 bins, or the counted pixels of a region: the per-file operation (as a batch runs it)
    if (needs_item_op(io, is_16bit_data(bytes.data(), bytes.size()))) {
      ItemReport ir;
      run_item(io, bytes.data(), bytes.size(), name, "", ir);
      hs = std::move(ir.equalize.histograms);
      decode_ms = ir.times.decode_ms;
      histogram_ms = ir.times.equalize_ms;
    } else {
      const Image in = decode_image(bytes.data(), bytes.size(), name, cm.max_pixels);
      const Clock::time_point t2 = Clock::now();
      decode_ms = ms(t1, t2);
      EqualizeReport rep;
      hs = image_histograms(in, cm.opt, &rep);
      histogram_ms = ms(t2, Clock::now());
      report_lost(cm, rep, std::uint64_t(in.pixel_count()) * hs.size(), err);
    }
  } catch (const std::bad_alloc&) {
    throw Error("'" + name + "': out of memory");
  }
  if (r.count("timing"))  // on stderr: stdout holds the histogram
    print_stage_table(err, {{"read", read_ms},
                            {"decode", decode_ms},
                            {"histogram", histogram_ms},
                            {"total", ms(t0, Clock::now())}});

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

}  // namespace histeq::cli
