// executor.cpp — many files through read → plan → decode → operation → encode → write,
// overlapping across files (histeq/executor.hpp; docs/architecture.md, "How a batch runs"): the
// Executor's options and run(), which starts the threads of a run, hands the reports over and
// sums up. The parts of a run are in the executor_*.cpp files (executor_run.hpp lists them).
//
// The route of one item, in one place: the reader reads the file and plans it once
// (plan_item: format, size, depth, JPEG facts, route); a JPEG the device route takes is queued
// for it (jpeg_device.hpp: batches on the GPU, writer threads write what comes back); everything
// else is queued for the CPU workers, which run the plan (run_item) and write the output. A CPU
// worker with nothing of its own takes a queued device JPEG back when it would finish it sooner
// than the device would reach it (while the device starts, or when its queue is long), so the
// run never waits on the device. Reports are handed to the caller in input order, from the
// calling thread.
//
// Why threads and bounded queues of our own rather than oneTBB's parallel_pipeline: the memory
// bound we need is in *bytes* (one 15 MP photo weighs as much as a thousand thumbnails), and
// parallel_pipeline bounds only the number of tokens; waiting for bytes inside one of its filters
// blocks a TBB worker and deadlocks with one thread. Here the reader is a thread of its own that
// may block on the byte budget, the workers never wait on each other, and no dependency is added
// to the GPU machine.
#include "histeq/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <unistd.h>

#include "executor_run.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histogram/registry.hpp"

namespace histeq {

using detail::Clock;
using detail::EnginePool;

std::size_t default_max_inflight_bytes(int jobs) {
  std::size_t cap =
      std::max(kMinMaxInflightBytes, kInflightBytesPerJob * std::size_t(std::max(jobs, 1)));
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) {
    const std::size_t quarter = std::size_t(pages) / 4 * std::size_t(page);
    cap = std::min(cap, std::max(quarter, kMinMaxInflightBytes));
  }
  return cap;
}

Executor::Executor(ExecutorOptions opt) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.opt = std::move(opt);
  const Operation& op = m.opt.op;
  if (m.opt.jobs < 0)
    throw UsageError("jobs (the number of CPU workers) must be at least 0 (0: the cores)");
  if (m.opt.jobs > kMaxJobs)
    throw UsageError("jobs (the number of CPU workers) must be at most " +
                     std::to_string(kMaxJobs));
  m.jobs = m.opt.jobs > 0 ? m.opt.jobs : cpu::usable_cpus();
  if (m.opt.max_inflight_bytes == 0) m.opt.max_inflight_bytes = default_max_inflight_bytes(m.jobs);
  if (op.equalize.kernel != "auto") {
    const kernels::KernelEntry& e = kernels::find_kernel(op.equalize.kernel);
    if (const char* why = e.unsupported(SampleType::u8, 256))
      throw UsageError("kernel '" + op.equalize.kernel +
                       "' cannot equalize 8-bit images (u8, 256 bins): " + why);
  }
  if (m.opt.jpeg == JpegRoute::gpu) {
    if (!gpu::nvjpeg_built())
      throw UsageError("GPU JPEG decoding was asked for, but this histeq was built without nvJPEG");
    if (op.equalize.backend == Backend::cpu)
      throw UsageError("GPU JPEG decoding needs the CUDA backend, not the CPU backend");
  }
  if (m.opt.jpeg_batch < 1) throw UsageError("the JPEG batch must be at least 1");
  if (m.opt.hybrid_decoders < 0)
    throw UsageError("the number of hybrid decoders must be at least 0 (0: the policy's)");
  if (m.opt.gpu_huffman_decoders < 0)
    throw UsageError(
        "the number of GPU Huffman decoders must be at least 0 (0: the policy's, all of them)");
  if (m.opt.encoder_slots < 0)
    throw UsageError("the number of encoder slots must be at least 0 (0: none)");
  if (m.opt.encoder_states < 0)
    throw UsageError("the number of encoder states must be at least 0 (0: the policy's)");
  const auto check_seconds = [](double v, const char* what) {
    if (std::isfinite(v) && v >= 0) return;
    std::ostringstream got;
    got << v;
    throw UsageError(std::string(what) + " must be a finite number of seconds >= 0, got " +
                     got.str());
  };
  check_seconds(m.opt.device_start_cpu_s, "the device route's start rule (device_start_cpu_s)");
  check_seconds(m.opt.encoder_start_cpu_s,
                "the start rule of the device route's encoder (encoder_start_cpu_s)");
  if (op.kind == OpKind::match && !op.reference)
    throw UsageError("histogram matching needs a reference image");
  m.ctx.op = op;
  m.ctx.encode = m.opt.encode;
  m.ctx.max_pixels = m.opt.max_pixels;
  m.ctx.codecs = m.opt.codecs;
  m.ctx.fast_png = m.opt.fast_png_decoder;
  m.ctx.threads = 1;
  m.ctx.devices = m.opt.devices;
  // The JPEG device route equalizes or matches whole images: not for a region (mask,
  // rectangle) or another kind (plan_item plans those on the pixels route).
  m.device_possible = (op.kind == OpKind::equalize || op.kind == OpKind::match) &&
                      op.equalize.region.all() && op.depth != 16 && gpu::nvjpeg_built() &&
                      op.equalize.backend != Backend::cpu && m.opt.jpeg != JpegRoute::cpu;
  m.device_must =
      m.device_possible && (m.opt.jpeg == JpegRoute::gpu || op.equalize.backend == Backend::cuda);
  // The 8-bit equalize / histogram on device engines: the CUDA backend, or a kernel or devices
  // named with backend auto (then the CPU runs an item when every engine is busy).
  m.use_engines =
      op.kind != OpKind::clahe && (op.equalize.backend == Backend::cuda ||
                                   (op.equalize.backend == Backend::automatic &&
                                    (op.equalize.kernel != "auto" || !m.opt.devices.empty())));
}

