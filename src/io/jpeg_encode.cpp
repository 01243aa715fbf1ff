// jpeg_encode.cpp — JPEG encoding with libjpeg-turbo's libjpeg API: encode (an 8-bit image of
// 1..4 channels: gray as one component, alpha dropped), the compressor's parameters that the
// raw-data encoder of jpeg_stored_planes.cpp shares (start_compress), and the names of the
// chroma subsamplings. Every function that calls setjmp (run_encode) is C-style, as
// jpeg_codec.cpp explains; the error manager is jpeg_codec.cpp's.
#include "histeq/jpeg_codec.hpp"

#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include "histeq/error.hpp"
#include "io/jpeg_internal.hpp"

namespace histeq::jpeg {
using internal::Compressor;
using internal::EncodeState;
using internal::start_compress;

const char* to_string(Subsampling s) {
  switch (s) {
    case Subsampling::s444: return "444";
    case Subsampling::s422: return "422";
    case Subsampling::s420: return "420";
  }
  return "?";
}

Subsampling parse_subsampling(std::string_view s) {
  if (s == "444" || s == "4:4:4") return Subsampling::s444;
  if (s == "422" || s == "4:2:2") return Subsampling::s422;
  if (s == "420" || s == "4:2:0") return Subsampling::s420;
  throw UsageError("unknown chroma subsampling '" + std::string(s) + "' (valid: 444, 422, 420)");
}

// ---- encode ----
namespace internal {

/// The compressor's parameters, jpeg_start_compress and the metadata markers, for run_encode
/// and run_encode_raw: 1 component (gray) or 3 (`in` RGB, or YCbCr planes when `raw`) with Y at
/// h_samp x v_samp and chroma at 1x1; quality by jpeg_set_quality; ISLOW DCT; EXIF files carry
/// APP1 instead of the JFIF APP0. C-style (called between setjmp and a possible longjmp).
void start_compress(j_compress_ptr c, int w, int h, int components, J_COLOR_SPACE in, bool raw,
                    int quality, int h_samp, int v_samp, const unsigned char* exif,
                    unsigned exif_len, const unsigned char* icc, unsigned icc_len) {
  c->image_width = JDIMENSION(w);
  c->image_height = JDIMENSION(h);
  c->input_components = components;
  c->in_color_space = in;
  jpeg_set_defaults(c);
  jpeg_set_quality(c, quality, TRUE);
  c->dct_method = JDCT_ISLOW;
  c->raw_data_in = raw ? TRUE : FALSE;
  if (components == 3) {
    c->comp_info[0].h_samp_factor = h_samp;
    c->comp_info[0].v_samp_factor = v_samp;
    for (int i = 1; i < 3; ++i) c->comp_info[i].h_samp_factor = c->comp_info[i].v_samp_factor = 1;
  }
  if (exif_len > 0) c->write_JFIF_header = FALSE;
  jpeg_start_compress(c, TRUE);
  if (exif_len > 0) jpeg_write_marker(c, JPEG_APP0 + 1, exif, exif_len);
  if (icc_len > 0) jpeg_write_icc_profile(c, icc, icc_len);
}

}  // namespace internal

namespace {

/// Compresses `rows` rows; `px` points at the image (width * channels bytes per row). For 2 and
/// 4 channels each row is packed into a libjpeg-pool row without its alpha first.
int run_encode(EncodeState* s, const unsigned char* px, int w, int h, int channels, int quality,
               int h_samp, int v_samp, const unsigned char* exif, unsigned exif_len,
               const unsigned char* icc, unsigned icc_len) {
  if (setjmp(s->err.jump)) return 1;
  jpeg_create_compress(&s->cinfo);
  s->created = true;
  j_compress_ptr c = &s->cinfo;
  jpeg_mem_dest(c, &s->out, &s->out_size);
  const bool gray = channels <= 2;
  start_compress(c, w, h, gray ? 1 : 3, gray ? JCS_GRAYSCALE : JCS_RGB, false, quality, h_samp,
                 v_samp, exif, exif_len, icc, icc_len);
  const int in_c = c->input_components;
  JSAMPARRAY row = channels != in_c ? (*c->mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(c),
                                                              JPOOL_IMAGE, JDIMENSION(w * in_c), 1)
                                    : nullptr;
  while (c->next_scanline < c->image_height) {
    const unsigned char* src =
        px + std::size_t(c->next_scanline) * std::size_t(w) * unsigned(channels);
    JSAMPROW rp;
    if (row) {
      for (int x = 0; x < w; ++x)
        for (int k = 0; k < in_c; ++k) row[0][x * in_c + k] = src[x * channels + k];
      rp = row[0];
    } else {
      rp = const_cast<JSAMPROW>(src);  // libjpeg only reads input rows
    }
    jpeg_write_scanlines(c, &rp, 1);
  }
  jpeg_finish_compress(c);
  return 0;
}

}  // namespace

std::vector<std::uint8_t> encode(const Image& img, const EncodeOptions& opt) {
  if (opt.quality < 1 || opt.quality > 100)
    throw UsageError("JPEG quality " + std::to_string(opt.quality) +
                     " out of range (valid: 1..100)");
  if (img.width <= 0 || img.height <= 0 || img.channels < 1 || img.channels > 4)
    throw Error("cannot encode an image of " + std::to_string(img.width) + "x" +
                std::to_string(img.height) + "x" + std::to_string(img.channels) +
                " as JPEG (need width, height > 0 and 1..4 channels)");
  if (img.width > JPEG_MAX_DIMENSION || img.height > JPEG_MAX_DIMENSION)
    throw Error("cannot encode a " + std::to_string(img.width) + "x" + std::to_string(img.height) +
                " image as JPEG: at most " + std::to_string(JPEG_MAX_DIMENSION) + " pixels a side");
  if (img.pixels.size() != img.byte_count())
    throw Error("cannot encode: the image holds " + std::to_string(img.pixels.size()) +
                " bytes, its shape needs " + std::to_string(img.byte_count()));
  int hs = 2, vs = 2;
  if (opt.subsampling == Subsampling::s444)
    hs = vs = 1;
  else if (opt.subsampling == Subsampling::s422)
    vs = 1;
  const std::vector<std::uint8_t>* exif = img.exif.size() <= 65533 ? &img.exif : nullptr;
  const bool icc_ok = !img.icc.empty() && icc_fits(img.icc, img.channels);
  Compressor e;
  EncodeState* s = e.s.get();
  if (run_encode(s, img.pixels.data(), img.width, img.height, img.channels, opt.quality, hs, vs,
                 exif ? exif->data() : nullptr, exif ? unsigned(exif->size()) : 0u,
                 icc_ok ? img.icc.data() : nullptr, icc_ok ? unsigned(img.icc.size()) : 0u) != 0)
    throw Error("libjpeg failed to encode a " + std::to_string(img.width) + "x" +
                std::to_string(img.height) + " image: " + s->err.message);
  return e.bytes();
}

}  // namespace histeq::jpeg
