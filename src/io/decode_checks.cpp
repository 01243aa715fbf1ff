// decode_checks.cpp — see decode_checks.hpp: the BMP, TGA and GIF walkers, and
// structure_problem, which picks a file's walker by its signature (the PNG walker is in
// decode_checks_png.cpp, the JPEG marker walk in decode_checks_jpeg.cpp, the binary PNM reader
// in pnm_read.cpp; decode_checks_internal.hpp holds what they share). Each walker reads its
// format the way stb_image 2.27 (Debian 12's libstb-dev) reads it, so that the check and the
// decoder agree on which bytes are pixels; where they could disagree the check is the stricter
// one.
#include "io/decode_checks.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/decode_checks_internal.hpp"

namespace histeq::detail {
namespace {

std::uint16_t le16(const std::uint8_t* p) { return std::uint16_t(p[0] | (p[1] << 8)); }
std::uint32_t le32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 8) | (std::uint32_t(p[2]) << 16) |
         (std::uint32_t(p[3]) << 24);
}

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

bool bmp_is_top_down(const std::uint8_t* d, std::size_t len) {
  if (len < 26 || d[0] != 'B' || d[1] != 'M') return false;
  const std::uint32_t hsz = le32(d + 14);
  return hsz != 12 && std::int32_t(le32(d + 22)) < 0;
}

bool bmp_is_rgb32(const std::uint8_t* d, std::size_t len) {
  if (len < 34 || d[0] != 'B' || d[1] != 'M') return false;
  return le32(d + 14) >= 40 && le16(d + 28) == 32 && le32(d + 30) == 0;
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