Executor::~Executor() = default;

int Executor::jobs() const { return impl_->jobs; }

std::string Executor::cpu_fallback_reason() {
  Impl& m = *impl_;
  if (!m.fallback_checked) {
    m.fallback_checked = true;
    if (m.opt.op.equalize.backend != Backend::cpu) cuda_available(&m.fallback_why);
  }
  return m.fallback_why;
}

void Executor::cancel() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> guard(m.cancel_mu);
  if (!m.active) return;  // no run in progress: nothing to stop (the next run is not cancelled)
  m.cancelled = true;
  if (Run* r = m.current.load()) {
    {
      std::lock_guard<std::mutex> lock(r->mu);  // the waits below see the flag
    }
    r->cv_budget.notify_all();
    r->cv_work.notify_all();
    r->cv_router.notify_all();
  }
}

bool Executor::wanted_device() const {
  const Impl& m = *impl_;
  return m.opt.op.equalize.backend != Backend::cpu &&
         (m.fallback_checked || m.dev != nullptr || m.per_item_backend.load());
}

/// The checks of the devices before any file: a device ordinal past those visible, the CUDA
/// backend or GPU JPEG decoding with no usable device.
void Executor::check_devices() {
  Impl& m = *impl_;
  if (!m.opt.devices.empty() && m.opt.op.equalize.backend != Backend::cpu) {
    // An ordinal past the devices there are: one error before any file (with none at all, the
    // run goes on as it would with no device named).
    const int count = cuda_device_count();
    for (int d : m.opt.devices)
      if (count > 0 && (d < 0 || d >= count))
        throw UsageError("no CUDA device " + std::to_string(d) + ": " + std::to_string(count) +
                         (count == 1 ? " device is" : " devices are") + " visible (ordinals 0.." +
                         std::to_string(count - 1) + ")");
  }
  if (m.opt.op.equalize.backend == Backend::cuda) {
    const std::string why = cpu_fallback_reason();
    if (!why.empty()) throw Error(kNoDeviceForCuda + why + ")");
  }
  if (m.opt.jpeg == JpegRoute::gpu) {  // as the CUDA backend: one error, before any file
    const std::string why = cpu_fallback_reason();
    if (!why.empty()) throw Error(kNoDeviceForGpuJpeg + why + ")");
  }
}

