// match.cpp — histogram matching's LUT (match_lut, match_lut16), the counted region's checks
// (Region::check) and the reference of matching (MatchReference): histeq/match.hpp.
//
// The LUT is scikit-image's rule for unsigned integers (skimage.exposure.match_histograms,
// _match_cumulative_cdf): the source's quantile of every level from its counts, the reference's
// occupied levels with their quantiles, and the reference level NumPy's np.interp finds at each
// source quantile (numpy/_core/src/multiarray/compiled_base.c, arr_interp), in double; the result
// rounded half to even as np.rint does. The file is compiled with -ffp-contract=off (CMakeLists):
// a fused multiply-add in the interpolation would change the last bit of a value, and so a
// rounding at .5.
#include "histeq/match.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "histeq/cpu.hpp"
#include "histeq/equalize16.hpp"
#include "histeq/error.hpp"
#include "histeq/planes.hpp"

namespace histeq {
namespace {

/// The reference's side of the interpolation: its occupied levels (fp) and their quantiles
/// (xp, strictly increasing, the last exactly 1).
struct RefPoints {
  std::vector<double> xp, fp;
};

RefPoints ref_points(const std::uint64_t* ref, int levels) {
  std::uint64_t n = 0;
  for (int v = 0; v < levels; ++v) n += ref[v];
  if (n == 0) throw UsageError("histogram matching: the reference has no pixel");
  RefPoints r;
  std::uint64_t cum = 0;
  for (int v = 0; v < levels; ++v) {
    if (ref[v] == 0) continue;
    cum += ref[v];
    r.xp.push_back(double(cum) / double(n));
    r.fp.push_back(double(v));
  }
  return r;
}

/// np.interp(x, xp, fp) with the default left and right values (fp's first and last), for
/// x that never decrease from one call to the next: `j` carries the interval found last time.
/// xp is strictly increasing, so the interval holding x (the last j with xp[j] <= x) is the one
/// NumPy's binary search finds whatever its guess.
double interp_at(double x, const RefPoints& r, std::size_t& j) {
  const std::vector<double>& xp = r.xp;
  const std::vector<double>& fp = r.fp;
  const std::size_t m = xp.size();
  if (m == 1) return fp[0];  // left, right and the one point all give fp[0]
  if (std::isnan(x)) return x;
  if (x < xp[0]) return fp[0];
  if (x > xp[m - 1]) return fp[m - 1];
  while (j + 1 < m && xp[j + 1] <= x) ++j;
  if (j == m - 1) return fp[j];
  if (xp[j] == x) return fp[j];
  const double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
  double y = slope * (x - xp[j]) + fp[j];
  if (std::isnan(y)) {  // NumPy's fallbacks (a non-finite slope)
    y = slope * (x - xp[j + 1]) + fp[j + 1];
    if (std::isnan(y) && fp[j] == fp[j + 1]) y = fp[j];
  }
  return y;
}

template <class T>
void match_levels(const std::uint64_t* src, const std::uint64_t* ref, int levels, T* lut) {
  const RefPoints r = ref_points(ref, levels);
  std::uint64_t n = 0;
  for (int v = 0; v < levels; ++v) n += src[v];
  if (n == 0) {  // nothing to match: the identity
    for (int v = 0; v < levels; ++v) lut[v] = static_cast<T>(v);
    return;
  }
  std::uint64_t cum = 0;
  std::size_t j = 0;
  for (int v = 0; v < levels; ++v) {
    // Above the source's highest level cum stays n: the quantile 1, the highest level's value.
    cum += src[v];
    const double q = double(cum) / double(n);
    lut[v] = static_cast<T>(std::nearbyint(interp_at(q, r, j)));
  }
}

std::string dims(int w, int h) { return std::to_string(w) + "x" + std::to_string(h); }

/// Whether a row of n mask bytes has a nonzero one.
bool any_nonzero(const std::uint8_t* m, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, m + i, 8);
    if (w != 0) return true;
  }
  for (; i < n; ++i)
    if (m[i] != 0) return true;
  return false;
}

}  // namespace

