// ready_probe.cu — what the JPEG device route's start-up costs, step by step, and where: the
// CUDA context, the hardware-backend nvJPEG handle, then each slot's state as histeq makes it
// (a stream, the hardware decode state and JPEG stream, an encoder state and parameters),
// optionally beside --load threads that spin as busy CPU workers do. nvJPEG's device and pinned
// allocations are counted and timed through allocators passed to nvjpegCreateEx that call what
// nvJPEG's defaults call (cudaMalloc/cudaFree, cudaHostAlloc/cudaFreeHost), so each step's line
// says how much of its time was allocation. Variants, each in a process of its own:
//
//   --allocators default|logged|pool  nvJPEG's own allocators (nothing counted), the logged ones
//                          above, or device memory from a stream-ordered pool reserved when the
//                          context is made (pinned memory logged as above)
//   --states K (3)         slot states made one after another on the starting thread
//   --threads              the K states made on K threads at once (after the handle)
//   --load N (0)           N threads spinning from before the context until the end
//   --load-kind spin|faults  what the load threads do: spin (the default), or fault memory in
//                          as histeq's CPU workers do on fresh buffers (16 MiB mapped, every page
//                          written, unmapped, again): whether the driver's start-up and the
//                          workers' page faults slow each other (both take the process's
//                          memory-map lock); each line then says how many MB/s the load threads
//                          faulted in during its step, against --load-kind faults alone (a first
//                          line before the context, this thread asleep; rates over steps of 20 ms
//                          or more; pages of 4 KiB, MADV_NOHUGEPAGE; the header says the host's
//                          transparent huge pages mode)
//   --load-nice N, --load-batch  the load threads at nice N and under SCHED_BATCH, as histeq's
//                          CPU workers run beside its device route
//   --decode FILE          once the states exist, one baseline FILE decoded on slot 0's state
//                          (nvjpegDecodeBatched, hardware backend), its first and second
//                          decode, then its planes encoded twice on slot 0's encoder state
//   --encoders K (0)       then K encoder states of their own (a stream, a state, q95 4:2:0
//                          parameters), and a 5120x2880 4:2:0 image (smooth shading and a little
//                          noise: about 4.2 MB at q95 4:2:0, a 14.7 MP photograph 3.2-3.5 MB)
//                          encoded twice on each (nvjpegEncodeYUV, the bitstream retrieved into a
//                          host buffer made beforehand, the stream synced): whether a state's first
//                          use costs more than later ones, per state or once, and how soon after
//                          the process's start a first image is encoded. Run it with --states 0
//                          (no other encoder state made or used first); not with --decode
//   --enc-threads          the K encoder states made and used on K threads at once, all made
//                          before any encodes and every first encode done before any second
//                          (their lines' allocation columns count every thread's)
//
// Everything is timed with steady_clock from the process's first line in main; nothing is torn
// down (the process ends with _exit, as histeq's handoff does), so no step includes teardown.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/ready_probe.cu -I<nvjpeg include>
//        -Xlinker <nvjpeg lib>/libnvjpeg.so.13 -lpthread -o ready_probe
//   ./ready_probe [options]
#include <cuda_runtime.h>
#include <nvjpeg.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
Clock::time_point g_t0;
double now_ms() { return std::chrono::duration<double, std::milli>(Clock::now() - g_t0).count(); }

#define CK(x)                                                                     \
  do {                                                                            \
    auto s_ = (x);                                                                \
    if (int(s_) != 0) {                                                           \
      std::fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::_Exit(1);                                                              \
    }                                                                             \
  } while (0)

// ---- allocation counters (all threads), and the MB the faulting load threads touched ----
struct Counts {
  long dev_n = 0, pin_n = 0;
  double dev_mb = 0, pin_mb = 0, dev_ms = 0, pin_ms = 0;
  unsigned long long load_mb = 0;
};
std::mutex g_mu;
Counts g_counts;
std::atomic<unsigned long long> g_load_mb{0};
bool g_faults = false;
Counts snapshot() {
  std::lock_guard<std::mutex> l(g_mu);
  Counts c = g_counts;
  c.load_mb = g_load_mb.load();
  return c;
}
void add(bool dev, std::size_t n, double ms) {
  std::lock_guard<std::mutex> l(g_mu);
  if (dev) {
    ++g_counts.dev_n;
    g_counts.dev_mb += n / 1048576.0;
    g_counts.dev_ms += ms;
  } else {
    ++g_counts.pin_n;
    g_counts.pin_mb += n / 1048576.0;
    g_counts.pin_ms += ms;
  }
}

