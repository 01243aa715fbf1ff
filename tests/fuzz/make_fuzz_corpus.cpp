// make_fuzz_corpus.cpp — writes the decode fuzzer's seed corpus: small valid images of every
// input format histeq reads, with 1..4 channels where the format has them.
//   PNG, BMP, TGA: encode_image (stb_image_write) for 1, 2, 3, 4 channels;
//   JPEG: 1 and 3 channels (what JPEG stores), quality 50 and 95;
//   PNG variants by hand: 16-bit gray, palette (PLTE), Adam7-interlaced (valid zlib, stored
//   blocks, CRCs computed here); GIF: an 87a 4x4 gray image and a two-frame 89a animation;
//   PNM: binary PGM (P5) and PPM (P6) (stb_image reads no ASCII P2/P3).
// Usage: make_fuzz_corpus OUT_DIR. Deterministic: the same bytes on every run.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "histeq/image_io.hpp"

namespace {

using Bytes = std::vector<std::uint8_t>;

void write(const std::string& dir, const std::string& name, const Bytes& b) {
  std::ofstream f(dir + "/" + name, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  if (!f) {
    std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
    std::exit(1);
  }
}

histeq::Image pattern(int w, int h, int c) {
  histeq::Image img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels.resize(img.byte_count());
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        img.pixels[(std::size_t(y) * w + x) * c + k] =
            std::uint8_t((x * 37 + y * 11 + k * 64 + (x ^ y) * 5) & 0xFF);
  return img;
}

// ---- PNG by hand (for the variants stb_image_write does not make) ----
std::uint32_t crc32(const std::uint8_t* p, std::size_t n, std::uint32_t crc = 0xFFFFFFFFu) {
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return crc;
}
std::uint32_t adler32(const Bytes& d) {
  std::uint32_t a = 1, b = 0;
  for (std::uint8_t v : d) {
    a = (a + v) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}
void put32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(std::uint8_t(v >> s));
}
void chunk(Bytes& png, const char* type, const Bytes& data) {
  put32(png, std::uint32_t(data.size()));
  const std::size_t start = png.size();
  png.insert(png.end(), type, type + 4);
  png.insert(png.end(), data.begin(), data.end());
  put32(png, crc32(png.data() + start, png.size() - start) ^ 0xFFFFFFFFu);
}
/// zlib stream of stored (uncompressed) blocks.
Bytes zlib_stored(const Bytes& raw) {
  Bytes z{0x78, 0x01};
  std::size_t pos = 0;
  do {
    const std::size_t n = std::min<std::size_t>(65535, raw.size() - pos);
    const bool last = pos + n == raw.size();
    z.push_back(last ? 1 : 0);
    z.push_back(std::uint8_t(n));
    z.push_back(std::uint8_t(n >> 8));
    z.push_back(std::uint8_t(~n));
    z.push_back(std::uint8_t(~n >> 8));
    z.insert(z.end(), raw.begin() + long(pos), raw.begin() + long(pos + n));
    pos += n;
  } while (pos < raw.size());
  put32(z, adler32(raw));
  return z;
}
/// A PNG of the given IHDR fields whose filtered scanlines (filter byte 0 + row bytes) are `raw`.
Bytes png(std::uint32_t w, std::uint32_t h, int depth, int color, int interlace, const Bytes& raw,
          const Bytes& plte = {}) {
  Bytes out{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  Bytes ihdr;
  put32(ihdr, w);
  put32(ihdr, h);
  ihdr.push_back(std::uint8_t(depth));
  ihdr.push_back(std::uint8_t(color));
  ihdr.push_back(0);
  ihdr.push_back(0);
  ihdr.push_back(std::uint8_t(interlace));
  chunk(out, "IHDR", ihdr);
  if (!plte.empty()) chunk(out, "PLTE", plte);
  chunk(out, "IDAT", zlib_stored(raw));
  chunk(out, "IEND", {});
  return out;
}
/// Raw filtered rows (filter 0) of a w x h image with `bpp` bytes per pixel.
Bytes rows(int w, int h, int bpp, int salt) {
  Bytes r;
  for (int y = 0; y < h; ++y) {
    r.push_back(0);
    for (int i = 0; i < w * bpp; ++i) r.push_back(std::uint8_t(i * 29 + y * 7 + salt));
  }
  return r;
}
/// Adam7 passes of a w x h 8-bit gray image, each pass's rows with filter byte 0.
Bytes adam7_rows(int w, int h) {
  static const int xs[7] = {0, 4, 0, 2, 0, 1, 0}, ys[7] = {0, 0, 4, 0, 2, 0, 1};
  static const int dx[7] = {8, 8, 4, 4, 2, 2, 1}, dy[7] = {8, 8, 8, 4, 4, 2, 2};
  Bytes r;
  for (int p = 0; p < 7; ++p) {
    const int pw = (w - xs[p] + dx[p] - 1) / dx[p], ph = (h - ys[p] + dy[p] - 1) / dy[p];
    if (pw <= 0 || ph <= 0) continue;
    for (int y = 0; y < ph; ++y) {
      r.push_back(0);
      for (int x = 0; x < pw; ++x)
        r.push_back(std::uint8_t((xs[p] + x * dx[p]) * 16 + (ys[p] + y * dy[p]) * 3));
    }
  }
  return r;
}

// ---- GIF by hand: LZW with a clear code before every pixel (valid, never grows the table) ----
Bytes gif_lzw(const Bytes& idx, int min_code) {
  const int clear = 1 << min_code, eoi = clear + 1, width = min_code + 1;
  Bytes out;
  std::uint32_t acc = 0;
  int nbits = 0;
  auto emit = [&](int code) {
    acc |= std::uint32_t(code) << nbits;
    nbits += width;
    while (nbits >= 8) {
      out.push_back(std::uint8_t(acc));
      acc >>= 8;
      nbits -= 8;
    }
  };
  for (std::uint8_t v : idx) {
    emit(clear);
    emit(v);
  }
  emit(eoi);
  if (nbits > 0) out.push_back(std::uint8_t(acc));
  Bytes blocks{std::uint8_t(min_code)};
  for (std::size_t p = 0; p < out.size(); p += 255) {
    const std::size_t n = std::min<std::size_t>(255, out.size() - p);
    blocks.push_back(std::uint8_t(n));
    blocks.insert(blocks.end(), out.begin() + long(p), out.begin() + long(p + n));
  }
  blocks.push_back(0);
  return blocks;
}
Bytes gif(int w, int h, int frames) {
  Bytes g;
  const char* sig = frames > 1 ? "GIF89a" : "GIF87a";
  g.insert(g.end(), sig, sig + 6);
  g.push_back(std::uint8_t(w));
  g.push_back(std::uint8_t(w >> 8));
  g.push_back(std::uint8_t(h));
  g.push_back(std::uint8_t(h >> 8));
  g.push_back(0xF1);  // global colour table, 2^(1+1) = 4 entries
  g.push_back(0);
  g.push_back(0);
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 3; ++k) g.push_back(std::uint8_t(i * 80 + k * 10));
  for (int f = 0; f < frames; ++f) {
    if (frames > 1) {  // graphic control extension: delay 10 cs
      const std::uint8_t gce[] = {0x21, 0xF9, 4, 0, 10, 0, 0, 0};
      g.insert(g.end(), gce, gce + sizeof gce);
    }
    const std::uint8_t desc[] = {0x2C,
                                 0,
                                 0,
                                 0,
                                 0,
                                 std::uint8_t(w),
                                 std::uint8_t(w >> 8),
                                 std::uint8_t(h),
                                 std::uint8_t(h >> 8),
                                 0};
    g.insert(g.end(), desc, desc + sizeof desc);
    Bytes idx;
    for (int i = 0; i < w * h; ++i) idx.push_back(std::uint8_t((i + f) % 4));
    const Bytes lzw = gif_lzw(idx, 2);
    g.insert(g.end(), lzw.begin(), lzw.end());
  }
  g.push_back(0x3B);
  return g;
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_corpus OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  for (int c = 1; c <= 4; ++c) {
    const histeq::Image img = pattern(5 + c, 3 + c, c);
    for (const char* ext : {"png", "bmp", "tga"})
      write(dir, "c" + std::to_string(c) + "." + ext, histeq::encode_image(img, ext));
  }
  write(dir, "c1-q50.jpg", histeq::encode_image(pattern(17, 9, 1), "jpg", 50));
  write(dir, "c3-q95.jpg", histeq::encode_image(pattern(9, 17, 3), "jpg", 95));
  write(dir, "c3-1x1.png", histeq::encode_image(pattern(1, 1, 3), "png"));
  write(dir, "c1-1x7.png", histeq::encode_image(pattern(1, 7, 1), "png"));
  write(dir, "c1-7x1.bmp", histeq::encode_image(pattern(7, 1, 1), "bmp"));

  write(dir, "gray16.png", png(4, 3, 16, 0, 0, rows(4, 3, 2, 1)));
  Bytes plte;
  for (int i = 0; i < 4; ++i)
    plte.insert(plte.end(), {std::uint8_t(i * 60), std::uint8_t(255 - i * 60), 128});
  write(dir, "palette2bit.png",
        png(5, 2, 2, 3, 0, rows(2, 2, 1, 0) /* 5 px x 2 bit = 2 bytes */, plte));
  write(dir, "interlaced.png", png(9, 9, 8, 0, 1, adam7_rows(9, 9)));
  write(dir, "rgba16.png", png(2, 2, 16, 6, 0, rows(2, 2, 8, 3)));
  write(dir, "gray1bit.png", png(10, 2, 1, 0, 0, rows(2, 2, 1, 5)));

  write(dir, "still.gif", gif(4, 4, 1));
  write(dir, "animated.gif", gif(3, 2, 2));

  Bytes p5 = text("P5\n4 3\n255\n");
  for (int i = 0; i < 12; ++i) p5.push_back(std::uint8_t(i * 21));
  write(dir, "gray.pgm", p5);
  Bytes p6 = text("P6\n# comment\n2 2\n255\n");
  for (int i = 0; i < 12; ++i) p6.push_back(std::uint8_t(i * 19));
  write(dir, "rgb.ppm", p6);
  std::printf("wrote the seed corpus to %s\n", dir.c_str());
  return 0;
}
