// jpeg_device.cpp — the executor's device route for JPEG files (jpeg_device.hpp): devices and
// their handles, the queue and its batches, the slot threads, the CPU workers' hybrid decoders;
// what a slot does with a batch is jpeg_slot.cpp's.
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
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>

#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/match.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/pipeline.hpp"
#include "jpeg_slot.hpp"
#include "nvjpeg_hybrid.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"

namespace histeq::detail {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// A waiting thread sleeps until the device is done (cudaDeviceScheduleBlockingSync) instead of
/// spinning on a core, which the CPU workers need. Set before the context exists; a context made
/// elsewhere keeps its flags.
void prefer_blocking_sync(int dev) {
  if (cudaSetDevice(dev) == cudaSuccess) cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
  cudaGetLastError();
}

/// Encoder states per slot (JpegDevices::Options::encoder_states 0): each state's first encode
/// costs 17-35 ms beside 16 busy threads (bench/probes/ready_probe --encoders, H100 machine),
/// so a slot with one state per image of its batch (16) paid 0.42-0.94 s in its first batch's
/// equalize and encode where four pay 0.13-0.24 s, and the 10 GP folder ran 3.97 s on average
/// (3.84-4.15) against 4.11 s (3.88-4.36), seven pairs in turns on H100 machines
/// (bench/results/h100/e2e/encoder_states.txt). Four also hold a quarter of what sixteen hold.
constexpr int kSlotEncoderStates = 4;

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
  double mp_done = 0, ready_ms = 0, handles_ms = 0, encoder_ready_ms = 0;
  /// Options::decoders, or want_decoders() called: the init threads make the decode slots.
  bool decoders_wanted = true;
  std::size_t n_done = 0;
  bool feeding = true;
  Clock::time_point t_nonempty{};  ///< when the queue last became non-empty
  Stats st_totals;
  int devices_pending = 0;
  std::vector<std::thread> init_threads, slot_threads;
  /// The CPU workers' hybrid decoders (lease_hybrid): on the route's one device (-1: several
  /// devices, no hybrid decoders), each leased to one worker at a time, all on the device's
  /// shared handles (hybrid_handles, set before the route is ready). The first is made on its
  /// own thread (hybrid_init: on a GPU without a JPEG engine it creates the default-backend
  /// handle, about 0.3-0.5 s), while the workers go on with libjpeg-turbo; the others are made
  /// by the worker that needs one (a few milliseconds).
  int hybrid_device = -1;
  std::shared_ptr<gpu::JpegHandles> hybrid_handles;
  bool hybrid_failed = false;
  bool hybrid_first_asked = false, hybrid_first_made = false;
  std::thread hybrid_init;
  std::vector<std::unique_ptr<gpu::HybridDecoder>> hybrids;
  std::vector<gpu::HybridDecoder*> hybrid_free;
  int gpu_huffman_made = 0;

  /// Whether the next hybrid decoder made runs GPU Huffman decoding (counted; under mu).
  bool next_gpu_huffman() {
    if (!opt.gpu_huffman) return false;
    if (opt.gpu_huffman_decoders > 0 && gpu_huffman_made >= opt.gpu_huffman_decoders) return false;
    ++gpu_huffman_made;
    return true;
  }

  /// hybrid_init's work: the first decoder (or opt.hybrid_decoders of them, one after another),
  /// each in the free list once made (or hybrid_failed).
  void make_first_hybrids() {
    const int n = std::max(1, opt.hybrid_decoders);
    for (int k = 0; k < n; ++k) {
      std::unique_ptr<gpu::HybridDecoder> d;
      bool gpu_huffman = false;
      std::shared_ptr<gpu::JpegHandles> handles;
      {
        std::lock_guard<std::mutex> lock(mu);
        gpu_huffman = next_gpu_huffman();
        handles = hybrid_handles;
      }
      try {
        d = std::make_unique<gpu::HybridDecoder>(handles, gpu_huffman);
      } catch (const std::exception&) {  // the workers go on with libjpeg-turbo
      }
      std::lock_guard<std::mutex> lock(mu);
      hybrid_first_made = true;
      if (!d) {
        hybrid_failed = true;
        return;
      }
      hybrid_free.push_back(d.get());
      hybrids.push_back(std::move(d));
      if (stop) return;
    }
  }

