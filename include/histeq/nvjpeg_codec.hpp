// histeq/nvjpeg_codec.hpp — JPEG decode and encode on the GPU with nvJPEG (compiled only when
// CMake found nvJPEG: HISTEQ_HAVE_NVJPEG), with libjpeg-turbo (jpeg_codec.hpp) as the fallback.
//
// Decoders, per image (decode() routes each one on its own: nvJPEG's batched hardware decoder
// fails a whole batch when one image in it is unsupported):
//   "nvjpeg-hw"      NVJPEG_BACKEND_HARDWARE, batched: the images nvjpegDecodeBatchedSupported
//                    accepts (baseline, one scan, not 4:1:0/4:1:1), on GPUs with a JPEG engine
//                    (A100, H100/H200...).
//   "nvjpeg-hybrid"  NVJPEG_BACKEND_DEFAULT, one image at a time (Huffman on the CPU thread,
//                    IDCT and colour conversion on the GPU): the other baseline and progressive
//                    Huffman 8-bit 1- and 3-component files.
//   "libjpeg-turbo"  the CPU decoder (jpeg::decode), then uploaded: everything nvJPEG does not
//                    take or fails on (CMYK/YCCK, RGB-stored 3-component files, arithmetic coding,
//                    lossless, 12-bit: the CPU decoder's clear error), files with an EXIF
//                    orientation other than 1 (the CPU decoder rotates them), files whose scans use
//                    a Huffman table no DHT defined (libjpeg-turbo's standard tables), files whose
//                    data does not end with EOI (truncated: the CPU decoder's strict check gives
//                    the error), and any image nvJPEG returns an error for
//                    (NVJPEG_FLAGS_BITSTREAM_STRICT is set, so corrupt data is an error there
//                    rather than silently decoded).
// nvJPEG decodes may differ from libjpeg-turbo's by IDCT/upsampling rounding (libjpeg upsamples
// chroma by "fancy" interpolation; nvJPEG is asked for NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION
// and falls back to its default when a backend refuses it): see kMaxDiffFromLibjpeg.
//
// Thread safety: a JpegCodec is NOT thread-safe: one per device worker thread (it owns nvJPEG
// handles, states and device buffers; nvJPEG states must not be shared between threads).
// Handles are created lazily, on the first decode()/encode() that needs them: the hardware
// handle only when an image can go to it, the default-backend handle only for the hybrid route
// or encode (each costs about 0.3 s on an H200).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "histeq/gpu.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/types.hpp"

