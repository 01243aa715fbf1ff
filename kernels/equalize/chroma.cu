// chroma.cu — launch_average_down (chroma.hpp): one thread per output sample.
#include "chroma.hpp"

#include <string>

#include "histeq/error.hpp"
#include "support/cuda_check.hpp"

namespace histeq::kernels {
namespace {

__global__ void average_down_kernel(const std::uint8_t* __restrict__ src, int width, int height,
                                    std::size_t src_pitch, int fx, int fy,
                                    std::uint8_t* __restrict__ dst, int out_w, int out_h,
                                    std::size_t dst_pitch) {
  const int x = int(blockIdx.x * blockDim.x + threadIdx.x);
  const int y = int(blockIdx.y * blockDim.y + threadIdx.y);
  if (x >= out_w || y >= out_h) return;
  const std::uint8_t* a = src + std::size_t(min(fy * y, height - 1)) * src_pitch;
  const std::uint8_t* b = src + std::size_t(min(fy * y + fy - 1, height - 1)) * src_pitch;
  unsigned v;
  if (fx == 2) {
    const int x0 = 2 * x, x1 = min(2 * x + 1, width - 1);
    v = fy == 2 ? (unsigned(a[x0]) + a[x1] + b[x0] + b[x1] + 1u + unsigned(x & 1)) >> 2
                : (unsigned(a[x0]) + a[x1] + unsigned(x & 1)) >> 1;
  } else {
    v = (unsigned(a[x]) + b[x] + 1u) >> 1;
  }
  dst[std::size_t(y) * dst_pitch + std::size_t(x)] = std::uint8_t(v);
}

}  // namespace

void launch_average_down(const std::uint8_t* d_src, int width, int height, std::size_t src_pitch,
                         int fx, int fy, std::uint8_t* d_dst, std::size_t dst_pitch,
                         cudaStream_t stream) {
  if ((fx != 1 && fx != 2) || (fy != 1 && fy != 2) || width < 1 || height < 1 ||
      src_pitch < std::size_t(width))
    throw UsageError("average_down: factors " + std::to_string(fx) + "x" + std::to_string(fy) +
                     " of a " + std::to_string(width) + "x" + std::to_string(height) + " plane");
  const int out_w = (width + fx - 1) / fx, out_h = (height + fy - 1) / fy;
  const dim3 block(32, 8);
  const dim3 grid(unsigned((out_w + 31) / 32), unsigned((out_h + 7) / 8));
  average_down_kernel<<<grid, block, 0, stream>>>(d_src, width, height, src_pitch, fx, fy, d_dst,
                                                  out_w, out_h, dst_pitch);
  HISTEQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace histeq::kernels
