// fuzz/fuzz_one.hpp — the per-input function of the decode fuzzer, shared by the libFuzzer
// harness (fuzz_decode_equalize.cpp, clang, -fsanitize=fuzzer,address,undefined) and the replay
// test (test_host_fuzz_replay.cpp, the ordinary build, run by CTest on every CI run).
//
// bytes → decode_image (a small pixel limit) → for each mode (luma, rgb, gray): the CPU
// equalize path (extract_planes → histogram → make_lut → apply) → encode_image to memory as PNG,
// JPEG, BMP or TGA (rotating); a PNG is decoded again and must give back the equalized pixels.
// A rejected input must be a histeq::Error; anything else that goes wrong (another exception, a
// broken invariant) aborts with a message, which both the fuzzer and the test report as a crash.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/lut.hpp"
#include "histeq/planes.hpp"
#include "histeq/types.hpp"

namespace histeq::fuzz {

/// Pixel limit of the fuzzers: small, so that each execution is fast and decoders that trust
/// their header are caught allocating more than the limit allows (ASan's rss/malloc limits).
inline constexpr std::uint64_t kFuzzMaxPixels = std::uint64_t(1) << 14;

#define HISTEQ_FUZZ_CHECK(cond)                                                           \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "histeq fuzz invariant broken: %s (%s:%d)\n", #cond, __FILE__, \
                   __LINE__);                                                             \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

enum class Outcome { rejected, decoded };

/// The equalize path of one mode on the CPU, single-threaded (fuzzing wants determinism);
/// checks the histogram sums and the LUT's monotonicity on the way.
inline Image cpu_equalize(const Image& in, Mode mode, Formula formula) {
  const std::size_t pixels = in.pixel_count();
  const int planes = plane_count(mode, in.channels);
  std::vector<std::uint8_t> plane_bytes(std::size_t(planes) * pixels);
  cpu::extract_planes(in.pixels.data(), pixels, in.channels, mode, plane_bytes.data(), 1);
  std::vector<Lut> luts(static_cast<std::size_t>(planes));
  for (int p = 0; p < planes; ++p) {
    const Histogram h = cpu::histogram(plane_bytes.data() + std::size_t(p) * pixels, pixels,
                                       SampleType::u8, 256, 1);
    HISTEQ_FUZZ_CHECK(h.size() == 256);
    std::uint64_t sum = 0;
    for (std::uint64_t c : h) sum += c;
    HISTEQ_FUZZ_CHECK(sum == pixels);
    luts[std::size_t(p)] = make_lut(h.data(), formula);
    for (int v = 1; v < 256; ++v)
      HISTEQ_FUZZ_CHECK(luts[std::size_t(p)][v] >= luts[std::size_t(p)][v - 1]);
  }
  Image out;
  out.width = in.width;
  out.height = in.height;
  out.channels = output_channels(mode, in.channels);
  out.pixels.resize(out.byte_count());
  cpu::apply(in.pixels.data(), pixels, in.channels, mode, luts.data(), out.pixels.data(), 1);
  if (in.channels == 2 || in.channels == 4) {
    if (out.channels == in.channels)  // alpha passes through unchanged
      for (std::size_t i = 0; i < pixels; ++i)
        HISTEQ_FUZZ_CHECK(out.pixels[i * std::size_t(in.channels) + std::size_t(in.channels - 1)] ==
                          in.pixels[i * std::size_t(in.channels) + std::size_t(in.channels - 1)]);
  }
  return out;
}

