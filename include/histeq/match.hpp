// histeq/match.hpp — histogram matching (the LUT that maps an image's levels onto a reference's
// distribution) and the region a histogram counts (masked equalization). Both are options of the
// stage sequences (EqualizeOptions::reference, EqualizeOptions::region), so every backend, the
// executor and the Python package run them through the stages equalize runs.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "histeq/image16.hpp"
#include "histeq/lut.hpp"
#include "histeq/types.hpp"

namespace histeq {

/// Histogram matching's LUT for 256 levels: scikit-image's `_match_cumulative_cdf` for unsigned
/// integers, rounded half to even. src_q[v] = (src[0] + ... + src[v]) / N_src for every level
/// v; the reference's occupied levels r_0 < r_1 < ... with quantiles ref_q[k] = (count of levels
/// <= r_k) / N_ref; lut[v] = rint(interp(src_q[v], ref_q, r)), interp being NumPy's `np.interp`
/// (below ref_q[0]: r_0; at or above the last quantile: the last level; an exact hit: that level;
/// else slope · (x − ref_q[j]) + r_j with slope = (r_{j+1} − r_j) / (ref_q[j+1] − ref_q[j]), in
/// double, no fused multiply-add). Levels above the source's highest occupied level are mapped as
/// it is (they do not occur in the image). An empty reference throws UsageError; an empty
/// source gives the identity.
Lut match_lut(const std::uint64_t* src256, const std::uint64_t* ref256);
/// The same for 65536 levels (16-bit images).
std::vector<std::uint16_t> match_lut16(const std::uint64_t* src65536,
                                       const std::uint64_t* ref65536);

/// Matching's reference histograms for an image of `planes` planes at `bins` levels (256 or
/// 65536), checked as every backend checks them before any work: their number (one for every
/// plane, or one per plane) and every one's size (Error: a caller's mistake), then each one's
/// count, in plane order (UsageError "the reference has no pixel", as match_lut throws).
void check_match_reference(const std::vector<Histogram>& ref, int planes, int bins);

/// A rectangle of an image, in pixels from the top-left corner.
struct Roi {
  int x = 0, y = 0, width = 0, height = 0;
};

/// The pixels a histogram counts (masked equalization): every pixel (the default), those of a
/// rectangle, or those where a mask (one byte per pixel, the image's size, row-major) is nonzero;
/// both given: the mask's pixels inside the rectangle. The LUT made from the counted pixels
/// applies to every pixel.
struct Region {
  std::optional<Roi> roi;
  /// One channel; nonzero: counted. The mask image must not change while a run uses it or an
  /// engine may use it again: the GPU engines keep a mask they uploaded, keyed by this object
  /// (and its pixels' address and size), so pixels changed in place are not seen. Give a changed
  /// mask as a new image.
  std::shared_ptr<const Image> mask;
  bool all() const { return !roi && !mask; }
  /// Throws UsageError naming `name` when the region does not fit a width x height image (the
  /// rectangle outside it, the mask another size or not one channel) or counts no pixel.
  void check(int width, int height, const std::string& name) const;
  /// Whether pixel (x, y) is counted (no bounds check; for models and tests).
  bool counts(int x, int y, int width) const {
    if (roi && (x < roi->x || y < roi->y || x >= roi->x + roi->width || y >= roi->y + roi->height))
      return false;
    return !mask || mask->pixels[std::size_t(y) * std::size_t(width) + std::size_t(x)] != 0;
  }
};

/// The reference of histogram matching: an image decoded once and kept; its histograms for a
/// mode and a depth are computed on first use and kept (thread-safe).
class MatchReference {
 public:
  /// `order`: which channel of a colour reference is red (as the images matched to it).
  MatchReference(Image image, std::string name, ChannelOrder order = ChannelOrder::rgb);
  MatchReference(Image16 image, std::string name, ChannelOrder order = ChannelOrder::rgb);

  /// The histograms an image of `channels` channels processed in `mode` at `bits` (8: 256 bins,
  /// 16: 65536) is matched to, one per plane the mode makes of it (plane_count): the planes the
  /// same mode makes of the reference (a one-channel image: mode gray's plane of the reference); a
  /// gray reference gives its one histogram to every plane. The reference is narrowed
  /// (round(v / 257)) or widened (v · 257) to `bits` as images are. 16 bits and a colour
  /// reference in a mode other than rgb, or for a one-channel image (which follows the
  /// reference's luma), throw UsageError (no 16-bit YCbCr). Throws UsageError when the reference
  /// has no pixel, or for bits other than 8 and 16.
  std::shared_ptr<const std::vector<Histogram>> histograms(Mode mode, int channels, int bits) const;

  const std::string& name() const { return name_; }
  int width() const { return width_; }
  int height() const { return height_; }
  int channels() const { return channels_; }

 private:
  std::string name_;
  ChannelOrder order_;
  int width_ = 0, height_ = 0, channels_ = 0;
  std::shared_ptr<const Image> image8_;
  std::shared_ptr<const Image16> image16_;
  mutable std::mutex mu_;
  struct Entry {
    Mode mode;
    int planes, bits;
    std::shared_ptr<const std::vector<Histogram>> hists;
  };
  mutable std::vector<Entry> cache_;
};

}  // namespace histeq
