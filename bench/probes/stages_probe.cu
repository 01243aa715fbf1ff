// stages_probe.cu — photo-sized u8 inputs (1M–64M): where the time of one histogram launch and of
// the fused equalizer goes, timed the way `histeq bench` times (launches enqueued back to back,
// each between its own pair of CUDA events, median of the reps). Stages are timed by
// difference: the fused kernel stopped after each stage (fused.cuh, kStop).
//   nvcc -O3 -std=c++17 -arch=sm_90 -I kernels -I core bench/probes/stages_probe.cu -o probe
// Standalone like columns_probe.cu; checks the columns and fused outputs once per size.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "columns.cuh"
#include "fused.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::printf("CUDA %s at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1);} } while (0)
using namespace histeq;
using namespace histeq::kernels;

__global__ void empty_kernel() {}
__global__ void __launch_bounds__(1024, 2) empty_coop(int) { volatile __shared__ int x[8192]; if (threadIdx.x == 9999) x[0] = 1; }
__global__ void gen(std::uint8_t* d, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u; x ^= x >> 15; x *= 2246822519u; x ^= x >> 13; d[i] = (x & 0xFF) / 2 + 40; }
}
template <int U>
__global__ void __launch_bounds__(1024, 2) read_bw(const uint4* __restrict__ d, std::size_t nvec, unsigned* sink) {
  unsigned acc = 0; const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  for (; i + (U - 1) * stride < nvec; i += U * stride) {
    uint4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) r[u] = __ldg(d + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= r[u].x ^ r[u].y ^ r[u].z ^ r[u].w;
  }
  for (; i < nvec; i += stride) { uint4 r = __ldg(d + i); acc ^= r.x ^ r.y ^ r.z ^ r.w; }
  if (acc == 0x12345678u) *sink = acc;
}

static int g_sms;
static std::uint8_t* g_flush;
static const std::size_t kFlush = 256ull << 20;
static cudaStream_t g_s;

// As histeq bench: warm-up, then reps enqueued back to back, each between two events.
static float time_it(int reps, bool cold, const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<cudaEvent_t> a(reps), b(reps);
  for (int r = 0; r < reps; ++r) { CK(cudaEventCreate(&a[r])); CK(cudaEventCreate(&b[r])); }
  for (int r = 0; r < reps; ++r) {
    if (cold) CK(cudaMemsetAsync(g_flush, r, kFlush, g_s));
    CK(cudaEventRecord(a[r], g_s)); f(); CK(cudaEventRecord(b[r], g_s));
  }
  CK(cudaStreamSynchronize(g_s)); CK(cudaGetLastError());
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) { float ms; CK(cudaEventElapsedTime(&ms, a[r], b[r])); t.push_back(ms * 1000.f);
    cudaEventDestroy(a[r]); cudaEventDestroy(b[r]); }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}

template <int B, int U, int M>
static int columns_grid(std::size_t n) {
  auto k = columns::histogram_kernel<std::uint8_t, B, U, M, false>;
  int per = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, B, 0));
  std::size_t need = (n + std::size_t(B) * U * 16 - 1) / (std::size_t(B) * U * 16);
  return (int)std::max<std::size_t>(1, std::min<std::size_t>(need, std::size_t(per) * g_sms));
}
template <int B, int U, int M>
static void columns_run(const std::uint8_t* d, std::size_t n, unsigned long long* h, columns::GridState* st, bool memset) {
  if (memset) CK(cudaMemsetAsync(h, 0, 2048, g_s));
  columns::histogram_kernel<std::uint8_t, B, U, M, false><<<columns_grid<B, U, M>(n), B, 0, g_s>>>(d, n, 256, h, st);
}

template <int kStop>
struct Fused {
  static constexpr auto k = fused::equalize_kernel<1024, 2, 2, false, kStop>;
  static int grid(std::size_t n) {
    int per = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, 1024, 0));
    std::size_t need = (n + 1024 * 2 * 16 - 1) / (1024 * 2 * 16);
    return (int)std::max<std::size_t>(1, std::min<std::size_t>(need, std::size_t(per) * g_sms));
  }
  static void run(const std::uint8_t* in, std::uint8_t* out, std::size_t n, unsigned long long* h, int& flip) {
    unsigned long long* cur = h + 256 * flip; unsigned long long* nxt = h + 256 * (1 - flip); flip ^= 1;
    Formula f = Formula::opencv; std::uint8_t* lo = nullptr;
    void* args[] = {(void*)&in, (void*)&out, (void*)&n, (void*)&f, (void*)&cur, (void*)&nxt, (void*)&lo};
    CK(cudaLaunchCooperativeKernel((void*)k, grid(n), 1024, args, 0, g_s));
  }
};

