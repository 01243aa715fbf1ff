// jpeg_device.cpp — the executor's device route for JPEG files (jpeg_device.hpp).
//
// Measured on the H200 (docs/benchmarks.md, "JPEG on the device"): the context takes about 0.3 s
// and each nvJPEG handle about 0.5 s to create, a decode state about 0.08 s (and 0.1-0.15 s to
// destroy); the hardware decoder reaches 5,500-7,300 MP/s on batches of 8-64 photos with two
// batches in flight, the encoder 17,000-30,000 MP/s. So one handle per GPU, made at once on its
// own thread, serves decode and encode; each slot keeps its decode state, encoder states and
// buffers for the whole run; several slots keep the engines busy while one waits on its host
// work; nothing is created or destroyed per batch.
#include "jpeg_device.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "histeq/codec_names.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/match.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/planes.hpp"
#include "image_engine.hpp"
#include "jpeg/idct.hpp"
#include "nvjpeg_hybrid.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"

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

/// A waiting thread sleeps until the device is done (cudaDeviceScheduleBlockingSync) instead of
/// spinning on a core, which the CPU workers need. Set before the context exists; a context made
/// elsewhere keeps its flags.
void prefer_blocking_sync(int dev) {
  if (cudaSetDevice(dev) == cudaSuccess) cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
  cudaGetLastError();
}

}  // namespace

struct JpegDevices::Impl : std::enable_shared_from_this<JpegDevices::Impl> {
  Options opt;
  /// Matching: the histogram the Y plane of a colour JPEG (luma mode) and the plane of a gray
  /// one are matched to, the reference's for a one-plane 8-bit image (MatchReference gives
  /// both the same: its gray plane or its luma); null for equalization.
  std::shared_ptr<const std::vector<Histogram>> plane_reference;
  Done done;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<DeviceJob*> q;
  double q_mp = 0;
  std::size_t running = 0;
  State st = State::starting;
  std::string why;
  bool stop = false;
  Clock::time_point t0 = Clock::now(), t_first{};
  bool started_batches = false;
  double mp_done = 0, ready_ms = 0, handles_ms = 0;
  std::size_t n_done = 0;
  bool feeding = true;
  Clock::time_point t_nonempty{};  ///< when the queue last became non-empty
  Stats st_totals;
  int devices_pending = 0;
  std::vector<std::thread> init_threads, slot_threads;
  /// The CPU workers' hybrid decoders (lease_hybrid): on the route's one device (-1: several
  /// devices, no hybrid decoders), each leased to one worker at a time.
  int hybrid_device = -1;
  bool hybrid_failed = false;
  std::vector<std::unique_ptr<gpu::HybridDecoder>> hybrids;
  std::vector<gpu::HybridDecoder*> hybrid_free;

  /// Makes device `dev`'s context and handles, then starts its slots.
  void init_device(int dev, int slots) {
    std::shared_ptr<gpu::JpegHandles> h;
    std::string err;
    try {
      prefer_blocking_sync(dev);
      HISTEQ_CUDA_CHECK(cudaSetDevice(dev));
      HISTEQ_CUDA_CHECK(cudaFree(nullptr));  // the context
      const auto th = Clock::now();
      h = gpu::make_jpeg_handles(dev);
      std::lock_guard<std::mutex> lock(mu);
      handles_ms = std::max(handles_ms, ms_between(th, Clock::now()));
    } catch (const std::exception& e) {
      err = e.what();
    }
    std::vector<DeviceJob*> back;
    {
      std::lock_guard<std::mutex> lock(mu);
      --devices_pending;
      if (err.empty()) {
        if (st != State::ready) ready_ms = ms_between(t0, Clock::now());
        st = State::ready;
        if (!stop)
          for (int k = 0; k < slots; ++k) {
            auto self = shared_from_this();
            slot_threads.emplace_back([self, dev, h] { self->slot_loop(dev, h); });
          }
      } else if (st != State::ready && devices_pending == 0) {
        st = State::failed;
        why = err;
        back.assign(q.begin(), q.end());
        q.clear();
        q_mp = 0;
      }
    }
    cv.notify_all();
    hand_back(back, DeviceJob::Status::device_failed, err);
  }

  void hand_back(const std::vector<DeviceJob*>& jobs, DeviceJob::Status s, const std::string& e) {
    for (DeviceJob* j : jobs) {
      j->status = s;
      j->error = e;
      done(j);
    }
  }

  static bool worker_decoded(const DeviceJob& j) {
    return j.host_planes || j.host_coefs || j.device_planes;
  }
  static int kind_of(const DeviceJob& j) { return worker_decoded(j) ? 2 : j.planes ? 1 : 0; }

