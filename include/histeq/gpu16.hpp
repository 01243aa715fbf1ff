// histeq/gpu16.hpp — 16-bit (65536-level) histogram and equalization on data in device memory,
// and the host-level 16-bit equalize on a chosen backend. Stream-ordered; includes no CUDA header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "histeq/equalize16.hpp"
#include "histeq/gpu.hpp"
#include "histeq/tuning.hpp"

namespace histeq::gpu {

/// A reusable engine on the current device: a non-blocking stream, a 65536-bin uint64
/// histogram and a 65536-entry LUT (kernels/u16/hist_u16_packed.cu: one read of the input, the
/// 65536 counters as packed 16-bit halves in one block's shared memory, per-SM partials in
/// 128 KiB of device scratch per SM summed by a second kernel). Not thread-safe. Throws CudaError /
/// DeviceOutOfMemory / UsageError (null pointers, odd addresses).
class Equalizer16 {
 public:
  Equalizer16();
  ~Equalizer16();
  Equalizer16(Equalizer16&&) noexcept;
  Equalizer16& operator=(Equalizer16&&) noexcept;
  Equalizer16(const Equalizer16&) = delete;
  Equalizer16& operator=(const Equalizer16&) = delete;

  StreamHandle stream() const;
  void synchronize() const;
  /// The kernels' choices for the calls that follow (histeq/tuning.hpp: Hist16Tuning and the
  /// programmatic launches): the policy by default; for measurement and tests.
  void set_tuning(const Tuning& tuning);
  const Tuning& tuning() const;
  /// From now on, runs on `external` (a cudaStream_t of the current device that the caller owns
  /// and keeps alive while it is used), as gpu::Equalizer::set_stream; nullptr: the own stream
  /// again. The buffers are shared across streams: the caller orders work queued earlier on
  /// another stream (the first calls' buffer clearing included) before the next call.
  void set_stream(StreamHandle external);

  /// 65536-bin histogram of d_in[0,n) (2-byte aligned) into d_hist[0,65536) uint64, overwritten
  /// (equal to cpu::histogram16). Asynchronous.
  void histogram(const std::uint16_t* d_in, std::size_t n, std::uint64_t* d_hist);
  /// Equalizes a plane: histogram → LUT (equalize16.hpp) → apply, d_in → d_out (may be equal).
  /// Afterwards device_hist() / device_lut() hold this call's histogram and LUT.
  void equalize(const std::uint16_t* d_in, std::uint16_t* d_out, std::size_t n);
  /// The stages of a plane with a counted region and/or a reference, all in device memory (as
  /// gpu::Equalizer::equalize_gray_region): the 65536-bin histogram of the pixels of the
  /// rectangle (x, y, w, h), which must lie inside the width x height plane, where d_mask
  /// (width·height bytes, rows contiguous, nonzero: counted; nullptr: every pixel of the
  /// rectangle) is nonzero; the LUT of equalize16.hpp's formula, or with d_ref (65536 uint64
  /// counts in device memory, at least one sample) histogram matching's match_lut16; applied to
  /// every pixel d_in → d_out (may be equal; d_mask and d_ref must not overlap d_out).
  /// Asynchronous. Equal to equalize16 on the CPU with that Region (and reference). The caller
  /// checks that the region counts a pixel. UsageError for a rectangle not inside the plane or a
  /// null plane pointer.
  void equalize_region(const std::uint16_t* d_in, std::uint16_t* d_out, int width, int height,
                       int x, int y, int w, int h, const std::uint8_t* d_mask,
                       const std::uint64_t* d_ref = nullptr);
  const std::uint64_t* device_hist() const;
  const std::uint16_t* device_lut() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace histeq::gpu

namespace histeq {
/// cpu::equalize16 on the chosen backend (automatic: the GPU when usable); equal byte for byte.
/// `region`: the pixels the histograms count (every pixel by default); `reference` (optional):
/// histogram matching, the LUTs match_lut16 to these histograms (one per plane, or one for all).
Image16 equalize16(const Image16& img, Mode mode = Mode::rgb, Backend backend = Backend::automatic,
                   std::string* device_used = nullptr, const Region& region = {},
                   const std::vector<Histogram>* reference = nullptr);
/// The 65536-bin histograms of a 16-bit image's planes: gray (and gray+alpha) one, colour
/// images three (R, G, B; mode rgb; another mode on colour throws UsageError: no 16-bit YCbCr).
/// On the chosen backend (gpu::Equalizer16::histogram or cpu::histogram16; equal counts).
/// Throws Error for an empty image. `device_used` (optional) receives "cpu" or the GPU's name.
/// `region`: the pixels counted (every pixel by default).
std::vector<Histogram> histograms16(const Image16& img, Mode mode,
                                    Backend backend = Backend::automatic,
                                    std::string* device_used = nullptr, const Region& region = {});
}  // namespace histeq
