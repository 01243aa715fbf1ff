// cli/options.hpp — what the commands of the command line share: the cxxopts wrapper that names
// the command and its valid options in every parse error (Command), the option groups several
// commands take (kernel/backend/mode/max-pixels, batch, depth) and their validation, the file
// name helpers, and the per-file operation built from the options (cli/depth.hpp).
// Room cli (docs/architecture.md): not installed.
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <cxxopts.hpp>

#include "cli/depth.hpp"
#include "histeq/clahe.hpp"
#include "histeq/executor.hpp"
#include "histeq/match.hpp"
#include "histeq/pipeline.hpp"
#include "histogram/registry.hpp"

namespace histeq::cli {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

/// The output formats --format takes (parse_format), for messages.
inline constexpr const char* kOutputFormats = "png, jpg, bmp, tga, pgm, ppm, pnm";

/// The commands, for "unknown command" messages.
inline constexpr const char* kCommands =
    "equalize, clahe, match, histogram, kernels, bench, lesson";
/// The same, one name each, for "did you mean".
inline const std::vector<std::string> kCommandNames{"equalize", "clahe", "match", "histogram",
                                                    "kernels",  "bench", "lesson"};

double ms_since(Clock::time_point t0);

/// v with `prec` decimals ("null" when not finite), for the text reports.
std::string num(double v, int prec = 3);

/// A single file's --timing table: "stage ms", then a row per (stage, milliseconds).
void print_stage_table(std::ostream& o, const std::vector<std::pair<const char*, double>>& rows);

/// One command's options plus the list of their names, for "valid options: ..." messages.
struct Command {
  std::string name;
  cxxopts::Options options;
  std::vector<std::string> names;

  Command(const std::string& cmd, const std::string& description);

  /// spec as cxxopts: "o,output" or "json".
  template <class V>
  void add(const std::string& spec, const std::string& help, V value,
           const std::string& arg_help = "") {
    options.add_options()(spec, help, value, arg_help);
    add_name(spec);
  }
  void add_flag(const std::string& spec, const std::string& help);
  std::string valid() const;

  /// Parses args (after the command word). Extra positional arguments and cxxopts errors become
  /// UsageError naming the command, the option and what it takes.
  cxxopts::ParseResult parse(const std::vector<std::string>& args);

