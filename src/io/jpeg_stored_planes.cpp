// jpeg_stored_planes.cpp — a JPEG's YCbCr planes as the file stores them, without the colour
// conversion and resampling of decode and encode: decode_planes (libjpeg's raw-data output),
// encode_planes (raw-data input; chroma averaged down where the output's subsampling is
// coarser, average_down) and planes_route (which files and outputs can go this way). Every
// function that calls setjmp (run_*) is C-style, as jpeg_codec.cpp explains.
#include "histeq/jpeg_codec.hpp"

#include <algorithm>
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
// jerror.h after jpeglib.h (its codes depend on jpeglib's configuration): a block of its own,
// so that clang-format's include sorting keeps the order.
#include <jerror.h>

#include "histeq/error.hpp"
#include "io/jpeg_internal.hpp"

namespace histeq::jpeg {
using internal::Compressor;
using internal::DecodeState;
using internal::Decompressor;
using internal::EncodeState;
using internal::quoted;
using internal::reason;
using internal::start_compress;

namespace {

/// Luma sampling factors of an output subsampling (chroma is always 1x1).
void luma_factors(Subsampling s, int* h, int* v) {
  *h = s == Subsampling::s444 ? 1 : 2;
  *v = s == Subsampling::s420 ? 2 : 1;
}

/// Luma factors of an input subsampling named by Info (0 when it is none of the three).
bool input_factors(const std::string& sub, int* h, int* v) {
  if (sub == "4:4:4") return *h = 1, *v = 1, true;
  if (sub == "4:2:2") return *h = 2, *v = 1, true;
  if (sub == "4:2:0") return *h = 2, *v = 2, true;
  return false;
}

/// An uninitialized plane of `width` x `height` samples in a buffer of `stride` x `rows` (whole
/// blocks, or whole MCUs, of this component: libjpeg's block loops stay inside it).
void allocate_plane(Plane* p, int width, int height, std::size_t stride, int rows, int h, int v) {
  p->width = width;
  p->height = height;
  p->h = h;
  p->v = v;
  p->stride = stride;
  p->rows = rows;
  p->data.reset(new std::uint8_t[stride * std::size_t(rows)]);
}

/// n rounded up to a multiple of m.
std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }

/// Phase 2 of decode_planes: every iMCU row of raw data into the planes (allocated by the
/// caller from the header's geometry).
int run_decode_raw(DecodeState* s, Plane* planes) {
  if (setjmp(s->err.jump)) return 1;
  j_decompress_ptr c = &s->cinfo;
  jpeg_start_decompress(c);
  internal::check_complete_at_eof(c);
  const int lines = c->max_v_samp_factor * DCTSIZE;
  JSAMPROW rows[3][4 * DCTSIZE];
  JSAMPARRAY arrays[3] = {rows[0], rows[1], rows[2]};
  while (c->output_scanline < c->output_height) {
    const int imcu = int(c->output_scanline / JDIMENSION(lines));
    for (int k = 0; k < 3; ++k) {
      const int n = planes[k].v * DCTSIZE;
      for (int j = 0; j < n; ++j) rows[k][j] = planes[k].row(imcu * n + j);
    }
    if (jpeg_read_raw_data(c, arrays, JDIMENSION(lines)) == 0) ERREXIT(c, JERR_INPUT_EMPTY);
  }
  jpeg_finish_decompress(c);
  return 0;
}

/// Compresses three planes (Y at hs x vs, chroma at 1x1) with libjpeg's raw-data interface.
int run_encode_raw(EncodeState* s, const Plane* const* pl, int w, int h, int quality, int hs,
                   int vs, const unsigned char* exif, unsigned exif_len, const unsigned char* icc,
                   unsigned icc_len) {
  if (setjmp(s->err.jump)) return 1;
  jpeg_create_compress(&s->cinfo);
  s->created = true;
  j_compress_ptr c = &s->cinfo;
  jpeg_mem_dest(c, &s->out, &s->out_size);
  start_compress(c, w, h, 3, JCS_YCbCr, true, quality, hs, vs, exif, exif_len, icc, icc_len);
  const int lines = vs * DCTSIZE;
  JSAMPROW rows[3][2 * DCTSIZE];
  JSAMPARRAY arrays[3] = {rows[0], rows[1], rows[2]};
  while (c->next_scanline < c->image_height) {
    const int imcu = int(c->next_scanline / JDIMENSION(lines));
    for (int k = 0; k < 3; ++k) {
      const int n = (k == 0 ? vs : 1) * DCTSIZE;
      for (int j = 0; j < n; ++j) {
        const int r = std::min(imcu * n + j, pl[k]->rows - 1);  // libjpeg reads no row past
        rows[k][j] = const_cast<JSAMPROW>(pl[k]->row(r));       // the last block row; it only reads
      }
    }
    jpeg_write_raw_data(c, arrays, JDIMENSION(lines));
  }
  jpeg_finish_compress(c);
  return 0;
}

/// One output row of average_down: o[x] for x in [x0, w) from source rows a and b (the same row
/// when fy is 1), each sample past `last_x` repeating it.
void downsample_row(const std::uint8_t* a, const std::uint8_t* b, std::uint8_t* o, int x0, int w,
                    int fx, int fy, int last_x) {
  for (int x = x0; x < w; ++x) {
    if (fx == 2) {
      const int x1 = std::min(2 * x + 1, last_x);
      o[x] = fy == 2 ? std::uint8_t((a[2 * x] + a[x1] + b[2 * x] + b[x1] + 1 + (x & 1)) >> 2)
                     : std::uint8_t((a[2 * x] + a[x1] + (x & 1)) >> 1);  // biases 1, 2 / 0, 1
    } else {
      o[x] = std::uint8_t((a[x] + b[x] + 1) >> 1);  // int_downsample: no alternating bias
    }
  }
}

}  // namespace

