// main.cpp — the `histeq` executable: forwards argv to histeq::cli::run and is the one place
// where errors are printed (each once) and turned into exit statuses:
//   success 0 · histeq::Error (runtime failure) 1 · histeq::UsageError (bad command line) 2.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "cli/malloc_thp.hpp"
#include "histeq/error.hpp"
#include "histeq/image_io.hpp"
#include "histeq/pipeline.hpp"

namespace {

/// Resident memory from which ending the process hands the release of it to a child (below,
/// the release takes a few milliseconds: about 35 ms a GB on the build machine and the H100's).
constexpr std::uint64_t kHandOffResidentBytes = std::uint64_t(128) << 20;

/// This process's resident memory that is not a file's (/proc/self/statm: resident less shared,
/// the anonymous pages whose release takes the time), 0 where it cannot be read.
std::uint64_t resident_anonymous_bytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128] = {};
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  unsigned long long size = 0, resident = 0, shared = 0;
  if (std::sscanf(buf, "%llu %llu %llu", &size, &resident, &shared) != 3 || shared > resident)
    return 0;
  const long page = ::sysconf(_SC_PAGESIZE);
  return (resident - shared) * std::uint64_t(page > 0 ? page : 4096);
}

/// Whether the driver's files are mapped into this process (/proc/self/maps), open or not.
bool driver_mapped() {
  std::FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return false;
  char line[512];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) found = std::strstr(line, "/dev/nvidia");
  std::fclose(f);
  return found;
}

/// What the teardown child keeps open (the driver's descriptors and the pipe's read end,
/// ascending), written before it starts and only read by it: static, so that nothing the parent
/// frees on its way out is read.
constexpr int kMaxKept = 256;
unsigned g_kept[kMaxKept];
int g_kept_count = 0;
int g_ended_read = -1;
unsigned g_last_fd = 0;
alignas(64) char g_child_stack[64 << 10];

/// The teardown child (teardown_handoff): it shares the parent's memory and runs on the parent's
/// thread pointer, so it makes system calls alone (no allocation, no lock, no stdio; every symbol
/// was bound at start: CMakeLists.txt links histeq with -z now). It starts with every signal
/// blocked, resets their handlers (the parent's cleanup handler would unlink its files), then
/// unblocks them; it returns to glibc's clone, which ends it.
int teardown_child(void*) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const auto close_between = [](unsigned from, unsigned to) {
    if (from > to) return;
    if (::close_range(from, to, 0) == 0) return;
    for (unsigned fd = from; fd <= std::min(to, g_last_fd); ++fd) ::close(int(fd));
  };
  unsigned from = 0;
  for (int i = 0; i < g_kept_count; ++i) {
    if (g_kept[i] > from) close_between(from, g_kept[i] - 1);
    from = g_kept[i] + 1;
  }
  close_between(from, ~0u);
  if (::chdir("/") != 0) {  // the working folder not held either (best effort)
  }
  char c;
  while (::read(g_ended_read, &c, 1) < 0 && errno == EINTR) {  // 0 (EOF): the parent has ended
  }
  return 0;
}

