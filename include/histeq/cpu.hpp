// histeq/cpu.hpp — the CPU backend: every stage of the pipeline on the host, byte for byte equal
// to the device stages. Threads: 0 means usable_cpus().
#pragma once
#include <cstddef>
#include <cstdint>

#include "histeq/lut.hpp"
#include "histeq/types.hpp"

namespace histeq::cpu {

/// The CPUs this process may run on: the size of its affinity mask (taskset, cgroup cpusets,
/// container limits set that way), else std::thread::hardware_concurrency(), at least 1. Every
/// "0: as many threads as cores" default in histeq means this number.
int usable_cpus();

/// Histogram of n samples (SampleType rules in types.hpp) into `bins` bins, 1..kMaxBins.
/// Threaded; each thread counts into several interleaved sub-histograms (breaks the
/// store-to-load dependency on repeated values), then they are summed.
/// Throws UsageError for bins outside 1..kMaxBins.
Histogram histogram(const void* in, std::size_t n, SampleType type, int bins, int threads = 0);

/// Histogram (256 bins, by value) of a `width` x `height` block of u8 samples whose rows are
/// `stride` bytes apart (a plane with padding, e.g. a JPEG's stored Y), on the calling thread.
Histogram histogram_rows(const std::uint8_t* p, std::size_t width, std::size_t height,
                         std::size_t stride);

/// planes[p * pixels + i] = plane p of pixel i (planes.hpp says which planes a mode has).
/// `planes` holds plane_count(mode, channels) * pixels bytes.
void extract_planes(const std::uint8_t* in, std::size_t pixels, int channels, Mode mode,
                    std::uint8_t* planes, int threads = 0);

/// Writes the equalized image: luts[p] is the LUT of plane p. `out` holds
/// pixels * output_channels(mode, channels) bytes; alpha is copied unchanged.
void apply(const std::uint8_t* in, std::size_t pixels, int channels, Mode mode, const Lut* luts,
           std::uint8_t* out, int threads = 0);

/// Whether the backend takes its SIMD paths where the processor has them (checked at run time:
/// AVX2 for luma and luma mode's colour round trip, AVX-512 VBMI for the gray LUT apply): on by
/// default. Off: the portable loops other processors run, for tests and measurement (`histeq
/// bench --tune cpu.simd=0`). The bytes are the same either way. Process-wide, thread-safe.
void set_simd(bool on);
bool simd();

}  // namespace histeq::cpu
