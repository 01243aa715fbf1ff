// nvjpeg_codec.cpp — gpu::JpegCodec (nvjpeg_codec.hpp): nvJPEG hardware/hybrid decode with
// per-image routing and a libjpeg-turbo fallback, nvJPEG encode. Without nvJPEG in the build
// (no HISTEQ_HAVE_NVJPEG) only nvjpeg_built() and a constructor that says so are compiled.
#include "histeq/nvjpeg_codec.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "histeq/error.hpp"
#include "histeq/planes.hpp"

#ifdef HISTEQ_HAVE_NVJPEG
#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include "equalize/chroma.hpp"
#include "histogram/registry.hpp"
#include "image_engine.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"
#endif

namespace histeq::gpu {

bool nvjpeg_takes(const jpeg::Info& info, std::uint64_t max_pixels) {
  return info.precision == 8 && (info.components == 1 || info.components == 3) &&
         !info.arithmetic && !info.lossless && info.orientation == 1 && !info.rgb_stored &&
         !info.undefined_huffman_table && info.width > 0 && info.height > 0 &&
         std::uint64_t(info.width) * std::uint64_t(info.height) <= max_pixels;
}

bool planes_candidate(const jpeg::Info& info, const jpeg::EncodeOptions& out,
                      std::uint64_t max_pixels) {
  if (!nvjpeg_takes(info, max_pixels) || info.progressive) return false;
  return info.components == 1 || jpeg::planes_route(info, out, jpeg::Orientation::apply);
}

#ifndef HISTEQ_HAVE_NVJPEG

bool nvjpeg_built() { return false; }
struct JpegHandles {};
std::shared_ptr<JpegHandles> make_jpeg_handles(int, bool) {
  throw Error("this histeq was built without nvJPEG: GPU JPEG decoding is not available");
}
double jpeg_handles_create_ms(const JpegHandles&) { return 0; }
struct JpegCodec::Impl {};
JpegCodec::JpegCodec(StreamHandle, JpegCodecOptions, std::shared_ptr<JpegHandles>) {
  throw Error(
      "this histeq was built without nvJPEG: GPU JPEG decoding is not available "
      "(decode on the CPU, or rebuild with nvJPEG: see README)");
}
JpegCodec::~JpegCodec() = default;
std::vector<DeviceImage> JpegCodec::decode(const std::vector<JpegInput>&) { return {}; }
std::vector<DevicePlanes> JpegCodec::decode_planes(const std::vector<JpegInput>&) { return {}; }
std::vector<std::vector<std::uint8_t>> JpegCodec::encode_planes(const std::vector<DevicePlanes>&,
                                                                const jpeg::EncodeOptions&) {
  return {};
}
Image JpegCodec::decode_to_host(const JpegInput&, std::string*) { return {}; }
std::vector<std::uint8_t> JpegCodec::encode(const std::uint8_t*, int, int, int,
                                            const jpeg::EncodeOptions&,
                                            const std::vector<std::uint8_t>&,
                                            const std::vector<std::uint8_t>&) {
  return {};
}
std::vector<std::uint8_t> JpegCodec::encode(const Image&, const jpeg::EncodeOptions&) { return {}; }
bool JpegCodec::hardware_available() { return false; }
std::string JpegCodec::handle_flags() const { return ""; }
void equalize_on_device(Equalizer&, const DeviceImage&, const EqualizeOptions&, std::uint8_t*,
                        EqualizeReport*) {
  throw Error("this histeq was built without nvJPEG: no device-resident JPEG path");
}
JpegOnDevice equalize_jpeg_on_device(Equalizer&, JpegCodec&, const JpegInput&,
                                     const EqualizeOptions&, const jpeg::EncodeOptions&,
                                     EqualizeReport*) {
  throw Error("this histeq was built without nvJPEG: no device-resident JPEG path");
}

#else  // HISTEQ_HAVE_NVJPEG

bool nvjpeg_built() { return true; }

namespace {

const char* status_name(nvjpegStatus_t s) {
  switch (s) {
    case NVJPEG_STATUS_SUCCESS: return "NVJPEG_STATUS_SUCCESS";
    case NVJPEG_STATUS_NOT_INITIALIZED: return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG: return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
      return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    default: return "nvJPEG status (unknown)";
  }
}

void check(nvjpegStatus_t s, const char* what) {
  if (s != NVJPEG_STATUS_SUCCESS)
    throw Error(std::string("nvJPEG: ") + what + " failed: " + status_name(s));
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

/// The entropy-coded data ends with EOI (FF D9), possibly followed by a little padding (some
/// writers append zeros or a few bytes). A file cut short does not: it goes to the CPU decoder,
/// whose strict check names the truncation (nvJPEG may decode what is there silently).
bool ends_with_eoi(const std::uint8_t* d, std::size_t n) {
  const std::size_t tail = std::min<std::size_t>(n, 64);
  for (std::size_t i = n - tail; i + 1 < n; ++i)
    if (d[i] == 0xFF && d[i + 1] == 0xD9) return true;
  return false;
}

constexpr std::size_t kAlign = 256;
std::size_t align_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

enum class Route { hw, hybrid, cpu };

}  // namespace

namespace {
/// nvjpegCreateEx with the most useful flags the backend accepts: strict bitstream checks
/// (corrupt data is an error, not silently decoded) and chroma upsampling by interpolation
/// (closer to libjpeg's fancy upsampling), then strict only, then none.
nvjpegStatus_t create_handle(nvjpegBackend_t backend, nvjpegHandle_t* h, unsigned* flags_used) {
  const unsigned tries[] = {
      NVJPEG_FLAGS_BITSTREAM_STRICT | NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION,
      NVJPEG_FLAGS_BITSTREAM_STRICT, NVJPEG_FLAGS_DEFAULT};
  nvjpegStatus_t st = NVJPEG_STATUS_NOT_INITIALIZED;
  for (unsigned f : tries) {
    *h = nullptr;
    st = nvjpegCreateEx(backend, nullptr, nullptr, f, h);
    if (st == NVJPEG_STATUS_SUCCESS) {
      *flags_used = f;
      return st;
    }
    if (st == NVJPEG_STATUS_ARCH_MISMATCH) break;  // no such engine: no flag will help
  }
  *h = nullptr;
  return st;
}

}  // namespace

/// The library handles of one device (see make_jpeg_handles). nvJPEG handles may be used from
/// several threads at once; the states, streams and encoder states made from them may not.
struct JpegHandles {
  int device = 0;
  nvjpegHandle_t hw = nullptr;  // set once by make_jpeg_handles
  unsigned hw_flags = 0;
  double create_ms = 0;
  /// The default-backend handle, created on first need (hybrid decode; encode on a GPU
  /// without a JPEG engine): most runs never pay its 0.3 s.
  nvjpegHandle_t default_handle(unsigned* flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!def_) {
      HISTEQ_CUDA_CHECK(cudaSetDevice(device));
      check(create_handle(NVJPEG_BACKEND_DEFAULT, &def_, &def_flags_),
            "nvjpegCreateEx (default backend)");
    }
    *flags = def_flags_;
    return def_;
  }
  ~JpegHandles() {
    cudaSetDevice(device);
    if (hw) nvjpegDestroy(hw);
    if (def_) nvjpegDestroy(def_);
  }

