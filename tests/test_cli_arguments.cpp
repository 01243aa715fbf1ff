// test_cli_arguments.cpp — how the command line reads its arguments, as a user coming from other
// tools writes them (spawns the built binary): file names that hold characters an option parser
// could take for separators, standard input into a folder, and the messages for a mistyped
// command. CPU backend throughout (runs in CI).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

using histeq::test::Result;
using histeq::test::sample;

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::vector<std::uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class CliArguments : public histeq::test::TempDirTest {
 protected:
  CliArguments() : TempDirTest("histeq-cli-args") {}

  /// Runs the CLI with `args` (shell-quoted where needed) in the test's folder.
  Result run(const std::string& args, const std::string& stdin_file = "") {
    const fs::path o = dir_ / "stdout.txt", e = dir_ / "stderr.txt";
    std::string cmd = "cd " + quote(dir_.string()) + " && " + quote(HISTEQ_CLI) + " " + args +
                      " >" + quote(o.string()) + " 2>" + quote(e.string());
    if (!stdin_file.empty()) cmd += " <" + quote(stdin_file);
    const int raw = std::system(cmd.c_str());
    Result r;
    r.status = (raw != -1 && WIFEXITED(raw)) ? WEXITSTATUS(raw) : -1;
    const auto ob = read_bytes(o), eb = read_bytes(e);
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
  EXPECT_EQ(read_bytes(path("plain.png")), read_bytes(path("ref.png")));

  r = run("histogram 'a,b.png' --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_EQ(histeq::test::lines_of(r.out).size(), 256u) << r;

  // A folder whose name holds a comma, into one that does too.
  fs::create_directory(path("c,d"));
  fs::copy_file(sample("moon.png"), path("c,d/moon.png"));
  r = run("equalize 'c,d' 'a,b.png' -o 'e,f' --backend cpu");
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_EQ(read_bytes(path("e,f/moon.png")), read_bytes(path("ref.png"))) << r;
  EXPECT_EQ(read_bytes(path("e,f/a,b.png")), read_bytes(path("ref.png"))) << r;
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
  const Result r = run("equalize - " + quote(sample("moon.png")) + " -o out --backend cpu");
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

}  // namespace
