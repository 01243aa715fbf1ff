// test_cli_batch.cpp — the batch command line end to end (spawns the built binary): folders,
// recursion, several inputs, standard input/output, name collisions, a corrupt file among good
// ones, progress only on a terminal, JSON Lines, overwrite semantics, and that every batch output
// is byte for byte what the single-file command writes. CPU backend throughout (runs in CI).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "histeq/image_io.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

using histeq::test::file_bytes;
using histeq::test::lines_of;
using histeq::test::Result;
using histeq::test::sample;
using histeq::test::shell_quote;

void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

class Batch : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "histeq-batch-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "io");
    fs::create_directories(dir_ / "in" / "sub");
    // Three inputs of different kinds: gray PNG, colour PNG, JPEG; one in a subfolder.
    fs::copy_file(sample("moon.png"), dir_ / "in" / "moon.png");
    fs::copy_file(sample("chelsea.png"), dir_ / "in" / "chelsea.png");
    fs::copy_file(sample("coins.png"), dir_ / "in" / "sub" / "coins.png");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  Result run(const std::string& args, const std::string& stdin_file = "") {
    const fs::path o = dir_ / "io" / "stdout", e = dir_ / "io" / "stderr";
    std::string cmd = shell_quote(HISTEQ_CLI) + " " + args + " >" + shell_quote(o.string()) +
                      " 2>" + shell_quote(e.string());
    if (!stdin_file.empty()) cmd += " <" + shell_quote(stdin_file);
    const int raw = std::system(cmd.c_str());
    Result r;
    r.status = (raw != -1 && WIFEXITED(raw)) ? WEXITSTATUS(raw) : -1;
    const auto ob = file_bytes(o), eb = file_bytes(e);
    r.out.assign(ob.begin(), ob.end());
    r.err.assign(eb.begin(), eb.end());
    return r;
  }

  fs::path p(const std::string& rel) const { return dir_ / rel; }
  std::string q(const std::string& rel) const { return shell_quote((dir_ / rel).string()); }

  // What the single-file command writes for `input` (extra options appended).
  std::vector<std::uint8_t> single(const std::string& input, const std::string& ext,
                                   const std::string& extra = "") {
    const fs::path o = dir_ / "io" / ("single" + ext);
    const Result r = run("equalize " + shell_quote(input) + " -o " + shell_quote(o.string()) +
                         " --backend cpu " + extra);
    EXPECT_EQ(r.status, 0) << r;
    auto b = file_bytes(o);
    fs::remove(o);
    return b;
  }

  // Every file under a folder, relative, sorted; temporaries included.
  std::vector<std::string> files_under(const std::string& rel) const {
    std::vector<std::string> v;
    for (const auto& e : fs::recursive_directory_iterator(dir_ / rel))
      if (!e.is_directory()) v.push_back(e.path().lexically_relative(dir_ / rel).string());
    std::sort(v.begin(), v.end());
    return v;
  }

  fs::path dir_;
};

TEST_F(Batch, FolderToFolderMatchesTheSingleFilePathByteForByte) {
  const Result r = run("equalize " + q("in") + " -o " + q("out/new") + " --backend cpu --jobs 2");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(files_under("out/new"), (std::vector<std::string>{"chelsea.png", "moon.png"}))
      << "without -r the subfolder is not entered";
  for (const char* n : {"moon.png", "chelsea.png"})
    EXPECT_EQ(file_bytes(p("out/new") / n), single(p("in").string() + "/" + n, ".png")) << n;
  EXPECT_NE(r.err.find("2 files"), std::string::npos) << "summary line\n" << r;
  EXPECT_NE(r.err.find("0 failures"), std::string::npos) << r;
}

TEST_F(Batch, RecursiveKeepsRelativePathsAndFormatChangesTheExtension) {
  const Result r = run("equalize " + q("in") + " -r -o " + q("out") +
                       " --backend cpu --format jpg --quality 90");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(files_under("out"),
            (std::vector<std::string>{"chelsea.jpg", "moon.jpg", "sub/coins.jpg"}));
  EXPECT_EQ(file_bytes(p("out/sub/coins.jpg")),
            single(p("in/sub/coins.png").string(), ".jpg", "--quality 90"));
}

TEST_F(Batch, SeveralFileInputsGoToTheFolder) {
  const Result r = run("equalize " + q("in/moon.png") + " " + q("in/sub/coins.png") + " -o " +
                       q("several") + " --backend cpu --png-level 6");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(files_under("several"), (std::vector<std::string>{"coins.png", "moon.png"}));
  EXPECT_EQ(file_bytes(p("several/coins.png")),
            single(p("in/sub/coins.png").string(), ".png", "--png-level 6"));
}

