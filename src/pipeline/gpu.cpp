// gpu.cpp — histeq::gpu::Equalizer: owns the stream and the small device buffers, looks kernels up
// in the registry, and queues the device stages (kernels/equalize/stages.hpp) on its stream.
#include "histeq/gpu.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "batched/batched.hpp"
#include "equalize/fused.hpp"
#include "equalize/stages.hpp"
#include "histeq/error.hpp"
#include "histogram/region.hpp"
#include "histogram/registry.hpp"
#include "support/device_buffer.hpp"
#include "support/pdl_edges.hpp"

static_assert(std::is_same_v<histeq::gpu::StreamHandle, cudaStream_t>,
              "gpu.hpp's StreamHandle must be cudaStream_t");

namespace histeq::gpu {

namespace {
constexpr int kBins = 256;

/// Grows `buf` to at least `count` elements (contents are not kept).
template <typename T>
T* ensure(DeviceBuffer<T>& buf, std::size_t count) {
  if (buf.size() < count) {
    buf.reset();  // free first, so that the old and new buffers never need to fit together
    buf = DeviceBuffer<T>(count);
  }
  return buf.get();
}

kernels::HistogramLaunch make_call(const void* d_in, std::size_t n, SampleType type, int bins,
                                   std::uint64_t* d_hist, cudaStream_t s, int block_size) {
  kernels::HistogramLaunch c;
  c.d_in = d_in;
  c.n = n;
  c.type = type;
  c.bins = bins;
  c.d_hist = d_hist;
  c.stream = s;
  c.block_size = block_size;
  return c;
}

const kernels::KernelEntry& lookup(const std::string& kernel, const kernels::HistogramLaunch& c) {
  if (c.bins < 1 || c.bins > kMaxBins) {
    throw UsageError("bins must be in 1.." + std::to_string(kMaxBins) + ", got " +
                     std::to_string(c.bins));
  }
  if (kernel == "auto") return kernels::choose_auto(c);
  const kernels::KernelEntry& e = kernels::find_kernel(kernel);
  if (const char* why = e.unsupported(c.type, c.bins)) {
    throw UsageError("kernel '" + kernel + "' does not support " + to_string(c.type) + " with " +
                     std::to_string(c.bins) + " bins: " + why);
  }
  return e;
}

/// Whether the masked one-launch equalizer serves the call: a mask alone over the whole plane,
/// at the input's address modulo 16 as the output is, which is the input or apart from it.
bool fused_region_serves(const std::uint8_t* d_in, const std::uint8_t* d_out, int width, int height,
                         int x, int y, int w, int h, const std::uint8_t* d_mask) {
  const std::size_t n = std::size_t(width) * std::size_t(height);
  const auto a = reinterpret_cast<std::uintptr_t>(d_in),
             b = reinterpret_cast<std::uintptr_t>(d_out);
  const bool apart_or_same = a == b || a >= b + n || b >= a + n;
  return d_mask != nullptr && x == 0 && y == 0 && w == width && h == height && n > 0 &&
         n < kernels::kFusedMaskMaxSamples && a % 16 == b % 16 &&
         reinterpret_cast<std::uintptr_t>(d_mask) % 16 == a % 16 && apart_or_same &&
         kernels::fused_equalize_supported();
}
}  // namespace

struct Equalizer::Impl {
  std::optional<Stream> own;  // created unless the constructor got an external stream
  cudaStream_t external = nullptr;
  cudaStream_t s() const { return external ? external : own->get(); }
  // The batched equalizer's per-image histograms + tickets: zeroed when allocated, left zero.
  DeviceBuffer<std::uint8_t> batch_scratch;
  unsigned batch_epoch = 0;  // the queued uniform kernel's ready-flag value, never 0
  DeviceBuffer<std::uint8_t> scratch;
  // For kernels with zeroed_scratch (contract.hpp): zeroed when allocated, left zero by them, so
  // never shared with the other kernels' scratch, whose contents they leave undefined.
  DeviceBuffer<std::uint8_t> zeroed_scratch;
  DeviceBuffer<std::uint64_t> hist;
  DeviceBuffer<std::uint8_t> lut;
  // The fused equalizers' two alternating histograms (each call zeroes the other one).
  DeviceBuffer<std::uint64_t> fused_hist;
  int fused_flip = 0;
  // The region histogram's grid state (kernels::region_lut_u8): zeroed when allocated, left zero.
  DeviceBuffer<std::uint8_t> region_state;
  /// The fused histogram for this call (zero) and the one it zeroes for the next; allocated and
  /// zeroed on first use. The caller calls fused_launched() once its launch is queued: a launch
  /// that throws leaves the pair as it was (this call's histogram still zero), so that the next
  /// call does not count into the histogram the failed one should have zeroed.
  std::pair<std::uint64_t*, std::uint64_t*> fused_pair() {
    if (fused_hist.size() == 0) {
      fused_hist = DeviceBuffer<std::uint64_t>(2 * kBins);
      HISTEQ_CUDA_CHECK(cudaMemsetAsync(fused_hist.get(), 0, fused_hist.bytes(), s()));
    }
    std::uint64_t* cur = fused_hist.get() + fused_flip * kBins;
    std::uint64_t* next = fused_hist.get() + (1 - fused_flip) * kBins;
    return {cur, next};
  }
  void fused_launched() { fused_flip ^= 1; }
  const std::uint64_t* last_hist = nullptr;
  Tuning tuning;  // the policy unless set_tuning() said otherwise
};

Equalizer::Equalizer() : impl_(std::make_unique<Impl>()) { impl_->own.emplace(); }
Equalizer::Equalizer(StreamHandle external) : impl_(std::make_unique<Impl>()) {
  if (external == nullptr) {
    impl_->own.emplace();
  } else {
    impl_->external = external;
  }
}
Equalizer::~Equalizer() = default;
Equalizer::Equalizer(Equalizer&&) noexcept = default;
Equalizer& Equalizer::operator=(Equalizer&&) noexcept = default;

StreamHandle Equalizer::stream() const { return impl_->s(); }

void Equalizer::synchronize() const { HISTEQ_CUDA_CHECK(cudaStreamSynchronize(impl_->s())); }

void Equalizer::set_tuning(const Tuning& tuning) { impl_->tuning = tuning; }
const Tuning& Equalizer::tuning() const { return impl_->tuning; }

void Equalizer::set_stream(StreamHandle external) {
  if (external == nullptr && !impl_->own) impl_->own.emplace();
  impl_->external = external;
}

void Equalizer::equalize_batch(const BatchImage* images, std::size_t count, Formula formula) {
  if (count == 0) return;
  if (images == nullptr) throw UsageError("equalize_batch: null image table");
  static_assert(sizeof(BatchImage) == sizeof(kernels::BatchImage), "same layout");
  std::uint8_t* d_luts = device_lut(int(count));
  // Grown before its size is read: the order in which call arguments are evaluated is
  // unspecified (GCC reads them right to left, which passed the size before the growth).
  void* scratch = batch_scratch(count);
  kernels::launch_equalize_batch(reinterpret_cast<const kernels::BatchImage*>(images), count,
                                 formula, d_luts, scratch, impl_->batch_scratch.bytes(), impl_->s(),
                                 impl_->tuning);
}

void Equalizer::match_batch(const BatchImage* images, std::size_t count,
                            const std::uint64_t* d_ref256) {
  if (count == 0) return;
  if (images == nullptr || d_ref256 == nullptr) throw UsageError("match_batch: null pointer");
  if (count > std::size_t(std::numeric_limits<int>::max()))
    throw UsageError("match_batch: too many images for one call");
  const auto* table = reinterpret_cast<const kernels::BatchImage*>(images);
  impl_->last_hist = nullptr;  // last_equalize_histogram: equalize_gray's, which this overwrites
  std::uint64_t* d_hists = device_hist(int(count));
  std::uint8_t* d_luts = device_lut(int(count));
  kernels::launch_histogram_batch(table, count, d_hists, impl_->s());
  kernels::launch_match_lut_planes(d_hists, int(count), d_ref256, /*one_reference=*/true, d_luts,
                                   impl_->s());
  kernels::launch_apply_batch(table, count, d_luts, impl_->s(), impl_->tuning);
}

void Equalizer::equalize_batch(const std::uint8_t* d_in, std::uint8_t* d_out, std::size_t count,
                               std::size_t n, Formula formula, BatchPath path) {
  if (count == 0 || n == 0) return;
  std::uint8_t* d_luts = device_lut(int(count));
  if (path == BatchPath::automatic) {
    switch (kernels::choose_batch_path(d_in, d_out, count, n, impl_->tuning)) {
      case kernels::BatchPath::cluster: path = BatchPath::cluster; break;
      case kernels::BatchPath::queued: path = BatchPath::queued; break;
      default: path = BatchPath::two_launch;
    }
  }
  if (path == BatchPath::cluster) {
    if (kernels::cluster_batch_blocks(d_in, d_out, count, n, impl_->tuning) > 0) {
      kernels::launch_equalize_batch_uniform_cluster(d_in, d_out, count, n, formula, d_luts,
                                                     impl_->s(), impl_->tuning);
      return;
    }
    path = BatchPath::two_launch;  // documented: cluster runs two_launch where it cannot serve
  }
  void* scratch = batch_scratch(count);
  if (path == BatchPath::two_launch) {
    kernels::launch_equalize_batch_uniform_pair(d_in, d_out, count, n, formula, d_luts, scratch,
                                                impl_->batch_scratch.bytes(), impl_->s(),
                                                impl_->tuning);
    return;
  }
  if (++impl_->batch_epoch == 0) impl_->batch_epoch = 1;
  kernels::launch_equalize_batch_uniform(d_in, d_out, count, n, formula, d_luts, scratch,
                                         impl_->batch_scratch.bytes(), impl_->batch_epoch,
                                         impl_->s());
}

void* Equalizer::batch_scratch(std::size_t count) {
  const std::size_t bytes = kernels::batch_scratch_bytes(count);
  if (impl_->batch_scratch.size() < bytes) {
    ensure(impl_->batch_scratch, bytes);
    HISTEQ_CUDA_CHECK(
        cudaMemsetAsync(impl_->batch_scratch.get(), 0, impl_->batch_scratch.bytes(), impl_->s()));
  }
  return impl_->batch_scratch.get();
}

std::string Equalizer::resolve_kernel(const std::string& kernel, const void* d_in, std::size_t n,
                                      SampleType type, int bins, int block_size) const {
  const auto c = make_call(d_in, n, type, bins, nullptr, impl_->s(), block_size);
  return lookup(kernel, c).name;
}

std::string Equalizer::histogram(const std::string& kernel, const void* d_in, std::size_t n,
                                 SampleType type, int bins, std::uint64_t* d_hist, int block_size) {
  auto c = make_call(d_in, n, type, bins, d_hist, impl_->s(), block_size);
  const kernels::KernelEntry& e = lookup(kernel, c);
  const std::size_t scratch = e.scratch_bytes(n, bins, type);
  DeviceBuffer<std::uint8_t>& buf = e.zeroed_scratch ? impl_->zeroed_scratch : impl_->scratch;
  if (buf.size() < scratch) {
    ensure(buf, scratch);
    kernels::prepare_scratch(e, buf.get(), buf.bytes(), impl_->s());  // once per allocation
  }
  c.d_scratch = scratch > 0 ? buf.get() : nullptr;
  kernels::run_histogram(e, c);
  return e.name;
}

void Equalizer::cdf_lut(const std::uint64_t* d_hist, int planes, Formula formula,
                        std::uint8_t* d_luts) {
  kernels::launch_cdf_lut_planes(d_hist, planes, d_luts, formula, impl_->s());
}

void Equalizer::extract_planes(const std::uint8_t* d_in, std::size_t pixels, int channels,
                               Mode mode, std::uint8_t* d_planes) {
  kernels::launch_extract_planes(d_in, pixels, channels, mode, d_planes, impl_->s());
}

void Equalizer::apply(const std::uint8_t* d_in, std::size_t pixels, int channels, Mode mode,
                      const std::uint8_t* d_luts, std::uint8_t* d_out) {
  kernels::launch_apply(d_in, pixels, channels, mode, d_luts, d_out, impl_->s());
}

std::string Equalizer::equalize_gray(const std::uint8_t* d_in, std::uint8_t* d_out, std::size_t n,
                                     Formula formula, const std::string& kernel) {
  std::uint8_t* d_lut = device_lut(1);
  const bool same_phase =
      reinterpret_cast<std::uintptr_t>(d_in) % 16 == reinterpret_cast<std::uintptr_t>(d_out) % 16;
  if (kernel == "auto" && same_phase && kernels::fused_equalize_supported()) {
    const auto [cur, next] = impl_->fused_pair();
    kernels::launch_fused_equalize(d_in, d_out, n, formula, cur, next, d_lut, impl_->s());
    impl_->fused_launched();
    impl_->last_hist = cur;
    return "fused";
  }
  std::uint64_t* d_hist = device_hist(1);
  impl_->last_hist = d_hist;
  std::string ran = histogram(kernel, d_in, n, SampleType::u8, kBins, d_hist);
  cdf_lut(d_hist, 1, formula, d_lut);
  apply(d_in, n, 1, Mode::gray, d_lut, d_out);
  return ran;
}

std::string Equalizer::equalize_gray_region(const std::uint8_t* d_in, std::uint8_t* d_out,
                                            int width, int height, int x, int y, int w, int h,
                                            const std::uint8_t* d_mask, Formula formula) {
  if (width < 0 || height < 0 || x < 0 || y < 0 || w < 0 || h < 0 || std::int64_t(x) + w > width ||
      std::int64_t(y) + h > height)
    throw UsageError("equalize_gray_region: the rectangle is not inside the plane");
  const std::size_t n = std::size_t(width) * std::size_t(height);
  if (n > 0 && (d_in == nullptr || d_out == nullptr))
    throw UsageError("equalize_gray_region: null device pointer");
  impl_->last_hist = nullptr;  // last_equalize_histogram: equalize_gray's, which this overwrites
  std::uint64_t* d_hist = device_hist(1);
  std::uint8_t* d_lut = device_lut(1);
  const cudaStream_t s = impl_->s();
  const Tuning& t = impl_->tuning;
  using Path = RegionTuning::Equalize;
  kernels::RegionLaunch r = kernels::region_launch(width, height, x, y, w, h, d_mask, s);
  r.d_plane = d_in;
  r.d_hist = d_hist;
  if (t.region.equalize == Path::stages) {
    kernels::region_histogram_u8(r, t);
    cdf_lut(d_hist, 1, formula, d_lut);
    apply(d_in, n, 1, Mode::gray, d_lut, d_out);
    return "stages";
  }
  if (t.region.equalize != Path::pair &&
      fused_region_serves(d_in, d_out, width, height, x, y, w, h, d_mask)) {
    const auto [cur, next] = impl_->fused_pair();
    kernels::launch_fused_equalize_masked(d_in, d_out, n, d_mask, formula, cur, next, d_hist, d_lut,
                                          s, t);
    impl_->fused_launched();
    return "fused";
  }
  if (impl_->region_state.size() == 0) {
    ensure(impl_->region_state, kernels::region_state_bytes());
    HISTEQ_CUDA_CHECK(
        cudaMemsetAsync(impl_->region_state.get(), 0, impl_->region_state.bytes(), s));
  }
  kernels::region_lut_u8(r, impl_->region_state.get(), formula, d_lut, t);
  kernels::launch_apply_gray(d_in, n, d_lut, d_out, s, kernels::pdl::kRegionEqualize, t);
  return "pair";
}

const std::uint64_t* Equalizer::last_equalize_histogram() const { return impl_->last_hist; }

std::uint64_t* Equalizer::device_hist(int planes) {
  if (planes < 1) throw UsageError("device_hist: planes must be >= 1");
  return ensure(impl_->hist, std::size_t(planes) * kBins);
}

std::uint8_t* Equalizer::device_lut(int planes) {
  if (planes < 1) throw UsageError("device_lut: planes must be >= 1");
  return ensure(impl_->lut, std::size_t(planes) * kBins);
}

std::string device_name() {
  int dev = 0;
  HISTEQ_CUDA_CHECK(cudaGetDevice(&dev));
  // Cached per device: cudaGetDeviceProperties queries every attribute, and reports ask for the
  // name once per image.
  static std::mutex mu;
  static std::map<int, std::string> names;
  std::lock_guard<std::mutex> lock(mu);
  auto at = names.find(dev);
  if (at != names.end()) return at->second;
  cudaDeviceProp prop{};
  HISTEQ_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  return names[dev] = prop.name;
}

}  // namespace histeq::gpu
