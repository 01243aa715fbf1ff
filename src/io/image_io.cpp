// image_io.cpp — reading 8-bit image files: read_file (the whole file in memory; regular files
// only), and decode_image / load_image over libjpeg-turbo for JPEG (jpeg_codec.cpp), histeq's
// binary PNM decoder (pnm_read.cpp), the libdeflate reader of the common PNG (png_fast.cpp) and
// stb_image for the rest (Debian libstb-dev; the implementation is compiled here, once, from the
// system header), each file after the structure checks of decode_checks.hpp. Writing lives
// beside it: image_encode.cpp (encode_image, save_image), png_write.cpp (the 8-bit PNG writer),
// atomic_write.cpp (write_file_atomic and the signal cleanup of its temporary files).
//
// Loading reads the whole file into memory first (so that a missing file, a directory or an
// empty file gets its own message), checks the header's dimensions with stbi_info_from_memory
// before any pixel memory is allocated, then decodes.
#include "histeq/image_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "histeq/codec_names.hpp"
#include "histeq/error.hpp"
#include "histeq/jpeg_codec.hpp"
#include "io/decode_checks.hpp"
#include "io/image_io_internal.hpp"
#include "io/png_checks.hpp"
#include "png_fast.hpp"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#if !defined(__clang__)
#pragma GCC diagnostic ignored \
    "-Wstringop-overflow"  // false positives once stb is static (inlined)
#endif
#endif
// Defense in depth: every buffer stb_image allocates starts zeroed (calloc; a realloc zeroes
// what it adds), so that no decoder bug can hand back earlier heap contents as pixels
// (test_cli_hostile_decode: DecodedPixelsDoNotDependOnHeapContents). stb's symbols stay private to
// this file (STB_IMAGE_STATIC; image_encode.cpp keeps stb_image_write's so): a program linking
// libhisteq_host.a may compile its own copy of stb (CTest no_stb_symbols_exported).
namespace {
void* histeq_stbi_realloc_zeroed(void* p, std::size_t old_size, std::size_t new_size) {
  void* q = std::realloc(p, new_size);
  if (q && new_size > old_size)
    std::memset(static_cast<char*>(q) + old_size, 0, new_size - old_size);
  return q;
}
}  // namespace
#define STBI_MALLOC(sz) std::calloc(1, (sz))
#define STBI_REALLOC_SIZED(p, oldsz, newsz) histeq_stbi_realloc_zeroed((p), (oldsz), (newsz))
#define STBI_FREE(p) std::free(p)
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO  // we read files ourselves
// Only the documented input formats are compiled in (a smaller attack surface: PSD, HDR, PIC
// and Softimage decoders never see a user's file). Every format that stb decodes is fuzzed
// (tests/fuzz/, docs/reliability.md).
// JPEG is not among them: libjpeg-turbo decodes every JPEG (jpeg_codec.hpp). stb's JPEG
// decoder stayed reachable for files libjpeg's dispatch does not claim (fill bytes before the
// SOI), and it decodes a JPEG without scans or Huffman tables from zero-filled buffers
// (tests/fuzz/crashes/decode/hostile-jpeg-fill-bytes-before-soi.jpg); without it such a file is
// "unknown image type".
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_TGA
#define STBI_ONLY_GIF
#define STBI_ONLY_PNM
// Decoded sizes stay far below stb's own INT_MAX checks: 2^24 pixels per side at most (stb's
// default, stated here so that it does not change under us).
#define STBI_MAX_DIMENSIONS (1 << 24)
#include <stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace histeq {
using detail::file_type_name;
using detail::quoted;

