// test_jpeg_planes.cpp — a colour JPEG's stored planes (jpeg::decode_planes, encode_planes,
// planes_route) and luma mode in them (equalize_jpeg_planes; the executor and the single-file
// CLI on the CPU backend). CPU only. The references are libjpeg's own: its decode to YCbCr
// without fancy upsampling (replicated chroma samples are the stored ones), and the histogram,
// LUT and round trip computed here from those samples.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "histeq/error.hpp"
#include "histeq/executor.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/jpeg_planes.hpp"
#include "histeq/lut.hpp"
#include "histeq/match.hpp"
#include "jpeg_test_support.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {
namespace fs = std::filesystem;
using test::Bytes;
using test::make_jpeg;
using test::MakeOpts;
using test::pattern;

/// libjpeg's decode to YCbCr, chroma replicated (no fancy upsampling): 3 bytes per pixel.
Image ycbcr_reference(const Bytes& j) {
  jpeg_decompress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, j.data(), static_cast<unsigned long>(j.size()));
  jpeg_read_header(&c, TRUE);
  c.out_color_space = JCS_YCbCr;
  c.do_fancy_upsampling = FALSE;
  jpeg_start_decompress(&c);
  Image img;
  img.width = int(c.output_width);
  img.height = int(c.output_height);
  img.channels = 3;
  img.pixels.resize(img.byte_count());
  while (c.output_scanline < c.output_height) {
    JSAMPROW row = img.pixels.data() + std::size_t(c.output_scanline) * img.width * 3;
    jpeg_read_scanlines(&c, &row, 1);
  }
  jpeg_finish_decompress(&c);
  jpeg_destroy_decompress(&c);
  return img;
}

struct Sampling {
  int h, v;
  const char* name;
};
const Sampling kSamplings[] = {{1, 1, "4:4:4"}, {2, 1, "4:2:2"}, {2, 2, "4:2:0"}};
const int kSizes[][2] = {{1, 1}, {7, 5}, {16, 16}, {17, 9}, {33, 31}, {64, 8}, {129, 67}};

TEST(JpegPlanes, DecodeGivesTheStoredSamplesAndPadsWithTheEdge) {
  for (const Sampling& smp : kSamplings) {
    for (const auto& sz : kSizes) {
      for (bool progressive : {false, true}) {
        MakeOpts o;
        o.h_samp = smp.h;
        o.v_samp = smp.v;
        o.progressive = progressive;
        const Bytes j = make_jpeg(pattern(sz[0], sz[1], 3, unsigned(sz[0] * 7 + sz[1])), o);
        const std::string tag = std::string(smp.name) + " " + std::to_string(sz[0]) + "x" +
                                std::to_string(sz[1]) + (progressive ? " progressive" : "");
        const jpeg::Planes p = jpeg::decode_planes(j.data(), j.size(), "t.jpg");
        const Image ref = ycbcr_reference(j);
        ASSERT_EQ(p.width, sz[0]) << tag;
        ASSERT_EQ(p.height, sz[1]) << tag;
        const int fx[3] = {1, smp.h, smp.h}, fy[3] = {1, smp.v, smp.v};
        for (int k = 0; k < 3; ++k) {
          const jpeg::Plane& pl = p.plane[k];
          ASSERT_EQ(pl.width, (sz[0] + fx[k] - 1) / fx[k]) << tag << " plane " << k;
          ASSERT_EQ(pl.height, (sz[1] + fy[k] - 1) / fy[k]) << tag << " plane " << k;
          ASSERT_GE(pl.stride, std::size_t(pl.width)) << tag;
          ASSERT_GE(pl.rows, pl.height) << tag;
          EXPECT_EQ(pl.stride % 8, 0u) << tag;
          EXPECT_EQ(pl.rows % 8, 0) << tag;
          long bad = 0;
          for (int y = 0; y < sz[1]; ++y)
            for (int x = 0; x < sz[0]; ++x)
              bad += pl.row(y / fy[k])[x / fx[k]] !=
                     ref.pixels[(std::size_t(y) * sz[0] + std::size_t(x)) * 3 + std::size_t(k)];
          EXPECT_EQ(bad, 0) << tag << " plane " << k << ": samples unlike libjpeg's";
          for (int y = 0; y < pl.rows; ++y)
            for (std::size_t x = 0; x < pl.stride; ++x) {
              const int sy = std::min(y, pl.height - 1);
              const std::size_t sx = std::min(x, std::size_t(pl.width - 1));
              if (pl.row(y)[x] != pl.row(sy)[sx]) {
                ADD_FAILURE() << tag << " plane " << k << ": padding at " << x << "," << y
                              << " does not repeat the edge";
                y = pl.rows;
                break;
              }
            }
        }
      }
    }
  }
}

