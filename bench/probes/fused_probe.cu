// fused_probe.cu — photo-sized inputs (4M–64M u8): which fused-equalizer shapes keep the whole
// image in registers (grid·block·unroll·16 bytes ≥ n), and what the histogram's merge costs.
// Standalone like columns_probe.cu; timing only plus one output check per shape.
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

__global__ void gen(std::uint8_t* d, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u; x ^= x >> 15; x *= 2246822519u; x ^= x >> 13; d[i] = (x & 0xFF) / 2 + 40; }
}
// The registry kernel without its merge (kMerge=false): what the global atomics cost.
template <int B, int U, int M, bool kMerge>
__global__ void __launch_bounds__(B, M) hist_probe(const std::uint8_t* in, std::size_t n, unsigned long long* hist) {
  __shared__ __align__(16) std::uint32_t cols[columns::kSmemWords];
  columns::zero_columns<B>(cols); __syncthreads();
  columns::count_block<std::uint8_t, B, U, false>(in, n, 256, cols, blockIdx.x, gridDim.x); __syncthreads();
  for (int v = threadIdx.x; v < 256; v += B) { std::uint32_t c = columns::column_sum(cols, v);
    if (kMerge) { if (c) atomicAdd(hist + v, (unsigned long long)c); } else if (c == 0xFFFFFFFFu) hist[v] = c; }
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
template <int B, int U, int M>
float fused_run(const std::uint8_t* in, std::uint8_t* out, std::size_t n, unsigned long long* h, bool cold, int* gridp) {
  auto k = fused::equalize_kernel<B, U, M, false, 0>;
  int per = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, B, 0));
  std::size_t need = (n / 16 + std::size_t(B) * U - 1) / (std::size_t(B) * U);
  int grid = (int)std::max<std::size_t>(1, std::min<std::size_t>(need, std::size_t(per) * g_sms)); *gridp = grid;
  int flip = 0; CK(cudaMemset(h, 0, 4096));
  return time_it(n > (64u << 20) ? 10 : 50, cold, [&] {
    unsigned long long* cur = h + 256 * flip; unsigned long long* nxt = h + 256 * (1 - flip); flip ^= 1;
    Formula f = Formula::opencv; std::uint8_t* lo = nullptr;
    void* args[] = {(void*)&in, (void*)&out, (void*)&n, (void*)&f, (void*)&cur, (void*)&nxt, (void*)&lo};
    CK(cudaLaunchCooperativeKernel((void*)k, grid, B, args, 0, 0)); });
}
int main() {
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0)); g_sms = p.multiProcessorCount; CK(cudaMalloc(&g_flush, kFlush));
  const std::size_t maxn = 64ull << 20;
  std::uint8_t *d, *o; unsigned long long* h; CK(cudaMalloc(&d, maxn)); CK(cudaMalloc(&o, maxn)); CK(cudaMalloc(&h, 4096));
  gen<<<g_sms * 8, 512>>>(d, maxn); CK(cudaDeviceSynchronize());
  std::vector<std::uint8_t> host(maxn); CK(cudaMemcpy(host.data(), d, maxn, cudaMemcpyDeviceToHost));
  for (std::size_t n : {std::size_t(4) << 20, std::size_t(16) << 20, std::size_t(64) << 20}) {
    for (int cold = 0; cold < 2; ++cold) {
      std::printf("\n== n=%zuM %s L2 ==\n", n >> 20, cold ? "cold" : "hot");
      int reps = 50;
#define HP(B, U, M, MG) { std::size_t need = (n / 16 + B * U - 1) / (B * U); int grid = (int)std::min<std::size_t>(need, g_sms * M); \
      std::printf("  hist b%d u%d m%d merge=%d grid %4d        %8.2f us\n", B, U, M, MG, grid, time_it(reps, cold, [&] { \
        hist_probe<B, U, M, MG><<<grid, B>>>(d, n, h); })); }
      HP(1024, 2, 2, true) HP(1024, 2, 2, false) HP(1024, 8, 1, true) HP(512, 8, 2, true) HP(1024, 4, 1, true) HP(512, 4, 2, true)
      int grid = 0; float t;
#define FP(B, U, M) { t = fused_run<B, U, M>(d, o, n, h, cold, &grid); \
      std::printf("  fused b%d u%d m%d grid %4d holds %5.1f MB %8.2f us\n", B, U, M, grid, grid * double(B) * U * 16 / 1e6, t); }
      FP(1024, 2, 2) FP(1024, 8, 1) FP(512, 8, 2) FP(1024, 4, 1) FP(512, 4, 2) FP(256, 8, 4) FP(768, 8, 1)
      if (!cold) {  // check the last fused output
        std::vector<std::uint8_t> out(n); CK(cudaMemcpy(out.data(), o, n, cudaMemcpyDeviceToHost));
        std::vector<unsigned long long> ref(256, 0); for (std::size_t i = 0; i < n; ++i) ref[host[i]]++;
        int v0 = 0; while (ref[v0] == 0) ++v0; float sc = formula::opencv_scale(n, ref[v0]);
        std::uint8_t L[256]; unsigned long long c = 0;
        for (int v = 0; v < 256; ++v) { c += ref[v]; L[v] = v <= v0 ? 0 : formula::lut_entry(Formula::opencv, c, ref[v0], n, sc); }
        std::size_t bad = 0; for (std::size_t i = 0; i < n; ++i) bad += out[i] != L[host[i]];
        std::printf("  fused output check: %s (%zu wrong)\n", bad ? "FAIL" : "PASS", bad);
      }
    }
  }
}
