// jpeg_slot.hpp — one slot of the executor's JPEG device route (jpeg_device.hpp): what it keeps
// for the whole run on its device (SlotState) and what it does with one batch of queued jobs of
// one kind (SlotBatches, jpeg_slot.cpp): the planes kind (hardware decode to the stored planes),
// the host-planes kind (planes, coefficients or device planes a CPU worker decoded) and the
// pixels kind; Y or the pixels equalized or matched, and nvJPEG's encoder. jpeg_device.cpp keeps
// the route itself: devices, queue, batching, slot threads, leases. Internal header of the
// pipeline room (not installed).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "histeq/gpu.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/types.hpp"
#include "image_engine.hpp"
#include "jpeg_device.hpp"
#include "support/device_buffer.hpp"

namespace histeq::detail {

/// What a slot keeps for the whole run, on its device: the Equalizer (the slot's stream, shared
/// by the codec), the codec (decode state, encoder states, buffers), the stage sequence, the
/// buffers of the equalized Y planes and pixels, and (matching) the reference's one-plane
/// histogram.
struct SlotState {
  gpu::Equalizer eq;
  gpu::JpegCodec codec;
  gpu::ImageEngine engine;
  DeviceBuffer<std::uint8_t> y_out, d_out, planes_in;
  DeviceBuffer<std::uint64_t> reference;
  DeviceBuffer<std::int16_t> coefs;     // the host-coefficients kind: one component's
  DeviceBuffer<std::uint8_t> idct_out;  // coefficients, and its plane as the inverse DCT makes it
  std::string device = gpu::device_name();
  SlotState(const gpu::JpegCodecOptions& jo, std::shared_ptr<gpu::JpegHandles> h)
      : codec(eq.stream(), jo, std::move(h)), engine(eq) {}
};

/// One slot's batches, on its SlotState and stream. Each run_* fills the jobs' reports, sets
/// their status (done with `encoded` or `host`, declined, failed) and returns the batch's host
/// milliseconds in decode or upload (*dec_ms) and in equalize and encode (*enc_ms). CudaError
/// escapes (the slot then fails); a file's own error fails that job only.
class SlotBatches {
 public:
  /// opt: the route's (it outlives the slot); plane_reference: matching's one-plane histogram,
  /// null for equalization.
  SlotBatches(const JpegDevices::Options& opt,
              std::shared_ptr<const std::vector<Histogram>> plane_reference);
  ~SlotBatches();
  SlotBatches(const SlotBatches&) = delete;
  SlotBatches& operator=(const SlotBatches&) = delete;

  /// The planes kind: hardware decode to the stored planes, Y equalized or matched in one
  /// batch, encoded from the planes.
  void run_planes(SlotState& s, std::vector<DeviceJob*>& b, double* dec_ms, double* enc_ms);
  /// The host-planes kind: what CPU workers decoded (planes uploaded, coefficients transformed
  /// here, planes already on the device waited for), then as the planes kind.
  void run_host_planes(SlotState& s, std::vector<DeviceJob*>& b, double* up_ms, double* enc_ms);
  /// The pixels kind: decoded to RGB or gray, the stage sequence, encoded or downloaded.
  void run_pixels(SlotState& s, std::vector<DeviceJob*>& b, double* dec_ms, double* enc_ms);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace histeq::detail
