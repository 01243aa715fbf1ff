// bench/bench.hpp — `histeq bench`: every histogram kernel of the registry (plus the CPU
// reference) over element types × bins × sizes × distributions (or decoded images) × block
// sizes × L2 state; each cell checked against the CPU reference, then timed with CUDA events.
// `histeq bench --folder IN... -o OUTDIR` instead runs one batch of equalize through the
// executor and says what it did (bench/folder.cpp): the router's start rule measured end to end.
//
// The option parsing, the skip rules, the speed-up bookkeeping and the table/CSV/JSON writers are
// separate functions here so that they are tested without a GPU (tests/test_bench.cpp). Files:
// bench/args.cpp (options), bench/timing.cpp, bench/sweep.cpp (measure), bench/report.cpp,
// bench.cpp (main); src/bench/detail.hpp holds what they share.
// Method: warm-up launches, then `reps` back-to-back launches each bracketed by a pair of CUDA
// events (median and min reported); cold L2 = a buffer twice the L2 size is written with
// cudaMemsetAsync before each timed launch; "% of read bandwidth" is relative to a streaming
// 16-byte-load kernel (kernels/support/stream_read.hpp) timed in the same run.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "histeq/executor.hpp"
#include "histeq/synthetic.hpp"
#include "histeq/tuning.hpp"
#include "histeq/types.hpp"

