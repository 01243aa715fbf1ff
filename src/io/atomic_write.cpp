// atomic_write.cpp — writing an output file so that the target is either the complete new file
// or untouched: write_file_atomic writes a temporary file in the target's folder, fsyncs it and
// renames it over the target (which may be the input file itself); an existing target that is
// not a regular file (FIFO, device) is written directly, as cp does. And the cleanup of those
// temporary files when a fatal signal ends the process (install_signal_cleanup, its handler and
// block_cleanup_signals, signals.hpp).
#include "histeq/image_io.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "histeq/error.hpp"
#include "io/image_io_internal.hpp"
#include "io/signals.hpp"

namespace histeq {
namespace fs = std::filesystem;
using detail::file_type_name;
using detail::quoted;

namespace {

/// 0666 & ~umask, the mode a plain open(O_CREAT) would give the output file.
mode_t default_file_mode() {
  static const mode_t mode = [] {
    static std::mutex m;
    std::lock_guard<std::mutex> lock(m);
    const mode_t mask = ::umask(0);
    ::umask(mask);
    return static_cast<mode_t>(0666 & ~mask);
  }();
  return mode;
}

// ---- temp files that a signal handler must remove ----
// Each save_image in flight owns one slot holding its temp file's path. The handler installed by
// install_signal_cleanup() reads only lock-free atomics and fixed char buffers and calls only
// async-signal-safe functions (unlink, poll, signal, raise). A writer claims a slot (state 1)
// with the fatal signals blocked, then checks the stop flag, creates its temp file (mkstemp),
// writes the path into the slot and publishes it (state 2); the signals stay blocked until then,
// and again around rename + release. The handler first raises the stop flag, then waits until
// no slot is being filled, then unlinks every published temp file. So a writer either saw the
// flag and creates nothing (it waits for the process to end), or its slot was claimed before
// the handler looked and the handler waits for its path: no temp file exists that the handler
// cannot see, however many threads write at once.
constexpr int kTempSlots = 256;  // saves in flight at once; a 257th waits for a free slot
constexpr std::size_t kTempPathMax = 4096;
struct TempSlot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 holds a live temp file
  char path[kTempPathMax];
};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");
TempSlot g_temp_slots[kTempSlots];
std::atomic<int> g_stopping{0};  // set by the handler: no new temp file from now on
// Every fatal signal a process can catch whose default action ends it. The asynchronous ones
// (and SIGXFSZ / SIGPIPE, raised by a write) are blocked around mkstemp and rename; the
// synchronous faults are only caught where nobody else handles them (ASan, a debugger).
constexpr int kCleanupSignals[] = {SIGINT,    SIGTERM, SIGHUP,  SIGQUIT,   SIGXFSZ,
                                   SIGXCPU,   SIGPIPE, SIGALRM, SIGUSR1,   SIGUSR2,
                                   SIGVTALRM, SIGPROF, SIGPOLL, SIGSTKFLT, SIGPWR};
constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS, SIGTRAP};
std::atomic<SaveHook> g_save_hook{nullptr};
// set_interrupt_pipe: the write end a SIGINT is handed to instead of ending the process (once).
std::atomic<int> g_interrupt_fd{-1};
static_assert(std::atomic<int>::is_always_lock_free, "the handler exchanges it");

extern "C" void histeq_cleanup_handler(int sig) {
  const int saved_errno = errno;
  if (sig == SIGINT) {  // a batch's graceful stop, once: one byte to its pipe, and on we go
    const int fd = g_interrupt_fd.exchange(-1);
    if (fd >= 0) {
      const char stop = 1;
      const ssize_t n = ::write(fd, &stop, 1);
      static_cast<void>(n);  // (a full pipe already holds a byte: the stop is asked for)
      errno = saved_errno;
      return;
    }
  }
  g_stopping.store(1);  // sequentially consistent: see claim_temp_slot
  // A thread between its claim and the slot's publication (state 1) has these signals blocked,
  // so in a process of several threads the handler may run on another one meanwhile: it waits
  // until no slot is being filled (a mkstemp; at most about 5 s, in 1 ms naps).
  for (int nap = 0; nap < 5000; ++nap) {
    bool filling = false;
    for (const TempSlot& s : g_temp_slots) filling = filling || s.state.load() == 1;
    if (!filling) break;
    ::poll(nullptr, 0, 1);
  }
  for (TempSlot& s : g_temp_slots)
    if (s.state.load() == 2) ::unlink(s.path);
  ::signal(sig, SIG_DFL);  // then die of the same signal, as if we had never caught it
  ::raise(sig);
  errno = saved_errno;
}

