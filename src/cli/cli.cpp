// cli/cli.cpp — the `histeq` command line (cli/cli.hpp): the table of commands, the top-level
// usage, `help COMMAND` and `--version`. Each command lives in its own file (cli/commands.hpp);
// bench and lesson parse their own options in the bench room (bench/args.cpp, bench/lesson.cpp).
// No exit(), no error printing: failures are thrown (UsageError → 2, Error → 1) and printed once
// by main(). Notices that are not errors (CPU fallback, racy kernel) go to `err`.
#include "cli/cli.hpp"

#include <ostream>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "bench/lesson.hpp"
#include "cli/batch.hpp"
#include "cli/commands.hpp"
#include "cli/malloc_thp.hpp"
#include "cli/mistakes.hpp"
#include "cli/options.hpp"
#include "histeq/codec_names.hpp"
#include "histeq/error.hpp"
#include "histeq/nvjpeg_codec.hpp"

#ifndef HISTEQ_VERSION
#define HISTEQ_VERSION "unknown"
#endif

namespace histeq::cli {
namespace {

int dispatch(const std::string& cmd, const std::vector<std::string>& rest, std::ostream& out,
             std::ostream& err) {
  if (cmd == "equalize") return cmd_equalize(rest, out, err, OpKind::equalize);
  if (cmd == "clahe") return cmd_equalize(rest, out, err, OpKind::clahe);
  if (cmd == "match") return cmd_equalize(rest, out, err, OpKind::match);
  if (cmd == "histogram") return cmd_histogram(rest, out, err);
  if (cmd == "kernels") return cmd_kernels(rest, out, err);
  if (cmd == "bench") return histeq::bench::main(rest, out, err);
  if (cmd == "lesson") return histeq::lesson::main(rest, out, err);
  if (!cmd.empty() && cmd[0] == '-') {
    throw UsageError("unknown option '" + cmd + "'; valid before a command: --help, --version");
  }
  throw UsageError("unknown command '" + cmd + "'" + did_you_mean(cmd, kCommandNames) +
                   "; commands: " + kCommands);
}

}  // namespace

namespace {
bool g_exit_without_teardown = false;
bool g_stdout_closed_at_start = false;
}  // namespace

void set_stdout_closed_at_start(bool closed) { g_stdout_closed_at_start = closed; }
bool stdout_closed_at_start() { return g_stdout_closed_at_start; }

void set_exit_without_teardown(bool on) { g_exit_without_teardown = on; }
bool exit_without_teardown() { return g_exit_without_teardown; }

void keep_until_exit(std::shared_ptr<void> object) {
  if (!g_exit_without_teardown || !object) return;  // destroyed here, by the last owner
  // Never destroyed: a leaked holder, so that no static destructor reaches it either.
  static auto* kept = new std::vector<std::shared_ptr<void>>();
  kept->push_back(std::move(object));
}

std::string usage() {
  return "histeq " HISTEQ_VERSION
         " - histogram equalization, CLAHE and histogram matching of 8- and 16-bit images on "
         "the GPU (CUDA), with a CPU backend\n"
         "\n"
         "Usage:\n"
         "  histeq equalize INPUT -o OUTPUT [--kernel NAME] [--backend auto|cuda|cpu]\n"
         "                  [--mode luma|rgb|gray] [--formula opencv|exact] [--timing] [--json]\n"
         "                  [--mask FILE] [--roi X,Y,W,H]\n"
         "                  [--quality Q] [--subsampling 444|422|420] [--decoder auto|gpu|cpu]\n"
         "                  [--png-level L] [--format png|jpg|bmp|tga|pgm|ppm|pnm] [--max-pixels "
         "N]\n"
         "  histeq equalize INPUT... -o FOLDER [-r] [--format FMT] [--jobs N] [--max-inflight-mb "
         "MB]\n"
         "                  [--devices LIST] [--quiet] [--json] [--timing] [options above]\n"
         "  histeq equalize - -o - --format FMT      (standard input to standard output)\n"
         "  histeq clahe INPUT... -o OUTPUT [--clip-limit C] [--tile-grid-size WxH]\n"
         "                  [options of equalize but --formula]\n"
         "  histeq match INPUT... -o OUTPUT --reference REF\n"
         "                  [options of equalize but --formula, --mask, --roi]\n"
         "  histeq histogram INPUT... [-r] [--kernel NAME] [--backend ...] [--mode ...] [--csv] "
         "[--json]\n"
         "                  [--timing] [--max-pixels N] [--jobs N] [--quiet] [--mask FILE]\n"
         "                  [--roi X,Y,W,H]\n"
         "  (equalize, clahe, match, histogram: [--depth 8|16]; 16-bit PNG/PGM/PPM stay 16-bit)\n"
         "  histeq kernels [--details] [--type u8|i32] [--bins N] [--size N]\n"
         "  histeq bench [ARGS...]        (see 'histeq bench --help')\n"
         "  histeq lesson [NAME] [...]    guided experiments (see 'histeq lesson --help')\n"
         "  histeq --help | --version | COMMAND --help | help COMMAND\n"
         "\n"
         "Exit status: 0 success, 1 runtime failure (bad input file, I/O, CUDA; in a batch: any "
         "file\n"
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
        rest.front() == "equalize" || rest.front() == "clahe" || rest.front() == "match" ||
        rest.front() == "histogram")
      return run(h, out, err);
    throw UsageError("help: unknown command '" + rest.front() + "'" +
                     did_you_mean(rest.front(), kCommandNames) + "; commands: " + kCommands);
  }
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    out << usage();
    return 0;
  }
  if (cmd == "--version" || cmd == "-V" || cmd == "version") {
    // The names the reports give the codecs (histeq/codec_names.hpp).
    out << "histeq " HISTEQ_VERSION "\n"
        << "codecs: JPEG " << codec::kLibjpegTurbo << ", " << codec::kLibjpegTurboYcbcr
        << (gpu::nvjpeg_built()
                ? std::string(", ") + codec::kNvjpegHardware + ", " + codec::kNvjpegHybrid + ", " +
                      codec::kNvjpegGpuHybrid + ", " + codec::kNvjpeg + ", " +
                      codec::kLibjpegTurboCoefficients + " (GPU)"
                : std::string())
        << "; 8-bit PNG " << codec::kLibdeflatePng << ", " << codec::kIsalPng << ", "
        << codec::kStbImage << "; 16-bit PNG " << codec::kLibspng << "; PGM/PPM/PNM " << codec::kPnm
        << "; BMP, TGA " << codec::kStbImage << ", " << codec::kStbImageWrite << "; GIF "
        << codec::kStbImage << "\n"
        << malloc_line() << "\n";
    return 0;
  }
  try {
    return dispatch(cmd, rest, out, err);
  } catch (const UsageError& e) {  // the library's words: name the options that change them
    const std::string message = with_hints(e.what());
    if (message == e.what()) throw;
    throw UsageError(message);
  } catch (const Error& e) {
    const std::string message = with_hints(e.what());
    if (message == e.what()) throw;
    throw Error(message);
  }
}

}  // namespace histeq::cli
