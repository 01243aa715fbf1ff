// histeq/pipeline.hpp — equalize(): histogram → CDF → LUT → apply, on the GPU or the CPU, with a
// timing per stage. Each arrow is a function of its own (cpu.hpp, gpu.hpp); this composes them.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "histeq/lut.hpp"
#include "histeq/operation.hpp"
#include "histeq/types.hpp"

namespace histeq {

/// True when a CUDA device can be used; otherwise false and *why says why (no driver, no
/// device, ...).
bool cuda_available(std::string* why = nullptr);

/// The number of CUDA devices the driver reports (0 without a driver or a device): the fast
/// first half of cuda_available(), which then also makes a context to check that the device
/// runs this build's code.
int cuda_device_count();

/// Whether a visible CUDA device is in the exclusive-process compute mode (one context on it at
/// a time, across processes); false without a driver or a device.
bool cuda_exclusive_process_device();

/// Resolves Backend::automatic; Backend::cuda without a usable device throws Error naming the
/// cause. Prints nothing (the CLI says once that it falls back to the CPU).
Backend resolve_backend(Backend requested, std::string* why_cpu = nullptr);

/// Equalizes an image. Throws UsageError for an unknown kernel or a kernel that cannot take
/// 8-bit samples with 256 bins; Error (CudaError, DeviceOutOfMemory) on runtime failures.
Image equalize(const Image& in, const EqualizeOptions& opt, EqualizeReport* report = nullptr);

/// The same on pixels the caller owns, into `out` (pixels · output_channels(mode, channels)
/// bytes, where mode is opt.mode or default_mode(channels); not overlapping `in`): no copy of
/// the input, no allocation of the output (the Python binding's host path). Same bytes.
void equalize_into(const ImageView<std::uint8_t>& in, const EqualizeOptions& opt, std::uint8_t* out,
                   EqualizeReport* report = nullptr);

/// The 256-bin histograms of the image's planes (planes.hpp), without equalizing.
std::vector<Histogram> image_histograms(const Image& in, const EqualizeOptions& opt,
                                        EqualizeReport* report = nullptr);
std::vector<Histogram> image_histograms(const ImageView<std::uint8_t>& in,
                                        const EqualizeOptions& opt,
                                        EqualizeReport* report = nullptr);

}  // namespace histeq
