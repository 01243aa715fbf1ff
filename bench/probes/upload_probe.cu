// upload_probe.cu — what the JPEG device route's uploads of CPU-decoded data cost: the
// coefficients of a progressive file (2 bytes per coefficient, 1.5 coefficients per pixel in
// 4:2:0) and the planes of a file a CPU worker decoded (1.5 bytes per pixel), copied from host
// memory to the device as the route copies them (cudaMemcpyAsync of contiguous coefficients;
// cudaMemcpy2DAsync of planes whose rows are padded), from pageable memory (std::vector, as the
// route does) and from pinned memory (cudaMallocHost), on 1..N host threads at once, each
// with its own stream (the route's slots run in parallel).
//
// Timed apart: one-time work (the context, the buffers, cudaMallocHost, cudaHostRegister of a
// pageable buffer) and the copies. A pass starts when every thread is at the start barrier; each
// thread copies its buffer --copies times (synchronizing its stream once at the end) and the pass
// ends when the last thread's stream is done. Printed per source, size and thread count: the best
// pass's GB/s over all threads, and the host time a thread spends inside the copy calls (a
// pageable copy returns only once its bytes are staged, so the thread that issues it is busy).
//
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/upload_probe.cu -o /tmp/upload_probe
//   /tmp/upload_probe [--threads 1,2,4] [--copies 16] [--reps 3] [--mp 6,24]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(std::atoi(item.c_str()));
  return v;
}

enum class Source { pageable, pinned, registered };
const char* name_of(Source s) {
  return s == Source::pageable ? "pageable" : s == Source::pinned ? "pinned" : "registered";
}

/// One thread's buffers: a host source of `bytes`, a device destination, a stream.
struct Lane {
  std::vector<unsigned char> pageable;
  unsigned char* host = nullptr;  // the source the copies read
  unsigned char* dev = nullptr;
  cudaStream_t stream = nullptr;
  Source source = Source::pageable;
  double copy_call_ms = 0;  // host time inside the copy calls, last pass
};

struct Shape {
  bool planes;          // true: three planes by cudaMemcpy2DAsync; false: one contiguous copy
  std::size_t bytes;    // what is copied
  int width, height;    // Y plane (planes) — the chroma planes are half in each direction
  std::size_t stride;   // host row stride of the Y plane (rows padded to a multiple of 16)
};

Shape shape_of(bool planes, int mp) {
  Shape s{};
  s.planes = planes;
  s.width = int(std::lround(std::sqrt(mp * 1e6 * 16.0 / 9.0)));
  s.height = int(std::lround(mp * 1e6 / s.width));
  s.stride = std::size_t((s.width + 15) / 16 * 16);
  const std::size_t px = std::size_t(s.width) * std::size_t(s.height);
  s.bytes = planes ? px + px / 2 : px * 3;  // planes: 1.5 B/px; coefficients: 1.5 coefs x 2 B
  return s;
}

/// The host bytes a shape's source needs (padded rows for planes).
std::size_t host_bytes(const Shape& s) {
  if (!s.planes) return s.bytes;
  const std::size_t cw = s.stride / 2;
  return s.stride * std::size_t(s.height + 16) + 2 * cw * std::size_t(s.height / 2 + 8);
}

void copy_once(Lane& l, const Shape& s) {
  if (!s.planes) {
    check(cudaMemcpyAsync(l.dev, l.host, s.bytes, cudaMemcpyHostToDevice, l.stream), "copy");
    return;
  }
  const unsigned char* src = l.host;
  unsigned char* dst = l.dev;
  check(cudaMemcpy2DAsync(dst, std::size_t(s.width), src, s.stride, std::size_t(s.width),
                          std::size_t(s.height), cudaMemcpyHostToDevice, l.stream),
        "copy2d");
  src += s.stride * std::size_t(s.height + 16);
  dst += std::size_t(s.width) * std::size_t(s.height);
  const std::size_t cw = s.stride / 2;
  for (int c = 0; c < 2; ++c) {
    check(cudaMemcpy2DAsync(dst, std::size_t(s.width / 2), src, cw, std::size_t(s.width / 2),
                            std::size_t(s.height / 2), cudaMemcpyHostToDevice, l.stream),
          "copy2d chroma");
    src += cw * std::size_t(s.height / 2 + 8);
    dst += std::size_t(s.width / 2) * std::size_t(s.height / 2);
  }
}

