// histeq/planes.hpp — how a mode turns an image into the 8-bit planes that are histogrammed, and
// how many channels come out. Shared by both backends.
//  1–2 channels (gray, gray+alpha): one plane, the gray channel, whatever the mode.
//  3–4 channels: luma and gray → one plane (Y); rgb → three planes (R, G, B).
//  Output channels: gray → 1; otherwise the input's channel count (alpha passed through).
#pragma once
#include "histeq/types.hpp"

namespace histeq {

inline int plane_count(Mode mode, int channels) {
  return (channels >= 3 && mode == Mode::rgb) ? 3 : 1;
}
inline int output_channels(Mode mode, int channels) {
  return mode == Mode::gray ? 1 : channels;
}
/// Default mode for an image: luma for colour, gray for gray (same planes either way).
inline Mode default_mode(int channels) { return channels >= 3 ? Mode::luma : Mode::gray; }

}  // namespace histeq
