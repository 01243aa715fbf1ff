// histeq/image16.hpp — 16-bit images, and reading/writing them as 16-bit PNG (libspng) and PGM/PPM.
//
// A separate type from the 8-bit histeq::Image, so that none of the 8-bit code (I/O, pipeline,
// kernels, CLI) changes: a caller that wants 16 bits asks for them with load_image16, and the
// 8-bit paths keep their exact behaviour.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "histeq/types.hpp"

namespace histeq {

/// A 16-bit image, row-major, channels interleaved (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA),
/// samples in host byte order. pixels.size() == width * height * channels.
struct Image16 {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::uint16_t> pixels;
  /// The ICC profile of a PNG input (iCCP, inflated), as Image::icc; empty when none. Written
  /// into a PNG output when its colour space fits the channels (jpeg::icc_fits: GRAY for 1-2,
  /// RGB for 3-4); PGM/PPM cannot hold one.
  std::vector<std::uint8_t> icc;

  std::size_t pixel_count() const { return std::size_t(width) * std::size_t(height); }
  std::size_t sample_count() const { return pixel_count() * std::size_t(channels); }
};

/// True when the file is a PNG with 16-bit samples or a binary PGM/PPM (P5/P6) with maxval > 255
/// (i.e. a file load_image would reduce to 8 bits). Reads only the header. Throws Error when
/// the file cannot be read.
bool is_16bit_image(const std::string& path);

/// The same for a file held in memory: a PNG with IHDR bit depth 16, or a binary PGM/PPM whose
/// header parses with maxval 256..65535 (a header the decoders refuse gives false, so that the
/// 8-bit decoder names its defect). Reads only the header.
bool is_16bit_data(const std::uint8_t* data, std::size_t size);

/// Decodes a PNG (any bit depth and colour type; libspng, 8-bit or palette files widened as
/// v·257) or a binary PGM/PPM (P5/P6; maxval 1..65535, samples big-endian when maxval > 255,
/// scaled to 0..65535 as round(v·65535/maxval) when maxval is neither 255 nor 65535 — exact for
/// 65535, v·257 for 255) into 16-bit samples. PNG: gray → 1 channel, gray+alpha → 2, RGB and
/// palette without transparency → 3, with alpha or tRNS → 4; a PNG's iCCP profile goes into
/// Image16::icc (png::read_iccp, as decode_image keeps it; a bad profile is dropped).
/// Throws Error naming the file and the cause (missing, not a PNG/PNM, truncated, corrupt,
/// zero size, more than max_pixels pixels). PNM is checked as load_image checks it, with the
/// same reasons: maxval 1..65535, data length, and every sample at most maxval (a sample above
/// it is refused, not clamped).
Image16 load_image16(const std::string& path, std::uint64_t max_pixels = std::uint64_t(1) << 28);
Image16 decode_image16(const std::uint8_t* data, std::size_t size, const std::string& name,
                       std::uint64_t max_pixels = std::uint64_t(1) << 28);

/// Writes a 16-bit PNG (.png, libspng; gray, gray+alpha, RGB, RGBA by channel count) or a binary
/// 16-bit PGM/PPM (.pgm 1 channel, .ppm 3 channels, .pnm either; maxval 65535, big-endian), by
/// extension (case-insensitive), as every output is written: write_file_atomic (image_io.hpp;
/// permissions kept, symlinks followed, a FIFO or device written in place). A PNG gets the
/// image's ICC profile as an iCCP chunk when it fits the channels (as the 8-bit writer).
/// Throws UsageError for another extension or a channel count the format cannot hold, Error
/// for I/O failures.
/// The PNG is deflated at zlib's `png_level` (0 stored .. 9 smallest; the default level of
/// every PNG output, kDefaultPngLevel, where none is given); UsageError outside 0..9.
void save_image16(const Image16& img, const std::string& path);
std::vector<std::uint8_t> encode_image16(const Image16& img, const std::string& ext);
std::vector<std::uint8_t> encode_image16(const Image16& img, const std::string& ext, int png_level);

/// 8 ↔ 16 bits: v·257 up, round(v / 257) down (v·255/65535 rounded half up); the ICC profile
/// goes with the pixels.
Image16 widen_to_16(const Image& img);
Image narrow_to_8(const Image16& img);

}  // namespace histeq
