// decode_checks_png.cpp — the PNG walker of structure_problem (decode_checks.hpp): the chunks
// as stb_image 2.27 reads them up to IEND, the IDAT stream inflated once into a buffer of the
// size the header needs (a decompression bomb stops at the bound), its length and Adler-32, and
// every palette index against the PLTE's entries. The chunk checks that run before it (each
// chunk within the file, each CRC) are png_checks.cpp's.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "io/decode_checks_internal.hpp"

namespace histeq::detail {
namespace {

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

// ---------------------------------------------------------------- PNG
std::uint32_t adler32(const std::uint8_t* p, std::size_t n) {
  std::uint32_t a = 1, b = 0;
  while (n > 0) {
    const std::size_t k = std::min<std::size_t>(n, 5552);
    for (std::size_t i = 0; i < k; ++i) {
      a += p[i];
      b += a;
    }
    a %= 65521;
    b %= 65521;
    p += k;
    n -= k;
  }
  return (b << 16) | a;
}

std::uint8_t paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return std::uint8_t(a);
  if (pb <= pc) return std::uint8_t(b);
  return std::uint8_t(c);
}

/// What the chunk walk of a PNG found (as stb reads the chunks, up to IEND).
struct PngChunks {
  std::uint64_t w = 0, h = 0;
  unsigned depth = 0, ctype = 0, interlace = 0;
  std::uint64_t plte_entries = 0;
  bool have_plte = false, have_ihdr = false, iend = false, cgbi = false;
  std::vector<std::uint8_t> idat;  // the IDAT chunks' data, joined
  std::string last = "signature";  // the last chunk's type (for a missing IEND)
};

PngChunks png_chunks(const std::uint8_t* d, std::size_t len) {
  PngChunks c;
  std::size_t pos = 8;
  while (pos + 8 <= len) {
    const std::uint64_t n = be32(d + pos);
    if (n + 12 > len - pos) break;  // png_chunk_problem refused it already
    const std::uint8_t* type = d + pos + 4;
    const std::uint8_t* body = d + pos + 8;
    c.last.assign(reinterpret_cast<const char*>(type), 4);
    if (!std::memcmp(type, "IHDR", 4) && n >= 13) {
      c.w = be32(body);
      c.h = be32(body + 4);
      c.depth = body[8];
      c.ctype = body[9];
      c.interlace = body[12];
      c.have_ihdr = true;
    } else if (!std::memcmp(type, "CgBI", 4)) {
      c.cgbi = true;
    } else if (!std::memcmp(type, "PLTE", 4)) {
      c.have_plte = true;
      c.plte_entries = n / 3;
    } else if (!std::memcmp(type, "IDAT", 4)) {
      c.idat.insert(c.idat.end(), body, body + n);
    } else if (!std::memcmp(type, "IEND", 4)) {
      c.iend = true;
      break;
    }
    pos += 12 + n;
  }
  return c;
}

/// Samples per pixel of a PNG colour type, 0 for a type stb refuses.
unsigned png_channels(unsigned ctype) {
  switch (ctype) {
    case 0: return 1;
    case 2: return 3;
    case 3: return 1;
    case 4: return 2;
    case 6: return 4;
    default: return 0;
  }
}

/// One Adam7 pass (or the whole image): its size and where its pixels go.
struct PngPass {
  std::uint64_t w, h, x0, y0, dx, dy;
};

std::vector<PngPass> png_passes(std::uint64_t w, std::uint64_t h, unsigned interlace) {
  if (interlace != 1) return {{w, h, 0, 0, 1, 1}};
  static const int xs[7] = {0, 4, 0, 2, 0, 1, 0}, ys[7] = {0, 0, 4, 0, 2, 0, 1},
                   xi[7] = {8, 8, 4, 4, 2, 2, 1}, yi[7] = {8, 8, 8, 4, 4, 2, 2};
  std::vector<PngPass> passes;
  for (int p = 0; p < 7; ++p) {
    const std::uint64_t pw = w > std::uint64_t(xs[p]) ? (w - xs[p] + xi[p] - 1) / xi[p] : 0;
    const std::uint64_t ph = h > std::uint64_t(ys[p]) ? (h - ys[p] + yi[p] - 1) / yi[p] : 0;
    if (pw && ph)
      passes.push_back({pw, ph, std::uint64_t(xs[p]), std::uint64_t(ys[p]), std::uint64_t(xi[p]),
                        std::uint64_t(yi[p])});
  }
  return passes;
}

/// Inflates the IDAT stream once into `raw` (need + 1 bytes), bounded by what the header needs
/// (a decompression bomb stops at the bound), and checks that it gives exactly `need` bytes and,
/// outside fuzz builds, its Adler-32. Returns "" or the reason.
std::string png_inflate_problem(const PngChunks& c, std::uint64_t need, std::uint8_t* raw,
                                BoundedInflate inflate) {
  const char* why = nullptr;
  const int got =
      inflate(reinterpret_cast<char*>(raw), int(need + 1),
              reinterpret_cast<const char*>(c.idat.data()), int(c.idat.size()), !c.cgbi, &why);
  std::string bomb = "corrupt PNG: the image data inflates to more than the " + num(need) +
                     " bytes the header needs, more than its size declares (inflating stopped "
                     "there, as for a decompression bomb)";
  if (got < 0) {
    if (why && std::strcmp(why, "output buffer limit") == 0) return bomb;
    return std::string("corrupt PNG: the image data (zlib) does not inflate: ") +
           (why ? why : "error");
  }
  if (std::uint64_t(got) > need) return bomb;
  if (std::uint64_t(got) < need)
    return "truncated PNG: the image data inflates to " + num(got) + " of the " + num(need) +
           " bytes the header needs";
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  if (!c.cgbi &&
      (c.idat.size() < 6 || adler32(raw, need) != be32(c.idat.data() + c.idat.size() - 4)))
    return "corrupt PNG: the image data's Adler-32 checksum does not match (damaged or cut)";
#endif
  return "";
}

/// One filtered scanline `s` into `cur` (filter unit 1 byte, as for palette images), given the
/// previous unfiltered line. False for an undefined filter type.
bool png_unfilter_row(unsigned f, const std::uint8_t* s, const std::vector<std::uint8_t>& prev,
                      std::vector<std::uint8_t>& cur) {
  for (std::size_t i = 0; i < cur.size(); ++i) {
    const int a = i ? cur[i - 1] : 0, b = prev[i], c = i ? prev[i - 1] : 0;
    switch (f) {
      case 0: cur[i] = s[i]; break;
      case 1: cur[i] = std::uint8_t(s[i] + a); break;
      case 2: cur[i] = std::uint8_t(s[i] + b); break;
      case 3: cur[i] = std::uint8_t(s[i] + ((a + b) >> 1)); break;
      case 4: cur[i] = std::uint8_t(s[i] + paeth(a, b, c)); break;
      default: return false;
    }
  }
  return true;
}

/// Palette indices: unfilters each pass row by row and compares every index with the PLTE's
/// entry count. `raw` holds the inflated scanlines of every pass. Returns "" or the reason.
std::string png_palette_problem(const std::uint8_t* raw, const std::vector<PngPass>& passes,
                                unsigned depth, std::uint64_t plte_entries) {
  std::size_t at = 0;
  for (const PngPass& p : passes) {
    const std::size_t rb = std::size_t((p.w * depth + 7) / 8);
    std::vector<std::uint8_t> prev(rb, 0), cur(rb);
    for (std::uint64_t r = 0; r < p.h; ++r) {
      const unsigned f = raw[at++];
      if (!png_unfilter_row(f, raw + at, prev, cur))
        return "corrupt PNG: filter type " + num(f) + " (0..4 are defined)";
      at += rb;
      for (std::uint64_t x = 0; x < p.w; ++x) {
        unsigned idx;
        if (depth == 8) {
          idx = cur[x];
        } else {
          const std::uint64_t bit = x * depth;
          idx = (cur[bit / 8] >> (8 - depth - bit % 8)) & ((1u << depth) - 1);
        }
        if (idx >= plte_entries)
          return "corrupt PNG: palette index " + num(idx) + " at pixel (" + num(p.x0 + x * p.dx) +
                 ", " + num(p.y0 + r * p.dy) + ") is past the " + num(plte_entries) +
                 "-entry palette (PLTE)";
      }
      prev.swap(cur);
    }
  }
  return "";
}

}  // namespace

