// executor.cpp — many files through read → decode → [upload → equalize → download] → encode →
// write, overlapping across files (histeq/executor.hpp; DESIGN.md "The executor").
//
// Why threads and bounded queues of our own rather than oneTBB's parallel_pipeline: the memory
// bound we need is in *bytes* (one 15 MP photo weighs as much as a thousand thumbnails), and
// parallel_pipeline bounds only the number of tokens; waiting for bytes inside one of its filters
// blocks a TBB worker and deadlocks with one thread. Here the reader is a thread of its own that
// may block on the byte budget, the workers never wait on each other, and no dependency is added
// to the GPU machine. The stages of one item run in order on one worker (decode, equalize,
// encode, write); overlap comes from `jobs` items in flight at once, the device stages of an item
// running on a device worker borrowed for those few milliseconds while the other workers decode
// and encode.
#include "histeq/executor.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <unistd.h>

#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/jpeg_planes.hpp"
#include "histeq/lut.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/planes.hpp"
#include "histogram/registry.hpp"
#include "io/png_fast.hpp"
#include "support/device_buffer.hpp"

namespace histeq {
namespace {

constexpr int kBins = 256;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// Page-locked host memory that grows (never per image: only when a larger image arrives).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  std::uint8_t* reserve(std::size_t n) {
    if (n > size_) {
      if (p_) cudaFreeHost(p_);
      p_ = nullptr;
      size_ = 0;
      HISTEQ_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n));
      size_ = n;
    }
    return p_;
  }

 private:
  std::uint8_t* p_ = nullptr;
  std::size_t size_ = 0;
};

template <class T>
T* grow(DeviceBuffer<T>& b, std::size_t n) {
  if (b.size() < n) b = DeviceBuffer<T>(n);
  return b.get();
}

/// One device worker: a stream (the Equalizer's), buffers kept across items, events, and its
/// nvJPEG codec. The codec is made by the initializing thread once the device's shared nvJPEG
/// handles exist (jpeg_ready then turns true; nothing else writes `jpeg`); it is not
/// thread-safe, and only the thread holding the worker uses it (its JPEG thread, or a CPU worker
/// that borrowed the worker to equalize and encode an image it decoded). Declared after eq, so
/// it is destroyed before the stream it queues on.
struct DeviceWorker {
  int device = 0;
  std::string name;
  gpu::Equalizer eq;
  DeviceBuffer<std::uint8_t> d_in, d_planes, d_out;
  PinnedBuffer h_in, h_out;
  Event e_start, e_up, e_hist, e_lut, e_apply, e_down;
  std::unique_ptr<gpu::JpegCodec> jpeg;
  std::atomic<bool> jpeg_ready{false};
  std::thread jpeg_thread;    ///< takes JPEG jobs in batches (Impl::jpeg_loop)
  bool decodes_jpeg = false;  ///< gets a jpeg_thread once nvJPEG is up (set before any use)
  explicit DeviceWorker(int dev) : device(dev), name(gpu::device_name()) {}
  /// The codec, when it is made (else nullptr).
  gpu::JpegCodec* codec() {
    return jpeg_ready.load(std::memory_order_acquire) ? jpeg.get() : nullptr;
  }
};

struct Loaded {
  std::size_t index = 0;
  std::vector<std::uint8_t> bytes;
  std::size_t cost = 0;
  /// A JPEG that nvJPEG's route would decode on the device (baseline, 8-bit, 1 or 3
  /// components, upright), from its header; set by the reader when that route is in play.
  bool for_device = false;
  ItemReport rep;
};

/// A JPEG item handed by a CPU worker to the device workers' JPEG threads.
struct JpegJob {
  Loaded* it = nullptr;
  bool jpeg_out = false;              ///< encode on the device (else download into `host`)
  std::vector<std::uint8_t> encoded;  ///< the output file's bytes (jpeg_out)
  Image host;                         ///< the equalized pixels (!jpeg_out)
  std::string error;
  bool device_failed = false;  ///< the error is the device's or nvJPEG's, not the file's
  std::promise<void> done;
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
  std::shared_ptr<Codec> fast_png;
  /// Colour JPEG -> JPEG in luma mode through the stored planes (jpeg_planes.hpp) for the JPEGs
  /// the CPU workers decode: set once, from the options (backend, --decoder, codecs).
  bool planes = false;

  ~Impl() {
    if (init_thread.joinable()) init_thread.join();
    if (nvjpeg_thread.joinable()) nvjpeg_thread.join();
    {
      std::lock_guard<std::mutex> lock(jmu);
      jstop = true;
    }
    jcv.notify_all();
    for (auto& w : workers)
      if (w->jpeg_thread.joinable()) w->jpeg_thread.join();
    for (auto& w : workers) {  // each worker's CUDA objects are freed on its own device
      cudaSetDevice(w->device);
      w.reset();
    }
  }

  // ---- devices, initialized in the background ----
  enum class DevState { none, initializing, ready, failed };
  std::mutex dev_mu;
  std::condition_variable dev_cv;
  DevState dev_state = DevState::none;
  std::string dev_why;
  std::vector<std::unique_ptr<DeviceWorker>> workers;
  std::vector<DeviceWorker*> free_workers;
  std::thread init_thread;
  /// --backend auto: the devices start in run(), when the list names a JPEG (names_a_jpeg).
  bool devices_deferred = false;
  /// Items of the current run that no worker has taken yet (device_has_room's end of a run).
  std::atomic<std::size_t> untaken{0};
  Clock::time_point t_created = Clock::now();
  double device_init_ms = 0;

  // ---- CPU slots: at most `jobs` items in their CPU stages at once ----
  // run() starts more workers than `jobs` when JPEGs may go to the device workers: a worker
  // whose JPEG is on the device only waits, and gives its slot to another meanwhile.
  std::mutex slot_mu;
  std::condition_variable slot_cv;
  int slots_free = 0;
  void take_slot() {
    std::unique_lock<std::mutex> lock(slot_mu);
    slot_cv.wait(lock, [&] { return slots_free > 0; });
    --slots_free;
  }
  void give_slot() {
    {
      std::lock_guard<std::mutex> lock(slot_mu);
      ++slots_free;
    }
    slot_cv.notify_one();
  }
  /// A worker's hold on a CPU slot: taken where an item's CPU work begins, given back while it
  /// only waits (its JPEG on a device worker) and when the item is done.
  struct Slot {
    Impl& m;
    bool held = false;
    void take() {
      if (!held) m.take_slot();
      held = true;
    }
    void give() {
      if (held) m.give_slot();
      held = false;
    }
    ~Slot() { give(); }
  };

  // ---- JPEG on the device workers ----
  std::mutex jmu;
  std::condition_variable jcv;
  std::deque<JpegJob*> jqueue;
  bool jstop = false;
  double nvjpeg_init_ms = 0;  // under jmu: wall time of init_nvjpeg (handles of every GPU)
  int nvjpeg_ready = 0;       // device workers whose codec is up (under jmu)
  int jpeg_threads = 0;       // device workers decoding JPEG batches (under jmu)
  bool nvjpeg_broken =
      false;  // the handles or a batch failed for the device's or nvJPEG's sake (under jmu)
  std::string nvjpeg_why;  // why the handles failed (under jmu)

