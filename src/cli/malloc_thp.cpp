// cli/malloc_thp.cpp — glibc's malloc on transparent huge pages for the executable
// (cli/malloc_thp.hpp says why, and what was measured).
#include "cli/malloc_thp.hpp"

#include "histeq/nvjpeg_codec.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace histeq::cli {
namespace {

constexpr std::string_view kHugetlb = "glibc.malloc.hugetlb";
/// Set for the restarted image only: the caller's GLIBC_TUNABLES ("=" + value, or "" when it
/// was unset), put back once the restarted image has started, so that no child process sees a
/// value its user never set.
constexpr const char* kCallerTunables = "HISTEQ_CALLER_GLIBC_TUNABLES";

/// What the process runs with, for malloc_line: GLIBC_TUNABLES as glibc read it at start.
std::string g_tunables_at_start;
bool g_tunables_set_at_start = false;
bool g_restarted = false;
bool g_checked = false;  ///< restart_with_malloc_thp ran (the executable; not in-process callers)

/// GLIBC_TUNABLES set to `value`, or unset where `set` is false.
void put_tunables(bool set, const std::string& value) {
  if (set)
    ::setenv("GLIBC_TUNABLES", value.c_str(), 1);
  else
    ::unsetenv("GLIBC_TUNABLES");
}

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

/// Whether malloc is glibc's own: not an allocator put in front of it (LD_PRELOAD of jemalloc
/// or tcmalloc, a sanitizer's), for which the tunable means nothing. (valgrind redirects malloc
/// without changing what dladdr sees; own_file declines there: /proc/self/exe is valgrind's.)
bool malloc_is_glibcs() {
  Dl_info allocator{}, libc{};
  void* (*const m)(std::size_t) = &::malloc;
  const char* (*const v)() = &::gnu_get_libc_version;
  void* m_addr = nullptr;
  void* v_addr = nullptr;
  static_assert(sizeof m == sizeof m_addr && sizeof v == sizeof v_addr);
  std::memcpy(&m_addr, &m, sizeof m_addr);  // (a function's address as dladdr takes it)
  std::memcpy(&v_addr, &v, sizeof v_addr);
  return ::dladdr(m_addr, &allocator) != 0 && ::dladdr(v_addr, &libc) != 0 && allocator.dli_fname &&
         libc.dli_fname && std::strcmp(allocator.dli_fname, libc.dli_fname) == 0;
}

/// The file the caller executed (AT_EXECFN), when it is the program running: not when the
/// program was started through the dynamic loader (`ld.so PROG`: AT_EXECFN names PROG, but
/// /proc/self/exe is the loader, whose options a direct exec would drop), nor when the file was
/// replaced since. nullptr otherwise.
const char* own_file() {
  const unsigned long execfn = ::getauxval(AT_EXECFN);
  const char* path = nullptr;
  static_assert(sizeof execfn == sizeof path);
  std::memcpy(&path, &execfn, sizeof path);  // the address the kernel put in the vector
  struct stat named {
  }, running{};
  if (!path || !*path || ::stat(path, &named) != 0 || ::stat("/proc/self/exe", &running) != 0 ||
      named.st_dev != running.st_dev || named.st_ino != running.st_ino)
    return nullptr;
  return path;
}

}  // namespace

bool malloc_thp_wanted(const char* knob, bool gpu_host) {
  const std::string_view k = knob ? knob : "";
  if (k == "always") return true;
  if (k == "never") return false;
  return gpu_host;
}

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
  g_checked = true;
  const char* at_start = std::getenv("GLIBC_TUNABLES");
  g_tunables_set_at_start = at_start != nullptr;
  g_tunables_at_start = at_start ? at_start : "";
  if (const char* caller = std::getenv(kCallerTunables)) {  // the restarted image
    g_restarted = true;
    put_tunables(caller[0] == '=', caller[0] == '=' ? caller + 1 : "");
    ::unsetenv(kCallerTunables);
    return;
  }
  // (no restart in secure execution, nor where huge pages are disabled for this process: the
  // prctl's flag is kept across an exec)
  if (!argv || !argv[0] || ::getauxval(AT_SECURE) != 0 ||
      ::prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1)
    return;
  // Where a device route can start: nvJPEG in this build and the NVIDIA driver's control node.
  const bool gpu_host = gpu::nvjpeg_built() && ::access("/dev/nvidiactl", F_OK) == 0;
  if (!malloc_thp_wanted(std::getenv("HISTEQ_MALLOC_RESTART"), gpu_host)) return;
  const std::string mode = thp_enabled();
  if (mode.empty()) return;
  const std::string value = malloc_thp_tunables(at_start, mode, ::gnu_get_libc_version());
  if (value.empty() || !malloc_is_glibcs()) return;
  const char* path = own_file();
  if (!path) return;
  const std::string caller = at_start ? "=" + g_tunables_at_start : std::string();
  if (::setenv(kCallerTunables, caller.c_str(), 1) != 0) return;
  if (::setenv("GLIBC_TUNABLES", value.c_str(), 1) == 0) ::execv(path, argv);
  // The exec failed (the file gone between the check and the exec, say): the program runs as it
  // is, with the variables as they were.
  put_tunables(g_tunables_set_at_start, g_tunables_at_start);
  ::unsetenv(kCallerTunables);
}

std::string malloc_line() {
  const std::string mode = thp_enabled();
  const std::size_t open = mode.find('['), close = mode.find(']');
  const std::string selected =
      open != std::string::npos && close != std::string::npos && close > open
          ? mode.substr(open + 1, close - open - 1)
          : "unknown";
  const char* now = std::getenv("GLIBC_TUNABLES");  // (in-process callers: no restart ran)
  const bool set = g_checked ? g_tunables_set_at_start : now != nullptr;
  const std::string value = g_checked ? g_tunables_at_start : now ? now : "";
  std::string line = malloc_is_glibcs()
                         ? "memory: glibc malloc with "
                         : "memory: a malloc other than glibc's (not started again), ";
  line += set ? "GLIBC_TUNABLES=" + value : std::string("GLIBC_TUNABLES unset");
  if (g_restarted) line += " (histeq started itself again with it)";
  return line + " (transparent huge pages: " + selected + ")";
}

}  // namespace histeq::cli
