// image_io.cpp — 8-bit image files in and out, with stb_image / stb_image_write (Debian
// libstb-dev; the implementations are compiled here, once, from the system headers).
//
// Loading reads the whole file into memory first (so that a missing file, a directory or an
// empty file gets its own message), checks the header's dimensions with stbi_info_from_memory
// before any pixel memory is allocated, then decodes. Saving encodes to memory, writes a
// temporary file in the target's folder, fsyncs it and renames it over the target, so the
// target is either the complete new image or untouched (and may be the input file itself).
#include "histeq/image_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>

#include "histeq/error.hpp"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#endif
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO  // we read files ourselves
#include <stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO  // we write files ourselves
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace histeq {
namespace fs = std::filesystem;

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

enum class Format { png, jpg, bmp, tga };

/// Format of an extension (".png" or "png", any case); false when not one we write.
bool format_of(std::string ext, Format* out) {
  ext = lower(std::move(ext));
  if (!ext.empty() && ext[0] == '.') ext.erase(0, 1);
  if (ext == "png") *out = Format::png;
  else if (ext == "jpg" || ext == "jpeg") *out = Format::jpg;
  else if (ext == "bmp") *out = Format::bmp;
  else if (ext == "tga") *out = Format::tga;
  else return false;
  return true;
}

constexpr const char* kValidExtensions = ".png, .jpg, .jpeg, .bmp, .tga";

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    const std::string why = ec ? ec.message() : "no such file";
    throw Error("cannot read " + quoted(path) + ": " + why);
  }
  if (fs::is_directory(st)) throw Error("cannot read " + quoted(path) + ": it is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read " + quoted(path) + ": " + std::strerror(errno));
  std::vector<std::uint8_t> data;
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  f.seekg(0, std::ios::beg);
  if (size > 0) {  // a regular file: one read
    data.resize(static_cast<std::size_t>(size));
    f.read(reinterpret_cast<char*>(data.data()), size);
    if (f.gcount() != size)
      throw Error("cannot read " + quoted(path) + ": short read (" + std::to_string(f.gcount()) +
                  " of " + std::to_string(size) + " bytes)");
  } else {  // size unknown (a pipe, /proc) or empty: read what comes
    f.clear();
    char buf[1 << 16];
    while (f.read(buf, sizeof buf) || f.gcount() > 0)
      data.insert(data.end(), buf, buf + f.gcount());
    if (f.bad()) throw Error("cannot read " + quoted(path) + ": read error");
  }
  if (data.empty()) throw Error("cannot read " + quoted(path) + ": the file is empty");
  return data;
}

void append_bytes(void* ctx, void* data, int size) {
  auto* v = static_cast<std::vector<std::uint8_t>*>(ctx);
  const auto* p = static_cast<const std::uint8_t*>(data);
  v->insert(v->end(), p, p + size);
}

/// 0666 & ~umask, the mode a plain open(O_CREAT) would give the output file.
mode_t default_file_mode() {
  static const mode_t mode = [] {
    static std::mutex m;
    std::lock_guard<std::mutex> lock(m);
    const mode_t mask = ::umask(0);
    ::umask(mask);
    return static_cast<mode_t>(0666 & ~mask);
  }();
  return mode;
}

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

/// Why stbi_info_from_memory failed. It tries every format in turn, so its own reason is always
/// the last one's ("unknown image type"); for a file whose signature names a format, ask that
/// format's header parser again (stb_image internals, compiled in this file) for its reason
/// ("0-pixel image", "too large", "bad IHDR len", ...).
const char* format_failure_reason(const std::uint8_t* data, int len) {
  using Test = int (*)(stbi__context*);
  using Info = int (*)(stbi__context*, int*, int*, int*);
  const std::pair<Test, Info> formats[] = {{stbi__png_test, stbi__png_info},
                                           {stbi__jpeg_test, stbi__jpeg_info},
                                           {stbi__gif_test, stbi__gif_info},
                                           {stbi__bmp_test, stbi__bmp_info}};
  for (const auto& [test, info] : formats) {
    stbi__context s;
    stbi__start_mem(&s, data, len);
    if (!test(&s)) continue;
    stbi__start_mem(&s, data, len);
    int x = 0, y = 0, c = 0;
    if (!info(&s, &x, &y, &c)) {
      const char* why = stbi_failure_reason();
      return why ? why : "corrupt header";
    }
    return "corrupt header";  // only the full probe failed (should not happen)
  }
  return "unknown image type";
}

}  // namespace

