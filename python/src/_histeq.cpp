// _histeq.cpp — the compiled core of the `histeq` Python package (nanobind). It sees raw device
// pointers, shapes and stream handles; python/histeq/__init__.py does the array-library work
// (NumPy / PyTorch / CuPy / __cuda_array_interface__ / DLPack, allocation of the result, the
// caller's current stream) and the argument checks that name the argument.
//
// Errors: histeq::UsageError → ValueError; every other histeq::Error (CUDA, I/O) → RuntimeError.
// Device calls keep the GIL (they only queue work: no host synchronization); host calls (the
// CPU backend, NumPy on the GPU with its copies, files) release it.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "binding_common.hpp"
#include "equalize/stages.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/image_io.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/planes.hpp"
#include "histogram/registry.hpp"
#include "support/device_buffer.hpp"

namespace nb = nanobind;
using namespace nb::literals;

void bind_files(nb::module_& m);    // files.cpp: plan_files and run_files (the executor)
void bind_clahe16(nb::module_& m);  // clahe16.cpp: CLAHE and the 16-bit calls
void bind_match(nb::module_& m);    // match.cpp: histogram matching and masks on CUDA arrays

namespace {

using histeq::python::begin;
using histeq::python::caller_stream;
using histeq::python::DeviceContext;
using histeq::python::DeviceScope;
using histeq::python::end;
using histeq::python::FsPath;
using histeq::python::HostHists;
using histeq::python::HostU8;
using histeq::python::image_from;
using histeq::python::OutU8;
using histeq::python::parse_mode_opt;
using histeq::python::RoiTuple;
using histeq::python::to_numpy;

constexpr int kBins = 256;

/// One image already on the device: in[pixels·channels] → out[pixels·output_channels].
std::string equalize_on_device(DeviceContext& c, const std::uint8_t* in, std::uint8_t* out,
                               std::size_t pixels, int channels, histeq::Mode mode,
                               histeq::Formula formula, const std::string& kernel) {
  if (channels < 1 || channels > 4) {
    throw histeq::UsageError("image: " + std::to_string(channels) +
                             " channels; expected 1, 2, 3 or 4");
  }
  if (channels == 1) return c.eq.equalize_gray(in, out, pixels, formula, kernel);
  const int planes = histeq::plane_count(mode, channels);
  if (c.planes.size() < std::size_t(planes) * pixels) {
    c.planes.reset();
    c.planes = histeq::DeviceBuffer<std::uint8_t>(std::size_t(planes) * pixels);
  }
  std::uint64_t* hist = c.eq.device_hist(planes);
  std::uint8_t* lut = c.eq.device_lut(planes);
  c.eq.extract_planes(in, pixels, channels, mode, c.planes.get());
  std::string ran;
  for (int p = 0; p < planes; ++p) {
    ran = c.eq.histogram(kernel, c.planes.get() + std::size_t(p) * pixels, pixels,
                         histeq::SampleType::u8, kBins, hist + std::size_t(p) * kBins);
  }
  c.eq.cdf_lut(hist, planes, formula, lut);
  c.eq.apply(in, pixels, channels, mode, lut, out);
  return ran;
}

/// The histogram of n gray samples in `bins` bins (not 256) on the backend's device.
histeq::Histogram histogram_bins(const std::uint8_t* in, std::size_t n, int bins,
                                 const std::string& kernel, histeq::Backend backend) {
  if (histeq::resolve_backend(backend) == histeq::Backend::cpu) {
    if (kernel != "auto") histeq::kernels::find_kernel(kernel);
    return histeq::cpu::histogram(in, n, histeq::SampleType::u8, bins);
  }
  histeq::gpu::Equalizer eq;
  histeq::DeviceBuffer<std::uint8_t> d(n);
  histeq::DeviceBuffer<std::uint64_t> h{std::size_t(bins)};
  if (n > 0) {
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(d.get(), in, n, cudaMemcpyHostToDevice, eq.stream()));
  }
  eq.histogram(kernel, d.get(), n, histeq::SampleType::u8, bins, h.get());
  histeq::Histogram out(static_cast<std::size_t>(bins));
  HISTEQ_CUDA_CHECK(
      cudaMemcpyAsync(out.data(), h.get(), h.bytes(), cudaMemcpyDeviceToHost, eq.stream()));
  eq.synchronize();
  return out;
}

