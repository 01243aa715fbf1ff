// executor_reader.cpp — the executor's reader (executor_run.hpp): the reading order, the
// decision to start the device route (start_devices), and the reader thread, which reads each
// file, plans it once (plan_item: format, size, depth, JPEG facts, route) and queues it for the
// device route or the CPU workers within the byte budget.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "executor_run.hpp"
#include "histeq/error.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/match.hpp"
#include "jpeg_device.hpp"

namespace histeq {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool jpeg_ext(const std::string& low) { return low == ".jpg" || low == ".jpeg"; }

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

/// The output format of an item: --format, else the output's extension (lower case).
std::string format_of(const WorkItem& w) {
  if (!w.format.empty()) return lower(w.format[0] == '.' ? w.format : "." + w.format);
  return lower(std::filesystem::path(w.output).extension().string());
}

/// The JPEG → JPEG inputs from their headers (the first 64 KiB of each): megapixels and
/// detail::jpeg_work.
struct JpegLoad {
  double mp = 0, work = 0;
};

/// The JPEG → JPEG inputs' load, summed until `enough` megapixels are passed: whether a run is
/// large enough for the device route to pay.
JpegLoad jpeg_load_at_least(const std::vector<WorkItem>& items, double enough) {
  JpegLoad load;
  std::vector<std::uint8_t> head(std::size_t(64) << 10);
  for (const WorkItem& w : items) {
    if (load.mp > enough) break;
    if (!jpeg_ext(format_of(w)) || w.input == "-") continue;
    const int fd = ::open(w.input.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st {};
    const bool sized = ::fstat(fd, &st) == 0;
    const ssize_t n = ::pread(fd, head.data(), head.size(), 0);
    ::close(fd);
    jpeg::Info info;
    if (n > 0 && jpeg::read_header(head.data(), std::size_t(n), &info)) {
      const double mp = double(info.width) * double(info.height) / 1e6;
      load.mp += mp;
      load.work +=
          detail::jpeg_work(mp, sized ? std::size_t(st.st_size) : std::size_t(n), info.progressive);
    }
  }
  return load;
}

/// "N MP": whole megapixels from 10 on; below, three digits (a few small JPEGs are not "0 MP").
std::string megapixels_text(double mp) {
  if (mp >= 10) return std::to_string(int(mp)) + " MP";
  char digits[32];
  std::snprintf(digits, sizeof digits, "%.3g MP", mp);
  return digits;
}

}  // namespace

using detail::Clock;
using detail::kCpuMpPerWorker;
using detail::Loaded;
using detail::ms_since;

/// Decides whether the device route runs and starts it on its own threads, or leaves the decision
/// to the router's thread (router_loop) until the CPU workers have timed their first files.
void Executor::Run::start_devices() {
  choice.cpu_planes = m.opt.codecs.empty() && m.opt.jpeg != JpegRoute::gpu &&
                      m.opt.op.equalize.backend != Backend::cuda;
  if (!m.device_possible) return;
  if (m.opt.op.kind == OpKind::match) {
    // The reference's one-plane histogram, as the route takes it once per run: one that cannot
    // be matched to (no pixel) leaves every file to the CPU workers, which name the cause.
    try {
      check_match_reference(*m.opt.op.reference->histograms(Mode::luma, 3, 8), 1, 256);
    } catch (const UsageError& e) {
      sum.device_note = std::string("not started: ") + e.what();
      return;
    }
  }
  if (m.device_must) {
    launch_device(true);
    return;
  }
  // Whole (decode slots too) where the CPU workers alone would need more than
  // device_start_cpu_s, its encoder alone from encoder_start_cpu_s (and an encoder slot).
  const double per_s = kCpuMpPerWorker * m.jobs;
  const double whole = per_s * m.opt.device_start_cpu_s;
  const double encoder =
      m.opt.encoder_slots > 0 && m.opt.encoder_start_cpu_s < m.opt.device_start_cpu_s
          ? per_s * m.opt.encoder_start_cpu_s
          : whole;
  // A route a previous run left is up: no start-up to weigh, and it stays whole if it was.
  const bool up = m.dev && m.dev->state() != detail::JpegDevices::State::failed;
  const JpegLoad load = jpeg_load_at_least(items, whole);
  const double mp = load.mp;
  if (mp <= encoder) {
    sum.device_note = "not started: the JPEGs hold " + megapixels_text(mp) +
                      ", which the CPU workers finish before the device would be ready";
    return;
  }
  // The encoder alone, where the fastest workers would not need encoder_start_cpu_s: the router's
  // thread decides at the workers' rate. Only there: its decision is the encoder or nothing, made
  // while the CPU workers decode every file (a hardware decoder started late would find the
  // files on their queue), and only where they time files on the planes route the encoder serves
  // (not beside device engines, whose context the workers make at once).
  const double fast_encoder = detail::kCpuMpPerWorkerFast * m.jobs * m.opt.encoder_start_cpu_s;
  if (m.opt.router_measures && !up && mp <= whole && mp <= fast_encoder && choice.cpu_planes &&
      !m.use_engines) {
    deferred = true;
    deferred_mp = mp;
    deferred_work = load.work;
    return;  // router_loop decides, on the thread run() starts
  }
  const bool decoders = mp > whole || (up && m.dev->state() == detail::JpegDevices::State::ready);
  if (!decoders)
    sum.device_note = "encoder only: the JPEGs hold " + megapixels_text(mp) +
                      ", which the CPU workers decode before the hardware decoder would be ready";
  launch_device(decoders);
}

/// Starts the device route (its decode slots too where `decoders`) and makes it this run's:
/// before the workers start, or on the router's thread while they run.
void Executor::Run::launch_device(bool decoders) {
  if (!m.dev) {
    detail::JpegDevices::Options o;
    o.devices = m.opt.devices;
    o.equalize = m.opt.op.equalize;
    if (m.opt.op.kind == OpKind::match) o.reference = m.opt.op.reference;
    o.encode = {m.opt.encode.quality, m.opt.encode.subsampling};
    o.max_pixels = m.opt.max_pixels;
    o.batch = m.opt.jpeg_batch;
    o.slots = kJpegSlotsPerDevice;
    o.encoder_slots = m.opt.encoder_slots;
    o.encoder_states = m.opt.encoder_states;
    o.decoders = decoders;
    o.hybrid_decoders = m.opt.hybrid_decoders;
    o.gpu_huffman = m.opt.progressive == ProgressiveJpeg::gpu;
    o.gpu_huffman_decoders = m.opt.gpu_huffman_decoders;
    o.early_hybrid = m.opt.early_hybrid;
    Impl* impl = &m;
    m.dev = std::make_unique<detail::JpegDevices>(o, [impl](detail::DeviceJob* j) {
      if (Run* run = impl->current.load()) run->device_done(j);
    });
  } else if (decoders) {
    m.dev->want_decoders();
  }
  detail::JpegDevices* d = m.dev.get();
  {
    std::lock_guard<std::mutex> lock(mu);
    stats_before = d->stats();
    sum.device_started = true;
    // (without decode slots no file is queued for the device: the CPU workers decode them all)
    choice.device_planes = decoders;
    choice.device_all_jpeg = m.device_must;
    // The reader says when it has read the last file (reader_loop's end), or has said it.
    d->set_feeding(!reader_done);
    dev = d;
  }
  cv_work.notify_all();
}

void Executor::Run::note_rate(double work, double s) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!deferred) return;
    rate_work += work;
    rate_s += s;
    if (++rate_files < std::min(detail::kRateFiles, m.jobs)) return;
  }
  cv_router.notify_all();
}