/// Ending a process costs the release of its memory (the 1 GP folder's 16 workers leave about
/// 2.4 GB: 85-100 ms on the build machine and on the H100's) and, if it holds a CUDA context, the
/// driver's teardown (0.17-0.23 s on the H100 and H200 machines even with std::_Exit:
/// bench/probes/nvjpeg_probe.cu, --exit), and the caller waits for both although every output is
/// written. A child process that shares this process's memory (clone with CLONE_VM: nothing is
/// copied) takes them over: it inherits the descriptors, closes every other one than the
/// driver's (the caller's pipes see their end with this process), waits until this process has
/// ended, and ends itself, so that the last user of the memory and the last close of the
/// driver's files is the child, after the caller has the status (the 1 GP folder's process ended
/// 6-9 ms after its executor instead of 97-100: bench/results/build-machine/exit_memory.txt).
/// Nothing happens when neither the driver's files are open nor kHandOffResidentBytes are in
/// use, when a device is in the exclusive-process compute mode (the next process could not make
/// a context until the child ends), or when clone fails.
void teardown_handoff() {
  g_kept_count = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(dir);
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      const int fd = std::atoi(e->d_name);
      if (fd == own || g_kept_count >= kMaxKept - 1) continue;
      char target[64];
      const std::string link = std::string("/proc/self/fd/") + e->d_name;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
      if (n >= 11 && std::string(target, 11) == "/dev/nvidia")
        g_kept[g_kept_count++] = unsigned(fd);
    }
    ::closedir(dir);
  }
  // (the driver mapped with no file of it open: a CUDA start still in progress on another thread)
  const bool driver = g_kept_count > 0 || driver_mapped();
  if (driver ? histeq::cuda_exclusive_process_device()
             : resident_anonymous_bytes() < kHandOffResidentBytes)
    return;
  rlimit files{};
  g_last_fd = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
                  ? unsigned(std::min<rlim_t>(files.rlim_cur, rlim_t(1) << 20)) - 1
                  : (1u << 20) - 1;
  int ended[2];
  if (::pipe2(ended, O_CLOEXEC) != 0) return;
  g_ended_read = ended[0];
  g_kept[g_kept_count++] = unsigned(ended[0]);
  std::sort(g_kept, g_kept + g_kept_count);
  // clone, not fork: no page table is copied and no atfork handler runs (the CUDA driver's would
  // take its locks, which a thread still making a handle may hold). Every signal blocked across
  // it (posix_spawn's way): none reaches the child before it has reset the handlers; this
  // process keeps them blocked and ends next.
  sigset_t all, before;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  if (::clone(teardown_child, g_child_stack + sizeof g_child_stack, CLONE_VM | SIGCHLD, nullptr) <
      0) {
    ::close(ended[1]);
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  }
  ::close(ended[0]);  // this process ends next (the write end with it), and the child sees that
}

/// Ends the process once its output is out, without destructors or atexit handlers (see
/// cli::set_exit_without_teardown): every output file is already complete and renamed into
/// place by then. The release of a large memory and the driver's teardown, if a device was used,
/// are a child's (teardown_handoff).
[[noreturn]] void finish(int status) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  teardown_handoff();
  std::_Exit(status);
}

/// Descriptors 0, 1 and 2 open before anything else is: started with one of them closed (`>&-`,
/// `2>&-`, `<&-`), the first file the run opens would take its number, and the report or an error
/// message written "to standard output" would land inside an output image. A closed one is
/// opened on /dev/null, as daemons and coreutils' stdopen do: input reads nothing, output goes
/// nowhere, and the outputs are the bytes of a run with the stream open.
void open_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd == 1) histeq::cli::set_stdout_closed_at_start(true);  // -o - then has nowhere to go
    const int got = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (got < 0) std::_Exit(125);  // no /dev/null: nothing can be written safely
    if (got != fd) {               // an earlier number was closed too: opened there first
      ::dup2(got, fd);
      ::close(got);
    }
  }
}

int run_main(int argc, char** argv) {
  open_standard_descriptors();       // first: before any file or thread is opened
  histeq::install_signal_cleanup();  // SIGINT/SIGTERM during a save: no output, no temp file
  histeq::cli::set_exit_without_teardown(true);
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const int status = histeq::cli::run(args, std::cout, std::cerr);
    std::cout.flush();
    if (!std::cout) {
      std::cerr << "histeq: error: could not write to standard output\n";
      return 1;
    }
    return status;
  } catch (const histeq::UsageError& e) {
    std::cerr << "histeq: " << e.what() << '\n';
    return 2;
  } catch (const histeq::Error& e) {
    std::cerr << "histeq: error: " << e.what() << '\n';
    return 1;
  } catch (const std::bad_alloc&) {  // the commands name the file they were at (cli/equalize)
    std::cerr << "histeq: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "histeq: error: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // First, before any descriptor is opened (a closed standard stream stays closed across the
  // exec, and open_standard_descriptors sees it there), thread started or handler installed.
  histeq::cli::restart_with_malloc_thp(argv);
  finish(run_main(argc, argv));
}
