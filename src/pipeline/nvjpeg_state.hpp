// nvjpeg_state.hpp — what the nvJPEG files share (gpu::JpegCodec, histeq/nvjpeg_codec.hpp):
// the status check, the alignment of the device slots, and the codec's state (JpegCodec::Impl:
// handles, decode states, encoder states and params, device buffers reused across calls). It
// includes nvjpeg.h, so only files compiled with nvJPEG (HISTEQ_HAVE_NVJPEG, set for them in
// CMakeLists.txt) include it. Where the codec lives:
//   nvjpeg_codec.cpp      what every build has (nvjpeg_takes, planes_candidate, and without
//                         nvJPEG the calls that say so); the handles and the codec's state
//   nvjpeg_decode.cpp     decode to pixels (per image: hardware batches, hybrid, libjpeg-turbo)
//                         and to the stored planes (hardware batches)
//   nvjpeg_encode.cpp     encode from pixels and from planes
//   nvjpeg_on_device.cpp  one JPEG decoded, equalized and encoded on the device
//   nvjpeg_hybrid.cpp     progressive files' planes by the hybrid decoder, for the executor
// Internal header of the pipeline room (not installed).
#pragma once
#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "histeq/nvjpeg_codec.hpp"
#include "support/device_buffer.hpp"

namespace histeq::gpu {
namespace nvjpeg_detail {

/// Throws Error naming the call and the status unless `s` is NVJPEG_STATUS_SUCCESS.
void check(nvjpegStatus_t s, const char* what);

/// Whether a JPEG's entropy-coded data ends with EOI (FF D9), allowing a little padding after it
/// (some writers append zeros or a few bytes). A file cut short does not: it goes to the CPU
/// decoder, whose strict check names the truncation (nvJPEG may decode what is there silently).
bool ends_with_eoi(const std::uint8_t* d, std::size_t n);

/// The EXIF segment and the (possibly multi-part) ICC profile of a JPEG, read from its markers
/// before the first scan (libjpeg-turbo's decoders keep them themselves; nvJPEG's do not). An
/// incomplete ICC profile is dropped.
void read_metadata(const std::uint8_t* data, std::size_t size, std::vector<std::uint8_t>* exif,
                   std::vector<std::uint8_t>* icc);

/// The luma factors (h, v) of a chroma sampling the planes route takes (4:4:4, 4:2:2, 4:2:0).
bool chroma_factors(nvjpegChromaSubsampling_t css, int* h, int* v);

/// The default-backend handle of `h` (made on first need, about 0.5 s, under h's lock; then
/// shared by every caller) and the device the handles belong to.
nvjpegHandle_t default_handle(JpegHandles& h);
/// The handle hybrid decoders are made on: the hardware-backend handle where the GPU has a JPEG
/// engine (a HYBRID decoder on it decodes the same planes, byte for byte, and no second handle
/// is made: bench/probes/start_probe.cu --check), else the default-backend handle.
nvjpegHandle_t decoder_handle(JpegHandles& h);
int handles_device(const JpegHandles& h);

constexpr std::size_t kAlign = 256;
inline std::size_t align_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

}  // namespace nvjpeg_detail

struct JpegCodec::Impl {
  cudaStream_t stream = nullptr;
  JpegCodecOptions opt;
  // Handles: shared (made by make_jpeg_handles, owned there) or created on first use and owned
  // here. hw_handle_tried: the hardware handle's creation attempted (it fails without a JPEG
  // engine); hw_tried: its decode state's and stream's too (ensure_hw).
  std::shared_ptr<JpegHandles> shared;
  nvjpegHandle_t hw = nullptr, def = nullptr;
  nvjpegJpegState_t hw_state = nullptr, def_state = nullptr;
  nvjpegJpegStream_t hw_stream = nullptr;
  bool hw_handle_tried = false, hw_tried = false;
  int hw_batch = 0;
  nvjpegOutputFormat_t hw_format = NVJPEG_OUTPUT_FORMAT_MAX;
  nvjpegEncoderState_t enc_state = nullptr;
  nvjpegEncoderParams_t enc_params = nullptr;
  DeviceBuffer<std::uint8_t> out;               // decoded images, one slot each, reused
  DeviceBuffer<std::uint8_t> staging;           // encode(Image): the uploaded pixels
  DeviceBuffer<std::uint8_t> planes_out;        // decode_planes: the planes of a batch, reused
  DeviceBuffer<std::uint8_t> chroma;            // encode_planes: chroma averaged down, reused
  std::vector<nvjpegEncoderState_t> plane_enc;  // encode_planes: one state per image of a call
  nvjpegEncoderParams_t css_params[4] = {};     // encode_planes: 4:4:4, 4:2:2, 4:2:0, gray
  int css_quality = -1;                         // the quality css_params hold
  unsigned hw_flags = 0, def_flags = 0;
  nvjpegHandle_t enc = nullptr;  // the handle enc_state was made with
  int pre_w = 0, pre_h = 0;      // the largest image size the state's buffers are sized for

  // Handles and states, made on first need (nvjpeg_codec.cpp).
  ~Impl();
  /// The hardware handle alone (the encoder's); false without a JPEG engine or use_hardware.
  bool ensure_hw_handle();
  /// The hardware handle, decode state and stream (the hardware decoder's).
  bool ensure_hw();
  void ensure_default();
  void ensure_encoder();
  // Decoding (nvjpeg_decode.cpp).
  bool hw_supports(const JpegInput& in);
  bool hw_decode(const std::vector<const JpegInput*>& ins, std::vector<DeviceImage*>& outs,
                 nvjpegOutputFormat_t fmt);
  bool hw_decode_raw(const std::vector<const JpegInput*>& ins, std::vector<nvjpegImage_t>& dst,
                     nvjpegOutputFormat_t fmt, int max_w, int max_h);
  bool hybrid_decode(const JpegInput& in, DeviceImage& o);
  Image cpu_decode(const JpegInput& in, DeviceImage& o);
  // Encoding (nvjpeg_encode.cpp).
  nvjpegEncoderParams_t params_for(int k, int quality);
};

}  // namespace histeq::gpu
