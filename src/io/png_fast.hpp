// png_fast.hpp — the fast PNG decoder of the executor and of decode_image (png_fast.cpp; part of
// histeq_host, so that image_io.cpp can use it): 8-bit gray, gray+alpha,
// RGB, RGBA, not interlaced, no tRNS/PLTE; libdeflate's inflate. Every other PNG, and every
// damaged one, is declined and decoded (or refused with its message) by stb_image, so the pixels
// and errors are those of load_image. Internal header (not installed with the library API).
#pragma once
#include <memory>

#include "histeq/codec.hpp"

namespace histeq {

std::shared_ptr<Codec> make_fast_png_decoder();

}  // namespace histeq
