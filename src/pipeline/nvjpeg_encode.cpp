// nvjpeg_encode.cpp — gpu::JpegCodec's encoders (nvjpeg_codec.hpp, nvjpeg_state.hpp): a batch
// of decoded planes (Y as given, chroma averaged down to the output's sampling where it is
// finer, one encoder state per image), and one image of pixels in device or host memory; the
// EXIF and ICC profile put back in. Compiled with nvJPEG only (HISTEQ_HAVE_NVJPEG).
#ifdef HISTEQ_HAVE_NVJPEG
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "equalize/chroma.hpp"
#include "histeq/error.hpp"
#include "nvjpeg_state.hpp"
#include "support/cuda_check.hpp"

namespace histeq::gpu {

using nvjpeg_detail::align_up;
using nvjpeg_detail::check;
using nvjpeg_detail::kAlign;

/// The encoder's params for one output sampling (index: 0 4:4:4, 1 4:2:2, 2 4:2:0, 3 gray),
/// made once per quality.
nvjpegEncoderParams_t JpegCodec::Impl::params_for(int k, int quality) {
  if (quality != css_quality) {
    for (nvjpegEncoderParams_t& p : css_params) {
      if (p) nvjpegEncoderParamsDestroy(p);
      p = nullptr;
    }
    css_quality = quality;
  }
  if (!css_params[k]) {
    static const nvjpegChromaSubsampling_t css[4] = {NVJPEG_CSS_444, NVJPEG_CSS_422, NVJPEG_CSS_420,
                                                     NVJPEG_CSS_GRAY};
    check(nvjpegEncoderParamsCreate(enc, &css_params[k], stream), "nvjpegEncoderParamsCreate");
    check(nvjpegEncoderParamsSetQuality(css_params[k], quality, stream),
          "nvjpegEncoderParamsSetQuality");
    check(nvjpegEncoderParamsSetSamplingFactors(css_params[k], css[k], stream),
          "nvjpegEncoderParamsSetSamplingFactors");
  }
  return css_params[k];
}

std::vector<std::vector<std::uint8_t>> JpegCodec::encode_planes(
    const std::vector<DevicePlanes>& images, const jpeg::EncodeOptions& opt) {
  if (opt.quality < 1 || opt.quality > 100)
    throw UsageError("JPEG quality " + std::to_string(opt.quality) +
                     " out of range (valid: 1..100)");
  Impl& m = *impl_;
  m.ensure_encoder();
  const std::size_t states = m.opt.encoder_states > 0
                                 ? std::min(images.size(), std::size_t(m.opt.encoder_states))
                                 : images.size();
  while (m.plane_enc.size() < states) {
    nvjpegEncoderState_t e = nullptr;
    check(nvjpegEncoderStateCreate(m.enc, &e, m.stream), "nvjpegEncoderStateCreate");
    m.plane_enc.push_back(e);
  }
  const int out_h = opt.subsampling == jpeg::Subsampling::s444 ? 1 : 2;
  const int out_v = opt.subsampling == jpeg::Subsampling::s420 ? 2 : 1;
  // Scratch for the chroma planes that are averaged down (two per colour image at most), and
  // for copies of planes that do not start on a kAlign boundary: a batch whose Y plane followed
  // a 333x211 image in one buffer failed in nvjpegEncodeYUV (NVJPEG_STATUS_INVALID_PARAMETER)
  // where each image alone encoded, so every plane nvJPEG reads starts where cudaMalloc's would.
  const auto misaligned = [](const std::uint8_t* q) {
    return reinterpret_cast<std::uintptr_t>(q) % kAlign != 0;
  };
  std::size_t scratch = 0;
  for (const DevicePlanes& p : images) {
    const bool down = p.components == 3 && (p.chroma_h != out_h || p.chroma_v != out_v);
    if (down)
      scratch += 2 * align_up(std::size_t((p.width + out_h - 1) / out_h) *
                              std::size_t((p.height + out_v - 1) / out_v));
    for (int c = 0; c < (down ? 1 : p.components); ++c)
      if (misaligned(p.plane[c]))
        scratch += align_up(std::size_t(p.plane_width[c]) * std::size_t(p.plane_height[c]));
  }
  if (scratch > m.chroma.size()) m.chroma = DeviceBuffer<std::uint8_t>(scratch);
  std::size_t used = 0;
  // Queues image p's encode on `state` (its planes copied or averaged down first where needed).
  const auto queue_one = [&](const DevicePlanes& p, nvjpegEncoderState_t state) {
    if (p.width <= 0 || p.height <= 0 || (p.components != 1 && p.components != 3) || !p.plane[0])
      throw Error("nvJPEG encode: need decoded planes with a size");
    // A plane at a misaligned address, copied to the scratch first.
    const auto aligned_plane = [&](int c) {
      std::uint8_t* q = p.plane[c];
      if (!misaligned(q)) return q;
      const std::size_t n = std::size_t(p.plane_width[c]) * std::size_t(p.plane_height[c]);
      std::uint8_t* d = m.chroma.get() + used;
      used += align_up(n);
      HISTEQ_CUDA_CHECK(cudaMemcpyAsync(d, q, n, cudaMemcpyDeviceToDevice, m.stream));
      return d;
    };
    nvjpegImage_t src;
    std::memset(&src, 0, sizeof src);
    src.channel[0] = aligned_plane(0);
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
          src.channel[c] = aligned_plane(c);
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
    check(nvjpegEncodeYUV(m.enc, state, m.params_for(k, opt.quality), &src, css, p.width, p.height,
                          m.stream),
          "nvjpegEncodeYUV");
  };
  std::vector<std::vector<std::uint8_t>> out(images.size());
  // `states` images at a time: queued, synchronized, their bitstreams retrieved, then the next.
  for (std::size_t first = 0; first < images.size(); first += states) {
    const std::size_t last = std::min(images.size(), first + states);
    for (std::size_t i = first; i < last; ++i) queue_one(images[i], m.plane_enc[i - first]);
    HISTEQ_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    for (std::size_t i = first; i < last; ++i) {
      std::size_t len = 0;
      nvjpegEncoderState_t e = m.plane_enc[i - first];
      check(nvjpegEncodeRetrieveBitstream(m.enc, e, nullptr, &len, m.stream),
            "nvjpegEncodeRetrieveBitstream (size)");
      out[i].resize(len);
      check(nvjpegEncodeRetrieveBitstream(m.enc, e, out[i].data(), &len, m.stream),
            "nvjpegEncodeRetrieveBitstream");
      out[i].resize(len);
    }
    HISTEQ_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  }
  for (std::size_t i = 0; i < images.size(); ++i)
    jpeg::insert_metadata(out[i], images[i].exif, images[i].icc, images[i].components);
  return out;
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

}  // namespace histeq::gpu

#endif  // HISTEQ_HAVE_NVJPEG
