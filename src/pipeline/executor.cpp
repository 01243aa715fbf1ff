// executor.cpp — many files through read → plan → decode → operation → encode → write,
// overlapping across files (histeq/executor.hpp; docs/architecture.md, "The executor").
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

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <system_error>
#include <thread>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "histeq/codec_names.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/item.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histogram/registry.hpp"
#include "image_engine.hpp"
#include "jpeg_device.hpp"
#include "support/cuda_check.hpp"

namespace histeq {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool jpeg_ext(const std::string& low) { return low == ".jpg" || low == ".jpeg"; }

/// What the router assumes before it has measured (H200 machine, docs/benchmarks.md "JPEG on
/// the device"): a CPU worker runs a photo's JPEG → JPEG luma route at about 50 MP/s; the
/// device is ready about 0.9 s after it starts and then runs about 3,000 MP/s; with the context's
/// teardown at exit, the device route pays once the CPU workers alone would need a second.
constexpr double kCpuMpPerWorker = 50;
constexpr double kDeviceMpPerS = 3000;
constexpr double kDeviceReadyS = 0.9;
constexpr double kDeviceBreakEvenS = 1.0;

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

void add(ItemTimes& a, const ItemTimes& b) {
  a.read_ms += b.read_ms;
  a.decode_ms += b.decode_ms;
  a.upload_ms += b.upload_ms;
  a.equalize_ms += b.equalize_ms;
  a.download_ms += b.download_ms;
  a.encode_ms += b.encode_ms;
  a.write_ms += b.write_ms;
}

/// The reading order: within windows of `win` consecutive items, the largest files first (a big
/// image started last would finish alone after the others: longest job first).
std::vector<std::size_t> reading_order(const std::vector<WorkItem>& items, std::size_t win) {
  std::vector<std::size_t> order(items.size());
  std::vector<std::uintmax_t> size(items.size(), 0);
  for (std::size_t i = 0; i < items.size(); ++i) {
    order[i] = i;
    std::error_code ec;
    const std::uintmax_t n = std::filesystem::file_size(items[i].input, ec);
    size[i] = ec ? 0 : n;
  }
  win = std::max<std::size_t>(1, win);
  for (std::size_t b = 0; b < order.size(); b += win) {
    const auto e = order.begin() + std::ptrdiff_t(std::min(order.size(), b + win));
    std::stable_sort(order.begin() + std::ptrdiff_t(b), e,
                     [&](std::size_t x, std::size_t y) { return size[x] > size[y]; });
  }
  return order;
}

/// A failed item's error names its file: the decoders and writers say 'input' or 'output'
/// themselves; a cause that names neither gets the input's path in front, as the others read.
void name_the_file(ItemReport& rep) {
  if (rep.error.empty()) return;
  // A failed allocation says only "std::bad_alloc": say what it means.
  if (rep.error == std::bad_alloc().what() || rep.error == std::bad_array_new_length().what())
    rep.error = "out of memory";
  const auto names = [&](const std::string& path) {
    return !path.empty() && rep.error.find("'" + path + "'") != std::string::npos;
  };
  if (!names(rep.input) && !names(rep.output)) rep.error = "'" + rep.input + "': " + rep.error;
}

/// The output format of an item: --format, else the output's extension (lower case).
std::string format_of(const WorkItem& w) {
  if (!w.format.empty()) return lower(w.format[0] == '.' ? w.format : "." + w.format);
  return lower(std::filesystem::path(w.output).extension().string());
}

/// Megapixels of the JPEG → JPEG inputs from their headers (the first 64 KiB of each), summed
/// until `enough` is passed: whether a run is large enough for the device route to pay.
double jpeg_megapixels_at_least(const std::vector<WorkItem>& items, double enough) {
  double mp = 0;
  std::vector<std::uint8_t> head(std::size_t(64) << 10);
  for (const WorkItem& w : items) {
    if (mp > enough) break;
    if (!jpeg_ext(format_of(w)) || w.input == "-") continue;
    const int fd = ::open(w.input.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    const ssize_t n = ::pread(fd, head.data(), head.size(), 0);
    ::close(fd);
    jpeg::Info info;
    if (n > 0 && jpeg::read_header(head.data(), std::size_t(n), &info))
      mp += double(info.width) * double(info.height) / 1e6;
  }
  return mp;
}

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

}  // namespace

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

struct Executor::Impl {
  ExecutorOptions opt;
  int jobs = 1;
  ItemContext ctx;  ///< the per-item context (device: set per leased item)
  /// The device route may run at all (nvJPEG built, backend not cpu, --decoder not cpu, 8-bit
  /// equalize); `must`: it has to (--decoder gpu, or the CUDA backend).
  bool device_possible = false, device_must = false;
  bool use_engines = false;  ///< the operation's equalize / histogram on leased device engines
  std::unique_ptr<EnginePool> engines;
  std::string fallback_why;  ///< why the CUDA backend found no device ("" when fine)
  bool fallback_checked = false;
  /// The device route, started by the first run that wants it and kept for the next ones; its
  /// jobs come back to the run in progress.
  std::unique_ptr<detail::JpegDevices> dev;
  std::atomic<Run*> current{nullptr};
};

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
  m.ctx.op = op;
  m.ctx.encode = m.opt.encode;
  m.ctx.max_pixels = m.opt.max_pixels;
  m.ctx.codecs = m.opt.codecs;
  m.ctx.fast_png = m.opt.fast_png_decoder;
  m.ctx.threads = 1;
  m.ctx.devices = m.opt.devices;
  m.device_possible = op.kind == OpKind::equalize && op.depth != 16 && gpu::nvjpeg_built() &&
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

/// One run(): the reader, the CPU workers, the writers, the device route and the in-order
/// reports, and what they share (under mu).
struct Executor::Run {
  Impl& m;
  const std::vector<WorkItem>& items;
  BatchSummary sum;
  Clock::time_point t_run = Clock::now();
  std::mutex mu;
  std::condition_variable cv_budget, cv_work, cv_done, cv_write;
  std::size_t inflight_bytes = 0, inflight_items = 0, max_items = 0;
  int busy = 0, slots_free = 0;
  std::deque<std::unique_ptr<Loaded>> cpu_q;  ///< for the CPU workers
  std::deque<Loaded*> write_q;                ///< device outputs for the writers
  std::map<Loaded*, std::unique_ptr<Loaded>> on_device;
  std::map<std::size_t, std::unique_ptr<Loaded>> finished;
  bool reader_done = false, all_reported = false;
  RouteChoice choice;
  detail::JpegDevices* dev = nullptr;  ///< the device route when this run uses it (m.dev)
  detail::JpegDevices::Stats stats_before;
  std::atomic<double> cpu_mp_per_worker{kCpuMpPerWorker};

