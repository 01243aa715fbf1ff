// gpu16.cpp — gpu::Equalizer16 and the host-level equalize16 (gpu16.hpp).
#include "histeq/gpu16.hpp"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "histeq/equalize16.hpp"
#include "histeq/error.hpp"
#include "histeq/pipeline.hpp"
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
  Tuning tuning;  // the policy unless set_tuning() said otherwise
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

}  // namespace histeq::gpu

namespace histeq {

Image16 equalize16(const Image16& img, Mode mode, Backend backend, std::string* device_used,
                   const Region& region, const std::vector<Histogram>* reference) {
  if (resolve_backend(backend) == Backend::cpu || !region.all() || reference) {
    if (device_used) *device_used = "cpu";
    return cpu::equalize16(img, mode, 0, region, reference);
  }
  if (img.width < 1 || img.height < 1 || img.channels < 1 || img.channels > 4 ||
      img.pixels.size() != img.sample_count()) {
    throw Error("equalize: empty or inconsistent 16-bit image");
  }
  const int c = img.channels;
  if (c >= 3 && mode != Mode::rgb) {
    throw UsageError(std::string("16-bit colour images are equalized per channel: mode '") +
                     to_string(mode) + "' needs 16-bit YCbCr; use mode rgb (or 8 bits)");
  }
  if (device_used) *device_used = gpu::device_name();
  gpu::Equalizer16 eq;
  const std::size_t n = img.pixel_count();
  DeviceBuffer<std::uint16_t> d(n);
  std::vector<std::uint16_t> plane(n);
  Image16 out = img;
  for (int k = 0; k < (c >= 3 ? 3 : 1); ++k) {
    for (std::size_t i = 0; i < n; ++i) plane[i] = img.pixels[i * std::size_t(c) + std::size_t(k)];
    HISTEQ_CUDA_CHECK(
        cudaMemcpyAsync(d.get(), plane.data(), n * 2, cudaMemcpyHostToDevice, eq.stream()));
    eq.equalize(d.get(), d.get(), n);
    HISTEQ_CUDA_CHECK(
        cudaMemcpyAsync(plane.data(), d.get(), n * 2, cudaMemcpyDeviceToHost, eq.stream()));
    eq.synchronize();
    for (std::size_t i = 0; i < n; ++i) out.pixels[i * std::size_t(c) + std::size_t(k)] = plane[i];
  }
  return out;
}

std::vector<Histogram> histograms16(const Image16& img, Mode mode, Backend backend,
                                    std::string* device_used, const Region& region) {
  if (img.width < 1 || img.height < 1 || img.channels < 1 || img.channels > 4 ||
      img.pixels.size() != img.sample_count())
    throw Error("histogram: empty or inconsistent 16-bit image");
  const int c = img.channels;
  if (c >= 3 && mode != Mode::rgb) {
    throw UsageError(std::string("16-bit colour images are counted per channel: mode '") +
                     to_string(mode) + "' needs 16-bit YCbCr; use mode rgb (or 8 bits)");
  }
  const int planes = c >= 3 ? 3 : 1;
  const std::size_t n = img.pixel_count();
  std::vector<std::uint16_t> plane(n);
  std::vector<Histogram> hs;
  const bool gpu = resolve_backend(backend) == Backend::cuda && region.all();
  if (device_used) *device_used = gpu ? gpu::device_name() : "cpu";
  std::unique_ptr<gpu::Equalizer16> eq;
  std::unique_ptr<DeviceBuffer<std::uint16_t>> d_plane;
  std::unique_ptr<DeviceBuffer<std::uint64_t>> d_hist;
  if (gpu) {
    eq = std::make_unique<gpu::Equalizer16>();
    d_plane = std::make_unique<DeviceBuffer<std::uint16_t>>(n);
    d_hist = std::make_unique<DeviceBuffer<std::uint64_t>>(std::size_t(kBins16));
  }
  for (int k = 0; k < planes; ++k) {
    for (std::size_t i = 0; i < n; ++i) plane[i] = img.pixels[i * std::size_t(c) + std::size_t(k)];
    if (!gpu) {
      hs.push_back(region.all() ? cpu::histogram16(plane.data(), n)
                                : cpu::histogram16(plane.data(), img.width, img.height, region));
      continue;
    }
    Histogram h(kBins16);
    HISTEQ_CUDA_CHECK(
        cudaMemcpyAsync(d_plane->get(), plane.data(), n * 2, cudaMemcpyHostToDevice, eq->stream()));
    eq->histogram(d_plane->get(), n, d_hist->get());
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(h.data(), d_hist->get(), kBins16 * sizeof(std::uint64_t),
                                      cudaMemcpyDeviceToHost, eq->stream()));
    eq->synchronize();
    hs.push_back(std::move(h));
  }
  return hs;
}

}  // namespace histeq