TEST_F(Batch, PngLevelChangesTheSizeNotThePixels) {
  ASSERT_EQ(
      run("equalize " + q("in/chelsea.png") + " -o " + q("l0.png") + " --backend cpu --png-level 0")
          .status,
      0);
  ASSERT_EQ(
      run("equalize " + q("in/chelsea.png") + " -o " + q("l9.png") + " --backend cpu --png-level 9")
          .status,
      0);
  EXPECT_GT(fs::file_size(p("l0.png")), fs::file_size(p("l9.png")));
  const histeq::Image a = histeq::load_image(p("l0.png").string());
  const histeq::Image b = histeq::load_image(p("l9.png").string());
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(run("equalize " + q("in/chelsea.png") + " -o " + q("x.png") + " --png-level 10").status,
            2);
}

TEST_F(Batch, StandardInputAndOutput) {
  Result r = run("equalize - -o - --backend cpu --format png", p("in/moon.png").string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::uint8_t> got(r.out.begin(), r.out.end());
  EXPECT_EQ(got, single(p("in/moon.png").string(), ".png"));

  r = run("equalize - -o " + q("from-stdin.bmp") + " --backend cpu", p("in/moon.png").string());
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(file_bytes(p("from-stdin.bmp")), single(p("in/moon.png").string(), ".bmp"));

  // Without --format the message lists every format -o - can write, and each one it lists works.
  r = run("equalize " + q("in/moon.png") + " -o - --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("--format"), std::string::npos) << r;
  const std::string listed = r.err.substr(r.err.find("--format"));
  for (const char* fmt : {"png", "jpg", "bmp", "tga", "pgm", "ppm", "pnm"}) {
    EXPECT_NE(listed.find(std::string(" ") + fmt), std::string::npos) << fmt << "\n" << r;
    const char* input = std::string(fmt) == "ppm" ? "in/chelsea.png" : "in/moon.png";
    const Result w =
        run("equalize - -o - --backend cpu --format " + std::string(fmt), p(input).string());
    EXPECT_EQ(w.status, 0) << fmt << "\n" << w.err;
    EXPECT_FALSE(w.out.empty()) << fmt;
  }

  r = run("histogram - --backend cpu --csv", p("in/moon.png").string());
  ASSERT_EQ(r.status, 0) << r;
  const Result f = run("histogram " + q("in/moon.png") + " --backend cpu --csv");
  EXPECT_EQ(r.out, f.out);
}

TEST_F(Batch, CollisionsAreUsageErrorsBeforeAnyWork) {
  fs::create_directories(p("other"));
  fs::copy_file(sample("camera.png"), p("other/moon.png"));
  Result r = run("equalize " + q("in/moon.png") + " " + q("other/moon.png") + " -o " + q("out") +
                 " --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("moon.png"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(p("out"))) << "nothing done before the check";

  // Same stem, different formats, one --format: also a collision.
  fs::copy_file(p("in/moon.png"), p("other/coins.bmp"));
  fs::copy_file(p("in/moon.png"), p("other/coins.png"));
  r = run("equalize " + q("other/coins.bmp") + " " + q("other/coins.png") + " -o " + q("out") +
          " --backend cpu --format tga");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_FALSE(fs::exists(p("out")));
}

TEST_F(Batch, AMissingFolderIsNamedAndTheOtherInputsRun) {
  // A path that does not exist and is named as no image file is a mistyped folder (the library's
  // plan, histeq/inputs.hpp, as Python's equalize_files): it stopped the batch with "cannot write
  // 'photso' in its own format (no extension; ...)", exit 2, a cause that was not the cause.
  const std::string named = "no such folder (or file): '" + p("photso").string() + "'";
  Result r = run("equalize " + q("photso") + " " + q("in/moon.png") + " -o " + q("out") +
                 " --backend cpu");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("histeq: error: " + named), std::string::npos) << r;
  EXPECT_NE(r.err.find("2 files"), std::string::npos) << r;
  EXPECT_EQ(files_under("out"), (std::vector<std::string>{"moon.png"}));
  // Nothing else to do: the run's error, before any folder is made.
  r = run("equalize " + q("photso") + " " + q("photso2") + " -o " + q("none") + " --backend cpu");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find(named), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(p("none")));
  // The mistyped folder alone, into an -o that is no image file name: the same (it was "unknown
  // output extension '(none)' for 'none'", exit 2); into an image file name, the file's error.
  for (const char* cmd : {"equalize ", "clahe "}) {
    r = run(cmd + q("photso") + " -o " + q("none") + " --backend cpu");
    EXPECT_EQ(r.status, 1) << r;
    EXPECT_NE(r.err.find(named), std::string::npos) << r;
    EXPECT_FALSE(fs::exists(p("none")));
  }
  r = run("equalize " + q("photso") + " -o " + q("none.png") + " --backend cpu");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("cannot read"), std::string::npos) << r;
}

