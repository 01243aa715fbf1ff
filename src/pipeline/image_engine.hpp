// image_engine.hpp — the 8-bit stage sequence on one CUDA device, as every caller runs it:
// equalize() with the CUDA backend, the executor's device workers, and images nvJPEG decoded
// into device memory. Internal header of the pipeline room (not installed).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "histeq/gpu.hpp"
#include "histeq/operation.hpp"

namespace histeq::gpu {

/// Everything the sequence reuses across images on the current device: the Equalizer (its
/// stream, histogram and LUT buffers), device buffers for the input, the planes of a colour image
/// and the output, page-locked staging buffers when asked for, and the events that time the
/// stages. Buffers grow and are kept. Not thread-safe: one per host thread at a time.
class ImageEngine {
 public:
  /// external: the stream to run on (nullptr: the Equalizer's own). pinned: host images are
  /// staged through page-locked buffers (a worker running many images), else copied from and to
  /// pageable memory directly (one call).
  explicit ImageEngine(StreamHandle external = nullptr, bool pinned = false);
  /// On the caller's Equalizer (its stream and buffers), which must outlive the engine.
  explicit ImageEngine(Equalizer& borrowed);
  ~ImageEngine();
  ImageEngine(const ImageEngine&) = delete;
  ImageEngine& operator=(const ImageEngine&) = delete;

  Equalizer& equalizer();
  StreamHandle stream() const;

  /// A host image through upload → planes → histograms → (apply) LUTs → apply → (download).
  /// Fills rep (backend "cuda", device, kernel, mode, histograms, LUTs, stage times by CUDA
  /// events; upload/download include the staging copies; total_ms the call's wall time) and
  /// returns the result with the input's metadata. download false: the output stays in
  /// device_output() and the returned image has the shape and metadata but no pixels. `reuse`
  /// (optional, the same image as `in`): its buffer takes the result when the channel counts
  /// match. apply false: histograms only (an empty image). Synchronizes the stream.
  Image run(const Image& in, Image* reuse, const EqualizeOptions& opt, bool apply, bool download,
            EqualizeReport& rep);

  /// The same on pixels the caller owns, into `out` (pixels · output_channels bytes of host
  /// memory; unused when !apply). opt.order bgr: the device stages take RGB, so a colour image in
  /// luma or gray mode is staged with red and blue swapped, and luma mode's result swapped back.
  void run_into(const ImageView<std::uint8_t>& in, const EqualizeOptions& opt, bool apply,
                std::uint8_t* out, EqualizeReport& rep);

  /// The same on an image already in device memory (width·height·channels bytes, interleaved),
  /// into d_out (width·height·output_channels bytes, not overlapping d_in). Synchronizes.
  void run_device(const std::uint8_t* d_in, int width, int height, int channels,
                  const EqualizeOptions& opt, std::uint8_t* d_out, EqualizeReport& rep);

  /// The output of the last run() (device memory), valid until the next call.
  std::uint8_t* device_output();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace histeq::gpu
