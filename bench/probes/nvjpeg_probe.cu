// nvjpeg_probe.cu — what the GPU's JPEG hardware and nvJPEG's encoder can do for a folder of
// photographs, timed apart from everything else: one-time costs (context, handles, states,
// batch initialization, encoder states, pinned and device buffers) and teardown are timed on
// their own, and every throughput figure is measured with all of them made beforehand and
// reused, from the first call issued to the last synchronize. A measuring tool for the
// executor's device route (docs/benchmarks.md, "JPEG on the device").
//
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/nvjpeg_probe.cu -I<nvjpeg include> -L<nvjpeg lib> \
//        -lnvjpeg -o nvjpeg_probe
//   ./nvjpeg_probe [--copies N] [--sections startup,support,decode,encode,chain] DIR...
//   ./nvjpeg_probe --exit MODE FILE.jpg   (see exit_probe)
//
// Sections (default: all, in this order):
//   startup  context (cudaFree(0)), the hardware-backend handle, a second one, the default
//            handle, decode states, nvjpegDecodeBatchedInitialize, encoder states and params,
//            pinned and device allocations; teardown of each kind is timed at the end.
//   support  per file: parse + nvjpegDecodeBatchedSupported on the CPU (cost per file), size,
//            chroma subsampling, whether the hardware decoder takes it.
//   decode   the hardware decoder over every supported file (each COPIES times): output YUV
//            (planar, the file's subsampling) and RGBI, batch sizes 1..64, K = 1, 2, 4 batches
//            in flight (K states and streams), issued from one thread and from K threads.
//            Reported: MP/s (pixels of the images decoded / wall from first issue to last
//            sync) and the host time spent inside nvjpegDecodeBatched.
//   encode   nvJPEG's encoder (quality 95) from the decoded YUV planes (nvjpegEncodeYUV, the
//            file's subsampling) and from RGBI (nvjpegEncodeImage, 4:2:0), S streams x G states
//            per stream; retrieving each bitstream to host memory is inside the time.
//   chain    the device route as the executor would run it: K slots, each a thread with its own
//            state, stream and B encoder states; per batch: decode B files to YUV, per image a
//            256-bin histogram of Y, its LUT and the LUT applied to Y in place (small kernels of
//            this file, not histeq's), encode from the planes, retrieve the bitstreams.
#include <cuda_runtime.h>
#include <dirent.h>
#include <nvjpeg.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using Clock = std::chrono::steady_clock;
static double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
#define CK(x)                                                                     \
  do {                                                                            \
    auto s_ = (x);                                                                \
    if (int(s_) != 0) {                                                           \
      std::fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

namespace {

struct Jpg {
  std::string name;
  std::vector<unsigned char> bytes;
  int w = 0, h = 0, comps = 0;
  nvjpegChromaSubsampling_t css = NVJPEG_CSS_UNKNOWN;
  int pw[4] = {}, ph[4] = {};  // plane sizes
  bool hw = false;
  double mp() const { return double(w) * h / 1e6; }
  std::size_t yuv_bytes() const {
    std::size_t n = 0;
    for (int c = 0; c < comps; ++c) n += std::size_t(pw[c]) * ph[c];
    return n;
  }
};

const char* css_name(nvjpegChromaSubsampling_t c) {
  switch (c) {
    case NVJPEG_CSS_444: return "444";
    case NVJPEG_CSS_422: return "422";
    case NVJPEG_CSS_420: return "420";
    case NVJPEG_CSS_440: return "440";
    case NVJPEG_CSS_411: return "411";
    case NVJPEG_CSS_410: return "410";
    case NVJPEG_CSS_GRAY: return "gray";
    default: return "?";
  }
}

// ---- the equalization stand-in of the chain section: histogram, LUT, apply on a Y plane ----
__global__ void hist256(const unsigned char* y, std::size_t n, unsigned* hist) {
  __shared__ unsigned h[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) h[i] = 0;
  __syncthreads();
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x * 4;
  for (std::size_t i = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4; i < n;
       i += stride) {
    if (i + 3 < n) {
      const uchar4 v = *reinterpret_cast<const uchar4*>(y + i);
      atomicAdd(&h[v.x], 1u);
      atomicAdd(&h[v.y], 1u);
      atomicAdd(&h[v.z], 1u);
      atomicAdd(&h[v.w], 1u);
    } else {
      for (std::size_t k = i; k < n; ++k) atomicAdd(&h[y[k]], 1u);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += blockDim.x)
    if (h[i]) atomicAdd(&hist[i], h[i]);
}
__global__ void make_lut(unsigned* hist, std::size_t n, unsigned char* lut) {
  if (threadIdx.x != 0) return;
  unsigned first = 0;
  while (first < 256 && hist[first] == 0) ++first;
  const double total = double(n) - (first < 256 ? hist[first] : 0);
  double cdf = 0;
  for (int i = 0; i < 256; ++i) {
    if (i > int(first)) cdf += hist[i];
    const double v = total > 0 ? cdf * 255.0 / total : double(i);
    lut[i] = (unsigned char)(v + 0.5 > 255 ? 255 : v + 0.5);
    hist[i] = 0;  // ready for the next image
  }
}
__global__ void apply_lut(unsigned char* y, std::size_t n, const unsigned char* lut) {
  __shared__ unsigned char l[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) l[i] = lut[i];
  __syncthreads();
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x * 4;
  for (std::size_t i = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4; i < n;
       i += stride) {
    if (i + 3 < n) {
      uchar4 v = *reinterpret_cast<uchar4*>(y + i);
      v.x = l[v.x];
      v.y = l[v.y];
      v.z = l[v.z];
      v.w = l[v.w];
      *reinterpret_cast<uchar4*>(y + i) = v;
    } else {
      for (std::size_t k = i; k < n; ++k) y[k] = l[y[k]];
    }
  }
}

/// The cost of ending a process that holds what a device worker holds after real work (a
/// context, a hardware handle, a decode state that decoded a batch of 8, 8 encoder states that
/// each encoded, 8 pinned and 8 device buffers of 44 MB): prints CLOCK_MONOTONIC in ns just
/// before it ends, so that the caller (same machine, same clock) can time the rest. MODE: _exit
/// (std::_Exit), free (everything destroyed, then _Exit), return (return from main: atexit
/// handlers and the runtime's teardown), handoff (a child process that inherits the driver's
/// descriptors and closes the others waits for this one to end, then ends itself: the driver's
/// teardown runs on the last close, in the child, after the caller has this process's status).
/// FILE: a JPEG the hardware decoder takes.
int exit_probe(const std::string& mode, const std::string& file) {
  std::ifstream f(file, std::ios::binary);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(f)), {});
  CK(cudaFree(nullptr));
  nvjpegHandle_t hw = nullptr;
  CK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &hw));
  int nc = 0, pw[4] = {}, ph[4] = {};
  nvjpegChromaSubsampling_t css;
  CK(nvjpegGetImageInfo(hw, bytes.data(), bytes.size(), &nc, &css, pw, ph));
  nvjpegJpegState_t st;
  CK(nvjpegJpegStateCreate(hw, &st));
  CK(nvjpegDecodeBatchedInitialize(hw, st, 8, 1, NVJPEG_OUTPUT_RGBI));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  std::vector<void*> pinned(8), dev(8);
  for (auto& p : pinned) {
    CK(cudaMallocHost(&p, 44u << 20));
    std::memset(p, 1, 44u << 20);
  }
  for (auto& d : dev) CK(cudaMalloc(&d, std::max<std::size_t>(44u << 20, std::size_t(pw[0]) * ph[0] * 3)));
  std::vector<const unsigned char*> dd(8, bytes.data());
  std::vector<std::size_t> ll(8, bytes.size());
  std::vector<nvjpegImage_t> o(8);
  for (int i = 0; i < 8; ++i) {
    std::memset(&o[i], 0, sizeof o[i]);
    o[i].channel[0] = static_cast<unsigned char*>(dev[i]);
    o[i].pitch[0] = std::size_t(pw[0]) * 3;
  }
  CK(nvjpegDecodeBatched(hw, st, dd.data(), ll.data(), o.data(), s));
  std::vector<nvjpegEncoderState_t> es(8);
  nvjpegEncoderParams_t prm;
  CK(nvjpegEncoderParamsCreate(hw, &prm, s));
  CK(nvjpegEncoderParamsSetSamplingFactors(prm, NVJPEG_CSS_420, s));
  for (int i = 0; i < 8; ++i) {
    CK(nvjpegEncoderStateCreate(hw, &es[i], s));
    CK(nvjpegEncodeImage(hw, es[i], prm, &o[i], NVJPEG_INPUT_RGBI, pw[0], ph[0], s));
  }
  CK(cudaStreamSynchronize(s));
  for (int i = 0; i < 8; ++i) {
    std::size_t len = 0;
    CK(nvjpegEncodeRetrieveBitstream(hw, es[i], nullptr, &len, s));
    CK(nvjpegEncodeRetrieveBitstream(hw, es[i], static_cast<unsigned char*>(pinned[i]), &len, s));
  }
  CK(cudaDeviceSynchronize());
  if (mode == "free") {
    for (auto& e : es) nvjpegEncoderStateDestroy(e);
    nvjpegEncoderParamsDestroy(prm);
    nvjpegJpegStateDestroy(st);
    nvjpegDestroy(hw);
    for (auto p : pinned) cudaFreeHost(p);
    for (auto d : dev) cudaFree(d);
  }
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  std::printf("%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
  std::fflush(stdout);
  if (mode == "return") return 0;
  if (mode == "handoff") {
    int fds[2];
    if (pipe(fds) == 0) {
      const pid_t pid = _Fork();  // as histeq (src/cli/main.cpp): no atfork handlers
      if (pid == 0) {
        // Every descriptor but the pipe's read end and the driver's (/dev/nvidia*) closed: the
        // caller's pipes see their end when the parent ends.
        for (int fd = 0; fd < 1024; ++fd) {
          if (fd == fds[0]) continue;
          char link[64], target[256];
          std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
          const ssize_t n = readlink(link, target, sizeof target - 1);
          if (n < 0) continue;
          target[n] = 0;
          if (std::strncmp(target, "/dev/nvidia", 11) != 0) close(fd);
        }
        char c;
        while (read(fds[0], &c, 1) > 0) {
        }
        _exit(0);
      }
    }
  }
  std::_Exit(0);
}

struct Handles {
  nvjpegHandle_t hw = nullptr;
  unsigned flags = 0;  ///< the hardware handle's nvjpegCreateEx flags (--flags)
  bool quick = false;  ///< --quick: the configurations the executor uses, fewer repetitions
};

// ---- startup ----
void startup(Handles& H) {
  auto a = Clock::now();
  CK(cudaFree(nullptr));
  auto b = Clock::now();
  std::printf("startup: context (cudaFree(0))                  %8.1f ms\n", ms(a, b));
  a = Clock::now();
  CK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, H.flags, &H.hw));
  b = Clock::now();
  std::printf("startup: hardware handle (nvjpegCreateEx)        %8.1f ms\n", ms(a, b));
  nvjpegHandle_t hw2 = nullptr, def = nullptr;
  a = Clock::now();
  CK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &hw2));
  b = Clock::now();
  std::printf("startup: a second hardware handle                %8.1f ms\n", ms(a, b));
  a = Clock::now();
  CK(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &def));
  b = Clock::now();
  std::printf("startup: default-backend handle                  %8.1f ms\n", ms(a, b));
  std::vector<nvjpegJpegState_t> st(3);
  for (int i = 0; i < 3; ++i) {
    a = Clock::now();
    CK(nvjpegJpegStateCreate(H.hw, &st[i]));
    b = Clock::now();
    std::printf("startup: decode state %d (nvjpegJpegStateCreate)  %8.1f ms\n", i, ms(a, b));
  }
  for (int bs : {8, 32, 64}) {
    a = Clock::now();
    CK(nvjpegDecodeBatchedInitialize(H.hw, st[0], bs, 1, NVJPEG_OUTPUT_YUV));
    b = Clock::now();
    std::printf("startup: DecodeBatchedInitialize(batch %2d)       %8.1f ms\n", bs, ms(a, b));
  }
  cudaStream_t s;
  a = Clock::now();
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  b = Clock::now();
  std::printf("startup: stream                                  %8.1f ms\n", ms(a, b));
  std::vector<nvjpegEncoderState_t> es(3);
  for (int i = 0; i < 3; ++i) {
    a = Clock::now();
    CK(nvjpegEncoderStateCreate(H.hw, &es[i], s));
    b = Clock::now();
    std::printf("startup: encoder state %d                         %8.1f ms\n", i, ms(a, b));
  }
  {
    nvjpegEncoderState_t hwenc = nullptr;
    a = Clock::now();
    const nvjpegStatus_t r =
        nvjpegEncoderStateCreateWithBackend(H.hw, &hwenc, NVJPEG_ENC_BACKEND_HARDWARE, s);
    b = Clock::now();
    std::printf("startup: encoder state, hardware backend          %8.1f ms (status %d%s)\n",
                ms(a, b), int(r), r == NVJPEG_STATUS_SUCCESS ? ": this GPU encodes in hardware" : "");
    if (r == NVJPEG_STATUS_SUCCESS) nvjpegEncoderStateDestroy(hwenc);
  }
  nvjpegEncoderParams_t p;
  a = Clock::now();
  CK(nvjpegEncoderParamsCreate(H.hw, &p, s));
  b = Clock::now();
  std::printf("startup: encoder params                          %8.1f ms\n", ms(a, b));
  void* pin = nullptr;
  a = Clock::now();
  CK(cudaMallocHost(&pin, std::size_t(64) << 20));
  b = Clock::now();
  std::printf("startup: 64 MiB pinned (cudaMallocHost)          %8.1f ms\n", ms(a, b));
  void* dev = nullptr;
  a = Clock::now();
  CK(cudaMalloc(&dev, std::size_t(1) << 30));
  b = Clock::now();
  std::printf("startup: 1 GiB device (cudaMalloc)               %8.1f ms\n", ms(a, b));
  // teardown of each kind
  a = Clock::now();
  for (auto e : es) nvjpegEncoderStateDestroy(e);
  b = Clock::now();
  std::printf("teardown: 3 encoder states                       %8.1f ms\n", ms(a, b));
  nvjpegEncoderParamsDestroy(p);
  a = Clock::now();
  for (auto x : st) nvjpegJpegStateDestroy(x);
  b = Clock::now();
  std::printf("teardown: 3 decode states                        %8.1f ms\n", ms(a, b));
  a = Clock::now();
  nvjpegDestroy(hw2);
  b = Clock::now();
  std::printf("teardown: a hardware handle                      %8.1f ms\n", ms(a, b));
  a = Clock::now();
  nvjpegDestroy(def);
  b = Clock::now();
  std::printf("teardown: the default-backend handle             %8.1f ms\n", ms(a, b));
  a = Clock::now();
  cudaFreeHost(pin);
  cudaFree(dev);
  b = Clock::now();
  std::printf("teardown: the pinned and device buffers          %8.1f ms\n", ms(a, b));
  cudaStreamDestroy(s);
}

