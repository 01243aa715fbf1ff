// fuzz_decode_equalize.cpp — libFuzzer harness: bytes → decode → CPU equalize (every mode) →
// encode to memory (fuzz_one.hpp). Built with -DHISTEQ_FUZZ=ON and clang (tests/fuzz/README.md).
#include <cstddef>
#include <cstdint>

#include "fuzz_one.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  histeq::fuzz::decode_equalize_one(data, size);
  return 0;
}
