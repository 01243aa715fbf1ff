// test_jpeg_coefficients.cpp — a colour JPEG's coefficients (jpeg::decode_coefficients) and the
// planes the islow inverse DCT makes of them (planes_from_coefficients, histeq/idct_formula.hpp):
// equal to decode_planes' planes byte for byte, padding included, on synthetic and natural
// images of every sampling the route takes, baseline and progressive, at every quality, and
// progressive scripts that leave coefficients unrefined; the files decode_planes declines, and
// coefficients beyond any 8-bit image's, are declined; broken files are refused by name. On a GPU:
// the device's inverse DCT (kernels/jpeg/idct.cu) gives the same planes.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/idct_formula.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "jpeg/idct.hpp"
#include "jpeg_test_support.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {
using test::Bytes;
using test::make_jpeg;
using test::MakeOpts;
using test::pattern;
using test::scan;

/// The number of samples (whole padded buffers) where a and b differ, or -1 for another shape.
long differing(const jpeg::Planes& a, const jpeg::Planes& b) {
  if (a.width != b.width || a.height != b.height) return -1;
  long bad = 0;
  for (int k = 0; k < 3; ++k) {
    const jpeg::Plane& p = a.plane[k];
    const jpeg::Plane& q = b.plane[k];
    if (p.width != q.width || p.height != q.height || p.stride != q.stride || p.rows != q.rows ||
        p.h != q.h || p.v != q.v)
      return -1;
    for (int y = 0; y < p.rows; ++y)
      for (std::size_t x = 0; x < p.stride; ++x) bad += p.row(y)[x] != q.row(y)[x];
  }
  return bad;
}

/// decode_planes and planes_from_coefficients(decode_coefficients) of j: the differing samples.
long compare(const Bytes& j, const std::string& tag) {
  const jpeg::Planes want = jpeg::decode_planes(j.data(), j.size(), "t.jpg");
  const jpeg::Coefficients c = jpeg::decode_coefficients(j.data(), j.size(), "t.jpg");
  EXPECT_EQ(c.width, want.width) << tag << ": declined";
  if (c.width == 0) return -1;
  for (int k = 0; k < 3; ++k) {
    const jpeg::CoefficientPlane& cp = c.comp[k];
    EXPECT_EQ(cp.coef.size(), std::size_t(cp.blocks_w) * std::size_t(cp.blocks_h) * 64) << tag;
    EXPECT_EQ(cp.blocks_w, (cp.plane.width + 7) / 8) << tag << " component " << k;
    EXPECT_EQ(cp.blocks_h, (cp.plane.height + 7) / 8) << tag << " component " << k;
  }
  return differing(jpeg::planes_from_coefficients(c), want);
}

struct Sampling {
  int h, v;
  const char* name;
};
const Sampling kSamplings[] = {{1, 1, "4:4:4"}, {2, 1, "4:2:2"}, {2, 2, "4:2:0"}};

TEST(JpegCoefficients, TheInverseDctGivesDecodePlanesBytes) {
  const int sizes[][2] = {{1, 1}, {7, 5}, {16, 16}, {17, 9}, {33, 31}, {129, 67}};
  for (const Sampling& smp : kSamplings)
    for (const auto& sz : sizes)
      for (bool progressive : {false, true})
        for (int quality : {10, 75, 100}) {
          MakeOpts o;
          o.h_samp = smp.h;
          o.v_samp = smp.v;
          o.progressive = progressive;
          o.quality = quality;
          const Bytes j = make_jpeg(pattern(sz[0], sz[1], 3, unsigned(sz[0] + 3 * sz[1])), o);
          const std::string tag = std::string(smp.name) + " " + std::to_string(sz[0]) + "x" +
                                  std::to_string(sz[1]) + " q" + std::to_string(quality) +
                                  (progressive ? " progressive" : "");
          EXPECT_EQ(compare(j, tag), 0) << tag;
        }
}

TEST(JpegCoefficients, NaturalImagesAtEveryQuality) {
  const std::string dir = test::shared_dir();
  if (dir.empty()) GTEST_SKIP() << "../shared (the natural images) is not next to the checkout";
  int done = 0;
  for (const char* name : {"astronaut.png", "chelsea.png", "coffee.png"}) {
    const std::string path = dir + "/natural/" + name;
    Image img;
    try {
      img = load_image(path);
    } catch (const Error&) {
      continue;
    }
    if (img.channels != 3) continue;
    for (const Sampling& smp : kSamplings)
      for (int quality : {50, 95, 100})
        for (bool progressive : {false, true}) {
          MakeOpts o;
          o.h_samp = smp.h;
          o.v_samp = smp.v;
          o.quality = quality;
          o.progressive = progressive;
          o.optimize = true;
          const std::string tag = std::string(name) + " " + smp.name + " q" +
                                  std::to_string(quality) + (progressive ? " progressive" : "");
          EXPECT_EQ(compare(make_jpeg(img, o), tag), 0) << tag;
          ++done;
        }
  }
  if (done == 0) GTEST_SKIP() << "no colour image among the natural ones";
}