  /// Whether JPEG items may take the nvJPEG route at all.
  bool gpu_jpeg_wanted() const {
    return opt.task == Task::equalize && opt.jpeg != JpegRoute::cpu &&
           opt.equalize.backend != Backend::cpu && gpu::nvjpeg_built();
  }

  /// CUDA's start-up (context, streams, pinned buffers) on a background thread; workers use the
  /// CPU meanwhile (auto) or wait (cuda). Called once, from the constructor or run().
  void start_devices() {
    std::lock_guard<std::mutex> lock(dev_mu);
    devices_deferred = false;
    dev_state = DevState::initializing;
    init_thread = std::thread([this] { init_devices(); });
  }

  /// Whether a run with --backend auto starts the devices: when an input is named like a JPEG
  /// (or is standard input). For 8-bit equalization of other formats the decoders and encoders
  /// on the CPU are the work (tens of ns per pixel) and the CPU equalizes an image in a few ns
  /// per pixel, while a CUDA context costs 0.3-0.4 s of start-up and 0.2 s of teardown at exit
  /// (H200 machine): a folder of PNGs finishes sooner without it, with the same bytes (the
  /// backends are exact twins). JPEGs start the devices for nvJPEG.
  static bool names_a_jpeg(const std::vector<WorkItem>& items) {
    for (const WorkItem& w : items) {
      if (w.input == "-") return true;
      std::string ext = std::filesystem::path(w.input).extension().string();
      for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (ext == ".jpg" || ext == ".jpeg" || ext == ".jpe" || ext == ".jfif") return true;
    }
    return false;
  }

