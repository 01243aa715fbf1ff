// main.cpp — the `histeq` executable: forwards argv to histeq::cli::run and is the one place
// where errors are printed (each once) and turned into exit statuses:
//   success 0 · histeq::Error (runtime failure) 1 · histeq::UsageError (bad command line) 2.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "histeq/error.hpp"
#include "histeq/image_io.hpp"
#include "histeq/pipeline.hpp"

namespace {

/// Ending a process that holds a CUDA context costs the driver's teardown, 0.17-0.23 s on the
/// H100 and H200 machines even with std::_Exit (bench/probes/nvjpeg_probe.cu, --exit), and the
/// caller waits for it although every output is written. With the driver's files open, a child
/// process takes their teardown over: it inherits the descriptors, closes every other one (the
/// caller's pipes see their end with this process), waits until this process has ended, and
/// ends itself, so that the last close (the teardown, and the release of this process's memory,
/// which the driver holds until then) is the child's, after the caller has the status. Nothing
/// happens when the driver's files are not open (no device was used), when a device is in the
/// exclusive-process compute mode (the next process could not make a context until the child
/// ends), or when fork fails. The fork copies the page tables (about 15 ms a GB in use).
void hand_off_driver_teardown() {
  std::vector<unsigned> keep;  // the driver's descriptors and the pipe's read end, ascending
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(dir);
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      const int fd = std::atoi(e->d_name);
      if (fd == own) continue;
      char target[64];
      const std::string link = std::string("/proc/self/fd/") + e->d_name;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
      if (n >= 11 && std::string(target, 11) == "/dev/nvidia") keep.push_back(unsigned(fd));
    }
    ::closedir(dir);
  }
  if (keep.empty() || histeq::cuda_exclusive_process_device()) return;
  rlimit files{};
  const unsigned last_fd =
      ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
          ? unsigned(std::min<rlim_t>(files.rlim_cur, rlim_t(1) << 20)) - 1
          : (1u << 20) - 1;
  int ended[2];
  if (::pipe2(ended, O_CLOEXEC) != 0) return;
  keep.push_back(unsigned(ended[0]));
  std::sort(keep.begin(), keep.end());
  // _Fork: no atfork handlers (the CUDA driver's would take its locks, which a thread still
  // making a handle may hold); the child makes async-signal-safe calls alone.
  const pid_t pid = ::_Fork();
  if (pid != 0) {  // this process (or no child): it ends next, and the child sees the pipe end
    ::close(ended[0]);
    return;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // no cleanup handler
  const auto close_between = [last_fd](unsigned from, unsigned to) {
    if (from > to) return;
    if (::close_range(from, to, 0) == 0) return;
    for (unsigned fd = from; fd <= std::min(to, last_fd); ++fd) ::close(int(fd));
  };
  unsigned from = 0;
  for (unsigned fd : keep) {
    if (fd > from) close_between(from, fd - 1);
    from = fd + 1;
  }
  close_between(from, ~0u);
  if (::chdir("/") != 0) {  // the working folder not held either (best effort)
  }
  char c;
  while (::read(ended[0], &c, 1) < 0 && errno == EINTR) {  // 0 (EOF): the parent has ended
  }
  ::_exit(0);
}

/// Ends the process once its output is out, without destructors or atexit handlers (see
/// cli::set_exit_without_teardown): every output file is already complete and renamed into
/// place by then. The driver's teardown, if a device was used, is a child's
/// (hand_off_driver_teardown).
[[noreturn]] void finish(int status) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  hand_off_driver_teardown();
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

int main(int argc, char** argv) { finish(run_main(argc, argv)); }