histeq::EqualizeOptions options(const std::optional<std::string>& mode, const std::string& formula,
                                const std::string& kernel, const std::string& backend) {
  histeq::EqualizeOptions o;
  o.mode = parse_mode_opt(mode);
  o.formula = histeq::parse_formula(formula);
  o.kernel = kernel;
  o.backend = histeq::parse_backend(backend);
  return o;
}

}  // namespace

histeq::python::DeviceContext::DeviceContext() {
  HISTEQ_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
}

histeq::gpu::Clahe& histeq::python::DeviceContext::clahe_engine() {
  if (!clahe) clahe = std::make_unique<histeq::gpu::Clahe>();  // queues nothing when made
  clahe->set_stream(current);
  return *clahe;
}

histeq::gpu::Equalizer16& histeq::python::DeviceContext::eq16_engine() {
  if (!eq16) {
    auto e = std::make_unique<histeq::gpu::Equalizer16>();
    e->synchronize();  // its scratch is cleared on its own stream when made: once, wait for it
    eq16 = std::move(e);
  }
  eq16->set_stream(current);
  return *eq16;
}

histeq::python::DeviceContext& histeq::python::begin(int device, std::uintptr_t stream) {
  // The last device's context without a map lookup (calls keep the GIL: no race here).
  static int last_device = -1;
  static DeviceContext* last_context = nullptr;
  DeviceContext* c = last_context;
  if (device != last_device || c == nullptr) {
    static auto* m = new std::map<int, std::unique_ptr<DeviceContext>>();  // never destroyed
    auto it = m->find(device);
    if (it == m->end()) it = m->emplace(device, std::make_unique<DeviceContext>()).first;
    c = it->second.get();
    last_device = device;
    last_context = c;
  }
  const cudaStream_t s = caller_stream(stream);
  if (c->used && s != c->last) HISTEQ_CUDA_CHECK(cudaStreamWaitEvent(s, c->done, 0));
  if (s != c->current) {
    c->current = s;
    c->eq.set_stream(s);
  }
  return *c;
}

void histeq::python::end(DeviceContext& c) {
  HISTEQ_CUDA_CHECK(cudaEventRecord(c.done, c.current));
  c.last = c.current;
  c.used = true;
}

std::string histeq::python::python_words(const std::string& msg) {
  static const char* const kValues[] = {"auto", "cpu", "cuda", "gpu", "luma", "rgb", "gray"};
  std::string out;
  // The library's CLAHE grid errors name the grid; Python's argument is tile_grid_size.
  if (msg.rfind("CLAHE tile grid ", 0) == 0) out = "tile_grid_size: ";
  std::size_t i = 0;
  while (i < msg.size()) {
    const bool option = msg.compare(i, 2, "--") == 0 && i + 2 < msg.size() &&
                        std::islower(static_cast<unsigned char>(msg[i + 2])) &&
                        (i == 0 || msg[i - 1] == ' ' || msg[i - 1] == '(');
    if (!option) {
      out += msg[i++];
      continue;
    }
    std::size_t j = i + 2;
    std::string name;
    while (j < msg.size() && (std::islower(static_cast<unsigned char>(msg[j])) ||
                              std::isdigit(static_cast<unsigned char>(msg[j])) || msg[j] == '-')) {
      name += msg[j] == '-' ? '_' : msg[j];
      ++j;
    }
    out += name;
    if (j < msg.size() && msg[j] == ' ') {  // "--backend cpu" → "backend='cpu'"
      for (const char* v : kValues) {
        const std::size_t n = std::strlen(v);
        const std::size_t end = j + 1 + n;
        if (msg.compare(j + 1, n, v) == 0 &&
            (end == msg.size() || !std::isalnum(static_cast<unsigned char>(msg[end])))) {
          out += "='" + std::string(v) + "'";
          j = end;
          break;
        }
      }
    }
    i = j;
  }
  return out;
}

