// histeq/clahe.hpp — contrast-limited adaptive histogram equalization (CLAHE), exactly OpenCV
// 4.6's cv::createCLAHE(clipLimit, tileGridSize)->apply(src, dst) for 8-bit (CV_8UC1, 256 bins)
// and 16-bit (CV_16UC1, 65536 bins) planes; the arithmetic is in clahe_formula.hpp.
// Source: Zuiderveld, "Contrast Limited Adaptive Histogram Equalization", Graphics Gems IV
// (1994); OpenCV modules/imgproc/src/clahe.cpp (4.6.0) for the exact integer clip limit,
// redistribution, LUT rounding, reflect-101 padding and float32 bilinear interpolation.
//
// Colour images (8-bit): Mode::luma applies CLAHE to Y of YCbCr (color.hpp, OpenCV's
// COLOR_RGB2YCrCb fixed point) and keeps chroma and alpha; Mode::rgb applies it to R, G and B
// separately; Mode::gray writes one channel, the CLAHE of luma. 16-bit colour images: gray and
// rgb modes (no 16-bit YCbCr); alpha is passed through.
//
// Masked CLAHE (ClaheOptions::region, match.hpp's Region: a rectangle and/or a mask): OpenCV's
// CLAHE with each tile's histogram counting only the counted pixels of the tile, in the padded
// geometry OpenCV uses (a padded position counts when the pixel reflect-101 maps it to is counted,
// so the padding's flags are the mask's, reflected as the pixels are). N_t, the tile's counted
// pixels, takes the place of the tile area in the clip limit (max(1, int(clip_limit · N_t /
// bins)), no clipping when that reaches N_t) and in the LUT scale ((bins − 1) / N_t, float32). A
// tile with no counted pixel (N_t = 0) keeps the identity LUT (lut[v] = v). The interpolation
// runs on every pixel, unchanged. A region counting every pixel gives exactly the unmasked bytes;
// a region counting none is Region::check's UsageError. On the GPU: kernels/clahe/clahe_masked.cu
// (the masked tile histograms and LUTs), then the unmasked apply.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "histeq/image16.hpp"
#include "histeq/match.hpp"
#include "histeq/types.hpp"

