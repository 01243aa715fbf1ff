// image_encode.cpp — 8-bit images to bytes and to files: encode_image picks the writer by the
// output extension (PNG: histeq's own, png_write.cpp; JPEG: libjpeg-turbo, jpeg_encode.cpp;
// binary PGM/PPM: write_pnm8 below; BMP and TGA: stb_image_write, whose implementation is
// compiled here, once, from Debian libstb-dev's header), and save_image writes the bytes with
// write_file_atomic (atomic_write.cpp). Also the checks of an output path and the channels an
// extension keeps (check_output_path, encoded_channels).
#include "histeq/image_io.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <filesystem>
#include <string>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/jpeg_codec.hpp"
#include "io/image_io_internal.hpp"
#include "io/pnm_write.hpp"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#if !defined(__clang__)
#pragma GCC diagnostic ignored \
    "-Wstringop-overflow"  // false positives once stb is static (inlined)
#endif
#endif
// stb's symbols stay private to this file (STB_IMAGE_WRITE_STATIC): a program linking
// libhisteq_host.a may compile its own copy of stb (CTest no_stb_symbols_exported).
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO  // we write files ourselves
// stb_image_write writes BMP and TGA only: PNG is written by histeq itself (png_write.cpp).
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace histeq {
namespace detail {
void check_png_level(int level) {
  if (level < 0 || level > 9)
    throw UsageError("PNG level " + std::to_string(level) + " out of range (valid: 0..9)");
}
}  // namespace detail

namespace fs = std::filesystem;
using detail::quoted;
using detail::write_png8;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

enum class Format { png, jpg, bmp, tga, pnm };

/// Format of an extension (".png" or "png", any case); false when not one we write.
bool format_of(std::string ext, Format* out) {
  ext = lower(std::move(ext));
  if (!ext.empty() && ext[0] == '.') ext.erase(0, 1);
  if (ext == "png")
    *out = Format::png;
  else if (ext == "jpg" || ext == "jpeg")
    *out = Format::jpg;
  else if (ext == "bmp")
    *out = Format::bmp;
  else if (ext == "tga")
    *out = Format::tga;
  else if (ext == "pgm" || ext == "ppm" || ext == "pnm")
    *out = Format::pnm;
  else
    return false;
  return true;
}

constexpr const char* kValidExtensions = ".png, .jpg, .jpeg, .bmp, .tga, .pgm, .ppm, .pnm";

void append_bytes(void* ctx, void* data, int size) {
  auto* v = static_cast<std::vector<std::uint8_t>*>(ctx);
  const auto* p = static_cast<const std::uint8_t*>(data);
  v->insert(v->end(), p, p + size);
}

/// A binary PGM (P5) or PPM (P6) of maxval 255: the header, then the samples as they are.
std::vector<std::uint8_t> write_pnm8(const Image& img, const std::string& ext_in) {
  std::string ext = lower(ext_in);
  if (!ext.empty() && ext[0] != '.') ext = "." + ext;
  const char kind = detail::pnm_kind(ext, img.channels, 8);
  const std::string head = std::string("P") + kind + "\n" + std::to_string(img.width) + " " +
                           std::to_string(img.height) + "\n255\n";
  std::vector<std::uint8_t> out;
  out.reserve(head.size() + img.pixels.size());
  out.insert(out.end(), head.begin(), head.end());
  out.insert(out.end(), img.pixels.begin(), img.pixels.end());
  return out;
}

}  // namespace

void check_output_path(const std::string& path) {
  Format f;
  const std::string ext = fs::path(path).extension().string();
  if (!format_of(ext, &f))
    throw UsageError("unknown output extension " + quoted(ext.empty() ? "(none)" : ext) + " for " +
                     quoted(path) + " (valid: " + kValidExtensions + ")");
}

int encoded_channels(int channels, const std::string& ext) {
  Format f;
  if (!format_of(ext, &f)) return channels;  // extensions histeq does not write: as they are
  const bool alpha = channels == 2 || channels == 4;
  if (f == Format::jpg) return channels <= 2 ? 1 : 3;  // no alpha in JPEG
  if (f == Format::bmp) return alpha ? 4 : 3;          // 24-bit BGR or 32-bit BGRA
  return channels;
}

