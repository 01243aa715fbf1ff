// tail_probe.cu — u8, 256 bins, 64K–64M samples: what the columns kernel spends besides reading,
// timed as `histeq bench --timing gpu` times (the stream held by kernels/stream_hold while a batch
// of 32 reps is enqueued, each rep between its own two events, median of the reps), so that a
// launch costs the GPU's launch floor and not the host's launch rate (stages_probe.cu used
// back-to-back enqueue timing, whose 5.5 µs host floor hid everything below it).
// Variants of the merge that follows the count (M):
//   M0  the library kernel (columns::histogram_kernel) as it is: the M2 merge below; the
//       outputs tail-1.txt and tail-2.txt ran the earlier merge (one thread per value sums 32
//       columns, every thread fences, ticket, last block copies)
//   M1  for_each_value_sum (kBlock/256 threads per value) + every thread fencing
//   M2  M1 + one fence per block (finish_grid: bar.sync, thread 0 fences and takes the ticket)
//   M3  count only (no merge at all; wrong result: what counting costs)
//   M4  M1's sums + global adds, no ticket/copy (wrong result: what the finish costs)
//   M5  M2 with software-pipelined loads (count_block kPrefetch: next tile loaded before counting)
// The fused kOpt rows of bench/results/h200/probes/tail-2.txt came from variants of fused.cuh
// that lost and were removed.
// Also: the fused equalizer stopped after each stage (fused.cuh kStop), and "batch" figures —
// 32 launches between one pair of events, divided by 32 — what back-to-back frames see.
//   nvcc -O3 -std=c++17 -arch=sm_90 -I kernels -I core bench/probes/tail_probe.cu \
//        kernels/stream_hold.cu -o tail_probe
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "columns.cuh"
#include "fused.cuh"
#include "stream_hold.hpp"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::printf("CUDA %s at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1);} } while (0)

using namespace histeq;
using namespace histeq::kernels;

__global__ void empty_kernel() {}
__global__ void gen(std::uint8_t* d, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u; x ^= x >> 15; x *= 2246822519u; x ^= x >> 13; d[i] = (x & 0xFF) / 2 + 40; }
}
__global__ void __launch_bounds__(1024, 2) read_bw(const uint4* __restrict__ d, std::size_t nvec, unsigned* sink) {
  unsigned acc = 0; const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  for (; i + stride < nvec; i += 2 * stride) {
    uint4 a = __ldg(d + i), b = __ldg(d + i + stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
  }
  for (; i < nvec; i += stride) { uint4 r = __ldg(d + i); acc ^= r.x ^ r.y ^ r.z ^ r.w; }
  if (acc == 0x12345678u) *sink = acc;
}

// M1's finish: every thread fences before the ticket (the library's earlier finish_grid).
__device__ __forceinline__ void finish_grid_every_fence(columns::GridState* g, int bins, unsigned long long* hist) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicInc(&g->ticket, gridDim.x - 1) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) hist[b] = atomicExch(&g->acc[b], 0ull);
}

template <int B, int U, int M>
__global__ void __launch_bounds__(B, 2048 / B)
    variant(const std::uint8_t* __restrict__ in, std::size_t n, unsigned long long* __restrict__ hist,
            columns::GridState* __restrict__ g) {
  using namespace columns;
  __shared__ __align__(16) std::uint32_t cols[kSmemWords];
  zero_columns<B>(cols);
  __syncthreads();
  count_block<std::uint8_t, B, U, false, M == 5>(in, n, 256, cols, blockIdx.x, gridDim.x);
  __syncthreads();
  if (M == 3) { if (cols[threadIdx.x * 8] == 0xFFFFFFFFu) hist[0] = 1; return; }
  for_each_value_sum<B>(cols, [&](int v, std::uint32_t c) { if (c) add_to_grid(g, v, c); });
  if (M == 4) return;
  if (M == 1) finish_grid_every_fence(g, 256, hist); else finish_grid(g, 256, hist);
}

static int g_sms;
static std::uint8_t* g_flush;
static const std::size_t kFlush = 256ull << 20;
static cudaStream_t g_s;

