// test_cli_reliability.cpp — nothing written where it does not belong, against the built `histeq`
// binary (HISTEQ_CLI), CPU backend: closed standard streams, signals in the middle of a batch,
// worker threads that cannot start, unreadable folders, paths over PATH_MAX, standard input
// without end, outputs that are not regular files (/dev/stdout into a pipe, a dangling symlink),
// the owner and mode of an overwritten output, out of memory, a --format that contradicts the
// output's name, numeric options that overflow, and a CLAHE clip at or above the tile's pixel
// count. docs/reliability.md §3c lists these classes with this file's test names.
//
// The races (closed streams, signals) are run 10 times each: a race that fails one run in three
// passes ten runs with probability (2/3)^10 < 2 %.
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/malloc_thp.hpp"
#include "histeq/image16.hpp"
#include "histeq/image_io.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "hostile_files.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {
namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

Bytes read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), {});
}
void write_bytes(const fs::path& p, const Bytes& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

/// A small gray PNG whose pixels depend on `seed` (so that every output differs).
Bytes small_png(int seed, int w = 16, int h = 16) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = 1;
  img.pixels.resize(img.byte_count());
  for (std::size_t i = 0; i < img.pixels.size(); ++i)
    img.pixels[i] = std::uint8_t((i * 37 + std::size_t(seed) * 101 + i / 5) & 0xFF);
  return encode_image(img, ".png");
}

/// Every regular file under `dir`, by path relative to it, with its bytes.
std::map<std::string, Bytes> tree(const fs::path& dir) {
  std::map<std::string, Bytes> m;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file()) m[fs::relative(it->path(), dir).string()] = read_bytes(it->path());
  return m;
}

/// The names whose bytes differ between two trees, or that only one holds (for messages).
std::string tree_difference(const std::map<std::string, Bytes>& got,
                            const std::map<std::string, Bytes>& want) {
  std::string d;
  for (const auto& [name, bytes] : got) {
    const auto it = want.find(name);
    if (it == want.end())
      d += " extra " + name;
    else if (it->second != bytes)
      d += " differs " + name + " (" + std::to_string(bytes.size()) + " bytes, want " +
           std::to_string(it->second.size()) + ")";
  }
  for (const auto& [name, bytes] : want)
    if (!got.count(name)) d += " missing " + name;
  return d;
}

/// Names under `dir` (recursively) that are histeq's temporary files.
std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> v;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().find(".histeq-") != std::string::npos)
      v.push_back(it->path().string());
  return v;
}

/// How to start the tool.
struct Spawn {
  std::vector<int> close_fds;      ///< closed in the child before exec
  std::string stdin_path;          ///< "" : /dev/null
  std::string stdout_path;         ///< "" : captured (Outcome::out)
  int stdout_fd = -1;              ///< >= 0: this descriptor as stdout (a pipe's end)
  std::function<void()> in_child;  ///< limits, credentials: runs before exec
};

/// What a run gave.
struct Outcome {
  int status = -1;  ///< exit status, or 128 + the signal
  int signal = 0;   ///< the signal that ended it, 0 when it exited
  std::string out, err;
  long max_rss_kib = 0;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << "status " << o.status << "\n--- stderr ---\n"
            << o.err << "--- stdout ---\n"
            << o.out.substr(0, 2000);
}

class Reliability : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("histeq-rel-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    fs::permissions(root_, fs::perms::all);  // the unprivileged runs below write here too
  }
  void TearDown() override {
    std::error_code ec;
    // Folders made unreadable by a test: readable again, so that they can be removed.
    for (fs::recursive_directory_iterator
             it(root_, fs::directory_options::skip_permission_denied, ec),
         end;
         !ec && it != end; it.increment(ec))
      if (it->is_directory(ec)) ::chmod(it->path().c_str(), 0777);
    ::chmod(root_.c_str(), 0777);
    fs::remove_all(root_, ec);
  }
  fs::path p(const std::string& rel) const { return root_ / rel; }

  /// Starts histeq; returns the child's pid (stdout/stderr go to files under root_).
  pid_t start(const std::vector<std::string>& args, const Spawn& how = {}) {
    const int k = calls_++;
    out_path_ =
        how.stdout_path.empty() ? p("stdout-" + std::to_string(k)).string() : how.stdout_path;
    err_path_ = p("stderr-" + std::to_string(k)).string();
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int i = ::open(how.stdin_path.empty() ? "/dev/null" : how.stdin_path.c_str(), O_RDONLY);
      const int o = how.stdout_fd >= 0
                        ? how.stdout_fd
                        : ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
      const int e = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
      ::dup2(i, 0);
      ::dup2(o, 1);
      ::dup2(e, 2);
      for (int fd = 3; fd < 64; ++fd) ::close(fd);
      for (int fd : how.close_fds) ::close(fd);
      // Signals as a shell starts a program: default actions, none blocked.
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) ::signal(sig, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      if (how.in_child) how.in_child();
      ::alarm(120);  // a hang fails the test instead of blocking it
      std::vector<std::string> copy = args;
      std::string prog = HISTEQ_CLI;
      std::vector<char*> argv{prog.data()};
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(prog.c_str(), argv.data());
      ::_exit(127);
    }
    return pid;
  }
  Outcome finish(pid_t pid, bool read_stdout = true) {
    int st = 0;
    struct rusage ru {};
    ::wait4(pid, &st, 0, &ru);
    Outcome r;
    r.max_rss_kib = ru.ru_maxrss;
    r.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    const Bytes e = read_bytes(err_path_);
    r.err.assign(e.begin(), e.end());
    if (read_stdout) {
      const Bytes o = read_bytes(out_path_);
      r.out.assign(o.begin(), o.end());
    }
    return r;
  }
  Outcome run(const std::vector<std::string>& args, const Spawn& how = {}) {
    const bool own_stdout = how.stdout_fd < 0;
    return finish(start(args, how), own_stdout && how.stdout_path.empty());
  }

  /// Until a batch writing into `dir` has put something there (its first output or temp file;
  /// at most 20 s).
  static void wait_until_written(const fs::path& dir) {
    for (int wait = 0; wait < 20000; ++wait) {
      std::error_code ec;
      if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  /// `n` small PNGs (`side` pixels square) in folder `rel` (f000.png ...).
  void make_folder(const std::string& rel, int n, int side = 16) {
    fs::create_directories(p(rel));
    for (int i = 0; i < n; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "f%03d.png", i);
      write_bytes(p(rel) / name, small_png(i, side, side));
    }
  }

  fs::path root_;
  int calls_ = 0;
  std::string out_path_, err_path_;
};

/// In the child: run as the unprivileged user `nobody` when the tests run as root (root reads
/// any folder); as the user itself otherwise. Exits 126 when the credentials cannot be dropped.
void drop_root() {
  if (::geteuid() != 0) return;
  if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(126);
}

void set_limit(int resource, rlim_t bytes) {
  const struct rlimit rl { bytes, bytes };
  if (::setrlimit(resource, &rl) != 0) ::_exit(125);
}

// ---- 1. closed standard streams -----------------------------------------------------------

