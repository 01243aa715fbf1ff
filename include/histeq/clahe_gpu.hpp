// histeq/clahe_gpu.hpp — CLAHE on planes already in device memory (the device-level API; the
// host-level histeq::clahe(Image, ...) is in clahe.hpp). Stream-ordered like gpu::Equalizer:
// nothing synchronizes with the host unless it says so. Includes no CUDA header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "histeq/clahe.hpp"
#include "histeq/gpu.hpp"
#include "histeq/tuning.hpp"

namespace histeq::gpu {

/// A reusable CLAHE engine on the current CUDA device: a non-blocking stream, the tile counters
/// (kept all zero between calls by the kernels themselves, so no memset per call), the
/// per-tile-row tickets and the LUTs. Buffers grow on demand and are kept. Not thread-safe.
/// Two launches per 8-bit plane with grids up to 96 tiles wide (histograms + LUTs fused, then
/// the interpolated apply), three for 16-bit or wider grids (kernels/clahe/clahe_hist.cu).
/// Throws CudaError on a failed CUDA call, DeviceOutOfMemory when a buffer cannot grow,
/// UsageError for bad options/sizes (validate(ClaheOptions)) or null pointers.
class Clahe {
 public:
  Clahe();
  ~Clahe();
  Clahe(Clahe&&) noexcept;
  Clahe& operator=(Clahe&&) noexcept;
  Clahe(const Clahe&) = delete;
  Clahe& operator=(const Clahe&) = delete;

  StreamHandle stream() const;
  /// Blocks until the stream's work is done; throws CudaError on a fault.
  void synchronize() const;
  /// The kernels' choices for the calls that follow (histeq/tuning.hpp): the policy by default;
  /// for measurement and tests. Every choice gives the same bytes.
  void set_tuning(const Tuning& tuning);
  const Tuning& tuning() const;
  /// From now on, runs on `external` (a cudaStream_t of the current device that the caller owns
  /// and keeps alive while it is used), as gpu::Equalizer::set_stream; nullptr: the own stream
  /// again. The buffers are shared across streams: the caller orders work queued earlier on
  /// another stream (the first calls' buffer clearing included) before the next call.
  void set_stream(StreamHandle external);

  /// CLAHE of one 8-bit plane: d_in[0, width·height) → d_out (rows contiguous, device memory,
  /// any alignment; d_out may equal d_in, must not otherwise overlap). Asynchronous. Equal to
  /// cpu::clahe_plane byte for byte. opt.mode is ignored. A region (masked CLAHE): its mask is
  /// uploaded when the engine has not uploaded that mask image before (Region's rule; the copy
  /// is synchronous with the host); UsageError for a region that does not fit or counts no pixel.
  void apply(const std::uint8_t* d_in, std::uint8_t* d_out, int width, int height,
             const ClaheOptions& opt);
  /// The same for 16-bit planes (65536 bins; cpu::clahe_plane16).
  void apply16(const std::uint16_t* d_in, std::uint16_t* d_out, int width, int height,
               const ClaheOptions& opt);
  /// Masked CLAHE with the region in device memory (as gpu::Equalizer::equalize_gray_region):
  /// the counted pixels are those of the rectangle (x, y, w, h), which must lie inside the
  /// plane, where d_mask (width·height bytes of device memory, rows contiguous; nullptr: every
  /// pixel of the rectangle) is nonzero. Equal to apply / apply16 with that ClaheOptions::region
  /// (which must be empty here) but never synchronous with the host, and it does not check
  /// that the region counts a pixel: a region counting none leaves every tile's LUT the
  /// identity (the output equals the input). d_out may equal d_in; d_mask must not overlap
  /// d_out. UsageError for a rectangle not inside the plane.
  void apply_region(const std::uint8_t* d_in, std::uint8_t* d_out, int width, int height,
                    const ClaheOptions& opt, int x, int y, int w, int h,
                    const std::uint8_t* d_mask);
  void apply16_region(const std::uint16_t* d_in, std::uint16_t* d_out, int width, int height,
                      const ClaheOptions& opt, int x, int y, int w, int h,
                      const std::uint8_t* d_mask);
  /// Only the per-tile LUTs (as cpu::clahe_luts / clahe_luts16) of the plane; returns the
  /// device pointer to tiles_x·tiles_y·bins entries (uint8 or uint16), valid until the next call.
  const void* luts(const void* d_in, int width, int height, const ClaheOptions& opt, bool sixteen);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace histeq::gpu
