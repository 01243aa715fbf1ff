// cli_fuzz_stubs.cpp — stand-ins for the CUDA library's functions that src/cli/ calls, so that
// the command-line fuzzer builds with clang and no nvcc. Only the parsing and validation in
// cli.cpp are under test: the registry is a table of the real kernel names (no launches),
// there is never a device, and the work functions throw histeq::Error before any output could be
// written. The replay test (test_cli_fuzz_replay.cpp) runs the same corpus against the real
// library.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/pipeline.hpp"
#if __has_include("histeq/nvjpeg_codec.hpp")
#include "histeq/nvjpeg_codec.hpp"
#endif
#include "histogram/registry.hpp"
#if __has_include("histogram/details.hpp")
#include "histogram/details.hpp"
#endif
#if __has_include("bench/bench.hpp")
#include "bench/bench.hpp"
#endif
#if __has_include("bench/lesson.hpp")
#include "bench/lesson.hpp"
#endif
#if __has_include("histeq/executor.hpp")
#include "histeq/executor.hpp"
#endif
#if __has_include("cli/depth.hpp")
#include "cli/depth.hpp"
#endif

namespace histeq {
namespace kernels {

const std::vector<KernelEntry>& registry() {
  static const std::vector<KernelEntry> table = [] {
    std::vector<KernelEntry> t;
    for (const char* n :
         {"racy", "atomic", "privatized", "contiguous", "coarsened", "aggregated", "cub", "columns",
          "perthread", "tworeduce", "cooperative", "shortcounters"}) {
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

#if __has_include("histogram/details.hpp")
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

int cuda_device_count() { return 0; }

Backend resolve_backend(Backend requested, std::string* why_cpu) {
  if (requested == Backend::cuda) throw Error(std::string(kNoDeviceForCuda) + "fuzz build)");
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
bool Executor::wanted_device() const { return false; }
std::string Executor::cpu_fallback_reason() { return "fuzz build: no device"; }
void Executor::cancel() {}
BatchSummary Executor::run(const std::vector<WorkItem>&,
                           const std::function<void(const ItemReport&)>&,
                           const std::function<void()>&) {
  throw Error("fuzz build: the executor is not run");
}
#endif

#if __has_include("cli/depth.hpp")
// clahe and 16-bit items (src/cli/depth.cpp call the CUDA library): never run by the fuzzer;
// the options cli.cpp parses before them are what it explores.
namespace cli {
bool needs_item_op(const ItemOpOptions&, bool) { return true; }
std::vector<std::uint8_t> run_item(const ItemOpOptions&, const std::uint8_t*, std::size_t,
                                   const std::string&, const std::string&, ItemReport&) {
  throw Error("fuzz build: clahe and 16-bit items are not run");
}
}  // namespace cli
#endif

#if __has_include("bench/bench.hpp")
namespace bench {
int main(const std::vector<std::string>&, std::ostream&, std::ostream&) { return 2; }

// `histeq kernels --size` parses with bench::parse_size, which lives in src/bench/args.cpp with the
// CUDA timing code. This stand-in keeps its contract (bench/bench.hpp: digits with an optional
// K/M/G suffix, blanks trimmed, UsageError on anything else or on overflow past size_t/8), so
// that the fuzzer reaches the same accept/refuse paths; test_cli_fuzz_replay runs the real one.
std::size_t parse_size(std::string_view text) {
  std::size_t b = 0, e = text.size();
  while (b < e && (text[b] == ' ' || text[b] == '\t')) ++b;
  while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\t')) --e;
  const std::string_view s = text.substr(b, e - b);
  std::size_t i = 0;
  std::uint64_t v = 0, mult = 1;
  bool ok = !s.empty();
  while (ok && i < s.size() && s[i] >= '0' && s[i] <= '9') {
    const std::uint64_t d = std::uint64_t(s[i++] - '0');
    if (v > (UINT64_MAX - d) / 10)
      ok = false;
    else
      v = v * 10 + d;
  }
  ok = ok && i > 0;
  if (ok && i < s.size()) {
    const std::string_view suffix = s.substr(i);
    if (suffix == "k" || suffix == "K")
      mult = std::uint64_t(1) << 10;
    else if (suffix == "m" || suffix == "M")
      mult = std::uint64_t(1) << 20;
    else if (suffix == "g" || suffix == "G")
      mult = std::uint64_t(1) << 30;
    else
      ok = false;
  }
  if (ok && v > (SIZE_MAX >> 3) / mult) ok = false;
  if (!ok)
    throw UsageError("bad size '" + std::string(text) + "' (fuzz stand-in of bench::parse_size)");
  return std::size_t(v * mult);
}
}  // namespace bench
#endif

#if __has_include("bench/lesson.hpp")
namespace lesson {
int main(const std::vector<std::string>&, std::ostream&, std::ostream&) { return 2; }
}  // namespace lesson
#endif

#if __has_include("histeq/nvjpeg_codec.hpp")
// The GPU equalizer and nvJPEG codec that cli.cpp's JPEG -> JPEG device path uses: never
// constructed here (there is no device), so the commands fail with an Error as equalize does.
namespace gpu {
struct Equalizer::Impl {};
Equalizer::Equalizer() { throw Error("fuzz build: no GPU equalizer"); }
Equalizer::~Equalizer() = default;
StreamHandle Equalizer::stream() const { return StreamHandle{}; }
struct JpegCodec::Impl {};
JpegCodec::JpegCodec(StreamHandle, JpegCodecOptions, std::shared_ptr<JpegHandles>) {
  throw Error("fuzz build: no nvJPEG");
}
JpegCodec::~JpegCodec() = default;
Image JpegCodec::decode_to_host(const JpegInput&, std::string*) {
  throw Error("fuzz build: no nvJPEG");
}
std::vector<std::uint8_t> JpegCodec::encode(const Image&, const jpeg::EncodeOptions&) {
  throw Error("fuzz build: no nvJPEG");
}
JpegOnDevice equalize_jpeg_on_device(Equalizer&, JpegCodec&, const JpegInput&,
                                     const EqualizeOptions&, const jpeg::EncodeOptions&,
                                     EqualizeReport*) {
  throw Error("fuzz build: no nvJPEG");
}
bool nvjpeg_built() { return false; }
}  // namespace gpu
#endif

}  // namespace histeq
