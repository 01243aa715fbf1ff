// decode_checks.cpp — see decode_checks.hpp. Each walker reads its format the way stb_image
// 2.27 (Debian 12's libstb-dev) reads it, so that the check and the decoder agree on which bytes
// are pixels; where they could disagree the check is the stricter one.
#include "io/decode_checks.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace histeq::detail {
namespace {

std::uint16_t le16(const std::uint8_t* p) { return std::uint16_t(p[0] | (p[1] << 8)); }
std::uint32_t le32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 8) | (std::uint32_t(p[2]) << 16) |
         (std::uint32_t(p[3]) << 24);
}
std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}
std::string num(std::uint64_t v) { return std::to_string(v); }

// stb_image's STBI_MAX_DIMENSIONS as image_io.cpp sets it: larger sides are refused by stb (and
// by check_dims' pixel limit in practice); the walkers leave those files to it, which also keeps
// every size product below in 64 bits.
constexpr std::uint64_t kMaxSide = std::uint64_t(1) << 24;

std::string truncated(const char* fmt, std::uint64_t need, std::uint64_t have, const char* what) {
  return std::string("truncated ") + fmt + ": " + what + " needs " + num(need) +
         " bytes, the file holds " + num(have);
}

// ---------------------------------------------------------------- BMP
std::string bmp_problem(const std::uint8_t* d, std::size_t len) {
  if (len < 18) return "truncated BMP: the file ends inside the header";
  const std::uint32_t offset = le32(d + 10);
  const std::uint32_t hsz = le32(d + 14);
  if (hsz != 12 && hsz != 40 && hsz != 56 && hsz != 108 && hsz != 124) return "";  // stb refuses
  if (len < 14 + std::size_t(hsz)) return "truncated BMP: the file ends inside the header";
  std::int64_t w, h;
  unsigned bpp;
  std::uint32_t compress = 0;
  if (hsz == 12) {
    w = le16(d + 18);
    h = le16(d + 20);
    bpp = le16(d + 24);
  } else {
    w = std::int32_t(le32(d + 18));
    h = std::int32_t(le32(d + 22));
    bpp = le16(d + 28);
    compress = le32(d + 30);
  }
  if (h < 0) h = -h;                // top-down
  if (w <= 0 || h <= 0) return "";  // the zero-size check names it
  if (std::uint64_t(w) > kMaxSide || std::uint64_t(h) > kMaxSide) return "";  // stb: "too large"
  if (compress == 1 || compress == 2 || compress >= 4) return "";  // stb refuses (RLE, JPEG, PNG)
  std::uint64_t extra_read = 14;
  if ((hsz == 40 || hsz == 56) && compress == 3) extra_read += 12;  // the three masks
  std::uint64_t row;  // bytes of pixel data per row, before the padding to 4
  switch (bpp) {
    case 1: row = (std::uint64_t(w) + 7) / 8; break;
    case 4: row = (std::uint64_t(w) + 1) / 2; break;
    case 8: row = std::uint64_t(w); break;
    case 16: row = 2 * std::uint64_t(w); break;
    case 24: row = 3 * std::uint64_t(w); break;
    case 32: row = 4 * std::uint64_t(w); break;
    default: return "unsupported BMP: " + num(bpp) + " bits per pixel";
  }
  const std::uint64_t stride = (row + 3) / 4 * 4;
  std::int64_t psize = 0;
  if (hsz == 12) {
    if (bpp < 24) psize = (std::int64_t(offset) - std::int64_t(extra_read) - 24) / 3;
  } else if (bpp < 16) {
    psize = (std::int64_t(offset) - std::int64_t(extra_read) - std::int64_t(hsz)) >> 2;
  }
  const std::uint64_t header_end = extra_read + hsz;
  if (bpp < 16) {
    if (psize <= 0 || psize > 256) return "";  // stb refuses ("invalid")
    const std::uint64_t pal_end = 14 + hsz + std::uint64_t(psize) * (hsz == 12 ? 3 : 4);
    if (pal_end > len) return truncated("BMP", pal_end, len, "the palette");
  } else if (offset < header_end) {
    return "corrupt BMP: the pixel data offset " + num(offset) + " points into the header";
  }
  const std::uint64_t data = offset;  // stb skips from the palette's end to here
  const std::uint64_t need = data + stride * (std::uint64_t(h) - 1) + row;
  if (need > len)
    return truncated(
        "BMP", need, len,
        ("the pixel data of " + num(w) + "x" + num(h) + " at " + num(bpp) + " bits").c_str());
  if (bpp < 16) {  // every palette index, read from the file
    for (std::int64_t y = 0; y < h; ++y) {
      const std::uint8_t* r = d + data + stride * std::uint64_t(y);
      for (std::int64_t x = 0; x < w; ++x) {
        unsigned idx;
        if (bpp == 8)
          idx = r[x];
        else if (bpp == 4)
          idx = (r[x / 2] >> (x % 2 ? 0 : 4)) & 15;
        else
          idx = (r[x / 8] >> (7 - x % 8)) & 1;
        if (idx >= std::uint64_t(psize))
          return "corrupt BMP: palette index " + num(idx) + " at pixel (" + num(x) + ", " + num(y) +
                 " of the stored rows) is past the " + num(psize) + "-entry palette";
      }
    }
  }
  return "";
}

