// prefetch_probe.cu — does software pipelining (next tile's loads issued before counting the
// current one) close the gap to the read bandwidth at 16M–64M? Variants of the columns kernel,
// hot and cold L2, checked against a CPU count. Standalone like columns_probe.cu.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "columns.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::printf("CUDA %s at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1);} } while (0)
using namespace histeq::kernels;
// Since the columns kernel writes its result from the last block (columns::GridState, zero on
// entry and on exit), this probe hands it one zeroed state; its memsets of h are now redundant.
static columns::GridState* grid_state() {
  static columns::GridState* g = [] { columns::GridState* p = nullptr; CK(cudaMalloc(&p, sizeof *p));
    CK(cudaMemset(p, 0, sizeof *p)); return p; }();
  return g;
}

__global__ void gen(std::uint8_t* d, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u; x ^= x >> 15; x *= 2246822519u; x ^= x >> 13; d[i] = x & 0xFF; }
}
template <int U>
__global__ void __launch_bounds__(1024) read_bw(const uint4* __restrict__ d, std::size_t nvec, unsigned* sink) {
  unsigned acc = 0; const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  for (; i + (U - 1) * stride < nvec; i += U * stride) { uint4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) r[u] = __ldg(d + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= r[u].x ^ r[u].y ^ r[u].z ^ r[u].w; }
  for (; i < nvec; i += stride) { uint4 r = __ldg(d + i); acc ^= r.x ^ r.y ^ r.z ^ r.w; }
  if (acc == 0x12345678u) *sink = acc;
}
static int g_sms; static std::uint8_t* g_flush; static const std::size_t kFlush = 256ull << 20;
static float time_it(int reps, bool cold, const std::function<void()>& f) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); f(); CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) { if (cold) CK(cudaMemsetAsync(g_flush, r, kFlush));
    CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms * 1000.f); }
  CK(cudaGetLastError()); std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
template <int B, int U, int M, bool PF>
void run(const std::uint8_t* d, std::size_t n, unsigned long long* h, int gridmul) {
  std::size_t need = (n / 16 + std::size_t(B) * U - 1) / (std::size_t(B) * U);
  int grid = (int)std::max<std::size_t>(1, std::min<std::size_t>(need, std::size_t(g_sms) * M * gridmul));
  cudaMemsetAsync(h, 0, 2048);
  columns::histogram_kernel<std::uint8_t, B, U, M, false, PF><<<grid, B>>>(d, n, 256, h, grid_state());
}
int main() {
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0)); g_sms = p.multiProcessorCount; CK(cudaMalloc(&g_flush, kFlush));
  const std::size_t maxn = 1ull << 30;
  std::uint8_t* d; unsigned long long* h; unsigned* sink;
  CK(cudaMalloc(&d, maxn)); CK(cudaMalloc(&h, 2048)); CK(cudaMalloc(&sink, 4));
  gen<<<g_sms * 8, 512>>>(d, maxn); CK(cudaDeviceSynchronize());
  std::vector<std::uint8_t> host(maxn); CK(cudaMemcpy(host.data(), d, maxn, cudaMemcpyDeviceToHost));
  for (std::size_t n : {std::size_t(16) << 20, std::size_t(64) << 20, std::size_t(256) << 20, std::size_t(1) << 30}) {
    std::vector<unsigned long long> ref(256, 0); for (std::size_t i = 0; i < n; ++i) ref[host[i]]++;
    int reps = n >= (256u << 20) ? 15 : 50;
    for (int cold = 0; cold < 2; ++cold) {
      std::printf("\n== n=%zuM %s L2 ==\n", n >> 20, cold ? "cold" : "hot");
      float t = time_it(reps, cold, [&] { read_bw<4><<<g_sms * 2, 1024>>>((const uint4*)d, n / 16, sink); });
      std::printf("  %-34s %9.2f us %7.0f GB/s\n", "read u4 b1024 x2", t, n / 1e3 / t);
#define R(B, U, M, PF, G) { t = time_it(reps, cold, [&] { run<B, U, M, PF>(d, n, h, G); }); \
      std::vector<unsigned long long> g(256); CK(cudaMemcpy(g.data(), h, 2048, cudaMemcpyDeviceToHost)); \
      std::printf("  cols b%-4d u%d m%d pf%d grid x%d          %9.2f us %7.0f GB/s %s\n", B, U, M, PF, G, t, n / 1e3 / t, g == ref ? "" : "FAIL"); }
      R(1024, 2, 2, false, 1) R(1024, 2, 2, true, 1) R(1024, 1, 2, true, 1) R(512, 2, 4, true, 1) R(512, 4, 2, true, 1)
      R(256, 2, 8, true, 1) R(1024, 2, 2, true, 2) R(512, 2, 3, true, 1)
    }
  }
}