  /// A file pipeline waits on its devices from several threads while libjpeg-turbo and the PNG
  /// codecs need every core: a waiting thread sleeps until the device is done
  /// (cudaDeviceScheduleBlockingSync) instead of spinning on a core, CUDA's default. Set before
  /// the contexts exist; where one already does (another library in the process made it), its
  /// flags stay. (Measured on the H200, 144 photos: the same wall time as spinning.)
  static void prefer_blocking_sync() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    for (int d = 0; d < count; ++d)
      if (cudaSetDevice(d) == cudaSuccess) cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
    cudaGetLastError();  // a context made elsewhere keeps its flags: not an error here
    if (count > 0) cudaSetDevice(0);
  }

  void init_devices() {
    std::vector<std::unique_ptr<DeviceWorker>> made;
    std::string why;
    try {
      prefer_blocking_sync();
      if (!cuda_available(&why)) throw Error(why);
      int count = 0;
      HISTEQ_CUDA_CHECK(cudaGetDeviceCount(&count));
      std::vector<int> ords = opt.devices;
      if (ords.empty()) {
        const int per = opt.workers_per_device > 0 ? opt.workers_per_device
                        : gpu_jpeg_wanted()        ? kJpegThreadsPerDevice
                                                   : 1;
        for (int d = 0; d < count; ++d)
          for (int k = 0; k < per; ++k) ords.push_back(d);
      }
      std::map<int, int> decoding;  // JPEG-decoding workers per device so far
      for (int d : ords) {
        if (d < 0 || d >= count)
          throw Error("no CUDA device " + std::to_string(d) + " (" + std::to_string(count) +
                      " visible)");
        HISTEQ_CUDA_CHECK(cudaSetDevice(d));
        made.push_back(std::make_unique<DeviceWorker>(d));
        made.back()->decodes_jpeg = gpu_jpeg_wanted() && decoding[d]++ < kJpegThreadsPerDevice;
      }
      std::lock_guard<std::mutex> lock(dev_mu);
      workers = std::move(made);
      for (auto& w : workers) free_workers.push_back(w.get());
      device_init_ms = ms_since(t_created);
      dev_state = DevState::ready;
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(dev_mu);
      dev_state = DevState::failed;
      dev_why = e.what();
    }
    dev_cv.notify_all();
  }

  /// nvJPEG starts with the first JPEG item that finds the devices ready (a folder without
  /// JPEGs never pays for its handles), on a thread of its own while the CPU workers decode the
  /// first JPEGs themselves.
  std::once_flag nvjpeg_once;
  std::thread nvjpeg_thread;
  void start_nvjpeg() {
    if (!gpu_jpeg_wanted()) return;
    {
      std::lock_guard<std::mutex> lock(dev_mu);
      if (dev_state != DevState::ready) return;  // the next JPEG item tries again
    }
    std::call_once(nvjpeg_once, [this] { nvjpeg_thread = std::thread([this] { init_nvjpeg(); }); });
  }

  /// One set of nvJPEG handles per GPU (shared by its device workers), a codec per worker, then
  /// the JPEG threads. A failure leaves JPEGs to the CPU decoder (--decoder auto) or fails them
  /// with the cause (--decoder gpu).
  void init_nvjpeg() {
    const auto t0 = Clock::now();
    std::map<int, std::shared_ptr<gpu::JpegHandles>> handles;
    std::string why;
    std::vector<std::unique_ptr<DeviceWorker>> extra;  // the encode workers, made now
    try {
      for (auto& w : workers)
        if (!handles.count(w->device)) handles[w->device] = gpu::make_jpeg_handles(w->device);
      if (opt.devices.empty() && opt.workers_per_device == 0) {
        // Only a run with JPEGs pays for these (each holds pinned and device buffers).
        for (const auto& kv : handles) {
          HISTEQ_CUDA_CHECK(cudaSetDevice(kv.first));
          for (int k = 0; k < kJpegThreadsPerDevice; ++k)
            extra.push_back(std::make_unique<DeviceWorker>(kv.first));
        }
      }
      const auto make_codec = [&](DeviceWorker& w) {
        HISTEQ_CUDA_CHECK(cudaSetDevice(w.device));
        gpu::JpegCodecOptions jo;
        jo.max_pixels = opt.max_pixels;
        w.jpeg = std::make_unique<gpu::JpegCodec>(w.eq.stream(), jo, handles[w.device]);
        w.jpeg_ready.store(true, std::memory_order_release);
      };
      for (auto& w : extra) make_codec(*w);
      for (auto& w : workers) make_codec(*w);
    } catch (const std::exception& e) {
      why = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(jmu);
      nvjpeg_init_ms = ms_since(t0);
      if (!why.empty()) {
        nvjpeg_broken = true;
        nvjpeg_why = why;
      }
      nvjpeg_ready = why.empty() ? int(workers.size()) : 0;
    }
    jcv.notify_all();
    if (!why.empty()) return;
    {  // the encode workers join the others (nothing but this thread walks `workers` meanwhile)
      std::lock_guard<std::mutex> lock(dev_mu);
      for (auto& w : extra) {
        free_workers.push_back(w.get());
        workers.push_back(std::move(w));
      }
    }
    dev_cv.notify_all();
    for (auto& w : workers) {
      if (!w->decodes_jpeg) continue;  // equalizes and encodes what the CPU workers decoded
      DeviceWorker* wp = w.get();
      wp->jpeg_thread = std::thread([this, wp] { jpeg_loop(*wp); });
      std::lock_guard<std::mutex> lock(jmu);
      ++jpeg_threads;
    }
  }

  /// The JPEG threads the devices will have (as init_nvjpeg starts them; before the devices are
  /// counted, one GPU is assumed when `devices` is empty).
  int jpeg_threads_planned() const {
    if (opt.devices.empty()) return kJpegThreadsPerDevice;
    std::map<int, int> per;
    for (int d : opt.devices) ++per[d];
    int n = 0;
    for (const auto& kv : per) n += std::min(kv.second, kJpegThreadsPerDevice);
    return n;
  }

  /// A free device worker, or nullptr when the item should run on the CPU. Throws when the
  /// backend is cuda and the devices failed.
  DeviceWorker* acquire_device() {
    std::unique_lock<std::mutex> lock(dev_mu);
    for (;;) {
      switch (dev_state) {
        case DevState::none: return nullptr;
        case DevState::failed:
          if (opt.equalize.backend == Backend::cuda) throw Error(kNoDeviceForCuda + dev_why + ")");
          return nullptr;
        case DevState::initializing:
          if (opt.equalize.backend != Backend::cuda) return nullptr;  // auto: CPU meanwhile
          break;
        case DevState::ready:
          if (!free_workers.empty()) {
            // A worker without a JPEG thread first: a JPEG thread would wait for its own.
            auto at = std::find_if(free_workers.rbegin(), free_workers.rend(),
                                   [](const DeviceWorker* w) { return !w->decodes_jpeg; });
            DeviceWorker* w = at != free_workers.rend() ? *at : free_workers.back();
            free_workers.erase(std::find(free_workers.begin(), free_workers.end(), w));
            return w;
          }
          // auto: every device worker is busy: equalize on this CPU thread rather than wait
          // (the same bytes; the CPU worker never idles behind the device).
          if (opt.equalize.backend != Backend::cuda) return nullptr;
          break;
      }
      dev_cv.wait(lock);
    }
  }
  /// This worker, once no item borrows it (its JPEG thread then has it alone).
  void acquire_this(DeviceWorker* w) {
    std::unique_lock<std::mutex> lock(dev_mu);
    for (;;) {
      auto at = std::find(free_workers.begin(), free_workers.end(), w);
      if (at != free_workers.end()) {
        free_workers.erase(at);
        return;
      }
      dev_cv.wait(lock);
    }
  }
  /// For a JPEG item: true when it goes to the device workers now; false: the CPU route.
  /// Throws (the item fails) when --decoder gpu and the devices failed.
  bool route_jpeg_to_device() {
    if (!gpu_jpeg_wanted()) return false;
    const bool must = opt.jpeg == JpegRoute::gpu || opt.equalize.backend == Backend::cuda;
    std::unique_lock<std::mutex> lock(dev_mu);
    if (must) dev_cv.wait(lock, [&] { return dev_state != DevState::initializing; });
    if (dev_state == DevState::failed && must) throw Error(kNoDeviceForGpuJpeg + dev_why + ")");
    if (dev_state != DevState::ready) return false;  // auto: CPU while the devices start
    lock.unlock();
    start_nvjpeg();
    std::unique_lock<std::mutex> jl(jmu);
    if (must) {  // wait for the handles; their failure is the item's error
      jcv.wait(jl, [&] { return nvjpeg_ready > 0 || nvjpeg_broken; });
      if (nvjpeg_ready == 0)
        throw Error("GPU JPEG decoding: nvJPEG could not start (" + nvjpeg_why + ")");
      return true;
    }
    // auto: the CPU workers take a JPEG themselves while the nvJPEG handles are being created,
    // and when the device workers are behind (more than two batches per JPEG thread waiting).
    jl.unlock();
    return device_has_room();
  }
  /// --decoder auto: whether JPEGs for the device may wait for it (the route can take them now or
  /// once it is up), so that the CPU workers take the other items first.
  bool device_route_open() {
    if (!gpu_jpeg_wanted() || opt.jpeg != JpegRoute::automatic ||
        opt.equalize.backend == Backend::cuda)
      return false;
    {
      std::lock_guard<std::mutex> lock(dev_mu);
      if (dev_state == DevState::failed || dev_state == DevState::none) return false;
    }
    std::lock_guard<std::mutex> lock(jmu);
    return !nvjpeg_broken;
  }
  /// Whether the JPEG threads take another job now (as route_jpeg_to_device decides).
  bool device_has_room() {
    std::lock_guard<std::mutex> lock(jmu);
    const std::size_t limit =
        2 * std::size_t(std::max(1, opt.jpeg_batch)) * std::size_t(std::max(jpeg_threads, 1));
    // The end of a run (auto): the last items stay on the CPU workers. A JPEG handed over now
    // would wait behind up to `limit` others for the device while the CPU workers ran out of
    // work: the run must not end on the device's queue. (H200, 144 photos: no measurable
    // change; the defaults stayed 13-18 % slower than --backend cpu, see docs/benchmarks.md.)
    const bool endgame = opt.jpeg == JpegRoute::automatic &&
                         opt.equalize.backend == Backend::automatic &&
                         untaken.load() <= limit + std::size_t(jobs);
    return nvjpeg_ready > 0 && !nvjpeg_broken && jqueue.size() < limit && !endgame;
  }

  /// Hands a job to the JPEG threads and waits for it.
  void run_jpeg_job(JpegJob& job) {
    std::future<void> f = job.done.get_future();
    {
      std::lock_guard<std::mutex> lock(jmu);
      jqueue.push_back(&job);
    }
    jcv.notify_one();
    f.wait();
  }

  /// A device worker's JPEG thread: takes up to jpeg_batch waiting jobs, decodes them in one
  /// nvJPEG call, equalizes each on the device, encodes each JPEG output with nvJPEG (others
  /// are downloaded for the CPU workers to encode), then completes the jobs.
  void jpeg_loop(DeviceWorker& w) {
    for (;;) {
      std::vector<JpegJob*> batch;
      {
        std::unique_lock<std::mutex> lock(jmu);
        jcv.wait(lock, [&] { return jstop || !jqueue.empty(); });
        if (jqueue.empty()) return;  // jstop
        const std::size_t n =
            std::min<std::size_t>(jqueue.size(), std::size_t(std::max(1, opt.jpeg_batch)));
        batch.assign(jqueue.begin(), jqueue.begin() + std::ptrdiff_t(n));
        jqueue.erase(jqueue.begin(), jqueue.begin() + std::ptrdiff_t(n));
      }
      acquire_this(&w);
      try {
        jpeg_batch_on(w, batch);
      } catch (const std::exception& e) {  // the device is in trouble: fail what is not done
        for (JpegJob* j : batch)
          if (j->error.empty() && j->encoded.empty() && j->host.pixels.empty()) {
            j->error = j->it->rep.input + ": " + e.what();
            j->device_failed = true;
          }
        std::lock_guard<std::mutex> lock(jmu);
        nvjpeg_broken = true;  // --decoder auto sends the next JPEGs to the CPU workers
      }
      release_device(&w);
      for (JpegJob* j : batch) j->done.set_value();
    }
  }

  void jpeg_batch_on(DeviceWorker& w, std::vector<JpegJob*>& batch) {
    HISTEQ_CUDA_CHECK(cudaSetDevice(w.device));
    std::vector<gpu::JpegInput> in;
    for (JpegJob* j : batch)
      in.push_back({j->it->bytes.data(), j->it->bytes.size(), j->it->rep.input});
    auto t = Clock::now();
    const std::vector<gpu::DeviceImage> dec = w.jpeg->decode(in);
    const double decode_ms = ms_since(t);
    double batch_px = 0;
    for (const auto& d : dec) batch_px += d.error.empty() ? double(d.width) * d.height : 0.0;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      JpegJob& j = *batch[i];
      const gpu::DeviceImage& img = dec[i];
      ItemReport& rep = j.it->rep;
      if (!img.error.empty()) {
        j.error = img.error;
        continue;
      }
      rep.width = img.width;
      rep.height = img.height;
      rep.channels = img.channels;
      rep.decoder = img.decoder;
      // the batch's decode time, shared by pixels
      rep.times.decode_ms =
          batch_px > 0 ? decode_ms * (double(img.width) * img.height / batch_px) : 0;
      try {
        const Mode mode = opt.equalize.mode.value_or(default_mode(img.channels));
        const int out_ch = output_channels(mode, img.channels);
        const std::size_t px = std::size_t(img.width) * std::size_t(img.height);
        std::uint8_t* d_out = grow(w.d_out, std::max<std::size_t>(px * std::size_t(out_ch), 1));
        std::uint8_t* d_planes =
            img.channels > 1 ? grow(w.d_planes, px * std::size_t(plane_count(mode, img.channels)))
                             : nullptr;
        EqualizeReport& er = rep.equalize;
        gpu::equalize_on_device(w.eq, img, opt.equalize, d_out, &er, d_planes);
        er.device = w.name;
        rep.times.equalize_ms = er.times.histogram_ms + er.times.cdf_lut_ms + er.times.apply_ms;
        rep.output_channels = out_ch;
        if (j.jpeg_out) {
          t = Clock::now();
          j.encoded =
              w.jpeg->encode(d_out, img.width, img.height, out_ch,
                             {opt.encode.quality, opt.encode.subsampling}, img.exif, img.icc);
          rep.times.encode_ms = ms_since(t);
          rep.encoder = "nvjpeg";
        } else {
          t = Clock::now();
          j.host.width = img.width;
          j.host.height = img.height;
          j.host.channels = out_ch;
          j.host.exif = img.exif;
          j.host.icc = img.icc;
          j.host.pixels.resize(px * std::size_t(out_ch));
          HISTEQ_CUDA_CHECK(cudaMemcpyAsync(j.host.pixels.data(), d_out, j.host.pixels.size(),
                                            cudaMemcpyDeviceToHost,
                                            reinterpret_cast<cudaStream_t>(w.eq.stream())));
          w.eq.synchronize();
          rep.times.download_ms = ms_since(t);
        }
        er.luts.clear();
        er.histograms.clear();
      } catch (const CudaError&) {
        throw;
      } catch (const std::exception& e) {
        j.error = e.what();
      }
    }
  }

  void release_device(DeviceWorker* w) {
    {
      std::lock_guard<std::mutex> lock(dev_mu);
      free_workers.push_back(w);
    }
    dev_cv.notify_all();
  }

  // ---- stages ----
  void decode(Loaded& it, Image& img) {
    const auto t0 = Clock::now();
    bool done = false;
    for (const auto& c : opt.codecs) {
      if (c && c->decode(it.bytes.data(), it.bytes.size(), it.rep.input, opt.max_pixels, &img)) {
        it.rep.decoder = c->name();
        done = true;
        break;
      }
    }
    if (!done && fast_png &&
        fast_png->decode(it.bytes.data(), it.bytes.size(), it.rep.input, opt.max_pixels, &img)) {
      it.rep.decoder = fast_png->name();
      img.icc = png::read_iccp(it.bytes.data(), it.bytes.size());  // as decode_image keeps it
      done = true;
    }
    if (!done) {
      img = decode_image(it.bytes.data(), it.bytes.size(), it.rep.input, opt.max_pixels);
      it.rep.decoder = jpeg::is_jpeg(it.bytes.data(), it.bytes.size()) ? "libjpeg-turbo" : "stb";
    }
    std::vector<std::uint8_t>().swap(it.bytes);  // the file's bytes are no longer needed
    it.rep.times.decode_ms = ms_since(t0);
  }

  /// Equalizes on the CPU; when the output has the input's channel count the pixels are
  /// rewritten in place (in.pixels moves into the result: no second image-sized buffer).
  Image equalize_cpu(Image& in, Mode mode, bool apply, EqualizeReport& rep) {
    const auto t0 = Clock::now();
    rep.backend = "cpu";
    rep.device = "CPU (" + std::to_string(jobs) + (jobs == 1 ? " thread)" : " threads)");
    rep.kernel = "cpu";
    const std::size_t pixels = in.pixel_count();
    const int planes_n = plane_count(mode, in.channels);
    std::vector<std::uint8_t> planes_buf;
    const std::uint8_t* planes = in.pixels.data();
    if (in.channels > 1) {
      planes_buf.resize(std::size_t(planes_n) * pixels);
      cpu::extract_planes(in.pixels.data(), pixels, in.channels, mode, planes_buf.data(), 1);
      planes = planes_buf.data();
    }
    auto t = Clock::now();
    for (int p = 0; p < planes_n; ++p)
      rep.histograms.push_back(
          cpu::histogram(planes + std::size_t(p) * pixels, pixels, SampleType::u8, kBins, 1));
    rep.times.histogram_ms = ms_since(t0);
    Image out;
    if (apply) {
      t = Clock::now();
      for (const Histogram& h : rep.histograms)
        rep.luts.push_back(make_lut(h.data(), opt.equalize.formula));
      rep.times.cdf_lut_ms = ms_since(t);
      t = Clock::now();
      const int out_ch = output_channels(mode, in.channels);
      if (out_ch == in.channels) {
        // cpu::apply reads each pixel before writing it, so in == out is safe when the
        // channel counts match (each slice touches only its own pixels).
        planes_buf = std::vector<std::uint8_t>();
        cpu::apply(in.pixels.data(), pixels, in.channels, mode, rep.luts.data(), in.pixels.data(),
                   1);
        out = std::move(in);
      } else {
        out.width = in.width;
        out.height = in.height;
        out.channels = out_ch;
        out.exif = in.exif;  // metadata travels as pipeline.cpp's equalize keeps it
        out.icc = in.icc;
        out.pixels.resize(pixels * std::size_t(out.channels));
        cpu::apply(in.pixels.data(), pixels, in.channels, mode, rep.luts.data(), out.pixels.data(),
                   1);
      }
      rep.times.apply_ms = ms_since(t);
    }
    rep.times.total_ms = ms_since(t0);
    return out;
  }

  /// Equalizes on device worker w. download false: the output stays in w.d_out (the returned
  /// Image then has the shape and metadata but no pixels).
  Image equalize_device(DeviceWorker& w, Image& in, Mode mode, bool apply, EqualizeReport& rep,
                        ItemTimes& times, bool download = true) {
    const auto t0 = Clock::now();
    HISTEQ_CUDA_CHECK(cudaSetDevice(w.device));
    rep.backend = "cuda";
    rep.device = w.name;
    const cudaStream_t s = w.eq.stream();
    const std::size_t pixels = in.pixel_count();
    const int planes_n = plane_count(mode, in.channels);
    const int out_ch = output_channels(mode, in.channels);
    const std::size_t in_bytes = in.byte_count();
    const std::size_t out_bytes = pixels * std::size_t(out_ch);

    std::uint8_t* h_in = w.h_in.reserve(std::max<std::size_t>(in_bytes, 1));
    std::uint8_t* d_in = grow(w.d_in, std::max<std::size_t>(in_bytes, 1));
    std::uint8_t* d_planes =
        in.channels > 1 ? grow(w.d_planes, std::size_t(planes_n) * pixels) : nullptr;
    std::uint8_t* d_out = apply ? grow(w.d_out, std::max<std::size_t>(out_bytes, 1)) : nullptr;
    std::uint8_t* h_out =
        apply && download ? w.h_out.reserve(std::max<std::size_t>(out_bytes, 1)) : nullptr;
    std::uint64_t* d_hist = w.eq.device_hist(planes_n);
    std::uint8_t* d_luts = w.eq.device_lut(planes_n);
    const std::uint8_t* planes = in.channels > 1 ? d_planes : d_in;

    const auto t_stage = Clock::now();
    std::memcpy(h_in, in.pixels.data(), in_bytes);  // staging copy into pinned memory
    const double stage_in_ms = ms_since(t_stage);

    w.e_start.record(s);
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(d_in, h_in, in_bytes, cudaMemcpyHostToDevice, s));
    w.e_up.record(s);
    if (in.channels > 1) w.eq.extract_planes(d_in, pixels, in.channels, mode, d_planes);
    std::string ran;
    for (int p = 0; p < planes_n; ++p)
      ran = w.eq.histogram(opt.equalize.kernel, planes + std::size_t(p) * pixels, pixels,
                           SampleType::u8, kBins, d_hist + std::size_t(p) * kBins,
                           opt.equalize.block_size);
    w.e_hist.record(s);
    rep.kernel = ran.empty() ? opt.equalize.kernel : ran;
    if (apply) {
      w.eq.cdf_lut(d_hist, planes_n, opt.equalize.formula, d_luts);
      w.e_lut.record(s);
      w.eq.apply(d_in, pixels, in.channels, mode, d_luts, d_out);
      w.e_apply.record(s);
      if (download)
        HISTEQ_CUDA_CHECK(cudaMemcpyAsync(h_out, d_out, out_bytes, cudaMemcpyDeviceToHost, s));
      w.e_down.record(s);
    }
    std::vector<std::uint64_t> h_hist(std::size_t(planes_n) * kBins);
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(h_hist.data(), d_hist, h_hist.size() * sizeof(std::uint64_t),
                                      cudaMemcpyDeviceToHost, s));
    std::vector<std::uint8_t> h_lut(apply ? std::size_t(planes_n) * kBins : 0);
    if (apply)
      HISTEQ_CUDA_CHECK(
          cudaMemcpyAsync(h_lut.data(), d_luts, h_lut.size(), cudaMemcpyDeviceToHost, s));
    w.eq.synchronize();

    rep.times.upload_ms = w.e_up.since(w.e_start);
    rep.times.histogram_ms = w.e_hist.since(w.e_up);
    Image out;
    if (apply) {
      rep.times.cdf_lut_ms = w.e_lut.since(w.e_hist);
      rep.times.apply_ms = w.e_apply.since(w.e_lut);
      rep.times.download_ms = w.e_down.since(w.e_apply);
      const auto t_copy = Clock::now();
      if (!download) {
        out.width = in.width;
        out.height = in.height;
        out.channels = out_ch;
        out.exif = in.exif;
        out.icc = in.icc;
      } else if (out_ch == in.channels) {  // reuse the decoded buffer for the output
        std::memcpy(in.pixels.data(), h_out, out_bytes);
        out = std::move(in);
      } else {
        out.width = in.width;
        out.height = in.height;
        out.channels = out_ch;
        out.exif = in.exif;
        out.icc = in.icc;
        out.pixels.assign(h_out, h_out + out_bytes);
      }
      rep.times.download_ms += ms_since(t_copy);
    }
    rep.times.upload_ms += stage_in_ms;
    for (int p = 0; p < planes_n; ++p) {
      rep.histograms.emplace_back(h_hist.begin() + std::ptrdiff_t(p) * kBins,
                                  h_hist.begin() + std::ptrdiff_t(p + 1) * kBins);
      if (apply) {
        Lut l;
        std::copy(h_lut.begin() + std::ptrdiff_t(p) * kBins,
                  h_lut.begin() + std::ptrdiff_t(p + 1) * kBins, l.begin());
        rep.luts.push_back(l);
      }
    }
    times.upload_ms = rep.times.upload_ms;
    times.download_ms = rep.times.download_ms;
    rep.times.total_ms = ms_since(t0);
    return out;
  }

  std::vector<std::uint8_t> encode(const Image& img, ItemReport& rep, const std::string& ext) {
    const auto t0 = Clock::now();
    std::vector<std::uint8_t> bytes;
    bool done = false;
    for (const auto& c : opt.codecs) {
      if (c && c->encode(img, ext, opt.encode, &bytes)) {
        rep.encoder = c->name();
        done = true;
        break;
      }
    }
    if (!done) {
      bytes = encode_image(img, ext, opt.encode);
      std::string low = ext;
      for (char& ch : low) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      // encode_image's writers: libjpeg-turbo for JPEG, histeq's PNG writer (Paeth rows,
      // libdeflate's zlib) for PNG, stb_image_write for the rest
      rep.encoder = is_jpeg_ext(low)                                    ? "libjpeg-turbo"
                    : low == ".png"                                     ? "histeq-png+libdeflate"
                    : (low == ".pgm" || low == ".ppm" || low == ".pnm") ? "pnm"
                                                                        : "stb";
    }
    rep.times.encode_ms = ms_since(t0);
    return bytes;
  }

  /// Every stage after read for one item; errors land in the report.
  void process(Loaded& it, Slot& slot) {
    ItemReport& rep = it.rep;
    try {
      if (opt.item_op) {
        slot.take();  // the caller's operation (CLAHE, 16 bits) when it takes the item
        const bool apply = opt.task == Task::equalize;
        std::vector<std::uint8_t> encoded;
        if (opt.item_op(it.bytes, apply ? format_for(it) : std::string(), rep, &encoded)) {
          std::vector<std::uint8_t>().swap(it.bytes);
          if (apply) {
            write_output(rep, slot, encoded);
          }
          rep.ok = true;
          return;
        }
      }
      if (jpeg::is_jpeg(it.bytes.data(), it.bytes.size())) {
        start_nvjpeg();
        if (!progressive_here(it) && route_jpeg_to_device() && process_jpeg_on_device(it, slot))
          return;
      }
      // A JPEG the device's JPEG threads do not take (progressive, or none free): on this CPU
      // worker in its YCbCr planes, when the route allows.
      if (planes && process_jpeg_planes(it, slot)) return;
      slot.take();
      Image img;
      decode(it, img);
      rep.width = img.width;
      rep.height = img.height;
      rep.channels = img.channels;
      const Mode mode = opt.equalize.mode.value_or(default_mode(img.channels));
      const bool apply = opt.task == Task::equalize;
      EqualizeReport& er = rep.equalize;
      er.mode = mode;
      const std::uint64_t npix = img.pixel_count();
      Image out;
      std::vector<std::uint8_t> encoded;  // filled on the device (nvJPEG) for a JPEG output
      const std::string fmt = apply ? format_for(it) : std::string();
      DeviceWorker* w = opt.equalize.backend == Backend::cpu ? nullptr : acquire_device();
      if (w) {
        struct Release {
          Impl* self;
          DeviceWorker* w;
          ~Release() { self->release_device(w); }
        } release{this, w};
        // A JPEG output is encoded where the equalized pixels already are (nvJPEG, about 50x
        // libjpeg-turbo's speed), unless --decoder cpu asked for the CPU codecs.
        const int out_ch = output_channels(mode, img.channels);
        gpu::JpegCodec* codec =
            apply && is_jpeg_ext(fmt) && opt.jpeg != JpegRoute::cpu && (out_ch == 1 || out_ch == 3)
                ? w->codec()
                : nullptr;
        out = equalize_device(*w, img, mode, apply, er, rep.times, /*download=*/codec == nullptr);
        if (codec) {
          const auto t = Clock::now();
          encoded = codec->encode(w->d_out.get(), out.width, out.height, out.channels,
                                  {opt.encode.quality, opt.encode.subsampling}, out.exif, out.icc);
          rep.times.encode_ms = ms_since(t);
          rep.encoder = "nvjpeg";
        }
        rep.times.equalize_ms = er.times.histogram_ms + er.times.cdf_lut_ms + er.times.apply_ms;
        if (!kernels::find_kernel(er.kernel).exact) {
          for (const Histogram& h : er.histograms) {
            std::uint64_t s = 0;
            for (std::uint64_t c : h) s += c;
            er.racy_lost += s < npix ? npix - s : 0;
          }
        }
      } else {
        out = equalize_cpu(img, mode, apply, er);
        rep.times.equalize_ms = er.times.total_ms;
      }
      // the file's channels: a JPEG drops alpha, a BMP is BGR or BGRA (encoded_channels)
      rep.output_channels = apply ? encoded_channels(out.channels, fmt) : 0;
      er.times.decode_ms = rep.times.decode_ms;
      if (apply) {
        er.luts.clear();  // not kept for a batch of equalized files (memory per report)
        er.histograms.clear();
        Image().pixels.swap(img.pixels);
        const std::vector<std::uint8_t> bytes =
            encoded.empty() ? encode(out, rep, fmt) : std::move(encoded);
        er.times.encode_ms = rep.times.encode_ms;
        write_output(rep, slot, bytes);
      }
      rep.ok = true;
    } catch (const std::exception& e) {
      rep.ok = false;
      rep.error = e.what();
    }
  }

  /// Writes an item's output (atomically: write_file_atomic) and times it. The write waits on
  /// the disk (fsync), not on the CPU: the worker's CPU slot goes to another worker first.
  static void write_output(ItemReport& rep, Slot& slot, const std::vector<std::uint8_t>& bytes) {
    rep.output_bytes = bytes.size();
    slot.give();
    const auto t0 = Clock::now();
    write_file_atomic(rep.output, bytes.data(), bytes.size());
    rep.times.write_ms = ms_since(t0);
  }

  /// A colour JPEG to a JPEG in luma mode, on this CPU worker, in the file's YCbCr planes
  /// (equalize_jpeg_planes). False (nothing done) when the item is not one.
  bool process_jpeg_planes(Loaded& it, Slot& slot) {
    if (!jpeg::is_jpeg(it.bytes.data(), it.bytes.size())) return false;  // (planes: equalize)
    const std::string fmt = format_for(it);
    const jpeg::EncodeOptions enc{opt.encode.quality, opt.encode.subsampling};
    if (!is_jpeg_ext(fmt) ||
        !jpeg_planes_route(it.bytes.data(), it.bytes.size(), opt.equalize, enc))
      return false;
    ItemReport& rep = it.rep;
    slot.take();
    EqualizeReport& er = rep.equalize;
    std::vector<std::uint8_t> bytes;
    if (!equalize_jpeg_planes(it.bytes.data(), it.bytes.size(), rep.input, opt.equalize, enc,
                              opt.max_pixels, &bytes, &er, &rep.width, &rep.height))
      return false;  // a marker after the frame header took it off the route
    std::vector<std::uint8_t>().swap(it.bytes);
    er.device = "CPU (" + std::to_string(jobs) + (jobs == 1 ? " thread)" : " threads)");
    rep.channels = rep.output_channels = 3;
    rep.decoder = rep.encoder = "libjpeg-turbo-ycbcr";
    rep.times.decode_ms = er.times.decode_ms;
    rep.times.equalize_ms = er.times.histogram_ms + er.times.cdf_lut_ms + er.times.apply_ms;
    rep.times.encode_ms = er.times.encode_ms;
    er.luts.clear();  // not kept for a batch of equalized files (memory per report)
    er.histograms.clear();
    write_output(rep, slot, bytes);
    rep.ok = true;
    return true;
  }

  /// A JPEG item through the device workers' JPEG threads, then (non-JPEG output) the CPU
  /// encode, then the write. False (nothing done) when the device or nvJPEG failed and the
  /// item may take the CPU route (--decoder auto, backend auto); errors of the file throw.
  bool process_jpeg_on_device(Loaded& it, Slot& slot) {
    ItemReport& rep = it.rep;
    const std::string fmt = format_for(it);
    JpegJob job;
    job.it = &it;
    job.jpeg_out = is_jpeg_ext(fmt);
    slot.give();  // only waiting: another worker uses the CPU meanwhile
    run_jpeg_job(job);
    if (job.device_failed && opt.jpeg == JpegRoute::automatic &&
        opt.equalize.backend == Backend::automatic) {
      rep.decoder.clear();
      rep.encoder.clear();
      rep.equalize = EqualizeReport{};
      rep.times = ItemTimes{rep.times.read_ms};
      return false;
    }
    std::vector<std::uint8_t>().swap(it.bytes);
    if (!job.error.empty()) throw Error(job.error);
    rep.equalize.times.decode_ms = rep.times.decode_ms;
    rep.output_channels = encoded_channels(rep.output_channels, fmt);  // the file's, as above
    if (job.jpeg_out) {
      job.host = Image();
    } else {
      slot.take();
      std::vector<std::uint8_t> enc = encode(job.host, rep, fmt);
      job.host = Image();
      job.encoded.swap(enc);
    }
    rep.equalize.times.encode_ms = rep.times.encode_ms;
    write_output(rep, slot, job.encoded);
    rep.ok = true;
    return true;
  }

  static bool is_jpeg_ext(std::string ext) {
    for (char& ch : ext) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return ext == ".jpg" || ext == ".jpeg";
  }

  /// --decoder auto: progressive JPEGs stay on the CPU workers (libjpeg-turbo). The GPU's
  /// hardware decoder takes only baseline files; nvJPEG's hybrid route for the others runs its
  /// Huffman stage on the one JPEG thread of a device worker, so a few large progressive photos
  /// would hold up every baseline batch behind them. Nor does the hybrid decoder scale on the
  /// CPU workers' threads: measured on the H200 machine with one per worker (16 at once), a 4 MP
  /// progressive photo took 28 ms alone and up to 1,064 ms beside the others (libjpeg-turbo:
  /// about 100 ms), and with two at a time the folder ran no faster than with none.
  bool progressive_here(const Loaded& it) const {
    if (opt.jpeg != JpegRoute::automatic || opt.equalize.backend == Backend::cuda) return false;
    jpeg::Info h;
    // No frame header before the first scan: the CPU decoder names what is wrong.
    return !jpeg::read_header(it.bytes.data(), it.bytes.size(), &h) || h.progressive;
  }

  /// From the header: a JPEG that nvJPEG's route decodes on the device (JpegCodec::decode's
  /// routing, progressive files excluded as above).
  bool device_candidate(const std::vector<std::uint8_t>& bytes) const {
    jpeg::Info h;
    return jpeg::read_header(bytes.data(), bytes.size(), &h) && !h.progressive &&
           gpu::nvjpeg_takes(h, opt.max_pixels);
  }

  std::vector<WorkItem> const* items = nullptr;
  std::string format_for(const Loaded& it) const {
    const WorkItem& w = (*items)[it.index];
    if (!w.format.empty()) return w.format[0] == '.' ? w.format : "." + w.format;
    return std::filesystem::path(w.output).extension().string();
  }
};