// ---- support ----
void support(Handles& H, std::vector<Jpg>& files) {
  nvjpegJpegStream_t js;
  CK(nvjpegJpegStreamCreate(H.hw, &js));
  double check_ms = 0, hw_mp = 0, all_mp = 0;
  for (auto& j : files) {
    auto a = Clock::now();
    const nvjpegStatus_t pr = nvjpegJpegStreamParse(H.hw, j.bytes.data(), j.bytes.size(), 0, 0, js);
    int ns = 1;
    if (pr == NVJPEG_STATUS_SUCCESS) CK(nvjpegDecodeBatchedSupported(H.hw, js, &ns));
    check_ms += ms(a, Clock::now());
    nvjpegChromaSubsampling_t css;
    int nc = 0;
    if (nvjpegGetImageInfo(H.hw, j.bytes.data(), j.bytes.size(), &nc, &css, j.pw, j.ph) ==
        NVJPEG_STATUS_SUCCESS) {
      j.comps = nc;
      j.css = css;
      j.w = j.pw[0];
      j.h = j.ph[0];
    }
    j.hw = pr == NVJPEG_STATUS_SUCCESS && ns == 0 && (nc == 1 || nc == 3);
    all_mp += j.mp();
    if (j.hw) hw_mp += j.mp();
  }
  double header_ms = 0;  // the executor's need: header only, after the pass above warmed up
  for (auto& j : files) {
    auto a = Clock::now();
    int ns = 1;
    if (nvjpegJpegStreamParseHeader(H.hw, j.bytes.data(), j.bytes.size(), js) ==
        NVJPEG_STATUS_SUCCESS)
      CK(nvjpegDecodeBatchedSupported(H.hw, js, &ns));
    header_ms += ms(a, Clock::now());
  }
  std::printf("support: ParseHeader + DecodeBatchedSupported: %.3f ms per file\n",
              header_ms / double(std::max<std::size_t>(files.size(), 1)));
  nvjpegJpegStreamDestroy(js);
  std::printf("support: full parse + DecodeBatchedSupported (first pass): %.3f ms per file (%zu files); %.1f of %.1f MP "
              "(%.0f %%) taken by the hardware decoder\n",
              check_ms / double(std::max<std::size_t>(files.size(), 1)), files.size(), hw_mp,
              all_mp, all_mp > 0 ? 100 * hw_mp / all_mp : 0.0);
  for (auto& j : files)
    std::printf("  %-28s %5dx%-5d %-4s c%d %8zu B %s\n", j.name.c_str(), j.w, j.h,
                css_name(j.css), j.comps, j.bytes.size(), j.hw ? "hardware" : "-");
}

