// jpeg_test_support.hpp — test JPEGs made with libjpeg's own compressor (every sampling,
// progressive, arithmetic, restart markers, CMYK), shared by the CPU and GPU JPEG tests.
// Header-only; the including test binary links libjpeg (tests/CMakeLists.txt: names with "jpeg").
#pragma once
#include <algorithm>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <jpeglib.h>

#include "histeq/types.hpp"
#include "test_support.hpp"  // pattern()

namespace histeq::test {

using Bytes = std::vector<std::uint8_t>;

struct MakeOpts {
  int quality = 90;
  int h_samp = 2, v_samp = 2;  // luma sampling factors (chroma 1x1)
  bool progressive = false;
  bool arithmetic = false;
  int restart_rows = 0;
  bool cmyk = false;                  // input pixels are CMYK (4 channels), written as CMYK
  bool adobe = true;                  // write the Adobe APP14 marker (CMYK)
  bool rgb_stored = false;            // 3 channels stored as RGB components (no YCbCr transform)
  bool optimize = false;              // optimal Huffman tables (optimize_coding)
  std::vector<jpeg_scan_info> scans;  // a scan script (multi-scan sequential or progressive)
};

/// A JPEG made with libjpeg's own compressor (the test's independent way to get every kind of
/// file; libjpeg's default error handler is fine here: a failure ends the test binary).
/// The same JPEG without its DHT segments (Huffman tables), as a Motion-JPEG frame is stored.
inline Bytes without_huffman_tables(const Bytes& d) {
  Bytes out(d.begin(), d.begin() + 2);
  std::size_t i = 2;
  while (i + 4 <= d.size()) {
    const unsigned m = d[i + 1];
    if (m == 0xDA) {
      out.insert(out.end(), d.begin() + std::ptrdiff_t(i), d.end());
      break;
    }
    const std::size_t len = (std::size_t(d[i + 2]) << 8) | d[i + 3];
    if (m != 0xC4)
      out.insert(out.end(), d.begin() + std::ptrdiff_t(i), d.begin() + std::ptrdiff_t(i + 2 + len));
    i += 2 + len;
  }
  return out;
}

inline Bytes make_jpeg(const Image& img, const MakeOpts& o = {}) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = JDIMENSION(img.width);
  c.image_height = JDIMENSION(img.height);
  c.input_components = img.channels;
  c.in_color_space = o.cmyk ? JCS_CMYK : img.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  if (o.cmyk) {
    jpeg_set_colorspace(&c, JCS_CMYK);
    c.write_Adobe_marker = o.adobe ? TRUE : FALSE;
  }
  if (o.rgb_stored) jpeg_set_colorspace(&c, JCS_RGB);
  jpeg_set_quality(&c, o.quality, TRUE);
  if (img.channels == 3) {
    c.comp_info[0].h_samp_factor = o.h_samp;
    c.comp_info[0].v_samp_factor = o.v_samp;
  }
  if (o.progressive) jpeg_simple_progression(&c);
  if (!o.scans.empty()) {
    c.scan_info = o.scans.data();
    c.num_scans = int(o.scans.size());
  }
  c.optimize_coding = o.optimize ? TRUE : FALSE;
  c.arith_code = o.arithmetic ? TRUE : FALSE;
  c.restart_in_rows = o.restart_rows;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(img.pixels.data() +
                                        std::size_t(c.next_scanline) * img.width * img.channels);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  Bytes out(buf, buf + size);
  std::free(buf);
  return out;
}

/// One scan of a script: the components (0-based), Ss, Se, Ah, Al.
inline jpeg_scan_info scan(std::vector<int> comps, int ss, int se, int ah = 0, int al = 0) {
  jpeg_scan_info s{};
  s.comps_in_scan = int(comps.size());
  for (std::size_t i = 0; i < comps.size(); ++i) s.component_index[i] = comps[i];
  s.Ss = ss;
  s.Se = se;
  s.Ah = ah;
  s.Al = al;
  return s;
}

/// A piece of a JPEG as libjpeg writes it (no fill bytes): the SOI, a marker segment, a scan
/// (its SOS segment and the entropy-coded data after it), or the EOI; [begin, end) in the file.
struct JpegPiece {
  std::size_t begin = 0, end = 0;
  std::uint8_t marker = 0;
  std::vector<int> scan_ids;   // SOS: the component ids it names
  int ss = 0, ah = 0;          // SOS: spectral start, successive approximation high
  std::size_t data_begin = 0;  // SOS: the first entropy-coded byte
};