  /// Up to opt.batch queued jobs of the kind of the first, once a batch is full, or the oldest
  /// has waited kBatchWait, or no more are coming; empty when stopping.
  std::vector<DeviceJob*> take() {
    constexpr auto kBatchWait = std::chrono::milliseconds(3);
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (st == State::failed || (stop && q.empty())) return {};
      if (!q.empty() && (int(q.size()) >= std::max(1, opt.batch) || !feeding || stop ||
                         Clock::now() - t_nonempty >= kBatchWait))
        break;
      if (q.empty())
        cv.wait(lock);
      else
        cv.wait_until(lock, t_nonempty + kBatchWait);
    }
    std::vector<DeviceJob*> b;
    const int kind = kind_of(*q.front());
    while (!q.empty() && kind_of(*q.front()) == kind && int(b.size()) < std::max(1, opt.batch)) {
      b.push_back(q.front());
      q_mp -= q.front()->megapixels;
      q.pop_front();
    }
    running += b.size();
    if (!q.empty()) t_nonempty = Clock::now();
    if (!started_batches) {
      started_batches = true;
      t_first = Clock::now();
    }
    return b;
  }

  void finished(const std::vector<DeviceJob*>& b, double decode_ms, double encode_ms) {
    {
      std::lock_guard<std::mutex> lock(mu);
      running -= b.size();
      ++st_totals.batches;
      st_totals.decode_ms += decode_ms;
      st_totals.encode_ms += encode_ms;
      for (const DeviceJob* j : b)
        if (j->status == DeviceJob::Status::done) {
          ++st_totals.files;
          st_totals.megapixels += j->megapixels;
        }
      for (const DeviceJob* j : b)
        if (j->status == DeviceJob::Status::done) {
          ++n_done;
          mp_done += j->megapixels;
        }
    }
    // Every job is handed over once, even when a hand-over throws (the first error is
    // rethrown after the others: the slot then fails, with no job of this batch in hand).
    std::exception_ptr first;
    for (DeviceJob* j : b) {
      try {
        done(j);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  void slot_loop(int dev, std::shared_ptr<gpu::JpegHandles> h) {
    std::unique_ptr<SlotState> s;
    std::vector<DeviceJob*> b;
    try {
      HISTEQ_CUDA_CHECK(cudaSetDevice(dev));
      gpu::JpegCodecOptions jo;
      jo.max_pixels = opt.max_pixels;
      s = std::make_unique<SlotState>(jo, std::move(h));
      s->codec.hardware_available();  // the decode state now, not in the first batch
      // Matching's reference on the slot's stream, ahead of its batches (the histogram lives
      // as long as the route).
      if (plane_reference) {
        const Histogram& r = plane_reference->front();
        s->reference = DeviceBuffer<std::uint64_t>(r.size());
        HISTEQ_CUDA_CHECK(cudaMemcpyAsync(s->reference.get(), r.data(), s->reference.bytes(),
                                          cudaMemcpyHostToDevice,
                                          reinterpret_cast<cudaStream_t>(s->eq.stream())));
      }
      for (;;) {
        b = take();
        if (b.empty()) break;
        double dec_ms = 0, enc_ms = 0;
        if (worker_decoded(*b.front()))
          run_host_planes(*s, b, &dec_ms, &enc_ms);
        else if (b.front()->planes)
          run_planes(*s, b, &dec_ms, &enc_ms);
        else
          run_pixels(*s, b, &dec_ms, &enc_ms);
        const std::vector<DeviceJob*> ran = std::move(b);
        b.clear();  // handed over by finished(): not fail_all's to hand back
        finished(ran, dec_ms, enc_ms);
      }
    } catch (const std::exception& e) {
      // Planes on the device that the batch in hand read: its stream's work done (or failed)
      // before they can be freed (best effort: the device is in trouble).
      if (s) cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(s->eq.stream()));
      fail_all(b, e.what());
    }
  }

  /// The device is in trouble: the jobs in hand and every queued one go back as device_failed,
  /// and later pushes too.
  void fail_all(const std::vector<DeviceJob*>& in_hand, const std::string& e) {
    std::vector<DeviceJob*> back;
    {
      std::lock_guard<std::mutex> lock(mu);
      running -= in_hand.size();
      st = State::failed;
      why = e;
      back.assign(q.begin(), q.end());
      q.clear();
      q_mp = 0;
    }
    cv.notify_all();
    for (DeviceJob* j : in_hand)
      if (j->status == DeviceJob::Status::done) j->status = DeviceJob::Status::device_failed;
    std::vector<DeviceJob*> all(in_hand);
    all.insert(all.end(), back.begin(), back.end());
    hand_back(all, DeviceJob::Status::device_failed, e);
  }

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
      }
    }
  }
};

