// png_write.cpp — histeq's 8-bit PNG writer (detail::write_png8, which encode_image calls for
// .png): rows Paeth-filtered a row at a time (SSE2 where there is SSE2), one zlib stream by
// libdeflate at levels 0 and 2..9, or by ISA-L in strips on helper threads at level 1
// (png_deflate.cpp), and the ICC profile in an iCCP chunk.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "histeq/error.hpp"
#include "histeq/jpeg_codec.hpp"
#include "io/image_io_internal.hpp"
#include "io/png_deflate.hpp"

#include <libdeflate.h>

namespace histeq {
namespace {

// ---------------------------------------------------------------- the PNG writer
// histeq writes 8-bit PNG files itself rather than with stbi_write_png_to_func, because stb's
// filter loop was about half of the encode: a 5120x2880 RGB photograph at --png-level 1 took
// ~600 ms on one core, ~270 ms of it in libdeflate, and level 0 (deflate only stores) still
// ~330 ms. stb filters a byte at a time (a call and three data-dependent branches per byte) and
// copies the data three more times (line buffer to rows, zlib output to file, file to the
// caller's vector). Here the Paeth filter runs a row at a time with no branch on the data, 16 bytes
// per step with SSE2 (every x86-64 CPU has it), a scalar twin elsewhere and for the ends of rows;
// the zlib stream is copied once, into the file. perf on the 2-core build machine, one 14.7 MP
// RGB encode (bench_cpu_stages --png-level 1, docs/benchmarks.md): filter 60 -> 21 ms, copies
// 19 -> 6 ms; libdeflate's time is unchanged. What is reused: libdeflate's zlib compressor (one
// per thread and level, as stb's STBIW_ZLIB_COMPRESS hook used it), libdeflate_crc32 for the
// chunk CRCs, png::insert_iccp for the ICC profile. stb_image_write still writes BMP and TGA.
//
// The file is byte for byte what stb_image_write 1.16 wrote with stbi_write_force_png_filter = 4
// and that libdeflate hook (tests/test_host_png_write.cpp compares the two):
//  - signature; IHDR (width, height, depth 8, colour type 0/4/2/6 for 1/2/3/4 channels,
//    compression, filter and interlace 0); [iCCP, inserted after IHDR]; one IDAT holding the
//    zlib stream of all filtered rows; IEND;
//  - every row starts with filter type 4 (Paeth: the best of the five filters on photographs,
//    at a fraction of the cost of trying all five per row, as stb does by default). On row 0,
//    stb's "first row" mapping turns a forced Paeth into its type 6 (x - left), which is Paeth
//    with a zero row above (paeth(a, 0, 0) = a); the first pixel of the other rows gets
//    x - above, Paeth with zero neighbours on the left (paeth(0, b, 0) = b). So the bytes are
//    the PNG spec's Paeth filter.

/// libdeflate's compressor for `level` (0..9), one per thread and level, kept for reuse (its
/// allocation is a few hundred KiB); nullptr when out of memory.
libdeflate_compressor* png_compressor(int level) {
  struct Compressors {
    libdeflate_compressor* c[10] = {};
    ~Compressors() {
      for (auto* p : c)
        if (p) libdeflate_free_compressor(p);
    }
  };
  thread_local Compressors cs;
  if (!cs.c[level]) cs.c[level] = libdeflate_alloc_compressor(level);
  return cs.c[level];
}

/// The Paeth predictor of PNG (ISO/IEC 15948, 9.4) without branches: p = a + b - c, and the
/// distances |p - a| = |b - c|, |p - b| = |a - c|, |p - c| = |a + b - 2c|; ties go to a, then b.
inline int paeth_predict(int a, int b, int c) {
  const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
  const int bc = pb <= pc ? b : c;
  return (pa <= pb && pa <= pc) ? a : bc;
}

/// Paeth-filtered bytes [from, n) of a row `cur` under the row `up` (from >= bpp).
void paeth_row_scalar(const std::uint8_t* __restrict cur, const std::uint8_t* __restrict up,
                      std::size_t bpp, std::size_t from, std::size_t n,
                      std::uint8_t* __restrict out) {
  for (std::size_t i = from; i < n; ++i)
    out[i] = std::uint8_t(cur[i] - paeth_predict(cur[i - bpp], up[i], up[i - bpp]));
}

#if defined(__SSE2__)
/// |v| of 16-bit lanes (SSE2 has no pabsw: max(v, -v); lanes here are within -510..510).
inline __m128i abs_epi16(__m128i v) {
  return _mm_max_epi16(v, _mm_sub_epi16(_mm_setzero_si128(), v));
}

/// paeth_predict on eight 16-bit lanes, with the same ties.
inline __m128i paeth_predict_epi16(__m128i a, __m128i b, __m128i c) {
  const __m128i bc = _mm_sub_epi16(b, c), ac = _mm_sub_epi16(a, c);
  const __m128i pa = abs_epi16(bc), pb = abs_epi16(ac), pc = abs_epi16(_mm_add_epi16(bc, ac));
  const __m128i take_c = _mm_cmpgt_epi16(pb, pc);  // pb > pc: c, else b
  const __m128i b_or_c = _mm_or_si128(_mm_and_si128(take_c, c), _mm_andnot_si128(take_c, b));
  const __m128i not_a = _mm_or_si128(_mm_cmpgt_epi16(pa, pb), _mm_cmpgt_epi16(pa, pc));
  return _mm_or_si128(_mm_and_si128(not_a, b_or_c), _mm_andnot_si128(not_a, a));
}

/// paeth_row_scalar for 16 bytes at a time from `from`; returns where it stopped (the scalar
/// twin does the rest of the row).
std::size_t paeth_row_sse2(const std::uint8_t* cur, const std::uint8_t* up, std::size_t bpp,
                           std::size_t from, std::size_t n, std::uint8_t* out) {
  const __m128i zero = _mm_setzero_si128();
  std::size_t i = from;
  for (; i + 16 <= n; i += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cur + i));
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cur + i - bpp));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(up + i));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(up + i - bpp));
    const __m128i lo = paeth_predict_epi16(_mm_unpacklo_epi8(a, zero), _mm_unpacklo_epi8(b, zero),
                                           _mm_unpacklo_epi8(c, zero));
    const __m128i hi = paeth_predict_epi16(_mm_unpackhi_epi8(a, zero), _mm_unpackhi_epi8(b, zero),
                                           _mm_unpackhi_epi8(c, zero));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm_sub_epi8(x, _mm_packus_epi16(lo, hi)));
  }
  return i;
}
#endif