TEST_F(Reliability, ClosedStandardStreamsNeverReachAnOutput) {
  // A batch whose report goes to stdout (--json) and whose errors go to stderr (a cut file):
  // with descriptor 0, 1 or 2 closed, the first output file the batch opened took that number
  // and the JSON lines or the error ended up after an image's IEND (6 runs of 8). Every output
  // must be the bytes of a run with all three open, with the same exit status.
  make_folder("in", 60);
  Bytes cut = small_png(999);
  cut.resize(cut.size() / 2);
  write_bytes(p("in/zz-cut.png"), cut);
  // --png-level 2 (libdeflate) everywhere here: the default level's ISA-L stream is not
  // reproducible byte for byte from run to run (docs/reliability.md §6), and this compares bytes.
  const auto args = [&](const std::string& out) {
    return std::vector<std::string>{
        "equalize", p("in").string(), "-o",  out,           "--json", "--timing", "--jobs",
        "4",        "--backend",      "cpu", "--png-level", "2"};
  };
  const Outcome ref = run(args(p("ref").string()));
  ASSERT_EQ(ref.status, 1) << ref;  // the cut file
  const std::map<std::string, Bytes> want = tree(p("ref"));
  ASSERT_EQ(want.size(), 60u);
  for (int fd : {0, 1, 2}) {
    for (int k = 0; k < 10; ++k) {
      SCOPED_TRACE("descriptor " + std::to_string(fd) + " closed, run " + std::to_string(k));
      const fs::path out = p("out-" + std::to_string(fd) + "-" + std::to_string(k));
      Spawn how;
      how.close_fds = {fd};
      // Every other run starts itself again where it can (docs/cli.md, Memory): the closed
      // descriptor stays closed across the exec.
      how.in_child = [k] {
        if (k % 2) ::setenv("HISTEQ_MALLOC_RESTART", "always", 1);
      };
      const Outcome r = run(args(out.string()), how);
      EXPECT_EQ(r.status, ref.status) << r;
      const std::map<std::string, Bytes> got = tree(out);
      EXPECT_TRUE(got == want) << "outputs differ from the run with every stream open:"
                               << tree_difference(got, want) << "\n"
                               << r;
      EXPECT_EQ(temp_files(out), std::vector<std::string>{});
    }
  }
  // One file, its report on stdout (--json) and its timing on stderr.
  write_bytes(p("one.png"), small_png(5, 64, 48));
  const Outcome one = run({"equalize", p("one.png").string(), "-o", p("one-ref.png").string(),
                           "--json", "--timing", "--backend", "cpu", "--png-level", "2"});
  ASSERT_EQ(one.status, 0) << one;
  const Bytes one_want = read_bytes(p("one-ref.png"));
  for (int fd : {0, 1, 2}) {
    for (int k = 0; k < 10; ++k) {
      const fs::path o = p("one-" + std::to_string(fd) + "-" + std::to_string(k) + ".png");
      Spawn how;
      how.close_fds = {fd};
      const Outcome r = run({"equalize", p("one.png").string(), "-o", o.string(), "--json",
                             "--timing", "--backend", "cpu", "--png-level", "2"},
                            how);
      EXPECT_EQ(r.status, 0) << r;
      EXPECT_EQ(read_bytes(o), one_want) << "descriptor " << fd << " closed";
    }
  }
  // Standard input closed: '-' reads nothing (it is /dev/null), and says so.
  Spawn no_stdin;
  no_stdin.close_fds = {0};
  const Outcome r =
      run({"equalize", "-", "-o", p("stdin.png").string(), "--backend", "cpu"}, no_stdin);
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("standard input"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(p("stdin.png")));
}

// ---- 2. signals in the middle of a batch --------------------------------------------------

TEST_F(Reliability, SignalsInTheMiddleOfABatchLeaveNoTemporaryFile) {
  // 400 small files, 8 workers: SIGINT, SIGTERM or SIGHUP once the first output (or temp file)
  // appears. The handler removes every temp file and stops the workers from creating new ones;
  // before, 7-29 complete `.NAME.histeq-XXXXXX` files were left in 10 runs of 15. What is left
  // is complete outputs only, each the bytes of an uninterrupted run.
  make_folder("in", 400);
  const std::vector<std::string> base{"equalize", p("in").string(), "-o"};
  const auto args = [&](const fs::path& out) {
    std::vector<std::string> a = base;
    a.insert(a.end(), {out.string(), "--jobs", "8", "--backend", "cpu", "--quiet", "--png-level",
                       "2"});  // byte-reproducible: see ClosedStandardStreamsNeverReachAnOutput
    return a;
  };
  const Outcome ref = run(args(p("ref")));
  ASSERT_EQ(ref.status, 0) << ref;
  const std::map<std::string, Bytes> want = tree(p("ref"));
  ASSERT_EQ(want.size(), 400u);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    int interrupted = 0;
    for (int k = 0; k < 10; ++k) {
      SCOPED_TRACE(std::string(strsignal(sig)) + ", run " + std::to_string(k));
      const fs::path out = p("out-" + std::to_string(sig) + "-" + std::to_string(k));
      const pid_t pid = start(args(out));
      wait_until_written(out);
      ::kill(pid, sig);
      const Outcome r = finish(pid);
      EXPECT_TRUE(r.signal == sig || r.status == 0) << r;  // 0: it finished first
      interrupted += r.signal == sig;
      EXPECT_EQ(temp_files(out), std::vector<std::string>{});
      for (const auto& [name, bytes] : tree(out)) {
        const auto it = want.find(name);
        ASSERT_NE(it, want.end()) << name;
        EXPECT_TRUE(bytes == it->second) << name << " is not complete";
      }
    }
    EXPECT_GT(interrupted, 0) << "no run was interrupted: the test tested nothing";
  }
}

