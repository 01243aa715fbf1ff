// bench/csv_text.hpp — a text as one CSV field (RFC 4180), for every CSV the tool writes:
// bench/report.cpp, bench/lesson.cpp, cli/histogram.cpp (file names, case labels).
// Room bench (docs/architecture.md): not installed.
#pragma once
#include <string>

namespace histeq::csv_text {

/// s as one field: quoted, its quotes doubled, where it holds a comma, a quote or a line break
/// (so that a CSV reader takes it whole); s itself otherwise.
inline std::string field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (const char ch : s) {
    if (ch == '"') q += '"';
    q += ch;
  }
  return q + '"';
}

}  // namespace histeq::csv_text