/// One row (n = width x bpp bytes) Paeth-filtered into out[0, n); up == nullptr for row 0.
void paeth_filter_row(const std::uint8_t* __restrict cur, const std::uint8_t* __restrict up,
                      std::size_t bpp, std::size_t n, std::uint8_t* __restrict out) {
  if (!up) {  // row 0: the row above is zero, Paeth is x - left
    for (std::size_t i = 0; i < bpp; ++i) out[i] = cur[i];
    for (std::size_t i = bpp; i < n; ++i) out[i] = std::uint8_t(cur[i] - cur[i - bpp]);
    return;
  }
  for (std::size_t i = 0; i < bpp; ++i) out[i] = std::uint8_t(cur[i] - up[i]);  // x - above
  std::size_t i = bpp;
#if defined(__SSE2__)
  i = paeth_row_sse2(cur, up, bpp, i, n, out);
#endif
  paeth_row_scalar(cur, up, bpp, i, n, out);
}

void put_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = std::uint8_t(v >> 24);
  p[1] = std::uint8_t(v >> 16);
  p[2] = std::uint8_t(v >> 8);
  p[3] = std::uint8_t(v);
}

/// Appends a chunk's length and type; the caller appends its data, then append_crc.
void append_chunk_head(std::vector<std::uint8_t>& out, std::uint32_t len, const char* type) {
  std::uint8_t head[8];
  put_be32(head, len);
  std::memcpy(head + 4, type, 4);
  out.insert(out.end(), head, head + 8);
}