Executor::Executor(ExecutorOptions opt) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.opt = std::move(opt);
  if (m.opt.jobs < 0) throw UsageError("ExecutorOptions::jobs must be at least 0 (0: one per CPU)");
  m.jobs = m.opt.jobs > 0 ? m.opt.jobs : cpu::usable_cpus();
  if (m.opt.fast_png_decoder) m.fast_png = make_fast_png_decoder();
  m.planes = m.opt.task == Task::equalize && m.opt.codecs.empty() && m.opt.jpeg != JpegRoute::gpu &&
             jpeg_planes_backend(m.opt.equalize.backend);
  if (m.opt.max_inflight_bytes == 0) m.opt.max_inflight_bytes = default_max_inflight_bytes(m.jobs);
  if (m.opt.equalize.kernel != "auto") {
    const kernels::KernelEntry& e = kernels::find_kernel(m.opt.equalize.kernel);
    if (const char* why = e.unsupported(SampleType::u8, kBins))
      throw UsageError("kernel '" + m.opt.equalize.kernel +
                       "' cannot equalize 8-bit images (u8, 256 bins): " + why);
  }
  if (m.opt.jpeg == JpegRoute::gpu) {
    if (!gpu::nvjpeg_built())
      throw UsageError("GPU JPEG decoding: this histeq was built without nvJPEG");
    if (m.opt.equalize.backend == Backend::cpu)
      throw UsageError("GPU JPEG decoding needs the cuda backend, not the cpu one");
  }
  if (m.opt.jpeg_batch < 1) throw UsageError("the JPEG batch must be at least 1");
  if (m.opt.workers_per_device < 0) throw UsageError("workers per device must be at least 0");
  // --backend auto with the default kernel and devices: the devices start in run(), and only for
  // a list that names a JPEG (names_a_jpeg). An item_op (CLAHE, 16 bits) brings its own device
  // engines: it never uses these.
  m.devices_deferred = m.opt.equalize.backend == Backend::automatic &&
                       m.opt.equalize.kernel == "auto" && m.opt.devices.empty() &&
                       m.opt.jpeg != JpegRoute::gpu;
  if (m.opt.equalize.backend != Backend::cpu && !m.devices_deferred) m.start_devices();
}