// 16 output samples per SSE2 step where no source sample past the row's end is needed (the same
// integers as downsample_row: the biases alternate with the output column, and a step starts at
// an even column).
void average_down(const Plane& src, int fx, int fy, Plane* dst) {
  if ((fx != 1 && fx != 2) || (fy != 1 && fy != 2) || src.width < 1 || src.height < 1 || !src.data)
    throw Error("average_down: factors " + std::to_string(fx) + "x" + std::to_string(fy) +
                " of a " + std::to_string(src.width) + "x" + std::to_string(src.height) + " plane");
  const int w = (src.width + fx - 1) / fx, h = (src.height + fy - 1) / fy;
  allocate_plane(dst, w, h, round_up(std::size_t(w), DCTSIZE),
                 int(round_up(std::size_t(h), DCTSIZE)), 1, 1);
  const int last_x = src.width - 1;
  // Output columns [0, full) read source columns < fx * full <= src.width only.
#if defined(__SSE2__)
  const int full = src.width / fx / 16 * 16;
  const __m128i lo8 = _mm_set1_epi16(0x00FF);
  const __m128i bias_h2v2 = _mm_set_epi16(2, 1, 2, 1, 2, 1, 2, 1);
  const __m128i bias_01 = _mm_set_epi16(1, 0, 1, 0, 1, 0, 1, 0);
  for (int y = 0; y < h; ++y) {
    const std::uint8_t* a = src.row(std::min(fy * y, src.height - 1));
    const std::uint8_t* b = src.row(std::min(fy * y + fy - 1, src.height - 1));
    std::uint8_t* o = dst->row(y);
    for (int x = 0; x < full; x += 16) {
      __m128i* out = reinterpret_cast<__m128i*>(o + x);
      if (fx == 1) {  // a column of two: (a + b + 1) >> 1 per byte
        _mm_storeu_si128(out,
                         _mm_avg_epu8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + x)),
                                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + x))));
        continue;
      }
      // output samples x..x+7 and x+8..x+15 as 16-bit lanes: sums of horizontal pairs
      const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2 * x));
      const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2 * x + 16));
      __m128i r0 = _mm_add_epi16(_mm_and_si128(a0, lo8), _mm_srli_epi16(a0, 8));
      __m128i r1 = _mm_add_epi16(_mm_and_si128(a1, lo8), _mm_srli_epi16(a1, 8));
      if (fy == 2) {
        const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * x));
        const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * x + 16));
        r0 = _mm_add_epi16(r0, _mm_add_epi16(_mm_and_si128(b0, lo8), _mm_srli_epi16(b0, 8)));
        r1 = _mm_add_epi16(r1, _mm_add_epi16(_mm_and_si128(b1, lo8), _mm_srli_epi16(b1, 8)));
        r0 = _mm_srli_epi16(_mm_add_epi16(r0, bias_h2v2), 2);
        r1 = _mm_srli_epi16(_mm_add_epi16(r1, bias_h2v2), 2);
      } else {
        r0 = _mm_srli_epi16(_mm_add_epi16(r0, bias_01), 1);
        r1 = _mm_srli_epi16(_mm_add_epi16(r1, bias_01), 1);
      }
      _mm_storeu_si128(out, _mm_packus_epi16(r0, r1));
    }
    downsample_row(a, b, o, full, w, fx, fy, last_x);
  }
