#include "test_support.hpp"

#include <filesystem>

#ifndef HISTEQ_HOST_ONLY
#include "histeq/pipeline.hpp"
#endif

namespace histeq::test {

bool gpu_available(std::string* why) {
#ifdef HISTEQ_HOST_ONLY
  if (why) *why = "host-only test binary";
  return false;
#else
  return histeq::cuda_available(why);
#endif
}

std::string source_path(const std::string& rel) {
  return std::string(HISTEQ_SOURCE_DIR) + "/" + rel;
}

std::string shared_dir() {
  namespace fs = std::filesystem;
  for (const char* cand : {"/../shared", "/shared"}) {
    fs::path p = fs::path(std::string(HISTEQ_SOURCE_DIR) + cand);
    if (fs::exists(p / "natural")) return fs::weakly_canonical(p).string();
  }
  return "";
}

}  // namespace histeq::test