JpegDevices::JpegDevices(Options opt, Done done) : impl_(std::make_shared<Impl>()) {
  // The batched kernels count every pixel; the executor plans this route only for that (a
  // region takes the pixels route), so a region here is a planning bug, and so is a reference
  // in the per-image field (matching's reference comes as Options::reference).
  if (!opt.equalize.region.all() || opt.equalize.reference)
    throw Error(
        "JPEG device route: a counted region or a per-image reference reached the route "
        "that counts whole images and takes matching's reference as its own option");
  Impl& m = *impl_;
  if (opt.reference) {  // once per route, as the CPU route's (UsageError: no pixel)
    m.plane_reference = opt.reference->histograms(Mode::luma, 3, 8);
    check_match_reference(*m.plane_reference, 1, 256);
  }
  m.opt = std::move(opt);
  m.done = std::move(done);
  std::map<int, int> slots;  // device → slots (a repeated ordinal: more slots on it)
  if (m.opt.devices.empty()) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      count = 0;
    }
    for (int d = 0; d < count; ++d) slots[d] = m.opt.slots;
    if (count == 0) {
      m.st = State::failed;
      m.why = "no CUDA device found";
      return;
    }
  } else {
    for (int d : m.opt.devices) slots[d] += m.opt.slots;
  }
  m.devices_pending = int(slots.size());
  if (slots.size() == 1) m.hybrid_device = slots.begin()->first;
  for (const auto& [dev, n] : slots) {
    auto self = impl_;
    m.init_threads.emplace_back([self, dev = dev, n = n] { self->init_device(dev, n); });
  }
}

JpegDevices::~JpegDevices() {
  Impl& m = *impl_;
  std::vector<DeviceJob*> back;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.stop = true;
    back.assign(m.q.begin(), m.q.end());
    m.q.clear();
    m.q_mp = 0;
  }
  m.cv.notify_all();
  m.hand_back(back, DeviceJob::Status::declined, "");
  for (auto& t : m.init_threads) t.join();
  std::vector<std::thread> slots;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    slots.swap(m.slot_threads);
  }
  for (auto& t : slots) t.join();
}

JpegDevices::State JpegDevices::state() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->st;
}

JpegDevices::State JpegDevices::wait_started() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return impl_->st != State::starting; });
  return impl_->st;
}

std::string JpegDevices::failure() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->why;
}

void JpegDevices::push(DeviceJob* job) {
  Impl& m = *impl_;
  std::string why;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.st != State::failed && !m.stop) {
      if (m.q.empty()) m.t_nonempty = Clock::now();
      m.q.push_back(job);
      m.q_mp += job->megapixels;
      m.cv.notify_one();
      return;
    }
    why = m.why;
  }
  m.hand_back({job}, DeviceJob::Status::device_failed, why);
}

DeviceJob* JpegDevices::steal() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  // The last queued job a CPU worker has not decoded already (host planes or coefficients are a
  // worker's finished decode: the device only has the rest to do).
  for (auto it = impl_->q.rbegin(); it != impl_->q.rend(); ++it) {
    DeviceJob* j = *it;
    if (Impl::worker_decoded(*j)) continue;
    impl_->q.erase(std::next(it).base());
    impl_->q_mp -= j->megapixels;
    return j;
  }
  return nullptr;
}

gpu::HybridDecoder* JpegDevices::lease_hybrid() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.st != State::ready || m.hybrid_device < 0 || m.hybrid_failed || !gpu::hybrid_built())
      return nullptr;
    if (!m.hybrid_free.empty()) {
      gpu::HybridDecoder* d = m.hybrid_free.back();
      m.hybrid_free.pop_back();
      return d;
    }
  }
  std::unique_ptr<gpu::HybridDecoder> made;
  try {
    made = std::make_unique<gpu::HybridDecoder>(m.hybrid_device);
  } catch (const std::exception&) {  // the workers go on with libjpeg-turbo
    std::lock_guard<std::mutex> lock(m.mu);
    m.hybrid_failed = true;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(m.mu);
  m.hybrids.push_back(std::move(made));
  return m.hybrids.back().get();
}

void JpegDevices::return_hybrid(gpu::HybridDecoder* d, bool broken) {
  if (!d) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (broken)
    impl_->hybrid_failed = true;
  else
    impl_->hybrid_free.push_back(d);
}

std::size_t JpegDevices::queued() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->q.size();
}

double JpegDevices::queued_megapixels() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return std::max(impl_->q_mp, 0.0);
}

std::size_t JpegDevices::pending() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->q.size() + impl_->running;
}

double JpegDevices::rate() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->started_batches || impl_->mp_done <= 0) return 0;
  const double s = ms_between(impl_->t_first, Clock::now()) / 1e3;
  return s > 0 ? impl_->mp_done / s : 0;
}

void JpegDevices::set_feeding(bool more_coming) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->feeding = more_coming;
  }
  impl_->cv.notify_all();
}

JpegDevices::Stats JpegDevices::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->st_totals;
}

double JpegDevices::ready_ms() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->ready_ms;
}

double JpegDevices::handles_ms() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->handles_ms;
}

}  // namespace histeq::detail
