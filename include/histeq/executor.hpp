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

#include "histeq/codec.hpp"
#include "histeq/image_io.hpp"
#include "histeq/operation.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/types.hpp"

namespace histeq {

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

/// Who decodes and encodes JPEG items (the CLI's --decoder).
///   automatic: the device route (below) for the JPEGs it takes, when this build has nvJPEG, the
///              backend is not cpu and the run is large enough for the device's start-up to pay
///              (Executor::run); the CPU workers take the others, every JPEG while the device
///              starts, and queued device JPEGs whenever they would finish them sooner.
///   gpu:       every JPEG on the device route (decoded there by the hardware decoder, nvJPEG's
///              hybrid decoder or, for files neither takes, libjpeg-turbo, then uploaded); items
///              wait for the device, and its failure fails them.
///   cpu:       libjpeg-turbo on the CPU workers (the equalization may still run on a device).
/// The device route (src/pipeline/jpeg_device.hpp): per GPU, the CUDA context and one nvJPEG
/// handle made on a thread of their own as the run starts, then a few slots, each with its
/// decode state, stream and encoder states, taking batches of up to jpeg_batch queued JPEGs:
/// hardware decode, equalization, and for a JPEG output nvJPEG's encoder; only the compressed
/// bytes come back to the host, and writer threads write them. In luma mode a JPEG → JPEG whose
/// stored planes the device takes (gpu::planes_candidate) is decoded into its YCbCr planes, Y is
/// equalized (or matched to the reference: OpKind::match) and the planes are encoded (the chroma
/// passes through, averaged down only for a coarser output sampling): the device twin of the CPU's
/// stored-planes route (jpeg_planes.hpp).
enum class JpegRoute : std::uint8_t { automatic, gpu, cpu };

/// Batches the device route runs at a time on one GPU, each on a slot thread with its own decode
/// state, stream and encoder states (the probe: two or three batches in flight keep the
/// hardware decoder busy while a slot waits on its host work).
inline constexpr int kJpegSlotsPerDevice = 3;

/// Encoder slots the device route runs on one GPU when it starts with its encoder alone
/// (ExecutorOptions::encoder_slots, encoder_start_cpu_s): threads with a stream and encoder
/// states but no hardware decode state, which equalize and encode what the CPU workers decoded
/// from about 0.6 s after the start (the context and the handle). A whole route has none: its
/// decode slots encode.
inline constexpr int kJpegEncoderSlotsPerDevice = 1;

/// The policy's start rule of the device route's encoder alone (ExecutorOptions::
/// encoder_start_cpu_s): between it and kDeviceStartCpuS seconds of the CPU workers, the route
/// starts without decode slots, and the CPU workers decode every file and hand its planes to the
/// GPU's encoder.
inline constexpr double kEncoderStartCpuS = 1.0;

/// The policy's start rule of the device route (ExecutorOptions::device_start_cpu_s): it starts
/// once the CPU workers alone would need more than two seconds for the run's JPEGs. On the
/// plasma photos with 16 workers (H200 machine; bench/results/h200/e2e/router.txt) starting it
/// lost at 0.26 GP (executor 0.62-0.68 s against 0.50-0.56 s) and won at 1.0 GP by 0.19 s of
/// executor time (1.22-1.26 s against 1.41-1.48 s), which the process's end with a CUDA context
/// (about 0.2 s, nvjpeg_probe_exit.txt) takes back: whole-process, 1 GP is even, and the device
/// pays from about 2 GP (2.1 against 2.7 s executor).
inline constexpr double kDeviceStartCpuS = 2.0;

/// The policy's report window (ExecutorOptions::report_window): items a CPU worker, and the
/// least. A window of 4,096 reads a folder of up to 2,048 files largest first as a whole (the
/// longest jobs first: no large file left for the end); against 256 (windows of 128 files) it
/// took the 1 GP plasma folder's CPU route from 1.27-1.30 to 1.07 s and the 10 GP one's device
/// route from 5.86-5.94 to 5.15-5.62 s of executor wall, and left the 18- and 9-photo folders as
/// they were (H100 machine, bench/results/h100/e2e/report_window.txt). Waiting reports cost a
/// few hundred bytes each.
inline constexpr std::size_t kReportWindowPerJob = 16;
inline constexpr std::size_t kMinReportWindow = 4096;

/// How a CPU worker of a run whose JPEG device route runs (on a single GPU) decodes a
/// progressive colour JPEG, whose planes then go to the route (ExecutorOptions::progressive).
enum class ProgressiveJpeg : std::uint8_t {
  /// libjpeg-turbo reads its coefficients on the worker (entropy decoding), the device runs the
  /// inverse DCT (decoder "libjpeg-turbo-coefficients"): the 10 GP plasma folder took 7.7-8.0 s
  /// against hybrid's 6.9-7.0 s (H100 machine, in turns; docs/benchmarks.md).
  libjpeg,
  /// nvJPEG's hybrid decoder: its entropy decoding on the worker, the inverse DCT on the device,
  /// the planes handed to the route on the device (decoder "nvjpeg-hybrid").
  hybrid,
  /// nvJPEG's decoder with the GPU's Huffman decoding (NVJPEG_BACKEND_GPU_HYBRID): the worker
  /// only parses the file and queues it; the entropy decoding and the inverse DCT run on the
  /// device, the same planes as hybrid's, byte for byte (decoder "nvjpeg-gpu-hybrid"). The 10 GP
  /// plasma folder: 3.69-3.96 s of executor wall and 37-38 s of CPU time against hybrid's
  /// 4.94-5.18 s and 57-61 s (H100 machine, in turns; docs/benchmarks.md).
  gpu,
};

struct ExecutorOptions {
  /// What each image goes through: the kind (equalize, CLAHE, histogram), its parameters, the
  /// backend (auto: the CPU, and the device route for JPEGs; cuda: every item's operation on
  /// the GPU), the mode and the bit depth.
  Operation op;
  EncodeOptions encode;  ///< JPEG quality and subsampling, PNG level
  std::uint64_t max_pixels = kDefaultMaxPixels;
  /// CPU worker threads, 0..kMaxJobs; 0: cpu::usable_cpus() (the affinity mask's CPUs)
  int jobs = 0;
  /// Cap on the bytes of all items in flight (file bytes + decoded + output pixels + encoded,
  /// estimated from the header when an item is admitted). One item is always admitted when
  /// nothing else is in flight, so a single image larger than the cap still runs.
  /// 0: default_max_inflight_bytes(jobs).
  std::size_t max_inflight_bytes = 0;
  /// Cap on the items read and not yet reported (reports go out in input order, so a finished
  /// item waits there for every earlier one: a few hundred bytes once its output is written);
  /// the reading order sorts the files by size within windows of half of it. 0: the policy's,
  /// kReportWindowPerJob items a worker and at least kMinReportWindow. At least 2 otherwise.
  /// `histeq bench --folder --tune executor.report_window=N` measures others.
  std::size_t report_window = 0;
  /// CUDA device ordinals (repeats allowed: {0, 0} gives GPU 0 twice the device slots). Empty:
  /// every visible device. Ignored by the CPU backend.
  std::vector<int> devices;
  /// Called from the caller's thread while run() waits for the next report in input order,
  /// whenever more items have finished (in any order) since the last call: the items finished so
  /// far and the megapixels of those that succeeded. The files are read largest first, so the
  /// first report may wait for much of the run: a progress display takes its counts from here.
  /// What it throws is kept and rethrown by run() as on_done's is (no callback is called after).
  std::function<void(std::size_t files, double megapixels)> on_progress;
  /// Tried in order before the built-in codecs (see Codec).
  std::vector<std::shared_ptr<Codec>> codecs;
  /// Built in after `codecs`: PNG decoding by libdeflate for 8-bit gray/GA/RGB/RGBA PNGs without
  /// interlacing, tRNS or PLTE (the same pixels as stb_image; everything else, damaged files
  /// included, is left to stb_image and its messages). Reported as decoder "libdeflate-png".
  bool fast_png_decoder = true;
  JpegRoute jpeg = JpegRoute::automatic;  ///< see JpegRoute
  int jpeg_batch = 16;                    ///< most JPEG items per hardware decode call (>= 1)
  /// The start rule of the device route where it is not forced (backend auto, JpegRoute
  /// automatic): it starts when the CPU workers alone would need more than this many seconds for
  /// the run's JPEG → JPEG items, estimated from their headers at the router's assumed rate of a
  /// CPU worker (about 50 MP/s). 0: whenever the run holds such a JPEG and a device can run.
  /// Finite and >= 0 (else UsageError). The policy's kDeviceStartCpuS by default; `histeq bench
  /// --folder` measures others.
  double device_start_cpu_s = kDeviceStartCpuS;
  /// The start rule of the route's encoder alone: where the CPU workers would need more than
  /// this many seconds for the run's JPEG → JPEG items (estimated as for device_start_cpu_s) but
  /// no more than device_start_cpu_s, the route starts with its encoder slots only (no hardware
  /// decode state is made): the CPU workers decode every file, and once the encoder runs they
  /// hand it the planes to equalize and encode. Where it is not below device_start_cpu_s, the
  /// route starts whole or not at all. Finite and >= 0 (else UsageError). The policy's
  /// kEncoderStartCpuS by default; `histeq bench --folder --tune router.encoder_start_s=SECONDS`
  /// measures others.
  double encoder_start_cpu_s = kEncoderStartCpuS;
  /// Encoder slots per device (kJpegEncoderSlotsPerDevice by default; 0: none, the route encodes
  /// once its decode slots are ready, and encoder_start_cpu_s starts nothing). `histeq bench
  /// --folder --tune jpeg.encoder_slots=N` measures others.
  int encoder_slots = kJpegEncoderSlotsPerDevice;
  /// Encoder states per slot of the device route, the images of a batch encoded that many at a
  /// time: 0, the policy's (4); N, N. Each state holds about 190 MB of device memory for a
  /// 5120x2880 image and its first encode costs 9-12 ms on an idle host, 17-35 ms beside 16 busy
  /// threads (bench/results/h100/probes/ready_probe_encoders.txt). >= 0 (else UsageError); `histeq
  /// bench
  /// --folder --tune jpeg.encoder_states=N` measures others.
  int encoder_states = 0;
  /// Where the device route runs (a single GPU), how a CPU worker decodes a progressive JPEG
  /// (ProgressiveJpeg); a file nvJPEG does not take goes on as with libjpeg. `histeq bench
  /// --folder --tune jpeg.progressive=libjpeg|hybrid|gpu` measures them
  /// (bench/probes/hybrid_probe.cu and start_probe.cu: the decoders alone).
  ProgressiveJpeg progressive = ProgressiveJpeg::gpu;
  /// The hybrid decoders (ProgressiveJpeg::hybrid, gpu): 0, the policy's, one for each CPU worker
  /// that asks, the first made on a thread of its own and each other by the worker that needs it;
  /// N: at most N, all made one after another on that thread (a worker that finds none free reads
  /// the coefficients with libjpeg-turbo), so that fewer nvJPEG states are made, none by a
  /// worker, while the device's slots start. `histeq bench --folder --tune
  /// jpeg.hybrid_decoders=N` measures it.
  int hybrid_decoders = 0;
  /// With ProgressiveJpeg::gpu, how many of the hybrid decoders run nvJPEG's GPU Huffman decoding:
  /// 0, the policy's, all of them; N, at most N, the others nvJPEG's hybrid decoder (entropy
  /// decoding on the worker), and a worker takes a free GPU one first, so that the GPU's and the
  /// CPU's share of the progressive files can be weighed. `histeq bench --folder --tune
  /// jpeg.gpu_huffman_decoders=N` measures it: on the 10 GP folder 8, 4 and 2 were each slower
  /// than all (H100 machine, bench/results/h100/e2e/gpu_huffman_split.txt).
  int gpu_huffman_decoders = 0;
  /// While the device route encodes without its hardware decoder (its encoder slots alone, or
  /// before its decode slots are ready), a CPU worker hands every colour JPEG it takes, baseline
  /// ones too, to nvJPEG's hybrid decoders as `progressive` says (GPU Huffman decoding with
  /// ProgressiveJpeg::gpu: the worker only parses and queues the file) instead of decoding it
  /// with libjpeg-turbo; false: only progressive ones, once the decode slots are ready. The 1 GP
  /// plasma folder (encoder alone): 1.11-1.18 s against 1.28-1.34 s, and 0.81-0.84 against
  /// 0.87-0.92 s on a faster host (H100 machines, in turns; docs/benchmarks.md). `histeq bench
  /// --folder --tune jpeg.early_hybrid=0|1` measures it.
  bool early_hybrid = true;
  /// Where the run's JPEG → JPEG items would keep the CPU workers alone busy past
  /// encoder_start_cpu_s at the router's assumed rate of a worker but neither at the fastest it
  /// takes a worker to be (about 100 MP/s) nor past device_start_cpu_s, and no device route is up
  /// yet, the router decides whether the route's encoder alone starts once the workers have timed
  /// their first few files (or 0.4 s has passed), from that rate: a fast host's workers finish
  /// such a folder before the device would help, and starting the device in the process delays
  /// their first files (the 1 GP plasma folder from an idle GPU, docs/benchmarks.md). false: the
  /// assumed rate decides at the start. `histeq bench --folder --tune router.measure=0|1`
  /// measures it.
  bool router_measures = true;
};

/// One file to process. output empty for OpKind::histogram; the output's format is the extension
/// of `output` unless `format` (".png", ".jpg", ".bmp", ".tga") is given.
struct WorkItem {
  std::string input;
  std::string output;
  std::string format;
};

/// The whole run.
struct BatchSummary {
  std::size_t files = 0, failures = 0;
  std::size_t cancelled = 0;  ///< items cancel() stopped before they started (among the failures)
  double megapixels = 0;      ///< of the items that succeeded
  double wall_s = 0;
  ItemTimes summed;  ///< each stage summed over the items
  std::size_t peak_inflight_bytes = 0;
  std::size_t max_inflight_bytes = 0;  ///< the cap that applied
  /// Largest number of items in their CPU stages (decode .. write) at once: with enough
  /// budget it reaches min(jobs, files).
  int peak_busy_workers = 0;
  /// Start-up costs (host wall ms): from the start of the devices to the first one ready (CUDA
  /// context and nvJPEG handle, on threads of their own), and the nvJPEG handle alone (0 when
  /// no device started).
  double device_init_ms = 0, nvjpeg_init_ms = 0;
  /// Host ms from the start of the devices to the first encoder slot running (0: none ran).
  double encoder_ready_ms = 0;
  /// Whether the device route ran, and if not, why (the run was too small for the device's
  /// start-up to pay; "failed: ..." when its start failed: no usable device, ...); empty when it
  /// was not in play at all. A route that failed after batches ran counts as started.
  bool device_started = false;
  std::string device_note;
  /// Files and megapixels of the items that succeeded, by the route that ran them
  /// ("jpeg-device", "jpeg-planes", "pixels": ItemRoute).
  struct Share {
    std::size_t files = 0;
    double megapixels = 0;
  };
  std::map<std::string, Share> routes;
  /// What the device route did in this run: batches, files and megapixels it completed, and the
  /// host milliseconds its slots spent decoding and equalizing + encoding (summed over slots).
  struct DeviceRoute {
    std::size_t batches = 0, files = 0;
    double megapixels = 0, decode_ms = 0, encode_ms = 0;
    /// Milliseconds from the start of run() to the first and the last file the device route
    /// handed back done (0: none): when it started to deliver, and how long after that it
    /// worked.
    double first_done_ms = 0, last_done_ms = 0;
    /// Host ms since the route started (it serves later runs too): its decode slots' states
    /// (streams, encoders, hardware decode states, made before it is ready) and the slowest
    /// slot's first batch (decode; equalize + encode).
    double slot_start_ms = 0, first_decode_ms = 0, first_encode_ms = 0;
  };
  DeviceRoute device;
  /// Milliseconds from the start of run() to the first item that succeeded (0: none did).
  double first_file_ms = 0;
  /// Items that succeeded, by decoder ("libjpeg-turbo", "nvjpeg-hw", "libdeflate-png", ...).
  std::map<std::string, std::size_t> decoders;
};

/// Runs items through the stages (one plan per item, histeq/item.hpp). Thread-safe to construct;
/// run() is not reentrant. The device route for JPEGs starts at the start of run() on threads of
/// its own (see JpegRoute); with the CUDA backend the other items' operation runs on device
/// engines that the CPU workers lease, and with no usable device the run fails with the cause.
class Executor {
 public:
  explicit Executor(ExecutorOptions opt);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Processes every item; calls on_done(report) once per item, in input order, from one thread
  /// (the caller's). An item that fails does not stop the others. Throws only for errors that
  /// concern the whole run (a usage error in the options, no usable device where the options
  /// need one: checked first). before_files, when given, runs once those checks have passed and
  /// before any file is read (the output folders: make_output_folders), so that a run that
  /// cannot start leaves nothing behind; what it throws ends the run.
  BatchSummary run(const std::vector<WorkItem>& items,
                   const std::function<void(const ItemReport&)>& on_done = {},
                   const std::function<void()>& before_files = {});

  /// Waits for the device initialization; empty when devices are in use (or the backend is
  /// cpu), else why none is usable (backend auto then runs everything on the CPU).
  std::string cpu_fallback_reason();

  /// Whether a run of this executor wanted a CUDA device (its JPEG device route started, or it
  /// equalized on device engines). Only then is cpu_fallback_reason() news to the run's user;
  /// asking it otherwise starts CUDA (a context: 0.3 s on an H200 machine) for nothing.
  bool wanted_device() const;

  /// The effective number of CPU workers.
  int jobs() const;

  /// Asks the run in progress (on another thread, from its start: its device checks and
  /// before_files included) to stop soon: no further file is read or started, queued device
  /// jobs are taken back; the files in progress are finished (their outputs written as usual,
  /// atomically), and every other item is reported failed ("'INPUT': cancelled"), so run()
  /// returns once the files in progress are done. Thread-safe; without a run in progress it does
  /// nothing, and a later run() is not cancelled. (Python's equalize_files calls it on Ctrl-C.)
  void cancel();

 private:
  struct Impl;
  void check_devices();
  struct Run;
  std::unique_ptr<Impl> impl_;
};

}  // namespace histeq