TEST(JpegPlanes, RouteTakesWhatNeedsNoUpsamplingOnceTurned) {
  const Image img = pattern(40, 24, 3);
  auto info_of = [](const Bytes& j) {
    jpeg::Info i;
    EXPECT_TRUE(jpeg::read_header(j.data(), j.size(), &i));
    return i;
  };
  const jpeg::EncodeOptions to444{95, jpeg::Subsampling::s444}, to422{95, jpeg::Subsampling::s422},
      to420{95, jpeg::Subsampling::s420};
  const auto apply = jpeg::Orientation::apply;
  for (const Sampling& smp : kSamplings) {
    MakeOpts o;
    o.h_samp = smp.h;
    o.v_samp = smp.v;
    const jpeg::Info i = info_of(make_jpeg(img, o));
    EXPECT_EQ(jpeg::planes_route(i, to420, apply), true) << smp.name;
    EXPECT_EQ(jpeg::planes_route(i, to422, apply), smp.v == 1) << smp.name;
    EXPECT_EQ(jpeg::planes_route(i, to444, apply), smp.h == 1) << smp.name;
  }
  EXPECT_FALSE(jpeg::planes_route(info_of(make_jpeg(pattern(40, 24, 1))), to420, apply));
  MakeOpts rgb;
  rgb.rgb_stored = true;
  EXPECT_FALSE(jpeg::planes_route(info_of(make_jpeg(img, rgb)), to420, apply));
  MakeOpts h1v2;  // 4:4:0 is none of the three
  h1v2.h_samp = 1;
  h1v2.v_samp = 2;
  EXPECT_FALSE(jpeg::planes_route(info_of(make_jpeg(img, h1v2)), to420, apply));
  // An EXIF orientation to apply turns the planes: a transpose makes 4:2:2 planes 4:4:0 (to 4:2:0
  // only); an axis the orientation flips must hold whole chroma samples, else the decoded-pixel
  // route.
  for (const Sampling& smp : kSamplings) {
    for (int o = 2; o <= 8; ++o) {
      MakeOpts mo;
      mo.h_samp = smp.h;
      mo.v_samp = smp.v;
      jpeg::Info i = info_of(make_jpeg(img, mo));  // 40 x 24: whole chroma samples
      i.orientation = o;
      const bool turned = o >= 5;
      SCOPED_TRACE(std::string(smp.name) + " orientation " + std::to_string(o));
      EXPECT_TRUE(jpeg::planes_route(i, to420, apply));
      EXPECT_EQ(jpeg::planes_route(i, to422, apply), (turned ? smp.h : smp.v) == 1);
      EXPECT_EQ(jpeg::planes_route(i, to444, apply), smp.h == 1 && smp.v == 1);
      EXPECT_EQ(jpeg::planes_route(i, to444, jpeg::Orientation::keep), smp.h == 1);
      jpeg::Info odd = info_of(make_jpeg(pattern(41, 25, 3), mo));
      odd.orientation = o;
      const bool flips_columns = o == 2 || o == 3 || o == 7 || o == 8;
      const bool flips_rows = o == 3 || o == 4 || o == 6 || o == 7;
      EXPECT_EQ(jpeg::planes_route(odd, to420, apply),
                (!flips_columns || smp.h == 1) && (!flips_rows || smp.v == 1));
      EXPECT_TRUE(jpeg::planes_route(odd, to420, jpeg::Orientation::keep));
    }
  }
  // the bytes-level route: luma mode only
  const Bytes j = make_jpeg(img);
  EqualizeOptions eo;
  EXPECT_TRUE(jpeg_planes_route(j.data(), j.size(), eo, to420));
  eo.mode = Mode::rgb;
  EXPECT_FALSE(jpeg_planes_route(j.data(), j.size(), eo, to420));
  eo.mode = Mode::luma;
  EXPECT_TRUE(jpeg_planes_route(j.data(), j.size(), eo, to420));
  eo.kernel = "columns";  // a kernel named: the GPU was asked for
  EXPECT_FALSE(jpeg_planes_route(j.data(), j.size(), eo, to420));
  EXPECT_TRUE(jpeg_planes_backend(Backend::cpu));
  EXPECT_TRUE(jpeg_planes_backend(Backend::automatic));
  EXPECT_FALSE(jpeg_planes_backend(Backend::cuda));
}

/// The chroma a 4:4:4 plane averages down to, written out from jcsample.c's rule: a reference
/// independent of encode_planes' vector loop (wide planes take it, narrow ones its scalar tail).
std::uint8_t averaged(const jpeg::Plane& c, int x, int y, int fx, int fy) {
  const auto at = [&](int xx, int yy) {
    return int(c.row(std::min(yy, c.height - 1))[std::min(xx, c.width - 1)]);
  };
  if (fx == 2 && fy == 2)
    return std::uint8_t((at(2 * x, 2 * y) + at(2 * x + 1, 2 * y) + at(2 * x, 2 * y + 1) +
                         at(2 * x + 1, 2 * y + 1) + 1 + (x & 1)) >>
                        2);
  if (fx == 2) return std::uint8_t((at(2 * x, y) + at(2 * x + 1, y) + (x & 1)) >> 1);
  return std::uint8_t((at(x, 2 * y) + at(x, 2 * y + 1) + 1) >> 1);  // int_downsample
}

TEST(JpegPlanes, AverageDownIsJcsamplesRuleOnEverySizeAndFactor) {
  // Widths around the 16- and 32-sample steps of the vector loop and its scalar tail.
  for (int w : {1, 2, 3, 15, 16, 17, 31, 32, 33, 47, 64, 65, 100}) {
    for (int h : {1, 2, 3, 9}) {
      jpeg::Plane src;
      src.width = w;
      src.height = h;
      src.stride = (std::size_t(w) + 7) / 8 * 8;
      src.rows = (h + 7) / 8 * 8;
      src.data.reset(new std::uint8_t[src.stride * std::size_t(src.rows)]);
      unsigned s = unsigned(w * 31 + h);
      for (std::size_t i = 0; i < src.stride * std::size_t(src.rows); ++i) {
        s = s * 1103515245u + 12345u;
        src.data[i] = std::uint8_t(s >> 23);
      }
      for (const auto& f :
           {std::array<int, 2>{2, 2}, std::array<int, 2>{2, 1}, std::array<int, 2>{1, 2}}) {
        jpeg::Plane dst;
        jpeg::average_down(src, f[0], f[1], &dst);
        ASSERT_EQ(dst.width, (w + f[0] - 1) / f[0]);
        ASSERT_EQ(dst.height, (h + f[1] - 1) / f[1]);
        long bad = 0;
        for (int y = 0; y < dst.height; ++y)
          for (int x = 0; x < dst.width; ++x)
            bad += dst.row(y)[x] != averaged(src, x, y, f[0], f[1]);
        EXPECT_EQ(bad, 0) << w << "x" << h << " by " << f[0] << "x" << f[1];
      }
    }
  }
  jpeg::Plane src, dst;
  EXPECT_THROW(jpeg::average_down(src, 2, 2, &dst), Error);
}

