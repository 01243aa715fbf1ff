// fuzz_cli_options.cpp — libFuzzer harness: bytes → argv → histeq::cli::run (fuzz_cli_one.hpp),
// in-process, in an empty folder of its own. Linked with cli_fuzz_stubs.cpp in place of the CUDA
// library, so that it builds with clang alone (tests/fuzz/README.md).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_cli_one.hpp"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // An empty folder as the working directory: every INPUT the fuzzer names is missing there.
  char tmpl[] = "/tmp/histeq-fuzz-cli-XXXXXX";
  if (!::mkdtemp(tmpl) || ::chdir(tmpl) != 0) {
    std::perror("histeq fuzz: cannot make an empty working folder");
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  histeq::fuzz::cli_one(data, size);
  return 0;
}