 private:
  void add_name(const std::string& spec);
  std::string value_help(const std::string& option) const;
  /// The message for an option given without its value (cxxopts' missing_argument).
  std::string missing_value(const std::string& cxxopts_message) const;
};

/// An input as the command line named it. cxxopts splits the value of a std::vector<std::string>
/// option at commas, and a file name may hold one ("IMG_1,2.jpg"): the input list is a vector of
/// this type instead, which parse_value below takes whole, one argument one input.
struct InputArg {
  std::string path;
};
/// cxxopts' parser of the input list (found by argument-dependent lookup, and preferred to its
/// template that splits at commas): the argument as it is.
inline void parse_value(const std::string& text, std::vector<InputArg>& inputs) {
  inputs.push_back(InputArg{text});
}
/// The positional "input" option of the image commands: images or folders, '-' standard input.
inline void add_inputs(Command& c) {
  c.options.add_options()("input", "input images or folders ('-': standard input)",
                          cxxopts::value<std::vector<InputArg>>());
}
/// The inputs of a parsed command line, each argument whole (add_inputs).
inline std::vector<std::string> inputs_of(const cxxopts::ParseResult& r) {
  std::vector<std::string> v;
  for (const InputArg& a : r["input"].as<std::vector<InputArg>>()) v.push_back(a.path);
  return v;
}

// ---- shared option groups ----

/// --kernel, --backend, --mode (its help per command: what `kind` does to a colour image),
/// --max-pixels; kernel_help replaces --kernel's help (clahe takes auto only).
void add_kernel_backend(Command& c, OpKind kind, const std::string& kernel_help = std::string());
/// --depth 8|16; writes: the command writes images (equalize, clahe), else it counts (histogram).
void add_depth(Command& c, bool writes);
/// --depth: 0 (not given), 8 or 16 (UsageError for others).
int read_depth(const cxxopts::ParseResult& r);
/// The option a value is read from: `alias` (an earlier name, e.g. "clip") when the command
/// line gave it, else `option` (its current name, e.g. "clip-limit", which has the default).
/// Both given: UsageError.
const char* alias_or_option(const cxxopts::ParseResult& r, const char* alias, const char* option);

/// --tile-grid-size (--tiles, the option given: `option`, without dashes) WxH: W columns by H
/// rows, each 1..kMaxClaheTiles; one number N is NxN (as Python's tile_grid_size=N).
void parse_tiles(const std::string& s, ClaheOptions& o, const std::string& option);

/// The options every image command takes: kernel, backend, mode, max-pixels.
struct Common {
  EqualizeOptions opt;
  std::uint64_t max_pixels = kDefaultMaxPixels;
  const kernels::KernelEntry* entry = nullptr;  // null for "auto"
  /// --mask FILE as given ("" without a mask), for the reports; the mask is in opt.region.
  std::string mask_name;
};

/// Validates kernel/backend/mode/max-pixels (all UsageError) before any work is done.
Common read_common(const cxxopts::ParseResult& r);
/// Refuses --kernel NAME with --backend cpu: the CPU counts with its own loop, never a GPU
/// kernel, so the option would do nothing.
void refuse_kernel_on_cpu(const Common& c);
/// Resolves --backend; says once on `err` when auto falls back to the CPU. Throws Error when
/// cuda was asked for and no device is usable.
void settle_backend(Common& c, std::ostream& err);
void warn_inexact(const Common& c, std::ostream& err);
void report_lost(const Common& c, const EqualizeReport& rep, std::uint64_t total,
                 std::ostream& err);

// ---- the counted region (--mask, --roi) and matching's reference (--reference) ----

/// --mask FILE and --roi X,Y,W,H (equalize, clahe, histogram); writes: the command writes images;
/// tiles: CLAHE's wording (tile histograms).
void add_region_options(Command& c, bool writes, bool tiles = false);
/// --roi X,Y,W,H: four whole numbers, the rectangle's left, top, width and height (W, H >= 1).
Roi parse_roi(const std::string& s);
/// --mask and --roi into cm.opt.region (the mask decoded once: a gray 8- or 16-bit image,
/// nonzero counted; a mask that cannot be read, has colour or counts no pixel is a UsageError
/// naming it). Whether the region fits each image is checked per image (Region::check).
void read_region(const cxxopts::ParseResult& r, Common& cm);
/// "mask 'm.png'", "roi 1,2,3,4", both, or "" (every pixel counted): for the report lines.
std::string region_summary(const Common& cm);
/// --reference FILE decoded once (8 or 16 bits, as the file is) into the reference every item is
/// matched to; a file that cannot be read is a UsageError naming it.
std::shared_ptr<const MatchReference> read_reference(const std::string& path,
                                                     std::uint64_t max_pixels);

// ---- batch options and file names ----

void add_batch_options(Command& c, bool equalize);
/// --png-level, checked (0..9).
int read_png_level(const cxxopts::ParseResult& r);
/// --quality, checked (1..100).
int read_quality(const cxxopts::ParseResult& r);
/// Refuses --quality / --subsampling given for an output that is not JPEG (ext: ".png", ...;
/// empty: each input's own format, checked per file by the caller).
void refuse_jpeg_options(const cxxopts::ParseResult& r, const std::string& ext);
/// Refuses --png-level given for an output that is not PNG.
void refuse_png_options(const cxxopts::ParseResult& r, const std::string& ext);
/// Refuses the options that only a batch uses (--jobs, --max-inflight-mb, --devices) on a run
/// of one input file, where they would do nothing.
void refuse_batch_only_options(const cxxopts::ParseResult& r);
/// A stream that discards what is written to it (the notes under --quiet).
std::ostream& discarded_stream();

/// `s` with ASCII letters in lower case (extensions, format names, typed option names).
std::string lower(std::string s);
std::string lower_ext(const fs::path& p);
bool readable_ext(const std::string& e);
bool writable_ext(const std::string& e);
/// --format NAME → ".ext" (UsageError for others).
std::string parse_format(const std::string& f);
std::vector<int> parse_devices(const std::string& s);
/// The extension of a path, lower case, with its dot ("" when none).
std::string fs_extension_lower(const std::string& path);
bool jpeg_ext(const std::string& e);
/// .pgm, .ppm, .pnm (any case): binary PGM/PPM outputs, 8 or 16 bits.
bool pnm_ext(std::string e);

/// Standard input, whole.
std::vector<std::uint8_t> read_stdin();
bool stderr_is_tty(std::ostream& err);

/// A library error message with the command line's own words added: the option that sets the
/// pixel limit it names (with_option_hints), or that asked for what failed (--backend cuda or
/// --decoder gpu without a usable device, --devices naming a device that is not there), or
/// `--backend cpu` where the GPU ran out of memory. The library speaks of itself only
/// (histeq/error.hpp: the phrases recognized here); other messages come back as they are.
std::string with_hints(const std::string& message);

// ---- the per-file operation (clahe, 16-bit) ----

/// The per-file operation of a command (cli/depth.hpp) from the parsed options: its kind, the
/// options as `cm` has them (the region included), the depth, the encoder's options, CLAHE's
/// parameters, matching's reference (--reference, decoded here).
ItemOpOptions item_op_options(const cxxopts::ParseResult& r, const Common& cm, OpKind kind);
std::string clahe_summary(const ClaheOptions& o);

}  // namespace histeq::cli
