// files.cpp — histeq._histeq.plan_files and run_files: the library's plan of a batch
// (include/histeq/inputs.hpp: folders, output names, collisions, the same as the CLI's batch) and
// the many-files executor (include/histeq/executor.hpp) behind histeq.equalize_files, over plain
// lists. run_files runs the items with the GIL released and returns one dict per item, in input
// order. A failed item is a report with ok=False and its error; only errors that concern the
// whole run (bad options, a plan that cannot run) raise (UsageError → ValueError).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "binding_common.hpp"
#include "histeq/clahe.hpp"
#include "histeq/error.hpp"
#include "histeq/executor.hpp"
#include "histeq/image_io.hpp"
#include "histeq/inputs.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/match.hpp"
#include "histeq/pipeline.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using histeq::python::FsPath;
using histeq::python::HostU8;

/// A host image of 8 or 16 bits ((H, W) or (H, W, C), C-contiguous).
using HostImage = nb::ndarray<nb::c_contig, nb::device::cpu>;

/// match_files' reference: the array's samples as an 8- or 16-bit image (RGB order, as the
/// files are decoded), its histograms made per depth and mode by MatchReference when used.
std::shared_ptr<const histeq::MatchReference> match_reference(const HostImage& a) {
  if (a.ndim() != 2 && a.ndim() != 3)
    throw histeq::UsageError("reference: expected shape (H, W) or (H, W, C)");
  const int h = int(a.shape(0)), w = int(a.shape(1)), c = a.ndim() == 3 ? int(a.shape(2)) : 1;
  if (c < 1 || c > 4) throw histeq::UsageError("reference: 1 to 4 channels");
  if (a.dtype() == nb::dtype<std::uint8_t>()) {
    histeq::Image img;
    img.width = w;
    img.height = h;
    img.channels = c;
    const auto* p = static_cast<const std::uint8_t*>(a.data());
    img.pixels.assign(p, p + a.size());
    return std::make_shared<const histeq::MatchReference>(std::move(img), "reference");
  }
  if (a.dtype() == nb::dtype<std::uint16_t>()) {
    histeq::Image16 img;
    img.width = w;
    img.height = h;
    img.channels = c;
    const auto* p = static_cast<const std::uint16_t*>(a.data());
    img.pixels.assign(p, p + a.size());
    return std::make_shared<const histeq::MatchReference>(std::move(img), "reference");
  }
  throw histeq::UsageError("reference: uint8 or uint16 samples expected");
}

/// The files' counted region: a mask of their size (checked per file by the item's run) and/or
/// a rectangle.
histeq::Region region_of_files(const std::optional<HostU8>& mask,
                               const std::optional<histeq::python::RoiTuple>& roi) {
  histeq::Region r;
  if (roi) {
    r.roi = histeq::Roi{std::get<0>(*roi), std::get<1>(*roi), std::get<2>(*roi), std::get<3>(*roi)};
  }
  if (mask) {
    if (mask->ndim() != 2) throw histeq::UsageError("mask: expected shape (H, W)");
    auto m = std::make_shared<histeq::Image>();
    m->height = int(mask->shape(0));
    m->width = int(mask->shape(1));
    m->channels = 1;
    m->pixels.assign(mask->data(), mask->data() + mask->size());
    r.mask = std::move(m);
  }
  return r;
}

nb::dict times_dict(const histeq::ItemTimes& t) {
  nb::dict d;
  d["read"] = t.read_ms;
  d["decode"] = t.decode_ms;
  d["upload"] = t.upload_ms;
  d["equalize"] = t.equalize_ms;
  d["download"] = t.download_ms;
  d["encode"] = t.encode_ms;
  d["write"] = t.write_ms;
  return d;
}

