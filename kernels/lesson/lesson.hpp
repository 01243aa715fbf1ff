// lesson.hpp — host-side numbers and rules of the int-array lesson's kernel designs
// (perthread, tworeduce, cooperative, shortcounters). Plain C++: the rules here are unit-tested on
// the CPU. The kernels themselves live in perthread.cu, tworeduce.cu, cooperative.cu and
// shortcounters.cu; docs/kernels.md ("The int-array lesson's designs") explains them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "histogram/contract.hpp"

namespace histeq::kernels {

/// Shared memory one block may use on the H100/H200 (sm_90) with the opt-in attribute:
/// 227 KB = 232,448 bytes. unsupported() of the lesson kernels is decided against this number;
/// at launch, a device that offers less (cudaDevAttrMaxSharedMemoryPerBlockOptin) makes the
/// kernel throw UsageError with the numbers.
inline constexpr std::size_t kLessonSmemPerBlockLimit = 227 * 1024;

/// Samples each thread should count, at least, before its block pays for the per-bin reduction:
/// the grid is never larger than ceil(n / (block · kLessonSamplesPerThread)).
inline constexpr std::size_t kLessonSamplesPerThread = 64;

/// Most blocks a lesson kernel launches (bounds scratch_bytes, which cannot ask the device).
/// One full wave on the H200 is at most 132 SMs × 16 blocks of 128 threads = 2,112 blocks.
inline constexpr int kLessonMaxGrid = 4096;

/// Most samples one block may count: per-block sums are uint32, so every grid has at least
/// ceil(n / kLessonMaxBlockShare) blocks (2^31 leaves room for the head/tail samples).
inline constexpr std::size_t kLessonMaxBlockShare = std::size_t(1) << 31;

/// shortcounters: the most samples a thread counts into its 8-bit counters between two flushes
/// into the block's uint32 histogram. 255 is the largest count an 8-bit counter holds, so no
/// counter can wrap whatever the data (a constant input puts every sample in one counter).
inline constexpr int kShortcountersFlushInterval = 255;

/// The cooperative kernel's grid-sizing rule: as many blocks as can be resident at once
/// (sm_count · blocks_per_sm, from cudaOccupancyMaxActiveBlocksPerMultiprocessor), so that
/// cudaLaunchCooperativeKernel never fails with cudaErrorCooperativeLaunchTooLarge; no more than
/// the work needs (ceil(n / (block · kLessonSamplesPerThread))), no more than kLessonMaxGrid, and
/// at least 1. Throws histeq::Error when sm_count or blocks_per_sm is < 1 (the kernel does not
/// fit on an SM) or block < 1.
int cooperative_grid_size(int sm_count, int blocks_per_sm, std::size_t n, int block);

/// Blocks in the grid of a non-cooperative lesson kernel, from the same inputs: one full wave
/// (sm_count · blocks_per_sm), capped by the work and kLessonMaxGrid, but never fewer than
/// ceil(n / kLessonMaxBlockShare) (so uint32 per-block counts cannot overflow) and never 0.
int lesson_grid_size(int sm_count, int blocks_per_sm, std::size_t n, int block);

/// Upper bound of the grid of tworeduce and cooperative for any device and block size
/// (scratch_bytes = this · bins · 4).
int lesson_max_grid(std::size_t n);

/// Default block size of the per-thread uint32 sub-histogram designs (perthread, tworeduce,
/// cooperative): the largest power of two in [32, 128] whose bins · block · 4 bytes fit the
/// 48 KB that needs no opt-in; 32 when none does (bins > 384: opt-in shared memory).
int perthread_default_block(int bins);

/// The lesson kernels, defined in their own files and listed in registry.cu.
extern const KernelEntry kPerthread;
extern const KernelEntry kTworeduce;
extern const KernelEntry kCooperative;
extern const KernelEntry kShortcounters;

}  // namespace histeq::kernels
