// decode_checks_jpeg.cpp — the JPEG checks of decode_checks.hpp: jpeg_layout walks the markers
// and scan headers the way libjpeg-turbo's marker reader goes, and jpeg_scan_problem,
// jpeg_size_problem and jpeg_structure_problem judge what it found (components no scan covers,
// entropy-coded data too short for the declared size) before libjpeg-turbo allocates anything.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/decode_checks_internal.hpp"

namespace histeq::detail {
namespace {

// ---------------------------------------------------------------- JPEG
// The walk mirrors libjpeg-turbo 2.1.5 (jdmarker.c): next_marker, get_sof, get_sos, and the
// Huffman decoder's end of data (a marker that is neither FF00 nor RSTn).

bool jpeg_is_sof(unsigned m) {
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

void jpeg_note(JpegLayout* l, const std::string& why) {
  if (l->problem.empty()) l->problem = why;
}

void jpeg_read_frame(const std::uint8_t* p, std::size_t n, unsigned marker, JpegLayout* l) {
  if (l->sof != 0) return jpeg_note(l, "corrupt JPEG: a second frame header (SOF)");
  if (n < 6) return jpeg_note(l, "corrupt JPEG: the frame header (SOF) is cut short");
  l->sof = marker;
  l->height = (std::uint64_t(p[1]) << 8) | p[2];
  l->width = (std::uint64_t(p[3]) << 8) | p[4];
  const std::size_t nc = p[5];
  if (n != 6 + 3 * nc)
    jpeg_note(l, "corrupt JPEG: the frame header (SOF) is " + num(n + 2) + " bytes long, " +
                     num(nc) + " components need " + num(8 + 3 * nc));
  for (std::size_t i = 0; i < nc && 6 + 3 * i + 2 < n; ++i)
    l->components.push_back({p[6 + 3 * i], p[7 + 3 * i] >> 4, p[7 + 3 * i] & 15});
}

/// A scan header (SOS payload). False when libjpeg-turbo refuses it (the reason is noted).
bool jpeg_read_scan(const std::uint8_t* p, std::size_t n, JpegLayout* l, JpegScan* s) {
  const std::string which = "scan " + num(l->scans.size() + 1);
  if (l->sof == 0) {
    jpeg_note(l, "corrupt JPEG: " + which + " (SOS) comes before the frame header (SOF)");
    return false;
  }
  const std::size_t ns = n > 0 ? p[0] : 0;
  if (ns < 1 || ns > 4 || n != 1 + 2 * ns + 3) {
    jpeg_note(l, "corrupt JPEG: " + which + "'s header (SOS) has a bad length or component count");
    return false;
  }
  // get_sos: the first of the frame's first four components with that id whose slot (indexed
  // as libjpeg indexes cur_comp_info) is still free; a component twice in a scan is refused.
  const std::size_t nc = std::min<std::size_t>(l->components.size(), 4);
  int cur[4] = {-1, -1, -1, -1};
  for (std::size_t i = 0; i < ns; ++i) {
    const int cc = p[1 + 2 * i];
    int found = -1;
    for (std::size_t ci = 0; ci < nc && found < 0; ++ci)
      if (l->components[ci].id == cc && cur[ci] < 0) found = int(ci);
    for (std::size_t pi = 0; pi < i && found >= 0; ++pi)
      if (cur[pi] == found) found = -1;
    if (found < 0) {
      jpeg_note(l, "corrupt JPEG: " + which + " names component id " + num(unsigned(cc)) +
                       ", which is not a frame component it may name (unknown, repeated or out of "
                       "the frame header's order)");
      return false;
    }
    cur[i] = found;
    s->frame_index.push_back(found);
    s->dc_table.push_back(p[2 + 2 * i] >> 4);
    s->ac_table.push_back(p[2 + 2 * i] & 15);
  }
  s->ss = p[1 + 2 * ns];
  s->se = p[2 + 2 * ns];
  s->ah = p[3 + 2 * ns] >> 4;
  s->al = p[3 + 2 * ns] & 15;
  return true;
}

/// From *pos (after a scan header) to the marker that ends the entropy-coded data; returns the
/// bytes in between and leaves *pos at that marker's first 0xFF (or at len).
std::uint64_t jpeg_skip_entropy_data(const std::uint8_t* d, std::size_t len, std::size_t* pos) {
  const std::size_t start = *pos;
  std::size_t p = start;
  for (;;) {
    const void* ff = p < len ? std::memchr(d + p, 0xFF, len - p) : nullptr;
    if (!ff) {
      p = len;
      break;
    }
    p = std::size_t(static_cast<const std::uint8_t*>(ff) - d);
    std::size_t q = p + 1;
    while (q < len && d[q] == 0xFF) ++q;  // fill bytes
    if (q >= len) {
      p = len;
      break;
    }
    if (d[q] == 0x00 || (d[q] >= 0xD0 && d[q] <= 0xD7)) {  // stuffed zero, restart marker
      p = q + 1;
      continue;
    }
    break;
  }
  *pos = p;
  return p - start;
}

/// 8x8 blocks of frame component ci as a non-interleaved scan codes them (T.81 A.2.2, libjpeg's
/// width_in_blocks x height_in_blocks). The caller checked the sampling factors (1..4).
std::uint64_t jpeg_component_blocks(const JpegLayout& l, std::size_t ci) {
  int hmax = 1, vmax = 1;
  for (const JpegComponent& c : l.components) {
    hmax = std::max(hmax, c.h);
    vmax = std::max(vmax, c.v);
  }
  const JpegComponent& c = l.components[ci];
  const std::uint64_t bw =
      (l.width * std::uint64_t(c.h) + 8 * std::uint64_t(hmax) - 1) / (8 * std::uint64_t(hmax));
  const std::uint64_t bh =
      (l.height * std::uint64_t(c.v) + 8 * std::uint64_t(vmax) - 1) / (8 * std::uint64_t(vmax));
  return bw * bh;
}

std::string jpeg_component_name(const JpegLayout& l, std::size_t ci) {
  return "component " + num(ci + 1) + " (id " + num(unsigned(l.components[ci].id)) + ")";
}

}  // namespace

/// The tables a DHT segment defines (class 0 DC / 1 AC, id 0..3), into defined[class][id].
void jpeg_read_dht(const std::uint8_t* p, std::size_t n, bool defined[2][4]) {
  std::size_t q = 0;
  while (q + 17 <= n) {
    const unsigned tc = p[q] >> 4, th = p[q] & 15;
    std::size_t count = 0;
    for (int k = 1; k <= 16; ++k) count += p[q + std::size_t(k)];
    if (tc <= 1 && th <= 3) defined[tc][th] = true;
    q += 17 + count;
  }
}

/// Whether scan s of a Huffman-coded frame reads a table not in defined[][]: DC tables in a
/// sequential scan or a DC-first progressive scan, AC tables in any scan with Se > 0.
bool jpeg_scan_needs_undefined_table(const JpegScan& s, const bool defined[2][4]) {
  for (std::size_t i = 0; i < s.frame_index.size(); ++i) {
    const bool dc = s.ss == 0 && s.ah == 0, ac = s.se > 0;
    if (dc && (s.dc_table[i] > 3 || !defined[0][s.dc_table[i]])) return true;
    if (ac && (s.ac_table[i] > 3 || !defined[1][s.ac_table[i]])) return true;
  }
  return false;
}

JpegLayout jpeg_layout(const std::uint8_t* d, std::size_t len) {
  JpegLayout l;
  bool defined[2][4] = {};
  std::size_t pos = 2;  // after the SOI
  for (;;) {
    // next_marker: other bytes are skipped (libjpeg warns "extraneous bytes": fatal in
    // histeq), then fill bytes; FF 00 is no marker.
    while (pos < len && d[pos] != 0xFF) ++pos;
    while (pos < len && d[pos] == 0xFF) ++pos;
    if (pos >= len) break;
    const unsigned m = d[pos++];
    if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;  // no length
    if (m == 0xD9) {
      l.eoi = true;
      break;
    }
    if (m == 0xD8) {
      jpeg_note(&l, "corrupt JPEG: a second start-of-image marker (SOI)");
      continue;
    }
    if (len - pos < 2) break;
    const std::size_t seg = (std::size_t(d[pos]) << 8) | d[pos + 1];
    if (seg < 2 || seg > len - pos) break;  // cut short: libjpeg hits the end of the data
    const std::uint8_t* p = d + pos + 2;
    const std::size_t n = seg - 2;
    pos += seg;
    if (jpeg_is_sof(m)) {
      jpeg_read_frame(p, n, m, &l);
    } else if (m == 0xC4) {
      jpeg_read_dht(p, n, defined);
    } else if (m == 0xDA) {
      JpegScan s;
      const bool ok = jpeg_read_scan(p, n, &l, &s);
      s.data_bytes = jpeg_skip_entropy_data(d, len, &pos);
      const bool huffman = l.sof >= 0xC0 && l.sof <= 0xC3;
      if (ok && huffman && jpeg_scan_needs_undefined_table(s, defined))
        l.undefined_huffman_table = true;
      if (ok) l.scans.push_back(std::move(s));
    }
  }
  return l;
}

std::string jpeg_scan_problem(const JpegLayout& l) {
  for (std::size_t ci = 0; ci < l.components.size(); ++ci) {
    const JpegComponent& c = l.components[ci];
    if (c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4)
      return "corrupt JPEG: " + jpeg_component_name(l, ci) + " has sampling factors " +
             num(unsigned(c.h)) + "x" + num(unsigned(c.v)) + " (each must be 1..4)";
  }
  if (l.scans.empty())
    return l.eoi ? "corrupt JPEG: no scan (SOS marker) before the end of the image (EOI): no "
                   "pixel data"
                 : "truncated JPEG: the file ends before the first scan (SOS marker)";
  const bool progressive = l.sof == 0xC2 || l.sof == 0xCA;
  for (std::size_t ci = 0; ci < l.components.size(); ++ci) {
    bool covered = false;
    for (const JpegScan& s : l.scans) {
      if (progressive && (s.ss != 0 || s.ah != 0)) continue;  // only a DC-first scan starts it
      for (int fi : s.frame_index) covered = covered || std::size_t(fi) == ci;
    }
    if (covered) continue;
    const std::string scans = num(l.scans.size()) + (l.scans.size() == 1 ? " scan" : " scans");
    if (!l.eoi)
      return "truncated JPEG: the file ends after " + scans + ", before " +
             jpeg_component_name(l, ci) + " is covered by a scan";
    return "corrupt JPEG: " + jpeg_component_name(l, ci) + " is never covered by a scan (" +
           (progressive
                ? (l.scans.size() == 1 ? std::string("the only scan") : "none of the " + scans) +
                      " of this progressive file is a DC-first scan (Ss=0, Ah=0) of it"
            : l.scans.size() == 1 ? std::string("the only scan does not code it")
                                  : "none of the " + scans + " codes it") +
           "), so its pixels would not come from the file";
  }
  return "";
}

std::string jpeg_size_problem(const JpegLayout& l, std::size_t file_size) {
  if (l.sof != 0xC0 && l.sof != 0xC1 && l.sof != 0xC2) return "";  // Huffman-coded DCT only
  for (const JpegComponent& c : l.components)
    if (c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4) return "";  // jpeg_scan_problem's
  for (std::size_t k = 0; k < l.scans.size(); ++k) {
    const JpegScan& s = l.scans[k];
    if (s.ss != 0) continue;  // AC scans: an end-of-band run codes up to 32767 blocks
    std::uint64_t blocks = 0;
    for (int fi : s.frame_index) blocks += jpeg_component_blocks(l, std::size_t(fi));
    if (blocks <= 8 * s.data_bytes) continue;
    return "truncated or hostile JPEG: it declares " + num(l.width) + "x" + num(l.height) +
           " in a file of " + num(file_size) + " bytes: scan " + num(k + 1) + " codes " +
           num(blocks) + " blocks of 8x8 at 1 bit or more each (Huffman coding), at least " +
           num((blocks + 7) / 8) + " bytes, and holds " + num(s.data_bytes) +
           " bytes of entropy-coded data";
  }
  return "";
}

bool jpeg_undefined_huffman_table(const std::uint8_t* d, std::size_t len) {
  return jpeg_layout(d, len).undefined_huffman_table;
}

std::string jpeg_structure_problem(const std::uint8_t* d, std::size_t len) {
  const JpegLayout l = jpeg_layout(d, len);
  // The processes libjpeg-turbo decodes: baseline, extended, progressive; Huffman, arithmetic.
  if (l.sof != 0xC0 && l.sof != 0xC1 && l.sof != 0xC2 && l.sof != 0xC9 && l.sof != 0xCA) return "";
  if (!l.problem.empty()) return l.problem;
  if (std::string why = jpeg_scan_problem(l); !why.empty()) return why;
  return jpeg_size_problem(l, len);
}

}  // namespace histeq::detail
