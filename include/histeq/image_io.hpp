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
/// in Image::exif/icc; 1 channel for gray JPEGs, else RGB); PNG (its iCCP profile into
/// Image::icc), BMP (bottom-up and top-down), TGA and GIF (first frame) with stb_image; binary
/// PNM (P5/P6, maxval 1..65535) with histeq's own decoder; keeping the file's channel count
/// (1..4), 16-bit inputs reduced to 8 bits (PNM: v·255/maxval rounded, samples big-endian).
/// Only regular files are read (a FIFO or a device is refused, never waited on). Every output
/// pixel comes from the file: before stb sees the bytes, the dimensions from the header are
/// checked against max_pixels (w·h in 64 bits), then the file's structure
/// (src/io/decode_checks.hpp): data long enough for every pixel (a tiny file declaring a huge
/// image fails before any large allocation), palette / colour-map indices within the palette,
/// complete GIF LZW data, PNG chunk lengths, CRCs, IEND, and IDAT data that inflates to exactly
/// what the header needs (a decompression bomb is refused, bounded memory). Throws Error naming
/// the file and the cause: missing, a directory, a FIFO/device, empty, over 2^31-1 bytes, not an
/// image, truncated/corrupt (which defect), zero size, or more than max_pixels pixels. Buffers
/// stb allocates start zeroed (defense in depth).
Image load_image(const std::string& path, std::uint64_t max_pixels = kDefaultMaxPixels);
/// The whole file in memory, with load_image's checks (regular file only, never blocks on a
/// FIFO, not empty, at most 2^31-1 bytes). Throws Error naming the file and the cause.
std::vector<std::uint8_t> read_image_file(const std::string& path);
/// decode_image: load_image on bytes in memory. `decoder`, when given, is set to the decoder that
/// ran, as the reports name it (codec_names.hpp): libjpeg-turbo, libdeflate-png (the common
/// 8-bit PNG), histeq-pnm or stb_image.
Image decode_image(const std::uint8_t* data, std::size_t size, const std::string& name,
                   std::uint64_t max_pixels = kDefaultMaxPixels, std::string* decoder = nullptr);

/// Default zlib level of PNG output (0..9), with the Paeth filter on every row. Level 1 is ISA-L's
/// igzip (https://github.com/intel/isa-l) in strips of about 4 MiB of rows compressed on several
/// threads and joined into one zlib stream: 2.3-2.6x libdeflate's level 1 on one core for 1-6 %
/// more bytes, still smaller files than OpenCV 5 at its default (docs/benchmarks.md).
inline constexpr int kDefaultPngLevel = 1;

/// How images are encoded. quality: JPEG 1..100. png_level: 0 (stored) .. 9 (smallest): 1 is
/// igzip in strips (above); 0 and 2..9 are that level of libdeflate
/// (https://github.com/ebiggers/libdeflate) in one call, byte for byte stb_image_write's file
/// with the Paeth filter and that compressor.
struct EncodeOptions {
  int quality = 95;
  int png_level = kDefaultPngLevel;
  jpeg::Subsampling subsampling = jpeg::Subsampling::s420;  ///< JPEG chroma (gray: 4:0:0)
};

/// Output formats by extension: .png .jpg/.jpeg .bmp .tga .pgm .ppm .pnm (case-insensitive).
/// Throws UsageError for any other extension, naming the valid ones.
void check_output_path(const std::string& path);

/// Encodes to the format named by the path's extension and writes through a temporary file in
/// the same folder, renamed over `path` only when complete (so `path` may equal the input, and
/// a failure leaves nothing behind). The temporary file is ".NAME.histeq-XXXXXX", or
/// ".histeq-XXXXXX" when that would pass the folder's NAME_MAX, so every output name the
/// filesystem takes works. quality: JPEG quality 1..100; subsampling: JPEG chroma.
/// JPEG is written by libjpeg-turbo (jpeg::encode: EXIF and ICC kept, gray as 1 component, alpha
/// dropped), PNG with the image's ICC profile as an iCCP chunk when it fits the channels, BMP
/// as 24-bit BGR or, with alpha (RGBA, gray+alpha), 32-bit BGRA; see encoded_channels.
/// Throws Error naming the file and the cause (folder missing or not writable, disk full).
void save_image(const Image& img, const std::string& path, int quality = 95,
                jpeg::Subsampling subsampling = jpeg::Subsampling::s420);

