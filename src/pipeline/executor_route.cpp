// executor_route.cpp — where an item runs, between the executor's CPU workers and its device
// route (executor_run.hpp): a job the device hands back (written, encoded on the CPU, run
// another way, or failed), a queued device JPEG that a CPU worker takes back when it would
// finish it sooner than the device would reach it (steal_pays), so the run never waits on the
// device, and a JPEG whose stored planes a CPU worker decodes and hands to the device to
// equalize or match and encode (split_to_device).
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "executor_run.hpp"
#include "histeq/codec_names.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "jpeg_device.hpp"
#include "nvjpeg_hybrid.hpp"

namespace histeq {

using detail::Clock;
using detail::kDeviceMpPerS;
using detail::kDeviceReadyS;
using detail::Loaded;
using detail::ms_since;

/// The item of a device job, taken back from on_device (under mu).
Loaded* Executor::Run::take_back(detail::DeviceJob* job) {
  for (auto& [raw, own] : on_device)
    if (&raw->job == job) return raw;
  return nullptr;
}

/// A device job came back (on a slot thread, or on the thread that pushed it to a failed route).
void Executor::Run::device_done(detail::DeviceJob* job) {
  std::unique_lock<std::mutex> lock(mu);
  Loaded* raw = take_back(job);
  if (!raw) return;
  std::unique_ptr<Loaded> it = std::move(on_device[raw]);
  on_device.erase(raw);
  using S = detail::DeviceJob::Status;
  const bool cpu_may = !m.device_must;
  if (job->status == S::done) {
    sum.device.last_done_ms = ms_since(t_run);
    if (sum.device.first_done_ms == 0) sum.device.first_done_ms = sum.device.last_done_ms;
  }
  if (job->status == S::done && !job->encoded.empty()) {
    // (what a CPU worker decoded, split_to_device named jpeg-planes; the slot's own decodes,
    // hybrid ones of the pixels kind included, are the device route's)
    if (it->rep.route != to_string(ItemRoute::jpeg_planes))
      it->rep.route = to_string(ItemRoute::jpeg_device);
    write_q.push_back(it.release());
    cv_write.notify_one();
    return;
  }
  if (job->status == S::done) {  // pixels to encode on a CPU worker
    it->rep.route = to_string(ItemRoute::jpeg_device);
    it->encode_host = true;
  } else if (job->status == S::declined && job->planes && m.device_must) {
    // The hardware decoder declined it: the device still runs it, decoded another way.
    job->planes = false;
    on_device.emplace(raw, std::move(it));
    lock.unlock();
    dev->push(job);
    return;
  } else if (job->status == S::failed || (job->status == S::device_failed && !cpu_may)) {
    it->rep.error = job->error;
    it->rep.error_kind = job->error_kind;
    lock.unlock();
    finish(std::move(it));
    return;
  } else {  // declined, or the device failed and the CPU may take it: as the CPU would
    job->host_planes.reset();
    job->host_coefs.reset();
    job->device_planes.reset();
    charge_cpu(*it);
    fresh_report(*it);
  }
  cpu_q.push_front(std::move(it));
  cv_work.notify_one();
}

/// Whether a CPU worker taking this queued device item back finishes it sooner than the device
/// would reach and finish it.
bool Executor::Run::steal_pays(const Loaded& it) const {
  if (m.device_must || !dev) return false;
  const double mp = it.plan.megapixels();
  const double cpu_s = mp / std::max(1.0, cpu_mp_per_worker.load());
  switch (dev->state()) {
    case detail::JpegDevices::State::failed: return true;
    case detail::JpegDevices::State::starting: break;
    case detail::JpegDevices::State::encoding:
      break;  // (its hardware decoder is not ready)
    // A ready device is never robbed: its engines decode a file tens of times faster than a CPU
    // worker, and the CPU's own work (the files the hardware refuses) bounds the run. Weighing
    // the device's queue against one file's CPU time instead took the 10 GP plasma run from
    // 5.9 s to 9.0-9.7 s on the H200 machine (d9fc62c): the workers decoded baseline files.
    case detail::JpegDevices::State::ready: return false;
  }
  const double wait_s = std::max(0.1, kDeviceReadyS - ms_since(t_run) / 1e3);
  const double rate = dev->rate() > 0 ? dev->rate() : kDeviceMpPerS;
  return cpu_s < wait_s + dev->queued_megapixels() / rate;
}

/// The next item for a CPU worker (under mu): its own queue first, then a device item taken
/// back when that pays; null when there is nothing to do now.
std::unique_ptr<Loaded> Executor::Run::next_for_cpu(std::unique_lock<std::mutex>& lock) {
  if (!cpu_q.empty()) {
    std::unique_ptr<Loaded> it = std::move(cpu_q.front());
    cpu_q.pop_front();
    return it;
  }
  // A ready device keeps its queue (steal_pays), and so does one the run must use: taking a job
  // only to push it back would restart the slots' batch wait on every idle worker's poll.
  if (!dev || dev->queued() == 0 || m.device_must ||
      dev->state() == detail::JpegDevices::State::ready)
    return nullptr;
  lock.unlock();
  detail::DeviceJob* j = dev->steal();
  lock.lock();
  if (!j) return nullptr;
  Loaded* raw = take_back(j);
  if (!raw) return nullptr;
  if (!steal_pays(*raw)) {  // leave it to the device
    lock.unlock();
    dev->push(j);
    lock.lock();
    return nullptr;
  }
  std::unique_ptr<Loaded> it = std::move(on_device[raw]);
  on_device.erase(raw);
  charge_cpu(*it);
  return it;
}

/// A colour JPEG → JPEG on the CPU's stored-planes route while the device route encodes (ready, or
/// its encoder slots running before or without its decode slots): this worker decodes the stored
/// planes and hands them to the device, which equalizes Y and encodes (nvJPEG's encoder, tens of
/// times libjpeg-turbo's speed), so the CPU spends its time on the decode alone. A progressive file
/// (which the hardware decoder refuses, and whose entropy decoding is most of its decode) goes as
/// its coefficients: the device runs the inverse DCT too; with ExecutorOptions::progressive hybrid
/// or gpu, nvJPEG's decoder takes it instead (entropy decoding here or on the device, the rest on
/// the device: the planes never leave it). True when the item went to the device. A file whose EXIF
/// orientation turns its planes stays on the CPU's planes route (neither the coefficients nor
/// nvJPEG's planes are turned).
bool Executor::Run::split_to_device(std::unique_ptr<Loaded>& it) {
  if (!dev || !it->plan.cpu_planes || it->plan.route == ItemRoute::pixels ||
      it->plan.jpeg.orientation != 1 || !dev->encodes())
    return false;
  // Whatever the device's queue once it is ready: the worker's part (the decode) is the same
  // either way, and a worker that encodes too is off the progressive files that only the CPU
  // decodes (declining when the queue outweighed a fifth of the item's CPU time took the 10 GP
  // run from 5.9 s to 9.0-9.7 s, d9fc62c). Its encoder alone, though, is the end of every file
  // handed to it while the workers decode the rest, and its first batch pays its first uses: a
  // worker hands it a file only while fewer than two batches wait on it (checked before the
  // decode, so the workers decoding at that moment may add theirs), and encodes it otherwise.
  if (dev->state() == detail::JpegDevices::State::encoding &&
      dev->pending() >= 2 * std::size_t(std::max(1, m.opt.jpeg_batch)))
    return false;
  const bool coefficients = it->plan.jpeg_checked && it->plan.jpeg.progressive;
  // (ExecutorOptions::early_hybrid: a baseline file too, one the hardware decoder would take,
  // while the device has no hardware decoder running)
  const bool early = m.opt.early_hybrid && !coefficients && it->plan.jpeg_checked &&
                     gpu::nvjpeg_takes(it->plan.jpeg, m.opt.max_pixels) &&
                     dev->state() != detail::JpegDevices::State::ready;
  take_slot();
  std::shared_ptr<jpeg::Planes> planes;
  std::shared_ptr<jpeg::Coefficients> coefs;
  std::shared_ptr<gpu::HybridPlanes> on_dev;
  bool gpu_huffman = false;
  const auto t0 = Clock::now();
  try {
    jpeg::DecodeOptions dec;
    dec.max_pixels = m.opt.max_pixels;
    const std::uint8_t* data = it->bytes.data();
    // (nvJPEG decodes a scan with an undefined Huffman table differently: libjpeg-turbo takes it)
    if ((coefficients || early) && m.opt.progressive != ProgressiveJpeg::libjpeg &&
        !it->plan.jpeg.undefined_huffman_table) {
      if (gpu::HybridDecoder* h = dev->lease_hybrid()) {
        bool broken = false;  // a CUDA or nvJPEG failure: no more hybrid decodes this route
        gpu_huffman = h->gpu_huffman();
        try {
          on_dev = h->decode(data, it->bytes.size(), m.opt.max_pixels);
        } catch (const std::exception&) {
          broken = true;  // this file: libjpeg-turbo's coefficients or planes below
        }
        dev->return_hybrid(h, broken);
      }
    }
    if (!on_dev && coefficients)
      coefs = std::make_shared<jpeg::Coefficients>(
          jpeg::decode_coefficients(data, it->bytes.size(), it->rep.input, dec));
    else if (!on_dev)
      planes = std::make_shared<jpeg::Planes>(
          jpeg::decode_planes(data, it->bytes.size(), it->rep.input, dec));
  } catch (const std::exception&) {
    planes.reset();  // the CPU route decodes it again and reports the error
    coefs.reset();
    on_dev.reset();
  }
  give_slot();
  const int width = planes ? planes->width : coefs ? coefs->width : on_dev ? on_dev->width : 0;
  if (width == 0) return false;
  ItemReport& rep = it->rep;
  rep.times.decode_ms = ms_since(t0);
  rep.width = width;
  rep.height = planes ? planes->height : coefs ? coefs->height : on_dev->height;
  rep.channels = rep.output_channels = 3;
  rep.decoder = planes        ? codec::kLibjpegTurboYcbcr
                : coefs       ? codec::kLibjpegTurboCoefficients
                : gpu_huffman ? codec::kNvjpegGpuHybrid
                              : codec::kNvjpegHybrid;
  rep.route = to_string(ItemRoute::jpeg_planes);
  detail::DeviceJob& j = it->job;
  j.bytes = &it->bytes;
  j.name = rep.input;
  j.out_ext = it->ext;
  j.megapixels = it->plan.megapixels();
  j.rep = &rep;
  j.host_planes = std::move(planes);
  j.host_coefs = std::move(coefs);
  j.device_planes = std::move(on_dev);
  Loaded* raw = it.get();
  {
    std::lock_guard<std::mutex> lock(mu);
    on_device.emplace(raw, std::move(it));
  }
  dev->push(&raw->job);
  return true;
}

}  // namespace histeq
