// test_host_parallel.cpp — the CPU backend's thread pool (cpu/parallel.hpp): every task runs
// exactly once, the first exception comes back after every task has finished, concurrent callers
// share the pool without losing tasks, threads that went to sleep are woken for the next job,
// and a forked child makes its own pool.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cpu/parallel.hpp"
#include "histeq/cpu.hpp"

namespace {
namespace par = histeq::cpu::parallel;

/// Runs `tasks` tasks on `threads` threads and returns how often each ran.
std::vector<int> run_counts(std::size_t tasks, int threads) {
  std::vector<std::atomic<int>> runs(tasks);
  par::run_tasks(tasks, threads, [&](std::size_t i) { runs[i].fetch_add(1); });
  std::vector<int> out;
  for (auto& r : runs) out.push_back(r.load());
  return out;
}

TEST(ThreadPool, EveryTaskRunsOnce) {
  for (int threads : {0, 1, 2, 3, 8, 64}) {
    for (std::size_t tasks :
         {std::size_t(0), std::size_t(1), std::size_t(2), std::size_t(7), std::size_t(1000)}) {
      const std::vector<int> runs = run_counts(tasks, threads);
      for (std::size_t i = 0; i < tasks; ++i)
        ASSERT_EQ(runs[i], 1) << "task " << i << " of " << tasks << " on " << threads;
    }
  }
}

TEST(ThreadPool, ExceptionComesBackAfterEveryTaskFinished) {
  std::atomic<int> finished{0};
  const auto run = [&] {
    par::run_tasks(16, 4, [&](std::size_t i) {
      if (i == 3) throw std::runtime_error("task 3");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      finished.fetch_add(1);
    });
  };
  EXPECT_THROW(run(), std::runtime_error);
  EXPECT_EQ(finished.load(), 15);  // the other tasks all ran, and ran before the throw
}

TEST(ThreadPool, ConcurrentCallersLoseNoTask) {
  constexpr int kCallers = 6, kCalls = 300;
  std::atomic<long> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&] {
      for (int k = 0; k < kCalls; ++k) {
        std::atomic<int> here{0};
        par::run_tasks(5, 3, [&](std::size_t) { here.fetch_add(1); });
        total.fetch_add(here.load());
        if (here.load() != 5) total.fetch_add(1000000);  // a lost or repeated task
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), long(kCallers) * kCalls * 5);
}

TEST(ThreadPool, ThreadsAsleepAreWokenForTheNextJob) {
  // Long enough between jobs for every pool thread to stop spinning and sleep, then a job whose
  // tasks wait for each other: it finishes only if a pool thread took one while the caller holds
  // the other.
  if (histeq::cpu::usable_cpus() < 2) GTEST_SKIP() << "one CPU: the pool has no thread to wake";
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::atomic<int> arrived{0};
    std::atomic<int> met{0};  // tasks that saw the other one arrive while they waited
    par::run_tasks(2, 2, [&](std::size_t) {
      arrived.fetch_add(1);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (arrived.load() < 2 && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      if (arrived.load() == 2) met.fetch_add(1);
    });
    EXPECT_EQ(met.load(), 2) << "round " << round << ": no pool thread took the second task";
  }
}

TEST(ThreadPool, ForkedChildMakesItsOwnPool) {
  EXPECT_EQ(run_counts(8, 4), std::vector<int>(8, 1));  // the parent's pool exists
  const pid_t pid = fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    std::atomic<int> runs{0};
    par::run_tasks(64, 4, [&](std::size_t) { runs.fetch_add(1); });
    _exit(runs.load() == 64 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
