// cli/depth.hpp — the command line's per-file operation for CLAHE and for 16-bit images (and
// --depth conversions): decode → equalize / CLAHE / histogram at the image's bit depth → encode.
// Used by the single-file commands and, through ExecutorOptions::item_op, by the batch executor,
// so that one file gives the same bytes either way. Plain 8-bit equalize/histogram keep their
// own paths (needs_item_op says which).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "histeq/clahe.hpp"
#include "histeq/executor.hpp"
#include "histeq/image16.hpp"
#include "histeq/pipeline.hpp"

namespace histeq::cli {

enum class ItemOpKind : std::uint8_t { equalize, clahe, histogram };

struct ItemOpOptions {
  ItemOpKind kind = ItemOpKind::equalize;
  EqualizeOptions equalize;  ///< backend, mode, kernel, formula (8-bit equalize/histogram)
  ClaheOptions clahe;        ///< clip and tiles (mode comes from equalize.mode)
  int depth = 0;  ///< --depth: 0 keep the input's, 8 narrow 16-bit inputs, 16 widen 8-bit ones
  std::uint64_t max_pixels = kDefaultMaxPixels;
  EncodeOptions encode;
  /// CUDA devices the items of a batch are spread over, round robin (--devices; empty: every
  /// visible device). Each GPU item sets its thread's current device to the next one.
  std::vector<int> devices;
  bool spread_over_devices = false;  ///< true in a batch
};

/// True when the operation must go through run_item: CLAHE always, 16-bit inputs always (with
/// --depth 8 they are narrowed by narrow_to_8, round(v/257), not stb_image's v>>8), 8-bit
/// inputs with --depth 16. False: the plain 8-bit path gives the same result.
bool needs_item_op(const ItemOpOptions& opt, bool input_is_16bit);

/// True when a file of this extension (".png", ".pgm", ...) can hold 16-bit samples.
bool holds_16bit(const std::string& ext);

/// Decodes `data` (the file `name`), runs the operation at the bit depth chosen by opt.depth and
/// the input, and returns the encoded output in the format of `out_ext` (empty for histogram).
/// Fills rep: width, height, channels, output_channels, bit_depth, decoder, encoder,
/// equalize.{backend, device, kernel, mode, histograms (histogram only)}, times.{decode,
/// equalize, encode}. Throws UsageError for a 16-bit output in a format that cannot hold it
/// (jpg, bmp, tga: use .png/.pgm/.ppm/.pnm or --depth 8), channels the PGM/PPM extension cannot
/// hold (io/pnm_write.hpp), a mode that 16-bit colour cannot take (naming `name`); Error for a
/// bad file.
std::vector<std::uint8_t> run_item(const ItemOpOptions& opt, const std::uint8_t* data,
                                   std::size_t size, const std::string& name,
                                   const std::string& out_ext, ItemReport& rep);

}  // namespace histeq::cli
