// png16.cpp — 16-bit image files (image16.hpp): PNG through libspng (Debian libspng-dev; it
// reads and writes 16-bit samples, which stb_image_write cannot), binary PGM/PPM by hand.
#include <spng.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <string>

#include "histeq/error.hpp"
#include "histeq/image16.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "io/decode_checks.hpp"
#include "io/image_io_internal.hpp"
#include "io/png_checks.hpp"
#include "io/pnm_write.hpp"

namespace histeq {
namespace {

using detail::quoted;

std::string lower_ext(const std::string& path) {
  const auto dot = path.find_last_of('.');
  const auto slash = path.find_last_of('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string e = path.substr(dot);
  std::transform(e.begin(), e.end(), e.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e;
}

/// The whole file, as the 8-bit loader reads it (image_io.hpp: regular files only, opened
/// without blocking, at most the bytes a decoder takes, checked before reading).
std::vector<std::uint8_t> read_file(const std::string& path) { return read_image_file(path); }

bool is_png(const std::uint8_t* d, std::size_t n) {
  static const std::uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return n >= 8 && std::memcmp(d, sig, 8) == 0;
}

struct SpngCtx {
  spng_ctx* ctx;
  explicit SpngCtx(int flags) : ctx(spng_ctx_new(flags)) {
    if (!ctx) throw Error("libspng: out of memory");
  }
  ~SpngCtx() { spng_ctx_free(ctx); }
  SpngCtx(const SpngCtx&) = delete;
  SpngCtx& operator=(const SpngCtx&) = delete;
};

void check_size(std::uint64_t w, std::uint64_t h, std::uint64_t max_pixels,
                const std::string& name) {
  if (w == 0 || h == 0) throw Error(quoted(name) + ": zero size image");
  if (w > (1u << 24) || h > (1u << 24) || w * h > max_pixels) {
    throw Error(quoted(name) + ": " + std::to_string(w) + "x" + std::to_string(h) +
                " is more than the " + std::to_string(max_pixels) + " pixels allowed");
  }
}

Image16 decode_png16(const std::uint8_t* data, std::size_t size, const std::string& name,
                     std::uint64_t max_pixels) {
  // The 8-bit path's chunk checks first (io/png_checks.hpp): every chunk within the file and its
  // CRC (libspng does not read the chunks after the image data, IEND's CRC among them).
  if (std::string why = detail::png_chunk_problem(data, size); !why.empty())
    throw Error(quoted(name) + " is not a decodable image: " + why);
  SpngCtx c(0);
  spng_set_crc_action(c.ctx, SPNG_CRC_ERROR, SPNG_CRC_ERROR);
  spng_set_image_limits(c.ctx, 1u << 24, 1u << 24);
  spng_set_chunk_limits(c.ctx, 1u << 26, 1u << 26);
  int err = spng_set_png_buffer(c.ctx, data, size);
  spng_ihdr ihdr{};
  if (!err) err = spng_get_ihdr(c.ctx, &ihdr);
  if (err) throw Error(quoted(name) + ": not a valid PNG: " + spng_strerror(err));
  check_size(ihdr.width, ihdr.height, max_pixels, name);
  // Before any pixel memory: IEND and image data present, and enough compressed bytes for the
  // declared size (a 69-byte file declaring 16384x16384 is refused here, not after 2 GiB).
  if (std::string why = detail::png_size_problem(data, size); !why.empty())
    throw Error(quoted(name) + " is not a decodable image: " + why);
  spng_trns trns{};
  const bool has_trns = spng_get_trns(c.ctx, &trns) == 0;
  const bool gray = ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE ||
                    ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA;
  const bool alpha = has_trns || ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ||
                     ihdr.color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA;
  Image16 img;
  img.width = static_cast<int>(ihdr.width);
  img.height = static_cast<int>(ihdr.height);
  img.channels = (gray ? 1 : 3) + (alpha ? 1 : 0);
  const std::size_t n = img.pixel_count();
  img.icc = png::read_iccp(data, size);  // as decode_image reads it for 8-bit PNGs
  if (ihdr.bit_depth == 16 && !has_trns) {
    // The file's own layout (SPNG_FMT_PNG: host-endian 16-bit samples, channels as stored).
    img.pixels.resize(n * std::size_t(img.channels));
    err = spng_decode_image(c.ctx, img.pixels.data(), img.pixels.size() * 2, SPNG_FMT_PNG, 0);
    if (err) throw Error(quoted(name) + ": corrupt or truncated PNG: " + spng_strerror(err));
    return img;
  }
  // Lower depths, palettes and tRNS: RGBA16 (libspng scales 1/2/4/8-bit samples to 16 bits).
  std::vector<std::uint16_t> buf(n * 4);
  err = spng_decode_image(c.ctx, buf.data(), buf.size() * 2, SPNG_FMT_RGBA16, SPNG_DECODE_TRNS);
  if (err) throw Error(quoted(name) + ": corrupt or truncated PNG: " + spng_strerror(err));
  img.pixels.resize(n * std::size_t(img.channels));
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t* q = img.pixels.data() + i * std::size_t(img.channels);
    const std::uint16_t* p = buf.data() + i * 4;
    if (gray) {
      q[0] = p[0];
      if (alpha) q[1] = p[3];
    } else {
      q[0] = p[0];
      q[1] = p[1];
      q[2] = p[2];
      if (alpha) q[3] = p[3];
    }
  }
  return img;
}

/// Binary PGM/PPM at 16 bits: the header and samples read by the 8-bit decoder's own functions
/// (pnm_read.cpp), so that both refuse the same files (maxval 0 or over 65535, data
/// shorter than the header promises, a sample above maxval) with the same reasons.
Image16 decode_pnm16(const std::uint8_t* d, std::size_t n, const std::string& name,
                     std::uint64_t max_pixels) {
  detail::PnmHeader h;
  if (std::string why = detail::pnm_header(d, n, &h); !why.empty())
    throw Error(quoted(name) + " is not a decodable image: " + why);
  check_size(h.width, h.height, max_pixels, name);
  Image16 img;
  if (std::string why = detail::pnm_decode16(d, n, h, &img); !why.empty())
    throw Error(quoted(name) + " is not a decodable image: " + why);
  return img;
}

}  // namespace

bool is_16bit_data(const std::uint8_t* data, std::size_t size) {
  if (is_png(data, size)) return size >= 25 && data[24] == 16;  // IHDR bit depth
  detail::PnmHeader h;
  return detail::is_binary_pnm(data, size) && detail::pnm_header(data, size, &h).empty() &&
         h.maxval > 255;
}

bool is_16bit_image(const std::string& path) {
  const std::vector<std::uint8_t> d = read_file(path);
  return is_16bit_data(d.data(), d.size());
}

Image16 decode_image16(const std::uint8_t* data, std::size_t size, const std::string& name,
                       std::uint64_t max_pixels) {
  if (data == nullptr || size == 0)
    throw DecodeError("cannot decode " + quoted(name) + ": the file is empty");
  try {
    if (is_png(data, size)) return decode_png16(data, size, name, max_pixels);
    if (detail::is_binary_pnm(data, size)) return decode_pnm16(data, size, name, max_pixels);
  } catch (const DecodeError&) {
    throw;
  } catch (const Error& e) {  // every refusal of the decoders is about the data
    throw DecodeError(e.what());
  }
  throw DecodeError(quoted(name) + ": not a 16-bit capable image (PNG or binary PGM/PPM expected)");
}

Image16 load_image16(const std::string& path, std::uint64_t max_pixels) {
  const std::vector<std::uint8_t> d = read_file(path);
  return decode_image16(d.data(), d.size(), path, max_pixels);
}

std::vector<std::uint8_t> encode_image16(const Image16& img, const std::string& ext) {
  return encode_image16(img, ext, kDefaultPngLevel);
}

std::vector<std::uint8_t> encode_image16(const Image16& img, const std::string& ext_in,
                                         int png_level) {
  detail::check_png_level(png_level);
  std::string ext = ext_in;
  if (!ext.empty() && ext[0] != '.') ext = "." + ext;
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (img.width < 1 || img.height < 1 || img.channels < 1 || img.channels > 4 ||
      img.pixels.size() != img.sample_count()) {
    throw Error("cannot encode an empty or inconsistent 16-bit image");
  }
  if (detail::is_pnm_ext(ext)) {
    const char kind = detail::pnm_kind(ext, img.channels, 16);
    const std::string head = std::string("P") + kind + "\n" + std::to_string(img.width) + " " +
                             std::to_string(img.height) + "\n65535\n";
    std::vector<std::uint8_t> out(head.begin(), head.end());
    out.reserve(out.size() + img.pixels.size() * 2);
    for (std::uint16_t v : img.pixels) {
      out.push_back(static_cast<std::uint8_t>(v >> 8));
      out.push_back(static_cast<std::uint8_t>(v & 0xFF));
    }
    return out;
  }
  if (ext != ".png") {
    throw UsageError("16-bit output format " + quoted(ext_in) +
                     " is not supported; use .png, .pgm, .ppm or .pnm");
  }
  SpngCtx c(SPNG_CTX_ENCODER);
  spng_set_option(c.ctx, SPNG_ENCODE_TO_BUFFER, 1);
  spng_set_option(c.ctx, SPNG_IMG_COMPRESSION_LEVEL, png_level);  // zlib's level: 0 stores
  spng_ihdr ihdr{};
  ihdr.width = std::uint32_t(img.width);
  ihdr.height = std::uint32_t(img.height);
  ihdr.bit_depth = 16;
  static const std::uint8_t kTypes[5] = {0, SPNG_COLOR_TYPE_GRAYSCALE,
                                         SPNG_COLOR_TYPE_GRAYSCALE_ALPHA, SPNG_COLOR_TYPE_TRUECOLOR,
                                         SPNG_COLOR_TYPE_TRUECOLOR_ALPHA};
  ihdr.color_type = kTypes[img.channels];
  int err = spng_set_ihdr(c.ctx, &ihdr);
  // The ICC profile when it fits the channels, as the 8-bit writer does (libspng deflates it
  // into an iCCP chunk before the image data).
  spng_iccp iccp{};
  if (!err && !img.icc.empty() && jpeg::icc_fits(img.icc, img.channels)) {
    static const char kName[] = "ICC Profile";  // the 8-bit writer's name (png::insert_iccp)
    std::memcpy(iccp.profile_name, kName, sizeof kName);
    iccp.profile_len = img.icc.size();
    iccp.profile = const_cast<char*>(reinterpret_cast<const char*>(img.icc.data()));
    err = spng_set_iccp(c.ctx, &iccp);
  }
  // SPNG_FMT_PNG takes the samples in the PNG's layout, host-endian (libspng swaps them).
  if (!err)
    err = spng_encode_image(c.ctx, img.pixels.data(), img.pixels.size() * 2, SPNG_FMT_PNG,
                            SPNG_ENCODE_FINALIZE);
  if (err) throw Error(std::string("PNG encoding failed: ") + spng_strerror(err));
  std::size_t len = 0;
  void* buf = spng_get_png_buffer(c.ctx, &len, &err);
  if (!buf || err) throw Error(std::string("PNG encoding failed: ") + spng_strerror(err));
  std::vector<std::uint8_t> out(static_cast<std::uint8_t*>(buf),
                                static_cast<std::uint8_t*>(buf) + len);
  std::free(buf);
  return out;
}

void save_image16(const Image16& img, const std::string& path) {
  const std::vector<std::uint8_t> bytes = encode_image16(img, lower_ext(path));
  write_file_atomic(path, bytes.data(), bytes.size());  // as every output: image_io.hpp
}

Image16 widen_to_16(const Image& img) {
  Image16 o;
  o.width = img.width;
  o.height = img.height;
  o.channels = img.channels;
  o.icc = img.icc;
  o.pixels.resize(img.pixels.size());
  for (std::size_t i = 0; i < img.pixels.size(); ++i)
    o.pixels[i] = static_cast<std::uint16_t>(img.pixels[i] * 257);
  return o;
}

Image narrow_to_8(const Image16& img) {
  Image o;
  o.width = img.width;
  o.height = img.height;
  o.channels = img.channels;
  o.icc = img.icc;
  o.pixels.resize(img.pixels.size());
  for (std::size_t i = 0; i < img.pixels.size(); ++i)
    o.pixels[i] = static_cast<std::uint8_t>((std::uint32_t(img.pixels[i]) * 2 + 257) / 514);
  return o;
}

}  // namespace histeq