int dev_malloc(void** p, size_t n) {
  const double t = now_ms();
  const int r = cudaMalloc(p, n) == cudaSuccess ? 0 : 1;
  add(true, n, now_ms() - t);
  return r;
}
int dev_free(void* p) { return cudaFree(p) == cudaSuccess ? 0 : 1; }
int pin_malloc(void** p, size_t n, unsigned int flags) {
  const double t = now_ms();
  const int r = cudaHostAlloc(p, n, flags) == cudaSuccess ? 0 : 1;
  add(false, n, now_ms() - t);
  return r;
}
int pin_free(void* p) { return cudaFreeHost(p) == cudaSuccess ? 0 : 1; }

cudaMemPool_t g_pool = nullptr;
int pool_malloc(void*, void** p, size_t n, cudaStream_t s) {
  const double t = now_ms();
  const int r = cudaMallocFromPoolAsync(p, n, g_pool, s) == cudaSuccess ? 0 : 1;
  add(true, n, now_ms() - t);
  return r;
}
int pool_free(void*, void* p, size_t, cudaStream_t s) {
  return cudaFreeAsync(p, s) == cudaSuccess ? 0 : 1;
}
int pin_malloc2(void*, void** p, size_t n, cudaStream_t) {
  const double t = now_ms();
  const int r = cudaHostAlloc(p, n, cudaHostAllocDefault) == cudaSuccess ? 0 : 1;
  add(false, n, now_ms() - t);
  return r;
}
int pin_free2(void*, void* p, size_t, cudaStream_t) {
  return cudaFreeHost(p) == cudaSuccess ? 0 : 1;
}

struct Options {
  std::string allocators = "logged";
  std::string load_kind = "spin";
  int load_nice = 0;
  bool load_batch = false;
  int states = 3, load = 0;
  bool threads = false, enc_threads = false;
  int encoders = 0;
  std::string decode;
};

/// One step's line: its wall time and the allocations it made.
void report(const char* what, double t0, const Counts& a) {
  const Counts b = snapshot();
  const double n = now_ms();
  char line[512];
  int k = std::snprintf(line, sizeof line,
                        "%-34s %8.1f ms  (at %7.1f)  device %3ld allocs %8.1f MB %6.1f ms  pinned "
                        "%3ld allocs %7.1f MB %6.1f ms",
                        what, n - t0, n, b.dev_n - a.dev_n, b.dev_mb - a.dev_mb, b.dev_ms - a.dev_ms,
                        b.pin_n - a.pin_n, b.pin_mb - a.pin_mb, b.pin_ms - a.pin_ms);
  // The load's MB (counted per MiB written) and, over steps of 20 ms or more, its rate.
  if (g_faults && k > 0 && std::size_t(k) < sizeof line) {
    const unsigned long long mb = b.load_mb - a.load_mb;
    if (n - t0 >= 20)
      k += std::snprintf(line + k, sizeof line - std::size_t(k), "  load faulted %6llu MB, %6.0f MB/s",
                         mb, double(mb) * 1000.0 / (n - t0));
    else
      k += std::snprintf(line + k, sizeof line - std::size_t(k), "  load faulted %6llu MB", mb);
  }
  std::printf("%s\n", line);  // one call: lines of several threads do not mix
}

struct Slot {
  cudaStream_t s = nullptr;
  nvjpegJpegState_t st = nullptr;
  nvjpegJpegStream_t js = nullptr;
  nvjpegEncoderState_t enc = nullptr;
  nvjpegEncoderParams_t prm = nullptr;
};

/// A slot's state as histeq's SlotState makes its nvJPEG part, each call timed.
void make_slot(nvjpegHandle_t h, Slot& k, int i, bool quiet) {
  char name[64];
  Counts a = snapshot();
  double t = now_ms();
  CK(cudaStreamCreateWithFlags(&k.s, cudaStreamNonBlocking));
  std::snprintf(name, sizeof name, "slot %d: stream", i);
  if (!quiet) report(name, t, a);
  a = snapshot();
  t = now_ms();
  CK(nvjpegJpegStateCreate(h, &k.st));
  std::snprintf(name, sizeof name, "slot %d: decode state", i);
  if (!quiet) report(name, t, a);
  a = snapshot();
  t = now_ms();
  CK(nvjpegJpegStreamCreate(h, &k.js));
  std::snprintf(name, sizeof name, "slot %d: jpeg stream", i);
  if (!quiet) report(name, t, a);
  a = snapshot();
  t = now_ms();
  CK(nvjpegEncoderStateCreate(h, &k.enc, k.s));
  CK(nvjpegEncoderParamsCreate(h, &k.prm, k.s));
  std::snprintf(name, sizeof name, "slot %d: encoder state+params", i);
  if (!quiet) report(name, t, a);
}

