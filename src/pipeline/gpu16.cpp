// gpu16.cpp — gpu::Equalizer16 and the host-level equalize16 (gpu16.hpp).
#include "histeq/gpu16.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "histeq/equalize16.hpp"
#include "histeq/error.hpp"
#include "histeq/pipeline.hpp"
#include "histogram/region.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"
#include "u16/hist_u16.hpp"

namespace histeq::gpu {

struct Equalizer16::Impl {
  Stream stream;
  cudaStream_t external = nullptr;  // set_stream: the caller's stream, else the own one
  cudaStream_t s() const { return external ? external : stream.get(); }
  DeviceBuffer<std::uint64_t> hist{std::size_t(kBins16)};
  DeviceBuffer<std::uint16_t> lut{std::size_t(kBins16)};
  // Packed partials and spill; the spill must be zero before the first call (and is left so).
  DeviceBuffer<std::uint32_t> scratch{kernels::hist_u16_scratch_words()};
  Tuning tuning;                              // the policy unless set_tuning() said otherwise
  DeviceBuffer<std::uint64_t> match_scratch;  // match_lut_u16's (any contents), on first use
  Impl() {
    HISTEQ_CUDA_CHECK(
        cudaMemsetAsync(scratch.get(), 0, scratch.size() * sizeof(std::uint32_t), stream.get()));
  }
};

Equalizer16::Equalizer16() : impl_(std::make_unique<Impl>()) {}
Equalizer16::~Equalizer16() = default;
Equalizer16::Equalizer16(Equalizer16&&) noexcept = default;
Equalizer16& Equalizer16::operator=(Equalizer16&&) noexcept = default;
StreamHandle Equalizer16::stream() const { return impl_->s(); }
void Equalizer16::synchronize() const { HISTEQ_CUDA_CHECK(cudaStreamSynchronize(impl_->s())); }
void Equalizer16::set_stream(StreamHandle external) { impl_->external = external; }
void Equalizer16::set_tuning(const Tuning& tuning) { impl_->tuning = tuning; }
const Tuning& Equalizer16::tuning() const { return impl_->tuning; }
const std::uint64_t* Equalizer16::device_hist() const { return impl_->hist.get(); }
const std::uint16_t* Equalizer16::device_lut() const { return impl_->lut.get(); }

void Equalizer16::histogram(const std::uint16_t* d_in, std::size_t n, std::uint64_t* d_hist) {
  if (d_hist == nullptr) throw UsageError("histogram16: null histogram pointer");
  kernels::hist_u16(d_in, n, d_hist, impl_->s(), impl_->scratch.get(), /*assign=*/true,
                    impl_->tuning);
}

void Equalizer16::equalize(const std::uint16_t* d_in, std::uint16_t* d_out, std::size_t n) {
  histogram(d_in, n, impl_->hist.get());
  kernels::lut_u16(impl_->hist.get(), impl_->lut.get(), impl_->s(), impl_->tuning);
  kernels::apply_u16(d_in, d_out, n, impl_->lut.get(), impl_->s(), impl_->tuning);
}

void Equalizer16::equalize_region(const std::uint16_t* d_in, std::uint16_t* d_out, int width,
                                  int height, int x, int y, int w, int h,
                                  const std::uint8_t* d_mask, const std::uint64_t* d_ref) {
  if (width < 1 || height < 1 || x < 0 || y < 0 || w < 1 || h < 1 || x > width - w ||
      y > height - h)
    throw UsageError("equalize16_region: the rectangle is empty or not inside the plane");
  if (d_in == nullptr || d_out == nullptr) throw UsageError("equalize16_region: null pointer");
  Impl& m = *impl_;
  kernels::RegionLaunch r = kernels::region_launch(width, height, x, y, w, h, d_mask, m.s());
  r.d_plane = d_in;
  r.d_hist = m.hist.get();
  kernels::hist_u16_region(r, m.scratch.get(), m.tuning);
  if (d_ref != nullptr) {
    if (m.match_scratch.size() == 0)
      m.match_scratch = DeviceBuffer<std::uint64_t>(kernels::match_lut_u16_scratch_words());
    kernels::match_lut_u16(m.hist.get(), d_ref, m.lut.get(), m.match_scratch.get(), m.s());
  } else {
    kernels::lut_u16(m.hist.get(), m.lut.get(), m.s(), m.tuning);
  }
  const std::size_t n = std::size_t(width) * std::size_t(height);
  kernels::apply_u16(d_in, d_out, n, m.lut.get(), m.s(), m.tuning);
}

}  // namespace histeq::gpu

