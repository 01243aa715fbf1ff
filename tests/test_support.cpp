#include "test_support.hpp"

#include <filesystem>

#include "histeq/pipeline.hpp"

namespace histeq::test {

bool gpu_available(std::string* why) { return histeq::cuda_available(why); }

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
