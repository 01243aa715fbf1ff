// bench.cpp — `histeq bench` (bench/bench.hpp): parse the options (bench/args.cpp), check that
// every output file can be written, run the sweep (bench/sweep.cpp), write the reports
// (bench/report.cpp); or, with --folder, run one batch (bench/folder.cpp). The commit comes from
// the header CMake generates at build time.
#include <cstdlib>
#include <ostream>

#include "bench/detail.hpp"
#include "histeq/error.hpp"
#include "histeq_build_commit.hpp"  // generated: HISTEQ_BUILD_COMMIT

namespace histeq::bench {

using namespace internal;

const char* build_commit() { return HISTEQ_BUILD_COMMIT; }

std::string run_commit() {
  if (const char* c = std::getenv("HISTEQ_COMMIT"); c && *c) return c;
  return build_commit();
}

namespace {

/// Refuses, before any long work, an output file that cannot be written.
void check_outputs(const Options& opt) {
  if (!opt.csv.empty()) check_writable(opt.csv, "CSV");
  if (!opt.json.empty()) check_writable(opt.json, "JSON");
  if (!opt.plot.empty()) check_writable(opt.plot, "plot");
}

int run(const Options& opt, std::ostream& out, std::ostream& err) {
  check_outputs(opt);
  Measured m = measure(opt, err);
  const RunInfo& info = m.info;
  write_table(out, info, m.cells);
  if (!opt.csv.empty()) {
    write_file(opt.csv, "CSV", [&](std::ostream& os) { write_csv(os, info, m.cells); });
  }
  if (!opt.json.empty()) {
    write_file(opt.json, "JSON", [&](std::ostream& os) { write_json(os, info, m.cells); });
  }
  if (!opt.plot.empty()) make_plot(opt, info, m.cells, err);

  std::size_t pass = 0, fail = 0, skip = 0;
  for (const Cell& c : m.cells) {
    pass += c.status == "PASS";
    fail += c.status == "FAIL";
    skip += c.status == "SKIP";
  }
  if (hold_timeouts() > 0) {
    err << "note: " << hold_timeouts() << " timed batches outran the stream hold; their times "
        << "include host launch gaps\n";
  }
  err << pass << " PASS, " << fail << " FAIL, " << skip << " SKIP\n";
  return (m.error || m.any_fail) ? 1 : 0;
}

}  // namespace

int main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Options opt;
  try {
    opt = parse_args(args);
  } catch (const std::exception& e) {
    err << "histeq bench: " << e.what() << " (see 'histeq bench --help')\n";
    return 2;
  }
  if (opt.help) {
    out << usage();
    return 0;
  }
  try {
    if (!opt.folder.inputs.empty()) return run_folder(opt, out, err);
    return run(opt, out, err);
  } catch (const UsageError& e) {
    err << "histeq bench: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    err << "histeq bench: error: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace histeq::bench
