// bench/sweep.cpp — the benchmark's sweep (bench::measure in bench/bench.hpp): the data cases
// (synthetic or decoded images), each checked against the CPU reference and then timed
// (bench/timing.cpp) for every kernel × block size × L2 state; the skip rules.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <thread>

#include "bench/detail.hpp"
#include "histeq/clahe.hpp"
#include "histeq/clahe_gpu.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/gpu16.hpp"
#include "histeq/image_io.hpp"
#include "histeq/lut.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/planes.hpp"
#include "histogram/registry.hpp"
#include "support/cuda_check.hpp"

namespace fs = std::filesystem;

namespace histeq::bench {

using namespace internal;

std::string skip_reason(const char* unsupported, std::size_t needed_bytes, std::size_t free_bytes) {
  if (unsupported) return std::string("unsupported: ") + unsupported;
  if (needed_bytes > free_bytes) {
    auto mib = [](std::size_t b) { return fmt(double(b) / double(1 << 20), 1); };
    return "needs " + mib(needed_bytes) + " MiB of device memory, " + mib(free_bytes) + " MiB free";
  }
  return {};
}

namespace {

/// One data set: every kernel × block × L2 state runs on it.
struct DataCase {
  SampleType type = SampleType::u8;
  int bins = 256;
  std::size_t n = 0;
  std::string label;                                 ///< distribution name or image:<file>
  std::optional<Distribution> dist;                  ///< synthetic
  const std::vector<std::uint8_t>* plane = nullptr;  ///< image plane (u8)
};

std::string iso_utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool is_image_name(const fs::path& p) {
  static const std::set<std::string> exts = {".png", ".jpg", ".jpeg", ".bmp", ".tga", ".gif",
                                             ".pgm", ".ppm", ".pnm",  ".psd", ".hdr", ".pic"};
  return exts.count(lower(p.extension().string())) > 0;
}

/// Files named by --images: files as given, folders expanded to their image files (sorted).
std::vector<std::string> expand_images(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> in_dir;
      for (const auto& e : fs::directory_iterator(p, ec)) {
        if (e.is_regular_file(ec) && is_image_name(e.path())) in_dir.push_back(e.path().string());
      }
      if (ec) throw Error("cannot list folder '" + p + "': " + ec.message());
      std::sort(in_dir.begin(), in_dir.end());
      if (in_dir.empty()) throw Error("folder '" + p + "' holds no image files");
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      throw Error("image '" + p + "' does not exist");
    }
  }
  return files;
}

/// Why a result differs from the reference, or "" when it is acceptable. Exact kernels must
/// match bin for bin; a non-exact one may only lose counts (every bin ≤ the exact one).
std::string compare(const Histogram& got, const Histogram& ref, bool exact, std::uint64_t* lost) {
  std::size_t bad = 0, first = 0;
  std::uint64_t sum_got = 0, sum_ref = 0;
  for (std::size_t b = 0; b < ref.size(); ++b) {
    sum_got += got[b];
    sum_ref += ref[b];
    const bool wrong = exact ? got[b] != ref[b] : got[b] > ref[b];
    if (wrong && bad++ == 0) first = b;
  }
  if (lost) *lost = sum_ref >= sum_got ? sum_ref - sum_got : 0;
  if (!bad) return {};
  return std::to_string(bad) + " bin(s) " + (exact ? "differ" : "exceed the exact count") +
         "; first: bin " + std::to_string(first) + " = " + std::to_string(got[first]) +
         ", expected " + (exact ? "" : "<= ") + std::to_string(ref[first]);
}
/// µs per timed launch: `warmup` launches, then `reps` launches each between two events
/// (time_reps: held stream with Timing::gpu).
std::vector<double> time_kernel(const kernels::KernelEntry& e, const kernels::HistogramLaunch& call,
                                const Options& opt, L2 l2, Gpu& g) {
  return time_reps(call.stream, opt.warmup, opt.reps, opt.timing, l2_flush(l2, g, call.stream),
                   [&] { kernels::run_histogram(e, call); });
}

class Sweep {
 public:
  explicit Sweep(const Options& opt) : opt_(opt) {}

