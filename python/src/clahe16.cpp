// clahe16.cpp — histeq._histeq's CLAHE and 16-bit functions, behind histeq.clahe and the uint16
// cases of histeq.equalize / histeq.histogram (python/histeq/__init__.py checks the arguments
// and allocates the results).
//
// Host arrays: the library's whole-image calls (histeq::clahe, histeq::equalize16: the GPU when
// one is usable, else the CPU, byte-identical), with the GIL released.
// CUDA arrays (gray planes only; __init__.py sends colour CUDA arrays through the host): the
// device context's gpu::Clahe / gpu::Equalizer16 (binding_common.hpp), set to the caller's
// stream for the call: the work is queued on it directly, without a host synchronization.
//
// 16-bit modes follow the command line's (src/pipeline/item.cpp): gray and gray+alpha images run
// on their gray channel (mode="gray" on gray+alpha: histeq.clahe passes the gray channel alone);
// colour images per channel (rgb), since there is no 16-bit YCbCr.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "binding_common.hpp"
#include "histeq/clahe.hpp"
#include "histeq/clahe_gpu.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu16.hpp"
#include "histeq/image16.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/planes.hpp"
#include "support/cuda_check.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using histeq::python::FsPath;
using histeq::python::HostU16;
using histeq::python::HostU8;
using histeq::python::OutU16;
using histeq::python::OutU8;

constexpr std::size_t kBins16 = 65536;

histeq::Image16 image16_from(const HostU16& a, int height, int width, int channels) {
  return histeq::python::image_of<histeq::Image16>(a, height, width, channels);
}

/// The mode a 16-bit image runs in (as the command line's): gray for 1-2 channels, rgb for
/// colour unless another was asked for, which is refused (no 16-bit YCbCr).
histeq::Mode mode16(const std::optional<std::string>& asked, int channels) {
  if (channels < 3) return histeq::Mode::gray;
  const histeq::Mode m = asked ? histeq::parse_mode(*asked) : histeq::Mode::rgb;
  if (m != histeq::Mode::rgb) {
    throw histeq::UsageError("mode: 16-bit colour images are processed per channel; mode '" +
                             std::string(histeq::to_string(m)) +
                             "' needs 16-bit YCbCr: use mode='rgb', or convert to uint8");
  }
  return m;
}

histeq::ClaheOptions clahe_options(double clip, int tiles_x, int tiles_y) {
  histeq::ClaheOptions o;
  o.clip_limit = clip;
  o.tiles_x = tiles_x;
  o.tiles_y = tiles_y;
  return o;
}

std::vector<std::size_t> image_shape(int height, int width, int channels) {
  std::vector<std::size_t> s{std::size_t(height), std::size_t(width)};
  if (channels > 1) s.push_back(std::size_t(channels));
  return s;
}

/// fn(image, &device_used) with the GIL released, its result as (NumPy array, device_used).
template <typename Img, typename Fn>
auto whole_image(const Img& in, Fn fn) {
  std::string used;
  Img out;
  {
    nb::gil_scoped_release release;
    out = fn(in, &used);
  }
  using T = typename decltype(out.pixels)::value_type;
  return std::make_pair(
      histeq::python::to_numpy<T>(std::move(out.pixels),
                                  image_shape(out.height, out.width, out.channels)),
      used);
}

