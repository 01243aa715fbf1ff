// hostile_files.hpp — the hostile-input set of issue 12, made byte by byte here (no downloaded
// files): one or more files per class of defect, each with the reason decoding must give, plus
// valid unusual files with the pixels they must decode to. Used by test_host_decode_checks
// (decode_image), test_cli_hostile_decode (the built CLI, exit 1 + reason, MALLOC_PERTURB_) and
// make_hostile_files (writes them to tests/fuzz/crashes/decode/hostile-*, replayed by
// test_host_fuzz_replay and the fuzzers' corpus).
#pragma once
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#include <stb_image_write.h>  // stbi_zlib_compress, for the PNG bomb (our own copy of stb)
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace histeq::hostile {

using Bytes = std::vector<std::uint8_t>;

struct Case {
  std::string name;  // file name, with the format's extension
  std::string cls;   // the class
  Bytes bytes;
  std::string reason;  // substring the error must contain; "" = must decode
  int width = 0, height = 0, channels = 0;
  Bytes pixels;       // expected pixels when reason is ""
  bool jpeg = false;  // a JPEG class (needs the libjpeg-turbo decoder)
};

inline void le16(Bytes& b, std::uint32_t v) {
  b.push_back(std::uint8_t(v));
  b.push_back(std::uint8_t(v >> 8));
}
inline void le32(Bytes& b, std::uint32_t v) {
  le16(b, v & 0xFFFF);
  le16(b, v >> 16);
}
inline void be16(Bytes& b, std::uint32_t v) {
  b.push_back(std::uint8_t(v >> 8));
  b.push_back(std::uint8_t(v));
}
inline void be32(Bytes& b, std::uint32_t v) {
  be16(b, v >> 16);
  be16(b, v & 0xFFFF);
}
inline void add(Bytes& b, const std::string& s) { b.insert(b.end(), s.begin(), s.end()); }

// ---- PNM
inline Bytes pnm(const std::string& header, const Bytes& data) {
  Bytes b;
  add(b, header);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// ---- TGA: 18-byte header
inline Bytes tga_header(int cmap_type, int type, int cmap_len, int cmap_bits, int w, int h,
                        int bpp) {
  Bytes b{0, std::uint8_t(cmap_type), std::uint8_t(type)};
  le16(b, 0);
  le16(b, std::uint32_t(cmap_len));
  b.push_back(std::uint8_t(cmap_bits));
  le16(b, 0);
  le16(b, 0);
  le16(b, std::uint32_t(w));
  le16(b, std::uint32_t(h));
  b.push_back(std::uint8_t(bpp));
  b.push_back(0x20);  // top-left origin
  return b;
}

// ---- BMP: BITMAPINFOHEADER, palette of `pal` entries (bpp < 16), rows as given (already padded)
inline Bytes bmp(int w, int h, int bpp, int pal, const Bytes& rows) {
  Bytes b;
  add(b, "BM");
  const std::uint32_t offset = 14 + 40 + 4 * std::uint32_t(pal);
  le32(b, offset + std::uint32_t(rows.size()));
  le32(b, 0);
  le32(b, offset);
  le32(b, 40);
  le32(b, std::uint32_t(w));
  le32(b, std::uint32_t(h));
  le16(b, 1);
  le16(b, std::uint32_t(bpp));
  for (int i = 0; i < 6; ++i) le32(b, 0);
  for (int i = 0; i < pal; ++i) {
    b.push_back(std::uint8_t(10 * i));
    b.push_back(std::uint8_t(20 * i));
    b.push_back(std::uint8_t(30 * i + 1));
    b.push_back(0);
  }
  b.insert(b.end(), rows.begin(), rows.end());
  return b;
}

// ---- GIF: 2^(bits) global colours, one frame w×h of `indices`, LZW with min code size 2:
// every pixel is sent as [clear, literal] so the code size stays 3 bits; then the end code.
inline Bytes gif_lzw(const std::vector<int>& indices, bool end_code) {
  Bytes out;
  std::uint32_t acc = 0;
  int nbits = 0;
  auto put = [&](int code) {
    acc |= std::uint32_t(code) << nbits;
    nbits += 3;
    while (nbits >= 8) {
      out.push_back(std::uint8_t(acc));
      acc >>= 8;
      nbits -= 8;
    }
  };
  for (int i : indices) {
    put(4);
    put(i);
  }
  if (end_code) put(5);
  if (nbits > 0) out.push_back(std::uint8_t(acc));
  return out;
}
inline Bytes gif(int sw, int sh, int fw, int fh, const Bytes& lzw, bool terminate, bool trailer,
                 int table_bits = 2) {
  Bytes b;
  add(b, "GIF89a");
  le16(b, std::uint32_t(sw));
  le16(b, std::uint32_t(sh));
  b.push_back(std::uint8_t(0x80 | (table_bits - 1)));
  b.push_back(0);
  b.push_back(0);
  for (int i = 0; i < (1 << table_bits); ++i) {
    b.push_back(std::uint8_t(60 * i));
    b.push_back(std::uint8_t(60 * i + 1));
    b.push_back(std::uint8_t(60 * i + 2));
  }
  b.push_back(0x2C);
  le16(b, 0);
  le16(b, 0);
  le16(b, std::uint32_t(fw));
  le16(b, std::uint32_t(fh));
  b.push_back(0);
  b.push_back(2);  // LZW minimum code size
  for (std::size_t i = 0; i < lzw.size(); i += 255) {
    const std::size_t n = std::min<std::size_t>(255, lzw.size() - i);
    b.push_back(std::uint8_t(n));
    b.insert(b.end(), lzw.begin() + long(i), lzw.begin() + long(i + n));
  }
  if (terminate) b.push_back(0);
  if (trailer) b.push_back(0x3B);
  return b;
}

// ---- PNG
inline std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  return c ^ 0xFFFFFFFFu;
}
inline void chunk(Bytes& png, const char* type, const Bytes& body) {
  be32(png, std::uint32_t(body.size()));
  Bytes t(type, type + 4);
  t.insert(t.end(), body.begin(), body.end());
  png.insert(png.end(), t.begin(), t.end());
  be32(png, crc32(t.data(), t.size()));
}
inline std::uint32_t adler(const Bytes& d) {
  std::uint32_t a = 1, b = 0;
  for (std::uint8_t x : d) {
    a = (a + x) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}
/// zlib stream of stored blocks (no compression).
inline Bytes zlib_stored(const Bytes& raw) {
  Bytes z{0x78, 0x01};
  std::size_t i = 0;
  do {
    const std::size_t n = std::min<std::size_t>(65535, raw.size() - i);
    z.push_back(i + n == raw.size() ? 1 : 0);
    le16(z, std::uint32_t(n));
    le16(z, std::uint32_t(~n & 0xFFFF));
    z.insert(z.end(), raw.begin() + long(i), raw.begin() + long(i + n));
    i += n;
  } while (i < raw.size());
  be32(z, adler(raw));
  return z;
}
inline Bytes zlib_compressed(const Bytes& raw) {
  int n = 0;
  unsigned char* z =
      stbi_zlib_compress(const_cast<unsigned char*>(raw.data()), int(raw.size()), &n, 8);
  Bytes out(z, z + n);
  STBIW_FREE(z);
  return out;
}
inline Bytes png(int w, int h, int depth, int ctype, const Bytes* plte, const Bytes& idat,
                 bool iend = true, int interlace = 0) {
  Bytes p{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  Bytes ihdr;
  be32(ihdr, std::uint32_t(w));
  be32(ihdr, std::uint32_t(h));
  ihdr.insert(ihdr.end(),
              {std::uint8_t(depth), std::uint8_t(ctype), 0, 0, std::uint8_t(interlace)});
  chunk(p, "IHDR", ihdr);
  if (plte) chunk(p, "PLTE", *plte);
  chunk(p, "IDAT", idat);
  if (iend) chunk(p, "IEND", {});
  return p;
}

// ---- JPEG pieces: SOI, DQT, SOF0 (components, 8x8 or as given), DHT (one 1-bit code each for
// DC class 0 and AC class 0), SOS over `scan` components, flat data, EOI.
inline Bytes jpeg(int w, int h, int components, int scan_components, bool dht,
                  int cut_at_percent = 100) {
  Bytes j{0xFF, 0xD8, 0xFF, 0xDB};
  be16(j, 67);
  j.push_back(0);
  for (int i = 0; i < 64; ++i) j.push_back(1);
  j.insert(j.end(), {0xFF, 0xC0});
  be16(j, std::uint32_t(8 + 3 * components));
  j.push_back(8);
  be16(j, std::uint32_t(h));
  be16(j, std::uint32_t(w));
  j.push_back(std::uint8_t(components));
  for (int c = 0; c < components; ++c) j.insert(j.end(), {std::uint8_t(c + 1), 0x11, 0});
  if (dht) {
    j.insert(j.end(), {0xFF, 0xC4});
    be16(j, 2 + 2 * 18);
    for (int cls = 0; cls < 2; ++cls) {
      j.push_back(std::uint8_t(cls << 4));
      j.push_back(1);
      for (int i = 1; i < 16; ++i) j.push_back(0);
      j.push_back(0);  // DC: category 0; AC: EOB
    }
  }
  if (scan_components > 0) {
    j.insert(j.end(), {0xFF, 0xDA});
    be16(j, std::uint32_t(6 + 2 * scan_components));
    j.push_back(std::uint8_t(scan_components));
    for (int c = 0; c < scan_components; ++c) j.insert(j.end(), {std::uint8_t(c + 1), 0x00});
    j.insert(j.end(), {0, 63, 0});
    const std::size_t blocks =
        std::size_t((w + 7) / 8) * std::size_t((h + 7) / 8) * std::size_t(scan_components);
    const std::size_t bytes = (blocks * 2 + 7) / 8;  // 2 zero bits per block
    const std::size_t keep = bytes * std::size_t(cut_at_percent) / 100;
    for (std::size_t i = 0; i < keep; ++i) j.push_back(0x00);
    if (keep == bytes) j.back() |= std::uint8_t((1u << ((8 - (blocks * 2) % 8) % 8)) - 1);
  }
  j.insert(j.end(), {0xFF, 0xD9});
  return j;
}

// ---- JPEG with any scans: SOI, DQT, SOFn (components of 1x1 sampling, ids 1..n), the DHT of
// jpeg() (one 1-bit code, symbol 0, for DC and AC table 0), then one SOS per scan over the
// given components (0-based) with Ss, Se, Ah, Al, then EOI. Each scan's data is the least the
// decoder reads: every block's DC difference is the 1-bit code of category 0, and in a
// sequential scan an EOB follows (1 bit); a progressive AC scan codes EOB0 (1 bit) per block.
// `data_percent` keeps that share of each scan's bytes (100: complete, the last byte padded
// with 1 bits).
struct JpegScanSpec {
  std::vector<int> components;
  int ss = 0, se = 63, ah = 0, al = 0;
};
inline Bytes jpeg_scans(int w, int h, int components, std::uint8_t sof,
                        const std::vector<JpegScanSpec>& scans, int data_percent = 100) {
  Bytes j = jpeg(w, h, components, 0, true);  // SOI DQT SOF0 DHT EOI: no scan
  j.resize(j.size() - 2);                     // without the EOI
  for (std::size_t i = 0; i + 1 < j.size(); ++i)
    if (j[i] == 0xFF && j[i + 1] == 0xC0) {
      j[i + 1] = sof;
      break;
    }
  const bool progressive = sof == 0xC2;
  const std::size_t per_component = std::size_t((w + 7) / 8) * std::size_t((h + 7) / 8);
  for (const JpegScanSpec& sc : scans) {
    j.insert(j.end(), {0xFF, 0xDA});
    be16(j, std::uint32_t(6 + 2 * sc.components.size()));
    j.push_back(std::uint8_t(sc.components.size()));
    for (int c : sc.components) j.insert(j.end(), {std::uint8_t(c + 1), 0x00});
    j.insert(j.end(),
             {std::uint8_t(sc.ss), std::uint8_t(sc.se), std::uint8_t((sc.ah << 4) | sc.al)});
    const std::size_t bits = per_component * sc.components.size() * (progressive ? 1 : 2);
    const std::size_t bytes = (bits + 7) / 8;
    const std::size_t keep = bytes * std::size_t(data_percent) / 100;
    for (std::size_t i = 0; i < keep; ++i) j.push_back(0x00);
    if (keep == bytes && keep > 0) j.back() |= std::uint8_t((1u << ((8 - bits % 8) % 8)) - 1);
  }
  j.insert(j.end(), {0xFF, 0xD9});
  return j;
}

inline std::vector<Case> cases() {
  std::vector<Case> v;
  auto bad = [&](std::string name, std::string cls, Bytes b, std::string reason) {
    Case c;
    c.name = std::move(name);
    c.cls = std::move(cls);
    c.bytes = std::move(b);
    c.reason = std::move(reason);
    c.jpeg = c.name.size() > 4 && c.name.substr(c.name.size() - 4) == ".jpg";
    v.push_back(std::move(c));
  };
  auto good = [&](std::string name, std::string cls, Bytes b, int w, int h, int ch, Bytes px) {
    Case c;
    c.name = std::move(name);
    c.cls = std::move(cls);
    c.bytes = std::move(b);
    c.width = w;
    c.height = h;
    c.channels = ch;
    c.pixels = std::move(px);
    v.push_back(std::move(c));
  };

  // PNM
  bad("pnm-p5-one-byte-short.pgm", "truncated PNM", pnm("P5 4 4 255\n", Bytes(15, 7)),
      "truncated PNM");
  bad("pnm-p6-half.ppm", "truncated PNM", pnm("P6\n# c\n5 3\n255\n", Bytes(20, 9)),
      "truncated PNM");
  bad("pnm-tiny-declares-16384.pgm", "tiny file, huge image",
      pnm("P5 16384 16384 255\n", Bytes(1, 0)), "truncated PNM");
  bad("pnm-maxval-0.pgm", "PNM maxval", pnm("P5 2 2 0\n", Bytes(4, 0)), "maximum value 0");
  bad("pnm-maxval-70000.pgm", "PNM maxval", pnm("P5 2 2 70000\n", Bytes(8, 0)), "over 65535");
  bad("pnm-sample-over-maxval.pgm", "PNM maxval", pnm("P5 2 1 15\n", Bytes{3, 16}),
      "above the maximum value");
  // 16-bit samples (maxval > 255): the command line decodes these at 16 bits (load_image16),
  // which clamped 65535 to the maxval instead of refusing it as the 8-bit path does.
  bad("pnm-16bit-sample-over-maxval.pgm", "PNM maxval",
      pnm("P5\n3 1\n1000\n", Bytes{0x00, 0x00, 0x01, 0x00, 0xFF, 0xFF}),
      "sample 65535 at index 2 is above the maximum value 1000");
  bad("pnm-16bit-rgb-sample-over-maxval.ppm", "PNM maxval",
      pnm("P6 1 1 1023\n", Bytes{0x03, 0xFF, 0x04, 0x00, 0x00, 0x00}),
      "sample 1024 at index 1 is above the maximum value 1023");
  good("pnm-16bit-be.pgm", "16-bit PNM",
       pnm("P5 2 2 65535\n", Bytes{0, 0, 0xFF, 0xFF, 0x80, 0x00, 0x00, 0xFF}), 2, 2, 1,
       Bytes{0, 255, 128, 1});
  good("pnm-maxval-15.pgm", "PNM maxval", pnm("P5 3 1 15\n", Bytes{0, 15, 7}), 3, 1, 1,
       Bytes{0, 255, 119});
  good("pnm-16bit-rgb.ppm", "16-bit PNM",
       pnm("P6 1 1 1023\n", Bytes{0x03, 0xFF, 0x00, 0x00, 0x02, 0x00}), 1, 1, 3,
       Bytes{255, 0, 128});

  // TGA
  {
    Bytes b = tga_header(0, 3, 0, 0, 4, 4, 8);
    b.insert(b.end(), 10, 50);
    bad("tga-gray-rows-cut.tga", "truncated TGA rows", b, "truncated TGA");
  }
  {
    Bytes b = tga_header(0, 11, 0, 0, 8, 8, 8);  // RLE gray: two runs of 16 = 32 of 64 pixels
    b.insert(b.end(), {0x8F, 10, 0x8F, 20});
    bad("tga-rle-cut.tga", "truncated TGA RLE", b, "run-length data ends after 32 of 64");
  }
  {
    Bytes b = tga_header(1, 1, 2, 24, 2, 2, 8);
    b.insert(b.end(), {1, 2, 3, 4, 5, 6});  // 2-entry map
    b.insert(b.end(), {0, 1, 1, 7});        // index 7
    bad("tga-cmap-index-past-map.tga", "palette index out of range", b, "colour-map index 7");
  }
  {
    Bytes b = tga_header(1, 9, 2, 24, 2, 2, 8);
    b.insert(b.end(), {1, 2, 3, 4, 5, 6});
    b.insert(b.end(), {0x83, 9});  // RLE run of 4 of index 9
    bad("tga-rle-cmap-index-past-map.tga", "palette index out of range", b, "colour-map index 9");
  }
  bad("tga-tiny-declares-16384.tga", "tiny file, huge image",
      tga_header(0, 2, 0, 0, 16384, 16384, 24), "truncated TGA");

  // BMP (rows bottom-up, padded to 4 bytes)
  bad("bmp-8bit-2-entries-index-255.bmp", "palette index out of range",
      bmp(2, 2, 8, 2, Bytes{0, 1, 0, 0, 1, 255, 0, 0}), "palette index 255");
  bad("bmp-1bit-1-entry.bmp", "palette index out of range", bmp(8, 1, 1, 1, Bytes{0x01, 0, 0, 0}),
      "palette index 1");
  bad("bmp-4bit-index-past.bmp", "palette index out of range",
      bmp(2, 1, 4, 3, Bytes{0x0E, 0, 0, 0}), "palette index 14");
  {
    Bytes full = bmp(8, 8, 24, 0, Bytes(8 * 24, 77));
    full.resize(full.size() / 2 + 27);
    bad("bmp-24bit-cut-in-half.bmp", "truncated BMP", full, "truncated BMP");
  }
  bad("bmp-tiny-declares-16384.bmp", "tiny file, huge image", bmp(16384, 16384, 24, 0, {}),
      "truncated BMP");
  {
    // top-down (negative height): the first stored row is the top row
    Bytes b = bmp(1, 2, 24, 0, Bytes{1, 2, 3, 0, 4, 5, 6, 0});
    const std::int32_t hneg = -2;
    std::memcpy(b.data() + 22, &hneg, 4);
    good("bmp-top-down.bmp", "top-down BMP", b, 1, 2, 3, Bytes{3, 2, 1, 6, 5, 4});
    Bytes up = bmp(1, 2, 24, 0, Bytes{1, 2, 3, 0, 4, 5, 6, 0});
    good("bmp-bottom-up.bmp", "top-down BMP", up, 1, 2, 3, Bytes{6, 5, 4, 3, 2, 1});
  }

  // GIF (2x2 screen and frame, 4-colour table unless said)
  const std::vector<int> idx4{0, 1, 2, 3};
  // (opaque: RGB, decode_image drops the alpha stb_image gives every GIF)
  good("gif-valid-2x2.gif", "GIF", gif(2, 2, 2, 2, gif_lzw(idx4, true), true, true), 2, 2, 3,
       Bytes{0, 1, 2, 60, 61, 62, 120, 121, 122, 180, 181, 182});
  {
    Bytes lzw = gif_lzw(idx4, false);
    lzw.resize(1);  // 2 of 4 pixels
    bad("gif-lzw-cut-with-trailer.gif", "truncated GIF LZW", gif(2, 2, 2, 2, lzw, true, true),
        "truncated GIF");
    bad("gif-lzw-cut-no-trailer.gif", "truncated GIF LZW", gif(2, 2, 2, 2, lzw, false, false),
        "truncated GIF");
  }
  bad("gif-lzw-end-code-early.gif", "truncated GIF LZW",
      gif(2, 2, 2, 2, gif_lzw({0, 1}, true), true, true), "end code comes after 2 of 4");
  bad("gif-frame-0x0.gif", "GIF 0x0 frame", gif(2, 2, 0, 0, gif_lzw({}, true), true, true),
      "first frame is 0x0");
  {
    Bytes b = gif(2, 2, 2, 2, {}, false, false);
    b.resize(6 + 7 + 12);  // header, screen, colour table: then the trailer
    b.push_back(0x3B);
    bad("gif-no-frames.gif", "GIF without frames", b, "no image");
  }
  bad("gif-index-past-table.gif", "palette index out of range",
      gif(2, 2, 2, 2, gif_lzw({0, 1, 3, 0}, true), true, true, 1), "colour index 3");
  bad("gif-tiny-declares-16384.gif", "tiny file, huge image",
      gif(16384, 16384, 16384, 16384, gif_lzw({0}, true), true, true), "truncated GIF");

  // PNG
  {
    const Bytes plte{255, 0, 0, 0, 255, 0};  // 2 entries
    bad("png-palette-index-past-plte.png", "palette index out of range",
        png(2, 2, 8, 3, &plte, zlib_stored(Bytes{0, 0, 1, 0, 1, 5})), "palette index 5");
    const Bytes plte1{255, 0, 0};
    bad("png-1bit-palette-one-entry.png", "palette index out of range",
        png(8, 1, 1, 3, &plte1, zlib_stored(Bytes{0, 0x80})), "palette index 1");
    // Adam7, 2x2: pass 1 is (0,0), pass 6 is (1,0), pass 7 is row 1; the bad index is at (1,1).
    bad("png-interlaced-palette-index-past-plte.png", "palette index out of range",
        png(2, 2, 8, 3, &plte, zlib_stored(Bytes{0, 1, 0, 0, 0, 1, 5}), true, 1),
        "palette index 5 at pixel (1, 1)");
    good("png-interlaced-palette-ok.png", "PNG",
         png(2, 2, 8, 3, &plte, zlib_stored(Bytes{0, 1, 0, 0, 0, 1, 0}), true, 1), 2, 2, 3,
         Bytes{0, 255, 0, 255, 0, 0, 0, 255, 0, 255, 0, 0});
    good("png-palette-ok.png", "PNG", png(2, 1, 8, 3, &plte, zlib_stored(Bytes{0, 1, 0})), 2, 1, 3,
         Bytes{0, 255, 0, 255, 0, 0});
  }
  bad("png-no-iend.png", "PNG without IEND",
      png(2, 2, 8, 0, nullptr, zlib_stored(Bytes(6, 9)), false), "no IEND");
  {
    Bytes z = zlib_stored(Bytes(6, 9));
    z.resize(z.size() - 6);  // cut inside the stored block, chunk CRC still right
    bad("png-idat-zlib-cut.png", "truncated PNG", png(2, 2, 8, 0, nullptr, z), "PNG");
  }
  bad("png-bomb-1x1-8mib.png", "PNG decompression bomb",
      png(1, 1, 8, 0, nullptr, zlib_compressed(Bytes(std::size_t(8) << 20, 0))),
      "decompression bomb");
  bad("png-tiny-declares-16384.png", "tiny file, huge image",
      png(16384, 16384, 8, 0, nullptr, zlib_stored(Bytes(100, 0))), "cannot hold");
  // 16-bit PNG: the command line decodes these with libspng (decode_image16), which must refuse
  // what the 8-bit path refuses, for the same reasons, before allocating the pixels.
  bad("png16-tiny-declares-16384.png", "tiny file, huge image",
      png(16384, 16384, 16, 0, nullptr, zlib_stored(Bytes(100, 0))), "cannot hold");
  bad("png16-rgba-tiny-declares-16384.png", "tiny file, huge image",
      png(16384, 16384, 16, 6, nullptr, zlib_stored(Bytes(10, 0))), "cannot hold");
  {
    const Bytes rows{0, 1, 2, 3, 4, 0, 5, 6, 7, 8};  // 2x2 gray, 16 bits: filter 0, 2 samples
    const Bytes ok = png(2, 2, 16, 0, nullptr, zlib_stored(rows));
    Bytes b = ok;
    b[b.size() - 12 - 1] ^= 0x01;  // the last byte of IDAT's CRC (IEND is the last 12 bytes)
    bad("png16-bad-idat-crc.png", "16-bit PNG", b, "CRC mismatch in chunk 'IDAT'");
    b = ok;
    b[b.size() - 1] ^= 0x01;  // IEND's CRC
    bad("png16-bad-iend-crc.png", "16-bit PNG", b, "CRC mismatch in chunk 'IEND'");
    bad("png16-no-iend.png", "16-bit PNG", png(2, 2, 16, 0, nullptr, zlib_stored(rows), false),
        "no IEND");
    Bytes z = zlib_stored(rows);
    z.resize(z.size() - 6);  // cut inside the stored block, chunk CRC still right
    bad("png16-idat-zlib-cut.png", "16-bit PNG", png(2, 2, 16, 0, nullptr, z), "PNG");
  }

  // JPEG (libjpeg-turbo and histeq's structure checks, decode_checks_jpeg.cpp, report these; stb
  // 2.27 does not). "SOS": libjpeg's "missing SOS marker" (CPU decode) and the structure
  // check's "no scan (SOS marker)" (read_info, the nvJPEG route's gate).
  bad("jpeg-no-scan.jpg", "JPEG without a scan", jpeg(8, 8, 1, 0, true), "SOS");
  // Components no scan covers: libjpeg-turbo alone decodes each of these (exit 0, the missing
  // component from its zeroed coefficients); the structure check refuses them.
  bad("jpeg-component-never-scanned.jpg", "JPEG components never scanned", jpeg(8, 8, 3, 1, true),
      "component 2 (id 2) is never covered by a scan");
  bad("jpeg-scan-of-components-1-2-only.jpg", "JPEG components never scanned",
      jpeg_scans(16, 8, 3, 0xC0, {{{0, 1}}}), "component 3 (id 3) is never covered by a scan");
  {
    // Progressive: DC-first of components 1 and 2, their AC scans; none of component 3.
    const std::vector<JpegScanSpec> scans{{{0, 1}, 0, 0}, {{0}, 1, 63}, {{1}, 1, 63}};
    bad("jpeg-progressive-component-never-scanned.jpg", "JPEG components never scanned",
        jpeg_scans(16, 8, 3, 0xC2, scans), "component 3 (id 3) is never covered by a scan");
    // The same with an AC scan of component 3 but no DC-first scan of it.
    std::vector<JpegScanSpec> ac_only = scans;
    ac_only.push_back({{2}, 1, 63});
    bad("jpeg-progressive-component-ac-only.jpg", "JPEG components never scanned",
        jpeg_scans(16, 8, 3, 0xC2, ac_only), "component 3 (id 3) is never covered by a scan");
  }
  {
    Bytes b{0xFF};  // a fill byte before the SOI: not libjpeg's dispatch (FF D8 FF), was stb's
    const Bytes j = jpeg(8, 8, 1, 0, true);
    b.insert(b.end(), j.begin(), j.end());
    bad("jpeg-fill-bytes-before-soi.jpg", "JPEG without a scan", b, "unknown image type");
  }
  bad("jpeg-undefined-huffman.jpg", "JPEG undefined Huffman table", jpeg(8, 8, 1, 1, false), "");
  bad("jpeg-cut-30-percent-eoi.jpg", "JPEG cut, EOI appended", jpeg(256, 256, 1, 1, true, 30), "");
  bad("jpeg-tiny-declares-16384.jpg", "tiny file, huge image", jpeg(16384, 16384, 1, 1, true, 0),
      "declares 16384x16384 in a file of 136 bytes");
  // Progressive: libjpeg-turbo would allocate its whole-image coefficient buffer (512 MiB) and
  // the pixels (256 MiB) before reading the data; the DC-first scan has none of its 524288 bytes.
  bad("jpeg-progressive-tiny-declares-16384.jpg", "tiny file, huge image",
      jpeg_scans(16384, 16384, 1, 0xC2, {{{0}, 0, 0}}, 0), "declares 16384x16384 in a file of");

  return v;
}

}  // namespace histeq::hostile
