// clahe_model.hpp — pieces of the tests' independent CLAHE model (test_host_clahe.cpp,
// test_host_clahe_masked.cpp): OpenCV 4.6's reflect-101 index and its bilinear interpolation of
// the tile LUTs, written as plainly as it can be, and random test planes.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace histeq::test {

/// OpenCV's BORDER_REFLECT_101 index of p in [0, len).
inline int reflect101(int p, int len) {
  if (len == 1) return 0;
  while (p < 0 || p >= len) p = p < 0 ? -p : 2 * len - 2 - p;
  return p;
}

/// The float expressions of OpenCV's CLAHE_Interpolation_Body on every pixel of src (w x h):
/// luts holds tx_n · ty_n tile LUTs of 256 or 65536 ints (tile-major), tiles tw x th.
template <class T>
std::vector<T> interpolate_luts(const std::vector<T>& src, int w, int h,
                                const std::vector<int>& luts, int tw, int th, int tx_n, int ty_n) {
  const int bins = sizeof(T) == 1 ? 256 : 65536;
  std::vector<T> out(src.size());
  const float inv_tw = 1.0f / float(tw), inv_th = 1.0f / float(th);
  for (int y = 0; y < h; ++y) {
    const float tyf = float(y) * inv_th - 0.5f;
    const int ty0 = int(std::floor(tyf));
    const float ya = tyf - float(ty0), ya1 = 1.0f - ya;
    const int ty1 = std::max(ty0, 0), ty2 = std::min(ty0 + 1, ty_n - 1);
    for (int x = 0; x < w; ++x) {
      const float txf = float(x) * inv_tw - 0.5f;
      const int tx0 = int(std::floor(txf));
      const float xa = txf - float(tx0), xa1 = 1.0f - xa;
      const int tx1 = std::max(tx0, 0), tx2 = std::min(tx0 + 1, tx_n - 1);
      const int v = src[std::size_t(y) * std::size_t(w) + std::size_t(x)];
      auto L = [&](int ty, int tx) {
        return float(
            luts[(std::size_t(ty) * std::size_t(tx_n) + std::size_t(tx)) * std::size_t(bins) +
                 std::size_t(v)]);
      };
      volatile float a = L(ty1, tx1) * xa1;  // volatile: one rounding per operation, as OpenCV's
      volatile float b = L(ty1, tx2) * xa;   // baseline x86-64 build does it
      volatile float top = a + b;
      volatile float c = L(ty2, tx1) * xa1;
      volatile float d = L(ty2, tx2) * xa;
      volatile float bot = c + d;
      volatile float r1 = top * ya1;
      volatile float r2 = bot * ya;
      const float res = r1 + r2;
      out[std::size_t(y) * std::size_t(w) + std::size_t(x)] =
          T(std::clamp(int(std::nearbyint(res)), 0, bins - 1));
    }
  }
  return out;
}

/// A w x h plane of samples uniform in [lo, hi].
template <class T>
std::vector<T> random_plane(std::mt19937& rng, int w, int h, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(std::size_t(w) * std::size_t(h));
  for (auto& x : v) x = T(d(rng));
  return v;
}

}  // namespace histeq::test
