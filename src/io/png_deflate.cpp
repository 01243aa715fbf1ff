// png_deflate.cpp — png::zlib_strips (png_deflate.hpp): a PNG's zlib stream compressed in strips
// by ISA-L's igzip on the calling thread and on helper threads.
//
// Why ISA-L and strips: a 5120x2880 RGB photograph spent 500-830 ms in one libdeflate level-1
// call on the H200 machine's cores, the longest stage of a PNG folder (the batch waits on its
// largest file). igzip's level 1 compresses the same filtered rows 2.3-2.6x faster than
// libdeflate's level 1 with 1-6 % more bytes (measured on the wallpapers of bench/e2e), and,
// unlike libdeflate, it can end a run of blocks with a sync flush and start the next with a
// dictionary: what lets independent threads write parts of one DEFLATE stream (as pigz does
// with zlib). zlib itself can do that too, but its level 1 and its Huffman-only mode cost about
// twice libdeflate's time on these rows (docs/benchmarks.md).
#include "io/png_deflate.hpp"

#include <isa-l/igzip_lib.h>
#include <libdeflate.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "io/signals.hpp"

namespace histeq::png {
namespace {

constexpr std::size_t kWindow = 32768;  // DEFLATE's history

/// A set of numbered tasks that any thread may take (an atomic counter hands out the numbers)
/// and the caller waits for.
struct Job {
  std::size_t count = 0;
  std::function<void(std::size_t)> task;
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::condition_variable cv;
  std::size_t done = 0;
  std::exception_ptr error;

  /// Runs tasks until none is left; false when there was none to take.
  bool run_some() {
    bool ran = false;
    for (std::size_t k; (k = next.fetch_add(1)) < count;) {
      ran = true;
      std::exception_ptr e;
      try {
        task(k);
      } catch (...) {
        e = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu);
      if (e && !error) error = e;
      if (++done == count) cv.notify_all();
    }
    return ran;
  }
};

/// Threads that take the tasks of posted jobs: one per usable core but one (the poster works
/// too). Made on first use and never destroyed (the process ends with them waiting).
class Helpers {
 public:
  static Helpers& get() {
    static Helpers* h = new Helpers(std::max(0, cpu::usable_cpus() - 1));
    return *h;
  }
  void post(const std::shared_ptr<Job>& job) {
    if (threads_ == 0) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(job);
    }
    cv_.notify_all();
  }

 private:
  explicit Helpers(int n) {
    for (int i = 0; i < n; ++i) {
      try {
        std::thread([this] {
          block_cleanup_signals();  // a SIGTERM must reach a thread that writes files
          // The helpers serve the whole process: the normal policy, whatever their starter had
          // (a CPU worker beside the executor's device route runs under SCHED_BATCH).
          sched_param sp{};
          pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
          loop();
        }).detach();
        ++threads_;
      } catch (const std::system_error&) {  // no more threads: the poster does the rest
        break;
      }
    }
  }
  void loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !jobs_.empty(); });
        // Jobs whose every task is taken are done with here (their posters wait for the rest).
        while (!jobs_.empty() && jobs_.front()->next.load() >= jobs_.front()->count)
          jobs_.pop_front();
        if (jobs_.empty()) continue;
        job = jobs_.front();
      }
      job->run_some();
    }
  }
  int threads_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;
};

/// The Adler-32 of a sequence made of part 1 (checksum a1) and part 2 (checksum a2, len2
/// bytes): part 2's running sums start from part 1's instead of from 1 (RFC 1950, 8.2).
std::uint32_t adler32_combine(std::uint32_t a1, std::uint32_t a2, std::uint64_t len2) {
  constexpr std::uint64_t kBase = 65521;
  const std::uint64_t s1a = a1 & 0xFFFF, s2a = a1 >> 16, s1b = a2 & 0xFFFF, s2b = a2 >> 16;
  const std::uint64_t s1 = (s1a + s1b + kBase - 1) % kBase;
  const std::uint64_t s2 = (s2a + s2b + (len2 % kBase) * ((s1a + kBase - 1) % kBase)) % kBase;
  return std::uint32_t(s2 << 16 | s1);
}

/// One thread's igzip stream and buffers, kept across strips and images.
struct Scratch {
  isal_zstream stream;
  std::unique_ptr<std::uint8_t[]> level_buf{new std::uint8_t[ISAL_DEF_LVL1_DEFAULT]};
  std::vector<std::uint8_t> rows, dict;
};

struct Strip {
  std::vector<std::uint8_t> bytes;  // raw DEFLATE blocks
  std::uint32_t adler = 1;
  std::size_t raw = 0;
};

