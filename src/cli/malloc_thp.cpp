// cli/malloc_thp.cpp — glibc's malloc on transparent huge pages for the executable
// (cli/malloc_thp.hpp says why, and what was measured).
#include "cli/malloc_thp.hpp"

#include <fcntl.h>
#include <gnu/libc-version.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace histeq::cli {
namespace {

constexpr std::string_view kHugetlb = "glibc.malloc.hugetlb";

/// Whether a GLIBC_TUNABLES value (name=value pairs joined by ':') names glibc.malloc.hugetlb.
bool names_hugetlb(std::string_view tunables) {
  while (!tunables.empty()) {
    const std::size_t end = tunables.find(':');
    const std::string_view pair = tunables.substr(0, end);
    if (pair.substr(0, pair.find('=')) == kHugetlb) return true;
    if (end == std::string_view::npos) break;
    tunables.remove_prefix(end + 1);
  }
  return false;
}

/// Whether "MAJOR.MINOR[...]" is 2.35 or later.
bool glibc_has_hugetlb(std::string_view version) {
  int major = 0, minor = 0;
  std::size_t i = 0;
  for (; i < version.size() && version[i] >= '0' && version[i] <= '9'; ++i)
    major = major * 10 + (version[i] - '0');
  if (i == 0 || i >= version.size() || version[i] != '.') return false;
  const std::size_t first = ++i;
  for (; i < version.size() && version[i] >= '0' && version[i] <= '9'; ++i)
    minor = minor * 10 + (version[i] - '0');
  if (i == first) return false;
  return major > 2 || (major == 2 && minor >= 35);
}

/// The text of /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never"), "" where
/// it cannot be read. Plain system calls: this runs first in main.
std::string thp_enabled() {
  char mode[128] = {};
  const int fd = ::open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const ssize_t n = ::read(fd, mode, sizeof mode - 1);
  ::close(fd);
  return n > 0 ? std::string(mode, std::size_t(n)) : std::string();
}

}  // namespace

std::string malloc_thp_tunables(const char* tunables, std::string_view thp_enabled,
                                std::string_view glibc_version) {
  const std::string_view current = tunables ? tunables : "";
  if (names_hugetlb(current) || thp_enabled.find("[madvise]") == std::string_view::npos ||
      !glibc_has_hugetlb(glibc_version))
    return "";
  std::string value(current);
  if (!value.empty()) value += ':';
  value += kHugetlb;
  value += "=1";
  return value;
}

void restart_with_malloc_thp(char** argv) {
  // The file as the caller named it (AT_EXECFN): the same name, so the same process name for ps
  // and pkill (/proc/self/exe would make it "exe"), and the same path in the auxiliary vector.
  const unsigned long execfn = ::getauxval(AT_EXECFN);
  const char* path = nullptr;
  static_assert(sizeof execfn == sizeof path);
  std::memcpy(&path, &execfn, sizeof path);  // the address the kernel put in the vector
  if (!argv || !argv[0] || !path || !*path || ::getauxval(AT_SECURE) != 0) return;
  const std::string mode = thp_enabled();
  if (mode.empty()) return;
  const char* before = std::getenv("GLIBC_TUNABLES");
  const std::string kept = before ? before : "";
  const std::string value = malloc_thp_tunables(before, mode, ::gnu_get_libc_version());
  if (value.empty() || ::setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  ::execv(path, argv);
  // The exec failed (the file gone, a descriptor's name closed): the program runs as it is, with
  // the variable as it was.
  if (before)
    ::setenv("GLIBC_TUNABLES", kept.c_str(), 1);
  else
    ::unsetenv("GLIBC_TUNABLES");
}

std::string malloc_line() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const std::string mode = thp_enabled();
  const std::size_t open = mode.find('['), close = mode.find(']');
  const std::string selected =
      open != std::string::npos && close != std::string::npos && close > open
          ? mode.substr(open + 1, close - open - 1)
          : "unknown";
  return std::string("memory: glibc malloc with ") +
         (tunables ? "GLIBC_TUNABLES=" + std::string(tunables) : "GLIBC_TUNABLES unset") +
         " (transparent huge pages: " + selected + ")";
}

}  // namespace histeq::cli
