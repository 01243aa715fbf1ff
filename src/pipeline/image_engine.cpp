// image_engine.cpp — gpu::ImageEngine (image_engine.hpp): the 8-bit stage sequence on a device.
#include "image_engine.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "equalize/stages.hpp"
#include "histeq/error.hpp"
#include "histeq/planes.hpp"
#include "histogram/region.hpp"
#include "histogram/registry.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"

namespace histeq::gpu {
namespace {

constexpr int kBins = 256;
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// Page-locked host memory that grows (never per image: only when a larger image arrives).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  std::uint8_t* reserve(std::size_t n) {
    if (n > size_) {
      if (p_) cudaFreeHost(p_);
      p_ = nullptr;
      size_ = 0;
      HISTEQ_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n));
      size_ = n;
    }
    return p_;
  }

 private:
  std::uint8_t* p_ = nullptr;
  std::size_t size_ = 0;
};

template <class T>
T* grow(DeviceBuffer<T>& b, std::size_t n) {
  if (b.size() < n) b = DeviceBuffer<T>(n);
  return b.get();
}

/// Every check of the region and the reference, in the CPU twin's order and with its messages:
/// the region fits (Region::check), then the reference (check_match_reference). The runs call it
/// first, before any copy or launch.
void check_options(const EqualizeOptions& opt, int width, int height, int planes_n) {
  if (!opt.region.all()) opt.region.check(width, height, "image");
  if (!opt.reference) return;
  check_match_reference(*opt.reference, planes_n, kBins);
}

/// The name reports give the histogram stage of a region (not a registry kernel).
constexpr const char* kRegionKernel = "region";

}  // namespace

struct ImageEngine::Impl {
  std::optional<Equalizer> own;
  Equalizer& eq;
  bool pinned = false;
  DeviceBuffer<std::uint8_t> d_in, d_planes, d_out;
  PinnedBuffer h_in, h_out;
  // The region's mask and matching's reference histograms on the device, uploaded once per mask
  // or reference (the pointer is the key; the shared_ptr keeps it alive, so it is never reused).
  // The mask's key also holds its pixels' address and size, so a mask image whose pixels were
  // reallocated is uploaded again; pixels changed in place are not seen (Region::mask says so).
  DeviceBuffer<std::uint8_t> d_mask;
  std::shared_ptr<const Image> mask_of;
  const std::uint8_t* mask_data = nullptr;
  std::size_t mask_size = 0;
  DeviceBuffer<std::uint64_t> d_ref;
  std::shared_ptr<const std::vector<Histogram>> ref_of;
  Event e_start, e_up, e_hist, e_lut, e_apply, e_down;
  Impl(StreamHandle external, bool pin) : own(std::in_place, external), eq(*own), pinned(pin) {}
  explicit Impl(Equalizer& borrowed) : eq(borrowed) {}

  cudaStream_t s() const { return reinterpret_cast<cudaStream_t>(eq.stream()); }

  /// The region's mask in device memory (nullptr without one), uploaded when it changes.
  const std::uint8_t* mask(const Region& region) {
    if (!region.mask) return nullptr;
    const std::vector<std::uint8_t>& m = region.mask->pixels;
    if (mask_of != region.mask || mask_data != m.data() || mask_size != m.size()) {
      std::uint8_t* d = grow(d_mask, std::max<std::size_t>(m.size(), 1));
      mask_of.reset();
      if (!m.empty())
        HISTEQ_CUDA_CHECK(cudaMemcpyAsync(d, m.data(), m.size(), cudaMemcpyHostToDevice, s()));
      mask_of = region.mask;
      mask_data = m.data();
      mask_size = m.size();
    }
    return d_mask.get();
  }

  /// Matching's reference histograms in device memory (one per plane, or one for every plane:
  /// *one), uploaded when the reference changes (check_options has checked it).
  const std::uint64_t* reference(const std::shared_ptr<const std::vector<Histogram>>& ref,
                                 bool* one) {
    const std::vector<Histogram>& hs = *ref;
    *one = hs.size() == 1;
    if (ref_of != ref) {
      std::vector<std::uint64_t> packed;
      packed.reserve(hs.size() * kBins);
      for (const Histogram& h : hs) packed.insert(packed.end(), h.begin(), h.end());
      std::uint64_t* d = grow(d_ref, packed.size());
      ref_of.reset();
      // From pageable memory: returns once `packed` is staged, so it may go out of scope.
      HISTEQ_CUDA_CHECK(cudaMemcpyAsync(d, packed.data(), packed.size() * sizeof(std::uint64_t),
                                        cudaMemcpyHostToDevice, s()));
      ref_of = ref;
    }
    return d_ref.get();
  }