namespace histeq {

/// The parameters of one CLAHE call (OpenCV's names in brackets).
struct ClaheOptions {
  /// [clipLimit] Contrast limit, relative: the integer clip limit per bin is
  /// max(1, int(clip_limit · tile_area / bins)). 0 (or any value <= 0) = no clipping
  /// (plain adaptive equalization), and so is a limit whose clip reaches tile_area (no bin can
  /// exceed it; 1e12, 1e308 included). Default 40, OpenCV's (2 to 4 suit photographs: with 8x8
  /// tiles of a large image, 40 barely limits the contrast).
  double clip_limit = 40.0;
  /// [tileGridSize] Tiles per row (width, W) and per column (height, H), 1..kMaxClaheTiles.
  int tiles_x = 8;
  int tiles_y = 8;
  /// What a colour image's CLAHE acts on (planes.hpp); gray images ignore it.
  Mode mode = Mode::luma;
  /// Which channel of a colour image is red (types.hpp): the luma of luma and gray modes.
  ChannelOrder order = ChannelOrder::rgb;
  /// The pixels the tile histograms count (masked CLAHE, see the top): every pixel (the
  /// default), a rectangle and/or a mask of the image's size; every plane of a colour image
  /// counts the same pixels.
  Region region;
};

/// Largest grid side accepted (a 1024×1024 grid of 65536-bin LUTs would be 128 GiB already).
inline constexpr int kMaxClaheTiles = 1024;

/// Most tiles·bins LUT entries (and counters) a call may need: 2^28 (8-bit grids are never
/// refused: 1024·1024·256 = 2^28; 16-bit grids up to 4096 tiles, e.g. 64×64).
inline constexpr std::uint64_t kMaxClaheLutEntries = std::uint64_t(1) << 28;

/// Throws UsageError when clip_limit is NaN/infinite or a tile count is outside
/// 1..kMaxClaheTiles, naming the value; the second form also when tiles·bins exceeds
/// kMaxClaheLutEntries (bins: 256 or 65536).
void validate(const ClaheOptions& opt);
void validate(const ClaheOptions& opt, int bins);

namespace cpu {

/// CLAHE of one 8-bit plane: in[0, width·height) → out (same size; may not overlap), row-major,
/// rows contiguous. width, height >= 1. Threaded (0: hardware_concurrency). Byte-identical to
/// OpenCV 4.6 (CV_8UC1). Throws UsageError for bad sizes or options, or a region that does not
/// fit the plane or counts no pixel (Region::check).
void clahe_plane(const std::uint8_t* in, int width, int height, const ClaheOptions& opt,
                 std::uint8_t* out, int threads = 0);
/// The same for a 16-bit plane (65536 bins, OpenCV's CV_16UC1).
void clahe_plane16(const std::uint16_t* in, int width, int height, const ClaheOptions& opt,
                   std::uint16_t* out, int threads = 0);

/// The per-tile LUTs only: luts[t·bins + v], t = ty·tiles_x + tx, bins = 256 (uint8_t) or
/// 65536 (uint16_t). luts holds tiles_x·tiles_y·bins entries. For tests and the GPU twin.
/// With a region: the masked LUTs (identity for a tile with no counted pixel).
void clahe_luts(const std::uint8_t* in, int width, int height, const ClaheOptions& opt,
                std::uint8_t* luts, int threads = 0);
void clahe_luts16(const std::uint16_t* in, int width, int height, const ClaheOptions& opt,
                  std::uint16_t* luts, int threads = 0);

/// CLAHE of a whole image by mode (see top). Output channels: output_channels(mode, channels)
/// (planes.hpp); opt.mode is replaced by default_mode(channels) for 1-channel images.
/// Throws UsageError for bad options (and luma on 16-bit colour), Error for an empty image.
Image clahe(const Image& img, const ClaheOptions& opt, int threads = 0);
Image16 clahe(const Image16& img, const ClaheOptions& opt, int threads = 0);

}  // namespace cpu

namespace detail {
/// The mode logic of cpu::clahe(Image) around any plane CLAHE (the CPU's or the GPU's):
/// planes are extracted on the host, plane_fn(in, out) maps each width·height plane, and the
/// result is recombined (chroma and alpha kept). Shared so that both backends recombine alike.
using PlaneFn8 = std::function<void(const std::uint8_t* in, std::uint8_t* out)>;
using PlaneFn16 = std::function<void(const std::uint16_t* in, std::uint16_t* out)>;
Image clahe_image(const Image& img, const ClaheOptions& opt, const PlaneFn8& plane_fn);
Image16 clahe_image(const Image16& img, const ClaheOptions& opt, const PlaneFn16& plane_fn);
/// The same on pixels the caller owns, into `out` (clahe_output_channels samples per pixel,
/// not overlapping the input): a gray image is handed to plane_fn as it is (no copy).
void clahe_into(const ImageView<std::uint8_t>& img, const ClaheOptions& opt, std::uint8_t* out,
                const PlaneFn8& plane_fn);
void clahe_into(const ImageView<std::uint16_t>& img, const ClaheOptions& opt, std::uint16_t* out,
                const PlaneFn16& plane_fn);
}  // namespace detail

/// CLAHE of a whole image on the chosen backend: automatic = the GPU when one is usable, else
/// the CPU. cuda without a usable device throws CudaError. The GPU result equals cpu::clahe
/// byte for byte. `device_used` (optional) receives "cpu" or the GPU's name.
/// Defined in the CUDA library (histeq::histeq), not in histeq::host.
Image clahe(const Image& img, const ClaheOptions& opt, Backend backend = Backend::automatic,
            std::string* device_used = nullptr);
Image16 clahe(const Image16& img, const ClaheOptions& opt, Backend backend = Backend::automatic,
              std::string* device_used = nullptr);

/// The same on pixels the caller owns, into `out` (not overlapping them): 8-bit,
/// output_channels(mode, channels) samples per pixel with mode opt.mode (gray for one channel,
/// and for two channels unless opt.mode is gray: luma, which keeps alpha); 16-bit, the input's
/// channels. No copy of a gray input (the Python binding's host path). Same bytes as clahe().
void clahe_into(const ImageView<std::uint8_t>& img, const ClaheOptions& opt, Backend backend,
                std::uint8_t* out, std::string* device_used = nullptr);
void clahe_into(const ImageView<std::uint16_t>& img, const ClaheOptions& opt, Backend backend,
                std::uint16_t* out, std::string* device_used = nullptr);

}  // namespace histeq
