// test_cli_match.cpp — `histeq match` and the counted region (`--mask`, `--roi`) of `equalize` and
// `histogram` through the command line (spawns the built binary) on the CPU backend: the CLI's
// bytes equal the library's stage sequence with the same reference or region (gray, rgb, luma, 16
// bits), a match of an image to itself keeps it, a folder equals its files one by one, a full mask
// and a whole-image rectangle give the unmasked bytes, the masked histogram counts the counted
// pixels only, and the errors (empty mask, another size, a rectangle outside the image, a colour
// mask, an unreadable reference) name the file; masked CLAHE (clahe --mask / --roi) gives the
// library's bytes, and the unmasked ones for a full region; a mask of three equal channels
// (a gray BMP) is gray; --mode's help is each command's; --json names the formula where it makes
// the LUTs. The GPU cases (--backend cuda equal to --backend cpu) skip without a device.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "histeq/clahe.hpp"
#include "histeq/cpu.hpp"
#include "histeq/equalize16.hpp"
#include "histeq/image16.hpp"
#include "histeq/image_io.hpp"
#include "histeq/match.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/operation.hpp"
#include "histeq/planes.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace histeq;

namespace {

using histeq::test::Result;

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string sample(const std::string& name) { return test::source_path("samples/" + name); }

/// The library's 8-bit result: the CPU stage sequence with the reference's histograms (match)
/// and the region.
Image library8(const Image& img, Mode mode, const std::string& reference, const Region& region) {
  EqualizeOptions opt;
  opt.backend = Backend::cpu;
  opt.mode = mode;
  opt.region = region;
  if (!reference.empty()) {
    const MatchReference ref(load_image(reference), reference);
    opt.reference = ref.histograms(mode, img.channels, 8);
  }
  EqualizeReport rep;
  return cpu::equalize_stages(img, opt, true, 0, rep);
}

/// A 16-bit image: a smooth field plus noise, every channel different.
Image16 field16(int w, int h, int c, std::uint32_t seed) {
  Image16 img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels.resize(img.sample_count());
  std::mt19937 rng(seed);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        img.pixels[(std::size_t(y) * w + x) * c + k] = std::uint16_t(
            (x * 30000 / w + y * 9000 / h + int(rng() % 5000) + k * 7000 + int(seed) * 333) %
            65536);
  return img;
}

/// A one-channel 8-bit mask: `value` where pred(x, y), else 0.
template <class P>
Image mask8(int w, int h, P pred, std::uint8_t value = 255) {
  Image m;
  m.width = w;
  m.height = h;
  m.channels = 1;
  m.pixels.resize(std::size_t(w) * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) m.pixels[std::size_t(y) * w + x] = pred(x, y) ? value : 0;
  return m;
}

/// The columns of `histeq histogram --csv` output (after the header), one per plane.
std::vector<std::vector<std::uint64_t>> csv_columns(const std::string& out) {
  std::vector<std::vector<std::uint64_t>> cols;
  std::istringstream in(out);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string field;
    std::getline(l, field, ',');  // bin
    for (std::size_t k = 0; std::getline(l, field, ','); ++k) {
      if (cols.size() <= k) cols.emplace_back();
      cols[k].push_back(std::stoull(field));
    }
  }
  return cols;
}

class CliMatch : public test::TempDirTest {
 protected:
  CliMatch() : TempDirTest("histeq-cli-match") {}

  Result run(const std::string& args) {
    const std::string o = path("stdout.txt"), e = path("stderr.txt");
    const std::string cmd = quote(HISTEQ_CLI) + " " + args + " >" + quote(o) + " 2>" + quote(e);
    const int raw = std::system(cmd.c_str());
    Result r;
    r.status = (raw != -1 && WIFEXITED(raw)) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(o);
    r.err = slurp(e);
    return r;
  }
  std::string q(const std::string& name) const { return quote(path(name)); }
};

// ---- match ----