/// The same file through jpeg::decode_coefficients (what decode_planes decoded as `p`): it
/// decodes too (the same checks), declining only coefficients beyond any encoder's; the blocks
/// cover the planes' geometry, which is decode_planes'; planes_from_coefficients makes planes of
/// that geometry with decode_planes' samples.
inline void coefficients_one(const std::uint8_t* data, std::size_t size,
                             const jpeg::DecodeOptions& opt, const jpeg::Planes& p) {
  jpeg::Coefficients c;
  try {
    c = jpeg::decode_coefficients(data, size, "fuzz-input", opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_coefficients refused what decode_planes decoded: %s\n", e.what());
    std::abort();
  }
  if (c.width == 0) return;  // coefficients beyond any encoder's
  HISTEQ_FUZZ_CHECK(c.width == p.width && c.height == p.height);
  for (int k = 0; k < 3; ++k) {
    const jpeg::CoefficientPlane& cp = c.comp[k];
    HISTEQ_FUZZ_CHECK(cp.plane.width == p.plane[k].width && cp.plane.stride == p.plane[k].stride);
    HISTEQ_FUZZ_CHECK(cp.plane.height == p.plane[k].height && cp.plane.rows == p.plane[k].rows);
    HISTEQ_FUZZ_CHECK(cp.blocks_w * 8 >= cp.plane.width && cp.blocks_h * 8 >= cp.plane.height);
    HISTEQ_FUZZ_CHECK(cp.coef.size() ==
                      std::size_t(cp.blocks_w) * std::size_t(cp.blocks_h) * std::size_t(64));
  }
  const jpeg::Planes q = jpeg::planes_from_coefficients(c);
  for (int k = 0; k < 3; ++k) {
    HISTEQ_FUZZ_CHECK(q.plane[k].data && q.plane[k].stride == p.plane[k].stride &&
                      q.plane[k].rows == p.plane[k].rows);
    HISTEQ_FUZZ_CHECK(std::memcmp(q.plane[k].data.get(), p.plane[k].data.get(),
                                  q.plane[k].stride * std::size_t(q.plane[k].rows)) == 0);
  }
}

/// A JPEG the stored-planes route takes (jpeg_planes.hpp) through jpeg::decode_planes (the same
/// pixel limit) and, when it decodes, jpeg::encode_planes: a rejection is a histeq::Error naming
/// the input; decoded planes have the sizes their sampling gives and whole-block buffers.
inline void planes_one(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels) {
  jpeg::Info info;
  const jpeg::EncodeOptions enc{90, jpeg::Subsampling::s420};
  if (!jpeg::read_header(data, size, &info) ||
      !jpeg::planes_route(info, enc, jpeg::Orientation::keep))
    return;
  jpeg::DecodeOptions opt;
  opt.max_pixels = max_pixels;
  opt.orientation = jpeg::Orientation::keep;
  jpeg::Planes p;
  try {
    p = jpeg::decode_planes(data, size, "fuzz-input", opt);
  } catch (const Error& e) {
    HISTEQ_FUZZ_CHECK(std::string(e.what()).find("fuzz-input") != std::string::npos);
    return;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_planes threw a non-histeq exception: %s\n", e.what());
    std::abort();
  }
  HISTEQ_FUZZ_CHECK(p.width > 0 && p.height > 0 &&
                    std::uint64_t(p.width) * std::uint64_t(p.height) <= max_pixels);
  for (const jpeg::Plane& pl : p.plane) {
    HISTEQ_FUZZ_CHECK(pl.data && pl.width >= 1 && pl.height >= 1);
    HISTEQ_FUZZ_CHECK(pl.width == (p.width * pl.h + p.plane[0].h - 1) / p.plane[0].h);
    HISTEQ_FUZZ_CHECK(pl.height == (p.height * pl.v + p.plane[0].v - 1) / p.plane[0].v);
    HISTEQ_FUZZ_CHECK(pl.stride % 8 == 0 && pl.stride >= std::size_t(pl.width));
    HISTEQ_FUZZ_CHECK(pl.rows % 8 == 0 && pl.rows >= pl.height);
  }
  try {
    HISTEQ_FUZZ_CHECK(!jpeg::encode_planes(p, enc).empty());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "encode_planes of decoded %dx%d planes threw: %s\n", p.width, p.height,
                 e.what());
    std::abort();
  }
  coefficients_one(data, size, opt, p);
}

/// One fuzz input through the whole host path. Returns whether it decoded; aborts on a bug.
inline Outcome decode_equalize_one(const std::uint8_t* data, std::size_t size,
                                   std::uint64_t max_pixels = kFuzzMaxPixels) {
  planes_one(data, size, max_pixels);
  Image img;
  try {
    img = decode_image(data, size, "fuzz-input", max_pixels);
  } catch (const Error& e) {
    // Every rejection names the input.
    HISTEQ_FUZZ_CHECK(std::string(e.what()).find("fuzz-input") != std::string::npos);
    return Outcome::rejected;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_image threw a non-histeq exception: %s\n", e.what());
    std::abort();
  }
  // A sane image: positive size within the limit, 1..4 channels, exactly w*h*c bytes.
  HISTEQ_FUZZ_CHECK(img.width > 0 && img.height > 0);
  HISTEQ_FUZZ_CHECK(img.channels >= 1 && img.channels <= 4);
  HISTEQ_FUZZ_CHECK(img.pixel_count() <= max_pixels);
  HISTEQ_FUZZ_CHECK(img.pixels.size() ==
                    std::size_t(img.width) * std::size_t(img.height) * std::size_t(img.channels));
  // Every mode is equalized; the encoders rotate with the input (mode k of an input of `size`
  // bytes is written as format (size + k) % 4), so each input pays for three encodes, not twelve,
  // and every (mode, format) pair still occurs across inputs.
  const Formula formula = (size & 1) ? Formula::exact : Formula::opencv;
  static const char* const kExts[4] = {".png", ".jpg", ".bmp", ".tga"};
  try {
    int k = 0;
    for (Mode mode : {Mode::luma, Mode::rgb, Mode::gray}) {
      const Image eq = cpu_equalize(img, mode, formula);
      const std::string ext = kExts[(size + std::size_t(k++)) % 4];
      const std::vector<std::uint8_t> bytes = encode_image(eq, ext, 90);
      HISTEQ_FUZZ_CHECK(!bytes.empty());
      if (ext == ".png") {  // lossless: must decode to the same pixels
        const Image back = decode_image(bytes.data(), bytes.size(), "fuzz-output.png", max_pixels);
        HISTEQ_FUZZ_CHECK(back.width == eq.width && back.height == eq.height &&
                          back.channels == eq.channels && back.pixels == eq.pixels);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "equalize/encode of a decoded %dx%dx%d image threw: %s\n", img.width,
                 img.height, img.channels, e.what());
    std::abort();
  }
  return Outcome::decoded;
}

}  // namespace histeq::fuzz