 private:
  std::mutex mu_;
  nvjpegHandle_t def_ = nullptr;
  unsigned def_flags_ = 0;
};

std::shared_ptr<JpegHandles> make_jpeg_handles(int device, bool use_hardware) {
  const auto t0 = std::chrono::steady_clock::now();
  auto h = std::make_shared<JpegHandles>();
  h->device = device;
  HISTEQ_CUDA_CHECK(cudaSetDevice(device));
  // Each handle costs about 0.3 s on an H200 (mostly the library's own device set-up). The
  // hardware handle decodes baseline files and also encodes (nvJPEG's encoder runs CUDA kernels
  // on any handle), so it is the only one made up front where the GPU has a JPEG engine.
  if (use_hardware &&
      create_handle(NVJPEG_BACKEND_HARDWARE, &h->hw, &h->hw_flags) != NVJPEG_STATUS_SUCCESS)
    h->hw = nullptr;  // no JPEG engine on this GPU (NVJPEG_STATUS_ARCH_MISMATCH): hybrid only
  if (!h->hw) {
    unsigned flags = 0;
    h->default_handle(&flags);
  }
  h->create_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return h;
}

double jpeg_handles_create_ms(const JpegHandles& h) { return h.create_ms; }

struct JpegCodec::Impl {
  cudaStream_t stream = nullptr;
  JpegCodecOptions opt;
  // Handles: shared (made by make_jpeg_handles, owned there) or created on first use and owned
  // here. hw_tried: creation attempted (it fails without a JPEG engine).
  std::shared_ptr<JpegHandles> shared;
  nvjpegHandle_t hw = nullptr, def = nullptr;
  nvjpegJpegState_t hw_state = nullptr, def_state = nullptr;
  nvjpegJpegStream_t hw_stream = nullptr;
  bool hw_tried = false;
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

  ~Impl() {
    for (nvjpegEncoderParams_t p : css_params)
      if (p) nvjpegEncoderParamsDestroy(p);
    for (nvjpegEncoderState_t e : plane_enc) nvjpegEncoderStateDestroy(e);
    if (enc_params) nvjpegEncoderParamsDestroy(enc_params);
    if (enc_state) nvjpegEncoderStateDestroy(enc_state);
    if (hw_stream) nvjpegJpegStreamDestroy(hw_stream);
    if (hw_state) nvjpegJpegStateDestroy(hw_state);
    if (def_state) nvjpegJpegStateDestroy(def_state);
    if (!shared) {
      if (hw) nvjpegDestroy(hw);
      if (def) nvjpegDestroy(def);
    }
  }

  unsigned hw_flags = 0, def_flags = 0;

  bool ensure_hw() {
    if (hw_tried) return hw != nullptr;
    hw_tried = true;
    if (!opt.use_hardware) return false;
    if (shared) {
      hw = shared->hw;
      hw_flags = shared->hw_flags;
      if (!hw) return false;
    } else if (create_handle(NVJPEG_BACKEND_HARDWARE, &hw, &hw_flags) != NVJPEG_STATUS_SUCCESS) {
      hw = nullptr;  // no JPEG engine on this GPU (NVJPEG_STATUS_ARCH_MISMATCH): hybrid only
      return false;
    }
    check(nvjpegJpegStateCreate(hw, &hw_state), "nvjpegJpegStateCreate (hardware)");
    check(nvjpegJpegStreamCreate(hw, &hw_stream), "nvjpegJpegStreamCreate");
    return true;
  }