TEST_F(CliMatch, AnImageMatchedToItselfIsUnchanged) {
  for (const auto& [name, mode] : {std::pair<const char*, const char*>{"moon.png", "gray"},
                                   {"coins.png", "gray"},
                                   {"chelsea.png", "rgb"},
                                   {"astronaut.png", "rgb"}}) {
    SCOPED_TRACE(name);
    const Result r = run("match " + quote(sample(name)) + " -o " + q("self.png") + " --reference " +
                         quote(sample(name)) + " --mode " + mode + " --backend cpu");
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_TRUE(load_image(path("self.png")).pixels == load_image(sample(name)).pixels);
  }
  // 16 bits: every level that occurs maps to itself.
  save_image16(field16(97, 61, 1, 3), path("g16.png"));
  const Result r = run("match " + q("g16.png") + " -o " + q("self16.png") + " --reference " +
                       q("g16.png") + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_TRUE(load_image16(path("self16.png")).pixels == load_image16(path("g16.png")).pixels);
}

TEST_F(CliMatch, MatchGivesTheLibrarysBytesInEveryMode) {
  struct Case {
    const char *input, *reference, *mode;
    Mode m;
  };
  const Case cases[] = {{"moon.png", "camera.png", "gray", Mode::gray},
                        {"coins.png", "chelsea.png", "gray", Mode::gray},  // a colour reference
                        {"chelsea.png", "coffee.png", "rgb", Mode::rgb},
                        {"chelsea.png", "moon.png", "rgb", Mode::rgb},  // a gray reference
                        {"astronaut.png", "coffee.png", "luma", Mode::luma},
                        {"coffee.png", "astronaut.png", "gray", Mode::gray}};
  int changed = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.input) + " to " + c.reference + " " + c.mode);
    const Result r = run("match " + quote(sample(c.input)) + " -o " + q("m.png") + " --reference " +
                         quote(sample(c.reference)) + " --mode " + c.mode + " --backend cpu");
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_NE(r.out.find("match to " + sample(c.reference)), std::string::npos) << r;
    const Image src = load_image(sample(c.input));
    const Image want = library8(src, c.m, sample(c.reference), {});
    const Image got = load_image(path("m.png"));
    ASSERT_EQ(got.channels, want.channels);
    EXPECT_TRUE(got.pixels == want.pixels);
    if (want.pixels != src.pixels) ++changed;
  }
  EXPECT_EQ(changed, int(std::size(cases)));  // each case mapped something
}

