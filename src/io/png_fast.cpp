// png_fast.cpp — a fast decoder for the common PNG: 8-bit gray, gray+alpha, RGB or RGBA, not
// interlaced, without tRNS or PLTE, as a histeq::Codec for the executor (and decode_image, after
// its header checks). The zlib stream is
// inflated by libdeflate (several times faster than stb_image's inflate), then the rows are
// unfiltered (PNG spec, ISO/IEC 15948, section 9). The pixels are exactly the file's samples,
// which is what stb_image returns for these files. Anything else — other types or depths,
// interlacing, a bad CRC, a chunk past the end, a size over the limit, a zlib stream that does
// not inflate to exactly the image's size, an unknown filter — is declined (decode returns
// false), and stb_image (image_io.cpp) decodes it or reports the error with its usual message.
#include "io/png_fast.hpp"

#include <libdeflate.h>

#include <cstring>
#include <memory>
#include <new>
#include <vector>

namespace histeq {
namespace {

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

int paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = p > a ? p - a : a - p;
  const int pb = p > b ? p - b : b - p;
  const int pc = p > c ? p - c : c - p;
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

class FastPngCodec final : public Codec {
 public:
  std::string name() const override { return "libdeflate-png"; }

  bool decode(const std::uint8_t* d, std::size_t len, const std::string& /*name*/,
              std::uint64_t max_pixels, Image* out) override {
    static const std::uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (len < 8 + 25 || std::memcmp(d, kSig, 8) != 0) return false;
    std::size_t pos = 8;
    std::uint32_t w = 0, h = 0;
    int channels = 0;
    bool ihdr = false, iend = false;
    std::vector<std::uint8_t> idat;
    while (pos + 12 <= len) {
      const std::uint64_t n = be32(d + pos);
      if (n + 12 > len - pos) return false;  // past the end
      const std::uint8_t* type = d + pos + 4;
      const std::uint8_t* data = d + pos + 8;
      if (libdeflate_crc32(0, type, std::size_t(n) + 4) != be32(data + n)) return false;
      if (!ihdr) {
        if (std::memcmp(type, "IHDR", 4) != 0 || n != 13) return false;
        w = be32(data);
        h = be32(data + 4);
        const int depth = data[8], color = data[9];
        if (depth != 8 || data[10] != 0 || data[11] != 0 || data[12] != 0) return false;
        switch (color) {
          case 0: channels = 1; break;
          case 2: channels = 3; break;
          case 4: channels = 2; break;
          case 6: channels = 4; break;
          default: return false;  // palette: stb
        }
        if (w == 0 || h == 0 || w > (1u << 24) || h > (1u << 24)) return false;
        if (std::uint64_t(w) * h > max_pixels) return false;
        ihdr = true;
      } else if (std::memcmp(type, "IDAT", 4) == 0) {
        idat.insert(idat.end(), data, data + n);
      } else if (std::memcmp(type, "IEND", 4) == 0) {
        iend = true;
        break;
      } else if (!(type[0] & 0x20) || std::memcmp(type, "tRNS", 4) == 0) {
        return false;  // a critical chunk other than IDAT/IEND (PLTE...), or transparency: stb
      }
      pos += 12 + n;
    }
    if (!ihdr || !iend || idat.empty()) return false;

    const std::size_t stride = std::size_t(w) * std::size_t(channels);
    const std::size_t raw_size = (stride + 1) * std::size_t(h);
    // Deflate expands at most 1032:1: less data cannot hold the image (decode_image refuses it
    // as truncated). Checked before allocating, so that a tiny file declaring a huge image costs
    // nothing; the buffer is not value-initialized (only the pages inflated into are touched).
    if (raw_size > std::uint64_t(idat.size()) * 1032 + 1024) return false;
    std::unique_ptr<std::uint8_t[]> raw(new (std::nothrow) std::uint8_t[raw_size]);
    if (!raw) return false;
    thread_local struct Decompressor {
      libdeflate_decompressor* p = libdeflate_alloc_decompressor();
      ~Decompressor() {
        if (p) libdeflate_free_decompressor(p);
      }
    } dec;
    if (!dec.p) return false;
    std::size_t in_used = 0, got = 0;
    // The zlib stream must fill the image exactly and end where the image data ends (data after
    // it: decode_image's Adler-32 check, on the last four bytes, refuses the file).
    if (libdeflate_zlib_decompress_ex(dec.p, idat.data(), idat.size(), raw.get(), raw_size,
                                      &in_used, &got) != LIBDEFLATE_SUCCESS ||
        got != raw_size || in_used != idat.size())
      return false;

    Image img;
    img.width = int(w);
    img.height = int(h);
    img.channels = channels;
    img.pixels.resize(stride * h);
    const int bpp = channels;
    std::uint8_t* prev = nullptr;
    for (std::uint32_t y = 0; y < h; ++y) {
      const std::uint8_t* src = raw.get() + std::size_t(y) * (stride + 1);
      const int filter = src[0];
      ++src;
      std::uint8_t* row = img.pixels.data() + std::size_t(y) * stride;
      switch (filter) {
        case 0: std::memcpy(row, src, stride); break;
        case 1:
          for (std::size_t i = 0; i < stride; ++i)
            row[i] = std::uint8_t(src[i] + (i >= std::size_t(bpp) ? row[i - bpp] : 0));
          break;
        case 2:
          for (std::size_t i = 0; i < stride; ++i)
            row[i] = std::uint8_t(src[i] + (prev ? prev[i] : 0));
          break;
        case 3:
          for (std::size_t i = 0; i < stride; ++i) {
            const int a = i >= std::size_t(bpp) ? row[i - bpp] : 0;
            const int b = prev ? prev[i] : 0;
            row[i] = std::uint8_t(src[i] + ((a + b) >> 1));
          }
          break;
        case 4:
          for (std::size_t i = 0; i < stride; ++i) {
            const int a = i >= std::size_t(bpp) ? row[i - bpp] : 0;
            const int b = prev ? prev[i] : 0;
            const int c = (prev && i >= std::size_t(bpp)) ? prev[i - bpp] : 0;
            row[i] = std::uint8_t(src[i] + paeth(a, b, c));
          }
          break;
        default: return false;  // stb reports the bad filter
      }
      prev = row;
    }
    *out = std::move(img);
    return true;
  }
};

}  // namespace

std::shared_ptr<Codec> make_fast_png_decoder() { return std::make_shared<FastPngCodec>(); }

}  // namespace histeq
