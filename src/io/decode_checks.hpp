// decode_checks.hpp — checks of an image file's own structure before stb_image decodes it, and
// the binary PNM decoder (internal to histeq_host; used by image_io.cpp, and by png16.cpp for
// the 16-bit PGM/PPM path).
//
// The rule (docs/reliability.md §3b): every pixel of a decoded image comes from the file, or
// decoding fails with a reason. stb_image 2.27 reads past the end of its input as zeros and
// looks palette entries up without a bound, so a truncated or inconsistent file decodes to zero
// fill or to uninitialized memory. These functions walk each format as stb reads it and report
// what stb cannot: data shorter than the header promises (checked from the file size, before
// any pixel memory is allocated), palette/colour-map indices past the palette, an incomplete
// LZW stream, a PNG whose zlib data inflates to more or less than the header needs. For JPEG
// (decoded by libjpeg-turbo, jpeg_codec.cpp) the marker walk below finds what libjpeg-turbo
// decodes anyway (components no scan covers) and declared sizes the data cannot hold.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "histeq/image16.hpp"
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

/// The same samples at 16 bits (load_image16's PNM path): maxval 65535 as they are, any other
/// maxval m: v -> round(v * 65535 / m) (255: v * 257). The same checks and reasons as
/// pnm_decode: the length before allocating, and a sample above maxval is refused (not clamped).
std::string pnm_decode16(const std::uint8_t* d, std::size_t len, const PnmHeader& h, Image16* out);

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

/// One component of a JPEG frame header (SOFn).
struct JpegComponent {
  int id = 0;
  int h = 0, v = 0;  // sampling factors (1..4 in a file libjpeg-turbo decodes)
};

/// One scan (SOS) of a JPEG, its header read as libjpeg-turbo 2.1 reads it (jdmarker.c get_sos).
struct JpegScan {
  std::vector<int> frame_index;  // per scan component, the frame component it names (0-based)
  std::vector<int> dc_table, ac_table;  // per scan component, its Huffman table selectors Td, Ta
  int ss = 0, se = 0, ah = 0, al = 0;
  std::uint64_t data_bytes = 0;  // entropy-coded bytes after the header up to the next marker
                                 // (stuffed zeros and RSTn markers counted)
};

/// A JPEG's frame header and scans, walked from SOI to EOI (or the end of the bytes) the way
/// libjpeg-turbo's marker reader goes: bytes between markers skipped, 0xFF fill bytes, segments
/// by their length, entropy-coded data up to the next marker that is neither FF00 nor RSTn.
struct JpegLayout {
  unsigned sof = 0;  // the SOFn marker byte (0xC0..0xCF), 0 when no frame header was found
  std::uint64_t width = 0, height = 0;
  std::vector<JpegComponent> components;
  std::vector<JpegScan> scans;  // well-formed scan headers only
  bool eoi = false;             // the walk ended at EOI (false: at the end of the bytes)
  std::string problem;          // the first header libjpeg-turbo refuses ("" when none)
  /// A Huffman-coded scan uses a table that no DHT segment before it defined. libjpeg-turbo
  /// then decodes with the standard tables of T.81 Annex K (as Motion-JPEG frames expect):
  /// defined pixels. Other decoders may not (stb_image read uninitialized tables), so such a
  /// file goes to libjpeg-turbo only.
  bool undefined_huffman_table = false;
};

/// Walks a JPEG (the caller checked the SOI, FF D8) without decoding anything; O(len).
JpegLayout jpeg_layout(const std::uint8_t* d, std::size_t len);

/// Every frame component is covered by a scan: some scan names it (progressive: a DC-first scan,
/// Ss = 0 and Ah = 0); sampling factors 1..4; at least one scan. libjpeg-turbo decodes a
/// component no scan covers from its zeroed coefficient buffers (a gray or green image, exit 0).
/// Returns "" or the reason ("component 3 (id 3) is never covered by a scan", "no scan", or
/// "truncated" when the bytes end before EOI).
std::string jpeg_scan_problem(const JpegLayout& l);

/// The declared size against the bytes that must code it, for Huffman-coded JPEGs (SOF0, SOF1,
/// SOF2): every 8x8 block of every component in a scan that codes DC coefficients (Ss = 0)
/// costs at least one bit of that scan's entropy-coded data (a Huffman code is 1..16 bits; a
/// DC refinement bit is 1 bit), so each such scan needs at least ceil(blocks / 8) bytes. Blocks
/// are counted as a non-interleaved scan codes them, ceil(X*Hi/Hmax/8) x ceil(Y*Vi/Vmax/8)
/// (T.81 A.2.2; an interleaved scan codes MCU-padded blocks, at least as many): no valid file
/// is refused. Arithmetic coding (SOF9, SOF10) has no such bound: T.81's decoder supplies zero
/// bytes past the data and libjpeg's encoder drops trailing zeros, so a valid 16384x16384
/// arithmetic JPEG of one gray level is 125 bytes (cjpeg -arithmetic): those files are bounded
/// by the pixel limit only. Returns "" or the reason, naming the declared size and file_size.
std::string jpeg_size_problem(const JpegLayout& l, std::size_t file_size);

/// The JPEG checks before any pixel memory: "" for processes libjpeg-turbo does not decode
/// (lossless, hierarchical: it refuses them itself) and when no frame header was found (libjpeg
/// names what is wrong); otherwise the layout's problem, jpeg_scan_problem, jpeg_size_problem.
std::string jpeg_structure_problem(const std::uint8_t* d, std::size_t len);

/// jpeg_layout(d, len).undefined_huffman_table.
bool jpeg_undefined_huffman_table(const std::uint8_t* d, std::size_t len);

/// True for a BMP whose header states a negative height (rows stored top-down; valid BMP).
/// stb_image's info reports that height negative; its decoder handles it.
bool bmp_is_top_down(const std::uint8_t* d, std::size_t len);

/// True for a 32-bit BMP stored BI_RGB (no masks): the format leaves its fourth byte unused, so
/// the image has three channels, as OpenCV's imread reads it (stb_image takes that byte for
/// alpha). A BI_BITFIELDS file has the alpha its alpha mask names.
bool bmp_is_rgb32(const std::uint8_t* d, std::size_t len);

/// The format the file's signature names ("PNG", "JPEG", "GIF", "BMP", "TGA", "PNM") or "image".
const char* format_name(const std::uint8_t* d, std::size_t len);

}  // namespace histeq::detail