// As histeq bench --timing gpu: batches of 32 reps enqueued behind a StreamHold.
static float time_it(int reps, bool cold, const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<cudaEvent_t> a(reps), b(reps);
  for (int r = 0; r < reps; ++r) { CK(cudaEventCreate(&a[r])); CK(cudaEventCreate(&b[r])); }
  for (int r0 = 0; r0 < reps; r0 += 32) {
    StreamHold hold(g_s);
    for (int r = r0; r < std::min(reps, r0 + 32); ++r) {
      if (cold) CK(cudaMemsetAsync(g_flush, r, kFlush, g_s));
      CK(cudaEventRecord(a[r], g_s)); f(); CK(cudaEventRecord(b[r], g_s));
    }
    hold.release(); CK(cudaStreamSynchronize(g_s));
  }
  CK(cudaGetLastError());
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) { float ms; CK(cudaEventElapsedTime(&ms, a[r], b[r])); t.push_back(ms * 1000.f);
    cudaEventDestroy(a[r]); cudaEventDestroy(b[r]); }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
// 32 launches between one pair of events (held), per launch; median of 9 batches.
static float time_batch(const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> t;
  for (int k = 0; k < 9; ++k) {
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    { StreamHold hold(g_s); CK(cudaEventRecord(a, g_s)); for (int r = 0; r < 32; ++r) f(); CK(cudaEventRecord(b, g_s));
      hold.release(); CK(cudaStreamSynchronize(g_s)); }
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms * 1000.f / 32); cudaEventDestroy(a); cudaEventDestroy(b);
  }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}

template <int B, int U, int M>
static int vgrid(std::size_t n) {
  int per = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, variant<B, U, M>, B, 0));
  std::size_t need = (n + std::size_t(B) * U * 16 - 1) / (std::size_t(B) * U * 16);
  return (int)std::max<std::size_t>(1, std::min<std::size_t>(need, std::size_t(per) * g_sms));
}
static int lib_grid(std::size_t n) {
  auto k = columns::histogram_kernel<std::uint8_t, 1024, 2, 2, false>;
  int per = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, 1024, 0));
  std::size_t need = (n + 1024 * 2 * 16 - 1) / (1024 * 2 * 16);
  return (int)std::max<std::size_t>(1, std::min<std::size_t>(need, std::size_t(per) * g_sms));
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

