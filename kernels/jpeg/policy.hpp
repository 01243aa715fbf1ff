// policy.hpp — the launch shape of the JPEG kernels (idct.cu).
#pragma once

namespace histeq::kernels {

/// idct (idct.cu): 8 threads per 8x8 block (a column each in the first pass, a row each in the
/// second, the workspace in shared memory), kBlocksPerCta blocks per thread block; the padding
/// kernel: kPadThreads threads, one sample each.
struct IdctPolicy {
  static constexpr int kBlocksPerCta = 32;
  static constexpr int kPadThreads = 256;
};
inline constexpr IdctPolicy kIdctPolicy{};

}  // namespace histeq::kernels
