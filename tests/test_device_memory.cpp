// Running out of device memory: a clear error that says how much was needed (the CLI adds the
// hint to the CPU backend), and a device that stays usable afterwards.
#include <gtest/gtest.h>

#include <string>

#include "histeq/error.hpp"
#include "support/device_buffer.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

TEST(DeviceMemory, ImpossibleAllocationSaysHowMuchAndNamesNoOption) {
  HISTEQ_REQUIRE_GPU();
  const std::size_t huge = std::size_t(1) << 50;  // 1 PiB: more than any GPU has
  try {
    DeviceBuffer<std::uint8_t> b(huge);
    FAIL() << "a 1 PiB device allocation succeeded";
  } catch (const DeviceOutOfMemory& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::to_string(huge)), std::string::npos) << msg;
    // The phrase the CLI's hint keys on ("; try --backend cpu": test_cli's CliHints); the
    // library itself names no command-line option.
    EXPECT_NE(msg.find(kGpuOutOfMemory), std::string::npos) << msg;
    EXPECT_EQ(msg.find("--"), std::string::npos) << msg;
  }
  // The failed allocation leaves no sticky error: the next one works.
  DeviceBuffer<std::uint8_t> small(1 << 20);
  EXPECT_NE(small.get(), nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace histeq
