// histeq/hd.hpp — marks functions compiled for both host and device, so that the CPU backend and
// the CUDA kernels share one definition of every formula (one source of truth, byte-equal results).
#pragma once
#if defined(__CUDACC__)
#define HISTEQ_HD __host__ __device__ __forceinline__
#else
#define HISTEQ_HD inline
#endif