TEST_F(Reliability, CtrlCFinishesTheFilesInProgressReportsThemAndEndsBySigint) {
  // The first SIGINT of a batch stops it gracefully: the files in progress are finished, every
  // input gets its JSON record (written, or cancelled), the summary follows, and the command
  // ends by SIGINT (a shell's loop stops). Before, it died at once: no report of the finished
  // files waiting behind a slower one, no summary.
  make_folder("in", 300, 256);
  const auto args = [&](const fs::path& out) {
    return std::vector<std::string>{
        "equalize", p("in").string(), "-o",        out.string(), "--jobs",      "1",
        "--json",   "--timing",       "--backend", "cpu",        "--png-level", "2"};
  };
  const Outcome ref = run(args(p("ref")));
  ASSERT_EQ(ref.status, 0) << ref;
  const std::map<std::string, Bytes> want = tree(p("ref"));
  ASSERT_EQ(want.size(), 300u);
  int stopped = 0;  // runs the signal stopped with files both written and not started
  for (int k = 0; k < 8 && stopped < 2; ++k) {
    SCOPED_TRACE("run " + std::to_string(k));
    const fs::path out = p("out-" + std::to_string(k));
    const pid_t pid = start(args(out));
    wait_until_written(out);
    ::kill(pid, SIGINT);
    const Outcome r = finish(pid);
    if (r.status == 0) continue;  // it finished first
    EXPECT_EQ(r.signal, SIGINT) << r;
    EXPECT_EQ(temp_files(out), std::vector<std::string>{});
    if (r.err.find("histeq: interrupted\n") == std::string::npos) {
      // The signal came once the run was over (its stop no longer armed): every file written.
      EXPECT_EQ(tree(out), want) << r;
      continue;
    }
    // One record per input, in input order, then the summary.
    std::istringstream lines(r.out);
    std::string line;
    std::vector<std::string> records;
    while (std::getline(lines, line)) records.push_back(line);
    ASSERT_EQ(records.size(), 301u) << r;
    EXPECT_EQ(records.back().rfind("{\"summary\":", 0), 0u) << records.back();
    const std::map<std::string, Bytes> got = tree(out);
    std::size_t written = 0, cancelled = 0;
    for (int i = 0; i < 300; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "f%03d.png", i);
      const std::string& rec = records[std::size_t(i)];
      EXPECT_NE(rec.find(name), std::string::npos) << rec;
      if (rec.find("\"ok\":true") != std::string::npos) {
        ++written;
        const auto it = got.find(name);
        ASSERT_NE(it, got.end()) << name << " reported written";
        EXPECT_TRUE(it->second == want.at(name)) << name << " is not complete";
      } else {
        EXPECT_NE(rec.find("\"error_kind\":\"cancelled\""), std::string::npos) << rec;
        EXPECT_EQ(got.count(name), 0u) << name << " reported cancelled";
        ++cancelled;
      }
    }
    EXPECT_EQ(got.size(), written);
    EXPECT_EQ(r.err.find("cancelled"), std::string::npos) << "no line per cancelled file: " << r;
    // The summary counts them apart; --timing's stages are over the files that ran.
    const nlohmann::json sum = nlohmann::json::parse(records.back())["summary"];
    EXPECT_EQ(sum["files"], 300);
    EXPECT_EQ(sum["cancelled"], cancelled);
    EXPECT_EQ(sum["failures"], cancelled);
    const std::string over =
        "(over " + std::to_string(written) + (written == 1 ? " file" : " files") + ", 1 worker" +
        (cancelled > 0 ? "; " + std::to_string(cancelled) + " not started" : "") + ")\n";
    EXPECT_NE(r.err.find(over), std::string::npos) << over << r;
    if (cancelled > 0)
      EXPECT_NE(
          r.err.find(", " + std::to_string(cancelled) + " not started\nhisteq: interrupted\n"),
          std::string::npos)
          << r;
    stopped += written > 0 && cancelled > 0;
  }
  EXPECT_GT(stopped, 0) << "no run was stopped with files left: the test tested nothing";
  // A second SIGINT while the files in progress are finished ends the command at once: no temp
  // file, and what was written is complete.
  for (int k = 0; k < 5; ++k) {
    SCOPED_TRACE("twice, run " + std::to_string(k));
    const fs::path out = p("twice-" + std::to_string(k));
    const pid_t pid = start(args(out));
    wait_until_written(out);
    ::kill(pid, SIGINT);
    std::this_thread::sleep_for(std::chrono::microseconds(200 * k));
    ::kill(pid, SIGINT);
    const Outcome r = finish(pid);
    EXPECT_TRUE(r.signal == SIGINT || r.status == 0) << r;
    EXPECT_EQ(temp_files(out), std::vector<std::string>{});
    for (const auto& [name, bytes] : tree(out)) {
      const auto it = want.find(name);
      ASSERT_NE(it, want.end()) << name;
      EXPECT_TRUE(bytes == it->second) << name << " is not complete";
    }
  }
}

// ---- 3. worker threads that cannot start --------------------------------------------------

TEST_F(Reliability, WorkerThreadsThatCannotStartDoNotAbortTheBatch) {
  // Stacks of 256 MiB (RLIMIT_STACK, the default size of a new thread's stack) in an address
  // space of 1 GiB: only a few of the 72 threads of --jobs 64 can start. The batch used to die
  // of SIGABRT ("terminate called without an active exception"); it runs with the workers that
  // started (or, with none, fails naming the cause), and leaves no temp file.
  make_folder("in", 40);
  const Outcome ref = run({"equalize", p("in").string(), "-o", p("ref").string(), "--backend",
                           "cpu", "--quiet", "--png-level", "2"});
  ASSERT_EQ(ref.status, 0) << ref;
  Spawn how;
  how.in_child = [] {
    set_limit(RLIMIT_STACK, rlim_t(256) << 20);
    set_limit(RLIMIT_AS, rlim_t(1) << 30);
  };
  const Outcome r = run({"equalize", p("in").string(), "-o", p("out").string(), "--jobs", "64",
                         "--backend", "cpu", "--quiet", "--png-level", "2"},
                        how);
  EXPECT_EQ(r.signal, 0) << r;
  EXPECT_TRUE(r.status == 0 || (r.status == 1 && r.err.find("cannot start") != std::string::npos))
      << r;
  if (r.status == 0) EXPECT_TRUE(tree(p("out")) == tree(p("ref")));
  EXPECT_EQ(temp_files(p("out")), std::vector<std::string>{});
  // An absurd --jobs is a usage error before any thread (it reached 3.3 GB, then aborted; and
  // 2147483647 overflowed jobs + jobs / 8).
  for (const char* jobs : {"1025", "1000000", "2147483647"}) {
    const Outcome u = run({"equalize", p("in").string(), "-o", p("none").string(), "--jobs", jobs});
    EXPECT_EQ(u.status, 2) << u;
    EXPECT_NE(u.err.find("--jobs"), std::string::npos) << u;
    EXPECT_FALSE(fs::exists(p("none")));
  }
}

// ---- 4, 5. 16-bit PNG: the size bound and the chunk checks of the 8-bit path ---------------

TEST_F(Reliability, TinySixteenBitPngsDeclaringHugeImagesAreRefusedInLittleMemory) {
  // A 69-byte 16-bit RGBA PNG declaring 16384x16384 cost 2.1 GB (gray: 530 MB) before libspng
  // failed; the 8-bit path refuses the same under 64 MiB. From a file and from standard input,
  // for equalize and histogram.
  int n = 0;
  for (const hostile::Case& c : hostile::cases()) {
    if (c.name.rfind("png16-", 0) != 0 || c.cls != "tiny file, huge image") continue;
    SCOPED_TRACE(c.name);
    write_bytes(p(c.name), c.bytes);
    Spawn from_stdin;
    from_stdin.stdin_path = p(c.name).string();
    const std::vector<std::pair<std::vector<std::string>, Spawn>> runs = {
        {{"equalize", p(c.name).string(), "-o", p("o.png").string(), "--backend", "cpu"}, {}},
        {{"equalize", "-", "-o", p("o.png").string(), "--backend", "cpu"}, from_stdin},
        {{"histogram", p(c.name).string(), "--backend", "cpu"}, {}},
        {{"histogram", "-", "--backend", "cpu"}, from_stdin}};
    for (const auto& [args, how] : runs) {
      const Outcome r = run(args, how);
      EXPECT_EQ(r.status, 1) << r;
      EXPECT_NE(r.err.find("cannot hold"), std::string::npos) << r;
      EXPECT_NE(r.err.find(how.stdin_path.empty() ? c.name : "(standard input)"), std::string::npos)
          << r;
      EXPECT_LT(r.max_rss_kib, 64 * 1024) << r;
      EXPECT_FALSE(fs::exists(p("o.png")));
      ++n;
    }
  }
  EXPECT_EQ(n, 8);
}