TEST_F(Batch, InputFormatWeCannotWriteAsksForFormat) {
  // A GIF: read, but not written by histeq (the plan looks at the name only: no work is done).
  write_bytes(p("in/still.gif"), {'G', 'I', 'F', '8', '9', 'a'});
  Result r = run("equalize " + q("in") + " -o " + q("out") + " --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("--format"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(p("out")));
  fs::remove(p("in/still.gif"));
  // A binary PGM (P5) keeps its format, as it does for one file; --format changes it.
  std::vector<std::uint8_t> pgm = {'P', '5', '\n', '4', ' ', '2', '\n', '2', '5', '5', '\n'};
  for (int i = 0; i < 8; ++i) pgm.push_back(std::uint8_t(i * 30));
  write_bytes(p("in/g.pgm"), pgm);
  r = run("equalize " + q("in") + " -o " + q("out") + " --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_EQ(file_bytes(p("out/g.pgm")), single(p("in/g.pgm").string(), ".pgm"));
  r = run("equalize " + q("in") + " -o " + q("out") + " --backend cpu --format png");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_TRUE(fs::exists(p("out/g.png")));
}

// A folder into an image file name is the usage error that several inputs into one get (exit 2,
// before any work), not "cannot read: it is a directory"; an existing folder of that name is
// still an output folder.
TEST_F(Batch, FolderInputIntoAnImageFileNameIsAUsageError) {
  for (const char* cmd : {"equalize", "clahe"}) {
    SCOPED_TRACE(cmd);
    const Result r =
        run(std::string(cmd) + " " + q("in") + " -o " + q("out.png") + " --backend cpu");
    EXPECT_EQ(r.status, 2) << r;
    EXPECT_NE(r.err.find("-o '" + p("out.png").string() + "' is an image file name"),
              std::string::npos)
        << r;
    EXPECT_NE(r.err.find("names the output folder"), std::string::npos) << r;
    EXPECT_FALSE(fs::exists(p("out.png")));
  }
  fs::create_directories(p("folder.png"));
  const Result r = run("equalize " + q("in") + " -o " + q("folder.png") + " --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_TRUE(fs::exists(p("folder.png/moon.png")));
}

// -r with the output folder inside the input folder: the walk does not enter it (compared by
// canonical path, so another spelling of it is skipped too), so a second run re-processes
// nothing of the first run's outputs. The same for clahe.
TEST_F(Batch, RecursiveWalkSkipsAnOutputFolderInsideTheInput) {
  for (const char* cmd : {"equalize", "clahe"}) {
    SCOPED_TRACE(cmd);
    const std::string outdir = std::string("out-") + cmd;
    for (int run_no = 0; run_no < 2; ++run_no) {
      const std::string o = run_no == 0 ? q("in/" + outdir) : q("in/sub/../" + outdir + "/");
      const Result r =
          run(std::string(cmd) + " " + q("in") + " -r -o " + o + " --backend cpu --json");
      ASSERT_EQ(r.status, 0) << r;
      EXPECT_EQ(lines_of(r.out).size(), 4u) << "3 files and the summary, run " << run_no << "\n"
                                            << r;
    }
    EXPECT_EQ(files_under("in/" + outdir),
              (std::vector<std::string>{"chelsea.png", "moon.png", "sub/coins.png"}));
    fs::remove_all(p("in/" + outdir));  // the next command's walk starts from the same inputs
  }
}

// The summary and --timing count in the singular for one file, one worker.
TEST_F(Batch, OneFileIsOneFileNotOneFiles) {
  fs::create_directories(p("one"));
  fs::copy_file(sample("coins.png"), p("one/coins.png"));
  const Result r =
      run("equalize " + q("one") + " -o " + q("out") + " --backend cpu --jobs 1 --timing");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_NE(r.err.find("histeq: 1 file, "), std::string::npos) << r;
  EXPECT_NE(r.err.find(", 0 failures"), std::string::npos) << r;
  EXPECT_NE(r.out.find("(over 1 file, 1 worker)"), std::string::npos) << r;
  EXPECT_EQ(r.out.find("1 threads"), std::string::npos) << r;
  EXPECT_EQ(r.err.find("1 files"), std::string::npos) << r;
}

// A clahe batch says it is CLAHE, with its clip limit and tiles, in each text line and JSON line
// (as the single-file clahe report does); an equalize batch's JSON says "equalize".
TEST_F(Batch, ClaheBatchReportNamesClaheClipAndTiles) {
  Result r = run("clahe " + q("in") + " -o " + q("out") + " --backend cpu --clip 3 --tiles 4x2");
  ASSERT_EQ(r.status, 0) << r;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u) << r;
  for (const std::string& l : lines)
    EXPECT_NE(l.find(", clahe clip 3, tiles 4x2, "), std::string::npos) << l;
  r = run("clahe " + q("in") + " -o " + q("out") + " --backend cpu --clip 3 --tiles 4x2 --json");
  ASSERT_EQ(r.status, 0) << r;
  const auto j = nlohmann::json::parse(lines_of(r.out).at(0));
  EXPECT_EQ(j.at("operation"), "clahe");
  EXPECT_EQ(j.at("clip_limit"), 3.0);
  EXPECT_EQ(j.at("tiles_x"), 4);
  EXPECT_EQ(j.at("tiles_y"), 2);
  r = run("equalize " + q("in") + " -o " + q("out-eq") + " --backend cpu --json");
  ASSERT_EQ(r.status, 0) << r;
  const auto e = nlohmann::json::parse(lines_of(r.out).at(0));
  EXPECT_EQ(e.at("operation"), "equalize");
  EXPECT_FALSE(e.contains("clip_limit"));
}

// An existing output in the output folder that is a FIFO is written into, not replaced (the
// batch writes as one file does: image_io's write_file_atomic).
TEST_F(Batch, AFifoInTheOutputFolderIsWrittenNotReplaced) {
  fs::create_directories(p("fo"));
  ASSERT_EQ(::mkfifo(p("fo/moon.png").c_str(), 0644), 0);
  histeq::test::FifoReader reader(p("fo/moon.png"));
  const Result r = run("equalize " + q("in") + " -o " + q("fo") + " --backend cpu");
  const std::vector<std::uint8_t> got = reader.finish();
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_TRUE(fs::is_fifo(p("fo/moon.png")));
  EXPECT_EQ(got, single(p("in/moon.png").string(), ".png"));
  EXPECT_EQ(file_bytes(p("fo/chelsea.png")), single(p("in/chelsea.png").string(), ".png"));
}

TEST_F(Batch, CorruptFileInTheMiddleFailsAloneAndLeavesNothing) {
  fs::create_directories(p("mix"));
  fs::copy_file(sample("moon.png"), p("mix/a.png"));
  auto b = file_bytes(sample("camera.png"));
  b.resize(b.size() / 2);  // truncated
  write_bytes(p("mix/b.png"), b);
  fs::copy_file(sample("coins.png"), p("mix/c.png"));
  const Result r = run("equalize " + q("mix") + " -o " + q("res") + " --backend cpu --jobs 2");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_EQ(files_under("res"), (std::vector<std::string>{"a.png", "c.png"}))
      << "the others written, nothing (not even a temporary) for the corrupt one";
  EXPECT_NE(r.err.find("b.png"), std::string::npos) << r;
  EXPECT_NE(r.err.find("1 failure"), std::string::npos) << r;
  EXPECT_EQ(file_bytes(p("mix/b.png")), b) << "input unchanged";
}

TEST_F(Batch, NoProgressBarWhenStderrIsNotATerminalAndQuietSilences) {
  Result r = run("equalize " + q("in") + " -r -o " + q("out") + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r;
  EXPECT_EQ(r.err.find("ETA"), std::string::npos) << r;
  EXPECT_NE(r.err.find("MP/s"), std::string::npos) << "the summary line is there\n" << r;
  r = run("equalize " + q("in") + " -r -o " + q("out") + " --backend cpu --quiet");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_TRUE(r.err.empty()) << r;
}

TEST_F(Batch, JsonLinesParseWithASummaryAndNonUtf8Names) {
  const std::string bad = std::string("bad\xff\xfe") + ".png";
  fs::copy_file(sample("page.png"), p("in") / bad);
  const Result r = run("equalize " + q("in") + " -r -o " + q("out") + " --backend cpu --json");
  ASSERT_EQ(r.status, 0) << r;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 5u) << r;  // 4 files + summary
  bool saw_bad = false;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i]);  // throws on invalid JSON / UTF-8
    EXPECT_TRUE(j.at("ok").get<bool>());
    EXPECT_GT(j.at("width").get<int>(), 0);
    EXPECT_TRUE(j.at("times_ms").contains("encode"));
    if (j.contains("input_bytes_hex")) {
      saw_bad = true;
      EXPECT_NE(j.at("input_bytes_hex").get<std::string>().find("fffe"), std::string::npos);
      EXPECT_TRUE(j.contains("output_bytes_hex"));
    }
  }
  EXPECT_TRUE(saw_bad) << "the non-UTF-8 name has its bytes in hex\n" << r;
  const nlohmann::json s = nlohmann::json::parse(lines.back());
  EXPECT_EQ(s.at("summary").at("files").get<int>(), 4);
  EXPECT_EQ(s.at("summary").at("failures").get<int>(), 0);
  EXPECT_EQ(s.at("summary").at("cancelled").get<int>(), 0);
  EXPECT_TRUE(fs::exists(p("out") / bad));
}