sigset_t cleanup_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kCleanupSignals) sigaddset(&set, sig);
  return set;
}

/// Blocks the cleanup signals in this thread for its lifetime (restores the old mask).
class BlockCleanupSignals {
 public:
  BlockCleanupSignals() {
    const sigset_t set = cleanup_signal_set();
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~BlockCleanupSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  BlockCleanupSignals(const BlockCleanupSignals&) = delete;
  BlockCleanupSignals& operator=(const BlockCleanupSignals&) = delete;

 private:
  sigset_t old_;
};

}  // namespace

void block_cleanup_signals() {
  const sigset_t set = cleanup_signal_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

namespace {

/// Claims a free slot (state 1) for a temp file about to be created; the caller has the cleanup
/// signals blocked. When every slot is busy it waits for one (the saves holding them finish
/// without waiting on anything). Returns -1 once a cleanup handler has started: the process is
/// ending, and no new temp file may be created. The claim (a sequentially consistent exchange)
/// comes before the load of the stop flag, and the handler stores the flag before it loads the
/// slots: either this thread sees the flag, or the handler sees the claim and waits for it.
int claim_temp_slot() {
  for (;;) {
    for (int i = 0; i < kTempSlots; ++i) {
      int expected = 0;
      if (!g_temp_slots[i].state.compare_exchange_strong(expected, 1)) continue;
      if (g_stopping.load() == 0) return i;
      g_temp_slots[i].state.store(0);
      return -1;
    }
    if (g_stopping.load() != 0) return -1;
    std::this_thread::yield();
  }
}

/// A writer that found the stop flag raised: a cleanup handler is removing the temp files and
/// the process ends with its signal in a moment. Creating nothing more and reporting nothing
/// (its own temp file may be gone already), it waits for that with the signals blocked here
/// (the handler's thread re-raises the signal).
[[noreturn]] void wait_for_the_end() {
  const sigset_t set = cleanup_signal_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  for (;;) ::pause();
}

}  // namespace

void install_signal_cleanup() {
  for (int sig : kCleanupSignals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    if (old.sa_handler == SIG_IGN) continue;  // e.g. nohup: keep ignoring, as the caller asked
    struct sigaction sa {};
    sa.sa_handler = histeq_cleanup_handler;
    sigemptyset(&sa.sa_mask);
    for (int other : kCleanupSignals) sigaddset(&sa.sa_mask, other);
    // (the handler returns only for a SIGINT handed to set_interrupt_pipe's pipe: the system
    // call it interrupted then goes on instead of failing with EINTR)
    sa.sa_flags = SA_RESTART;
    ::sigaction(sig, &sa, nullptr);
  }
  for (int sig : kFaultSignals) {  // only where nothing else (a sanitizer) handles them
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = histeq_cleanup_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

void set_save_hook_for_testing(SaveHook hook) { g_save_hook.store(hook); }

int set_interrupt_pipe(int fd) { return g_interrupt_fd.exchange(fd < 0 ? -1 : fd); }

namespace {

/// A symlink is followed to the file it names (the link stays a link); a dangling one names
/// the file to create.
std::string resolve_symlinks(const std::string& path_in) {
  std::error_code ec;
  fs::path p(path_in);
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    const fs::path t = fs::read_symlink(p, ec);
    if (ec) break;
    p = t.is_absolute() ? t : (p.has_parent_path() ? p.parent_path() / t : t);
  }
  return p.string();
}

/// Writes all of [data, data + size) to fd in chunks of at most 4 MiB (a pipe takes less at a
/// time: the rest is written on the next round); `tmp`, when given, is the temporary file the
/// test hook sees after each chunk. Returns 0, or the errno of the failure with `what` set.
int write_all(int fd, const std::uint8_t* data, std::size_t size, const char* tmp,
              std::string& what) {
  constexpr std::size_t kChunk = std::size_t(4) << 20;
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, std::min(kChunk, size - done));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      what =
          "write failed after " + std::to_string(done) + " of " + std::to_string(size) + " bytes";
      return err;
    }
    if (n == 0) {
      what = "short write (" + std::to_string(done) + " of " + std::to_string(size) + " bytes)";
      return ENOSPC;
    }
    done += std::size_t(n);
    if (tmp != nullptr)
      if (const SaveHook hook = g_save_hook.load()) hook(tmp, done);
  }
  return 0;
}