TEST_F(CliMatch, SixteenBitMatchIsTheLibrarysAndTakesAnEightBitReference) {
  const Image16 img = field16(131, 77, 1, 5);
  const Image16 ref = field16(64, 40, 1, 11);
  save_image16(img, path("in16.png"));
  save_image16(ref, path("ref16.png"));
  Result r = run("match " + q("in16.png") + " -o " + q("out16.png") + " --reference " +
                 q("ref16.png") + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  ASSERT_TRUE(is_16bit_image(path("out16.png")));
  const MatchReference mr(load_image16(path("ref16.png")), "ref16.png");
  const auto hs = mr.histograms(Mode::gray, 1, 16);
  const Image16 want = cpu::equalize16(img, Mode::gray, 0, Region{}, hs.get());
  EXPECT_TRUE(load_image16(path("out16.png")).pixels == want.pixels);
  EXPECT_FALSE(want.pixels == img.pixels);

  // An 8-bit reference for a 16-bit image: widened (v * 257), as MatchReference says.
  r = run("match " + q("in16.png") + " -o " + q("out16b.png") + " --reference " +
          quote(sample("moon.png")) + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  const MatchReference m8(load_image(sample("moon.png")), "moon.png");
  const auto h8 = m8.histograms(Mode::gray, 1, 16);
  EXPECT_TRUE(load_image16(path("out16b.png")).pixels ==
              cpu::equalize16(img, Mode::gray, 0, Region{}, h8.get()).pixels);

  // 16-bit colour: per channel.
  const Image16 rgb = field16(50, 30, 3, 7);
  save_image16(rgb, path("rgb16.png"));
  save_image16(field16(20, 20, 3, 9), path("rgbref16.png"));
  r = run("match " + q("rgb16.png") + " -o " + q("rgbout16.png") + " --reference " +
          q("rgbref16.png") + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  const MatchReference mc(load_image16(path("rgbref16.png")), "rgbref16.png");
  const auto hc = mc.histograms(Mode::rgb, 3, 16);
  EXPECT_TRUE(load_image16(path("rgbout16.png")).pixels ==
              cpu::equalize16(rgb, Mode::rgb, 0, Region{}, hc.get()).pixels);

  // A gray 16-bit image and a colour 16-bit reference (its luma has no 16-bit form): the ways
  // out, --mode rgb only for a colour image (a gray one is gray whatever --mode says).
  r = run("match " + q("in16.png") + " -o " + q("none16.png") + " --reference " +
          q("rgbref16.png") + " --mode rgb --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("use a gray reference or 8 bits (a colour image: or --mode rgb)"),
            std::string::npos)
      << r;
}

TEST_F(CliMatch, AFolderRunEqualsTheFilesOneByOne) {
  fs::create_directories(dir_ / "in");
  const char* names[] = {"moon.png", "coins.png", "chelsea.png", "text.png"};
  for (const char* n : names) fs::copy_file(sample(n), dir_ / "in" / n);
  const std::string ref = quote(sample("camera.png"));
  Result r = run("match " + q("in") + " -o " + q("out") + " --reference " + ref +
                 " --backend cpu --jobs 2 --json");
  ASSERT_EQ(r.status, 0) << r;
  int lines = 0;
  for (const std::string& line : test::lines_of(r.out)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("summary")) continue;
    ++lines;
    EXPECT_EQ(j["ok"], true) << line;
    EXPECT_EQ(j["operation"], "match") << line;
    EXPECT_EQ(j["reference"], sample("camera.png")) << line;
  }
  EXPECT_EQ(lines, 4);
  for (const char* n : names) {
    SCOPED_TRACE(n);
    r = run("match " + quote((dir_ / "in" / n).string()) + " -o " + q("one.png") + " --reference " +
            ref + " --backend cpu");
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_TRUE(load_image(path("one.png")).pixels ==
                load_image((dir_ / "out" / n).string()).pixels);
  }
}

TEST_F(CliMatch, MatchErrorsNameTheFileOrTheOption) {
  const std::string in = quote(sample("moon.png"));
  Result r = run("match " + in + " -o " + q("x.png") + " --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("--reference"), std::string::npos) << r;

  r = run("match " + in + " -o " + q("x.png") + " --reference " + q("nope.png") + " --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("--reference"), std::string::npos) << r;
  EXPECT_NE(r.err.find("nope.png"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(path("x.png")));

  {
    std::ofstream f(path("cut.png"), std::ios::binary);
    const std::string whole = slurp(sample("moon.png"));
    f << whole.substr(0, whole.size() / 2);
  }
  r = run("match " + in + " -o " + q("x.png") + " --reference " + q("cut.png") + " --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("cut.png"), std::string::npos) << r;

  // match takes no --formula and no mask (the options of equalize it does not have)
  r = run("match " + in + " -o " + q("x.png") + " --reference " + in + " --formula exact");
  EXPECT_EQ(r.status, 2) << r;
  // --decoder gpu: one file's match runs on the CPU (refused, saying so); a batch's JPEGs take
  // the device route, which needs a build with nvJPEG and the CUDA backend.
  r = run("match " + in + " -o " + q("x.png") + " --reference " + in + " --decoder gpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("several files or a folder"), std::string::npos) << r;
  r = run("match " + in + " " + in + " -o " + q("xs") + " --reference " + in +
          " --decoder gpu --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find(gpu::nvjpeg_built() ? "needs the CUDA backend" : "without nvJPEG"),
            std::string::npos)
      << r;
  EXPECT_FALSE(fs::exists(path("xs")));

  // A 16-bit colour image matched in luma mode: no 16-bit YCbCr, a usage error naming it.
  save_image16(field16(20, 10, 3, 1), path("c16.png"));
  r = run("match " + q("c16.png") + " -o " + q("y.png") + " --reference " + q("c16.png") +
          " --mode luma --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("c16.png"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(path("y.png")));
}

TEST_F(CliMatch, HelpListsMatch) {
  Result r = run("--help");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_NE(r.out.find("histeq match INPUT... -o OUTPUT --reference REF"), std::string::npos);
  r = run("match --help");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_NE(r.out.find("--reference REF"), std::string::npos) << r;
  EXPECT_EQ(r.out.find("--formula"), std::string::npos) << r;
  EXPECT_EQ(r.out.find("--mask"), std::string::npos) << r;
  EXPECT_NE(r.out.find("gpu (a batch"), std::string::npos) << r;
  r = run("help match");
  EXPECT_EQ(r.status, 0) << r;
}

// ---- --mask, --roi ----

TEST_F(CliMatch, AFullMaskAndAWholeRectangleGiveTheUnmaskedBytes) {
  for (const char* name : {"moon.png", "chelsea.png"}) {
    SCOPED_TRACE(name);
    const Image src = load_image(sample(name));
    save_image(mask8(src.width, src.height, [](int, int) { return true; }), path("full.png"));
    const std::string in = quote(sample(name));
    ASSERT_EQ(run("equalize " + in + " -o " + q("plain.png") + " --backend cpu").status, 0);
    Result r =
        run("equalize " + in + " -o " + q("masked.png") + " --backend cpu --mask " + q("full.png"));
    ASSERT_EQ(r.status, 0) << r;
    r = run("equalize " + in + " -o " + q("roi.png") + " --backend cpu --roi 0,0," +
            std::to_string(src.width) + "," + std::to_string(src.height));
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_EQ(slurp(path("masked.png")), slurp(path("plain.png")));
    EXPECT_EQ(slurp(path("roi.png")), slurp(path("plain.png")));
  }
}

TEST_F(CliMatch, APartialRegionGivesTheLibrarysBytes) {
  const std::string name = sample("moon.png");
  const Image src = load_image(name);
  const Image half = mask8(
      src.width, src.height, [](int x, int y) { return x < 200 && y > 30; }, 7);
  save_image(half, path("half.png"));
  Region region;
  region.mask = std::make_shared<const Image>(half);
  Result r = run("equalize " + quote(name) + " -o " + q("m.png") + " --backend cpu --mask " +
                 q("half.png"));
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_NE(r.out.find("mask " + path("half.png")), std::string::npos) << r;
  const Image want = library8(src, Mode::gray, "", region);
  EXPECT_TRUE(load_image(path("m.png")).pixels == want.pixels);
  EXPECT_FALSE(want.pixels == library8(src, Mode::gray, "", {}).pixels);  // the mask mattered

  // A rectangle, and a rectangle with the mask (the mask's pixels inside it).
  Region roi;
  roi.roi = Roi{100, 150, 300, 200};
  r = run("equalize " + quote(name) + " -o " + q("r.png") + " --backend cpu --roi 100,150,300,200");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_TRUE(load_image(path("r.png")).pixels == library8(src, Mode::gray, "", roi).pixels);
  Region both = region;
  both.roi = roi.roi;
  r = run("equalize " + quote(name) + " -o " + q("b.png") +
          " --backend cpu --roi 100,150,300,200 --mask " + q("half.png") + " --json");
  ASSERT_EQ(r.status, 0) << r;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["operation"], "equalize");
  EXPECT_EQ(j["mask"], path("half.png"));
  EXPECT_EQ(j["roi"], nlohmann::json::array({100, 150, 300, 200}));
  const Image want_both = library8(src, Mode::gray, "", both);
  EXPECT_TRUE(load_image(path("b.png")).pixels == want_both.pixels);
  EXPECT_FALSE(want_both.pixels == want.pixels);

  // Colour, luma and rgb modes; 8 and 16 bits (a 16-bit mask: nonzero counted, 1 included).
  const Image col = load_image(sample("chelsea.png"));
  const Image cm = mask8(col.width, col.height, [](int x, int) { return x % 3 == 0; });
  save_image(cm, path("cm.png"));
  Region cr;
  cr.mask = std::make_shared<const Image>(cm);
  for (const auto& [mode, m] :
       {std::pair<const char*, Mode>{"luma", Mode::luma}, {"rgb", Mode::rgb}}) {
    r = run("equalize " + quote(sample("chelsea.png")) + " -o " + q("c.png") +
            " --backend cpu --mask " + q("cm.png") + " --mode " + mode);
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_TRUE(load_image(path("c.png")).pixels == library8(col, m, "", cr).pixels) << mode;
  }
  const Image16 g16 = field16(90, 50, 1, 4);
  save_image16(g16, path("g16.png"));
  Image16 m16;
  m16.width = 90;
  m16.height = 50;
  m16.channels = 1;
  m16.pixels.resize(90 * 50);
  for (std::size_t i = 0; i < m16.pixels.size(); ++i) m16.pixels[i] = (i % 90) < 40 ? 1 : 0;
  save_image16(m16, path("m16.png"));
  r = run("equalize " + q("g16.png") + " -o " + q("e16.png") + " --backend cpu --mask " +
          q("m16.png"));
  ASSERT_EQ(r.status, 0) << r;
  Region r16;
  r16.mask = std::make_shared<const Image>(mask8(90, 50, [](int x, int) { return x < 40; }));
  EXPECT_TRUE(load_image16(path("e16.png")).pixels ==
              cpu::equalize16(g16, Mode::gray, 0, r16, nullptr).pixels);
}

TEST_F(CliMatch, MaskedClaheGivesTheLibrarysBytes) {
  const std::string name = sample("moon.png");  // 512x512 gray
  const Image src = load_image(name);
  const Image half = mask8(src.width, src.height, [](int x, int y) { return x + y < 400; });
  save_image(half, path("half.png"));
  save_image(mask8(src.width, src.height, [](int, int) { return true; }), path("full.png"));
  ClaheOptions o;
  o.clip_limit = 2.0;
  o.tiles_x = 5;  // 512 is not a multiple of 5: the padded geometry
  o.tiles_y = 3;
  const std::string opts = " --backend cpu --clip-limit 2 --tile-grid-size 5x3";
  Result r = run("clahe " + quote(name) + " -o " + q("plain.png") + opts);
  ASSERT_EQ(r.status, 0) << r;
  r = run("clahe " + quote(name) + " -o " + q("full.png.out.png") + opts + " --mask " +
          q("full.png"));
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(slurp(path("full.png.out.png")), slurp(path("plain.png")));
  r = run("clahe " + quote(name) + " -o " + q("m.png") + opts + " --mask " + q("half.png") +
          " --json");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(nlohmann::json::parse(r.out)["mask"], path("half.png")) << r;
  o.region.mask = std::make_shared<const Image>(half);
  const Image want = cpu::clahe(src, o);
  EXPECT_TRUE(load_image(path("m.png")).pixels == want.pixels);
  EXPECT_FALSE(want.pixels == load_image(path("plain.png")).pixels);  // the mask mattered
  r = run("clahe " + quote(name) + " -o " + q("r.png") + opts + " --roi 100,150,300,200");
  ASSERT_EQ(r.status, 0) << r;
  o.region.mask.reset();
  o.region.roi = Roi{100, 150, 300, 200};
  EXPECT_TRUE(load_image(path("r.png")).pixels == cpu::clahe(src, o).pixels);

  // 16 bits, the mask and the rectangle together; a folder run gives the same bytes.
  const Image16 g16 = field16(90, 50, 1, 5);
  save_image16(g16, path("g16.png"));
  save_image(mask8(90, 50, [](int x, int) { return x < 40; }), path("m16.png"));
  r = run("clahe " + q("g16.png") + " -o " + q("c16.png") + opts + " --mask " + q("m16.png") +
          " --roi 10,5,60,40");
  ASSERT_EQ(r.status, 0) << r;
  o.region.mask = std::make_shared<const Image>(mask8(90, 50, [](int x, int) { return x < 40; }));
  o.region.roi = Roi{10, 5, 60, 40};
  EXPECT_TRUE(load_image16(path("c16.png")).pixels == cpu::clahe(g16, o).pixels);
  fs::create_directories(dir_ / "in16");
  fs::copy_file(path("g16.png"), dir_ / "in16" / "g16.png");
  r = run("clahe " + q("in16") + " -o " + q("out16") + opts + " --mask " + q("m16.png") +
          " --roi 10,5,60,40");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(slurp(dir_ / "out16" / "g16.png"), slurp(path("c16.png")));
}

TEST_F(CliMatch, HistogramWithAMaskCountsTheCountedPixelsOnly) {
  const std::string name = sample("coins.png");
  const Image src = load_image(name);
  const Image m = mask8(src.width, src.height, [](int x, int y) { return (x + y) % 5 == 0; });
  save_image(m, path("m.png"));
  const std::uint64_t counted = std::uint64_t(
      std::count_if(m.pixels.begin(), m.pixels.end(), [](std::uint8_t v) { return v != 0; }));
  Result r = run("histogram " + quote(name) + " --backend cpu --csv --mask " + q("m.png"));
  ASSERT_EQ(r.status, 0) << r;
  auto cols = csv_columns(r.out);
  ASSERT_EQ(cols.size(), 1u);
  ASSERT_EQ(cols[0].size(), 256u);
  EXPECT_EQ(std::accumulate(cols[0].begin(), cols[0].end(), std::uint64_t(0)), counted);
  Region region;
  region.mask = std::make_shared<const Image>(m);
  const Histogram want = cpu::histogram(src.pixels.data(), src.width, src.height, region);
  EXPECT_TRUE(std::equal(cols[0].begin(), cols[0].end(), want.begin()));

  // --roi: the rectangle's pixels; three planes in rgb mode, each summing to them.
  r = run("histogram " + quote(sample("chelsea.png")) +
          " --backend cpu --csv --mode rgb --roi 10,20,30,40");
  ASSERT_EQ(r.status, 0) << r;
  cols = csv_columns(r.out);
  ASSERT_EQ(cols.size(), 3u);
  for (const auto& c : cols)
    EXPECT_EQ(std::accumulate(c.begin(), c.end(), std::uint64_t(0)), 30u * 40u);

  // A batch (--json): the same counts, and the region named.
  r = run("histogram " + quote(name) + " " + quote(name) + " --backend cpu --json --mask " +
          q("m.png"));
  ASSERT_EQ(r.status, 0) << r;
  const auto j = nlohmann::json::parse(test::lines_of(r.out).front());
  EXPECT_EQ(j["mask"], path("m.png"));
  const std::vector<std::uint64_t> h = j["histograms"][0];
  EXPECT_TRUE(std::equal(h.begin(), h.end(), want.begin()));
}

TEST_F(CliMatch, RegionErrorsNameTheFile) {
  const std::string in = quote(sample("moon.png"));
  // an empty mask: before any work
  save_image(mask8(512, 512, [](int, int) { return false; }), path("empty.png"));
  Result r =
      run("equalize " + in + " -o " + q("x.png") + " --backend cpu --mask " + q("empty.png"));
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("empty.png"), std::string::npos) << r;
  EXPECT_NE(r.err.find("no pixel"), std::string::npos) << r;

  // a mask of another size: the input named
  save_image(mask8(100, 100, [](int, int) { return true; }), path("small.png"));
  r = run("equalize " + in + " -o " + q("x.png") + " --backend cpu --mask " + q("small.png"));
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("moon.png"), std::string::npos) << r;
  r = run("histogram " + in + " --backend cpu --mask " + q("small.png"));
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("moon.png"), std::string::npos) << r;

  // a rectangle outside the image
  r = run("equalize " + in + " -o " + q("x.png") + " --backend cpu --roi 500,0,100,10");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("moon.png"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(path("x.png")));

  // badly written rectangles
  for (const char* roi : {"1,2,3", "1,2,3,4,5", "-1,0,5,5", "0,0,0,5", "a,b,c,d", "0x1,0,5,5"}) {
    r = run("equalize " + in + " -o " + q("x.png") + " --backend cpu --roi=" + roi);
    EXPECT_EQ(r.status, 2) << roi << r;
    EXPECT_NE(r.err.find("--roi"), std::string::npos) << roi << r;
  }

  // a colour mask; an unreadable mask
  r = run("equalize " + in + " -o " + q("x.png") + " --backend cpu --mask " +
          quote(sample("chelsea.png")));
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("chelsea.png"), std::string::npos) << r;
  r = run("equalize " + in + " -o " + q("x.png") + " --backend cpu --mask " + q("nope.png"));
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("nope.png"), std::string::npos) << r;

  // clahe: a mask of another size, an empty mask, a rectangle outside the image
  r = run("clahe " + in + " -o " + q("x.png") + " --backend cpu --mask " + q("small.png"));
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("moon.png"), std::string::npos) << r;
  r = run("clahe " + in + " -o " + q("x.png") + " --backend cpu --mask " + q("empty.png"));
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("empty.png"), std::string::npos) << r;
  r = run("clahe " + in + " -o " + q("x.png") + " --backend cpu --roi=500,0,100,10");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_FALSE(fs::exists(path("x.png")));

  // A batch: the image the region does not fit fails alone, named; the others are written.
  fs::create_directories(dir_ / "in");
  fs::copy_file(sample("moon.png"), dir_ / "in" / "moon.png");
  fs::copy_file(sample("camera.png"), dir_ / "in" / "camera.png");  // 512x512 too
  fs::copy_file(sample("coins.png"), dir_ / "in" / "coins.png");    // 384x303
  save_image(mask8(512, 512, [](int x, int) { return x > 100; }), path("m512.png"));
  r = run("equalize " + q("in") + " -o " + q("out") + " --backend cpu --mask " + q("m512.png"));
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("coins.png"), std::string::npos) << r;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "moon.png"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "camera.png"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "coins.png"));
}

