// test_cli_arguments.cpp — how the command line reads its arguments, as a user coming from other
// tools writes them (spawns the built binary): file names that hold characters an option parser
// could take for separators, standard input into a folder, and the messages for a mistyped
// command. CPU backend throughout (runs in CI).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/mistakes.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

using histeq::test::file_bytes;
using histeq::test::Result;
using histeq::test::sample;
using histeq::test::shell_quote;

class CliArguments : public histeq::test::TempDirTest {
 protected:
  CliArguments() : TempDirTest("histeq-cli-args") {}

  /// Runs the CLI with `args` (shell-quoted where needed) in the test's folder.
  Result run(const std::string& args, const std::string& stdin_file = "") {
    const fs::path o = dir_ / "stdout.txt", e = dir_ / "stderr.txt";
    std::string cmd = "cd " + shell_quote(dir_.string()) + " && " + shell_quote(HISTEQ_CLI) + " " +
                      args + " >" + shell_quote(o.string()) + " 2>" + shell_quote(e.string());
    if (!stdin_file.empty()) cmd += " <" + shell_quote(stdin_file);
    const int raw = std::system(cmd.c_str());
    Result r;
    r.status = (raw != -1 && WIFEXITED(raw)) ? WEXITSTATUS(raw) : -1;
    const auto ob = file_bytes(o), eb = file_bytes(e);
    r.out.assign(ob.begin(), ob.end());
    r.err.assign(eb.begin(), eb.end());
    fs::remove(o);
    fs::remove(e);
    return r;
  }
};