  /// Makes device `dev`'s context and handles; in a route started without decoders, its encoder
  /// slots' states, and starts those slots (the route encodes from then on); then, once decoders
  /// are wanted (at once in a whole route), its decode slots' states, and starts them (the route
  /// is ready).
  /// The decode slots' hardware decode states are made here, before the route is ready: nvJPEG
  /// makes states one at a time (0.2-0.25 s each on the H100 machine beside 16 busy CPU workers),
  /// and the CPU workers' hybrid decoders, leased once the route is ready (with early_hybrid,
  /// once its encoder runs), make theirs too. Made
  /// by the slot threads after that, the last slot's waited behind them (2.4-2.5 s on the 10 GP
  /// folder); made here, the three take 0.6-0.75 s before ready, and the slowest first batch's
  /// equalize + encode takes 2.0-2.3 s instead: the device still delivers its first file 2.6-3.9
  /// s into that run (bench/results/h100/e2e/slots.txt). An encoder slot makes no decode state:
  /// it runs from about 0.6 s after the start (context and handle), while the CPU workers decode.
  void init_device(int dev, int slots) {
    std::shared_ptr<gpu::JpegHandles> h;
    std::vector<std::shared_ptr<SlotState>> made;
    std::string err;
    gpu::JpegCodecOptions jo;
    jo.max_pixels = opt.max_pixels;
    jo.encoder_states = opt.encoder_states > 0 ? opt.encoder_states : kSlotEncoderStates;
    bool encoder_first = false;  // the encoder slots only where the route starts without decoders
    {
      std::lock_guard<std::mutex> lock(mu);
      encoder_first = !decoders_wanted;
    }
    try {
      prefer_blocking_sync(dev);
      HISTEQ_CUDA_CHECK(cudaSetDevice(dev));
      HISTEQ_CUDA_CHECK(cudaFree(nullptr));  // the context
      const auto th = Clock::now();
      h = gpu::make_jpeg_handles(dev);
      const auto ts = Clock::now();
      std::vector<std::shared_ptr<SlotState>> encoders;
      for (int k = 0; encoder_first && k < opt.encoder_slots; ++k)
        encoders.push_back(std::make_shared<SlotState>(jo, h));
      std::lock_guard<std::mutex> lock(mu);
      handles_ms = std::max(handles_ms, ms_between(th, ts));
      if (!encoders.empty() && st == State::starting) {
        if (dev == hybrid_device && opt.early_hybrid) hybrid_handles = h;
        st = State::encoding;
        encoder_ready_ms = ms_between(t0, Clock::now());
      }
      if (!stop) start_slots(dev, encoders, true);
    } catch (const std::exception& e) {
      err = e.what();
    }
    cv.notify_all();
    if (err.empty()) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return decoders_wanted || stop || st == State::failed; });
      if (stop || st == State::failed) {  // (an encoder slot failed: the route with it)
        --devices_pending;
        return;
      }
    }
    if (err.empty()) {
      try {
        const auto ts = Clock::now();
        for (int k = 0; k < slots; ++k) {
          auto s = std::make_shared<SlotState>(jo, h);
          s->codec.hardware_available();  // the decode state now, not in the first batch
          made.push_back(std::move(s));
        }
        std::lock_guard<std::mutex> lock(mu);
        st_totals.slot_start_ms = std::max(st_totals.slot_start_ms, ms_between(ts, Clock::now()));
      } catch (const std::exception& e) {
        err = e.what();
      }
    }
    std::vector<DeviceJob*> back;
    {
      std::lock_guard<std::mutex> lock(mu);
      --devices_pending;
      if (st == State::failed) {  // meanwhile, in a slot: the route stays failed
      } else if (err.empty()) {
        if (dev == hybrid_device && !hybrid_handles) hybrid_handles = h;  // (early_hybrid: set)
        if (st != State::ready) ready_ms = ms_between(t0, Clock::now());
        st = State::ready;
        if (!stop) start_slots(dev, made, false);
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

  /// Starts a slot thread for each state (under mu); host_only: encoder slots.
  void start_slots(int dev, const std::vector<std::shared_ptr<SlotState>>& states, bool host_only) {
    for (const auto& s : states) {
      auto self = shared_from_this();
      slot_threads.emplace_back([self, dev, s, host_only] { self->slot_loop(dev, s, host_only); });
    }
  }

  void hand_back(const std::vector<DeviceJob*>& jobs, DeviceJob::Status s, const std::string& e) {
    for (DeviceJob* j : jobs) {
      j->status = s;
      j->error = e;
      j->error_kind = s == DeviceJob::Status::device_failed ? ItemError::device : ItemError::other;
      done(j);
    }
  }

  static bool worker_decoded(const DeviceJob& j) {
    return j.host_planes || j.host_coefs || j.device_planes;
  }
  static int kind_of(const DeviceJob& j) { return worker_decoded(j) ? 2 : j.planes ? 1 : 0; }

  /// Queued jobs a CPU worker decoded (under mu).
  std::size_t queued_worker_decoded() const {
    return std::size_t(
        std::count_if(q.begin(), q.end(), [](const DeviceJob* j) { return worker_decoded(*j); }));
  }

  /// Up to opt.batch queued jobs of the kind of the first (host_only, an encoder slot's: of the
  /// jobs a CPU worker decoded, wherever they are in the queue), once a batch is full, or the
  /// oldest has waited kBatchWait, or no more are coming; empty when stopping.
  std::vector<DeviceJob*> take(bool host_only) {
    constexpr auto kBatchWait = std::chrono::milliseconds(3);
    const std::size_t batch = std::size_t(std::max(1, opt.batch));
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      const std::size_t n = host_only ? queued_worker_decoded() : q.size();
      if (st == State::failed || (stop && n == 0)) return {};
      if (n > 0 && (n >= batch || !feeding || stop || Clock::now() - t_nonempty >= kBatchWait))
        break;
      if (n == 0)
        cv.wait(lock);
      else
        cv.wait_until(lock, t_nonempty + kBatchWait);
    }
    std::vector<DeviceJob*> b;
    if (host_only) {
      for (auto it = q.begin(); it != q.end() && b.size() < batch;) {
        if (!worker_decoded(**it)) {
          ++it;
          continue;
        }
        b.push_back(*it);
        q_mp -= (*it)->megapixels;
        it = q.erase(it);
      }
    } else {
      const int kind = kind_of(*q.front());
      while (!q.empty() && kind_of(*q.front()) == kind && b.size() < batch) {
        b.push_back(q.front());
        q_mp -= q.front()->megapixels;
        q.pop_front();
      }
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

  void slot_loop(int dev, const std::shared_ptr<SlotState>& s, bool host_only) {
    std::vector<DeviceJob*> b;
    bool first = true;
    try {
      HISTEQ_CUDA_CHECK(cudaSetDevice(dev));
      SlotBatches run(opt, plane_reference);
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
        b = take(host_only);
        if (b.empty()) break;
        double dec_ms = 0, enc_ms = 0;
        if (worker_decoded(*b.front()))
          run.run_host_planes(*s, b, &dec_ms, &enc_ms);
        else if (b.front()->planes)
          run.run_planes(*s, b, &dec_ms, &enc_ms);
        else
          run.run_pixels(*s, b, &dec_ms, &enc_ms);
        if (first) {
          first = false;
          std::lock_guard<std::mutex> lock(mu);
          st_totals.first_decode_ms = std::max(st_totals.first_decode_ms, dec_ms);
          st_totals.first_encode_ms = std::max(st_totals.first_encode_ms, enc_ms);
        }
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
  m.decoders_wanted = m.opt.decoders || m.opt.encoder_slots < 1;
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
      // the runtime's cause, in the words of the CLI's note
      if (cuda_available(&m.why) || m.why.empty()) m.why = "no CUDA device found";
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
  std::thread hybrid_init;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    slots.swap(m.slot_threads);
    hybrid_init.swap(m.hybrid_init);  // none is started once stop is set
  }
  for (auto& t : slots) t.join();
  if (hybrid_init.joinable()) hybrid_init.join();
}

JpegDevices::State JpegDevices::state() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->st;
}

JpegDevices::State JpegDevices::wait_started() {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  m.cv.wait(lock, [&] {
    return m.st == State::ready || m.st == State::failed ||
           (m.st == State::encoding && !m.decoders_wanted);
  });
  return m.st;
}

bool JpegDevices::encodes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->st == State::encoding || impl_->st == State::ready;
}

void JpegDevices::want_decoders() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->decoders_wanted = true;
  }
  impl_->cv.notify_all();
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
      m.cv.notify_all();  // (encoder slots take only some kinds: each slot looks)
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
  std::shared_ptr<gpu::JpegHandles> handles;
  bool gpu_huffman = false;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    const bool leasing = m.st == State::ready || (m.opt.early_hybrid && m.st == State::encoding);
    if (!leasing || m.stop || !m.hybrid_handles || m.hybrid_failed || !gpu::hybrid_built())
      return nullptr;
    if (!m.hybrid_free.empty()) {  // a GPU Huffman one first (the last such in the list)
      auto it = std::find_if(m.hybrid_free.rbegin(), m.hybrid_free.rend(),
                             [](const gpu::HybridDecoder* d) { return d->gpu_huffman(); });
      const auto at = it == m.hybrid_free.rend() ? m.hybrid_free.end() - 1 : std::next(it).base();
      gpu::HybridDecoder* d = *at;
      m.hybrid_free.erase(at);
      return d;
    }
    if (!m.hybrid_first_asked) {  // this file and those until it is made: libjpeg-turbo
      m.hybrid_first_asked = true;
      auto self = m.shared_from_this();
      m.hybrid_init = std::thread([self] {
        // (started by a CPU worker, which runs under SCHED_BATCH: this is the device's work)
        sched_param sp{};
        pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
        self->make_first_hybrids();
      });
      return nullptr;
    }
    // (with a count, the hybrid_init thread makes them all: none here)
    if (!m.hybrid_first_made || m.opt.hybrid_decoders > 0) return nullptr;
    handles = m.hybrid_handles;
    gpu_huffman = m.next_gpu_huffman();
  }
  std::unique_ptr<gpu::HybridDecoder> made;
  try {
    made = std::make_unique<gpu::HybridDecoder>(std::move(handles), gpu_huffman);
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

double JpegDevices::encoder_ready_ms() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->encoder_ready_ms;
}

}  // namespace histeq::detail