  void ensure_default() {
    if (def) return;
    if (shared) {
      def = shared->default_handle(&def_flags);
    } else {
      check(create_handle(NVJPEG_BACKEND_DEFAULT, &def, &def_flags),
            "nvjpegCreateEx (default backend)");
    }
    check(nvjpegJpegStateCreate(def, &def_state), "nvjpegJpegStateCreate");
  }

  /// The encoder's state on the hardware handle where there is one (one handle fewer to create:
  /// the encoder is CUDA kernels whatever the backend), else on the default-backend handle.
  void ensure_encoder() {
    if (enc_state) return;
    if (ensure_hw() && nvjpegEncoderStateCreate(hw, &enc_state, stream) == NVJPEG_STATUS_SUCCESS) {
      enc = hw;
    } else {
      enc_state = nullptr;
      ensure_default();
      enc = def;
      check(nvjpegEncoderStateCreate(enc, &enc_state, stream), "nvjpegEncoderStateCreate");
    }
    check(nvjpegEncoderParamsCreate(enc, &enc_params, stream), "nvjpegEncoderParamsCreate");
  }
  nvjpegHandle_t enc = nullptr;  // the handle enc_state was made with

  /// Whether the hardware decoder takes this file (parsed with the hardware handle).
  bool hw_supports(const JpegInput& in) {
    if (nvjpegJpegStreamParse(hw, in.data, in.size, 0, 0, hw_stream) != NVJPEG_STATUS_SUCCESS)
      return false;
    int not_supported = 1;
    if (nvjpegDecodeBatchedSupported(hw, hw_stream, &not_supported) != NVJPEG_STATUS_SUCCESS)
      return false;
    return not_supported == 0;  // 0: supported
  }

  /// One hardware batch of images with the same output format. False when nvJPEG failed (then
  /// the caller sends these images another way).
  bool hw_decode(const std::vector<const JpegInput*>& ins, std::vector<DeviceImage*>& outs,
                 nvjpegOutputFormat_t fmt) {
    std::vector<nvjpegImage_t> dst(ins.size());
    int max_w = 0, max_h = 0;
    for (std::size_t i = 0; i < ins.size(); ++i) {
      std::memset(&dst[i], 0, sizeof dst[i]);
      dst[i].channel[0] = outs[i]->pixels;
      dst[i].pitch[0] = std::size_t(outs[i]->width) * outs[i]->channels;
      max_w = std::max(max_w, outs[i]->width);
      max_h = std::max(max_h, outs[i]->height);
    }
    return hw_decode_raw(ins, dst, fmt, max_w, max_h);
  }

  int pre_w = 0, pre_h = 0;  // the largest image size the state's buffers are sized for

  /// One hardware batch with the destinations given (planar or interleaved per fmt); max_w and
  /// max_h: the batch's largest image. The state is initialized for the batch size and, with
  /// nvjpegDecodeBatchedPreAllocate, sized for the largest image seen so far (4:4:4, the
  /// largest sampling), so that batches of photos of varying sizes allocate nothing: without it
  /// the hardware decoder ran about 3.5 times slower on the H200, host-bound inside
  /// nvjpegDecodeBatched (docs/benchmarks.md, "JPEG on the device").
  bool hw_decode_raw(const std::vector<const JpegInput*>& ins, std::vector<nvjpegImage_t>& dst,
                     nvjpegOutputFormat_t fmt, int max_w, int max_h) {
    const int n = int(ins.size());
    if (n == 0) return true;
    if (n != hw_batch || fmt != hw_format || max_w > pre_w || max_h > pre_h) {
      if (nvjpegDecodeBatchedInitialize(hw, hw_state, n, 1, fmt) != NVJPEG_STATUS_SUCCESS) {
        hw_batch = 0;
        return false;
      }
      pre_w = std::max(pre_w, max_w);
      pre_h = std::max(pre_h, max_h);
      // A failure here only leaves the allocation to the decode call.
      nvjpegDecodeBatchedPreAllocate(hw, hw_state, n, pre_w, pre_h, NVJPEG_CSS_444, fmt);
      hw_batch = n;
      hw_format = fmt;
    }
    std::vector<const unsigned char*> data(static_cast<std::size_t>(n));
    std::vector<std::size_t> lengths(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      data[std::size_t(i)] = ins[std::size_t(i)]->data;
      lengths[std::size_t(i)] = ins[std::size_t(i)]->size;
    }
    if (nvjpegDecodeBatched(hw, hw_state, data.data(), lengths.data(), dst.data(), stream) !=
        NVJPEG_STATUS_SUCCESS) {
      hw_batch = 0;  // re-initialize before the next batch ("also use to reset failed batches")
      return false;
    }
    return true;
  }

