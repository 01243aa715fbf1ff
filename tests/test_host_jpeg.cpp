// test_host_jpeg.cpp — the libjpeg-turbo codec (jpeg_codec.hpp): decode equal to djpeg's (Debian
// libjpeg-turbo-progs, the reference decode with libjpeg's defaults: ISLOW IDCT, fancy
// upsampling) for every sampling, restart markers, progressive and arithmetic files made here
// with libjpeg's compressor; CMYK, 12-bit, lossless, truncated and corrupt files; EXIF
// orientation 1..8 both ways; EXIF/ICC carried; gray written as one component; PNG iCCP.
#include <gtest/gtest.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <jpeglib.h>

#include "histeq/error.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "jpeg_test_support.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

using test::Bytes;
using test::make_jpeg;
using test::MakeOpts;
using test::pattern;

std::string djpeg_path() {
  for (const char* p : {"/usr/bin/djpeg", "/usr/local/bin/djpeg"})
    if (std::ifstream(p).good()) return p;
  return "";
}

/// djpeg's decode (PGM/PPM) of `jpg`, written to `dir`; empty Image when djpeg fails.
Image djpeg_decode(const Bytes& jpg, const std::string& dir, const std::string& tag) {
  const std::string in = dir + "/" + tag + ".jpg", out = dir + "/" + tag + ".pnm";
  std::ofstream(in, std::ios::binary)
      .write(reinterpret_cast<const char*>(jpg.data()), std::streamsize(jpg.size()));
  const std::string cmd = djpeg_path() + " -dct int -pnm -outfile '" + out + "' '" + in + "'";
  if (std::system(cmd.c_str()) != 0) return {};
  std::ifstream f(out, std::ios::binary);
  std::string magic;
  int w = 0, h = 0, maxv = 0;
  f >> magic >> w >> h >> maxv;
  f.get();
  Image img;
  img.width = w;
  img.height = h;
  img.channels = magic == "P5" ? 1 : 3;
  img.pixels.resize(img.byte_count());
  f.read(reinterpret_cast<char*>(img.pixels.data()), std::streamsize(img.pixels.size()));
  if (!f || maxv != 255) return {};
  return img;
}

int max_diff(const Image& a, const Image& b) {
  int m = 0;
  for (std::size_t i = 0; i < a.pixels.size() && i < b.pixels.size(); ++i)
    m = std::max(m, std::abs(int(a.pixels[i]) - int(b.pixels[i])));
  return m;
}

class JpegVsDjpeg : public test::TempDirTest {
 protected:
  JpegVsDjpeg() : TempDirTest("histeq-jpeg") {}
  void expect_equal_to_djpeg(const Bytes& jpg, const std::string& tag) {
    if (djpeg_path().empty())
      GTEST_SKIP() << "djpeg not installed (apt-get install libjpeg-turbo-progs)";
    const Image ref = djpeg_decode(jpg, dir_.string(), tag);
    ASSERT_GT(ref.width, 0) << tag << ": djpeg failed";
    const Image got = jpeg::decode(jpg.data(), jpg.size(), tag);
    ASSERT_EQ(got.width, ref.width) << tag;
    ASSERT_EQ(got.height, ref.height) << tag;
    ASSERT_EQ(got.channels, ref.channels) << tag;
    EXPECT_TRUE(got.pixels == ref.pixels) << tag << ": max difference " << max_diff(got, ref);
  }
};

TEST_F(JpegVsDjpeg, GrayIsOneChannelAndEqual) {
  const Bytes j = make_jpeg(pattern(61, 37, 1));
  EXPECT_EQ(jpeg::read_info(j.data(), j.size(), "g").components, 1);
  expect_equal_to_djpeg(j, "gray");
}

TEST_F(JpegVsDjpeg, EverySubsampling) {
  const struct {
    int h, v;
    const char* name;
  } cases[] = {{1, 1, "4:4:4"}, {2, 1, "4:2:2"}, {2, 2, "4:2:0"}, {1, 2, "4:4:0"}, {4, 1, "4:1:1"}};
  for (const auto& cs : cases) {
    MakeOpts o;
    o.h_samp = cs.h;
    o.v_samp = cs.v;
    const Bytes j = make_jpeg(pattern(77, 45, 3), o);  // odd sizes: partial MCUs at both edges
    EXPECT_EQ(jpeg::read_info(j.data(), j.size(), "x").subsampling, cs.name);
    expect_equal_to_djpeg(j, std::string("sub") + std::to_string(cs.h) + std::to_string(cs.v));
  }
}

TEST_F(JpegVsDjpeg, RestartMarkersProgressiveArithmetic) {
  MakeOpts rst;
  rst.restart_rows = 1;
  const Bytes a = make_jpeg(pattern(90, 70, 3), rst);
  bool has_rst0 = false;
  for (std::size_t i = 0; i + 1 < a.size(); ++i) has_rst0 |= a[i] == 0xFF && a[i + 1] == 0xD0;
  EXPECT_TRUE(has_rst0);
  expect_equal_to_djpeg(a, "restart");
  MakeOpts prog;
  prog.progressive = true;
  const Bytes p = make_jpeg(pattern(90, 70, 3), prog);
  EXPECT_TRUE(jpeg::read_info(p.data(), p.size(), "p").progressive);
  expect_equal_to_djpeg(p, "progressive");
  MakeOpts arith;
  arith.arithmetic = true;
  const Bytes r = make_jpeg(pattern(90, 70, 3), arith);
  EXPECT_TRUE(jpeg::read_info(r.data(), r.size(), "a").arithmetic);
  expect_equal_to_djpeg(r, "arithmetic");
  MakeOpts rgb;
  rgb.rgb_stored = true;
  const Bytes s = make_jpeg(pattern(40, 24, 3), rgb);
  EXPECT_TRUE(jpeg::read_info(s.data(), s.size(), "s").rgb_stored);
  EXPECT_FALSE(jpeg::read_info(a.data(), a.size(), "a").rgb_stored);
  expect_equal_to_djpeg(s, "rgb-stored");
  const Bytes g = make_jpeg(pattern(33, 17, 1), prog);
  expect_equal_to_djpeg(g, "progressive-gray");
}

