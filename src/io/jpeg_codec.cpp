// jpeg_codec.cpp — JPEG decoding with libjpeg-turbo's libjpeg API: the error manager every
// libjpeg call of histeq shares, the header read, decode (to pixels; EXIF orientation applied
// on request), read_header and read_info (histeq's own marker walk). Encoding is in
// jpeg_encode.cpp, the YCbCr planes as stored in jpeg_stored_planes.cpp, EXIF and ICC profiles
// in metadata.cpp; what they share in jpeg_internal.hpp.
//
// libjpeg reports a fatal error through error_exit, which must not return. Here it longjmps back
// to the setjmp of the libjpeg call that failed. Every function that calls setjmp (run_*) is
// C-style: it holds only trivially destructible locals, and the frames between it and the
// longjmp are libjpeg's (C) and our C-style callbacks, so no C++ destructor is ever skipped
// ([csetjmp.syn]/4). The C++ callers own the libjpeg objects through a guard that calls
// jpeg_destroy_* on every path.
#include "histeq/jpeg_codec.hpp"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
// jerror.h after jpeglib.h (its codes depend on jpeglib's configuration): a block of its own,
// so that clang-format's include sorting keeps the order.
#include <jerror.h>

#include "histeq/error.hpp"
#include "io/decode_checks.hpp"
#include "io/jpeg_internal.hpp"

namespace histeq::jpeg {
using internal::check_complete_at_eof;
using internal::check_size;
using internal::check_structure;
using internal::DecodeState;
using internal::Decompressor;
using internal::ErrorState;
using internal::parse_info;
using internal::quoted;
using internal::reason;
using internal::saved_exif;

namespace {

// Most scans a decode may read: a progressive file has about 10; a crafted one with thousands
// of tiny scans makes libjpeg spend quadratic time (libjpeg-turbo's TJPARAM_SCANLIMIT, 3.0, has
// the same default of 500).
constexpr int kMaxScans = 500;

extern "C" void histeq_jpeg_error_exit(j_common_ptr cinfo) {
  auto* st = reinterpret_cast<ErrorState*>(cinfo->err);
  st->fatal_code = st->mgr.msg_code;
  (*cinfo->err->format_message)(cinfo, st->message);
  std::longjmp(st->jump, 1);
}

/// Warnings (msg_level -1) about the data are fatal: a premature end or corrupt entropy-coded
/// data would otherwise be filled in by libjpeg (gray or repeated blocks), and every output pixel
/// must come from the file. Warnings about metadata only (an unknown Adobe transform code, a bad
/// ICC marker, an unknown JFIF revision) are ignored. Trace messages (level >= 0) are dropped.
/// One exception: the end of the data without its end marker (EOI), as some cameras and cut
/// downloads leave a complete image (OpenCV and libjpeg's djpeg decode it). libjpeg then reads
/// a made-up EOI; a block that needed data past the end warns JWRN_HIT_MARKER, fatal as ever.
/// So the end passes inside a scan that holds every component of a sequential file (all of its
/// blocks then came from the file, or the next warning stops it) and of a progressive file,
/// whose scans must have refined every coefficient (check_complete_at_eof); before any scan, or
/// in one component's scan of a sequential file that codes them apart, it is fatal. So it is in
/// an arithmetic-coded file: libjpeg's arithmetic decoder takes a marker in its data as the
/// scan's end and decodes zeros from there without a warning, so nothing after the end would
/// stop it.
extern "C" void histeq_jpeg_emit_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;
  auto* st = reinterpret_cast<ErrorState*>(cinfo->err);
  const int code = st->mgr.msg_code;
  if (code == JWRN_ADOBE_XFORM || code == JWRN_BOGUS_ICC || code == JWRN_JFIF_MAJOR) return;
  if (code == JWRN_JPEG_EOF && cinfo->is_decompressor && !st->eof_seen) {
    const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
    if (!d->arith_code && d->comps_in_scan > 0 &&
        (d->progressive_mode || d->comps_in_scan == d->num_components)) {
      st->eof_seen = 1;
      return;
    }
  }
  histeq_jpeg_error_exit(cinfo);
}

extern "C" void histeq_jpeg_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) {
    auto* st = reinterpret_cast<ErrorState*>(cinfo->err);
    st->scan_limit_hit = 1;
    st->fatal_code = -1;
    std::snprintf(st->message, sizeof st->message, "more than %d scans", kMaxScans);
    std::longjmp(st->jump, 1);
  }
}

}  // namespace