TEST(JpegCoefficients, TheFormulaOfADcOnlyBlockIsItsLevel) {
  // A block with only a DC coefficient is flat: DC * q / 8 + 128, rounded, clamped.
  for (int dc : {-1024, -129, -17, -1, 0, 1, 5, 63, 127, 1023}) {
    std::int16_t coef[64] = {};
    std::uint16_t quant[64];
    for (auto& q : quant) q = 1;
    coef[0] = std::int16_t(dc);
    std::uint8_t out[64];
    idct_formula::idct_islow_block(coef, quant, out, 8);
    const long shifted = (long(dc) * 4 + 16) >> 5;  // the two passes' rounding of dc / 8
    const long want = std::min(255L, std::max(0L, shifted + 128));
    for (int i = 0; i < 64; ++i) ASSERT_EQ(out[i], want) << "dc " << dc << " sample " << i;
  }
}

TEST(JpegCoefficients, ProgressiveScriptsThatLeaveCoefficientsUnrefined) {
  // Scans that never refine the last bit of luma's AC coefficients, or never send them at all
  // (histeq decodes without libjpeg's block smoothing, which would estimate them): the inverse
  // DCT of what was sent, as decode_planes gives it. A gradient, where smoothing would act.
  Image g;
  g.width = 64;
  g.height = 48;
  g.channels = 3;
  g.pixels.resize(g.byte_count());
  for (int y = 0; y < g.height; ++y)
    for (int x = 0; x < g.width; ++x)
      for (int k = 0; k < 3; ++k)
        g.pixels[(std::size_t(y) * 64 + std::size_t(x)) * 3 + std::size_t(k)] =
            std::uint8_t(3 * x + 2 * y + 10 * k);
  MakeOpts o;
  o.progressive = true;
  o.quality = 30;
  const std::vector<std::vector<jpeg_scan_info>> scripts = {
      {scan({0, 1, 2}, 0, 0, 0, 0), scan({0}, 1, 63, 0, 1), scan({1}, 1, 63), scan({2}, 1, 63)},
      {scan({0, 1, 2}, 0, 0, 0, 0), scan({1}, 1, 63), scan({2}, 1, 63)},
      {scan({0, 1, 2}, 0, 0, 0, 1), scan({0}, 1, 5), scan({1}, 1, 63), scan({2}, 1, 63)},
  };
  int n = 0;
  for (const auto& script : scripts) {
    o.scans = script;
    const Bytes j = make_jpeg(g, o);
    ASSERT_TRUE(test::libjpeg_decodes_cleanly(j)) << "script " << n;
    EXPECT_EQ(compare(j, "script " + std::to_string(n)), 0) << "script " << n;
    ++n;
  }
}

/// A 4:2:0 progressive JPEG of 32x16 pixels written from coefficients chosen here (libjpeg's
/// jpeg_write_coefficients): every quantization value `q`, every block a DC of `dc` and, in
/// luma's first block, one AC coefficient (row 1, column 2) of `ac`; then `first(block)` may
/// rewrite luma's first block (64 coefficients, natural order).
template <typename First>
Bytes jpeg_of_coefficients(int q, int dc, int ac, First first) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = 32;
  c.image_height = 16;
  c.input_components = 3;
  c.in_color_space = JCS_YCbCr;
  jpeg_set_defaults(&c);
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < 64; ++i) c.quant_tbl_ptrs[t]->quantval[i] = UINT16(q);
  jpeg_simple_progression(&c);
  jvirt_barray_ptr arrays[3];
  JDIMENSION bw[3], bh[3];
  for (int k = 0; k < 3; ++k) {
    const jpeg_component_info& ci = c.comp_info[k];
    bw[k] = k == 0 ? 4 : 2;  // whole MCUs: 32x16 luma samples, 16x8 chroma
    bh[k] = k == 0 ? 2 : 1;
    arrays[k] = (*c.mem->request_virt_barray)(reinterpret_cast<j_common_ptr>(&c), JPOOL_IMAGE, TRUE,
                                              bw[k], bh[k], JDIMENSION(ci.v_samp_factor));
  }
  jpeg_write_coefficients(&c, arrays);
  for (int k = 0; k < 3; ++k)
    for (JDIMENSION by = 0; by < bh[k]; ++by) {
      JBLOCKARRAY rows =
          (*c.mem->access_virt_barray)(reinterpret_cast<j_common_ptr>(&c), arrays[k], by, 1, TRUE);
      for (JDIMENSION bx = 0; bx < bw[k]; ++bx) {
        std::memset(rows[0][bx], 0, sizeof(JBLOCK));
        rows[0][bx][0] = JCOEF(dc);
        if (k == 0 && by == 0 && bx == 0) {
          rows[0][bx][8 + 2] = JCOEF(ac);
          first(rows[0][bx]);
        }
      }
    }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  Bytes out(buf, buf + size);
  std::free(buf);
  return out;
}

