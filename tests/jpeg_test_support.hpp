// jpeg_test_support.hpp — test JPEGs made with libjpeg's own compressor (every sampling,
// progressive, arithmetic, restart markers, CMYK), shared by the CPU and GPU JPEG tests.
// Header-only; the including test binary links libjpeg (tests/CMakeLists.txt: names with "jpeg").
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <jpeglib.h>

#include "histeq/types.hpp"

namespace histeq::test {

using Bytes = std::vector<std::uint8_t>;

/// A deterministic, textured, asymmetric test image (no two quadrants alike).
inline Image pattern(int w, int h, int c, unsigned seed = 1) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels.resize(img.byte_count());
  unsigned s = seed;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) {
        s = s * 1103515245u + 12345u;
        const int smooth = (x * 255 / std::max(1, w - 1) * (k + 1) + y * 3) & 255;
        img.pixels[(std::size_t(y) * w + x) * c + k] = std::uint8_t(
            (smooth * 3 + int((s >> 16) & 63)) / 4 + (x < w / 3 && y < h / 2 ? 60 : 0));
      }
  return img;
}

struct MakeOpts {
  int quality = 90;
  int h_samp = 2, v_samp = 2;  // luma sampling factors (chroma 1x1)
  bool progressive = false;
  bool arithmetic = false;
  int restart_rows = 0;
  bool cmyk = false;        // input pixels are CMYK (4 channels), written as CMYK
  bool adobe = true;        // write the Adobe APP14 marker (CMYK)
  bool rgb_stored = false;  // 3 channels stored as RGB components (no YCbCr transform)
};

/// A JPEG made with libjpeg's own compressor (the test's independent way to get every kind of
/// file; libjpeg's default error handler is fine here: a failure ends the test binary).
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

}  // namespace histeq::test
