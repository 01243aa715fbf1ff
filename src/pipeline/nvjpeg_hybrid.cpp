// nvjpeg_hybrid.cpp — gpu::HybridDecoder and gpu::HybridPlanes (nvjpeg_hybrid.hpp): nvJPEG's
// decoupled hybrid decode (nvjpegJpegStreamParse, nvjpegDecodeJpegHost on the calling thread,
// nvjpegDecodeJpegTransferToDevice and nvjpegDecodeJpegDevice on the decoder's stream) into
// planes allocated from the decoder's memory pool. Without nvJPEG (HISTEQ_HAVE_NVJPEG unset)
// only hybrid_built() and the planes' empty members are compiled.
#include "nvjpeg_hybrid.hpp"

#include "histeq/error.hpp"

#ifdef HISTEQ_HAVE_NVJPEG
#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <cstdint>
#include <cstdlib>
#include <utility>

#include "nvjpeg_state.hpp"
#include "support/cuda_check.hpp"
#endif

namespace histeq::gpu {

#ifndef HISTEQ_HAVE_NVJPEG

bool hybrid_built() { return false; }
HybridPlanes::~HybridPlanes() = default;
void HybridPlanes::wait_on(void*) const {}
void HybridPlanes::release(void*) {}
struct HybridDecoder::Impl {};
HybridDecoder::HybridDecoder(std::shared_ptr<JpegHandles>, bool) {
  throw Error("nvJPEG is not built into this histeq");
}
HybridDecoder::~HybridDecoder() = default;
std::unique_ptr<HybridPlanes> HybridDecoder::decode(const std::uint8_t*, std::size_t,
                                                    std::uint64_t) {
  return nullptr;
}
int HybridDecoder::device() const { return 0; }
bool HybridDecoder::gpu_huffman() const { return false; }

#else

using nvjpeg_detail::check;

bool hybrid_built() { return true; }

namespace {

/// Makes `device` current for the scope (the planes may be released on any thread).
class OnDevice {
 public:
  explicit OnDevice(int device) {
    if (cudaGetDevice(&old_) != cudaSuccess) old_ = -1;
    if (old_ != device) cudaSetDevice(device);
  }
  ~OnDevice() {
    int now = -1;
    if (old_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != old_) cudaSetDevice(old_);
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int old_ = -1;
};

/// The host buffers nvJPEG's host phase writes into (the entropy-decoded coefficients, or with
/// GPU_HYBRID the bitstream): ordinary memory. From nvJPEG's own pinned allocator, 16 CPU
/// workers growing them as larger files came stalled every other CUDA call of the process, the
/// device route's encodes among them, for 0.1-0.2 s at a time, and their first decodes took
/// 2-4x as long; from malloc the encoder's worst iteration stayed under 13 ms
/// (bench/probes/start_probe.cu). One thread alone decodes as fast either way. The transfer
/// from them is staged by the driver (cudaMemcpyAsync from pageable memory returns once the
/// bytes are staged), a few milliseconds a photo; the buffer is reused two files later, after
/// the file before has left the device side.
int host_malloc(void*, void** p, std::size_t n, cudaStream_t) {
  *p = std::malloc(n);
  return *p ? 0 : 1;
}
int host_free(void*, void* p, std::size_t, cudaStream_t) {
  std::free(p);
  return 0;
}

}  // namespace

HybridPlanes::~HybridPlanes() {
  if (!base_ && !ready_) return;
  OnDevice on(device);
  // The decoder's work on the planes is done at `ready` (recorded whenever base_ is set); a
  // consumer that queued work on them and did not release them has synchronized its stream.
  if (ready_) cudaEventSynchronize(static_cast<cudaEvent_t>(ready_));
  if (base_) cudaFree(base_);
  if (ready_) cudaEventDestroy(static_cast<cudaEvent_t>(ready_));
}

void HybridPlanes::wait_on(void* stream) const {
  if (ready_)
    HISTEQ_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                          static_cast<cudaEvent_t>(ready_), 0));
}

void HybridPlanes::release(void* stream) {
  OnDevice on(device);
  if (base_) HISTEQ_CUDA_CHECK(cudaFreeAsync(base_, static_cast<cudaStream_t>(stream)));
  base_ = nullptr;
  if (ready_) cudaEventDestroy(static_cast<cudaEvent_t>(ready_));  // its waits are queued
  ready_ = nullptr;
  for (auto*& p : plane) p = nullptr;
}