Executor::~Executor() = default;

int Executor::jobs() const { return impl_->jobs; }

std::string Executor::cpu_fallback_reason() {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.dev_mu);
  m.dev_cv.wait(lock, [&] { return m.dev_state != Impl::DevState::initializing; });
  return m.dev_state == Impl::DevState::failed ? m.dev_why : std::string();
}

namespace {

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

/// The bytes an item may hold at its worst moment, from its header: decoded pixels + one plane
/// (the histogram's luma) during equalize, then the output (in place of the decoded pixels when
/// the channel counts match, else a second buffer) + the encoded bytes (at most about the raw
/// size). The file's bytes are freed after decode. So: file + 2 x decoded + one plane.
std::size_t item_cost(const std::vector<std::uint8_t>& bytes) {
  int w = 0, h = 0, c = 0;
  std::size_t cost = bytes.size();
  if (image_info(bytes.data(), bytes.size(), &w, &h, &c)) {
    const std::size_t px = std::size_t(std::max(w, 0)) * std::size_t(std::max(h, 0));
    cost += px * std::size_t(std::max(c, 1)) * 2 + px;
  }
  return cost;
}

/// A failed item's error names its file: the decoders and writers say 'input' or 'output'
/// themselves; a cause that names neither (an encoder that cannot hold the image's channels,
/// the caller's item_op) gets the input's path in front, as the others read.
void name_the_file(ItemReport& rep) {
  if (rep.error.empty()) return;
  const auto names = [&](const std::string& path) {
    return !path.empty() && rep.error.find("'" + path + "'") != std::string::npos;
  };
  if (!names(rep.input) && !names(rep.output)) rep.error = "'" + rep.input + "': " + rep.error;
}

}  // namespace

