// clahe16.cpp — histeq._histeq's CLAHE and 16-bit functions, behind histeq.clahe and the uint16
// cases of histeq.equalize / histeq.histogram (python/histeq/__init__.py checks the arguments
// and allocates the results).
//
// Host arrays: the library's whole-image calls (histeq::clahe, histeq::equalize16: the GPU when
// one is usable, else the CPU, byte-identical), with the GIL released.
// CUDA arrays (gray planes only; __init__.py sends colour CUDA arrays through the host): the
// device's gpu::Clahe / gpu::Equalizer16, which run on streams of their own: each call records an
// event on the caller's stream that the engine's stream waits for, and an event on the engine's
// stream that the caller's stream waits for. So the work is ordered on the caller's stream
// without a host synchronization.
//
// 16-bit modes follow the command line's (src/cli/depth.cpp): gray and gray+alpha images run on
// their gray channel; colour images per channel (rgb), since there is no 16-bit YCbCr.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
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

using histeq::python::HostU16;
using histeq::python::HostU8;

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

/// What one CUDA device needs for the 16-bit and CLAHE calls: the engines (made on first use)
/// and the two events that order their streams after, and before, the caller's stream.
struct Engines {
  std::unique_ptr<histeq::gpu::Clahe> clahe;
  std::unique_ptr<histeq::gpu::Equalizer16> eq16;
  cudaEvent_t caller_done = nullptr;
  cudaEvent_t engine_done = nullptr;
  Engines() {
    HISTEQ_CUDA_CHECK(cudaEventCreateWithFlags(&caller_done, cudaEventDisableTiming));
    HISTEQ_CUDA_CHECK(cudaEventCreateWithFlags(&engine_done, cudaEventDisableTiming));
  }
  histeq::gpu::Clahe& clahe_engine() {
    if (!clahe) clahe = std::make_unique<histeq::gpu::Clahe>();
    return *clahe;
  }
  histeq::gpu::Equalizer16& eq16_engine() {
    if (!eq16) eq16 = std::make_unique<histeq::gpu::Equalizer16>();
    return *eq16;
  }
};

Engines& engines(int device) {
  // Never destroyed: CUDA may already be torn down at interpreter exit.
  static auto* m = new std::map<int, std::unique_ptr<Engines>>();
  auto it = m->find(device);
  if (it == m->end()) it = m->emplace(device, std::make_unique<Engines>()).first;
  return *it->second;
}

/// Runs work(engine_stream) ordered after the caller's stream's earlier work, and the caller's
/// stream's later work after it; no host synchronization.
template <typename Work>
void on_engine_stream(Engines& e, std::uintptr_t caller, cudaStream_t engine, Work work) {
  const cudaStream_t s = histeq::python::caller_stream(caller);
  HISTEQ_CUDA_CHECK(cudaEventRecord(e.caller_done, s));
  HISTEQ_CUDA_CHECK(cudaStreamWaitEvent(engine, e.caller_done, 0));
  work();
  HISTEQ_CUDA_CHECK(cudaEventRecord(e.engine_done, engine));
  HISTEQ_CUDA_CHECK(cudaStreamWaitEvent(s, e.engine_done, 0));
}

}  // namespace