TEST_F(CliMatch, AMaskThatCountsNoPixelInsideTheRectangleIsAUsageErrorBeforeAnyFile) {
  // The mask and the rectangle are the same for every file: a mask with no counted pixel
  // inside the rectangle is refused once, naming both (as a mask with no counted pixel at
  // all), before any input is read, in a batch as for one file; nothing is written.
  fs::create_directories(dir_ / "in");
  fs::copy_file(sample("moon.png"), dir_ / "in" / "moon.png");
  fs::copy_file(sample("camera.png"), dir_ / "in" / "camera.png");
  save_image(mask8(512, 512, [](int x, int y) { return x >= 100 && y >= 100; }), path("m.png"));
  for (const char* cmd : {"equalize", "clahe"}) {
    for (const std::string& in : {q("in"), quote((dir_ / "in" / "moon.png").string())}) {
      const bool batch = in == q("in");
      const std::string out = batch ? q("out") : q("x.png");
      Result r = run(std::string(cmd) + " " + in + " -o " + out + " --backend cpu --mask " +
                     q("m.png") + " --roi 0,0,100,512");
      EXPECT_EQ(r.status, 2) << cmd << r;
      EXPECT_NE(r.err.find("m.png"), std::string::npos) << cmd << r;
      EXPECT_NE(r.err.find("0,0,100,512"), std::string::npos) << cmd << r;
      EXPECT_NE(r.err.find("no pixel"), std::string::npos) << cmd << r;
      EXPECT_EQ(r.err.find("camera.png"), std::string::npos) << cmd << r;  // no file was read
      EXPECT_FALSE(fs::exists(dir_ / "out")) << cmd;
      EXPECT_FALSE(fs::exists(path("x.png"))) << cmd;
    }
  }
  Result r =
      run("histogram " + q("in") + " --backend cpu --mask " + q("m.png") + " --roi 0,0,512,100");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_TRUE(r.out.empty()) << r;
  // a rectangle that reaches a counted pixel runs; one outside the mask fails per file
  r = run("equalize " + q("in") + " -o " + q("out") + " --backend cpu --mask " + q("m.png") +
          " --roi 0,0,101,101");
  EXPECT_EQ(r.status, 0) << r;
  r = run("equalize " + q("in") + " -o " + q("out2") + " --backend cpu --mask " + q("m.png") +
          " --roi 0,0,600,10");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("camera.png"), std::string::npos) << r;
}

