// executor_run.hpp — what the executor's files share (histeq/executor.hpp; docs/architecture.md,
// "How a batch runs"): the router's assumed rates, one item on its way (Loaded), the pool of
// device engines that CPU workers lease, the executor's state (Executor::Impl) and one run()
// (Executor::Run: the reader, the CPU workers, the writers, the device route and the in-order
// reports, and what they share). Where each part of a run lives:
//   executor.cpp         the Executor's options and run(): threads, joins, the summary
//   executor_reader.cpp  the reading order, the plan of each item, the reader thread, the
//                        decision to start the device route
//   executor_route.cpp   between the CPU workers and the device route: what comes back from the
//                        device, when a CPU worker takes a device item back (steal_pays), when it
//                        hands its decoded planes to the device (split_to_device)
//   executor_cpu.cpp     the CPU workers: their loop, the CPU slots, one item run on a worker
//   executor_output.cpp  the writers, an item finished, the reports in input order
// Internal header of the pipeline room (not installed).
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "histeq/executor.hpp"
#include "histeq/item.hpp"
#include "image_engine.hpp"
#include "jpeg_device.hpp"
#include "support/cuda_check.hpp"

namespace histeq {
namespace detail {

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// What the router assumes before it has measured (H200 machine, docs/benchmarks.md "JPEG on
/// the device"): a CPU worker runs a photo's JPEG → JPEG luma route at about 50 MP/s; the
/// device is ready about 0.9 s after it starts and then runs about 3,000 MP/s. When the device
/// route starts is ExecutorOptions::device_start_cpu_s (kDeviceStartCpuS by default), in seconds
/// of the CPU workers at kCpuMpPerWorker.
constexpr double kCpuMpPerWorker = 50;
constexpr double kDeviceMpPerS = 3000;
constexpr double kDeviceReadyS = 0.9;

/// The fastest a CPU worker is taken to run that route before it has measured (16-core H100
/// machines ran 47-84 MP/s a worker: docs/benchmarks.md). With ExecutorOptions::router_measures,
/// a run whose JPEGs would need more than the encoder's start rule at kCpuMpPerWorker but neither
/// that rule at this rate nor the whole route's at kCpuMpPerWorker waits for the workers' own rate
/// on their first files (kRateFiles of them, or until kRateWaitS has passed) before it starts the
/// route's encoder alone, or does not.
constexpr double kCpuMpPerWorkerFast = 100;
constexpr int kRateFiles = 4;
constexpr double kRateWaitS = 0.4;

/// The router's measure of a JPEG's work on a CPU worker (decode, equalize, encode), in
/// megapixels of a typical photo: its pixels, plus its compressed bytes (entropy decoding), plus
/// those bytes again where they are progressive (libjpeg-turbo decodes such a scan several times
/// slower). Fitted to libjpeg-turbo on the two photo folders of bench/e2e (27 files, one worker:
/// about 4 ms a megapixel, 12 ms a compressed MB, 45 ms more a progressive MB; within 30 % of each
/// file's time but the 4:4:4 progressive one's), so that the rate the workers measure on their
/// first files (the largest, read first) carries over to the run's mix of files.
inline double jpeg_work(double megapixels, std::size_t bytes, bool progressive) {
  const double mb = double(bytes) / 1e6;
  return megapixels + 3 * mb + (progressive ? 11 * mb : 0);
}

/// Run::dev: the device route a run uses, published once (before the workers start, or later by
/// the router's thread) and read by every thread of the run without the run's lock.
class PublishedRoute {
 public:
  PublishedRoute& operator=(JpegDevices* d) {
    p_.store(d, std::memory_order_release);
    return *this;
  }
  JpegDevices* get() const { return p_.load(std::memory_order_acquire); }
  JpegDevices* operator->() const { return get(); }
  explicit operator bool() const { return get() != nullptr; }

