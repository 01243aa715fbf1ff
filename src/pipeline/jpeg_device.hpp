// jpeg_device.hpp — the executor's device route for JPEG files: per GPU, a thread that creates
// the CUDA context and nvJPEG's hardware handle as soon as the executor starts, then either
// encoder slot threads (a route started with its encoder alone: a stream, encoder states and
// buffers each) that equalize and encode what CPU workers decoded, or (a whole route, or once
// decoders are wanted) a few decode slot threads, each with its own hardware decode state too,
// that take batches of queued JPEGs and run them on the device: hardware decode, equalization or
// histogram matching, and (a JPEG output) nvJPEG's encoder, so that only the compressed bytes
// come back to the host.
// Internal header of the pipeline room (docs/architecture.md, "The executor").
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/operation.hpp"

namespace histeq::gpu {
class HybridDecoder;
class HybridPlanes;
}  // namespace histeq::gpu

namespace histeq::detail {

/// One file handed to the device route, and what the route made of it.
struct DeviceJob {
  const std::vector<std::uint8_t>* bytes = nullptr;  ///< the whole file
  std::string name;                                  ///< for messages
  std::string out_ext;  ///< the output's format, lower case (".jpg", ".png", ...)
  /// The planes kind (hardware decode to the stored planes, Y equalized or matched, encoded from
  /// the planes); else the pixels kind (decoded to RGB or gray, the stage sequence, encoded or
  /// downloaded).
  bool planes = false;
  /// The host-planes kind: a CPU worker decoded the file's stored planes (jpeg::decode_planes);
  /// the device uploads them, equalizes or matches Y and encodes (the CPU is spared the encode).
  std::shared_ptr<jpeg::Planes> host_planes;
  /// The host-coefficients kind (batched with host planes): a CPU worker read the file's
  /// coefficients (jpeg::decode_coefficients: the entropy decoding alone, most of a progressive
  /// file's decode); the device uploads them, makes the planes (kernels::idct_plane: libjpeg's
  /// inverse DCT, the same samples) and goes on as with host planes.
  std::shared_ptr<jpeg::Coefficients> host_coefs;
  /// The device-planes kind (batched with host planes): a CPU worker decoded a progressive file
  /// with nvJPEG's hybrid decoder (nvjpeg_hybrid.hpp: its entropy decoding on the worker, the
  /// inverse DCT on the device) into planes already on the device; the slot waits for them,
  /// equalizes or matches Y and encodes, then gives their memory back.
  std::shared_ptr<gpu::HybridPlanes> device_planes;
  double megapixels = 0;
  ItemReport* rep = nullptr;  ///< filled: sizes, codecs, equalize, times
  enum class Status : std::uint8_t {
    done,           ///< `encoded` holds the output file, or `host` the pixels to encode
    declined,       ///< not taken (the hardware decoder refused it): the CPU route takes it
    failed,         ///< the file's own error (`error`, naming it)
    device_failed,  ///< the device or nvJPEG failed (`error`): another route may take it
  };
  Status status = Status::done;
  std::string error;
  ItemError error_kind = ItemError::other;  ///< failed: what kind of failure `error` is
  std::vector<std::uint8_t> encoded;
  Image host;  ///< the equalized pixels when the output is not a JPEG
};

/// The device route over one or more GPUs. Thread-safe.
class JpegDevices {
 public:
  struct Options {
    /// CUDA device ordinals (repeats allowed); empty: every visible device.
    std::vector<int> devices;
    /// Mode, formula and kernel; the whole image is counted (no region) and `reference` here
    /// stays null (the route refuses both at once).
    EqualizeOptions equalize;
    /// Histogram matching (OpKind::match): the reference the planes' Y (or gray) plane and the
    /// pixels are matched to, its histograms taken once per route as the CPU route takes them;
    /// null: equalization with the formula.
    std::shared_ptr<const MatchReference> reference;
    jpeg::EncodeOptions encode;
    std::uint64_t max_pixels = kDefaultMaxPixels;
    int batch = 16;  ///< most files per hardware decode call
    int slots = 3;   ///< decode slots: batches in flight per device, each on a thread of its own
    /// Encoder slots per device (ExecutorOptions::encoder_slots) of a route started without its
    /// decoders (`decoders` false): threads that run only what CPU workers decoded (host planes,
    /// coefficients, device planes), started once the context and the handle exist.
    int encoder_slots = 1;
    /// Whether the decode slots are made at once; false: the encoder slots alone, until
    /// want_decoders() (a run whose JPEGs the CPU workers decode before the hardware decoder
    /// would be ready).
    bool decoders = true;
    /// Encoder states per slot (gpu::JpegCodecOptions::encoder_states; ExecutorOptions::
    /// encoder_states): 0, the policy's (jpeg_device.cpp's kSlotEncoderStates); N, N.
    int encoder_states = 0;
    /// ExecutorOptions::hybrid_decoders: 0, a hybrid decoder for each worker that asks (the
    /// first made on a thread of its own, the others by the worker); N, at most N, all made on
    /// that thread.
    int hybrid_decoders = 0;
    /// ProgressiveJpeg::gpu: the hybrid decoders run nvJPEG's GPU Huffman decoding.
    bool gpu_huffman = false;
    /// ExecutorOptions::gpu_huffman_decoders: 0, every decoder GPU Huffman (with gpu_huffman);
    /// N, at most N, the others hybrid; lease_hybrid hands out a free GPU Huffman one first.
    int gpu_huffman_decoders = 0;
    /// ExecutorOptions::early_hybrid: the hybrid decoders are leased once the route encodes
    /// (its encoder slots running), not only once its decode slots are ready.
    bool early_hybrid = false;
  };
  /// Called on a slot thread for every job, once it is done (in any status).
  using Done = std::function<void(DeviceJob*)>;