TEST_F(CliMatch, AMaskOfThreeEqualChannelsIsGray) {
  // histeq (and OpenCV) write a gray BMP with a palette, which decodes as three equal channels.
  const std::string in = quote(sample("moon.png"));
  const Image src = load_image(sample("moon.png"));
  const auto pred = [](int x, int y) { return (x / 16 + y / 16) % 3 != 0; };
  const Image m = mask8(src.width, src.height, pred);
  save_image(m, path("m.png"));
  save_image(m, path("m.bmp"));
  ASSERT_EQ(load_image(path("m.bmp")).channels, 3);
  Result r = run("equalize " + in + " -o " + q("bmp.png") + " --backend cpu --mask " + q("m.bmp"));
  ASSERT_EQ(r.status, 0) << r;
  r = run("equalize " + in + " -o " + q("png.png") + " --backend cpu --mask " + q("m.png"));
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(slurp(path("bmp.png")), slurp(path("png.png")));
  Region region;
  region.mask = std::make_shared<const Image>(m);
  const Image want = library8(src, Mode::gray, "", region);
  EXPECT_TRUE(load_image(path("bmp.png")).pixels == want.pixels);
  EXPECT_FALSE(want.pixels == library8(src, Mode::gray, "", {}).pixels);  // the mask mattered
  r = run("histogram " + in + " --backend cpu --csv --mask " + q("m.bmp"));
  ASSERT_EQ(r.status, 0) << r;
  const auto cols = csv_columns(r.out);
  ASSERT_EQ(cols.size(), 1u);
  const Histogram h = cpu::histogram(src.pixels.data(), src.width, src.height, region);
  EXPECT_TRUE(std::equal(cols[0].begin(), cols[0].end(), h.begin()));

  // 16 bits, three equal channels (1: counted, as in a one-channel 16-bit mask)
  Image16 m16;
  m16.width = src.width;
  m16.height = src.height;
  m16.channels = 3;
  m16.pixels.resize(m16.sample_count());
  for (std::size_t i = 0; i < m16.pixels.size(); ++i) {
    const int p = int(i / 3);
    m16.pixels[i] = pred(p % src.width, p / src.width) ? 1 : 0;
  }
  save_image16(m16, path("m16.png"));
  r = run("equalize " + in + " -o " + q("m16-out.png") + " --backend cpu --mask " + q("m16.png"));
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(slurp(path("m16-out.png")), slurp(path("png.png")));

  // one pixel whose channels differ: a colour image, refused (8 and 16 bits)
  Image c = load_image(path("m.bmp"));
  c.pixels[3 * 1000 + 1] ^= 1;
  save_image(c, path("c.ppm"));
  r = run("equalize " + in + " -o " + q("x.png") + " --backend cpu --mask " + q("c.ppm"));
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("c.ppm' has 3 channels"), std::string::npos) << r;
  m16.pixels[3 * 1000 + 2] = 7;
  save_image16(m16, path("c16.png"));
  r = run("equalize " + in + " -o " + q("x.png") + " --backend cpu --mask " + q("c16.png"));
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("c16.png' has 3 channels"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(path("x.png")));
}