  /// The encoder's params for one output sampling (index: 0 4:4:4, 1 4:2:2, 2 4:2:0, 3 gray),
  /// made once per quality.
  nvjpegEncoderParams_t params_for(int k, int quality) {
    if (quality != css_quality) {
      for (nvjpegEncoderParams_t& p : css_params) {
        if (p) nvjpegEncoderParamsDestroy(p);
        p = nullptr;
      }
      css_quality = quality;
    }
    if (!css_params[k]) {
      static const nvjpegChromaSubsampling_t css[4] = {NVJPEG_CSS_444, NVJPEG_CSS_422,
                                                       NVJPEG_CSS_420, NVJPEG_CSS_GRAY};
      check(nvjpegEncoderParamsCreate(enc, &css_params[k], stream), "nvjpegEncoderParamsCreate");
      check(nvjpegEncoderParamsSetQuality(css_params[k], quality, stream),
            "nvjpegEncoderParamsSetQuality");
      check(nvjpegEncoderParamsSetSamplingFactors(css_params[k], css[k], stream),
            "nvjpegEncoderParamsSetSamplingFactors");
    }
    return css_params[k];
  }

  bool hybrid_decode(const JpegInput& in, DeviceImage& o) {
    ensure_default();
    nvjpegImage_t dst;
    std::memset(&dst, 0, sizeof dst);
    dst.channel[0] = o.pixels;
    dst.pitch[0] = std::size_t(o.width) * o.channels;
    const nvjpegOutputFormat_t fmt = o.channels == 1 ? NVJPEG_OUTPUT_Y : NVJPEG_OUTPUT_RGBI;
    return nvjpegDecode(def, def_state, in.data, in.size, fmt, &dst, stream) ==
           NVJPEG_STATUS_SUCCESS;
  }

  /// CPU decode into `o` (metadata, shape, error); returns the host image (pixels to upload).
  Image cpu_decode(const JpegInput& in, DeviceImage& o) {
    jpeg::DecodeOptions d;
    d.max_pixels = opt.max_pixels;
    try {
      Image img = jpeg::decode(in.data, in.size, in.name, d);
      o.width = img.width;
      o.height = img.height;
      o.channels = img.channels;
      o.exif = img.exif;
      o.icc = img.icc;
      o.decoder = "libjpeg-turbo";
      return img;
    } catch (const Error& e) {
      o.error = e.what();
      return {};
    }
  }
};

namespace {

// The EXIF segment and the (possibly multi-part) ICC profile of a JPEG, read from its markers
// before the first scan, into `out` (an nvJPEG-decoded image: jpeg::decode, which does this for
// CPU-decoded ones, is not run for it). An incomplete ICC profile is dropped.
void copy_metadata(const JpegInput& in, DeviceImage& out) {
  std::vector<std::uint8_t> icc_parts[256];
  int icc_count = 0;
  std::size_t pos = 2;
  while (pos + 4 <= in.size && in.data[pos] == 0xFF) {
    const std::uint8_t mk = in.data[pos + 1];
    if (mk == 0xDA || mk == 0xD9) break;
    const std::size_t len = std::size_t(in.data[pos + 2]) << 8 | in.data[pos + 3];
    if (len < 2 || pos + 2 + len > in.size) break;
    const std::uint8_t* seg = in.data + pos + 4;
    const std::size_t sl = len - 2;
    if (mk == 0xE1 && sl >= 6 && std::memcmp(seg, "Exif\0\0", 6) == 0 && out.exif.empty())
      out.exif.assign(seg, seg + sl);
    if (mk == 0xE2 && sl > 14 && std::memcmp(seg, "ICC_PROFILE\0", 12) == 0 && seg[12] >= 1) {
      icc_count = seg[13];
      icc_parts[seg[12]].assign(seg + 14, seg + sl);
    }
    pos += 2 + len;
  }
  bool complete = icc_count > 0;
  for (int k = 1; k <= icc_count; ++k) complete = complete && !icc_parts[k].empty();
  if (complete)
    for (int k = 1; k <= icc_count; ++k)
      out.icc.insert(out.icc.end(), icc_parts[k].begin(), icc_parts[k].end());
}

}  // namespace

JpegCodec::JpegCodec(StreamHandle stream, JpegCodecOptions opt,
                     std::shared_ptr<JpegHandles> handles)
    : impl_(std::make_unique<Impl>()) {
  impl_->stream = reinterpret_cast<cudaStream_t>(stream);
  impl_->opt = opt;
  impl_->shared = std::move(handles);
}

JpegCodec::~JpegCodec() = default;

bool JpegCodec::hardware_available() { return impl_->ensure_hw(); }

std::string JpegCodec::handle_flags() const {
  auto name = [](nvjpegHandle_t h, unsigned f) -> std::string {
    if (!h) return "none";
    std::string s;
    if (f & NVJPEG_FLAGS_BITSTREAM_STRICT) s += "strict ";
    if (f & NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION) s += "interpolated-upsampling ";
    return s.empty() ? "default" : s.substr(0, s.size() - 1);
  };
  return "hardware: " + name(impl_->hw, impl_->hw_flags) +
         "; default backend: " + name(impl_->def, impl_->def_flags);
}

std::vector<DeviceImage> JpegCodec::decode(const std::vector<JpegInput>& batch) {
  Impl& m = *impl_;
  const std::size_t n = batch.size();
  std::vector<DeviceImage> res(n);
  std::vector<Route> route(n, Route::cpu);
  std::vector<Image> host(n);  // CPU-decoded pixels, uploaded at the end

  // 1. Route each image; CPU ones are decoded now (their shape is known only afterwards).
  for (std::size_t i = 0; i < n; ++i) {
    const JpegInput& in = batch[i];
    DeviceImage& o = res[i];
    bool gpu_ok =
        m.opt.use_gpu && jpeg::is_jpeg(in.data, in.size) && ends_with_eoi(in.data, in.size);
    jpeg::Info info;
    if (gpu_ok) {
      try {
        // Also the structure checks (no scan, a component no scan covers, too few entropy-coded
        // bytes for the declared size): a file failing them never reaches nvJPEG; the CPU
        // decoder below refuses it with the reason.
        info = jpeg::read_info(in.data, in.size, in.name);
      } catch (const Error&) {
        gpu_ok = false;
      }
    }
    gpu_ok = gpu_ok && nvjpeg_takes(info, m.opt.max_pixels);
    if (!gpu_ok) {
      host[i] = m.cpu_decode(in, o);
      continue;
    }
    o.width = info.width;
    o.height = info.height;
    o.channels = info.components == 1 ? 1 : 3;
    route[i] =
        (m.ensure_hw() && !info.progressive && m.hw_supports(in)) ? Route::hw : Route::hybrid;
  }

  // 2. One device slot per image.
  std::vector<std::size_t> offset(n, 0);
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!res[i].error.empty()) continue;
    offset[i] = total;
    total += align_up(res[i].byte_count());
  }
  if (total > m.out.size()) m.out = DeviceBuffer<std::uint8_t>(total + total / 4);
  for (std::size_t i = 0; i < n; ++i)
    if (res[i].error.empty()) res[i].pixels = m.out.get() + offset[i];

  // 3. Hardware batches (colour and gray separately: one output format per batch).
  for (int gray = 0; gray < 2; ++gray) {
    std::vector<const JpegInput*> ins;
    std::vector<DeviceImage*> outs;
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < n; ++i)
      if (route[i] == Route::hw && (res[i].channels == 1) == bool(gray)) {
        ins.push_back(&batch[i]);
        outs.push_back(&res[i]);
        idx.push_back(i);
      }
    const bool ok = m.hw_decode(ins, outs, gray ? NVJPEG_OUTPUT_Y : NVJPEG_OUTPUT_RGBI);
    for (std::size_t i : idx) {
      if (ok)
        res[i].decoder = "nvjpeg-hw";
      else
        route[i] = Route::hybrid;
    }
  }
  // 4. Hybrid, one at a time; a failure goes to the CPU decoder.
  for (std::size_t i = 0; i < n; ++i) {
    if (route[i] != Route::hybrid) continue;
    if (m.hybrid_decode(batch[i], res[i])) {
      res[i].decoder = "nvjpeg-hybrid";
      continue;
    }
    route[i] = Route::cpu;
    std::uint8_t* slot = res[i].pixels;
    const std::size_t cap = res[i].byte_count();
    host[i] = m.cpu_decode(batch[i], res[i]);
    res[i].pixels = res[i].error.empty() && host[i].pixels.size() <= cap ? slot : nullptr;
    if (res[i].error.empty() && !res[i].pixels)
      res[i].error = quoted(batch[i].name) + ": decoded shape does not match its header";
  }
  // 5. Metadata of nvJPEG-decoded images, from the markers (jpeg::decode is not run for them).
  for (std::size_t i = 0; i < n; ++i)
    if (route[i] != Route::cpu && res[i].error.empty()) copy_metadata(batch[i], res[i]);
  // 6. Upload the CPU-decoded images, then wait for everything.
  for (std::size_t i = 0; i < n; ++i) {
    if (route[i] != Route::cpu || !res[i].error.empty() || host[i].pixels.empty()) continue;
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(res[i].pixels, host[i].pixels.data(), host[i].pixels.size(),
                                      cudaMemcpyHostToDevice, m.stream));
  }
  HISTEQ_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  return res;
}

