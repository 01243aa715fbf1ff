// fuzz/fuzz_cli_one.hpp — the per-input function of the command-line fuzzer, shared by the
// libFuzzer harness (fuzz_cli_options.cpp) and the replay test (test_cli_fuzz_replay.cpp).
//
// bytes → argv (split at '\n' and '\0') → histeq::cli::run, in-process, output to string
// streams. Must end in a return status, a histeq::UsageError (exit 2) or a histeq::Error
// (exit 1) with a non-empty message; any other exception (a cxxopts exception or
// std::out_of_range escaping, say) or a crash is a bug.
//
// No file is written and nothing slow runs: the caller runs it in an empty folder of its own,
// inputs with a '/' in an argument or a "bench" command are skipped (bench is a benchmark run,
// fuzzed through its own parser in test_bench), so every INPUT names a file that does not
// exist, or "." / "..", and no command gets as far as writing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "histeq/error.hpp"

namespace histeq::fuzz {

/// argv words of a fuzz input: split at '\n' and '\0' (a trailing separator adds no word).
inline std::vector<std::string> split_args(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    const char ch = static_cast<char>(data[i]);
    if (ch == '\n' || ch == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(ch);
    }
  }
  if (!cur.empty()) args.push_back(cur);
  return args;
}

/// False for the inputs that are not run (see the file comment).
inline bool cli_input_admissible(const std::vector<std::string>& args) {
  if (args.size() > 64) return false;
  for (const auto& a : args)
    if (a.find('/') != std::string::npos) return false;
  if (!args.empty() && args.front() == "bench") return false;
  return true;
}

enum class CliOutcome { skipped, ok, usage_error, runtime_error };

inline CliOutcome cli_one(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> args = split_args(data, size);
  if (size > 4096 || !cli_input_admissible(args)) return CliOutcome::skipped;
  std::ostringstream out, err;
  try {
    const int status = cli::run(args, out, err);
    if (status < 0 || status > 2) {
      std::fprintf(stderr, "cli::run returned %d (valid: 0, 1, 2)\n", status);
      std::abort();
    }
    return CliOutcome::ok;
  } catch (const UsageError& e) {
    if (std::string(e.what()).empty()) {
      std::fprintf(stderr, "UsageError with an empty message\n");
      std::abort();
    }
    return CliOutcome::usage_error;
  } catch (const Error& e) {
    if (std::string(e.what()).empty()) {
      std::fprintf(stderr, "Error with an empty message\n");
      std::abort();
    }
    return CliOutcome::runtime_error;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cli::run let a non-histeq exception escape: %s\n", e.what());
    std::abort();
  }
}

}  // namespace histeq::fuzz
