// test_host_faults.cpp — faults while writing: a SIGTERM/SIGINT in the middle of save_image
// (install_signal_cleanup) leaves neither the output nor a temp file, an old output untouched;
// two processes (and two threads) writing different outputs into one folder at once both
// succeed; a file-size limit (RLIMIT_FSIZE, the "disk full" of one process) gives an Error
// naming the file and leaves nothing. Each fault runs in a forked child, made deterministic by
// save_image's test hook (called after each chunk written to the temp file).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/image_io.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {
namespace fs = std::filesystem;

/// Noise compresses badly: a 1200×1200 RGB PNG is > 4 MiB, so it takes several chunks.
Image noise(int w, int h, int c, std::uint32_t seed) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels.resize(img.byte_count());
  std::uint32_t s = seed * 2654435761u + 1;
  for (auto& p : img.pixels) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    p = std::uint8_t(s);
  }
  return img;
}

class Faults : public test::TempDirTest {
 protected:
  Faults() : TempDirTest("histeq-faults-") {}
  /// Runs f in a child; returns the wait status.
  template <class F>
  static int in_child(F&& f) {
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        code = f();
      } catch (...) {
        code = 99;
      }
      ::_exit(code);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }
};

std::string* g_seen_temp = nullptr;
void raise_term_after_first_chunk(const char* tmp, std::size_t) {
  if (g_seen_temp) *g_seen_temp = tmp;
  ::raise(SIGTERM);
}
void raise_int_after_first_chunk(const char*, std::size_t) { ::raise(SIGINT); }

