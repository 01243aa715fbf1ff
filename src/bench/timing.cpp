// bench/timing.cpp — the benchmark's clock (bench/detail.hpp): CUDA-event pairs around each rep,
// the stream hold that keeps the host's launch gaps out of them, the cold-L2 flush, and the two
// reference figures of a run (streaming read bandwidth, empty-launch floor).
#include <algorithm>
#include <memory>
#include <ostream>

#include "bench/detail.hpp"
#include "support/cuda_check.hpp"
#include "support/stream_hold.hpp"
#include "support/stream_read.hpp"

namespace histeq::bench::internal {

double median_of(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

namespace {
/// Cells whose stream hold timed out (reported at the end of the run).
int g_hold_timeouts = 0;
}  // namespace

int hold_timeouts() { return g_hold_timeouts; }

std::size_t free_device_bytes() {
  std::size_t free_b = 0, total_b = 0;
  HISTEQ_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return free_b;
}

/// µs of each of `reps` runs of `launch` on stream s, each between its own pair of events,
/// after `warmup` untimed runs; `before(r)` runs before run r's launch, outside the timing (the
/// cold-L2 flush), for warm-up and timed runs alike. With
/// Timing::gpu the stream is held (kernels::StreamHold) while a batch of reps is enqueued, so
/// no rep waits for the host; with Timing::enqueue the reps run as the host issues them.
std::vector<double> time_reps(cudaStream_t s, int warmup, int reps, Timing timing,
                              const std::function<void(int)>& before,
                              const std::function<void()>& launch, std::ostream* err) {
  for (int i = 0; i < warmup; ++i) {
    if (before) before(i);
    launch();
  }
  constexpr int kBatch = 32;  // a few hundred queued operations at most while held
  std::vector<Event> start(std::size_t(std::max(reps, 0))), stop(start.size());
  bool timed_out = false;
  for (int b = 0; b < reps; b += kBatch) {
    std::unique_ptr<kernels::StreamHold> hold;
    if (timing == Timing::gpu) hold = std::make_unique<kernels::StreamHold>(s);
    for (int r = b; r < std::min(reps, b + kBatch); ++r) {
      if (before) before(r);
      start[std::size_t(r)].record(s);
      launch();
      stop[std::size_t(r)].record(s);
    }
    if (hold) {
      hold->release();
      HISTEQ_CUDA_CHECK(cudaStreamSynchronize(s));
      timed_out = timed_out || hold->timed_out();
    }
  }
  if (timed_out) {
    ++g_hold_timeouts;
    if (err) {
      *err << "note: the stream hold timed out before all reps were enqueued; those reps "
              "include host launch gaps\n";
    }
  }
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    us.push_back(1000.0 * stop[std::size_t(r)].since(start[std::size_t(r)]));
  }
  return us;
}

namespace {

/// µs of an empty kernel between two events (median): the launch floor of this machine.
double measure_launch_floor(Gpu& g, Timing timing, std::ostream& err) {
  const cudaStream_t s = g.stream.get();
  const double med = median_of(time_reps(
      s, 3, 31, timing, nullptr, [&] { kernels::launch_empty(s); }, &err));
  err << "launch floor: " << fmt(med, 2)
      << " us (an empty kernel between two events, median of 31)\n";
  return med;
}

/// GB/s of the streaming read kernel over a buffer much larger than L2 (median of reps).
double measure_read_bandwidth(Gpu& g, Timing timing, std::ostream& err) {
  std::size_t bytes = std::max<std::size_t>(std::size_t(512) << 20, std::size_t(g.l2_bytes) * 8);
  bytes = std::min(bytes, free_device_bytes() / 4) / 16 * 16;
  if (bytes < (std::size_t(16) << 20)) {
    err << "note: too little free device memory to measure the read bandwidth\n";
    return -1;
  }
  DeviceBuffer<std::uint8_t> buf(bytes);
  DeviceBuffer<unsigned> sink(1);
  HISTEQ_CUDA_CHECK(cudaMemsetAsync(buf.get(), 0x5A, bytes, g.stream.get()));
  const cudaStream_t s = g.stream.get();
  constexpr int kReps = 15;
  const std::vector<double> us = time_reps(
      s, 3, kReps, timing, nullptr,
      [&] { kernels::launch_stream_read(buf.get(), bytes, sink.get(), 0, 256, s); }, &err);
  const double med = median_of(us);
  const double gbps = med > 0 ? double(bytes) / (med * 1e3) : -1;
  err << "read bandwidth: " << fmt(gbps, 1) << " GB/s (streaming 16-byte loads over "
      << bytes / (1 << 20) << " MiB, median of " << kReps << ")\n";
  return gbps;
}

}  // namespace

void set_times(Cell& c, const std::vector<double>& us) {
  c.reps = int(us.size());
  c.median_us = median_of(us);
  c.min_us = us.empty() ? -1 : *std::min_element(us.begin(), us.end());
  if (c.median_us > 0) {
    c.gbps = double(c.n * sample_bytes(c.type)) / (c.median_us * 1e3);
    c.gelems = double(c.n) / (c.median_us * 1e3);
  }
}

/// Writes the cold-L2 flush buffer (before rep r) when l2 is cold; nothing when hot.
std::function<void(int)> l2_flush(L2 l2, Gpu& g, cudaStream_t s) {
  if (l2 != L2::cold || g.flush.bytes() == 0) return nullptr;
  return [&g, s](int r) {
    HISTEQ_CUDA_CHECK(cudaMemsetAsync(g.flush.get(), r & 0xFF, g.flush.bytes(), s));
  };
}

void open_gpu(Gpu& g, const Options& opt, RunInfo& info, std::ostream& err) {
  int dev = 0;
  HISTEQ_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  HISTEQ_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  HISTEQ_CUDA_CHECK(cudaDeviceGetAttribute(&g.l2_bytes, cudaDevAttrL2CacheSize, dev));
  g.name = prop.name;
  info.device = prop.name;
  err << "device: " << prop.name << " (" << prop.multiProcessorCount << " SMs, L2 "
      << g.l2_bytes / (1 << 20) << " MiB)\n";
  if (std::find(opt.l2.begin(), opt.l2.end(), L2::cold) != opt.l2.end()) {
    g.flush = DeviceBuffer<std::uint8_t>(std::size_t(std::max(g.l2_bytes, 1 << 20)) * 2);
  }
  info.read_bw_gbps = measure_read_bandwidth(g, opt.timing, err);
  info.launch_floor_us = measure_launch_floor(g, opt.timing, err);
}

}  // namespace histeq::bench::internal