#else
  for (int y = 0; y < h; ++y)
    downsample_row(src.row(std::min(fy * y, src.height - 1)),
                   src.row(std::min(fy * y + fy - 1, src.height - 1)), dst->row(y), 0, w, fx, fy,
                   last_x);
#endif
  internal::pad_plane(dst);
}

namespace {

/// An 8-bit YCbCr file of 4:4:4, 4:2:2 or 4:2:0 sampling (its luma factors into *h, *v).
bool stored_ycbcr(const Info& info, int* h, int* v) {
  return info.precision == 8 && info.components == 3 && !info.rgb_stored && !info.lossless &&
         input_factors(info.subsampling, h, v);
}

/// Whether the planes of a width x height image with luma factors h, v turn into display
/// orientation o sample for sample: where o flips the stored columns (2, 3, 7, 8) the last
/// chroma column covers whole luma columns (a width a multiple of h), where it flips the stored
/// rows (3, 4, 6, 7) the last chroma row whole luma rows (a height a multiple of v). Otherwise
/// the flip would move the chroma against the luma by a fraction of a chroma sample, and the
/// file takes the decoded-pixel route. A transpose alone (5) keeps every chroma sample on its
/// luma samples, a part-covered last one included.
bool orientable(int width, int height, int h, int v, int o) {
  return width > 0 && height > 0 && (!internal::flips_stored_columns(o) || width % h == 0) &&
         (!internal::flips_stored_rows(o) || height % v == 0);
}

/// The planes of *p turned into display orientation o (2..8): each plane's visible samples
/// moved by internal::orient_samples into a plane of the geometry decode_planes gives a file
/// of the turned shape (whole MCUs, the sampling factors swapped for 5..8), then padded; the
/// image's size swapped for 5..8, and the EXIF orientation set to 1.
void orient_planes(Planes* p, int o) {
  const bool swap = o >= 5;
  const int w = swap ? p->height : p->width, h = swap ? p->width : p->height;
  int max_h = 1, max_v = 1;
  for (const Plane& pl : p->plane) {
    max_h = std::max(max_h, swap ? pl.v : pl.h);
    max_v = std::max(max_v, swap ? pl.h : pl.v);
  }
  const std::size_t mcus_x =
      round_up(std::size_t(w), std::size_t(max_h) * DCTSIZE) / (std::size_t(max_h) * DCTSIZE);
  const std::size_t mcus_y =
      round_up(std::size_t(h), std::size_t(max_v) * DCTSIZE) / (std::size_t(max_v) * DCTSIZE);
  for (Plane& src : p->plane) {
    Plane dst;
    const int fh = swap ? src.v : src.h, fv = swap ? src.h : src.v;
    allocate_plane(&dst, swap ? src.height : src.width, swap ? src.width : src.height,
                   mcus_x * std::size_t(fh) * DCTSIZE, int(mcus_y * std::size_t(fv) * DCTSIZE), fh,
                   fv);
    internal::orient_samples(src.data.get(), src.stride, src.width, src.height, 1, o,
                             dst.data.get(), dst.stride);
    internal::pad_plane(&dst);
    src = std::move(dst);
  }
  p->width = w;
  p->height = h;
  set_exif_orientation(p->exif, 1);
}
}  // namespace

