// jpeg_slot.cpp — what a slot of the JPEG device route does with one batch (jpeg_slot.hpp).
#include "jpeg_slot.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "histeq/codec_names.hpp"
#include "histeq/error.hpp"
#include "histeq/item.hpp"
#include "histeq/match.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/planes.hpp"
#include "jpeg/idct.hpp"
#include "nvjpeg_hybrid.hpp"
#include "support/cuda_check.hpp"

namespace histeq::detail {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// `n` bytes rounded up to 256, so that planes packed into one buffer each start where a
/// cudaMalloc'd one would. Packed end to end, a batch whose Y plane followed one of odd width x
/// height (333x211) failed in nvjpegEncodeYUV (NVJPEG_STATUS_INVALID_PARAMETER) where each of its
/// files alone encoded (ExecutorJpeg.GpuRouteWritesTheSingleFileGpuBytes).
std::size_t aligned(std::size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

struct SlotBatches::Impl {
  const JpegDevices::Options& opt;
  std::shared_ptr<const std::vector<Histogram>> plane_reference;

  Impl(const JpegDevices::Options& o, std::shared_ptr<const std::vector<Histogram>> r)
      : opt(o), plane_reference(std::move(r)) {}

  /// Spreads a batch's host milliseconds over its jobs by their pixels.
  static double share(double ms, const DeviceJob* j, double batch_mp) {
    return batch_mp > 0 ? ms * j->megapixels / batch_mp : 0;
  }

  /// The planes kind: hardware decode to the stored planes, Y equalized or matched in one batch
  /// (y_batch), encoded from the planes.
  void run_planes(SlotState& s, std::vector<DeviceJob*>& b, double* dec_ms, double* enc_ms) {
    std::vector<gpu::JpegInput> in;
    for (DeviceJob* j : b) in.push_back({j->bytes->data(), j->bytes->size(), j->name});
    const auto t0 = Clock::now();
    std::vector<gpu::DevicePlanes> dec = s.codec.decode_planes(in);
    const auto t1 = Clock::now();
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < dec.size(); ++i) {
      if (dec[i].declined)
        b[i]->status = DeviceJob::Status::declined;
      else
        at.push_back(i);
    }
    std::vector<std::vector<std::uint8_t>> out = equalize_encode(s, dec, at);
    const auto t2 = Clock::now();
    *dec_ms = ms_between(t0, t1);
    *enc_ms = ms_between(t1, t2);
    double batch_mp = 0;
    for (std::size_t i : at) batch_mp += b[i]->megapixels;
    const std::string& device = s.device;
    for (std::size_t k = 0; k < at.size(); ++k) {
      DeviceJob* j = b[at[k]];
      const gpu::DevicePlanes& d = dec[at[k]];
      ItemReport& rep = *j->rep;
      rep.width = d.width;
      rep.height = d.height;
      rep.channels = rep.output_channels = d.components;
      rep.decoder = codec::kNvjpegHardware;
      rep.encoder = codec::kNvjpeg;
      EqualizeReport& er = rep.equalize;
      er.backend = "cuda";
      er.device = device;
      er.kernel = "batched";
      er.mode = d.components == 1 ? Mode::gray : Mode::luma;
      rep.times.decode_ms = share(ms_between(t0, t1), j, batch_mp);
      // equalization and encode share one synchronize: their time together, as encode
      rep.times.encode_ms = share(ms_between(t1, t2), j, batch_mp);
      j->encoded = std::move(out[k]);
      j->status = DeviceJob::Status::done;
    }
  }

  /// Y of each plane set `at` through y_batch into the slot's buffer, then the sets encoded from
  /// the planes; the encoded files in order.
  std::vector<std::vector<std::uint8_t>> equalize_encode(SlotState& s,
                                                         const std::vector<gpu::DevicePlanes>& dec,
                                                         const std::vector<std::size_t>& at) {
    std::size_t total = 0;
    for (std::size_t i : at)
      total += aligned(std::size_t(dec[i].width) * std::size_t(dec[i].height));
    if (s.y_out.size() < total) s.y_out = DeviceBuffer<std::uint8_t>(total + total / 4);
    std::uint8_t* y = s.y_out.get();
    std::vector<gpu::Equalizer::BatchImage> imgs;
    std::vector<gpu::DevicePlanes> enc;
    for (std::size_t i : at) {
      const std::size_t n = std::size_t(dec[i].width) * std::size_t(dec[i].height);
      imgs.push_back({dec[i].plane[0], y, n});
      enc.push_back(dec[i]);
      enc.back().plane[0] = y;
      y += aligned(n);
    }
    if (imgs.empty()) return {};
    y_batch(s, imgs);
    return s.codec.encode_planes(enc, opt.encode);
  }

  /// The operation on a batch of Y (or gray) planes, as the CPU's planes route runs it on one:
  /// equalized (each as equalize_gray alone: the formula's LUT of its histogram) in one batched
  /// launch pair, or matched to the reference (each plane's histogram, match_lut against the
  /// reference's counts, the same apply) in one batch.
  void y_batch(SlotState& s, const std::vector<gpu::Equalizer::BatchImage>& imgs) {
    if (plane_reference)
      s.eq.match_batch(imgs.data(), imgs.size(), s.reference.get());
    else
      s.eq.equalize_batch(imgs.data(), imgs.size(), opt.equalize.formula);
  }

  /// The slot's coefficient and transform buffers large enough for every component of the
  /// batch's coefficient jobs, grown (with room to spare) only after the slot's stream has
  /// finished with the old ones.
  static void size_coefficient_buffers(SlotState& s, const std::vector<DeviceJob*>& b) {
    std::size_t coefs = 0, bytes = 0;
    for (const DeviceJob* j : b)
      if (j->host_coefs)
        for (const jpeg::CoefficientPlane& cp : j->host_coefs->comp) {
          coefs = std::max(coefs, cp.coef.size());
          bytes = std::max(bytes, cp.plane.stride * std::size_t(cp.plane.rows));
        }
    if (s.coefs.size() >= coefs && s.idct_out.size() >= bytes) return;
    s.eq.synchronize();
    if (s.coefs.size() < coefs) s.coefs = DeviceBuffer<std::int16_t>(coefs + coefs / 4);
    if (s.idct_out.size() < bytes) s.idct_out = DeviceBuffer<std::uint8_t>(bytes + bytes / 4);
  }

  /// One component's coefficients uploaded into the slot's coefficient buffer (sized by
  /// size_coefficient_buffers), the inverse DCT into its plane buffer (decode_planes' layout),
  /// and its width x height samples copied to `dst` (rows of width bytes), all on the slot's
  /// stream.
  void upload_coefficients(SlotState& s, const jpeg::CoefficientPlane& cp, std::uint8_t* dst) {
    const cudaStream_t st = reinterpret_cast<cudaStream_t>(s.eq.stream());
    const jpeg::Plane& g = cp.plane;
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(s.coefs.get(), cp.coef.data(),
                                      cp.coef.size() * sizeof(std::int16_t), cudaMemcpyHostToDevice,
                                      st));
    kernels::IdctPlane a;
    a.d_coef = s.coefs.get();
    for (int k = 0; k < 64; ++k) a.quant.q[k] = cp.quant[k];
    a.blocks_w = cp.blocks_w;
    a.blocks_h = cp.blocks_h;
    a.d_plane = s.idct_out.get();
    a.stride = g.stride;
    a.rows = g.rows;
    a.width = g.width;
    a.height = g.height;
    a.pad = false;  // only the width x height samples are copied out
    kernels::idct_plane(a, st);
    HISTEQ_CUDA_CHECK(cudaMemcpy2DAsync(dst, std::size_t(g.width), s.idct_out.get(), g.stride,
                                        std::size_t(g.width), std::size_t(g.height),
                                        cudaMemcpyDeviceToDevice, st));
  }