Bytes jpeg_of_coefficients(int q, int dc, int ac) {
  return jpeg_of_coefficients(q, dc, ac, [](JCOEF*) {});
}

TEST(JpegCoefficients, CoefficientsBeyondAnyEncodersAreDeclined) {
  // Up to ±2048 dequantized (the most an encoder writes), samples within 511 of the level shift:
  // taken, decode_planes' bytes (sums of the block's coefficients at and above the safe sum
  // included: 2048 of DC or AC alone, DC -1024 with AC 1024).
  for (const auto& [q, dc, ac] : {std::array<int, 3>{1, 0, 2048},
                                  {1, 0, -2048},
                                  {8, 5, -256},
                                  {8, 5, 256},
                                  {2048, 1, 0},
                                  {2048, -1, 0},
                                  {16, -64, 64},
                                  {16, -64, 0}}) {
    const Bytes j = jpeg_of_coefficients(q, dc, ac);
    EXPECT_EQ(compare(j, "q " + std::to_string(q)), 0) << q << " " << dc << " " << ac;
  }
  // Beyond (damaged or crafted data: libjpeg-turbo's C and SIMD transforms differ there), a
  // coefficient or a sample: declined, while decode_planes still decodes the file.
  // (the check compares in 16 bits: |c| <= L as (c + L) mod 2^16 <= 2 L, so the bounds on
  // both sides are here, and ±4095, the largest libjpeg's progressive encoder writes here)
  for (const auto& [q, dc, ac] : {std::array<int, 3>{1, 0, 2049},
                                  {1, 0, -2049},
                                  {1, 0, 4095},
                                  {1, 0, -4095},
                                  {8, 257, 0},
                                  {8, 0, -257},
                                  {8, 300, 0},
                                  {255, 0, -9},
                                  {32767, 1, 0},
                                  {2048, 1, 1},
                                  {16, -64, 128}}) {
    const Bytes j = jpeg_of_coefficients(q, dc, ac);
    EXPECT_GT(jpeg::decode_planes(j.data(), j.size(), "crafted.jpg").width, 0);
    EXPECT_EQ(jpeg::decode_coefficients(j.data(), j.size(), "crafted.jpg").width, 0)
        << q << " " << dc << " " << ac;
  }
}

