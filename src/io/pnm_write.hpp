// io/pnm_write.hpp — what histeq's two binary PGM/PPM writers share (8-bit in image_encode.cpp,
// 16-bit in png16.cpp): which Netpbm type an output extension takes for an image's channels.
// Room io (docs/architecture.md): private to the room.
#pragma once
#include <string>

#include "histeq/error.hpp"

namespace histeq::detail {

/// ".pgm", ".ppm", ".pnm" (lower case, with the dot).
inline bool is_pnm_ext(const std::string& ext) {
  return ext == ".pgm" || ext == ".ppm" || ext == ".pnm";
}

/// The magic number's digit, '5' (PGM, gray) or '6' (PPM, colour), that a file of extension
/// `ext` (is_pnm_ext) is written with for an image of `channels` at `bits` per sample (8 or 16):
/// .pgm holds gray images, .ppm colour ones, and .pnm either (PGM for gray, PPM for colour, as
/// ImageMagick writes .pnm). Throws UsageError saying which extension fits: colour as .pgm,
/// gray as .ppm, and alpha (2 or 4 channels), which no binary PGM/PPM holds.
inline char pnm_kind(const std::string& ext, int channels, int bits) {
  const std::string what = (bits == 8 ? "an 8-bit " : "a 16-bit ") + ext + " file";
  if (channels == 2 || channels == 4)
    throw UsageError(what + " cannot hold the image's alpha channel (" + std::to_string(channels) +
                     " channels: " + (channels == 2 ? "gray+alpha" : "RGBA") + "): write .png");
  if (ext == ".pgm" && channels == 3)
    throw UsageError(what + " holds gray images and this one is colour (3 channels): write .ppm, " +
                     "or .pnm (PGM for gray, PPM for colour)" +
                     (bits == 8 ? std::string(", or a gray result (mode gray)") : std::string()));
  if (ext == ".ppm" && channels == 1)
    throw UsageError(what +
                     " holds colour images and this one is gray (1 channel): write .pgm, or .pnm "
                     "(PGM for gray, PPM for colour)");
  return channels == 1 ? '5' : '6';
}

}  // namespace histeq::detail
