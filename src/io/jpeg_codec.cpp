// jpeg_codec.cpp — JPEG decode/encode with libjpeg-turbo's libjpeg API, EXIF orientation, ICC
// profiles in JPEG (APP2) and PNG (iCCP).
//
// libjpeg reports a fatal error through error_exit, which must not return. Here it longjmps back
// to the setjmp of the libjpeg call that failed. Every function that calls setjmp (run_*) is
// C-style: it holds only trivially destructible locals, and the frames between it and the
// longjmp are libjpeg's (C) and our C-style callbacks, so no C++ destructor is ever skipped
// ([csetjmp.syn]/4). The C++ callers own the libjpeg objects through a guard that calls
// jpeg_destroy_* on every path.
#include "histeq/jpeg_codec.hpp"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
// jerror.h after jpeglib.h (its codes depend on jpeglib's configuration): a block of its own,
// so that clang-format's include sorting keeps the order.
#include <jerror.h>
#include <libdeflate.h>

#include "histeq/error.hpp"
#include "io/decode_checks.hpp"

namespace histeq::jpeg {
namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

/// Refuses zero sizes and images over `max_pixels`, naming the file, the size and the limit
/// (before any pixel memory exists).
void check_size(const std::string& name, std::uint64_t w, std::uint64_t h,
                std::uint64_t max_pixels) {
  if (w == 0 || h == 0)
    throw Error(quoted(name) + " has zero width or height: " + std::to_string(w) + "x" +
                std::to_string(h));
  if (w * h > max_pixels)
    throw Error(quoted(name) + " is " + std::to_string(w) + "x" + std::to_string(h) + " = " +
                std::to_string(w * h) + " pixels, over the limit of " + std::to_string(max_pixels) +
                " pixels");
}

// Most scans a decode may read: a progressive file has about 10; a crafted one with thousands
// of tiny scans makes libjpeg spend quadratic time (libjpeg-turbo's TJPARAM_SCANLIMIT, 3.0, has
// the same default of 500).
constexpr int kMaxScans = 500;

/// Error manager + state shared with the C-style callbacks. Trivially destructible.
struct ErrorState {
  jpeg_error_mgr mgr;  // first member: cinfo->err points here
  std::jmp_buf jump;
  int fatal_code;  // the JERR_/JWRN_ code that stopped the decode (0: none)
  char message[JMSG_LENGTH_MAX];
  int scan_limit_hit;
};

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
extern "C" void histeq_jpeg_emit_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;
  auto* st = reinterpret_cast<ErrorState*>(cinfo->err);
  const int code = st->mgr.msg_code;
  if (code == JWRN_ADOBE_XFORM || code == JWRN_BOGUS_ICC || code == JWRN_JFIF_MAJOR) return;
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

void init_error(ErrorState* st) {
  std::memset(st, 0, sizeof *st);
  jpeg_std_error(&st->mgr);
  st->mgr.error_exit = histeq_jpeg_error_exit;
  st->mgr.emit_message = histeq_jpeg_emit_message;
}

// ---- decode, in C-style phases ----

struct DecodeState {
  jpeg_decompress_struct cinfo;
  ErrorState err;
  jpeg_progress_mgr progress;
  bool created;
  JOCTET* icc;  // from jpeg_read_icc_profile (malloc), freed by the C++ side
  unsigned int icc_len;
};

/// Phase 1: create, read the header (markers saved), pick the output colour space. 0 on success.
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

/// Phase 2: decode every scanline into `out` (width * height * out_channels bytes, zeroed by
/// the caller). CMYK rows go through a libjpeg-pool row buffer and are converted to RGB.
int run_decode(DecodeState* s, unsigned char* out, int out_channels) {
  if (setjmp(s->err.jump)) return 1;
  j_decompress_ptr c = &s->cinfo;
  jpeg_start_decompress(c);
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

/// The reason an error code gives, in words a user can act on.
std::string reason(const ErrorState& e, const jpeg_decompress_struct* c) {
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

/// A libjpeg decompressor with histeq's error manager, destroyed with this object; header()
/// runs phase 1 (run_read_header) and names the file in its error.
struct Decompressor {
  std::unique_ptr<DecodeState> s = std::make_unique<DecodeState>();
  Decompressor() {
    std::memset(static_cast<void*>(s.get()), 0, sizeof(DecodeState));
    init_error(&s->err);
    s->cinfo.err = &s->err.mgr;
  }
  ~Decompressor() {
    if (s->created) jpeg_destroy_decompress(&s->cinfo);
    std::free(s->icc);
  }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;
  void header(const std::uint8_t* data, std::size_t size, const std::string& name) {
    if (run_read_header(s.get(), data, static_cast<unsigned long>(size)) != 0)
      throw Error(quoted(name) + " is not a decodable image: " + reason(s->err, &s->cinfo));
  }
};

// ---- EXIF TIFF walking ----

constexpr std::size_t kExifPrefix = 6;  // "Exif\0\0"

/// The payload of the first APP1 "Exif\0\0" segment libjpeg saved (jpeg_save_markers in
/// run_read_header), prefix included; empty when there is none.
std::vector<std::uint8_t> saved_exif(j_decompress_ptr c) {
  for (jpeg_saved_marker_ptr m = c->marker_list; m; m = m->next)
    if (m->marker == JPEG_APP0 + 1 && m->data_length >= kExifPrefix &&
        std::memcmp(m->data, "Exif\0\0", kExifPrefix) == 0)
      return std::vector<std::uint8_t>(m->data, m->data + m->data_length);
  return {};
}

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

/// The markers up to the first SOF into *out (read_info's facts); false when no SOF is found.
bool parse_info(const std::uint8_t* d, std::size_t n, Info* out);

/// detail::jpeg_structure_problem as an Error naming `name`: components no scan covers, no scan,
/// entropy-coded data too short for the declared size (Huffman).
void check_structure(const std::uint8_t* d, std::size_t n, const std::string& name);

}  // namespace

bool is_jpeg(const std::uint8_t* d, std::size_t n) {
  return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF;
}

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
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;  // the stored pixel shown at (x, y)
      switch (orientation) {
        case 2:
          sx = w - 1 - x;
          sy = y;
          break;
        case 3:
          sx = w - 1 - x;
          sy = h - 1 - y;
          break;
        case 4:
          sx = x;
          sy = h - 1 - y;
          break;
        case 5:
          sx = y;
          sy = x;
          break;
        case 6:
          sx = y;
          sy = h - 1 - x;
          break;
        case 7:
          sx = w - 1 - y;
          sy = h - 1 - x;
          break;
        case 8:
          sx = w - 1 - y;
          sy = x;
          break;
      }
      std::memcpy(&out.pixels[(std::size_t(y) * out.width + x) * c],
                  &img.pixels[(std::size_t(sy) * w + sx) * c], std::size_t(c));
    }
  }
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

