// region.hpp — histograms of the pixels a region counts (masked equalization: histeq/match.hpp's
// Region): a rectangle of a plane and/or the pixels where a mask is nonzero, in one pass over
// the plane and the mask. Not registry kernels (the contract counts every sample of a buffer).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "histeq/tuning.hpp"
#include "histeq/types.hpp"

namespace histeq::kernels {

/// One region histogram: the samples of plane (width x height, row-major, u8 or u16) at (c, r)
/// with x <= c < x + w and y <= r < y + h (the caller's rectangle lies in the plane; the whole
/// plane when there is no rectangle) and, when d_mask is given (width x height bytes, the plane's
/// layout), d_mask[r · width + c] != 0.
struct RegionLaunch {
  const void* d_plane = nullptr;
  int width = 0, height = 0;
  int x = 0, y = 0, w = 0, h = 0;
  const std::uint8_t* d_mask = nullptr;
  std::uint64_t* d_hist = nullptr;  ///< 256 (u8) or 65536 (u16) uint64 bins, overwritten
  cudaStream_t stream = nullptr;
};

/// The launch for the rectangle (x, y, w, h) of a width x height plane, counted where d_mask is
/// nonzero (every pixel of the rectangle when d_mask is null); d_plane and d_hist are the caller's
/// to set, per plane.
inline RegionLaunch region_launch(int width, int height, int x, int y, int w, int h,
                                  const std::uint8_t* d_mask, cudaStream_t stream) {
  RegionLaunch r;
  r.width = width;
  r.height = height;
  r.x = x;
  r.y = y;
  r.w = w;
  r.h = h;
  r.d_mask = d_mask;
  r.stream = stream;
  return r;
}

/// The 256-bin histogram of an 8-bit plane's region (region.cu). Async on the stream: a memset of
/// d_hist and one launch. Any alignment of the plane and the mask (16-byte loads of both where
/// they share their phase; the mask's bytes one by one where not). t.region.full_vectors picks
/// the counting variant (the same counts).
void region_histogram_u8(const RegionLaunch& r, const Tuning& t = Tuning{});

/// Bytes of the grid state region_lut_u8 takes: zero when the caller allocates it (a memset
/// once), zero again after every call, so that no call needs a memset.
std::size_t region_state_bytes();

/// The same histogram into r.d_hist in one launch without a memset, and (d_lut not null) the
/// equalization LUT of it (formula f; histeq::make_lut's entries, an empty histogram the
/// identity) into d_lut[0,256), built by the last block to finish. d_state: region_state_bytes()
/// of zeroed device memory, used by one call at a time (one stream). Launched programmatically
/// (pdl.cuh) where t's edges include pdl::kRegionEqualize: the kernel waits for the work queued
/// before it before it reads or writes global memory.
void region_lut_u8(const RegionLaunch& r, void* d_state, Formula f, std::uint8_t* d_lut,
                   const Tuning& t = Tuning{});

}  // namespace histeq::kernels