/// An existing target that is not a regular file (a FIFO, a character or block device) is
/// written directly, as cp does: opened for writing (a FIFO waits for its reader), no temporary
/// file, no rename, its mode and owner untouched. A socket cannot be opened: refused.
void write_in_place(const std::string& path, const std::string& path_in, mode_t type,
                    const std::uint8_t* data, std::size_t size) {
  if (S_ISSOCK(type))
    throw FileError("cannot write " + quoted(path_in) + ": " + file_type_name(type), 0, path_in);
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    throw FileError("cannot write " + quoted(path_in) + ": " + std::strerror(errno), errno,
                    path_in);
  }
  std::string what;
  const int err = write_all(fd, data, size, nullptr, what);
  const int closed = ::close(fd) == 0 ? 0 : errno;
  if (err != 0) {
    throw FileError("cannot write " + quoted(path_in) + ": " + what + ": " + std::strerror(err),
                    err, path_in);
  }
  if (closed != 0) {
    throw FileError("cannot write " + quoted(path_in) + ": close failed: " + std::strerror(closed),
                    closed, path_in);
  }
}

}  // namespace

namespace {

/// What an output path names before the write. A symlink is followed: to a regular file, the
/// rename goes over the file it names (the link stays a link); a dangling one is refused, as cp
/// refuses to write through it. An existing target that is not a regular file (a FIFO, a
/// device, /dev/stdout into a pipe) is written in place through the path as given (the kernel
/// follows /proc's fd links, which name no file to rename over). Returns false when that was
/// done; else fills *target (the file to replace or create) and *old (its stat, st_mode 0 when
/// it does not exist).
bool settle_target(const std::string& path_in, const std::uint8_t* data, std::size_t size,
                   std::string* target, struct stat* old) {
  *target = path_in;
  *old = {};
  struct stat lst {};
  if (::lstat(path_in.c_str(), &lst) != 0) return true;  // to be created (the folder is checked)
  struct stat st = lst;
  if (S_ISLNK(lst.st_mode) && ::stat(path_in.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      std::error_code ec;
      const std::string to = fs::read_symlink(path_in, ec).string();
      throw FileError("cannot write " + quoted(path_in) +
                          ": not writing through a dangling symbolic link" +
                          (ec ? std::string() : " (to " + quoted(to) + ")") +
                          ", as cp does not; remove the link or write to a file that exists",
                      ENOENT, path_in);
    }
    throw FileError("cannot write " + quoted(path_in) + ": " + std::strerror(err), err, path_in);
  }
  if (S_ISDIR(st.st_mode))
    throw FileError("cannot write " + quoted(path_in) + ": it is a directory", EISDIR, path_in);
  // An existing target: without write permission it is refused (as cp does).
  const bool no_write_bit = (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0;
  if (no_write_bit || ::access(path_in.c_str(), W_OK) != 0)
    throw FileError("cannot write " + quoted(path_in) + ": the file is read-only (" +
                        std::strerror(EACCES) + ")",
                    EACCES, path_in);
  if (!S_ISREG(st.st_mode)) {
    write_in_place(path_in, path_in, st.st_mode, data, size);
    return false;
  }
  if (S_ISLNK(lst.st_mode)) *target = resolve_symlinks(path_in);
  *old = st;
  return true;
}

/// The folder of the output, checked: it exists and is a folder. Throws Error naming the path.
fs::path output_folder(const fs::path& target) {
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string path = quoted(target.string());
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT)
      throw FileError(
          "cannot write " + path + ": folder " + quoted(dir.string()) + " does not exist", err,
          target.string());
    if (err == ENOTDIR)
      throw FileError("cannot write " + path + ": " + quoted(dir.string()) + " is not a folder",
                      err, target.string());
    throw FileError(
        "cannot write " + path + ": folder " + quoted(dir.string()) + ": " + std::strerror(err),
        err, target.string());
  }
  if (!S_ISDIR(st.st_mode))
    throw FileError("cannot write " + path + ": " + quoted(dir.string()) + " is not a folder",
                    ENOTDIR, target.string());
  return dir;
}

