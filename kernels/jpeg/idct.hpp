// idct.hpp — the inverse DCT of a JPEG component on the device (idct.cu): the component's
// quantized coefficients (jpeg::decode_coefficients, uploaded) into its plane as
// jpeg::decode_planes lays it out (whole MCUs, the samples past the component's width and height
// repeating its last column and row), byte for byte what libjpeg-turbo decodes
// (histeq/idct_formula.hpp, shared with the host). So a CPU worker does only the entropy
// decoding of a progressive file, and the device the rest.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace histeq::kernels {

/// A component's quantization table, natural order (passed by value to the kernel).
struct IdctQuant {
  std::uint16_t q[64];
};

/// One component: `blocks_w` x `blocks_h` blocks of 64 coefficients at d_coef (row by row,
/// natural order in each), into the plane at d_plane (`stride` bytes by `rows` rows, at least
/// the blocks' 8 x blocks_w by 8 x blocks_h), whose `width` x `height` samples are the image's.
struct IdctPlane {
  const std::int16_t* d_coef = nullptr;
  IdctQuant quant{};
  int blocks_w = 0, blocks_h = 0;
  std::uint8_t* d_plane = nullptr;
  std::size_t stride = 0;
  int rows = 0;
  int width = 0, height = 0;
  /// Whether the samples right of width and below height repeat the edge (decode_planes'
  /// layout); false leaves them as the blocks' transform wrote them or untouched (a caller that
  /// reads only width x height).
  bool pad = true;
};

/// The inverse DCT of every block, then (p.pad) the padding: one or two launches on `stream`.
/// Throws UsageError for a geometry that does not fit (null pointers, blocks outside the plane, an
/// image larger than its blocks).
void idct_plane(const IdctPlane& p, cudaStream_t stream);

}  // namespace histeq::kernels
