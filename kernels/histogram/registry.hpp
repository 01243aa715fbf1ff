// registry.hpp — the explicit table of histogram kernels, looked up by name.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "histogram/contract.hpp"

namespace histeq::kernels {

/// Every kernel, in teaching order (slowest idea first).
const std::vector<KernelEntry>& registry();

/// The entry named `name`; throws UsageError "unknown kernel 'x'; known: racy, atomic, ...".
const KernelEntry& find_kernel(std::string_view name);

/// "racy, atomic, ..." for messages and --help.
std::string kernel_names();

/// The kernel that `auto` picks for a call: the fastest exact kernel for this type, bin count and
/// size, possibly after a cheap look at the data on the device (the choice rules are in
/// docs/kernels.md). Never a non-exact kernel.
const KernelEntry& choose_auto(const HistogramLaunch& call);

/// Makes a freshly allocated scratch buffer of `bytes` bytes ready for `entry`: zeroes it (async
/// on `stream`) when the entry sets zeroed_scratch, otherwise does nothing. Call it once per
/// allocation, not per launch.
void prepare_scratch(const KernelEntry& entry, void* d_scratch, std::size_t bytes,
                     cudaStream_t stream);

/// Runs entry.launch after checking the call (bins 1..kMaxBins, supported, scratch large
/// enough); throws UsageError otherwise. Checks the launch with cudaGetLastError.
void run_histogram(const KernelEntry& entry, const HistogramLaunch& call);

}  // namespace histeq::kernels
