// histeq/planes.hpp — how a mode turns an image into the 8-bit planes that are histogrammed, and
// how many channels come out. Shared by both backends.
//  1–2 channels (gray, gray+alpha): one plane, the gray channel, whatever the mode.
//  Default mode: gray for 1 channel, luma otherwise (keeps alpha).
//  3–4 channels: luma and gray → one plane (Y); rgb → three planes (R, G, B).
//  Output channels: gray → 1; otherwise the input's channel count (alpha passed through).
#pragma once
#include "histeq/types.hpp"

namespace histeq {

inline int plane_count(Mode mode, int channels) {
  return (channels >= 3 && mode == Mode::rgb) ? 3 : 1;
}
inline int output_channels(Mode mode, int channels) { return mode == Mode::gray ? 1 : channels; }
/// Default mode for an image: gray for one channel; luma for everything else, so that the alpha
/// channel of gray+alpha and RGBA input is kept (luma of gray+alpha is its gray channel).
inline Mode default_mode(int channels) { return channels == 1 ? Mode::gray : Mode::luma; }
/// The mode that runs when `asked` is: one channel is gray whatever was asked; gray+alpha's gray
/// channel with its alpha kept is luma, also when rgb was asked; otherwise the mode asked. Reports
/// name this one.
inline Mode mode_that_runs(Mode asked, int channels) {
  if (channels == 1) return Mode::gray;
  if (channels == 2 && asked == Mode::rgb) return Mode::luma;
  return asked;
}

}  // namespace histeq