/// The pieces of a JPEG written by libjpeg (the tests' own walk, independent of histeq's).
inline std::vector<JpegPiece> jpeg_pieces(const Bytes& j) {
  std::vector<JpegPiece> v;
  v.push_back({0, 2, 0xD8, {}, 0, 0, 0});
  std::size_t pos = 2;
  while (pos + 1 < j.size() && j[pos] == 0xFF) {
    JpegPiece p;
    p.begin = pos;
    p.marker = j[pos + 1];
    if (p.marker == 0xD9) {
      p.end = pos + 2;
      v.push_back(p);
      break;
    }
    if (pos + 3 >= j.size()) break;
    p.end = pos + 2 + ((std::size_t(j[pos + 2]) << 8) | j[pos + 3]);
    if (p.marker == 0xDA) {
      const std::size_t ns = j[pos + 4];
      for (std::size_t k = 0; k < ns; ++k) p.scan_ids.push_back(j[pos + 5 + 2 * k]);
      p.ss = j[pos + 5 + 2 * ns];
      p.ah = j[pos + 7 + 2 * ns] >> 4;
      p.data_begin = p.end;
      std::size_t e = p.end;  // up to a marker that is neither FF00 nor RSTn
      while (e + 1 < j.size() &&
             !(j[e] == 0xFF && j[e + 1] != 0x00 && (j[e + 1] < 0xD0 || j[e + 1] > 0xD7)))
        ++e;
      p.end = e;
    }
    v.push_back(p);
    pos = p.end;
  }
  return v;
}

/// The JPEG without the scans for which drop(piece) is true.
template <class Pred>
Bytes without_scans(const Bytes& j, Pred drop) {
  Bytes out;
  for (const JpegPiece& p : jpeg_pieces(j))
    if (p.marker != 0xDA || !drop(p))
      out.insert(out.end(), j.begin() + long(p.begin), j.begin() + long(p.end));
  return out;
}

namespace detail {
struct PlainDecode {
  jpeg_error_mgr mgr;  // first: cinfo.err points here
  std::jmp_buf jump;
};
extern "C" inline void plain_decode_exit(j_common_ptr c) {
  std::longjmp(reinterpret_cast<PlainDecode*>(c->err)->jump, 1);
}
extern "C" inline void plain_decode_quiet(j_common_ptr c, int level) {
  if (level < 0) ++c->err->num_warnings;  // as libjpeg's own emit_message counts them
}
/// C-style: only trivially destructible locals between setjmp and longjmp.
inline int plain_decode(const unsigned char* data, unsigned long size, long* warnings) {
  jpeg_decompress_struct c;
  PlainDecode e;
  c.err = jpeg_std_error(&e.mgr);
  e.mgr.error_exit = plain_decode_exit;
  e.mgr.emit_message = plain_decode_quiet;
  if (setjmp(e.jump)) {
    jpeg_destroy_decompress(&c);
    return 1;
  }
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, data, size);
  jpeg_read_header(&c, TRUE);
  jpeg_start_decompress(&c);
  JSAMPARRAY row = (*c.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&c), JPOOL_IMAGE,
                                          c.output_width * JDIMENSION(c.output_components), 1);
  while (c.output_scanline < c.output_height) jpeg_read_scanlines(&c, row, 1);
  jpeg_finish_decompress(&c);
  *warnings = e.mgr.num_warnings;
  jpeg_destroy_decompress(&c);
  return 0;
}
}  // namespace detail

/// True when libjpeg-turbo alone, without histeq's checks, decodes the bytes to the end with no
/// error and no warning (the files histeq's structure checks refuse on its behalf).
inline bool libjpeg_decodes_cleanly(const Bytes& j) {
  long warnings = 0;
  return detail::plain_decode(j.data(), static_cast<unsigned long>(j.size()), &warnings) == 0 &&
         warnings == 0;
}

/// `good` with 24 bytes of its last scan's entropy-coded data overwritten (markers and EOI
/// intact), at one of eight places picked by v; none of the bytes is 0xFF (no marker made). The
/// file as given when it has no scan with 64 bytes of data.
inline Bytes overwrite_last_scan(const Bytes& good, int v) {
  std::size_t sos = 0;
  for (std::size_t i = 2; i + 3 < good.size(); ++i)
    if (good[i] == 0xFF && good[i + 1] == 0xDA) sos = i;
  Bytes bad = good;
  if (sos == 0) return bad;
  const std::size_t data = sos + 2 + (std::size_t(good[sos + 2]) << 8 | good[sos + 3]);
  const std::size_t end = good.size() - 2;
  if (data + 64 >= end) return bad;
  const std::size_t at = data + (end - data) * std::size_t(1 + v % 8) / 10;
  for (std::size_t k = 0; k < 24 && at + k < end; ++k)
    bad[at + k] = std::uint8_t((v * 37 + int(k) * 11) % 255);
  return bad;
}

}  // namespace histeq::test

/// In a GPU JPEG test: skip with the reason when the build has no nvJPEG or no device is usable
/// (the test includes histeq/nvjpeg_codec.hpp and test_support.hpp).
#define HISTEQ_REQUIRE_NVJPEG()                                                                   \
  do {                                                                                            \
    if (!::histeq::gpu::nvjpeg_built()) GTEST_SKIP() << "this build has no nvJPEG";               \
    std::string why_;                                                                             \
    if (!::histeq::test::gpu_available(&why_)) GTEST_SKIP() << "no usable CUDA device: " << why_; \
  } while (0)