/// A list of `copies` x the hardware-decodable files, padded cyclically to a multiple of `batch`.
std::vector<const Jpg*> work_list(const std::vector<Jpg>& files, int copies, int batch,
                                  double* mp) {
  std::vector<const Jpg*> base;
  for (int k = 0; k < copies; ++k)
    for (const auto& j : files)
      if (j.hw) base.push_back(&j);
  std::vector<const Jpg*> list = base;
  for (std::size_t i = 0; list.size() % std::size_t(batch) != 0; ++i)
    list.push_back(base[i % base.size()]);
  *mp = 0;
  for (const Jpg* j : list) *mp += j->mp();
  return list;
}

/// One batch slot: a decode state, a stream, an event, output buffers for `batch` images.
struct Slot {
  nvjpegJpegState_t st = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t ev = nullptr;
  std::vector<unsigned char*> out;  // per image in the batch: max_bytes each
  bool busy = false;
};

void fill_dest(const Jpg& j, unsigned char* base, nvjpegOutputFormat_t fmt, nvjpegImage_t* o) {
  std::memset(o, 0, sizeof *o);
  if (fmt == NVJPEG_OUTPUT_RGBI) {
    o->channel[0] = base;
    o->pitch[0] = std::size_t(j.w) * 3;
    return;
  }
  std::size_t off = 0;
  for (int c = 0; c < j.comps; ++c) {
    o->channel[c] = base + off;
    o->pitch[c] = std::size_t(j.pw[c]);
    off += std::size_t(j.pw[c]) * j.ph[c];
  }
}

