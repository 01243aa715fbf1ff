// histeq/cpu.hpp — the CPU backend: every stage of the pipeline on the host, byte for byte equal
// to the device stages. Threads: 0 means usable_cpus().
#pragma once
#include <cstddef>
#include <cstdint>

#include "histeq/lut.hpp"
#include "histeq/operation.hpp"
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
/// `planes` holds plane_count(mode, channels) * pixels bytes. `order` says which of a colour
/// pixel's channels is red (the luma of luma and gray modes); rgb mode's planes are the
/// channels in memory order.
void extract_planes(const std::uint8_t* in, std::size_t pixels, int channels, Mode mode,
                    std::uint8_t* planes, int threads = 0, ChannelOrder order = ChannelOrder::rgb);

/// Writes the equalized image: luts[p] is the LUT of plane p. `out` holds
/// pixels * output_channels(mode, channels) bytes; alpha is copied unchanged. `out` may equal
/// `in` (not otherwise overlap it). `order` as extract_planes (luma mode writes the channels
/// back in that order).
void apply(const std::uint8_t* in, std::size_t pixels, int channels, Mode mode, const Lut* luts,
           std::uint8_t* out, int threads = 0, ChannelOrder order = ChannelOrder::rgb);

/// Luma mode's recombination around a luma plane made elsewhere (CLAHE's): out pixel i is
/// input pixel i with its Y replaced by y[i] (color::chroma of the input pixel, color::to_rgb
/// with y[i]), alpha copied. channels 3 or 4; `order` as extract_planes; out may equal in.
void replace_luma(const std::uint8_t* in, std::size_t pixels, int channels, const std::uint8_t* y,
                  std::uint8_t* out, int threads = 0, ChannelOrder order = ChannelOrder::rgb);

/// The 256-bin histogram of the counted pixels of one 8-bit plane (width x height, row-major);
/// region.all(): every pixel, as histogram(). Region::check is the caller's.
Histogram histogram(const std::uint8_t* plane, int width, int height, const Region& region,
                    int threads = 0);

/// The 8-bit stage sequence on the CPU, as every caller runs it: the planes of a colour image
/// (extract_planes) → a 256-bin histogram per plane of the pixels opt.region counts (every pixel
/// by default) → (apply) a LUT per plane (make_lut with opt.formula; with opt.reference,
/// match_lut to its histogram of that plane, or to its one histogram for every plane) → the
/// LUTs applied to every pixel. A region that does not fit the image or counts nothing throws
/// UsageError (Region::check); a reference of another plane count or not 256 bins throws Error.
/// Fills `rep` (backend "cpu", device "CPU (N threads)", kernel "cpu", mode, histograms of the
/// counted pixels, LUTs, stage times; total_ms the call's wall time). apply false: stops after
/// the histograms and returns an empty image. Metadata (exif, icc) travels to the result.
Image equalize_stages(const Image& in, const EqualizeOptions& opt, bool apply, int threads,
                      EqualizeReport& rep);
/// The same on pixels the caller owns (opt.order says which channel is red), into `out`
/// (pixels · output_channels bytes; may equal in.pixels; unused when !apply).
void equalize_stages_into(const ImageView<std::uint8_t>& in, const EqualizeOptions& opt, bool apply,
                          int threads, std::uint8_t* out, EqualizeReport& rep);
/// The same, consuming `in`: when the output has the input's channels the result is written over
/// the input's pixels (cpu::apply reads each pixel before writing it), so no second image-sized
/// buffer exists.
Image equalize_stages(Image&& in, const EqualizeOptions& opt, bool apply, int threads,
                      EqualizeReport& rep);

/// Whether the backend takes its SIMD paths where the processor has them (checked at run time:
/// AVX2 for luma and luma mode's colour round trip, AVX-512 VBMI for the gray LUT apply): on by
/// default. Off: the portable loops other processors run, for tests and measurement (`histeq
/// bench --tune cpu.simd=0`). The bytes are the same either way. Process-wide, thread-safe.
void set_simd(bool on);
bool simd();

}  // namespace histeq::cpu