  /// The counted histograms of the planes into d_hist (the region's, checked by the caller, or
  /// every pixel's with the registry's `opt.kernel`). Returns the kernel that ran.
  std::string histograms(const std::uint8_t* plane0, int width, int height, int planes_n,
                         const EqualizeOptions& opt, std::uint64_t* d_hist) {
    const std::size_t pixels = std::size_t(width) * std::size_t(height);
    std::string ran;
    if (opt.region.all()) {
      for (int p = 0; p < planes_n; ++p)
        ran = eq.histogram(opt.kernel, plane0 + std::size_t(p) * pixels, pixels, SampleType::u8,
                           kBins, d_hist + std::size_t(p) * kBins, opt.block_size);
      return ran.empty() ? opt.kernel : ran;
    }
    const Roi roi = opt.region.roi.value_or(Roi{0, 0, width, height});
    kernels::RegionLaunch r = kernels::region_launch(width, height, roi.x, roi.y, roi.width,
                                                     roi.height, mask(opt.region), s());
    for (int p = 0; p < planes_n; ++p) {
      r.d_plane = plane0 + std::size_t(p) * pixels;
      r.d_hist = d_hist + std::size_t(p) * kBins;
      kernels::region_histogram_u8(r);
    }
    return kRegionKernel;
  }

  /// The stages on the device: planes → histograms (of opt.region) → (apply) LUTs (the formula,
  /// or matching to opt.reference) → apply. e_up must be recorded before; records e_hist, e_lut,
  /// e_apply. Returns the kernel that ran. check_options(opt) is the caller's.
  std::string stages(const std::uint8_t* d_src, int width, int height, int channels, Mode mode,
                     const EqualizeOptions& opt, bool apply, std::uint8_t* d_dst) {
    const std::size_t pixels = std::size_t(width) * std::size_t(height);
    const int planes_n = plane_count(mode, channels);
    std::uint8_t* planes = nullptr;
    if (channels > 1) {
      planes = grow(d_planes, std::max<std::size_t>(std::size_t(planes_n) * pixels, 1));
      eq.extract_planes(d_src, pixels, channels, mode, planes);
    }
    const std::uint8_t* plane0 = channels > 1 ? planes : d_src;
    std::uint64_t* d_hist = eq.device_hist(planes_n);
    std::string ran = histograms(plane0, width, height, planes_n, opt, d_hist);
    e_hist.record(s());
    if (apply) {
      std::uint8_t* d_luts = eq.device_lut(planes_n);
      if (opt.reference) {
        bool one = false;
        const std::uint64_t* d_ref = reference(opt.reference, &one);
        kernels::launch_match_lut_planes(d_hist, planes_n, d_ref, one, d_luts, s());
      } else {
        eq.cdf_lut(d_hist, planes_n, opt.formula, d_luts);
      }
      e_lut.record(s());
      eq.apply(d_src, pixels, channels, mode, d_luts, d_dst);
      e_apply.record(s());
    }
    return ran;
  }

  /// Queues the copies of the histograms (and LUTs) to the host, synchronizes, and fills rep's
  /// histograms, LUTs, the stage times from e_up on, and the counts a racy kernel lost.
  void collect(std::size_t pixels, int planes_n, bool apply, EqualizeReport& rep) {
    std::vector<std::uint64_t> h_hist(std::size_t(planes_n) * kBins);
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(h_hist.data(), eq.device_hist(planes_n),
                                      h_hist.size() * sizeof(std::uint64_t), cudaMemcpyDeviceToHost,
                                      s()));
    std::vector<std::uint8_t> h_lut(apply ? std::size_t(planes_n) * kBins : 0);
    if (apply)
      HISTEQ_CUDA_CHECK(cudaMemcpyAsync(h_lut.data(), eq.device_lut(planes_n), h_lut.size(),
                                        cudaMemcpyDeviceToHost, s()));
    eq.synchronize();
    rep.times.histogram_ms = e_hist.since(e_up);
    if (apply) {
      rep.times.cdf_lut_ms = e_lut.since(e_hist);
      rep.times.apply_ms = e_apply.since(e_lut);
    }
    rep.histograms.clear();
    rep.luts.clear();
    rep.racy_lost = 0;
    const bool exact = rep.kernel == kRegionKernel || kernels::find_kernel(rep.kernel).exact;
    for (int p = 0; p < planes_n; ++p) {
      rep.histograms.emplace_back(h_hist.begin() + std::ptrdiff_t(p) * kBins,
                                  h_hist.begin() + std::ptrdiff_t(p + 1) * kBins);
      if (!exact) {
        std::uint64_t sum = 0;
        for (std::uint64_t c : rep.histograms.back()) sum += c;
        rep.racy_lost += sum < pixels ? pixels - sum : 0;
      }
      if (apply) {
        Lut l;
        std::copy(h_lut.begin() + std::ptrdiff_t(p) * kBins,
                  h_lut.begin() + std::ptrdiff_t(p + 1) * kBins, l.begin());
        rep.luts.push_back(l);
      }
    }
  }
};

