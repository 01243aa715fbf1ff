// cli/depth.hpp — the command line's single-file path for CLAHE, matching, a counted region
// (--mask, --roi) and 16-bit images (and --depth conversions): the library's item plan and run
// (histeq/item.hpp), as the batch executor runs every item, so that one file gives the same bytes
// either way. Plain 8-bit equalize and histogram keep their own single-file path (needs_item_op
// says which).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "histeq/image_io.hpp"
#include "histeq/item.hpp"
#include "histeq/operation.hpp"

namespace histeq::cli {

/// The operation of a command and what its single-file run needs besides.
struct ItemOpOptions {
  Operation op;
  EncodeOptions encode;
  std::uint64_t max_pixels = kDefaultMaxPixels;
};

/// True when the single-file operation must go through run_item: CLAHE, matching and a counted
/// region (mask, rectangle) always, 16-bit inputs always (with --depth 8 they are narrowed by
/// narrow_to_8, round(v/257), not stb_image's v>>8), 8-bit inputs with --depth 16. False: the plain
/// 8-bit path gives the same result.
bool needs_item_op(const ItemOpOptions& opt, bool input_is_16bit);

/// Plans and runs one file (plan_item, run_item on the CPU or the operation's backend) and
/// returns the encoded output in the format of `out_ext` (empty for histogram); fills rep.
std::vector<std::uint8_t> run_item(const ItemOpOptions& opt, const std::uint8_t* data,
                                   std::size_t size, const std::string& name,
                                   const std::string& out_ext, ItemReport& rep);

}  // namespace histeq::cli
