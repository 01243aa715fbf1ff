// A separate project that uses the installed histeq through find_package(histeq): the LUT of a
// two-level histogram must spread the levels to 0 and 255.
#include <histeq/lut.hpp>
#include <histeq/pipeline.hpp>

#include <cstdio>

int main() {
  std::uint64_t h[256] = {0};
  h[10] = 5;
  h[20] = 5;
  const histeq::Lut lut = histeq::make_lut(h, histeq::Formula::opencv);
  std::string why;
  const bool gpu = histeq::cuda_available(&why);
  std::printf("lut[10]=%d lut[20]=%d gpu=%d\n", lut[10], lut[20], gpu);
  return lut[10] == 0 && lut[20] == 255 ? 0 : 1;
}