bool planes_route(const Info& info, const EncodeOptions& out, Orientation orientation) {
  int ih = 0, iv = 0, oh = 0, ov = 0;
  if (!stored_ycbcr(info, &ih, &iv)) return false;
  if (orientation == Orientation::apply && info.orientation >= 2 && info.orientation <= 8) {
    if (!orientable(info.width, info.height, ih, iv, info.orientation)) return false;
    if (info.orientation >= 5) std::swap(ih, iv);  // the planes turned: 4:2:2 becomes 4:4:0
  }
  luma_factors(out.subsampling, &oh, &ov);
  return oh % ih == 0 && ov % iv == 0;
}

namespace internal {

bool open_stored(const std::uint8_t* data, std::size_t size, const std::string& name,
                 const DecodeOptions& opt, Decompressor* d, Planes* shape,
                 int* walked_orientation) {
  Info pre;
  int ih = 0, iv = 0;
  if (!is_jpeg(data, size) || !parse_info(data, size, &pre) || !stored_ycbcr(pre, &ih, &iv))
    throw DecodeError(quoted(name) + ": not a colour JPEG with 4:4:4, 4:2:2 or 4:2:0 YCbCr planes");
  if (walked_orientation) *walked_orientation = pre.orientation;
  const std::uint64_t w0 = std::uint64_t(pre.width), h0 = std::uint64_t(pre.height);
  check_size(name, w0, h0, opt.max_pixels);
  d->header(data, size, name);
  DecodeState* s = d->s.get();
  j_decompress_ptr c = &s->cinfo;
  // libjpeg reads every marker up to the first scan: one after the frame header (an Adobe APP14
  // transform, a JFIF or EXIF segment) can make it RGB, or carry a rotation to apply. Such a
  // file is not for this route: the caller decodes it to pixels.
  if (c->jpeg_color_space != JCS_YCbCr || c->num_components != 3 ||
      c->image_width != JDIMENSION(w0) || c->image_height != JDIMENSION(h0) ||
      c->comp_info[1].h_samp_factor != 1 || c->comp_info[1].v_samp_factor != 1 ||
      c->comp_info[2].h_samp_factor != 1 || c->comp_info[2].v_samp_factor != 1)
    return false;
  shape->exif = saved_exif(c);
  if (opt.orientation == Orientation::apply && exif_orientation(shape->exif) >= 2) return false;
  check_structure(data, size, name);
  shape->width = int(w0);
  shape->height = int(h0);
  // Whole MCUs of the image in every plane: libjpeg writes whole blocks of each component.
  const std::size_t mcu_w = std::size_t(c->max_h_samp_factor) * DCTSIZE;
  const std::size_t mcu_h = std::size_t(c->max_v_samp_factor) * DCTSIZE;
  const std::size_t mcus_x = round_up(w0, mcu_w) / mcu_w, mcus_y = round_up(h0, mcu_h) / mcu_h;
  for (int k = 0; k < 3; ++k) {
    const jpeg_component_info& ci = c->comp_info[k];
    Plane& p = shape->plane[k];
    p.width = int(ci.downsampled_width);
    p.height = int(ci.downsampled_height);
    p.stride = mcus_x * std::size_t(ci.h_samp_factor) * DCTSIZE;
    p.rows = int(mcus_y * std::size_t(ci.v_samp_factor) * DCTSIZE);
    p.h = ci.h_samp_factor;
    p.v = ci.v_samp_factor;
  }
  if (s->icc && s->icc_len > 0) shape->icc.assign(s->icc, s->icc + s->icc_len);
  return true;
}

void pad_plane(Plane* p) {
  for (int y = 0; y < p->height; ++y) {
    std::uint8_t* r = p->row(y);
    std::memset(r + p->width, r[p->width - 1], p->stride - std::size_t(p->width));
  }
  for (int y = p->height; y < p->rows; ++y)
    std::memcpy(p->row(y), p->row(p->height - 1), p->stride);
}

}  // namespace internal