// A failed file's JSON line says what kind of failure it was, as the library's report does: a
// missing input and an unlistable folder are "file" with their errno, bytes that are no image
// are not.
TEST_F(Batch, FailedJsonLinesNameTheirKindOfFailure) {
  fs::create_directories(p("kinds"));
  std::ofstream(p("kinds") / "junk.png", std::ios::binary) << "not an image";
  const Result r = run("equalize " + q("kinds/junk.png") + " " + q("kinds/missing.png") + " " +
                       q("no-such-folder") + " -o " + q("out-kinds") + " --backend cpu --json");
  EXPECT_EQ(r.status, 1) << r;
  std::map<std::string, nlohmann::json> by;
  for (const std::string& line : lines_of(r.out)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("input")) by[fs::path(j.at("input").get<std::string>()).filename()] = j;
  }
  ASSERT_EQ(by.count("junk.png"), 1u) << r;
  ASSERT_EQ(by.count("missing.png"), 1u) << r;
  ASSERT_EQ(by.count("no-such-folder"), 1u) << r;
  EXPECT_EQ(by["missing.png"].at("error_kind"), "file");
  EXPECT_EQ(by["missing.png"].at("errno"), ENOENT);
  EXPECT_EQ(by["no-such-folder"].at("error_kind"), "file");
  EXPECT_EQ(by["no-such-folder"].at("errno"), ENOENT);
  EXPECT_EQ(by["junk.png"].at("error_kind"), "decode");
  EXPECT_FALSE(by["junk.png"].contains("errno"));
}

