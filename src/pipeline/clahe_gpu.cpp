// clahe_gpu.cpp — gpu::Clahe (clahe_gpu.hpp) and the host-level histeq::clahe(Image, ...).
#include "histeq/clahe_gpu.hpp"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "clahe/clahe.hpp"
#include "histeq/error.hpp"
#include "histeq/pipeline.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"

namespace histeq::gpu {

struct Clahe::Impl {
  Stream stream;
  cudaStream_t external = nullptr;  // set_stream: the caller's stream, else the own one
  cudaStream_t s() const { return external ? external : stream.get(); }
  DeviceBuffer<std::uint32_t> hist;
  DeviceBuffer<std::uint32_t> tickets;
  DeviceBuffer<std::uint8_t> luts;        // bytes
  DeviceBuffer<std::uint32_t> partials;   // 16-bit packed tile histograms (any contents)
  DeviceBuffer<std::uint32_t> pair_luts;  // 16-bit LUT pairs for the apply
  bool pairs_ready = false;               // pair_luts written by the last prepare()
  Tuning tuning;                          // the policy unless set_tuning() said otherwise
  DeviceBuffer<std::uint8_t> mask;        // masked CLAHE: a host region's mask, uploaded
  std::shared_ptr<const Image> mask_of;   // the mask image uploaded (kept: its key, Region's rule)
  const std::uint8_t* mask_pixels = nullptr;  // its pixels' address and size when uploaded
  std::size_t mask_size = 0;

  /// Grows a buffer to `count` elements; a new counter buffer is zeroed once (the kernels keep
  /// it zero afterwards).
  template <typename T>
  T* ensure(DeviceBuffer<T>& buf, std::size_t count, bool zero) {
    if (buf.size() < count) {
      buf.reset();
      buf = DeviceBuffer<T>(count);
      if (zero) HISTEQ_CUDA_CHECK(cudaMemsetAsync(buf.get(), 0, buf.bytes(), s()));
    }
    return buf.get();
  }

  /// The geometry of a call, after checking its arguments.
  static clahe_formula::Geometry geometry(const void* d_in, const void* d_out, int width,
                                          int height, const ClaheOptions& opt, int bins) {
    validate(opt, bins);
    if (width < 1 || height < 1) {
      throw UsageError("CLAHE of an empty plane (" + std::to_string(width) + "x" +
                       std::to_string(height) + ")");
    }
    if (d_in == nullptr || d_out == nullptr) throw UsageError("CLAHE: null device pointer");
    return clahe_formula::make_geometry(width, height, opt.tiles_x, opt.tiles_y, opt.clip_limit,
                                        bins);
  }

  clahe_formula::Geometry prepare(const void* d_in, const void* d_out, int width, int height,
                                  const ClaheOptions& opt, int bins) {
    const auto g = geometry(d_in, d_out, width, height, opt, bins);
    if (!opt.region.all()) return prepare_masked(d_in, g, opt.clip_limit, device_region(g, opt));
    const std::size_t entries = std::size_t(g.tiles()) * std::size_t(bins);
    ensure(hist, entries, true);
    ensure(tickets, kernels::clahe_ticket_words(g), true);
    ensure(luts, entries * (bins == 256 ? 1 : 2), false);
    kernels::ClaheBuffers b{hist.get(), tickets.get(), luts.get()};
    if (bins == 65536) {
      const std::size_t pw = kernels::clahe_partial_words(g, tuning);
      if (pw > 0) b.partials = ensure(partials, pw, false);
      if (kernels::clahe_uses_pair_luts(g, tuning))
        b.pair_luts = ensure(pair_luts, kernels::clahe_pair_lut_words(g), false);
    }
    pairs_ready = b.pair_luts != nullptr;
    kernels::clahe_luts(d_in, g, b, s(), tuning);
    return g;
  }

