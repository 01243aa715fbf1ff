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

#include "histeq/codec_names.hpp"

#include <libdeflate.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace histeq {
namespace {

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

/// The Paeth predictor (PNG spec, section 9.4), without branches: the compiler turns the
/// selections into conditional moves (a photograph's residuals make the branches unpredictable).
inline int paeth(int a, int b, int c) {
  const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
  const int bc = pb <= pc ? b : c;
  return (pa <= pb && pa <= pc) ? a : bc;
}

/// Unfilters one row of `stride` bytes with `bpp` bytes per pixel, byte by byte (any bpp);
/// `prev` is the previous unfiltered row (zeros for the first row).
void unfilter_row_scalar(int filter, const std::uint8_t* src, std::uint8_t* row,
                         const std::uint8_t* prev, std::size_t stride, std::size_t bpp) {
  switch (filter) {
    case 1:
      for (std::size_t i = 0; i < stride; ++i)
        row[i] = std::uint8_t(src[i] + (i >= bpp ? row[i - bpp] : 0));
      break;
    case 3:
      for (std::size_t i = 0; i < stride; ++i) {
        const int a = i >= bpp ? row[i - bpp] : 0;
        row[i] = std::uint8_t(src[i] + ((a + prev[i]) >> 1));
      }
      break;
    case 4:
      for (std::size_t i = 0; i < stride; ++i) {
        const int a = i >= bpp ? row[i - bpp] : 0;
        const int c = i >= bpp ? prev[i - bpp] : 0;
        row[i] = std::uint8_t(src[i] + paeth(a, prev[i], c));
      }
      break;
    default: break;
  }
}

#if defined(__SSE2__)
/// Sub, Average and Paeth for 3- and 4-byte pixels, one pixel per step with its bytes in the
/// low 16-bit lanes of an SSE2 register (the prediction depends on the pixel just written, so
/// the parallelism is across a pixel's channels). Paeth: pa = |b - c|, pb = |a - c|,
/// pc = |a + b - 2c|; the predictor is a where pa is the smallest, else b where pb is, else c
/// (the spec's order of ties).
template <int kBpp>
void unfilter_row_sse2(int filter, const std::uint8_t* src, std::uint8_t* row,
                       const std::uint8_t* prev, std::size_t stride) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i low = _mm_set1_epi16(0xFF);
  // 4-byte loads (the caller pads both rows by 4 bytes; a 3-byte pixel's fourth lane is never
  // stored) and kBpp-byte stores, all in registers (a memcpy of 3 bytes went through the stack
  // and stalled every load on store forwarding).
  const auto load = [&](const std::uint8_t* p) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return _mm_unpacklo_epi8(_mm_cvtsi32_si128(int(v)), zero);
  };
  const auto store = [&](std::uint8_t* p, __m128i v) {
    const std::uint32_t u = std::uint32_t(_mm_cvtsi128_si32(_mm_packus_epi16(v, v)));
    if (kBpp == 4) {
      std::memcpy(p, &u, 4);
    } else {
      const std::uint16_t lo = std::uint16_t(u);
      std::memcpy(p, &lo, 2);
      p[2] = std::uint8_t(u >> 16);
    }
  };
  __m128i a = zero, c = zero;
  switch (filter) {
    case 1:
      for (std::size_t i = 0; i < stride; i += kBpp) {
        a = _mm_and_si128(_mm_add_epi16(load(src + i), a), low);
        store(row + i, a);
      }
      break;
    case 3:
      for (std::size_t i = 0; i < stride; i += kBpp) {
        const __m128i avg = _mm_srli_epi16(_mm_add_epi16(a, load(prev + i)), 1);
        a = _mm_and_si128(_mm_add_epi16(load(src + i), avg), low);
        store(row + i, a);
      }
      break;
    case 4:
      for (std::size_t i = 0; i < stride; i += kBpp) {
        const __m128i b = load(prev + i);
        const __m128i bc = _mm_sub_epi16(b, c), ac = _mm_sub_epi16(a, c);
        const __m128i abc = _mm_add_epi16(bc, ac);
        const __m128i pa = _mm_max_epi16(bc, _mm_sub_epi16(zero, bc));
        const __m128i pb = _mm_max_epi16(ac, _mm_sub_epi16(zero, ac));
        const __m128i pc = _mm_max_epi16(abc, _mm_sub_epi16(zero, abc));
        const __m128i least = _mm_min_epi16(_mm_min_epi16(pa, pb), pc);
        const __m128i take_a = _mm_cmpeq_epi16(pa, least);
        const __m128i take_b = _mm_andnot_si128(take_a, _mm_cmpeq_epi16(pb, least));
        const __m128i take_c = _mm_andnot_si128(_mm_or_si128(take_a, take_b), low);
        const __m128i pred =
            _mm_or_si128(_mm_or_si128(_mm_and_si128(take_a, a), _mm_and_si128(take_b, b)),
                         _mm_and_si128(take_c, c));
        a = _mm_and_si128(_mm_add_epi16(load(src + i), pred), low);
        c = b;
        store(row + i, a);
      }
      break;
    default: break;
  }
}
#endif

/// Unfilters one row (filter type 0..4, checked by the caller) into `row`; `prev` is the
/// previous unfiltered row, or a row of zeros for the first.
void unfilter_row(int filter, const std::uint8_t* src, std::uint8_t* row, const std::uint8_t* prev,
                  std::size_t stride, int bpp) {
  if (filter == 0) {
    std::memcpy(row, src, stride);
    return;
  }
  if (filter == 2) {  // Up: no dependency along the row (the compiler vectorizes it)
    for (std::size_t i = 0; i < stride; ++i) row[i] = std::uint8_t(src[i] + prev[i]);
    return;
  }
#if defined(__SSE2__)
  if (bpp == 3) return unfilter_row_sse2<3>(filter, src, row, prev, stride);
  if (bpp == 4) return unfilter_row_sse2<4>(filter, src, row, prev, stride);
#endif
  unfilter_row_scalar(filter, src, row, prev, stride, std::size_t(bpp));
}

class FastPngCodec final : public Codec {
 public:
  std::string name() const override { return codec::kLibdeflatePng; }

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
    // 4 bytes of padding: the SSE2 unfilter loads 4 bytes for a 3-byte pixel.
    std::unique_ptr<std::uint8_t[]> raw(new (std::nothrow) std::uint8_t[raw_size + 4]);
    if (!raw) return false;
    std::memset(raw.get() + raw_size, 0, 4);
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
    const std::vector<std::uint8_t> zeros(stride + 4, 0);  // the first row's "previous row"
    const std::uint8_t* prev = zeros.data();
    for (std::uint32_t y = 0; y < h; ++y) {
      const std::uint8_t* src = raw.get() + std::size_t(y) * (stride + 1);
      if (src[0] > 4) return false;  // stb reports the bad filter
      std::uint8_t* row = img.pixels.data() + std::size_t(y) * stride;
      unfilter_row(src[0], src + 1, row, prev, stride, channels);
      prev = row;
    }
    *out = std::move(img);
    return true;
  }
};

}  // namespace

std::shared_ptr<Codec> make_fast_png_decoder() { return std::make_shared<FastPngCodec>(); }

}  // namespace histeq
