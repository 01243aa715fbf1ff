// decode_checks.hpp — checks of an image file's own structure before stb_image decodes it, and
// the binary PNM decoder (internal to histeq_host; used by image_io.cpp).
//
// The rule (docs/reliability.md §3b): every pixel of a decoded image comes from the file, or
// decoding fails with a reason. stb_image 2.27 reads past the end of its input as zeros and
// looks palette entries up without a bound, so a truncated or inconsistent file decodes to zero
// fill or to uninitialized memory. These functions walk each format as stb reads it and report
// what stb cannot: data shorter than the header promises (checked from the file size, before
// any pixel memory is allocated), palette/colour-map indices past the palette, an incomplete
// LZW stream, a PNG whose zlib data inflates to more or less than the header needs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "histeq/types.hpp"

namespace histeq::detail {

/// Binary PNM (P5 gray, P6 RGB) header, as read by pnm_header.
struct PnmHeader {
  std::uint64_t width = 0, height = 0;
  int channels = 0;             // 1 (P5) or 3 (P6)
  unsigned maxval = 0;          // 1..65535; > 255: two bytes per sample, big-endian
  std::size_t data_offset = 0;  // first sample byte
};

/// True when the bytes start with "P5" or "P6".
bool is_binary_pnm(const std::uint8_t* d, std::size_t len);

/// Parses a P5/P6 header (whitespace and '#' comments, width, height, maxval, one whitespace
/// byte). Returns "" or the reason (maxval 0 or > 65535, a number missing, ...).
std::string pnm_header(const std::uint8_t* d, std::size_t len, PnmHeader* out);

/// Decodes the samples after a parsed header into 8-bit pixels (channels 1 or 3). maxval 255:
/// bytes as they are; any other maxval m: v -> round(v * 255 / m), 16-bit samples (m > 255)
/// read big-endian (Netpbm). Checks before allocating that the file holds
/// width*height*channels*(1 or 2) bytes; a sample above maxval is refused.
/// Returns "" or the reason.
std::string pnm_decode(const std::uint8_t* d, std::size_t len, const PnmHeader& h, Image* out);

/// stb's zlib decoder with a bounded output (stbi_zlib_decode_buffer or its no-header variant):
/// returns the bytes written, or -1 (corrupt data or more than `cap` bytes: see *why).
using BoundedInflate = int (*)(char* out, int cap, const char* in, int in_len, bool zlib_header,
                               const char** why);

/// BMP, TGA, GIF and PNG structure checks, run after the header's dimensions passed the pixel
/// limit and before stb_image decodes the file. Returns "" when every pixel stb will produce
/// comes from the file, otherwise the reason (names the defect: truncated data, palette index
/// out of range, incomplete LZW data, ...). Formats it does not recognize: "".
/// `inflate` is used for PNG (the IDAT stream is inflated once, bounded by what the header
/// needs, so a decompression bomb is refused without inflating it).
std::string structure_problem(const std::uint8_t* d, std::size_t len, BoundedInflate inflate);

/// True for a BMP whose header states a negative height (rows stored top-down; valid BMP).
/// stb_image's info reports that height negative; its decoder handles it.
bool bmp_is_top_down(const std::uint8_t* d, std::size_t len);

/// The format the file's signature names ("PNG", "JPEG", "GIF", "BMP", "TGA", "PNM") or "image".
const char* format_name(const std::uint8_t* d, std::size_t len);

}  // namespace histeq::detail