namespace histeq::bench {

/// Runs `histeq bench ARGS...` (ARGS without the program name and the word "bench").
/// The table goes to `out`; progress, notes and errors to `err` (each error printed once).
/// Returns 0 when every cell PASSed or was skipped, 1 on any FAIL or runtime error (a CUDA
/// failure; a --csv/--json/--plot file that cannot be written, found before the sweep runs),
/// 2 on a usage error; with --folder, 0 when no file failed, else 1 (2 on a usage error).
/// Throws nothing.
int main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// The name of the CPU reference (histeq::cpu::histogram) on the kernel axis.
inline constexpr const char* kCpuKernel = "cpu";
/// The --kernels value for the default choice (kernels::choose_auto); its rows say which kernel
/// ran.
inline constexpr const char* kAutoKernel = "auto";

/// The int-array lesson's array: 36·192·10240 int32 values i, binned by i % 64.
inline constexpr std::size_t kLessonSize = std::size_t(36) * 192 * 10240;
inline constexpr int kLessonBins = 64;
inline constexpr std::uint64_t kLessonPerBin = kLessonSize / kLessonBins;  // 1,105,920

enum class L2 : std::uint8_t { hot, cold };
const char* to_string(L2 l);

/// How the timed launches are enqueued. gpu (default): a blocking kernel holds the stream while
/// the host enqueues every rep (kernels/support/stream_hold.hpp, nvbench's method), so each event
/// pair measures GPU execution only. enqueue: launches enqueued back to back as the host issues
/// them; where the host launches more slowly than the GPU runs, this includes the host's launch
/// gaps.
enum class Timing : std::uint8_t { gpu, enqueue };
const char* to_string(Timing t);

/// jpeg.progressive's value for a ProgressiveJpeg: "libjpeg", "hybrid", "gpu".
inline const char* progressive_name(ProgressiveJpeg p) {
  return p == ProgressiveJpeg::libjpeg  ? "libjpeg"
         : p == ProgressiveJpeg::hybrid ? "hybrid"
                                        : "gpu";
}

/// --tune KEY=VALUE (bench/tune.cpp): the kernels' run-time choices, the CPU backend's SIMD
/// switch and, for --folder, the executor's router, for the whole run; the defaults are the
/// policy.
struct Tune {
  Tuning gpu;
  bool cpu_simd = true;
  /// router.device_start_s (--folder only): ExecutorOptions::device_start_cpu_s, the seconds of
  /// the CPU workers from which the JPEG device route starts; unset: the policy's
  /// (kDeviceStartCpuS).
  std::optional<double> device_start_s;
  /// router.encoder_start_s (--folder only): ExecutorOptions::encoder_start_cpu_s, the seconds of
  /// the CPU workers from which the route's encoder alone starts; unset: the policy's
  /// (kEncoderStartCpuS).
  std::optional<double> encoder_start_s;
  /// jpeg.encoder_slots (--folder only): ExecutorOptions::encoder_slots; unset: the policy's
  /// (kJpegEncoderSlotsPerDevice).
  std::optional<int> encoder_slots;
  /// jpeg.encoder_states (--folder only): ExecutorOptions::encoder_states; unset: the policy's.
  std::optional<int> encoder_states;
  /// jpeg.progressive (--folder only): ExecutorOptions::progressive, how progressive JPEGs on
  /// the device route are decoded (libjpeg-turbo's coefficients, nvJPEG's hybrid decoder, or
  /// nvJPEG's GPU Huffman decoding).
  ProgressiveJpeg progressive = ExecutorOptions{}.progressive;
  /// executor.report_window (--folder only): ExecutorOptions::report_window, the items read and
  /// not yet reported; 0: the policy's.
  std::size_t report_window = 0;
  /// jpeg.hybrid_decoders (--folder only): ExecutorOptions::hybrid_decoders; 0: the policy's.
  int hybrid_decoders = 0;
  /// jpeg.gpu_huffman_decoders (--folder only): ExecutorOptions::gpu_huffman_decoders; 0: the
  /// policy's (all of them).
  int gpu_huffman_decoders = 0;
  /// jpeg.early_hybrid (--folder only): ExecutorOptions::early_hybrid.
  bool early_hybrid = ExecutorOptions{}.early_hybrid;
  /// router.measure (--folder only): ExecutorOptions::router_measures.
  bool router_measures = ExecutorOptions{}.router_measures;
  /// executor.prefault_mb (--folder only): MiB of heap faulted in (written, then freed back to
  /// the arena the workers allocate from) before the run starts, so that the workers' buffers
  /// need no fresh pages while the device route starts; 0: none (the command line's way).
  std::size_t prefault_mb = 0;
  std::vector<std::string> given;  ///< each KEY=VALUE applied, in order (for the records)
};

/// Applies one KEY=VALUE to t. Throws UsageError for text without '=', an unknown key (listing
/// the keys) or a bad value (naming the valid ones).
void apply_tune(Tune& t, std::string_view key_value);
/// The --tune keys for --help: each with its values, what it chooses and the policy's default.
std::string tune_help();

/// --folder IN... -o OUTDIR (bench/folder.cpp): one executor pass of equalize over the inputs,
/// planned as `histeq equalize IN... -o OUTDIR` plans them, with the command line's defaults
/// but for these.
struct FolderRun {
  std::vector<std::string> inputs;           ///< files and folders; empty: not a folder run
  std::string output;                        ///< -o OUTDIR
  int jobs = 0;                              ///< --jobs N (0: the usable CPUs)
  JpegRoute decoder = JpegRoute::automatic;  ///< --decoder auto|cpu|gpu
  Backend backend = Backend::automatic;      ///< --backend auto|cpu|cuda
};

/// Everything the command line selects. Defaults are the default sweep.
struct Options {
  std::vector<std::string> kernels;  ///< registry names and/or "cpu", in registry order
  std::vector<SampleType> types{SampleType::u8, SampleType::i32};
  std::vector<int> bins{16, 64, 256};
  std::vector<std::size_t> sizes{std::size_t(1) << 20, std::size_t(16) << 20,
                                 std::size_t(64) << 20};
  std::vector<Distribution> dists;  ///< default: all_distributions()
  bool dists_given = false;         ///< --dist was on the command line
  std::size_t run_length = 64;      ///< blocky run length
  std::vector<int> blocks{0};       ///< block sizes; 0 = the kernel's tuned default
  int reps = 20;
  int warmup = 3;
  std::uint64_t seed = 1;
  std::vector<std::string> images;  ///< files or folders (--images PATH...)
  std::vector<L2> l2{L2::hot};
  Timing timing = Timing::gpu;  ///< --timing
  std::string csv, json, plot;  ///< output files; "" = none
  bool lesson = false;          ///< --case lesson
  /// --equalize: time the whole 8-bit equalization (histogram → CDF → LUT → apply) of each u8
  /// case already in device memory, instead of the histogram alone: rows "equalize:fused" (one
  /// cooperative launch, gpu::Equalizer with kernel auto), "equalize:<kernel>" (three stages
  /// with that histogram kernel, for columns and cub) and "equalize:cpu" (the CPU backend);
  /// each checked byte for byte against the CPU output. 256 bins only.
  bool equalize = false;
  /// --clahe: time CLAHE (clip 2, 8x8 tiles, OpenCV 4.6's) of each u8 case in device memory,
  /// laid out as a floor(sqrt(n)) × n/floor(sqrt(n)) gray image (the remainder left out): rows
  /// "clahe:gpu" (gpu::Clahe: fused tile histograms + LUTs, then the interpolated apply) and
  /// "clahe:cpu", the GPU output checked byte for byte against the CPU's; and 16-bit rows
  /// "clahe16:gpu" (16-bit CLAHE) and "hist16:gpu" (65536-bin histogram), of u16 samples made
  /// from the case's bytes, also checked (their gbps counts 2 bytes per sample). 256 bins only
  /// for the u8 rows.
  bool clahe = false;
  Tune tune;         ///< --tune
  FolderRun folder;  ///< --folder: no sweep, one batch through the executor
  bool help = false;
  std::string command_line;  ///< "histeq bench ARGS..." as given (for the records)
};

/// Parses the arguments. Throws UsageError naming the option, the bad value and the valid
/// choices. `--help` sets help and parses nothing else.
/// Lists are comma-separated and options may repeat; singular and plural spellings are aliases
/// (--kernel/--kernels, --type/--types, --bin/--bins, --size/--sizes, --dist/--dists,
/// --block/--blocks, --image/--images). --images takes every following argument up to the next
/// one that starts with "--", --folder every following one up to the next that starts with "-".
/// --folder refuses the sweep's options and the --tune keys of the kernels (cpu.simd and
/// router.* apply to it); -o, --jobs, --decoder, --backend and the router.* keys need --folder.
Options parse_args(const std::vector<std::string>& args);

/// The --help text.
std::string usage();

/// "1M" → 1048576. Suffixes K, M, G (powers of 1024, case-insensitive, optional trailing "i"/"iB"
/// not accepted: just K/M/G); plain digits are elements. Throws UsageError on anything else or
/// on overflow.
std::size_t parse_size(std::string_view s);
/// 1048576 → "1M", 1536 → "1.5K", 70778880 → "67.5M", 1000 → "1000".
std::string format_size(std::size_t n);
/// Splits on commas, dropping empty items and surrounding blanks.
std::vector<std::string> split_list(std::string_view s);

/// One row of the result table.
struct Cell {
  std::string kernel;
  SampleType type = SampleType::u8;
  int bins = 256;
  std::size_t n = 0;                   ///< samples
  std::string dist;                    ///< distribution name, or "image:<file name>"
  int block = 0;                       ///< requested block size (0 = default)
  std::string l2 = "hot";              ///< "hot", "cold", or "-" (CPU rows)
  std::string status;                  ///< "PASS", "FAIL" or "SKIP"
  std::string reason;                  ///< why SKIP/FAIL; "" otherwise
  double median_us = -1, min_us = -1;  ///< < 0: not timed
  double gbps = -1;                    ///< input bytes / median, 1e9 B/s
  double gelems = -1;                  ///< samples / median, 1e9 /s
  double speedup_atomic = -1;          ///< median(atomic) / median(this), same cell; < 0: none
  double speedup_cub = -1;             ///< median(cub) / median(this), same cell; < 0: none
  double pct_read_bw = -1;             ///< gbps / streaming read GB/s × 100; < 0: none
  std::uint64_t lost = 0;  ///< non-exact kernels: counts lost to races (exact sum − sum)
  int launch_block = 0, launch_grid = 0;  ///< from entry.shape; 0 = unknown
  std::size_t launch_smem = 0;
  int reps = 0;
};

/// What describes the whole run (repeated in each CSV line, once in the JSON).
struct RunInfo {
  std::string device;  ///< GPU name, or "CPU (N threads)"
  std::string commit;  ///< run_commit(): the commit histeq was built from
  std::string command_line;
  std::string timestamp;     ///< ISO 8601, UTC
  double read_bw_gbps = -1;  ///< streaming read kernel, same run; < 0 without a GPU
  std::string timing =
      "gpu";  ///< to_string(Options::timing); "cpu" when no cell was timed on a GPU
  double launch_floor_us = -1;  ///< median µs of an empty kernel between two events, same run
  std::string gpu_skipped;      ///< why the GPU kernels did not run; "" when they did
  std::string tuning;           ///< the --tune items, space-separated; "" for the policy
};

/// The commit histeq was built from, embedded at build time (a header generated by
/// cmake/HisteqCommit.cmake on every build): `git rev-parse --short HEAD` of histeq's source tree,
/// with "-dirty" when it had uncommitted changes; else $HISTEQ_COMMIT as set when CMake ran;
/// else "unknown". Never the repository of the current folder.
const char* build_commit();
/// The commit a run records: $HISTEQ_COMMIT when set at run time (scripts that name the tree a
/// binary came from), else build_commit().
std::string run_commit();

/// What a sweep measured, before any writer runs.
struct Measured {
  RunInfo info;
  std::vector<Cell> cells;  ///< compute_derived applied
  bool error = false;       ///< a runtime error ended the sweep early (printed to `err`)
  bool any_fail = false;    ///< a cell FAILed
};

/// Runs the sweep `opt` selects (what `histeq bench` times and `histeq lesson` narrates):
/// device, read bandwidth and launch floor first (progress and notes to `err`), then every case.
/// Without a GPU only the CPU reference runs (info.gpu_skipped says why). Runtime errors are
/// printed to `err` and set `error`; throws UsageError (bad image path, unknown kernel).
Measured measure(const Options& opt, std::ostream& err);

/// Why a (kernel, type, bins, size) cell is skipped, or "" when it runs.
/// unsupported: the entry's reason for (type, bins), or nullptr. needed_bytes: device memory the
/// cell needs beyond what is already allocated; free_bytes: what cudaMemGetInfo reports free.
std::string skip_reason(const char* unsupported, std::size_t needed_bytes, std::size_t free_bytes);

/// Fills speedup_atomic / speedup_cub / pct_read_bw of every timed cell: the reference is the
/// PASS row of kernel "atomic" (or "cub") with the same type, bins, n, dist, block and l2 (or,
/// failing that, its block-0 row). read_bw_gbps < 0 leaves pct_read_bw unset; CPU rows get none.
void compute_derived(std::vector<Cell>& cells, double read_bw_gbps);

/// Readable aligned table (one line per cell) with a header naming device and read bandwidth.
void write_table(std::ostream& os, const RunInfo& info, const std::vector<Cell>& cells);
/// CSV: one header line, then one line per cell; run fields repeated in each line; RFC 4180
/// quoting; unset numbers are empty fields.
void write_csv(std::ostream& os, const RunInfo& info, const std::vector<Cell>& cells);
/// JSON object {"device", "commit", "command", "timestamp", "read_bw_gbps", "timing",
/// "launch_floor_us", "gpu_skipped", "tuning", "cells": [ {...one object per cell...} ]}, written
/// with nlohmann::json; unset numbers are null. Text that is not valid UTF-8 (a file name with byte
/// 0xE9, say) is written with each invalid byte replaced by U+FFFD (nlohmann's
/// error_handler_t::replace), so the output is always valid JSON.
void write_json(std::ostream& os, const RunInfo& info, const std::vector<Cell>& cells);

}  // namespace histeq::bench
