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
#include <map>
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

/// Defaults of the batch options: the cap on bytes in flight is max(256 MiB, 128 MiB x jobs),
/// at most a quarter of the physical memory (and never under 256 MiB). An item is costed at
/// file bytes + 2 x decoded bytes + one plane (see Executor::run), so a 5120x2880 RGB photo
/// (44 MB decoded) costs about 120 MB and every worker can hold one: a cap that admits fewer
/// items than workers leaves cores idle (a 256 MiB cap ran 16 workers at ~2 big photos at a time).
inline constexpr std::size_t kMinMaxInflightBytes = std::size_t(256) << 20;  // 256 MiB
inline constexpr std::size_t kInflightBytesPerJob = std::size_t(128) << 20;  // 128 MiB
/// The default cap for `jobs` workers (formula above).
std::size_t default_max_inflight_bytes(int jobs);
/// The most CPU workers a batch takes (--jobs): more is a usage error, not thousands of threads
/// (each with its stack) that the machine cannot run at once anyway.
inline constexpr int kMaxJobs = 1024;

/// Device workers per GPU that decode JPEG batches with nvJPEG, each on its own thread (the
/// hardware decoder is one engine per GPU: two threads keep it busy while the other prepares,
/// equalizes and encodes its batch).
inline constexpr int kJpegThreadsPerDevice = 2;

/// Who decodes and encodes JPEG items (the CLI's --decoder).
///   automatic: nvJPEG on the device workers once the devices are up (when this build has
///              nvJPEG and the backend is not cpu); the JPEGs that arrive earlier, and every
///              JPEG when no device is usable, go to libjpeg-turbo on the CPU workers.
///   gpu:       nvJPEG; items wait for the devices (their initialization failing fails them).
///   cpu:       libjpeg-turbo on the CPU workers (the equalization may still run on a device).
/// On the nvJPEG route a JPEG item is decoded by its device worker's gpu::JpegCodec in a batch
/// with the other JPEG items waiting (up to jpeg_batch), equalized on the device
/// (gpu::equalize_on_device) and, when the output is a JPEG, encoded there (nvJPEG): the pixels
/// never cross to the host; other outputs are downloaded and encoded on the CPU workers.
enum class JpegRoute : std::uint8_t { automatic, gpu, cpu };

struct ItemReport;

struct ExecutorOptions {
  Task task = Task::equalize;
  EqualizeOptions
      equalize;          ///< kernel, backend (auto: CPU until the devices are up), mode, formula
  EncodeOptions encode;  ///< JPEG quality, PNG level
  std::uint64_t max_pixels = kDefaultMaxPixels;
  /// CPU worker threads, 0..kMaxJobs; 0: cpu::usable_cpus() (the affinity mask's CPUs)
  int jobs = 0;
  /// Cap on the bytes of all items in flight (file bytes + decoded + output pixels + encoded,
  /// estimated from the header when an item is admitted). One item is always admitted when
  /// nothing else is in flight, so a single image larger than the cap still runs.
  /// 0: default_max_inflight_bytes(jobs).
  std::size_t max_inflight_bytes = 0;
  /// CUDA device ordinals, one device worker each (repeats allowed: {0, 0} is two workers on
  /// GPU 0). Empty: every visible device, workers_per_device times. Ignored by the CPU backend.
  std::vector<int> devices;
  /// Device workers per visible device when `devices` is empty. 0: kJpegThreadsPerDevice when
  /// JPEG items may take the nvJPEG route, else 1; and when nvJPEG starts (the first JPEG item),
  /// kJpegThreadsPerDevice more per GPU. On the nvJPEG route the first kJpegThreadsPerDevice
  /// workers of each device decode JPEG batches, each on a thread of its own; the others
  /// equalize and encode (nvJPEG) what the CPU workers decoded, so that those need not wait for
  /// a worker busy with a batch, nor encode on the CPU. A folder without JPEGs never makes them
  /// (each holds pinned and device buffers, whose making and freeing cost wall time).
  int workers_per_device = 0;
  /// Tried in order before the built-in codecs (see Codec).
  std::vector<std::shared_ptr<Codec>> codecs;
  /// Built in after `codecs`: PNG decoding by libdeflate for 8-bit gray/GA/RGB/RGBA PNGs without
  /// interlacing, tRNS or PLTE (the same pixels as stb_image; everything else, damaged files
  /// included, is left to stb_image and its messages). Reported as decoder "libdeflate-png".
  bool fast_png_decoder = true;
  JpegRoute jpeg = JpegRoute::automatic;  ///< see JpegRoute
  int jpeg_batch = 8;                     ///< most JPEG items per nvJPEG decode call (>= 1)
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
  double read_ms = 0, decode_ms = 0, upload_ms = 0, equalize_ms = 0, download_ms = 0, encode_ms = 0,
         write_ms = 0;
};

/// Everything about one item: what progress, --timing and --json read.
struct ItemReport {
  std::size_t index = 0;  ///< position in the input list
  std::string input, output;
  bool ok = false;
  std::string error;  ///< the cause, naming the file, when !ok
  int width = 0, height = 0, channels = 0, output_channels = 0;
  std::string decoder, encoder;  ///< codec names ("stb", ...)
  std::uint64_t output_bytes = 0;
  int bit_depth = 8;        ///< bits per sample the image was processed at (8 or 16)
  EqualizeReport equalize;  ///< backend, device, kernel, mode, histograms, luts, stage times
  ItemTimes times;
};

/// The whole run.
struct BatchSummary {
  std::size_t files = 0, failures = 0;
  double megapixels = 0;  ///< of the items that succeeded
  double wall_s = 0;
  ItemTimes summed;  ///< each stage summed over the items
  std::size_t peak_inflight_bytes = 0;
  std::size_t max_inflight_bytes = 0;  ///< the cap that applied
  /// Largest number of items in their CPU stages (decode .. write) at once: with enough
  /// budget it reaches min(jobs, files).
  int peak_busy_workers = 0;
  /// Start-up costs (host wall ms): the device workers (CUDA context, streams, buffers) on the
  /// background thread, from construction to ready; the nvJPEG codecs (handles), summed over
  /// the device workers that created one (0 when none did).
  double device_init_ms = 0, nvjpeg_init_ms = 0;
  /// Milliseconds from the start of run() to the first item that succeeded (0: none did).
  double first_file_ms = 0;
  /// Items that succeeded, by decoder ("libjpeg-turbo", "nvjpeg-hw", "libdeflate-png", ...).
  std::map<std::string, std::size_t> decoders;
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
  struct Run;
  std::unique_ptr<Impl> impl_;
};

}  // namespace histeq