TEST_F(CliMatch, ModeHelpIsEachCommands) {
  Result r = run("match --help");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_NE(r.out.find("matched luma"), std::string::npos) << r;
  EXPECT_EQ(r.out.find("equalized luma"), std::string::npos) << r;
  r = run("equalize --help");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_NE(r.out.find("equalized luma"), std::string::npos) << r;
  for (const char* cmd : {"clahe", "histogram"}) {
    r = run(std::string(cmd) + " --help");
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_NE(r.out.find("--mode"), std::string::npos) << cmd << r;
    EXPECT_EQ(r.out.find("equalized luma"), std::string::npos) << cmd << r;
    EXPECT_EQ(r.out.find("matched luma"), std::string::npos) << cmd << r;
  }
}

TEST_F(CliMatch, JsonNamesTheFormulaWhereItApplies) {
  const std::string in = quote(sample("moon.png"));
  save_image(mask8(512, 512, [](int x, int) { return x > 50; }), path("m.png"));
  // one file with a region: the per-file route, and --formula is used
  Result r = run("equalize " + in + " -o " + q("e.png") +
                 " --backend cpu --json --roi 0,0,64,64 --formula exact");
  ASSERT_EQ(r.status, 0) << r;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["operation"], "equalize");
  EXPECT_EQ(j["formula"], "exact");
  r = run("equalize " + in + " -o " + q("o.png") + " --backend cpu --json --roi 0,0,64,64");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(nlohmann::json::parse(r.out)["formula"], "opencv");
  r = run("equalize " + in + " -o " + q("mask-exact.png") + " --backend cpu --json --mask " +
          q("m.png") + " --formula exact");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(nlohmann::json::parse(r.out)["formula"], "exact");

  // a batch: each file's line (not the summary)
  r = run("equalize " + in + " " + quote(sample("coins.png")) + " -o " + q("out") +
          " --backend cpu --json --formula exact");
  ASSERT_EQ(r.status, 0) << r;
  const auto lines = test::lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u) << r;
  for (std::size_t i = 0; i < 2; ++i)
    EXPECT_EQ(nlohmann::json::parse(lines[i])["formula"], "exact");
  EXPECT_FALSE(nlohmann::json::parse(lines[2])["summary"].contains("formula"));

  // not where the formula does not make the LUT: match, clahe, 16-bit equalize
  const std::string ref = " --reference " + quote(sample("camera.png"));
  const std::string two = in + " " + quote(sample("coins.png"));
  for (const std::string& c :
       {"match " + in + ref + " -o " + q("n.png"), "clahe " + in + " -o " + q("n.png"),
        "equalize " + in + " --depth 16 -o " + q("n.png"),
        "match " + two + ref + " -o " + q("n")}) {
    SCOPED_TRACE(c);
    r = run(c + " --backend cpu --json");
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_FALSE(nlohmann::json::parse(test::lines_of(r.out).front()).contains("formula"));
  }
}