Lut match_lut(const std::uint64_t* src256, const std::uint64_t* ref256) {
  Lut lut{};
  match_levels(src256, ref256, 256, lut.data());
  return lut;
}

std::vector<std::uint16_t> match_lut16(const std::uint64_t* src65536,
                                       const std::uint64_t* ref65536) {
  std::vector<std::uint16_t> lut(kBins16);
  match_levels(src65536, ref65536, kBins16, lut.data());
  return lut;
}

void check_match_reference(const std::vector<Histogram>& ref, int planes, int bins) {
  if (ref.size() != 1 && ref.size() != std::size_t(planes))
    throw Error("histogram matching: " + std::to_string(ref.size()) +
                " reference histograms for an image of " + std::to_string(planes) +
                " planes (valid: 1 or " + std::to_string(planes) + ")");
  const char* depth = bins == 256 ? "8" : "16";
  for (const Histogram& h : ref)
    if (h.size() != std::size_t(bins))
      throw Error(std::string("histogram matching at ") + depth +
                  " bits: a reference histogram of " + std::to_string(h.size()) +
                  " bins (valid: " + std::to_string(bins) + ")");
  for (const Histogram& h : ref) {
    std::uint64_t n = 0;
    for (std::uint64_t c : h) n += c;
    if (n == 0) throw UsageError("histogram matching: the reference has no pixel");
  }
}

void Region::check(int width, int height, const std::string& name) const {
  if (roi) {
    const Roi& r = *roi;
    const std::string text = std::to_string(r.x) + "," + std::to_string(r.y) + "," +
                             std::to_string(r.width) + "," + std::to_string(r.height);
    if (r.width < 1 || r.height < 1)
      throw UsageError(name + ": the rectangle " + text + " is empty (x,y,width,height)");
    if (r.x < 0 || r.y < 0 || std::int64_t(r.x) + r.width > width ||
        std::int64_t(r.y) + r.height > height)
      throw UsageError(name + ": the rectangle " + text + " (x,y,width,height) is not inside the " +
                       dims(width, height) + " image");
  }
  if (!mask) return;
  const Image& m = *mask;
  if (m.channels != 1)
    throw UsageError(name + ": the mask has " + std::to_string(m.channels) +
                     " channels; a mask is a one-channel (gray) image");
  if (m.width != width || m.height != height)
    throw UsageError(name + ": the mask is " + dims(m.width, m.height) + " and the image " +
                     dims(width, height) + " (a mask has the image's size)");
  if (m.pixels.size() != m.byte_count())
    throw Error(name + ": the mask holds " + std::to_string(m.pixels.size()) + " bytes for " +
                dims(m.width, m.height) + " pixels");
  const int x0 = roi ? roi->x : 0, y0 = roi ? roi->y : 0;
  const int w = roi ? roi->width : width, h = roi ? roi->height : height;
  for (int y = y0; y < y0 + h; ++y)
    if (any_nonzero(m.pixels.data() + std::size_t(y) * std::size_t(width) + std::size_t(x0),
                    std::size_t(w)))
      return;
  throw UsageError(name + (roi ? ": the mask counts no pixel inside the rectangle"
                               : ": the mask counts no pixel (every mask pixel is 0)"));
}

