// nvjpeg_codec.cpp — gpu::JpegCodec (nvjpeg_codec.hpp): what every build has (which files
// nvJPEG takes, which the planes route takes), the library handles of a device
// (make_jpeg_handles) and the codec's handles and states, made on first need. Decoding and
// encoding are in nvjpeg_decode.cpp and nvjpeg_encode.cpp, the device-resident JPEG route in
// nvjpeg_on_device.cpp (nvjpeg_state.hpp). Without nvJPEG in the build (no HISTEQ_HAVE_NVJPEG)
// only nvjpeg_built() and calls that say so are compiled, here; the other files are empty.
#include "histeq/nvjpeg_codec.hpp"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "histeq/error.hpp"

#ifdef HISTEQ_HAVE_NVJPEG
#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include "nvjpeg_state.hpp"
#include "support/cuda_check.hpp"
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

}  // namespace

void nvjpeg_detail::check(nvjpegStatus_t s, const char* what) {
  if (s != NVJPEG_STATUS_SUCCESS)
    throw Error(std::string("nvJPEG: ") + what + " failed: " + status_name(s));
}

using nvjpeg_detail::check;

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

nvjpegHandle_t nvjpeg_detail::default_handle(JpegHandles& h) {
  unsigned flags = 0;
  return h.default_handle(&flags);
}

nvjpegHandle_t nvjpeg_detail::decoder_handle(JpegHandles& h) {
  return h.hw ? h.hw : default_handle(h);
}

int nvjpeg_detail::handles_device(const JpegHandles& h) { return h.device; }

JpegCodec::Impl::~Impl() {
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

bool JpegCodec::Impl::ensure_hw_handle() {
  if (hw_handle_tried) return hw != nullptr;
  hw_handle_tried = true;
  if (!opt.use_hardware) return false;
  if (shared) {
    hw = shared->hw;
    hw_flags = shared->hw_flags;
    return hw != nullptr;
  }
  if (create_handle(NVJPEG_BACKEND_HARDWARE, &hw, &hw_flags) != NVJPEG_STATUS_SUCCESS) {
    hw = nullptr;  // no JPEG engine on this GPU (NVJPEG_STATUS_ARCH_MISMATCH): hybrid only
    return false;
  }
  return true;
}

bool JpegCodec::Impl::ensure_hw() {
  if (hw_tried) return hw_state != nullptr && hw_stream != nullptr;
  hw_tried = true;
  if (!ensure_hw_handle()) return false;
  check(nvjpegJpegStateCreate(hw, &hw_state), "nvjpegJpegStateCreate (hardware)");
  check(nvjpegJpegStreamCreate(hw, &hw_stream), "nvjpegJpegStreamCreate");
  return true;
}

void JpegCodec::Impl::ensure_default() {
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
void JpegCodec::Impl::ensure_encoder() {
  if (enc_state) return;
  // (the handle alone: a hardware decode state costs 0.1-0.5 s to make and the encoder has no
  // use for it)
  if (ensure_hw_handle() &&
      nvjpegEncoderStateCreate(hw, &enc_state, stream) == NVJPEG_STATUS_SUCCESS) {
    enc = hw;
  } else {
    enc_state = nullptr;
    ensure_default();
    enc = def;
    check(nvjpegEncoderStateCreate(enc, &enc_state, stream), "nvjpegEncoderStateCreate");
  }
  check(nvjpegEncoderParamsCreate(enc, &enc_params, stream), "nvjpegEncoderParamsCreate");
}

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

#endif  // HISTEQ_HAVE_NVJPEG

}  // namespace histeq::gpu