/// histeq::clahe_into over `count` images back to back (the GIL released): `oc` output
/// channels per pixel, `backend` already resolved. Returns the device that ran.
template <typename T, typename In, typename Out>
std::string host_batch(const In& a, Out& out, std::size_t count, int height, int width,
                       int channels, int oc, const histeq::ClaheOptions& o,
                       histeq::Backend backend) {
  histeq::validate(o, sizeof(T) == 1 ? 256 : int(kBins16));
  const std::size_t pixels = std::size_t(height) * std::size_t(width);
  const std::size_t in_step = pixels * std::size_t(channels), out_step = pixels * std::size_t(oc);
  histeq::python::check_size(a, count * in_step, "image");
  histeq::python::check_size(out, count * out_step, "out");
  const T* src = a.data();
  T* dst = out.data();
  std::string used;
  nb::gil_scoped_release release;
  histeq::python::for_images(count, pixels, backend, [&](std::size_t i) {
    std::string u;
    histeq::clahe_into(histeq::ImageView<T>{src + i * in_step, width, height, channels}, o, backend,
                       dst + i * out_step, &u);
    if (i + 1 == count) used = std::move(u);  // one writer; read after the join
  });
  return used;
}

}  // namespace

void bind_clahe16(nb::module_& m) {
  using histeq::python::to_numpy;

  // ---- host images ----
  // count images back to back in `image` → `out` (their output channels each), read and
  // written in place. Returns the device that ran ("cpu" or the GPU's name).
  m.def(
      "clahe_host",
      [](HostU8 a, OutU8 out, std::size_t count, int height, int width, int channels,
         std::optional<std::string> mode, double clip, int tiles_x, int tiles_y,
         std::string backend, std::string order, std::optional<HostU8> mask,
         std::optional<histeq::python::RoiTuple> roi) {
        histeq::ClaheOptions o = clahe_options(clip, tiles_x, tiles_y);
        o.region = histeq::python::region_of(mask, roi, width, height);
        const histeq::Mode md =
            histeq::python::parse_mode_opt(mode).value_or(histeq::default_mode(channels));
        o.mode = md;
        o.order = histeq::parse_channel_order(order);
        const int oc = histeq::output_channels(md, channels);
        return host_batch<std::uint8_t>(a, out, count, height, width, channels, oc, o,
                                        histeq::resolve_backend(histeq::parse_backend(backend)));
      },
      "image"_a, "out"_a, "count"_a, "height"_a, "width"_a, "channels"_a, "mode"_a.none(), "clip"_a,
      "tiles_x"_a, "tiles_y"_a, "backend"_a, "order"_a, "mask"_a.none() = nb::none(),
      "roi"_a.none() = nb::none());

  m.def(
      "clahe_host16",
      [](HostU16 a, OutU16 out, std::size_t count, int height, int width, int channels,
         std::optional<std::string> mode, double clip, int tiles_x, int tiles_y,
         std::string backend, std::optional<HostU8> mask,
         std::optional<histeq::python::RoiTuple> roi) {
        histeq::ClaheOptions o = clahe_options(clip, tiles_x, tiles_y);
        o.region = histeq::python::region_of(mask, roi, width, height);
        o.mode = mode16(mode, channels);
        return host_batch<std::uint16_t>(a, out, count, height, width, channels, channels, o,
                                         histeq::resolve_backend(histeq::parse_backend(backend)));
      },
      "image"_a, "out"_a, "count"_a, "height"_a, "width"_a, "channels"_a, "mode"_a.none(), "clip"_a,
      "tiles_x"_a, "tiles_y"_a, "backend"_a, "mask"_a.none() = nb::none(),
      "roi"_a.none() = nb::none());

  m.def(
      "equalize_host16",
      [](HostU16 a, int height, int width, int channels, std::optional<std::string> mode,
         std::string backend, std::optional<HostU8> mask,
         std::optional<histeq::python::RoiTuple> roi,
         std::optional<histeq::python::HostHists> reference) {
        histeq::Image16 in = image16_from(a, height, width, channels);
        const histeq::Mode md = mode16(mode, channels);
        const histeq::Backend b = histeq::parse_backend(backend);
        const histeq::Region region = histeq::python::region_of(mask, roi, width, height);
        const auto ref = histeq::python::reference_of(reference, kBins16);
        return whole_image(in, [&](const histeq::Image16& im, std::string* u) {
          return histeq::equalize16(im, md, b, u, region, ref.get());
        });
      },
      "image"_a, "height"_a, "width"_a, "channels"_a, "mode"_a.none(), "backend"_a,
      "mask"_a.none() = nb::none(), "roi"_a.none() = nb::none(), "reference"_a.none() = nb::none());

  m.def(
      "histogram_host16",
      [](HostU16 a, int height, int width, int channels, std::optional<std::string> mode,
         std::string backend, std::optional<HostU8> mask,
         std::optional<histeq::python::RoiTuple> roi) {
        histeq::Image16 in = image16_from(a, height, width, channels);
        const histeq::Mode md = mode16(mode, channels);
        const histeq::Backend b = histeq::parse_backend(backend);
        if (std::size_t(height) * std::size_t(width) == 0) {  // no pixel: zero counts, as 8 bits
          const std::size_t planes = channels >= 3 ? 3 : 1;
          return to_numpy(std::vector<std::int64_t>(planes * kBins16, 0), {planes, kBins16});
        }
        const histeq::Region region = histeq::python::region_of(mask, roi, width, height);
        std::vector<std::int64_t> flat;  // int64, as NumPy's and scikit-image's histograms
        {
          nb::gil_scoped_release release;
          for (const histeq::Histogram& h : histeq::histograms16(in, md, b, nullptr, region))
            for (std::uint64_t c : h) flat.push_back(std::int64_t(c));
        }
        const std::size_t planes = flat.size() / kBins16;
        return to_numpy(std::move(flat), {planes, kBins16});
      },
      "image"_a, "height"_a, "width"_a, "channels"_a, "mode"_a.none(), "backend"_a,
      "mask"_a.none() = nb::none(), "roi"_a.none() = nb::none());

  // ---- 16-bit files ----
  m.def(
      "load_image16",
      [](const FsPath& path) {
        histeq::Image16 img;
        {
          nb::gil_scoped_release release;
          img = histeq::load_image16(path.bytes);
        }
        return to_numpy(std::move(img.pixels), image_shape(img.height, img.width, img.channels));
      },
      "path"_a);

  m.def(
      "is_16bit_image", [](const FsPath& path) { return histeq::is_16bit_image(path.bytes); },
      "path"_a);

  m.def(
      "save_image16",
      [](HostU16 a, int height, int width, int channels, const FsPath& path) {
        histeq::Image16 img = image16_from(a, height, width, channels);
        nb::gil_scoped_release release;
        histeq::save_image16(img, path.bytes);
      },
      "image"_a, "height"_a, "width"_a, "channels"_a, "path"_a);

  // ---- gray CUDA planes (pointers as integers; the caller keeps the arrays alive) ----
  m.def(
      "clahe_device",
      [](int device, std::uintptr_t stream, std::uintptr_t in, std::uintptr_t out,
         std::size_t count, int height, int width, bool sixteen, double clip, int tiles_x,
         int tiles_y, std::uintptr_t mask, std::optional<histeq::python::RoiTuple> roi) {
        const histeq::ClaheOptions o = clahe_options(clip, tiles_x, tiles_y);
        const bool masked = mask != 0 || roi.has_value();
        int x = 0, y = 0, w = width, h = height;
        if (roi) std::tie(x, y, w, h) = *roi;
        const auto* m = reinterpret_cast<const std::uint8_t*>(mask);
        histeq::python::DeviceScope scope(device);
        histeq::python::DeviceContext& ctx = histeq::python::begin(device, stream);
        histeq::gpu::Clahe& c = ctx.clahe_engine();
        const std::size_t step =
            std::size_t(height) * std::size_t(width) * (sixteen ? sizeof(std::uint16_t) : 1);
        auto one = [&](auto* src, auto* dst) {  // one plane: std::uint8_t or std::uint16_t
          if constexpr (sizeof(*src) == 1) {
            if (masked)
              c.apply_region(src, dst, width, height, o, x, y, w, h, m);
            else
              c.apply(src, dst, width, height, o);
          } else if (masked) {
            c.apply16_region(src, dst, width, height, o, x, y, w, h, m);
          } else {
            c.apply16(src, dst, width, height, o);
          }
        };
        for (std::size_t i = 0; i < count; ++i) {
          if (sixteen)
            one(reinterpret_cast<const std::uint16_t*>(in + i * step),
                reinterpret_cast<std::uint16_t*>(out + i * step));
          else
            one(reinterpret_cast<const std::uint8_t*>(in + i * step),
                reinterpret_cast<std::uint8_t*>(out + i * step));
        }
        histeq::python::end(ctx);
      },
      "device"_a, "stream"_a, "input"_a, "output"_a, "count"_a, "height"_a, "width"_a, "sixteen"_a,
      "clip"_a, "tiles_x"_a, "tiles_y"_a, "mask"_a = 0, "roi"_a.none() = nb::none());

  m.def(
      "equalize16_device",
      [](int device, std::uintptr_t stream, std::uintptr_t in, std::uintptr_t out,
         std::size_t count, std::size_t pixels) {
        histeq::python::DeviceScope scope(device);
        histeq::python::DeviceContext& ctx = histeq::python::begin(device, stream);
        histeq::gpu::Equalizer16& q = ctx.eq16_engine();
        const std::size_t step = pixels * sizeof(std::uint16_t);
        for (std::size_t i = 0; i < count; ++i) {
          q.equalize(reinterpret_cast<const std::uint16_t*>(in + i * step),
                     reinterpret_cast<std::uint16_t*>(out + i * step), pixels);
        }
        histeq::python::end(ctx);
      },
      "device"_a, "stream"_a, "input"_a, "output"_a, "count"_a, "pixels"_a);

  m.def(
      "stages16_device",
      [](int device, std::uintptr_t stream, std::uintptr_t in, std::uintptr_t out,
         std::size_t count, int height, int width, std::uintptr_t mask,
         std::optional<histeq::python::RoiTuple> roi, std::uintptr_t reference) {
        int x = 0, y = 0, w = width, h = height;
        if (roi) std::tie(x, y, w, h) = *roi;
        histeq::python::DeviceScope scope(device);
        histeq::python::DeviceContext& ctx = histeq::python::begin(device, stream);
        histeq::gpu::Equalizer16& q = ctx.eq16_engine();
        const std::size_t step = std::size_t(height) * std::size_t(width) * sizeof(std::uint16_t);
        for (std::size_t i = 0; i < count; ++i) {
          q.equalize_region(reinterpret_cast<const std::uint16_t*>(in + i * step),
                            reinterpret_cast<std::uint16_t*>(out + i * step), width, height, x, y,
                            w, h, reinterpret_cast<const std::uint8_t*>(mask),
                            reinterpret_cast<const std::uint64_t*>(reference));
        }
        histeq::python::end(ctx);
      },
      "device"_a, "stream"_a, "input"_a, "output"_a, "count"_a, "height"_a, "width"_a, "mask"_a,
      "roi"_a.none(), "reference"_a);

  m.def(
      "histogram16_device",
      [](int device, std::uintptr_t stream, std::uintptr_t in, std::size_t count,
         std::size_t pixels, std::uintptr_t out) {
        histeq::python::DeviceScope scope(device);
        histeq::python::DeviceContext& ctx = histeq::python::begin(device, stream);
        histeq::gpu::Equalizer16& q = ctx.eq16_engine();
        const std::size_t step = pixels * sizeof(std::uint16_t);
        for (std::size_t i = 0; i < count; ++i) {
          q.histogram(reinterpret_cast<const std::uint16_t*>(in + i * step), pixels,
                      reinterpret_cast<std::uint64_t*>(out) + i * kBins16);
        }
        histeq::python::end(ctx);
      },
      "device"_a, "stream"_a, "input"_a, "count"_a, "pixels"_a, "output"_a);
}
