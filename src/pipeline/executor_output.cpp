// executor_output.cpp — the executor's outputs and reports (executor_run.hpp): an output
// written and timed, the writer threads that write what the device route encoded, an item
// finished (its bytes leave the budget), and the reports handed to the caller in input order,
// from the calling thread, summed into the run's BatchSummary.
#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "executor_run.hpp"
#include "histeq/image_io.hpp"

namespace histeq {
namespace {

void add(ItemTimes& a, const ItemTimes& b) {
  a.read_ms += b.read_ms;
  a.decode_ms += b.decode_ms;
  a.upload_ms += b.upload_ms;
  a.equalize_ms += b.equalize_ms;
  a.download_ms += b.download_ms;
  a.encode_ms += b.encode_ms;
  a.write_ms += b.write_ms;
}

/// A failed item's error names its file: the decoders and writers say 'input' or 'output'
/// themselves; a cause that names neither gets the input's path in front, as the others read.
void name_the_file(ItemReport& rep) {
  if (rep.error.empty()) return;
  if (rep.error_kind == ItemError::none) rep.error_kind = ItemError::other;
  // A failed allocation says only "std::bad_alloc": say what it means.
  if (rep.error == std::bad_alloc().what() || rep.error == std::bad_array_new_length().what()) {
    rep.error = "out of memory";
    rep.error_kind = ItemError::memory;
  }
  const auto names = [&](const std::string& path) {
    return !path.empty() && rep.error.find("'" + path + "'") != std::string::npos;
  };
  if (!names(rep.input) && !names(rep.output)) rep.error = "'" + rep.input + "': " + rep.error;
}

/// An item's megapixels, as the summary and on_progress count them.
double megapixels(const ItemReport& rep) { return double(rep.width) * double(rep.height) / 1e6; }

}  // namespace

using detail::Clock;
using detail::Loaded;
using detail::ms_since;

void Executor::Run::finish(std::unique_ptr<Loaded> it) {
  name_the_file(it->rep);
  std::lock_guard<std::mutex> lock(mu);
  inflight_bytes -= it->cost;
  it->cost = 0;
  it->rep.ok = it->rep.ok && it->rep.error.empty();  // what the report says from here on
  if (it->rep.ok && sum.first_file_ms == 0) sum.first_file_ms = std::max(ms_since(t_run), 1e-3);
  ++finished_files;
  if (it->rep.ok) finished_mp += megapixels(it->rep);
  const std::size_t idx = it->index;
  finished.emplace(idx, std::move(it));
  cv_budget.notify_all();
  cv_done.notify_all();
  cv_work.notify_all();  // a worker waiting for the device's last items may be done
}

/// Writes an item's output (atomically: write_file_atomic) and times it. The write waits on the
/// disk (fsync), not on the CPU: a worker's CPU slot goes to another worker first.
void Executor::Run::write_output(Loaded& it, const std::vector<std::uint8_t>& bytes,
                                 bool holds_slot) {
  it.rep.output_bytes = bytes.size();
  if (holds_slot) give_slot();
  const auto t0 = Clock::now();
  write_file_atomic(it.rep.output, bytes.data(), bytes.size());
  it.rep.times.write_ms = ms_since(t0);
}

/// A writer thread: writes what the device route encoded.
void Executor::Run::writer() {
  for (;;) {
    Loaded* raw = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv_write.wait(lock, [&] { return !write_q.empty() || all_reported; });
      if (write_q.empty()) return;
      raw = write_q.front();
      write_q.pop_front();
    }
    std::unique_ptr<Loaded> it(raw);
    try {
      std::vector<std::uint8_t> bytes;
      bytes.swap(it->job.encoded);
      std::vector<std::uint8_t>().swap(it->bytes);
      write_output(*it, bytes, false);
      it->rep.ok = true;
    } catch (const std::exception& e) {
      set_error(it->rep, e);
    }
    finish(std::move(it));
  }
}

/// Reports in input order, on the calling thread; the first exception of on_done or on_progress
/// is kept (and rethrown by run() once every item is done), and neither callback is called after
/// it.
std::exception_ptr Executor::Run::report_loop(
    const std::function<void(const ItemReport&)>& on_done) {
  std::exception_ptr callback_error;
  const auto& on_progress = m.opt.on_progress;
  std::size_t told = 0;  // the finished items on_progress was last told of
  for (std::size_t next = 0; next < items.size(); ++next) {
    std::unique_ptr<Loaded> it;
    {
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
        if (on_progress && !callback_error && finished_files != told) {
          told = finished_files;
          const double mp = finished_mp;
          lock.unlock();
          try {
            on_progress(told, mp);
          } catch (...) {
            callback_error = std::current_exception();
          }
          lock.lock();
          continue;
        }
        if (finished.count(next) > 0) break;
        cv_done.wait(lock);
      }
      it = std::move(finished[next]);
      finished.erase(next);
    }
    ItemReport& rep = it->rep;  // (rep.ok final since finish)
    ++sum.files;
    if (!rep.ok) {
      ++sum.failures;
      if (rep.error_kind == ItemError::cancelled) ++sum.cancelled;
    } else {
      const double mp = megapixels(rep);
      sum.megapixels += mp;
      if (!rep.decoder.empty()) ++sum.decoders[rep.decoder];
      BatchSummary::Share& sh = sum.routes[rep.route.empty() ? "pixels" : rep.route];
      ++sh.files;
      sh.megapixels += mp;
    }
    add(sum.summed, rep.times);
    if (on_done && !callback_error) {
      try {
        on_done(rep);
      } catch (...) {
        callback_error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      --inflight_items;
    }
    cv_budget.notify_all();
  }
  return callback_error;
}

}  // namespace histeq