struct HybridDecoder::Impl {
  int device = 0;
  std::shared_ptr<JpegHandles> handles;  ///< keeps `handle` (theirs, shared) alive
  nvjpegHandle_t handle = nullptr;
  nvjpegJpegDecoder_t decoder = nullptr;
  nvjpegJpegState_t state = nullptr;
  nvjpegBufferPinned_t pinned[2] = {};
  nvjpegBufferDevice_t device_buffer = nullptr;
  nvjpegJpegStream_t parsed[2] = {};
  nvjpegDecodeParams_t params = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;  ///< recorded after each device phase
  cudaMemPool_t pool = nullptr;
  int turn = 0;
  bool gpu_huffman = false;

  ~Impl() {
    OnDevice on(device);
    if (stream) cudaStreamSynchronize(stream);
    if (params) nvjpegDecodeParamsDestroy(params);
    if (state) nvjpegJpegStateDestroy(state);  // before the buffers attached to it
    for (int i = 0; i < 2; ++i) {
      if (parsed[i]) nvjpegJpegStreamDestroy(parsed[i]);
      if (pinned[i]) nvjpegBufferPinnedDestroy(pinned[i]);
    }
    if (device_buffer) nvjpegBufferDeviceDestroy(device_buffer);
    if (decoder) nvjpegDecoderDestroy(decoder);
    if (done) cudaEventDestroy(done);
    if (stream) cudaStreamDestroy(stream);
    // Planes still out keep their memory: the pool goes once they are all freed.
    if (pool) cudaMemPoolDestroy(pool);
  }
};

HybridDecoder::HybridDecoder(std::shared_ptr<JpegHandles> handles, bool gpu_huffman)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (!handles) throw Error("HybridDecoder: no nvJPEG handles");
  const int device = nvjpeg_detail::handles_device(*handles);
  m.device = device;
  HISTEQ_CUDA_CHECK(cudaSetDevice(device));
  m.handle = nvjpeg_detail::decoder_handle(*handles);
  m.handles = std::move(handles);
  // The planes' pool keeps up to 256 MiB of what is freed into it (a photo's planes are tens
  // of megabytes, and the same sizes come back file after file); beyond that it gives memory
  // back at synchronizations.
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  HISTEQ_CUDA_CHECK(cudaMemPoolCreate(&m.pool, &props));
  std::uint64_t keep = std::uint64_t(256) << 20;
  HISTEQ_CUDA_CHECK(cudaMemPoolSetAttribute(m.pool, cudaMemPoolAttrReleaseThreshold, &keep));
  m.gpu_huffman = gpu_huffman;
  check(nvjpegDecoderCreate(
            m.handle, gpu_huffman ? NVJPEG_BACKEND_GPU_HYBRID : NVJPEG_BACKEND_HYBRID, &m.decoder),
        "nvjpegDecoderCreate");
  check(nvjpegDecoderStateCreate(m.handle, m.decoder, &m.state), "nvjpegDecoderStateCreate");
  nvjpegPinnedAllocatorV2_t host{host_malloc, host_free, nullptr};
  for (int i = 0; i < 2; ++i) {
    check(nvjpegBufferPinnedCreateV2(m.handle, &host, &m.pinned[i]), "nvjpegBufferPinnedCreateV2");
    check(nvjpegJpegStreamCreate(m.handle, &m.parsed[i]), "nvjpegJpegStreamCreate");
  }
  check(nvjpegBufferDeviceCreate(m.handle, nullptr, &m.device_buffer), "nvjpegBufferDeviceCreate");
  check(nvjpegStateAttachDeviceBuffer(m.state, m.device_buffer), "nvjpegStateAttachDeviceBuffer");
  check(nvjpegDecodeParamsCreate(m.handle, &m.params), "nvjpegDecodeParamsCreate");
  check(nvjpegDecodeParamsSetOutputFormat(m.params, NVJPEG_OUTPUT_YUV),
        "nvjpegDecodeParamsSetOutputFormat");
  HISTEQ_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  HISTEQ_CUDA_CHECK(
      cudaEventCreateWithFlags(&m.done, cudaEventDisableTiming | cudaEventBlockingSync));
  HISTEQ_CUDA_CHECK(cudaEventRecord(m.done, m.stream));
}

HybridDecoder::~HybridDecoder() = default;

int HybridDecoder::device() const { return impl_->device; }
bool HybridDecoder::gpu_huffman() const { return impl_->gpu_huffman; }