/// Writes already-encoded bytes to `path` as save_image does: write_file_atomic below.
void write_image_file(const std::vector<std::uint8_t>& bytes, const std::string& path);

void save_image(const Image& img, const std::string& path, const EncodeOptions& opt);

/// Encodes to memory (format by extension as save_image); used by save_image and the fuzzer.
/// PNG: stb_image_write's writer with a fixed Paeth filter and libdeflate's zlib at
/// opt.png_level. .pgm/.ppm/.pnm: a binary PGM (P5, gray) or PPM (P6, colour) of maxval 255;
/// .pgm takes 1 channel, .ppm 3, .pnm either. Throws UsageError for an unknown extension, an
/// option out of range, or a channel count the PGM/PPM extension cannot hold (the message names
/// the one that fits; alpha: .png).
std::vector<std::uint8_t> encode_image(const Image& img, const std::string& ext, int quality = 95,
                                       jpeg::Subsampling subsampling = jpeg::Subsampling::s420);
std::vector<std::uint8_t> encode_image(const Image& img, const std::string& ext,
                                       const EncodeOptions& opt);

/// The channels of the file that encode_image (or, for .pgm/.ppm, encode_image16) writes for an
/// image of `channels` (1..4) in the format of `ext` (".png", "jpg", any case): what a decoder
/// reads back, and what the reports call output_channels. JPEG holds no alpha: 1 for gray and
/// gray+alpha, 3 for RGB and RGBA. BMP is 24-bit BGR (3, a gray image in three equal channels)
/// or, with alpha, 32-bit BGRA (4: gray+alpha expanded to RGBA). PNG, TGA, PGM, PPM and
/// unknown extensions: `channels`.
int encoded_channels(int channels, const std::string& ext);

/// Writes `size` bytes to `path` as save_image does: through a temporary file in the target's
/// folder renamed over it when complete. Overwriting keeps the target's permission bits; a
/// target without write permission is refused (as cp does, also for root: no write bit at all);
/// a symlink target writes the file it points to and stays a link. An existing target that is
/// not a regular file — a FIFO, a character or block device (/dev/null) — is opened and written
/// directly, as cp does (no temporary file: a rename would replace it; a FIFO waits for its
/// reader); a directory or a socket is refused. Throws Error naming the file.
void write_file_atomic(const std::string& path, const std::uint8_t* data, std::size_t size);

/// Width, height and channels from an image's header (stbi_info), without decoding; false when
/// the bytes are not a recognized image. For sizing buffers only: decode_image does the checks.
bool image_info(const std::uint8_t* data, std::size_t size, int* width, int* height, int* channels);

/// Makes every catchable fatal signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXFSZ, SIGXCPU,
/// SIGPIPE, SIGALRM, SIGUSR1/2, SIGVTALRM, SIGPROF, SIGPOLL, SIGSTKFLT, SIGPWR; and SIGSEGV,
/// SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS, SIGTRAP where no other handler, e.g. a sanitizer's,
/// is installed) remove the temporary file of every save_image in flight, then end the process
/// with the same signal (default action re-raised), so an interrupted run leaves neither a
/// partial output nor a temp file. Signals that are ignored when it is called (nohup) stay
/// ignored. Call once, early in main(); idempotent.
void install_signal_cleanup();

/// Hands the next SIGINT to a graceful stop instead of the handling above: install_signal_cleanup's
/// handler writes one byte to `fd` (a pipe's write end, which the caller reads on a thread of its
/// own) and the process goes on; a SIGINT after that one, or after set_interrupt_pipe(-1), is
/// handled as above. For a batch that finishes the files in progress, reports, then ends by
/// SIGINT itself. No effect where SIGINT is ignored or install_signal_cleanup was not called.
/// Returns the descriptor it replaces: -1 when a SIGINT took it (its byte is written, or about to
/// be: keep the pipe open until it is read) or none was set.
int set_interrupt_pipe(int fd);

/// Test hook: called by save_image after each chunk written to the temp file, with the temp
/// file's path and the bytes written so far (nullptr: none). Not for production use.
using SaveHook = void (*)(const char* temp_path, std::size_t bytes_written);
void set_save_hook_for_testing(SaveHook hook);

}  // namespace histeq