namespace {

/// The luma factors (h, v) of a file's chroma sampling that the planes route takes.
bool chroma_factors(nvjpegChromaSubsampling_t css, int* h, int* v) {
  switch (css) {
    case NVJPEG_CSS_444: *h = 1, *v = 1; return true;
    case NVJPEG_CSS_422: *h = 2, *v = 1; return true;
    case NVJPEG_CSS_420: *h = 2, *v = 2; return true;
    default: return false;
  }
}

}  // namespace

std::vector<DevicePlanes> JpegCodec::decode_planes(const std::vector<JpegInput>& batch) {
  Impl& m = *impl_;
  const std::size_t n = batch.size();
  std::vector<DevicePlanes> res(n);
  std::vector<const JpegInput*> ins;
  std::vector<std::size_t> idx;
  std::vector<std::size_t> offset(n, 0);
  std::size_t total = 0;
  const bool hw = m.opt.use_gpu && m.ensure_hw();
  for (std::size_t i = 0; i < n; ++i) {
    const JpegInput& in = batch[i];
    DevicePlanes& o = res[i];
    o.declined = true;
    if (!hw || !jpeg::is_jpeg(in.data, in.size) || !ends_with_eoi(in.data, in.size)) continue;
    if (nvjpegJpegStreamParseHeader(m.hw, in.data, in.size, m.hw_stream) != NVJPEG_STATUS_SUCCESS)
      continue;
    int not_supported = 1;
    unsigned comps = 0, w = 0, h = 0;
    nvjpegChromaSubsampling_t css = NVJPEG_CSS_UNKNOWN;
    if (nvjpegDecodeBatchedSupported(m.hw, m.hw_stream, &not_supported) != NVJPEG_STATUS_SUCCESS ||
        not_supported != 0 ||
        nvjpegJpegStreamGetComponentsNum(m.hw_stream, &comps) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStreamGetFrameDimensions(m.hw_stream, &w, &h) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStreamGetChromaSubsampling(m.hw_stream, &css) != NVJPEG_STATUS_SUCCESS)
      continue;
    if (w == 0 || h == 0 || std::uint64_t(w) * h > m.opt.max_pixels) continue;
    if (comps == 3 && !chroma_factors(css, &o.chroma_h, &o.chroma_v)) continue;
    if (comps != 1 && comps != 3) continue;
    o.declined = false;
    o.width = int(w);
    o.height = int(h);
    o.components = int(comps);
    for (int c = 0; c < o.components; ++c) {
      o.plane_width[c] = c == 0 ? o.width : (o.width + o.chroma_h - 1) / o.chroma_h;
      o.plane_height[c] = c == 0 ? o.height : (o.height + o.chroma_v - 1) / o.chroma_v;
    }
    offset[i] = total;
    for (int c = 0; c < o.components; ++c)
      total += align_up(std::size_t(o.plane_width[c]) * std::size_t(o.plane_height[c]));
    ins.push_back(&in);
    idx.push_back(i);
  }
  if (ins.empty()) return res;
  if (total > m.planes_out.size()) m.planes_out = DeviceBuffer<std::uint8_t>(total + total / 4);
  std::vector<nvjpegImage_t> dst(ins.size());
  for (std::size_t k = 0; k < idx.size(); ++k) {
    DevicePlanes& o = res[idx[k]];
    std::memset(&dst[k], 0, sizeof dst[k]);
    std::size_t off = offset[idx[k]];
    for (int c = 0; c < o.components; ++c) {
      o.plane[c] = m.planes_out.get() + off;
      dst[k].channel[c] = o.plane[c];
      dst[k].pitch[c] = std::size_t(o.plane_width[c]);
      off += align_up(std::size_t(o.plane_width[c]) * std::size_t(o.plane_height[c]));
    }
  }
  int max_w = 0, max_h = 0;
  for (std::size_t i : idx) {
    max_w = std::max(max_w, res[i].width);
    max_h = std::max(max_h, res[i].height);
  }
  if (!m.hw_decode_raw(ins, dst, NVJPEG_OUTPUT_YUV, max_w, max_h)) {
    for (std::size_t i : idx) res[i] = DevicePlanes{}, res[i].declined = true;
    return res;
  }
  for (std::size_t i : idx) {
    DeviceImage meta;
    copy_metadata(batch[i], meta);
    res[i].exif = std::move(meta.exif);
    res[i].icc = std::move(meta.icc);
  }
  HISTEQ_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  return res;
}

