// test_support.hpp — helpers shared by the test files.
#pragma once
#include <string>

namespace histeq::test {

/// True when a CUDA device is usable; otherwise false and `why` holds the reason.
bool gpu_available(std::string* why);

/// Absolute path of a file under the source tree (samples/, tests/data/ ...).
std::string source_path(const std::string& rel);

/// ../shared next to the checkout (natural images and goldens), or "" when absent.
std::string shared_dir();

}  // namespace histeq::test

/// In a GPU test: skip with the reason when no device is usable.
#define HISTEQ_REQUIRE_GPU()                                   \
  do {                                                         \
    std::string why_;                                          \
    if (!::histeq::test::gpu_available(&why_))                 \
      GTEST_SKIP() << "no usable CUDA device: " << why_;       \
  } while (0)