  /// Starts at once: a thread per device makes its context and handles, then its encoder slots
  /// (Options::decoders false) or its decode slots (Options::decoders, or once want_decoders is
  /// called).
  JpegDevices(Options opt, Done done);
  /// Stops the slots; jobs still queued come back declined (through Done).
  ~JpegDevices();
  JpegDevices(const JpegDevices&) = delete;
  JpegDevices& operator=(const JpegDevices&) = delete;

  /// starting: nothing runs yet; encoding: the encoder slots run (jobs a CPU worker decoded),
  /// the decode slots are not made yet or not wanted; ready: the decode slots run too.
  enum class State : std::uint8_t { starting, encoding, ready, failed };
  State state() const;
  /// Blocks until the devices are ready or failed, or (decoders not wanted) encoding.
  State wait_started();
  /// Whether the route takes jobs a CPU worker decoded now (encoding or ready).
  bool encodes() const;
  /// Makes the decode slots (once) on a route started without them (Options::decoders false).
  void want_decoders();
  std::string failure() const;  ///< why the devices failed (state() == failed)

  /// Queues a job (its route runs it in a batch); a failed route hands it back at once.
  void push(DeviceJob* job);
  /// The last queued job that no CPU worker has decoded (no host planes, coefficients or device
  /// planes), taken back; nullptr when there is none.
  DeviceJob* steal();
  /// A hybrid decoder on the route's device for one file of a CPU worker's (ExecutorOptions::
  /// progressive: hybrid or gpu), made on first need and reused; null when the route is not ready
  /// (with Options::early_hybrid: neither ready nor encoding), runs on more than one device, or
  /// cannot make one (no nvJPEG, or it failed once), and while the first one is being made (on a
  /// thread of its own: the first ask starts it). Given back with return_hybrid.
  gpu::HybridDecoder* lease_hybrid();
  /// broken: it failed (CUDA or nvJPEG): it is not leased again, nor is any other.
  void return_hybrid(gpu::HybridDecoder* d, bool broken = false);
  std::size_t queued() const;
  double queued_megapixels() const;
  /// Jobs queued or in a batch.
  std::size_t pending() const;
  /// Megapixels per second the route has completed since its first batch began (0 before).
  double rate() const;
  /// Host milliseconds from construction to the first device ready, and of the nvJPEG handles.
  double ready_ms() const;
  double handles_ms() const;
  /// Host milliseconds from construction to the first encoder slot running (0: none yet).
  double encoder_ready_ms() const;
  /// Whether more jobs are coming (the reader is still reading): while they are, a slot waits a
  /// few milliseconds for a fuller batch instead of taking one or two files.
  void set_feeding(bool more_coming);
  /// What the route did (since construction).
  struct Stats {
    std::size_t batches = 0, files = 0;
    double megapixels = 0;
    double decode_ms = 0, encode_ms = 0;  ///< host wall time in decode / equalize + encode, summed
    /// Host ms: the slots' states (streams, encoders, hardware decode states; made one after
    /// another before the route is ready), and the slowest slot's first batch (decode;
    /// equalize + encode): what the route costs before it runs at its rate.
    double slot_start_ms = 0, first_decode_ms = 0, first_encode_ms = 0;
  };
  Stats stats() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with the device threads
};

}  // namespace histeq::detail