std::vector<std::uint8_t> encode_image(const Image& img, const std::string& ext, int quality,
                                       jpeg::Subsampling subsampling) {
  EncodeOptions opt;
  opt.quality = quality;
  opt.subsampling = subsampling;
  return encode_image(img, ext, opt);
}

std::vector<std::uint8_t> encode_image(const Image& img, const std::string& ext,
                                       const EncodeOptions& opt) {
  const int quality = opt.quality;
  const jpeg::Subsampling subsampling = opt.subsampling;
  Format f;
  if (!format_of(ext, &f))
    throw UsageError("unknown output format " + quoted(ext) + " (valid: " + kValidExtensions + ")");
  if (img.width <= 0 || img.height <= 0 || img.channels < 1 || img.channels > 4)
    throw Error("cannot encode an image of " + std::to_string(img.width) + "x" +
                std::to_string(img.height) + "x" + std::to_string(img.channels) +
                " (need width, height > 0 and 1..4 channels)");
  if (img.pixels.size() != img.byte_count())
    throw Error("cannot encode: the image holds " + std::to_string(img.pixels.size()) +
                " bytes, its shape needs " + std::to_string(img.byte_count()));
  if (img.byte_count() > std::size_t(INT_MAX) / 2)
    throw Error("cannot encode an image of " + std::to_string(img.byte_count()) +
                " bytes: stb_image_write takes at most about 1 GiB");
  if (f == Format::jpg && (quality < 1 || quality > 100))
    throw UsageError("JPEG quality " + std::to_string(quality) + " out of range (valid: 1..100)");
  detail::check_png_level(opt.png_level);
  // PNG: histeq's own writer (write_png8, png_write.cpp); JPEG: libjpeg-turbo (jpeg_codec.hpp),
  // 4:2:0 colour, 1-component gray; PGM/PPM: write_pnm8; BMP and TGA: stb_image_write.
  if (f == Format::png) return write_png8(img, opt.png_level);
  if (f == Format::jpg) return jpeg::encode(img, {quality, subsampling});
  if (f == Format::pnm) return write_pnm8(img, ext);
  std::vector<std::uint8_t> out;
  out.reserve(img.byte_count() + 1024);
  const void* px = img.pixels.data();
  int comp = img.channels;
  // BMP has no gray+alpha layout, and stb_image_write writes 2 channels as 24-bit gray, alpha
  // dropped: expanded to RGBA (gray in R, G and B), so it is written as 32-bit BGRA as RGBA is.
  std::vector<std::uint8_t> rgba;
  if (f == Format::bmp && img.channels == 2) {
    const std::size_t n = img.pixel_count();
    rgba.resize(n * 4);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint8_t g = img.pixels[2 * i], a = img.pixels[2 * i + 1];
      rgba[4 * i] = rgba[4 * i + 1] = rgba[4 * i + 2] = g;
      rgba[4 * i + 3] = a;
    }
    px = rgba.data();
    comp = 4;
  }
  const int ok = f == Format::bmp
                     ? stbi_write_bmp_to_func(append_bytes, &out, img.width, img.height, comp, px)
                     : stbi_write_tga_to_func(append_bytes, &out, img.width, img.height, comp, px);
  if (!ok || out.empty())
    throw Error("stb_image_write failed to encode a " + std::to_string(img.width) + "x" +
                std::to_string(img.height) + "x" + std::to_string(img.channels) + " " + ext +
                " image");
  return out;
}

void save_image(const Image& img, const std::string& path, int quality,
                jpeg::Subsampling subsampling) {
  EncodeOptions opt;
  opt.quality = quality;
  opt.subsampling = subsampling;
  save_image(img, path, opt);
}

void write_image_file(const std::vector<std::uint8_t>& bytes, const std::string& path) {
  write_file_atomic(path, bytes.data(), bytes.size());
}

void save_image(const Image& img, const std::string& path, const EncodeOptions& opt) {
  check_output_path(path);
  const std::vector<std::uint8_t> bytes =
      encode_image(img, fs::path(path).extension().string(), opt);
  write_file_atomic(path, bytes.data(), bytes.size());
}

}  // namespace histeq
