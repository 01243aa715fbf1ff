// bench/lesson.hpp — `histeq lesson [NAME]`: the three histogram lessons as guided experiments.
// A lesson is an ordered list of steps (registry kernels, plus the CPU reference) run over the
// lesson's data; each step is checked against the CPU histogram and timed by the benchmark's own
// sweep (bench::measure: CUDA events, held stream, read ceiling of a streaming kernel in the same
// run), then narrated in one line: what changed, the time, the speed-up over the previous step
// and over `atomic`, PASS/FAIL, and one sentence built from this run's facts (lost counts,
// occupancy, GB/s against the read ceiling).
//
// Lessons (docs/lessons.md):
//   atomics — PMPP 4th ed. ch. 9: racy, atomic, privatized, contiguous vs interleaved
//             coarsening, aggregated; u8, 256 bins, on uniform, hot, blocky data and a photo.
//   bins    — CPU, global atomic, shared memory over bins 16/64/256 and sizes 1M/16M/64M of
//             int32 arrays, uniform vs hot.
//   subhist — the 64-bin int-array blog: per-thread sub-histograms, two kernels, cooperative,
//             short counters, with their occupancy.
// The parsing, the narration and the writers are separate functions so that they are tested
// without a GPU (tests/test_lesson.cpp).
#pragma once
#include <cstddef>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "histeq/synthetic.hpp"
#include "histeq/types.hpp"

namespace histeq::lesson {

/// One step of a lesson: a registry kernel (or bench::kCpuKernel) and what it changes.
struct Step {
  std::string kernel;
  std::string change;  ///< "what changed" relative to the step before, a few words
};

/// One lesson: its data and its steps, in order.
struct Lesson {
  std::string name;    ///< command-line name
  std::string title;   ///< one line
  std::string source;  ///< where the experiment comes from
  SampleType type = SampleType::u8;
  std::vector<int> bins;
  std::vector<std::size_t> sizes;  ///< default sizes (--size replaces them)
  std::vector<Distribution> dists;
  bool photo = false;  ///< also a real photo (--image, default a sample)
  std::vector<Step> steps;
};

/// atomics, bins, subhist.
const std::vector<Lesson>& lessons();
/// The lesson named `name`; throws UsageError naming the valid ones.
const Lesson& find_lesson(const std::string& name);
/// "Lessons:" and one line per lesson (name, title, the command to run it).
std::string list_lessons();

/// What the command line selects.
struct Options {
  std::string name;             ///< "" = list the lessons
  std::size_t size = 0;         ///< --size; 0 = the lesson's sizes
  std::string image;            ///< --image FILE (atomics only); "" = the default photo
  std::string plot, csv, json;  ///< output files; "" = none
  int reps = 10;                ///< timed repeats per step (bench --reps)
  int warmup = 2;
  bool help = false;
  std::string command_line;  ///< "histeq lesson ARGS..."
};

/// Parses `histeq lesson` arguments (without "lesson"). Throws UsageError naming the bad option
/// or value. --help sets help and parses nothing else.
Options parse_args(const std::vector<std::string>& args);
/// The --help text.
std::string usage();

/// The benchmark sweep that runs `lesson` with `opt` (kernels = the steps' kernels and "cpu";
/// photo: the file to add, "" for none).
bench::Options bench_options(const Lesson& lesson, const Options& opt, const std::string& photo);

/// One narrated line: one step on one case.
struct Row {
  std::string panel;       ///< data distribution, or "photo:<file>"
  std::string case_label;  ///< "u8, 256 bins, 64M"
  SampleType type = SampleType::u8;
  int bins = 0;
  std::size_t n = 0;
  int step = 0;  ///< 1-based position in the lesson
  std::string kernel, change;
  std::string status;  ///< PASS (equal to the CPU histogram), FAIL, SKIP
  std::string note;    ///< why SKIP/FAIL
  double median_us = -1;
  double speedup_prev = -1;    ///< median of the previous timed step / this; < 0: none
  double speedup_atomic = -1;  ///< median of atomic (same case) / this; < 0: none
  double gbps = -1, pct_read_bw = -1;
  double ceiling_speedup = -1;  ///< the speed-up over atomic that the read ceiling would give
  std::uint64_t lost = 0;
  double occupancy = -1;  ///< theoretical occupancy 0..1 of the counting kernel; < 0: unknown
  int grid = 0, block = 0;
  std::string why;  ///< one sentence from this run's facts
};

/// The lesson's rows from a bench run of it: one per (case, step) in case order then step order,
/// steps without a cell left out (no GPU: only the CPU step). occupancy: registry name → 0..1
/// (may be empty). Racy: status PASS only when it lost nothing.
std::vector<Row> narrate(const Lesson& lesson, const bench::RunInfo& info,
                         const std::vector<bench::Cell>& cells,
                         const std::map<std::string, double>& occupancy);

/// Text: a header (lesson, device, read ceiling, commit), then per case a title line and one
/// aligned line per step.
void write_text(std::ostream& os, const Lesson& lesson, const bench::RunInfo& info,
                const std::vector<Row>& rows);
/// CSV: a header line, then one line per row; run fields (lesson, device, commit, read ceiling,
/// command) repeated on each line; unset numbers are empty fields.
void write_csv(std::ostream& os, const Lesson& lesson, const bench::RunInfo& info,
               const std::vector<Row>& rows);
/// JSON object {"lesson", "title", "device", "commit", "command", "timestamp", "read_bw_gbps",
/// "gpu_skipped", "rows": [...]}; unset numbers are null.
void write_json(std::ostream& os, const Lesson& lesson, const bench::RunInfo& info,
                const std::vector<Row>& rows);

/// Runs `histeq lesson ARGS...`. Returns 0 when every exact step PASSed (racy may lose counts:
/// that is its lesson) or the GPU was absent, 1 on a FAIL or runtime error, 2 on a usage error.
int main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace histeq::lesson