namespace {

/// The whole file in memory. Opened with O_NONBLOCK and checked with fstat on the open file
/// (no race between the check and the read): only regular files are read, so a FIFO, a device
/// or a socket is refused at once instead of blocking or reading forever. The size is checked
/// against what the decoder takes before anything is allocated.
std::vector<std::uint8_t> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    throw FileError(
        "cannot read " + quoted(path) + ": " +
            (err == ENOENT ? std::string("no such file") : std::string(std::strerror(err))),
        err, path);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw FileError("cannot read " + quoted(path) + ": " + std::strerror(errno), errno, path);
  if (!S_ISREG(st.st_mode))
    throw FileError("cannot read " + quoted(path) + ": " + file_type_name(st.st_mode),
                    S_ISDIR(st.st_mode) ? EISDIR : 0, path);
  if (st.st_size == 0) throw DecodeError("cannot decode " + quoted(path) + ": the file is empty");
  if (std::uint64_t(st.st_size) > std::uint64_t(INT_MAX))
    throw DecodeError("cannot decode " + quoted(path) + ": " + std::to_string(st.st_size) +
                      " bytes is too large to decode (the decoder takes at most " +
                      std::to_string(INT_MAX) + " bytes)");
  std::vector<std::uint8_t> data(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw FileError("cannot read " + quoted(path) + ": " + std::strerror(errno), errno, path);
    }
    if (n == 0) break;  // shrank while we read: decode what is there (it will say truncated)
    done += std::size_t(n);
  }
  data.resize(done);
  if (data.empty()) throw DecodeError("cannot decode " + quoted(path) + ": the file is empty");
  return data;
}

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

/// stb_image's zlib decoder with a fixed output buffer (it never grows it: more output than
/// `cap` fails with "output buffer limit"). For detail::structure_problem's PNG check.
int bounded_inflate(char* out, int cap, const char* in, int in_len, bool zlib_header,
                    const char** why) {
  const int n = zlib_header ? stbi_zlib_decode_buffer(out, cap, in, in_len)
                            : stbi_zlib_decode_noheader_buffer(out, cap, in, in_len);
  if (n < 0 && why) *why = stbi_failure_reason();
  return n;
}

/// Why stbi_info_from_memory failed. It tries every format in turn, so its own reason is always
/// the last one's ("unknown image type"); for a file whose signature names a format, ask that
/// format's header parser again (stb_image internals, compiled in this file) for its reason
/// ("0-pixel image", "too large", "bad IHDR len", ...).
const char* format_failure_reason(const std::uint8_t* data, int len) {
  using Test = int (*)(stbi__context*);
  using Info = int (*)(stbi__context*, int*, int*, int*);
  const std::pair<Test, Info> formats[] = {{stbi__png_test, stbi__png_info},
                                           {stbi__gif_test, stbi__gif_info},
                                           {stbi__bmp_test, stbi__bmp_info}};
  for (const auto& [test, info] : formats) {
    stbi__context s;
    stbi__start_mem(&s, data, len);
    if (!test(&s)) continue;
    stbi__start_mem(&s, data, len);
    int x = 0, y = 0, c = 0;
    if (!info(&s, &x, &y, &c)) {
      const char* why = stbi_failure_reason();
      return why ? why : "corrupt header";
    }
    return "corrupt header";  // only the full probe failed (should not happen)
  }
  // Netpbm's text variants (P1 bitmap, P2 graymap, P3 pixmap) and its bitmap P4: histeq reads
  // the binary graymap and pixmap only.
  if (len >= 2 && data[0] == 'P' && data[1] >= '1' && data[1] <= '4')
    return "a text or bitmap Netpbm file (P1-P4); histeq reads binary PGM and PPM (P5, P6)";
  return "unknown image type";
}