void histeq::python::for_images(std::size_t count, std::size_t pixels, Backend backend,
                                const std::function<void(std::size_t)>& fn) {
  constexpr std::size_t kSmall = std::size_t(1) << 15;
  const bool spread = backend == Backend::cpu && pixels < kSmall;
  const std::size_t threads =
      std::min<std::size_t>(spread ? std::size_t(histeq::cpu::usable_cpus()) : 1, count);
  if (threads <= 1) {
    for (std::size_t i = 0; i < count; ++i) fn(i);
    return;
  }
  std::vector<std::exception_ptr> errors(threads);
  auto slice = [&](std::size_t t) {
    try {
      for (std::size_t i = t * count / threads; i < (t + 1) * count / threads; ++i) fn(i);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(slice, t);
    } catch (const std::system_error&) {  // no more threads: that slice runs here
      slice(t);
    }
  }
  slice(0);
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

namespace {

/// PyErr_SetString for a message that may hold bytes that are not UTF-8 (the name of a file):
/// those bytes as \xNN (PyErr_SetString would raise a UnicodeDecodeError instead).
void set_error(PyObject* type, const std::string& msg) {
  PyObject* text = PyUnicode_DecodeUTF8(msg.data(), Py_ssize_t(msg.size()), "backslashreplace");
  if (text == nullptr) return;  // that failure is the error set
  PyErr_SetObject(type, text);
  Py_DECREF(text);
}

}  // namespace

NB_MODULE(_histeq, m) {
  m.doc() = "Compiled core of histeq (see the histeq package for the documented API).";

  // UsageError and DecodeError → ValueError; FileError → OSError(errno, message, path), which
  // Python makes FileNotFoundError, PermissionError, IsADirectoryError... by errno; any other
  // Error (CUDA) → RuntimeError. Messages in Python's words (python_words).
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const histeq::UsageError& e) {
      set_error(PyExc_ValueError, histeq::python::python_words(e.what()));
    } catch (const histeq::DecodeError& e) {
      set_error(PyExc_ValueError, e.what());
    } catch (const histeq::FileError& e) {
      if (e.code() > 0) {
        const std::string what = e.what();
        PyObject* args = Py_BuildValue(
            "(iNN)", e.code(),
            PyUnicode_DecodeUTF8(what.data(), Py_ssize_t(what.size()), "backslashreplace"),
            PyUnicode_DecodeFSDefaultAndSize(e.path().data(), Py_ssize_t(e.path().size())));
        if (args != nullptr) {
          PyObject* exc = PyObject_Call(PyExc_OSError, args, nullptr);
          Py_DECREF(args);
          if (exc != nullptr) {
            PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc)), exc);
            Py_DECREF(exc);
          }
        }
      } else {
        set_error(PyExc_OSError, e.what());
      }
    } catch (const histeq::Error& e) {
      set_error(PyExc_RuntimeError, histeq::python::python_words(e.what()));
    }
  });

#ifdef HISTEQ_VERSION
  m.attr("__version__") = HISTEQ_VERSION;
