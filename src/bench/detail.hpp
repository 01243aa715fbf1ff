// bench/detail.hpp — the benchmark's internal pieces shared by its files (not installed):
//   bench/args.cpp    option parsing (cxxopts) and --help
//   bench/timing.cpp  the GPU context, CUDA-event timing, read bandwidth and launch floor
//   bench/sweep.cpp   the cases, the checks against the CPU reference, bench::measure
//   bench/report.cpp  derived figures, table/CSV/JSON writers, output files, the plot
//   bench/folder.cpp  --folder: one batch through the executor, and what it did
//   bench.cpp         `histeq bench` itself: checks outputs, measures, reports
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench.hpp"
#include "histeq/cpu.hpp"
#include "histeq/types.hpp"
#include "support/device_buffer.hpp"

namespace histeq::bench::internal {

// ----- text helpers (bench/args.cpp) -----
std::string lower(std::string_view s);
std::string trim(std::string_view s);
const char* type_name(SampleType t);
/// s quoted for a POSIX shell where it needs quoting.
std::string shell_quote(const std::string& s);
/// v with `decimals` decimals; "-" when v < 0 or not finite.
std::string fmt(double v, int decimals);

// ----- timing (bench/timing.cpp) -----
/// The device the GPU rows run on: its stream, a histogram buffer, the cold-L2 flush buffer.
struct Gpu {
  std::string name;
  int l2_bytes = 0;
  Stream stream;
  DeviceBuffer<std::uint64_t> hist{std::size_t(kMaxBins)};
  DeviceBuffer<std::uint8_t> flush;  ///< cold L2: written before each timed rep
};

double median_of(std::vector<double> v);
/// Bytes cudaMemGetInfo reports free. Throws CudaError.
std::size_t free_device_bytes();
/// Timed batches whose stream hold timed out in this process (their reps include launch gaps).
int hold_timeouts();
/// µs of each of `reps` runs of `launch` on stream s, each between its own pair of events,
/// after `warmup` untimed runs; `before(r)` runs before run r's launch, outside the timing.
/// Timing::gpu holds the stream (kernels::StreamHold) while a batch of reps is enqueued.
std::vector<double> time_reps(cudaStream_t s, int warmup, int reps, Timing timing,
                              const std::function<void(int)>& before,
                              const std::function<void()>& launch, std::ostream* err = nullptr);
/// Writes the cold-L2 flush buffer before rep r when l2 is cold; nullptr when hot.
std::function<void(int)> l2_flush(L2 l2, Gpu& g, cudaStream_t s);
/// Median, min, GB/s and Gelem/s of c from the per-rep µs.
void set_times(Cell& c, const std::vector<double>& us);
/// Opens the device, fills info.device and allocates the flush buffer when cold L2 is asked;
/// then the read bandwidth and the launch floor into info. Progress to err.
void open_gpu(Gpu& g, const Options& opt, RunInfo& info, std::ostream& err);

// ----- masked equalization and matching rows (bench/region.cpp) -----
/// One row: its kernel label, L2 state, FAIL reason ("" when it passed its check), µs per rep.
using RowFn = std::function<void(const std::string& kernel, L2 l2, const std::string& reason,
                                 const std::vector<double>& us)>;
/// A row not run: its kernel label and why (a SKIP row of every L2 state).
using SkipFn = std::function<void(const std::string& kernel, const std::string& reason)>;
/// --equalize with a GPU: the u8 case (n samples, already in the caller's d_in; d_out the
/// caller's n-byte output, free to overwrite) as a w x h gray image, the rows hist:columns,
/// hist:mask, hist:roi, equalize:mask, equalize:roi and match:gpu (row), and the 16-bit masked
/// histograms hist16:mask and hist16:mask:constant (row16: 65536 bins, 2 bytes a sample), each
/// checked against the CPU twin and timed (bench/region.cpp says what each runs). Rows whose
/// device memory (beyond the caller's buffers) is not free are skipped (skip).
void region_rows(const std::uint8_t* data, std::size_t n, std::uint8_t* d_in, std::uint8_t* d_out,
                 const Options& opt, Gpu& g, const RowFn& row, const RowFn& row16,
                 const SkipFn& skip);

/// cpu::set_simd for a run's lifetime (the setting is process-wide: `histeq bench` may run
/// inside a longer process, the tests).
class CpuSimd {
 public:
  explicit CpuSimd(bool on) : before_(cpu::simd()) { cpu::set_simd(on); }
  ~CpuSimd() { cpu::set_simd(before_); }
  CpuSimd(const CpuSimd&) = delete;
  CpuSimd& operator=(const CpuSimd&) = delete;

 private:
  bool before_;
};

// ----- --folder (bench/folder.cpp) -----
/// Runs opt.folder through the executor and prints what it did to `out` (errors of files to
/// `err`). Returns 0 when no file failed, else 1; throws UsageError (nothing to do, the
/// executor's options) and Error (the output folder cannot be made).
int run_folder(const Options& opt, std::ostream& out, std::ostream& err);

// ----- reports (bench/report.cpp) -----
/// Writes `path` through body; throws Error naming `what` and the path when it cannot.
void write_file(const std::string& path, const std::string& what,
                const std::function<void(std::ostream&)>& body);
/// Throws Error when `path` cannot be written (a missing or read-only folder, a folder of that
/// name, a read-only file), without creating or truncating anything.
void check_writable(const std::string& path, const std::string& what);
/// Runs bench/plot.py on the CSV; prints to err how to draw it by hand when it cannot.
void make_plot(const Options& opt, const RunInfo& info, const std::vector<Cell>& cells,
               std::ostream& err);

}  // namespace histeq::bench::internal