namespace histeq {

namespace {

void check16(const Image16& img, Mode mode, const char* what, const char* verb) {
  if (img.width < 1 || img.height < 1 || img.channels < 1 || img.channels > 4 ||
      img.pixels.size() != img.sample_count()) {
    throw Error(std::string(what) + ": empty or inconsistent 16-bit image");
  }
  if (img.channels >= 3 && mode != Mode::rgb) {
    throw UsageError(std::string("16-bit colour images are ") + verb + " per channel: mode '" +
                     to_string(mode) + "' needs 16-bit YCbCr; use mode rgb (or 8 bits)");
  }
}

/// The device side of one 16-bit image's planes: the plane, its counted histogram (every sample
/// with the packed kernel, or the region's), the LUT (the formula, or matching to a reference)
/// and the apply, on the Equalizer16's stream.
class Planes16 {
 public:
  Planes16(const Image16& img, const Region& region)
      : eq_(), n_(img.pixel_count()), w_(img.width), h_(img.height), region_(region), d_(n_) {
    if (region.all()) return;  // region.check is the caller's (before any work)
    if (region.mask) {
      const std::vector<std::uint8_t>& m = region.mask->pixels;
      mask_ = DeviceBuffer<std::uint8_t>(std::max<std::size_t>(m.size(), 1));
      if (!m.empty())
        HISTEQ_CUDA_CHECK(
            cudaMemcpyAsync(mask_.get(), m.data(), m.size(), cudaMemcpyHostToDevice, s()));
    }
    scratch_ = DeviceBuffer<std::uint32_t>(kernels::hist_u16_scratch_words());
    HISTEQ_CUDA_CHECK(cudaMemsetAsync(scratch_.get(), 0, scratch_.bytes(), s()));
  }
  cudaStream_t s() const { return eq_.stream(); }
  std::uint16_t* plane() { return d_.get(); }
  std::uint64_t* hist() { return hist_.get(); }

  /// Uploads a plane (n samples) and counts it into hist().
  void count(const std::uint16_t* host) {
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(d_.get(), host, n_ * 2, cudaMemcpyHostToDevice, s()));
    if (region_.all()) {
      eq_.histogram(d_.get(), n_, hist_.get());
      return;
    }
    const Roi roi = region_.roi.value_or(Roi{0, 0, w_, h_});
    kernels::RegionLaunch r = kernels::region_launch(w_, h_, roi.x, roi.y, roi.width, roi.height,
                                                     region_.mask ? mask_.get() : nullptr, s());
    r.d_plane = d_.get();
    r.d_hist = hist_.get();
    kernels::hist_u16_region(r, scratch_.get(), eq_.tuning());
  }

  /// The LUT of hist() (ref: the reference's 65536 counts on the device, or nullptr) applied to
  /// the plane in place, and the plane downloaded into `host`. Synchronizes.
  void equalize(const std::uint64_t* d_ref, std::uint16_t* host) {
    if (d_ref) {
      if (match_scratch_.size() == 0)
        match_scratch_ = DeviceBuffer<std::uint64_t>(kernels::match_lut_u16_scratch_words());
      kernels::match_lut_u16(hist_.get(), d_ref, lut_.get(), match_scratch_.get(), s());
    } else {
      kernels::lut_u16(hist_.get(), lut_.get(), s(), eq_.tuning());
    }
    kernels::apply_u16(d_.get(), d_.get(), n_, lut_.get(), s(), eq_.tuning());
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(host, d_.get(), n_ * 2, cudaMemcpyDeviceToHost, s()));
    eq_.synchronize();
  }

  /// hist() downloaded. Synchronizes.
  Histogram download_hist() {
    Histogram h(kBins16);
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(h.data(), hist_.get(), kBins16 * sizeof(std::uint64_t),
                                      cudaMemcpyDeviceToHost, s()));
    eq_.synchronize();
    return h;
  }

 private:
  gpu::Equalizer16 eq_;
  std::size_t n_;
  int w_, h_;
  const Region& region_;
  DeviceBuffer<std::uint16_t> d_;
  DeviceBuffer<std::uint64_t> hist_{std::size_t(kBins16)};
  DeviceBuffer<std::uint16_t> lut_{std::size_t(kBins16)};
  DeviceBuffer<std::uint8_t> mask_;
  DeviceBuffer<std::uint32_t> scratch_;        // hist_u16's, for a rectangle of whole rows
  DeviceBuffer<std::uint64_t> match_scratch_;  // match_lut_u16's
};

