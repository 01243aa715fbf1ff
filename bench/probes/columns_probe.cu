// columns_probe.cu — tuning probe for the lane-column histogram and the fused equalizer.
// Standalone: builds with nvcc alone, so it can run before the rest of the tree.
//   nvcc -O3 -std=c++17 -arch=sm_90 -I kernels -I core bench/probes/columns_probe.cu -o probe
//   ./probe [reps]
// Prints, per size × distribution: read bandwidth, CUB, each policy variant (hot and cold L2),
// the three-launch equalize path and the fused single-launch equalize, all verified on the CPU.
#include <cooperative_groups.h>
#include <cub/device/device_histogram.cuh>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "columns.cuh"
#include "fused.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::printf("CUDA %s at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1);} } while (0)

using namespace histeq;
using namespace histeq::kernels;
// Since the columns kernel writes its result from the last block (columns::GridState, zero on
// entry and on exit), this probe hands it one zeroed state; its memsets of h are now redundant.
static columns::GridState* grid_state() {
  static columns::GridState* g = [] { columns::GridState* p = nullptr; CK(cudaMalloc(&p, sizeof *p));
    CK(cudaMemset(p, 0, sizeof *p)); return p; }();
  return g;
}

__global__ void gen(std::uint8_t* d, std::size_t n, int dist, unsigned seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u ^ unsigned(i >> 32) * 40503u ^ seed;
    x ^= x >> 15; x *= 2246822519u; x ^= x >> 13; x *= 3266489917u; x ^= x >> 16;
    std::uint8_t v;
    if (dist == 0) v = x & 0xFF;                                    // uniform
    else if (dist == 1) v = (x % 10u) ? 0 : (x >> 8) & 0xFF;        // hot: 90% zero
    else if (dist == 2) v = 77;                                     // constant
    else { std::size_t r = i / 4096; unsigned y = unsigned(r) * 2654435761u; v = (y >> 13) & 0xFF; } // blocky
    d[i] = v;
  }
}

__global__ void read_bw(const uint4* __restrict__ d, std::size_t nvec, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < nvec; i += std::size_t(gridDim.x) * blockDim.x) {
    uint4 r = __ldcs(d + i); acc ^= r.x ^ r.y ^ r.z ^ r.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

__global__ void lut_kernel(const unsigned long long* hist, Formula f, std::uint8_t* lut) {
  __shared__ __align__(16) std::uint32_t rep[columns::kSmemWords];
  __shared__ unsigned long long scan[256];
  fused::build_lut_replicated<256>(hist, f, rep, scan, lut);
}

__global__ void apply_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, std::size_t nvec, const std::uint8_t* lut) {
  __shared__ __align__(16) std::uint32_t rep[columns::kSmemWords];
  for (int v = threadIdx.x; v < 256; v += blockDim.x) { std::uint32_t x = lut[v]; for (int l = 0; l < 32; ++l) rep[v * 32 + l] = x; }
  __syncthreads();
  const std::uint32_t* ll = rep + (threadIdx.x & 31);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < nvec; i += std::size_t(gridDim.x) * blockDim.x)
    __stcs(out + i, fused::map_vec(ll, __ldcs(in + i)));
}

static int g_sms = 0;
static std::uint8_t* g_flush = nullptr;
static const std::size_t kFlush = 256ull << 20;

static float time_it(int reps, bool cold, const std::function<void()>& f, float* minv = nullptr) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  f(); CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    if (cold) CK(cudaMemsetAsync(g_flush, r & 0xFF, kFlush));
    CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms * 1000.f);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  if (minv) *minv = t.front();
  cudaEventDestroy(a); cudaEventDestroy(b);
  return t[t.size() / 2];
}