TEST(JpegPlanes, EncodeKeepsOrAveragesTheChromaAndWritesTheAskedSampling) {
  // Quality 100: the round trip's only loss is the DCT's rounding (a level or two).
  const struct {
    Sampling in;
    jpeg::Subsampling out;
    const char* out_name;
    int fx, fy;  // chroma averaging
  } cases[] = {{{1, 1, "4:4:4"}, jpeg::Subsampling::s444, "4:4:4", 1, 1},
               {{1, 1, "4:4:4"}, jpeg::Subsampling::s422, "4:2:2", 2, 1},
               {{1, 1, "4:4:4"}, jpeg::Subsampling::s420, "4:2:0", 2, 2},
               {{2, 1, "4:2:2"}, jpeg::Subsampling::s422, "4:2:2", 1, 1},
               {{2, 1, "4:2:2"}, jpeg::Subsampling::s420, "4:2:0", 1, 2},
               {{2, 2, "4:2:0"}, jpeg::Subsampling::s420, "4:2:0", 1, 1}};
  for (const auto& cs : cases) {
    for (const auto& sz :
         {std::array<int, 2>{1, 1}, std::array<int, 2>{35, 19}, std::array<int, 2>{131, 70}}) {
      MakeOpts o;
      o.h_samp = cs.in.h;
      o.v_samp = cs.in.v;
      const Bytes j = make_jpeg(pattern(sz[0], sz[1], 3, 5), o);
      const jpeg::Planes in = jpeg::decode_planes(j.data(), j.size(), "in.jpg");
      const Bytes out = jpeg::encode_planes(in, {100, cs.out});
      const std::string tag = std::string(cs.in.name) + " -> " + cs.out_name + " " +
                              std::to_string(sz[0]) + "x" + std::to_string(sz[1]);
      jpeg::Info info;
      ASSERT_TRUE(jpeg::read_header(out.data(), out.size(), &info)) << tag;
      EXPECT_EQ(info.subsampling, cs.out_name) << tag;
      EXPECT_EQ(info.width, sz[0]) << tag;
      EXPECT_EQ(info.height, sz[1]) << tag;
      const jpeg::Planes back = jpeg::decode_planes(out.data(), out.size(), "out.jpg");
      int worst = 0;
      for (int k = 0; k < 3; ++k) {
        const jpeg::Plane& b = back.plane[k];
        const int fx = k == 0 ? 1 : cs.fx, fy = k == 0 ? 1 : cs.fy;
        for (int y = 0; y < b.height; ++y)
          for (int x = 0; x < b.width; ++x) {
            const int want =
                fx == 1 && fy == 1 ? in.plane[k].row(y)[x] : averaged(in.plane[k], x, y, fx, fy);
            worst = std::max(worst, std::abs(int(b.row(y)[x]) - want));
          }
      }
      EXPECT_LE(worst, 2) << tag;
    }
  }
  // Upsampling is refused, with the reason.
  MakeOpts o420;
  const Bytes j = make_jpeg(pattern(32, 32, 3), o420);
  const jpeg::Planes p = jpeg::decode_planes(j.data(), j.size(), "in.jpg");
  EXPECT_THROW(jpeg::encode_planes(p, {95, jpeg::Subsampling::s444}), Error);
  EXPECT_THROW(jpeg::encode_planes(p, {0, jpeg::Subsampling::s420}), UsageError);
}

