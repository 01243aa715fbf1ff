// nvjpeg_hybrid.hpp — progressive JPEGs decoded by nvJPEG from a CPU worker's thread into planes
// in device memory (gpu::HybridDecoder): with the hybrid backend the entropy decoding runs on the
// calling thread (nvjpegDecodeJpegHost) and the inverse DCT on the GPU; with the GPU_HYBRID
// backend both run on the GPU, the thread only parses the file and queues it. The planes go to
// the device route's slots, which equalize Y and encode (jpeg_device.cpp) without the
// coefficients ever crossing to the host. Chosen by ExecutorOptions::progressive (`histeq bench
// --folder --tune jpeg.progressive=hybrid|gpu`); bench/probes/hybrid_probe.cu and start_probe.cu
// measure the decoders apart from the executor. Without nvJPEG, hybrid_built() is false and
// nothing here is made. Internal header of the pipeline room (not installed).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace histeq::gpu {

struct JpegHandles;  // histeq/nvjpeg_codec.hpp

/// Whether this build has nvJPEG (the hybrid decoder can be made).
bool hybrid_built();

/// A colour JPEG's stored YCbCr planes on the device (4:4:4, 4:2:2 or 4:2:0), each
/// plane_width x plane_height samples at a pitch of plane_width, in device memory this object
/// owns (from its decoder's pool), written by work queued on the decoder's stream: a consumer
/// makes its stream wait (wait_on) before it reads or writes them, and gives the memory back
/// (release) once its own use of them is queued. Destroyed unreleased, it waits for the planes
/// and frees them.
class HybridPlanes {
 public:
  int device = 0;
  int width = 0, height = 0;
  int chroma_h = 1, chroma_v = 1;  ///< luma samples per chroma sample: 4:2:0 is 2x2
  std::uint8_t* plane[3] = {};
  int plane_width[3] = {}, plane_height[3] = {};
  std::vector<std::uint8_t> exif, icc;  ///< as Image::exif, Image::icc

  HybridPlanes() = default;
  ~HybridPlanes();
  HybridPlanes(const HybridPlanes&) = delete;
  HybridPlanes& operator=(const HybridPlanes&) = delete;

  /// Makes `stream` (a cudaStream_t of `device`) wait until the planes are written.
  void wait_on(void* stream) const;
  /// The memory goes back to the pool after the work queued on `stream` so far (the consumer's
  /// last use of the planes); the planes must not be touched afterwards.
  void release(void* stream);

 private:
  friend class HybridDecoder;
  void* base_ = nullptr;   ///< the planes' allocation (plane[0])
  void* ready_ = nullptr;  ///< cudaEvent_t recorded after the device phase
};

/// nvJPEG's hybrid decoder on one device, for one thread at a time: a decoder on the device's
/// shared handle, its own decode state, two host buffers (ordinary memory, not pinned) and two
/// parsed streams in turn, a device buffer, a stream, and a memory pool for the planes it
/// returns. Files
/// follow NVIDIA's decoupled order: the host phase of a file runs while the device phase of the
/// file before may still run, then waits for it before its own transfer, so one file at a time is
/// on the state's device side.
class HybridDecoder {
 public:
  /// Makes everything on the device of `handles` (made current on the calling thread), on its
  /// hardware-backend handle where the GPU has a JPEG engine, else on its default-backend
  /// handle, which the first decoder of a device creates (about 0.3-0.5 s); every decoder
  /// shares the handle (nvJPEG handles may be used by several threads at once). Throws Error or
  /// CudaError when nvJPEG or CUDA fails.
  /// gpu_huffman: nvJPEG's GPU_HYBRID backend, whose entropy decoding runs on the device too
  /// (the calling thread parses the file and queues the rest; the same planes).
  explicit HybridDecoder(std::shared_ptr<JpegHandles> handles, bool gpu_huffman = false);
  ~HybridDecoder();
  HybridDecoder(const HybridDecoder&) = delete;
  HybridDecoder& operator=(const HybridDecoder&) = delete;

  /// The planes of a 3-component YCbCr JPEG with 4:4:4, 4:2:2 or 4:2:0 sampling, of at most
  /// `max_pixels` pixels, queued on the decoder's stream; the entropy decoding runs on the
  /// calling thread. Null when the file is anything else, does not end with EOI, or nvJPEG
  /// declines or fails it: the caller decodes it another way (whose errors name the file).
  std::unique_ptr<HybridPlanes> decode(const std::uint8_t* data, std::size_t size,
                                       std::uint64_t max_pixels);

  int device() const;
  bool gpu_huffman() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace histeq::gpu
