// start_probe.cu — what stalls the JPEG device route's first batches while the CPU workers start
// their hybrid decoders (docs/benchmarks.md, "Where the 10 GP run waits"): one thread encodes
// one photo's planes with nvJPEG back to back, as a slot does, and --workers threads then each
// make a hybrid decoder and decode progressive files, as histeq's CPU workers do. Printed: the
// encoder's iterations before the workers start and while they make and first use their
// decoders (the stall), and each worker's creation, first and later decodes. Variants, each in
// a process of its own:
//
//   --handle hw|default    the hybrid decoders on the hardware-backend handle the encoder uses,
//                          or on a default-backend handle made for them (as histeq does now)
//   --pinned pinned|pageable|cached  the decoders' "pinned" buffers from nvJPEG's pinned
//                          allocator, from malloc (nvjpegBufferPinnedCreateV2; the transfer is
//                          then staged), or from cudaHostAlloc with no flags
//   --devalloc default|async  nvJPEG's device buffers from cudaMalloc, or stream-ordered from a
//                          memory pool (nvjpegBufferDeviceCreateV2: no cudaFree's device sync)
//   --backend hybrid|gpu_hybrid  the decoders' backend (NVJPEG_BACKEND_HYBRID: entropy decoding
//                          in the host phase; GPU_HYBRID: nvJPEG's GPU-assisted Huffman decoding)
//   --workers N (16), --decodes K (4 per worker), --start-ms T (300: workers start T ms after
//   the encoder's first iteration)
//
// One-time costs (context, handles) are timed apart and printed first. A worker's "first decode"
// includes its buffers' first allocations; "later decodes" is the median over workers of each
// worker's median (each worker takes the files in its own order). The process's CPU time (every
// thread, the encoder's included) over the workers' window is printed beside it. The handles are
// made with nvJPEG's default flags (histeq's ask for strict bitstream checks). With --check, one
// thread decodes every file through a HYBRID decoder on a default-backend handle and through
// each variant on the hardware handle (output buffers filled with different bytes before each
// decode) and compares the file's planes byte for byte.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/start_probe.cu -I<nvjpeg include>
//        -Xlinker <nvjpeg lib>/libnvjpeg.so.13 -lpthread -o start_probe
//   ./start_probe [options] PROGRESSIVE.jpg...
#include <cuda_runtime.h>
#include <nvjpeg.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
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
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

struct Options {
  std::string handle = "default", pinned = "pinned", devalloc = "default", backend = "hybrid";
  int workers = 16, decodes = 4;
  double start_ms = 300;
  bool check = false;
  std::vector<std::string> files;
};

// ---- allocators ----
int pageable_malloc(void*, void** p, size_t n, cudaStream_t) {
  *p = std::malloc(n);
  return *p ? 0 : 1;
}
int pageable_free(void*, void* p, size_t, cudaStream_t) {
  std::free(p);
  return 0;
}
int cached_malloc(void*, void** p, size_t n, cudaStream_t) {  // pinned, cacheable (no flags)
  return cudaHostAlloc(p, n, cudaHostAllocDefault) == cudaSuccess ? 0 : 1;
}
int cached_free(void*, void* p, size_t, cudaStream_t) {
  return cudaFreeHost(p) == cudaSuccess ? 0 : 1;
}
cudaMemPool_t g_pool = nullptr;
int pool_malloc(void*, void** p, size_t n, cudaStream_t s) {
  return cudaMallocFromPoolAsync(p, n, g_pool, s) == cudaSuccess ? 0 : 1;
}
int pool_free(void*, void* p, size_t, cudaStream_t s) {
  return cudaFreeAsync(p, s) == cudaSuccess ? 0 : 1;
}