/// Pre-check of a JPEG's Huffman tables, before stb_image sees the file.
///
/// stb_image 2.27 (Debian 12's libstb-dev) does not bound the number of codes in a DHT table:
/// with 16 code-length counts summing to more than 256 it writes past stbi__huffman::size[257]
/// and ::values[256] inside its decoder state (heap memory). Found by fuzz_decode_equalize;
/// fixed upstream in stb_image 2.28 ("bad DHT header"); regression input in
/// tests/fuzz/crashes/decode/. This walks the file the way stb's parser does — segments by their
/// length before and after the frame header, entropy-coded data up to the next marker that is
/// not a stuffed 0xFF00 or a restart — and checks every DHT table that stb would read. Where
/// stb's own parser would stop with an error, the walk stops too (stb rejects the file then).
/// Returns nullptr, or the reason to refuse the file.
const char* jpeg_huffman_problem(const std::uint8_t* d, std::size_t len) {
  // SOI as stbi__get_marker reads it: 0xFF, any number of fill 0xFFs, then 0xD8 (a second
  // fuzzer finding: 122 leading 0xFFs got a bad DHT past a check that wanted FF D8 at 0).
  if (len < 2 || d[0] != 0xFF) return nullptr;
  std::size_t pos = 1;
  while (pos < len && d[pos] == 0xFF) ++pos;
  if (pos >= len || d[pos] != 0xD8) return nullptr;  // not a JPEG
  ++pos;
  auto get8 = [&]() -> unsigned {
    return pos < len ? d[pos++] : (pos++, 0u);
  };  // 0 past the end, as stb
  auto get16 = [&]() -> unsigned {
    const unsigned hi = get8();
    return (hi << 8) | get8();
  };
  bool frame_seen = false;  // after SOF: no junk between segments, SOS allowed
  while (pos < len) {
    // A marker: 0xFF, fill 0xFFs, then the code (stbi__get_marker).
    if (d[pos] != 0xFF) {
      if (frame_seen) return nullptr;  // stb: "expected marker"
      ++pos;                           // stb skips padding between header segments
      continue;
    }
    while (pos < len && d[pos] == 0xFF) ++pos;
    if (pos >= len) return nullptr;
    const unsigned m = d[pos++];
    if (m == 0xD9) return nullptr;  // EOI
    if (m == 0xC4) {                // DHT: the tables, read exactly as stb reads them
      long remaining = long(get16()) - 2;
      while (remaining > 0) {
        const unsigned q = get8();
        if ((q >> 4) > 1 || (q & 15) > 3) return nullptr;  // stb: "bad DHT header"
        unsigned n = 0;
        for (int i = 0; i < 16; ++i) n += get8();
        if (n > 256) return "corrupt JPEG: a Huffman table (DHT) declares more than 256 codes";
        pos += n;
        remaining -= 17 + long(n);
      }
      if (remaining != 0) return nullptr;  // stb: error
      continue;
    }
    if (m == 0xC0 || m == 0xC1 || m == 0xC2 || m == 0xDB || m == 0xDD || (m >= 0xE0 && m <= 0xEF) ||
        m == 0xFE || (frame_seen && m == 0xDA)) {
      const unsigned seg = get16();
      if (seg < 2) return nullptr;  // stb: bad length
      pos += seg - 2;
      if (m == 0xC0 || m == 0xC1 || m == 0xC2) frame_seen = true;
      if (m == 0xDA) {  // entropy-coded data: up to a marker that is neither 0xFF00 nor RSTn
        for (;;) {
          while (pos < len && d[pos] != 0xFF) ++pos;
          if (pos >= len) return nullptr;
          std::size_t q = pos + 1;
          while (q < len && d[q] == 0xFF) ++q;
          if (q >= len) return nullptr;
          if (d[q] == 0x00 || (d[q] >= 0xD0 && d[q] <= 0xD7)) {
            pos = q + 1;
            continue;
          }
          pos = q;  // d[pos - 1] == 0xFF: the loop above reads this marker next
          --pos;
          break;
        }
      }
      continue;
    }
    if (frame_seen && m == 0xDC) {  // DNL: stb reads 4 bytes
      pos += 4;
      continue;
    }
    return nullptr;  // any other marker: stb stops with "unknown marker"
  }
  return nullptr;
}

