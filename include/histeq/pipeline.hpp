// histeq/pipeline.hpp — equalize(): histogram → CDF → LUT → apply, on the GPU or the CPU, with a
// timing per stage. Each arrow is a function of its own (cpu.hpp, gpu.hpp); this composes them.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "histeq/lut.hpp"
#include "histeq/types.hpp"

namespace histeq {

struct EqualizeOptions {
  std::string kernel = "auto";  ///< histogram kernel by registry name, or "auto"
  Backend backend = Backend::automatic;
  std::optional<Mode> mode;  ///< default: default_mode(channels)
  Formula formula = Formula::opencv;
  int block_size = 0;  ///< 0: the kernel's tuned default
  /// Which channel of a colour image is red (types.hpp); histeq's decoders give RGB.
  ChannelOrder order = ChannelOrder::rgb;
};

/// Milliseconds per stage. Device stages are timed with CUDA events, host stages with
/// std::chrono::steady_clock. Stages a backend does not have (upload on the CPU) stay 0.
struct StageTimes {
  double decode_ms = 0, upload_ms = 0, histogram_ms = 0, cdf_lut_ms = 0, apply_ms = 0,
         download_ms = 0, encode_ms = 0, total_ms = 0;
};

struct EqualizeReport {
  std::string backend;                ///< "cuda" or "cpu"
  std::string device;                 ///< GPU name, or "CPU (N threads)"
  std::string kernel;                 ///< the kernel that ran ("auto" resolved; "cpu" on the CPU)
  Mode mode = Mode::gray;             ///< the mode that ran
  std::vector<Histogram> histograms;  ///< per plane, 256 bins, of the input
  std::vector<Lut> luts;              ///< per plane
  std::uint64_t racy_lost = 0;        ///< counts lost by a non-exact kernel (pixels − sum)
  StageTimes times;
};

/// True when a CUDA device can be used; otherwise false and *why says why (no driver, no
/// device, ...).
bool cuda_available(std::string* why = nullptr);

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
