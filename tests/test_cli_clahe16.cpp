// test_cli_clahe16.cpp — `histeq clahe` and 16-bit images through the command line (spawns the
// built binary): OpenCV 4.6 CLAHE goldens byte for byte (pixels) on the CPU backend, the CLI
// equal to the library's clahe()/equalize16()/histogram16, --depth 8/16, 16-bit outputs that a
// format cannot hold, PGM round trips, a folder of mixed 8/16-bit files, stdin/stdout, option
// errors. The GPU cases (--backend cuda equal to --backend cpu) skip without a device.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "histeq/clahe.hpp"
#include "histeq/equalize16.hpp"
#include "histeq/gpu16.hpp"
#include "histeq/image16.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/pipeline.hpp"
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

/// A 16-bit gray image with values lo..hi (all of them occur), shuffled.
Image16 band16(int w, int h, int lo, int hi, std::uint32_t seed) {
  Image16 img;
  img.width = w;
  img.height = h;
  img.channels = 1;
  img.pixels.resize(std::size_t(w) * h);
  for (std::size_t i = 0; i < img.pixels.size(); ++i)
    img.pixels[i] = std::uint16_t(lo + int(i % std::size_t(hi - lo + 1)));
  std::mt19937 rng(seed);
  std::shuffle(img.pixels.begin(), img.pixels.end(), rng);
  return img;
}

Image16 random16(int w, int h, int c, std::uint32_t seed) {
  Image16 img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels.resize(img.sample_count());
  std::mt19937 rng(seed);
  // A smooth field plus noise: CLAHE sees different tiles.
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        img.pixels[(std::size_t(y) * w + x) * c + k] =
            std::uint16_t((x * 40000 / w + y * 20000 / h + int(rng() % 3000) + k * 500) % 65536);
  return img;
}

class CliClahe16 : public test::TempDirTest {
 protected:
  CliClahe16() : TempDirTest("histeq-cli-clahe16") {}

  Result run(const std::string& args, const std::string& stdin_file = "") {
    const std::string o = path("stdout.txt"), e = path("stderr.txt");
    std::string cmd = quote(HISTEQ_CLI) + " " + args + " >" + quote(o) + " 2>" + quote(e);
    if (!stdin_file.empty()) cmd += " <" + quote(stdin_file);
    const int raw = std::system(cmd.c_str());
    Result r;
    r.status = (raw != -1 && WIFEXITED(raw)) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(o);
    r.err = slurp(e);
    return r;
  }
  std::string q(const std::string& name) const { return quote(path(name)); }
};

struct Golden {
  fs::path file;
  std::string name;
  std::string clip;
  int tx, ty;
  bool sixteen;
};

std::vector<Golden> goldens() {
  std::vector<Golden> v;
  const std::string shared = test::shared_dir();
  if (shared.empty()) return v;
  const fs::path dir = fs::path(shared) / "golden" / "opencv-4.6-clahe";
  if (!fs::is_directory(dir)) return v;
  const std::regex re(R"((\w+?)(16)?__clip([0-9.]+)_t(\d+)x(\d+)\.png)");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string fn = e.path().filename().string();
    if (!std::regex_match(fn, m, re)) continue;
    v.push_back({e.path(), m[1], m[3], std::stoi(m[4]), std::stoi(m[5]), m[2].matched});
  }
  std::sort(v.begin(), v.end(), [](const Golden& a, const Golden& b) { return a.file < b.file; });
  return v;
}

std::string golden_input(const Golden& g) {
  return g.sixteen ? (g.file.parent_path() / (g.name + "16.png")).string()
                   : test::shared_dir() + "/natural/" + g.name + ".png";
}

// ---- CLAHE: OpenCV goldens and the library ----

TEST_F(CliClahe16, GoldensThroughTheCliOnTheCpu) {
  const auto gs = goldens();
  if (gs.empty()) GTEST_SKIP() << "no ../shared/golden/opencv-4.6-clahe next to the checkout";
  int gray = 0, sixteen = 0, colour = 0;
  for (const Golden& g : gs) {
    SCOPED_TRACE(g.file.filename().string());
    const std::string in = golden_input(g);
    const Result r =
        run("clahe " + quote(in) + " -o " + q("out.png") + " --clip " + g.clip + " --tiles " +
            std::to_string(g.tx) + "x" + std::to_string(g.ty) + " --backend cpu");
    ASSERT_EQ(r.status, 0) << r;
    if (g.sixteen) {
      ASSERT_TRUE(is_16bit_image(path("out.png")));
      EXPECT_TRUE(load_image16(path("out.png")).pixels == load_image16(g.file.string()).pixels);
      ++sixteen;
      continue;
    }
    const Image got = load_image(path("out.png"));
    const Image src = load_image(in);
    ClaheOptions o;
    o.clip_limit = std::stod(g.clip);
    o.tiles_x = g.tx;
    o.tiles_y = g.ty;
    // The CLI equals the library's clahe() for the same input, every image.
    EXPECT_TRUE(got.pixels == clahe(src, o, Backend::cpu).pixels);
    if (src.channels == 1) {
      EXPECT_TRUE(got.pixels == load_image(g.file.string()).pixels);
      ++gray;
    } else {
      ++colour;
    }
  }
  EXPECT_GT(gray, 0);
  EXPECT_GT(sixteen, 0);
  EXPECT_GT(colour, 0);
}

