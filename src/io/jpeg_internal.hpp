// io/jpeg_internal.hpp — what the files behind jpeg_codec.hpp share:
//   jpeg_codec.cpp          decode: the error manager, the header read, decode, read_info
//   jpeg_encode.cpp         encode (and the compressor's parameters, start_compress)
//   jpeg_stored_planes.cpp  the YCbCr planes as stored: decode_planes, encode_planes
//   jpeg_coefficients.cpp   their coefficients: decode_coefficients, planes_from_coefficients
//   metadata.cpp            EXIF orientation, ICC profiles in JPEG and PNG
// The libjpeg states below are C-style (trivially destructible, zeroed by their guards): every
// function that calls setjmp holds only such locals, so a longjmp from libjpeg's error_exit skips
// no C++ destructor (jpeg_codec.cpp says why). Room io (docs/architecture.md): private to the
// room.
#pragma once
#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/jpeg_codec.hpp"

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

namespace histeq::jpeg::internal {

/// A name in a message, in single quotes.
inline std::string quoted(const std::string& s) { return "'" + s + "'"; }

/// Refuses zero sizes and images over `max_pixels`, naming the file, the size and the limit
/// (before any pixel memory exists).
void check_size(const std::string& name, std::uint64_t w, std::uint64_t h,
                std::uint64_t max_pixels);

/// Error manager + state shared with the C-style callbacks. Trivially destructible.
struct ErrorState {
  jpeg_error_mgr mgr;  // first member: cinfo->err points here
  std::jmp_buf jump;
  int fatal_code;  // the JERR_/JWRN_ code that stopped the decode (0: none)
  char message[JMSG_LENGTH_MAX];
  int scan_limit_hit;
  int eof_seen;  // the data ended without its end marker (JWRN_JPEG_EOF) once a scan had begun
};

/// After a decode's input is all read (jpeg_start_decompress of a progressive file,
/// jpeg_read_coefficients) and before jpeg_finish_decompress: where the data ended without its
/// end marker, the image must be complete, every coefficient of every component refined to its
/// last bit by the scans read (a progressive file cut between two scans decodes without any
/// other warning, coarser); else the decode stops as a truncated file (longjmp to the caller's
/// setjmp). A sequential file's end is judged where it happens (histeq_jpeg_emit_message).
void check_complete_at_eof(j_decompress_ptr c);

/// Zeroes *st and installs histeq's error_exit and emit_message (jpeg_codec.cpp).
void init_error(ErrorState* st);

struct DecodeState {
  jpeg_decompress_struct cinfo;
  ErrorState err;
  jpeg_progress_mgr progress;
  bool created;
  JOCTET* icc;  // from jpeg_read_icc_profile (malloc), freed by the C++ side
  unsigned int icc_len;
};

/// Phase 1: create, read the header (markers saved), pick the output colour space. 0 on success.
int run_read_header(DecodeState* s, const unsigned char* data, unsigned long size);

/// The reason an error code gives, in words a user can act on.
std::string reason(const ErrorState& e, const jpeg_decompress_struct* c);

/// A libjpeg decompressor with histeq's error manager, destroyed with this object; header()
/// runs phase 1 (run_read_header) and names the file in its error.
struct Decompressor {
  std::unique_ptr<DecodeState> s = std::make_unique<DecodeState>();
  Decompressor() {
    std::memset(static_cast<void*>(s.get()), 0, sizeof(DecodeState));
    init_error(&s->err);
    s->cinfo.err = &s->err.mgr;
  }
  ~Decompressor() {
    if (s->created) jpeg_destroy_decompress(&s->cinfo);
    std::free(s->icc);
  }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;
  void header(const std::uint8_t* data, std::size_t size, const std::string& name) {
    if (run_read_header(s.get(), data, static_cast<unsigned long>(size)) != 0)
      throw Error(quoted(name) + " is not a decodable image: " + reason(s->err, &s->cinfo));
  }
};

struct EncodeState {
  jpeg_compress_struct cinfo;
  ErrorState err;
  bool created;
  unsigned char* out;  // jpeg_mem_dest's malloc'd buffer
  unsigned long out_size;
};

/// The compressor's parameters, jpeg_start_compress and the metadata markers (jpeg_encode.cpp).
void start_compress(j_compress_ptr c, int w, int h, int components, J_COLOR_SPACE in, bool raw,
                    int quality, int h_samp, int v_samp, const unsigned char* exif,
                    unsigned exif_len, const unsigned char* icc, unsigned icc_len);

/// A libjpeg compressor state with histeq's error manager, destroyed with this object (and the
/// jpeg_mem_dest buffer freed); bytes() copies out what was encoded.
struct Compressor {
  std::unique_ptr<EncodeState> s = std::make_unique<EncodeState>();
  Compressor() {
    std::memset(static_cast<void*>(s.get()), 0, sizeof(EncodeState));
    init_error(&s->err);
    s->cinfo.err = &s->err.mgr;
  }
  ~Compressor() {
    if (s->created) jpeg_destroy_compress(&s->cinfo);
    std::free(s->out);
  }
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;
  std::vector<std::uint8_t> bytes() const {
    return std::vector<std::uint8_t>(s->out, s->out + s->out_size);
  }
};

inline constexpr std::size_t kExifPrefix = 6;  // "Exif\0\0"

/// The payload of the first APP1 "Exif\0\0" segment libjpeg saved (jpeg_save_markers in
/// run_read_header), prefix included; empty when there is none.
std::vector<std::uint8_t> saved_exif(j_decompress_ptr c);

/// The markers up to the first SOF into *out (read_info's facts); false when no SOF is found.
bool parse_info(const std::uint8_t* d, std::size_t n, Info* out);

/// detail::jpeg_structure_problem as an Error naming `name`: components no scan covers, no scan,
/// entropy-coded data too short for the declared size (Huffman).
void check_structure(const std::uint8_t* d, std::size_t n, const std::string& name);

/// The start that decode_planes and decode_coefficients share: the frame's checks (not a colour
/// 4:4:4 / 4:2:2 / 4:2:0 YCbCr JPEG, too many pixels, a damaged structure: Error naming
/// `name`), the header read into *d, and *shape's size, EXIF, ICC and each plane's geometry
/// (width, height, stride, rows, sampling; no samples). False when a marker takes the file off
/// the stored-planes route (decode_planes' cases: RGB by APP14, or a rotation to apply).
/// *walked_orientation (when given): the EXIF orientation the header walk before the frame
/// header saw (Info::orientation, what planes_route and the executor's plan were told).
bool open_stored(const std::uint8_t* data, std::size_t size, const std::string& name,
                 const DecodeOptions& opt, Decompressor* d, Planes* shape,
                 int* walked_orientation = nullptr);

/// Samples right of a plane's width and below its height repeat the last column and row.
void pad_plane(Plane* p);

/// Whether EXIF orientation o shows the stored columns right to left (2, 3, 7, 8), and the
/// stored rows bottom to top (3, 4, 6, 7); 5..8 also transpose (a stored row becomes a column).
inline bool flips_stored_columns(int o) { return o == 2 || o == 3 || o == 7 || o == 8; }
inline bool flips_stored_rows(int o) { return o == 3 || o == 4 || o == 6 || o == 7; }

/// The w x h samples of `channels` bytes each at src (rows `src_stride` bytes apart), turned into
/// display orientation `orientation` (EXIF 2..8: flips, and for 5..8 a transpose, so that the
/// result is h x w) at dst (rows `dst_stride` bytes apart). The transposing orientations go tile
/// by tile, so that neither side is read or written a whole column at a time.
void orient_samples(const std::uint8_t* src, std::size_t src_stride, int w, int h, int channels,
                    int orientation, std::uint8_t* dst, std::size_t dst_stride);

}  // namespace histeq::jpeg::internal