TEST_F(Batch, OutputChannelsInTheJsonAreThoseOfTheFileWritten) {
  // The executor's item report said 4 for RGBA written as JPEG and 2 for gray+alpha (JPEG drops
  // alpha); the same for the per-file operation (clahe). A gray+alpha BMP is 32-bit BGRA.
  fs::create_directories(p("alpha"));
  for (int c : {1, 2, 4}) {
    histeq::Image img;
    img.width = 20;
    img.height = 12;
    img.channels = c;
    for (std::size_t i = 0; i < img.byte_count(); ++i)
      img.pixels.push_back(std::uint8_t(i * 29 % 253));
    histeq::save_image(img, p("alpha/c" + std::to_string(c) + ".png").string());
  }
  const struct {
    const char* format;
    int c1, c2, c4;  // expected output_channels for 1, 2 and 4 input channels
  } cases[] = {{"jpg", 1, 1, 3}, {"bmp", 3, 4, 4}, {"png", 1, 2, 4}, {"tga", 1, 2, 4}};
  for (const auto& c : cases) {
    for (const char* cmd : {"equalize", "clahe"}) {
      SCOPED_TRACE(std::string(cmd) + " --format " + c.format);
      const std::string outdir = std::string("o-") + cmd + "-" + c.format;
      const Result r = run(std::string(cmd) + " " + q("alpha") + " -o " + q(outdir) +
                           " --backend cpu --json --jobs 2 --format " + c.format);
      ASSERT_EQ(r.status, 0) << r;
      const auto lines = lines_of(r.out);
      ASSERT_EQ(lines.size(), 4u) << r;
      for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
        const nlohmann::json j = nlohmann::json::parse(lines[i]);
        const int in_c = j.at("channels").get<int>();
        const int want = in_c == 1 ? c.c1 : in_c == 2 ? c.c2 : c.c4;
        EXPECT_EQ(j.at("output_channels").get<int>(), want) << lines[i];
        const std::string written = j.at("output").get<std::string>();
        EXPECT_EQ(histeq::load_image(written).channels, want) << written;
      }
    }
  }
}

TEST_F(Batch, HistogramBatchJsonSumsToPixels) {
  const Result r = run("histogram " + q("in") + " -r --backend cpu --json --mode rgb");
  ASSERT_EQ(r.status, 0) << r;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 4u) << r;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i]);
    const std::uint64_t px =
        j.at("width").get<std::uint64_t>() * j.at("height").get<std::uint64_t>();
    const auto hs = j.at("histograms").get<std::vector<std::vector<std::uint64_t>>>();
    ASSERT_EQ(hs.size(), std::size_t(j.at("channels").get<int>() >= 3 ? 3 : 1)) << lines[i];
    for (const auto& h : hs) {
      std::uint64_t s = 0;
      for (auto c : h) s += c;
      EXPECT_EQ(s, px);
    }
  }
  const Result csv = run("histogram " + q("in") + " -r --backend cpu --csv");
  ASSERT_EQ(csv.status, 0) << csv;
  EXPECT_EQ(lines_of(csv.out).size(), 3u * 257u) << "a header and 256 rows per file";
}