template <int B, int U, int M>
struct Variant {
  static void run(const std::uint8_t* d, std::size_t n, unsigned long long* h, int grid_mode) {
    auto k = columns::histogram_kernel<std::uint8_t, B, U, M>;
    std::size_t nvec = n / 16;
    long long need = (long long)((nvec + (std::size_t)B * U - 1) / ((std::size_t)B * U));
    int full = g_sms * M;
    int grid = grid_mode == 0 ? full : (int)std::max(1LL, std::min<long long>(need, full));
    cudaMemsetAsync(h, 0, 256 * 8);
    k<<<grid, B>>>(d, n, 256, h, grid_state());
  }
  static std::string name() { return "columns b" + std::to_string(B) + " u" + std::to_string(U) + " m" + std::to_string(M); }
};

template <int B, int U, int M>
struct Fused {
  static int max_grid() {
    int per = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, fused::equalize_kernel<B, U, M>, B, 0));
    return per * g_sms;
  }
  static void run(const std::uint8_t* in, std::uint8_t* out, std::size_t n, unsigned long long* h0, unsigned long long* h1, int& flip) {
    unsigned long long* cur = flip ? h1 : h0; unsigned long long* nxt = flip ? h0 : h1; flip ^= 1;
    std::size_t nvec = n / 16;
    long long need = (long long)((nvec + (std::size_t)B * U - 1) / ((std::size_t)B * U));
    int grid = (int)std::max(1LL, std::min<long long>(need, max_grid()));
    Formula f = Formula::opencv; std::uint8_t* lo = nullptr;
    void* args[] = {(void*)&in, (void*)&out, (void*)&n, (void*)&f, (void*)&cur, (void*)&nxt, (void*)&lo};
    CK(cudaLaunchCooperativeKernel((void*)fused::equalize_kernel<B, U, M>, grid, B, args, 0, 0));
  }
  static std::string name() { return "fused b" + std::to_string(B) + " u" + std::to_string(U) + " m" + std::to_string(M); }
};

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 30;
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0)); g_sms = p.multiProcessorCount;
  std::printf("device %s, %d SMs, L2 %d MB\n", p.name, g_sms, p.l2CacheSize >> 20);
  CK(cudaMalloc(&g_flush, kFlush));
  const std::size_t maxn = 1ull << 30;
  std::uint8_t *d, *o; unsigned long long *h, *h2; unsigned* sink; std::uint8_t* lut;
  CK(cudaMalloc(&d, maxn)); CK(cudaMalloc(&o, maxn)); CK(cudaMalloc(&h, 256 * 8)); CK(cudaMalloc(&h2, 256 * 8));
  CK(cudaMalloc(&sink, 4)); CK(cudaMalloc(&lut, 256));
  std::size_t cub_bytes = 0; void* cub_tmp = nullptr;
  cub::DeviceHistogram::HistogramEven(nullptr, cub_bytes, d, (unsigned long long*)h, 257, 0, 256, (long long)maxn);
  CK(cudaMalloc(&cub_tmp, cub_bytes + 1024));
  std::vector<std::uint8_t> host(maxn);
  const char* dn[] = {"uniform", "hot", "constant", "blocky"};
  for (std::size_t n : {std::size_t(16) << 20, std::size_t(64) << 20, std::size_t(256) << 20, std::size_t(1) << 30}) {
    int r = n >= (256u << 20) ? std::max(5, reps / 3) : reps;
    for (int dist = 0; dist < 4; ++dist) {
      if (n == (256u << 20) && dist != 0) continue;
      gen<<<g_sms * 8, 512>>>(d, n, dist, 1234u); CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(host.data(), d, n, cudaMemcpyDeviceToHost));
      std::vector<unsigned long long> ref(256, 0); for (std::size_t i = 0; i < n; ++i) ref[host[i]]++;
      auto check = [&](const char* what) {
        std::vector<unsigned long long> g(256); CK(cudaMemcpy(g.data(), h, 256 * 8, cudaMemcpyDeviceToHost));
        if (g != ref) { std::printf("  FAIL %s\n", what); }
      };
      double gb = n / 1e9;
      std::printf("\n== n=%zuM %s ==\n", n >> 20, dn[dist]);
      for (int cold = 0; cold < 2; ++cold) {
        float mn;
        float t = time_it(r, cold, [&] { read_bw<<<g_sms * 4, 512>>>((const uint4*)d, n / 16, sink); }, &mn);
        std::printf("  %-28s %s %9.2f us (min %8.2f) %7.0f GB/s\n", "read-bw", cold ? "cold" : "hot ", t, mn, gb / (t * 1e-6));
        t = time_it(r, cold, [&] { cub::DeviceHistogram::HistogramEven(cub_tmp, cub_bytes, d, h, 257, 0, 256, (long long)n); }, &mn);
        check("cub");
        std::printf("  %-28s %s %9.2f us (min %8.2f) %7.0f GB/s\n", "cub", cold ? "cold" : "hot ", t, mn, gb / (t * 1e-6));
#define V(B, U, M, G) { t = time_it(r, cold, [&] { Variant<B, U, M>::run(d, n, h, G); }, &mn); check(Variant<B,U,M>::name().c_str()); \
        std::printf("  %-28s %s %9.2f us (min %8.2f) %7.0f GB/s\n", (Variant<B, U, M>::name() + (G ? " fit" : " full")).c_str(), cold ? "cold" : "hot ", t, mn, gb / (t * 1e-6)); }
        V(512, 4, 4, 0) V(512, 4, 4, 1) V(512, 2, 4, 1) V(256, 4, 8, 1) V(1024, 4, 2, 1) V(512, 8, 2, 1) V(384, 4, 5, 1) V(256, 8, 4, 1)
        // three-launch equalize: columns + LUT + apply
        t = time_it(r, cold, [&] { Variant<512, 4, 4>::run(d, n, h, 1); lut_kernel<<<1, 256>>>(h, Formula::opencv, lut);
                                    apply_kernel<<<g_sms * 4, 512>>>((const uint4*)d, (uint4*)o, n / 16, lut); }, &mn);
        std::printf("  %-28s %s %9.2f us (min %8.2f)\n", "equalize 3-launch", cold ? "cold" : "hot ", t, mn);
        int flip = 0; CK(cudaMemset(h, 0, 2048)); CK(cudaMemset(h2, 0, 2048));
#define F(B, U, M) { flip = 0; CK(cudaMemset(h, 0, 2048)); CK(cudaMemset(h2, 0, 2048)); \
        t = time_it(r, cold, [&] { Fused<B, U, M>::run(d, o, n, h, h2, flip); }, &mn); \
        std::printf("  %-28s %s %9.2f us (min %8.2f) grid %d\n", Fused<B, U, M>::name().c_str(), cold ? "cold" : "hot ", t, mn, Fused<B,U,M>::max_grid()); }
        F(512, 4, 4) F(512, 4, 3) F(1024, 4, 2) F(512, 2, 4) F(256, 4, 8)
      }
      // verify the fused output once against the CPU
      {
        int flip = 0; CK(cudaMemset(h, 0, 2048)); CK(cudaMemset(h2, 0, 2048));
        Fused<512, 4, 4>::run(d, o, n, h, h2, flip); CK(cudaDeviceSynchronize());
        std::vector<std::uint8_t> out(n); CK(cudaMemcpy(out.data(), o, n, cudaMemcpyDeviceToHost));
        // CPU LUT (opencv formula)
        int v0 = 0; while (v0 < 256 && ref[v0] == 0) ++v0;
        unsigned long long tot = 0; for (auto c : ref) tot += c;
        std::uint8_t L[256];
        if (ref[v0] == tot) { for (int v = 0; v < 256; ++v) L[v] = v; }
        else { float sc = formula::opencv_scale(tot, ref[v0]); unsigned long long c = 0;
          for (int v = 0; v < 256; ++v) { c += ref[v]; L[v] = v <= v0 ? 0 : formula::lut_entry(Formula::opencv, c, ref[v0], tot, sc); } }
        std::size_t bad = 0; for (std::size_t i = 0; i < n; ++i) bad += out[i] != L[host[i]];
        std::printf("  fused output check: %s (%zu wrong)\n", bad ? "FAIL" : "PASS", bad);
      }
    }
  }
  return 0;
}
