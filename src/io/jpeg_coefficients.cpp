// jpeg_coefficients.cpp — a colour JPEG's quantized DCT coefficients (decode_coefficients:
// libjpeg's jpeg_read_coefficients, the entropy decoding alone) and the planes the inverse DCT
// makes of them on the CPU (planes_from_coefficients, idct_formula.hpp), byte for byte
// decode_planes' planes. Every function that calls setjmp (run_*) is C-style, as
// jpeg_codec.cpp explains.
#include <cstddef>
#include <cstdint>
#include <cstring>
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
/// one is at most twice its value), where the transform here, libjpeg-turbo's C one and its SIMD
/// ones (16-bit lanes) all give the same samples. Beyond it (damaged or crafted data) they
/// differ, each its own way, and decode_planes takes the file.
struct EncoderRange {
  std::int32_t limit[DCTSIZE2];
  std::uint32_t span[DCTSIZE2];  ///< 2 * limit
};

void encoder_range(const std::uint16_t* quant, EncoderRange* r) {
  constexpr std::int32_t kMaxDequantized = 2048;
  for (int k = 0; k < DCTSIZE2; ++k) {
    r->limit[k] = quant[k] == 0 ? 32767 : kMaxDequantized / std::int32_t(quant[k]);
    r->span[k] = 2 * std::uint32_t(r->limit[k]);
  }
}

/// Nonzero when a coefficient of the `blocks` blocks at c is beyond r: |c| <= L is
/// unsigned(c + L) <= 2 L, one compare a coefficient and no branch (the loop vectorizes), on a
/// row just copied (still in cache).
std::uint32_t beyond_range(const std::int16_t* c, std::size_t blocks, const EncoderRange& r) {
  std::uint32_t beyond = 0;
  for (std::size_t b = 0; b < blocks; ++b, c += DCTSIZE2)
    for (int k = 0; k < DCTSIZE2; ++k)
      beyond |= std::uint32_t(std::uint32_t(std::int32_t(c[k]) + r.limit[k]) > r.span[k]);
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
      std::memcpy(dst, rows[0][0], row_coefs * sizeof(JCOEF));
      beyond |= beyond_range(dst, std::size_t(p.blocks_w), range);
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
    throw Error(quoted(name) + " is not a decodable image: " + reason(s->err, &s->cinfo));
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