/// One run(): the reader thread, the worker pool and the in-order reports, and what they share
/// (under mu). Items flow reader → queue → a worker → finished → the reporting thread.
struct Executor::Run {
  Impl& m;
  const std::vector<WorkItem>& items;
  BatchSummary sum;
  Clock::time_point t_run = Clock::now();
  std::mutex mu;
  std::condition_variable cv_budget, cv_work, cv_done;
  std::size_t inflight_bytes = 0, inflight_items = 0;
  int busy = 0;
  std::size_t max_items = 0;
  std::deque<std::unique_ptr<Loaded>> queue;
  bool reader_done = false;
  std::map<std::size_t, std::unique_ptr<Loaded>> finished;

  Run(Impl& impl, const std::vector<WorkItem>& it) : m(impl), items(it) {
    // Reports wait here until their turn (input order): a few hundred bytes each once their
    // image is written. The reading-order window is half of this: a folder of up to 128 files
    // (16 workers) starts its largest files first, instead of each window of 32 ending on one.
    max_items = std::size_t(std::max(256, 16 * m.jobs));
    sum.max_inflight_bytes = m.opt.max_inflight_bytes;
    m.untaken = items.size();
  }

  void finish(std::unique_ptr<Loaded> it) {
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
  }

  /// Reads the files in reading_order, admitting each under the item and byte caps. A window no
  /// larger than half the report window cannot deadlock (at most the previous window's and this
  /// window's items wait for their report).
  void reader_loop() {
    for (std::size_t i : reading_order(items, max_items / 2)) {
      auto it = std::make_unique<Loaded>();
      it->index = i;
      it->rep.index = i;
      it->rep.input = items[i].input;
      it->rep.output = items[i].output;
      {  // a slot for the item (bounds the reports waiting for an earlier one)
        std::unique_lock<std::mutex> lock(mu);
        cv_budget.wait(lock, [&] { return inflight_items < max_items; });
        ++inflight_items;
      }
      const auto t0 = Clock::now();
      try {
        it->bytes = read_image_file(items[i].input);
      } catch (const std::exception& e) {
        it->rep.error = e.what();
      }
      it->rep.times.read_ms = ms_since(t0);
      if (!it->rep.error.empty()) {
        --m.untaken;  // never queued for a worker
        finish(std::move(it));
        continue;
      }
      const std::size_t cost = item_cost(it->bytes);
      it->cost = cost;
      it->for_device = m.gpu_jpeg_wanted() && m.device_candidate(it->bytes);
      std::unique_lock<std::mutex> lock(mu);
      cv_budget.wait(lock, [&] {
        return inflight_bytes == 0 || inflight_bytes + cost <= m.opt.max_inflight_bytes;
      });
      inflight_bytes += cost;
      sum.peak_inflight_bytes = std::max(sum.peak_inflight_bytes, inflight_bytes);
      queue.push_back(std::move(it));
      cv_work.notify_one();
    }
    std::lock_guard<std::mutex> lock(mu);
    reader_done = true;
    cv_work.notify_all();
  }