TEST(JpegCoefficients, BlocksWhoseSamplesLeaveTheRangeAreDeclined) {
  // Every coefficient within ±2048 dequantized, but the block's 64 coefficients of one sign
  // pile up at one sample (every basis function is positive at the block's first sample): far
  // beyond 0..255 before clamping, where libjpeg-turbo's C transform wraps and its SIMD ones
  // saturate in 16-bit lanes. Declined, while decode_planes still decodes the file.
  for (const int amplitude : {1023, 512, 341, 300}) {
    const Bytes j = jpeg_of_coefficients(2, 0, 0, [&](JCOEF* b) {
      for (int k = 0; k < 64; ++k) b[k] = JCOEF(amplitude);
    });
    EXPECT_GT(jpeg::decode_planes(j.data(), j.size(), "crafted.jpg").width, 0);
    EXPECT_EQ(jpeg::decode_coefficients(j.data(), j.size(), "crafted.jpg").width, 0)
        << "amplitude " << amplitude;
  }
  // Random blocks around the bound (sums of |dequantized coefficients| from tens to tens of
  // thousands, each coefficient within range): whatever decode_coefficients takes gives
  // decode_planes' bytes; blocks above the safe sum are taken where they stay in range (signs
  // that cancel) and declined where they do not.
  std::mt19937 rng(17);
  int taken_above = 0, declined = 0;
  for (int i = 0; i < 300; ++i) {
    const int amplitude = 16 + int(rng() % 600);  // q = 2: up to 1,230 dequantized
    const int count = 2 + int(rng() % 40);
    std::vector<int> values(64, 0);
    long sum = 0;
    for (int n = 0; n < count; ++n) {
      const int k = int(rng() % 64);
      values[std::size_t(k)] = int(rng() % std::uint32_t(2 * amplitude + 1)) - amplitude;
    }
    for (int v : values) sum += 2L * std::abs(v);
    const Bytes j = jpeg_of_coefficients(2, 0, 0, [&](JCOEF* b) {
      for (int k = 0; k < 64; ++k) b[k] = JCOEF(values[std::size_t(k)]);
    });
    const jpeg::Coefficients c = jpeg::decode_coefficients(j.data(), j.size(), "random.jpg");
    if (c.width == 0) {
      ++declined;
      EXPECT_GT(sum, 2040) << "block " << i << ": a block within the safe sum was declined";
      continue;
    }
    taken_above += sum > 2040;
    ASSERT_EQ(differing(jpeg::planes_from_coefficients(c),
                        jpeg::decode_planes(j.data(), j.size(), "random.jpg")),
              0)
        << "block " << i << ", sum " << sum;
  }
  EXPECT_GT(taken_above, 10);
  EXPECT_GT(declined, 10);
}

TEST(JpegCoefficients, FarOutOfRangeBlocksOfSixteenBitTablesAreDeclined) {
  // 16-bit quantization values and coefficients far beyond range: each block's sum of
  // |coefficient| x quant (read only for blocks within range) would pass 2^31 in 32-bit signed
  // arithmetic (64 x 4000 x 32767), undefined behaviour that the fuzz build's UBSan stops on
  // (tests/fuzz/crashes/decode/jpeg-coefficient-sum-past-int32.jpg is this file). Declined,
  // while decode_planes still decodes the file.
  for (const int q : {32767, 40000, 65535}) {
    const Bytes j = jpeg_of_coefficients(q, 0, 0, [](JCOEF* b) {
      for (int k = 0; k < 64; ++k) b[k] = JCOEF(k % 2 ? 4000 : -4000);
    });
    EXPECT_GT(jpeg::decode_planes(j.data(), j.size(), "crafted.jpg").width, 0) << q;
    EXPECT_EQ(jpeg::decode_coefficients(j.data(), j.size(), "crafted.jpg").width, 0) << q;
  }
}

TEST(JpegCoefficients, FilesOffTheRouteAndBrokenFiles) {
  // what decode_planes declines or refuses, decode_coefficients does too
  const Bytes gray = make_jpeg(pattern(16, 16, 1));
  EXPECT_THROW(jpeg::decode_coefficients(gray.data(), gray.size(), "gray.jpg"), Error);
  MakeOpts rgb;
  rgb.rgb_stored = true;
  const Bytes stored_rgb = make_jpeg(pattern(16, 16, 3), rgb);
  EXPECT_THROW(jpeg::decode_coefficients(stored_rgb.data(), stored_rgb.size(), "rgb.jpg"), Error);
  const Bytes j = make_jpeg(pattern(48, 32, 3, 9), MakeOpts{});
  jpeg::DecodeOptions small;
  small.max_pixels = 48 * 32 - 1;
  EXPECT_THROW(jpeg::decode_coefficients(j.data(), j.size(), "big.jpg", small), Error);
  // truncated: refused by name (a progressive file cut inside its scans as well)
  for (bool progressive : {false, true}) {
    MakeOpts o;
    o.progressive = progressive;
    const Bytes whole = make_jpeg(pattern(64, 64, 3, 4), o);
    const Bytes cut(whole.begin(), whole.begin() + std::ptrdiff_t(whole.size() * 2 / 3));
    try {
      jpeg::decode_coefficients(cut.data(), cut.size(), "cut.jpg");
      ADD_FAILURE() << "a truncated file decoded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.jpg"), std::string::npos) << e.what();
    }
  }
  // inconsistent: a frame header declaring 288 rows where the scans hold 32 (too little data
  // for the declared size); huge: 32544 x 32544, over the pixel limit before any allocation
  const auto with_size = [&](std::uint8_t height_high, std::uint8_t width_high) {
    Bytes b = j;
    for (std::size_t i = 2; i + 9 < b.size(); ++i)
      if (b[i] == 0xFF && b[i + 1] == 0xC0) {
        b[i + 5] = height_high;
        b[i + 7] = width_high;
        break;
      }
    return b;
  };
  for (const auto& [bytes, what] : {std::pair{with_size(0x01, 0x00), "too little data"},
                                    std::pair{with_size(0x7F, 0x7F), "over the limit"}}) {
    try {
      jpeg::decode_coefficients(bytes.data(), bytes.size(), "lying.jpg");
      ADD_FAILURE() << what << ": decoded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("lying.jpg"), std::string::npos) << e.what();
      if (std::string(what) == "over the limit")
        EXPECT_NE(std::string(e.what()).find("limit"), std::string::npos) << e.what();
      else
        EXPECT_EQ(std::string(e.what()).find("limit"), std::string::npos) << e.what();
    }
  }
  const Bytes empty;
  EXPECT_THROW(jpeg::decode_coefficients(empty.data(), 0, "empty.jpg"), Error);
  EXPECT_THROW(jpeg::planes_from_coefficients(jpeg::Coefficients{}), Error);
}