namespace {

void check_reference(int w, int h, int c, std::size_t samples, const std::string& name) {
  if (w < 0 || h < 0 || c < 1 || c > 4 ||
      samples != std::size_t(w) * std::size_t(h) * std::size_t(c))
    throw Error(name + ": inconsistent reference image (" + dims(w, h) + ", " + std::to_string(c) +
                " channels, " + std::to_string(samples) + " samples)");
}

/// The 256-bin histograms of an 8-bit reference for an image with `planes` planes: its gray
/// plane (one or two channels), else its luma (planes 1) or its three colour channels.
std::vector<Histogram> reference_hists8(const Image& img, int planes, ChannelOrder order) {
  const std::size_t n = img.pixel_count();
  if (img.channels == 1) return {cpu::histogram(img.pixels.data(), n, SampleType::u8, 256)};
  const Mode mode = img.channels <= 2 || planes == 1 ? Mode::luma : Mode::rgb;
  const int k = plane_count(mode, img.channels);
  std::vector<std::uint8_t> buf(std::size_t(k) * n);
  cpu::extract_planes(img.pixels.data(), n, img.channels, mode, buf.data(), 0, order);
  std::vector<Histogram> hs;
  for (int p = 0; p < k; ++p)
    hs.push_back(cpu::histogram(buf.data() + std::size_t(p) * n, n, SampleType::u8, 256));
  return hs;
}

/// The 65536-bin histograms of a 16-bit reference: its gray channel, or its colour channels
/// (planes 3); a colour reference's luma has no 16-bit form.
std::vector<Histogram> reference_hists16(const Image16& img, int planes, const std::string& name) {
  const std::size_t n = img.pixel_count();
  const std::size_t c = std::size_t(img.channels);
  if (img.channels >= 3 && planes == 1)
    throw UsageError(name +
                     ": a colour reference gives a one-plane 16-bit image (gray, or a mode "
                     "other than rgb) its luma, and 16-bit luma (YCbCr) does not exist: "
                     "use a gray reference or 8 bits (a colour image: or mode rgb)");
  const int k = img.channels >= 3 ? 3 : 1;
  std::vector<std::uint16_t> plane(n);
  std::vector<Histogram> hs;
  for (int p = 0; p < k; ++p) {
    for (std::size_t i = 0; i < n; ++i) plane[i] = img.pixels[i * c + std::size_t(p)];
    hs.push_back(cpu::histogram16(plane.data(), n));
  }
  return hs;
}

}  // namespace

MatchReference::MatchReference(Image image, std::string name, ChannelOrder order)
    : name_(std::move(name)),
      order_(order),
      width_(image.width),
      height_(image.height),
      channels_(image.channels) {
  check_reference(width_, height_, channels_, image.pixels.size(), name_);
  image8_ = std::make_shared<const Image>(std::move(image));
}

MatchReference::MatchReference(Image16 image, std::string name, ChannelOrder order)
    : name_(std::move(name)),
      order_(order),
      width_(image.width),
      height_(image.height),
      channels_(image.channels) {
  check_reference(width_, height_, channels_, image.pixels.size(), name_);
  image16_ = std::make_shared<const Image16>(std::move(image));
}

std::shared_ptr<const std::vector<Histogram>> MatchReference::histograms(Mode mode, int channels,
                                                                         int bits) const {
  if (bits != 8 && bits != 16)
    throw UsageError("histogram matching at " + std::to_string(bits) + " bits (valid: 8, 16)");
  if (channels < 1 || channels > 4)
    throw Error("histogram matching of an image of " + std::to_string(channels) +
                " channels (valid: 1..4)");
  const int planes = plane_count(mode, channels);
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : cache_)
    if (e.mode == mode && e.planes == planes && e.bits == bits) return e.hists;
  if (std::size_t(width_) * std::size_t(height_) == 0)
    throw UsageError(name_ + ": the reference image has no pixel");
  std::vector<Histogram> hs;
  if (bits == 8) {
    hs = image8_ ? reference_hists8(*image8_, planes, order_)
                 : reference_hists8(narrow_to_8(*image16_), planes, order_);
  } else {
    hs = image16_ ? reference_hists16(*image16_, planes, name_)
                  : reference_hists16(widen_to_16(*image8_), planes, name_);
  }
  while (int(hs.size()) < planes) hs.push_back(hs.front());  // a gray reference: every plane
  auto shared = std::make_shared<const std::vector<Histogram>>(std::move(hs));
  cache_.push_back({mode, planes, bits, shared});
  return shared;
}

}  // namespace histeq
