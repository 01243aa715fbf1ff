// metadata.cpp — the metadata histeq carries from input to output: EXIF orientation (the
// Orientation entry of IFD0, read and rewritten; apply_orientation turns the pixels), ICC
// profiles (which images a profile fits; the APP1 and APP2 segments insert_metadata adds to
// encoded JPEG bytes) and a PNG's ICC profile (its iCCP chunk, read and inserted with
// libdeflate).
#include "histeq/jpeg_codec.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <libdeflate.h>

#include "histeq/error.hpp"
#include "io/jpeg_internal.hpp"

namespace histeq::jpeg {
using internal::kExifPrefix;

namespace {

// ---- EXIF TIFF walking ----

bool has_exif_prefix(const std::vector<std::uint8_t>& e) {
  return e.size() >= kExifPrefix + 8 && std::memcmp(e.data(), "Exif\0\0", kExifPrefix) == 0;
}

/// Offset (within `e`) of the Orientation entry's 2-byte value in IFD0, or 0 when there is none.
std::size_t orientation_offset(const std::vector<std::uint8_t>& e, bool* little) {
  if (!has_exif_prefix(e)) return 0;
  const std::uint8_t* t = e.data() + kExifPrefix;
  const std::size_t n = e.size() - kExifPrefix;
  if (t[0] == 'I' && t[1] == 'I')
    *little = true;
  else if (t[0] == 'M' && t[1] == 'M')
    *little = false;
  else
    return 0;
  auto u16 = [&](std::size_t o) -> unsigned {
    return *little ? unsigned(t[o]) | unsigned(t[o + 1]) << 8
                   : unsigned(t[o]) << 8 | unsigned(t[o + 1]);
  };
  auto u32 = [&](std::size_t o) -> std::uint32_t {
    return *little ? std::uint32_t(u16(o)) | std::uint32_t(u16(o + 2)) << 16
                   : std::uint32_t(u16(o)) << 16 | std::uint32_t(u16(o + 2));
  };
  if (u16(2) != 42) return 0;
  const std::uint64_t ifd = u32(4);
  if (ifd + 2 > n) return 0;
  const unsigned count = u16(std::size_t(ifd));
  for (unsigned i = 0; i < count; ++i) {
    const std::uint64_t ent = ifd + 2 + std::uint64_t(i) * 12;
    if (ent + 12 > n) return 0;
    if (u16(std::size_t(ent)) == 0x0112) {
      if (u16(std::size_t(ent) + 2) != 3 || u32(std::size_t(ent) + 4) != 1) return 0;  // SHORT, 1
      return kExifPrefix + std::size_t(ent) + 8;
    }
  }
  return 0;
}

}  // namespace

int exif_orientation(const std::vector<std::uint8_t>& exif) {
  bool little = false;
  const std::size_t o = orientation_offset(exif, &little);
  if (o == 0) return 0;
  const unsigned v = little ? unsigned(exif[o]) | unsigned(exif[o + 1]) << 8
                            : unsigned(exif[o]) << 8 | unsigned(exif[o + 1]);
  return v >= 1 && v <= 8 ? int(v) : 0;
}

bool set_exif_orientation(std::vector<std::uint8_t>& exif, int orientation) {
  bool little = false;
  const std::size_t o = orientation_offset(exif, &little);
  if (o == 0) return false;
  const auto v = static_cast<unsigned>(orientation);
  exif[o] = static_cast<std::uint8_t>(little ? v & 0xFF : v >> 8);
  exif[o + 1] = static_cast<std::uint8_t>(little ? v >> 8 : v & 0xFF);
  return true;
}

namespace internal {
namespace {

/// The stored sample shown at (x, y) of the image in orientation o (2..8): (sx, sy) of the
/// w x h stored one.
inline void stored_at(int o, int w, int h, int x, int y, int* sx, int* sy) {
  const int tx = o >= 5 ? y : x, ty = o >= 5 ? x : y;
  *sx = flips_stored_columns(o) ? w - 1 - tx : tx;
  *sy = flips_stored_rows(o) ? h - 1 - ty : ty;
}

/// Output rows [y0, y1) x columns [x0, x1) of a transposing orientation (5..8), sample by sample:
/// along an output row the source row steps by one.
template <int C>
void turn_rows(const std::uint8_t* src, std::size_t ss, int w, int h, int o, std::uint8_t* dst,
               std::size_t ds, int y0, int y1, int x0, int x1) {
  const int dir = flips_stored_rows(o) ? -1 : 1;
  for (int y = y0; y < y1; ++y) {
    std::uint8_t* d = dst + std::size_t(y) * ds;
    int sx = 0, sy = 0;
    stored_at(o, w, h, x0, y, &sx, &sy);
    const std::uint8_t* col = src + std::size_t(sx) * C;
    for (int x = x0; x < x1; ++x, sy += dir)
      std::memcpy(d + std::size_t(x) * C, col + std::size_t(sy) * ss, C);
  }
}

#if defined(__SSE2__)
/// The 8 x 8 output block at (bx, by) of a transposing orientation, one byte a sample: 8 source
/// rows of 8 samples (the block's source columns), transposed in registers, each source column
/// stored as an output row.
void turn_block8(const std::uint8_t* src, std::size_t ss, int w, int h, int o, std::uint8_t* dst,
                 std::size_t ds, int bx, int by) {
  const bool rows_up = !flips_stored_rows(o);     // the source row of output column x: x or h-1-x
  const bool cols_up = !flips_stored_columns(o);  // the source column of output row y: y or w-1-y
  const int c0 = cols_up ? by : w - 8 - by;
  __m128i r[8];
  for (int i = 0; i < 8; ++i) {
    const int sy = rows_up ? bx + i : h - 1 - (bx + i);
    r[i] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + std::size_t(sy) * ss + c0));
  }
  // bytes, then pairs, then quads interleaved: column j of the 8 rows in 8 bytes
  const __m128i a0 = _mm_unpacklo_epi8(r[0], r[1]), a1 = _mm_unpacklo_epi8(r[2], r[3]);
  const __m128i a2 = _mm_unpacklo_epi8(r[4], r[5]), a3 = _mm_unpacklo_epi8(r[6], r[7]);
  const __m128i b0 = _mm_unpacklo_epi16(a0, a1), b1 = _mm_unpackhi_epi16(a0, a1);
  const __m128i b2 = _mm_unpacklo_epi16(a2, a3), b3 = _mm_unpackhi_epi16(a2, a3);
  const __m128i cols[4] = {_mm_unpacklo_epi32(b0, b2), _mm_unpackhi_epi32(b0, b2),
                           _mm_unpacklo_epi32(b1, b3), _mm_unpackhi_epi32(b1, b3)};
  for (int j = 0; j < 8; ++j) {
    const __m128i t = j % 2 == 0 ? cols[j / 2] : _mm_unpackhi_epi64(cols[j / 2], cols[j / 2]);
    const int y = cols_up ? by + j : by + 7 - j;
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + std::size_t(y) * ds + bx), t);
  }
}
#endif

