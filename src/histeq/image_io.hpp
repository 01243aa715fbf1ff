// histeq/image_io.hpp — loading and saving 8-bit images with stb_image / stb_image_write.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "histeq/jpeg_codec.hpp"
#include "histeq/types.hpp"

namespace histeq {

/// Default most pixels (width × height) an image may have; checked from the header before any
/// pixel memory is allocated. 2^28 = 268 megapixels (1 GiB of RGBA).
inline constexpr std::uint64_t kDefaultMaxPixels = std::uint64_t(1) << 28;

/// Decodes JPEG with libjpeg-turbo (jpeg::decode: EXIF orientation applied, EXIF and ICC kept
/// in Image::exif/icc; 1 channel for gray JPEGs, else RGB), and PNG (its iCCP profile into
/// Image::icc), BMP, TGA, GIF (first frame) and binary PNM (P5/P6) with stb_image (no other format is compiled in), keeping the file's
/// channel count (1..4), 16-bit inputs reduced to 8 bits. Only regular files are read (a FIFO or
/// a device is refused, never waited on). Before stb sees the bytes: the dimensions from the
/// header against max_pixels (w·h in 64 bits), PNG chunk lengths against the file size and
/// their CRCs, JPEG Huffman tables and PNM header numbers (stb 2.27 overflows on those; see
/// docs/reliability.md). Throws Error naming the file and the cause: missing, a directory, a
/// FIFO/device, empty, over 2^31-1 bytes, not an image, truncated/corrupt, zero size, or more
/// than max_pixels pixels.
Image load_image(const std::string& path, std::uint64_t max_pixels = kDefaultMaxPixels);
/// The whole file in memory, with load_image's checks (regular file only, never blocks on a
/// FIFO, not empty, at most 2^31-1 bytes). Throws Error naming the file and the cause.
std::vector<std::uint8_t> read_image_file(const std::string& path);
Image decode_image(const std::uint8_t* data, std::size_t size, const std::string& name,
                   std::uint64_t max_pixels = kDefaultMaxPixels);

/// Output formats by extension: .png .jpg/.jpeg .bmp .tga (case-insensitive).
/// Throws UsageError for any other extension, naming the valid ones.
void check_output_path(const std::string& path);

/// Encodes to the format named by the path's extension and writes through a temporary file in
/// the same folder, renamed over `path` only when complete (so `path` may equal the input, and
/// a failure leaves nothing behind). quality: JPEG quality 1..100; subsampling: JPEG chroma.
/// JPEG is written by libjpeg-turbo (jpeg::encode: EXIF and ICC kept, gray as 1 component),
/// PNG with the image's ICC profile as an iCCP chunk when it fits the channels.
/// Throws Error naming the file and the cause (folder missing or not writable, disk full).
void save_image(const Image& img, const std::string& path, int quality = 95,
                jpeg::Subsampling subsampling = jpeg::Subsampling::s420);

/// Writes already-encoded bytes to `path` as save_image does (temporary file in the same folder,
/// fsync, rename over `path`; nothing left behind on failure). Throws Error as save_image.
void write_image_file(const std::vector<std::uint8_t>& bytes, const std::string& path);

/// Encodes to memory (format by extension as save_image); used by save_image and the fuzzer.
std::vector<std::uint8_t> encode_image(const Image& img, const std::string& ext, int quality = 95,
                                       jpeg::Subsampling subsampling = jpeg::Subsampling::s420);

/// Makes SIGINT, SIGTERM, SIGHUP and SIGQUIT remove the temporary file of every save_image in
/// flight, then end the process with the same signal (default action re-raised), so an
/// interrupted run leaves neither a partial output nor a temp file. Signals that are ignored
/// when it is called (nohup) stay ignored. Call once, early in main(); idempotent.
void install_signal_cleanup();

/// Test hook: called by save_image after each chunk written to the temp file, with the temp
/// file's path and the bytes written so far (nullptr: none). Not for production use.
using SaveHook = void (*)(const char* temp_path, std::size_t bytes_written);
void set_save_hook_for_testing(SaveHook hook);

}  // namespace histeq
