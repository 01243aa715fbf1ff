// histeq/codec.hpp — the decode and encode stages as swappable codecs (the hook where nvJPEG,
// libjpeg-turbo, histeq's PNG decoder or a caller's own codec plug in), and the chain that asks
// them in order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "histeq/image_io.hpp"
#include "histeq/types.hpp"

namespace histeq {

/// A swappable codec for the decode and encode stages (the hook where nvJPEG / libjpeg-turbo
/// plug in). The executor asks the codecs of ExecutorOptions::codecs in order; the first that
/// accepts an item does the stage, otherwise stb_image / stb_image_write (image_io.hpp) do.
/// Implementations must be thread-safe: several workers call them at once. Errors: throw
/// histeq::Error naming the file and the cause (the item then fails alone).
class Codec {
 public:
  virtual ~Codec() = default;
  /// A short name for reports ("stb", "libjpeg-turbo", ...).
  virtual std::string name() const = 0;
  /// Decodes `size` bytes of the file `name` into *out (8-bit, 1..4 channels, interleaved);
  /// false when this codec does not take the input (the next one is asked).
  virtual bool decode(const std::uint8_t* data, std::size_t size, const std::string& name,
                      std::uint64_t max_pixels, Image* out) {
    (void)data, (void)size, (void)name, (void)max_pixels, (void)out;
    return false;
  }
  /// Encodes `img` to the format of `ext` (".png", ".jpg", ...) into *out; false when this
  /// codec does not write that format (the next one is asked).
  virtual bool encode(const Image& img, const std::string& ext, const EncodeOptions& opt,
                      std::vector<std::uint8_t>* out) {
    (void)img, (void)ext, (void)opt, (void)out;
    return false;
  }
};

}  // namespace histeq
