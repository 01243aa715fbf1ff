// pdl.cuh — programmatic dependent launch (compute capability 9.0 and later) for the kernels of a
// multi-launch chain (CLAHE: tile histograms -> LUTs -> apply; 16-bit: count -> sum; the batched
// equalizer: histograms -> apply).
//
// A launch through pdl::launch may begin while the kernel before it in the stream is still
// running: its blocks are scheduled on SMs that the previous grid has left idle, do their set-up
// (geometry, weights), and block in pdl::wait() until the previous grid has completed and its
// memory is visible. That hides the launch latency and the ramp of the dependent grid behind the
// tail of the previous one (the last wave of a histogram kernel rarely fills every SM).
// The producing kernel calls pdl::allow_dependents() once its main loop is done, or not at all:
// then the dependent is launched as the producer's blocks exit (still without the launch gap).
//
// The contract of a kernel launched with pdl::launch: it calls pdl::wait() before its first
// access to global memory that any earlier work of the stream may write or read (its inputs, its
// outputs — in-place calls — and scratch). Set-up that reads only kernel parameters may come
// before. wait() is transitive: the previous grid completed after its own wait() returned.
//
// Source: CUDA C++ Programming Guide, "Programmatic Dependent Launch and Synchronization";
// PTX ISA, `griddepcontrol`.
//
// Each launch site is an Edge; Tuning::pdl_edges (a sum of Edge values; 0: none) picks the edges
// that use it, for measurement (`histeq bench --tune pdl=MASK`); by default kDefaultEdges, the
// ones measured faster.
// Where it measured slower: a dependent's blocks placed early are spread over the SMs the
// producer leaves idle, not evenly, and an SM that never drains keeps the producer's
// shared-memory carve-out (a smaller L1 for a gather-bound apply).
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "histeq/tuning.hpp"
#include "support/cuda_check.hpp"
#include "support/device.hpp"
#include "support/pdl_edges.hpp"

namespace histeq::kernels::pdl {

/// The edges that launch programmatically under `t`: its pdl_edges, or kDefaultEdges where that
/// is negative.
inline unsigned edges(const Tuning& t) {
  return t.pdl_edges < 0 ? kDefaultEdges : unsigned(t.pdl_edges);
}

/// Blocks until every grid this one depends on programmatically has completed and its memory
/// operations are visible; returns at once in a grid launched without the attribute.
__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Lets the next grid of the stream (launched with pdl::launch) be scheduled once every block of
/// this grid has called this or exited. It does not make this grid's writes visible: the
/// dependent's wait() does that.
__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

/// Whether launches on the current device may use the attribute: compute capability 9.0 or
/// later, and the kernels' code compiled for 9.0 or later (so that their wait() is there, not
/// compiled out: a build for an older architecture JIT-compiled on a newer GPU has ptxVersion
/// below 90). The library's kernels are compiled for one set of architectures, so `kernel`,
/// the first launched here on a device, decides for all of them (detail::per_device_once).
inline bool allowed(const void* kernel) {
  static const char tag = 0;
  return detail::per_device_once(&tag, [kernel] {
           if (!detail::sm90_or_newer()) return 0;
           cudaFuncAttributes attr{};
           HISTEQ_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
           return attr.ptxVersion >= 90 ? 1 : 0;
         }) == 1;
}

/// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialization where
/// `edge` is one of edges(t) and allowed(kernel) (else a plain launch with the same
/// configuration). Compile-time cluster dimensions (__cluster_dims__) are kept. Checks the
/// launch.
template <typename... Params, typename... Args>
void launch(Edge edge, const Tuning& t, void (*kernel)(Params...), dim3 grid, dim3 block,
            std::size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = (edges(t) & edge) != 0 && allowed(reinterpret_cast<const void*>(kernel)) ? 1 : 0;
  // Checked as the <<<>>> launches are (HISTEQ_CUDA_CHECK_LAUNCH): cudaGetLastError returns this
  // launch's error, or one left pending before it, and clears it.
  (void)cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
  HISTEQ_CUDA_CHECK_LAUNCH();
}

}  // namespace histeq::kernels::pdl
