// cli_fuzz_stubs.cpp — stand-ins for the CUDA library's functions that src/cli.cpp calls, so that
// the command-line fuzzer builds with clang and no nvcc. Only the parsing and validation in
// cli.cpp are under test: the registry is a table of the real kernel names (no launches),
// there is never a device, and the work functions throw histeq::Error before any output could be
// written. The replay test (test_cli_fuzz_replay.cpp) runs the same corpus against the real
// library.
#include <string>
#include <string_view>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/pipeline.hpp"
#include "registry.hpp"
#if __has_include("details.hpp")
#include "details.hpp"
#endif
#if __has_include("histeq/bench.hpp")
#include "histeq/bench.hpp"
#endif
#if __has_include("histeq/lesson.hpp")
#include "histeq/lesson.hpp"
#endif
#if __has_include("histeq/executor.hpp")
#include "histeq/executor.hpp"
#endif

namespace histeq {
namespace kernels {

const std::vector<KernelEntry>& registry() {
  static const std::vector<KernelEntry> table = [] {
    std::vector<KernelEntry> t;
    for (const char* n : {"racy", "atomic", "privatized", "contiguous", "coarsened",
                          "aggregated", "cub", "columns", "perthread", "tworeduce", "cooperative",
                          "shortcounters"}) {
      KernelEntry e{};
      e.name = n;
      e.summary = "fuzz stub";
      e.exact = std::string_view(n) != "racy";
      t.push_back(e);
    }
    return t;
  }();
  return table;
}

std::string kernel_names() {
  std::string s;
  for (const auto& e : registry()) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

const KernelEntry& find_kernel(std::string_view name) {
  for (const auto& e : registry())
    if (name == e.name) return e;
  throw UsageError("unknown kernel '" + std::string(name) + "'; known: " + kernel_names());
}

#if __has_include("details.hpp")
KernelDetails describe(const KernelEntry& e, SampleType, int, std::size_t) {
  KernelDetails d;
  d.name = e.name;
  return d;
}
std::string format_details(const std::vector<KernelDetails>& rows) {
  return std::to_string(rows.size()) + " rows\n";
}
#endif

}  // namespace kernels

bool cuda_available(std::string* why) {
  if (why) *why = "fuzz build: no CUDA";
  return false;
}

Backend resolve_backend(Backend requested, std::string* why_cpu) {
  if (requested == Backend::cuda) throw Error("--backend cuda: no usable CUDA device (fuzz build)");
  if (why_cpu) *why_cpu = "fuzz build: no CUDA";
  return Backend::cpu;
}

Image equalize(const Image&, const EqualizeOptions&, EqualizeReport*) {
  throw Error("fuzz build: equalize is not run");
}

std::vector<Histogram> image_histograms(const Image&, const EqualizeOptions&, EqualizeReport*) {
  throw Error("fuzz build: image_histograms is not run");
}

#if __has_include("histeq/executor.hpp")
// The batch executor: constructed (options validated by cli.cpp before), never run.
struct Executor::Impl {};
Executor::Executor(ExecutorOptions) : impl_(std::make_unique<Impl>()) {}
Executor::~Executor() = default;
int Executor::jobs() const { return 1; }
std::string Executor::cpu_fallback_reason() { return "fuzz build: no device"; }
BatchSummary Executor::run(const std::vector<WorkItem>&,
                           const std::function<void(const ItemReport&)>&) {
  throw Error("fuzz build: the executor is not run");
}
#endif

#if __has_include("histeq/bench.hpp")
namespace bench {
int main(const std::vector<std::string>&, std::ostream&, std::ostream&) { return 2; }
std::size_t parse_size(std::string_view) { throw UsageError("fuzz build: sizes are not parsed"); }
}  // namespace bench
#endif

#if __has_include("histeq/lesson.hpp")
namespace lesson {
int main(const std::vector<std::string>&, std::ostream&, std::ostream&) { return 2; }
}  // namespace lesson
#endif

}  // namespace histeq