/// The reference's histograms, one per plane or one for all, packed for the device; checked as
/// the CPU twin checks them: their number, every one's 65536 bins, then at least one count in
/// each (match_lut16), in plane order.
std::vector<std::uint64_t> pack_reference16(const std::vector<Histogram>& ref, int planes) {
  check_match_reference(ref, planes, kBins16);
  std::vector<std::uint64_t> packed;
  packed.reserve(ref.size() * kBins16);
  for (const Histogram& h : ref) packed.insert(packed.end(), h.begin(), h.end());
  return packed;
}

/// pack_reference16's histograms on the device (synchronizes: `packed` may go out of scope).
DeviceBuffer<std::uint64_t> upload_reference16(const std::vector<std::uint64_t>& packed,
                                               cudaStream_t s) {
  DeviceBuffer<std::uint64_t> d(packed.size());
  HISTEQ_CUDA_CHECK(cudaMemcpyAsync(d.get(), packed.data(), packed.size() * sizeof(std::uint64_t),
                                    cudaMemcpyHostToDevice, s));
  HISTEQ_CUDA_CHECK(cudaStreamSynchronize(s));
  return d;
}

}  // namespace

Image16 equalize16(const Image16& img, Mode mode, Backend backend, std::string* device_used,
                   const Region& region, const std::vector<Histogram>* reference) {
  if (resolve_backend(backend) == Backend::cpu) {
    if (device_used) *device_used = "cpu";
    return cpu::equalize16(img, mode, 0, region, reference);
  }
  check16(img, mode, "equalize", "equalized");
  if (!region.all()) region.check(img.width, img.height, "image");
  const int c = img.channels;
  const int planes = c >= 3 ? 3 : 1;
  if (device_used) *device_used = gpu::device_name();
  const std::vector<std::uint64_t> packed =
      reference ? pack_reference16(*reference, planes) : std::vector<std::uint64_t>{};
  Planes16 dev(img, region);
  DeviceBuffer<std::uint64_t> d_ref;
  if (reference) d_ref = upload_reference16(packed, dev.s());
  const std::size_t n = img.pixel_count();
  std::vector<std::uint16_t> plane(n);
  Image16 out = img;
  for (int k = 0; k < planes; ++k) {
    for (std::size_t i = 0; i < n; ++i) plane[i] = img.pixels[i * std::size_t(c) + std::size_t(k)];
    dev.count(plane.data());
    const std::uint64_t* ref_k =
        reference ? d_ref.get() + (reference->size() == 1 ? 0 : std::size_t(k) * kBins16) : nullptr;
    dev.equalize(ref_k, plane.data());
    for (std::size_t i = 0; i < n; ++i) out.pixels[i * std::size_t(c) + std::size_t(k)] = plane[i];
  }
  return out;
}

std::vector<Histogram> histograms16(const Image16& img, Mode mode, Backend backend,
                                    std::string* device_used, const Region& region) {
  check16(img, mode, "histogram", "counted");
  if (!region.all()) region.check(img.width, img.height, "image");  // both backends, before work
  const int c = img.channels;
  const int planes = c >= 3 ? 3 : 1;
  const std::size_t n = img.pixel_count();
  std::vector<std::uint16_t> plane(n);
  std::vector<Histogram> hs;
  const bool gpu = resolve_backend(backend) == Backend::cuda;
  if (device_used) *device_used = gpu ? gpu::device_name() : "cpu";
  std::unique_ptr<Planes16> dev;
  if (gpu) dev = std::make_unique<Planes16>(img, region);
  for (int k = 0; k < planes; ++k) {
    for (std::size_t i = 0; i < n; ++i) plane[i] = img.pixels[i * std::size_t(c) + std::size_t(k)];
    if (!gpu) {
      hs.push_back(region.all() ? cpu::histogram16(plane.data(), n)
                                : cpu::histogram16(plane.data(), img.width, img.height, region));
      continue;
    }
    dev->count(plane.data());
    hs.push_back(dev->download_hist());
  }
  return hs;
}

}  // namespace histeq
