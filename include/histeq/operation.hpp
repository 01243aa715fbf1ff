// histeq/operation.hpp — what is done to an image (the operation: its kind and parameters) and
// what one image's run reports. Every caller — the single-file command, the batch executor, the
// Python package — describes its work as an Operation, and every backend runs it through one
// stage sequence (docs/architecture.md, "Adding an operation").
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "histeq/clahe.hpp"
#include "histeq/lut.hpp"
#include "histeq/match.hpp"
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
  /// The pixels the histograms count (masked equalization, histeq/match.hpp); every pixel by
  /// default. The LUTs apply to every pixel. Every backend and depth, equalize and histogram.
  Region region;
  /// Histogram matching: the histograms the LUTs follow, one per plane (match_lut / match_lut16
  /// instead of the formula). Null: the formula (equalization). Set per image from
  /// Operation::reference by the item's run; callers of the stage sequences may set it directly.
  std::shared_ptr<const std::vector<Histogram>> reference;
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

/// The operations an image can go through. Adding one: a kind here, its kernel(s) and CPU twin,
/// its step in the item's run (run8 / run16 in src/pipeline/item.cpp), and its CLI/Python surface.
enum class OpKind : std::uint8_t {
  equalize,   ///< histogram → CDF → LUT → apply (OpenCV's equalizeHist per plane)
  clahe,      ///< contrast-limited adaptive histogram equalization (OpenCV's createCLAHE)
  histogram,  ///< the histograms only; nothing is written
  match,      ///< histogram → match_lut to the reference's histograms → apply (scikit-image)
};
/// "equalize", "clahe", "histogram", "match".
inline const char* to_string(OpKind k) {
  return k == OpKind::clahe       ? "clahe"
         : k == OpKind::histogram ? "histogram"
         : k == OpKind::match     ? "match"
                                  : "equalize";
}

/// One operation with its parameters: a plain value, copied freely.
struct Operation {
  OpKind kind = OpKind::equalize;
  /// Backend, mode, formula, histogram kernel (8-bit equalize and histogram), block size. The
  /// mode applies to every kind (CLAHE: what a colour image's CLAHE acts on).
  EqualizeOptions equalize;
  ClaheOptions clahe;  ///< clip limit and tiles (OpKind::clahe; its mode and region fields are
                       ///< unused: equalize.mode and equalize.region are used)
  /// Bits per sample the image is processed at: 0 the input's (16-bit PNG/PNM stay 16-bit), 8
  /// narrows 16-bit inputs (round(v / 257)), 16 widens 8-bit inputs (v · 257).
  int depth = 0;
  /// OpKind::match: the reference image (its histograms per mode and depth, kept).
  std::shared_ptr<const MatchReference> reference;
  /// True when the operation writes an image (every kind but histogram).
  bool writes() const { return kind != OpKind::histogram; }
};

/// Milliseconds per stage of one item (host clocks; device stages by CUDA events).
struct ItemTimes {
  double read_ms = 0, decode_ms = 0, upload_ms = 0, equalize_ms = 0, download_ms = 0, encode_ms = 0,
         write_ms = 0;
};

/// What kind of failure a failed item's error is (ItemReport::error_kind), from the exception
/// that carried it (histeq/error.hpp): so that a caller picks its own error type without reading
/// the message.
enum class ItemError : std::uint8_t {
  none,       ///< the item succeeded
  file,       ///< FileError: the input could not be read or the output written (error_errno)
  decode,     ///< DecodeError: the input's data is not an image histeq decodes
  device,     ///< CudaError (DeviceOutOfMemory too): the GPU failed
  memory,     ///< host memory ran out (std::bad_alloc)
  usage,      ///< UsageError: an option this item cannot take
  cancelled,  ///< Executor::cancel before the item started
  other,      ///< any other failure
};

/// "none", "file", "decode", "device", "memory", "usage", "cancelled", "other".
inline const char* to_string(ItemError e) {
  switch (e) {
    case ItemError::none: return "none";
    case ItemError::file: return "file";
    case ItemError::decode: return "decode";
    case ItemError::device: return "device";
    case ItemError::memory: return "memory";
    case ItemError::usage: return "usage";
    case ItemError::cancelled: return "cancelled";
    case ItemError::other: return "other";
  }
  return "other";
}

/// Everything about one item: what progress, --timing and --json read.
struct ItemReport {
  std::size_t index = 0;  ///< position in the input list
  std::string input, output;
  bool ok = false;
  std::string error;                       ///< the cause, naming the file, when !ok
  ItemError error_kind = ItemError::none;  ///< what kind of failure `error` is
  int error_errno = 0;     ///< ItemError::file: the errno of the failure (0: none applies)
  std::string error_path;  ///< ItemError::file: the file that could not be read or written
  int width = 0, height = 0, channels = 0, output_channels = 0;
  std::string decoder, encoder;  ///< the codecs that ran ("libjpeg-turbo", "nvjpeg-hw", ...)
  std::string route;             ///< where it ran: "pixels", "jpeg-planes", "jpeg-device"
  std::uint64_t output_bytes = 0;
  int bit_depth = 8;        ///< bits per sample the image was processed at (8 or 16)
  EqualizeReport equalize;  ///< backend, device, kernel, mode, histograms, luts, stage times
  ItemTimes times;
};

}  // namespace histeq