void bind_clahe16(nb::module_& m) {
  using histeq::python::to_numpy;

  // ---- host images ----
  m.def(
      "clahe_host",
      [](HostU8 a, int height, int width, int channels, std::optional<std::string> mode,
         double clip, int tiles_x, int tiles_y, std::string backend) {
        histeq::Image in = histeq::python::image_from(a, height, width, channels);
        histeq::ClaheOptions o = clahe_options(clip, tiles_x, tiles_y);
        o.mode = histeq::python::parse_mode_opt(mode).value_or(histeq::default_mode(channels));
        const histeq::Backend b = histeq::parse_backend(backend);
        return whole_image(in, [&](const histeq::Image& im, std::string* u) {
          return histeq::clahe(im, o, b, u);
        });
      },
      "image"_a, "height"_a, "width"_a, "channels"_a, "mode"_a.none(), "clip"_a, "tiles_x"_a,
      "tiles_y"_a, "backend"_a);

  m.def(
      "clahe_host16",
      [](HostU16 a, int height, int width, int channels, std::optional<std::string> mode,
         double clip, int tiles_x, int tiles_y, std::string backend) {
        histeq::Image16 in = image16_from(a, height, width, channels);
        histeq::ClaheOptions o = clahe_options(clip, tiles_x, tiles_y);
        o.mode = mode16(mode, channels);
        const histeq::Backend b = histeq::parse_backend(backend);
        return whole_image(in, [&](const histeq::Image16& im, std::string* u) {
          return histeq::clahe(im, o, b, u);
        });
      },
      "image"_a, "height"_a, "width"_a, "channels"_a, "mode"_a.none(), "clip"_a, "tiles_x"_a,
      "tiles_y"_a, "backend"_a);

  m.def(
      "equalize_host16",
      [](HostU16 a, int height, int width, int channels, std::optional<std::string> mode,
         std::string backend) {
        histeq::Image16 in = image16_from(a, height, width, channels);
        const histeq::Mode md = mode16(mode, channels);
        const histeq::Backend b = histeq::parse_backend(backend);
        return whole_image(in, [&](const histeq::Image16& im, std::string* u) {
          return histeq::equalize16(im, md, b, u);
        });
      },
      "image"_a, "height"_a, "width"_a, "channels"_a, "mode"_a.none(), "backend"_a);

  m.def(
      "histogram_host16",
      [](HostU16 a, int height, int width, int channels, std::optional<std::string> mode,
         std::string backend) {
        histeq::Image16 in = image16_from(a, height, width, channels);
        const histeq::Mode md = mode16(mode, channels);
        const histeq::Backend b = histeq::parse_backend(backend);
        std::vector<std::uint64_t> flat;
        {
          nb::gil_scoped_release release;
          for (const histeq::Histogram& h : histeq::histograms16(in, md, b))
            flat.insert(flat.end(), h.begin(), h.end());
        }
        const std::size_t planes = flat.size() / kBins16;
        return to_numpy(std::move(flat), {planes, kBins16});
      },
      "image"_a, "height"_a, "width"_a, "channels"_a, "mode"_a.none(), "backend"_a);

  // ---- 16-bit files ----
  m.def(
      "load_image16",
      [](std::string path) {
        histeq::Image16 img;
        {
          nb::gil_scoped_release release;
          img = histeq::load_image16(path);
        }
        return to_numpy(std::move(img.pixels), image_shape(img.height, img.width, img.channels));
      },
      "path"_a);

  m.def(
      "is_16bit_image", [](std::string path) { return histeq::is_16bit_image(path); }, "path"_a);

  m.def(
      "save_image16",
      [](HostU16 a, int height, int width, int channels, std::string path) {
        histeq::Image16 img = image16_from(a, height, width, channels);
        nb::gil_scoped_release release;
        histeq::save_image16(img, path);
      },
      "image"_a, "height"_a, "width"_a, "channels"_a, "path"_a);

  // ---- gray CUDA planes (pointers as integers; the caller keeps the arrays alive) ----
  m.def(
      "clahe_device",
      [](int device, std::uintptr_t stream, std::uintptr_t in, std::uintptr_t out,
         std::size_t count, int height, int width, bool sixteen, double clip, int tiles_x,
         int tiles_y) {
        const histeq::ClaheOptions o = clahe_options(clip, tiles_x, tiles_y);
        histeq::validate(o, sixteen ? int(kBins16) : 256);
        histeq::python::DeviceScope scope(device);
        Engines& e = engines(device);
        histeq::gpu::Clahe& c = e.clahe_engine();
        const std::size_t step =
            std::size_t(height) * std::size_t(width) * (sixteen ? sizeof(std::uint16_t) : 1);
        on_engine_stream(e, stream, static_cast<cudaStream_t>(c.stream()), [&] {
          for (std::size_t i = 0; i < count; ++i) {
            if (sixteen) {
              c.apply16(reinterpret_cast<const std::uint16_t*>(in + i * step),
                        reinterpret_cast<std::uint16_t*>(out + i * step), width, height, o);
            } else {
              c.apply(reinterpret_cast<const std::uint8_t*>(in + i * step),
                      reinterpret_cast<std::uint8_t*>(out + i * step), width, height, o);
            }
          }
        });
      },
      "device"_a, "stream"_a, "input"_a, "output"_a, "count"_a, "height"_a, "width"_a, "sixteen"_a,
      "clip"_a, "tiles_x"_a, "tiles_y"_a);

  m.def(
      "equalize16_device",
      [](int device, std::uintptr_t stream, std::uintptr_t in, std::uintptr_t out,
         std::size_t count, std::size_t pixels) {
        histeq::python::DeviceScope scope(device);
        Engines& e = engines(device);
        histeq::gpu::Equalizer16& q = e.eq16_engine();
        const std::size_t step = pixels * sizeof(std::uint16_t);
        on_engine_stream(e, stream, static_cast<cudaStream_t>(q.stream()), [&] {
          for (std::size_t i = 0; i < count; ++i) {
            q.equalize(reinterpret_cast<const std::uint16_t*>(in + i * step),
                       reinterpret_cast<std::uint16_t*>(out + i * step), pixels);
          }
        });
      },
      "device"_a, "stream"_a, "input"_a, "output"_a, "count"_a, "pixels"_a);

  m.def(
      "histogram16_device",
      [](int device, std::uintptr_t stream, std::uintptr_t in, std::size_t count,
         std::size_t pixels, std::uintptr_t out) {
        histeq::python::DeviceScope scope(device);
        Engines& e = engines(device);
        histeq::gpu::Equalizer16& q = e.eq16_engine();
        const std::size_t step = pixels * sizeof(std::uint16_t);
        on_engine_stream(e, stream, static_cast<cudaStream_t>(q.stream()), [&] {
          for (std::size_t i = 0; i < count; ++i) {
            q.histogram(reinterpret_cast<const std::uint16_t*>(in + i * step), pixels,
                        reinterpret_cast<std::uint64_t*>(out) + i * kBins16);
          }
        });
      },
      "device"_a, "stream"_a, "input"_a, "count"_a, "pixels"_a, "output"_a);
}