/// planes_from_coefficients on the device: each component uploaded, kernels::idct_plane, the
/// plane downloaded.
jpeg::Planes planes_on_device(const jpeg::Coefficients& c) {
  jpeg::Planes p = jpeg::planes_from_coefficients(c);  // the geometry; its samples overwritten
  for (int k = 0; k < 3; ++k) {
    const jpeg::CoefficientPlane& cp = c.comp[k];
    jpeg::Plane& pl = p.plane[k];
    const std::size_t bytes = pl.stride * std::size_t(pl.rows);
    DeviceBuffer<std::int16_t> d_coef(cp.coef.size());
    DeviceBuffer<std::uint8_t> d_plane(bytes);
    HISTEQ_CUDA_CHECK(
        cudaMemcpy(d_coef.get(), cp.coef.data(), d_coef.bytes(), cudaMemcpyHostToDevice));
    HISTEQ_CUDA_CHECK(cudaMemset(d_plane.get(), 0xA5, bytes));  // no sample left as it was
    kernels::IdctPlane a;
    a.d_coef = d_coef.get();
    for (int i = 0; i < 64; ++i) a.quant.q[i] = cp.quant[i];
    a.blocks_w = cp.blocks_w;
    a.blocks_h = cp.blocks_h;
    a.d_plane = d_plane.get();
    a.stride = pl.stride;
    a.rows = pl.rows;
    a.width = pl.width;
    a.height = pl.height;
    kernels::idct_plane(a, nullptr);
    HISTEQ_CUDA_CHECK(cudaMemcpy(pl.data.get(), d_plane.get(), bytes, cudaMemcpyDeviceToHost));
  }
  return p;
}

TEST(JpegCoefficientsGpu, TheDevicesInverseDctGivesTheHostsPlanes) {
  HISTEQ_REQUIRE_GPU();
  std::vector<Bytes> files;
  const int sizes[][2] = {{1, 1}, {9, 7}, {33, 31}, {129, 67}, {640, 480}};
  for (const Sampling& smp : kSamplings)
    for (const auto& sz : sizes)
      for (bool progressive : {false, true}) {
        MakeOpts o;
        o.h_samp = smp.h;
        o.v_samp = smp.v;
        o.progressive = progressive;
        o.quality = progressive ? 95 : 100;
        files.push_back(make_jpeg(pattern(sz[0], sz[1], 3, unsigned(sz[0] ^ sz[1])), o));
      }
  const std::string dir = test::shared_dir();
  if (!dir.empty()) {
    try {
      const Image img = load_image(dir + "/natural/astronaut.png");
      MakeOpts o;
      o.progressive = true;
      if (img.channels == 3) files.push_back(make_jpeg(img, o));
    } catch (const Error&) {}
  }
  int n = 0;
  for (const Bytes& j : files) {
    const jpeg::Coefficients c = jpeg::decode_coefficients(j.data(), j.size(), "t.jpg");
    ASSERT_GT(c.width, 0) << "file " << n;
    EXPECT_EQ(differing(planes_on_device(c), jpeg::planes_from_coefficients(c)), 0) << "file " << n;
    EXPECT_EQ(differing(planes_on_device(c), jpeg::decode_planes(j.data(), j.size(), "t.jpg")), 0)
        << "file " << n;
    ++n;
  }
  // a geometry that does not fit is refused before any launch
  kernels::IdctPlane bad;
  EXPECT_THROW(kernels::idct_plane(bad, nullptr), UsageError);
}

}  // namespace
}  // namespace histeq
