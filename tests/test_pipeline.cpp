// test_pipeline.cpp — equalize() end to end on the bundled samples, on both backends: the GPU
// output equals the CPU output byte for byte, both equal the OpenCV goldens (gray exactly, colour
// within ±1), and the invariants of equalization hold. CPU cases run everywhere; GPU cases skip
// with the reason where no CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "histeq/clahe.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/image16.hpp"
#include "histeq/image_io.hpp"
#include "histeq/lut.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/planes.hpp"
#include "histogram/registry.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

namespace fs = std::filesystem;

const Formula kFormulas[] = {Formula::opencv, Formula::exact};
const Mode kModes[] = {Mode::luma, Mode::rgb, Mode::gray};

struct Sample {
  std::string name;  ///< file stem, e.g. "camera"
  std::string file;  ///< file name, e.g. "camera.png"
  Image image;
};

/// Every image in samples/ (PNG and JPEG), loaded once, in name order.
const std::vector<Sample>& samples() {
  static const std::vector<Sample> all = [] {
    std::vector<Sample> out;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(test::source_path("samples"))) {
      std::string ext = e.path().extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
      if (e.is_regular_file() && (ext == ".png" || ext == ".jpg" || ext == ".jpeg")) {
        files.push_back(e.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& p : files) {
      out.push_back({p.stem().string(), p.filename().string(), load_image(p.string())});
    }
    return out;
  }();
  return all;
}

/// The OpenCV golden of a sample, when tests/data/golden-opencv-4.6 has one (PNG inputs only:
/// JPEG decoders differ, see that folder's README).
bool golden_for(const Sample& s, Image* golden) {
  if (fs::path(s.file).extension() != ".png") return false;
  const std::string path = test::source_path("tests/data/golden-opencv-4.6/" + s.name + ".png");
  if (!fs::exists(path)) return false;
  *golden = load_image(path);
  return true;
}

EqualizeOptions options(Backend b, Mode m, Formula f = Formula::opencv,
                        const std::string& kernel = "auto") {
  EqualizeOptions o;
  o.backend = b;
  o.mode = m;
  o.formula = f;
  o.kernel = kernel;
  return o;
}

/// rgb mode's planes of a BGR image are B, G, R: the RGB image's histograms reversed.
std::vector<Histogram> swap_red_blue_planes(std::vector<Histogram> hs) {
  if (hs.size() == 3) std::swap(hs[0], hs[2]);
  return hs;
}

std::uint64_t sum_of(const Histogram& h) {
  std::uint64_t s = 0;
  for (auto c : h) s += c;
  return s;
}

/// The histograms the CPU backend's stages give for an image's planes (the reference).
std::vector<Histogram> reference_histograms(const Image& img, Mode mode) {
  const std::size_t px = img.pixel_count();
  const int planes = plane_count(mode, img.channels);
  std::vector<std::uint8_t> buf(std::size_t(planes) * px);
  cpu::extract_planes(img.pixels.data(), px, img.channels, mode, buf.data(), 2);
  std::vector<Histogram> out;
  for (int p = 0; p < planes; ++p) {
    out.push_back(cpu::histogram(buf.data() + std::size_t(p) * px, px, SampleType::u8, 256, 2));
  }
  return out;
}

void expect_shape(const Image& in, const Image& out, Mode mode) {
  EXPECT_EQ(out.width, in.width);
  EXPECT_EQ(out.height, in.height);
  EXPECT_EQ(out.channels, output_channels(mode, in.channels));
  EXPECT_EQ(out.pixels.size(), out.byte_count());
}

void expect_alpha_kept(const Image& in, const Image& out) {
  if (in.channels != 2 && in.channels != 4) return;
  if (out.channels != in.channels) return;
  const std::size_t c = std::size_t(in.channels);
  for (std::size_t i = 0; i < in.pixel_count(); ++i) {
    ASSERT_EQ(in.pixels[i * c + c - 1], out.pixels[i * c + c - 1]) << "alpha of pixel " << i;
  }
}

/// Gray golden: byte for byte. Colour golden (RGB): every channel within ±1.
void expect_matches_golden(const Sample& s, Backend b) {
  Image golden;
  if (!golden_for(s, &golden)) return;
  const Image out = equalize(s.image, options(b, default_mode(s.image.channels)));
  ASSERT_EQ(out.width, golden.width) << s.file;
  ASSERT_EQ(out.height, golden.height) << s.file;
  if (s.image.channels < 3) {
    // Gray (+alpha): compare the gray channel exactly.
    ASSERT_GE(golden.channels, 1);
    for (std::size_t i = 0; i < out.pixel_count(); ++i) {
      ASSERT_EQ(int(out.pixels[i * out.channels]), int(golden.pixels[i * golden.channels]))
          << s.file << " pixel " << i << " on " << to_string(b);
    }
  } else {
    ASSERT_GE(golden.channels, 3) << s.file;
    int worst = 0;
    for (std::size_t i = 0; i < out.pixel_count(); ++i) {
      for (int ch = 0; ch < 3; ++ch) {
        const int d = std::abs(int(out.pixels[i * out.channels + ch]) -
                               int(golden.pixels[i * golden.channels + ch]));
        worst = std::max(worst, d);
      }
    }
    EXPECT_LE(worst, 1) << s.file << " on " << to_string(b);
  }
}

/// An image in which every value 0..255 occurs equally often (k times): already equalized.
Image ramp_image(int k) {
  Image img;
  img.width = 256;
  img.height = k;
  img.channels = 1;
  img.pixels.resize(img.byte_count());
  for (std::size_t i = 0; i < img.pixels.size(); ++i) {
    img.pixels[i] = static_cast<std::uint8_t>((i * 97 + i / 256) % 256);  // scrambled order
  }
  return img;
}

// ---------------- CPU backend (always runs) ----------------

TEST(PipelineCpu, SamplesAreThere) {
  ASSERT_FALSE(samples().empty()) << "no images in " << test::source_path("samples");
  int goldens = 0;
  for (const Sample& s : samples()) {
    Image g;
    goldens += golden_for(s, &g) ? 1 : 0;
  }
  EXPECT_GT(goldens, 0) << "no sample has an OpenCV golden";
}

TEST(PipelineCpu, EverySampleEveryModeShapesHistogramsAndReport) {
  for (const Sample& s : samples()) {
    for (Mode m : kModes) {
      EqualizeReport rep;
      const Image out = equalize(s.image, options(Backend::cpu, m), &rep);
      SCOPED_TRACE(s.file + " mode " + to_string(m));
      expect_shape(s.image, out, m);
      expect_alpha_kept(s.image, out);
      EXPECT_EQ(rep.backend, "cpu");
      EXPECT_EQ(rep.kernel, "cpu");
      EXPECT_EQ(rep.device.rfind("CPU (", 0), 0u) << rep.device;
      EXPECT_EQ(rep.mode, mode_that_runs(m, s.image.channels));  // the mode that ran
      EXPECT_EQ(rep.racy_lost, 0u);
      ASSERT_EQ(rep.histograms.size(), std::size_t(plane_count(m, s.image.channels)));
      ASSERT_EQ(rep.luts.size(), rep.histograms.size());
      const auto ref = reference_histograms(s.image, m);
      for (std::size_t p = 0; p < rep.histograms.size(); ++p) {
        EXPECT_EQ(rep.histograms[p].size(), 256u);
        EXPECT_EQ(sum_of(rep.histograms[p]), s.image.pixel_count());
        EXPECT_EQ(rep.histograms[p], ref[p]);
        EXPECT_EQ(rep.luts[p], make_lut(ref[p].data(), Formula::opencv));
      }
    }
  }
}

TEST(PipelineCpu, DefaultModeFollowsChannels) {
  for (const Sample& s : samples()) {
    EqualizeOptions o;
    o.backend = Backend::cpu;
    EqualizeReport rep;
    const Image out = equalize(s.image, o, &rep);
    EXPECT_EQ(rep.mode, default_mode(s.image.channels)) << s.file;
    EXPECT_EQ(out.channels, s.image.channels) << s.file;  // luma or gray keep the channels
  }
}

/// Gray+alpha with the default mode keeps its alpha channel unchanged and equalizes the gray one
/// exactly as a 1-channel image of the same gray values.
TEST(PipelineCpu, GrayAlphaDefaultKeepsAlpha) {
  Image ga;
  ga.width = 37;
  ga.height = 11;
  ga.channels = 2;
  Image g = ga;
  g.channels = 1;
  for (std::size_t i = 0; i < ga.pixel_count(); ++i) {
    const auto v = static_cast<std::uint8_t>(60 + (i * 7) % 50);
    ga.pixels.push_back(v);
    ga.pixels.push_back(static_cast<std::uint8_t>(i * 13));
    g.pixels.push_back(v);
  }
  EqualizeOptions o;
  o.backend = Backend::cpu;
  const Image out = equalize(ga, o);
  const Image gray_out = equalize(g, o);
  ASSERT_EQ(out.channels, 2);
  for (std::size_t i = 0; i < ga.pixel_count(); ++i) {
    EXPECT_EQ(out.pixels[2 * i + 1], ga.pixels[2 * i + 1]) << "alpha of pixel " << i;
    EXPECT_EQ(out.pixels[2 * i], gray_out.pixels[i]) << "gray of pixel " << i;
  }
  // Mode rgb runs the same (one plane: the gray channel, alpha kept), and the report says luma.
  o.mode = Mode::rgb;
  EqualizeReport rep;
  EXPECT_EQ(equalize(ga, o, &rep).pixels, out.pixels);
  EXPECT_EQ(rep.mode, Mode::luma);
}

TEST(PipelineCpu, GoldensGrayExactColourWithinOne) {
  for (const Sample& s : samples()) expect_matches_golden(s, Backend::cpu);
}

// Equalizing an equalized image: let h be the input histogram, v0 its first occupied bin and
// E = lut(input). Every occupied level w of E has cdf_E(w) = cdf_h(v) for the last v with
// lut[v] = w, so the second LUT computes the same expression with h[v0] replaced by E's count
// at 0 (g0 >= h[v0]; more when bins above v0 also round to 0). If g0 == h[v0] the second LUT
// is the identity on E's levels (bit-identical float operations): equalization is idempotent.
// Otherwise g0 − h[v0] < (N − h[v0]) / 510, which moves the unrounded value by less than 0.5:
// no pixel changes by more than 1.
TEST(PipelineCpu, EqualizingTwiceIsStable) {
  int idempotent_cases = 0;
  for (const Sample& s : samples()) {
    for (Formula f : kFormulas) {
      EqualizeReport r1;
      const Image e1 = equalize(s.image, options(Backend::cpu, Mode::gray, f), &r1);
      EqualizeReport r2;
      const Image e2 = equalize(e1, options(Backend::cpu, Mode::gray, f), &r2);
      ASSERT_EQ(e1.pixels.size(), e2.pixels.size());
      const Histogram& h = r1.histograms[0];
      int v0 = 0;
      while (v0 < 256 && h[v0] == 0) ++v0;
      ASSERT_LT(v0, 256);
      const std::uint64_t g0 = r2.histograms[0][0];
      const bool constant = h[v0] == s.image.pixel_count();
      SCOPED_TRACE(s.file + " formula " + to_string(f));
      if (g0 == h[v0] || constant) {
        ++idempotent_cases;
        EXPECT_EQ(e1.pixels, e2.pixels) << "expected a fixed point (g0 == h[v0])";
      } else {
        EXPECT_GT(g0, h[v0]);
        for (std::size_t i = 0; i < e1.pixels.size(); ++i) {
          ASSERT_LE(std::abs(int(e1.pixels[i]) - int(e2.pixels[i])), 1) << "pixel " << i;
        }
      }
    }
  }
  EXPECT_GT(idempotent_cases, 0) << "the fixed-point branch was never exercised";
}

TEST(PipelineCpu, EvenlySpreadImageMapsToItself) {
  for (int k : {1, 4}) {
    const Image img = ramp_image(k);
    for (Formula f : kFormulas) {
      const Image out = equalize(img, options(Backend::cpu, Mode::gray, f));
      EXPECT_EQ(out.pixels, img.pixels) << "k=" << k << " " << to_string(f);
    }
  }
}

TEST(PipelineCpu, ConstantImageIsUnchanged) {
  Image img;
  img.width = 7;
  img.height = 5;
  img.channels = 3;
  img.pixels.assign(img.byte_count(), 0);
  for (std::size_t i = 0; i < img.pixel_count(); ++i) {
    img.pixels[i * 3] = 200;
    img.pixels[i * 3 + 1] = 10;
    img.pixels[i * 3 + 2] = 90;
  }
  const Image out = equalize(img, options(Backend::cpu, Mode::rgb));
  EXPECT_EQ(out.pixels, img.pixels);
}

TEST(PipelineCpu, ImageHistogramsMatchTheReference) {
  for (const Sample& s : samples()) {
    for (Mode m : kModes) {
      EqualizeReport rep;
      const auto hs = image_histograms(s.image, options(Backend::cpu, m), &rep);
      EXPECT_EQ(hs, reference_histograms(s.image, m)) << s.file << " " << to_string(m);
      EXPECT_TRUE(rep.luts.empty());
    }
  }
}

TEST(PipelineCpu, EmptyImage) {
  Image img;
  img.channels = 3;
  const Image out = equalize(img, options(Backend::cpu, Mode::luma));
  EXPECT_EQ(out.pixels.size(), 0u);
  EXPECT_EQ(out.channels, 3);
}

TEST(PipelineArgs, UnknownKernelIsUsageErrorOnEveryBackend) {
  const Image& img = samples().front().image;
  EqualizeOptions o = options(Backend::cpu, Mode::gray);
  o.kernel = "no-such-kernel";
  try {
    equalize(img, o);
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-kernel"), std::string::npos) << e.what();
  }
}

TEST(PipelineArgs, BadImageIsError) {
  Image img;
  img.width = 2;
  img.height = 2;
  img.channels = 5;
  img.pixels.resize(20);
  EXPECT_THROW(equalize(img, options(Backend::cpu, Mode::luma)), Error);
  img.channels = 1;  // buffer size does not match 2x2x1
  EXPECT_THROW(equalize(img, options(Backend::cpu, Mode::luma)), Error);
}

TEST(PipelineBackend, CudaAvailableNeverThrowsAndExplains) {
  std::string why;
  bool ok = false;
  EXPECT_NO_THROW(ok = cuda_available(&why));
  if (!ok) EXPECT_FALSE(why.empty());
  EXPECT_NO_THROW(cuda_available(nullptr));
}

TEST(PipelineBackend, CpuResolvesToCpu) { EXPECT_EQ(resolve_backend(Backend::cpu), Backend::cpu); }

TEST(PipelineBackend, WithoutGpuCudaIsAnErrorAndAutoFallsBack) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a CUDA device is present; this checks the no-GPU path";
  try {
    resolve_backend(Backend::cuda);
    FAIL() << "no exception";
  } catch (const UsageError&) {
    FAIL() << "a missing GPU is a runtime error, not a usage error";
  } catch (const Error& e) {
    // In the library's words: what was asked for and the cause, no command-line option.
    EXPECT_EQ(std::string(e.what()).rfind(kNoDeviceForCuda, 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << e.what();
  }
  EXPECT_THROW(equalize(samples().front().image, options(Backend::cuda, Mode::gray)), Error);
  std::string why_cpu;
  EXPECT_EQ(resolve_backend(Backend::automatic, &why_cpu), Backend::cpu);
  EXPECT_FALSE(why_cpu.empty());
  EqualizeOptions o;  // backend auto
  EqualizeReport rep;
  equalize(samples().front().image, o, &rep);
  EXPECT_EQ(rep.backend, "cpu");
}

// ---------------- CUDA backend ----------------

TEST(PipelineGpu, EverySampleModeAndFormulaEqualsCpu) {
  HISTEQ_REQUIRE_GPU();
  for (const Sample& s : samples()) {
    for (Mode m : kModes) {
      for (Formula f : kFormulas) {
        SCOPED_TRACE(s.file + " mode " + to_string(m) + " formula " + to_string(f));
        EqualizeReport rc, rg;
        const Image want = equalize(s.image, options(Backend::cpu, m, f), &rc);
        const Image got = equalize(s.image, options(Backend::cuda, m, f), &rg);
        expect_shape(s.image, got, m);
        EXPECT_EQ(got.pixels, want.pixels);
        EXPECT_EQ(rg.histograms, rc.histograms);
        EXPECT_EQ(rg.luts, rc.luts);
        EXPECT_EQ(rg.backend, "cuda");
        EXPECT_FALSE(rg.device.empty());
        EXPECT_NE(rg.kernel, "auto");
        EXPECT_TRUE(kernels::find_kernel(rg.kernel).exact) << "auto chose " << rg.kernel;
        EXPECT_EQ(rg.racy_lost, 0u);
        EXPECT_EQ(rg.mode, rc.mode);  // the mode that ran (gray for one channel)
      }
    }
  }
}

TEST(PipelineGpu, GoldensGrayExactColourWithinOne) {
  HISTEQ_REQUIRE_GPU();
  for (const Sample& s : samples()) expect_matches_golden(s, Backend::cuda);
}

TEST(PipelineGpu, EveryExactKernelGivesTheSameImage) {
  HISTEQ_REQUIRE_GPU();
  int tried = 0;
  for (const Sample& s : samples()) {
    const Image want = equalize(s.image, options(Backend::cpu, Mode::luma));
    for (const kernels::KernelEntry& e : kernels::registry()) {
      if (!e.exact || e.unsupported(SampleType::u8, 256) != nullptr) continue;
      EqualizeReport rep;
      const Image got =
          equalize(s.image, options(Backend::cuda, Mode::luma, Formula::opencv, e.name), &rep);
      EXPECT_EQ(rep.kernel, e.name);
      EXPECT_EQ(got.pixels, want.pixels) << s.file << " kernel " << e.name;
      ++tried;
    }
  }
  EXPECT_GT(tried, 0) << "no exact kernel in the registry supports u8 with 256 bins";
}

TEST(PipelineGpu, RacyKernelReportsLostCounts) {
  HISTEQ_REQUIRE_GPU();
  const kernels::KernelEntry* racy = nullptr;
  for (const auto& e : kernels::registry()) {
    if (!e.exact && e.unsupported(SampleType::u8, 256) == nullptr) racy = &e;
  }
  if (!racy) GTEST_SKIP() << "no non-exact kernel in the registry";
  for (const Sample& s : samples()) {
    for (Mode m : {Mode::gray, Mode::rgb}) {
      EqualizeReport rep;
      equalize(s.image, options(Backend::cuda, m, Formula::opencv, racy->name), &rep);
      EXPECT_EQ(rep.kernel, racy->name);
      const auto exact = reference_histograms(s.image, m);
      ASSERT_EQ(rep.histograms.size(), exact.size());
      std::uint64_t lost = 0;
      for (std::size_t p = 0; p < exact.size(); ++p) {
        const std::uint64_t sum = sum_of(rep.histograms[p]);
        ASSERT_LE(sum, s.image.pixel_count()) << s.file;
        for (int b = 0; b < 256; ++b) ASSERT_LE(rep.histograms[p][b], exact[p][b]) << "bin " << b;
        lost += s.image.pixel_count() - sum;
      }
      EXPECT_EQ(rep.racy_lost, lost) << s.file << " " << to_string(m);
    }
  }
}

TEST(PipelineGpu, ImageHistogramsEqualCpu) {
  HISTEQ_REQUIRE_GPU();
  for (const Sample& s : samples()) {
    for (Mode m : kModes) {
      EXPECT_EQ(image_histograms(s.image, options(Backend::cuda, m)),
                reference_histograms(s.image, m))
          << s.file << " " << to_string(m);
    }
  }
}

TEST(PipelineGpu, EmptyAndTinyImages) {
  HISTEQ_REQUIRE_GPU();
  for (int c = 1; c <= 4; ++c) {
    for (int w : {0, 1, 3}) {
      Image img;
      img.width = w;
      img.height = w;
      img.channels = c;
      img.pixels.resize(img.byte_count());
      for (std::size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = std::uint8_t(i * 37);
      for (Mode m : kModes) {
        const Image want = equalize(img, options(Backend::cpu, m));
        const Image got = equalize(img, options(Backend::cuda, m));
        EXPECT_EQ(got.pixels, want.pixels) << "c=" << c << " w=" << w << " " << to_string(m);
        EXPECT_EQ(got.channels, want.channels);
      }
    }
  }
}

TEST(PipelineGpu, EvenlySpreadImageMapsToItself) {
  HISTEQ_REQUIRE_GPU();
  const Image img = ramp_image(3);
  for (Formula f : kFormulas) {
    EXPECT_EQ(equalize(img, options(Backend::cuda, Mode::gray, f)).pixels, img.pixels);
  }
}

// ---------------- in place (equalize_into, clahe_into) and BGR, both backends ----------------

/// `img` with its first and third channels swapped (RGB(A) ↔ BGR(A)); gray images as they are.
template <class Img>
Img swap_red_blue(Img img) {
  if (img.channels >= 3) {
    for (std::size_t i = 0; i < img.pixels.size(); i += std::size_t(img.channels))
      std::swap(img.pixels[i], img.pixels[i + 2]);
  }
  return img;
}

/// Runs fn(backend) on the CPU and, with a usable GPU, on it.
template <class Fn>
void on_each_backend(Fn&& fn) {
  fn(Backend::cpu);
  if (cuda_available()) fn(Backend::cuda);
}

TEST(PipelineViews, EqualizeIntoEqualsEqualizeAndBgrIsRgbSwapped) {
  on_each_backend([](Backend b) {
    for (const Sample& s : samples()) {
      for (Mode m : kModes) {
        SCOPED_TRACE(s.file + " mode " + to_string(m) + " on " + to_string(b));
        const EqualizeOptions o = options(b, m);
        EqualizeReport r1, r2;
        const Image want = equalize(s.image, o, &r1);
        std::vector<std::uint8_t> got(want.pixels.size() + 1, 0xEE);  // a guard byte
        equalize_into({s.image.pixels.data(), s.image.width, s.image.height, s.image.channels}, o,
                      got.data(), &r2);
        EXPECT_EQ(got.back(), 0xEE);
        got.pop_back();
        EXPECT_EQ(got, want.pixels);
        EXPECT_EQ(r2.histograms, r1.histograms);
        EqualizeOptions bgr = o;
        bgr.order = ChannelOrder::bgr;
        const Image swapped = swap_red_blue(s.image);
        const Image out = equalize(swapped, bgr);
        EXPECT_EQ(out.pixels, (m == Mode::gray ? want : swap_red_blue(want)).pixels);
        EXPECT_EQ(image_histograms(swapped, bgr),
                  m == Mode::rgb ? swap_red_blue_planes(r1.histograms) : r1.histograms);
      }
    }
  });
}

TEST(PipelineViews, ClaheIntoEqualsClaheAndBgrIsRgbSwapped) {
  on_each_backend([](Backend b) {
    for (const Sample& s : samples()) {
      for (Mode m : kModes) {
        SCOPED_TRACE(s.file + " mode " + to_string(m) + " on " + to_string(b));
        ClaheOptions o;
        o.clip_limit = 3.0;
        o.tiles_x = 5;
        o.tiles_y = 3;
        o.mode = m;
        const Image want = clahe(s.image, o, b);
        std::vector<std::uint8_t> got(want.pixels.size() + 1, 0xEE);
        clahe_into(ImageView<std::uint8_t>{s.image.pixels.data(), s.image.width, s.image.height,
                                           s.image.channels},
                   o, b, got.data());
        EXPECT_EQ(got.back(), 0xEE);
        got.pop_back();
        EXPECT_EQ(got, want.pixels);
        ClaheOptions bgr = o;
        bgr.order = ChannelOrder::bgr;
        const Image out = clahe(swap_red_blue(s.image), bgr, b);
        EXPECT_EQ(out.pixels, (want.channels >= 3 ? swap_red_blue(want) : want).pixels);
      }
    }
    // 16 bits: gray in place, colour per channel.
    for (int c : {1, 2, 3, 4}) {
      Image16 img;
      img.width = 67;
      img.height = 45;
      img.channels = c;
      img.pixels.resize(img.sample_count());
      for (std::size_t i = 0; i < img.pixels.size(); ++i)
        img.pixels[i] = static_cast<std::uint16_t>((i * 40503u) ^ (i >> 3));
      ClaheOptions o;
      o.mode = Mode::rgb;
      const Image16 want = clahe(img, o, b);
      std::vector<std::uint16_t> got(want.pixels.size());
      clahe_into(ImageView<std::uint16_t>{img.pixels.data(), img.width, img.height, c}, o, b,
                 got.data());
      EXPECT_EQ(got, want.pixels) << c << " channels on " << to_string(b);
    }
  });
}

}  // namespace
}  // namespace histeq