  std::vector<Cell> cells;
  bool any_fail = false;

  void start_gpu(Gpu* g) { gpu_ = g; }

  void run_case(const DataCase& dc, const std::uint8_t* data) {
    const Histogram ref = cpu::histogram(data, dc.n, dc.type, dc.bins);
    std::string case_fail;
    if (opt_.lesson) {
      for (std::size_t b = 0; b < ref.size(); ++b) {
        if (ref[b] != kLessonPerBin) {
          case_fail = "lesson array: bin " + std::to_string(b) + " holds " +
                      std::to_string(ref[b]) + ", expected " + std::to_string(kLessonPerBin);
          break;
        }
      }
    }
    if (opt_.equalize) {
      run_equalize(dc, data, ref);
      return;
    }
    if (opt_.clahe) {
      run_clahe(dc, data);
      return;
    }
    const bool want_cpu = !gpu_ || std::find(opt_.kernels.begin(), opt_.kernels.end(),
                                             kCpuKernel) != opt_.kernels.end();
    if (want_cpu) run_cpu(dc, data, ref, case_fail);
    if (gpu_) run_gpu(dc, data, ref, case_fail);
  }

 private:
  Cell base(const DataCase& dc, const std::string& kernel, int block, const std::string& l2) {
    Cell c;
    c.kernel = kernel;
    c.type = dc.type;
    c.bins = dc.bins;
    c.n = dc.n;
    c.dist = dc.label;
    c.block = block;
    c.l2 = l2;
    return c;
  }

  void add(Cell c) {
    if (c.status == "FAIL") any_fail = true;
    cells.push_back(std::move(c));
  }