/// The temp file beside the target (mkstemp), published in a signal slot before the cleanup
/// signals are unblocked (see claim_temp_slot). Returns its descriptor; *tmp its path.
int create_temp(const std::string& tmpl, const std::string& path, const fs::path& dir,
                std::string* tmp, int* slot) {
  BlockCleanupSignals blocked;
  *slot = claim_temp_slot();
  if (*slot < 0) wait_for_the_end();  // a signal is ending the process: create nothing
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) {
    const int err = errno;
    g_temp_slots[*slot].state.store(0);
    *slot = -1;
    throw FileError("cannot write " + quoted(path) + ": cannot create a file in " +
                        quoted(dir.string()) + ": " + std::strerror(err),
                    err, path);
  }
  tmp->assign(name.data());
  std::memcpy(g_temp_slots[*slot].path, name.data(), name.size());
  g_temp_slots[*slot].state.store(2);
  return fd;
}

}  // namespace

void write_file_atomic(const std::string& path_in, const std::uint8_t* data, std::size_t size) {
  std::string settled;
  struct stat old {};
  if (!settle_target(path_in, data, size, &settled, &old)) return;  // written in place
  const std::string& path = settled;
  const fs::path target(path);
  const fs::path dir = output_folder(target);

  // ".NAME.histeq-XXXXXX" beside the target; when that would pass the folder's NAME_MAX (a
  // long output name), the short ".histeq-XXXXXX" so that every name the filesystem takes works.
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  const std::string leaf = target.filename().string();
  const bool fits = leaf.size() + 15 <= std::size_t(name_max > 0 ? name_max : 255);
  std::string tmpl =
      (dir / (fits ? "." + leaf + ".histeq-XXXXXX" : std::string(".histeq-XXXXXX"))).string();
  if (tmpl.size() >= kTempPathMax)
    throw FileError("cannot write " + quoted(path) + ": the path is too long (" +
                        std::to_string(tmpl.size()) + " bytes)",
                    ENAMETOOLONG, path_in);
  std::string tmp;
  int slot = -1;
  int fd = create_temp(tmpl, path, dir, &tmp, &slot);
  auto release_slot = [&] {
    if (slot >= 0) g_temp_slots[slot].state.store(0);
    slot = -1;
  };
  auto fail = [&](const std::string& what, int err) {
    if (fd >= 0) ::close(fd);
    {
      BlockCleanupSignals blocked;
      if (g_stopping.load() != 0) wait_for_the_end();  // the handler took the temp file
      ::unlink(tmp.c_str());
      release_slot();
    }
    throw FileError("cannot write " + quoted(path) + ": " + what + ": " + std::strerror(err), err,
                    path_in);
  };
  std::string what;
  if (const int err = write_all(fd, data, size, tmp.c_str(), what)) fail(what, err);
  // Overwriting: the old file's owner and group where this process may set them (root: both;
  // an owner: a group of its own), then its permission bits (after the chown, which may clear
  // set-user-ID bits). A new file: 0666 & ~umask, as open(O_CREAT) gives.
  if (old.st_mode != 0 && (old.st_uid != ::geteuid() || old.st_gid != ::getegid()))
    if (::fchown(fd, old.st_uid, old.st_gid) != 0) (void)!::fchown(fd, uid_t(-1), old.st_gid);
  const mode_t keep_mode = old.st_mode != 0 ? mode_t(old.st_mode & 07777) : default_file_mode();
  if (::fchmod(fd, keep_mode) != 0) fail("chmod failed", errno);
  if (::fsync(fd) != 0) fail("fsync failed", errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) fail("close failed", errno);
  BlockCleanupSignals blocked;  // rename and release as one step for a signal handler
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    if (g_stopping.load() != 0) wait_for_the_end();  // the handler removed the temp file
    ::unlink(tmp.c_str());
    release_slot();
    throw FileError("cannot write " + quoted(path) + ": rename failed: " + std::strerror(err), err,
                    path_in);
  }
  release_slot();
}

}  // namespace histeq