TEST_F(CliClahe16, ClaheDefaultsAreOpenCvsAndStdinStdoutMatchesTheFile) {
  // OpenCV's createCLAHE() defaults: clipLimit 40, tileGridSize 8x8 (as histeq.clahe's).
  const std::string in = test::source_path("samples/moon.png");
  ASSERT_EQ(run("clahe " + quote(in) + " -o " + q("a.png") + " --backend cpu").status, 0);
  ASSERT_EQ(run("clahe " + quote(in) + " -o " + q("b.png") +
                " --backend cpu --clip-limit 40 --tile-grid-size 8x8")
                .status,
            0);
  // --clip and --tiles: the earlier names, still taken.
  ASSERT_EQ(
      run("clahe " + quote(in) + " -o " + q("e.png") + " --backend cpu --clip 40.0 --tiles 8x8")
          .status,
      0);
  const Result s = run("clahe - -o - --format png --backend cpu", in);
  ASSERT_EQ(s.status, 0) << s;
  {
    std::ofstream f(path("c.png"), std::ios::binary);
    f << s.out;
  }
  const Image a = load_image(path("a.png"));
  EXPECT_TRUE(a.pixels == load_image(path("b.png")).pixels);
  EXPECT_TRUE(a.pixels == load_image(path("c.png")).pixels);
  EXPECT_TRUE(a.pixels == load_image(path("e.png")).pixels);
  ClaheOptions o;
  EXPECT_EQ(o.clip_limit, 40.0);
  EXPECT_TRUE(a.pixels == cpu::clahe(load_image(in), o).pixels);
  // Clip 2 (the usual choice for photographs) and clip 0 (plain adaptive equalization):
  // different results on this photo, each as the library's.
  for (const double clip : {2.0, 0.0}) {
    const std::string name = clip == 0 ? "d.png" : "f.png";
    ASSERT_EQ(run("clahe " + quote(in) + " -o " + q(name) + " --backend cpu --clip-limit " +
                  std::to_string(clip))
                  .status,
              0);
    o.clip_limit = clip;
    EXPECT_TRUE(load_image(path(name)).pixels == cpu::clahe(load_image(in), o).pixels) << clip;
    EXPECT_FALSE(load_image(path(name)).pixels == a.pixels) << clip;
  }
  // A name and its earlier name together: a usage error naming both.
  const Result both =
      run("clahe " + quote(in) + " -o " + q("g.png") + " --backend cpu --clip 2 --clip-limit 3");
  EXPECT_EQ(both.status, 2) << both;
  EXPECT_NE(both.err.find("--clip-limit"), std::string::npos) << both;
  const Result tiles = run("clahe " + quote(in) + " -o " + q("g.png") +
                           " --backend cpu --tiles 4x4 --tile-grid-size 4x4");
  EXPECT_EQ(tiles.status, 2) << tiles;
  EXPECT_NE(tiles.err.find("--tile-grid-size"), std::string::npos) << tiles;
}

TEST_F(CliClahe16, ClaheJsonAndTiming) {
  const std::string in = test::source_path("samples/chelsea.png");
  const Result r = run("clahe " + quote(in) + " -o " + q("o.jpg") +
                       " --backend cpu --json --timing --tiles 4x2 --clip 3 --mode rgb");
  ASSERT_EQ(r.status, 0) << r;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["operation"], "clahe");
  EXPECT_EQ(j["tiles_x"], 4);
  EXPECT_EQ(j["tiles_y"], 2);
  EXPECT_EQ(j["clip_limit"], 3.0);
  EXPECT_EQ(j["mode"], "rgb");
  EXPECT_EQ(j["bit_depth"], 8);
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_NE(r.err.find("clahe"), std::string::npos) << r;  // the timing table on stderr
}

