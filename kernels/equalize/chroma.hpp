// chroma.hpp — a JPEG chroma plane averaged down to a coarser sampling on the device, the twin of
// histeq::jpeg::average_down (libjpeg's jcsample.c rounding): the device JPEG route's chroma when
// the output asks for coarser chroma than the file holds (4:4:4 → 4:2:0, ...).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace histeq::kernels {

/// d_src: a width x height plane, rows `src_pitch` bytes apart; fx, fy in {1, 2}. Writes the
/// ceil(width / fx) x ceil(height / fy) plane into d_dst (rows `dst_pitch` bytes apart), each
/// sample exactly as jpeg::average_down computes it: 2x2 (a + b + c + d + 1 + (x & 1)) >> 2, 2x1
/// (a + b + (x & 1)) >> 1, 1x2 (a + b + 1) >> 1, source samples past the last row and column
/// repeating it. Asynchronous on `stream`. Throws UsageError for other factors or sizes.
void launch_average_down(const std::uint8_t* d_src, int width, int height, std::size_t src_pitch,
                         int fx, int fy, std::uint8_t* d_dst, std::size_t dst_pitch,
                         cudaStream_t stream);

}  // namespace histeq::kernels