// ---- first use: what the first batch and the first encode cost on fresh states ----
void first_use(Handles& H, const std::vector<Jpg>& files) {
  std::vector<const Jpg*> hw;
  int max_w = 0, max_h = 0;
  for (const auto& j : files)
    if (j.hw && hw.size() < 8) {
      hw.push_back(&j);
      max_w = std::max(max_w, j.w);
      max_h = std::max(max_h, j.h);
    }
  if (hw.empty()) return;
  const int n = int(hw.size());
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<unsigned char*> out(hw.size());
  for (std::size_t i = 0; i < hw.size(); ++i) CK(cudaMalloc(&out[i], hw[i]->yuv_bytes()));
  std::vector<const unsigned char*> d;
  std::vector<std::size_t> l;
  std::vector<nvjpegImage_t> o(hw.size());
  for (std::size_t i = 0; i < hw.size(); ++i) {
    d.push_back(hw[i]->bytes.data());
    l.push_back(hw[i]->bytes.size());
    fill_dest(*hw[i], out[i], NVJPEG_OUTPUT_YUV, &o[i]);
  }
  for (bool prealloc : {false, true}) {
    nvjpegJpegState_t st;
    CK(nvjpegJpegStateCreate(H.hw, &st));
    auto a = Clock::now();
    CK(nvjpegDecodeBatchedInitialize(H.hw, st, n, 1, NVJPEG_OUTPUT_YUV));
    if (prealloc)
      CK(nvjpegDecodeBatchedPreAllocate(H.hw, st, n, max_w, max_h, NVJPEG_CSS_444,
                                        NVJPEG_OUTPUT_YUV));
    const double init = ms(a, Clock::now());
    double t[3];
    for (double& x : t) {
      a = Clock::now();
      CK(nvjpegDecodeBatched(H.hw, st, d.data(), l.data(), o.data(), s));
      CK(cudaStreamSynchronize(s));
      x = ms(a, Clock::now());
    }
    a = Clock::now();
    nvjpegJpegStateDestroy(st);
    const double destroy = ms(a, Clock::now());
    std::printf("first use: a fresh decode state%s, batch of %d: Initialize%s %.1f ms, first batch "
                "%.1f ms, second %.1f ms, third %.1f ms; destroying it %.1f ms\n",
                prealloc ? " with PreAllocate" : "", n, prealloc ? " + PreAllocate" : "", init,
                t[0], t[1], t[2], destroy);
  }
  {
    const Jpg& j = *hw[0];
    nvjpegEncoderParams_t p;
    CK(nvjpegEncoderParamsCreate(H.hw, &p, s));
    CK(nvjpegEncoderParamsSetQuality(p, 95, s));
    CK(nvjpegEncoderParamsSetSamplingFactors(p, j.css, s));
    nvjpegEncoderState_t es;
    auto a = Clock::now();
    CK(nvjpegEncoderStateCreate(H.hw, &es, s));
    const double create = ms(a, Clock::now());
    std::vector<unsigned char> host(std::size_t(64) << 20);
    double t[3];
    for (double& x : t) {
      a = Clock::now();
      CK(nvjpegEncodeYUV(H.hw, es, p, &o[0], j.css, j.w, j.h, s));
      std::size_t len = 0;
      CK(nvjpegEncodeRetrieveBitstream(H.hw, es, nullptr, &len, s));
      if (len > host.size()) host.resize(len);
      CK(nvjpegEncodeRetrieveBitstream(H.hw, es, host.data(), &len, s));
      CK(cudaStreamSynchronize(s));
      x = ms(a, Clock::now());
    }
    a = Clock::now();
    nvjpegEncoderStateDestroy(es);
    const double destroy = ms(a, Clock::now());
    nvjpegEncoderParamsDestroy(p);
    std::printf("first use: a fresh encoder state (%.1f ms to create), %s %dx%d: first encode %.1f "
                "ms, second %.1f ms, third %.1f ms; destroying it %.1f ms\n",
                create, j.name.c_str(), j.w, j.h, t[0], t[1], t[2], destroy);
  }
  for (auto p : out) cudaFree(p);
  cudaStreamDestroy(s);
}