std::unique_ptr<HybridPlanes> HybridDecoder::decode(const std::uint8_t* data, std::size_t size,
                                                    std::uint64_t max_pixels) {
  Impl& m = *impl_;
  if (size < 4 || !nvjpeg_detail::ends_with_eoi(data, size)) return nullptr;
  HISTEQ_CUDA_CHECK(cudaSetDevice(m.device));
  const int b = m.turn;
  nvjpegJpegStream_t js = m.parsed[b];
  if (nvjpegStateAttachPinnedBuffer(m.state, m.pinned[b]) != NVJPEG_STATUS_SUCCESS ||
      nvjpegJpegStreamParse(m.handle, data, size, 0, 0, js) != NVJPEG_STATUS_SUCCESS)
    return nullptr;
  unsigned comps = 0, w = 0, h = 0;
  nvjpegChromaSubsampling_t css = NVJPEG_CSS_UNKNOWN;
  auto planes = std::make_unique<HybridPlanes>();
  HybridPlanes& p = *planes;
  if (nvjpegJpegStreamGetComponentsNum(js, &comps) != NVJPEG_STATUS_SUCCESS || comps != 3 ||
      nvjpegJpegStreamGetFrameDimensions(js, &w, &h) != NVJPEG_STATUS_SUCCESS || w == 0 || h == 0 ||
      std::uint64_t(w) * h > max_pixels ||
      nvjpegJpegStreamGetChromaSubsampling(js, &css) != NVJPEG_STATUS_SUCCESS ||
      !nvjpeg_detail::chroma_factors(css, &p.chroma_h, &p.chroma_v))
    return nullptr;
  int not_supported = 1;
  if (nvjpegDecoderJpegSupported(m.decoder, js, m.params, &not_supported) !=
          NVJPEG_STATUS_SUCCESS ||
      not_supported != 0)
    return nullptr;
  std::size_t bytes = 0;
  std::size_t at[3] = {};
  for (unsigned c = 0; c < 3; ++c) {
    unsigned cw = 0, ch = 0;
    if (nvjpegJpegStreamGetComponentDimensions(js, c, &cw, &ch) != NVJPEG_STATUS_SUCCESS)
      return nullptr;
    p.plane_width[c] = int(cw);
    p.plane_height[c] = int(ch);
    at[c] = bytes;
    bytes += nvjpeg_detail::align_up(std::size_t(cw) * ch);
  }
  // The CPU's part: the entropy decoding, on this thread, while the file before may still be
  // on the device side.
  if (nvjpegDecodeJpegHost(m.handle, m.decoder, m.state, m.params, js) != NVJPEG_STATUS_SUCCESS)
    return nullptr;
  m.turn ^= 1;  // this pinned buffer is now the transfer's; the next file takes the other
  HISTEQ_CUDA_CHECK(cudaEventSynchronize(m.done));  // the file before is off the device side
  p.device = m.device;
  p.width = int(w);
  p.height = int(h);
  // `ready` exists before the memory does, and is recorded after whatever was queued on it
  // (a failure below included), so the planes' destructor never frees memory still written.
  cudaEvent_t ready = nullptr;
  HISTEQ_CUDA_CHECK(
      cudaEventCreateWithFlags(&ready, cudaEventDisableTiming | cudaEventBlockingSync));
  p.ready_ = ready;
  HISTEQ_CUDA_CHECK(cudaMallocFromPoolAsync(&p.base_, bytes, m.pool, m.stream));
  nvjpegImage_t out{};
  for (int c = 0; c < 3; ++c) {
    p.plane[c] = static_cast<std::uint8_t*>(p.base_) + at[c];
    out.channel[c] = p.plane[c];
    out.pitch[c] = std::size_t(p.plane_width[c]);
  }
  const bool ok =
      nvjpegDecodeJpegTransferToDevice(m.handle, m.decoder, m.state, js, m.stream) ==
          NVJPEG_STATUS_SUCCESS &&
      nvjpegDecodeJpegDevice(m.handle, m.decoder, m.state, &out, m.stream) == NVJPEG_STATUS_SUCCESS;
  const cudaError_t recorded = cudaEventRecord(ready, m.stream);
  HISTEQ_CUDA_CHECK(cudaEventRecord(m.done, m.stream));
  if (recorded != cudaSuccess) {  // nothing marks the planes' end: wait for it here
    cudaStreamSynchronize(m.stream);
    HISTEQ_CUDA_CHECK(recorded);
  }
  if (!ok) {
    p.release(m.stream);  // freed after what was queued
    return nullptr;
  }
  nvjpeg_detail::read_metadata(data, size, &p.exif, &p.icc);
  return planes;
}

#endif

}  // namespace histeq::gpu