/// Pre-check of a binary PNM header (P5/P6), read exactly as stb_image 2.27 reads it
/// (stbi__pnm_info: whitespace, '#' comments to the end of the line, three decimal integers).
/// stb accumulates each integer in an int without an overflow check (signed overflow, UB; a
/// wrapped width, height or maximum value): found by fuzz_decode_equalize, fixed upstream in
/// stb_image 2.28 ("integer parse overflow"); regression input in tests/fuzz/crashes/decode/.
/// Returns nullptr, or the reason to refuse the file.
const char* pnm_header_problem(const std::uint8_t* d, std::size_t len) {
  if (len < 2 || d[0] != 'P' || (d[1] != '5' && d[1] != '6')) return nullptr;
  std::size_t pos = 2;
  auto at_eof = [&] { return pos >= len; };
  auto get8 = [&]() -> char { return pos < len ? char(d[pos++]) : char(0); };
  auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  char c = get8();
  auto skip_whitespace = [&] {
    for (;;) {
      while (!at_eof() && is_space(c)) c = get8();
      if (at_eof() || c != '#') break;
      while (!at_eof() && c != '\n' && c != '\r') c = get8();
    }
  };
  auto integer_fits = [&] {
    std::uint64_t value = 0;
    while (!at_eof() && c >= '0' && c <= '9') {
      value = value * 10 + std::uint64_t(c - '0');
      if (value > std::uint64_t(INT_MAX)) return false;
      c = get8();
    }
    return true;
  };
  for (int field = 0; field < 3; ++field) {  // width, height, maximum value
    skip_whitespace();
    if (!integer_fits())
      return "corrupt PNM header: a number (width, height or maximum value) does not fit in 31 "
             "bits";
  }
  return nullptr;
}

/// The channels to keep of a GIF, which stb_image gives as RGBA whatever its palette: 4 with a
/// transparent pixel, else 3, or 1 when every pixel is gray (as ImageMagick reads them).
int gif_channels(const std::uint8_t* rgba, std::size_t pixels) {
  bool gray = true;
  for (std::size_t i = 0; i < pixels; ++i, rgba += 4) {
    if (rgba[3] != 255) return 4;
    gray = gray && rgba[0] == rgba[1] && rgba[1] == rgba[2];
  }
  return gray ? 1 : 3;
}

/// Whether a BMP is one gray channel as OpenCV's imread reads it: 8 bits or fewer per pixel
/// and a gray palette (stb_image gives it as RGB); 16 to 32 bits per pixel, or a colour palette,
/// stays colour. The palette as OpenCV reads it: biClrUsed entries (2^bits when 0), 4 bytes each
/// (3 in an OS/2 core header), the rest of the 2^bits black.
bool gray_palette_bmp(const std::uint8_t* d, std::size_t size) {
  if (size < 30 || d[0] != 'B' || d[1] != 'M') return false;
  const auto le = [&](std::size_t at, int bytes) {
    std::uint32_t v = 0;
    for (int k = bytes - 1; k >= 0; --k) v = v << 8 | d[at + std::size_t(k)];
    return v;
  };
  const std::uint32_t header = le(14, 4);
  const bool core = header == 12;
  const std::uint32_t bits = core ? le(24, 2) : le(28, 2);
  if (bits == 0 || bits > 8 || (!core && size < 50)) return false;
  const std::uint32_t all = 1u << bits;
  std::uint32_t used = core ? all : le(46, 4);
  if (used == 0 || used > all) used = all;
  const std::size_t entry = core ? 3 : 4;
  const std::size_t at = 14 + std::size_t(header);
  if (header > size || at + std::size_t(used) * entry > size) return false;
  for (std::uint32_t i = 0; i < used; ++i) {
    const std::uint8_t* e = d + at + std::size_t(i) * entry;
    if (e[0] != e[1] || e[1] != e[2]) return false;
  }
  return true;
}

}  // namespace

namespace {
Image decode_image_checked(const std::uint8_t* data, std::size_t size, const std::string& name,
                           std::uint64_t max_pixels, std::string* decoder);
}  // namespace