TEST_F(JpegVsDjpeg, HubbleSampleAndLoadImageRoute) {
  const std::string path = test::source_path("samples/hubble_deep_field.jpg");
  std::ifstream f(path, std::ios::binary);
  const Bytes j((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(j.empty());
  expect_equal_to_djpeg(j, "hubble");
  // load_image routes JPEG to libjpeg-turbo: the same pixels as the codec.
  const Image via_io = load_image(path);
  const Image direct = jpeg::decode(j.data(), j.size(), path);
  EXPECT_TRUE(via_io.pixels == direct.pixels);
}

// ---- CMYK ----

Image cmyk_image(int w, int h) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = 4;
  img.pixels.resize(img.byte_count());
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      std::uint8_t* p = &img.pixels[(std::size_t(y) * w + x) * 4];
      // 4 flat 8x8 blocks per row pair: flat areas survive q100 within a level or two.
      p[0] = std::uint8_t(x < w / 2 ? 40 : 200);
      p[1] = std::uint8_t(y < h / 2 ? 90 : 10);
      p[2] = 128;
      p[3] = std::uint8_t(x < w / 2 ? 230 : 100);
    }
  return img;
}

TEST(JpegHuffman, ScansWithoutTheirTablesAreFlaggedAndUseTheStandardOnes) {
  // A scan whose Huffman tables no DHT defined (Motion-JPEG frames): libjpeg-turbo decodes it
  // with T.81 Annex K's standard tables, so a file written with those tables and then stripped
  // of its DHT segments decodes to the same pixels; read_info flags it, and the nvJPEG route
  // sends it to libjpeg-turbo (issue 12: stb_image read uninitialized tables there).
  for (int channels : {1, 3}) {
    SCOPED_TRACE(channels);
    const Bytes with = make_jpeg(pattern(64, 48, channels, 7));  // libjpeg's standard tables
    const Bytes without = test::without_huffman_tables(with);
    ASSERT_LT(without.size(), with.size());
    EXPECT_FALSE(jpeg::read_info(with.data(), with.size(), "with.jpg").undefined_huffman_table);
    EXPECT_TRUE(
        jpeg::read_info(without.data(), without.size(), "without.jpg").undefined_huffman_table);
    EXPECT_EQ(jpeg::decode(without.data(), without.size(), "without.jpg").pixels,
              jpeg::decode(with.data(), with.size(), "with.jpg").pixels);
  }
  MakeOpts prog;
  prog.progressive = true;
  const Bytes p = test::without_huffman_tables(make_jpeg(pattern(64, 48, 3, 8), prog));
  EXPECT_TRUE(jpeg::read_info(p.data(), p.size(), "p.jpg").undefined_huffman_table);
}

TEST(JpegCmyk, DecodesToRgbWithAndWithoutAdobeMarker) {
  const Image src = cmyk_image(32, 32);
  for (bool adobe : {true, false}) {
    MakeOpts o;
    o.cmyk = true;
    o.adobe = adobe;
    o.quality = 100;
    const Bytes j = make_jpeg(src, o);
    EXPECT_EQ(jpeg::read_info(j.data(), j.size(), "c").components, 4);
    const Image rgb = jpeg::decode(j.data(), j.size(), "cmyk.jpg");
    ASSERT_EQ(rgb.channels, 3);
    ASSERT_EQ(rgb.width, 32);
    int worst = 0;
    for (std::size_t i = 0; i < src.pixel_count(); ++i) {
      const std::uint8_t* s = &src.pixels[i * 4];
      const int k = adobe ? s[3] : 255 - s[3];
      for (int ch = 0; ch < 3; ++ch) {
        const int v = adobe ? s[ch] : 255 - s[ch];
        const int want = (v * k + 127) / 255;
        worst = std::max(worst, std::abs(want - int(rgb.pixels[i * 3 + ch])));
      }
    }
    EXPECT_LE(worst, 3) << "adobe=" << adobe;  // q100 of flat blocks: a few levels at most
  }
}

// ---- errors ----