  /// The next item for a worker (under mu, queue not empty). While the nvJPEG route is open
  /// (--decoder auto), the JPEGs for the device wait for it: a worker takes one when the JPEG
  /// threads have room, else the first item that only the CPU workers can do (progressive JPEGs,
  /// other formats), and the oldest item when there is none. So the CPU spends the device's
  /// start-up (0.5-0.9 s on the H200 machine) on the work that is its own anyway.
  std::unique_ptr<Loaded> take_next() {
    auto pick = queue.begin();
    const bool has_device_items =
        std::any_of(queue.begin(), queue.end(), [](const auto& q) { return q->for_device; });
    if (has_device_items && m.device_route_open()) {
      const bool room = m.device_has_room();
      const auto at = std::find_if(queue.begin(), queue.end(),
                                   [&](const auto& q) { return q->for_device == room; });
      if (at != queue.end()) pick = at;
    }
    std::unique_ptr<Loaded> it = std::move(*pick);
    queue.erase(pick);
    --m.untaken;
    return it;
  }

  void worker_loop() {
    for (;;) {
      std::unique_ptr<Loaded> it;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv_work.wait(lock, [&] { return !queue.empty() || reader_done; });
        if (queue.empty()) return;
        it = take_next();
      }
      // A JPEG the device takes now is handed over without a CPU slot (the JPEG threads must not
      // wait for a CPU worker to finish a long decode); any CPU work takes one (Impl::process).
      Impl::Slot slot{m};
      if (!(it->for_device && m.device_has_room())) slot.take();
      {
        std::lock_guard<std::mutex> lock(mu);
        sum.peak_busy_workers = std::max(sum.peak_busy_workers, ++busy);
      }
      m.process(*it, slot);
      slot.give();
      {
        std::lock_guard<std::mutex> lock(mu);
        --busy;
      }
      finish(std::move(it));
    }
  }

  /// Reports in input order, on the calling thread; the first exception of on_done is kept
  /// (and rethrown by run() once every item is done).
  std::exception_ptr report_loop(const std::function<void(const ItemReport&)>& on_done) {
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
      if (!rep.ok)
        ++sum.failures;
      else
        sum.megapixels += double(rep.width) * double(rep.height) / 1e6;
      if (rep.ok && !rep.decoder.empty()) ++sum.decoders[rep.decoder];
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
};