/// orient_samples for C bytes a sample (C a constant: the copies are moves of a fixed size).
template <int C>
void orient_fixed(const std::uint8_t* src, std::size_t ss, int w, int h, int o, std::uint8_t* dst,
                  std::size_t ds) {
  if (o < 5) {  // flips: whole rows, reversed when the columns flip
    for (int y = 0; y < h; ++y) {
      const std::uint8_t* s = src + std::size_t(flips_stored_rows(o) ? h - 1 - y : y) * ss;
      std::uint8_t* d = dst + std::size_t(y) * ds;
      if (!flips_stored_columns(o)) {
        std::memcpy(d, s, std::size_t(w) * C);
        continue;
      }
      for (int x = 0; x < w; ++x)
        std::memcpy(d + std::size_t(x) * C, s + std::size_t(w - 1 - x) * C, C);
    }
    return;
  }
  // 5..8: the output (h x w) in tiles of kTile x kTile samples; a tile's source columns and
  // output rows both stay in the cache. One byte a sample: whole 8 x 8 blocks in registers.
  constexpr int kTile = 64;
  const int ow = h, oh = w;
  for (int ty = 0; ty < oh; ty += kTile) {
    const int y1 = std::min(ty + kTile, oh);
    for (int tx = 0; tx < ow; tx += kTile) {
      const int x1 = std::min(tx + kTile, ow);
      int y = ty;
#if defined(__SSE2__)
      if constexpr (C == 1) {
        for (; y + 8 <= y1; y += 8) {
          int x = tx;
          for (; x + 8 <= x1; x += 8) turn_block8(src, ss, w, h, o, dst, ds, x, y);
          turn_rows<C>(src, ss, w, h, o, dst, ds, y, y + 8, x, x1);
        }
      }
#endif
      turn_rows<C>(src, ss, w, h, o, dst, ds, y, y1, tx, x1);
    }
  }
}

}  // namespace