std::vector<std::vector<std::uint8_t>> JpegCodec::encode_planes(
    const std::vector<DevicePlanes>& images, const jpeg::EncodeOptions& opt) {
  if (opt.quality < 1 || opt.quality > 100)
    throw UsageError("JPEG quality " + std::to_string(opt.quality) +
                     " out of range (valid: 1..100)");
  Impl& m = *impl_;
  m.ensure_encoder();
  while (m.plane_enc.size() < images.size()) {
    nvjpegEncoderState_t e = nullptr;
    check(nvjpegEncoderStateCreate(m.enc, &e, m.stream), "nvjpegEncoderStateCreate");
    m.plane_enc.push_back(e);
  }
  const int out_h = opt.subsampling == jpeg::Subsampling::s444 ? 1 : 2;
  const int out_v = opt.subsampling == jpeg::Subsampling::s420 ? 2 : 1;
  // Scratch for the chroma planes that are averaged down (two per colour image at most).
  std::size_t scratch = 0;
  for (const DevicePlanes& p : images)
    if (p.components == 3 && (p.chroma_h != out_h || p.chroma_v != out_v))
      scratch += 2 * align_up(std::size_t((p.width + out_h - 1) / out_h) *
                              std::size_t((p.height + out_v - 1) / out_v));
  if (scratch > m.chroma.size()) m.chroma = DeviceBuffer<std::uint8_t>(scratch);
  std::size_t used = 0;
  for (std::size_t i = 0; i < images.size(); ++i) {
    const DevicePlanes& p = images[i];
    if (p.width <= 0 || p.height <= 0 || (p.components != 1 && p.components != 3) || !p.plane[0])
      throw Error("nvJPEG encode: need decoded planes with a size");
    nvjpegImage_t src;
    std::memset(&src, 0, sizeof src);
    src.channel[0] = p.plane[0];
    src.pitch[0] = std::size_t(p.plane_width[0]);
    int k = 3;  // gray
    nvjpegChromaSubsampling_t css = NVJPEG_CSS_GRAY;
    if (p.components == 3) {
      if (out_h < p.chroma_h || out_v < p.chroma_v)
        throw Error("nvJPEG encode: a " + std::string(jpeg::to_string(opt.subsampling)) +
                    " output needs chroma finer than the file's");
      k = out_h == 1 ? 0 : out_v == 1 ? 1 : 2;
      css = k == 0 ? NVJPEG_CSS_444 : k == 1 ? NVJPEG_CSS_422 : NVJPEG_CSS_420;
      const int fx = out_h / p.chroma_h, fy = out_v / p.chroma_v;
      for (int c = 1; c < 3; ++c) {
        if (fx == 1 && fy == 1) {
          src.channel[c] = p.plane[c];
          src.pitch[c] = std::size_t(p.plane_width[c]);
          continue;
        }
        const int dw = (p.plane_width[c] + fx - 1) / fx, dh = (p.plane_height[c] + fy - 1) / fy;
        std::uint8_t* d = m.chroma.get() + used;
        used += align_up(std::size_t(dw) * std::size_t(dh));
        kernels::launch_average_down(p.plane[c], p.plane_width[c], p.plane_height[c],
                                     std::size_t(p.plane_width[c]), fx, fy, d, std::size_t(dw),
                                     m.stream);
        src.channel[c] = d;
        src.pitch[c] = std::size_t(dw);
      }
    }
    check(nvjpegEncodeYUV(m.enc, m.plane_enc[i], m.params_for(k, opt.quality), &src, css, p.width,
                          p.height, m.stream),
          "nvjpegEncodeYUV");
  }
  HISTEQ_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  std::vector<std::vector<std::uint8_t>> out(images.size());
  for (std::size_t i = 0; i < images.size(); ++i) {
    std::size_t len = 0;
    check(nvjpegEncodeRetrieveBitstream(m.enc, m.plane_enc[i], nullptr, &len, m.stream),
          "nvjpegEncodeRetrieveBitstream (size)");
    out[i].resize(len);
    check(nvjpegEncodeRetrieveBitstream(m.enc, m.plane_enc[i], out[i].data(), &len, m.stream),
          "nvjpegEncodeRetrieveBitstream");
    out[i].resize(len);
  }
  HISTEQ_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  for (std::size_t i = 0; i < images.size(); ++i)
    jpeg::insert_metadata(out[i], images[i].exif, images[i].icc, images[i].components);
  return out;
}

