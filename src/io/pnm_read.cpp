// pnm_read.cpp — histeq's binary PGM/PPM (P5/P6) reader, declared in decode_checks.hpp: the
// header (pnm_header) and the samples at 8 bits (pnm_decode: decode_image's PNM path) or at 16
// (pnm_decode16: load_image16's), with the same checks and reasons in both: the data's length
// before any allocation, and no sample above the maximum value.
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "io/decode_checks_internal.hpp"

namespace histeq::detail {

bool is_binary_pnm(const std::uint8_t* d, std::size_t len) {
  return len >= 2 && d[0] == 'P' && (d[1] == '5' || d[1] == '6');
}

std::string pnm_header(const std::uint8_t* d, std::size_t len, PnmHeader* out) {
  std::size_t pos = 2;
  auto space = [](std::uint8_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  const char* names[3] = {"width", "height", "maximum value"};
  std::uint64_t v[3] = {0, 0, 0};
  for (int f = 0; f < 3; ++f) {
    for (;;) {  // whitespace and comments
      while (pos < len && space(d[pos])) ++pos;
      if (pos < len && d[pos] == '#') {
        while (pos < len && d[pos] != '\n' && d[pos] != '\r') ++pos;
        continue;
      }
      break;
    }
    if (pos >= len)
      return std::string("truncated PNM header: the file ends before the ") + names[f];
    if (d[pos] < '0' || d[pos] > '9')
      return std::string("corrupt PNM header: the ") + names[f] + " is not a decimal number";
    while (pos < len && d[pos] >= '0' && d[pos] <= '9') {
      v[f] = v[f] * 10 + unsigned(d[pos++] - '0');
      if (v[f] > std::uint64_t(INT_MAX))
        return "corrupt PNM header: a number (width, height or maximum value) does not fit in 31 "
               "bits";
    }
  }
  if (pos >= len || !space(d[pos]))
    return "truncated PNM: no whitespace byte after the maximum value (no sample data)";
  if (v[2] == 0) return "corrupt PNM header: maximum value 0 (must be 1..65535)";
  if (v[2] > 65535)
    return "corrupt PNM header: maximum value " + num(v[2]) + " is over 65535 (Netpbm's limit)";
  out->width = v[0];
  out->height = v[1];
  out->channels = d[1] == '5' ? 1 : 3;
  out->maxval = unsigned(v[2]);
  out->data_offset = pos + 1;
  return "";
}

namespace {

/// Before any allocation: the sides stb's limit allows, and the file holds every sample.
std::string pnm_size_problem(std::size_t len, const PnmHeader& h) {
  if (h.width > kMaxSide || h.height > kMaxSide)
    return "PNM too large: " + num(h.width) + "x" + num(h.height) + " (at most " + num(kMaxSide) +
           " per side)";
  const std::uint64_t bps = h.maxval > 255 ? 2 : 1;
  const std::uint64_t need = h.data_offset + h.width * h.height * std::uint64_t(h.channels) * bps;
  if (need > len)
    return "truncated PNM: " + num(h.width) + "x" + num(h.height) + "x" + num(h.channels) +
           " samples of " + num(bps) + " byte(s) need " + num(need) + " bytes, the file holds " +
           num(len);
  return "";
}

/// Reads every sample after the header (1 byte, or 2 big-endian when maxval > 255) into `out`
/// through scale(v), refusing the first one above maxval: both decoders (8-bit and 16-bit)
/// refuse the same files with the same reason. pnm_size_problem must have passed.
template <typename T, typename Scale>
std::string pnm_read_samples(const std::uint8_t* d, const PnmHeader& h, std::vector<T>& out,
                             Scale scale) {
  const bool two = h.maxval > 255;
  const std::uint64_t samples = h.width * h.height * std::uint64_t(h.channels);
  out.resize(std::size_t(samples));
  const std::uint8_t* s = d + h.data_offset;
  const std::uint32_t m = h.maxval;
  for (std::uint64_t i = 0; i < samples; ++i) {
    const std::uint32_t v = two ? (std::uint32_t(s[2 * i]) << 8) | s[2 * i + 1] : s[i];
    if (v > m)
      return "corrupt PNM: sample " + num(v) + " at index " + num(i) +
             " is above the maximum value " + num(m);
    out[std::size_t(i)] = scale(v);
  }
  return "";
}

}  // namespace

std::string pnm_decode(const std::uint8_t* d, std::size_t len, const PnmHeader& h, Image* out) {
  if (std::string why = pnm_size_problem(len, h); !why.empty()) return why;
  out->width = int(h.width);
  out->height = int(h.height);
  out->channels = h.channels;
  const std::uint32_t m = h.maxval;
  return pnm_read_samples(d, h, out->pixels, [m](std::uint32_t v) {
    return m == 255 ? std::uint8_t(v) : std::uint8_t((v * 255 + m / 2) / m);
  });
}

std::string pnm_decode16(const std::uint8_t* d, std::size_t len, const PnmHeader& h, Image16* out) {
  if (std::string why = pnm_size_problem(len, h); !why.empty()) return why;
  out->width = int(h.width);
  out->height = int(h.height);
  out->channels = h.channels;
  const std::uint64_t m = h.maxval;
  return pnm_read_samples(d, h, out->pixels, [m](std::uint32_t v) {
    return m == 65535 ? std::uint16_t(v)
                      : std::uint16_t((std::uint64_t(v) * 65535 * 2 + m) / (2 * m));
  });
}

}  // namespace histeq::detail
