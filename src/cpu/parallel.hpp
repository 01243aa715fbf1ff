// cpu/parallel.hpp — the CPU backend's threads: a pool kept for the process, so that a call on
// a 1-megapixel image does not pay for starting and joining threads (tens of microseconds each,
// as much as the work itself).
#pragma once
#include <cstddef>
#include <functional>

namespace histeq::cpu::parallel {

/// Runs fn(i) for every i in [0, tasks) on the calling thread and on up to `threads` − 1 threads
/// of the pool (made on first use, grown to usable_cpus() − 1 at most; the child of a fork()
/// makes its own). Tasks are taken in order, one at a time, by whoever is free, so the caller
/// runs them all itself when the pool is busy with another caller's tasks (no deadlock, no
/// oversubscription). A pool thread out of work spins for up to half a millisecond (yielding the
/// core to any other runnable thread) before it sleeps, so that jobs started in a row, as
/// CLAHE's and equalization's stages are, reach it without a wake-up. Returns when every task has
/// finished; the first exception a task threw is rethrown then. threads <= 1 or tasks <= 1:
/// everything on the calling thread.
void run_tasks(std::size_t tasks, int threads, const std::function<void(std::size_t)>& fn);

}  // namespace histeq::cpu::parallel
