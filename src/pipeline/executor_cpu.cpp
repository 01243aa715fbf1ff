// executor_cpu.cpp — the executor's CPU workers (executor_run.hpp): the CPU slots (at most
// `jobs` workers compute at once; one that only waits gives its slot back), a worker's loop, and
// one item run on a worker (the operation, on a leased device engine where the run uses them)
// up to its written output.
#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "executor_run.hpp"
#include "histeq/codec_names.hpp"
#include "support/cuda_check.hpp"

namespace histeq {

using detail::Clock;
using detail::EnginePool;
using detail::Loaded;
using detail::ms_since;

void Executor::Run::take_slot() {
  std::unique_lock<std::mutex> lock(mu);
  cv_work.wait(lock, [&] { return slots_free > 0; });
  --slots_free;
  sum.peak_busy_workers = std::max(sum.peak_busy_workers, ++busy);
}

void Executor::Run::give_slot() {
  {
    std::lock_guard<std::mutex> lock(mu);
    ++slots_free;
    --busy;
  }
  cv_work.notify_all();
}

/// Executor::cancel: the device jobs still queued (in no batch, decoded by no worker) are taken
/// back and reported cancelled.
void Executor::Run::cancel_device_queue() {
  if (!dev) return;
  std::vector<std::unique_ptr<Loaded>> back;
  while (detail::DeviceJob* j = dev->steal()) {
    std::lock_guard<std::mutex> lock(mu);
    Loaded* raw = take_back(j);
    if (!raw) continue;
    back.push_back(std::move(on_device[raw]));
    on_device.erase(raw);
  }
  for (std::unique_ptr<Loaded>& it : back) finish_cancelled(std::move(it));
}

void Executor::Run::cpu_worker() {
  // With the device route running, its threads need a core at once: the one making the CUDA
  // context and nvJPEG's handle (thousands of short waits on the driver), and the slots when
  // their batch comes back (to issue the next one). The CPU workers yield to them: a lower
  // priority, and SCHED_BATCH, under which a waking worker does not preempt a running thread
  // (each per thread; neither needs a privilege). The 1 GP folder ran 1.31 s on average with
  // nice 4 alone against 1.23 s with SCHED_BATCH too (six rounds in turns, H100 machine;
  // bench/results/h100/e2e/worker_priority.txt). Threads a worker starts inherit both: the
  // process-wide pools it may start (png_deflate.cpp, parallel.cpp) and the route's hybrid
  // decoders' thread take the normal policy back; the nice value cannot be lowered back
  // without a privilege. (A route the router starts while the workers run: from their next file.)
  bool yielding = false;
  bool drained = false;  // the device's queue taken back once cancelled
  for (;;) {
    if (!yielding && dev && dev->state() != detail::JpegDevices::State::failed) {
      yielding = true;
      ::setpriority(PRIO_PROCESS, pid_t(::syscall(SYS_gettid)), 4);
      sched_param sp{};
      sp.sched_priority = 0;
      pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);  // (a failure leaves the policy)
    }
    std::unique_ptr<Loaded> it;
    {
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
        if (m.cancelled && !drained) {
          drained = true;
          lock.unlock();
          cancel_device_queue();
          lock.lock();
        }
        it = next_for_cpu(lock);
        if (it) break;
        const bool device_busy = dev && !on_device.empty();
        if (reader_done && cpu_q.empty() && !device_busy) return;
        // A queued device item may become worth taking as time passes: look again soon.
        if (device_busy)
          cv_work.wait_for(lock, std::chrono::milliseconds(5));
        else
          cv_work.wait(lock);
      }
    }
    if (m.cancelled && !it->encode_host) {  // Executor::cancel: not started
      finish_cancelled(std::move(it));
      continue;
    }
    if (split_to_device(it)) continue;
    process(*it);
    finish(std::move(it));
  }
}

/// Runs one item on this CPU worker and writes its output; errors land in the report.
void Executor::Run::process(Loaded& it) {
  ItemReport& rep = it.rep;
  take_slot();
  bool holds_slot = true;
  try {
    std::vector<std::uint8_t> bytes;
    ItemContext ctx = m.ctx;
    std::optional<EnginePool::Lease> lease;
    if (it.encode_host) {
      const auto t = Clock::now();
      bytes = encode_item(ctx, it.job.host, it.ext, &rep.encoder);
      rep.times.encode_ms = ms_since(t);
      rep.output_channels = encoded_channels(it.job.host.channels, it.ext);
      it.job.host = Image();
    } else {
      if (m.use_engines && it.plan.work_bits == 8 && m.engines) {
        lease = m.engines->acquire(m.opt.op.equalize.backend == Backend::cuda);
        if (lease && lease->engine) {
          HISTEQ_CUDA_CHECK(cudaSetDevice(lease->device));
          ctx.device = lease->engine;
        }
      }
      const auto t = Clock::now();
      try {
        bytes = run_item(ctx, it.plan, it.bytes.data(), it.bytes.size(), rep.input, it.ext, rep);
        // It ran on the backend of its choice (not an item refused before it chose one).
        if (it.plan.work_bits == 16 || m.opt.op.kind == OpKind::clahe)
          m.per_item_backend.store(true, std::memory_order_relaxed);
      } catch (...) {
        if (ctx.device) m.engines->release(*lease);
        throw;
      }
      if (ctx.device) m.engines->release(*lease);
      if (rep.decoder == codec::kLibjpegTurboYcbcr && it.plan.megapixels() > 0) {
        const double s = ms_since(t) / 1e3;  // the CPU's planes route: the router's rate
        if (s > 0) {
          cpu_mp_per_worker = 0.8 * cpu_mp_per_worker + 0.2 * it.plan.megapixels() / s;
          note_rate(detail::jpeg_work(it.plan.megapixels(), it.bytes.size(),
                                      it.plan.jpeg_checked && it.plan.jpeg.progressive),
                    s);
        }
      }
      rep.route = to_string(rep.decoder == codec::kLibjpegTurboYcbcr ? ItemRoute::jpeg_planes
                                                                     : ItemRoute::pixels);
      if (rep.equalize.backend == "cpu")  // the batch's CPU: its workers
        rep.equalize.device =
            "CPU (" + std::to_string(m.jobs) + (m.jobs == 1 ? " thread)" : " threads)");
      if (m.opt.op.writes()) {
        rep.equalize.luts.clear();  // not kept for a batch of files (memory per report)
        rep.equalize.histograms.clear();
      }
    }
    std::vector<std::uint8_t>().swap(it.bytes);
    if (m.opt.op.writes()) {
      holds_slot = false;
      write_output(it, bytes, true);
    }
    rep.ok = true;
  } catch (const std::exception& e) {
    set_error(rep, e);
  }
  if (holds_slot) give_slot();
}

}  // namespace histeq