Image decode_image(const std::uint8_t* data, std::size_t size, const std::string& name,
                   std::uint64_t max_pixels, std::string* decoder) {
  try {
    return decode_image_checked(data, size, name, max_pixels, decoder);
  } catch (const DecodeError&) {
    throw;
  } catch (const Error& e) {  // every refusal of the decoders is about the data
    throw DecodeError(e.what());
  }
}

namespace {
Image decode_image_checked(const std::uint8_t* data, std::size_t size, const std::string& name,
                           std::uint64_t max_pixels, std::string* decoder) {
  std::string unused;
  std::string& used = decoder ? *decoder : unused;
  used.clear();
  if (size == 0) throw DecodeError("cannot decode " + quoted(name) + ": the file is empty");
  if (size > std::size_t(INT_MAX))
    throw Error(quoted(name) + " is too large to decode (" + std::to_string(size) +
                " bytes; the decoder takes at most " + std::to_string(INT_MAX) + ")");
  // JPEG: libjpeg-turbo (jpeg_codec.hpp), so that pixels equal OpenCV's/Pillow's decode.
  if (jpeg::is_jpeg(data, size)) {
    used = codec::kLibjpegTurbo;
    return jpeg::decode(data, size, name, {max_pixels});
  }
  const int len = static_cast<int>(size);
  if (const char* why = jpeg_huffman_problem(data, size))
    throw Error(quoted(name) + " is not a decodable image: " + why);
  if (const char* why = pnm_header_problem(data, size))
    throw Error(quoted(name) + " is not a decodable image: " + why);
  // PNG chunks before stb_image sees them (io/png_checks.hpp): each within the file (stb grows
  // its buffer to a declared length first), each CRC (stb checks none).
  if (std::string why = detail::png_chunk_problem(data, size); !why.empty())
    throw Error(quoted(name) + " is not a decodable image: " + why);
  auto check_dims = [&](std::uint64_t w, std::uint64_t h) {
    if (w == 0 || h == 0)
      throw Error(quoted(name) + " has zero width or height: " + std::to_string(w) + "x" +
                  std::to_string(h));
    const std::uint64_t pixels = w * h;  // both < 2^32: no overflow
    if (pixels > max_pixels)
      throw Error(quoted(name) + " is " + std::to_string(w) + "x" + std::to_string(h) + " = " +
                  std::to_string(pixels) + " pixels, over the limit of " +
                  std::to_string(max_pixels) + " pixels");
  };
  // PNG: the IHDR's dimensions first, so that sizes stb_image rejects itself ("0-pixel image",
  // "too large") still get the message that names them and the limit.
  static const std::uint8_t kPngSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= 24 && std::memcmp(data, kPngSig, 8) == 0 && std::memcmp(data + 12, "IHDR", 4) == 0)
    check_dims(be32(data + 16), be32(data + 20));
  // Binary PNM (P5/P6): decoded here (detail::pnm_decode: data length checked before
  // allocating, any maxval 1..65535 scaled, 16-bit samples big-endian), not by stb.
  if (detail::is_binary_pnm(data, size)) {
    detail::PnmHeader pnm;
    if (std::string why = detail::pnm_header(data, size, &pnm); !why.empty())
      throw Error(quoted(name) + " is not a decodable image: " + why);
    check_dims(pnm.width, pnm.height);
    Image img;
    if (std::string why = detail::pnm_decode(data, size, pnm, &img); !why.empty())
      throw Error(quoted(name) + " is not a decodable image: " + why);
    used = codec::kPnm;
    return img;
  }
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(data, len, &w, &h, &comp))
    throw Error(quoted(name) + " is not a decodable image: " + format_failure_reason(data, len));
  if (h < 0 && h > -STBI_MAX_DIMENSIONS - 1 && detail::bmp_is_top_down(data, size))
    h = -h;  // a top-down BMP: stb's info gives the stored (negative) height, its decoder flips
  check_dims(std::uint64_t(std::max(w, 0)), std::uint64_t(std::max(h, 0)));
  // The common PNG (8-bit gray, gray+alpha, RGB, RGBA; not interlaced; no tRNS, no PLTE): the
  // batch executor's decoder (png_fast.cpp: libdeflate's inflate, several times faster than
  // stb's; the same pixels). Every check above has passed; it declines every other PNG and every
  // one that the checks below would refuse (zlib data that does not inflate to exactly the
  // image, trailing data, a bad Adler-32, more data than the header needs), which then goes on
  // to them and to stb_image as before.
  if (size >= 8 && std::memcmp(data, kPngSig, 8) == 0) {
    static const std::shared_ptr<Codec> fast_png = make_fast_png_decoder();  // stateless
    Image img;
    if (fast_png->decode(data, size, name, max_pixels, &img)) {
      img.icc = png::read_iccp(data, size);  // as below
      used = codec::kLibdeflatePng;
      return img;
    }
  }
  // The file's own structure (BMP, TGA, GIF, PNG): data long enough for every pixel, palette
  // indices within the palette, complete LZW/zlib data, no decompression bomb.
  if (std::string why = detail::structure_problem(data, size, bounded_inflate); !why.empty())
    throw Error(quoted(name) + " is not a decodable image: " + why);
  int dw = 0, dh = 0, dc = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> px(stbi_load_from_memory(data, len, &dw, &dh, &dc, 0),
                                               stbi_image_free);
  if (!px) {
    // stb's format probes leave their own reason behind when a decoder fails without one
    // ("bad png sig" for a cut JPEG): name the file's format and the defect class instead.
    const std::string why = stbi_failure_reason() ? stbi_failure_reason() : "";
    const bool probe_reason = why.empty() || why == "bad png sig" || why == "not BMP" ||
                              why == "not GIF" || why == "not PSD" || why == "not PIC" ||
                              why == "bad file";
    throw Error(quoted(name) + " is not a decodable image: " +
                (probe_reason ? std::string("corrupt or truncated ") +
                                    detail::format_name(data, size) + " data"
                              : why));
  }
  if (dw != w || dh != h || dc < 1 || dc > 4)
    throw Error(quoted(name) + " decoded to an unexpected shape " + std::to_string(dw) + "x" +
                std::to_string(dh) + "x" + std::to_string(dc));
  Image img;
  img.width = dw;
  img.height = dh;
  const std::size_t n = std::size_t(dw) * std::size_t(dh);
  const bool gif = size >= 4 && std::memcmp(data, "GIF8", 4) == 0 && dc == 4;
  const bool gray_bmp = dc == 3 && gray_palette_bmp(data, size);
  const bool rgb32_bmp = dc == 4 && detail::bmp_is_rgb32(data, size);
  img.channels = gif ? gif_channels(px.get(), n) : gray_bmp ? 1 : rgb32_bmp ? 3 : dc;
  if (img.channels == dc) {
    img.pixels.assign(px.get(), px.get() + img.byte_count());
  } else {  // the kept channels of each pixel, straight from stb's buffer
    img.pixels.resize(img.byte_count());
    const std::size_t c = std::size_t(img.channels), from = std::size_t(dc);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < c; ++k) img.pixels[i * c + k] = px.get()[i * from + k];
  }
  img.icc = png::read_iccp(data, size);  // empty unless a PNG with an iCCP chunk
  used = codec::kStbImage;
  return img;
}
}  // namespace

std::vector<std::uint8_t> read_image_file(const std::string& path) { return read_file(path); }

Image load_image(const std::string& path, std::uint64_t max_pixels) {
  const std::vector<std::uint8_t> data = read_file(path);
  return decode_image(data.data(), data.size(), path, max_pixels);
}

bool image_info(const std::uint8_t* data, std::size_t size, int* width, int* height,
                int* channels) {
  if (size == 0 || size > std::size_t(INT_MAX)) return false;
  return stbi_info_from_memory(data, int(size), width, height, channels) != 0;
}

}  // namespace histeq