// The CSV's first field is the file's name: one with a comma, a quote or a line break was
// written bare, and CSV readers split it into more fields than the header names.
TEST_F(Batch, HistogramCsvQuotesFileNamesThatNeedIt) {
  fs::create_directories(p("names"));
  const std::vector<std::string> names = {"plain.png", "a,b.png", "say \"hi\".png",
                                          "two\nlines.png"};
  for (const std::string& n : names) fs::copy_file(sample("coins.png"), p("names") / n);
  const Result r = run("histogram " + q("names") + " --backend cpu --csv");
  ASSERT_EQ(r.status, 0) << r;
  const std::vector<std::vector<std::string>> rows = histeq::test::parse_csv(r.out);
  std::map<std::string, std::uint64_t> pixels;
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 3u) << "file,bin,count: " << row.front();
    if (row[0] == "file") continue;
    pixels[row[0]] += std::stoull(row[2]);
  }
  ASSERT_EQ(pixels.size(), names.size()) << r.out.substr(0, 400);
  for (const std::string& n : names) {
    EXPECT_EQ(pixels[(p("names") / n).string()], 303u * 384u) << n;
  }
}

// The text report keeps one line per file whatever its name holds: a line break, a tab or an
// escape in a name is written as \n, \t, \x1b (a name with a line break took two lines, which
// `grep`, `wc -l` and `while read` then miscounted); the error of a failed file too.
TEST_F(Batch, TextReportsKeepOneLinePerFileWhateverTheNamesHold) {
  fs::create_directories(p("odd"));
  fs::copy_file(sample("coins.png"), p("odd") / "two\nlines.png");
  fs::copy_file(sample("coins.png"), p("odd") / "tab\tand\x1b.png");
  fs::copy_file(sample("coins.png"), p("odd") / "back\\n.png");  // a backslash, then n
  write_bytes(p("odd") / "bad\nfile.png", {1, 2, 3});
  const Result r = run("equalize " + q("odd") + " -o " + q("odd-out") + " --backend cpu");
  EXPECT_EQ(r.status, 1) << r;
  const auto lines = [](const std::string& text) {
    std::vector<std::string> v;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  };
  const std::vector<std::string> out = lines(r.out);
  ASSERT_EQ(out.size(), 3u) << r;
  EXPECT_NE(r.out.find("tab\\tand\\x1b.png: "), std::string::npos) << r;
  EXPECT_NE(r.out.find("two\\nlines.png: "), std::string::npos) << r;
  EXPECT_NE(r.out.find("back\\\\n.png: "), std::string::npos) << r;  // not like two\nlines
  std::size_t errors = 0;
  for (const std::string& l : lines(r.err)) errors += l.rfind("histeq: error: ", 0) == 0;
  EXPECT_EQ(errors, 1u) << r;
  EXPECT_NE(r.err.find("bad\\nfile.png"), std::string::npos) << r;
  EXPECT_TRUE(fs::exists(p("odd-out") / "two\nlines.png"));  // the file keeps its own name
  // histogram's text report: its header line per file; its bins and --csv as they were
  const Result h = run("histogram " + q("odd") + " --backend cpu");
  EXPECT_NE(h.out.find("==> " + p("odd").string() + "/two\\nlines.png <==\n0 "), std::string::npos)
      << h;
  EXPECT_EQ(lines(h.out).size(), 3u * 257u) << h;
}

TEST_F(Batch, OverwriteKeepsPermissionsRefusesReadOnlyFollowsSymlinks) {
  const std::string in = p("in/moon.png").string();
  const auto expected = single(in, ".png");
  // Permissions kept.
  write_bytes(p("kept.png"), {1, 2, 3});
  fs::permissions(p("kept.png"), fs::perms(0640), fs::perm_options::replace);
  Result r = run("equalize " + shell_quote(in) + " -o " + q("kept.png") + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(fs::status(p("kept.png")).permissions() & fs::perms::all, fs::perms(0640));
  EXPECT_EQ(file_bytes(p("kept.png")), expected);
  // Read-only refused, untouched, no temporary left.
  fs::create_directories(p("ro"));
  write_bytes(p("ro/ro.png"), {9, 9});
  fs::permissions(p("ro/ro.png"), fs::perms(0444), fs::perm_options::replace);
  r = run("equalize " + shell_quote(in) + " -o " + q("ro/ro.png") + " --backend cpu");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("read-only"), std::string::npos) << r;
  EXPECT_EQ(file_bytes(p("ro/ro.png")), (std::vector<std::uint8_t>{9, 9}));
  EXPECT_EQ(files_under("ro"), (std::vector<std::string>{"ro.png"}));
  // Symlink: the target is written, the link stays a link.
  fs::create_directories(p("t"));
  write_bytes(p("t/target.png"), {7});
  fs::create_symlink("t/target.png", p("link.png"));
  r = run("equalize " + shell_quote(in) + " -o " + q("link.png") + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(p("link.png"))));
  EXPECT_EQ(file_bytes(p("t/target.png")), expected);
  // The same in a batch: an existing read-only output fails alone (exit 1).
  fs::create_directories(p("bo"));
  write_bytes(p("bo/moon.png"), {5});
  fs::permissions(p("bo/moon.png"), fs::perms(0444), fs::perm_options::replace);
  r = run("equalize " + q("in") + " -o " + q("bo") + " --backend cpu");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_EQ(file_bytes(p("bo/moon.png")), (std::vector<std::uint8_t>{5}));
  EXPECT_EQ(files_under("bo"), (std::vector<std::string>{"chelsea.png", "moon.png"}));
}