/// Appends the CRC-32 of the last chunk (its type and `len` bytes of data).
void append_crc(std::vector<std::uint8_t>& out, std::size_t len) {
  std::uint8_t crc[4];
  put_be32(crc, std::uint32_t(libdeflate_crc32(0, out.data() + out.size() - len - 4, len + 4)));
  out.insert(out.end(), crc, crc + 4);
}

}  // namespace

namespace detail {

/// The PNG file of an 8-bit image of 1..4 channels (checked by encode_image) at zlib `level`
/// 0..9, with its ICC profile when it fits the channels (see above). Throws Error when memory or
/// libdeflate fails.
std::vector<std::uint8_t> write_png8(const Image& img, int level) {
  const std::size_t w = std::size_t(img.width), h = std::size_t(img.height);
  const std::size_t bpp = std::size_t(img.channels), stride = w * bpp, row = stride + 1;
  const std::size_t raw_size = row * h;
  auto fail = [&](const char* why) {
    return Error("cannot encode a " + std::to_string(w) + "x" + std::to_string(h) + "x" +
                 std::to_string(bpp) + " .png image: " + why);
  };
  const std::uint8_t* px = img.pixels.data();
  const auto fill = [&](std::size_t y0, std::size_t y1, std::uint8_t* dst) {
    for (std::size_t y = y0; y < y1; ++y, dst += row) {
      dst[0] = 4;  // Paeth
      paeth_filter_row(px + y * stride, y ? px + (y - 1) * stride : nullptr, bpp, stride, dst + 1);
    }
  };
  std::vector<std::uint8_t> zlib;
  if (level == png::kStripPngLevel) {
    zlib = png::zlib_strips(h, row, fill);  // ISA-L, strips on several threads
  } else {
    // Not value-initialized: every byte is written below.
    std::unique_ptr<std::uint8_t[]> filtered(new (std::nothrow) std::uint8_t[raw_size]);
    if (!filtered) throw fail("out of memory");
    fill(0, h, filtered.get());
    libdeflate_compressor* comp = png_compressor(level);
    if (!comp) throw fail("out of memory (libdeflate compressor)");
    zlib.resize(libdeflate_zlib_compress_bound(comp, raw_size));
    zlib.resize(libdeflate_zlib_compress(comp, filtered.get(), raw_size, zlib.data(), zlib.size()));
    if (zlib.empty()) throw fail("libdeflate could not compress it");
  }
  const std::size_t zlen = zlib.size();
  if (zlen > std::size_t(INT_MAX) - 64) throw fail("the compressed image is over 2 GiB");

  static const std::uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  static const std::uint8_t kColourType[5] = {0, 0, 4, 2, 6};  // by channels, as stb writes
  std::vector<std::uint8_t> out(kSig, kSig + 8);
  append_chunk_head(out, 13, "IHDR");
  std::uint8_t ihdr[13] = {0, 0, 0, 0, 0, 0, 0, 0, 8, kColourType[bpp], 0, 0, 0};
  put_be32(ihdr, std::uint32_t(w));
  put_be32(ihdr + 4, std::uint32_t(h));
  out.insert(out.end(), ihdr, ihdr + 13);
  append_crc(out, 13);
  // The ICC profile right after IHDR (while the file is still 33 bytes: nothing to move).
  if (jpeg::icc_fits(img.icc, img.channels)) png::insert_iccp(out, img.icc);
  out.reserve(out.size() + 12 + zlen + 12);
  append_chunk_head(out, std::uint32_t(zlen), "IDAT");
  out.insert(out.end(), zlib.begin(), zlib.end());
  append_crc(out, zlen);
  append_chunk_head(out, 0, "IEND");
  append_crc(out, 0);
  return out;
}

}  // namespace detail
}  // namespace histeq