namespace internal {

void check_size(const std::string& name, std::uint64_t w, std::uint64_t h,
                std::uint64_t max_pixels) {
  if (w == 0 || h == 0)
    throw DecodeError(quoted(name) + " has zero width or height: " + std::to_string(w) + "x" +
                      std::to_string(h));
  if (w * h > max_pixels)
    throw DecodeError(quoted(name) + " is " + std::to_string(w) + "x" + std::to_string(h) + " = " +
                      std::to_string(w * h) + " pixels, over the limit of " +
                      std::to_string(max_pixels) + " pixels");
}

void init_error(ErrorState* st) {
  std::memset(st, 0, sizeof *st);
  jpeg_std_error(&st->mgr);
  st->mgr.error_exit = histeq_jpeg_error_exit;
  st->mgr.emit_message = histeq_jpeg_emit_message;
}

// ---- decode, in C-style phases ----

int run_read_header(DecodeState* s, const unsigned char* data, unsigned long size) {
  if (setjmp(s->err.jump)) return 1;
  jpeg_create_decompress(&s->cinfo);
  s->created = true;
  s->progress.progress_monitor = histeq_jpeg_progress;
  s->cinfo.progress = &s->progress;
  jpeg_mem_src(&s->cinfo, data, size);
  jpeg_save_markers(&s->cinfo, JPEG_APP0 + 1, 0xFFFF);  // EXIF
  jpeg_save_markers(&s->cinfo, JPEG_APP0 + 2, 0xFFFF);  // ICC_PROFILE chunks
  jpeg_read_header(&s->cinfo, TRUE);
  if (!jpeg_read_icc_profile(&s->cinfo, &s->icc, &s->icc_len)) {
    s->icc = nullptr;
    s->icc_len = 0;
  }
  // libjpeg's defaults, stated: ISLOW IDCT, fancy upsampling, no block smoothing.
  s->cinfo.dct_method = JDCT_ISLOW;
  s->cinfo.do_fancy_upsampling = TRUE;
  s->cinfo.do_block_smoothing = FALSE;
  switch (s->cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE: s->cinfo.out_color_space = JCS_GRAYSCALE; break;
    case JCS_CMYK:
    case JCS_YCCK: s->cinfo.out_color_space = JCS_CMYK; break;
    default: s->cinfo.out_color_space = JCS_RGB; break;
  }
  return 0;
}

void check_complete_at_eof(j_decompress_ptr c) {
  auto* st = reinterpret_cast<ErrorState*>(c->err);
  if (!st->eof_seen || !c->progressive_mode) return;
  bool complete = c->coef_bits != nullptr;
  for (int ci = 0; complete && ci < c->num_components; ++ci)
    for (int k = 0; k < DCTSIZE2; ++k) complete = complete && c->coef_bits[ci][k] == 0;
  if (complete) return;
  c->err->msg_code = JWRN_JPEG_EOF;
  histeq_jpeg_error_exit(reinterpret_cast<j_common_ptr>(c));
}

std::string reason(const ErrorState& e, const jpeg_decompress_struct* c) {
  if (e.eof_seen && !e.scan_limit_hit)  // what stopped it came after the data had ended
    return "truncated JPEG: the file ends before the image data does (" + std::string(e.message) +
           ")";
  if (e.scan_limit_hit)
    return "corrupt or hostile JPEG: " + std::string(e.message) +
           " (a real progressive file has about 10)";
  switch (e.fatal_code) {
    case JERR_BAD_PRECISION:
      return std::to_string(c ? c->data_precision : 0) + "-bit JPEG (data precision " +
             std::to_string(c ? c->data_precision : 0) +
             ") is not supported: histeq reads 8-bit JPEGs";
    case JERR_SOF_UNSUPPORTED:
      return "unsupported JPEG process (" + std::string(e.message) +
             "; lossless and hierarchical JPEGs are not supported)";
    case JERR_NO_SOI: return "not a JPEG file (no start-of-image marker)";
    case JWRN_JPEG_EOF:
      return "truncated JPEG: the file ends before the image data does (" + std::string(e.message) +
             ")";
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_NOT_SEQUENTIAL: return "corrupt JPEG data (" + std::string(e.message) + ")";
    default: return "corrupt or unsupported JPEG (libjpeg: " + std::string(e.message) + ")";
  }
}

std::vector<std::uint8_t> saved_exif(j_decompress_ptr c) {
  for (jpeg_saved_marker_ptr m = c->marker_list; m; m = m->next)
    if (m->marker == JPEG_APP0 + 1 && m->data_length >= kExifPrefix &&
        std::memcmp(m->data, "Exif\0\0", kExifPrefix) == 0)
      return std::vector<std::uint8_t>(m->data, m->data + m->data_length);
  return {};
}

}  // namespace internal