Planes decode_planes(const std::uint8_t* data, std::size_t size, const std::string& name,
                     const DecodeOptions& opt) {
  Decompressor d;
  Planes p;
  DecodeOptions stored = opt;  // as stored; a rotation to apply is applied to the planes below
  stored.orientation = Orientation::keep;
  int walked = 1;
  if (!internal::open_stored(data, size, name, stored, &d, &p, &walked)) return Planes{};
  const int tag = opt.orientation == Orientation::apply ? exif_orientation(p.exif) : 1;
  const int o = tag == 0 ? 1 : tag;  // 0: no tag, or none of 1..8
  // Turned only as planes_route was told: an orientation the header walk did not see (an EXIF
  // segment after the frame header) may turn 4:2:2 planes into a shape the planned output
  // cannot take, so such a file takes the decoded-pixel route, as does a size not orientable.
  if (opt.orientation == Orientation::apply && o != walked) return Planes{};
  if (o >= 2 && !orientable(p.width, p.height, p.plane[0].h, p.plane[0].v, o)) return Planes{};
  DecodeState* s = d.s.get();
  s->cinfo.raw_data_out = TRUE;
  s->cinfo.out_color_space = JCS_YCbCr;
  for (Plane& pl : p.plane)
    allocate_plane(&pl, pl.width, pl.height, pl.stride, pl.rows, pl.h, pl.v);
  if (run_decode_raw(s, p.plane) != 0)
    throw DecodeError(quoted(name) + " is not a decodable image: " + reason(s->err, &s->cinfo));
  for (Plane& pl : p.plane) internal::pad_plane(&pl);
  if (o >= 2) orient_planes(&p, o);
  return p;
}

std::vector<std::uint8_t> encode_planes(const Planes& p, const EncodeOptions& opt) {
  if (opt.quality < 1 || opt.quality > 100)
    throw UsageError("JPEG quality " + std::to_string(opt.quality) +
                     " out of range (valid: 1..100)");
  if (p.width <= 0 || p.height <= 0 || p.width > JPEG_MAX_DIMENSION ||
      p.height > JPEG_MAX_DIMENSION || !p.plane[0].data || !p.plane[1].data || !p.plane[2].data)
    throw Error("cannot encode " + std::to_string(p.width) + "x" + std::to_string(p.height) +
                " planes as JPEG (need three planes and 1.." + std::to_string(JPEG_MAX_DIMENSION) +
                " pixels a side)");
  int oh = 0, ov = 0;
  luma_factors(opt.subsampling, &oh, &ov);
  const Plane& y = p.plane[0];
  Plane chroma[2];
  const Plane* pl[3] = {&y, &p.plane[1], &p.plane[2]};
  for (int k = 1; k < 3; ++k) {
    const Plane& c = p.plane[k];
    // the luma : chroma ratio of the input, and what the output's ratio asks of the chroma
    const int rh = c.h > 0 && y.h % c.h == 0 ? y.h / c.h : 0;
    const int rv = c.v > 0 && y.v % c.v == 0 ? y.v / c.v : 0;
    if (rh == 0 || rv == 0 || oh % rh != 0 || ov % rv != 0 || oh / rh > 2 || ov / rv > 2)
      throw Error("cannot encode planes sampled " + std::to_string(y.h) + "x" +
                  std::to_string(y.v) + " to JPEG " + to_string(opt.subsampling) +
                  ": the chroma would need upsampling");
    const int fx = oh / rh, fy = ov / rv;
    if (fx == 1 && fy == 1) continue;
    average_down(c, fx, fy, &chroma[k - 1]);
    pl[k] = &chroma[k - 1];
  }
  const std::vector<std::uint8_t>* exif = p.exif.size() <= 65533 ? &p.exif : nullptr;
  const bool icc_ok = !p.icc.empty() && icc_fits(p.icc, 3);
  Compressor e;
  EncodeState* s = e.s.get();
  if (run_encode_raw(s, pl, p.width, p.height, opt.quality, oh, ov, exif ? exif->data() : nullptr,
                     exif ? unsigned(exif->size()) : 0u, icc_ok ? p.icc.data() : nullptr,
                     icc_ok ? unsigned(p.icc.size()) : 0u) != 0)
    throw Error("libjpeg failed to encode " + std::to_string(p.width) + "x" +
                std::to_string(p.height) + " planes: " + s->err.message);
  return e.bytes();
}

}  // namespace histeq::jpeg