std::string decode_error(const Bytes& j, const std::string& name = "bad.jpg",
                         std::uint64_t max_pixels = std::uint64_t(1) << 28) {
  try {
    jpeg::decode(j.data(), j.size(), name, {max_pixels});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::size_t find_marker(const Bytes& j, std::uint8_t m) {
  for (std::size_t i = 2; i + 1 < j.size(); ++i)
    if (j[i] == 0xFF && j[i + 1] == m) return i;
  return 0;
}

TEST(JpegErrors, TwelveBitNamesThePrecision) {
  Bytes j = make_jpeg(pattern(16, 16, 1));
  const std::size_t sof = find_marker(j, 0xC0);
  ASSERT_GT(sof, 0u);
  j[sof + 4] = 12;  // data precision
  const std::string e = decode_error(j, "deep.jpg");
  EXPECT_NE(e.find("'deep.jpg'"), std::string::npos) << e;
  EXPECT_NE(e.find("12-bit"), std::string::npos) << e;
  EXPECT_EQ(e.find("unknown marker"), std::string::npos) << e;
  // Through load_image's dispatcher too (decode_image).
  try {
    decode_image(j.data(), j.size(), "deep.jpg");
    ADD_FAILURE() << "a 12-bit JPEG decoded";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("12-bit"), std::string::npos) << err.what();
  }
}

TEST(JpegErrors, LosslessIsUnsupportedProcess) {
  Bytes j = make_jpeg(pattern(16, 16, 1));
  j[find_marker(j, 0xC0) + 1] = 0xC3;
  const std::string e = decode_error(j);
  EXPECT_NE(e.find("unsupported JPEG process"), std::string::npos) << e;
}

TEST(JpegErrors, TruncatedAtEveryQuarter) {
  const Bytes full = make_jpeg(pattern(64, 64, 3));
  const std::size_t sos = find_marker(full, 0xDA);
  for (double f : {0.25, 0.5, 0.75, 0.98}) {
    const std::size_t n = sos + std::size_t((full.size() - sos) * f);
    const Bytes cut(full.begin(), full.begin() + long(n));
    const std::string e = decode_error(cut, "cut.jpg");
    EXPECT_NE(e.find("truncated"), std::string::npos) << f << ": " << e;
    EXPECT_NE(e.find("'cut.jpg'"), std::string::npos) << e;
  }
  // Cut inside the header: an error too, never a crash.
  const Bytes head(full.begin(), full.begin() + 20);
  EXPECT_FALSE(decode_error(head).empty());
}

/// Y plane of decode_planes (its visible rows).
std::vector<std::uint8_t> luma_of(const Bytes& j) {
  const jpeg::Planes p = jpeg::decode_planes(j.data(), j.size(), "planes.jpg");
  std::vector<std::uint8_t> y;
  for (int r = 0; r < p.plane[0].height; ++r)
    y.insert(y.end(), p.plane[0].row(r), p.plane[0].row(r) + p.plane[0].width);
  return y;
}

TEST(JpegErrors, AMissingEndMarkerAloneDecodesAsTheWholeFile) {
  // Some cameras and cut downloads leave out the final EOI (2 bytes): every block is there, and
  // OpenCV and djpeg decode it. It was refused as truncated.
  MakeOpts rst, prog, gray_prog;
  rst.restart_rows = 1;
  prog.progressive = true;
  gray_prog.progressive = true;
  const struct {
    const char* tag;
    int channels;
    MakeOpts o;
  } cases[] = {{"baseline", 3, {}},
               {"gray", 1, {}},
               {"restart", 3, rst},
               {"progressive", 3, prog},
               {"gray progressive", 1, gray_prog}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.tag);
    const Bytes full = make_jpeg(pattern(72, 40, c.channels, 5), c.o);
    ASSERT_EQ(full[full.size() - 2], 0xFF);
    ASSERT_EQ(full.back(), 0xD9);
    const Image want = jpeg::decode(full.data(), full.size(), "full.jpg");
    for (std::size_t drop : {1, 2}) {  // the EOI's last byte, or both
      const Bytes open(full.begin(), full.end() - long(drop));
      ASSERT_EQ(decode_error(open), "") << drop;
      EXPECT_EQ(jpeg::decode(open.data(), open.size(), "open.jpg").pixels, want.pixels) << drop;
      if (c.channels == 3) {
        EXPECT_EQ(luma_of(open), luma_of(full)) << drop;
        const jpeg::Coefficients a = jpeg::decode_coefficients(open.data(), open.size(), "c.jpg");
        const jpeg::Coefficients b = jpeg::decode_coefficients(full.data(), full.size(), "c.jpg");
        for (int k = 0; k < 3; ++k)
          EXPECT_TRUE(a.comp[k].coef == b.comp[k].coef) << "component " << k << ", " << drop;
      }
    }
    // Cut inside the last scan's data, or before the last scan: truncated, on every route.
    const std::vector<test::JpegPiece> pieces = test::jpeg_pieces(full);
    const auto last = std::find_if(pieces.rbegin(), pieces.rend(),
                                   [](const test::JpegPiece& p) { return p.marker == 0xDA; });
    ASSERT_NE(last, pieces.rend());
    for (std::size_t n : {last->begin, (last->data_begin + last->end) / 2}) {
      const Bytes cut(full.begin(), full.begin() + long(n));
      const std::string e = decode_error(cut, "cut.jpg");
      EXPECT_NE(e.find("truncated JPEG"), std::string::npos) << n << ": " << e;
      if (c.channels != 3) continue;
      EXPECT_THROW(jpeg::decode_planes(cut.data(), cut.size(), "cut.jpg"), Error) << n;
      EXPECT_THROW(jpeg::decode_coefficients(cut.data(), cut.size(), "cut.jpg"), Error) << n;
    }
  }
}