void ImageEngine::run_into(const ImageView<std::uint8_t>& in, const EqualizeOptions& opt,
                           bool apply, std::uint8_t* out, EqualizeReport& rep) {
  Impl& m = *impl_;
  const auto t0 = Clock::now();
  const cudaStream_t s = m.s();
  const Mode mode = opt.mode.value_or(default_mode(in.channels));
  const int planes_n = plane_count(mode, in.channels);
  check_options(opt, in.width, in.height, planes_n);  // before any copy or launch
  const std::size_t pixels = in.pixel_count();
  const int out_ch = output_channels(mode, in.channels);
  const std::size_t in_bytes = in.sample_count();
  const std::size_t out_bytes = pixels * std::size_t(out_ch);
  rep.backend = "cuda";
  rep.device = device_name();
  rep.mode = mode_that_runs(mode, in.channels);
  const bool swap = opt.order == ChannelOrder::bgr && in.channels >= 3 && mode != Mode::rgb;
  std::vector<std::uint8_t> swapped;
  const std::uint8_t* src = in.pixels;
  if (swap) {
    swapped.assign(in.pixels, in.pixels + in_bytes);
    for (std::size_t i = 0; i < pixels; ++i)
      std::swap(swapped[i * std::size_t(in.channels)], swapped[i * std::size_t(in.channels) + 2]);
    src = swapped.data();
  }
  std::uint8_t* d_in = grow(m.d_in, std::max<std::size_t>(in_bytes, 1));
  std::uint8_t* d_out = apply ? grow(m.d_out, std::max<std::size_t>(out_bytes, 1)) : nullptr;
  m.e_start.record(s);
  if (in_bytes > 0)
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(d_in, src, in_bytes, cudaMemcpyHostToDevice, s));
  m.e_up.record(s);
  rep.kernel = m.stages(d_in, in.width, in.height, in.channels, mode, opt, apply, d_out);
  if (apply) {
    if (out_bytes > 0)
      HISTEQ_CUDA_CHECK(cudaMemcpyAsync(out, d_out, out_bytes, cudaMemcpyDeviceToHost, s));
    m.e_down.record(s);
  }
  m.collect(pixels, planes_n, apply, rep);
  rep.times.upload_ms = m.e_up.since(m.e_start);
  if (apply) rep.times.download_ms = m.e_down.since(m.e_apply);
  if (apply && swap && out_ch >= 3)
    for (std::size_t i = 0; i < pixels; ++i)
      std::swap(out[i * std::size_t(out_ch)], out[i * std::size_t(out_ch) + 2]);
  rep.times.total_ms = ms_since(t0);
}

ImageEngine::ImageEngine(StreamHandle external, bool pinned)
    : impl_(std::make_unique<Impl>(external, pinned)) {}
ImageEngine::ImageEngine(Equalizer& borrowed) : impl_(std::make_unique<Impl>(borrowed)) {}
ImageEngine::~ImageEngine() = default;

Equalizer& ImageEngine::equalizer() { return impl_->eq; }
StreamHandle ImageEngine::stream() const { return impl_->eq.stream(); }
std::uint8_t* ImageEngine::device_output() { return impl_->d_out.get(); }