void orient_samples(const std::uint8_t* src, std::size_t src_stride, int w, int h, int channels,
                    int orientation, std::uint8_t* dst, std::size_t dst_stride) {
  if (orientation < 2 || orientation > 8) {
    for (int y = 0; y < h; ++y)
      std::memcpy(dst + std::size_t(y) * dst_stride, src + std::size_t(y) * src_stride,
                  std::size_t(w) * std::size_t(channels));
    return;
  }
  switch (channels) {
    case 1: return orient_fixed<1>(src, src_stride, w, h, orientation, dst, dst_stride);
    case 2: return orient_fixed<2>(src, src_stride, w, h, orientation, dst, dst_stride);
    case 3: return orient_fixed<3>(src, src_stride, w, h, orientation, dst, dst_stride);
    case 4: return orient_fixed<4>(src, src_stride, w, h, orientation, dst, dst_stride);
    default: throw Error("orient_samples: " + std::to_string(channels) + " channels");
  }
}

}  // namespace internal

Image apply_orientation(const Image& img, int orientation) {
  if (orientation < 2 || orientation > 8) return img;
  const int w = img.width, h = img.height, c = img.channels;
  const bool swap = orientation >= 5;
  Image out;
  out.width = swap ? h : w;
  out.height = swap ? w : h;
  out.channels = c;
  out.exif = img.exif;
  out.icc = img.icc;
  out.pixels.resize(img.byte_count());
  internal::orient_samples(img.pixels.data(), std::size_t(w) * std::size_t(c), w, h, c, orientation,
                           out.pixels.data(), std::size_t(out.width) * std::size_t(c));
  return out;
}

std::string icc_color_space(const std::vector<std::uint8_t>& icc) {
  if (icc.size() < 20) return "";
  return std::string(reinterpret_cast<const char*>(icc.data() + 16), 4);
}

bool icc_fits(const std::vector<std::uint8_t>& icc, int channels) {
  const std::string cs = icc_color_space(icc);
  if (channels <= 2) return cs == "GRAY";
  return cs == "RGB ";
}

void insert_metadata(std::vector<std::uint8_t>& jpg, const std::vector<std::uint8_t>& exif,
                     const std::vector<std::uint8_t>& icc, int channels) {
  if (jpg.size() < 4 || jpg[0] != 0xFF || jpg[1] != 0xD8)
    throw Error("cannot add JPEG metadata: the encoded bytes do not start with SOI");
  std::vector<std::uint8_t> seg;
  auto add = [&](std::uint8_t marker, const std::uint8_t* head, std::size_t head_len,
                 const std::uint8_t* body, std::size_t body_len) {
    const std::size_t len = 2 + head_len + body_len;
    seg.insert(seg.end(), {0xFF, marker, std::uint8_t(len >> 8), std::uint8_t(len & 0xFF)});
    seg.insert(seg.end(), head, head + head_len);
    seg.insert(seg.end(), body, body + body_len);
  };
  if (!exif.empty() && exif.size() <= 65533) add(0xE1, nullptr, 0, exif.data(), exif.size());
  if (!icc.empty() && icc_fits(icc, channels)) {
    constexpr std::size_t kChunk = 65519;  // 65533 - 14 bytes of "ICC_PROFILE\0" + seq + count
    const std::size_t n = (icc.size() + kChunk - 1) / kChunk;
    if (n <= 255) {
      for (std::size_t i = 0; i < n; ++i) {
        std::uint8_t head[14] = {'I',
                                 'C',
                                 'C',
                                 '_',
                                 'P',
                                 'R',
                                 'O',
                                 'F',
                                 'I',
                                 'L',
                                 'E',
                                 0,
                                 std::uint8_t(i + 1),
                                 std::uint8_t(n)};
        const std::size_t off = i * kChunk;
        add(0xE2, head, sizeof head, icc.data() + off, std::min(kChunk, icc.size() - off));
      }
    }
  }
  if (seg.empty()) return;
  std::size_t at = 2;  // after SOI, and after a JFIF APP0 right behind it
  if (jpg.size() >= 6 && jpg[2] == 0xFF && jpg[3] == 0xE0) {
    const std::size_t len = std::size_t(jpg[4]) << 8 | jpg[5];
    if (2 + 2 + len <= jpg.size()) at = 4 + len;
  }
  jpg.insert(jpg.begin() + long(at), seg.begin(), seg.end());
}

}  // namespace histeq::jpeg