 private:
  std::atomic<JpegDevices*> p_{nullptr};
};

/// One item on its way.
struct Loaded {
  std::size_t index = 0;
  std::vector<std::uint8_t> bytes;
  std::size_t cost = 0;
  ItemPlan plan;
  ItemReport rep;
  std::string ext;  ///< the output's format, lower case (empty for histograms)
  detail::DeviceJob job;
  bool encode_host = false;  ///< the device's pixels came back: encode job.host, then write
};

/// Device engines that CPU workers lease for the operation (the CUDA backend), made on first
/// need, a few per device.
class EnginePool {
 public:
  EnginePool(std::vector<int> devices, int per_device) : per_(std::max(1, per_device)) {
    if (devices.empty()) {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) cudaGetLastError();
      for (int d = 0; d < n; ++d) devices.push_back(d);
    }
    for (int d : devices) made_.emplace_back(d, 0);
  }
  struct Lease {
    gpu::ImageEngine* engine = nullptr;
    int device = 0;
  };
  /// An engine (made on its device when none is free and the device has room), waiting for one
  /// when `wait`; else an empty lease.
  Lease acquire(bool wait) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!free_.empty()) {
        Lease l = free_.back();
        free_.pop_back();
        return l;
      }
      for (auto& [dev, n] : made_) {
        if (n >= per_) continue;
        ++n;
        lock.unlock();
        HISTEQ_CUDA_CHECK(cudaSetDevice(dev));
        auto e = std::make_unique<gpu::ImageEngine>(nullptr, true);
        Lease l{e.get(), dev};
        lock.lock();
        engines_.push_back(std::move(e));
        return l;
      }
      if (!wait || made_.empty()) return {};
      cv_.wait(lock);
    }
  }
  void release(Lease l) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(l);
    }
    cv_.notify_one();
  }

 private:
  int per_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<int, int>> made_;  // device, engines made
  std::vector<std::unique_ptr<gpu::ImageEngine>> engines_;
  std::vector<Lease> free_;
};

}  // namespace detail

struct Executor::Impl {
  ExecutorOptions opt;
  int jobs = 1;
  ItemContext ctx;  ///< the per-item context (device: set per leased item)
  /// The device route may run at all (nvJPEG built, backend not cpu, --decoder not cpu, 8-bit
  /// equalize); `must`: it has to (--decoder gpu, or the CUDA backend).
  bool device_possible = false, device_must = false;
  bool use_engines = false;  ///< the operation's equalize / histogram on leased device engines
  std::unique_ptr<detail::EnginePool> engines;
  std::string fallback_why;  ///< why the CUDA backend found no device ("" when fine)
  bool fallback_checked = false;
  /// An item ran its operation on the backend's choice (CLAHE, 16 bits): the device was wanted.
  std::atomic<bool> per_item_backend{false};
  /// The device route, started by the first run that wants it and kept for the next ones; its
  /// jobs come back to the run in progress.
  std::unique_ptr<detail::JpegDevices> dev;
  std::atomic<Run*> current{nullptr};
  /// cancel(): `active` from the start of run() to its end (its checks and before_files
  /// included), `cancelled` set by a cancel() while active (and cleared when the run ends), and
  /// cancel_mu held by cancel() while it wakes `current`'s threads and by run() while it sets
  /// `active` or clears `current`, so that the Run it wakes is alive.
  std::mutex cancel_mu;
  bool active = false;
  std::atomic<bool> cancelled{false};
};