TEST_F(Reliability, SixteenBitPngsFailLikeTheirEightBitTwins) {
  // A bad CRC in IDAT or IEND, or no IEND: the 8-bit file exited 1, its 16-bit twin 0.
  for (int depth : {8, 16}) {
    const int bpp = depth / 8;
    hostile::Bytes rows;
    for (int y = 0; y < 3; ++y) {
      rows.push_back(0);
      for (int x = 0; x < 4 * bpp; ++x) rows.push_back(std::uint8_t(y * 40 + x * 9));
    }
    const hostile::Bytes ok = hostile::png(4, 3, depth, 0, nullptr, hostile::zlib_stored(rows));
    hostile::Bytes idat = ok, iend = ok;
    idat[idat.size() - 13] ^= 1;  // the last byte of IDAT's CRC
    iend[iend.size() - 1] ^= 1;   // IEND's CRC
    const std::vector<std::pair<hostile::Bytes, std::string>> cases = {
        {idat, "CRC mismatch in chunk 'IDAT'"},
        {iend, "CRC mismatch in chunk 'IEND'"},
        {hostile::png(4, 3, depth, 0, nullptr, hostile::zlib_stored(rows), false), "no IEND"}};
    for (const auto& [bytes, reason] : cases) {
      SCOPED_TRACE(std::to_string(depth) + "-bit, " + reason);
      write_bytes(p("in.png"), bytes);
      const Outcome r =
          run({"equalize", p("in.png").string(), "-o", p("o.png").string(), "--backend", "cpu"});
      EXPECT_EQ(r.status, 1) << r;
      EXPECT_NE(r.err.find(reason), std::string::npos) << r;
      EXPECT_FALSE(fs::exists(p("o.png")));
    }
    write_bytes(p("in.png"), ok);  // the control: the intact file is written
    EXPECT_EQ(run({"equalize", p("in.png").string(), "-o", p("o.png").string(), "--backend", "cpu"})
                  .status,
              0);
    fs::remove(p("o.png"));
  }
}

// ---- 6. unreadable folders ------------------------------------------------------------------

TEST_F(Reliability, UnreadableFoldersAreNamedAndFailTheRun) {
  // As a user without permission on one folder (root: `nobody`): -r skipped it without a word
  // (exit 0, its files missing); find and cp -r name it and exit non-zero. And -r on an
  // unreadable root said "no image files in the inputs" (exit 2).
  fs::create_directories(p("in/ok"));
  fs::create_directories(p("in/locked"));
  write_bytes(p("in/a.png"), small_png(1));
  write_bytes(p("in/ok/c.png"), small_png(2));
  write_bytes(p("in/locked/b.png"), small_png(3));
  ::chmod(p("in/locked").c_str(), 0);
  Spawn as_user;
  as_user.in_child = drop_root;
  const std::string locked = p("in/locked").string();
  const Outcome r = run(
      {"equalize", p("in").string(), "-r", "-o", p("out").string(), "--backend", "cpu"}, as_user);
  if (r.status == 126) GTEST_SKIP() << "cannot run as an unprivileged user";
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("cannot list folder '" + locked + "': Permission denied"), std::string::npos)
      << r;
  std::vector<std::string> names;
  for (const auto& [name, bytes] : tree(p("out"))) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"a.png", "ok/c.png"}));
  // --json: the folder is a line of its own, ok false.
  const Outcome j = run({"equalize", p("in").string(), "-r", "-o", p("out-json").string(),
                         "--backend", "cpu", "--json"},
                        as_user);
  EXPECT_EQ(j.status, 1) << j;
  EXPECT_NE(j.out.find("\"input\":\"" + locked + "\",\"ok\":false"), std::string::npos) << j;
  EXPECT_NE(j.out.find("\"failures\":1"), std::string::npos) << j;
  // The unreadable folder as the input, with and without -r: the permission error, exit 1.
  for (const bool recursive : {true, false}) {
    std::vector<std::string> args{"equalize", locked, "-o", p("none").string(), "--backend", "cpu"};
    if (recursive) args.push_back("-r");
    const Outcome u = run(args, as_user);
    EXPECT_EQ(u.status, 1) << u;
    EXPECT_NE(u.err.find("cannot list folder '" + locked + "': Permission denied"),
              std::string::npos)
        << u;
    EXPECT_FALSE(fs::exists(p("none")));
  }
}

// ---- 7. standard input without end ----------------------------------------------------------

TEST_F(Reliability, StandardInputStopsAtTheLimitOfAFile) {
  // `equalize - < /dev/zero` read until memory ran out. It stops at the bytes a file may have
  // (2^31 - 1) and names standard input; a regular file that large is refused from its size.
  const std::string limit = "2147483647";
  { std::ofstream f(p("sparse.bin"), std::ios::binary); }
  fs::resize_file(p("sparse.bin"), std::uintmax_t(1) << 31);  // sparse: no disk used
  Spawn sparse;
  sparse.stdin_path = p("sparse.bin").string();
  Outcome r = run({"equalize", "-", "-o", p("o.png").string(), "--backend", "cpu"}, sparse);
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("standard input"), std::string::npos) << r;
  EXPECT_NE(r.err.find(limit), std::string::npos) << r;
  EXPECT_LT(r.max_rss_kib, 64 * 1024) << r;  // refused before reading
  Spawn zero;
  zero.stdin_path = "/dev/zero";
  r = run({"equalize", "-", "-o", p("o.png").string(), "--backend", "cpu"}, zero);
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("standard input"), std::string::npos) << r;
  EXPECT_NE(r.err.find(limit), std::string::npos) << r;
  EXPECT_LT(r.max_rss_kib, 3 * 1024 * 1024) << r;  // the bound, not all the memory there is
  EXPECT_FALSE(fs::exists(p("o.png")));
}

// ---- 8. a path over PATH_MAX under -r -------------------------------------------------------