Image JpegCodec::decode_to_host(const JpegInput& in, std::string* decoder) {
  std::vector<DeviceImage> r = decode({in});
  DeviceImage& d = r.at(0);
  if (!d.error.empty()) throw Error(d.error);
  Image img;
  img.width = d.width;
  img.height = d.height;
  img.channels = d.channels;
  img.exif = std::move(d.exif);
  img.icc = std::move(d.icc);
  img.pixels.resize(d.byte_count());
  HISTEQ_CUDA_CHECK(cudaMemcpyAsync(img.pixels.data(), d.pixels, img.pixels.size(),
                                    cudaMemcpyDeviceToHost, impl_->stream));
  HISTEQ_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
  if (decoder) *decoder = d.decoder;
  return img;
}

std::vector<std::uint8_t> JpegCodec::encode(const std::uint8_t* d_pixels, int width, int height,
                                            int channels, const jpeg::EncodeOptions& opt,
                                            const std::vector<std::uint8_t>& exif,
                                            const std::vector<std::uint8_t>& icc) {
  if (opt.quality < 1 || opt.quality > 100)
    throw UsageError("JPEG quality " + std::to_string(opt.quality) +
                     " out of range (valid: 1..100)");
  if (width <= 0 || height <= 0 || (channels != 1 && channels != 3))
    throw Error("nvJPEG encode: need a 1- or 3-channel image with width, height > 0, got " +
                std::to_string(width) + "x" + std::to_string(height) + "x" +
                std::to_string(channels));
  Impl& m = *impl_;
  m.ensure_encoder();
  nvjpegChromaSubsampling_t css = NVJPEG_CSS_GRAY;
  if (channels == 3) {
    css = opt.subsampling == jpeg::Subsampling::s444   ? NVJPEG_CSS_444
          : opt.subsampling == jpeg::Subsampling::s422 ? NVJPEG_CSS_422
                                                       : NVJPEG_CSS_420;
  }
  check(nvjpegEncoderParamsSetQuality(m.enc_params, opt.quality, m.stream),
        "nvjpegEncoderParamsSetQuality");
  check(nvjpegEncoderParamsSetSamplingFactors(m.enc_params, css, m.stream),
        "nvjpegEncoderParamsSetSamplingFactors");
  nvjpegImage_t src;
  std::memset(&src, 0, sizeof src);
  src.channel[0] = const_cast<unsigned char*>(d_pixels);
  src.pitch[0] = std::size_t(width) * channels;
  if (channels == 3) {
    check(nvjpegEncodeImage(m.enc, m.enc_state, m.enc_params, &src, NVJPEG_INPUT_RGBI, width,
                            height, m.stream),
          "nvjpegEncodeImage");
  } else {
    check(nvjpegEncodeYUV(m.enc, m.enc_state, m.enc_params, &src, NVJPEG_CSS_GRAY, width, height,
                          m.stream),
          "nvjpegEncodeYUV (gray)");
  }
  std::size_t len = 0;
  check(nvjpegEncodeRetrieveBitstream(m.enc, m.enc_state, nullptr, &len, m.stream),
        "nvjpegEncodeRetrieveBitstream (size)");
  std::vector<std::uint8_t> out(len);
  check(nvjpegEncodeRetrieveBitstream(m.enc, m.enc_state, out.data(), &len, m.stream),
        "nvjpegEncodeRetrieveBitstream");
  HISTEQ_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  out.resize(len);
  jpeg::insert_metadata(out, exif, icc, channels);
  return out;
}