// A comma is an ordinary character of a file name ("IMG_1,2.png"): the input is that one file,
// not two inputs 'IMG_1' and '2.png'.
TEST_F(CliArguments, CommaInAnInputNameIsPartOfTheName) {
  fs::copy_file(sample("moon.png"), path("a,b.png"));
  Result r = run("equalize 'a,b.png' -o plain.png --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_TRUE(fs::exists(path("plain.png"))) << r;
  fs::copy_file(sample("moon.png"), path("moon-copy.png"));
  r = run("equalize moon-copy.png -o ref.png --backend cpu");
  ASSERT_EQ(r.status, 0) << r;
  EXPECT_EQ(file_bytes(path("plain.png")), file_bytes(path("ref.png")));

  r = run("histogram 'a,b.png' --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_EQ(histeq::test::lines_of(r.out).size(), 256u) << r;

  // A folder whose name holds a comma, into one that does too.
  fs::create_directory(path("c,d"));
  fs::copy_file(sample("moon.png"), path("c,d/moon.png"));
  r = run("equalize 'c,d' 'a,b.png' -o 'e,f' --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_EQ(file_bytes(path("e,f/moon.png")), file_bytes(path("ref.png"))) << r;
  EXPECT_EQ(file_bytes(path("e,f/a,b.png")), file_bytes(path("ref.png"))) << r;
}

// Standard input into an output folder: the image has no name to be written under there. The
// message says so and how to name the output, not that '-' must be the one input (it is).
TEST_F(CliArguments, StandardInputIntoAFolderSaysItHasNoName) {
  fs::create_directory(path("out"));
  for (const std::string o : {"out", "out/", "new/"}) {
    const Result r = run("equalize - -o " + o + " --format png --backend cpu", sample("moon.png"));
    EXPECT_EQ(r.status, 2) << o << "\n" << r;
    EXPECT_NE(r.err.find("no file name"), std::string::npos) << o << "\n" << r;
    EXPECT_NE(r.err.find("-o -"), std::string::npos) << o << "\n" << r;
    EXPECT_EQ(r.err.find("the one input"), std::string::npos) << o << "\n" << r;
  }
  EXPECT_TRUE(fs::is_empty(path("out")));
  EXPECT_FALSE(fs::exists(path("new")));
  // '-' among several inputs is still that.
  const Result r = run("equalize - " + shell_quote(sample("moon.png")) + " -o out --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("the one input"), std::string::npos) << r;
}

// -o - with a folder: standard output takes one image file, and the message names the folder.
TEST_F(CliArguments, StandardOutputOfAFolderNamesTheFolder) {
  fs::create_directory(path("in"));
  fs::copy_file(sample("moon.png"), path("in/moon.png"));
  const Result r = run("equalize in -o - --format png --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("'in' is a folder"), std::string::npos) << r;
  EXPECT_TRUE(r.out.empty()) << r;
}

// A long option written with one dash, as ImageMagick spells its options: cxxopts would read
// '-output' as -o with the value 'utput' (a folder of that name was made and written), and
// '-quality 90' as -q 'uality'. Each is refused, naming the option with its two dashes.
TEST_F(CliArguments, LongOptionWithOneDashIsRefusedNotMisread) {
  fs::copy_file(sample("moon.png"), path("in.png"));
  const struct {
    std::string args, option;
  } cases[] = {
      {"equalize in.png -output out.png", "--output"},
      {"equalize in.png -output=out.png", "--output"},
      {"equalize in.png -o out.jpg -quality 90", "--quality"},
      {"equalize in.png -o - -format png", "--format"},
      {"equalize in.png -o out.png -mode rgb", "--mode"},
      {"equalize in.png -o out.png -depth 16", "--depth"},
      {"clahe in.png -o out.png -clip-limit 2", "--clip-limit"},
      {"histogram in.png -csv", "--csv"},
  };
  for (const auto& c : cases) {
    const Result r = run(c.args + " --backend cpu");
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r;
    EXPECT_NE(r.err.find("two dashes: " + c.option), std::string::npos) << c.args << "\n" << r;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r;
    EXPECT_EQ(listing(), std::vector<std::string>{"in.png"}) << c.args << "\n" << r;
  }
  // Short options keep their value glued on (-ofile, -q90), and a file named like a long option
  // after "--" is a file.
  fs::copy_file(sample("moon.png"), path("-mode"));
  Result r = run("equalize -oglued.jpg -q90 --backend cpu -- -mode");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_TRUE(fs::exists(path("glued.jpg"))) << r;
}

// A short option's value written after '=' as a long option's is: getopt's rules read
// '-o=out.png' as -o '=out.png' (a file named '=out.png' was written) and '-q=90' as the quality
// '=90'. Each is refused, naming both spellings that work; '--output=out.png' still works.
TEST_F(CliArguments, ShortOptionWithEqualsIsRefusedNotMisread) {
  fs::copy_file(sample("moon.png"), path("in.png"));
  const struct {
    std::string args, fix;
  } cases[] = {
      {"equalize in.png -o=out.png", "-o out.png, or --output=out.png"},
      {"equalize in.png -o out.jpg -q=90", "-q 90, or --quality=90"},
      {"clahe in.png -o out.png -m=rgb", "-m rgb, or --mode=rgb"},
  };
  for (const auto& c : cases) {
    const Result r = run(c.args + " --backend cpu");
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r;
    EXPECT_NE(r.err.find(c.fix), std::string::npos) << c.args << "\n" << r;
    EXPECT_EQ(listing(), std::vector<std::string>{"in.png"}) << c.args << "\n" << r;
  }
  const Result r = run("equalize in.png --output=out.png --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_TRUE(fs::exists(path("out.png"))) << r;
}

// An option where a value belongs: '-o --backend cpu' took '--backend' as the output (a folder
// of that name was made) and 'cpu' as an input. The missing value is named instead; a file
// named like an option is still written as ./NAME or with --output=NAME.
TEST_F(CliArguments, OptionWhereAValueBelongsIsAMissingValue) {
  fs::copy_file(sample("moon.png"), path("in.png"));
  const struct {
    std::string args, missing, found;
  } cases[] = {
      {"equalize in.png -o --backend cpu", "-o/--output needs a value", "'--backend'"},
      {"equalize in.png -o -b cpu", "-o/--output needs a value", "'-b'"},
      {"equalize in.png -o out.png --mask --roi 0,0,4,4", "--mask needs a value", "'--roi'"},
      {"match in.png -o out.png --reference --json", "--reference needs a value", "'--json'"},
      {"histogram in.png --roi --csv", "--roi needs a value", "'--csv'"},
  };
  for (const auto& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r;
    EXPECT_NE(r.err.find(c.missing), std::string::npos) << c.args << "\n" << r;
    EXPECT_NE(r.err.find(c.found), std::string::npos) << c.args << "\n" << r;
    EXPECT_EQ(listing(), std::vector<std::string>{"in.png"}) << c.args << "\n" << r;
  }
  Result r = run("equalize in.png -o ./--b.png --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_TRUE(fs::exists(path("--b.png"))) << r;
  r = run("equalize in.png --output=--c.png --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_TRUE(fs::exists(path("--c.png"))) << r;
  // A value that only starts with a dash is a value.
  r = run("clahe in.png -o d.png --clip-limit -1 --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
}

// A mistyped command or option is answered with the name it most likely meant.
TEST_F(CliArguments, MistypedNamesGetTheirLikelyName) {
  const struct {
    std::string args, meant;
  } cases[] = {
      {"equalise x.png -o y.png", "'equalize'"},
      {"EQUALIZE x.png -o y.png", "'equalize'"},
      {"hist x.png", "'histogram'"},
      {"histgram x.png", "'histogram'"},
      {"clache x.png -o y.png", "'clahe'"},
      {"help equalise", "'equalize'"},
      {"equalize x.png -o y.png --qualty 90", "'--quality'"},
      {"equalize x.png --out y.png", "'--output'"},
      {"clahe x.png -o y.png --clip-limt 2", "'--clip-limit'"},
      {"histogram x.png --cvs", "'--csv'"},
  };
  for (const auto& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r;
    EXPECT_NE(r.err.find("did you mean " + c.meant + "?"), std::string::npos) << c.args << "\n"
                                                                              << r;
  }
  for (const std::string args : {"frobnicate", "equalize x.png -o y.png --bogus"}) {
    const Result r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r;
    EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << args << "\n" << r;
  }
}

TEST(ClosestName, OnlyAClearFavourite) {
  using histeq::cli::closest_name;
  const std::vector<std::string> names{"--tiles", "--tile-grid-size", "--timing", "--roi"};
  EXPECT_EQ(closest_name("--tile", names), "--tiles");                // one edit from one name only
  EXPECT_EQ(closest_name("--tile-grid", names), "--tile-grid-size");  // the one it begins
  EXPECT_EQ(closest_name("--ti", names), "");                         // begins three: no favourite
  EXPECT_EQ(closest_name("--rio", names), "--roi");                   // two neighbours swapped
  EXPECT_EQ(closest_name("--x", names), "");                          // too short to guess
  EXPECT_EQ(closest_name("--zzzzzz", names), "");                     // nothing near
  EXPECT_EQ(closest_name("--TIMING", names), "--timing");
}

// histogram --help said "the 256-bin histogram": a 16-bit image has 65536 bins. --json works
// for one file as for several, and standard input with it is refused, as the help now says.
TEST_F(CliArguments, HistogramHelpSaysWhatItPrints) {
  Result r = run("histogram --help");
  EXPECT_EQ(r.status, 0) << r;
  std::string help;  // the words, one space between each (the help wraps its lines)
  for (const char ch : r.out)
    if (!std::isspace(static_cast<unsigned char>(ch)))
      help += ch;
    else if (!help.empty() && help.back() != ' ')
      help += ' ';
  EXPECT_NE(help.find("65536"), std::string::npos) << r;
  EXPECT_EQ(help.find("256-bin"), std::string::npos) << r;
  EXPECT_NE(help.find("not standard input"), std::string::npos) << r;
  r = run("histogram - --json --backend cpu", sample("moon.png"));
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("standard input"), std::string::npos) << r;
  fs::copy_file(sample("moon.png"), path("in.png"));
  r = run("histogram in.png --json --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_EQ(histeq::test::lines_of(r.out).size(), 2u) << r;  // the file's object, the summary
}

// One image into a name without an extension that does not exist: an output folder to be, most
// often (mogrify -path), or a file without its extension. The message said "unknown output
// extension '(none)'"; it now says what is missing and how to name a folder.
TEST_F(CliArguments, OutputWithoutExtensionSaysHowToNameAFolder) {
  fs::copy_file(sample("moon.png"), path("in.png"));
  Result r = run("equalize in.png -o outdir --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("has no extension"), std::string::npos) << r;
  EXPECT_NE(r.err.find("--format"), std::string::npos) << r;
  EXPECT_NE(r.err.find("'outdir/'"), std::string::npos) << r;
  EXPECT_EQ(listing(), std::vector<std::string>{"in.png"}) << r;
  r = run("equalize - -o outdir --backend cpu", sample("moon.png"));  // no folder for stdin
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("has no extension"), std::string::npos) << r;
  EXPECT_EQ(r.err.find("folder"), std::string::npos) << r;
  r = run("equalize in.png -o '' --backend cpu");  // no name at all: no folder either
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("has no extension"), std::string::npos) << r;
  EXPECT_EQ(r.err.find("folder"), std::string::npos) << r;
  r = run("equalize in.png -o outdir/ --backend cpu --quiet");  // as the message says
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_TRUE(fs::exists(path("outdir/in.png"))) << r;
  r = run("equalize in.png -o bare --format png --backend cpu");  // a file without extension
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_TRUE(fs::is_regular_file(path("bare"))) << r;
}

// A file in a format histeq does not read (TIFF, WebP, HEIC, ...) said only "unknown image
// type", as a corrupt file does; the message now names the formats it reads.
TEST_F(CliArguments, UnreadableFormatNamesTheFormatsRead) {
  const std::string tiff("II*\0\x08\0\0\0\0\0\0\0", 12);  // a little-endian TIFF's header
  std::ofstream(path("photo.tif"), std::ios::binary) << tiff;
  for (const std::string cmd : {"equalize photo.tif -o out.png", "histogram photo.tif"}) {
    const Result r = run(cmd + " --backend cpu");
    EXPECT_EQ(r.status, 1) << cmd << "\n" << r;
    EXPECT_NE(r.err.find("unknown image type"), std::string::npos) << cmd << "\n" << r;
    EXPECT_NE(r.err.find("histeq reads JPEG, PNG"), std::string::npos) << cmd << "\n" << r;
  }
}

// An output folder whose name is taken by a file: the message said "File exists" (for -o
// photo.png/) or "Not a directory" (for -o notes); it now names the file in the way.
TEST_F(CliArguments, OutputFolderTakenByAFileNamesTheFile) {
  fs::create_directory(path("in"));
  fs::copy_file(sample("moon.png"), path("in/moon.png"));
  std::ofstream(path("notes")) << "text\n";
  std::ofstream(path("taken.png")) << "text\n";
  const struct {
    std::string output, file;
  } cases[] = {{"notes", "'notes'"}, {"taken.png/", "'taken.png'"}, {"notes/sub", "'notes'"}};
  for (const auto& c : cases) {
    const Result r = run("equalize in -o " + c.output + " --backend cpu");
    EXPECT_EQ(r.status, 1) << c.output << "\n" << r;
    EXPECT_NE(r.err.find(c.file + " is a file, not a folder"), std::string::npos)
        << c.output << "\n"
        << r;
  }
}

// The image asked for on a closed standard output (`-o - >&-`): main opens /dev/null there (so
// that reports go nowhere and no file takes descriptor 1), and the image went there too, with
// exit status 0. It is a runtime failure that says so; a file output is still written.
TEST_F(CliArguments, ImageToAClosedStandardOutputIsAnError) {
  fs::copy_file(sample("moon.png"), path("in.png"));
  const auto closed_stdout = [&](const std::string& args) {
    const fs::path e = dir_ / "stderr.txt";
    const std::string cmd = "cd " + shell_quote(dir_.string()) + " && " + shell_quote(HISTEQ_CLI) +
                            " " + args + " >&- 2>" + shell_quote(e.string());
    const int raw = std::system(cmd.c_str());
    Result r;
    r.status = (raw != -1 && WIFEXITED(raw)) ? WEXITSTATUS(raw) : -1;
    const auto eb = file_bytes(e);
    r.err.assign(eb.begin(), eb.end());
    fs::remove(e);
    return r;
  };
  Result r = closed_stdout("equalize in.png -o - --format png --backend cpu");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("standard output is closed"), std::string::npos) << r;
  r = closed_stdout("clahe - -o - --format png --backend cpu <in.png");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("standard output is closed"), std::string::npos) << r;
  r = closed_stdout("equalize in.png -o out.png --backend cpu");  // as documented: status 0
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_TRUE(fs::is_regular_file(path("out.png"))) << r;
}

// A pipe named as the input (/dev/stdin, a shell's <(...)) is refused, as a FIFO could block
// forever; the message now says how a pipe's image is read: standard input, '-'.
TEST_F(CliArguments, PipeAsAnInputNamesStandardInput) {
  ASSERT_EQ(::mkfifo(path("pipe.png").c_str(), 0600), 0);
  const Result r = run("equalize pipe.png -o out.png --backend cpu");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("FIFO"), std::string::npos) << r;
  EXPECT_NE(r.err.find("standard input, '-'"), std::string::npos) << r;
}

// histogram --csv --json printed JSON and dropped --csv without a word; an option that would do
// nothing is refused, as elsewhere (CliOptions.OptionsThatWouldDoNothingAreRefused).
TEST_F(CliArguments, HistogramCsvAndJsonTogetherAreRefused) {
  fs::copy_file(sample("moon.png"), path("in.png"));
  const Result r = run("histogram in.png --csv --json --backend cpu");
  EXPECT_EQ(r.status, 2) << r;
  EXPECT_NE(r.err.find("--csv and --json"), std::string::npos) << r;
  EXPECT_TRUE(r.out.empty()) << r;
}

// --devices with --backend cpu: no CUDA starts, so the list did nothing, silently; it is refused
// as the other options that would do nothing are.
TEST_F(CliArguments, DevicesWithTheCpuBackendAreRefused) {
  fs::create_directory(path("in"));
  fs::copy_file(sample("moon.png"), path("in/moon.png"));
  for (const std::string cmd : {"equalize in -o out", "clahe in -o out", "histogram in"}) {
    const Result r = run(cmd + " --devices 0 --backend cpu");
    EXPECT_EQ(r.status, 2) << cmd << "\n" << r;
    EXPECT_NE(r.err.find("--devices"), std::string::npos) << cmd << "\n" << r;
    EXPECT_NE(r.err.find("--backend cpu"), std::string::npos) << cmd << "\n" << r;
  }
  EXPECT_FALSE(fs::exists(path("out")));
}

}  // namespace