// ---- PNG iCCP ----
namespace histeq::png {
namespace {

const std::uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

std::uint32_t be32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | p[3];
}
void put_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = std::uint8_t(v >> 24);
  p[1] = std::uint8_t(v >> 16);
  p[2] = std::uint8_t(v >> 8);
  p[3] = std::uint8_t(v);
}

// Most bytes an inflated ICC profile may have (real ones are 0.5 KB .. a few MB).
constexpr std::size_t kMaxIcc = std::size_t(64) << 20;

}  // namespace

std::vector<std::uint8_t> read_iccp(const std::uint8_t* d, std::size_t n) {
  if (n < 8 || std::memcmp(d, kSig, 8) != 0) return {};
  std::size_t pos = 8;
  while (pos + 12 <= n) {
    const std::uint64_t len = be32(d + pos);
    if (len + 12 > n - pos) return {};
    const std::uint8_t* type = d + pos + 4;
    if (std::memcmp(type, "IDAT", 4) == 0 || std::memcmp(type, "IEND", 4) == 0) return {};
    if (std::memcmp(type, "iCCP", 4) == 0) {
      const std::uint8_t* p = d + pos + 8;
      const std::size_t l = std::size_t(len);
      const void* nul = std::memchr(p, 0, std::min<std::size_t>(l, 80));
      if (!nul) return {};
      const std::size_t name_len = std::size_t(static_cast<const std::uint8_t*>(nul) - p);
      if (name_len + 2 > l || p[name_len + 1] != 0) return {};  // compression method 0 only
      const std::uint8_t* z = p + name_len + 2;
      const std::size_t zlen = l - name_len - 2;
      std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> dec(
          libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
      if (!dec) return {};
      for (std::size_t cap = std::max<std::size_t>(4096, zlen * 4); cap <= kMaxIcc; cap *= 2) {
        std::vector<std::uint8_t> out(cap);
        std::size_t got = 0;
        const libdeflate_result r =
            libdeflate_zlib_decompress(dec.get(), z, zlen, out.data(), out.size(), &got);
        if (r == LIBDEFLATE_SUCCESS) {
          out.resize(got);
          return out;
        }
        if (r != LIBDEFLATE_INSUFFICIENT_SPACE) return {};
      }
      return {};
    }
    pos += 12 + std::size_t(len);
  }
  return {};
}

void insert_iccp(std::vector<std::uint8_t>& png, const std::vector<std::uint8_t>& icc) {
  if (icc.empty()) return;
  if (png.size() < 33 || std::memcmp(png.data(), kSig, 8) != 0 ||
      std::memcmp(png.data() + 12, "IHDR", 4) != 0 || be32(png.data() + 8) != 13)
    throw Error("cannot add an ICC profile: the encoded bytes are not a PNG starting with IHDR");
  std::unique_ptr<libdeflate_compressor, void (*)(libdeflate_compressor*)> comp(
      libdeflate_alloc_compressor(9), libdeflate_free_compressor);
  if (!comp) throw Error("cannot add an ICC profile: out of memory (libdeflate)");
  static const char kName[] = "ICC Profile";
  std::vector<std::uint8_t> chunk(8 + sizeof kName + 1);  // length, type, name, NUL, method
  std::memcpy(chunk.data() + 4, "iCCP", 4);
  std::memcpy(chunk.data() + 8, kName, sizeof kName);  // includes the NUL
  chunk[8 + sizeof kName] = 0;                         // compression method: zlib
  const std::size_t bound = libdeflate_zlib_compress_bound(comp.get(), icc.size());
  const std::size_t head = chunk.size();
  chunk.resize(head + bound);
  const std::size_t z =
      libdeflate_zlib_compress(comp.get(), icc.data(), icc.size(), chunk.data() + head, bound);
  if (z == 0) throw Error("cannot add an ICC profile: compression failed");
  chunk.resize(head + z);
  put_be32(chunk.data(), std::uint32_t(chunk.size() - 8));
  const std::uint32_t crc = std::uint32_t(libdeflate_crc32(0, chunk.data() + 4, chunk.size() - 4));
  chunk.resize(chunk.size() + 4);
  put_be32(chunk.data() + chunk.size() - 4, crc);
  png.insert(png.begin() + 33, chunk.begin(), chunk.end());  // after signature (8) + IHDR (25)
}

}  // namespace histeq::png
