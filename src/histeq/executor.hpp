// histeq/executor.hpp — many files in one process: read → decode → upload → equalize → download →
// encode → write, overlapping across files (DESIGN.md, "The executor").
//
// One reader thread reads the files in order and admits each into a bounded budget of bytes in
// flight; `jobs` worker threads each take the next admitted item and run its CPU stages (decode,
// equalize on the CPU backend, encode, write); the device stages (upload, equalize, download) run
// on a device worker borrowed for the item: one per entry of `devices`, each owning its stream, a
// gpu::Equalizer, pinned host staging buffers and device buffers that grow and are reused. Items
// finish out of order; their reports are handed to the caller in input order, from one thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "histeq/image_io.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/types.hpp"

namespace histeq {

/// What the executor does with each image.
enum class Task : std::uint8_t { equalize, histogram };

/// A swappable codec for the decode and encode stages (the hook where nvJPEG / libjpeg-turbo
/// plug in). The executor asks the codecs of ExecutorOptions::codecs in order; the first that
/// accepts an item does the stage, otherwise stb_image / stb_image_write (image_io.hpp) do.
/// Implementations must be thread-safe: several workers call them at once. Errors: throw
/// histeq::Error naming the file and the cause (the item then fails alone).
class Codec {
 public:
  virtual ~Codec() = default;
  /// A short name for reports ("stb", "libjpeg-turbo", ...).
  virtual std::string name() const = 0;
  /// Decodes `size` bytes of the file `name` into *out (8-bit, 1..4 channels, interleaved);
  /// false when this codec does not take the input (the next one is asked).
  virtual bool decode(const std::uint8_t* data, std::size_t size, const std::string& name,
                      std::uint64_t max_pixels, Image* out) {
    (void)data, (void)size, (void)name, (void)max_pixels, (void)out;
    return false;
  }
  /// Encodes `img` to the format of `ext` (".png", ".jpg", ...) into *out; false when this
  /// codec does not write that format (the next one is asked).
  virtual bool encode(const Image& img, const std::string& ext, const EncodeOptions& opt,
                      std::vector<std::uint8_t>* out) {
    (void)img, (void)ext, (void)opt, (void)out;
    return false;
  }
};

/// Defaults of the batch options.
inline constexpr std::size_t kDefaultMaxInflightBytes = std::size_t(256) << 20;  // 256 MiB

struct ItemReport;

struct ExecutorOptions {
  Task task = Task::equalize;
  EqualizeOptions equalize;  ///< kernel, backend (auto: CPU until the devices are up), mode, formula
  EncodeOptions encode;      ///< JPEG quality, PNG level
  std::uint64_t max_pixels = kDefaultMaxPixels;
  int jobs = 0;              ///< CPU worker threads; 0: std::thread::hardware_concurrency()
  /// Cap on the bytes of all items in flight (file bytes + decoded + output pixels + encoded,
  /// estimated from the header when an item is admitted). One item is always admitted when
  /// nothing else is in flight, so a single image larger than the cap still runs.
  std::size_t max_inflight_bytes = kDefaultMaxInflightBytes;
  /// CUDA device ordinals, one device worker each (repeats allowed: {0, 0} is two workers on
  /// GPU 0). Empty: every visible device once. Ignored by the CPU backend.
  std::vector<int> devices;
  /// Tried in order before the built-in codecs (see Codec).
  std::vector<std::shared_ptr<Codec>> codecs;
  /// Built in after `codecs`: PNG decoding by libdeflate for 8-bit gray/GA/RGB/RGBA PNGs without
  /// interlacing, tRNS or PLTE (the same pixels as stb_image; everything else, damaged files
  /// included, is left to stb_image and its messages). Reported as decoder "libdeflate-png".
  bool fast_png_decoder = true;
  /// Optional per-item operation in place of the built-in decode → equalize → encode (the
  /// command line's CLAHE and 16-bit paths). Called on a CPU worker with the file's bytes and
  /// the output format (".png", ...; empty for Task::histogram). Returns false to leave the item
  /// to the built-in stages; true when it has filled the report (sizes, codecs, `equalize`
  /// fields, decode/equalize/encode times) and *encoded (Task::equalize: the output file's
  /// bytes, which the executor writes as usual). Throwing fails the item alone.
  using ItemOp = std::function<bool(const std::vector<std::uint8_t>& bytes, const std::string& ext,
                                    ItemReport& rep, std::vector<std::uint8_t>* encoded)>;
  ItemOp item_op;
};

/// One file to process. output empty for Task::histogram; the output's format is the extension
/// of `output` unless `format` (".png", ".jpg", ".bmp", ".tga") is given.
struct WorkItem {
  std::string input;
  std::string output;
  std::string format;
};

/// Milliseconds per stage of one item (host clocks; device stages by CUDA events).
struct ItemTimes {
  double read_ms = 0, decode_ms = 0, upload_ms = 0, equalize_ms = 0, download_ms = 0,
         encode_ms = 0, write_ms = 0;
};

/// Everything about one item: what progress, --timing and --json read.
struct ItemReport {
  std::size_t index = 0;       ///< position in the input list
  std::string input, output;
  bool ok = false;
  std::string error;           ///< the cause, naming the file, when !ok
  int width = 0, height = 0, channels = 0, output_channels = 0;
  std::string decoder, encoder;  ///< codec names ("stb", ...)
  std::uint64_t output_bytes = 0;
  int bit_depth = 8;           ///< bits per sample the image was processed at (8 or 16)
  EqualizeReport equalize;     ///< backend, device, kernel, mode, histograms, luts, stage times
  ItemTimes times;
};

/// The whole run.
struct BatchSummary {
  std::size_t files = 0, failures = 0;
  double megapixels = 0;       ///< of the items that succeeded
  double wall_s = 0;
  ItemTimes summed;            ///< each stage summed over the items
  std::size_t peak_inflight_bytes = 0;
};

/// Runs items through the stages. Thread-safe to construct; run() is not reentrant.
/// Devices (backend auto or cuda) are initialized on a background thread when the Executor is
/// constructed; with backend auto the items that reach the equalize stage before they are up run
/// on the CPU (same bytes). With backend cuda they wait, and an initialization failure fails
/// every item with the cause.
class Executor {
 public:
  explicit Executor(ExecutorOptions opt);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Processes every item; calls on_done(report) once per item, in input order, from one thread
  /// (the caller's). An item that fails does not stop the others. Throws only for errors that
  /// concern the whole run (a usage error in the options).
  BatchSummary run(const std::vector<WorkItem>& items,
                   const std::function<void(const ItemReport&)>& on_done = {});

  /// Waits for the device initialization; empty when devices are in use (or the backend is
  /// cpu), else why none is usable (backend auto then runs everything on the CPU).
  std::string cpu_fallback_reason();

  /// The effective number of CPU workers.
  int jobs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace histeq