TEST_F(CliClahe16, ClaheOptionErrorsNameTheOptionAndRange) {
  const std::string in = test::source_path("samples/moon.png");
  struct Case {
    const char* args;
    const char* want;
  } cases[] = {{"--tiles 0x8", "1..1024"},
               {"--tiles 0", "1..1024"},
               {"--tile-grid-size 8y", "--tile-grid-size takes WxH"},
               {"--tiles 8x", "--tiles"},
               {"--tiles 2000x4", "1..1024"},
               {"--tiles ax4", "--tiles"},
               {"--depth 12", "--depth"},
               {"--kernel racy", "--kernel"},
               // junk after the number: read as 0 (clipping off) or 2 before, silently
               {"--clip 0x10", "--clip takes a finite number (0 or less: no clipping), got '0x10'"},
               {"--clip 2,5", "--clip takes a finite number (0 or less: no clipping), got '2,5'"},
               {"--clip 2abc", "--clip takes a finite number (0 or less: no clipping), got '2abc'"},
               {"--clip=1e", "--clip takes a finite number"},
               {"--clip 2.5.1", "--clip takes a finite number"},
               {"--clip inf", "--clip takes a finite number"},
               {"--clip nan", "--clip takes a finite number"},
               {"--clip ''", "--clip takes a finite number"},
               {"--tiles 8x8x", "--tiles takes WxH"},
               {"--tiles 8x8,", "--tiles takes WxH"},
               {"--tiles ' 8x8'", "--tiles takes WxH"},
               {"--tiles +8x8", "--tiles takes WxH"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Result r = run("clahe " + quote(in) + " -o " + q("x.png") + " --backend cpu " + c.args);
    EXPECT_EQ(r.status, 2) << r;
    EXPECT_NE(r.err.find(c.want), std::string::npos) << r;
    EXPECT_FALSE(fs::exists(path("x.png")));
    fs::remove(path("x.png"));  // each case on its own
  }
  // Decimal numbers in full are taken as they are written; 0 or less is no clipping, as
  // OpenCV's clipLimit and Python's clip_limit take it.
  for (const auto& [arg, clip] : std::vector<std::pair<std::string, double>>{{"2.5", 2.5},
                                                                             {".5", 0.5},
                                                                             {"3.", 3.0},
                                                                             {"1e1", 10.0},
                                                                             {"+4", 4.0},
                                                                             {"0", 0.0},
                                                                             {"-1", -1.0},
                                                                             {"=-0.5", -0.5}}) {
    SCOPED_TRACE(arg);
    const Result r = run("clahe " + quote(in) + " -o " + q("x.png") +
                         " --backend cpu --json --clip" + (arg[0] == '=' ? "" : " ") + arg);
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_EQ(nlohmann::json::parse(r.out)["clip_limit"].get<double>(), clip) << r;
  }
  const auto bytes_with = [&](const std::string& args) {
    const Result r = run("clahe " + quote(in) + " -o " + q("y.png") + " --backend cpu " + args);
    EXPECT_EQ(r.status, 0) << r;
    return slurp(path("y.png"));
  };
  EXPECT_EQ(bytes_with("--clip -1"), bytes_with("--clip 0"));  // both: no clipping
  // One number is a square grid, as Python's tile_grid_size=N.
  EXPECT_EQ(bytes_with("--tile-grid-size 4"), bytes_with("--tile-grid-size 4x4"));
  EXPECT_EQ(bytes_with("--tiles 3"), bytes_with("--tiles 3x3"));
}

TEST_F(CliClahe16, HelpDocumentsClahe) {
  for (const char* a : {"clahe --help", "help clahe"}) {
    const Result r = run(a);
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_NE(r.out.find("--clip"), std::string::npos) << r;
    EXPECT_NE(r.out.find("--tiles"), std::string::npos) << r;
    EXPECT_NE(r.out.find("--depth"), std::string::npos) << r;
    // What clahe refuses it does not offer: --kernel takes auto only, --decoder auto or cpu.
    EXPECT_EQ(r.out.find("histeq kernels"), std::string::npos) << r;
    EXPECT_EQ(r.out.find("gpu (nvJPEG"), std::string::npos) << r;
    EXPECT_NE(r.out.find("auto only"), std::string::npos) << r;
    EXPECT_NE(r.out.find("auto or cpu"), std::string::npos) << r;
  }
  EXPECT_NE(run("--help").out.find("histeq clahe"), std::string::npos);
  EXPECT_NE(run("equalize --help").out.find("histeq kernels"), std::string::npos);
}

TEST_F(CliClahe16, A16BitGridTooLargeNamesTilesAndTheLimit) {
  save_image16(random16(40, 30, 1, 5), path("s.png"));
  const Result r =
      run("clahe " + q("s.png") + " -o " + q("o.png") + " --backend cpu --tiles 128x64");
  EXPECT_EQ(r.status, 2) << r;
  // Named by the option's name (--tiles is its earlier one, as accepted)
  EXPECT_NE(r.err.find("--tile-grid-size 128x64"), std::string::npos) << r;
  EXPECT_NE(r.err.find("4096"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(path("o.png")));
  const Result g =
      run("clahe " + q("s.png") + " -o " + q("o.png") + " --backend cpu --tile-grid-size 64x65");
  EXPECT_EQ(g.status, 2) << g;
  EXPECT_NE(g.err.find("--tile-grid-size 64x65 is too large"), std::string::npos) << g;
  EXPECT_EQ(g.err.find("--tiles"), std::string::npos) << g;
  // The same grid at 8 bits is fine.
  EXPECT_EQ(
      run("clahe " + q("s.png") + " -o " + q("o8.png") + " --backend cpu --tiles 128x64 --depth 8")
          .status,
      0);
}

// ---- 16 bits ----

TEST_F(CliClahe16, Equalize16KeepsTheLevelsOfANarrowBand) {
  // The issue's example: values 1000..1200 used to come out as two levels (0 and 255).
  const Image16 img = band16(300, 200, 1000, 1200, 7);
  save_image16(img, path("band.png"));
  const Result r = run("equalize " + q("band.png") + " -o " + q("eq.png") + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  ASSERT_TRUE(is_16bit_image(path("eq.png")));
  const Image16 got = load_image16(path("eq.png"));
  const std::set<std::uint16_t> levels(got.pixels.begin(), got.pixels.end());
  EXPECT_GT(levels.size(), 150u);
  EXPECT_TRUE(got.pixels == equalize16(img, Mode::gray, Backend::cpu).pixels);
  EXPECT_EQ(*levels.begin(), 0);
  EXPECT_EQ(*levels.rbegin(), 65535);
}

TEST_F(CliClahe16, Equalize16ColourPerChannelAndPgmRoundTrip) {
  const Image16 rgb = random16(97, 61, 3, 3);
  save_image16(rgb, path("rgb.png"));
  Result r = run("equalize " + q("rgb.png") + " -o " + q("rgb.ppm") + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_TRUE(load_image16(path("rgb.ppm")).pixels ==
              equalize16(rgb, Mode::rgb, Backend::cpu).pixels);
  // luma needs 16-bit YCbCr: refused, naming the way out.
  r = run("equalize " + q("rgb.png") + " -o " + q("l.png") + " --backend cpu --mode luma");
  EXPECT_NE(r.status, 0) << r;
  EXPECT_NE(r.err.find("--mode rgb"), std::string::npos) << r;

  const Image16 gray = random16(64, 48, 1, 4);
  save_image16(gray, path("g.pgm"));
  r = run("clahe " + q("g.pgm") + " -o " + q("g-out.pgm") + " --backend cpu --tiles 3x5");
  ASSERT_EQ(r.status, 0) << r;
  ClaheOptions o;
  o.tiles_x = 3;
  o.tiles_y = 5;
  EXPECT_TRUE(load_image16(path("g-out.pgm")).pixels == cpu::clahe(gray, o).pixels);
  // PGM → PNG → PGM keeps the samples.
  ASSERT_EQ(
      run("clahe " + q("g-out.pgm") + " -o " + q("g2.png") + " --backend cpu --clip 0 --tiles 1x1")
          .status,
      0);
  o.clip_limit = 0;
  o.tiles_x = o.tiles_y = 1;
  EXPECT_TRUE(load_image16(path("g2.png")).pixels ==
              cpu::clahe(load_image16(path("g-out.pgm")), o).pixels);
}

// A 16-bit gray+alpha PNG keeps its alpha by default and in modes luma and rgb; --mode gray
// writes its gray channel alone, as at 8 bits (the batch too, and clahe and match alike).
TEST_F(CliClahe16, SixteenBitGrayAlphaWithModeGrayDropsTheAlpha) {
  const Image16 ga = random16(53, 37, 2, 21);
  save_image16(ga, path("ga.png"));
  Image16 gray = ga;
  gray.channels = 1;
  gray.pixels.resize(gray.pixel_count());
  for (std::size_t i = 0; i < gray.pixels.size(); ++i) gray.pixels[i] = ga.pixels[2 * i];
  const Image16 want_gray = equalize16(gray, Mode::gray, Backend::cpu);
  for (const char* mode : {"", " --mode luma", " --mode rgb"}) {
    const Result r = run("equalize " + q("ga.png") + " -o " + q("keep.png") + " --backend cpu" +
                         mode + " --json");
    ASSERT_EQ(r.status, 0) << mode << r;
    const Image16 out = load_image16(path("keep.png"));
    ASSERT_EQ(out.channels, 2) << mode;
    for (std::size_t i = 0; i < gray.pixels.size(); ++i) {
      ASSERT_EQ(out.pixels[2 * i], want_gray.pixels[i]) << mode << " pixel " << i;
      ASSERT_EQ(out.pixels[2 * i + 1], ga.pixels[2 * i + 1]) << mode << " alpha " << i;
    }
    EXPECT_EQ(nlohmann::json::parse(r.out)["output_channels"], 2) << mode << r;
  }
  Result r =
      run("equalize " + q("ga.png") + " -o " + q("gray.png") + " --backend cpu --mode gray --json");
  ASSERT_EQ(r.status, 0) << r;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["channels"], 2) << r;
  EXPECT_EQ(j["output_channels"], 1) << r;
  EXPECT_EQ(j["mode"], "gray") << r;
  const Image16 out = load_image16(path("gray.png"));
  EXPECT_EQ(out.channels, 1);
  EXPECT_TRUE(out.pixels == want_gray.pixels);

  // A folder, CLAHE and matching take the same way.
  fs::create_directories(path("in"));
  fs::copy_file(path("ga.png"), path("in/ga.png"));
  r = run("equalize " + q("in") + " -o " + q("out") + " --backend cpu --mode gray");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_TRUE(load_image16(path("out/ga.png")).pixels == want_gray.pixels);
  r = run("clahe " + q("ga.png") + " -o " + q("c.png") + " --backend cpu --mode gray");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_TRUE(load_image16(path("c.png")).pixels == cpu::clahe(gray, ClaheOptions{}).pixels);
  save_image16(random16(20, 30, 1, 22), path("ref.png"));
  r = run("match " + q("ga.png") + " --reference " + q("ref.png") + " -o " + q("m.png") +
          " --backend cpu --mode gray");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(load_image16(path("m.png")).channels, 1) << r;
}

TEST_F(CliClahe16, SixteenBitPngOutputKeepsTheIccProfile) {
  // README: "the ICC profile of a PNG input (iCCP) into a PNG output". The 16-bit path (libspng)
  // dropped it: equalize, clahe, a batch and --depth 16 from an 8-bit PNG wrote no iCCP.
  std::vector<std::uint8_t> icc(800);
  for (std::size_t i = 0; i < icc.size(); ++i) icc[i] = std::uint8_t(i * 3 % 17);
  std::memcpy(icc.data() + 16, "RGB ", 4);
  std::vector<std::uint8_t> in = encode_image16(random16(40, 30, 3, 11), ".png");
  png::insert_iccp(in, icc);  // the input's chunk, independent of the writer under test
  {
    std::ofstream f(path("icc16.png"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(in.data()), std::streamsize(in.size()));
  }
  auto profile_of = [&](const std::string& name) {
    const std::string b = slurp(path(name));
    return png::read_iccp(reinterpret_cast<const std::uint8_t*>(b.data()), b.size());
  };
  for (const char* cmd : {"equalize", "clahe"}) {
    SCOPED_TRACE(cmd);
    const std::string out = std::string(cmd) + ".png";
    const Result r =
        run(std::string(cmd) + " " + q("icc16.png") + " -o " + q(out) + " --backend cpu");
    ASSERT_EQ(r.status, 0) << r;
    ASSERT_TRUE(is_16bit_image(path(out)));
    EXPECT_EQ(profile_of(out), icc);
    EXPECT_EQ(load_image16(path(out)).icc, icc);
  }
  fs::create_directories(path("in"));
  fs::copy_file(path("icc16.png"), path("in/icc16.png"));
  const Result b = run("equalize " + q("in") + " -o " + q("out") + " --backend cpu --quiet");
  ASSERT_EQ(b.status, 0) << b;
  EXPECT_EQ(profile_of("out/icc16.png"), icc);
  // --depth 16 from an 8-bit PNG with a profile; --depth 8 from the 16-bit one.
  Image img8;
  img8.width = 8;
  img8.height = 8;
  img8.channels = 3;
  for (int i = 0; i < 192; ++i) img8.pixels.push_back(std::uint8_t(i));
  img8.icc = icc;
  save_image(img8, path("icc8.png"));
  Result r = run("equalize " + q("icc8.png") + " -o " + q("w.png") + " --backend cpu --depth 16");
  ASSERT_EQ(r.status, 0) << r;
  ASSERT_TRUE(is_16bit_image(path("w.png")));
  EXPECT_EQ(profile_of("w.png"), icc);
  r = run("equalize " + q("icc16.png") + " -o " + q("n.png") + " --backend cpu --depth 8");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(profile_of("n.png"), icc);
  // A 16-bit output the profile no longer describes (gray from colour cannot happen at 16 bits;
  // a GRAY profile on a colour image): dropped, as the 8-bit writer drops it.
  std::memcpy(icc.data() + 16, "GRAY", 4);
  std::vector<std::uint8_t> g = encode_image16(random16(10, 10, 3, 12), ".png");
  png::insert_iccp(g, icc);
  {
    std::ofstream f(path("gray-icc16.png"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(g.data()), std::streamsize(g.size()));
  }
  r = run("equalize " + q("gray-icc16.png") + " -o " + q("d.png") + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_TRUE(profile_of("d.png").empty());
}

TEST_F(CliClahe16, SixteenBitsToAn8BitFormatIsAnErrorSuggestingDepth8) {
  save_image16(band16(40, 30, 1000, 1200, 1), path("band.png"));
  for (const char* ext : {"jpg", "bmp", "tga"}) {
    SCOPED_TRACE(ext);
    for (const char* cmd : {"equalize", "clahe"}) {
      const Result r = run(std::string(cmd) + " " + q("band.png") + " -o " +
                           q(std::string("o.") + ext) + " --backend cpu");
      EXPECT_EQ(r.status, 2) << r;
      EXPECT_NE(r.err.find("--depth 8"), std::string::npos) << r;
      EXPECT_NE(r.err.find(".png"), std::string::npos) << r;
      EXPECT_FALSE(fs::exists(path(std::string("o.") + ext)));
    }
  }
}

// --formula exact is 8-bit equalization's: on a 16-bit file it is the file's usage error naming
// the ways out (not ignored), and with --depth 8 it runs.
TEST_F(CliClahe16, FormulaExactOnA16BitFileIsAnError) {
  save_image16(band16(40, 30, 1000, 1200, 1), path("band.png"));
  Result r = run("equalize " + q("band.png") + " -o " + q("fx.png") + " --formula exact" +
                 " --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("'exact'"), std::string::npos) << r;
  EXPECT_NE(r.err.find("--formula opencv"), std::string::npos) << r;
  EXPECT_NE(r.err.find("--depth 8"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(path("fx.png")));
  r = run("equalize " + q("band.png") + " -o " + q("fx8.png") + " --formula exact --depth 8" +
          " --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_FALSE(is_16bit_image(path("fx8.png")));
  // an 8-bit file at --depth 16: the depth asked for, not the file, says why
  r = run("equalize " + quote(test::source_path("samples/moon.png")) + " -o " + q("fx16.png") +
          " --formula exact --depth 16 --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("(depth 16)"), std::string::npos) << r;
  EXPECT_EQ(r.err.find("16-bit file"), std::string::npos) << r;
}

// 8-bit results are written as 8-bit PGM/PPM (maxval 255), as histeq reads them: .pgm gray,
// .ppm colour, .pnm either; the pixels are those of the PNG output. A colour result as .pgm (or
// gray as .ppm) is a usage error naming the extension that fits.
TEST_F(CliClahe16, EightBitResultsAsPgmPpmPnm) {
  const std::string moon = quote(test::source_path("samples/moon.png"));
  const std::string chelsea = quote(test::source_path("samples/chelsea.png"));
  save_image16(band16(40, 30, 1000, 1200, 1), path("band.png"));
  struct Case {
    std::string args, out, png;
    int channels;
  } cases[] = {{"equalize " + moon, "m.pgm", "m.png", 1},
               {"equalize " + chelsea, "c.ppm", "c.png", 3},
               {"clahe " + chelsea, "c.pnm", "cc.png", 3},
               {"equalize " + q("band.png") + " --depth 8", "b.pgm", "b.png", 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    Result r = run(c.args + " -o " + q(c.out) + " --backend cpu");
    ASSERT_EQ(r.status, 0) << r;
    r = run(c.args + " -o " + q(c.png) + " --backend cpu");
    ASSERT_EQ(r.status, 0) << r;
    const std::string bytes = slurp(path(c.out));
    EXPECT_EQ(bytes.substr(0, 2), c.channels == 1 ? "P5" : "P6");
    const Image got = load_image(path(c.out));
    EXPECT_EQ(got.channels, c.channels);
    EXPECT_TRUE(got.pixels == load_image(path(c.png)).pixels);
  }
  Result r = run("equalize " + chelsea + " -o " + q("x.pgm") + " --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find(".ppm"), std::string::npos) << r;
  EXPECT_NE(r.err.find(".pnm"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(path("x.pgm")));
  r = run("equalize " + chelsea + " -o " + q("x.pgm") + " --backend cpu --mode gray");
  EXPECT_EQ(r.status, 0) << r;
  r = run("equalize " + moon + " -o " + q("x.ppm") + " --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find(".pgm"), std::string::npos) << r;
}

TEST_F(CliClahe16, Depth8NarrowsAndDepth16Widens) {
  const Image16 img = band16(128, 64, 1000, 30000, 5);
  save_image16(img, path("w.png"));
  Result r = run("equalize " + q("w.png") + " -o " + q("n.jpg") +
                 " --backend cpu --depth 8 --quality 100");
  ASSERT_EQ(r.status, 0) << r;
  r = run("equalize " + q("w.png") + " -o " + q("n.png") + " --backend cpu --depth 8");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_FALSE(is_16bit_image(path("n.png")));
  EqualizeOptions eo;
  eo.backend = Backend::cpu;
  EXPECT_TRUE(load_image(path("n.png")).pixels == equalize(narrow_to_8(img), eo).pixels);

  const std::string moon = test::source_path("samples/moon.png");
  r = run("clahe " + quote(moon) + " -o " + q("wide.png") + " --backend cpu --depth 16");
  ASSERT_EQ(r.status, 0) << r;
  ASSERT_TRUE(is_16bit_image(path("wide.png")));
  EXPECT_TRUE(load_image16(path("wide.png")).pixels ==
              cpu::clahe(widen_to_16(load_image(moon)), ClaheOptions{}).pixels);
  r = run("equalize " + quote(moon) + " -o " + q("wide-eq.png") +
          " --backend cpu --depth 16 --json");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(nlohmann::json::parse(r.out)["bit_depth"], 16);
  EXPECT_TRUE(load_image16(path("wide-eq.png")).pixels ==
              equalize16(widen_to_16(load_image(moon)), Mode::gray, Backend::cpu).pixels);
}

TEST_F(CliClahe16, Histogram16Has65536Bins) {
  const Image16 img = band16(50, 40, 1000, 1200, 9);
  save_image16(img, path("h.png"));
  Result r = run("histogram " + q("h.png") + " --backend cpu --csv");
  ASSERT_EQ(r.status, 0) << r;
  std::istringstream in(r.out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "bin,count");
  const Histogram want = cpu::histogram16(img.pixels.data(), img.pixels.size());
  std::size_t n = 0;
  bool equal = true;
  for (; std::getline(in, line); ++n) {
    const auto comma = line.find(',');
    if (std::stoull(line.substr(0, comma)) != n || std::stoull(line.substr(comma + 1)) != want[n])
      equal = false;
  }
  EXPECT_EQ(n, 65536u);
  EXPECT_TRUE(equal);
  // --depth 8: the 256-bin histogram of the narrowed image.
  r = run("histogram " + q("h.png") + " --backend cpu --depth 8");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 256);
  // JSON Lines: one array of 65536 counts.
  r = run("histogram " + q("h.png") + " --backend cpu --json");
  ASSERT_EQ(r.status, 0) << r;
  const auto j = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
  ASSERT_EQ(j["histograms"].size(), 1u);
  EXPECT_EQ(j["histograms"][0].get<Histogram>(), want);
  EXPECT_EQ(j["bit_depth"], 16);
}

TEST_F(CliClahe16, AFolderOfMixed8And16BitFiles) {
  fs::create_directories(path("in"));
  const Image16 a = band16(60, 40, 1000, 1200, 1), b = random16(70, 50, 1, 2);
  save_image16(a, path("in/a16.png"));
  save_image16(b, path("in/b16.png"));
  fs::copy_file(test::source_path("samples/moon.png"), path("in/moon.png"));
  fs::copy_file(test::source_path("samples/chelsea.png"), path("in/chelsea.png"));
  for (const char* cmd : {"equalize", "clahe"}) {
    SCOPED_TRACE(cmd);
    const std::string outdir = std::string("out-") + cmd;
    const Result r = run(std::string(cmd) + " " + q("in") + " -o " + q(outdir) +
                         " --backend cpu --json --jobs 2");
    ASSERT_EQ(r.status, 0) << r;
    int sixteen = 0;
    std::istringstream lines(r.out);
    for (std::string l; std::getline(lines, l);) {
      const auto j = nlohmann::json::parse(l);
      if (j.contains("bit_depth") && j["bit_depth"] == 16) ++sixteen;
    }
    EXPECT_EQ(sixteen, 2);
    // Every batch output equals the single-file command's.
    for (const char* f : {"a16.png", "b16.png", "moon.png", "chelsea.png"}) {
      SCOPED_TRACE(f);
      const Result s = run(std::string(cmd) + " " + q(std::string("in/") + f) + " -o " +
                           q("single.png") + " --backend cpu");
      ASSERT_EQ(s.status, 0) << s;
      const std::string batch_out = path(outdir + "/" + f);
      ASSERT_EQ(is_16bit_image(batch_out), f[1] == '1');
      if (f[1] == '1') {
        EXPECT_TRUE(load_image16(batch_out).pixels == load_image16(path("single.png")).pixels);
      } else {
        EXPECT_TRUE(load_image(batch_out).pixels == load_image(path("single.png")).pixels);
      }
    }
    EXPECT_TRUE(load_image16(path(outdir + "/a16.png")).pixels ==
                (std::string(cmd) == "clahe" ? cpu::clahe(a, ClaheOptions{}).pixels
                                             : equalize16(a, Mode::gray, Backend::cpu).pixels));
  }
  // A batch to jpg: the 16-bit files fail alone (exit 1), the 8-bit ones are written.
  const Result r =
      run("equalize " + q("in") + " -o " + q("out-jpg") + " --backend cpu --format jpg --quiet");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("--depth 8"), std::string::npos) << r;
  EXPECT_TRUE(fs::exists(path("out-jpg/moon.jpg")));
  EXPECT_FALSE(fs::exists(path("out-jpg/a16.jpg")));
  // ... and with --depth 8 all of them.
  EXPECT_EQ(run("equalize " + q("in") + " -o " + q("out-jpg8") +
                " --backend cpu --format jpg --depth 8 --quiet")
                .status,
            0);
  EXPECT_TRUE(fs::exists(path("out-jpg8/a16.jpg")));
}

// In a batch a PGM/PPM input keeps its format, 8- or 16-bit, as one file does: g16.pgm is
// written as a 16-bit PGM and g8.pgm as an 8-bit one, byte for byte what the single-file
// command writes, without --format.
TEST_F(CliClahe16, BatchKeepsPgmPpmInputsInTheirFormat) {
  fs::create_directories(path("in"));
  save_image16(band16(60, 40, 1000, 1200, 1), path("in/g16.pgm"));
  save_image16(random16(50, 30, 3, 2), path("in/c16.ppm"));
  ASSERT_EQ(run("equalize " + quote(test::source_path("samples/coins.png")) + " -o " +
                q("in/g8.pgm") + " --backend cpu")
                .status,
            0);
  fs::copy_file(test::source_path("samples/moon.png"), path("in/moon.png"));
  const Result r = run("equalize " + q("in") + " -o " + q("out") + " --backend cpu --quiet");
  ASSERT_EQ(r.status, 0) << r;
  for (const char* f : {"g16.pgm", "c16.ppm", "g8.pgm", "moon.png"}) {
    SCOPED_TRACE(f);
    const std::string ext = fs::path(f).extension().string();
    const Result s = run("equalize " + q(std::string("in/") + f) + " -o " + q("single" + ext) +
                         " --backend cpu");
    ASSERT_EQ(s.status, 0) << s;
    EXPECT_EQ(slurp(path(std::string("out/") + f)), slurp(path("single" + ext)));
  }
  EXPECT_TRUE(is_16bit_image(path("out/g16.pgm")));
  EXPECT_FALSE(is_16bit_image(path("out/g8.pgm")));
}

// Every per-file failure of the 16-bit path names its file, once, and the other files go on
// (exit 1): a colour image under --format pgm (the message names .ppm), a 16-bit colour image
// under --mode luma (refused per file: an 8-bit colour file in the same batch takes luma).
// --format pnm writes each as PGM (gray) or PPM (colour).
TEST_F(CliClahe16, BatchErrorsOfThe16BitPathNameTheFile) {
  save_image16(band16(60, 40, 1000, 1200, 1), path("g16.pgm"));
  save_image16(random16(50, 30, 3, 2), path("c16.ppm"));
  save_image16(random16(50, 30, 3, 3), path("c16.png"));
  fs::copy_file(test::source_path("samples/chelsea.png"), path("c.png"));

  Result r = run("equalize " + q("g16.pgm") + " " + q("c16.ppm") + " -o " + q("outp") +
                 " --format pgm --backend cpu");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("error: '" + path("c16.ppm") + "'"), std::string::npos) << r;
  EXPECT_NE(r.err.find(".ppm"), std::string::npos) << r;
  EXPECT_EQ(test::lines_of(r.err).size(), 2u) << "the error once, then the summary\n" << r;
  EXPECT_TRUE(is_16bit_image(path("outp/g16.pgm")));
  EXPECT_FALSE(fs::exists(path("outp/c16.pgm")));

  r = run("equalize " + q("c16.png") + " " + q("c.png") + " -o " + q("outl") +
          " --mode luma --backend cpu --json");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("error: '" + path("c16.png") + "'"), std::string::npos) << r;
  EXPECT_NE(r.err.find("--mode rgb"), std::string::npos) << r;
  const auto first = nlohmann::json::parse(test::lines_of(r.out).at(0));
  EXPECT_FALSE(first["ok"].get<bool>());
  EXPECT_NE(first["error"].get<std::string>().find(path("c16.png")), std::string::npos) << r;
  EXPECT_TRUE(fs::exists(path("outl/c.png")));
  EXPECT_FALSE(fs::exists(path("outl/c16.png")));

  r = run("equalize " + q("g16.pgm") + " " + q("c16.ppm") + " " + q("c.png") + " -o " + q("outn") +
          " --format pnm --backend cpu --quiet");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(slurp(path("outn/g16.pnm")).substr(0, 2), "P5");
  EXPECT_EQ(slurp(path("outn/c16.pnm")).substr(0, 2), "P6");
  EXPECT_EQ(slurp(path("outn/c.pnm")).substr(0, 2), "P6");
  EXPECT_TRUE(load_image16(path("outn/c16.pnm")).pixels ==
              equalize16(load_image16(path("c16.ppm")), Mode::rgb, Backend::cpu).pixels);
}

// ---- GPU: the CLI on --backend cuda equals --backend cpu (skips without a device) ----

TEST_F(CliClahe16, CudaEqualsCpu) {
  HISTEQ_REQUIRE_GPU();
  const Image16 img = random16(333, 222, 1, 11);
  save_image16(img, path("r16.png"));
  const std::string moon = test::source_path("samples/moon.png");
  const std::string chelsea = test::source_path("samples/chelsea.png");
  struct Case {
    std::string args;
    bool sixteen;
  } cases[] = {{"clahe " + quote(moon) + " --tiles 7x5 --clip 3", false},
               {"clahe " + quote(chelsea) + " --mode rgb", false},
               {"clahe " + quote(chelsea), false},
               {"clahe " + q("r16.png") + " --tiles 16x16", true},
               {"equalize " + q("r16.png"), true},
               {"equalize " + quote(moon) + " --depth 16", true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Result g = run(c.args + " -o " + q("gpu.png") + " --backend cuda");
    ASSERT_EQ(g.status, 0) << g;
    ASSERT_EQ(run(c.args + " -o " + q("cpu.png") + " --backend cpu").status, 0);
    if (c.sixteen) {
      EXPECT_TRUE(load_image16(path("gpu.png")).pixels == load_image16(path("cpu.png")).pixels);
    } else {
      EXPECT_TRUE(load_image(path("gpu.png")).pixels == load_image(path("cpu.png")).pixels);
    }
  }
  // A batch of mixed 8/16-bit files on two device workers equals the CPU's.
  fs::create_directories(path("in"));
  fs::copy_file(path("r16.png"), path("in/r16.png"));
  fs::copy_file(moon, path("in/moon.png"));
  fs::copy_file(chelsea, path("in/chelsea.png"));
  for (const char* cmd : {"clahe", "equalize"}) {
    SCOPED_TRACE(cmd);
    const std::string c = cmd;
    const Result g =
        run(c + " " + q("in") + " -o " + q("bg-" + c) + " --backend cuda --devices 0,0");
    ASSERT_EQ(g.status, 0) << g;
    ASSERT_EQ(run(c + " " + q("in") + " -o " + q("bc-" + c) + " --backend cpu").status, 0);
    EXPECT_TRUE(load_image16(path("bg-" + c + "/r16.png")).pixels ==
                load_image16(path("bc-" + c + "/r16.png")).pixels);
    for (const char* f : {"moon.png", "chelsea.png"})
      EXPECT_TRUE(load_image(path("bg-" + c + "/" + f)).pixels ==
                  load_image(path("bc-" + c + "/" + f)).pixels)
          << f;
  }
  const Result h = run("histogram " + q("r16.png") + " --backend cuda --csv");
  ASSERT_EQ(h.status, 0) << h;
  EXPECT_EQ(h.out, run("histogram " + q("r16.png") + " --backend cpu --csv").out);
  const auto gs = goldens();
  for (const Golden& g : gs) {
    if (!g.sixteen) continue;
    SCOPED_TRACE(g.file.filename().string());
    const Result r =
        run("clahe " + quote(golden_input(g)) + " -o " + q("g.png") + " --clip " + g.clip +
            " --tiles " + std::to_string(g.tx) + "x" + std::to_string(g.ty) + " --backend cuda");
    ASSERT_EQ(r.status, 0) << r;
    EXPECT_TRUE(load_image16(path("g.png")).pixels == load_image16(g.file.string()).pixels);
  }
}

}  // namespace
