// jpeg_coefficients.cpp — a colour JPEG's quantized DCT coefficients (decode_coefficients:
// libjpeg's jpeg_read_coefficients, the entropy decoding alone) and the planes the inverse DCT
// makes of them on the CPU (planes_from_coefficients, idct_formula.hpp), byte for byte
// decode_planes' planes. Every function that calls setjmp (run_*) is C-style, as
// jpeg_codec.cpp explains.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/idct_formula.hpp"
#include "histeq/jpeg_codec.hpp"
#include "io/jpeg_internal.hpp"

namespace histeq::jpeg {
using internal::DecodeState;
using internal::Decompressor;
using internal::quoted;
using internal::reason;

namespace {

/// The largest |coefficient| at each position of a block that a file an encoder wrote holds:
/// dequantized within ±2048 (an 8-bit block's DCT coefficients are within ±1024, and a quantized
/// one is at most twice its value), so that dequantizing fits libjpeg-turbo's SIMD transforms'
/// 16-bit lanes. Beyond it (damaged or crafted data) decode_planes takes the file.
struct EncoderRange {
  std::uint16_t limit[DCTSIZE2];   ///< at most 32767
  std::uint16_t span[DCTSIZE2];    ///< 2 * limit
  std::int16_t quant16[DCTSIZE2];  ///< the table for the blocks' sums (a value over 32767,
                                   ///< whose limit is 0, wraps: only zeros meet it in range)
};

void encoder_range(const std::uint16_t* quant, EncoderRange* r) {
  constexpr int kMaxDequantized = 2048;
  for (int k = 0; k < DCTSIZE2; ++k) {
    r->limit[k] = std::uint16_t(quant[k] == 0 ? 32767 : kMaxDequantized / int(quant[k]));
    r->span[k] = std::uint16_t(2 * r->limit[k]);
    r->quant16[k] = std::int16_t(quant[k]);
  }
}

/// A block whose dequantized coefficients' absolute values sum to at most this transforms the
/// same in idct_formula, libjpeg-turbo's C transform and its SIMD ones: no sample lies more than
/// 511 from the level shift (the most a coefficient moves a sample is a quarter of it), so the
/// C transform's range-limit table does not wrap, and no value between the two passes exceeds
/// about 11,400 (at most 5.6 times a column's sum), so the SIMD transforms' 16-bit lanes (sums
/// of two such values included) do not saturate. Blocks above it are checked one by one
/// (block_agrees).
constexpr std::int32_t kSafeBlockSum = 2040;

/// The exact check of a block above kSafeBlockSum: its values between the passes within ±16383
/// (any two of them sum within a 16-bit lane) and its samples before clamping within 511 of the
/// level shift. False: the transforms may disagree, and decode_planes takes the file.
bool block_agrees(const std::int16_t* coef, const std::uint16_t* quant) {
  namespace f = idct_formula;
  std::int32_t ws[DCTSIZE2];
  for (int col = 0; col < DCTSIZE; ++col) f::idct_column(coef, quant, col, ws);
  for (std::int32_t w : ws)
    if (w > 16383 || w < -16383) return false;
  for (int row = 0; row < DCTSIZE; ++row) {
    const std::int32_t* w = ws + DCTSIZE * row;
    std::int64_t r[DCTSIZE];
    f::idct_1d(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], r);
    for (std::int64_t v : r) {
      const std::int64_t sample = f::descale(v, f::kConstBits + f::kPass1Bits + 3);
      if (sample > 511 || sample < -512) return false;
    }
  }
  return true;
}

/// Copies the `blocks` blocks at src to dst and returns nonzero when a coefficient is beyond r,
/// or a block's dequantized sum exceeds kSafeBlockSum and block_agrees says no: one pass over
/// the row as libjpeg holds it (the check reads what it copies; a copy and then a check of the
/// copy cost a third more on the progressive photographs, build machine). |c| <= L is
/// (c + L) mod 2^16 <= 2 L in 16 bits (L <= 32767: a c below -L wraps above 2 L): one compare a
/// coefficient in 16-bit lanes, no branch.
std::uint32_t copy_checked(const std::int16_t* src, std::int16_t* dst, std::size_t blocks,
                           const EncoderRange& r, const std::uint16_t* quant) {
  std::uint32_t beyond = 0;
  for (std::size_t b = 0; b < blocks; ++b, src += DCTSIZE2, dst += DCTSIZE2) {
    // The sum in products of 16-bit values (one multiply-add instruction a pair); exact while
    // every coefficient is within range (each product at most 2048, the sum below 2^17). Beyond
    // range (out set, the sum not read) a product reaches 2^30 and 64 of them pass 2^31: the
    // sum is unsigned, so that it wraps instead of overflowing.
    std::uint16_t out = 0;
    std::uint32_t sum = 0;
    for (int k = 0; k < DCTSIZE2; ++k) {
      const std::int16_t v = src[k];
      dst[k] = v;
      out |= std::uint16_t(std::uint16_t(std::uint16_t(v) + r.limit[k]) > r.span[k]);
      const std::int16_t a = std::int16_t(v < 0 ? -v : v);
      sum += std::uint32_t(std::int32_t(a) * std::int32_t(r.quant16[k]));
    }
    beyond |= out;
    if (sum > std::uint32_t(kSafeBlockSum) && beyond == 0 && !block_agrees(dst, quant)) beyond = 1;
  }
  return beyond;
}

/// Phase 2 of decode_coefficients: every scan read, then each component's blocks and table
/// copied into *out (whose planes' geometry open_stored set). *taken false: a component no scan
/// latched a table for, or a coefficient beyond EncoderRange. histeq's decoders do no block
/// smoothing (jpeg_codec.cpp), so a progressive file's coefficients as read, whatever its scans
/// refined, are what they transform.
int run_read_coefficients(DecodeState* s, Coefficients* out, bool* taken) {
  if (setjmp(s->err.jump)) return 1;
  j_decompress_ptr c = &s->cinfo;
  jvirt_barray_ptr* arrays = jpeg_read_coefficients(c);
  internal::check_complete_at_eof(c);
  *taken = arrays != nullptr;
  for (int k = 0; k < 3 && *taken; ++k) {
    const jpeg_component_info& ci = c->comp_info[k];
    if (ci.quant_table == nullptr) {  // no scan latched a table: nothing to transform
      *taken = false;
      break;
    }
    CoefficientPlane& p = out->comp[k];
    for (int i = 0; i < DCTSIZE2; ++i) p.quant[i] = ci.quant_table->quantval[i];
    EncoderRange range;
    encoder_range(p.quant, &range);
    p.blocks_w = int(ci.width_in_blocks);
    p.blocks_h = int(ci.height_in_blocks);
    const std::size_t row_coefs = std::size_t(p.blocks_w) * DCTSIZE2;
    p.coef.resize(row_coefs * std::size_t(p.blocks_h));
    std::uint32_t beyond = 0;
    for (int by = 0; by < p.blocks_h; ++by) {
      JBLOCKARRAY rows = (*c->mem->access_virt_barray)(reinterpret_cast<j_common_ptr>(c), arrays[k],
                                                       JDIMENSION(by), 1, FALSE);
      std::int16_t* dst = p.coef.data() + std::size_t(by) * row_coefs;
      beyond |= copy_checked(rows[0][0], dst, std::size_t(p.blocks_w), range, p.quant);
    }
    if (beyond != 0) *taken = false;
  }
  if (*taken) jpeg_finish_decompress(c);
  return 0;
}

}  // namespace