// ---------------------------------------------------------------- TGA
std::string tga_problem(const std::uint8_t* d, std::size_t len) {
  if (len < 18) return "truncated TGA: the file ends inside the 18-byte header";
  const unsigned id_len = d[0], indexed = d[1];
  unsigned type = d[2];
  const unsigned pal_start = le16(d + 3), pal_len = le16(d + 5), pal_bits = d[7];
  const std::uint64_t w = le16(d + 12), h = le16(d + 14);
  const unsigned bpp = d[16];
  if (w == 0 || h == 0) return "";
  bool rle = false;
  if (type >= 8) {
    type -= 8;
    rle = true;
  }
  auto comp_of = [](unsigned bits, bool grey, bool* rgb16) -> unsigned {
    *rgb16 = false;
    switch (bits) {
      case 8: return 1;
      case 16:
        if (grey) return 2;
        [[fallthrough]];
      case 15: *rgb16 = true; return 3;
      case 24:
      case 32: return bits / 8;
      default: return 0;
    }
  };
  bool rgb16 = false;
  const unsigned comp =
      indexed ? comp_of(pal_bits, false, &rgb16) : comp_of(bpp, type == 3, &rgb16);
  if (comp == 0) return "";  // stb refuses
  std::uint64_t pos = 18 + std::uint64_t(id_len);
  if (indexed) {
    if (pal_len == 0) return "corrupt TGA: a colour-mapped image with an empty colour map";
    pos += pal_start;
    const std::uint64_t entry = rgb16 ? 2 : comp;
    const std::uint64_t pal_end = pos + pal_len * entry;
    if (pal_end > len) return truncated("TGA", pal_end, len, "the colour map");
    pos = pal_end;
  }
  const std::uint64_t px_bytes = indexed ? (bpp == 8 ? 1 : 2) : (rgb16 ? 2 : comp);
  const std::uint64_t pixels = w * h;
  auto check_index = [&](const std::uint8_t* p, std::uint64_t i) -> std::string {
    if (!indexed) return "";
    const unsigned idx = bpp == 8 ? p[0] : le16(p);
    if (idx >= pal_len)
      return "corrupt TGA: colour-map index " + num(idx) + " at pixel " + num(i) + " is past the " +
             num(pal_len) + "-entry colour map";
    return "";
  };
  if (!rle) {
    const std::uint64_t need = pos + pixels * px_bytes;
    if (need > len) return truncated("TGA", need, len, "the pixel data");
    for (std::uint64_t i = 0; indexed && i < pixels; ++i)
      if (std::string why = check_index(d + pos + i * px_bytes, i); !why.empty()) return why;
    return "";
  }
  // RLE packets: a header byte, then one pixel (repeat) or count pixels (raw); the packets must
  // cover every pixel. The least bytes that can do so bound the work before anything else.
  const std::uint64_t least = pos + (pixels + 127) / 128 * (1 + px_bytes);
  if (least > len)
    return truncated("TGA", least, len, "run-length data covering every pixel at least");
  std::uint64_t done = 0;
  while (done < pixels) {
    if (pos >= len)
      return "truncated TGA: the run-length data ends after " + num(done) + " of " + num(pixels) +
             " pixels";
    const unsigned cmd = d[pos++];
    const std::uint64_t count = 1 + (cmd & 127);
    const std::uint64_t stored = (cmd & 0x80) ? 1 : count;
    if (pos + stored * px_bytes > len)
      return "truncated TGA: a run-length packet ends past the end of the file, after " +
             num(done) + " of " + num(pixels) + " pixels";
    for (std::uint64_t k = 0; k < stored; ++k)
      if (std::string why = check_index(d + pos + k * px_bytes, done + k); !why.empty()) return why;
    pos += stored * px_bytes;
    done += count;
  }
  return "";
}