std::vector<unsigned char> read_file(const std::string& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// One worker's hybrid decoder, as histeq's HybridDecoder makes it.
struct Hybrid {
  nvjpegHandle_t h = nullptr;
  nvjpegJpegDecoder_t dec = nullptr;
  nvjpegJpegState_t st = nullptr;
  nvjpegBufferPinned_t pin[2] = {};
  nvjpegBufferDevice_t dbuf = nullptr;
  nvjpegJpegStream_t js[2] = {};
  nvjpegDecodeParams_t prm = nullptr;
  cudaStream_t s = nullptr;
  unsigned char* out = nullptr;
  std::size_t out_bytes = 0, last_bytes = 0;
  int poison = -1;  ///< >= 0: the output buffer is filled with it before each decode
  int turn = 0;

  Hybrid(nvjpegHandle_t handle, const Options& o) : h(handle) {
    CK(nvjpegDecoderCreate(
        h, o.backend == "gpu_hybrid" ? NVJPEG_BACKEND_GPU_HYBRID : NVJPEG_BACKEND_HYBRID, &dec));
    CK(nvjpegDecoderStateCreate(h, dec, &st));
    nvjpegPinnedAllocatorV2_t pa{pageable_malloc, pageable_free, nullptr};
    nvjpegPinnedAllocatorV2_t ca{cached_malloc, cached_free, nullptr};
    nvjpegDevAllocatorV2_t da{pool_malloc, pool_free, nullptr};
    for (int i = 0; i < 2; ++i) {
      if (o.pinned == "pageable")
        CK(nvjpegBufferPinnedCreateV2(h, &pa, &pin[i]));
      else if (o.pinned == "cached")
        CK(nvjpegBufferPinnedCreateV2(h, &ca, &pin[i]));
      else
        CK(nvjpegBufferPinnedCreate(h, nullptr, &pin[i]));
      CK(nvjpegJpegStreamCreate(h, &js[i]));
    }
    if (o.devalloc == "async")
      CK(nvjpegBufferDeviceCreateV2(h, &da, &dbuf));
    else
      CK(nvjpegBufferDeviceCreate(h, nullptr, &dbuf));
    CK(nvjpegStateAttachDeviceBuffer(st, dbuf));
    CK(nvjpegDecodeParamsCreate(h, &prm));
    CK(nvjpegDecodeParamsSetOutputFormat(prm, NVJPEG_OUTPUT_YUV));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  /// Decodes one file to planes in `out` (grown as needed); returns host-phase ms and total ms.
  bool decode(const std::vector<unsigned char>& f, double* host_ms, double* all_ms) {
    const double t = now_ms();
    nvjpegJpegStream_t j = js[turn];
    CK(nvjpegStateAttachPinnedBuffer(st, pin[turn]));
    if (nvjpegJpegStreamParse(h, f.data(), f.size(), 0, 0, j) != NVJPEG_STATUS_SUCCESS)
      return false;
    unsigned cw[3] = {}, ch[3] = {};
    std::size_t at[3] = {}, bytes = 0;
    for (unsigned c = 0; c < 3; ++c) {
      CK(nvjpegJpegStreamGetComponentDimensions(j, c, &cw[c], &ch[c]));
      at[c] = bytes;
      bytes += (std::size_t(cw[c]) * ch[c] + 255) / 256 * 256;
    }
    const double th = now_ms();
    if (nvjpegDecodeJpegHost(h, dec, st, prm, j) != NVJPEG_STATUS_SUCCESS) return false;
    *host_ms = now_ms() - th;
    turn ^= 1;
    CK(cudaStreamSynchronize(s));
    if (bytes > out_bytes) {
      if (out) CK(cudaFreeAsync(out, s));
      CK(cudaMallocAsync(reinterpret_cast<void**>(&out), bytes, s));
      out_bytes = bytes;
    }
    last_bytes = bytes;
    if (poison >= 0) CK(cudaMemsetAsync(out, poison, out_bytes, s));
    nvjpegImage_t img{};
    for (int c = 0; c < 3; ++c) {
      img.channel[c] = out + at[c];
      img.pitch[c] = cw[c];
    }
    if (nvjpegDecodeJpegTransferToDevice(h, dec, st, j, s) != NVJPEG_STATUS_SUCCESS ||
        nvjpegDecodeJpegDevice(h, dec, st, &img, s) != NVJPEG_STATUS_SUCCESS)
      return false;
    CK(cudaStreamSynchronize(s));
    *all_ms = now_ms() - t;
    return true;
  }
};

double cpu_ms() {  // this process's user + system time, every thread
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--handle") o.handle = next();
    else if (a == "--pinned") o.pinned = next();
    else if (a == "--devalloc") o.devalloc = next();
    else if (a == "--backend") o.backend = next();
    else if (a == "--workers") o.workers = std::atoi(next().c_str());
    else if (a == "--decodes") o.decodes = std::atoi(next().c_str());
    else if (a == "--start-ms") o.start_ms = std::atof(next().c_str());
    else if (a == "--check") o.check = true;
    else o.files.push_back(a);
  }
  if (o.files.empty()) {
    std::fprintf(stderr, "usage: start_probe [options] PROGRESSIVE.jpg...\n");
    return 2;
  }
  std::vector<std::vector<unsigned char>> files;
  for (const auto& f : o.files) files.push_back(read_file(f));
  std::printf("# start_probe --handle %s --pinned %s --devalloc %s --backend %s --workers %d "
              "--decodes %d (%zu files)\n",
              o.handle.c_str(), o.pinned.c_str(), o.devalloc.c_str(), o.backend.c_str(),
              o.workers, o.decodes, files.size());
  g_t0 = Clock::now();
  CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
  CK(cudaFree(nullptr));
  std::printf("context                  %8.1f ms\n", now_ms());
  double t = now_ms();
  nvjpegHandle_t hw = nullptr;
  CK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &hw));
  std::printf("hardware handle          %8.1f ms\n", now_ms() - t);
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  CK(cudaMemPoolCreate(&g_pool, &props));
  std::uint64_t keep = std::uint64_t(1) << 30;
  CK(cudaMemPoolSetAttribute(g_pool, cudaMemPoolAttrReleaseThreshold, &keep));
  {
    nvjpegJpegDecoder_t d = nullptr;
    const nvjpegStatus_t st = nvjpegDecoderCreate(hw, NVJPEG_BACKEND_HYBRID, &d);
    std::printf("hybrid decoder on the hardware handle: status %d\n", int(st));
    if (d) nvjpegDecoderDestroy(d);
  }

  // The encoder thread: the planes of a 5120x2880 4:2:0 photo (a gradient), encoded back to back.
  const int W = 5120, H = 2880;
  cudaStream_t es = nullptr;
  CK(cudaStreamCreateWithFlags(&es, cudaStreamNonBlocking));
  unsigned char* planes = nullptr;
  CK(cudaMalloc(&planes, std::size_t(W) * H * 3 / 2));
  {
    std::vector<unsigned char> hp(std::size_t(W) * H * 3 / 2);
    for (std::size_t i = 0; i < hp.size(); ++i) hp[i] = (unsigned char)((i * 7 + i / W) & 255);
    CK(cudaMemcpy(planes, hp.data(), hp.size(), cudaMemcpyHostToDevice));
  }
  nvjpegEncoderState_t est = nullptr;
  nvjpegEncoderParams_t ep = nullptr;
  CK(nvjpegEncoderStateCreate(hw, &est, es));
  CK(nvjpegEncoderParamsCreate(hw, &ep, es));
  CK(nvjpegEncoderParamsSetQuality(ep, 95, es));
  CK(nvjpegEncoderParamsSetSamplingFactors(ep, NVJPEG_CSS_420, es));
  std::atomic<bool> stop{false};
  std::atomic<double> enc_first{-1};
  std::vector<std::pair<double, double>> iters;  // start, ms
  std::thread enc([&] {
    std::vector<unsigned char> bits;
    nvjpegImage_t img{};
    img.channel[0] = planes;
    img.pitch[0] = W;
    img.channel[1] = planes + std::size_t(W) * H;
    img.pitch[1] = W / 2;
    img.channel[2] = planes + std::size_t(W) * H * 5 / 4;
    img.pitch[2] = W / 2;
    while (!stop.load()) {
      const double a = now_ms();
      CK(nvjpegEncodeYUV(hw, est, ep, &img, NVJPEG_CSS_420, W, H, es));
      std::size_t n = 0;
      CK(nvjpegEncodeRetrieveBitstream(hw, est, nullptr, &n, es));
      bits.resize(n);
      CK(nvjpegEncodeRetrieveBitstream(hw, est, bits.data(), &n, es));
      CK(cudaStreamSynchronize(es));
      const double d = now_ms() - a;
      if (enc_first.load() < 0) enc_first = a;
      iters.emplace_back(a, d);
    }
  });
  while (enc_first.load() < 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double w0 = enc_first.load() + o.start_ms;
  while (now_ms() < w0) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  // The workers.
  nvjpegHandle_t dh = hw;
  t = now_ms();
  if (o.handle == "default") {
    CK(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &dh));
    std::printf("default handle (workers' start) %8.1f ms\n", now_ms() - t);
  }
  struct W_ {
    double made = 0, first = 0, first_host = 0, later = 0, done_at = 0;
  };
  std::vector<W_> ws(o.workers);
  std::vector<std::thread> th;
  const double wstart = now_ms(), cpu0 = cpu_ms();
  for (int k = 0; k < o.workers; ++k)
    th.emplace_back([&, k] {
      const double a = now_ms();
      Hybrid hy(dh, o);
      ws[k].made = now_ms() - a;
      std::vector<double> later;
      for (int d = 0; d < o.decodes; ++d) {
        double hm = 0, am = 0;
        if (!hy.decode(files[(k + d) % files.size()], &hm, &am)) {
          std::fprintf(stderr, "worker %d: decode refused\n", k);
          break;
        }
        if (d == 0) {
          ws[k].first = am;
          ws[k].first_host = hm;
        } else {
          later.push_back(am);
        }
      }
      ws[k].later = median(later);
      ws[k].done_at = now_ms();
    });
  for (auto& x : th) x.join();
  const double wend = now_ms(), cpu1 = cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  stop = true;
  enc.join();

  std::vector<double> before, during, after;
  double worst = 0, worst_at = 0;
  int over5 = 0;
  for (auto [a, d] : iters) {
    if (a + d < wstart) before.push_back(d);
    else if (a > wend) after.push_back(d);
    else {
      during.push_back(d);
      if (d > 5) ++over5;
      if (d > worst) {
        worst = d;
        worst_at = a - wstart;
      }
    }
  }
  double first_done = 1e30;
  std::vector<double> made, first, first_host, later;
  for (auto& w : ws) {
    made.push_back(w.made);
    first.push_back(w.first);
    first_host.push_back(w.first_host);
    later.push_back(w.later);
    first_done = std::min(first_done, w.done_at - wstart);
  }
  std::printf("workers: %d, from %.1f to %.1f ms (%.1f ms); process CPU time meanwhile %.0f ms\n",
              o.workers, wstart, wend, wend - wstart, cpu1 - cpu0);
  std::printf("  decoder made: median %.2f max %.2f ms\n", median(made),
              *std::max_element(made.begin(), made.end()));
  std::printf("  first decode: median %.1f max %.1f ms (host phase median %.1f)\n", median(first),
              *std::max_element(first.begin(), first.end()), median(first_host));
  std::printf("  later decodes: median %.1f ms\n", median(later));
  std::printf("encoder (5120x2880 4:2:0 planes, q95): before %zu its, median %.2f ms; during %zu "
              "its, median %.2f, worst %.1f ms at +%.0f ms; after %zu its, median %.2f ms\n",
              before.size(), median(before), during.size(), median(during), worst, worst_at,
              after.size(), median(after));
  double sum_during = 0;
  for (double d : during) sum_during += d;
  std::printf("  encoder: %d iterations over 5 ms during the workers; %.1f ms of iterations in "
              "their %.1f ms\n",
              over5, sum_during, wend - wstart);

  if (o.check) {
    // Every file through a hybrid decoder on a default handle with nvJPEG's allocators, and
    // through the variants on the hardware handle: the planes byte for byte.
    nvjpegHandle_t def = nullptr;
    CK(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &def));
    Options base;
    Hybrid ref(def, base);
    ref.poison = 0x00;
    const char* variants[][3] = {{"pinned", "default", "hybrid"},
                                 {"pageable", "default", "hybrid"},
                                 {"pageable", "async", "hybrid"},
                                 {"cached", "default", "hybrid"},
                                 {"pageable", "async", "gpu_hybrid"}};
    for (auto& v : variants) {
      Options vo;
      vo.pinned = v[0];
      vo.devalloc = v[1];
      vo.backend = v[2];
      Hybrid x(hw, vo);
      x.poison = 0xFF;
      int same = 0, differ = 0, refused = 0;
      double host_x = 0, host_ref = 0, all_x = 0;
      for (const auto& f : files) {
        double hr = 0, hx = 0, am = 0, ax = 0;
        const bool okr = ref.decode(f, &hr, &am), okx = x.decode(f, &hx, &ax);
        all_x += ax;
        if (!okr || !okx) {
          ++refused;
          continue;
        }
        host_ref += hr;
        host_x += hx;
        if (ref.last_bytes != x.last_bytes) {
          ++differ;
          continue;
        }
        std::vector<unsigned char> a(ref.last_bytes), b(x.last_bytes);
        CK(cudaMemcpy(a.data(), ref.out, a.size(), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), x.out, b.size(), cudaMemcpyDeviceToHost));
        (a == b ? same : differ)++;
      }
      std::printf("check: hardware handle, %s host buffers, %s device buffers, %s: %d files' "
                  "planes identical to HYBRID's on the default handle, %d differ, %d refused; "
                  "host phase %.1f ms (HYBRID on the default handle %.1f ms), decode %.1f ms, "
                  "one thread\n",
                  v[0], v[1], v[2], same, differ, refused, host_x, host_ref, all_x);
    }
  }
  std::fflush(stdout);
  std::_Exit(0);  // teardown is not what this probe measures
}