Image decode(const std::uint8_t* data, std::size_t size, const std::string& name,
             const DecodeOptions& opt) {
  if (!is_jpeg(data, size))
    throw Error(quoted(name) +
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
    throw Error(quoted(name) + " is not a decodable image: " + reason(s->err, &s->cinfo));
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
  if (!is_jpeg(d, n)) throw Error(quoted(name) + " is not a JPEG file (no start-of-image marker)");
  Info info;
  if (!parse_info(d, n, &info))
    throw Error(
        quoted(name) +
        " is not a decodable image: truncated or corrupt JPEG header (no frame header found)");
  check_structure(d, n, name);
  info.undefined_huffman_table = detail::jpeg_undefined_huffman_table(d, n);
  return info;
}

namespace {

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
  if (!why.empty()) throw Error(quoted(name) + " is not a decodable image: " + why);
}

}  // namespace

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
namespace {

struct EncodeState {
  jpeg_compress_struct cinfo;
  ErrorState err;
  bool created;
  unsigned char* out;  // jpeg_mem_dest's malloc'd buffer
  unsigned long out_size;
};

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

/// A libjpeg compressor state with histeq's error manager, destroyed with this object (and the
/// jpeg_mem_dest buffer freed); bytes() copies out what was encoded.
struct Compressor {
  std::unique_ptr<EncodeState> s = std::make_unique<EncodeState>();
  Compressor() {
    std::memset(static_cast<void*>(s.get()), 0, sizeof(EncodeState));
    init_error(&s->err);
    s->cinfo.err = &s->err.mgr;
  }
  ~Compressor() {
    if (s->created) jpeg_destroy_compress(&s->cinfo);
    std::free(s->out);
  }
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;
  std::vector<std::uint8_t> bytes() const {
    return std::vector<std::uint8_t>(s->out, s->out + s->out_size);
  }
};

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

// ---- the stored planes ----
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

/// Samples right of width and below height repeat the last column and row.
void pad_plane(Plane* p) {
  for (int y = 0; y < p->height; ++y) {
    std::uint8_t* r = p->row(y);
    std::memset(r + p->width, r[p->width - 1], p->stride - std::size_t(p->width));
  }
  for (int y = p->height; y < p->rows; ++y)
    std::memcpy(p->row(y), p->row(p->height - 1), p->stride);
}

/// Phase 2 of decode_planes: every iMCU row of raw data into the planes (allocated by the
/// caller from the header's geometry).
int run_decode_raw(DecodeState* s, Plane* planes) {
  if (setjmp(s->err.jump)) return 1;
  j_decompress_ptr c = &s->cinfo;
  jpeg_start_decompress(c);
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
  pad_plane(dst);
}

namespace {

/// An 8-bit YCbCr file of 4:4:4, 4:2:2 or 4:2:0 sampling (its luma factors into *h, *v).
bool stored_ycbcr(const Info& info, int* h, int* v) {
  return info.precision == 8 && info.components == 3 && !info.rgb_stored && !info.lossless &&
         input_factors(info.subsampling, h, v);
}
}  // namespace

bool planes_route(const Info& info, const EncodeOptions& out, Orientation orientation) {
  int ih = 0, iv = 0, oh = 0, ov = 0;
  if (!stored_ycbcr(info, &ih, &iv)) return false;
  if (orientation == Orientation::apply && info.orientation != 1) return false;
  luma_factors(out.subsampling, &oh, &ov);
  return oh % ih == 0 && ov % iv == 0;
}

Planes decode_planes(const std::uint8_t* data, std::size_t size, const std::string& name,
                     const DecodeOptions& opt) {
  Info pre;
  int ih = 0, iv = 0;
  if (!is_jpeg(data, size) || !parse_info(data, size, &pre) || !stored_ycbcr(pre, &ih, &iv))
    throw Error(quoted(name) + ": not a colour JPEG with 4:4:4, 4:2:2 or 4:2:0 YCbCr planes");
  const std::uint64_t w0 = std::uint64_t(pre.width), h0 = std::uint64_t(pre.height);
  check_size(name, w0, h0, opt.max_pixels);
  Decompressor d;
  d.header(data, size, name);
  DecodeState* s = d.s.get();
  j_decompress_ptr c = &s->cinfo;
  // libjpeg reads every marker up to the first scan: one after the frame header (an Adobe APP14
  // transform, a JFIF or EXIF segment) can make it RGB, or carry a rotation to apply. Such a
  // file is not for this route: the caller decodes it to pixels.
  if (c->jpeg_color_space != JCS_YCbCr || c->num_components != 3 ||
      c->image_width != JDIMENSION(w0) || c->image_height != JDIMENSION(h0) ||
      c->comp_info[1].h_samp_factor != 1 || c->comp_info[1].v_samp_factor != 1 ||
      c->comp_info[2].h_samp_factor != 1 || c->comp_info[2].v_samp_factor != 1)
    return Planes{};
  Planes p;
  p.exif = saved_exif(c);
  if (opt.orientation == Orientation::apply && exif_orientation(p.exif) >= 2) return Planes{};
  check_structure(data, size, name);
  c->raw_data_out = TRUE;
  c->out_color_space = JCS_YCbCr;
  p.width = int(w0);
  p.height = int(h0);
  // Whole MCUs of the image in every plane: libjpeg writes whole blocks of each component.
  const std::size_t mcu_w = std::size_t(c->max_h_samp_factor) * DCTSIZE;
  const std::size_t mcu_h = std::size_t(c->max_v_samp_factor) * DCTSIZE;
  const std::size_t mcus_x = round_up(w0, mcu_w) / mcu_w, mcus_y = round_up(h0, mcu_h) / mcu_h;
  for (int k = 0; k < 3; ++k) {
    const jpeg_component_info& ci = c->comp_info[k];
    allocate_plane(&p.plane[k], int(ci.downsampled_width), int(ci.downsampled_height),
                   mcus_x * std::size_t(ci.h_samp_factor) * DCTSIZE,
                   int(mcus_y * std::size_t(ci.v_samp_factor) * DCTSIZE), ci.h_samp_factor,
                   ci.v_samp_factor);
  }
  if (s->icc && s->icc_len > 0) p.icc.assign(s->icc, s->icc + s->icc_len);
  if (run_decode_raw(s, p.plane) != 0)
    throw Error(quoted(name) + " is not a decodable image: " + reason(s->err, &s->cinfo));
  for (Plane& pl : p.plane) pad_plane(&pl);
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
