// png_checks.cpp — see png_checks.hpp.
#include "io/png_checks.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <libdeflate.h>

namespace histeq::detail {
namespace {

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

bool is_png(const std::uint8_t* d, std::size_t len) {
  static const std::uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return len >= 8 && std::memcmp(d, kSig, 8) == 0;
}

/// A chunk's type as printable text ('?' for other bytes).
std::string chunk_name(const std::uint8_t* d, std::size_t len, std::size_t pos) {
  std::string s(reinterpret_cast<const char*>(d + pos + 4),
                std::min<std::size_t>(4, len - pos - 4));
  for (char& ch : s)
    if (!std::isprint(static_cast<unsigned char>(ch))) ch = '?';
  return s;
}

}  // namespace

// stb_image 2.27 grows its IDAT buffer to the length a chunk declares (doubling up to 2^31
// bytes) before it checks that the bytes are there, so a 150-byte file made it allocate 2 GiB
// (fuzz_decode_equalize, run 5; tests/fuzz/crashes/decode/): a chunk that runs past the end is
// refused instead. Neither stb nor libspng (for the chunks it does not read) checks every CRC:
// a flipped bit would decode to silently wrong pixels, or a misread header.
std::string png_chunk_problem(const std::uint8_t* d, std::size_t len) {
  if (!is_png(d, len)) return "";
  std::size_t pos = 8;
  while (pos + 8 <= len) {  // length and type present
    const std::uint64_t n = be32(d + pos);
    if (n + 12 > len - pos)  // data and CRC do not fit in what is left of the file
      return "truncated or corrupt PNG: a chunk declares more bytes than the file holds in "
             "chunk '" +
             chunk_name(d, len, pos) + "'";
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    // CRC-32 of type + data (libdeflate's implementation).
    const std::uint32_t c = libdeflate_crc32(0, d + pos + 4, std::size_t(n) + 4);
    if (c != be32(d + pos + 8 + n))
      return "corrupt PNG: CRC mismatch in chunk '" + chunk_name(d, len, pos) + "'";
#endif
    if (std::memcmp(d + pos + 4, "IEND", 4) == 0) return "";
    pos += 12 + n;
  }
  return "";  // ends without IEND: png_size_problem / the structure check say so
}

std::uint64_t png_filtered_bytes(std::uint64_t w, std::uint64_t h, unsigned bits,
                                 unsigned interlace) {
  if (interlace != 1) return h * (1 + (w * bits + 7) / 8);
  static const int xs[7] = {0, 4, 0, 2, 0, 1, 0}, ys[7] = {0, 0, 4, 0, 2, 0, 1},
                   xi[7] = {8, 8, 4, 4, 2, 2, 1}, yi[7] = {8, 8, 8, 4, 4, 2, 2};
  std::uint64_t need = 0;
  for (int p = 0; p < 7; ++p) {
    const std::uint64_t pw = w > std::uint64_t(xs[p]) ? (w - xs[p] + xi[p] - 1) / xi[p] : 0;
    const std::uint64_t ph = h > std::uint64_t(ys[p]) ? (h - ys[p] + yi[p] - 1) / yi[p] : 0;
    if (pw && ph) need += ph * (1 + (pw * bits + 7) / 8);
  }
  return need;
}

std::string png_size_problem(const std::uint8_t* d, std::size_t len) {
  if (!is_png(d, len)) return "";
  std::uint64_t w = 0, h = 0, idat = 0;
  unsigned depth = 0, ctype = 0, interlace = 0;
  bool ihdr = false, iend = false;
  std::string last = "signature";
  for (std::size_t pos = 8; pos + 8 <= len && !iend;) {
    const std::uint64_t n = be32(d + pos);
    if (n + 12 > len - pos) break;  // png_chunk_problem refuses it
    const std::uint8_t* type = d + pos + 4;
    last = chunk_name(d, len, pos);
    if (!std::memcmp(type, "IHDR", 4) && n >= 13) {
      w = be32(d + pos + 8);
      h = be32(d + pos + 12);
      depth = d[pos + 16];
      ctype = d[pos + 17];
      interlace = d[pos + 20];
      ihdr = true;
    } else if (!std::memcmp(type, "IDAT", 4)) {
      idat += n;
    } else if (!std::memcmp(type, "IEND", 4)) {
      iend = true;
    }
    pos += 12 + n;
  }
  constexpr std::uint64_t kMaxSide = std::uint64_t(1) << 24;   // both decoders' bound
  static const unsigned kChannels[7] = {1, 0, 3, 1, 2, 0, 4};  // by colour type
  if (!ihdr || w == 0 || h == 0 || w > kMaxSide || h > kMaxSide || ctype > 6 ||
      kChannels[ctype] == 0 || depth == 0 || depth > 16)
    return "";  // the decoder refuses the header itself
  if (!iend) return "truncated PNG: no IEND chunk (the file ends after chunk '" + last + "')";
  if (idat == 0) return "corrupt PNG: no image data (IDAT chunk)";
  const std::uint64_t need = png_filtered_bytes(w, h, depth * kChannels[ctype], interlace);
  // Deflate cannot expand more than 1032:1: fewer compressed bytes cannot hold the image.
  if (need > idat * 1032 + 1024)
    return "truncated PNG: " + std::to_string(idat) +
           " bytes of compressed image data cannot hold the " + std::to_string(need) +
           " bytes of a " + std::to_string(w) + "x" + std::to_string(h) + " image";
  return "";
}

}  // namespace histeq::detail