Image ImageEngine::run(const Image& in, Image* reuse, const EqualizeOptions& opt, bool apply,
                       bool download, EqualizeReport& rep) {
  if (opt.order == ChannelOrder::bgr && in.channels >= 3 && download) {
    const Mode mode = opt.mode.value_or(default_mode(in.channels));
    Image out;
    if (apply) {
      out.width = in.width;
      out.height = in.height;
      out.channels = output_channels(mode, in.channels);
      out.exif = in.exif;
      out.icc = in.icc;
      out.pixels.resize(in.pixel_count() * std::size_t(out.channels));
    }
    run_into({in.pixels.data(), in.width, in.height, in.channels}, opt, apply, out.pixels.data(),
             rep);
    return out;
  }
  Impl& m = *impl_;
  const auto t0 = Clock::now();
  const cudaStream_t s = m.s();
  const Mode mode = opt.mode.value_or(default_mode(in.channels));
  const int planes_n = plane_count(mode, in.channels);
  check_options(opt, in.width, in.height, planes_n);  // before any copy or launch
  const std::size_t pixels = in.pixel_count();
  const int out_ch = output_channels(mode, in.channels);
  const std::size_t in_bytes = in.byte_count();
  const std::size_t out_bytes = pixels * std::size_t(out_ch);
  rep.backend = "cuda";
  rep.device = device_name();
  rep.mode = mode_that_runs(mode, in.channels);

  std::uint8_t* d_in = grow(m.d_in, std::max<std::size_t>(in_bytes, 1));
  std::uint8_t* d_out = apply ? grow(m.d_out, std::max<std::size_t>(out_bytes, 1)) : nullptr;
  double stage_in_ms = 0, stage_out_ms = 0;  // host copies into / out of page-locked buffers
  const std::uint8_t* src = in.pixels.data();
  if (m.pinned && in_bytes > 0) {
    const auto t = Clock::now();
    std::uint8_t* h = m.h_in.reserve(in_bytes);
    std::memcpy(h, src, in_bytes);
    src = h;
    stage_in_ms = ms_since(t);
  }
  m.e_start.record(s);
  if (in_bytes > 0)
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(d_in, src, in_bytes, cudaMemcpyHostToDevice, s));
  m.e_up.record(s);
  rep.kernel = m.stages(d_in, in.width, in.height, in.channels, mode, opt, apply, d_out);

  Image out;
  std::uint8_t* h_out = nullptr;
  if (apply) {
    out.width = in.width;
    out.height = in.height;
    out.channels = out_ch;
    out.exif = in.exif;
    out.icc = in.icc;
    if (download && out_bytes > 0) {
      if (m.pinned) {
        h_out = m.h_out.reserve(out_bytes);
      } else if (reuse && out_ch == in.channels) {
        h_out = reuse->pixels.data();  // read by the upload above, queued before this copy
      } else {
        out.pixels.resize(out_bytes);
        h_out = out.pixels.data();
      }
      HISTEQ_CUDA_CHECK(cudaMemcpyAsync(h_out, d_out, out_bytes, cudaMemcpyDeviceToHost, s));
    }
    m.e_down.record(s);
  }
  m.collect(pixels, planes_n, apply, rep);
  rep.times.upload_ms = m.e_up.since(m.e_start);
  if (apply) {
    rep.times.download_ms = m.e_down.since(m.e_apply);
    if (download && out_bytes > 0) {
      const auto t = Clock::now();
      if (reuse && out_ch == in.channels) {
        if (m.pinned) std::memcpy(reuse->pixels.data(), h_out, out_bytes);
        out.pixels = std::move(reuse->pixels);
      } else if (m.pinned) {
        out.pixels.assign(h_out, h_out + out_bytes);
      }
      stage_out_ms = ms_since(t);
    }
    rep.times.download_ms += stage_out_ms;
  }
  rep.times.upload_ms += stage_in_ms;
  rep.times.total_ms = ms_since(t0);
  return out;
}

void ImageEngine::run_device(const std::uint8_t* d_in, int width, int height, int channels,
                             const EqualizeOptions& opt, std::uint8_t* d_out, EqualizeReport& rep) {
  if ((channels < 1 || channels > 4) || width <= 0 || height <= 0 || !d_in || !d_out)
    throw Error("run_device: need a decoded device image with 1..4 channels and a size");
  Impl& m = *impl_;
  const auto t0 = Clock::now();
  const Mode mode = opt.mode.value_or(default_mode(channels));
  check_options(opt, width, height, plane_count(mode, channels));  // before any launch
  const std::size_t pixels = std::size_t(width) * std::size_t(height);
  rep.backend = "cuda";
  rep.device = device_name();
  rep.mode = mode_that_runs(mode, channels);
  m.e_start.record(m.s());
  m.e_up.record(m.s());
  rep.kernel = m.stages(d_in, width, height, channels, mode, opt, true, d_out);
  m.collect(pixels, plane_count(mode, channels), true, rep);
  rep.times.total_ms = ms_since(t0);
}

}  // namespace histeq::gpu