TEST_F(Faults, SigtermDuringSaveLeavesNoOutputAndNoTempFile) {
  const std::string out = path("out.png");
  const int status = in_child([&] {
    install_signal_cleanup();
    set_save_hook_for_testing(raise_term_after_first_chunk);
    save_image(noise(1200, 1200, 3, 1), out);
    return 0;  // not reached: the handler re-raises SIGTERM with the default action
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited normally with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(listing(), std::vector<std::string>{});
}

TEST_F(Faults, SigintDuringSaveKeepsTheOldOutputUntouched) {
  const std::string out = path("out.bmp");
  save_image(noise(10, 10, 3, 2), out);
  const auto before = fs::file_size(out);
  const int status = in_child([&] {
    install_signal_cleanup();
    set_save_hook_for_testing(raise_int_after_first_chunk);
    save_image(noise(1500, 1500, 3, 3), out);  // 6.75 MB BMP: two chunks
    return 0;
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_EQ(listing(), std::vector<std::string>{"out.bmp"});
  EXPECT_EQ(fs::file_size(out), before);
}

TEST_F(Faults, WithoutTheHandlerTheTempFileWouldStay) {
  // The control case: the same interruption with no cleanup handler leaves the temp file behind,
  // so the tests above do test the handler.
  const int status = in_child([&] {
    set_save_hook_for_testing(raise_term_after_first_chunk);
    save_image(noise(1200, 1200, 3, 1), path("out.png"));
    return 0;
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  const auto names = listing();
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0].rfind(".out.png.histeq-", 0), 0u) << names[0];
}

TEST_F(Faults, IgnoredSignalStaysIgnored) {
  // Under nohup (SIGTERM ignored before the call) the handler is not installed: the save
  // completes despite the signal.
  const std::string out = path("out.png");
  const int status = in_child([&] {
    ::signal(SIGTERM, SIG_IGN);
    install_signal_cleanup();
    set_save_hook_for_testing(raise_term_after_first_chunk);
    save_image(noise(1200, 1200, 3, 1), out);
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(listing(), std::vector<std::string>{"out.png"});
  EXPECT_EQ(load_image(out).pixels, noise(1200, 1200, 3, 1).pixels);
}

TEST_F(Faults, TwoProcessesWritingDifferentOutputsInOneFolderBothSucceed) {
  // Both children wait on a pipe, then save at once: same folder, same format, each its own
  // temp file (mkstemp) and rename.
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> kids;
  for (int k = 0; k < 2; ++k) {
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(go[1]);
      char c;
      if (::read(go[0], &c, 1) != 1) ::_exit(3);
      try {
        for (int rep = 0; rep < 3; ++rep)
          save_image(noise(700, 700, 3, 10 + k), path("out" + std::to_string(k) + ".png"));
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    kids.push_back(pid);
  }
  ::close(go[0]);
  ASSERT_EQ(::write(go[1], "gg", 2), 2);
  ::close(go[1]);
  for (pid_t pid : kids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  EXPECT_EQ(listing(), (std::vector<std::string>{"out0.png", "out1.png"}));
  for (int k = 0; k < 2; ++k)
    EXPECT_EQ(load_image(path("out" + std::to_string(k) + ".png")).pixels,
              noise(700, 700, 3, 10 + k).pixels);
}

TEST_F(Faults, ManyThreadsSavingAtOnceBothSucceed) {
  // More savers than signal-cleanup slots (256): the others wait for a slot; all succeed and
  // clean up.
  constexpr int kSavers = 300;
  std::vector<std::thread> ts;
  std::vector<int> ok(kSavers, 0);
  for (int k = 0; k < kSavers; ++k)
    ts.emplace_back([&, k] {
      try {
        save_image(noise(64, 64, 1 + k % 4, std::uint32_t(k)),
                   path("t" + std::to_string(k) + ".tga"));
        ok[std::size_t(k)] = 1;
      } catch (...) {}
    });
  for (auto& t : ts) t.join();
  for (int k = 0; k < kSavers; ++k) EXPECT_EQ(ok[std::size_t(k)], 1) << k;
  EXPECT_EQ(listing().size(), std::size_t(kSavers));
}

TEST_F(Faults, WritersCreateNoTempFileOnceASignalIsHandled) {
  // Eight threads saving one file after another, and a SIGTERM to the process meanwhile: the
  // handler raises a stop flag before it removes the temp files in flight, and a writer that
  // finds the flag creates none (it waits for the process to end). Before, the other threads
  // went on creating temp files while the handler cleaned, and some stayed. Ten runs: a race
  // lost one run in three would pass all ten with probability under 2 %.
  for (int run = 0; run < 10; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    const fs::path dir = dir_ / ("run" + std::to_string(run));
    fs::create_directories(dir);
    const int status = in_child([&] {
      install_signal_cleanup();
      std::vector<std::thread> ts;
      for (int k = 0; k < 8; ++k)
        ts.emplace_back([&, k] {
          for (int i = 0; i < 100000; ++i)
            save_image(
                noise(32, 32, 1, std::uint32_t(i)),
                (dir / ("t" + std::to_string(k) + "-" + std::to_string(i) + ".bmp")).string());
        });
      while (fs::is_empty(dir)) std::this_thread::yield();  // the writers are at work
      std::this_thread::sleep_for(std::chrono::milliseconds(run));
      ::kill(::getpid(), SIGTERM);
      for (auto& t : ts) t.join();
      return 0;
    });
    ASSERT_TRUE(WIFSIGNALED(status));
    EXPECT_EQ(WTERMSIG(status), SIGTERM);
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      EXPECT_EQ(name.find(".histeq-"), std::string::npos) << name << " left behind";
      if (name.find(".histeq-") == std::string::npos)  // a complete output
        EXPECT_EQ(fs::file_size(e.path()), encode_image(noise(32, 32, 1, 0), ".bmp").size());
    }
  }
}

TEST_F(Faults, FileSizeLimitIsAnErrorNamingTheFileAndLeavesNothing) {
  // RLIMIT_FSIZE with SIGXFSZ ignored: write() fails with EFBIG, as on a full disk with ENOSPC.
  const std::string out = path("out.png");
  const int status = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl {
      100000, 100000
    };
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) return 4;
    try {
      save_image(noise(1200, 1200, 3, 1), out);
    } catch (const Error& e) {
      const std::string msg = e.what();
      const bool names = msg.find(out) != std::string::npos &&
                         msg.find("write failed") != std::string::npos &&
                         msg.find("File too large") != std::string::npos;
      if (!names) std::fprintf(stderr, "message: %s\n", e.what());
      return names ? 10 : 11;
    }
    return 12;
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 10);
  EXPECT_EQ(listing(), std::vector<std::string>{});
}

}  // namespace
}  // namespace histeq
