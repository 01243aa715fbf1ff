// histeq/gpu.hpp — the device-level API: equalization stages on data that is already in device
// memory, for callers that keep their images on the GPU (and for the pipeline and benchmark).
// Each stage is one asynchronous launch on the Equalizer's stream (DESIGN.md: histogram → CDF →
// LUT → apply, the libvips split); nothing here synchronizes with the host unless it says so.
// This header includes no CUDA header: the stream is the runtime's opaque handle.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "histeq/tuning.hpp"
#include "histeq/types.hpp"

struct CUstream_st;  // the CUDA runtime's stream type; cudaStream_t is CUstream_st*

namespace histeq::gpu {

/// Same type as cudaStream_t.
using StreamHandle = CUstream_st*;

/// A reusable set of device resources for equalizing on the current CUDA device: a non-blocking
/// stream, histogram scratch, histogram and LUT buffers. Buffers grow as needed and are kept for
/// the next call (no allocation in steady state). Not thread-safe; one per host thread.
/// Every method throws CudaError on a failed CUDA call, DeviceOutOfMemory when a buffer cannot
/// grow, UsageError for a bad argument (unknown kernel, unsupported type/bins, channels, mode).
/// Device pointers: allocated on the same device, any alignment.
class Equalizer {
 public:
  /// Creates the stream on the current device. Throws CudaError (e.g. no usable device).
  Equalizer();
  /// Runs every stage on `external` (a cudaStream_t of the current device, e.g. the caller's
  /// PyTorch or CuPy stream), which the caller owns and keeps alive while the Equalizer uses it.
  /// nullptr: the Equalizer's own stream, as Equalizer() (cudaStreamLegacy for the default one).
  explicit Equalizer(StreamHandle external);
  ~Equalizer();
  Equalizer(Equalizer&&) noexcept;
  Equalizer& operator=(Equalizer&&) noexcept;
  Equalizer(const Equalizer&) = delete;
  Equalizer& operator=(const Equalizer&) = delete;

  /// The stream every stage runs on (a cudaStream_t).
  StreamHandle stream() const;
  /// Blocks the host until all work queued on stream() is done; throws CudaError on a fault.
  void synchronize() const;
  /// From now on, runs on `external` (owned by the caller, as the constructor above); nullptr
  /// goes back to the Equalizer's own stream (pass cudaStreamLegacy for the legacy default
  /// stream, whose handle is otherwise also 0). The buffers are shared across streams: the caller
  /// orders work queued earlier on another stream before the next call (e.g. an event).
  void set_stream(StreamHandle external);
  /// The kernels' choices for the calls that follow (histeq/tuning.hpp: BatchTuning and the
  /// programmatic launches): the policy by default; for measurement and tests.
  void set_tuning(const Tuning& tuning);
  const Tuning& tuning() const;

  /// One gray image of a batch (equalize_batch): d_in[0,n) → d_out[0,n), device memory, any
  /// alignment; d_out may equal d_in, or must not overlap it.
  struct BatchImage {
    const std::uint8_t* d_in = nullptr;
    std::uint8_t* d_out = nullptr;
    std::size_t n = 0;
  };
  /// Equalizes `count` gray images of any sizes, each byte-identical to equalize_gray alone
  /// (256-bin histogram, make_lut(formula), lut[in]), in 2 launches per 64 images
  /// (kernels/batched/batched.cu: per-image histograms whose last block writes the LUT, then one
  /// apply). Asynchronous; afterwards device_lut(count) holds the LUTs (image i at i·256) until the
  /// next call. Throws UsageError for null or overlapping pointers.
  void equalize_batch(const BatchImage* images, std::size_t count, Formula formula);
  /// Matches `count` gray images of any sizes to one reference histogram d_ref256[256] (uint64,
  /// device memory, counting at least one pixel: the caller checks, check_match_reference), each
  /// byte-identical to the stage sequence with that reference (256-bin histogram, match_lut,
  /// lut[in]): per-image histograms in one launch per 64 images, the LUTs in one
  /// (kernels/equalize/match_lut.cu), the apply in one launch per 64 images. Asynchronous;
  /// afterwards device_hist(count) holds the histograms and device_lut(count) the LUTs (image i
  /// at i·256) until the next call. Throws UsageError for null or overlapping pointers.
  void match_batch(const BatchImage* images, std::size_t count, const std::uint64_t* d_ref256);
  /// The same for `count` images of n bytes each, back to back (image i at d_in + i·n → d_out +
  /// i·n). `path` picks how (kernels/batched/batched.hpp's BatchPath): automatic (the policy:
  /// cluster where it can serve the batch, else the queue for large batches, else two launches),
  /// queued (one launch: a queue that applies each image a few images after its histogram, while it
  /// is still in L2), two_launch (histogram + LUT launch, then apply launch), cluster (one launch:
  /// one thread-block cluster per image holding it in registers, images of 64 KiB to 2 MiB whose
  /// size is a multiple of 16 on compute capability 9.0+; elsewhere it runs two_launch). Every
  /// path gives the same bytes.
  enum class BatchPath : std::uint8_t { automatic, queued, two_launch, cluster };
  void equalize_batch(const std::uint8_t* d_in, std::uint8_t* d_out, std::size_t count,
                      std::size_t n, Formula formula, BatchPath path = BatchPath::automatic);