  /// A host region (ClaheOptions::region) on the device: its rectangle (the whole plane
  /// without one) and its mask, uploaded once per mask image (Region's rule: kept by the mask
  /// object and its pixels' address and size).
  kernels::ClaheRegion device_region(const clahe_formula::Geometry& g, const ClaheOptions& opt) {
    const Region& region = opt.region;
    region.check(g.width, g.height, "CLAHE");
    kernels::ClaheRegion r;
    r.width = g.width;
    r.height = g.height;
    if (region.roi)
      r = {nullptr, region.roi->x, region.roi->y, region.roi->width, region.roi->height};
    if (region.mask) {
      const std::vector<std::uint8_t>& m = region.mask->pixels;
      if (region.mask != mask_of || m.data() != mask_pixels || m.size() != mask_size) {
        mask_of.reset();
        ensure(mask, m.size(), false);
        // From pageable memory: returns once the bytes are staged.
        HISTEQ_CUDA_CHECK(
            cudaMemcpyAsync(mask.get(), m.data(), m.size(), cudaMemcpyHostToDevice, s()));
        mask_of = region.mask;
        mask_pixels = m.data();
        mask_size = m.size();
      }
      r.mask = mask.get();
    }
    return r;
  }

  /// Masked CLAHE (clahe.hpp): the masked tile histograms and LUTs of the region's counted
  /// pixels (kernels/clahe/clahe_masked.cu); the apply is the unmasked one (without LUT pairs).
  clahe_formula::Geometry prepare_masked(const void* d_in, const clahe_formula::Geometry& g,
                                         double clip_limit, const kernels::ClaheRegion& r) {
    const std::size_t entries = std::size_t(g.tiles()) * std::size_t(g.hist_size);
    ensure(hist, entries, true);
    ensure(luts, entries * (g.hist_size == 256 ? 1 : 2), false);
    pairs_ready = false;
    kernels::clahe_masked_luts(d_in, r, g, clip_limit, hist.get(), luts.get(), s());
    return g;
  }

  /// apply_region / apply16_region: a region given on the device.
  template <typename T>
  void apply_region(const T* d_in, T* d_out, int width, int height, const ClaheOptions& opt,
                    const kernels::ClaheRegion& r) {
    if (!opt.region.all())
      throw UsageError("CLAHE: a region on the device and ClaheOptions::region both given");
    const auto g = geometry(d_in, d_out, width, height, opt, sizeof(T) == 1 ? 256 : 65536);
    prepare_masked(d_in, g, opt.clip_limit, r);
    kernels::clahe_apply(d_in, d_out, g, luts.get(), s(), nullptr, tuning);
  }
};

Clahe::Clahe() : impl_(std::make_unique<Impl>()) {}
Clahe::~Clahe() = default;
Clahe::Clahe(Clahe&&) noexcept = default;
Clahe& Clahe::operator=(Clahe&&) noexcept = default;

StreamHandle Clahe::stream() const { return impl_->s(); }
void Clahe::set_tuning(const Tuning& tuning) { impl_->tuning = tuning; }
const Tuning& Clahe::tuning() const { return impl_->tuning; }
void Clahe::synchronize() const { HISTEQ_CUDA_CHECK(cudaStreamSynchronize(impl_->s())); }
void Clahe::set_stream(StreamHandle external) { impl_->external = external; }

void Clahe::apply(const std::uint8_t* d_in, std::uint8_t* d_out, int width, int height,
                  const ClaheOptions& opt) {
  const auto g = impl_->prepare(d_in, d_out, width, height, opt, 256);
  kernels::clahe_apply(d_in, d_out, g, impl_->luts.get(), impl_->s(), nullptr, impl_->tuning);
}

void Clahe::apply16(const std::uint16_t* d_in, std::uint16_t* d_out, int width, int height,
                    const ClaheOptions& opt) {
  const auto g = impl_->prepare(d_in, d_out, width, height, opt, 65536);
  kernels::clahe_apply(d_in, d_out, g, impl_->luts.get(), impl_->s(),
                       impl_->pairs_ready ? impl_->pair_luts.get() : nullptr, impl_->tuning);
}

void Clahe::apply_region(const std::uint8_t* d_in, std::uint8_t* d_out, int width, int height,
                         const ClaheOptions& opt, int x, int y, int w, int h,
                         const std::uint8_t* d_mask) {
  impl_->apply_region(d_in, d_out, width, height, opt, kernels::ClaheRegion{d_mask, x, y, w, h});
}

void Clahe::apply16_region(const std::uint16_t* d_in, std::uint16_t* d_out, int width, int height,
                           const ClaheOptions& opt, int x, int y, int w, int h,
                           const std::uint8_t* d_mask) {
  impl_->apply_region(d_in, d_out, width, height, opt, kernels::ClaheRegion{d_mask, x, y, w, h});
}

const void* Clahe::luts(const void* d_in, int width, int height, const ClaheOptions& opt,
                        bool sixteen) {
  impl_->prepare(d_in, d_in, width, height, opt, sixteen ? 65536 : 256);
  return impl_->luts.get();
}

}  // namespace histeq::gpu