/// A plane of smooth shading and a little noise (about a photograph's entropy-coding work at q95).
__global__ void fill_plane(unsigned char* p, int w, int h, int salt) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x >= w || y >= h) return;
  unsigned r = unsigned(x) * 73856093u ^ unsigned(y) * 19349663u ^ unsigned(salt) * 83492791u;
  r = (r ^ (r >> 13)) * 0x5bd1e995u;
  const float v = 128.f + 70.f * __sinf(x / 151.f + salt) * __cosf(y / 97.f) + float(r >> 29);
  p[std::size_t(y) * w + x] = (unsigned char)fminf(fmaxf(v, 0.f), 255.f);
}

/// Every encoder thread waits here until all have arrived (a spinning barrier of one use).
struct Barrier {
  std::atomic<int> left;
  explicit Barrier(int n) : left(n) {}
  void arrive_and_wait() {
    left.fetch_sub(1);
    while (left.load() > 0) std::this_thread::yield();
  }
};

/// One encoder of its own: a stream, a state and q95 4:2:0 parameters; its first and second
/// encodes of `img` timed (each: encode, the bitstream's size and bytes retrieved, synchronized).
void run_encoder(nvjpegHandle_t h, int i, const nvjpegImage_t& img, int w, int hh,
                 std::atomic<double>* first_done, Barrier* made, Barrier* first) {
  const char* all = made ? " (all threads)" : "";
  char name[128];
  Counts a = snapshot();
  double t = now_ms();
  cudaStream_t s = nullptr;
  nvjpegEncoderState_t enc = nullptr;
  nvjpegEncoderParams_t prm = nullptr;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(nvjpegEncoderStateCreate(h, &enc, s));
  CK(nvjpegEncoderParamsCreate(h, &prm, s));
  CK(nvjpegEncoderParamsSetQuality(prm, 95, s));
  CK(nvjpegEncoderParamsSetSamplingFactors(prm, NVJPEG_CSS_420, s));
  std::snprintf(name, sizeof name, "encoder %d: stream, state, params%s", i, all);
  report(name, t, a);
  std::vector<unsigned char> out(std::size_t(16) << 20);  // made and touched before any encode
  if (made) made->arrive_and_wait();
  for (int r = 0; r < 2; ++r) {
    if (r == 1 && first) first->arrive_and_wait();
    a = snapshot();
    t = now_ms();
    CK(nvjpegEncodeYUV(h, enc, prm, &img, NVJPEG_CSS_420, w, hh, s));
    std::size_t len = 0;
    CK(nvjpegEncodeRetrieveBitstream(h, enc, nullptr, &len, s));
    CK(cudaStreamSynchronize(s));
    if (len > out.size()) out.resize(len);
    CK(nvjpegEncodeRetrieveBitstream(h, enc, out.data(), &len, s));
    CK(cudaStreamSynchronize(s));
    double expected = 0;
    first_done->compare_exchange_strong(expected, now_ms());
    std::snprintf(name, sizeof name, "encoder %d: %s encode (%zu bytes)%s", i,
                  r == 0 ? "first" : "second", len, all);
    report(name, t, a);
  }
}

}  // namespace