BatchSummary Executor::run(const std::vector<WorkItem>& items,
                           const std::function<void(const ItemReport&)>& on_done) {
  Impl& m = *impl_;
  if (m.devices_deferred && Impl::names_a_jpeg(items)) m.start_devices();
  m.items = &items;
  Run r(m, items);
  if (m.opt.equalize.backend == Backend::cuda) {
    const std::string why = cpu_fallback_reason();
    if (!why.empty()) throw Error(kNoDeviceForCuda + why + ")");
  }
  m.slots_free = m.jobs;
  std::thread reader([&r] { r.reader_loop(); });
  // `jobs` workers for the CPU stages, plus, when JPEGs may go to the device workers' JPEG
  // threads, as many as those threads take in their batches: a worker that handed its JPEG
  // over only waits (no CPU), and the others keep every core busy meanwhile.
  // An eighth more than `jobs`: a worker writing its file (fsync) holds no CPU slot, and another
  // takes it meanwhile. Workers whose JPEG waits on a device hold none either: two batches per
  // JPEG thread of them, so that each JPEG thread finds its next batch waiting.
  int threads = m.jobs + (m.jobs + 7) / 8;
  if (m.gpu_jpeg_wanted()) threads += 2 * std::max(1, m.opt.jpeg_batch) * m.jpeg_threads_planned();
  std::vector<std::thread> pool;
  for (int j = 0; j < threads; ++j) pool.emplace_back([&r] { r.worker_loop(); });
  const std::exception_ptr callback_error = r.report_loop(on_done);
  reader.join();
  for (auto& t : pool) t.join();
  BatchSummary sum = std::move(r.sum);
  sum.wall_s = std::chrono::duration<double>(Clock::now() - r.t_run).count();
  {
    std::lock_guard<std::mutex> lock(m.dev_mu);
    sum.device_init_ms = m.dev_state == Impl::DevState::ready ? m.device_init_ms : 0;
  }
  {
    std::lock_guard<std::mutex> lock(m.jmu);
    sum.nvjpeg_init_ms = m.nvjpeg_init_ms;
  }
  m.items = nullptr;
  if (callback_error) std::rethrow_exception(callback_error);
  return sum;
}

}  // namespace histeq