// ---- decode ----
double median3(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void decode_section(Handles& H, const std::vector<Jpg>& files, int copies) {
  std::size_t max_bytes = 0;
  int max_w = 0, max_h = 0;
  for (const auto& j : files)
    if (j.hw) {
      max_bytes = std::max(max_bytes, std::size_t(j.w) * j.h * 3);
      max_w = std::max(max_w, j.w);
      max_h = std::max(max_h, j.h);
    }
  if (max_bytes == 0) {
    std::printf("decode: no file the hardware decoder takes\n");
    return;
  }
  constexpr int kMaxK = 4, kMaxB = 64;
  std::vector<Slot> slots(kMaxK);
  for (auto& sl : slots) {  // one-time: made before any timing
    CK(nvjpegJpegStateCreate(H.hw, &sl.st));
    CK(cudaStreamCreateWithFlags(&sl.s, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&sl.ev, cudaEventDisableTiming));
    sl.out.resize(kMaxB);
    for (auto& p : sl.out) CK(cudaMalloc(&p, max_bytes));
  }
  struct Config {
    nvjpegOutputFormat_t fmt;
    int batch;
    bool prealloc;
  };
  std::vector<Config> configs;
  if (H.quick) {
    for (int b : {1, 16}) configs.push_back({NVJPEG_OUTPUT_YUV, b, false});
  } else {
    for (int b : {1, 4, 8, 16, 32, 64}) configs.push_back({NVJPEG_OUTPUT_YUV, b, true});
    for (int b : {8, 32}) configs.push_back({NVJPEG_OUTPUT_RGBI, b, true});
    for (int b : {8, 32}) configs.push_back({NVJPEG_OUTPUT_YUV, b, false});
  }
  for (const Config& cfg : configs) {
    const nvjpegOutputFormat_t fmt = cfg.fmt;
    const int batch = cfg.batch;
    {
      // Fresh states for each configuration (made and destroyed untimed), so that no
      // configuration starts with memory an earlier one left in its states.
      for (auto& sl : slots) {
        nvjpegJpegStateDestroy(sl.st);
        CK(nvjpegJpegStateCreate(H.hw, &sl.st));
      }
      double init_ms = 0;
      for (auto& sl : slots) {
        auto a = Clock::now();
        CK(nvjpegDecodeBatchedInitialize(H.hw, sl.st, batch, 1, fmt));
        // memory pool sized for the largest image, any subsampling: no cudaMalloc/cudaFree
        // inside the timed DecodeBatched calls (docs: nvjpegDecodeBatchedPreAllocate)
        if (cfg.prealloc)
          CK(nvjpegDecodeBatchedPreAllocate(H.hw, sl.st, batch, max_w, max_h, NVJPEG_CSS_444,
                                            fmt));
        init_ms += ms(a, Clock::now());
      }
      double mp = 0;
      const std::vector<const Jpg*> list = work_list(files, copies, batch, &mp);
      const std::size_t nb = list.size() / std::size_t(batch);
      std::vector<double> walls, calls;
      auto run_one = [&](int k_slots, bool threads_per_slot, bool warm) {
        std::vector<double> in_call(static_cast<std::size_t>(k_slots), 0.0);
        auto issue = [&](int k, std::size_t b) {
          Slot& sl = slots[std::size_t(k)];
          const std::size_t nbatch = std::size_t(batch);
          std::vector<const unsigned char*> d(nbatch);
          std::vector<std::size_t> l(nbatch);
          std::vector<nvjpegImage_t> o(nbatch);
          for (int i = 0; i < batch; ++i) {
            const Jpg& j = *list[b * std::size_t(batch) + std::size_t(i)];
            d[std::size_t(i)] = j.bytes.data();
            l[std::size_t(i)] = j.bytes.size();
            fill_dest(j, sl.out[std::size_t(i)], fmt, &o[std::size_t(i)]);
          }
          auto c0 = Clock::now();
          CK(nvjpegDecodeBatched(H.hw, sl.st, d.data(), l.data(), o.data(), sl.s));
          in_call[std::size_t(k)] += ms(c0, Clock::now());
          CK(cudaEventRecord(sl.ev, sl.s));
        };
        const auto t0 = Clock::now();
        if (!threads_per_slot) {
          for (std::size_t b = 0; b < nb; ++b) {
            const int k = int(b % std::size_t(k_slots));
            if (b >= std::size_t(k_slots)) CK(cudaEventSynchronize(slots[std::size_t(k)].ev));
            issue(k, b);
          }
          for (int k = 0; k < k_slots; ++k) CK(cudaStreamSynchronize(slots[std::size_t(k)].s));
        } else {
          std::vector<std::thread> th;
          for (int k = 0; k < k_slots; ++k)
            th.emplace_back([&, k] {
              for (std::size_t b = std::size_t(k); b < nb; b += std::size_t(k_slots)) {
                issue(k, b);
                CK(cudaStreamSynchronize(slots[std::size_t(k)].s));
              }
            });
          for (auto& t : th) t.join();
        }
        const double wall = ms(t0, Clock::now());
        if (warm) return;
        double ic = 0;
        for (double x : in_call) ic += x;
        walls.push_back(wall);
        calls.push_back(ic);
      };
      auto print = [&](int k_slots, bool threads_per_slot) {
        const double best = *std::min_element(walls.begin(), walls.end());
        const double med = median3(walls);
        std::printf("decode %-4s%s batch %2d, %d in flight, %s: min %7.1f / median %7.1f ms for "
                    "%4zu images (%6.0f MP) = %6.0f / %6.0f MP/s; host ms in DecodeBatched "
                    "(median) %6.1f; init+prealloc %.1f ms (untimed)\n",
                    fmt == NVJPEG_OUTPUT_YUV ? "YUV" : "RGBI", cfg.prealloc ? "" : " (no prealloc)",
                    batch, k_slots, threads_per_slot ? "a thread each" : "one issuer   ", best, med,
                    list.size(), mp, mp / best * 1e3, mp / med * 1e3, median3(calls), init_ms);
        walls.clear();
        calls.clear();
      };
      for (int k : {1, 2, 4}) {
        if (std::size_t(2 * k) > nb) continue;  // too few batches for K in flight to show
        for (bool thr : {false, true}) {
          if (k == 1 && thr) continue;
          run_one(k, thr, true);  // same slots, same batches, same order as the timed run
          for (int rep = 0; rep < 3; ++rep) run_one(k, thr, false);
          print(k, thr);
        }
      }
    }
  }
  const auto a = Clock::now();
  for (auto& sl : slots) nvjpegJpegStateDestroy(sl.st);
  std::printf("teardown: %d decode states that decoded (the last configuration) %.1f ms\n", kMaxK,
              ms(a, Clock::now()));
  for (auto& sl : slots) {
    for (auto p : sl.out) cudaFree(p);
    cudaStreamDestroy(sl.s);
    cudaEventDestroy(sl.ev);
  }
}

/// Every hardware-decodable file decoded once to YUV planes and to RGBI, kept on the device.
struct Decoded {
  const Jpg* j = nullptr;
  unsigned char* yuv = nullptr;
  unsigned char* rgb = nullptr;
};
std::vector<Decoded> decode_all(Handles& H, const std::vector<Jpg>& files) {
  std::vector<Decoded> out;
  nvjpegJpegState_t st;
  CK(nvjpegJpegStateCreate(H.hw, &st));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  for (nvjpegOutputFormat_t fmt : {NVJPEG_OUTPUT_YUV, NVJPEG_OUTPUT_RGBI}) {
    CK(nvjpegDecodeBatchedInitialize(H.hw, st, 1, 1, fmt));
    std::size_t k = 0;
    for (const auto& j : files) {
      if (!j.hw) continue;
      if (fmt == NVJPEG_OUTPUT_YUV) {
        out.push_back({&j, nullptr, nullptr});
        CK(cudaMalloc(&out.back().yuv, j.yuv_bytes()));
        CK(cudaMalloc(&out.back().rgb, std::size_t(j.w) * j.h * 3));
      }
      Decoded& d = out[k++];
      nvjpegImage_t o;
      fill_dest(j, fmt == NVJPEG_OUTPUT_YUV ? d.yuv : d.rgb, fmt, &o);
      const unsigned char* data = j.bytes.data();
      const std::size_t len = j.bytes.size();
      CK(nvjpegDecodeBatched(H.hw, st, &data, &len, &o, s));
      CK(cudaStreamSynchronize(s));
    }
  }
  nvjpegJpegStateDestroy(st);
  cudaStreamDestroy(s);
  return out;
}

// ---- encode ----
void encode_section(Handles& H, const std::vector<Decoded>& dec, int copies) {
  std::vector<const Decoded*> list;
  double mp = 0;
  for (int k = 0; k < copies; ++k)
    for (const auto& d : dec) {
      list.push_back(&d);
      mp += d.j->mp();
    }
  if (list.empty()) return;
  for (bool from_yuv : {true, false}) {
    for (int streams : {1, 2, 4}) {
      for (int group : {1, 4, 8}) {
        // one-time: states, params, host buffers
        struct Lane {
          cudaStream_t s;
          nvjpegEncoderParams_t p;
          nvjpegEncoderParams_t pc[8] = {};  // one per nvjpegChromaSubsampling_t 0..7
          std::vector<nvjpegEncoderState_t> es;
          std::vector<unsigned char> host;
        };
        std::vector<Lane> lanes(static_cast<std::size_t>(streams));
        for (auto& ln : lanes) {
          CK(cudaStreamCreateWithFlags(&ln.s, cudaStreamNonBlocking));
          CK(nvjpegEncoderParamsCreate(H.hw, &ln.p, ln.s));
          CK(nvjpegEncoderParamsSetQuality(ln.p, 95, ln.s));
          CK(nvjpegEncoderParamsSetSamplingFactors(ln.p, NVJPEG_CSS_420, ln.s));
          for (const auto& d : dec) {
            nvjpegEncoderParams_t& q = ln.pc[int(d.j->css)];
            if (q) continue;
            CK(nvjpegEncoderParamsCreate(H.hw, &q, ln.s));
            CK(nvjpegEncoderParamsSetQuality(q, 95, ln.s));
            CK(nvjpegEncoderParamsSetSamplingFactors(q, d.j->css, ln.s));
          }
          ln.es.resize(std::size_t(group));
          for (auto& e : ln.es) CK(nvjpegEncoderStateCreate(H.hw, &e, ln.s));
          ln.host.resize(std::size_t(64) << 20);
        }
        std::atomic<std::size_t> next{0}, bytes{0};
        auto lane_run = [&](Lane& ln) {
          for (;;) {
            const std::size_t b = next.fetch_add(std::size_t(group));
            if (b >= list.size()) break;
            const std::size_t e = std::min(list.size(), b + std::size_t(group));
            for (std::size_t i = b; i < e; ++i) {
              const Decoded& d = *list[i];
              nvjpegImage_t src;
              nvjpegEncoderState_t es = ln.es[i - b];
              if (from_yuv) {
                fill_dest(*d.j, d.yuv, NVJPEG_OUTPUT_YUV, &src);
                CK(nvjpegEncodeYUV(H.hw, es, ln.pc[int(d.j->css)], &src, d.j->css, d.j->w, d.j->h,
                                   ln.s));
              } else {
                fill_dest(*d.j, d.rgb, NVJPEG_OUTPUT_RGBI, &src);
                CK(nvjpegEncodeImage(H.hw, es, ln.p, &src, NVJPEG_INPUT_RGBI, d.j->w, d.j->h,
                                     ln.s));
              }
            }
            CK(cudaStreamSynchronize(ln.s));
            for (std::size_t i = b; i < e; ++i) {
              std::size_t len = 0;
              CK(nvjpegEncodeRetrieveBitstream(H.hw, ln.es[i - b], nullptr, &len, ln.s));
              if (len > ln.host.size()) ln.host.resize(len);
              CK(nvjpegEncodeRetrieveBitstream(H.hw, ln.es[i - b], ln.host.data(), &len, ln.s));
              bytes += len;
            }
            CK(cudaStreamSynchronize(ln.s));
          }
        };
        for (int pass = 0; pass < 2; ++pass) {  // pass 0 warms the states up, untimed
          next = 0;
          bytes = 0;
          const auto t0 = Clock::now();
          std::vector<std::thread> th;
          for (auto& ln : lanes) th.emplace_back([&] { lane_run(ln); });
          for (auto& t : th) t.join();
          const double wall = ms(t0, Clock::now());
          if (pass == 1)
            std::printf("encode q95 from %-4s: %d stream(s) x %d states: %7.1f ms for %zu images "
                        "(%.0f MP) = %6.0f MP/s, %.1f MB out\n",
                        from_yuv ? "YUV" : "RGBI", streams, group, wall, list.size(), mp,
                        mp / wall * 1e3, double(bytes.load()) / 1e6);
        }
        for (auto& ln : lanes) {
          for (auto e : ln.es) nvjpegEncoderStateDestroy(e);
          nvjpegEncoderParamsDestroy(ln.p);
          for (auto q : ln.pc)
            if (q) nvjpegEncoderParamsDestroy(q);
          cudaStreamDestroy(ln.s);
        }
      }
    }
  }
  // input sizes beside the output sizes: the same pixels as the input files
  std::size_t in_bytes = 0;
  for (const Decoded* d : list) in_bytes += d->j->bytes.size();
  std::printf("encode: the input files of these images hold %.1f MB\n", double(in_bytes) / 1e6);
}

// ---- chain ----
void chain_section(Handles& H, const std::vector<Jpg>& files, int copies) {
  std::size_t max_bytes = 0;
  for (const auto& j : files)
    if (j.hw) max_bytes = std::max(max_bytes, j.yuv_bytes());
  if (max_bytes == 0) return;
  int max_w = 0, max_h = 0;
  for (const auto& j : files)
    if (j.hw) {
      max_w = std::max(max_w, j.w);
      max_h = std::max(max_h, j.h);
    }
  for (int batch : {8, 16, 32}) {
    if (H.quick && batch != 16) continue;
    double mp = 0;
    const std::vector<const Jpg*> list = work_list(files, copies, batch, &mp);
    const std::size_t nb = list.size() / std::size_t(batch);
    for (int k_slots : {1, 2, 3, 4}) {
      if (H.quick && k_slots != 3) continue;
      if (std::size_t(2 * k_slots) > nb) continue;  // too few batches for K slots to show
      struct ChainSlot {
        nvjpegJpegState_t st;
        cudaStream_t s;
        nvjpegEncoderParams_t p;
        nvjpegEncoderParams_t pc[8] = {};
        cudaEvent_t ev[4] = {};
        std::vector<nvjpegEncoderState_t> es;
        std::vector<unsigned char*> out;
        unsigned* hist;
        unsigned char* lut;
        std::vector<unsigned char> host;
      };
      std::vector<ChainSlot> cs(static_cast<std::size_t>(k_slots));
      for (auto& c : cs) {  // one-time, untimed
        CK(nvjpegJpegStateCreate(H.hw, &c.st));
        CK(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
        CK(nvjpegDecodeBatchedInitialize(H.hw, c.st, batch, 1, NVJPEG_OUTPUT_YUV));
        CK(nvjpegEncoderParamsCreate(H.hw, &c.p, c.s));
        CK(nvjpegEncoderParamsSetQuality(c.p, 95, c.s));
        for (const Jpg* j : list) {
          nvjpegEncoderParams_t& q = c.pc[int(j->css)];
          if (q) continue;
          CK(nvjpegEncoderParamsCreate(H.hw, &q, c.s));
          CK(nvjpegEncoderParamsSetQuality(q, 95, c.s));
          CK(nvjpegEncoderParamsSetSamplingFactors(q, j->css, c.s));
        }
        for (auto& e : c.ev) CK(cudaEventCreate(&e));
        CK(nvjpegDecodeBatchedPreAllocate(H.hw, c.st, batch, max_w, max_h, NVJPEG_CSS_444,
                                          NVJPEG_OUTPUT_YUV));
        c.es.resize(std::size_t(batch));
        for (auto& e : c.es) CK(nvjpegEncoderStateCreate(H.hw, &e, c.s));
        c.out.resize(std::size_t(batch));
        for (auto& p : c.out) CK(cudaMalloc(&p, max_bytes));
        CK(cudaMalloc(&c.hist, 256 * sizeof(unsigned)));
        CK(cudaMemset(c.hist, 0, 256 * sizeof(unsigned)));
        CK(cudaMalloc(&c.lut, 256));
        c.host.resize(std::size_t(64) << 20);
      }
      std::atomic<std::size_t> bytes{0};
      double dec_ms_sum = 0, eq_ms_sum = 0, enc_ms_sum = 0;
      const std::size_t nk = static_cast<std::size_t>(k_slots);
      std::vector<double> dsum(nk), qsum(nk), esum(nk), gdec(nk), geq(nk), genc(nk);
      auto slot_run = [&](int k, std::size_t b0, std::size_t step, bool warm) {
        ChainSlot& c = cs[std::size_t(k)];
        for (std::size_t b = b0; b < nb; b += step) {
          const std::size_t nbatch = std::size_t(batch);
          std::vector<const unsigned char*> d(nbatch);
          std::vector<std::size_t> l(nbatch);
          std::vector<nvjpegImage_t> o(nbatch);
          for (int i = 0; i < batch; ++i) {
            const Jpg& j = *list[b * std::size_t(batch) + std::size_t(i)];
            d[std::size_t(i)] = j.bytes.data();
            l[std::size_t(i)] = j.bytes.size();
            fill_dest(j, c.out[std::size_t(i)], NVJPEG_OUTPUT_YUV, &o[std::size_t(i)]);
          }
          auto a = Clock::now();
          CK(cudaEventRecord(c.ev[0], c.s));
          CK(nvjpegDecodeBatched(H.hw, c.st, d.data(), l.data(), o.data(), c.s));
          CK(cudaEventRecord(c.ev[1], c.s));
          auto q = Clock::now();
          for (int i = 0; i < batch; ++i) {
            const Jpg& j = *list[b * std::size_t(batch) + std::size_t(i)];
            const std::size_t n = std::size_t(j.w) * j.h;
            hist256<<<132, 256, 0, c.s>>>(c.out[std::size_t(i)], n, c.hist);
            make_lut<<<1, 32, 0, c.s>>>(c.hist, n, c.lut);
            apply_lut<<<264, 256, 0, c.s>>>(c.out[std::size_t(i)], n, c.lut);
          }
          CK(cudaEventRecord(c.ev[2], c.s));
          auto e = Clock::now();
          for (int i = 0; i < batch; ++i) {
            const Jpg& j = *list[b * std::size_t(batch) + std::size_t(i)];
            CK(nvjpegEncodeYUV(H.hw, c.es[std::size_t(i)], c.pc[int(j.css)], &o[std::size_t(i)],
                               j.css, j.w, j.h, c.s));
          }
          CK(cudaEventRecord(c.ev[3], c.s));
          CK(cudaStreamSynchronize(c.s));
          float dev_dec = 0, dev_eq = 0, dev_enc = 0;
          CK(cudaEventElapsedTime(&dev_dec, c.ev[0], c.ev[1]));
          CK(cudaEventElapsedTime(&dev_eq, c.ev[1], c.ev[2]));
          CK(cudaEventElapsedTime(&dev_enc, c.ev[2], c.ev[3]));
          for (int i = 0; i < batch; ++i) {
            std::size_t len = 0;
            CK(nvjpegEncodeRetrieveBitstream(H.hw, c.es[std::size_t(i)], nullptr, &len, c.s));
            if (len > c.host.size()) c.host.resize(len);
            CK(nvjpegEncodeRetrieveBitstream(H.hw, c.es[std::size_t(i)], c.host.data(), &len,
                                             c.s));
            bytes += len;
          }
          CK(cudaStreamSynchronize(c.s));
          if (!warm) {
            gdec[std::size_t(k)] += dev_dec;
            geq[std::size_t(k)] += dev_eq;
            genc[std::size_t(k)] += dev_enc;
            dsum[std::size_t(k)] += ms(a, q);
            qsum[std::size_t(k)] += ms(q, e);
            esum[std::size_t(k)] += ms(e, Clock::now());
          }
        }
      };
      {  // warm-up: the identical run, untimed (every state sees the images it will see)
        std::vector<std::thread> wt;
        for (int k = 0; k < k_slots; ++k)
          wt.emplace_back([&, k] { slot_run(k, std::size_t(k), std::size_t(k_slots), true); });
        for (auto& t : wt) t.join();
      }
      bytes = 0;
      const auto t0 = Clock::now();
      std::vector<std::thread> th;
      for (int k = 0; k < k_slots; ++k)
        th.emplace_back([&, k] { slot_run(k, std::size_t(k), std::size_t(k_slots), false); });
      for (auto& t : th) t.join();
      const double wall = ms(t0, Clock::now());
      double gd = 0, gq = 0, ge = 0;
      for (int k = 0; k < k_slots; ++k) {
        dec_ms_sum += dsum[std::size_t(k)];
        eq_ms_sum += qsum[std::size_t(k)];
        enc_ms_sum += esum[std::size_t(k)];
        gd += gdec[std::size_t(k)];
        gq += geq[std::size_t(k)];
        ge += genc[std::size_t(k)];
      }
      std::printf("chain batch %2d, %d slot(s): %7.1f ms for %4zu images (%6.0f MP) = %6.0f MP/s, "
                  "%.1f MB out; host ms summed over slots: issuing DecodeBatched %.1f, issuing the "
                  "equalization %.1f, encode issue + sync + retrieve %.1f; device ms (events) "
                  "summed over slots: decode %.1f, equalize %.1f, encode %.1f\n",
                  batch, k_slots, wall, list.size(), mp, mp / wall * 1e3,
                  double(bytes.load()) / 1e6, dec_ms_sum, eq_ms_sum, enc_ms_sum, gd, gq, ge);
      const auto td = Clock::now();
      for (auto& c : cs) {
        for (auto e : c.es) nvjpegEncoderStateDestroy(e);
        nvjpegJpegStateDestroy(c.st);
      }
      std::printf("teardown: %d decode states and %d encoder states that worked: %.1f ms\n",
                  k_slots, k_slots * batch, ms(td, Clock::now()));
      for (auto& c : cs) {
        for (auto q : c.pc)
          if (q) nvjpegEncoderParamsDestroy(q);
        for (auto p : c.out) cudaFree(p);
        nvjpegEncoderParamsDestroy(c.p);
        cudaFree(c.hist);
        cudaFree(c.lut);
        cudaStreamDestroy(c.s);
      }
    }
  }
}

std::vector<Jpg> load(const std::vector<std::string>& dirs) {
  std::vector<Jpg> files;
  for (const std::string& dirname : dirs) {
    DIR* dir = opendir(dirname.c_str());
    if (!dir) {
      std::fprintf(stderr, "cannot open %s\n", dirname.c_str());
      std::exit(2);
    }
    while (dirent* e = readdir(dir)) {
      std::string n = e->d_name;
      std::string low = n;
      for (char& c : low) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (low.size() < 5 || (low.substr(low.size() - 4) != ".jpg" &&
                             (low.size() < 6 || low.substr(low.size() - 5) != ".jpeg")))
        continue;
      Jpg j;
      j.name = n;
      std::ifstream f(dirname + "/" + n, std::ios::binary);
      j.bytes.assign(std::istreambuf_iterator<char>(f), {});
      files.push_back(std::move(j));
    }
    closedir(dir);
  }
  std::sort(files.begin(), files.end(), [](auto& a, auto& b) { return a.name < b.name; });
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--exit")
    return exit_probe(argc > 2 ? argv[2] : "_exit", argc > 3 ? argv[3] : "");
  int copies = 16;
  Handles H;
  std::set<std::string> sections{"startup", "support", "decode", "encode", "chain"};
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--copies" && i + 1 < argc) {
      copies = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--flags" && i + 1 < argc) {
      H.flags = unsigned(std::strtoul(argv[++i], nullptr, 0));
    } else if (a == "--quick") {
      H.quick = true;
    } else if (a == "--sections" && i + 1 < argc) {
      sections.clear();
      std::stringstream ss(argv[++i]);
      for (std::string s; std::getline(ss, s, ',');) sections.insert(s);
    } else {
      dirs.push_back(a);
    }
  }
  if (dirs.empty()) {
    std::fprintf(stderr, "usage: %s [--copies N] [--sections LIST] DIR...\n", argv[0]);
    return 2;
  }
  std::vector<Jpg> files = load(dirs);
  if (sections.count("startup")) {
    startup(H);
  } else {
    CK(cudaFree(nullptr));
    CK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, H.flags, &H.hw));
  }
  {
    int ver[3] = {};
    nvjpegGetProperty(MAJOR_VERSION, &ver[0]);
    nvjpegGetProperty(MINOR_VERSION, &ver[1]);
    nvjpegGetProperty(PATCH_LEVEL, &ver[2]);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("nvJPEG %d.%d.%d on %s; %zu files, copies %d, hardware handle flags 0x%x\n",
                ver[0], ver[1], ver[2], prop.name, files.size(), copies, H.flags);
  }
  {
    unsigned engines = 0, cores = 0;
    if (nvjpegGetHardwareDecoderInfo(H.hw, &engines, &cores) == NVJPEG_STATUS_SUCCESS)
      std::printf("hardware decoder: %u engines x %u cores\n", engines, cores);
  }
  support(H, files);  // always: the other sections need the shapes
  if (sections.count("startup")) first_use(H, files);
  if (sections.count("decode")) decode_section(H, files, copies);
  if (sections.count("encode") || sections.count("chain")) {
    if (sections.count("encode")) {
      const std::vector<Decoded> dec = decode_all(H, files);
      encode_section(H, dec, copies);
      for (const auto& d : dec) {
        cudaFree(d.yuv);
        cudaFree(d.rgb);
      }
    }
    if (sections.count("chain")) chain_section(H, files, copies);
  }
  std::fflush(stdout);
  std::_Exit(0);  // no teardown timed here: the startup section times it apart
}