TEST_F(Reliability, APathOverPathMaxFailsOnlyItsEntry) {
  // Folders of 200-byte names down to where the paths pass PATH_MAX (4096): one file there whose
  // path is too long, and a folder that cannot be opened. The batch aborted with a raw
  // "filesystem error: status: File name too long" and wrote nothing; now those two entries fail
  // (exit 1, each named with the reason) and every other file is written.
  make_folder("in", 2);
  const std::string seg(200, 'd');
  int dir = ::open(p("in").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  std::size_t len = p("in").string().size();
  int depth = 0;
  while (len + 201 < 4096 - 250) {  // deepen while a file named 250 bytes still fits below
    ASSERT_EQ(::mkdirat(dir, seg.c_str(), 0755), 0);
    const int sub = ::openat(dir, seg.c_str(), O_RDONLY | O_DIRECTORY);
    ::close(dir);
    dir = sub;
    len += 201;
    if (++depth == 2) {  // an ordinary file on the way
      const Bytes b = small_png(7);
      const int f = ::openat(dir, "mid.png", O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ASSERT_EQ(::write(f, b.data(), b.size()), ssize_t(b.size()));
      ::close(f);
    }
  }
  ASSERT_EQ(::mkdirat(dir, seg.c_str(), 0755), 0);  // this folder's own path is still < 4096
  const int last = ::openat(dir, seg.c_str(), O_RDONLY | O_DIRECTORY);
  ::close(dir);
  len += 201;
  const std::string long_file = std::string(4096 - len + 10, 'x') + ".png";  // path > 4096
  const std::string long_dir(4096 - len + 10, 'y');                          // path > 4096
  const Bytes b = small_png(8);
  int f = ::openat(last, long_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(f, 0);
  ASSERT_EQ(::write(f, b.data(), b.size()), ssize_t(b.size()));
  ::close(f);
  ASSERT_EQ(::mkdirat(last, long_dir.c_str(), 0755), 0);
  const int deep = ::openat(last, long_dir.c_str(), O_RDONLY | O_DIRECTORY);
  f = ::openat(deep, "deep.png", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_EQ(::write(f, b.data(), b.size()), ssize_t(b.size()));
  ::close(f);
  ::close(deep);
  ::close(last);

  const Outcome r =
      run({"equalize", p("in").string(), "-r", "-o", p("out").string(), "--backend", "cpu"});
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_EQ(r.err.find("filesystem error"), std::string::npos) << r;
  EXPECT_NE(r.err.find(long_file + "': "), std::string::npos) << r;
  EXPECT_NE(r.err.find("cannot list folder '"), std::string::npos) << r;
  EXPECT_NE(r.err.find(long_dir + "': File name too long"), std::string::npos) << r;
  const std::map<std::string, Bytes> got = tree(p("out"));
  EXPECT_EQ(got.count("f000.png"), 1u);
  EXPECT_EQ(got.count("f001.png"), 1u);
  EXPECT_EQ(got.count(seg + "/" + seg + "/mid.png"), 1u);
  EXPECT_EQ(got.size(), 3u);
}

// ---- 9. outputs that are not regular files ---------------------------------------------------

TEST_F(Reliability, DevStdoutIntoAPipeIsWrittenInPlace) {
  // `-o /dev/stdout` into a pipe failed ("cannot write '/proc/self/fd/pipe:[N]'": the link was
  // followed by hand to a name that is no file); cp writes into the pipe. The pipe now gets the
  // bytes of `-o -`, and the report goes to stderr (the stream holds the image only).
  write_bytes(p("in.png"), small_png(4, 40, 30));
  const Outcome ref =
      run({"equalize", p("in.png").string(), "-o", "-", "--format", "png", "--backend", "cpu"});
  ASSERT_EQ(ref.status, 0) << ref;
  ASSERT_GT(ref.out.size(), 8u);
  for (const char* name : {"/dev/stdout", "/proc/self/fd/1"}) {
    SCOPED_TRACE(name);
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    Spawn how;
    how.stdout_fd = fds[1];
    const pid_t pid = start(
        {"equalize", p("in.png").string(), "-o", name, "--format", "png", "--backend", "cpu"}, how);
    ::close(fds[1]);
    std::string got;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, std::size_t(n));
    ::close(fds[0]);
    const Outcome r = finish(pid, false);
    EXPECT_EQ(r.status, 0) << r;
    EXPECT_TRUE(got == ref.out) << got.size() << " bytes, want " << ref.out.size();
    EXPECT_NE(r.err.find(std::string(name) + ": 40x30"), std::string::npos) << r;
  }
  // Standard output on a regular file: the file holds the image.
  Spawn to_file;
  to_file.stdout_path = p("redirected.png").string();
  const Outcome f = run({"equalize", p("in.png").string(), "-o", "/dev/stdout", "--format", "png",
                         "--backend", "cpu"},
                        to_file);
  EXPECT_EQ(f.status, 0) << f;
  const Bytes file = read_bytes(p("redirected.png"));
  EXPECT_TRUE(std::string(file.begin(), file.end()) == ref.out);
  // /dev/null stays the device (a temp file renamed over it would make it a regular file).
  const Outcome n = run(
      {"equalize", p("in.png").string(), "-o", "/dev/null", "--format", "png", "--backend", "cpu"});
  EXPECT_EQ(n.status, 0) << n;
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(Reliability, DanglingSymlinkOutputIsRefusedAsCpRefusesIt) {
  // An output that is a symlink to nothing had its target created; GNU cp refuses ("not writing
  // through dangling symlink"). One file, and an output of a batch; a symlink loop likewise
  // names its cause and replaces nothing.
  write_bytes(p("in.png"), small_png(6));
  fs::create_symlink("missing.png", p("link.png"));
  const Outcome r =
      run({"equalize", p("in.png").string(), "-o", p("link.png").string(), "--backend", "cpu"});
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("dangling symbolic link"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(p("missing.png")));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(p("link.png"))));
  EXPECT_EQ(fs::read_symlink(p("link.png")), fs::path("missing.png"));

  make_folder("in", 3);
  fs::create_directories(p("out"));
  fs::create_symlink("nowhere.png", p("out/f001.png"));
  const Outcome b =
      run({"equalize", p("in").string(), "-o", p("out").string(), "--backend", "cpu"});
  EXPECT_EQ(b.status, 1) << b;
  EXPECT_NE(b.err.find("f001.png': not writing through a dangling symbolic link"),
            std::string::npos)
      << b;
  EXPECT_FALSE(fs::exists(p("out/nowhere.png")));
  EXPECT_TRUE(fs::is_regular_file(p("out/f000.png")));
  EXPECT_TRUE(fs::is_regular_file(p("out/f002.png")));

  fs::create_symlink("loop-b.png", p("loop-a.png"));
  fs::create_symlink("loop-a.png", p("loop-b.png"));
  const Outcome l =
      run({"equalize", p("in.png").string(), "-o", p("loop-a.png").string(), "--backend", "cpu"});
  EXPECT_EQ(l.status, 1) << l;
  EXPECT_NE(l.err.find("symbolic links"), std::string::npos) << l;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(p("loop-a.png"))));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(p("loop-b.png"))));
}

// ---- 16. what an overwrite keeps ------------------------------------------------------------