namespace histeq {
namespace {

/// The plane function of the GPU backend: uploads each plane, runs the GPU CLAHE, downloads
/// the result (synchronous per plane). The engine and the device plane live in `state`.
template <typename T>
struct GpuPlanes {
  gpu::Clahe engine;
  DeviceBuffer<T> d_plane;
  int width, height;
  const ClaheOptions& opt;
  GpuPlanes(int w, int h, const ClaheOptions& o)
      : d_plane(std::size_t(w) * std::size_t(h)), width(w), height(h), opt(o) {}
  void operator()(const T* in, T* out) {
    const std::size_t n = std::size_t(width) * std::size_t(height);
    cudaStream_t s = engine.stream();
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(d_plane.get(), in, n * sizeof(T), cudaMemcpyHostToDevice, s));
    if constexpr (sizeof(T) == 1)
      engine.apply(d_plane.get(), d_plane.get(), width, height, opt);
    else
      engine.apply16(d_plane.get(), d_plane.get(), width, height, opt);
    HISTEQ_CUDA_CHECK(
        cudaMemcpyAsync(out, d_plane.get(), n * sizeof(T), cudaMemcpyDeviceToHost, s));
    engine.synchronize();
  }
};

template <typename T>
void dispatch_into(const ImageView<T>& img, const ClaheOptions& opt, Backend backend, T* out,
                   std::string* device_used) {
  validate(opt);
  const Backend b = resolve_backend(backend);
  if (b == Backend::cpu) {
    if (device_used) *device_used = "cpu";
    detail::clahe_into(img, opt, out, [&](const T* in, T* o) {
      if constexpr (sizeof(T) == 1)
        cpu::clahe_plane(in, img.width, img.height, opt, o);
      else
        cpu::clahe_plane16(in, img.width, img.height, opt, o);
    });
    return;
  }
  if (device_used) *device_used = gpu::device_name();
  if (img.width < 1 || img.height < 1) {
    throw Error("CLAHE: empty or inconsistent image");
  }
  GpuPlanes<T> planes(img.width, img.height, opt);
  detail::clahe_into(img, opt, out, [&](const T* in, T* o) { planes(in, o); });
}

template <typename T, typename Img>
Img dispatch(const Img& img, const ClaheOptions& opt, Backend backend, std::string* device_used) {
  validate(opt);
  const Backend b = resolve_backend(backend);
  if (b == Backend::cpu) {
    if (device_used) *device_used = "cpu";
    return cpu::clahe(img, opt);
  }
  if (device_used) *device_used = gpu::device_name();
  GpuPlanes<T> planes(img.width, img.height, opt);
  return detail::clahe_image(img, opt, [&](const T* in, T* o) { planes(in, o); });
}

}  // namespace

Image clahe(const Image& img, const ClaheOptions& opt, Backend backend, std::string* device_used) {
  return dispatch<std::uint8_t>(img, opt, backend, device_used);
}
Image16 clahe(const Image16& img, const ClaheOptions& opt, Backend backend,
              std::string* device_used) {
  return dispatch<std::uint16_t>(img, opt, backend, device_used);
}
void clahe_into(const ImageView<std::uint8_t>& img, const ClaheOptions& opt, Backend backend,
                std::uint8_t* out, std::string* device_used) {
  dispatch_into(img, opt, backend, out, device_used);
}
void clahe_into(const ImageView<std::uint16_t>& img, const ClaheOptions& opt, Backend backend,
                std::uint16_t* out, std::string* device_used) {
  dispatch_into(img, opt, backend, out, device_used);
}

}  // namespace histeq
