// stream_hold.hpp — holds a stream while the benchmark enqueues its timed launches, so that
// CUDA events measure GPU execution, not how fast the host can launch (nvbench's "blocking
// kernel", NVIDIA/nvbench docs/benchmarks.md: "GPU time"; used by CUB's own benchmarks).
//
// Without it, back-to-back timing on a host that launches more slowly than the GPU runs (seen
// on the H200 machine: an empty kernel between two events measured 5.5 µs, the same for 1×32
// and 264×1024 threads) times the host's launch rate, not the kernel.
#pragma once
#include <cuda_runtime_api.h>

namespace histeq::kernels {

/// While alive and not released, a one-thread kernel spins on `stream` until release() (a flag
/// in mapped pinned host memory) or until `timeout_s` seconds of GPU time have passed — the
/// timeout keeps a host that blocks while enqueuing (a full launch queue) from deadlocking.
/// Enqueue at most a few hundred operations while holding. Throws CudaError on failure.
class StreamHold {
 public:
  explicit StreamHold(cudaStream_t stream, double timeout_s = 5.0);
  ~StreamHold();  ///< releases if release() was not called
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;

  /// Lets the held stream run.
  void release();
  /// After the stream has passed the hold (synchronize first): true when the kernel gave up
  /// waiting, so launches enqueued after the timeout were not held.
  bool timed_out() const;

 private:
  cudaStream_t stream_ = nullptr;
  volatile int* flags_ = nullptr;  ///< [0] release, [1] timed out; mapped pinned memory
};

/// Launches an empty kernel (one block of 32 threads) on `stream`: timed between two events it
/// is the launch floor of the machine, the time no launch can go below (the benchmark prints it).
void launch_empty(cudaStream_t stream);

}  // namespace histeq::kernels