TEST_F(Reliability, OverwritingKeepsTheModeAndTheOwner) {
  // The output is replaced by a rename, so it is a new file: its permission bits are set from the
  // old one, and its owner and group where the process may (root: any; an owner: a group of its
  // own). As root, an output owned by another user became root's.
  write_bytes(p("in.png"), small_png(9));
  write_bytes(p("out.png"), small_png(10));
  ASSERT_EQ(::chmod(p("out.png").c_str(), 0640), 0);
  const bool root = ::geteuid() == 0;
  if (root) ASSERT_EQ(::chown(p("out.png").c_str(), 65534, 65534), 0);
  struct stat before {};
  ASSERT_EQ(::stat(p("out.png").c_str(), &before), 0);
  const Outcome r =
      run({"equalize", p("in.png").string(), "-o", p("out.png").string(), "--backend", "cpu"});
  ASSERT_EQ(r.status, 0) << r;
  struct stat after {};
  ASSERT_EQ(::stat(p("out.png").c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino);  // replaced (a rename), not written in place
  EXPECT_EQ(after.st_mode & 07777, 0640u);
  EXPECT_EQ(after.st_uid, before.st_uid);
  EXPECT_EQ(after.st_gid, before.st_gid);
  if (!root) std::cout << "(not root: the owner kept is the user's own)\n";
}

// ---- 10. out of memory names the file --------------------------------------------------------

TEST_F(Reliability, OutOfMemoryNamesTheFile) {
  // A 12000x12000 image (144 MB of pixels, a 170 KB file) in an address space of 200 MiB:
  // "out of host memory" without a name for one file, "'d/big.png': std::bad_alloc" in a batch.
  Image big;
  big.width = big.height = 12000;
  big.channels = 1;
  big.pixels.assign(big.byte_count(), 7);
  fs::create_directories(p("in"));
  EncodeOptions level9;
  level9.png_level = 9;
  write_bytes(p("in/big.png"), encode_image(big, ".png", level9));
  big = Image();
  write_bytes(p("in/small.png"), small_png(11));
  Spawn limited;
  limited.in_child = [] { set_limit(RLIMIT_AS, rlim_t(200) << 20); };
  const std::string name = p("in/big.png").string();
  const Outcome one =
      run({"equalize", name, "-o", p("one.png").string(), "--backend", "cpu"}, limited);
  EXPECT_EQ(one.status, 1) << one;
  EXPECT_NE(one.err.find("'" + name + "': out of memory"), std::string::npos) << one;
  EXPECT_EQ(one.err.find("bad_alloc"), std::string::npos) << one;
  EXPECT_FALSE(fs::exists(p("one.png")));
  const Outcome batch = run(
      {"equalize", p("in").string(), "-o", p("out").string(), "--jobs", "1", "--backend", "cpu"},
      limited);
  EXPECT_EQ(batch.status, 1) << batch;
  EXPECT_NE(batch.err.find("'" + name + "': out of memory"), std::string::npos) << batch;
  EXPECT_EQ(batch.err.find("bad_alloc"), std::string::npos) << batch;
  EXPECT_TRUE(fs::is_regular_file(p("out/small.png")));
  EXPECT_FALSE(fs::exists(p("out/big.png")));
  EXPECT_EQ(temp_files(p("out")), std::vector<std::string>{});
}

// ---- 11. the report of a 16-bit file to a full stdout ----------------------------------------

TEST_F(Reliability, SixteenBitJsonToAFullStdoutSaysTheImageWasWritten) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  Image16 img;
  img.width = 5;
  img.height = 4;
  img.channels = 1;
  for (int i = 0; i < 20; ++i) img.pixels.push_back(std::uint16_t(i * 3000));
  write_bytes(p("in16.png"), encode_image16(img, ".png"));
  Spawn full;
  full.stdout_path = "/dev/full";
  for (const char* cmd : {"equalize", "clahe"}) {
    const Outcome r =
        run({cmd, p("in16.png").string(), "-o", p("o.png").string(), "--backend", "cpu", "--json"},
            full);
    EXPECT_EQ(r.status, 1) << r;
    EXPECT_NE(r.err.find("the image " + p("o.png").string() + " was written"), std::string::npos)
        << r;
    EXPECT_TRUE(fs::is_regular_file(p("o.png")));
    fs::remove(p("o.png"));
  }
}

TEST_F(Reliability, ABatchWhoseReaderQuitWritesEveryFile) {
  // `histeq equalize DIR -o OUT | head -1`: the reader gone, the next report's write raised
  // SIGPIPE and ended the command with files unwritten and nothing said. Now every file is
  // written, and the batch ends as with a full stdout: the reports lost, said, status 1.
  make_folder("in", 24);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);  // no reader at all: the first report's write finds the pipe broken
  Spawn how;
  how.stdout_fd = fds[1];
  const pid_t pid = start(
      {"equalize", p("in").string(), "-o", p("out").string(), "--backend", "cpu", "--json"}, how);
  ::close(fds[1]);
  const Outcome r = finish(pid, false);
  EXPECT_EQ(r.signal, 0) << r;
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("could not write to standard output"), std::string::npos) << r;
  EXPECT_EQ(tree(p("out")).size(), 24u) << r;
  EXPECT_EQ(temp_files(p("out")), std::vector<std::string>{});
}

TEST_F(Reliability, ABatchReportsEachFileToAPipeWhenItIsDone) {
  // `histeq equalize DIR -o OUT | tee log` (or `| head -1`): the report lines sat in stdio's
  // 4 KiB buffer and reached the pipe together when the batch ended, and `| head -1` then ended
  // with status 0, its one write done before the reader left. Each line is now flushed as its
  // file is done: the first arrives while the others still run, and a reader that leaves after
  // it makes the batch say so and end with status 1, every file written.
  make_folder("in", 12, 256);  // 12 lines: less than stdio's buffer holds
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  Spawn how;
  how.stdout_fd = fds[1];
  how.close_fds = {fds[0]};
  const pid_t pid = start(
      {"equalize", p("in").string(), "-o", p("out").string(), "--backend", "cpu", "--jobs", "1"},
      how);
  ::close(fds[1]);
  std::string first;
  char c = 0;
  while (::read(fds[0], &c, 1) == 1 && c != '\n') first += c;
  ::close(fds[0]);  // as `head -1` does
  const Outcome r = finish(pid, false);
  EXPECT_NE(first.find("f000.png"), std::string::npos) << first;
  EXPECT_EQ(r.signal, 0) << r;
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("could not write to standard output"), std::string::npos) << r;
  EXPECT_EQ(tree(p("out")).size(), 12u) << r;
  EXPECT_EQ(temp_files(p("out")), std::vector<std::string>{});
}

// ---- 12. --clip at or above the tile's pixel count ------------------------------------------

TEST_F(Reliability, ClipAtOrAboveTheTilePixelCountIsNoClipping) {
  // 8x8 tiles of 64 pixels: 63 of value 100 and one of 50. --clip 1e12 (or 1e308) overflowed
  // the float-to-int conversion of the clip (undefined; INT_MIN on x86, so the strongest
  // clipping). A clip >= 64 counts cannot cut a bin: no clipping, as --clip 0; the boundary
  // itself (256 x 64 / 256 = 64) is tested in test_host_clahe (ClaheGeometry).
  Image img;
  img.width = img.height = 64;
  img.channels = 1;
  img.pixels.assign(img.byte_count(), 100);
  for (int y = 0; y < 64; y += 8)
    for (int x = 0; x < 64; x += 8) img.pixels[std::size_t(y) * 64 + std::size_t(x)] = 50;
  write_bytes(p("in.png"), encode_image(img, ".png"));
  const auto clahe = [&](const std::string& clip) {
    const std::string o = p("c-" + clip + ".png").string();
    const Outcome r =
        run({"clahe", p("in.png").string(), "-o", o, "--clip", clip, "--backend", "cpu"});
    EXPECT_EQ(r.status, 0) << r;
    return read_bytes(o);
  };
  const Bytes none = clahe("0");
  for (const char* clip : {"256", "1e12", "1e308", "1.7976931348623157e308"})
    EXPECT_EQ(clahe(clip), none) << "--clip " << clip;
  EXPECT_NE(clahe("251"), none) << "a clip of 62 counts cuts the bin of 63: the control";
  EXPECT_NE(clahe("4"), none);
}

// ---- 13. numeric options that overflow --------------------------------------------------------