  /// The host-planes kind: the planes a CPU worker decoded, uploaded (only their width x height
  /// samples), or made here from the coefficients it read (upload_coefficients); Y equalized or
  /// matched and the planes encoded as the planes kind does.
  void run_host_planes(SlotState& s, std::vector<DeviceJob*>& b, double* up_ms, double* enc_ms) {
    const auto t0 = Clock::now();
    std::size_t total = 0;
    for (const DeviceJob* j : b)
      for (int c = 0; c < 3 && !j->device_planes; ++c) {
        const jpeg::Plane& p =
            j->host_planes ? j->host_planes->plane[c] : j->host_coefs->comp[c].plane;
        total += aligned(std::size_t(p.width) * std::size_t(p.height));
      }
    if (s.planes_in.size() < total) {
      s.eq.synchronize();  // the slot's stream done with the old buffer
      s.planes_in = DeviceBuffer<std::uint8_t>(total + total / 4);
    }
    size_coefficient_buffers(s, b);
    std::uint8_t* d = s.planes_in.get();
    const cudaStream_t st = reinterpret_cast<cudaStream_t>(s.eq.stream());
    std::vector<gpu::DevicePlanes> dev(b.size());
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (b[i]->device_planes) {  // decoded on the device already: wait for them, no copy
        const gpu::HybridPlanes& hp = *b[i]->device_planes;
        hp.wait_on(st);
        gpu::DevicePlanes& p = dev[i];
        p.width = hp.width;
        p.height = hp.height;
        p.components = 3;
        p.chroma_h = hp.chroma_h;
        p.chroma_v = hp.chroma_v;
        p.exif = hp.exif;
        p.icc = hp.icc;
        for (int c = 0; c < 3; ++c) {
          p.plane[c] = hp.plane[c];
          p.plane_width[c] = hp.plane_width[c];
          p.plane_height[c] = hp.plane_height[c];
        }
        at.push_back(i);
        continue;
      }
      const bool coefs = b[i]->host_coefs != nullptr;
      const jpeg::Plane* src[3];
      for (int c = 0; c < 3; ++c)
        src[c] = coefs ? &b[i]->host_coefs->comp[c].plane : &b[i]->host_planes->plane[c];
      gpu::DevicePlanes& p = dev[i];
      p.width = coefs ? b[i]->host_coefs->width : b[i]->host_planes->width;
      p.height = coefs ? b[i]->host_coefs->height : b[i]->host_planes->height;
      p.components = 3;
      p.chroma_h = src[0]->h / std::max(1, src[1]->h);
      p.chroma_v = src[0]->v / std::max(1, src[1]->v);
      p.exif = coefs ? b[i]->host_coefs->exif : b[i]->host_planes->exif;
      p.icc = coefs ? b[i]->host_coefs->icc : b[i]->host_planes->icc;
      for (int c = 0; c < 3; ++c) {
        p.plane[c] = d;
        p.plane_width[c] = src[c]->width;
        p.plane_height[c] = src[c]->height;
        if (coefs)
          upload_coefficients(s, b[i]->host_coefs->comp[c], d);
        else
          HISTEQ_CUDA_CHECK(cudaMemcpy2DAsync(
              d, std::size_t(src[c]->width), src[c]->data.get(), src[c]->stride,
              std::size_t(src[c]->width), std::size_t(src[c]->height), cudaMemcpyHostToDevice, st));
        d += aligned(std::size_t(src[c]->width) * std::size_t(src[c]->height));
      }
      at.push_back(i);
    }
    const auto t1 = Clock::now();
    std::vector<std::vector<std::uint8_t>> out = equalize_encode(s, dev, at);
    const auto t2 = Clock::now();
    *up_ms = ms_between(t0, t1);
    *enc_ms = ms_between(t1, t2);
    double batch_mp = 0;
    for (const DeviceJob* j : b) batch_mp += j->megapixels;
    for (std::size_t i = 0; i < b.size(); ++i) {
      DeviceJob* j = b[i];
      ItemReport& rep = *j->rep;
      rep.encoder = codec::kNvjpeg;
      rep.equalize.backend = "cuda";
      rep.equalize.device = s.device;
      rep.equalize.kernel = "batched";
      rep.equalize.mode = Mode::luma;
      rep.times.upload_ms = share(*up_ms, j, batch_mp);
      rep.times.encode_ms = share(*enc_ms, j, batch_mp);
      j->encoded = std::move(out[i]);
      j->host_planes.reset();
      j->host_coefs.reset();
      if (j->device_planes) {  // encoded: the planes' memory goes back after this stream's work
        j->device_planes->release(st);
        j->device_planes.reset();
      }
      j->status = DeviceJob::Status::done;
    }
  }

  /// The pixels kind: decoded to RGB or gray (hardware, hybrid or libjpeg-turbo per file),
  /// equalized or matched (the reference's histograms for the image's mode, as the CPU's run
  /// takes them) by the stage sequence, encoded by nvJPEG (a JPEG output) or downloaded.
  void run_pixels(SlotState& s, std::vector<DeviceJob*>& b, double* dec_ms, double* enc_ms) {
    std::vector<gpu::JpegInput> in;
    for (DeviceJob* j : b) in.push_back({j->bytes->data(), j->bytes->size(), j->name});
    auto t = Clock::now();
    const std::vector<gpu::DeviceImage> dec = s.codec.decode(in);
    const double decode_ms = ms_between(t, Clock::now());
    *dec_ms = decode_ms;
    const auto t_rest = Clock::now();
    struct Rest {
      Clock::time_point t;
      double* ms;
      ~Rest() { *ms = ms_between(t, Clock::now()); }
    } rest{t_rest, enc_ms};
    double batch_mp = 0;
    for (const auto& d : dec) batch_mp += d.error.empty() ? double(d.width) * d.height / 1e6 : 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
      DeviceJob& j = *b[i];
      const gpu::DeviceImage& img = dec[i];
      if (!img.error.empty()) {
        j.status = DeviceJob::Status::failed;
        j.error = img.error;
        j.error_kind = ItemError::decode;  // (a CUDA failure throws: the slot fails)
        continue;
      }
      ItemReport& rep = *j.rep;
      rep.width = img.width;
      rep.height = img.height;
      rep.channels = img.channels;
      rep.decoder = img.decoder;
      j.megapixels = double(img.width) * img.height / 1e6;
      rep.times.decode_ms = share(decode_ms, &j, batch_mp);
      const Mode mode = opt.equalize.mode.value_or(default_mode(img.channels));
      const int out_ch = output_channels(mode, img.channels);
      const std::size_t px = std::size_t(img.width) * std::size_t(img.height);
      if (s.d_out.size() < px * std::size_t(out_ch))
        s.d_out = DeviceBuffer<std::uint8_t>(px * std::size_t(out_ch));
      std::uint8_t* d_out = s.d_out.get();
      try {
        EqualizeReport& er = rep.equalize;
        EqualizeOptions eo = opt.equalize;
        if (opt.reference) eo.reference = opt.reference->histograms(mode, img.channels, 8);
        s.engine.run_device(img.pixels, img.width, img.height, img.channels, eo, d_out, er);
        rep.times.equalize_ms = er.times.histogram_ms + er.times.cdf_lut_ms + er.times.apply_ms;
        er.luts.clear();
        er.histograms.clear();
        rep.output_channels = out_ch;
        t = Clock::now();
        if ((j.out_ext == ".jpg" || j.out_ext == ".jpeg") && (out_ch == 1 || out_ch == 3)) {
          j.encoded =
              s.codec.encode(d_out, img.width, img.height, out_ch, opt.encode, img.exif, img.icc);
          rep.encoder = codec::kNvjpeg;
          rep.times.encode_ms = ms_between(t, Clock::now());
        } else {
          j.host.width = img.width;
          j.host.height = img.height;
          j.host.channels = out_ch;
          j.host.exif = img.exif;
          j.host.icc = img.icc;
          j.host.pixels.resize(px * std::size_t(out_ch));
          HISTEQ_CUDA_CHECK(cudaMemcpyAsync(j.host.pixels.data(), d_out, j.host.pixels.size(),
                                            cudaMemcpyDeviceToHost,
                                            reinterpret_cast<cudaStream_t>(s.eq.stream())));
          s.eq.synchronize();
          rep.times.download_ms = ms_between(t, Clock::now());
        }
        j.status = DeviceJob::Status::done;
      } catch (const CudaError&) {
        throw;
      } catch (const std::exception& e) {
        j.status = DeviceJob::Status::failed;
        j.error = e.what();
        j.error_kind = error_kind_of(e);
      }
    }
  }
};

SlotBatches::SlotBatches(const JpegDevices::Options& opt,
                         std::shared_ptr<const std::vector<Histogram>> plane_reference)
    : impl_(std::make_unique<Impl>(opt, std::move(plane_reference))) {}

SlotBatches::~SlotBatches() = default;

void SlotBatches::run_planes(SlotState& s, std::vector<DeviceJob*>& b, double* dec_ms,
                             double* enc_ms) {
  impl_->run_planes(s, b, dec_ms, enc_ms);
}

void SlotBatches::run_host_planes(SlotState& s, std::vector<DeviceJob*>& b, double* up_ms,
                                  double* enc_ms) {
  impl_->run_host_planes(s, b, up_ms, enc_ms);
}

void SlotBatches::run_pixels(SlotState& s, std::vector<DeviceJob*>& b, double* dec_ms,
                             double* enc_ms) {
  impl_->run_pixels(s, b, dec_ms, enc_ms);
}

}  // namespace histeq::detail