Coefficients decode_coefficients(const std::uint8_t* data, std::size_t size,
                                 const std::string& name, const DecodeOptions& opt) {
  static_assert(sizeof(JCOEF) == sizeof(std::int16_t), "libjpeg's coefficients are 16-bit");
  Decompressor d;
  Planes shape;
  if (!internal::open_stored(data, size, name, opt, &d, &shape)) return Coefficients{};
  Coefficients out;
  out.width = shape.width;
  out.height = shape.height;
  out.exif = std::move(shape.exif);
  out.icc = std::move(shape.icc);
  for (int k = 0; k < 3; ++k) out.comp[k].plane = std::move(shape.plane[k]);
  bool taken = false;
  DecodeState* s = d.s.get();
  if (run_read_coefficients(s, &out, &taken) != 0)
    throw DecodeError(quoted(name) + " is not a decodable image: " + reason(s->err, &s->cinfo));
  if (!taken) return Coefficients{};
  return out;
}

Planes planes_from_coefficients(const Coefficients& c) {
  if (c.width <= 0 || c.height <= 0)
    throw Error("planes_from_coefficients: no coefficients (a file decode_coefficients declined)");
  Planes p;
  p.width = c.width;
  p.height = c.height;
  p.exif = c.exif;
  p.icc = c.icc;
  for (int k = 0; k < 3; ++k) {
    const CoefficientPlane& cp = c.comp[k];
    Plane& pl = p.plane[k];
    pl.width = cp.plane.width;
    pl.height = cp.plane.height;
    pl.stride = cp.plane.stride;
    pl.rows = cp.plane.rows;
    pl.h = cp.plane.h;
    pl.v = cp.plane.v;
    if (std::size_t(cp.blocks_w) * DCTSIZE > pl.stride || cp.blocks_h * DCTSIZE > pl.rows ||
        cp.blocks_w * DCTSIZE < pl.width || cp.blocks_h * DCTSIZE < pl.height ||
        cp.coef.size() != std::size_t(cp.blocks_w) * std::size_t(cp.blocks_h) * DCTSIZE2)
      throw Error("planes_from_coefficients: blocks that do not fit the plane");
    pl.data.reset(new std::uint8_t[pl.stride * std::size_t(pl.rows)]);
    for (int by = 0; by < cp.blocks_h; ++by)
      for (int bx = 0; bx < cp.blocks_w; ++bx)
        idct_formula::idct_islow_block(
            cp.coef.data() +
                (std::size_t(by) * std::size_t(cp.blocks_w) + std::size_t(bx)) * DCTSIZE2,
            cp.quant, pl.row(by * DCTSIZE) + std::size_t(bx) * DCTSIZE, pl.stride);
    internal::pad_plane(&pl);
  }
  return p;
}

}  // namespace histeq::jpeg