  /// The registry name `kernel` resolves to for this call: itself when it exists and supports
  /// (type, bins), kernels::choose_auto for "auto". Throws UsageError otherwise ("unknown
  /// kernel 'x'; known: ..." or "kernel 'x' does not support ...").
  std::string resolve_kernel(const std::string& kernel, const void* d_in, std::size_t n,
                             SampleType type, int bins, int block_size = 0) const;

  /// Histogram of n device samples into d_hist[0, bins) (uint64, overwritten) with the named
  /// kernel ("auto": kernels::choose_auto). Grows the scratch buffer as the kernel's
  /// scratch_bytes(n, bins, type) requires. Returns the name of the kernel that ran.
  std::string histogram(const std::string& kernel, const void* d_in, std::size_t n, SampleType type,
                        int bins, std::uint64_t* d_hist, int block_size = 0);

  /// CDF + LUT of `planes` 256-bin histograms: d_hist[p·256 + b] → d_luts[p·256 + v], each equal
  /// to histeq::make_lut(hist_p, formula).
  void cdf_lut(const std::uint64_t* d_hist, int planes, Formula formula, std::uint8_t* d_luts);

  /// The planes of an interleaved image (planes.hpp; as cpu::extract_planes) into d_planes
  /// (plane_count(mode, channels) · pixels bytes).
  void extract_planes(const std::uint8_t* d_in, std::size_t pixels, int channels, Mode mode,
                      std::uint8_t* d_planes);

  /// The equalized image from per-plane LUTs d_luts[p·256 + v] (as cpu::apply) into d_out
  /// (pixels · output_channels(mode, channels) bytes, not overlapping d_in).
  void apply(const std::uint8_t* d_in, std::size_t pixels, int channels, Mode mode,
             const std::uint8_t* d_luts, std::uint8_t* d_out);

  /// The whole chain for a gray image already in device memory: histogram (256 bins, u8) →
  /// CDF + LUT → apply, d_in[0,n) → d_out[0,n), not overlapping (the fused path also
  /// takes d_in == d_out). Asynchronous. kernel "auto" with d_in and d_out at the same address
  /// modulo 16 runs the fused single-launch equalizer (kernels/equalize/fused.hpp: one cooperative
  /// launch, the image read once when it fits in the threads' registers) and returns "fused"; any
  /// other kernel name runs histogram → cdf_lut → apply with that histogram kernel and returns its
  /// name. Afterwards device_lut() holds the LUT and last_equalize_histogram() the histogram, until
  /// the next call.
  std::string equalize_gray(const std::uint8_t* d_in, std::uint8_t* d_out, std::size_t n,
                            Formula formula, const std::string& kernel = "auto");

  /// Masked or rectangle equalization of a gray plane already in device memory (histeq/match.hpp's
  /// Region rule): d_in holds width x height bytes, row-major; the histogram counts the pixels
  /// (c, r) of the rectangle x <= c < x + w, y <= r < y + h (inside the plane) where d_mask (width
  /// x height bytes in the plane's layout, or nullptr: every pixel of the rectangle) is nonzero;
  /// its LUT (make_lut(histogram, formula); an empty histogram gives the identity) maps every
  /// pixel into d_out (not overlapping d_in; the fused path also takes d_in == d_out).
  /// Asynchronous. Afterwards device_hist() holds the histogram and device_lut() the LUT, until
  /// the next call. tuning().region.equalize picks the path (histeq/tuning.hpp; automatic: fused
  /// where it can serve the call, else pair); returns the one that ran: "fused", "pair" or
  /// "stages". Throws UsageError for a rectangle outside the plane or a null pointer.
  std::string equalize_gray_region(const std::uint8_t* d_in, std::uint8_t* d_out, int width,
                                   int height, int x, int y, int w, int h,
                                   const std::uint8_t* d_mask, Formula formula);

  /// The 256-bin histogram of the last equalize_gray call (device memory), or nullptr (also
  /// after a call that reuses its buffer: equalize_gray_region, match_batch).
  const std::uint64_t* last_equalize_histogram() const;

  /// The Equalizer's own device buffers for `planes` 256-bin histograms (uint64) and LUTs (u8),
  /// grown on demand; valid until the next call that grows them.
  std::uint64_t* device_hist(int planes = 1);
  std::uint8_t* device_lut(int planes = 1);

 private:
  void* batch_scratch(std::size_t count);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The current device's name (cudaGetDeviceProperties). Throws CudaError.
std::string device_name();

}  // namespace histeq::gpu
