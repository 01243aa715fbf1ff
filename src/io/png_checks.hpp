// png_checks.hpp — the PNG checks both PNG decoders make before they allocate anything: stb_image
// for 8-bit files (image_io.cpp, whose fuller structure check, decode_checks.hpp, follows) and
// libspng for 16-bit ones (png16.cpp). Internal to histeq_host.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace histeq::detail {

/// Every chunk from the signature up to IEND fits in the file, and its CRC-32 matches (ISO
/// 3309, as the PNG spec; fuzz builds skip the CRC, FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION,
/// as libpng does). Returns "" or the reason, naming the chunk ("corrupt PNG: CRC mismatch in
/// chunk 'IDAT'"). Not a PNG: "".
std::string png_chunk_problem(const std::uint8_t* d, std::size_t len);

/// The filtered scanline bytes a PNG of w x h at `bits` per pixel needs (every Adam7 pass when
/// interlace is 1): what its IDAT stream must inflate to.
std::uint64_t png_filtered_bytes(std::uint64_t w, std::uint64_t h, unsigned bits,
                                 unsigned interlace);

/// Before the pixels of a PNG are allocated (after png_chunk_problem and the pixel limit): an
/// IEND chunk, image data (IDAT), and enough compressed bytes for the filtered scanlines the
/// header declares (deflate expands at most 1032:1), so that a tiny file declaring a huge image
/// is refused before it costs memory. The same reasons as the 8-bit path's structure check
/// ("truncated PNG: no IEND chunk ..."). Returns "" or the reason; not a PNG, or a header the
/// decoder refuses itself: "".
std::string png_size_problem(const std::uint8_t* d, std::size_t len);

}  // namespace histeq::detail