TEST_F(Reliability, NumericOptionsThatOverflowAreUsageErrors) {
  // --max-inflight-mb 17592186044417 wrapped to a 1 MB cap (mb << 20 in 64 bits). Every numeric
  // option whose value does not fit is a usage error naming the option; nothing is written.
  make_folder("in", 1);
  const std::string in = p("in").string(), out = p("out").string();
  const std::vector<std::vector<std::string>> cases = {
      {"equalize", in, "-o", out, "--max-inflight-mb", "17592186044417"},
      {"equalize", in, "-o", out, "--max-inflight-mb", "17592186044416"},
      {"equalize", in, "-o", out, "--max-inflight-mb", "18446744073709551616"},
      {"equalize", in, "-o", out, "--jobs", "2147483648"},
      {"equalize", in, "-o", out, "--jobs", "4294967297"},
      {"equalize", in, "-o", out, "--max-pixels", "18446744073709551616"},
      {"equalize", in, "-o", out, "--quality", "4294967391"},
      {"equalize", in, "-o", out, "--png-level", "4294967297"},
      {"equalize", in, "-o", out, "--depth", "4294967304"},
      {"clahe", in, "-o", out, "--clip", "1e400"},
      {"clahe", in, "-o", out, "--tiles", "4294967304x8"},
      {"histogram", in, "--jobs", "4294967297"},
      {"kernels", "--details", "--bins", "4294967552"},
      {"kernels", "--details", "--size", "18446744073709551616"},
  };
  for (const auto& args : cases) {
    const std::string& opt = args[args.size() - 2];
    SCOPED_TRACE(args[0] + " " + opt + " " + args.back());
    const Outcome r = run(args);
    EXPECT_EQ(r.status, 2) << r;
    EXPECT_TRUE(r.err.find(opt) != std::string::npos || r.err.find("bad size") != std::string::npos)
        << r;
    EXPECT_FALSE(fs::exists(out));
  }
  // The largest --max-inflight-mb whose bytes fit is taken.
  const Outcome ok = run({"equalize", in, "-o", out, "--max-inflight-mb", "17592186044415",
                          "--backend", "cpu", "--quiet"});
  EXPECT_EQ(ok.status, 0) << ok;
}

// ---- 14. --format against the output's name ---------------------------------------------------

TEST_F(Reliability, FormatThatContradictsTheOutputNameIsAUsageError) {
  // `-o x.jpg --format png` wrote PNG bytes into x.jpg with exit 0.
  write_bytes(p("in.png"), small_png(12));
  const std::string in = p("in.png").string();
  for (const auto& [name, format] : std::vector<std::pair<std::string, std::string>>{
           {"x.jpg", "png"}, {"x.png", "jpeg"}, {"x.bmp", "tga"}, {"x.pgm", "ppm"}}) {
    const Outcome r =
        run({"equalize", in, "-o", p(name).string(), "--format", format, "--backend", "cpu"});
    EXPECT_EQ(r.status, 2) << r;
    EXPECT_NE(r.err.find("--format " + format), std::string::npos) << r;
    EXPECT_NE(r.err.find(name), std::string::npos) << r;
    EXPECT_FALSE(fs::exists(p(name)));
    const Outcome c =
        run({"clahe", in, "-o", p(name).string(), "--format", format, "--backend", "cpu"});
    EXPECT_EQ(c.status, 2) << c;
  }
  // Agreeing spellings, and names without an image extension, are written.
  for (const auto& [name, format] :
       std::vector<std::pair<std::string, std::string>>{{"a.JPEG", "jpg"},
                                                        {"b.jpg", "jpeg"},
                                                        {"c.pnm", "pgm"},
                                                        {"d.pgm", "pnm"},
                                                        {"e.out", "png"}}) {
    const Outcome r =
        run({"equalize", in, "-o", p(name).string(), "--format", format, "--backend", "cpu"});
    EXPECT_EQ(r.status, 0) << r;
    EXPECT_TRUE(fs::is_regular_file(p(name))) << name;
  }
  EXPECT_NO_THROW(load_image(p("e.out").string()));  // PNG bytes, as asked
}

// ---- the program started again with malloc on transparent huge pages ------------------------