TEST(JpegErrors, AnArithmeticCodedFileCutAnywhereIsTruncated) {
  // libjpeg's arithmetic decoder reads a marker in its data as the scan's end and decodes zeros
  // on without a warning: the end of the data must stay fatal there, even where only the EOI
  // is missing (else a file cut to its headers decoded to made-up pixels).
  MakeOpts arith, arith_prog;
  arith.arithmetic = true;
  arith_prog.arithmetic = true;
  arith_prog.progressive = true;
  for (const MakeOpts& o : {arith, arith_prog}) {
    const Bytes full = make_jpeg(pattern(72, 40, 3, 5), o);
    ASSERT_EQ(decode_error(full), "");
    const std::size_t sos = find_marker(full, 0xDA);
    ASSERT_GT(sos, 0u);
    for (std::size_t n = sos + 4; n < full.size();
         n += std::max<std::size_t>(1, full.size() / 61)) {
      const Bytes cut(full.begin(), full.begin() + long(n));
      EXPECT_NE(decode_error(cut, "cut.jpg").find("truncated JPEG"), std::string::npos) << n;
      EXPECT_THROW(jpeg::decode_planes(cut.data(), cut.size(), "cut.jpg"), Error) << n;
      EXPECT_THROW(jpeg::decode_coefficients(cut.data(), cut.size(), "cut.jpg"), Error) << n;
    }
    const Bytes open(full.begin(), full.end() - 2);
    EXPECT_NE(decode_error(open, "open.jpg").find("truncated JPEG"), std::string::npos);
  }
}

TEST(JpegErrors, CorruptEntropyDataIsAnError) {
  MakeOpts o;
  o.restart_rows = 1;
  Bytes j = make_jpeg(pattern(64, 64, 3), o);
  const std::size_t rst = find_marker(j, 0xD1);
  ASSERT_GT(rst, 0u);
  j[rst + 1] = 0xD5;  // a restart marker out of sequence: libjpeg resyncs and fills
  const std::string e = decode_error(j);
  EXPECT_NE(e.find("corrupt"), std::string::npos) << e;
}

TEST(JpegErrors, MaxPixelsCheckedFromHeader) {
  const Bytes j = make_jpeg(pattern(40, 30, 3));
  const std::string e = decode_error(j, "big.jpg", 1199);
  EXPECT_NE(e.find("40x30 = 1200 pixels, over the limit of 1199"), std::string::npos) << e;
  EXPECT_TRUE(decode_error(j, "ok.jpg", 1200).empty());
}

TEST(JpegErrors, MutationsAndTruncationsNeverCrash) {
  // A deterministic sweep (baseline with restart markers, progressive, arithmetic): every
  // prefix of the first 400 bytes and 1500 random single-byte changes each. A decode either
  // gives an image of the header's shape or throws histeq::Error; ASan/UBSan builds see the rest.
  MakeOpts rst, prog, arith;
  rst.restart_rows = 1;
  prog.progressive = true;
  arith.arithmetic = true;
  std::uint64_t state = 0x2545F4914F6CDD1Dull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int decoded = 0, refused = 0;
  for (const MakeOpts& o : {rst, prog, arith}) {
    const Bytes base = make_jpeg(pattern(40, 24, 3), o);
    auto try_decode = [&](const Bytes& b) {
      try {
        const Image img = jpeg::decode(b.data(), b.size(), "m.jpg", {1u << 20});
        EXPECT_EQ(img.pixels.size(), img.byte_count());
        ++decoded;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("m.jpg"), std::string::npos) << e.what();
        ++refused;
      }
    };
    for (std::size_t n = 0; n < std::min<std::size_t>(400, base.size()); ++n)
      try_decode(Bytes(base.begin(), base.begin() + long(n)));
    for (int k = 0; k < 1500; ++k) {
      Bytes b = base;
      b[next() % b.size()] = std::uint8_t(next());
      try_decode(b);
    }
  }
  EXPECT_GT(decoded, 0);
  EXPECT_GT(refused, 0);
}

// ---- structure checks before decoding (decode_checks_jpeg.cpp: jpeg_structure_problem) ----