  /// --equalize: the whole equalization of one u8 case, on the CPU and (with a GPU) fused and
  /// in three stages, each output compared byte for byte with the CPU's.
  void run_equalize(const DataCase& dc, const std::uint8_t* data, const Histogram& ref) {
    const Lut lut = make_lut(ref.data(), Formula::opencv);
    std::vector<std::uint8_t> want(dc.n), got(dc.n);
    {
      Cell c = base(dc, "equalize:cpu", 0, "-");
      std::vector<double> us;
      for (int r = 0; r < opt_.warmup + opt_.reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        const Histogram h = cpu::histogram(data, dc.n, SampleType::u8, 256);
        const Lut l = make_lut(h.data(), Formula::opencv);
        cpu::apply(data, dc.n, 1, Mode::gray, &l, want.data());
        const auto t1 = std::chrono::steady_clock::now();
        if (r >= opt_.warmup)
          us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      std::vector<std::uint8_t> direct(dc.n);
      cpu::apply(data, dc.n, 1, Mode::gray, &lut, direct.data());
      c.status = direct == want ? "PASS" : "FAIL";
      if (c.status == "FAIL") c.reason = "CPU equalize is not deterministic";
      set_times(c, us);
      add(std::move(c));
    }
    if (!gpu_) return;
    std::string why = skip_reason(nullptr, 2 * dc.n, free_device_bytes());
    if (!why.empty()) {
      for (const char* k : {"equalize:fused", "equalize:columns", "equalize:cub"}) {
        add_all(dc, k, "SKIP", "input " + why);
      }
      return;
    }
    DeviceBuffer<std::uint8_t> d_in(dc.n), d_out(dc.n);
    if (dc.n) HISTEQ_CUDA_CHECK(cudaMemcpy(d_in.get(), data, dc.n, cudaMemcpyHostToDevice));
    // A pageable-memory copy may return before the data lands, and the Equalizer's stream is
    // non-blocking (not ordered after the legacy stream): wait for the copy.
    HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
    gpu::Equalizer eq;
    eq.set_tuning(opt_.tune.gpu);
    const cudaStream_t s = eq.stream();
    for (const char* kernel : {"auto", "columns", "cub"}) {
      // Check once.
      std::string ran = eq.equalize_gray(d_in.get(), d_out.get(), dc.n, Formula::opencv, kernel);
      eq.synchronize();
      if (dc.n)
        HISTEQ_CUDA_CHECK(cudaMemcpy(got.data(), d_out.get(), dc.n, cudaMemcpyDeviceToHost));
      std::string reason;
      if (got != want) {
        std::size_t i = 0;
        while (got[i] == want[i]) ++i;
        reason = "output differs from the CPU at byte " + std::to_string(i) + ": " +
                 std::to_string(got[i]) + " vs " + std::to_string(want[i]);
      }
      for (L2 l : opt_.l2) {
        const std::vector<double> us = time_reps(
            s, opt_.warmup, opt_.reps, opt_.timing, l2_flush(l, *gpu_, s),
            [&] { eq.equalize_gray(d_in.get(), d_out.get(), dc.n, Formula::opencv, kernel); });
        Cell c = base(dc, "equalize:" + ran, 0, to_string(l));
        c.status = reason.empty() ? "PASS" : "FAIL";
        c.reason = reason;
        set_times(c, us);
        add(std::move(c));
      }
    }
    // The rows run in d_in (the case) and d_out; they check the memory they add themselves.
    // 16-bit rows: 65536 bins, 2 bytes a sample in gbps (size stays in samples).
    const auto row_of = [&](int bins, double bytes_per_sample) {
      return [&, bins, bytes_per_sample](const std::string& kernel, L2 l, const std::string& reason,
                                         const std::vector<double>& us) {
        Cell c = base(dc, kernel, 0, to_string(l));
        c.bins = bins;
        c.status = reason.empty() ? "PASS" : "FAIL";
        c.reason = reason;
        set_times(c, us);
        if (c.median_us > 0) c.gbps *= bytes_per_sample;
        add(std::move(c));
      };
    };
    region_rows(data, dc.n, d_in.get(), d_out.get(), opt_, *gpu_, row_of(256, 1.0),
                row_of(65536, 2.0), [&](const std::string& kernel, const std::string& reason) {
                  add_all(dc, kernel, "SKIP", reason);
                });
  }

  /// --clahe: CLAHE (clip 2, 8x8) of one u8 case as a w × h image, w = floor(sqrt(n)), on the
  /// CPU and (with a GPU) with gpu::Clahe, the GPU output compared byte for byte.
  void run_clahe(const DataCase& dc, const std::uint8_t* data) {
    const int w = std::max(1, int(std::sqrt(double(dc.n))));
    const int h = int(dc.n / std::size_t(w));
    const std::size_t m = std::size_t(w) * std::size_t(h);
    ClaheOptions o;
    o.clip_limit = 2.0;  // the benchmark's CLAHE: clip 2, 8x8 (docs/benchmarks.md)
    std::vector<std::uint8_t> want(m), got(m);
    if (m == 0 || h < 1) {
      add_all(dc, "clahe:cpu", "SKIP", "empty case");
      return;
    }
    {
      Cell c = base(dc, "clahe:cpu", 0, "-");
      std::vector<double> us;
      for (int r = 0; r < opt_.warmup + opt_.reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        cpu::clahe_plane(data, w, h, o, want.data());
        const auto t1 = std::chrono::steady_clock::now();
        if (r >= opt_.warmup)
          us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      c.status = "PASS";
      set_times(c, us);
      add(std::move(c));
    }
    if (!gpu_) return;
    std::string why = skip_reason(nullptr, 2 * m, free_device_bytes());
    if (!why.empty()) {
      add_all(dc, "clahe:gpu", "SKIP", "input " + why);
      return;
    }
    DeviceBuffer<std::uint8_t> d_in(m), d_out(m);
    HISTEQ_CUDA_CHECK(cudaMemcpy(d_in.get(), data, m, cudaMemcpyHostToDevice));
    HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());  // the engine's stream is non-blocking
    gpu::Clahe engine;
    engine.set_tuning(opt_.tune.gpu);
    const cudaStream_t s = engine.stream();
    engine.apply(d_in.get(), d_out.get(), w, h, o);
    engine.synchronize();
    HISTEQ_CUDA_CHECK(cudaMemcpy(got.data(), d_out.get(), m, cudaMemcpyDeviceToHost));
    std::string reason;
    if (got != want) {
      std::size_t i = 0;
      while (got[i] == want[i]) ++i;
      reason = "output differs from the CPU at byte " + std::to_string(i) + ": " +
               std::to_string(got[i]) + " vs " + std::to_string(want[i]);
    }
    for (L2 l : opt_.l2) {
      const std::vector<double> us =
          time_reps(s, opt_.warmup, opt_.reps, opt_.timing, l2_flush(l, *gpu_, s),
                    [&] { engine.apply(d_in.get(), d_out.get(), w, h, o); });
      Cell c = base(dc, "clahe:gpu", 0, to_string(l));
      c.status = reason.empty() ? "PASS" : "FAIL";
      c.reason = reason;
      set_times(c, us);
      add(std::move(c));
    }
    run_clahe16(dc, data, w, h);
  }

  /// --clahe, 16-bit rows: the case's bytes made into m u16 samples (high byte the sample, low
  /// byte the sample half the case away), timed as 16-bit CLAHE ("clahe16:gpu", checked against
  /// cpu::clahe_plane16) and as the 65536-bin histogram alone ("hist16:gpu", checked against
  /// cpu::histogram16). gbps of these rows counts 2 bytes per sample (size stays in samples).
  void run_clahe16(const DataCase& dc, const std::uint8_t* data, int w, int h) {
    const std::size_t m = std::size_t(w) * std::size_t(h);
    std::string why = skip_reason(nullptr, 4 * m + (std::size_t(64) << 23), free_device_bytes());
    if (!why.empty()) {
      add_all(dc, "clahe16:gpu", "SKIP", "input " + why);
      return;
    }
    std::vector<std::uint16_t> src(m), want(m), got(m);
    for (std::size_t i = 0; i < m; ++i)
      src[i] = static_cast<std::uint16_t>((data[i] << 8) | data[(i + m / 2) % m]);
    ClaheOptions o;
    o.clip_limit = 2.0;
    cpu::clahe_plane16(src.data(), w, h, o, want.data());
    DeviceBuffer<std::uint16_t> d_in(m), d_out(m);
    HISTEQ_CUDA_CHECK(cudaMemcpy(d_in.get(), src.data(), m * 2, cudaMemcpyHostToDevice));
    HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
    auto first_diff = [](const auto& a, const auto& b) {
      std::size_t i = 0;
      while (i < a.size() && a[i] == b[i]) ++i;
      return i == a.size() ? std::string()
                           : "differs from the CPU at " + std::to_string(i) + ": " +
                                 std::to_string(a[i]) + " vs " + std::to_string(b[i]);
    };
    auto row = [&](const std::string& kernel, L2 l, const std::string& reason,
                   const std::vector<double>& us) {
      Cell c = base(dc, kernel, 0, to_string(l));
      c.bins = 65536;
      c.status = reason.empty() ? "PASS" : "FAIL";
      c.reason = reason;
      set_times(c, us);
      if (c.median_us > 0) c.gbps = double(2 * m) / (c.median_us * 1e3);
      add(std::move(c));
    };
    {
      gpu::Clahe engine;
      engine.set_tuning(opt_.tune.gpu);
      engine.set_tuning(opt_.tune.gpu);
      const cudaStream_t s = engine.stream();
      engine.apply16(d_in.get(), d_out.get(), w, h, o);
      engine.synchronize();
      HISTEQ_CUDA_CHECK(cudaMemcpy(got.data(), d_out.get(), m * 2, cudaMemcpyDeviceToHost));
      const std::string reason = first_diff(got, want);
      for (L2 l : opt_.l2) {
        row("clahe16:gpu", l, reason,
            time_reps(s, opt_.warmup, opt_.reps, opt_.timing, l2_flush(l, *gpu_, s),
                      [&] { engine.apply16(d_in.get(), d_out.get(), w, h, o); }));
      }
    }
    {
      gpu::Equalizer16 eq;
      eq.set_tuning(opt_.tune.gpu);
      const cudaStream_t s = eq.stream();
      DeviceBuffer<std::uint64_t> d_hist(65536);
      eq.histogram(d_in.get(), m, d_hist.get());
      eq.synchronize();
      std::vector<std::uint64_t> hg(65536);
      HISTEQ_CUDA_CHECK(cudaMemcpy(hg.data(), d_hist.get(), hg.size() * 8, cudaMemcpyDeviceToHost));
      const std::string reason = first_diff(hg, cpu::histogram16(src.data(), m));
      for (L2 l : opt_.l2) {
        row("hist16:gpu", l, reason,
            time_reps(s, opt_.warmup, opt_.reps, opt_.timing, l2_flush(l, *gpu_, s),
                      [&] { eq.histogram(d_in.get(), m, d_hist.get()); }));
      }
    }
  }

  void run_cpu(const DataCase& dc, const std::uint8_t* data, const Histogram& ref,
               const std::string& case_fail) {
    Cell c = base(dc, kCpuKernel, 0, "-");
    Histogram got;
    for (int i = 0; i < opt_.warmup; ++i) got = cpu::histogram(data, dc.n, dc.type, dc.bins);
    std::vector<double> us;
    for (int r = 0; r < opt_.reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      got = cpu::histogram(data, dc.n, dc.type, dc.bins);
      const auto t1 = std::chrono::steady_clock::now();
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    // The reference is the same function: this checks that it is deterministic.
    const std::string diff = compare(got, ref, true, nullptr);
    c.status = diff.empty() && case_fail.empty() ? "PASS" : "FAIL";
    c.reason = !case_fail.empty() ? case_fail : diff;
    set_times(c, us);
    add(std::move(c));
  }

  /// Rows for every block × L2 state of one kernel, all with the same status and reason.
  void add_all(const DataCase& dc, const std::string& kernel, const std::string& status,
               const std::string& reason) {
    for (int block : opt_.blocks) {
      for (L2 l : opt_.l2) {
        Cell c = base(dc, kernel, block, to_string(l));
        c.status = status;
        c.reason = reason;
        add(std::move(c));
      }
    }
  }

  void run_gpu(const DataCase& dc, const std::uint8_t* data, const Histogram& ref,
               const std::string& case_fail) {
    std::vector<const kernels::KernelEntry*> entries;
    std::vector<std::string> labels;  // the row's kernel name: the entry's, or "auto"
    for (const auto& name : opt_.kernels) {
      if (name == kCpuKernel) continue;
      if (name == kAutoKernel) {
        kernels::HistogramLaunch probe;
        probe.n = dc.n;
        probe.type = dc.type;
        probe.bins = dc.bins;
        try {
          entries.push_back(&kernels::choose_auto(probe));
        } catch (const UsageError& ex) {
          add_all(dc, kAutoKernel, "SKIP", ex.what());
          continue;
        }
      } else {
        entries.push_back(&kernels::find_kernel(name));
      }
      labels.push_back(name);
    }
    if (entries.empty()) return;

    const std::size_t in_bytes = dc.n * sample_bytes(dc.type);
    std::string why = skip_reason(nullptr, in_bytes, free_device_bytes());
    DeviceBuffer<std::uint8_t> d_in;
    if (why.empty()) {
      try {
        d_in = DeviceBuffer<std::uint8_t>(in_bytes);
      } catch (const DeviceOutOfMemory& e) {
        why = std::string("input does not fit: ") + e.what();
      }
    }
    if (!why.empty()) {
      for (const auto& label : labels) add_all(dc, label, "SKIP", "input " + why);
      return;
    }
    if (in_bytes) {
      HISTEQ_CUDA_CHECK(cudaMemcpy(d_in.get(), data, in_bytes, cudaMemcpyHostToDevice));
      // The kernels run on a non-blocking stream: make sure the pageable copy has landed.
      HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
    }

    for (std::size_t k = 0; k < entries.size(); ++k) {
      const kernels::KernelEntry* e = entries[k];
      const std::string& label = labels[k];
      const std::size_t scratch = e->scratch_bytes(dc.n, dc.bins, dc.type);
      std::string skip =
          skip_reason(e->unsupported(dc.type, dc.bins), scratch, free_device_bytes());
      if (!skip.empty() && e->unsupported(dc.type, dc.bins) == nullptr) skip = "scratch " + skip;
      DeviceBuffer<std::uint8_t> d_scratch;
      if (skip.empty()) {
        try {
          d_scratch = DeviceBuffer<std::uint8_t>(scratch);
          kernels::prepare_scratch(*e, d_scratch.get(), d_scratch.bytes(), gpu_->stream.get());
        } catch (const DeviceOutOfMemory& ex) {
          skip = std::string("scratch does not fit: ") + ex.what();
        }
      }
      if (!skip.empty()) {
        add_all(dc, label, "SKIP", skip);
        continue;
      }
      for (int block : opt_.blocks)
        run_kernel(dc, *e, block, d_in.get(), d_scratch.get(), ref, case_fail, label);
    }
  }

  void run_kernel(const DataCase& dc, const kernels::KernelEntry& e, int block, const void* d_in,
                  void* d_scratch, const Histogram& ref, const std::string& case_fail,
                  const std::string& label) {
    // auto rows: the kernel it chose, as the row's note.
    const std::string note = label == e.name ? "" : std::string("auto chose ") + e.name;
    kernels::HistogramLaunch call;
    call.d_in = d_in;
    call.n = dc.n;
    call.type = dc.type;
    call.bins = dc.bins;
    call.d_hist = gpu_->hist.get();
    call.d_scratch = d_scratch;
    call.stream = gpu_->stream.get();
    call.block_size = block;

    kernels::LaunchShape shape;
    if (e.shape) {
      try {
        shape = e.shape(call);
      } catch (const Error&) {
        // A shape the kernel refuses shows up as the launch's own error below.
      }
    }
    auto fill_shape = [&](Cell& c) {
      c.launch_block = shape.block_size;
      c.launch_grid = shape.grid_size;
      c.launch_smem = shape.smem_bytes;
    };

    // 1. Check: one launch, downloaded and compared with the CPU reference.
    Histogram got(std::size_t(dc.bins), 0);
    std::uint64_t lost = 0;
    std::string diff;
    try {
      kernels::run_histogram(e, call);
      HISTEQ_CUDA_CHECK(cudaMemcpyAsync(got.data(), call.d_hist, got.size() * sizeof(std::uint64_t),
                                        cudaMemcpyDeviceToHost, call.stream));
      HISTEQ_CUDA_CHECK(cudaStreamSynchronize(call.stream));
      diff = compare(got, ref, e.exact, &lost);
    } catch (const UsageError& ex) {
      // The kernel refuses this call (e.g. a block size it cannot use): not a failure.
      for (L2 l : opt_.l2) {
        Cell c = base(dc, label, block, to_string(l));
        c.status = "SKIP";
        c.reason = ex.what();
        add(std::move(c));
      }
      return;
    } catch (const Error& ex) {
      diff = ex.what();
    }
    if (!case_fail.empty() && diff.empty()) diff = case_fail;

    for (L2 l : opt_.l2) {
      Cell c = base(dc, label, block, to_string(l));
      fill_shape(c);
      c.lost = lost;
      if (!diff.empty()) {
        c.status = "FAIL";
        c.reason = diff;
        add(std::move(c));
        continue;
      }
      // 2. Time.
      try {
        set_times(c, time_kernel(e, call, opt_, l, *gpu_));
        c.status = "PASS";
        c.reason = note;
      } catch (const Error& ex) {
        c.status = "FAIL";
        c.reason = std::string("while timing: ") + ex.what();
      }
      add(std::move(c));
    }
  }

  const Options& opt_;
  Gpu* gpu_ = nullptr;
};

/// The synthetic cases (type × bins × size × distribution); none when only images were asked.
std::vector<DataCase> synthetic_cases(const Options& opt, bool have_images) {
  std::vector<DataCase> cases;
  if (have_images && !opt.dists_given) return cases;
  for (SampleType t : opt.types) {
    for (int bins : opt.bins) {
      for (std::size_t n : opt.sizes) {
        for (Distribution d : opt.dists) {
          DataCase dc;
          dc.type = t;
          dc.bins = bins;
          dc.n = n;
          dc.dist = d;
          dc.label = to_string(d);
          cases.push_back(dc);
        }
      }
    }
  }
  return cases;
}

/// Prints "[k/total] type bins size label" to err before each case.
class Progress {
 public:
  Progress(std::ostream& err, std::size_t total) : err_(err), total_(total) {}
  void operator()(const DataCase& dc) {
    err_ << "[" << ++done_ << "/" << total_ << "] " << type_name(dc.type) << " " << dc.bins
         << " bins " << format_size(dc.n) << " " << dc.label << '\n';
    err_.flush();
  }

 private:
  std::ostream& err_;
  std::size_t total_, done_ = 0;
};

/// Every case: the synthetic ones (generated one at a time), then each image at each bin count.
void run_cases(const Options& opt, const std::vector<std::string>& image_files, Sweep& sweep,
               std::ostream& err) {
  const std::vector<DataCase> cases = synthetic_cases(opt, !image_files.empty());
  Progress progress(err, cases.size() + image_files.size() * opt.bins.size());
  for (const DataCase& dc : cases) {
    progress(dc);
    SyntheticSpec spec;
    spec.dist = *dc.dist;
    spec.type = dc.type;
    spec.bins = dc.bins;
    spec.n = dc.n;
    spec.seed = opt.seed;
    spec.run_length = opt.run_length;
    const std::vector<std::uint8_t> data = make_samples(spec);
    sweep.run_case(dc, data.data());
  }
  for (const auto& file : image_files) {
    const Image img = load_image(file);
    std::vector<std::uint8_t> plane(img.pixel_count());
    cpu::extract_planes(img.pixels.data(), img.pixel_count(), img.channels,
                        default_mode(img.channels), plane.data());
    for (int bins : opt.bins) {
      DataCase dc;
      dc.type = SampleType::u8;
      dc.bins = bins;
      dc.n = plane.size();
      dc.label = "image:" + fs::path(file).filename().string();
      progress(dc);
      sweep.run_case(dc, plane.data());
    }
  }
}

/// What describes the run before any case: command, time, build commit, timing mode.
RunInfo start_info(const Options& opt) {
  RunInfo info;
  info.command_line = opt.command_line;
  info.timestamp = iso_utc_now();
  info.commit = run_commit();
  info.timing = to_string(opt.timing);
  for (const std::string& kv : opt.tune.given) info.tuning += (info.tuning.empty() ? "" : " ") + kv;
  return info;
}

}  // namespace

Measured measure(const Options& opt, std::ostream& err) {
  RunInfo info = start_info(opt);
  const CpuSimd simd(opt.tune.cpu_simd);
  // Validate the image paths before any long work.
  const std::vector<std::string> image_files = expand_images(opt.images);

  std::string why;
  const bool gpu = cuda_available(&why);
  std::unique_ptr<Gpu> g;
  Sweep sweep(opt);
  bool had_error = false;
  try {
    if (gpu) {
      g = std::make_unique<Gpu>();
      open_gpu(*g, opt, info, err);
      sweep.start_gpu(g.get());
    } else {
      info.gpu_skipped = "no usable CUDA device (" + why + ")";
      const unsigned t = unsigned(cpu::usable_cpus());
      info.device = "CPU (" + std::to_string(t) + " threads)";
      err << "note: GPU kernels skipped: " << info.gpu_skipped
          << "; running the CPU reference only\n";
    }
    run_cases(opt, image_files, sweep, err);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    err << "histeq bench: error: " << e.what() << '\n';
    had_error = true;
  } catch (const std::bad_alloc&) {
    err << "histeq bench: error: out of host memory\n";
    had_error = true;
  }

  // GPU rows have an L2 state ("hot"/"cold"); CPU rows "-", timed with the steady clock.
  const bool gpu_timed = std::any_of(sweep.cells.begin(), sweep.cells.end(),
                                     [](const Cell& c) { return c.reps > 0 && c.l2 != "-"; });
  if (!gpu_timed) info.timing = "cpu";
  compute_derived(sweep.cells, info.read_bw_gbps);
  return {std::move(info), std::move(sweep.cells), had_error, sweep.any_fail};
}

}  // namespace histeq::bench