// ---- the GPU: the same bytes as the CPU ----

TEST_F(CliMatch, GpuMatchAndMaskEqualTheCpu) {
  HISTEQ_REQUIRE_GPU();
  const Image src = load_image(sample("moon.png"));
  save_image(mask8(src.width, src.height, [](int x, int y) { return x * y % 7 == 1; }),
             path("m.png"));
  save_image16(field16(131, 77, 1, 5), path("in16.png"));
  const std::string ref = " --reference " + quote(sample("camera.png"));
  const std::string cases[] = {
      "match " + quote(sample("moon.png")) + ref,
      "match " + quote(sample("chelsea.png")) + " --reference " + quote(sample("coffee.png")),
      "match " + quote(sample("chelsea.png")) + " --mode rgb" + ref,
      "match " + q("in16.png") + ref,
      "equalize " + quote(sample("moon.png")) + " --mask " + q("m.png"),
      "equalize " + quote(sample("moon.png")) + " --roi 10,20,300,100",
      "clahe " + quote(sample("moon.png")) + " --clip-limit 2 --tile-grid-size 5x3 --mask " +
          q("m.png"),
      "clahe " + quote(sample("chelsea.png")) + " --roi 10,20,300,100 --mode rgb",
      "clahe " + q("in16.png") + " --roi 3,4,60,50",
  };
  for (const std::string& c : cases) {
    SCOPED_TRACE(c);
    Result r = run(c + " -o " + q("cpu.png") + " --backend cpu");
    ASSERT_EQ(r.status, 0) << r;
    r = run(c + " -o " + q("gpu.png") + " --backend cuda");
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_EQ(slurp(path("cpu.png")), slurp(path("gpu.png")));
  }
  // A batch on the device engines (--devices): the same bytes as the CPU batch.
  fs::create_directories(dir_ / "in");
  for (const char* n : {"moon.png", "chelsea.png", "coins.png"})
    fs::copy_file(sample(n), dir_ / "in" / n);
  ASSERT_EQ(run("match " + q("in") + " -o " + q("oc") + ref + " --backend cpu").status, 0);
  ASSERT_EQ(run("match " + q("in") + " -o " + q("og") + ref + " --backend cuda --devices 0").status,
            0);
  for (const char* n : {"moon.png", "chelsea.png", "coins.png"})
    EXPECT_EQ(slurp(dir_ / "oc" / n), slurp(dir_ / "og" / n)) << n;
}

