// registry.cu — the explicit table of histogram kernels. Adding a kernel = one file + one line
// here (its `extern const KernelEntry k...;` and its place in the table); the CLI, the tests and
// the benchmark pick it up from this table. No self-registering statics.
#include "histogram/registry.hpp"

#include "histogram/policy.hpp"

#include <cuda_runtime_api.h>

#include "histeq/error.hpp"
#include "support/cuda_check.hpp"

namespace histeq::kernels {

// Each kernel file defines one of these (declared here, in teaching order).
// extern const KernelEntry kRacy;  ...
extern const KernelEntry kRacy;
extern const KernelEntry kAtomic;
extern const KernelEntry kPrivatized;
extern const KernelEntry kContiguous;  // the lesson's counter-example: never chosen by auto
extern const KernelEntry kCoarsened;
extern const KernelEntry kAggregated;
extern const KernelEntry kCub;
extern const KernelEntry kColumns;
extern const KernelEntry kPerthread;
extern const KernelEntry kTworeduce;
extern const KernelEntry kCooperative;
extern const KernelEntry kShortcounters;

const std::vector<KernelEntry>& registry() {
  static const std::vector<KernelEntry> table = {
      // kRacy, kAtomic, ...
      kRacy, kAtomic,  kPrivatized, kContiguous, kCoarsened,   kAggregated,
      kCub,  kColumns, kPerthread,  kTworeduce,  kCooperative, kShortcounters,
  };
  return table;
}

const KernelEntry& find_kernel(std::string_view name) {
  for (const KernelEntry& e : registry()) {
    if (name == e.name) return e;
  }
  throw UsageError("unknown kernel '" + std::string(name) + "'; known: " + kernel_names());
}

std::string kernel_names() {
  std::string s;
  for (const KernelEntry& e : registry()) {
    if (!s.empty()) s += ", ";
    s += e.name;
  }
  return s;
}

const KernelEntry& choose_auto(const HistogramLaunch& call) {
  // The rule, from the H200 measurements (docs/kernels.md, "auto"), by size and bins only:
  //  - above 256 bins: the coarsened shared-memory kernel (the lane columns hold 256 values);
  //  - ≤ kAutoPrivatizedMaxBins bins and ≤ kAutoPrivatizedMaxSamples samples: privatized (one
  //    sample per thread; its blocks merge only `bins` counters, the least fixed cost per launch);
  //  - inputs of at most ColumnsPolicy::kSmallInputBytes: the lane columns in their small-input
  //    shape;
  //  - fewer bins (u8 < 256, i32 ≤ 64) below kAutoFoldMinSamplesU8/I32 samples: coarsened (the
  //    columns' per-block fold and 32 KB to clear cost more than the counting there);
  //  - otherwise the lane columns (one launch, no bank conflicts on any data).
  // The data are not looked at: below 1M samples every kernel is within ~1 µs of the launch
  // floor, less than a device-side look at the data would cost.
  const bool u8 = call.type == SampleType::u8;
  const bool few_bins = u8 ? call.bins < 256 : call.bins <= 64;
  const std::size_t fold_min = u8 ? kAutoFoldMinSamplesU8 : kAutoFoldMinSamplesI32;
  const char* first = "columns";
  if (call.bins > 256) {
    first = "coarsened";
  } else if (call.bins <= kAutoPrivatizedMaxBins && call.n <= kAutoPrivatizedMaxSamples) {
    first = "privatized";
  } else if (call.n * sample_bytes(call.type) <= ColumnsPolicy::kSmallInputBytes) {
    first = "columns";
  } else if (few_bins && call.n < fold_min) {
    first = "coarsened";
  }
  for (const char* name : {first, "coarsened", "columns"}) {
    for (const KernelEntry& e : registry()) {
      if (std::string_view(e.name) == name && e.unsupported(call.type, call.bins) == nullptr) {
        return e;
      }
    }
  }
  for (const KernelEntry& e : registry()) {
    // contiguous exists to be measured against coarsened (docs/kernels.md): never chosen.
    if (e.exact && e.unsupported(call.type, call.bins) == nullptr &&
        std::string_view(e.name) != "contiguous") {
      return e;
    }
  }
  throw UsageError("no kernel supports " + std::string(to_string(call.type)) + " with " +
                   std::to_string(call.bins) + " bins");
}

void prepare_scratch(const KernelEntry& e, void* d_scratch, std::size_t bytes,
                     cudaStream_t stream) {
  if (e.zeroed_scratch && d_scratch != nullptr && bytes > 0) {
    HISTEQ_CUDA_CHECK(cudaMemsetAsync(d_scratch, 0, bytes, stream));
  }
}

void run_histogram(const KernelEntry& e, const HistogramLaunch& c) {
  if (c.bins < 1 || c.bins > kMaxBins) {
    throw UsageError("bins must be in 1.." + std::to_string(kMaxBins) + ", got " +
                     std::to_string(c.bins));
  }
  if (const char* why = e.unsupported(c.type, c.bins)) {
    throw UsageError(std::string("kernel '") + e.name + "' does not support " + to_string(c.type) +
                     " with " + std::to_string(c.bins) + " bins: " + why);
  }
  if (e.scratch_bytes(c.n, c.bins, c.type) > 0 && c.d_scratch == nullptr) {
    throw UsageError(std::string("kernel '") + e.name + "' needs scratch memory");
  }
  e.launch(c);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace histeq::kernels
