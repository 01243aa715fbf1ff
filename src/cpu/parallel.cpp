// parallel.cpp — the CPU backend's thread pool (parallel.hpp).
//
// A call is a Job: a counter of tasks handed out and a counter of tasks finished. The caller
// queues the job, wakes the pool threads it may use, then takes tasks itself; pool threads take
// tasks of the oldest queued job that has any left. The caller waits until its job's tasks have
// all finished (the function they call lives on its stack), then unqueues it.
//
// fork(): the pool's threads do not exist in a child, and its mutex may have been held by one of
// them. The child therefore forgets the pool (pthread_atfork; the old one is leaked, never
// touched again) and makes a new one on its first call.
//
// Waking: a thread that has run out of tasks spins (a pause, and a sched_yield now and then, so a
// runnable thread of another program takes the core first) for up to kSpin before it sleeps on
// the condition variable, and so does a caller waiting for its last tasks. Waking a sleeping
// thread costs tens of microseconds on a virtual machine (the wake-up of an idle CPU goes through
// the hypervisor): as much as a 1-megapixel histogram, and CLAHE and equalization start two or
// three jobs in a row. A job queued while threads spin reaches them with no system call at all.
//
// Signals: the pool's threads block every asynchronous signal, so that a process-directed one
// (SIGTERM, SIGINT, ...) is handled by a thread of the program's own; histeq's cleanup of
// half-written files relies on that (io/signals.hpp: a thread that writes files blocks them
// only while its temp file is not yet visible to the handler).
#include "cpu/parallel.hpp"

#include <pthread.h>
#include <signal.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "histeq/cpu.hpp"

namespace histeq::cpu::parallel {
namespace {

/// Blocks, in the calling thread, every signal but those a thread's own fault raises.
void block_async_signals() {
  sigset_t set;
  sigfillset(&set);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) sigdelset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

/// How long a thread out of work spins before it sleeps (see above).
constexpr std::chrono::microseconds kSpin{500};

/// One step of a spin: a pause on x86, nothing elsewhere.
inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// Spins until ready() holds (true) or kSpin has passed (false).
template <class Ready>
bool spin_until(Ready&& ready) {
  const auto start = std::chrono::steady_clock::now();
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    relax();
    if (i % 64 == 0) {
      if (std::chrono::steady_clock::now() - start >= kSpin) return ready();
      sched_yield();
    }
  }
}

struct Job {
  Job(std::size_t n, const std::function<void(std::size_t)>& f) : tasks(n), fn(f) {}
  const std::size_t tasks;
  const std::function<void(std::size_t)>& fn;
  std::atomic<std::size_t> next{0};  ///< the next task to hand out
  std::atomic<std::size_t> done{0};  ///< tasks finished
  std::mutex m;                      ///< guards error and the wake-up of the caller
  std::condition_variable finished;
  std::exception_ptr error;

  bool exhausted() const { return next.load(std::memory_order_relaxed) >= tasks; }

  /// Takes and runs tasks until none is left.
  void work() {
    for (;;) {
      const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= tasks) return;
      try {
        fn(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
      }
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == tasks) {
        const std::lock_guard<std::mutex> lock(m);
        finished.notify_all();
      }
    }
  }

  bool finished_all() const { return done.load(std::memory_order_acquire) == tasks; }

  void wait() {
    if (spin_until([&] { return finished_all(); })) return;
    std::unique_lock<std::mutex> lock(m);
    finished.wait(lock, [&] { return done.load(std::memory_order_acquire) == tasks; });
  }
};

class Pool {
 public:
  void run(std::size_t tasks, int threads, const std::function<void(std::size_t)>& fn) {
    auto job = std::make_shared<Job>(tasks, fn);
    const std::size_t helpers =
        std::min<std::size_t>(std::size_t(threads) - 1, tasks - 1);  // threads, tasks >= 2
    std::size_t sleeping = 0;
    {
      const std::lock_guard<std::mutex> lock(m_);
      grow(helpers);
      jobs_.push_back(job);
      queued_.fetch_add(1, std::memory_order_release);
      sleeping = sleepers_;
    }
    // Spinning threads see queued_ change; only sleeping ones need a wake-up.
    for (std::size_t i = 0; i < std::min(helpers, sleeping); ++i) wake_.notify_one();
    job->work();
    job->wait();
    {
      const std::lock_guard<std::mutex> lock(m_);
      jobs_.erase(std::remove(jobs_.begin(), jobs_.end(), job), jobs_.end());
    }
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  /// At least n threads (capped at usable_cpus() − 1). Called with m_ held. A thread that cannot
  /// be started is not an error: the callers run the tasks themselves.
  void grow(std::size_t n) {
    const std::size_t cap = std::size_t(std::max(1, usable_cpus()) - 1);
    while (threads_.size() < std::min(n, cap)) {
      try {
        threads_.emplace_back([this] {
          block_async_signals();
          // The pool serves the whole process: the normal policy, whatever its starter had (a
          // CPU worker beside the executor's device route runs under SCHED_BATCH).
          sched_param sp{};
          pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
          loop();
        });
      } catch (const std::system_error&) {
        return;
      }
    }
  }

  [[noreturn]] void loop() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      while (!jobs_.empty() && jobs_.front()->exhausted()) jobs_.pop_front();  // nothing left there
      if (jobs_.empty()) {
        const std::uint64_t seen = queued_.load(std::memory_order_acquire);
        lock.unlock();
        const bool queued =
            spin_until([&] { return queued_.load(std::memory_order_acquire) != seen; });
        lock.lock();
        if (!queued && jobs_.empty()) {
          ++sleepers_;
          wake_.wait(lock, [&] { return !jobs_.empty(); });
          --sleepers_;
        }
        continue;
      }
      std::shared_ptr<Job> job = jobs_.front();
      lock.unlock();
      job->work();
      lock.lock();
    }
  }

  std::mutex m_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> jobs_;
  std::atomic<std::uint64_t> queued_{0};  ///< jobs ever queued: what a spinning thread watches
  std::size_t sleepers_ = 0;              ///< threads waiting on wake_ (guarded by m_)
  std::vector<std::thread> threads_;      ///< never joined: they end with the process
};

std::atomic<Pool*> g_pool{nullptr};
std::once_flag g_atfork;

void forget_pool_in_child() { g_pool.store(nullptr); }  // the parent's pool stays, unused

Pool& pool() {
  std::call_once(g_atfork, [] { pthread_atfork(nullptr, nullptr, forget_pool_in_child); });
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p != nullptr) return *p;
  static std::mutex make;
  const std::lock_guard<std::mutex> lock(make);
  p = g_pool.load(std::memory_order_acquire);
  if (p == nullptr) {
    // Never destroyed: joining threads during static destruction (after other statics the
    // tasks may use are gone, or at a Python interpreter's exit) is not worth the risk.
    p = new Pool();
    g_pool.store(p, std::memory_order_release);
  }
  return *p;
}

}  // namespace

void run_tasks(std::size_t tasks, int threads, const std::function<void(std::size_t)>& fn) {
  if (threads <= 1 || tasks <= 1) {
    for (std::size_t i = 0; i < tasks; ++i) fn(i);
    return;
  }
  pool().run(tasks, threads, fn);
}

}  // namespace histeq::cpu::parallel
