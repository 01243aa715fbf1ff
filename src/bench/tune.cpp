// bench/tune.cpp — `histeq bench --tune KEY=VALUE`: the only place where the kernels' run-time
// choices (histeq/tuning.hpp), the CPU backend's SIMD switch and the executor's router rule
// (--folder) are read from text. Each key names one field; its help line gives the values and the
// policy's default (kernels/clahe/policy.hpp, histeq/executor.hpp), so that a variant the policy
// rejected can be measured again beside the default.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/detail.hpp"
#include "clahe/policy.hpp"
#include "histeq/error.hpp"
#include "histogram/policy.hpp"
#include "support/pdl_edges.hpp"

namespace histeq::bench {
namespace {

using kernels::ClahePolicy;

/// One --tune key: its name, the values it takes and what they mean (help), and its setter
/// (throws UsageError naming the valid values for a bad one).
struct Key {
  const char* name;
  std::string help;
  std::function<void(Tune&, const std::string&)> set;
};

[[noreturn]] void bad_value(const std::string& key, const std::string& value,
                            const std::string& valid) {
  throw UsageError("bad value '" + value + "' for --tune " + key + "; valid: " + valid);
}

/// An integer in [lo, hi].
long long number(const std::string& key, const std::string& value, long long lo, long long hi) {
  const bool digits =
      !value.empty() && value.size() <= 12 &&
      value.find_first_not_of("0123456789", value[0] == '-' ? 1 : 0) == std::string::npos &&
      value != "-";
  errno = 0;
  const long long v = digits ? std::strtoll(value.c_str(), nullptr, 10) : 0;
  if (!digits || errno != 0 || v < lo || v > hi) {
    bad_value(key, value, "an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v;
}

/// A finite number >= 0 (decimal, as strtod reads it; -0 is 0, and a value below the normal
/// doubles, which strtod reads with ERANGE, is taken as it reads it).
double seconds(const std::string& key, const std::string& value) {
  const bool plain = !value.empty() && value.size() <= 24 &&
                     value.find_first_not_of("0123456789.eE+-") == std::string::npos;
  errno = 0;
  char* end = nullptr;
  const double v = plain ? std::strtod(value.c_str(), &end) : -1;
  // Underflow (a positive value below the normal doubles); overflow gives HUGE_VAL, and a
  // negative value that underflows (-1e-400 reads as -0) is below 0.
  const bool underflow = errno == ERANGE && std::fabs(v) <= 1.0 && !std::signbit(v);
  if (!plain || (errno != 0 && !underflow) || end != value.c_str() + value.size() ||
      !std::isfinite(v) || v < 0)
    bad_value(key, value, "a number of seconds >= 0 (e.g. 0, 0.5, 2)");
  return v + 0.0;  // -0 + 0 is +0
}

bool flag(const std::string& key, const std::string& value) {
  if (value == "1" || value == "on") return true;
  if (value == "0" || value == "off") return false;
  bad_value(key, value, "0, 1 (or off, on)");
}

Choice choice(const std::string& key, const std::string& value) {
  if (value == "auto") return Choice::automatic;
  if (value == "on" || value == "1") return Choice::on;
  if (value == "off" || value == "0") return Choice::off;
  bad_value(key, value, "auto, on, off");
}

/// An int field set from an integer in [lo, hi].
template <int ClaheTuning::*Field>
Key clahe_number(const char* name, long long lo, long long hi, std::string help) {
  return {name, std::move(help), [name, lo, hi](Tune& t, const std::string& v) {
            t.gpu.clahe.*Field = int(number(name, v, lo, hi));
          }};
}

/// The region.* keys (RegionTuning: masked equalization and the region histogram).
void add_region_keys(std::vector<Key>& k) {
  k.push_back({"region.equalize",
               "auto|fused|pair|stages  masked 8-bit equalization in device memory (auto: fused "
               "where it serves the call, else pair)",
               [](Tune& t, const std::string& v) {
                 using E = RegionTuning::Equalize;
                 if (v == "auto")
                   t.gpu.region.equalize = E::automatic;
                 else if (v == "fused")
                   t.gpu.region.equalize = E::fused;
                 else if (v == "pair")
                   t.gpu.region.equalize = E::pair;
                 else if (v == "stages")
                   t.gpu.region.equalize = E::stages;
                 else
                   bad_value("region.equalize", v, "auto, fused, pair, stages");
               }});
  k.push_back({"region.full_vectors",
               "0|1  region histograms: mask vectors of 16 nonzero bytes counted as plain samples "
               "(default 0)",
               [](Tune& t, const std::string& v) {
                 t.gpu.region.full_vectors = flag("region.full_vectors", v);
               }});
  k.push_back({"region.blocks_per_sm",
               "0|3|4  region histogram, whole-rows kernels: blocks per SM (0: the policy's, " +
                   std::to_string(kernels::RegionPolicy::kBlocksPerSm) + ")",
               [](Tune& t, const std::string& v) {
                 const long long n = number("region.blocks_per_sm", v, 0, 4);
                 if (n != 0 && n != 3 && n != 4) bad_value("region.blocks_per_sm", v, "0, 3, 4");
                 t.gpu.region.blocks_per_sm = int(n);
               }});
  k.push_back({"region.fused_shape",
               "auto|1024x2|1024x1|768x2  masked one-launch equalizer: threads per block x "
               "vectors kept per thread (auto: 1024x2)",
               [](Tune& t, const std::string& v) {
                 using S = RegionTuning::FusedShape;
                 if (v == "auto" || v == "1024x2")
                   t.gpu.region.fused_shape = v == "auto" ? S::automatic : S::t1024_v2;
                 else if (v == "1024x1")
                   t.gpu.region.fused_shape = S::t1024_v1;
                 else if (v == "768x2")
                   t.gpu.region.fused_shape = S::t768_v2;
                 else
                   bad_value("region.fused_shape", v, "auto, 1024x2, 1024x1, 768x2");
               }});
}

/// The executor's keys (--folder runs only): the router's start rule and the progressive
/// JPEGs' decoder on the device route.
void add_executor_keys(std::vector<Key>& k) {
  char policy_s[32];
  std::snprintf(policy_s, sizeof policy_s, "%g", kDeviceStartCpuS);
  k.push_back({"router.device_start_s",
               "SECONDS  --folder only: the JPEG device route starts (backend auto, decoder auto) "
               "when the CPU workers alone would need more than SECONDS for the run's JPEGs (0: "
               "whenever a device can run; default " +
                   std::string(policy_s) + ")",
               [](Tune& t, const std::string& v) {
                 t.device_start_s = seconds("router.device_start_s", v);
               }});
  std::snprintf(policy_s, sizeof policy_s, "%g", kEncoderStartCpuS);
  k.push_back({"router.encoder_start_s",
               "SECONDS  --folder only: below router.device_start_s, the JPEG device route's "
               "encoder alone starts (no hardware decoder: the CPU workers decode, the GPU "
               "encodes) when the CPU workers alone would need more than SECONDS for the run's "
               "JPEGs (default " +
                   std::string(policy_s) + ")",
               [](Tune& t, const std::string& v) {
                 t.encoder_start_s = seconds("router.encoder_start_s", v);
               }});
  k.push_back({"router.measure",
               "0|1  --folder only: 1 (the policy), a run whose JPEGs would need more than "
               "router.encoder_start_s at the router's assumed rate of a CPU worker, but not at "
               "the fastest it takes one to be, waits for the workers' rate on their first files "
               "before it starts the route's encoder alone; 0: the assumed rate decides at the "
               "start",
               [](Tune& t, const std::string& v) {
                 t.router_measures = number("router.measure", v, 0, 1) != 0;
               }});
  k.push_back({"jpeg.encoder_slots",
               "N  --folder only: encoder slots per GPU of a route started with its encoder "
               "alone, which encode what the CPU workers decoded from the moment the context and "
               "the handle exist (0: none; default " +
                   std::to_string(kJpegEncoderSlotsPerDevice) + ")",
               [](Tune& t, const std::string& v) {
                 t.encoder_slots = int(number("jpeg.encoder_slots", v, 0, 16));
               }});
  k.push_back({"jpeg.encoder_states",
               "N  --folder only: encoder states per slot of the JPEG device route, the images "
               "of a batch encoded N at a time (0: the policy's, 4)",
               [](Tune& t, const std::string& v) {
                 t.encoder_states = int(number("jpeg.encoder_states", v, 0, 64));
               }});
  k.push_back({"jpeg.progressive",
               std::string("libjpeg|hybrid|gpu  --folder only: on the JPEG device route, a CPU "
                           "worker reads a progressive JPEG's coefficients with libjpeg-turbo, "
                           "decodes it with nvJPEG's hybrid decoder into planes on the device, "
                           "or queues it for nvJPEG's GPU Huffman decoding (default: ") +
                   progressive_name(ExecutorOptions{}.progressive) + ")",
               [](Tune& t, const std::string& v) {
                 for (const ProgressiveJpeg p :
                      {ProgressiveJpeg::libjpeg, ProgressiveJpeg::hybrid, ProgressiveJpeg::gpu})
                   if (v == progressive_name(p)) {
                     t.progressive = p;
                     return;
                   }
                 bad_value("jpeg.progressive", v, "libjpeg, hybrid, gpu");
               }});
  k.push_back({"executor.report_window",
               "N  --folder only: at most N items read and not yet reported (reports go out in "
               "input order; 0: the policy's, " +
                   std::to_string(kReportWindowPerJob) + " a worker and at least " +
                   std::to_string(kMinReportWindow) + ")",
               [](Tune& t, const std::string& v) {
                 t.report_window = std::size_t(number("executor.report_window", v, 0, 1 << 20));
               }});
  k.push_back({"jpeg.hybrid_decoders",
               "N  --folder only: at most N hybrid decoders for progressive JPEGs, all made on "
               "the device route's own thread (0: the policy's, one for each CPU worker that "
               "asks, made by that worker)",
               [](Tune& t, const std::string& v) {
                 t.hybrid_decoders = int(number("jpeg.hybrid_decoders", v, 0, kMaxJobs));
               }});
  k.push_back({"jpeg.gpu_huffman_decoders",
               "N  --folder only, with jpeg.progressive=gpu: at most N of the hybrid decoders run "
               "GPU Huffman decoding, the others the hybrid decoder's CPU entropy decoding (0: "
               "the policy's, all of them)",
               [](Tune& t, const std::string& v) {
                 t.gpu_huffman_decoders = int(number("jpeg.gpu_huffman_decoders", v, 0, kMaxJobs));
               }});
  k.push_back({"jpeg.early_hybrid",
               "0|1  --folder only: 1 (the policy), while the device route encodes without its "
               "hardware decoder, colour JPEGs (baseline too) go to the hybrid decoders of "
               "jpeg.progressive; 0: only progressive ones, once the hardware decoder is ready",
               [](Tune& t, const std::string& v) {
                 t.early_hybrid = number("jpeg.early_hybrid", v, 0, 1) != 0;
               }});
  k.push_back({"executor.prefault_mb",
               "MIB  --folder only: before the run, MIB of heap written and freed back to the "
               "arena the CPU workers allocate from, so that their buffers take no fresh pages "
               "while the device route starts (0: none, as the command line runs)",
               [](Tune& t, const std::string& v) {
                 t.prefault_mb = std::size_t(number("executor.prefault_mb", v, 0, 1 << 16));
               }});
}

std::vector<Key> make_keys() {
  using Apply = ClaheTuning::Apply;
  using Tiles16 = ClaheTuning::Tiles16;
  const auto kib = [](std::size_t bytes) { return std::to_string(bytes >> 10); };
  std::string edges;
  for (const auto& e : kernels::pdl::kEdgeNames)
    edges += ", " + std::to_string(unsigned(e.edge)) + " " + e.what;
  std::vector<Key> k;
  k.push_back({"clahe.apply",
               "auto|strip|cell|flat  8-bit apply kernel (auto: strip from " +
                   format_size(ClahePolicy::kStripMinPixels) + " pixels, else cell from " +
                   format_size(ClahePolicy::kCellMinPixels) +
                   ", else flat; a forced kernel runs where it can serve the plane)",
               [](Tune& t, const std::string& v) {
                 if (v == "auto")
                   t.gpu.clahe.apply = Apply::automatic;
                 else if (v == "strip")
                   t.gpu.clahe.apply = Apply::strip;
                 else if (v == "cell")
                   t.gpu.clahe.apply = Apply::cell;
                 else if (v == "flat")
                   t.gpu.clahe.apply = Apply::flat;
                 else
                   bad_value("clahe.apply", v, "auto, strip, cell, flat");
               }});
  k.push_back({"clahe.small_clusters",
               "0|1  8-bit planes up to " + format_size(ClahePolicy::kClusterMaxPixels) +
                   " pixels: tile histograms by a cluster per tile row (default 1) or by bands",
               [](Tune& t, const std::string& v) {
                 t.gpu.clahe.small_clusters = flag("clahe.small_clusters", v);
               }});
  k.push_back(clahe_number<&ClaheTuning::hist_band_kib>(
      "clahe.hist_band_kib", 0, 1 << 20,
      "N  fewest input KiB one tile-histogram block counts (default " +
          kib(ClahePolicy::kHistMinBytesPerBlock) + ")"));
  k.push_back(clahe_number<&ClaheTuning::hist_blocks_per_sm>(
      "clahe.hist_blocks_per_sm", 0, 64, "N  tile-histogram blocks per SM (0: as many as fit)"));
  k.push_back(clahe_number<&ClaheTuning::strip_rows>(
      "clahe.strip_rows", 0, 4096, "N  strip apply: rows per range (0: one wave, by occupancy)"));
  k.push_back(
      clahe_number<&ClaheTuning::strip_waves>("clahe.strip_waves", 0, 64,
                                              "N  strip apply: full waves of blocks (default " +
                                                  std::to_string(ClahePolicy::kStripWaves) + ")"));
  k.push_back(clahe_number<&ClaheTuning::cell_threads>(
      "clahe.cell_threads", 0, ClahePolicy::kCellThreads,
      "N  cell apply: about N threads per block (default " +
          std::to_string(ClahePolicy::kCellThreads) + ")"));
  k.push_back(clahe_number<&ClaheTuning::cell_kpx>(
      "clahe.cell_kpx", 0, 1 << 16,
      "N  cell apply: at least N Ki pixels per block (default " +
          kib(std::size_t(ClahePolicy::kCellPixelsPerBlock)) + ")"));
  k.push_back(
      {"clahe16.fused",
       "auto|on|off  16-bit tile histograms and LUTs in one launch by tile clusters (auto: "
       "tiles of " +
           std::to_string(ClahePolicy::kFused16MinTileArea) + " samples and more)",
       [](Tune& t, const std::string& v) { t.gpu.clahe.fused16 = choice("clahe16.fused", v); }});
  k.push_back(
      {"clahe16.tiles",
       "auto|packed|atomic  16-bit tile histograms outside that launch (auto: packed from " +
           std::to_string(ClahePolicy::kPacked16MinTileArea) + " samples per tile)",
       [](Tune& t, const std::string& v) {
         if (v == "auto")
           t.gpu.clahe.tiles16 = Tiles16::automatic;
         else if (v == "packed")
           t.gpu.clahe.tiles16 = Tiles16::packed;
         else if (v == "atomic")
           t.gpu.clahe.tiles16 = Tiles16::atomic;
         else
           bad_value("clahe16.tiles", v, "auto, packed, atomic");
       }});
  k.push_back(
      {"clahe16.pairs",
       "auto|on|off  16-bit apply from LUT pairs of neighbouring tiles (auto: by size)",
       [](Tune& t, const std::string& v) { t.gpu.clahe.pairs16 = choice("clahe16.pairs", v); }});
  k.push_back(
      {"clahe16.cells", "0|1  16-bit pair apply by cell columns (default 1) or flat",
       [](Tune& t, const std::string& v) { t.gpu.clahe.cells16 = flag("clahe16.cells", v); }});
  k.push_back({"clahe16.cells_blocks_per_sm",
               "N  that kernel's blocks per SM (0: as many as fit; default " +
                   std::to_string(ClahePolicy::kCells16BlocksPerSm) + ")",
               [](Tune& t, const std::string& v) {
                 t.gpu.clahe.cells16_blocks_per_sm =
                     int(number("clahe16.cells_blocks_per_sm", v, 0, 64));
               }});
  k.push_back(
      {"hist16.pairs",
       "0|1  65536-bin histogram: clusters of two add their counters (default 1) or single "
       "blocks",
       [](Tune& t, const std::string& v) { t.gpu.hist16.pairs = flag("hist16.pairs", v); }});
  k.push_back({"pdl",
               "MASK|none|all  programmatic dependent launch per launch site, a sum of" +
                   edges.substr(1) + " (default " + std::to_string(kernels::pdl::kDefaultEdges) +
                   ")",
               [](Tune& t, const std::string& v) {
                 if (v == "none")
                   t.gpu.pdl_edges = 0;
                 else if (v == "all")
                   t.gpu.pdl_edges = 0x7FFFFFFF;
                 else
                   t.gpu.pdl_edges = std::int32_t(number("pdl", v, 0, 0x7FFFFFFF));
               }});
  add_region_keys(k);
  add_executor_keys(k);
  k.push_back({"cpu.simd",
               "0|1  the CPU backend's SIMD paths where the CPU has them (default 1) or the "
               "portable loops",
               [](Tune& t, const std::string& v) { t.cpu_simd = flag("cpu.simd", v); }});
  return k;
}

const std::vector<Key>& keys() {
  static const std::vector<Key> k = make_keys();
  return k;
}

std::string key_names() {
  std::string s;
  for (const Key& k : keys()) s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}

}  // namespace

void apply_tune(Tune& t, std::string_view key_value) {
  const std::string kv(key_value);
  const std::size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size()) {
    throw UsageError("--tune takes KEY=VALUE, got '" + kv + "'; keys: " + key_names());
  }
  const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
  for (const Key& k : keys()) {
    if (key == k.name) {
      k.set(t, value);
      t.given.push_back(kv);
      return;
    }
  }
  throw UsageError("unknown --tune key '" + key + "'; keys: " + key_names());
}

std::string tune_help() {
  // One entry per key, indented under --tune and wrapped at 99 columns.
  constexpr std::size_t kIndent = 20, kWidth = 99;
  std::string out;
  for (const Key& k : keys()) {
    std::string line(kIndent, ' ');
    std::size_t start = 0;
    const std::string text = std::string(k.name) + "=" + k.help;
    while (start < text.size()) {
      std::size_t room = kWidth - line.size();
      std::size_t end = text.size();
      if (end - start > room) {
        end = text.rfind(' ', start + room);
        if (end == std::string::npos || end <= start) end = start + room;
      }
      out += line + text.substr(start, end - start) + "\n";
      start = end < text.size() && text[end] == ' ' ? end + 1 : end;
      line.assign(kIndent + 2, ' ');
    }
  }
  return out;
}

}  // namespace histeq::bench