/// The reason jpeg::read_info gives (the nvJPEG route's gate), or "" when it passes.
std::string read_info_error(const Bytes& j, const std::string& name) {
  try {
    jpeg::read_info(j.data(), j.size(), name);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// Both entry points refuse `j` naming the file and containing `reason`.
void expect_refused_everywhere(const Bytes& j, const std::string& name, const std::string& reason) {
  for (const std::string& e : {decode_error(j, name), read_info_error(j, name)}) {
    EXPECT_NE(e.find("'" + name + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(reason), std::string::npos) << e;
  }
}

TEST(JpegStructure, BaselineScanOfComponentsOneAndTwoOnlyIsRefused) {
  // libjpeg's compressor, two sequential scans: Y and Cb interleaved, then Cr. The file decodes
  // to the same pixels as the one-scan file; without its second scan, libjpeg-turbo alone
  // still decodes it (Cr from zeroed coefficients: exit 0 before), histeq refuses it.
  const Image img = pattern(64, 48, 3);
  MakeOpts two;
  two.scans = {test::scan({0, 1}, 0, 63), test::scan({2}, 0, 63)};
  const Bytes j = make_jpeg(img, two);
  ASSERT_EQ(test::jpeg_pieces(j).back().marker, 0xD9);
  const Bytes one = make_jpeg(img);
  EXPECT_EQ(jpeg::decode(j.data(), j.size(), "two.jpg").pixels,
            jpeg::decode(one.data(), one.size(), "one.jpg").pixels);
  EXPECT_TRUE(read_info_error(j, "two.jpg").empty());
  const Bytes cut = test::without_scans(
      j, [](const test::JpegPiece& p) { return p.scan_ids == std::vector<int>{3}; });
  ASSERT_LT(cut.size(), j.size());
  EXPECT_TRUE(test::libjpeg_decodes_cleanly(cut));
  expect_refused_everywhere(cut, "cut.jpg", "component 3 (id 3) is never covered by a scan");
}

TEST(JpegStructure, ProgressiveWithoutAnyScanOfAComponentIsRefused) {
  // A progressive script with separate DC-first scans, so one component's scans can go: the
  // file without every scan of Cr (id 3) decodes cleanly in libjpeg-turbo alone; without only
  // its DC-first scan libjpeg warns (AC before DC). histeq refuses both, before decoding.
  MakeOpts o;
  o.scans = {test::scan({0, 1}, 0, 0), test::scan({2}, 0, 0), test::scan({0}, 1, 63),
             test::scan({1}, 1, 63), test::scan({2}, 1, 63)};
  const Image img = pattern(40, 32, 3);
  const Bytes j = make_jpeg(img, o);
  ASSERT_TRUE(jpeg::read_info(j.data(), j.size(), "p.jpg").progressive);
  EXPECT_EQ(jpeg::decode(j.data(), j.size(), "p.jpg").pixels.size(), img.pixels.size());
  const Bytes no_cr = test::without_scans(j, [](const test::JpegPiece& p) {
    return std::find(p.scan_ids.begin(), p.scan_ids.end(), 3) != p.scan_ids.end();
  });
  ASSERT_EQ(test::jpeg_pieces(no_cr).size() + 2, test::jpeg_pieces(j).size());
  EXPECT_TRUE(test::libjpeg_decodes_cleanly(no_cr));
  expect_refused_everywhere(no_cr, "no-cr.jpg", "component 3 (id 3) is never covered by a scan");
  const Bytes ac_only = test::without_scans(
      j, [](const test::JpegPiece& p) { return p.scan_ids == std::vector<int>{3} && p.ss == 0; });
  EXPECT_FALSE(test::libjpeg_decodes_cleanly(ac_only));
  expect_refused_everywhere(ac_only, "ac-only.jpg",
                            "component 3 (id 3) is never covered by a scan");
}

TEST(JpegStructure, NoScanAtAllIsRefused) {
  // Everything from the first SOS to the EOI removed, baseline and progressive: the CPU decoder
  // refuses (libjpeg: "missing SOS marker") and so does read_info (the nvJPEG route's gate:
  // before, it read only up to the SOF and passed such a file on).
  MakeOpts prog;
  prog.progressive = true;
  for (const Bytes& j : {make_jpeg(pattern(32, 16, 3)), make_jpeg(pattern(32, 16, 1), prog)}) {
    const Bytes none = test::without_scans(j, [](const test::JpegPiece&) { return true; });
    ASSERT_EQ(find_marker(none, 0xDA), 0u);
    EXPECT_NE(decode_error(none, "none.jpg").find("'none.jpg'"), std::string::npos);
    EXPECT_NE(decode_error(none, "none.jpg").find("SOS"), std::string::npos)
        << decode_error(none, "none.jpg");
    const std::string e = read_info_error(none, "none.jpg");
    EXPECT_NE(e.find("'none.jpg'"), std::string::npos) << e;
    EXPECT_NE(e.find("no scan (SOS marker)"), std::string::npos) << e;
  }
}

TEST(JpegStructure, SizeBoundIsExactForTheTightestHuffmanFile) {
  // One gray level, progressive, optimal Huffman tables: the DC-first scan codes each of the
  // 256x256 = 65536 blocks with a 1-bit code but the first (its code and magnitude bits), so it
  // holds 8192 bytes (the bound: 8 blocks a byte) or one more; the file decodes. Cut to 8191
  // bytes, that scan is refused as too short for the declared size.
  Image flat;
  flat.width = flat.height = 2048;
  flat.channels = 1;
  flat.pixels.assign(flat.byte_count(), 77);
  MakeOpts o;
  o.progressive = true;
  o.optimize = true;
  const Bytes j = make_jpeg(flat, o);
  const std::vector<test::JpegPiece> pieces = test::jpeg_pieces(j);
  const auto dc = std::find_if(pieces.begin(), pieces.end(), [](const test::JpegPiece& p) {
    return p.marker == 0xDA && p.ss == 0;
  });
  ASSERT_NE(dc, pieces.end());
  const std::size_t dc_bytes = dc->end - dc->data_begin;
  EXPECT_GE(dc_bytes, 8192u);
  EXPECT_LE(dc_bytes, 8193u);
  const Image img = jpeg::decode(j.data(), j.size(), "flat.jpg");
  EXPECT_EQ(img.pixels, flat.pixels);
  Bytes short_dc = j;
  short_dc.erase(short_dc.begin() + long(dc->data_begin),
                 short_dc.begin() + long(dc->data_begin + dc_bytes - 8191));
  expect_refused_everywhere(
      short_dc, "short.jpg",
      "declares 2048x2048 in a file of " + std::to_string(short_dc.size()) + " bytes");
  EXPECT_NE(decode_error(short_dc, "short.jpg").find("at least 8192 bytes, and holds 8191"),
            std::string::npos)
      << decode_error(short_dc, "short.jpg");
}

TEST(JpegStructure, SizeBoundCountsSampledComponentsWithoutPadding) {
  // Odd sizes and every sampling (the bound counts each component's own blocks, not the MCU's):
  // baseline, progressive and optimal-table files of flat and textured images all decode.
  int n = 0;
  for (int hs : {1, 2, 4})
    for (int vs : {1, 2})
      for (int w : {1, 9, 17, 33})
        for (bool prog : {false, true}) {
          Image img = pattern(w, 13, 3);
          if (w == 9) std::fill(img.pixels.begin(), img.pixels.end(), std::uint8_t(200));
          MakeOpts o;
          o.h_samp = hs;
          o.v_samp = vs;
          o.progressive = prog;
          o.optimize = true;
          const Bytes j = make_jpeg(img, o);
          SCOPED_TRACE(std::to_string(hs) + "x" + std::to_string(vs) + " " + std::to_string(w) +
                       (prog ? " progressive" : ""));
          EXPECT_TRUE(decode_error(j, "ok.jpg").empty()) << decode_error(j, "ok.jpg");
          EXPECT_TRUE(read_info_error(j, "ok.jpg").empty()) << read_info_error(j, "ok.jpg");
          ++n;
        }
  EXPECT_EQ(n, 48);
}

TEST(JpegStructure, ArithmeticCodingHasNoByteBound) {
  // T.81's arithmetic decoder reads zero bytes past the data, and libjpeg's encoder drops the
  // trailing zeros: a flat 4096x4096 image is a file of well under a hundredth of its blocks / 8
  // bytes, and valid. histeq bounds arithmetic files by the pixel limit only.
  Image flat;
  flat.width = flat.height = 4096;
  flat.channels = 1;
  flat.pixels.assign(flat.byte_count(), 140);
  MakeOpts o;
  o.arithmetic = true;
  const Bytes j = make_jpeg(flat, o);
  EXPECT_LT(j.size() * 8 * 100, std::size_t(512) * 512);  // 262144 blocks
  const Image img = jpeg::decode(j.data(), j.size(), "a.jpg");
  EXPECT_EQ(img.pixels, flat.pixels);
  EXPECT_TRUE(read_info_error(j, "a.jpg").empty());
}

TEST(JpegErrors, NotAJpeg) {
  const Bytes j = {'G', 'I', 'F', '8'};
  EXPECT_NE(decode_error(j).find("not a JPEG"), std::string::npos);
}

// ---- encode ----

TEST(JpegEncode, GrayIsOneComponentAndRoundTrips) {
  const Image g = pattern(50, 40, 1);
  const Bytes j = jpeg::encode(g, {95, jpeg::Subsampling::s420});
  const jpeg::Info info = jpeg::read_info(j.data(), j.size(), "g");
  EXPECT_EQ(info.components, 1);
  const Image back = jpeg::decode(j.data(), j.size(), "g");
  EXPECT_EQ(back.channels, 1);
  EXPECT_LE(max_diff(back, g), 40);  // lossy, but the same picture (noise is the worst case)
  // Gray + alpha: alpha dropped, still one component.
  const Bytes ga = jpeg::encode(pattern(20, 20, 2));
  EXPECT_EQ(jpeg::read_info(ga.data(), ga.size(), "ga").components, 1);
}

TEST(JpegEncode, SubsamplingAsAsked) {
  const Image rgb = pattern(48, 32, 3);
  const struct {
    jpeg::Subsampling s;
    const char* name;
  } cases[] = {{jpeg::Subsampling::s444, "4:4:4"},
               {jpeg::Subsampling::s422, "4:2:2"},
               {jpeg::Subsampling::s420, "4:2:0"}};
  for (const auto& cs : cases) {
    const Bytes j = jpeg::encode(rgb, {90, cs.s});
    EXPECT_EQ(jpeg::read_info(j.data(), j.size(), "x").subsampling, cs.name);
  }
  EXPECT_EQ(jpeg::parse_subsampling("4:2:2"), jpeg::Subsampling::s422);
  EXPECT_THROW(jpeg::parse_subsampling("411"), UsageError);
  // RGBA drops alpha: 3 components.
  const Bytes j4 = jpeg::encode(pattern(16, 16, 4));
  EXPECT_EQ(jpeg::read_info(j4.data(), j4.size(), "x").components, 3);
  EXPECT_THROW(jpeg::encode(rgb, {0, jpeg::Subsampling::s420}), UsageError);
}

TEST(JpegEncode, QualityChangesSizeMonotonically) {
  const Image rgb = pattern(64, 64, 3);
  EXPECT_LT(jpeg::encode(rgb, {50}).size(), jpeg::encode(rgb, {95}).size());
}

// ---- EXIF orientation ----

/// An APP1 payload with IFD0 holding a few entries, Orientation among them.
Bytes make_exif(int orientation, bool little) {
  Bytes t = {'E', 'x', 'i', 'f', 0, 0};
  auto u16 = [&](unsigned v) {
    if (little) {
      t.push_back(std::uint8_t(v));
      t.push_back(std::uint8_t(v >> 8));
    } else {
      t.push_back(std::uint8_t(v >> 8));
      t.push_back(std::uint8_t(v));
    }
  };
  auto u32 = [&](std::uint32_t v) {
    if (little) {
      u16(v & 0xFFFF);
      u16(v >> 16);
    } else {
      u16(v >> 16);
      u16(v & 0xFFFF);
    }
  };
  t.push_back(little ? 'I' : 'M');
  t.push_back(little ? 'I' : 'M');
  u16(42);
  u32(8);
  u16(3);  // 3 entries
  u16(0x010F);
  u16(2);
  u32(4);
  t.insert(t.end(), {'A', 'c', 'm', 0});  // Make "Acm"
  u16(0x0112);
  u16(3);
  u32(1);
  u16(unsigned(orientation));
  u16(0);  // Orientation
  u16(0x011A);
  u16(5);
  u32(1);
  u32(0x40);  // XResolution (offset, not followed)
  u32(0);     // next IFD
  return t;
}

/// Inserts an APP1 segment right after SOI.
Bytes with_app1(const Bytes& jpg, const Bytes& payload) {
  Bytes out(jpg.begin(), jpg.begin() + 2);
  const std::size_t len = payload.size() + 2;
  out.insert(out.end(), {0xFF, 0xE1, std::uint8_t(len >> 8), std::uint8_t(len & 0xFF)});
  out.insert(out.end(), payload.begin(), payload.end());
  out.insert(out.end(), jpg.begin() + 2, jpg.end());
  return out;
}

/// Mean of a block of the image (its channel 0).
double mean_block(const Image& img, int x0, int y0, int bw, int bh) {
  double s = 0;
  for (int y = y0; y < y0 + bh; ++y)
    for (int x = x0; x < x0 + bw; ++x)
      s += img.pixels[(std::size_t(y) * img.width + x) * img.channels];
  return s / (bw * bh);
}

TEST(JpegOrientation, AllEightBothEndiansBothWays) {
  // Stored: 64x32 gray, black except a white 16x16 square at the stored top-left corner.
  Image stored;
  stored.width = 64;
  stored.height = 32;
  stored.channels = 1;
  stored.pixels.assign(stored.byte_count(), 0);
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 16; ++x) stored.pixels[std::size_t(y) * 64 + x] = 255;
  const Bytes plain = make_jpeg(stored, MakeOpts{100});
  const Image raw = jpeg::decode(plain.data(), plain.size(), "plain");
  // Where the stored top-left corner shows, per the EXIF table (0th row / 0th column):
  // 1 top-left, 2 top-right, 3 bottom-right, 4 bottom-left, 5 top-left, 6 top-right,
  // 7 bottom-right, 8 bottom-left. 5..8 are 32x64 (portrait).
  const struct {
    bool right, bottom;
  } corner[9] = {{},
                 {false, false},
                 {true, false},
                 {true, true},
                 {false, true},
                 {false, false},
                 {true, false},
                 {true, true},
                 {false, true}};
  for (bool little : {true, false}) {
    for (int o = 1; o <= 8; ++o) {
      const Bytes j = with_app1(plain, make_exif(o, little));
      SCOPED_TRACE("orientation " + std::to_string(o) + (little ? " II" : " MM"));
      EXPECT_EQ(jpeg::read_info(j.data(), j.size(), "o").orientation, o);
      // apply (default): pixels in display orientation, tag rewritten to 1.
      const Image shown = jpeg::decode(j.data(), j.size(), "o.jpg");
      const bool portrait = o >= 5;
      ASSERT_EQ(shown.width, portrait ? 32 : 64);
      ASSERT_EQ(shown.height, portrait ? 64 : 32);
      const int cx = corner[o].right ? shown.width - 16 : 0;
      const int cy = corner[o].bottom ? shown.height - 16 : 0;
      EXPECT_GT(mean_block(shown, cx, cy, 16, 16), 240);
      // Only that corner is white: the opposite one is black.
      EXPECT_LT(mean_block(shown, shown.width - 16 - cx, shown.height - 16 - cy, 16, 16), 15);
      EXPECT_EQ(jpeg::exif_orientation(shown.exif), o == 1 ? 1 : 1);
      EXPECT_EQ(shown.exif.size(), make_exif(o, little).size());
      // The rotation is exact on the decoded pixels: same bytes as apply_orientation(raw).
      EXPECT_TRUE(shown.pixels == jpeg::apply_orientation(raw, o).pixels);
      // keep: pixels as stored, tag kept.
      jpeg::DecodeOptions keep;
      keep.orientation = jpeg::Orientation::keep;
      const Image kept = jpeg::decode(j.data(), j.size(), "o.jpg", keep);
      EXPECT_EQ(kept.width, 64);
      EXPECT_TRUE(kept.pixels == raw.pixels);
      EXPECT_EQ(jpeg::exif_orientation(kept.exif), o);
      // Encoded again: the EXIF goes with it (orientation 1 after apply, o after keep).
      const Bytes re = jpeg::encode(shown);
      EXPECT_EQ(jpeg::read_info(re.data(), re.size(), "re").orientation, 1);
      const Bytes rk = jpeg::encode(kept);
      EXPECT_EQ(jpeg::read_info(rk.data(), rk.size(), "rk").orientation, o);
    }
  }
}

// apply_orientation against the EXIF table written out pixel by pixel: every channel count the
// images have, sizes around and across its 64-sample tiles, odd and one-pixel ones.
TEST(JpegOrientation, ApplyOrientationMovesEveryPixelAsTheTableSays) {
  const int sizes[][2] = {{1, 1}, {7, 5}, {64, 64}, {65, 3}, {130, 67}, {3, 200}};
  for (int c = 1; c <= 4; ++c) {
    for (const auto& wh : sizes) {
      Image img;
      img.width = wh[0];
      img.height = wh[1];
      img.channels = c;
      img.pixels.resize(img.byte_count());
      for (std::size_t i = 0; i < img.pixels.size(); ++i)
        img.pixels[i] = std::uint8_t(i * 2654435761u >> 13);
      for (int o = 1; o <= 8; ++o) {
        SCOPED_TRACE(std::to_string(c) + " channels " + std::to_string(wh[0]) + "x" +
                     std::to_string(wh[1]) + " orientation " + std::to_string(o));
        const Image out = jpeg::apply_orientation(img, o);
        const bool turned = o >= 5;
        ASSERT_EQ(out.width, turned ? wh[1] : wh[0]);
        ASSERT_EQ(out.height, turned ? wh[0] : wh[1]);
        int bad = 0;
        for (int y = 0; y < out.height; ++y) {
          for (int x = 0; x < out.width; ++x) {
            const int tx = turned ? y : x, ty = turned ? x : y;
            const bool fx = o == 2 || o == 3 || o == 7 || o == 8;
            const bool fy = o == 3 || o == 4 || o == 6 || o == 7;
            const int sx = fx ? wh[0] - 1 - tx : tx, sy = fy ? wh[1] - 1 - ty : ty;
            for (int k = 0; k < c; ++k)
              bad += out.pixels[(std::size_t(y) * out.width + x) * c + k] !=
                     img.pixels[(std::size_t(sy) * wh[0] + sx) * c + k];
          }
        }
        EXPECT_EQ(bad, 0);
      }
    }
  }
}

TEST(JpegOrientation, AbsentOrBogusTagChangesNothing) {
  const Bytes plain = make_jpeg(pattern(24, 8, 3));
  const Image a = jpeg::decode(plain.data(), plain.size(), "a");
  EXPECT_TRUE(a.exif.empty());
  const Bytes j = with_app1(plain, make_exif(9, true));  // out of range
  const Image b = jpeg::decode(j.data(), j.size(), "b");
  EXPECT_EQ(b.width, 24);
  EXPECT_TRUE(a.pixels == b.pixels);
  Bytes junk = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 0xFF, 0xFF, 0xFF, 0x7F};  // IFD past end
  EXPECT_EQ(jpeg::exif_orientation(junk), 0);
  EXPECT_FALSE(jpeg::set_exif_orientation(junk, 1));
}

// ---- ICC ----

Bytes fake_icc(const char* space, std::size_t size = 600) {
  Bytes p(size);
  for (std::size_t i = 0; i < size; ++i) p[i] = std::uint8_t(i * 7 + 3);
  p[0] = std::uint8_t(size >> 24);
  p[1] = std::uint8_t(size >> 16);
  p[2] = std::uint8_t(size >> 8);
  p[3] = std::uint8_t(size);
  std::memcpy(&p[16], space, 4);
  return p;
}

TEST(JpegIcc, KeptThroughDecodeAndEncode) {
  Image rgb = pattern(32, 24, 3);
  rgb.icc = fake_icc("RGB ", 70000);  // more than one APP2 segment
  const Bytes j = jpeg::encode(rgb);
  const Image back = jpeg::decode(j.data(), j.size(), "icc.jpg");
  EXPECT_TRUE(back.icc == rgb.icc);
  // An RGB profile does not go into a gray JPEG (and a gray one not into a colour one).
  Image g = pattern(16, 16, 1);
  g.icc = rgb.icc;
  const Bytes jg = jpeg::encode(g);
  EXPECT_TRUE(jpeg::decode(jg.data(), jg.size(), "g").icc.empty());
  g.icc = fake_icc("GRAY");
  const Bytes jg2 = jpeg::encode(g);
  EXPECT_TRUE(jpeg::decode(jg2.data(), jg2.size(), "g").icc == g.icc);
}

TEST(JpegIcc, InsertMetadataIntoAnEncodedJpeg) {
  // An encoder that writes no metadata (here libjpeg via encode of a bare image), then
  // insert_metadata: libjpeg reads back the same EXIF and the same multi-chunk ICC profile.
  Image rgb = pattern(24, 16, 3);
  Bytes j = jpeg::encode(rgb);
  const Bytes exif = make_exif(6, false);
  const Bytes icc = fake_icc("RGB ", 150000);  // 3 APP2 chunks
  jpeg::insert_metadata(j, exif, icc, 3);
  jpeg::DecodeOptions keep;
  keep.orientation = jpeg::Orientation::keep;
  const Image back = jpeg::decode(j.data(), j.size(), "meta.jpg", keep);
  EXPECT_TRUE(back.exif == exif);
  EXPECT_TRUE(back.icc == icc);
  EXPECT_TRUE(back.pixels ==
              jpeg::decode(jpeg::encode(rgb).data(), jpeg::encode(rgb).size(), "x").pixels);
  // A gray output gets no RGB profile.
  Bytes g = jpeg::encode(pattern(8, 8, 1));
  const std::size_t before = g.size();
  jpeg::insert_metadata(g, {}, icc, 1);
  EXPECT_EQ(g.size(), before);
}

TEST(PngIcc, InsertedAfterIhdrAndReadBack) {
  Image rgb = pattern(20, 10, 3);
  rgb.icc = fake_icc("RGB ", 3000);
  const Bytes png = encode_image(rgb, ".png");
  ASSERT_GT(png.size(), 41u);
  EXPECT_EQ(std::memcmp(png.data() + 37, "iCCP", 4), 0);  // right after IHDR
  EXPECT_TRUE(png::read_iccp(png.data(), png.size()) == rgb.icc);
  // decode_image (stb + the CRC check of every chunk) accepts it and keeps the profile.
  const Image back = decode_image(png.data(), png.size(), "icc.png");
  EXPECT_TRUE(back.pixels == rgb.pixels);
  EXPECT_TRUE(back.icc == rgb.icc);
  // A PNG without one.
  rgb.icc.clear();
  const Bytes plain = encode_image(rgb, ".png");
  EXPECT_TRUE(png::read_iccp(plain.data(), plain.size()).empty());
}

TEST(JpegIo, SaveImageWritesLibjpegJpegWithSubsampling) {
  Image rgb = pattern(40, 40, 3);
  const Bytes j444 = encode_image(rgb, ".jpg", 90, jpeg::Subsampling::s444);
  const Bytes j420 = encode_image(rgb, ".JPEG", 90);
  EXPECT_EQ(jpeg::read_info(j444.data(), j444.size(), "a").subsampling, "4:4:4");
  EXPECT_EQ(jpeg::read_info(j420.data(), j420.size(), "b").subsampling, "4:2:0");
}

}  // namespace
}  // namespace histeq