/// The router's decision for a run start_devices left to it: once the workers have timed
/// kRateFiles files (or kRateWaitS has passed, or the run is over), the encoder's start rule at
/// their rate (the assumed one where none was timed): the route's encoder alone, or nothing.
void Executor::Run::router_loop() {
  std::unique_lock<std::mutex> lock(mu);
  const auto deadline = t_run + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(detail::kRateWaitS));
  cv_router.wait_until(lock, deadline, [&] {
    return rate_files >= std::min(detail::kRateFiles, m.jobs) || all_reported || m.cancelled;
  });
  deferred = false;
  if (all_reported || m.cancelled) {
    sum.device_note = "not started: the JPEGs hold " + megapixels_text(deferred_mp) +
                      ", which the CPU workers finished before the router had their rate";
    return;
  }
  // (their files' work at the rate they measured, or the megapixels at the assumed rate)
  const double cpu_s = rate_s > 0 ? deferred_work / (rate_work / rate_s * m.jobs)
                                  : deferred_mp / (kCpuMpPerWorker * m.jobs);
  char why[160];
  std::snprintf(why, sizeof why, ", about %.2f s for the CPU workers at the %.0f MP/s each %s",
                cpu_s, deferred_mp / cpu_s / m.jobs,
                rate_s > 0 ? "their first files say" : "the router assumes");
  const std::string held = "the JPEGs hold " + megapixels_text(deferred_mp) + why;
  if (cpu_s <= m.opt.encoder_start_cpu_s) {
    sum.device_note = "not started: " + held + ", which they finish before the device would help";
    return;
  }
  // (the route's start-up figures count from here: say when that was)
  char when[64];
  std::snprintf(when, sizeof when, "; started %.0f ms into the run", ms_since(t_run));
  sum.device_note = "encoder only: " + held + when;
  lock.unlock();
  try {
    launch_device(false);
  } catch (const std::exception& e) {  // (on this thread: the CPU workers run the files)
    std::lock_guard<std::mutex> guard(mu);
    sum.device_note = std::string("failed: ") + e.what();
  }
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
    RouteChoice route_choice;
    {  // a slot for the item (bounds the reports waiting for an earlier one)
      std::unique_lock<std::mutex> lock(mu);
      cv_budget.wait(lock, [&] { return inflight_items < max_items; });
      ++inflight_items;
      route_choice = choice;  // (the router's thread may start the device route meanwhile)
    }
    if (m.cancelled) {  // Executor::cancel: not read, reported at once
      finish_cancelled(std::move(it));
      continue;
    }
    const auto t0 = Clock::now();
    try {
      it->bytes = read_image_file(items[i].input);
      it->plan = plan_item(it->bytes.data(), it->bytes.size(), m.opt.op, it->ext, m.opt.encode,
                           m.opt.max_pixels, route_choice);
    } catch (const std::exception& e) {
      set_error(it->rep, e);
    }
    it->rep.times.read_ms = ms_since(t0);
    if (!it->rep.error.empty()) {
      finish(std::move(it));
      continue;
    }
    it->cost = it->plan.cost;
    std::unique_lock<std::mutex> lock(mu);
    cv_budget.wait(lock, [&] {
      return inflight_bytes == 0 || inflight_bytes + it->cost <= m.opt.max_inflight_bytes ||
             m.cancelled;
    });
    if (m.cancelled) {
      lock.unlock();
      it->cost = 0;  // never charged
      finish_cancelled(std::move(it));
      continue;
    }
    inflight_bytes += it->cost;
    sum.peak_inflight_bytes = std::max(sum.peak_inflight_bytes, inflight_bytes);
    // (a route whose start failed would hand the file straight back, to the front of the
    // workers' queue: the last read taken first; one the run must use reports the failure per file)
    if (dev && it->plan.route == ItemRoute::jpeg_device &&
        (m.device_must || dev->state() != detail::JpegDevices::State::failed)) {
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
    charge_cpu(*it);  // (a device plan the CPU runs: what the CPU route holds)
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

}  // namespace histeq