std::vector<std::uint8_t> JpegCodec::encode(const Image& img, const jpeg::EncodeOptions& opt) {
  if (img.width <= 0 || img.height <= 0 || img.channels < 1 || img.channels > 4 ||
      img.pixels.size() != img.byte_count())
    throw Error("nvJPEG encode: bad image shape " + std::to_string(img.width) + "x" +
                std::to_string(img.height) + "x" + std::to_string(img.channels));
  const int c = img.channels <= 2 ? 1 : 3;
  std::vector<std::uint8_t> packed;
  const std::uint8_t* src = img.pixels.data();
  if (c != img.channels) {  // drop alpha
    packed.resize(img.pixel_count() * std::size_t(c));
    for (std::size_t p = 0; p < img.pixel_count(); ++p)
      for (int k = 0; k < c; ++k) packed[p * c + k] = img.pixels[p * img.channels + k];
    src = packed.data();
  }
  const std::size_t bytes = img.pixel_count() * std::size_t(c);
  Impl& m = *impl_;
  if (bytes > m.staging.size()) m.staging = DeviceBuffer<std::uint8_t>(bytes);
  HISTEQ_CUDA_CHECK(cudaMemcpyAsync(m.staging.get(), src, bytes, cudaMemcpyHostToDevice, m.stream));
  return encode(m.staging.get(), img.width, img.height, c, opt, img.exif, img.icc);
}

void equalize_on_device(Equalizer& eq, const DeviceImage& img, const EqualizeOptions& opt,
                        std::uint8_t* d_out, EqualizeReport* report) {
  if ((img.channels != 1 && img.channels != 3) || img.width <= 0 || img.height <= 0 || !img.pixels)
    throw Error("equalize_on_device: need a decoded 1- or 3-channel device image");
  EqualizeReport local;
  EqualizeReport& rep = report ? *report : local;
  rep = EqualizeReport{};
  ImageEngine engine(eq);
  engine.run_device(img.pixels, img.width, img.height, img.channels, opt, d_out, rep);
}

namespace {

/// The planes route of one file (as the executor's device route runs a batch): decode into the
/// stored planes, Y equalized (equalize_gray: the bytes of Equalizer::equalize_batch), encoded
/// from the planes. False when the hardware decoder declines the file.
bool planes_on_device(Equalizer& eq, JpegCodec& codec, const JpegInput& in,
                      const EqualizeOptions& opt, const jpeg::EncodeOptions& enc,
                      EqualizeReport* report, JpegOnDevice* r) {
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  auto t = Clock::now();
  std::vector<DevicePlanes> dec = codec.decode_planes({in});
  if (dec.at(0).declined) return false;
  r->decode_ms = ms_since(t);
  DevicePlanes p = dec[0];
  const std::size_t n = std::size_t(p.width) * std::size_t(p.height);
  DeviceBuffer<std::uint8_t> y(n);
  t = Clock::now();
  const std::string ran = eq.equalize_gray(p.plane[0], y.get(), n, opt.formula);
  p.plane[0] = y.get();
  r->bytes = std::move(codec.encode_planes({p}, enc).at(0));
  r->encode_ms = ms_since(t);
  r->width = p.width;
  r->height = p.height;
  r->channels = r->out_channels = p.components;
  r->decoder = "nvjpeg-hw";
  if (report) {
    *report = EqualizeReport{};
    report->backend = "cuda";
    report->device = device_name();
    report->kernel = ran;
    report->mode = p.components == 1 ? Mode::gray : Mode::luma;
  }
  return true;
}

}  // namespace

JpegOnDevice equalize_jpeg_on_device(Equalizer& eq, JpegCodec& codec, const JpegInput& in,
                                     const EqualizeOptions& opt, const jpeg::EncodeOptions& enc,
                                     EqualizeReport* report) {
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  JpegOnDevice r;
  {  // luma mode into a JPEG: the stored planes, where the hardware decoder takes them
    jpeg::Info info;
    bool checked = false;
    try {
      info = jpeg::read_info(in.data, in.size, in.name);
      checked = true;
    } catch (const Error&) {  // the decoders below name the defect
    }
    const bool luma =
        !opt.mode || *opt.mode == Mode::luma || (info.components == 1 && *opt.mode == Mode::gray);
    if (checked && luma && opt.kernel == "auto" &&
        planes_candidate(info, enc, std::uint64_t(1) << 40) &&
        planes_on_device(eq, codec, in, opt, enc, report, &r))
      return r;
  }
  auto t = Clock::now();
  std::vector<DeviceImage> dec = codec.decode({in});
  r.decode_ms = ms_since(t);
  const DeviceImage& img = dec.at(0);
  if (!img.error.empty()) throw Error(img.error);
  r.width = img.width;
  r.height = img.height;
  r.channels = img.channels;
  r.decoder = img.decoder;
  const Mode mode = opt.mode.value_or(default_mode(img.channels));
  r.out_channels = output_channels(mode, img.channels);
  DeviceBuffer<std::uint8_t> d_out(img.byte_count() / std::size_t(img.channels) *
                                   std::size_t(r.out_channels));
  equalize_on_device(eq, img, opt, d_out.get(), report);
  t = Clock::now();
  r.bytes =
      codec.encode(d_out.get(), img.width, img.height, r.out_channels, enc, img.exif, img.icc);
  r.encode_ms = ms_since(t);
  return r;
}

#endif  // HISTEQ_HAVE_NVJPEG

}  // namespace histeq::gpu
