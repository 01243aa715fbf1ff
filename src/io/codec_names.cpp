// io/codec_names.cpp — which codec encode_image, encode_image16 and decode_image16 use, by name
// (histeq/codec_names.hpp); decode_image names its own decoder as it decodes.
#include "histeq/codec_names.hpp"

#include <cctype>

#include "decode_checks.hpp"
#include "png_deflate.hpp"

namespace histeq::codec {
namespace {

std::string lower_ext(const std::string& ext) {
  std::string e = ext;
  for (char& ch : e) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  if (!e.empty() && e[0] != '.') e.insert(e.begin(), '.');
  return e;
}

bool pnm(const std::string& e) { return e == ".pgm" || e == ".ppm" || e == ".pnm"; }

}  // namespace

std::string encoder_name(const std::string& ext, int png_level) {
  const std::string e = lower_ext(ext);
  if (e == ".jpg" || e == ".jpeg") return kLibjpegTurbo;
  if (e == ".png") return png_level == png::kStripPngLevel ? kIsalPng : kLibdeflatePng;
  if (pnm(e)) return kPnm;
  return kStbImageWrite;
}

std::string encoder16_name(const std::string& ext) { return pnm(lower_ext(ext)) ? kPnm : kLibspng; }

std::string decoder16_name(const std::uint8_t* data, std::size_t size) {
  return detail::is_binary_pnm(data, size) ? kPnm : kLibspng;
}

}  // namespace histeq::codec