TEST_F(Batch, TimingPrintsSummedStagesAndWall) {
  const Result r = run("equalize " + q("in") + " -r -o " + q("out") +
                       " --backend cpu --timing --max-inflight-mb 1");
  ASSERT_EQ(r.status, 0) << r;
  for (const char* stage : {"read", "decode", "equalize", "encode", "write", "wall"})
    EXPECT_NE(r.out.find(stage), std::string::npos) << stage << "\n" << r;
}

// The workers busy at once are CPU workers holding a CPU slot: never more than --jobs, in the
// --timing line and in the JSON summary (the executor runs more threads than --jobs; a thread
// writing its file holds no slot and used to be counted).
TEST_F(Batch, BusyWorkersNeverExceedJobs) {
  for (int jobs : {1, 2}) {
    for (int run_no = 0; run_no < 4; ++run_no) {
      const std::string out = "busy" + std::to_string(jobs) + "-" + std::to_string(run_no);
      const Result t = run("equalize " + q("in") + " -r -o " + q(out + "t") +
                           " --backend cpu --timing --quiet --jobs " + std::to_string(jobs));
      ASSERT_EQ(t.status, 0) << t;
      const std::string key = "in flight: at most ";
      const std::size_t at = t.out.find(key);
      ASSERT_NE(at, std::string::npos) << t;
      const int busy = std::atoi(t.out.c_str() + at + key.size());
      EXPECT_GE(busy, 1) << t;
      EXPECT_LE(busy, jobs) << "--jobs " << jobs << "\n" << t;
      const std::string of = " of " + std::to_string(jobs) + (jobs == 1 ? " worker " : " workers ");
      EXPECT_NE(t.out.find(of, at), std::string::npos) << t;
      const Result j = run("equalize " + q("in") + " -r -o " + q(out + "j") +
                           " --backend cpu --json --quiet --jobs " + std::to_string(jobs));
      ASSERT_EQ(j.status, 0) << j;
      const auto lines = lines_of(j.out);
      ASSERT_FALSE(lines.empty()) << j;
      const auto s = nlohmann::json::parse(lines.back()).at("summary");
      EXPECT_GE(s.at("peak_busy_workers").get<int>(), 1) << j;
      EXPECT_LE(s.at("peak_busy_workers").get<int>(), jobs) << j;
      EXPECT_EQ(s.at("jobs").get<int>(), jobs) << j;
    }
  }
}

// One name per codec, the one that ran: the --json "decoder" and "encoder" of one file and of
// the same file in a batch are the same, and name the library that did the work.
TEST_F(Batch, CodecNamesAreTheSameForOneFileAndABatch) {
  fs::create_directories(p("codecs"));
  const std::string moon = p("in/moon.png").string();
  ASSERT_EQ(run("equalize " + shell_quote(moon) + " -o " + q("codecs/pgm8.pgm") + " --backend cpu")
                .status,
            0);
  ASSERT_EQ(run("equalize " + shell_quote(moon) + " -o " + q("codecs/bmp8.bmp") + " --backend cpu")
                .status,
            0);
  ASSERT_EQ(run("equalize " + shell_quote(moon) + " -o " + q("codecs/jpg8.jpg") + " --backend cpu")
                .status,
            0);
  ASSERT_EQ(run("equalize " + shell_quote(moon) + " -o " + q("codecs/png16.png") +
                " --backend cpu --depth 16")
                .status,
            0);
  fs::copy_file(moon, p("codecs/png8.png"));
  const std::map<std::string, std::string> decoder = {{"png8.png", "libdeflate-png"},
                                                      {"pgm8.pgm", "histeq-pnm"},
                                                      {"bmp8.bmp", "stb_image"},
                                                      {"jpg8.jpg", "libjpeg-turbo"},
                                                      {"png16.png", "libspng"}};
  struct Out {
    std::string format, extra, encoder, encoder16;
  };
  const Out outs[] = {{"png", "", "isa-l-png", "libspng"},
                      {"png", "--png-level 6", "libdeflate-png", "libspng"},
                      {"pnm", "", "histeq-pnm", "histeq-pnm"},
                      {"bmp", "", "stb_image_write", ""},
                      {"jpg", "", "libjpeg-turbo", ""}};
  int k = 0;
  for (const Out& o : outs) {
    std::map<std::string, nlohmann::json> batch;  // file name -> its batch JSON line
    const std::string dir = "codec-out" + std::to_string(k++);
    const Result b = run("equalize " + q("codecs") + " -o " + q(dir) + " --format " + o.format +
                         " " + o.extra + " --backend cpu --json --quiet");
    for (const std::string& line : lines_of(b.out)) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("input")) batch[fs::path(j.at("input").get<std::string>()).filename()] = j;
    }
    for (const auto& [name, dec] : decoder) {
      const bool is16 = name == "png16.png";
      const std::string want_enc = is16 ? o.encoder16 : o.encoder;
      ASSERT_TRUE(batch.count(name)) << name << "\n" << b;
      const auto& bj = batch.at(name);
      if (want_enc.empty()) {  // a 16-bit image into an 8-bit-only format fails, alone
        EXPECT_FALSE(bj.at("ok").get<bool>()) << bj;
        continue;
      }
      ASSERT_TRUE(bj.at("ok").get<bool>()) << bj;
      EXPECT_EQ(bj.at("decoder"), dec) << name << " " << o.format << " " << o.extra;
      EXPECT_EQ(bj.at("encoder"), want_enc) << name << " " << o.format << " " << o.extra;
      const Result s =
          run("equalize " + q("codecs/" + name) + " -o " + q(dir + "-single." + o.format) + " " +
              o.extra + " --backend cpu --json");
      ASSERT_EQ(s.status, 0) << s;
      const auto sj = nlohmann::json::parse(s.out);
      EXPECT_EQ(sj.at("decoder"), dec) << name << " one file, " << o.format << " " << o.extra;
      EXPECT_EQ(sj.at("encoder"), want_enc) << name << " one file, " << o.format << " " << o.extra;
    }
  }
}

