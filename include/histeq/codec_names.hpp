// codec_names.hpp — the names reports give the codecs: the "decoder" and "encoder" of a JSON
// report and of a batch's text lines, the batch summary's "decoders", `histeq --version`. One
// name per codec, the one that ran, whichever route (one file, a batch, Python) ran it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace histeq::codec {

/// JPEG on the CPU (decoded pixels), decoder and encoder.
inline constexpr const char* kLibjpegTurbo = "libjpeg-turbo";
/// JPEG in luma mode in the file's own YCbCr planes (jpeg_planes.hpp), decoder and encoder.
inline constexpr const char* kLibjpegTurboYcbcr = "libjpeg-turbo-ycbcr";
/// JPEG in luma mode in the file's own YCbCr planes, the entropy decoding by libjpeg-turbo
/// (its coefficients) and the inverse DCT on the GPU (the batch's device route, progressive
/// files): the same samples as kLibjpegTurboYcbcr's.
inline constexpr const char* kLibjpegTurboCoefficients = "libjpeg-turbo-coefficients";
/// nvJPEG on the GPU: the hardware decoder, the hybrid decoder (entropy decoding on the CPU),
/// the decoder with the GPU's Huffman decoding (GPU_HYBRID), the encoder.
inline constexpr const char* kNvjpegHardware = "nvjpeg-hw";
inline constexpr const char* kNvjpegHybrid = "nvjpeg-hybrid";
inline constexpr const char* kNvjpegGpuHybrid = "nvjpeg-gpu-hybrid";
inline constexpr const char* kNvjpeg = "nvjpeg";
/// histeq's own PNG code for 8-bit PNGs: the reader of the common PNG (8-bit gray, gray+alpha,
/// RGB, RGBA, not interlaced, no tRNS/PLTE) with libdeflate's inflate, and the writer (Paeth
/// filter on every row) with libdeflate's deflate at PNG levels 0 and 2..9.
inline constexpr const char* kLibdeflatePng = "libdeflate-png";
/// histeq's PNG writer with ISA-L's igzip in strips on several threads (PNG level 1, the default).
inline constexpr const char* kIsalPng = "isa-l-png";
/// 16-bit PNG, decoder and encoder.
inline constexpr const char* kLibspng = "libspng";
/// histeq's own binary PGM/PPM (P5/P6) reader and writer, 8 and 16 bits.
inline constexpr const char* kPnm = "histeq-pnm";
/// Every other 8-bit input: PNGs the libdeflate reader declines, BMP, TGA, GIF.
inline constexpr const char* kStbImage = "stb_image";
/// BMP and TGA outputs.
inline constexpr const char* kStbImageWrite = "stb_image_write";

/// The encoder encode_image uses for an extension (".png", "jpg", any case) at a PNG level.
std::string encoder_name(const std::string& ext, int png_level);
/// The encoder encode_image16 uses: libspng for PNG, histeq-pnm for PGM/PPM/PNM.
std::string encoder16_name(const std::string& ext);
/// The decoder decode_image16 uses for these bytes: histeq-pnm for binary PNM, else libspng.
std::string decoder16_name(const std::uint8_t* data, std::size_t size);

}  // namespace histeq::codec