int main() {
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0)); g_sms = p.multiProcessorCount;
  CK(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
  CK(cudaMalloc(&g_flush, kFlush));
  const std::size_t maxn = 64ull << 20;
  std::uint8_t *d, *o; unsigned long long *h, *hf; unsigned* sink; columns::GridState* st;
  CK(cudaMalloc(&d, maxn)); CK(cudaMalloc(&o, maxn)); CK(cudaMalloc(&h, 2048)); CK(cudaMalloc(&hf, 4096));
  CK(cudaMalloc(&sink, 4)); CK(cudaMalloc(&st, sizeof *st)); CK(cudaMemset(st, 0, sizeof *st)); CK(cudaMemset(hf, 0, 4096));
  gen<<<g_sms * 8, 512>>>(d, maxn); CK(cudaDeviceSynchronize());
  std::vector<std::uint8_t> host(maxn); CK(cudaMemcpy(host.data(), d, maxn, cudaMemcpyDeviceToHost));
  std::printf("# stages_probe on %s, %d SMs\n", p.name, g_sms);
  {
    float t1 = time_it(50, false, [&] { empty_kernel<<<1, 32, 0, g_s>>>(); });
    float t2 = time_it(50, false, [&] { empty_kernel<<<2 * g_sms, 1024, 0, g_s>>>(); });
    int arg = 0; void* args[] = {&arg};
    float t3 = time_it(50, false, [&] { CK(cudaLaunchKernel((void*)empty_coop, 2 * g_sms, 1024, args, 0, g_s)); });
    float t4 = time_it(50, false, [&] { CK(cudaLaunchCooperativeKernel((void*)empty_coop, 2 * g_sms, 1024, args, 0, g_s)); });
    float t5 = time_it(50, false, [&] { CK(cudaMemsetAsync(h, 0, 2048, g_s)); });
    std::printf("empty 1x32 %.2f us | empty %dx1024 %.2f | same + 32 KB smem %.2f | cooperative %.2f | memset 2 KB %.2f\n",
                t1, 2 * g_sms, t2, t3, t4, t5);
  }
  for (std::size_t n : {std::size_t(1) << 20, std::size_t(4) << 20, std::size_t(16) << 20, std::size_t(64) << 20}) {
    std::vector<unsigned long long> ref(256, 0); for (std::size_t i = 0; i < n; ++i) ref[host[i]]++;
    for (int cold = 0; cold < 2; ++cold) {
      const int reps = 50;
      std::printf("\n== n=%zuM %s L2 ==\n", n >> 20, cold ? "cold" : "hot");
      float t = time_it(reps, cold, [&] { read_bw<4><<<2 * g_sms, 1024, 0, g_s>>>((const uint4*)d, n / 16, sink); });
      std::printf("  read 16B u4 %dx1024                 %8.2f us %7.0f GB/s\n", 2 * g_sms, t, n / (t * 1e3));
#define COL(B, U, M, MS) t = time_it(reps, cold, [&] { columns_run<B, U, M>(d, n, h, st, MS); }); \
      std::printf("  columns b%d u%d m%d grid %4d %s %8.2f us %7.0f GB/s\n", B, U, M, columns_grid<B, U, M>(n), \
                  MS ? "+memset" : "ticket ", t, n / (t * 1e3));
      COL(1024, 2, 2, true) COL(1024, 2, 2, false) COL(512, 2, 4, false) COL(512, 4, 4, false) COL(1024, 4, 2, false) COL(256, 4, 8, false)
      if (!cold) {
        std::vector<unsigned long long> got(256);
        columns_run<1024, 2, 2>(d, n, h, st, false); CK(cudaStreamSynchronize(g_s));
        CK(cudaMemcpy(got.data(), h, 2048, cudaMemcpyDeviceToHost));
        std::printf("  columns check: %s\n", got == ref ? "PASS" : "FAIL");
      }
      int flip = 0;
#define FU(S, what) t = time_it(reps, cold, [&] { Fused<S>::run(d, o, n, hf, flip); }); \
      std::printf("  fused grid %4d stop=%d %-28s %8.2f us\n", Fused<S>::grid(n), S, what, t);
      FU(1, "count") FU(2, "count+merge") FU(3, "+grid barrier") FU(4, "+LUT") FU(0, "+apply (whole)") FU(5, "whole without barrier")
      if (!cold) {
        CK(cudaMemset(hf, 0, 4096)); flip = 0; Fused<0>::run(d, o, n, hf, flip); CK(cudaStreamSynchronize(g_s));
        std::vector<std::uint8_t> out(n); CK(cudaMemcpy(out.data(), o, n, cudaMemcpyDeviceToHost));
        int v0 = 0; while (ref[v0] == 0) ++v0;
        float sc = formula::opencv_scale(n, ref[v0]); std::uint8_t L[256]; unsigned long long c = 0;
        for (int v = 0; v < 256; ++v) { c += ref[v]; L[v] = v <= v0 ? 0 : formula::lut_entry(Formula::opencv, c, ref[v0], n, sc); }
        std::size_t bad = 0; for (std::size_t i = 0; i < n; ++i) bad += out[i] != L[host[i]];
        std::printf("  fused check: %s (%zu wrong)\n", bad ? "FAIL" : "PASS", bad);
      }
    }
  }
}