namespace histeq::gpu {

/// True when this build has nvJPEG (HISTEQ_HAVE_NVJPEG).
bool nvjpeg_built();

/// Whether JpegCodec::decode hands a file with these header facts to nvJPEG (8-bit, 1 or 3
/// components, Huffman-coded, not lossless, EXIF orientation 1, YCbCr, every Huffman table
/// defined, at most max_pixels); the others go to libjpeg-turbo. The executor asks it of
/// jpeg::read_header's facts to know which files the device may take.
bool nvjpeg_takes(const jpeg::Info& info, std::uint64_t max_pixels);

/// Largest per-sample difference between nvJPEG's and libjpeg-turbo's decode of the same file
/// that the GPU tests accept. Placeholder until measured on the H200 over samples/ and the
/// photos folder (the tests print the measured maximum): IDCT rounding is +-1..2; chroma
/// upsampling by replication against libjpeg's fancy upsampling differs more at colour edges.
inline constexpr int kMaxDiffFromLibjpeg = 24;

/// Largest per-sample difference between the hardware decoder's stored planes (decode_planes) and
/// libjpeg-turbo's (jpeg::decode_planes, its ISLOW IDCT) that the GPU tests accept: the two IDCTs
/// round differently (docs/benchmarks.md gives the measured maximum).
inline constexpr int kMaxPlaneDiffFromLibjpeg = 2;

/// A JPEG held in host memory. `name` is used in error messages.
struct JpegInput {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
  std::string name;
};

/// One decoded image in device memory.
struct DeviceImage {
  int width = 0, height = 0;
  int channels = 0;  ///< 1 (gray) or 3 (RGB), interleaved, rows of width*channels
  std::uint8_t* pixels =
      nullptr;  ///< device memory owned by the JpegCodec; valid until its next decode()
  std::vector<std::uint8_t> exif;  ///< as Image::exif (orientation 1 once applied)
  std::vector<std::uint8_t> icc;   ///< as Image::icc
  std::string decoder;             ///< "nvjpeg-hw", "nvjpeg-hybrid" or "libjpeg-turbo"
  std::string error;               ///< non-empty: this image failed; the message names the file
  std::size_t byte_count() const { return std::size_t(width) * height * channels; }
};

/// A JPEG decoded by the hardware decoder into its stored planes in device memory (nvJPEG's YUV
/// output: no upsampling, no colour conversion): Y, and for a colour file Cb and Cr at the file's
/// sampling. Plane p is plane_width[p] x plane_height[p] bytes, rows plane_width[p] apart.
struct DevicePlanes {
  int width = 0, height = 0;
  int components = 0;  ///< 1 (gray) or 3 (YCbCr)
  int chroma_h = 1,
      chroma_v = 1;             ///< luma samples per chroma sample: 4:4:4 1x1, 4:2:2 2x1, 4:2:0 2x2
  std::uint8_t* plane[3] = {};  ///< device memory owned by the codec (see decode_planes)
  int plane_width[3] = {}, plane_height[3] = {};
  std::vector<std::uint8_t> exif;  ///< as Image::exif
  std::vector<std::uint8_t> icc;   ///< as Image::icc
  std::string error;               ///< non-empty: the decoder failed on this file
  bool declined = false;  ///< the hardware decoder does not take this file: nothing decoded
};

/// Whether the device's planes route takes a file with these header facts (jpeg::read_info's)
/// to a JPEG with `out`'s subsampling: what nvjpeg_takes asks, baseline (not progressive), and
/// either a gray file or stored YCbCr planes that jpeg::planes_route takes to `out` (no
/// upsampling). The hardware decoder's own check (nvjpegDecodeBatchedSupported: one scan, no
/// 4:1:1) is made by JpegCodec::decode_planes.
bool planes_candidate(const jpeg::Info& info, const jpeg::EncodeOptions& out,
                      std::uint64_t max_pixels);

struct JpegCodecOptions {
  std::uint64_t max_pixels = std::uint64_t(1) << 28;  ///< as load_image's limit
  bool use_hardware = true;  ///< false: no hardware decoder (tests of the hybrid route)
  bool use_gpu = true;       ///< false: every image goes to libjpeg-turbo (then uploaded)
  /// The most encoder states encode_planes keeps (0: one per image of a call, all encodes queued
  /// before one synchronize; N: the images encoded N at a time). Each state's first encode of a
  /// 5120x2880 image costs 9-12 ms on an idle host, 17-35 ms beside 16 busy threads, and about
  /// 190 MB of device memory (bench/probes/ready_probe --encoders, H100 machine), so a few states
  /// serve a first batch sooner than one per image.
  int encoder_states = 0;
};

/// nvJPEG's library handles of one device: the hardware-backend handle (absent on GPUs without
/// a JPEG engine; it decodes baseline files and, on such GPUs, carries the encoder too) and the
/// default-backend handle (hybrid decode; the encoder where there is no JPEG engine), created on
/// first need. Each costs about 0.3 s to create on an H200, so the device workers of one GPU
/// share one set (nvJPEG handles may be used by several threads at once; states may not: each
/// JpegCodec keeps its own).
struct JpegHandles;
/// Creates the handles for CUDA device `device` that a run needs first: the hardware one (unless
/// !use_hardware), else the default-backend one. Throws Error when the default backend cannot
/// be created (or this build has no nvJPEG), CudaError when the device cannot be selected.
std::shared_ptr<JpegHandles> make_jpeg_handles(int device, bool use_hardware = true);
/// Host wall milliseconds make_jpeg_handles took (a start-up cost for reports).
double jpeg_handles_create_ms(const JpegHandles& h);

class JpegCodec {
 public:
  /// No nvJPEG handle is created here. `stream`: the cudaStream_t all work is queued on (e.g.
  /// the gpu::Equalizer's stream(), so decode → equalize → encode stay ordered on one stream).
  /// Throws Error when this build has no nvJPEG.
  /// `handles`: shared handles of the current device (make_jpeg_handles); null: this codec
  /// creates its own on first use.
  JpegCodec(StreamHandle stream, JpegCodecOptions opt = {},
            std::shared_ptr<JpegHandles> handles = nullptr);
  ~JpegCodec();
  JpegCodec(const JpegCodec&) = delete;
  JpegCodec& operator=(const JpegCodec&) = delete;

  /// Decodes a batch. Per image: pixels in device memory (reused across calls: the results of
  /// one call are valid until the next), the decoder that served it, or an error message (the
  /// other images still decode). Complete (stream synchronized) on return. Throws only for
  /// CUDA failures that leave the device unusable (CudaError, DeviceOutOfMemory).
  std::vector<DeviceImage> decode(const std::vector<JpegInput>& batch);

