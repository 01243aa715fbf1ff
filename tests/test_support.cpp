#include "test_support.hpp"

#include <gtest/gtest.h>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

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

FifoReader::FifoReader(const std::filesystem::path& fifo)
    : fd_(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)) {
  thread_ = std::thread([this] {
    std::uint8_t buf[1 << 16];
    for (;;) {
      const bool last = stop_.load();  // the writer was done before this read
      const ssize_t n = fd_ >= 0 ? ::read(fd_, buf, sizeof buf) : -1;
      if (n > 0) {
        data_.insert(data_.end(), buf, buf + n);
        continue;
      }
      if (last) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
}

FifoReader::~FifoReader() {
  if (thread_.joinable()) {
    stop_ = true;
    thread_.join();
  }
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::uint8_t> FifoReader::finish() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  return data_;
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

std::vector<std::filesystem::path> files_in(const std::string& rel) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  const fs::path dir = source_path(rel);
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void TempDirTest::SetUp() {
  namespace fs = std::filesystem;
  dir_ =
      fs::temp_directory_path() / (prefix_ + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir_);
  fs::create_directories(dir_);
}

void TempDirTest::TearDown() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::vector<std::string> TempDirTest::listing() const {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::vector<std::uint8_t> file_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

std::ostream& operator<<(std::ostream& os, const Result& r) {
  return os << "exit " << r.status << "\n--- stdout ---\n"
            << r.out.substr(0, 3000) << "\n--- stderr ---\n"
            << r.err;
}

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, in_field = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
      in_field = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
    } else if (c == '\n') {
      row.push_back(field);
      rows.push_back(row);
      row.clear();
      field.clear();
      in_field = false;
    } else {
      field += c;
      in_field = true;
    }
  }
  EXPECT_FALSE(quoted) << "unterminated quoted CSV field";
  if (in_field || !row.empty()) {
    row.push_back(field);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace histeq::test