nb::dict report_dict(const histeq::ItemReport& r) {
  nb::dict d;
  d["input"] = histeq::python::fs_text(r.input);
  d["output"] = histeq::python::fs_text(r.output);
  d["ok"] = r.ok;
  if (r.ok) {
    d["error"] = nb::none();
    d["error_kind"] = nb::none();
  } else {
    d["error"] = histeq::python::text(histeq::python::python_words(r.error));
    d["error_kind"] = histeq::to_string(r.error_kind);
  }
  // A file that could not be read or written: the errno (0 where none applies) and the file.
  if (!r.ok && r.error_kind == histeq::ItemError::file) {
    d["errno"] = r.error_errno;
    d["error_path"] = histeq::python::fs_text(r.error_path);
  } else {
    d["errno"] = nb::none();
    d["error_path"] = nb::none();
  }
  d["width"] = r.width;
  d["height"] = r.height;
  d["channels"] = r.channels;
  d["output_channels"] = r.output_channels;
  d["decoder"] = r.decoder;
  d["encoder"] = r.encoder;
  d["output_bytes"] = r.output_bytes;
  d["route"] = r.route;
  // bit_depth and mode are what the image was processed at: None for a failed item (as the CLI's
  // --json line leaves them out), not the defaults of a report nothing filled in.
  if (r.ok) {
    d["bit_depth"] = r.bit_depth;
    d["mode"] = histeq::to_string(r.equalize.mode);
  } else {
    d["bit_depth"] = nb::none();
    d["mode"] = nb::none();
  }
  d["backend"] = r.equalize.backend;
  d["kernel"] = r.equalize.kernel;
  d["device"] = r.equalize.device;
  d["times"] = times_dict(r.times);
  return d;
}

}  // namespace