/// Runs `reps` passes of `threads` threads copying `copies` times each; the best pass's ms.
double run_passes(std::vector<Lane>& all, int n, const Shape& s, int copies, int reps) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    std::mutex m;
    std::condition_variable cv;
    int ready = 0;
    bool go = false;
    std::vector<std::thread> ts;
    for (int k = 0; k < n; ++k) {
      Lane& l = all[std::size_t(k)];
      ts.emplace_back([&, lp = &l] {
        {
          std::unique_lock<std::mutex> lk(m);
          ++ready;
          cv.notify_all();
          cv.wait(lk, [&] { return go; });
        }
        double in_calls = 0;
        for (int c = 0; c < copies; ++c) {
          const auto t0 = Clock::now();
          copy_once(*lp, s);
          in_calls += ms_since(t0);
        }
        check(cudaStreamSynchronize(lp->stream), "sync");
        lp->copy_call_ms = in_calls;
      });
    }
    Clock::time_point t0;
    {
      std::unique_lock<std::mutex> lk(m);
      cv.wait(lk, [&] { return ready == n; });
      t0 = Clock::now();
      go = true;
      cv.notify_all();
    }
    for (std::thread& t : ts) t.join();
    best = std::min(best, ms_since(t0));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2, 4}, mps = {6, 24};
  int copies = 16, reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads") threads = parse_list(argv[i + 1]);
    else if (a == "--mp") mps = parse_list(argv[i + 1]);
    else if (a == "--copies") copies = std::atoi(argv[i + 1]);
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  auto t0 = Clock::now();
  check(cudaFree(nullptr), "context");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("# upload_probe on %s; context %.1f ms (one-time)\n", prop.name, ms_since(t0));
  std::printf("| copy | MP | source | threads | GB/s (all threads) | host ms in copy calls per "
              "copy | one-time setup per thread |\n|---|---:|---|---:|---:|---:|---|\n");
  const int max_threads = *std::max_element(threads.begin(), threads.end());
  for (int planes = 0; planes < 2; ++planes) {
    for (int mp : mps) {
      const Shape s = shape_of(planes != 0, mp);
      for (Source src : {Source::pageable, Source::pinned, Source::registered}) {
        std::vector<Lane> lanes{std::size_t(max_threads)};
        double setup_ms = 0;
        for (Lane& l : lanes) {
          l.source = src;
          check(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking), "stream");
          check(cudaMalloc(&l.dev, s.bytes), "device buffer");
          const std::size_t hb = host_bytes(s);
          const auto ts = Clock::now();
          if (src == Source::pinned) {
            check(cudaMallocHost(&l.host, hb), "cudaMallocHost");
            setup_ms += ms_since(ts);
          } else {
            l.pageable.assign(hb, 7);  // touched: its pages exist (the route decodes into them)
            l.host = l.pageable.data();
            if (src == Source::registered) {
              const auto tr = Clock::now();
              check(cudaHostRegister(l.host, hb, cudaHostRegisterDefault), "cudaHostRegister");
              setup_ms += ms_since(tr);
            }
          }
          if (src == Source::pinned) std::memset(l.host, 7, hb);
        }
        for (int n : threads) {
          run_passes(lanes, n, s, 2, 1);  // warm-up
          const double ms = run_passes(lanes, n, s, copies, reps);
          double calls = 0;
          for (int k = 0; k < n; ++k) calls += lanes[std::size_t(k)].copy_call_ms;
          const double gb = double(s.bytes) * copies * n / (ms * 1e6);
          std::printf("| %s | %d | %s | %d | %.1f | %.3f | %.1f ms |\n",
                      planes ? "planes (2-D, 1.5 B/px)" : "coefficients (3 B/px)", mp,
                      name_of(src), n, gb, calls / (copies * n), setup_ms / max_threads);
        }
        double teardown_ms = 0;
        for (Lane& l : lanes) {
          const auto ts = Clock::now();
          if (src == Source::pinned) check(cudaFreeHost(l.host), "cudaFreeHost");
          if (src == Source::registered) check(cudaHostUnregister(l.host), "cudaHostUnregister");
          teardown_ms += ms_since(ts);
          check(cudaFree(l.dev), "free");
          check(cudaStreamDestroy(l.stream), "stream destroy");
        }
        if (src != Source::pageable)
          std::printf("| | | %s teardown | | | | %.1f ms per thread |\n", name_of(src),
                      teardown_ms / max_threads);
      }
    }
  }
  return 0;
}