static bool fused_ok(const std::uint8_t* d, std::uint8_t* o, std::size_t n, unsigned long long* hf,
                     const std::vector<std::uint8_t>& host, const std::vector<unsigned long long>& ref) {
  // On the probe's stream: g_s does not wait for the legacy default stream (non-blocking).
  CK(cudaMemsetAsync(hf, 0, 4096, g_s)); CK(cudaMemsetAsync(o, 0, n, g_s)); int flip = 0; Fused<0>::run(d, o, n, hf, flip);
  CK(cudaStreamSynchronize(g_s));
  std::vector<std::uint8_t> out(n); CK(cudaMemcpy(out.data(), o, n, cudaMemcpyDeviceToHost));
  int v0 = 0; while (ref[v0] == 0) ++v0;
  float sc = formula::opencv_scale(n, ref[v0]); std::uint8_t L[256]; unsigned long long c = 0;
  for (int v = 0; v < 256; ++v) { c += ref[v]; L[v] = v <= v0 ? 0 : formula::lut_entry(Formula::opencv, c, ref[v0], n, sc); }
  std::size_t bad = 0; for (std::size_t i = 0; i < n; ++i) bad += out[i] != L[host[i]];
  CK(cudaMemsetAsync(hf, 0, 4096, g_s)); CK(cudaStreamSynchronize(g_s));
  if (bad) std::printf(" FAIL(%zu wrong)", bad);
  return bad == 0;
}

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
  std::printf("# tail_probe on %s, %d SMs (gpu timing: stream held, median)\n", p.name, g_sms);
  std::printf("empty 1x32: %.2f us per launch between events, %.2f us per launch in a batch of 32\n",
              time_it(64, false, [&] { empty_kernel<<<1, 32, 0, g_s>>>(); }),
              time_batch([&] { empty_kernel<<<1, 32, 0, g_s>>>(); }));
  for (std::size_t n : {std::size_t(64) << 10, std::size_t(256) << 10, std::size_t(1) << 20, std::size_t(4) << 20,
                        std::size_t(16) << 20, std::size_t(64) << 20}) {
    std::vector<unsigned long long> ref(256, 0); for (std::size_t i = 0; i < n; ++i) ref[host[i]]++;
    for (int cold = 0; cold < (n >= (16u << 20) ? 2 : 1); ++cold) {
      const int reps = 64;
      std::printf("\n== n=%zuK %s L2 ==\n", n >> 10, cold ? "cold" : "hot");
      float t = time_it(reps, cold, [&] { read_bw<<<2 * g_sms, 1024, 0, g_s>>>((const uint4*)d, n / 16, sink); });
      std::printf("  read (pure 16-byte loads, 264x1024)   %8.2f us %7.0f GB/s\n", t, n / (t * 1e3));
      t = time_it(reps, cold, [&] { columns::histogram_kernel<std::uint8_t, 1024, 2, 2, false><<<lib_grid(n), 1024, 0, g_s>>>(d, n, 256, h, st); });
      std::printf("  M0 library b1024 u2 grid %4d        %8.2f us %7.0f GB/s\n", lib_grid(n), t, n / (t * 1e3));
#define V(B, U, M) { auto run = [&] { variant<B, U, M><<<vgrid<B, U, M>(n), B, 0, g_s>>>(d, n, h, st); }; \
      t = time_it(reps, cold, run); if (M == 4) CK(cudaMemsetAsync(st, 0, sizeof *st, g_s)); \
      std::printf("  M%d b%d u%d grid %4d                  %8.2f us %7.0f GB/s", M, B, U, vgrid<B, U, M>(n), t, n / (t * 1e3)); \
      if ((M <= 2 || M == 5) && !cold) { std::vector<unsigned long long> got(256); CK(cudaMemsetAsync(h, 0xFF, 2048, g_s)); run(); \
        CK(cudaStreamSynchronize(g_s)); CK(cudaMemcpy(got.data(), h, 2048, cudaMemcpyDeviceToHost)); \
        std::printf("  %s", got == ref ? "PASS" : "FAIL"); } \
      std::printf("\n"); }
      V(1024, 2, 1) V(1024, 2, 2) V(1024, 2, 3) V(1024, 2, 4) V(1024, 2, 5) V(1024, 1, 5)
      if (n <= (1u << 20)) { V(512, 1, 2) V(256, 1, 2) V(256, 2, 2) V(512, 2, 2) }
      if (n >= (16u << 20)) { V(1024, 4, 2) V(512, 4, 2) V(512, 2, 2) }
      if (!cold) {
        std::printf("  batch: read %.2f us, M0 %.2f us, M2 %.2f us per launch (32 back to back)\n",
                    time_batch([&] { read_bw<<<2 * g_sms, 1024, 0, g_s>>>((const uint4*)d, n / 16, sink); }),
                    time_batch([&] { columns::histogram_kernel<std::uint8_t, 1024, 2, 2, false><<<lib_grid(n), 1024, 0, g_s>>>(d, n, 256, h, st); }),
                    time_batch([&] { variant<1024, 2, 2><<<vgrid<1024, 2, 2>(n), 1024, 0, g_s>>>(d, n, h, st); }));
      }
      if (n >= (1u << 20)) {
        int flip = 0;
#define FU(S, what) t = time_it(reps, cold, [&] { Fused<S>::run(d, o, n, hf, flip); }); \
        std::printf("  fused stop=%d %-24s %8.2f us\n", S, what, t);
        FU(1, "count") FU(2, "count+merge") FU(3, "+grid barrier") FU(4, "+LUT") FU(0, "+apply (whole)")
        if (!cold) std::printf("  fused check: %s\n", fused_ok(d, o, n, hf, host, ref) ? "PASS" : "FAIL");
        if (!cold) std::printf("  fused batch: %.2f us per launch (32 back to back)\n", time_batch([&] { Fused<0>::run(d, o, n, hf, flip); }));
      }
    }
  }
}