#endif
  // False in a CPU-only build (HISTEQ_CUDA=OFF): no GPU code, no registry kernels.
  m.attr("CUDA_BUILT") = bool(HISTEQ_CUDA_BUILT);

  m.def("kernels", []() {
    std::vector<std::tuple<std::string, bool, std::string>> out;
    for (const auto& e : histeq::kernels::registry()) out.emplace_back(e.name, e.exact, e.summary);
    return out;
  });

  m.def("cuda_available", []() {
    std::string why;
    const bool ok = histeq::cuda_available(&why);
    return std::make_pair(ok, why);
  });

  m.def("resolve_backend", [](const std::string& backend) {
    return std::string(histeq::to_string(histeq::resolve_backend(histeq::parse_backend(backend))));
  });

  m.def(
      "check_names",
      [](const std::optional<std::string>& mode, const std::string& formula,
         const std::string& kernel) {
        parse_mode_opt(mode);
        histeq::parse_formula(formula);
        if (kernel != "auto") {
          const auto& e = histeq::kernels::find_kernel(kernel);
          if (const char* why = e.unsupported(histeq::SampleType::u8, kBins)) {
            throw histeq::UsageError("kernel '" + kernel +
                                     "' cannot equalize 8-bit images: " + why);
          }
        }
      },
      "mode"_a.none(), "formula"_a, "kernel"_a);

  m.def(
      "pointer_device",
      [](std::uintptr_t ptr) {
        cudaPointerAttributes a{};
        HISTEQ_CUDA_CHECK(cudaPointerGetAttributes(&a, reinterpret_cast<const void*>(ptr)));
        if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) {
          throw histeq::UsageError("image: __cuda_array_interface__ data is not device memory");
        }
        return a.device;
      },
      "ptr"_a);

  // ---- host (NumPy) images: read in place, results written into arrays Python allocated ----
  // count images of height x width x channels back to back in `image` → `out` (their
  // output_channels each); backend "auto" is resolved once for the batch. Returns (backend,
  // kernel) of the last image.
  m.def(
      "equalize_host",
      [](HostU8 a, OutU8 out, std::size_t count, int height, int width, int channels,
         std::optional<std::string> mode, std::string formula, std::string kernel,
         std::string backend, std::string order, std::optional<HostU8> mask,
         std::optional<RoiTuple> roi, std::optional<HostHists> reference) {
        histeq::EqualizeOptions o = options(mode, formula, kernel, backend);
        o.order = histeq::parse_channel_order(order);
        o.region = histeq::python::region_of(mask, roi, width, height);
        o.reference = histeq::python::reference_of(reference, kBins);
        o.backend = histeq::resolve_backend(o.backend);
        const histeq::Mode md = o.mode.value_or(histeq::default_mode(channels));
        const std::size_t pixels = std::size_t(height) * std::size_t(width);
        const std::size_t in_step = pixels * std::size_t(channels);
        const std::size_t out_step = pixels * std::size_t(histeq::output_channels(md, channels));
        histeq::python::check_size(a, count * in_step, "image");
        histeq::python::check_size(out, count * out_step, "out");
        const std::uint8_t* src = a.data();
        std::uint8_t* dst = out.data();
        histeq::EqualizeReport rep;
        {
          nb::gil_scoped_release release;
          histeq::python::for_images(count, pixels, o.backend, [&](std::size_t i) {
            histeq::EqualizeReport r;
            histeq::equalize_into({src + i * in_step, width, height, channels}, o,
                                  dst + i * out_step, &r);
            if (i + 1 == count) rep = std::move(r);  // one writer; read after the join
          });
        }
        return std::make_pair(rep.backend, rep.kernel);
      },
      "image"_a, "out"_a, "count"_a, "height"_a, "width"_a, "channels"_a, "mode"_a.none(),
      "formula"_a, "kernel"_a, "backend"_a, "order"_a, "mask"_a.none() = nb::none(),
      "roi"_a.none() = nb::none(), "reference"_a.none() = nb::none());

  // A gray batch (N, H, W) from the host on the GPU: one upload, the batched equalizer (one
  // launch), one download. Returns None when the batch should run image by image instead (CPU
  // backend, or no usable GPU with backend "auto").
  m.def(
      "equalize_host_batch",
      [](HostU8 a, std::size_t count, std::size_t pixels, std::string formula,
         std::string backend) -> std::optional<nb::ndarray<nb::numpy, std::uint8_t>> {
        const histeq::Formula f = histeq::parse_formula(formula);
        const histeq::Backend b = histeq::resolve_backend(histeq::parse_backend(backend));
        if (b != histeq::Backend::cuda) return std::nullopt;
        const std::size_t bytes = count * pixels;
        if (a.size() != bytes) throw histeq::UsageError("image: size does not match its shape");
        std::vector<std::uint8_t> out(bytes);
        {
          nb::gil_scoped_release release;
          histeq::gpu::Equalizer eq;
          histeq::DeviceBuffer<std::uint8_t> d(bytes);
          if (bytes > 0) {
            HISTEQ_CUDA_CHECK(
                cudaMemcpyAsync(d.get(), a.data(), bytes, cudaMemcpyHostToDevice, eq.stream()));
            eq.equalize_batch(d.get(), d.get(), count, pixels, f);
            HISTEQ_CUDA_CHECK(
                cudaMemcpyAsync(out.data(), d.get(), bytes, cudaMemcpyDeviceToHost, eq.stream()));
          }
          eq.synchronize();
        }
        return to_numpy(std::move(out), {count, pixels});
      },
      "image"_a, "count"_a, "pixels"_a, "formula"_a, "backend"_a);

  // The histograms of one host image: (planes, bins) int64.
  m.def(
      "histogram_host",
      [](HostU8 a, int height, int width, int channels, std::optional<std::string> mode, int bins,
         std::string kernel, std::string backend, std::string order, std::optional<HostU8> mask,
         std::optional<RoiTuple> roi) {
        histeq::EqualizeOptions o = options(mode, "opencv", kernel, backend);
        o.order = histeq::parse_channel_order(order);
        o.region = histeq::python::region_of(mask, roi, width, height);
        if (!o.region.all() && bins != kBins) {
          throw histeq::UsageError("bins: a mask or roi takes 256 bins here");
        }
        const std::size_t n = std::size_t(height) * std::size_t(width) * std::size_t(channels);
        histeq::python::check_size(a, n, "image");
        const histeq::ImageView<std::uint8_t> in{a.data(), width, height, channels};
        std::vector<histeq::Histogram> hs;
        {
          nb::gil_scoped_release release;
          if (bins == kBins) {
            hs = histeq::image_histograms(in, o);
          } else {
            if (channels != 1) {
              throw histeq::UsageError(
                  "bins: only 256 bins for images of more than one channel; "
                  "got " +
                  std::to_string(bins));
            }
            hs.push_back(histogram_bins(in.pixels, n, bins, kernel, o.backend));
          }
        }
        std::vector<std::int64_t> flat;
        flat.reserve(hs.size() * std::size_t(bins));
        for (const auto& h : hs)
          for (std::uint64_t c : h) flat.push_back(std::int64_t(c));
        const std::size_t planes = hs.size();
        return to_numpy(std::move(flat), {planes, std::size_t(bins)});
      },
      "image"_a, "height"_a, "width"_a, "channels"_a, "mode"_a.none(), "bins"_a, "kernel"_a,
      "backend"_a, "order"_a, "mask"_a.none() = nb::none(), "roi"_a.none() = nb::none());

  // ---- device images (pointers as integers; the caller keeps the arrays alive) ----
  m.def(
      "equalize_device",
      [](int device, std::uintptr_t stream, std::uintptr_t in, std::uintptr_t out,
         std::size_t count, std::size_t pixels, int channels, std::optional<std::string> mode,
         std::string formula, std::string kernel, std::string batch_path) {
        const histeq::Formula f = histeq::parse_formula(formula);
        const histeq::Mode md = parse_mode_opt(mode).value_or(histeq::default_mode(channels));
        using Path = histeq::gpu::Equalizer::BatchPath;
        Path path = Path::automatic;
        const bool table = batch_path == "table";
        if (batch_path == "queued") {
          path = Path::queued;
        } else if (batch_path == "two_launch") {
          path = Path::two_launch;
        } else if (batch_path == "cluster") {
          path = Path::cluster;
        } else if (batch_path != "auto" && !table) {
          throw histeq::UsageError("batch_path: unknown '" + batch_path +
                                   "'; expected auto, queued, two_launch, cluster or table");
        }
        DeviceScope scope(device);
        DeviceContext& c = begin(device, stream);
        auto* src = reinterpret_cast<const std::uint8_t*>(in);
        auto* dst = reinterpret_cast<std::uint8_t*>(out);
        std::string ran;
        if (channels == 1 && count > 1 && kernel == "auto" && table) {
          // The list path on a uniform batch (one descriptor per image), for comparison.
          std::vector<histeq::gpu::Equalizer::BatchImage> t(count);
          for (std::size_t i = 0; i < count; ++i)
            t[i] = {src + i * pixels, dst + i * pixels, pixels};
          c.eq.equalize_batch(t.data(), t.size(), f);
          ran = "batched";
        } else if (channels == 1 && count > 1 && kernel == "auto") {
          c.eq.equalize_batch(src, dst, count, pixels, f, path);
          ran = "batched";
        } else {
          const std::size_t in_step = pixels * std::size_t(channels);
          const std::size_t out_step = pixels * std::size_t(histeq::output_channels(md, channels));
          for (std::size_t i = 0; i < count; ++i) {
            ran = equalize_on_device(c, src + i * in_step, dst + i * out_step, pixels, channels, md,
                                     f, kernel);
          }
        }
        end(c);
        return ran;
      },
      "device"_a, "stream"_a, "input"_a, "output"_a, "count"_a, "pixels"_a, "channels"_a,
      "mode"_a.none(), "formula"_a, "kernel"_a, "batch_path"_a = "auto");

  m.def(
      "equalize_device_list",
      [](int device, std::uintptr_t stream, std::vector<std::uintptr_t> ins,
         std::vector<std::uintptr_t> outs, std::vector<std::size_t> pixels, std::string formula) {
        const histeq::Formula f = histeq::parse_formula(formula);
        if (ins.size() != outs.size() || ins.size() != pixels.size()) {
          throw histeq::UsageError("images: inputs, outputs and sizes differ in length");
        }
        std::vector<histeq::gpu::Equalizer::BatchImage> table(ins.size());
        for (std::size_t i = 0; i < ins.size(); ++i) {
          table[i].d_in = reinterpret_cast<const std::uint8_t*>(ins[i]);
          table[i].d_out = reinterpret_cast<std::uint8_t*>(outs[i]);
          table[i].n = pixels[i];
        }
        DeviceScope scope(device);
        DeviceContext& c = begin(device, stream);
        c.eq.equalize_batch(table.data(), table.size(), f);
        end(c);
      },
      "device"_a, "stream"_a, "inputs"_a, "outputs"_a, "pixels"_a, "formula"_a);

  m.def(
      "histogram_device",
      [](int device, std::uintptr_t stream, std::uintptr_t in, std::size_t pixels, int channels,
         std::optional<std::string> mode, int bins, std::string kernel, std::uintptr_t out) {
        const histeq::Mode md = parse_mode_opt(mode).value_or(histeq::default_mode(channels));
        if (channels != 1 && bins != kBins) {
          throw histeq::UsageError(
              "bins: only 256 bins for images of more than one channel; "
              "got " +
              std::to_string(bins));
        }
        if (channels < 1 || channels > 4) {
          throw histeq::UsageError("image: " + std::to_string(channels) +
                                   " channels; expected 1, 2, 3 or 4");
        }
        DeviceScope scope(device);
        DeviceContext& c = begin(device, stream);
        auto* src = reinterpret_cast<const std::uint8_t*>(in);
        auto* dst = reinterpret_cast<std::uint64_t*>(out);
        std::string ran;
        if (channels == 1) {
          ran = c.eq.histogram(kernel, src, pixels, histeq::SampleType::u8, bins, dst);
        } else {
          const int planes = histeq::plane_count(md, channels);
          if (c.planes.size() < std::size_t(planes) * pixels) {
            c.planes.reset();
            c.planes = histeq::DeviceBuffer<std::uint8_t>(std::size_t(planes) * pixels);
          }
          c.eq.extract_planes(src, pixels, channels, md, c.planes.get());
          for (int p = 0; p < planes; ++p) {
            ran = c.eq.histogram(kernel, c.planes.get() + std::size_t(p) * pixels, pixels,
                                 histeq::SampleType::u8, kBins, dst + std::size_t(p) * kBins);
          }
        }
        end(c);
        return ran;
      },
      "device"_a, "stream"_a, "input"_a, "pixels"_a, "channels"_a, "mode"_a.none(), "bins"_a,
      "kernel"_a, "output"_a);

  bind_files(m);
  bind_clahe16(m);
  bind_match(m);

  // ---- one file (the single-file API) ----
  m.def(
      "equalize_file",
      [](const FsPath& input_path, const FsPath& output_path, std::optional<std::string> mode,
         std::string formula, std::string kernel, std::string backend, int quality,
         std::uint64_t max_pixels) {
        const std::string& input = input_path.bytes;
        const std::string& output = output_path.bytes;
        const histeq::EqualizeOptions o = options(mode, formula, kernel, backend);
        histeq::check_output_path(output);
        if (quality < 1 || quality > 100) {
          throw histeq::UsageError("quality must be in 1..100, got " + std::to_string(quality));
        }
        histeq::EqualizeReport rep;
        histeq::Image out;
        int w = 0, h = 0, ch = 0;
        {
          nb::gil_scoped_release release;
          const histeq::Image in = histeq::load_image(input, max_pixels);
          w = in.width;
          h = in.height;
          ch = in.channels;
          out = histeq::equalize(in, o, &rep);
          histeq::save_image(out, output, quality);
        }
        nb::dict d;
        d["input"] = histeq::python::fs_text(input);
        d["output"] = histeq::python::fs_text(output);
        d["width"] = w;
        d["height"] = h;
        d["channels"] = ch;
        // the file's channels (a JPEG drops alpha, a BMP is BGR or BGRA), as the executor reports
        d["output_channels"] = histeq::encoded_channels(
            out.channels, std::filesystem::path(output).extension().string());
        d["mode"] = histeq::to_string(rep.mode);
        d["backend"] = rep.backend;
        d["kernel"] = rep.kernel;
        d["device"] = rep.device;
        return d;
      },
      "input"_a, "output"_a, "mode"_a.none(), "formula"_a, "kernel"_a, "backend"_a, "quality"_a,
      "max_pixels"_a);

  m.def(
      "load_image",
      [](const FsPath& path) {
        histeq::Image img;
        {
          nb::gil_scoped_release release;
          img = histeq::load_image(path.bytes);
        }
        std::vector<std::size_t> shape{std::size_t(img.height), std::size_t(img.width)};
        if (img.channels > 1) shape.push_back(std::size_t(img.channels));
        return to_numpy(std::move(img.pixels), shape);
      },
      "path"_a);

  m.def(
      "save_image",
      [](HostU8 a, int height, int width, int channels, const FsPath& path, int quality) {
        histeq::Image img = image_from(a, height, width, channels);
        nb::gil_scoped_release release;
        histeq::save_image(img, path.bytes, quality);
      },
      "image"_a, "height"_a, "width"_a, "channels"_a, "path"_a, "quality"_a);
}