std::string png_problem(const std::uint8_t* d, std::size_t len, BoundedInflate inflate) {
  const PngChunks c = png_chunks(d, len);
  if (!c.have_ihdr || c.w == 0 || c.h == 0 || c.w > kMaxSide || c.h > kMaxSide)
    return "";  // stb refuses
  if (!c.iend) return "truncated PNG: no IEND chunk (the file ends after chunk '" + c.last + "')";
  if (c.idat.empty()) return "corrupt PNG: no image data (IDAT chunk)";
  const unsigned channels = png_channels(c.ctype);
  if (channels == 0) return "";  // stb refuses
  if (c.depth != 1 && c.depth != 2 && c.depth != 4 && c.depth != 8 && c.depth != 16) return "";
  if (c.ctype == 3 && c.depth > 8) return "";  // stb refuses ("bad ctype")
  if (c.ctype == 3 && !c.have_plte) return "corrupt PNG: a palette image without a PLTE chunk";
  const unsigned bits = c.depth * channels;
  // The filtered scanlines the header needs, over the Adam7 passes (or one pass).
  const std::vector<PngPass> passes = png_passes(c.w, c.h, c.interlace);
  std::uint64_t need = 0;
  for (const PngPass& p : passes) need += p.h * (1 + (p.w * bits + 7) / 8);
  // Deflate cannot expand more than 1032:1: fewer compressed bytes cannot hold the image
  // (checked first, so that a tiny file gets this reason whatever the size it declares).
  if (need > std::uint64_t(c.idat.size()) * 1032 + 1024)
    return "truncated PNG: " + num(c.idat.size()) +
           " bytes of compressed image data cannot hold the " + num(need) + " bytes of a " +
           num(c.w) + "x" + num(c.h) + " image";
  if (need >= std::uint64_t(INT_MAX)) return "";  // stb refuses ("too large")
  // Not value-initialized: only the pages the data really inflates to are touched (a file whose
  // data stops early costs what it holds, not what the header says); bytes [0, got) are read.
  std::unique_ptr<std::uint8_t[]> raw(new std::uint8_t[need + 1]);
  if (std::string why = png_inflate_problem(c, need, raw.get(), inflate); !why.empty()) return why;
  if (c.ctype != 3) return "";
  return png_palette_problem(raw.get(), passes, c.depth, c.plte_entries);
}

}  // namespace histeq::detail