namespace {

/// Phase 2: decode every scanline into `out` (width * height * out_channels bytes, zeroed by
/// the caller). CMYK rows go through a libjpeg-pool row buffer and are converted to RGB.
int run_decode(DecodeState* s, unsigned char* out, int out_channels) {
  if (setjmp(s->err.jump)) return 1;
  j_decompress_ptr c = &s->cinfo;
  jpeg_start_decompress(c);
  check_complete_at_eof(c);
  const JDIMENSION w = c->output_width;
  const bool cmyk = c->out_color_space == JCS_CMYK;
  const bool inverted = c->saw_Adobe_marker;
  JSAMPARRAY row =
      cmyk ? (*c->mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(c), JPOOL_IMAGE, w * 4, 1)
           : nullptr;
  while (c->output_scanline < c->output_height) {
    unsigned char* dst = out + std::size_t(c->output_scanline) * w * unsigned(out_channels);
    if (!cmyk) {
      JSAMPROW rp = dst;
      jpeg_read_scanlines(c, &rp, 1);
      continue;
    }
    jpeg_read_scanlines(c, row, 1);
    const unsigned char* src = row[0];
    for (JDIMENSION x = 0; x < w; ++x, src += 4, dst += 3) {
      const unsigned k = inverted ? src[3] : 255u - src[3];
      for (int ch = 0; ch < 3; ++ch) {
        const unsigned v = inverted ? src[ch] : 255u - src[ch];
        dst[ch] = static_cast<unsigned char>((v * k + 127) / 255);
      }
    }
  }
  jpeg_finish_decompress(c);
  return 0;
}

}  // namespace

bool is_jpeg(const std::uint8_t* d, std::size_t n) {
  return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF;
}

Image decode(const std::uint8_t* data, std::size_t size, const std::string& name,
             const DecodeOptions& opt) {
  if (!is_jpeg(data, size))
    throw DecodeError(quoted(name) +
                      " is not a decodable image: not a JPEG file (no start-of-image marker)");
  auto check_dims = [&](std::uint64_t w, std::uint64_t h) {
    check_size(name, w, h, opt.max_pixels);
  };
  // The frame header's size first, from our own marker walk: libjpeg refuses sides over 65500
  // with its own message, and the limit's message names the size and the limit. Without a
  // frame header libjpeg's header read below names what is wrong.
  Info pre;
  if (parse_info(data, size, &pre) && pre.height > 0)
    check_dims(std::uint64_t(pre.width), std::uint64_t(pre.height));
  Decompressor d;
  d.header(data, size, name);
  DecodeState* s = d.s.get();
  const std::uint64_t w = s->cinfo.image_width, h = s->cinfo.image_height;
  check_dims(w, h);
  // The structure (decode_checks.hpp) after libjpeg's header read (its reasons for broken
  // tables or a missing SOS come first) and before any large allocation (the pixels here,
  // libjpeg's coefficient buffers in jpeg_start_decompress): every component covered by a
  // scan, and enough entropy-coded data for the declared size.
  check_structure(data, size, name);
  Image img;
  img.width = int(w);
  img.height = int(h);
  img.channels = s->cinfo.out_color_space == JCS_GRAYSCALE ? 1 : 3;
  img.pixels.assign(img.byte_count(), 0);  // zeroed: nothing of an earlier image can show
  img.exif = saved_exif(&s->cinfo);
  if (s->icc && s->icc_len > 0 && img.channels != 4 && s->cinfo.out_color_space != JCS_CMYK)
    img.icc.assign(s->icc, s->icc + s->icc_len);
  if (run_decode(s, img.pixels.data(), img.channels) != 0)
    throw DecodeError(quoted(name) + " is not a decodable image: " + reason(s->err, &s->cinfo));
  if (opt.orientation == Orientation::apply) {
    const int o = exif_orientation(img.exif);
    if (o >= 2) {
      img = apply_orientation(img, o);
      set_exif_orientation(img.exif, 1);
    }
  }
  return img;
}

