// histeq/types.hpp — plain value types shared by every stage.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace histeq {

/// Element type of the samples a histogram counts.
///  u8:  bytes (image pixels); sample v goes to bin (v * bins) / 256, so 256 bins is the identity.
///  i32: 32-bit signed integers already holding a bin index; v in [0, bins) goes to bin v and
///       values outside that range are not counted (as cub::DeviceHistogram::HistogramEven).
enum class SampleType : std::uint8_t { u8, i32 };

inline std::size_t sample_bytes(SampleType t) { return t == SampleType::u8 ? 1 : 4; }
const char* to_string(SampleType t);
/// "u8" or "i32" (also "int32"); throws UsageError naming the valid choices.
SampleType parse_sample_type(std::string_view s);

/// Most bins any kernel is asked to support (shared-memory privatization limit of the contract).
inline constexpr int kMaxBins = 4096;

/// A histogram: counts[b] = number of samples in bin b. 64-bit, so no image overflows it.
using Histogram = std::vector<std::uint64_t>;

/// An 8-bit image, row-major, channels interleaved (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA).
/// pixels.size() == width * height * channels.
struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;
  /// Metadata carried from input to output (empty when absent): the JPEG APP1 EXIF payload
  /// ("Exif\0\0" + TIFF; its Orientation is 1 once the pixels were rotated to it) and the ICC
  /// colour profile (from JPEG APP2 or the PNG iCCP chunk). See jpeg_codec.hpp.
  std::vector<std::uint8_t> exif;
  std::vector<std::uint8_t> icc;

  std::size_t pixel_count() const { return std::size_t(width) * std::size_t(height); }
  std::size_t byte_count() const { return pixel_count() * std::size_t(channels); }
};

/// An image the caller owns, read in place: width × height pixels of `channels` interleaved
/// samples (T: uint8_t or uint16_t), rows contiguous, pixels[0, width · height · channels).
template <class T>
struct ImageView {
  const T* pixels = nullptr;
  int width = 0;
  int height = 0;
  int channels = 0;

  std::size_t pixel_count() const { return std::size_t(width) * std::size_t(height); }
  std::size_t sample_count() const { return pixel_count() * std::size_t(channels); }
};

/// The order of a colour image's first three channels: R, G, B (histeq's decoders, PIL,
/// scikit-image, torchvision) or B, G, R (OpenCV's cv2.imread). It matters where a pixel's
/// luma is computed (Mode::luma and Mode::gray: Y weighs R and B differently); Mode::rgb
/// equalizes each channel on its own either way. Alpha stays the fourth channel.
enum class ChannelOrder : std::uint8_t { rgb, bgr };
const char* to_string(ChannelOrder o);
ChannelOrder parse_channel_order(std::string_view s);  // "rgb" | "bgr"; throws UsageError

/// What is equalized in a colour image.
///  luma: Y of YCbCr (BT.601 full range, OpenCV's COLOR_RGB2YCrCb fixed point), chroma kept.
///  rgb:  each colour channel on its own histogram.
///  gray: one output channel, the equalized luma.
/// An alpha channel is always passed through unchanged (dropped by gray).
enum class Mode : std::uint8_t { luma, rgb, gray };
const char* to_string(Mode m);
Mode parse_mode(std::string_view s);  // throws UsageError

/// The CDF → LUT formula (see lut.hpp).
enum class Formula : std::uint8_t { opencv, exact };
const char* to_string(Formula f);
Formula parse_formula(std::string_view s);  // throws UsageError

/// Where the stages run. automatic: CUDA when a usable device exists, else CPU.
enum class Backend : std::uint8_t { automatic, cuda, cpu };
const char* to_string(Backend b);
Backend parse_backend(std::string_view s);  // "auto" | "cuda" | "cpu"; throws UsageError

}  // namespace histeq