  /// Decodes a batch into the files' stored planes with the hardware decoder, in one batched call.
  /// A file it does not take (no JPEG engine, refused by nvjpegDecodeBatchedSupported, a sampling
  /// other than 4:4:4, 4:2:2, 4:2:0 or gray, data not ending with EOI) comes back `declined`,
  /// nothing decoded, for the caller's CPU route (whose decoder also names any defect). The
  /// caller has checked each file's structure (jpeg::read_info). The planes stay valid until the
  /// next decode_planes(); complete (stream synchronized) on return. Throws only for CUDA
  /// failures (CudaError, DeviceOutOfMemory).
  std::vector<DevicePlanes> decode_planes(const std::vector<JpegInput>& batch);

  /// Encodes planes (e.g. decode_planes' with an equalized Y in plane[0]) as baseline JPEGs at
  /// opt.quality: gray files as one component, colour files at opt.subsampling, their chroma
  /// averaged down on the device first where the output's sampling is coarser
  /// (kernels::launch_average_down, jpeg::average_down's integers); an output finer than the
  /// file's chroma is refused (Error). Each result carries the file's EXIF and ICC
  /// (jpeg::insert_metadata). All encodes are queued before one synchronize. Throws Error (bad
  /// shape, nvJPEG failure) or UsageError (quality out of 1..100).
  std::vector<std::vector<std::uint8_t>> encode_planes(const std::vector<DevicePlanes>& images,
                                                       const jpeg::EncodeOptions& opt);

  /// One file to a host Image (decode() + download). Throws Error with the file's message.
  Image decode_to_host(const JpegInput& in, std::string* decoder = nullptr);

  /// Encodes a device image (1 channel → 4:0:0 gray, 3 channels RGB → YCbCr with
  /// opt.subsampling) with nvjpegEncodeImage/nvjpegEncodeYUV into host bytes, then adds the
  /// EXIF and ICC segments (jpeg::insert_metadata). Synchronizes the stream. Throws Error
  /// (bad shape, nvJPEG failure) or UsageError (quality out of 1..100).
  std::vector<std::uint8_t> encode(const std::uint8_t* d_pixels, int width, int height,
                                   int channels, const jpeg::EncodeOptions& opt,
                                   const std::vector<std::uint8_t>& exif = {},
                                   const std::vector<std::uint8_t>& icc = {});
  /// encode() of a host image (uploaded first; alpha dropped, 2 → 1 and 4 → 3 channels).
  std::vector<std::uint8_t> encode(const Image& img, const jpeg::EncodeOptions& opt);

  /// Whether the hardware decoder can be used (creates its handle on first call).
  bool hardware_available();
  /// The nvJPEG flags each created handle accepted, for reports and tests, e.g. "hardware:
  /// strict interpolated-upsampling; default backend: strict" ("none": not created).
  std::string handle_flags() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Equalizes a decoded device image (1 or 3 channels, e.g. from JpegCodec::decode) on `eq`'s
/// stream into `d_out` (width·height·output_channels(mode, channels) bytes, device memory, not
/// overlapping img.pixels), with the same stage sequence as equalize() with Backend::cuda (so the
/// same bytes): extract planes → histogram → CDF + LUT → apply. No pixel crosses to the host.
/// `report` (optional) gets backend, device, kernel, mode, histograms, LUTs and the device stage
/// times (upload/download 0). Synchronizes `eq`'s stream. Throws UsageError (kernel, mode) or
/// CudaError.
void equalize_on_device(Equalizer& eq, const DeviceImage& img, const EqualizeOptions& opt,
                        std::uint8_t* d_out, EqualizeReport* report = nullptr);

/// The single-file JPEG → JPEG path on the device: decode (JpegCodec::decode), equalize
/// (equalize_on_device), encode (JpegCodec::encode, with the input's EXIF and ICC when they
/// still fit) — the pixels never cross to the host. Throws Error with the decoder's message.
struct JpegOnDevice {
  std::vector<std::uint8_t> bytes;  ///< the encoded output file
  int width = 0, height = 0, channels = 0, out_channels = 0;
  std::string decoder;                  ///< as DeviceImage::decoder
  double decode_ms = 0, encode_ms = 0;  ///< host wall time of each step
};
JpegOnDevice equalize_jpeg_on_device(Equalizer& eq, JpegCodec& codec, const JpegInput& in,
                                     const EqualizeOptions& opt, const jpeg::EncodeOptions& enc,
                                     EqualizeReport* report = nullptr);

}  // namespace histeq::gpu