// ---------------------------------------------------------------- GIF
std::string gif_problem(const std::uint8_t* d, std::size_t len) {
  if (len < 13) return "truncated GIF: the file ends inside the header";
  const std::uint64_t sw = le16(d + 6), sh = le16(d + 8);
  const unsigned flags = d[10];
  std::uint64_t pos = 13;
  unsigned gct = 0;
  if (flags & 0x80) {
    gct = 2u << (flags & 7);
    pos += 3 * std::uint64_t(gct);
    if (pos > len) return truncated("GIF", pos, len, "the global colour table");
  }
  auto skip_sub_blocks = [&]() -> bool {
    for (;;) {
      if (pos >= len) return false;
      const unsigned n = d[pos++];
      if (n == 0) return true;
      pos += n;
    }
  };
  for (;;) {
    if (pos >= len) return "truncated GIF: the file ends before the first image (no frame)";
    const unsigned tag = d[pos++];
    if (tag == 0x3B) return "corrupt GIF: no image (the trailer comes before any frame)";
    if (tag == 0x21) {
      ++pos;  // label
      if (!skip_sub_blocks()) return "truncated GIF: the file ends inside an extension block";
      continue;
    }
    if (tag != 0x2C) return "";  // stb refuses ("unknown code")
    if (pos + 9 > len) return "truncated GIF: the file ends inside the image descriptor";
    const std::uint64_t x = le16(d + pos), y = le16(d + pos + 2);
    const std::uint64_t fw = le16(d + pos + 4), fh = le16(d + pos + 6);
    const unsigned lflags = d[pos + 8];
    pos += 9;
    if (x + fw > sw || y + fh > sh) return "";  // stb refuses ("bad Image Descriptor")
    if (fw == 0 || fh == 0)
      return "corrupt GIF: the first frame is " + num(fw) + "x" + num(fh) + " (no pixels)";
    if (x != 0 || y != 0 || fw != sw || fh != sh)
      return "unsupported GIF: the first frame (" + num(fw) + "x" + num(fh) + " at " + num(x) +
             "," + num(y) + ") does not cover the " + num(sw) + "x" + num(sh) +
             " screen, so some pixels would not come from the file";
    unsigned table = gct;
    if (lflags & 0x80) {
      table = 2u << (lflags & 7);
      pos += 3 * std::uint64_t(table);
      if (pos > len) return truncated("GIF", pos, len, "the local colour table");
    }
    if (table == 0) return "corrupt GIF: the first frame has no colour table";
    if (pos >= len) return "truncated GIF: the file ends before the image data";
    const unsigned lzw_cs = d[pos++];
    if (lzw_cs > 12) return "corrupt GIF: LZW minimum code size " + num(lzw_cs) + " (at most 12)";
    const std::uint64_t total = fw * fh;
    // The least bytes for total pixels: a code is at least 1 bit... in practice each 12-bit code
    // yields at most 4096 pixels; the walk below is O(bytes) and allocates only the code table.
    // LZW, read exactly as stbi__process_gif_raster; lengths instead of pixels.
    std::vector<std::uint32_t> length(8192 + 1, 0);
    const int clear = 1 << lzw_cs;
    for (int c = 0; c < clear; ++c) length[c] = 1;
    int codesize = lzw_cs + 1, codemask = (1 << codesize) - 1, avail = clear + 2, oldcode = -1;
    bool first = true;
    std::uint32_t bits = 0;
    int valid_bits = 0;
    unsigned block = 0;
    std::uint64_t done = 0;
    for (;;) {
      if (valid_bits < codesize) {
        if (block == 0) {
          if (pos >= len)
            return "truncated GIF: the LZW image data ends after " + num(done) + " of " +
                   num(total) + " pixels (the file ends)";
          block = d[pos++];
          if (block == 0)
            return "truncated GIF: the LZW image data ends after " + num(done) + " of " +
                   num(total) + " pixels";
        }
        --block;
        if (pos >= len)
          return "truncated GIF: the file ends inside the LZW image data, after " + num(done) +
                 " of " + num(total) + " pixels";
        bits |= std::uint32_t(d[pos++]) << valid_bits;
        valid_bits += 8;
        continue;
      }
      const int code = int(bits & std::uint32_t(codemask));
      bits >>= codesize;
      valid_bits -= codesize;
      if (code == clear) {
        codesize = lzw_cs + 1;
        codemask = (1 << codesize) - 1;
        avail = clear + 2;
        oldcode = -1;
        first = false;
      } else if (code == clear + 1) {
        return "truncated GIF: the LZW end code comes after " + num(done) + " of " + num(total) +
               " pixels";
      } else if (code <= avail) {
        if (first) return "";  // stb refuses ("no clear code")
        if (oldcode >= 0) {
          const int entry = avail++;
          if (avail > 8192) return "";  // stb refuses ("too many codes")
          length[entry] = length[oldcode] + 1;
        } else if (code == avail) {
          return "";  // stb refuses ("illegal code in raster")
        }
        if (code < clear && unsigned(code) >= table)
          return "corrupt GIF: colour index " + num(code) + " at pixel " + num(done) +
                 " is past the " + num(table) + "-entry colour table";
        done += length[code];
        if (done >= total) return "";
        if ((avail & codemask) == 0 && avail <= 0x0FFF) {
          ++codesize;
          codemask = (1 << codesize) - 1;
        }
        oldcode = code;
      } else {
        return "";  // stb refuses ("illegal code in raster")
      }
    }
  }
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
                     " bytes the header needs (refused before inflating it all: a "
                     "decompression bomb)";
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

// ---------------------------------------------------------------- JPEG
// The walk mirrors libjpeg-turbo 2.1.5 (jdmarker.c): next_marker, get_sof, get_sos, and the
// Huffman decoder's end of data (a marker that is neither FF00 nor RSTn).

bool jpeg_is_sof(unsigned m) {
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

void jpeg_note(JpegLayout* l, const std::string& why) {
  if (l->problem.empty()) l->problem = why;
}

void jpeg_read_frame(const std::uint8_t* p, std::size_t n, unsigned marker, JpegLayout* l) {
  if (l->sof != 0) return jpeg_note(l, "corrupt JPEG: a second frame header (SOF)");
  if (n < 6) return jpeg_note(l, "corrupt JPEG: the frame header (SOF) is cut short");
  l->sof = marker;
  l->height = (std::uint64_t(p[1]) << 8) | p[2];
  l->width = (std::uint64_t(p[3]) << 8) | p[4];
  const std::size_t nc = p[5];
  if (n != 6 + 3 * nc)
    jpeg_note(l, "corrupt JPEG: the frame header (SOF) is " + num(n + 2) + " bytes long, " +
                     num(nc) + " components need " + num(8 + 3 * nc));
  for (std::size_t i = 0; i < nc && 6 + 3 * i + 2 < n; ++i)
    l->components.push_back({p[6 + 3 * i], p[7 + 3 * i] >> 4, p[7 + 3 * i] & 15});
}

/// A scan header (SOS payload). False when libjpeg-turbo refuses it (the reason is noted).
bool jpeg_read_scan(const std::uint8_t* p, std::size_t n, JpegLayout* l, JpegScan* s) {
  const std::string which = "scan " + num(l->scans.size() + 1);
  if (l->sof == 0) {
    jpeg_note(l, "corrupt JPEG: " + which + " (SOS) comes before the frame header (SOF)");
    return false;
  }
  const std::size_t ns = n > 0 ? p[0] : 0;
  if (ns < 1 || ns > 4 || n != 1 + 2 * ns + 3) {
    jpeg_note(l, "corrupt JPEG: " + which + "'s header (SOS) has a bad length or component count");
    return false;
  }
  // get_sos: the first of the frame's first four components with that id whose slot (indexed
  // as libjpeg indexes cur_comp_info) is still free; a component twice in a scan is refused.
  const std::size_t nc = std::min<std::size_t>(l->components.size(), 4);
  int cur[4] = {-1, -1, -1, -1};
  for (std::size_t i = 0; i < ns; ++i) {
    const int cc = p[1 + 2 * i];
    int found = -1;
    for (std::size_t ci = 0; ci < nc && found < 0; ++ci)
      if (l->components[ci].id == cc && cur[ci] < 0) found = int(ci);
    for (std::size_t pi = 0; pi < i && found >= 0; ++pi)
      if (cur[pi] == found) found = -1;
    if (found < 0) {
      jpeg_note(l, "corrupt JPEG: " + which + " names component id " + num(unsigned(cc)) +
                       ", which is not a frame component it may name (unknown, repeated or out of "
                       "the frame header's order)");
      return false;
    }
    cur[i] = found;
    s->frame_index.push_back(found);
    s->dc_table.push_back(p[2 + 2 * i] >> 4);
    s->ac_table.push_back(p[2 + 2 * i] & 15);
  }
  s->ss = p[1 + 2 * ns];
  s->se = p[2 + 2 * ns];
  s->ah = p[3 + 2 * ns] >> 4;
  s->al = p[3 + 2 * ns] & 15;
  return true;
}

/// From *pos (after a scan header) to the marker that ends the entropy-coded data; returns the
/// bytes in between and leaves *pos at that marker's first 0xFF (or at len).
std::uint64_t jpeg_skip_entropy_data(const std::uint8_t* d, std::size_t len, std::size_t* pos) {
  const std::size_t start = *pos;
  std::size_t p = start;
  for (;;) {
    const void* ff = p < len ? std::memchr(d + p, 0xFF, len - p) : nullptr;
    if (!ff) {
      p = len;
      break;
    }
    p = std::size_t(static_cast<const std::uint8_t*>(ff) - d);
    std::size_t q = p + 1;
    while (q < len && d[q] == 0xFF) ++q;  // fill bytes
    if (q >= len) {
      p = len;
      break;
    }
    if (d[q] == 0x00 || (d[q] >= 0xD0 && d[q] <= 0xD7)) {  // stuffed zero, restart marker
      p = q + 1;
      continue;
    }
    break;
  }
  *pos = p;
  return p - start;
}

/// 8x8 blocks of frame component ci as a non-interleaved scan codes them (T.81 A.2.2, libjpeg's
/// width_in_blocks x height_in_blocks). The caller checked the sampling factors (1..4).
std::uint64_t jpeg_component_blocks(const JpegLayout& l, std::size_t ci) {
  int hmax = 1, vmax = 1;
  for (const JpegComponent& c : l.components) {
    hmax = std::max(hmax, c.h);
    vmax = std::max(vmax, c.v);
  }
  const JpegComponent& c = l.components[ci];
  const std::uint64_t bw =
      (l.width * std::uint64_t(c.h) + 8 * std::uint64_t(hmax) - 1) / (8 * std::uint64_t(hmax));
  const std::uint64_t bh =
      (l.height * std::uint64_t(c.v) + 8 * std::uint64_t(vmax) - 1) / (8 * std::uint64_t(vmax));
  return bw * bh;
}

std::string jpeg_component_name(const JpegLayout& l, std::size_t ci) {
  return "component " + num(ci + 1) + " (id " + num(unsigned(l.components[ci].id)) + ")";
}

bool is_png(const std::uint8_t* d, std::size_t len) {
  static const std::uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return len >= 8 && std::memcmp(d, sig, 8) == 0;
}

bool is_tga(const std::uint8_t* d, std::size_t len) {
  // stbi__tga_test, in short: colour-map type 0/1, image type 1,2,3,9,10,11.
  if (len < 18 || d[1] > 1) return false;
  const unsigned t = d[2];
  if (d[1] == 1) return t == 1 || t == 9;
  return t == 2 || t == 3 || t == 10 || t == 11;
}

}  // namespace

bool is_binary_pnm(const std::uint8_t* d, std::size_t len) {
  return len >= 2 && d[0] == 'P' && (d[1] == '5' || d[1] == '6');
}

std::string pnm_header(const std::uint8_t* d, std::size_t len, PnmHeader* out) {
  std::size_t pos = 2;
  auto space = [](std::uint8_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  const char* names[3] = {"width", "height", "maximum value"};
  std::uint64_t v[3] = {0, 0, 0};
  for (int f = 0; f < 3; ++f) {
    for (;;) {  // whitespace and comments
      while (pos < len && space(d[pos])) ++pos;
      if (pos < len && d[pos] == '#') {
        while (pos < len && d[pos] != '\n' && d[pos] != '\r') ++pos;
        continue;
      }
      break;
    }
    if (pos >= len)
      return std::string("truncated PNM header: the file ends before the ") + names[f];
    if (d[pos] < '0' || d[pos] > '9')
      return std::string("corrupt PNM header: the ") + names[f] + " is not a decimal number";
    while (pos < len && d[pos] >= '0' && d[pos] <= '9') {
      v[f] = v[f] * 10 + unsigned(d[pos++] - '0');
      if (v[f] > std::uint64_t(INT_MAX))
        return "corrupt PNM header: a number (width, height or maximum value) does not fit in 31 "
               "bits";
    }
  }
  if (pos >= len || !space(d[pos]))
    return "truncated PNM: no whitespace byte after the maximum value (no sample data)";
  if (v[2] == 0) return "corrupt PNM header: maximum value 0 (must be 1..65535)";
  if (v[2] > 65535)
    return "corrupt PNM header: maximum value " + num(v[2]) + " is over 65535 (Netpbm's limit)";
  out->width = v[0];
  out->height = v[1];
  out->channels = d[1] == '5' ? 1 : 3;
  out->maxval = unsigned(v[2]);
  out->data_offset = pos + 1;
  return "";
}

namespace {

/// Before any allocation: the sides stb's limit allows, and the file holds every sample.
std::string pnm_size_problem(std::size_t len, const PnmHeader& h) {
  if (h.width > kMaxSide || h.height > kMaxSide)
    return "PNM too large: " + num(h.width) + "x" + num(h.height) + " (at most " + num(kMaxSide) +
           " per side)";
  const std::uint64_t bps = h.maxval > 255 ? 2 : 1;
  const std::uint64_t need = h.data_offset + h.width * h.height * std::uint64_t(h.channels) * bps;
  if (need > len)
    return "truncated PNM: " + num(h.width) + "x" + num(h.height) + "x" + num(h.channels) +
           " samples of " + num(bps) + " byte(s) need " + num(need) + " bytes, the file holds " +
           num(len);
  return "";
}

/// Reads every sample after the header (1 byte, or 2 big-endian when maxval > 255) into `out`
/// through scale(v), refusing the first one above maxval: both decoders (8-bit and 16-bit)
/// refuse the same files with the same reason. pnm_size_problem must have passed.
template <typename T, typename Scale>
std::string pnm_read_samples(const std::uint8_t* d, const PnmHeader& h, std::vector<T>& out,
                             Scale scale) {
  const bool two = h.maxval > 255;
  const std::uint64_t samples = h.width * h.height * std::uint64_t(h.channels);
  out.resize(std::size_t(samples));
  const std::uint8_t* s = d + h.data_offset;
  const std::uint32_t m = h.maxval;
  for (std::uint64_t i = 0; i < samples; ++i) {
    const std::uint32_t v = two ? (std::uint32_t(s[2 * i]) << 8) | s[2 * i + 1] : s[i];
    if (v > m)
      return "corrupt PNM: sample " + num(v) + " at index " + num(i) +
             " is above the maximum value " + num(m);
    out[std::size_t(i)] = scale(v);
  }
  return "";
}

}  // namespace

std::string pnm_decode(const std::uint8_t* d, std::size_t len, const PnmHeader& h, Image* out) {
  if (std::string why = pnm_size_problem(len, h); !why.empty()) return why;
  out->width = int(h.width);
  out->height = int(h.height);
  out->channels = h.channels;
  const std::uint32_t m = h.maxval;
  return pnm_read_samples(d, h, out->pixels, [m](std::uint32_t v) {
    return m == 255 ? std::uint8_t(v) : std::uint8_t((v * 255 + m / 2) / m);
  });
}

std::string pnm_decode16(const std::uint8_t* d, std::size_t len, const PnmHeader& h, Image16* out) {
  if (std::string why = pnm_size_problem(len, h); !why.empty()) return why;
  out->width = int(h.width);
  out->height = int(h.height);
  out->channels = h.channels;
  const std::uint64_t m = h.maxval;
  return pnm_read_samples(d, h, out->pixels, [m](std::uint32_t v) {
    return m == 65535 ? std::uint16_t(v)
                      : std::uint16_t((std::uint64_t(v) * 65535 * 2 + m) / (2 * m));
  });
}

/// The tables a DHT segment defines (class 0 DC / 1 AC, id 0..3), into defined[class][id].
void jpeg_read_dht(const std::uint8_t* p, std::size_t n, bool defined[2][4]) {
  std::size_t q = 0;
  while (q + 17 <= n) {
    const unsigned tc = p[q] >> 4, th = p[q] & 15;
    std::size_t count = 0;
    for (int k = 1; k <= 16; ++k) count += p[q + std::size_t(k)];
    if (tc <= 1 && th <= 3) defined[tc][th] = true;
    q += 17 + count;
  }
}

/// Whether scan s of a Huffman-coded frame reads a table not in defined[][]: DC tables in a
/// sequential scan or a DC-first progressive scan, AC tables in any scan with Se > 0.
bool jpeg_scan_needs_undefined_table(const JpegScan& s, const bool defined[2][4]) {
  for (std::size_t i = 0; i < s.frame_index.size(); ++i) {
    const bool dc = s.ss == 0 && s.ah == 0, ac = s.se > 0;
    if (dc && (s.dc_table[i] > 3 || !defined[0][s.dc_table[i]])) return true;
    if (ac && (s.ac_table[i] > 3 || !defined[1][s.ac_table[i]])) return true;
  }
  return false;
}

JpegLayout jpeg_layout(const std::uint8_t* d, std::size_t len) {
  JpegLayout l;
  bool defined[2][4] = {};
  std::size_t pos = 2;  // after the SOI
  for (;;) {
    // next_marker: other bytes are skipped (libjpeg warns "extraneous bytes": fatal in
    // histeq), then fill bytes; FF 00 is no marker.
    while (pos < len && d[pos] != 0xFF) ++pos;
    while (pos < len && d[pos] == 0xFF) ++pos;
    if (pos >= len) break;
    const unsigned m = d[pos++];
    if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;  // no length
    if (m == 0xD9) {
      l.eoi = true;
      break;
    }
    if (m == 0xD8) {
      jpeg_note(&l, "corrupt JPEG: a second start-of-image marker (SOI)");
      continue;
    }
    if (len - pos < 2) break;
    const std::size_t seg = (std::size_t(d[pos]) << 8) | d[pos + 1];
    if (seg < 2 || seg > len - pos) break;  // cut short: libjpeg hits the end of the data
    const std::uint8_t* p = d + pos + 2;
    const std::size_t n = seg - 2;
    pos += seg;
    if (jpeg_is_sof(m)) {
      jpeg_read_frame(p, n, m, &l);
    } else if (m == 0xC4) {
      jpeg_read_dht(p, n, defined);
    } else if (m == 0xDA) {
      JpegScan s;
      const bool ok = jpeg_read_scan(p, n, &l, &s);
      s.data_bytes = jpeg_skip_entropy_data(d, len, &pos);
      const bool huffman = l.sof >= 0xC0 && l.sof <= 0xC3;
      if (ok && huffman && jpeg_scan_needs_undefined_table(s, defined))
        l.undefined_huffman_table = true;
      if (ok) l.scans.push_back(std::move(s));
    }
  }
  return l;
}

std::string jpeg_scan_problem(const JpegLayout& l) {
  for (std::size_t ci = 0; ci < l.components.size(); ++ci) {
    const JpegComponent& c = l.components[ci];
    if (c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4)
      return "corrupt JPEG: " + jpeg_component_name(l, ci) + " has sampling factors " +
             num(unsigned(c.h)) + "x" + num(unsigned(c.v)) + " (each must be 1..4)";
  }
  if (l.scans.empty())
    return l.eoi ? "corrupt JPEG: no scan (SOS marker) before the end of the image (EOI): no "
                   "pixel data"
                 : "truncated JPEG: the file ends before the first scan (SOS marker)";
  const bool progressive = l.sof == 0xC2 || l.sof == 0xCA;
  for (std::size_t ci = 0; ci < l.components.size(); ++ci) {
    bool covered = false;
    for (const JpegScan& s : l.scans) {
      if (progressive && (s.ss != 0 || s.ah != 0)) continue;  // only a DC-first scan starts it
      for (int fi : s.frame_index) covered = covered || std::size_t(fi) == ci;
    }
    if (covered) continue;
    const std::string scans = num(l.scans.size()) + (l.scans.size() == 1 ? " scan" : " scans");
    if (!l.eoi)
      return "truncated JPEG: the file ends after " + scans + ", before " +
             jpeg_component_name(l, ci) + " is covered by a scan";
    return "corrupt JPEG: " + jpeg_component_name(l, ci) + " is never covered by a scan (" +
           (progressive
                ? (l.scans.size() == 1 ? std::string("the only scan") : "none of the " + scans) +
                      " of this progressive file is a DC-first scan (Ss=0, Ah=0) of it"
            : l.scans.size() == 1 ? std::string("the only scan does not code it")
                                  : "none of the " + scans + " codes it") +
           "), so its pixels would not come from the file";
  }
  return "";
}

std::string jpeg_size_problem(const JpegLayout& l, std::size_t file_size) {
  if (l.sof != 0xC0 && l.sof != 0xC1 && l.sof != 0xC2) return "";  // Huffman-coded DCT only
  for (const JpegComponent& c : l.components)
    if (c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4) return "";  // jpeg_scan_problem's
  for (std::size_t k = 0; k < l.scans.size(); ++k) {
    const JpegScan& s = l.scans[k];
    if (s.ss != 0) continue;  // AC scans: an end-of-band run codes up to 32767 blocks
    std::uint64_t blocks = 0;
    for (int fi : s.frame_index) blocks += jpeg_component_blocks(l, std::size_t(fi));
    if (blocks <= 8 * s.data_bytes) continue;
    return "truncated or hostile JPEG: it declares " + num(l.width) + "x" + num(l.height) +
           " in a file of " + num(file_size) + " bytes: scan " + num(k + 1) + " codes " +
           num(blocks) + " blocks of 8x8 at 1 bit or more each (Huffman coding), at least " +
           num((blocks + 7) / 8) + " bytes, and holds " + num(s.data_bytes) +
           " bytes of entropy-coded data";
  }
  return "";
}

bool jpeg_undefined_huffman_table(const std::uint8_t* d, std::size_t len) {
  return jpeg_layout(d, len).undefined_huffman_table;
}

std::string jpeg_structure_problem(const std::uint8_t* d, std::size_t len) {
  const JpegLayout l = jpeg_layout(d, len);
  // The processes libjpeg-turbo decodes: baseline, extended, progressive; Huffman, arithmetic.
  if (l.sof != 0xC0 && l.sof != 0xC1 && l.sof != 0xC2 && l.sof != 0xC9 && l.sof != 0xCA) return "";
  if (!l.problem.empty()) return l.problem;
  if (std::string why = jpeg_scan_problem(l); !why.empty()) return why;
  return jpeg_size_problem(l, len);
}

bool bmp_is_top_down(const std::uint8_t* d, std::size_t len) {
  if (len < 26 || d[0] != 'B' || d[1] != 'M') return false;
  const std::uint32_t hsz = le32(d + 14);
  return hsz != 12 && std::int32_t(le32(d + 22)) < 0;
}

const char* format_name(const std::uint8_t* d, std::size_t len) {
  if (is_png(d, len)) return "PNG";
  if (len >= 2 && d[0] == 0xFF && d[1] == 0xD8) return "JPEG";
  if (len >= 4 && std::memcmp(d, "GIF8", 4) == 0) return "GIF";
  if (len >= 2 && d[0] == 'B' && d[1] == 'M') return "BMP";
  if (len >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '7') return "PNM";
  if (is_tga(d, len)) return "TGA";
  return "image";
}

std::string structure_problem(const std::uint8_t* d, std::size_t len, BoundedInflate inflate) {
  if (is_png(d, len)) return png_problem(d, len, inflate);
  if (len >= 6 && std::memcmp(d, "GIF8", 4) == 0) return gif_problem(d, len);
  if (len >= 2 && d[0] == 'B' && d[1] == 'M') return bmp_problem(d, len);
  if (len >= 2 && d[0] == 0xFF && d[1] == 0xD8) return "";  // JPEG: its own decoder's checks
  if (is_tga(d, len)) return tga_problem(d, len);
  return "";
}

}  // namespace histeq::detail
