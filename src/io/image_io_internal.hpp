// io/image_io_internal.hpp — what the files behind image_io.hpp share:
//   image_io.cpp      reading (read_file, decode_image, load_image, image_info; stb_image)
//   image_encode.cpp  encode_image, save_image, check_output_path (stb_image_write: BMP, TGA)
//   png_write.cpp     histeq's 8-bit PNG writer
//   png16.cpp         the 16-bit PNG writer (libspng), which takes the same --png-level
//   atomic_write.cpp  write_file_atomic and the signal cleanup of its temporary files
// Room io (docs/architecture.md): private to the room.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "histeq/types.hpp"

namespace histeq::detail {

/// A path or name as the messages quote it.
inline std::string quoted(const std::string& s) { return "'" + s + "'"; }

/// Why a file of type `m` (st_mode) is not read or written as a regular file, in words.
inline const char* file_type_name(mode_t m) {
  if (S_ISDIR(m)) return "it is a directory";
  if (S_ISFIFO(m)) return "it is a FIFO (named pipe), not a regular file";
  if (S_ISSOCK(m)) return "it is a socket, not a regular file";
  if (S_ISCHR(m)) return "it is a character device, not a regular file";
  if (S_ISBLK(m)) return "it is a block device, not a regular file";
  return "it is not a regular file";
}

/// UsageError unless `level` is a PNG level, 0 (stored) .. 9 (smallest): what encode_image and
/// encode_image16 take (image_encode.cpp).
void check_png_level(int level);

/// The PNG file of an 8-bit image of 1..4 channels at zlib `level` 0..9 (png::kStripPngLevel:
/// ISA-L strips), with its ICC profile when it fits the channels (png_write.cpp).
std::vector<std::uint8_t> write_png8(const Image& img, int level);

}  // namespace histeq::detail
