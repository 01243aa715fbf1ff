// bench/json_text.hpp — text into nlohmann JSON when it may not be UTF-8 (file names are bytes):
// put_text writes the string (each invalid byte becomes U+FFFD when dumped with the replace
// handler) and, only when it is not valid UTF-8, its exact bytes in hex under KEY_bytes_hex.
// Used by every JSON report of the tool: bench/report.cpp, bench/lesson.cpp, cli/report.cpp.
// Room bench (docs/architecture.md): not installed.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace histeq::json_text {

/// True when s is valid UTF-8 (nlohmann's strict dump accepts it).
inline bool is_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

/// The bytes of s in lower-case hex, two digits each.
inline std::string hex_bytes(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string h;
  h.reserve(2 * s.size());
  for (unsigned char ch : s) {
    h += digits[ch >> 4];
    h += digits[ch & 15];
  }
  return h;
}

/// j[key] = s; when s is not valid UTF-8 also j[key + "_bytes_hex"] = hex_bytes(s).
template <class Json>
void put_text(Json& j, const std::string& key, const std::string& s) {
  j[key] = s;
  if (!is_utf8(s)) j[key + "_bytes_hex"] = hex_bytes(s);
}

}  // namespace histeq::json_text
