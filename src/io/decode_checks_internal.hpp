// io/decode_checks_internal.hpp — what the files behind decode_checks.hpp share:
//   decode_checks.cpp       the BMP, TGA and GIF walkers; structure_problem, format_name
//   decode_checks_png.cpp   the PNG walker (png_problem)
//   decode_checks_jpeg.cpp  the JPEG marker walk and its checks
//   pnm_read.cpp            the binary PGM/PPM header and decoder
// Room io (docs/architecture.md): private to the room.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/decode_checks.hpp"

namespace histeq::detail {

/// A number in a message.
inline std::string num(std::uint64_t v) { return std::to_string(v); }

// stb_image's STBI_MAX_DIMENSIONS as image_io.cpp sets it: larger sides are refused by stb (and
// by check_dims' pixel limit in practice); the walkers leave those files to it, which also keeps
// every size product they compute in 64 bits.
inline constexpr std::uint64_t kMaxSide = std::uint64_t(1) << 24;

/// structure_problem for a PNG (its signature checked): the chunks, the IDAT stream inflated
/// once with `inflate`, bounded by what the header needs, and the palette indices. Returns ""
/// or the reason; "" too for files stb refuses itself.
std::string png_problem(const std::uint8_t* d, std::size_t len, BoundedInflate inflate);

}  // namespace histeq::detail