TEST_F(Batch, BatchOptionsAreValidated) {
  EXPECT_EQ(run("equalize " + q("in") + " -o " + q("o") + " --format webp").status, 2);
  EXPECT_EQ(run("equalize " + q("in") + " -o " + q("o") + " --devices x").status, 2);
  EXPECT_EQ(run("equalize " + q("in") + " -o " + q("o") + " --max-inflight-mb 0").status, 2);
  EXPECT_EQ(run("equalize " + q("in") + " -o " + q("o") + " --jobs -1").status, 2);
  EXPECT_EQ(run("equalize " + q("io") + " -o " + q("o")).status, 2) << "a folder without images";
  EXPECT_FALSE(fs::exists(p("o")));
}

TEST_F(Batch, GpuBatchOnTwoWorkersOfOneDeviceMatchesTheCpu) {
  HISTEQ_REQUIRE_GPU();
  const Result r = run("equalize " + q("in") + " -r -o " + q("gpu") +
                       " --backend cuda --devices 0,0 --jobs 4 --max-inflight-mb 1 --json");
  ASSERT_EQ(r.status, 0) << r;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 4u) << r;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i)
    EXPECT_EQ(nlohmann::json::parse(lines[i]).at("backend").get<std::string>(), "cuda") << lines[i];
  for (const char* n : {"moon.png", "chelsea.png", "sub/coins.png"})
    EXPECT_EQ(file_bytes(p("gpu") / n), single(p("in").string() + "/" + n, ".png")) << n;
  // a device that does not exist: one usage error before any file, whatever the backend
  for (const char* backend : {"cuda", "auto"}) {
    const Result bad = run("equalize " + q("in") + " -r -o " + q("gpu2") + " --backend " + backend +
                           " --devices 0,999");
    EXPECT_EQ(bad.status, 2) << bad;
    EXPECT_NE(bad.err.find("no CUDA device 999: "), std::string::npos) << bad;
    EXPECT_NE(bad.err.find("(--devices names ordinals from 0)"), std::string::npos) << bad;
    EXPECT_EQ(bad.err.find("moon.png"), std::string::npos) << bad;  // no file's error
    EXPECT_FALSE(fs::exists(p("gpu2") / "moon.png")) << bad;
  }
}

// The note "no usable CUDA device (...); ran on the CPU" is for runs that wanted the GPU (CLAHE
// and 16-bit files take it when usable, JPEG batches large enough for the device route): a
// batch of 8-bit PNGs never does, and asking for it would start CUDA after the work.
TEST_F(Batch, OnlyARunThatWantedTheGpuSaysItRanOnTheCpu) {
  std::string why;
  if (histeq::test::gpu_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  const Result eq = run("equalize " + q("in") + " -r -o " + q("auto-eq"));
  ASSERT_EQ(eq.status, 0) << eq;
  EXPECT_EQ(eq.err.find("no usable CUDA device"), std::string::npos) << eq;
  const Result cl = run("clahe " + q("in") + " -r -o " + q("auto-clahe"));
  ASSERT_EQ(cl.status, 0) << cl;
  EXPECT_NE(cl.err.find("no usable CUDA device"), std::string::npos) << cl;
}

TEST_F(Batch, CudaBackendWithoutADeviceIsOneError) {
  std::string why;
  if (histeq::test::gpu_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  const Result r = run("equalize " + q("in") + " -o " + q("nogpu/a/b") + " --backend cuda");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("no usable CUDA device"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(p("nogpu"))) << "a run that cannot start makes no output folder";
}

}  // namespace