/// One run(): the reader, the CPU workers, the writers, the device route and the in-order
/// reports, and what they share (under mu).
struct Executor::Run {
  Impl& m;
  const std::vector<WorkItem>& items;
  BatchSummary sum;
  detail::Clock::time_point t_run = detail::Clock::now();
  std::mutex mu;
  std::condition_variable cv_budget, cv_work, cv_done, cv_write;
  std::size_t inflight_bytes = 0, inflight_items = 0, max_items = 0;
  std::size_t finished_files = 0;  ///< items finished, in any order (ExecutorOptions::on_progress)
  double finished_mp = 0;          ///< their megapixels, of those that succeeded
  int busy = 0, slots_free = 0;
  std::deque<std::unique_ptr<detail::Loaded>> cpu_q;  ///< for the CPU workers
  std::deque<detail::Loaded*> write_q;                ///< device outputs for the writers
  std::map<detail::Loaded*, std::unique_ptr<detail::Loaded>> on_device;
  std::map<std::size_t, std::unique_ptr<detail::Loaded>> finished;
  bool reader_done = false, all_reported = false;
  RouteChoice choice;  ///< (under mu once the workers run: the router's thread may change it)
  detail::PublishedRoute dev;  ///< the device route when this run uses it (m.dev)
  detail::JpegDevices::Stats stats_before;
  std::atomic<double> cpu_mp_per_worker{detail::kCpuMpPerWorker};
  /// The router's decision from the workers' measured rate (ExecutorOptions::router_measures):
  /// `deferred` while it waits (under mu), on the thread `router`; the megapixels of the run's
  /// JPEG → JPEG items from their headers, and the CPU planes route's files timed so far.
  bool deferred = false;
  double deferred_mp = 0, deferred_work = 0;  ///< (jpeg_work summed)
  double rate_work = 0, rate_s = 0;
  int rate_files = 0;
  std::condition_variable cv_router;
  std::thread router;

  Run(Impl& impl, const std::vector<WorkItem>& it) : m(impl), items(it) {
    // Reports wait here until their turn (input order): a few hundred bytes each once their
    // image is written. The reading-order window is half of this.
    max_items = m.opt.report_window != 0
                    ? std::max<std::size_t>(2, m.opt.report_window)
                    : std::max(kMinReportWindow, kReportWindowPerJob * std::size_t(m.jobs));
    sum.max_inflight_bytes = m.opt.max_inflight_bytes;
    slots_free = m.jobs;
  }

  void start_devices();
  void launch_device(bool decoders);
  void router_loop();
  /// A file of the CPU's planes route took `s` seconds of a worker for `work` (jpeg_work): the
  /// rate the router waits for.
  void note_rate(double work, double s);
  void reader_loop();
  void cpu_worker();
  void writer();
  void device_done(detail::DeviceJob* job);
  std::exception_ptr report_loop(const std::function<void(const ItemReport&)>& on_done);
  std::unique_ptr<detail::Loaded> next_for_cpu(std::unique_lock<std::mutex>& lock);
  bool steal_pays(const detail::Loaded& it) const;
  void process(detail::Loaded& it);
  bool split_to_device(std::unique_ptr<detail::Loaded>& it);
  void cancel_device_queue();
  /// The item's report as the reader made it (index, input, output; nothing of a route that
  /// gave it up).
  void fresh_report(detail::Loaded& it) const {
    it.rep = ItemReport{};
    it.rep.index = it.index;
    it.rep.input = items[it.index].input;
    it.rep.output = items[it.index].output;
  }
  /// Executor::cancel: the item, not started, is reported cancelled (its cost, if charged,
  /// leaves the budget in finish).
  void finish_cancelled(std::unique_ptr<detail::Loaded> it) {
    fresh_report(*it);
    it->rep.error = "cancelled";
    it->rep.error_kind = ItemError::cancelled;
    finish(std::move(it));
  }
  void write_output(detail::Loaded& it, const std::vector<std::uint8_t>& bytes, bool holds_slot);
  void finish(std::unique_ptr<detail::Loaded> it);
  detail::Loaded* take_back(detail::DeviceJob* job);
  /// A device item that the CPU runs after all holds what the CPU route holds (under mu).
  void charge_cpu(detail::Loaded& it) {
    if (it.plan.cpu_cost <= it.cost) return;
    inflight_bytes += it.plan.cpu_cost - it.cost;
    sum.peak_inflight_bytes = std::max(sum.peak_inflight_bytes, inflight_bytes);
    it.cost = it.plan.cpu_cost;
  }
  void take_slot();
  void give_slot();
};

}  // namespace histeq