bool read_header(const std::uint8_t* d, std::size_t n, Info* info) {
  *info = Info{};
  return is_jpeg(d, n) && parse_info(d, n, info);
}

Info read_info(const std::uint8_t* d, std::size_t n, const std::string& name) {
  if (!is_jpeg(d, n))
    throw DecodeError(quoted(name) + " is not a JPEG file (no start-of-image marker)");
  Info info;
  if (!parse_info(d, n, &info))
    throw DecodeError(
        quoted(name) +
        " is not a decodable image: truncated or corrupt JPEG header (no frame header found)");
  check_structure(d, n, name);
  info.undefined_huffman_table = detail::jpeg_undefined_huffman_table(d, n);
  return info;
}

namespace internal {

bool parse_info(const std::uint8_t* d, std::size_t n, Info* out) {
  Info& info = *out;
  std::vector<std::uint8_t> exif;
  int adobe_transform = -1;
  bool jfif = false;
  std::size_t pos = 2;
  while (pos + 4 <= n) {
    if (d[pos] != 0xFF) break;
    const std::uint8_t m = d[pos + 1];
    if (m == 0xFF) {
      ++pos;
      continue;
    }
    if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
      pos += 2;
      continue;
    }
    if (m == 0xD9 || m == 0xDA) break;
    const std::size_t len = std::size_t(d[pos + 2]) << 8 | d[pos + 3];
    if (len < 2 || pos + 2 + len > n) break;
    const std::uint8_t* seg = d + pos + 4;
    const std::size_t seglen = len - 2;
    if (m == 0xE1 && seglen >= kExifPrefix && std::memcmp(seg, "Exif\0\0", kExifPrefix) == 0 &&
        exif.empty())
      exif.assign(seg, seg + seglen);
    if (m == 0xEE && seglen >= 12 && std::memcmp(seg, "Adobe", 5) == 0) adobe_transform = seg[11];
    if (m == 0xE0 && seglen >= 5 && std::memcmp(seg, "JFIF\0", 5) == 0) jfif = true;
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof) {
      if (seglen < 6) break;
      info.precision = seg[0];
      info.height = int(seg[1]) << 8 | seg[2];
      info.width = int(seg[3]) << 8 | seg[4];
      info.components = seg[5];
      info.progressive = m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE;
      info.arithmetic = m >= 0xC9;
      info.lossless = m == 0xC3 || m == 0xC7 || m == 0xCB || m == 0xCF;
      if (info.components == 1) {
        info.subsampling = "gray";
      } else if (info.components >= 3 && seglen >= 6 + 3 * std::size_t(info.components)) {
        const int h0 = seg[7] >> 4, v0 = seg[7] & 15;
        bool chroma_11 = true;
        for (int i = 1; i < info.components; ++i) {
          const std::uint8_t f = seg[6 + 3 * i + 1];
          if (f != 0x11) chroma_11 = false;
        }
        if (!chroma_11 || info.components != 3)
          info.subsampling = "other";
        else if (h0 == 1 && v0 == 1)
          info.subsampling = "4:4:4";
        else if (h0 == 2 && v0 == 1)
          info.subsampling = "4:2:2";
        else if (h0 == 2 && v0 == 2)
          info.subsampling = "4:2:0";
        else if (h0 == 1 && v0 == 2)
          info.subsampling = "4:4:0";
        else if (h0 == 4 && v0 == 1)
          info.subsampling = "4:1:1";
        else
          info.subsampling = "other";
      } else {
        info.subsampling = "other";
      }
      if (info.components == 3 && seglen >= 6 + 9) {
        const bool rgb_ids = seg[6] == 'R' && seg[9] == 'G' && seg[12] == 'B';
        info.rgb_stored = adobe_transform == 0 || (adobe_transform < 0 && !jfif && rgb_ids);
      }
      const int o = exif_orientation(exif);
      info.orientation = o ? o : 1;
      return true;
    }
    pos += 2 + len;
  }
  return false;
}

void check_structure(const std::uint8_t* d, std::size_t n, const std::string& name) {
  const std::string why = detail::jpeg_structure_problem(d, n);
  if (!why.empty()) throw DecodeError(quoted(name) + " is not a decodable image: " + why);
}

}  // namespace internal
}  // namespace histeq::jpeg