void bind_files(nb::module_& m) {
  m.attr("DEFAULT_PNG_LEVEL") = histeq::kDefaultPngLevel;
  m.def("default_max_inflight_bytes", &histeq::default_max_inflight_bytes, "jobs"_a,
        "The executor's default cap on bytes in flight for `jobs` workers (0: the cores).");
  // (items, unlisted): items (input, output, format) for run_files; unlisted (path, message,
  // errno) for the inputs that could not be listed, which Python reports or raises as OSError.
  m.def(
      "plan_files",
      [](const std::vector<FsPath>& input_paths, const FsPath& output_dir,
         const std::string& format, const std::string& suffix, bool recursive) {
        std::vector<std::string> inputs;
        inputs.reserve(input_paths.size());
        for (const FsPath& p : input_paths) inputs.push_back(p.bytes);
        histeq::FilePlanOptions po;
        po.output_dir = output_dir.bytes;
        po.naming.format = format;
        po.naming.suffix = suffix;
        po.recursive = recursive;
        histeq::FilePlan plan;
        try {
          nb::gil_scoped_release release;  // a recursive walk may take a while
          plan = histeq::plan_files(inputs, po);
        } catch (const histeq::UsageError& e) {
          // The library leaves the way to give a format to the front end: here, the argument.
          std::string m = e.what();
          const std::string give = std::string(histeq::kGiveAnOutputFormat) + "png";
          const std::size_t at = m.find(give);
          if (at != std::string::npos) m.replace(at, give.size(), "pass format='png'");
          throw histeq::UsageError(m);
        }
        nb::list items;
        for (const histeq::WorkItem& w : plan.items)
          items.append(nb::make_tuple(histeq::python::fs_text(w.input),
                                      histeq::python::fs_text(w.output), w.format));
        nb::list unlisted;
        for (const histeq::UnlistedInput& u : plan.unlisted)
          unlisted.append(nb::make_tuple(histeq::python::fs_text(u.path),
                                         histeq::python::text(u.message()), u.code));
        return nb::make_tuple(items, unlisted);
      },
      "inputs"_a, "output_dir"_a, "format"_a, "suffix"_a, "recursive"_a);
  // items: (input, output, format) with format "" (the output's extension) or ".png" etc.
  m.def(
      "run_files",
      [](const std::vector<std::tuple<FsPath, FsPath, std::string>>& items,
         std::optional<std::string> mode, std::string formula, std::string kernel,
         std::string backend, int quality, int png_level, std::string subsampling, int jobs,
         std::size_t max_inflight_bytes, std::vector<int> devices, std::uint64_t max_pixels,
         std::string decoder, std::string operation, double clip_limit, int tiles_x, int tiles_y,
         int depth, std::optional<HostImage> reference, std::optional<HostU8> mask,
         std::optional<histeq::python::RoiTuple> roi, std::optional<FsPath> output_dir) {
        histeq::ExecutorOptions eo;
        if (operation == "match") {
          if (!reference) throw histeq::UsageError("reference: missing for operation 'match'");
          eo.op.kind = histeq::OpKind::match;
          eo.op.reference = match_reference(*reference);
        } else if (operation == "clahe") {
          eo.op.kind = histeq::OpKind::clahe;
          eo.op.clahe.clip_limit = clip_limit;
          eo.op.clahe.tiles_x = tiles_x;
          eo.op.clahe.tiles_y = tiles_y;
          histeq::validate(eo.op.clahe);
        } else if (operation != "equalize") {
          throw histeq::UsageError("operation: 'equalize', 'clahe' or 'match', got '" + operation +
                                   "'");
        }
        eo.op.equalize.region = region_of_files(mask, roi);
        if (depth != 0 && depth != 8 && depth != 16)
          throw histeq::UsageError("depth: None, 8 or 16, got " + std::to_string(depth));
        eo.op.depth = depth;
        if (mode) eo.op.equalize.mode = histeq::parse_mode(*mode);
        eo.op.equalize.formula = histeq::parse_formula(formula);
        eo.op.equalize.kernel = kernel;
        eo.op.equalize.backend = histeq::parse_backend(backend);
        eo.encode.quality = quality;
        eo.encode.png_level = png_level;
        eo.encode.subsampling = histeq::jpeg::parse_subsampling(subsampling);
        eo.jobs = jobs;
        eo.max_inflight_bytes = max_inflight_bytes;
        eo.devices = std::move(devices);
        eo.max_pixels = max_pixels;
        eo.jpeg = decoder == "gpu"   ? histeq::JpegRoute::gpu
                  : decoder == "cpu" ? histeq::JpegRoute::cpu
                                     : histeq::JpegRoute::automatic;
        std::vector<histeq::WorkItem> work;
        work.reserve(items.size());
        for (const auto& [in, out, fmt] : items) work.push_back({in.bytes, out.bytes, fmt});
        std::vector<histeq::ItemReport> reports;
        reports.reserve(work.size());
        std::string fallback;
        bool interrupted = false;
        // Python runs signal handlers on its main thread only: a batch called from another
        // thread is not watched (and its waiting thread never takes the GIL, which a daemon
        // thread may not at interpreter exit).
        const nb::object threading = nb::module_::import_("threading");
        const bool main_thread =
            threading.attr("main_thread")().attr("ident").equal(threading.attr("get_ident")());
        {
          nb::gil_scoped_release release;
          histeq::Executor ex(std::move(eo));
          // The output folders once the run can start (none made by a run without its device).
          const auto folders = [&] {
            if (output_dir) histeq::make_output_folders(work, output_dir->bytes);
          };
          // The run on a thread of its own; this one looks for Ctrl-C (Python's signal handlers
          // run only when asked, on the main thread) every 0.1 s, and cancels the run: the
          // files in progress finish, no other starts, and KeyboardInterrupt is raised.
          std::mutex mu;
          std::condition_variable cv;
          bool done = false;
          std::exception_ptr error;
          std::thread runner;
          struct Join {  // whatever happens below, the runner is joined before it is destroyed
            std::thread& t;
            ~Join() {
              if (t.joinable()) t.join();
            }
          } join{runner};
          runner = std::thread([&] {
            try {
              ex.run(
                  work, [&](const histeq::ItemReport& r) { reports.push_back(r); }, folders);
            } catch (...) {
              error = std::current_exception();
            }
            std::lock_guard<std::mutex> lock(mu);
            done = true;
            cv.notify_all();
          });
          for (;;) {
            std::unique_lock<std::mutex> lock(mu);
            if (!main_thread) {
              cv.wait(lock, [&] { return done; });
              break;
            }
            if (cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return done; })) break;
            lock.unlock();
            if (!interrupted) {
              nb::gil_scoped_acquire gil;
              if (PyErr_CheckSignals() != 0) {
                interrupted = true;  // the exception stays set for python_error below
                ex.cancel();
              }
            }
          }
          runner.join();
          if (error && !interrupted) std::rethrow_exception(error);
          // Asked only of a run that wanted the GPU: asking starts CUDA (a context) otherwise.
          if (!interrupted && ex.wanted_device()) fallback = ex.cpu_fallback_reason();
        }
        if (interrupted) throw nb::python_error();
        nb::list out;
        for (const auto& r : reports) out.append(report_dict(r));
        return nb::make_tuple(out, fallback);
      },
      "items"_a, "mode"_a.none(), "formula"_a, "kernel"_a, "backend"_a, "quality"_a, "png_level"_a,
      "subsampling"_a, "jobs"_a, "max_inflight_bytes"_a, "devices"_a, "max_pixels"_a,
      "decoder"_a = "auto", "operation"_a = "equalize", "clip_limit"_a = 40.0, "tiles_x"_a = 8,
      "tiles_y"_a = 8, "depth"_a = 0, "reference"_a.none() = nb::none(),
      "mask"_a.none() = nb::none(), "roi"_a.none() = nb::none(),
      "output_dir"_a.none() = nb::none());
}