  Run(Impl& impl, const std::vector<WorkItem>& it) : m(impl), items(it) {
    // Reports wait here until their turn (input order): a few hundred bytes each once their
    // image is written. The reading-order window is half of this.
    max_items = std::size_t(std::max(256, 16 * m.jobs));
    sum.max_inflight_bytes = m.opt.max_inflight_bytes;
    slots_free = m.jobs;
  }

  void start_devices();
  void reader_loop();
  void cpu_worker();
  void writer();
  void device_done(detail::DeviceJob* job);
  std::exception_ptr report_loop(const std::function<void(const ItemReport&)>& on_done);
  std::unique_ptr<Loaded> next_for_cpu(std::unique_lock<std::mutex>& lock);
  bool steal_pays(const Loaded& it) const;
  void process(Loaded& it);
  bool split_to_device(std::unique_ptr<Loaded>& it);
  void write_output(Loaded& it, const std::vector<std::uint8_t>& bytes, bool holds_slot);
  void finish(std::unique_ptr<Loaded> it);
  Loaded* take_back(detail::DeviceJob* job);
  /// A device item that the CPU runs after all holds what the CPU route holds (under mu).
  void charge_cpu(Loaded& it) {
    if (it.plan.cpu_cost <= it.cost) return;
    inflight_bytes += it.plan.cpu_cost - it.cost;
    sum.peak_inflight_bytes = std::max(sum.peak_inflight_bytes, inflight_bytes);
    it.cost = it.plan.cpu_cost;
  }
  void take_slot();
  void give_slot();
};

/// Decides whether the device route runs and starts it on its own threads.
void Executor::Run::start_devices() {
  choice.cpu_planes = m.opt.codecs.empty() && m.opt.jpeg != JpegRoute::gpu &&
                      m.opt.op.equalize.backend != Backend::cuda;
  if (!m.device_possible) return;
  if (!m.device_must) {
    const double enough = kCpuMpPerWorker * m.jobs * kDeviceBreakEvenS;
    const double mp = jpeg_megapixels_at_least(items, enough);
    if (mp <= enough) {
      sum.device_note = "not started: the JPEGs hold " + std::to_string(int(mp)) +
                        " MP, which the CPU workers finish before the device would be ready";
      return;
    }
  }
  if (!m.dev) {
    detail::JpegDevices::Options o;
    o.devices = m.opt.devices;
    o.equalize = m.opt.op.equalize;
    o.encode = {m.opt.encode.quality, m.opt.encode.subsampling};
    o.max_pixels = m.opt.max_pixels;
    o.batch = m.opt.jpeg_batch;
    o.slots = kJpegSlotsPerDevice;
    Impl* impl = &m;
    m.dev = std::make_unique<detail::JpegDevices>(o, [impl](detail::DeviceJob* j) {
      if (Run* run = impl->current.load()) run->device_done(j);
    });
  }
  dev = m.dev.get();
  dev->set_feeding(true);
  stats_before = dev->stats();
  sum.device_started = true;
  choice.device_planes = true;
  choice.device_all_jpeg = m.device_must;
}

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

void Executor::Run::finish(std::unique_ptr<Loaded> it) {
  name_the_file(it->rep);
  std::lock_guard<std::mutex> lock(mu);
  inflight_bytes -= it->cost;
  it->cost = 0;
  if (it->rep.ok && it->rep.error.empty() && sum.first_file_ms == 0)
    sum.first_file_ms = std::max(ms_since(t_run), 1e-3);
  const std::size_t idx = it->index;
  finished.emplace(idx, std::move(it));
  cv_budget.notify_all();
  cv_done.notify_all();
  cv_work.notify_all();  // a worker waiting for the device's last items may be done
}

/// Reads the files in reading_order, plans each, and queues it for the device route or the CPU
/// workers under the item and byte caps. A window no larger than half the report window cannot
/// deadlock (at most the previous window's and this window's items wait for their report).
void Executor::Run::reader_loop() {
  for (std::size_t i : reading_order(items, max_items / 2)) {
    auto it = std::make_unique<Loaded>();
    it->index = i;
    it->rep.index = i;
    it->rep.input = items[i].input;
    it->rep.output = items[i].output;
    it->ext = m.opt.op.writes() ? format_of(items[i]) : std::string();
    {  // a slot for the item (bounds the reports waiting for an earlier one)
      std::unique_lock<std::mutex> lock(mu);
      cv_budget.wait(lock, [&] { return inflight_items < max_items; });
      ++inflight_items;
    }
    const auto t0 = Clock::now();
    try {
      it->bytes = read_image_file(items[i].input);
      it->plan = plan_item(it->bytes.data(), it->bytes.size(), m.opt.op, it->ext, m.opt.encode,
                           m.opt.max_pixels, choice);
    } catch (const std::exception& e) {
      it->rep.error = e.what();
    }
    it->rep.times.read_ms = ms_since(t0);
    if (!it->rep.error.empty()) {
      finish(std::move(it));
      continue;
    }
    it->cost = it->plan.cost;
    std::unique_lock<std::mutex> lock(mu);
    cv_budget.wait(lock, [&] {
      return inflight_bytes == 0 || inflight_bytes + it->cost <= m.opt.max_inflight_bytes;
    });
    inflight_bytes += it->cost;
    sum.peak_inflight_bytes = std::max(sum.peak_inflight_bytes, inflight_bytes);
    if (dev && it->plan.route == ItemRoute::jpeg_device) {
      detail::DeviceJob& j = it->job;
      j.bytes = &it->bytes;
      j.name = items[i].input;
      j.out_ext = it->ext;
      j.planes = it->plan.device_planes && m.opt.op.equalize.kernel == "auto";
      j.megapixels = it->plan.megapixels();
      j.rep = &it->rep;
      Loaded* raw = it.get();
      on_device.emplace(raw, std::move(it));
      lock.unlock();
      dev->push(&raw->job);
      cv_work.notify_all();
      continue;
    }
    cpu_q.push_back(std::move(it));
    cv_work.notify_one();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    reader_done = true;
  }
  cv_work.notify_all();
  if (dev) dev->set_feeding(false);
}

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
  if (job->status == S::done && !job->encoded.empty()) {
    if (it->rep.decoder != codec::kLibjpegTurboYcbcr)  // (planes a CPU worker decoded: its route)
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
    lock.unlock();
    finish(std::move(it));
    return;
  } else {  // declined, or the device failed and the CPU may take it: as the CPU would
    job->host_planes.reset();
    charge_cpu(*it);
    it->rep = ItemReport{};
    it->rep.index = it->index;
    it->rep.input = items[it->index].input;
    it->rep.output = items[it->index].output;
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
  double wait_s = 0;
  switch (dev->state()) {
    case detail::JpegDevices::State::failed: return true;
    case detail::JpegDevices::State::starting:
      wait_s = std::max(0.1, kDeviceReadyS - ms_since(t_run) / 1e3);
      break;
    case detail::JpegDevices::State::ready: break;
  }
  const double rate = dev->rate() > 0 ? dev->rate() : kDeviceMpPerS;
  const double device_s = wait_s + dev->queued_megapixels() / rate;
  return cpu_s < device_s;
}

/// The next item for a CPU worker (under mu): its own queue first, then a device item taken
/// back when that pays; null when there is nothing to do now.
std::unique_ptr<Loaded> Executor::Run::next_for_cpu(std::unique_lock<std::mutex>& lock) {
  if (!cpu_q.empty()) {
    std::unique_ptr<Loaded> it = std::move(cpu_q.front());
    cpu_q.pop_front();
    return it;
  }
  if (!dev || dev->queued() == 0) return nullptr;
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

void Executor::Run::cpu_worker() {
  // With the device route running, its slot threads need a core at once when their batch comes
  // back (to issue the next one): the CPU workers yield to them (a lower priority, per thread).
  if (dev) ::setpriority(PRIO_PROCESS, pid_t(::syscall(SYS_gettid)), 4);
  for (;;) {
    std::unique_ptr<Loaded> it;
    {
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
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
    if (split_to_device(it)) continue;
    process(*it);
    finish(std::move(it));
  }
}

/// A colour JPEG → JPEG on the CPU's stored-planes route while the device route is ready and
/// not behind: this worker decodes the stored planes and hands them to the device, which
/// equalizes Y and encodes (nvJPEG's encoder, tens of times libjpeg-turbo's speed), so the CPU
/// spends its time on the decode alone. True when the item went to the device.
bool Executor::Run::split_to_device(std::unique_ptr<Loaded>& it) {
  if (!dev || !it->plan.cpu_planes || it->plan.route == ItemRoute::pixels ||
      dev->state() != detail::JpegDevices::State::ready)
    return false;
  // Not when the device's queue would take longer than the encode this saves (about a fifth of
  // what the CPU worker spends on the item).
  const double rate = dev->rate() > 0 ? dev->rate() : kDeviceMpPerS;
  const double cpu_s = it->plan.megapixels() / std::max(1.0, cpu_mp_per_worker.load());
  if (dev->queued_megapixels() / rate > cpu_s / 5) return false;
  take_slot();
  std::shared_ptr<jpeg::Planes> planes;
  const auto t0 = Clock::now();
  try {
    jpeg::DecodeOptions dec;
    dec.max_pixels = m.opt.max_pixels;
    planes = std::make_shared<jpeg::Planes>(
        jpeg::decode_planes(it->bytes.data(), it->bytes.size(), it->rep.input, dec));
  } catch (const std::exception&) {
    planes.reset();  // the CPU route decodes it again and reports the error
  }
  give_slot();
  if (!planes || planes->width == 0) return false;
  ItemReport& rep = it->rep;
  rep.times.decode_ms = ms_since(t0);
  rep.width = planes->width;
  rep.height = planes->height;
  rep.channels = rep.output_channels = 3;
  rep.decoder = codec::kLibjpegTurboYcbcr;
  rep.route = to_string(ItemRoute::jpeg_planes);
  detail::DeviceJob& j = it->job;
  j.bytes = &it->bytes;
  j.name = rep.input;
  j.out_ext = it->ext;
  j.megapixels = it->plan.megapixels();
  j.rep = &rep;
  j.host_planes = std::move(planes);
  Loaded* raw = it.get();
  {
    std::lock_guard<std::mutex> lock(mu);
    on_device.emplace(raw, std::move(it));
  }
  dev->push(&raw->job);
  return true;
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
      } catch (...) {
        if (ctx.device) m.engines->release(*lease);
        throw;
      }
      if (ctx.device) m.engines->release(*lease);
      if (rep.decoder == codec::kLibjpegTurboYcbcr && it.plan.megapixels() > 0) {
        const double s = ms_since(t) / 1e3;  // the CPU's planes route: the router's rate
        if (s > 0) cpu_mp_per_worker = 0.8 * cpu_mp_per_worker + 0.2 * it.plan.megapixels() / s;
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
    rep.ok = false;
    rep.error = e.what();
  }
  if (holds_slot) give_slot();
}

/// Writes an item's output (atomically: write_file_atomic) and times it. The write waits on the
/// disk (fsync), not on the CPU: a worker's CPU slot goes to another worker first.
void Executor::Run::write_output(Loaded& it, const std::vector<std::uint8_t>& bytes,
                                 bool holds_slot) {
  it.rep.output_bytes = bytes.size();
  if (holds_slot) give_slot();
  const auto t0 = Clock::now();
  write_file_atomic(it.rep.output, bytes.data(), bytes.size());
  it.rep.times.write_ms = ms_since(t0);
}

/// A writer thread: writes what the device route encoded.
void Executor::Run::writer() {
  for (;;) {
    Loaded* raw = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv_write.wait(lock, [&] { return !write_q.empty() || all_reported; });
      if (write_q.empty()) return;
      raw = write_q.front();
      write_q.pop_front();
    }
    std::unique_ptr<Loaded> it(raw);
    try {
      std::vector<std::uint8_t> bytes;
      bytes.swap(it->job.encoded);
      std::vector<std::uint8_t>().swap(it->bytes);
      write_output(*it, bytes, false);
      it->rep.ok = true;
    } catch (const std::exception& e) {
      it->rep.ok = false;
      it->rep.error = e.what();
    }
    finish(std::move(it));
  }
}

/// Reports in input order, on the calling thread; the first exception of on_done is kept (and
/// rethrown by run() once every item is done).
std::exception_ptr Executor::Run::report_loop(
    const std::function<void(const ItemReport&)>& on_done) {
  std::exception_ptr callback_error;
  for (std::size_t next = 0; next < items.size(); ++next) {
    std::unique_ptr<Loaded> it;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv_done.wait(lock, [&] { return finished.count(next) > 0; });
      it = std::move(finished[next]);
      finished.erase(next);
    }
    ItemReport& rep = it->rep;
    rep.ok = rep.error.empty() && rep.ok;
    ++sum.files;
    if (!rep.ok) {
      ++sum.failures;
    } else {
      const double mp = double(rep.width) * double(rep.height) / 1e6;
      sum.megapixels += mp;
      if (!rep.decoder.empty()) ++sum.decoders[rep.decoder];
      BatchSummary::Share& sh = sum.routes[rep.route.empty() ? "pixels" : rep.route];
      ++sh.files;
      sh.megapixels += mp;
    }
    add(sum.summed, rep.times);
    if (on_done && !callback_error) {
      try {
        on_done(rep);
      } catch (...) {
        callback_error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      --inflight_items;
    }
    cv_budget.notify_all();
  }
  return callback_error;
}

BatchSummary Executor::run(const std::vector<WorkItem>& items,
                           const std::function<void(const ItemReport&)>& on_done) {
  Impl& m = *impl_;
  if (m.opt.op.equalize.backend == Backend::cuda) {
    const std::string why = cpu_fallback_reason();
    if (!why.empty()) throw Error(kNoDeviceForCuda + why + ")");
  }
  if (m.use_engines && !m.engines && cpu_fallback_reason().empty())
    m.engines = std::make_unique<EnginePool>(m.opt.devices, std::max(2, m.jobs / 4));
  Run r(m, items);
  m.current = &r;
  struct Current {
    Impl& m;
    ~Current() { m.current = nullptr; }
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
    for (auto& t : writers) t.join();
    for (auto& t : pool) t.join();
    throw Error(what + e.what());
  };
  try {
    if (r.dev)
      for (int k = 0; k < std::max(4, m.jobs / 2); ++k) writers.emplace_back([&r] { r.writer(); });
  } catch (const std::system_error& e) {
    if (writers.empty()) abandon("cannot start a thread to write the device's outputs: ", e);
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
  reader.join();
  for (auto& t : pool) t.join();
  for (auto& t : writers) t.join();
  BatchSummary sum = std::move(r.sum);
  sum.wall_s = std::chrono::duration<double>(Clock::now() - r.t_run).count();
  if (r.dev) {
    const detail::JpegDevices::Stats now = r.dev->stats();
    sum.device.batches = now.batches - r.stats_before.batches;
    sum.device.files = now.files - r.stats_before.files;
    sum.device.megapixels = now.megapixels - r.stats_before.megapixels;
    sum.device.decode_ms = now.decode_ms - r.stats_before.decode_ms;
    sum.device.encode_ms = now.encode_ms - r.stats_before.encode_ms;
    sum.device_init_ms = r.dev->ready_ms();
    sum.nvjpeg_init_ms = r.dev->handles_ms();
    if (r.dev->state() == detail::JpegDevices::State::failed)
      sum.device_note = "failed: " + r.dev->failure();
  }
  if (callback_error) std::rethrow_exception(callback_error);
  return sum;
}

}  // namespace histeq