void compress_strip(std::size_t k, std::size_t strips, std::size_t rows_per_strip, std::size_t rows,
                    std::size_t row_bytes, const FillRows& fill, Strip& out) {
  thread_local Scratch sc;
  const std::size_t y0 = k * rows_per_strip, y1 = std::min(rows, y0 + rows_per_strip);
  const std::size_t n = (y1 - y0) * row_bytes;
  sc.rows.resize(n);
  fill(y0, y1, sc.rows.data());
  isal_zstream& s = sc.stream;
  isal_deflate_init(&s);
  s.level = 1;
  s.level_buf = sc.level_buf.get();
  s.level_buf_size = ISAL_DEF_LVL1_DEFAULT;
  s.gzip_flag = IGZIP_DEFLATE;
  out.bytes.resize(n + n / 8 + 1024);
  std::size_t used = 0;
  std::size_t from = 0;  // the first row byte this call compresses (1: strip 0's first is stored)
  std::uint8_t* dict = nullptr;
  std::size_t dict_len = 0;
  if (k > 0) {  // the history the previous strip ends with, filtered again here
    const std::size_t dy = std::min(y0, (kWindow + row_bytes - 1) / row_bytes);
    sc.dict.resize(dy * row_bytes);
    fill(y0 - dy, y0, sc.dict.data());
    dict_len = std::min(kWindow, sc.dict.size());
    dict = sc.dict.data() + sc.dict.size() - dict_len;
  } else {
    // The stream's first byte in a stored block of its own, and the rest compressed with that
    // byte as the dictionary: igzip's level 1 (ISA-L 2.30 to this day, every SIMD variant)
    // hashes the third byte of a stream that starts without history from a register that
    // holds the isal_zstream's address instead of the input, so that one stream in a few
    // thousand found one more match, depending on where (ASLR) the stream was: the same rows
    // compressed to different bytes from run to run. A stream with a dictionary never takes
    // that path. Six bytes more a file: BFINAL 0 and BTYPE 00 padded to a byte, LEN 1, NLEN.
    constexpr std::uint8_t kStoredOne[5] = {0x00, 0x01, 0x00, 0xFE, 0xFF};
    std::copy(kStoredOne, kStoredOne + 5, out.bytes.data());
    out.bytes[5] = sc.rows[0];
    used = 6;
    from = 1;
    dict = sc.rows.data();
    dict_len = 1;
  }
  if (isal_deflate_set_dict(&s, dict, std::uint32_t(dict_len)) != COMP_OK)
    throw Error("ISA-L could not set a compression dictionary");
  const bool last = k + 1 == strips;
  s.end_of_stream = last ? 1 : 0;
  s.flush = last ? NO_FLUSH : SYNC_FLUSH;
  s.next_in = sc.rows.data() + from;
  s.avail_in = std::uint32_t(n - from);
  for (;;) {
    s.next_out = out.bytes.data() + used;
    s.avail_out = std::uint32_t(out.bytes.size() - used);
    if (isal_deflate(&s) != COMP_OK) throw Error("ISA-L could not compress the image");
    used = std::size_t(s.next_out - out.bytes.data());
    const bool flushed =
        s.avail_in == 0 && s.avail_out > 0 && (!last || s.internal_state.state == ZSTATE_END);
    if (flushed) break;
    out.bytes.resize(out.bytes.size() * 3 / 2);
  }
  out.bytes.resize(used);
  out.adler = std::uint32_t(libdeflate_adler32(1, sc.rows.data(), n));
  out.raw = n;
}

}  // namespace

std::vector<std::uint8_t> zlib_strips(std::size_t rows, std::size_t row_bytes, const FillRows& fill,
                                      std::size_t strip_bytes) {
  const std::size_t rows_per_strip =
      row_bytes == 0 ? 1 : std::max<std::size_t>(1, strip_bytes / row_bytes);
  const std::size_t strips = (rows + rows_per_strip - 1) / rows_per_strip;
  if (strips == 0 || row_bytes == 0 || row_bytes > UINT32_MAX / 2 ||
      rows_per_strip * row_bytes > UINT32_MAX / 2)
    throw Error("ISA-L: cannot compress " + std::to_string(rows) + " rows of " +
                std::to_string(row_bytes) + " bytes");
  std::vector<Strip> out(strips);
  auto job = std::make_shared<Job>();
  job->count = strips;
  job->task = [&](std::size_t k) {
    compress_strip(k, strips, rows_per_strip, rows, row_bytes, fill, out[k]);
  };
  if (strips > 1) Helpers::get().post(job);
  job->run_some();
  {
    std::unique_lock<std::mutex> lock(job->mu);
    job->cv.wait(lock, [&] { return job->done == job->count; });
    if (job->error) std::rethrow_exception(job->error);
  }
  std::size_t total = 2 + 4;
  for (const Strip& s : out) total += s.bytes.size();
  std::vector<std::uint8_t> z;
  z.reserve(total);
  z.push_back(0x78);  // CMF: DEFLATE, 32 KiB window
  z.push_back(0x01);  // FLG: fastest compression, no dictionary; (0x78 << 8 | 0x01) % 31 == 0
  std::uint32_t adler = 1;
  for (Strip& s : out) {
    z.insert(z.end(), s.bytes.begin(), s.bytes.end());
    adler = adler32_combine(adler, s.adler, s.raw);
    std::vector<std::uint8_t>().swap(s.bytes);
  }
  for (int sh = 24; sh >= 0; sh -= 8) z.push_back(std::uint8_t(adler >> sh));
  return z;
}

}  // namespace histeq::png