/// decode_planes refuses j cut to two thirds, and j over a pixel limit one below its 48 x 32, with
/// an Error; the cut one names `name`.
void expect_cut_and_large_refused(const Bytes& j, const std::string& name) {
  const Bytes cut(j.begin(), j.begin() + std::ptrdiff_t(j.size() * 2 / 3));
  try {
    jpeg::decode_planes(cut.data(), cut.size(), name);
    ADD_FAILURE() << "a truncated file decoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
  jpeg::DecodeOptions small;
  small.max_pixels = 48 * 32 - 1;
  EXPECT_THROW(jpeg::decode_planes(j.data(), j.size(), "big_" + name, small), Error);
}

TEST(JpegPlanes, MetadataTravelsAndBrokenFilesAreRefusedByName) {
  Image img = pattern(48, 32, 3);
  Bytes j = make_jpeg(img);
  // EXIF (orientation 1) and an RGB ICC profile, as jpeg::insert_metadata writes them
  std::vector<std::uint8_t> exif = {'E',  'x',  'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0,
                                    0x12, 0x01, 3,   0,   1, 0, 0,   0,   1,  0, 0, 0, 0, 0, 0, 0};
  std::vector<std::uint8_t> icc(200, 7);
  std::memcpy(icc.data() + 16, "RGB ", 4);
  jpeg::insert_metadata(j, exif, icc, 3);
  const jpeg::Planes p = jpeg::decode_planes(j.data(), j.size(), "meta.jpg");
  EXPECT_EQ(p.exif, exif);
  EXPECT_EQ(p.icc, icc);
  const Bytes out = jpeg::encode_planes(p, {95, jpeg::Subsampling::s420});
  const Image back = jpeg::decode(out.data(), out.size(), "out.jpg");
  EXPECT_EQ(back.exif, exif);
  EXPECT_EQ(back.icc, icc);
  expect_cut_and_large_refused(j, "cut.jpg");
  const Bytes gray = make_jpeg(pattern(8, 8, 1));
  EXPECT_THROW(jpeg::decode_planes(gray.data(), gray.size(), "gray.jpg"), Error);
}

TEST(JpegPlanes, EqualizesTheStoredYWithTheFormulasLut) {
  for (const Sampling& smp : kSamplings) {
    for (Formula f : {Formula::opencv, Formula::exact}) {
      MakeOpts o;
      o.h_samp = smp.h;
      o.v_samp = smp.v;
      const Bytes j = make_jpeg(pattern(97, 61, 3, 11), o);
      const jpeg::Planes in = jpeg::decode_planes(j.data(), j.size(), "in.jpg");
      Histogram want(256, 0);
      for (int y = 0; y < in.plane[0].height; ++y)
        for (int x = 0; x < in.plane[0].width; ++x) ++want[in.plane[0].row(y)[x]];
      EqualizeOptions eo;
      eo.formula = f;
      EqualizeReport rep;
      int w = 0, h = 0;
      const jpeg::EncodeOptions enc{100, jpeg::Subsampling::s420};
      Bytes out;
      ASSERT_TRUE(equalize_jpeg_planes(j.data(), j.size(), "in.jpg", eo, enc, kDefaultMaxPixels,
                                       &out, &rep, &w, &h));
      EXPECT_EQ(w, 97);
      EXPECT_EQ(h, 61);
      EXPECT_EQ(rep.backend, "cpu");
      EXPECT_EQ(rep.mode, Mode::luma);
      ASSERT_EQ(rep.histograms.size(), 1u);
      EXPECT_EQ(rep.histograms[0], want) << smp.name;
      ASSERT_EQ(rep.luts.size(), 1u);
      const Lut lut = make_lut(want.data(), f);
      EXPECT_EQ(rep.luts[0], lut);
      const jpeg::Planes back = jpeg::decode_planes(out.data(), out.size(), "out.jpg");
      int worst = 0;
      for (int y = 0; y < 61; ++y)
        for (int x = 0; x < 97; ++x)
          worst = std::max(
              worst, std::abs(int(back.plane[0].row(y)[x]) - int(lut[in.plane[0].row(y)[x]])));
      EXPECT_LE(worst, 2) << smp.name;
    }
  }
}

// Matching on the stored planes: Y's LUT is match_lut of Y's histogram and the reference's.
TEST(JpegPlanes, MatchesTheStoredYToAReference) {
  Histogram ref(256, 0);
  for (int v = 40; v < 220; ++v) ref[std::size_t(v)] = std::uint64_t(1 + (v * 37) % 11);
  for (const Sampling& smp : kSamplings) {
    MakeOpts o;
    o.h_samp = smp.h;
    o.v_samp = smp.v;
    const Bytes j = make_jpeg(pattern(97, 61, 3, 13), o);
    const jpeg::Planes in = jpeg::decode_planes(j.data(), j.size(), "in.jpg");
    Histogram src(256, 0);
    for (int y = 0; y < in.plane[0].height; ++y)
      for (int x = 0; x < in.plane[0].width; ++x) ++src[in.plane[0].row(y)[x]];
    EqualizeOptions eo;
    eo.reference = std::make_shared<const std::vector<Histogram>>(1, ref);
    EqualizeReport rep;
    Bytes out;
    ASSERT_TRUE(equalize_jpeg_planes(j.data(), j.size(), "in.jpg", eo,
                                     {100, jpeg::Subsampling::s420}, kDefaultMaxPixels, &out, &rep,
                                     nullptr, nullptr));
    ASSERT_EQ(rep.luts.size(), 1u);
    const Lut lut = match_lut(src.data(), ref.data());
    EXPECT_EQ(rep.luts[0], lut) << smp.name;
    EXPECT_NE(lut, make_lut(src.data(), Formula::opencv)) << "the test cannot tell the two apart";
    const jpeg::Planes back = jpeg::decode_planes(out.data(), out.size(), "out.jpg");
    int worst = 0;
    for (int y = 0; y < 61; ++y)
      for (int x = 0; x < 97; ++x)
        worst = std::max(worst,
                         std::abs(int(back.plane[0].row(y)[x]) - int(lut[in.plane[0].row(y)[x]])));
    EXPECT_LE(worst, 2) << smp.name;
  }
}

/// The JPEG's marker segments with `seg` inserted right after the frame header (SOF0), and its
/// JFIF APP0 dropped when `drop_jfif` (libjpeg trusts JFIF over an Adobe marker).
Bytes with_segment_after_sof(const Bytes& j, const Bytes& seg, bool drop_jfif) {
  Bytes out(j.begin(), j.begin() + 2);
  std::size_t pos = 2;
  while (pos + 4 <= j.size()) {
    const std::uint8_t m = j[pos + 1];
    if (m == 0xDA) {
      out.insert(out.end(), j.begin() + std::ptrdiff_t(pos), j.end());
      break;
    }
    const std::size_t len = std::size_t(j[pos + 2]) << 8 | j[pos + 3];
    if (!(drop_jfif && m == 0xE0))
      out.insert(out.end(), j.begin() + std::ptrdiff_t(pos),
                 j.begin() + std::ptrdiff_t(pos + 2 + len));
    if (m == 0xC0) out.insert(out.end(), seg.begin(), seg.end());
    pos += 2 + len;
  }
  return out;
}

/// An APP1 EXIF segment (little-endian TIFF) whose IFD0 holds only Orientation = o.
Bytes exif_segment(int o) {
  const Bytes payload = {'E', 'x',  'i',  'f', 0,
                         0,   'I',  'I',  42,  0,
                         8,   0,    0,    0,   1,
                         0,   0x12, 0x01, 3,   0,
                         1,   0,    0,    0,   std::uint8_t(o),
                         0,   0,    0,    0,   0,
                         0,   0};
  Bytes seg = {0xFF, 0xE1, 0, std::uint8_t(payload.size() + 2)};
  seg.insert(seg.end(), payload.begin(), payload.end());
  return seg;
}

TEST(JpegPlanes, MarkersAfterTheFrameHeaderTakeTheFileOffTheRoute) {
  const Bytes base = make_jpeg(pattern(40, 24, 3, 9));
  // An Adobe APP14 with transform 0 after the SOF (no JFIF): libjpeg reads RGB components.
  const Bytes adobe = {0xFF, 0xEE, 0, 14, 'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0, 0};
  const Bytes rgb = with_segment_after_sof(base, adobe, true);
  // EXIF orientation 6 (rotate 90 clockwise) after the SOF: the header walk does not see it, the
  // pixels must be rotated.
  const Bytes rotated =
      with_segment_after_sof(make_jpeg(pattern(41, 24, 3, 9)), exif_segment(6), false);
  const jpeg::EncodeOptions enc{95, jpeg::Subsampling::s420};
  EqualizeOptions eo;
  for (const Bytes* j : {&rgb, &rotated}) {
    EXPECT_TRUE(jpeg_planes_route(j->data(), j->size(), eo, enc)) << "the header walk sees none";
    EXPECT_EQ(jpeg::decode_planes(j->data(), j->size(), "x.jpg").width, 0);
    Bytes out;
    EXPECT_FALSE(equalize_jpeg_planes(j->data(), j->size(), "x.jpg", eo, enc, kDefaultMaxPixels,
                                      &out, nullptr, nullptr, nullptr));
    EXPECT_TRUE(out.empty());
  }
  jpeg::DecodeOptions keep;
  keep.orientation = jpeg::Orientation::keep;
  EXPECT_EQ(jpeg::decode_planes(rotated.data(), rotated.size(), "x.jpg", keep).width, 41);
  // The same orientation after the SOF of even-sized files: the header walk (planes_route, the
  // executor's plan) saw none, so the planes are not turned behind its back: a 4:2:2 file turned
  // would be 4:4:0, which a 4:2:2 output cannot take. The decoded-pixel route instead.
  for (const Sampling& smp : kSamplings) {
    MakeOpts mo;
    mo.h_samp = smp.h;
    mo.v_samp = smp.v;
    const Bytes even =
        with_segment_after_sof(make_jpeg(pattern(40, 24, 3, 9), mo), exif_segment(6), false);
    const jpeg::EncodeOptions to422{95, jpeg::Subsampling::s422};
    EXPECT_TRUE(jpeg_planes_route(even.data(), even.size(), eo, to422) == (smp.v == 1)) << smp.name;
    EXPECT_EQ(jpeg::decode_planes(even.data(), even.size(), "x.jpg").width, 0) << smp.name;
    Bytes out;
    EXPECT_FALSE(equalize_jpeg_planes(even.data(), even.size(), "x.jpg", eo, to422,
                                      kDefaultMaxPixels, &out, nullptr, nullptr, nullptr))
        << smp.name;
    EXPECT_EQ(jpeg::decode_planes(even.data(), even.size(), "x.jpg", keep).width, 40);
  }
}

/// The stored sample (sx, sy) shown at (x, y) under EXIF orientation o, in a w x h image: the
/// EXIF table written out (0th row / 0th column), independent of the library's tiles.
void stored_sample(int o, int w, int h, int x, int y, int* sx, int* sy) {
  const int tx = o >= 5 ? y : x, ty = o >= 5 ? x : y;  // 5..8: the transpose first
  const bool flip_x = o == 2 || o == 3 || o == 7 || o == 8;
  const bool flip_y = o == 3 || o == 4 || o == 6 || o == 7;
  *sx = flip_x ? w - 1 - tx : tx;
  *sy = flip_y ? h - 1 - ty : ty;
}

// decode_planes with the EXIF orientation applied: each plane is the stored plane turned sample
// for sample (the chroma with its luma), in the geometry a file of the turned shape decodes to,
// padded with its edge; the size turns, the sampling factors swap for 5..8, and the EXIF says 1.
// An odd size turns where the orientation flips no axis with a part-covered chroma sample; else
// the decoded-pixel route (no planes).
TEST(JpegPlanes, AnExifOrientationTurnsTheStoredPlanes) {
  const int sizes[][2] = {{40, 24}, {34, 22}, {64, 48}, {130, 66}, {41, 24}, {40, 25}, {33, 31}};
  for (const Sampling& smp : kSamplings) {
    for (const auto& wh : sizes) {
      MakeOpts mo;
      mo.h_samp = smp.h;
      mo.v_samp = smp.v;
      const Bytes plain = make_jpeg(pattern(wh[0], wh[1], 3, 11), mo);
      for (int o = 1; o <= 8; ++o) {
        SCOPED_TRACE(std::string(smp.name) + " " + std::to_string(wh[0]) + "x" +
                     std::to_string(wh[1]) + " orientation " + std::to_string(o));
        Bytes j = plain;
        const Bytes seg = exif_segment(o);  // its payload: insert_metadata writes the marker
        jpeg::insert_metadata(j, std::vector<std::uint8_t>(seg.begin() + 4, seg.end()), {}, 3);
        jpeg::DecodeOptions keep;
        keep.orientation = jpeg::Orientation::keep;
        const jpeg::Planes stored = jpeg::decode_planes(j.data(), j.size(), "s.jpg", keep);
        const jpeg::Planes shown = jpeg::decode_planes(j.data(), j.size(), "o.jpg");
        const bool flips_columns = o == 2 || o == 3 || o == 7 || o == 8;
        const bool flips_rows = o == 3 || o == 4 || o == 6 || o == 7;
        if ((flips_columns && wh[0] % smp.h != 0) || (flips_rows && wh[1] % smp.v != 0)) {
          EXPECT_EQ(shown.width, 0);
          continue;
        }
        const bool turned = o >= 5;
        ASSERT_EQ(shown.width, turned ? wh[1] : wh[0]);
        ASSERT_EQ(shown.height, turned ? wh[0] : wh[1]);
        EXPECT_EQ(jpeg::exif_orientation(shown.exif), 1);
        EXPECT_EQ(jpeg::exif_orientation(stored.exif), o);
        // the geometry of a file of the turned shape: whole MCUs in every plane
        const int mh = turned ? smp.v : smp.h, mv = turned ? smp.h : smp.v;
        const int mcus_x = (shown.width + 8 * mh - 1) / (8 * mh);
        const int mcus_y = (shown.height + 8 * mv - 1) / (8 * mv);
        for (int k = 0; k < 3; ++k) {
          const jpeg::Plane& a = stored.plane[k];
          const jpeg::Plane& b = shown.plane[k];
          SCOPED_TRACE("plane " + std::to_string(k));
          EXPECT_EQ(b.h, turned ? a.v : a.h);
          EXPECT_EQ(b.v, turned ? a.h : a.v);
          ASSERT_EQ(b.width, turned ? a.height : a.width);
          ASSERT_EQ(b.height, turned ? a.width : a.height);
          EXPECT_EQ(b.stride, std::size_t(mcus_x * b.h * 8));
          EXPECT_EQ(b.rows, mcus_y * b.v * 8);
          int bad = 0;
          for (int y = 0; y < b.rows; ++y) {
            for (int x = 0; x < int(b.stride); ++x) {
              int sx = 0, sy = 0;  // past the edge: the edge sample
              stored_sample(o, a.width, a.height, std::min(x, b.width - 1),
                            std::min(y, b.height - 1), &sx, &sy);
              bad += b.row(y)[x] != a.row(sy)[sx];
            }
          }
          EXPECT_EQ(bad, 0);
        }
      }
    }
  }
}

// A turned file's defects are the stored file's: a truncated one, one over the pixel limit
// (whichever way it turns) and a bogus orientation (9: none) are refused or ignored as before.
TEST(JpegPlanes, ATurnedFileIsCheckedAsTheStoredOne) {
  Bytes j = make_jpeg(pattern(48, 32, 3, 17));
  const Bytes seg6 = exif_segment(6);
  jpeg::insert_metadata(j, std::vector<std::uint8_t>(seg6.begin() + 4, seg6.end()), {}, 3);
  expect_cut_and_large_refused(j, "cut_turned.jpg");
  Bytes bogus = make_jpeg(pattern(48, 32, 3, 17));
  const Bytes seg9 = exif_segment(9);
  jpeg::insert_metadata(bogus, std::vector<std::uint8_t>(seg9.begin() + 4, seg9.end()), {}, 3);
  const jpeg::Planes p = jpeg::decode_planes(bogus.data(), bogus.size(), "bogus.jpg");
  EXPECT_EQ(p.width, 48);
  EXPECT_EQ(p.height, 32);
  jpeg::Info info;
  ASSERT_TRUE(jpeg::read_header(bogus.data(), bogus.size(), &info));
  EXPECT_EQ(info.orientation, 1);
}

// A turned file through equalize_jpeg_planes: the LUT of the stored Y (turning moves samples,
// not their counts), written turned with the EXIF orientation 1, as the stored file's planes
// equalized and turned would be.
TEST(JpegPlanes, EqualizesATurnedFileInItsPlanes) {
  // (width, height, orientation): a quarter turn; a transpose alone of odd sizes; a quarter turn
  // that flips the even columns of an odd-height 4:2:0 file
  const int cases[][3] = {{64, 40, 8}, {41, 25, 5}, {48, 25, 8}};
  for (const auto& c : cases) {
    const int sw = c[0], sh = c[1], o = c[2];
    SCOPED_TRACE(std::to_string(sw) + "x" + std::to_string(sh) + " orientation " +
                 std::to_string(o));
    Bytes j = make_jpeg(pattern(sw, sh, 3, 13));
    const Bytes plain = j;
    const Bytes seg = exif_segment(o);
    jpeg::insert_metadata(j, std::vector<std::uint8_t>(seg.begin() + 4, seg.end()), {}, 3);
    const jpeg::EncodeOptions enc{95, jpeg::Subsampling::s420};
    EqualizeOptions eo;
    ASSERT_TRUE(jpeg_planes_route(j.data(), j.size(), eo, enc));
    Bytes got, upright;
    EqualizeReport rep, rep_plain;
    int w = 0, h = 0;
    ASSERT_TRUE(equalize_jpeg_planes(j.data(), j.size(), "t.jpg", eo, enc, kDefaultMaxPixels, &got,
                                     &rep, &w, &h));
    EXPECT_EQ(w, sh);
    EXPECT_EQ(h, sw);
    ASSERT_TRUE(equalize_jpeg_planes(plain.data(), plain.size(), "p.jpg", eo, enc,
                                     kDefaultMaxPixels, &upright, &rep_plain, nullptr, nullptr));
    // turning moves samples, not their counts
    EXPECT_EQ(rep.histograms, rep_plain.histograms);
    EXPECT_EQ(rep.luts, rep_plain.luts);
    const jpeg::Planes out = jpeg::decode_planes(got.data(), got.size(), "got.jpg");
    EXPECT_EQ(out.width, sh);
    EXPECT_EQ(jpeg::exif_orientation(out.exif), 1);
    // the output's pixels: the stored output's turned, up to the encoders' rounding on a turned
    // block grid (loose: the sample-exact mapping is AnExifOrientationTurnsTheStoredPlanes')
    const Image shown = jpeg::decode(got.data(), got.size(), "got.jpg");
    const Image stored = jpeg::decode(upright.data(), upright.size(), "upright.jpg");
    ASSERT_EQ(shown.width, sh);
    ASSERT_EQ(shown.height, sw);
    double diff = 0;
    for (int y = 0; y < shown.height; ++y)
      for (int x = 0; x < shown.width; ++x) {
        int sx = 0, sy = 0;
        stored_sample(o, stored.width, stored.height, x, y, &sx, &sy);
        for (int k = 0; k < 3; ++k)
          diff += std::abs(int(shown.pixels[(std::size_t(y) * sh + x) * 3 + k]) -
                           int(stored.pixels[(std::size_t(sy) * sw + sx) * 3 + k]));
      }
    EXPECT_LT(diff / (double(sw) * sh * 3), 1.5);
  }
}

Bytes read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

int run(const std::string& cmd) {
  const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

class JpegPlanesFiles : public test::TempDirTest {
 protected:
  JpegPlanesFiles() : TempDirTest("histeq-planes") {}
};

TEST_F(JpegPlanesFiles, CliAndExecutorWriteTheSameBytesOnTheCpuBackend) {
  const fs::path dir = dir_;
  fs::create_directories(dir / "in");
  const char* names[] = {"a444.jpg", "b420.jpg", "c422.jpg", "gray.jpg", "d420_turned.jpg"};
  const int hv[][2] = {{1, 1}, {2, 2}, {2, 1}, {0, 0}, {2, 2}};
  for (int i = 0; i < 5; ++i) {
    MakeOpts o;
    o.h_samp = std::max(1, hv[i][0]);
    o.v_samp = std::max(1, hv[i][1]);
    Bytes j = make_jpeg(pattern(i == 4 ? 202 : 203, 118, hv[i][0] ? 3 : 1, unsigned(i + 3)), o);
    if (i == 4) {  // EXIF orientation 6: the planes turn (118 x 202)
      const Bytes seg = exif_segment(6);
      jpeg::insert_metadata(j, std::vector<std::uint8_t>(seg.begin() + 4, seg.end()), {}, 3);
    }
    std::ofstream(dir / "in" / names[i], std::ios::binary)
        .write(reinterpret_cast<const char*>(j.data()), std::streamsize(j.size()));
  }
  const std::string cli = HISTEQ_CLI;
  ASSERT_EQ(run(cli + " equalize " + (dir / "in").string() + " -o " + (dir / "batch").string() +
                " --backend cpu"),
            0);
  for (const char* n : names) {
    const fs::path one = dir / (std::string("one_") + n);
    ASSERT_EQ(run(cli + " equalize " + (dir / "in" / n).string() + " -o " + one.string() +
                  " --backend cpu"),
              0)
        << n;
    EXPECT_EQ(read_all(one), read_all(dir / "batch" / n)) << n;
  }
  // the planes route names itself; the gray file takes the decoded-pixel route
  ExecutorOptions eo;
  eo.op.equalize.backend = Backend::cpu;
  eo.jobs = 2;
  Executor ex(eo);
  std::vector<WorkItem> items;
  for (const char* n : names)
    items.push_back({(dir / "in" / n).string(), (dir / "exec" / n).string(), ""});
  fs::create_directories(dir / "exec");
  std::map<std::string, std::string> decoder;
  ex.run(items, [&](const ItemReport& r) {
    EXPECT_TRUE(r.ok) << r.input << ": " << r.error;
    decoder[fs::path(r.input).filename().string()] = r.decoder;
  });
  EXPECT_EQ(decoder["a444.jpg"], "libjpeg-turbo-ycbcr");
  EXPECT_EQ(decoder["b420.jpg"], "libjpeg-turbo-ycbcr");
  EXPECT_EQ(decoder["d420_turned.jpg"], "libjpeg-turbo-ycbcr");
  EXPECT_EQ(decoder["gray.jpg"], "libjpeg-turbo");
  const Bytes turned = read_all(dir / "batch" / "d420_turned.jpg");
  const jpeg::Info ti = jpeg::read_info(turned.data(), turned.size(), "turned");
  EXPECT_EQ(ti.width, 118);
  EXPECT_EQ(ti.height, 202);
  EXPECT_EQ(ti.orientation, 1);
  for (const char* n : names)
    EXPECT_EQ(read_all(dir / "exec" / n), read_all(dir / "batch" / n)) << n;
  // Files that markers after the frame header take off the route: the decoded-pixel route, in
  // the batch and alone (upright, for the EXIF rotation).
  fs::create_directories(dir / "off");
  const Bytes base = make_jpeg(pattern(41, 24, 3, 9));
  const Bytes adobe = {0xFF, 0xEE, 0, 14, 'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0, 0};
  const std::pair<const char*, Bytes> off[] = {
      {"rgb.jpg", with_segment_after_sof(base, adobe, true)},
      {"rot.jpg", with_segment_after_sof(base, exif_segment(6), false)}};
  for (const auto& [n, b] : off)
    std::ofstream(dir / "off" / n, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  ASSERT_EQ(run(cli + " equalize " + (dir / "off").string() + " -o " + (dir / "off_out").string() +
                " --backend cpu"),
            0);
  for (const auto& [n, b] : off) {
    EqualizeOptions cpu;
    cpu.backend = Backend::cpu;
    const Image want = equalize(decode_image(b.data(), b.size(), n, kDefaultMaxPixels), cpu);
    const Bytes got = read_all(dir / "off_out" / n);
    EXPECT_EQ(got, jpeg::encode(want, {95, jpeg::Subsampling::s420})) << n;
    const Image back = decode_image(got.data(), got.size(), n, kDefaultMaxPixels);
    EXPECT_EQ(back.width, std::string(n) == "rot.jpg" ? 24 : 41) << n;
  }
  // --mode rgb, a PNG output: the decoded-pixel route (its output equals the library's)
  ASSERT_EQ(run(cli + " equalize " + (dir / "in" / "b420.jpg").string() + " -o " +
                (dir / "rgb.jpg").string() + " --backend cpu --mode rgb"),
            0);
  const Bytes in = read_all(dir / "in" / "b420.jpg");
  EqualizeOptions rgb;
  rgb.backend = Backend::cpu;
  rgb.mode = Mode::rgb;
  const Image want =
      equalize(decode_image(in.data(), in.size(), "b420.jpg", kDefaultMaxPixels), rgb);
  EXPECT_EQ(read_all(dir / "rgb.jpg"), jpeg::encode(want, {95, jpeg::Subsampling::s420}));
}

// `histeq match` on a folder of JPEGs takes the stored planes as equalize does: the colour files
// name the planes decoder, and their bytes are equalize_jpeg_planes' with the reference's luma
// histogram; the gray file takes the decoded-pixel route.
TEST_F(JpegPlanesFiles, MatchBatchTakesThePlanesRoute) {
  const fs::path dir = dir_;
  fs::create_directories(dir / "in");
  const char* names[] = {"a444.jpg", "b420.jpg", "gray.jpg"};
  const int hv[][2] = {{1, 1}, {2, 2}, {0, 0}};
  for (int i = 0; i < 3; ++i) {
    MakeOpts o;
    o.h_samp = std::max(1, hv[i][0]);
    o.v_samp = std::max(1, hv[i][1]);
    const Bytes j = make_jpeg(pattern(203, 117, hv[i][0] ? 3 : 1, unsigned(i + 5)), o);
    std::ofstream(dir / "in" / names[i], std::ios::binary)
        .write(reinterpret_cast<const char*>(j.data()), std::streamsize(j.size()));
  }
  const Image refimg = pattern(64, 48, 3, 21);
  save_image(refimg, (dir / "ref.png").string());
  const std::string cli = HISTEQ_CLI;
  ASSERT_EQ(run("(" + cli + " match " + (dir / "in").string() + " -o " + (dir / "out").string() +
                " --reference " + (dir / "ref.png").string() + " --backend cpu --json > " +
                (dir / "report.jsonl").string() + ")"),
            0);
  std::ifstream report_file(dir / "report.jsonl");
  const std::string report((std::istreambuf_iterator<char>(report_file)),
                           std::istreambuf_iterator<char>());
  EXPECT_NE(report.find("\"operation\":\"match\""), std::string::npos);
  const MatchReference reference(load_image((dir / "ref.png").string()), "ref.png");
  EqualizeOptions eo;
  eo.reference = reference.histograms(Mode::luma, 3, 8);
  for (const char* n : {"a444.jpg", "b420.jpg"}) {
    const Bytes j = read_all(dir / "in" / n);
    Bytes want;
    ASSERT_TRUE(equalize_jpeg_planes(j.data(), j.size(), n, eo, {95, jpeg::Subsampling::s420},
                                     kDefaultMaxPixels, &want, nullptr, nullptr, nullptr));
    EXPECT_EQ(read_all(dir / "out" / n), want) << n;
  }
  const std::string planes_decoder = "\"decoder\":\"libjpeg-turbo-ycbcr\"";
  std::size_t planes = 0;
  for (std::size_t at = report.find(planes_decoder); at != std::string::npos;
       at = report.find(planes_decoder, at + 1))
    ++planes;
  EXPECT_EQ(planes, 2u);  // the two colour files
  EXPECT_TRUE(fs::exists(dir / "out" / "gray.jpg"));
}

}  // namespace
}  // namespace histeq