BatchSummary Executor::run(const std::vector<WorkItem>& items,
                           const std::function<void(const ItemReport&)>& on_done,
                           const std::function<void()>& before_files) {
  Impl& m = *impl_;
  // The run's clock starts here: the checks create the device's context on a route that must
  // have the device, and that start-up is the run's.
  const Clock::time_point started = Clock::now();
  {  // from here a cancel() is this run's (during the checks too: then no file is read)
    std::lock_guard<std::mutex> guard(m.cancel_mu);
    m.active = true;
    m.cancelled = false;
  }
  struct Active {
    Impl& m;
    ~Active() {
      std::lock_guard<std::mutex> guard(m.cancel_mu);
      m.active = false;
      m.cancelled = false;
    }
  } active{m};
  check_devices();
  if (before_files) before_files();
  if (m.use_engines && !m.engines && cpu_fallback_reason().empty())
    m.engines = std::make_unique<EnginePool>(m.opt.devices, std::max(2, m.jobs / 4));
  Run r(m, items);
  r.t_run = started;
  m.current = &r;
  struct Current {
    Impl& m;
    ~Current() {
      std::lock_guard<std::mutex> guard(m.cancel_mu);  // a cancel() is done with the Run
      m.current = nullptr;
    }
  } current{m};
  r.start_devices();
  // `jobs` CPU slots, and an eighth more threads: a worker writing its file (fsync) holds no
  // slot, and another takes it meanwhile. A thread that cannot start (no memory for its stack, a
  // process limit): the batch runs with the workers and writers that did; with none of either,
  // or without the reader, it is an error naming the cause. The reader starts last, so that
  // nothing is queued for threads that do not exist.
  const int threads = m.jobs + (m.jobs + 7) / 8;
  std::vector<std::thread> pool, writers;
  std::thread reader;
  const auto abandon = [&](const std::string& what, const std::system_error& e) {
    {
      std::lock_guard<std::mutex> lock(r.mu);
      r.reader_done = r.all_reported = true;
    }
    r.cv_write.notify_all();
    r.cv_work.notify_all();
    r.cv_router.notify_all();
    if (r.router.joinable()) r.router.join();
    for (auto& t : writers) t.join();
    for (auto& t : pool) t.join();
    throw Error(what + e.what());
  };
  try {
    if (r.dev || r.deferred)
      for (int k = 0; k < std::max(4, m.jobs / 2); ++k) writers.emplace_back([&r] { r.writer(); });
    if (r.deferred) r.router = std::thread([&r] { r.router_loop(); });
  } catch (const std::system_error& e) {
    if (r.deferred && !r.router.joinable()) {  // no router: the run is the CPU workers'
      std::lock_guard<std::mutex> lock(r.mu);
      r.deferred = false;
    }
    if (writers.empty() && r.dev)  // (the router starts after every writer did)
      abandon("cannot start a thread to write the device's outputs: ", e);
  }
  try {
    for (int j = 0; j < threads; ++j) pool.emplace_back([&r] { r.cpu_worker(); });
  } catch (const std::system_error& e) {
    if (pool.empty()) abandon("cannot start a worker thread: ", e);
  }
  try {
    reader = std::thread([&r] { r.reader_loop(); });
  } catch (const std::system_error& e) {
    abandon("cannot start a thread to read the files: ", e);
  }
  const std::exception_ptr callback_error = r.report_loop(on_done);
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.all_reported = true;
  }
  r.cv_write.notify_all();
  r.cv_router.notify_all();
  if (r.router.joinable()) r.router.join();
  reader.join();
  for (auto& t : pool) t.join();
  for (auto& t : writers) t.join();
  BatchSummary sum = std::move(r.sum);
  sum.wall_s = std::chrono::duration<double>(Clock::now() - r.t_run).count();
  if (r.dev) {  // (first_done_ms, last_done_ms: set by device_done)
    const detail::JpegDevices::Stats now = r.dev->stats();
    sum.device.batches = now.batches - r.stats_before.batches;
    sum.device.files = now.files - r.stats_before.files;
    sum.device.megapixels = now.megapixels - r.stats_before.megapixels;
    sum.device.decode_ms = now.decode_ms - r.stats_before.decode_ms;
    sum.device.encode_ms = now.encode_ms - r.stats_before.encode_ms;
    sum.device.slot_start_ms = now.slot_start_ms;
    sum.device.first_decode_ms = now.first_decode_ms;
    sum.device.first_encode_ms = now.first_encode_ms;
    sum.device_init_ms = r.dev->ready_ms();
    sum.encoder_ready_ms = r.dev->encoder_ready_ms();
    sum.nvjpeg_init_ms = r.dev->handles_ms();
    if (r.dev->state() == detail::JpegDevices::State::failed) {
      sum.device_note = "failed: " + r.dev->failure();
      // (a route that failed before its first batch never ran: the CPU workers ran every file)
      if (sum.device.batches == 0) sum.device_started = false;
    }
  }
  if (callback_error) std::rethrow_exception(callback_error);
  return sum;
}

}  // namespace histeq