int main(int argc, char** argv) {
  g_t0 = Clock::now();
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--allocators") o.allocators = next();
    else if (a == "--states") o.states = std::atoi(next().c_str());
    else if (a == "--load") o.load = std::atoi(next().c_str());
    else if (a == "--load-kind") o.load_kind = next();
    else if (a == "--load-nice") o.load_nice = std::atoi(next().c_str());
    else if (a == "--load-batch") o.load_batch = true;
    else if (a == "--threads") o.threads = true;
    else if (a == "--decode") o.decode = next();
    else if (a == "--encoders") o.encoders = std::atoi(next().c_str());
    else if (a == "--enc-threads") o.enc_threads = true;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (o.load_kind != "spin" && o.load_kind != "faults") {
    std::fprintf(stderr, "--load-kind takes spin or faults\n");
    return 2;
  }
  if (o.load_kind == "faults" && o.load < 1) {
    std::fprintf(stderr, "--load-kind faults needs --load N (N >= 1)\n");
    return 2;
  }
  g_faults = o.load_kind == "faults";
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // every line out before a failure's _Exit
  if (!o.decode.empty() && o.states < 1) {
    std::fprintf(stderr, "--decode needs --states 1 or more\n");
    return 2;
  }
  if (!o.decode.empty() && o.encoders > 0) {
    std::fprintf(stderr, "--encoders times first encodes: not with --decode (which encodes)\n");
    return 2;
  }
  std::printf("# ready_probe --allocators %s --states %d --load %d --load-kind %s --load-nice %d%s"
              "%s%s%s --encoders %d%s\n",
              o.allocators.c_str(), o.states, o.load, o.load_kind.c_str(), o.load_nice,
              o.load_batch ? " --load-batch" : "", o.threads ? " --threads" : "",
              o.decode.empty() ? "" : " --decode ", o.decode.c_str(), o.encoders,
              o.enc_threads ? " --enc-threads" : "");
  std::printf("# %u hardware threads\n", std::thread::hardware_concurrency());
  if (g_faults) {
    std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string mode;
    std::getline(thp, mode);
    std::printf("# transparent huge pages: %s (the load asks for none: MADV_NOHUGEPAGE)\n",
                mode.c_str());
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> spin;
  for (int i = 0; i < o.load; ++i)
    spin.emplace_back([&stop, &o] {
      if (o.load_nice != 0) setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), o.load_nice);
      if (o.load_batch) {
        sched_param sp{};
        pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
      }
      if (g_faults) {
        constexpr std::size_t kMiB = std::size_t(1) << 20, kBytes = 16 * kMiB;
        while (!stop.load(std::memory_order_relaxed)) {
          void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
          if (p == MAP_FAILED) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
          }
          madvise(p, kBytes, MADV_NOHUGEPAGE);  // 4 KiB pages: 4,096 faults, not 8 huge ones
          for (std::size_t off = 0; off < kBytes; off += kMiB) {
            std::memset(static_cast<char*>(p) + off, 1, kMiB);  // every page faulted in
            g_load_mb.fetch_add(1, std::memory_order_relaxed);
          }
          munmap(p, kBytes);
        }
        return;
      }
      volatile unsigned x = 1;
      while (!stop.load(std::memory_order_relaxed)) x = x * 1664525u + 1013904223u;
    });
  Counts a = snapshot();
  double t = now_ms();
  if (g_faults) {  // the load alone first (once it runs): its rate without the driver beside it
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    a = snapshot();
    t = now_ms();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    report("load alone (200 ms, this thread asleep)", t, a);
    a = snapshot();
    t = now_ms();
  }
  CK(cudaFree(nullptr));
  report("context (cudaFree(0))", t, a);
  if (o.allocators == "pool") {
    a = snapshot();
    t = now_ms();
    cudaMemPoolProps p{};
    p.allocType = cudaMemAllocationTypePinned;
    p.location.type = cudaMemLocationTypeDevice;
    p.location.id = 0;
    CK(cudaMemPoolCreate(&g_pool, &p));
    std::uint64_t keep = ~0ull;
    CK(cudaMemPoolSetAttribute(g_pool, cudaMemPoolAttrReleaseThreshold, &keep));
    void* warm = nullptr;  // reserve 512 MB once, so later pool allocations map nothing
    CK(cudaMallocFromPoolAsync(&warm, 512u << 20, g_pool, nullptr));
    CK(cudaFreeAsync(warm, nullptr));
    CK(cudaStreamSynchronize(nullptr));
    report("pool reserve (512 MB)", t, a);
  }
  nvjpegDevAllocator_t da{dev_malloc, dev_free};
  nvjpegPinnedAllocator_t pa{pin_malloc, pin_free};
  nvjpegHandle_t h = nullptr;
  a = snapshot();
  t = now_ms();
  if (o.allocators == "pool") {
    nvjpegDevAllocatorV2_t da2{pool_malloc, pool_free, nullptr};
    nvjpegPinnedAllocatorV2_t pa2{pin_malloc2, pin_free2, nullptr};
    CK(nvjpegCreateExV2(NVJPEG_BACKEND_HARDWARE, &da2, &pa2, NVJPEG_FLAGS_BITSTREAM_STRICT, &h));
  } else {
    const bool logged = o.allocators == "logged";
    CK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, logged ? &da : nullptr, logged ? &pa : nullptr,
                      NVJPEG_FLAGS_BITSTREAM_STRICT, &h));
  }
  report("handle (hardware backend)", t, a);
  std::vector<Slot> slots(o.states);
  a = snapshot();
  t = now_ms();
  if (o.threads) {
    std::vector<std::thread> th;
    for (int i = 0; i < o.states; ++i)
      th.emplace_back([&, i] {
        const double ti = now_ms();
        make_slot(h, slots[i], i, true);
        std::printf("  slot %d made on its thread in %.1f ms (done at %.1f)\n", i, now_ms() - ti,
                    now_ms());
      });
    for (auto& x : th) x.join();
  } else {
    for (int i = 0; i < o.states; ++i) make_slot(h, slots[i], i, false);
  }
  report("all slot states", t, a);
  std::printf("%-34s %8.1f ms\n", "ready (from main's first line)", now_ms());
  if (!o.decode.empty()) {
    std::ifstream in(o.decode, std::ios::binary);
    std::vector<unsigned char> bytes{std::istreambuf_iterator<char>(in), {}};
    int nc = 0, w[NVJPEG_MAX_COMPONENT] = {}, hh[NVJPEG_MAX_COMPONENT] = {};
    nvjpegChromaSubsampling_t css;
    CK(nvjpegGetImageInfo(h, bytes.data(), bytes.size(), &nc, &css, w, hh));
    nvjpegImage_t img{};
    for (int c = 0; c < 3; ++c) {
      CK(cudaMalloc(&img.channel[c], std::size_t(w[0]) * hh[0]));
      img.pitch[c] = w[0];
    }
    for (int r = 0; r < 2; ++r) {
      a = snapshot();
      t = now_ms();
      CK(nvjpegDecodeBatchedInitialize(h, slots[0].st, 1, 1, NVJPEG_OUTPUT_YUV));
      const unsigned char* d = bytes.data();
      std::size_t n = bytes.size();
      CK(nvjpegDecodeBatched(h, slots[0].st, &d, &n, &img, slots[0].s));
      CK(cudaStreamSynchronize(slots[0].s));
      report(r == 0 ? "first decode (batched init+decode)" : "second decode", t, a);
    }
    // The decoded planes encoded at q95 4:2:0 on slot 0's encoder state, twice: what the first
    // use of an encoder state costs over a later one.
    CK(nvjpegEncoderParamsSetQuality(slots[0].prm, 95, slots[0].s));
    CK(nvjpegEncoderParamsSetSamplingFactors(slots[0].prm, NVJPEG_CSS_420, slots[0].s));
    std::vector<unsigned char> out;
    for (int r = 0; r < 2; ++r) {
      a = snapshot();
      t = now_ms();
      CK(nvjpegEncodeYUV(h, slots[0].enc, slots[0].prm, &img, NVJPEG_CSS_420, w[0], hh[0],
                         slots[0].s));
      std::size_t len = 0;
      CK(nvjpegEncodeRetrieveBitstream(h, slots[0].enc, nullptr, &len, slots[0].s));
      out.resize(len);
      CK(nvjpegEncodeRetrieveBitstream(h, slots[0].enc, out.data(), &len, slots[0].s));
      CK(cudaStreamSynchronize(slots[0].s));
      report(r == 0 ? "first encode (q95 4:2:0)" : "second encode", t, a);
    }
    std::printf("# decoded %s: %dx%d, %d components, nvjpegChromaSubsampling_t %d; encoded at "
                "4:2:0, %zu bytes\n",
                o.decode.c_str(), w[0], hh[0], nc, int(css), out.size());
  }
  if (o.encoders > 0) {
    constexpr int kW = 5120, kH = 2880;
    a = snapshot();
    t = now_ms();
    nvjpegImage_t img{};
    for (int c = 0; c < 3; ++c) {
      const int w = c == 0 ? kW : kW / 2, hh = c == 0 ? kH : kH / 2;
      CK(cudaMalloc(&img.channel[c], std::size_t(w) * hh));
      img.pitch[c] = std::size_t(w);
      fill_plane<<<dim3((w + 255) / 256, hh), 256>>>(img.channel[c], w, hh, 31 * c);
    }
    CK(cudaDeviceSynchronize());
    report("image planes (cudaMalloc, not logged)", t, a);
    const double planes_done = now_ms();
    std::atomic<double> first_done{0};
    t = now_ms();
    if (o.enc_threads) {
      Barrier made(o.encoders), first(o.encoders);
      std::vector<std::thread> th;
      for (int i = 0; i < o.encoders; ++i)
        th.emplace_back(
            [&, i] { run_encoder(h, i, img, kW, kH, &first_done, &made, &first); });
      for (auto& x : th) x.join();
    } else {
      for (int i = 0; i < o.encoders; ++i)
        run_encoder(h, i, img, kW, kH, &first_done, nullptr, nullptr);
    }
    std::printf("%-34s %8.1f ms  (first image encoded at %.1f from main's first line, %.1f after "
                "the planes were made)\n",
                "encoders made, two images each", now_ms() - t, first_done.load(),
                first_done.load() - planes_done);
  }
  stop = true;
  for (auto& x : spin) x.join();
  std::fflush(stdout);
  _exit(0);
}