Image decode_image(const std::uint8_t* data, std::size_t size, const std::string& name,
                   std::uint64_t max_pixels) {
  if (size == 0) throw Error("cannot read " + quoted(name) + ": the file is empty");
  if (size > std::size_t(INT_MAX))
    throw Error(quoted(name) + " is too large to decode (" + std::to_string(size) +
                " bytes; the decoder takes at most " + std::to_string(INT_MAX) + ")");
  const int len = static_cast<int>(size);
  auto check_dims = [&](std::uint64_t w, std::uint64_t h) {
    if (w == 0 || h == 0)
      throw Error(quoted(name) + " has zero width or height: " + std::to_string(w) + "x" +
                  std::to_string(h));
    const std::uint64_t pixels = w * h;  // both < 2^32: no overflow
    if (pixels > max_pixels)
      throw Error(quoted(name) + " is " + std::to_string(w) + "x" + std::to_string(h) + " = " +
                  std::to_string(pixels) + " pixels, over the limit of " +
                  std::to_string(max_pixels) + " pixels");
  };
  // PNG: the IHDR's dimensions first, so that sizes stb_image rejects itself ("0-pixel image",
  // "too large") still get the message that names them and the limit.
  static const std::uint8_t kPngSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= 24 && std::memcmp(data, kPngSig, 8) == 0 && std::memcmp(data + 12, "IHDR", 4) == 0)
    check_dims(be32(data + 16), be32(data + 20));
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(data, len, &w, &h, &comp))
    throw Error(quoted(name) + " is not a decodable image: " + format_failure_reason(data, len));
  check_dims(std::uint64_t(std::max(w, 0)), std::uint64_t(std::max(h, 0)));
  int dw = 0, dh = 0, dc = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> px(stbi_load_from_memory(data, len, &dw, &dh, &dc, 0),
                                               stbi_image_free);
  if (!px) {
    const char* why = stbi_failure_reason();
    throw Error(quoted(name) + " is not a decodable image: " + (why ? why : "decode failed"));
  }
  if (dw != w || dh != h || dc < 1 || dc > 4)
    throw Error(quoted(name) + " decoded to an unexpected shape " + std::to_string(dw) + "x" +
                std::to_string(dh) + "x" + std::to_string(dc));
  Image img;
  img.width = dw;
  img.height = dh;
  img.channels = dc;
  img.pixels.assign(px.get(), px.get() + img.byte_count());
  return img;
}

Image load_image(const std::string& path, std::uint64_t max_pixels) {
  const std::vector<std::uint8_t> data = read_file(path);
  return decode_image(data.data(), data.size(), path, max_pixels);
}

void check_output_path(const std::string& path) {
  Format f;
  const std::string ext = fs::path(path).extension().string();
  if (!format_of(ext, &f))
    throw UsageError("unknown output extension " + quoted(ext.empty() ? "(none)" : ext) +
                     " for " + quoted(path) + " (valid: " + kValidExtensions + ")");
}

std::vector<std::uint8_t> encode_image(const Image& img, const std::string& ext, int quality) {
  Format f;
  if (!format_of(ext, &f))
    throw UsageError("unknown output format " + quoted(ext) + " (valid: " + kValidExtensions +
                     ")");
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
  std::vector<std::uint8_t> out;
  const void* px = img.pixels.data();
  int ok = 0;
  switch (f) {
    case Format::png:
      ok = stbi_write_png_to_func(append_bytes, &out, img.width, img.height, img.channels, px,
                                  img.width * img.channels);
      break;
    case Format::jpg:
      ok = stbi_write_jpg_to_func(append_bytes, &out, img.width, img.height, img.channels, px,
                                  quality);
      break;
    case Format::bmp:
      ok = stbi_write_bmp_to_func(append_bytes, &out, img.width, img.height, img.channels, px);
      break;
    case Format::tga:
      ok = stbi_write_tga_to_func(append_bytes, &out, img.width, img.height, img.channels, px);
      break;
  }
  if (!ok || out.empty())
    throw Error("stb_image_write failed to encode a " + std::to_string(img.width) + "x" +
                std::to_string(img.height) + "x" + std::to_string(img.channels) + " " + ext +
                " image");
  return out;
}

void save_image(const Image& img, const std::string& path, int quality) {
  check_output_path(path);
  const std::vector<std::uint8_t> bytes =
      encode_image(img, fs::path(path).extension().string(), quality);

  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  const fs::file_status dst = fs::status(dir, ec);
  if (!fs::exists(dst))
    throw Error("cannot write " + quoted(path) + ": folder " + quoted(dir.string()) +
                " does not exist");
  if (!fs::is_directory(dst))
    throw Error("cannot write " + quoted(path) + ": " + quoted(dir.string()) +
                " is not a folder");
  if (fs::is_directory(fs::status(target, ec)))
    throw Error("cannot write " + quoted(path) + ": it is a directory");

  std::string tmpl = (dir / ("." + target.filename().string() + ".histeq-XXXXXX")).string();
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0)
    throw Error("cannot write " + quoted(path) + ": cannot create a file in " +
                quoted(dir.string()) + ": " + std::strerror(errno));
  const std::string tmp(name.data());
  auto fail = [&](const std::string& what, int err) {
    ::close(fd);  // harmless when already closed: EBADF
    ::unlink(tmp.c_str());
    throw Error("cannot write " + quoted(path) + ": " + what + ": " + std::strerror(err));
  };
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed after " + std::to_string(done) + " of " + std::to_string(bytes.size()) +
               " bytes",
           errno);
    }
    if (n == 0) fail("short write (" + std::to_string(done) + " of " +
                     std::to_string(bytes.size()) + " bytes)", ENOSPC);
    done += std::size_t(n);
  }
  if (::fchmod(fd, default_file_mode()) != 0) fail("chmod failed", errno);
  if (::fsync(fd) != 0) fail("fsync failed", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot write " + quoted(path) + ": close failed: " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot write " + quoted(path) + ": rename failed: " + std::strerror(err));
  }
}

}  // namespace histeq