TEST_F(Reliability, StartsAgainOnceWithMallocOnHugePagesUnlessTheUserChose) {
  // main starts the program again (the same pid, arguments and descriptors) with
  // glibc.malloc.hugetlb=1 added to GLIBC_TUNABLES where the kernel's THP mode is madvise and
  // glibc has the tunable; a value the user set is kept. `--version` says what the process
  // runs with (glibc's value at its start; /proc/PID/environ shows the variable as glibc's
  // loader leaves it, cut at each value's end). Standard input is read whole after the exec (a
  // PNG through it). Started through the dynamic loader (`ld.so histeq`), it does not start
  // again: a direct exec would drop the loader's options. By default only where a GPU is
  // (HISTEQ_MALLOC_RESTART unset: auto); "always" here, so that every machine tests the rest.
  struct Knob {
    const char* before = std::getenv("HISTEQ_MALLOC_RESTART");
    const std::string kept = before ? before : "";
    Knob() { ::setenv("HISTEQ_MALLOC_RESTART", "always", 1); }
    ~Knob() {
      if (before)
        ::setenv("HISTEQ_MALLOC_RESTART", kept.c_str(), 1);
      else
        ::unsetenv("HISTEQ_MALLOC_RESTART");
    }
  } knob;
  std::string thp;
  {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::getline(f, thp);
  }
  std::string added = cli::malloc_thp_tunables(nullptr, thp, ::gnu_get_libc_version());
  if (::prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1) added.clear();  // (inherited: no restart)
  struct Case {
    const char* tunables;  // nullptr: unset
    std::string want;      // in --version's memory line
  };
  const Case cases[] = {
      {nullptr, added.empty() ? "GLIBC_TUNABLES unset (transparent"
                              : "GLIBC_TUNABLES=" + added + " (histeq started itself again"},
      {"glibc.malloc.hugetlb=0", "GLIBC_TUNABLES=glibc.malloc.hugetlb=0 (transparent"},
      {"glibc.malloc.arena_max=4",
       "GLIBC_TUNABLES=glibc.malloc.arena_max=4" +
           (added.empty() ? std::string(" (transparent")
                          : ":" + added + " (histeq started itself again")}};
  write_bytes(p("in.png"), small_png(3, 64, 48));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tunables ? c.tunables : "GLIBC_TUNABLES unset");
    Spawn how;
    const char* value = c.tunables;
    how.in_child = [value] {
      if (value)
        ::setenv("GLIBC_TUNABLES", value, 1);
      else
        ::unsetenv("GLIBC_TUNABLES");
    };
    Outcome r = run({"--version"}, how);
    EXPECT_EQ(r.status, 0) << r;
    EXPECT_NE(r.out.find("\nmemory: glibc malloc with " + c.want), std::string::npos) << r;
    how.stdin_path = p("in.png").string();
    const std::string out = p("o.png").string();
    r = run({"equalize", "-", "-o", out, "--backend", "cpu"}, how);
    EXPECT_EQ(r.status, 0) << r;
    EXPECT_EQ(load_image(out).width, 64) << r;
    fs::remove(out);
  }
  // The knob: "never", and auto (unset) where the machine decides.
  for (const char* k : {"never", "auto", static_cast<const char*>(nullptr)}) {
    SCOPED_TRACE(k ? k : "HISTEQ_MALLOC_RESTART unset");
    Spawn how;
    how.in_child = [k] {
      ::unsetenv("GLIBC_TUNABLES");
      if (k)
        ::setenv("HISTEQ_MALLOC_RESTART", k, 1);
      else
        ::unsetenv("HISTEQ_MALLOC_RESTART");
    };
    const bool gpu_host = gpu::nvjpeg_built() && fs::exists("/dev/nvidiactl");
    const bool restarts = !added.empty() && cli::malloc_thp_wanted(k, gpu_host);
    const Outcome r = run({"--version"}, how);
    EXPECT_EQ(r.status, 0) << r;
    EXPECT_NE(r.out.find(restarts ? "GLIBC_TUNABLES=" + added + " (histeq started itself again"
                                  : std::string("GLIBC_TUNABLES unset (transparent")),
              std::string::npos)
        << "gpu host " << gpu_host << "\n"
        << r;
  }
  const char* loader = "/lib64/ld-linux-x86-64.so.2";
  if (fs::exists(loader)) {
    const std::string version = p("version.txt").string();
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::unsetenv("GLIBC_TUNABLES");
      const int o = ::open(version.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
      ::dup2(o, 1);
      ::execl(loader, loader, HISTEQ_CLI, "--version", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    const Bytes v = read_bytes(version);
    EXPECT_NE(std::string(v.begin(), v.end()).find("with GLIBC_TUNABLES unset (transparent"),
              std::string::npos)
        << std::string(v.begin(), v.end());
  }
  if (added.empty())
    GTEST_SKIP() << "the rest needs a restart: THP mode '" << thp << "', glibc "
                 << ::gnu_get_libc_version() << ", PR_GET_THP_DISABLE "
                 << ::prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0);
  {  // huge pages disabled for the process (a flag an exec keeps): no restart
    Spawn how;
    how.in_child = [] {
      ::unsetenv("GLIBC_TUNABLES");
      if (::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) ::_exit(125);
    };
    const Outcome r = run({"--version"}, how);
    EXPECT_EQ(r.status, 0) << r;
    EXPECT_NE(r.out.find("with GLIBC_TUNABLES unset (transparent"), std::string::npos) << r;
  }
  // Started again, the process keeps its name (ps, pkill) and command line: seen while it waits
  // on a FIFO, once its environment (/proc/PID/environ) shows the restart's variable.
  const std::string fifo = p("in.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Spawn how;
  how.stdin_path = fifo;
  how.in_child = [] { ::unsetenv("GLIBC_TUNABLES"); };
  const std::string out = p("f.png").string();
  const pid_t pid = start({"equalize", "-", "-o", out, "--backend", "cpu"}, how);
  const int w = ::open(fifo.c_str(), O_WRONLY);  // the child has opened it for reading
  ASSERT_GE(w, 0);
  const std::string proc = "/proc/" + std::to_string(pid) + "/";
  const auto text = [&](const char* name) {
    const Bytes b = read_bytes(proc + name);
    return std::string(b.begin(), b.end());
  };
  bool restarted = false;
  for (int wait = 0; wait < 10000 && !restarted; ++wait) {
    restarted = text("environ").find("GLIBC_TUNABLES=" + added) != std::string::npos;
    if (!restarted) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(restarted);
  EXPECT_EQ(text("comm"), fs::path(HISTEQ_CLI).filename().string().substr(0, 15) + "\n");
  const std::string cmdline = text("cmdline");
  EXPECT_EQ(cmdline, std::string(HISTEQ_CLI) + '\0' + "equalize" + '\0' + "-" + '\0' + "-o" + '\0' +
                         out + '\0' + "--backend" + '\0' + "cpu" + '\0');
  const Bytes png = read_bytes(p("in.png"));
  const auto before = std::signal(SIGPIPE, SIG_IGN);  // (were it gone, no SIGPIPE for the test)
  EXPECT_EQ(::write(w, png.data(), png.size()), ssize_t(png.size()));
  std::signal(SIGPIPE, before);
  ::close(w);
  const Outcome r = finish(pid);
  EXPECT_EQ(r.status, 0) << r;
  EXPECT_EQ(load_image(out).width, 64) << r;
}

TEST(MallocThp, StartsAgainWhereAGpuIsUnlessTheKnobSaysOtherwise) {
  using cli::malloc_thp_wanted;
  EXPECT_TRUE(malloc_thp_wanted(nullptr, true));
  EXPECT_FALSE(malloc_thp_wanted(nullptr, false));
  EXPECT_TRUE(malloc_thp_wanted("auto", true));
  EXPECT_FALSE(malloc_thp_wanted("auto", false));
  EXPECT_TRUE(malloc_thp_wanted("always", false));
  EXPECT_FALSE(malloc_thp_wanted("never", true));
  EXPECT_FALSE(malloc_thp_wanted("", false));
  EXPECT_TRUE(malloc_thp_wanted("sometimes", true));  // (an unknown word: auto)
}

TEST(MallocThp, AddsHugetlbOnlyWhereItIsMissingMadviseSelectedAndGlibcHasIt) {
  using cli::malloc_thp_tunables;
  const std::string on = "glibc.malloc.hugetlb=1";
  EXPECT_EQ(malloc_thp_tunables(nullptr, "always [madvise] never\n", "2.36"), on);
  EXPECT_EQ(malloc_thp_tunables("", "always [madvise] never", "2.35"), on);
  EXPECT_EQ(malloc_thp_tunables("glibc.malloc.arena_max=2", "always [madvise] never", "2.39"),
            "glibc.malloc.arena_max=2:" + on);
  EXPECT_EQ(malloc_thp_tunables("glibc.malloc.hugetlbx=1", "[madvise]", "3.0"),
            "glibc.malloc.hugetlbx=1:" + on);
  // the user's own value, whatever it is, wherever it stands
  EXPECT_EQ(malloc_thp_tunables("glibc.malloc.hugetlb=0", "always [madvise] never", "2.36"), "");
  EXPECT_EQ(malloc_thp_tunables("a.b=1:glibc.malloc.hugetlb=2", "[madvise]", "2.36"), "");
  EXPECT_EQ(malloc_thp_tunables("glibc.malloc.hugetlb", "[madvise]", "2.36"), "");
  // huge pages everywhere already, or nowhere
  EXPECT_EQ(malloc_thp_tunables(nullptr, "[always] madvise never", "2.36"), "");
  EXPECT_EQ(malloc_thp_tunables(nullptr, "always madvise [never]", "2.36"), "");
  EXPECT_EQ(malloc_thp_tunables(nullptr, "", "2.36"), "");
  // a glibc without the tunable
  EXPECT_EQ(malloc_thp_tunables(nullptr, "always [madvise] never", "2.34"), "");
  EXPECT_EQ(malloc_thp_tunables(nullptr, "always [madvise] never", "1.99"), "");
  EXPECT_EQ(malloc_thp_tunables(nullptr, "always [madvise] never", "2"), "");
  EXPECT_EQ(malloc_thp_tunables(nullptr, "always [madvise] never", "x.y"), "");
  EXPECT_EQ(malloc_thp_tunables(nullptr, "always [madvise] never", "2.100"), on);
}

}  // namespace
}  // namespace histeq
