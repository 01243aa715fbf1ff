// test_cli_fuzz_replay.cpp — replays the command-line fuzzer's seed corpus (tests/fuzz/corpus/cli)
// and its crash regressions (tests/fuzz/crashes/cli) through the fuzzer's per-input function
// (fuzz/fuzz_cli_one.hpp) against the real library, on every CI run: each command line ends in a
// status, a UsageError or an Error with a message, never another exception or a crash. Runs in
// an empty folder of its own, so no input exists and nothing is written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_cli_one.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {
namespace fs = std::filesystem;

using test::files_in;

class CliFuzzReplay : public ::testing::Test {
 protected:
  void SetUp() override {
    old_ = fs::current_path();
    dir_ = fs::temp_directory_path() / ("histeq-cli-replay-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::current_path(dir_);
  }
  void TearDown() override {
    fs::current_path(old_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path old_, dir_;
};

TEST_F(CliFuzzReplay, SeedsAndCrashesEndInAStatusOrAHisteqError) {
  auto files = files_in("tests/fuzz/corpus/cli");
  ASSERT_GE(files.size(), 10u);
  for (const auto& p : files_in("tests/fuzz/crashes/cli")) files.push_back(p);
  int counts[4] = {0, 0, 0, 0};
  for (const auto& p : files) {
    SCOPED_TRACE(p.string());
    std::ifstream f(p, std::ios::binary);
    const std::vector<std::uint8_t> b((std::istreambuf_iterator<char>(f)), {});
    ++counts[int(fuzz::cli_one(b.data(), b.size()))];  // aborts on a bug
    EXPECT_TRUE(fs::is_empty(dir_)) << "a command line wrote into the working folder";
  }
  // The seeds exercise every outcome but "skipped": help/version/kernels (ok), bad options
  // (usage), missing inputs (runtime).
  EXPECT_GT(counts[int(fuzz::CliOutcome::ok)], 0);
  EXPECT_GT(counts[int(fuzz::CliOutcome::usage_error)], 0);
  EXPECT_GT(counts[int(fuzz::CliOutcome::runtime_error)], 0);
}

TEST_F(CliFuzzReplay, SplitAndFilterRules) {
  const char raw[] = "equalize\nin.png\0-o\nout.png\n";
  const std::string s(raw, sizeof raw - 1);
  const auto args = fuzz::split_args(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
  EXPECT_EQ(args, (std::vector<std::string>{"equalize", "in.png", "-o", "out.png"}));
  EXPECT_FALSE(fuzz::cli_input_admissible({"equalize", "/etc/passwd", "-o", "x.png"}));
  EXPECT_FALSE(fuzz::cli_input_admissible({"bench"}));
  EXPECT_TRUE(fuzz::cli_input_admissible({"kernels"}));
}

}  // namespace
}  // namespace histeq