// --decoder gpu on a folder of JPEGs: every file on the device route (the bytes of the route
// are test_match_jpeg_gpu's), as equalize's.
TEST_F(CliMatch, GpuDecoderTakesAFolderOfJpegsToTheDeviceRoute) {
  HISTEQ_REQUIRE_GPU();
  if (!gpu::nvjpeg_built()) GTEST_SKIP() << "built without nvJPEG";
  fs::create_directories(dir_ / "jpegs");
  for (const char* n : {"chelsea", "coffee", "camera"})
    save_image(load_image(sample(std::string(n) + ".png")),
               (dir_ / "jpegs" / (std::string(n) + ".jpg")).string());
  const std::string ref = " --reference " + quote(sample("astronaut.png"));
  for (const char* cmd : {"equalize", "match"}) {
    SCOPED_TRACE(cmd);
    const Result r = run(std::string(cmd) + " " + q("jpegs") + " -o " + q(std::string("o-") + cmd) +
                         (std::string(cmd) == "match" ? ref : "") + " --decoder gpu --json");
    ASSERT_EQ(r.status, 0) << r;
    const std::vector<std::string> lines = test::lines_of(r.out);
    ASSERT_EQ(lines.size(), 4u) << r;
    const auto summary = nlohmann::json::parse(lines.back())["summary"];
    EXPECT_TRUE(summary["device_started"].get<bool>()) << r;
    EXPECT_EQ(summary["routes"]["jpeg-device"]["files"].get<int>(), 3) << r;
  }
}

}  // namespace
