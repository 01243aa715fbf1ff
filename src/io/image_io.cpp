// image_io.cpp — 8-bit image files in and out, with stb_image / stb_image_write (Debian
// libstb-dev; the implementations are compiled here, once, from the system headers) and, for
// writing PNG, histeq's own writer on libdeflate (write_png8: see "the PNG writer" below), and
// for binary PGM/PPM its own few lines (write_pnm8).
//
// Loading reads the whole file into memory first (so that a missing file, a directory or an
// empty file gets its own message), checks the header's dimensions with stbi_info_from_memory
// before any pixel memory is allocated, then decodes. Saving encodes to memory, writes a
// temporary file in the target's folder, fsyncs it and renames it over the target, so the
// target is either the complete new image or untouched (and may be the input file itself); an
// existing target that is not a regular file (FIFO, device) is written directly, as cp does.
#include "histeq/image_io.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <new>
#include <thread>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "histeq/codec_names.hpp"
#include "histeq/error.hpp"
#include "histeq/jpeg_codec.hpp"
#include "io/decode_checks.hpp"
#include "io/png_checks.hpp"
#include "io/png_deflate.hpp"
#include "io/pnm_write.hpp"
#include "io/signals.hpp"
#include "png_fast.hpp"

#include <libdeflate.h>

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#if !defined(__clang__)
#pragma GCC diagnostic ignored \
    "-Wstringop-overflow"  // false positives once stb is static (inlined)
#endif
#endif
// Defense in depth: every buffer stb_image allocates starts zeroed (calloc; a realloc zeroes
// what it adds), so that no decoder bug can hand back earlier heap contents as pixels
// (test_cli_hostile_decode: DecodedPixelsDoNotDependOnHeapContents). stb's symbols stay private to
// this file (STB_IMAGE_STATIC, STB_IMAGE_WRITE_STATIC): a program linking libhisteq_host.a may
// compile its own copy of stb (CTest no_stb_symbols_exported).
namespace {
void* histeq_stbi_realloc_zeroed(void* p, std::size_t old_size, std::size_t new_size) {
  void* q = std::realloc(p, new_size);
  if (q && new_size > old_size)
    std::memset(static_cast<char*>(q) + old_size, 0, new_size - old_size);
  return q;
}
}  // namespace
#define STBI_MALLOC(sz) std::calloc(1, (sz))
#define STBI_REALLOC_SIZED(p, oldsz, newsz) histeq_stbi_realloc_zeroed((p), (oldsz), (newsz))
#define STBI_FREE(p) std::free(p)
#define STB_IMAGE_STATIC
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO  // we read files ourselves
// Only the documented input formats are compiled in (a smaller attack surface: PSD, HDR, PIC
// and Softimage decoders never see a user's file). Every format that stb decodes is fuzzed
// (tests/fuzz/, docs/reliability.md).
// JPEG is not among them: libjpeg-turbo decodes every JPEG (jpeg_codec.hpp). stb's JPEG
// decoder stayed reachable for files libjpeg's dispatch does not claim (fill bytes before the
// SOI), and it decodes a JPEG without scans or Huffman tables from zero-filled buffers (issue 12,
// hostile-jpeg-fill-bytes-before-soi.jpg); without it such a file is "unknown image type".
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_TGA
#define STBI_ONLY_GIF
#define STBI_ONLY_PNM
// Decoded sizes stay far below stb's own INT_MAX checks: 2^24 pixels per side at most (stb's
// default, stated here so that it does not change under us).
#define STBI_MAX_DIMENSIONS (1 << 24)
#include <stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO  // we write files ourselves
// stb_image_write writes BMP and TGA only: PNG is written by histeq itself (write_png8 below).
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace histeq {
namespace fs = std::filesystem;

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

enum class Format { png, jpg, bmp, tga, pnm };

/// Format of an extension (".png" or "png", any case); false when not one we write.
bool format_of(std::string ext, Format* out) {
  ext = lower(std::move(ext));
  if (!ext.empty() && ext[0] == '.') ext.erase(0, 1);
  if (ext == "png")
    *out = Format::png;
  else if (ext == "jpg" || ext == "jpeg")
    *out = Format::jpg;
  else if (ext == "bmp")
    *out = Format::bmp;
  else if (ext == "tga")
    *out = Format::tga;
  else if (ext == "pgm" || ext == "ppm" || ext == "pnm")
    *out = Format::pnm;
  else
    return false;
  return true;
}

constexpr const char* kValidExtensions = ".png, .jpg, .jpeg, .bmp, .tga, .pgm, .ppm, .pnm";

const char* file_type_name(mode_t m) {
  if (S_ISDIR(m)) return "it is a directory";
  if (S_ISFIFO(m)) return "it is a FIFO (named pipe), not a regular file";
  if (S_ISSOCK(m)) return "it is a socket, not a regular file";
  if (S_ISCHR(m)) return "it is a character device, not a regular file";
  if (S_ISBLK(m)) return "it is a block device, not a regular file";
  return "it is not a regular file";
}

/// The whole file in memory. Opened with O_NONBLOCK and checked with fstat on the open file
/// (no race between the check and the read): only regular files are read, so a FIFO, a device
/// or a socket is refused at once instead of blocking or reading forever. The size is checked
/// against what the decoder takes before anything is allocated.
std::vector<std::uint8_t> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    throw FileError(
        "cannot read " + quoted(path) + ": " +
            (err == ENOENT ? std::string("no such file") : std::string(std::strerror(err))),
        err, path);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw FileError("cannot read " + quoted(path) + ": " + std::strerror(errno), errno, path);
  if (!S_ISREG(st.st_mode))
    throw FileError("cannot read " + quoted(path) + ": " + file_type_name(st.st_mode),
                    S_ISDIR(st.st_mode) ? EISDIR : 0, path);
  if (st.st_size == 0) throw DecodeError("cannot read " + quoted(path) + ": the file is empty");
  if (std::uint64_t(st.st_size) > std::uint64_t(INT_MAX))
    throw DecodeError("cannot read " + quoted(path) + ": " + std::to_string(st.st_size) +
                      " bytes is too large to decode (the decoder takes at most " +
                      std::to_string(INT_MAX) + " bytes)");
  std::vector<std::uint8_t> data(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw FileError("cannot read " + quoted(path) + ": " + std::strerror(errno), errno, path);
    }
    if (n == 0) break;  // shrank while we read: decode what is there (it will say truncated)
    done += std::size_t(n);
  }
  data.resize(done);
  if (data.empty()) throw DecodeError("cannot read " + quoted(path) + ": the file is empty");
  return data;
}

void append_bytes(void* ctx, void* data, int size) {
  auto* v = static_cast<std::vector<std::uint8_t>*>(ctx);
  const auto* p = static_cast<const std::uint8_t*>(data);
  v->insert(v->end(), p, p + size);
}

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

extern "C" void histeq_cleanup_handler(int sig) {
  const int saved_errno = errno;
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

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

/// stb_image's zlib decoder with a fixed output buffer (it never grows it: more output than
/// `cap` fails with "output buffer limit"). For detail::structure_problem's PNG check.
int bounded_inflate(char* out, int cap, const char* in, int in_len, bool zlib_header,
                    const char** why) {
  const int n = zlib_header ? stbi_zlib_decode_buffer(out, cap, in, in_len)
                            : stbi_zlib_decode_noheader_buffer(out, cap, in, in_len);
  if (n < 0 && why) *why = stbi_failure_reason();
  return n;
}

/// Why stbi_info_from_memory failed. It tries every format in turn, so its own reason is always
/// the last one's ("unknown image type"); for a file whose signature names a format, ask that
/// format's header parser again (stb_image internals, compiled in this file) for its reason
/// ("0-pixel image", "too large", "bad IHDR len", ...).
const char* format_failure_reason(const std::uint8_t* data, int len) {
  using Test = int (*)(stbi__context*);
  using Info = int (*)(stbi__context*, int*, int*, int*);
  const std::pair<Test, Info> formats[] = {{stbi__png_test, stbi__png_info},
                                           {stbi__gif_test, stbi__gif_info},
                                           {stbi__bmp_test, stbi__bmp_info}};
  for (const auto& [test, info] : formats) {
    stbi__context s;
    stbi__start_mem(&s, data, len);
    if (!test(&s)) continue;
    stbi__start_mem(&s, data, len);
    int x = 0, y = 0, c = 0;
    if (!info(&s, &x, &y, &c)) {
      const char* why = stbi_failure_reason();
      return why ? why : "corrupt header";
    }
    return "corrupt header";  // only the full probe failed (should not happen)
  }
  return "unknown image type";
}

/// Pre-check of a JPEG's Huffman tables, before stb_image sees the file.
///
/// stb_image 2.27 (Debian 12's libstb-dev) does not bound the number of codes in a DHT table:
/// with 16 code-length counts summing to more than 256 it writes past stbi__huffman::size[257]
/// and ::values[256] inside its decoder state (heap memory). Found by fuzz_decode_equalize;
/// fixed upstream in stb_image 2.28 ("bad DHT header"); regression input in
/// tests/fuzz/crashes/decode/. This walks the file the way stb's parser does — segments by their
/// length before and after the frame header, entropy-coded data up to the next marker that is
/// not a stuffed 0xFF00 or a restart — and checks every DHT table that stb would read. Where
/// stb's own parser would stop with an error, the walk stops too (stb rejects the file then).
/// Returns nullptr, or the reason to refuse the file.
const char* jpeg_huffman_problem(const std::uint8_t* d, std::size_t len) {
  // SOI as stbi__get_marker reads it: 0xFF, any number of fill 0xFFs, then 0xD8 (a second
  // fuzzer finding: 122 leading 0xFFs got a bad DHT past a check that wanted FF D8 at 0).
  if (len < 2 || d[0] != 0xFF) return nullptr;
  std::size_t pos = 1;
  while (pos < len && d[pos] == 0xFF) ++pos;
  if (pos >= len || d[pos] != 0xD8) return nullptr;  // not a JPEG
  ++pos;
  auto get8 = [&]() -> unsigned {
    return pos < len ? d[pos++] : (pos++, 0u);
  };  // 0 past the end, as stb
  auto get16 = [&]() -> unsigned {
    const unsigned hi = get8();
    return (hi << 8) | get8();
  };
  bool frame_seen = false;  // after SOF: no junk between segments, SOS allowed
  while (pos < len) {
    // A marker: 0xFF, fill 0xFFs, then the code (stbi__get_marker).
    if (d[pos] != 0xFF) {
      if (frame_seen) return nullptr;  // stb: "expected marker"
      ++pos;                           // stb skips padding between header segments
      continue;
    }
    while (pos < len && d[pos] == 0xFF) ++pos;
    if (pos >= len) return nullptr;
    const unsigned m = d[pos++];
    if (m == 0xD9) return nullptr;  // EOI
    if (m == 0xC4) {                // DHT: the tables, read exactly as stb reads them
      long remaining = long(get16()) - 2;
      while (remaining > 0) {
        const unsigned q = get8();
        if ((q >> 4) > 1 || (q & 15) > 3) return nullptr;  // stb: "bad DHT header"
        unsigned n = 0;
        for (int i = 0; i < 16; ++i) n += get8();
        if (n > 256) return "corrupt JPEG: a Huffman table (DHT) declares more than 256 codes";
        pos += n;
        remaining -= 17 + long(n);
      }
      if (remaining != 0) return nullptr;  // stb: error
      continue;
    }
    if (m == 0xC0 || m == 0xC1 || m == 0xC2 || m == 0xDB || m == 0xDD || (m >= 0xE0 && m <= 0xEF) ||
        m == 0xFE || (frame_seen && m == 0xDA)) {
      const unsigned seg = get16();
      if (seg < 2) return nullptr;  // stb: bad length
      pos += seg - 2;
      if (m == 0xC0 || m == 0xC1 || m == 0xC2) frame_seen = true;
      if (m == 0xDA) {  // entropy-coded data: up to a marker that is neither 0xFF00 nor RSTn
        for (;;) {
          while (pos < len && d[pos] != 0xFF) ++pos;
          if (pos >= len) return nullptr;
          std::size_t q = pos + 1;
          while (q < len && d[q] == 0xFF) ++q;
          if (q >= len) return nullptr;
          if (d[q] == 0x00 || (d[q] >= 0xD0 && d[q] <= 0xD7)) {
            pos = q + 1;
            continue;
          }
          pos = q;  // d[pos - 1] == 0xFF: the loop above reads this marker next
          --pos;
          break;
        }
      }
      continue;
    }
    if (frame_seen && m == 0xDC) {  // DNL: stb reads 4 bytes
      pos += 4;
      continue;
    }
    return nullptr;  // any other marker: stb stops with "unknown marker"
  }
  return nullptr;
}

/// Pre-check of a binary PNM header (P5/P6), read exactly as stb_image 2.27 reads it
/// (stbi__pnm_info: whitespace, '#' comments to the end of the line, three decimal integers).
/// stb accumulates each integer in an int without an overflow check (signed overflow, UB; a
/// wrapped width, height or maximum value): found by fuzz_decode_equalize, fixed upstream in
/// stb_image 2.28 ("integer parse overflow"); regression input in tests/fuzz/crashes/decode/.
/// Returns nullptr, or the reason to refuse the file.
const char* pnm_header_problem(const std::uint8_t* d, std::size_t len) {
  if (len < 2 || d[0] != 'P' || (d[1] != '5' && d[1] != '6')) return nullptr;
  std::size_t pos = 2;
  auto at_eof = [&] { return pos >= len; };
  auto get8 = [&]() -> char { return pos < len ? char(d[pos++]) : char(0); };
  auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  char c = get8();
  auto skip_whitespace = [&] {
    for (;;) {
      while (!at_eof() && is_space(c)) c = get8();
      if (at_eof() || c != '#') break;
      while (!at_eof() && c != '\n' && c != '\r') c = get8();
    }
  };
  auto integer_fits = [&] {
    std::uint64_t value = 0;
    while (!at_eof() && c >= '0' && c <= '9') {
      value = value * 10 + std::uint64_t(c - '0');
      if (value > std::uint64_t(INT_MAX)) return false;
      c = get8();
    }
    return true;
  };
  for (int field = 0; field < 3; ++field) {  // width, height, maximum value
    skip_whitespace();
    if (!integer_fits())
      return "corrupt PNM header: a number (width, height or maximum value) does not fit in 31 "
             "bits";
  }
  return nullptr;
}

// ---------------------------------------------------------------- the PNG writer
// histeq writes 8-bit PNG files itself rather than with stbi_write_png_to_func, because stb's
// filter loop was about half of the encode: a 5120x2880 RGB photograph at --png-level 1 took
// ~600 ms on one core, ~270 ms of it in libdeflate, and level 0 (deflate only stores) still
// ~330 ms. stb filters a byte at a time (a call and three data-dependent branches per byte) and
// copies the data three more times (line buffer to rows, zlib output to file, file to the
// caller's vector). Here the Paeth filter runs a row at a time with no branch on the data, 16 bytes
// per step with SSE2 (every x86-64 CPU has it), a scalar twin elsewhere and for the ends of rows;
// the zlib stream is copied once, into the file. perf on the 2-core build machine, one 14.7 MP
// RGB encode (bench_cpu_stages --png-level 1, docs/benchmarks.md): filter 60 -> 21 ms, copies
// 19 -> 6 ms; libdeflate's time is unchanged. What is reused: libdeflate's zlib compressor (one
// per thread and level, as stb's STBIW_ZLIB_COMPRESS hook used it), libdeflate_crc32 for the
// chunk CRCs, png::insert_iccp for the ICC profile. stb_image_write still writes BMP and TGA.
//
// The file is byte for byte what stb_image_write 1.16 wrote with stbi_write_force_png_filter = 4
// and that libdeflate hook (tests/test_host_png_write.cpp compares the two):
//  - signature; IHDR (width, height, depth 8, colour type 0/4/2/6 for 1/2/3/4 channels,
//    compression, filter and interlace 0); [iCCP, inserted after IHDR]; one IDAT holding the
//    zlib stream of all filtered rows; IEND;
//  - every row starts with filter type 4 (Paeth: the best of the five filters on photographs,
//    at a fraction of the cost of trying all five per row, as stb does by default). On row 0,
//    stb's "first row" mapping turns a forced Paeth into its type 6 (x - left), which is Paeth
//    with a zero row above (paeth(a, 0, 0) = a); the first pixel of the other rows gets
//    x - above, Paeth with zero neighbours on the left (paeth(0, b, 0) = b). So the bytes are
//    the PNG spec's Paeth filter.

/// libdeflate's compressor for `level` (0..9), one per thread and level, kept for reuse (its
/// allocation is a few hundred KiB); nullptr when out of memory.
libdeflate_compressor* png_compressor(int level) {
  struct Compressors {
    libdeflate_compressor* c[10] = {};
    ~Compressors() {
      for (auto* p : c)
        if (p) libdeflate_free_compressor(p);
    }
  };
  thread_local Compressors cs;
  if (!cs.c[level]) cs.c[level] = libdeflate_alloc_compressor(level);
  return cs.c[level];
}

/// The Paeth predictor of PNG (ISO/IEC 15948, 9.4) without branches: p = a + b - c, and the
/// distances |p - a| = |b - c|, |p - b| = |a - c|, |p - c| = |a + b - 2c|; ties go to a, then b.
inline int paeth_predict(int a, int b, int c) {
  const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
  const int bc = pb <= pc ? b : c;
  return (pa <= pb && pa <= pc) ? a : bc;
}

/// Paeth-filtered bytes [from, n) of a row `cur` under the row `up` (from >= bpp).
void paeth_row_scalar(const std::uint8_t* __restrict cur, const std::uint8_t* __restrict up,
                      std::size_t bpp, std::size_t from, std::size_t n,
                      std::uint8_t* __restrict out) {
  for (std::size_t i = from; i < n; ++i)
    out[i] = std::uint8_t(cur[i] - paeth_predict(cur[i - bpp], up[i], up[i - bpp]));
}

#if defined(__SSE2__)
/// |v| of 16-bit lanes (SSE2 has no pabsw: max(v, -v); lanes here are within -510..510).
inline __m128i abs_epi16(__m128i v) {
  return _mm_max_epi16(v, _mm_sub_epi16(_mm_setzero_si128(), v));
}

/// paeth_predict on eight 16-bit lanes, with the same ties.
inline __m128i paeth_predict_epi16(__m128i a, __m128i b, __m128i c) {
  const __m128i bc = _mm_sub_epi16(b, c), ac = _mm_sub_epi16(a, c);
  const __m128i pa = abs_epi16(bc), pb = abs_epi16(ac), pc = abs_epi16(_mm_add_epi16(bc, ac));
  const __m128i take_c = _mm_cmpgt_epi16(pb, pc);  // pb > pc: c, else b
  const __m128i b_or_c = _mm_or_si128(_mm_and_si128(take_c, c), _mm_andnot_si128(take_c, b));
  const __m128i not_a = _mm_or_si128(_mm_cmpgt_epi16(pa, pb), _mm_cmpgt_epi16(pa, pc));
  return _mm_or_si128(_mm_and_si128(not_a, b_or_c), _mm_andnot_si128(not_a, a));
}

/// paeth_row_scalar for 16 bytes at a time from `from`; returns where it stopped (the scalar
/// twin does the rest of the row).
std::size_t paeth_row_sse2(const std::uint8_t* cur, const std::uint8_t* up, std::size_t bpp,
                           std::size_t from, std::size_t n, std::uint8_t* out) {
  const __m128i zero = _mm_setzero_si128();
  std::size_t i = from;
  for (; i + 16 <= n; i += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cur + i));
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cur + i - bpp));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(up + i));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(up + i - bpp));
    const __m128i lo = paeth_predict_epi16(_mm_unpacklo_epi8(a, zero), _mm_unpacklo_epi8(b, zero),
                                           _mm_unpacklo_epi8(c, zero));
    const __m128i hi = paeth_predict_epi16(_mm_unpackhi_epi8(a, zero), _mm_unpackhi_epi8(b, zero),
                                           _mm_unpackhi_epi8(c, zero));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm_sub_epi8(x, _mm_packus_epi16(lo, hi)));
  }
  return i;
}
#endif

/// One row (n = width x bpp bytes) Paeth-filtered into out[0, n); up == nullptr for row 0.
void paeth_filter_row(const std::uint8_t* __restrict cur, const std::uint8_t* __restrict up,
                      std::size_t bpp, std::size_t n, std::uint8_t* __restrict out) {
  if (!up) {  // row 0: the row above is zero, Paeth is x - left
    for (std::size_t i = 0; i < bpp; ++i) out[i] = cur[i];
    for (std::size_t i = bpp; i < n; ++i) out[i] = std::uint8_t(cur[i] - cur[i - bpp]);
    return;
  }
  for (std::size_t i = 0; i < bpp; ++i) out[i] = std::uint8_t(cur[i] - up[i]);  // x - above
  std::size_t i = bpp;
#if defined(__SSE2__)
  i = paeth_row_sse2(cur, up, bpp, i, n, out);
#endif
  paeth_row_scalar(cur, up, bpp, i, n, out);
}

void put_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = std::uint8_t(v >> 24);
  p[1] = std::uint8_t(v >> 16);
  p[2] = std::uint8_t(v >> 8);
  p[3] = std::uint8_t(v);
}

/// Appends a chunk's length and type; the caller appends its data, then append_crc.
void append_chunk_head(std::vector<std::uint8_t>& out, std::uint32_t len, const char* type) {
  std::uint8_t head[8];
  put_be32(head, len);
  std::memcpy(head + 4, type, 4);
  out.insert(out.end(), head, head + 8);
}

/// Appends the CRC-32 of the last chunk (its type and `len` bytes of data).
void append_crc(std::vector<std::uint8_t>& out, std::size_t len) {
  std::uint8_t crc[4];
  put_be32(crc, std::uint32_t(libdeflate_crc32(0, out.data() + out.size() - len - 4, len + 4)));
  out.insert(out.end(), crc, crc + 4);
}

/// The PNG file of an 8-bit image of 1..4 channels (checked by encode_image) at zlib `level`
/// 0..9, with its ICC profile when it fits the channels (see above). Throws Error when memory or
/// libdeflate fails.
std::vector<std::uint8_t> write_png8(const Image& img, int level) {
  const std::size_t w = std::size_t(img.width), h = std::size_t(img.height);
  const std::size_t bpp = std::size_t(img.channels), stride = w * bpp, row = stride + 1;
  const std::size_t raw_size = row * h;
  auto fail = [&](const char* why) {
    return Error("cannot encode a " + std::to_string(w) + "x" + std::to_string(h) + "x" +
                 std::to_string(bpp) + " .png image: " + why);
  };
  const std::uint8_t* px = img.pixels.data();
  const auto fill = [&](std::size_t y0, std::size_t y1, std::uint8_t* dst) {
    for (std::size_t y = y0; y < y1; ++y, dst += row) {
      dst[0] = 4;  // Paeth
      paeth_filter_row(px + y * stride, y ? px + (y - 1) * stride : nullptr, bpp, stride, dst + 1);
    }
  };
  std::vector<std::uint8_t> zlib;
  if (level == png::kStripPngLevel) {
    zlib = png::zlib_strips(h, row, fill);  // ISA-L, strips on several threads
  } else {
    // Not value-initialized: every byte is written below.
    std::unique_ptr<std::uint8_t[]> filtered(new (std::nothrow) std::uint8_t[raw_size]);
    if (!filtered) throw fail("out of memory");
    fill(0, h, filtered.get());
    libdeflate_compressor* comp = png_compressor(level);
    if (!comp) throw fail("out of memory (libdeflate compressor)");
    zlib.resize(libdeflate_zlib_compress_bound(comp, raw_size));
    zlib.resize(libdeflate_zlib_compress(comp, filtered.get(), raw_size, zlib.data(), zlib.size()));
    if (zlib.empty()) throw fail("libdeflate could not compress it");
  }
  const std::size_t zlen = zlib.size();
  if (zlen > std::size_t(INT_MAX) - 64) throw fail("the compressed image is over 2 GiB");

  static const std::uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  static const std::uint8_t kColourType[5] = {0, 0, 4, 2, 6};  // by channels, as stb writes
  std::vector<std::uint8_t> out(kSig, kSig + 8);
  append_chunk_head(out, 13, "IHDR");
  std::uint8_t ihdr[13] = {0, 0, 0, 0, 0, 0, 0, 0, 8, kColourType[bpp], 0, 0, 0};
  put_be32(ihdr, std::uint32_t(w));
  put_be32(ihdr + 4, std::uint32_t(h));
  out.insert(out.end(), ihdr, ihdr + 13);
  append_crc(out, 13);
  // The ICC profile right after IHDR (while the file is still 33 bytes: nothing to move).
  if (jpeg::icc_fits(img.icc, img.channels)) png::insert_iccp(out, img.icc);
  out.reserve(out.size() + 12 + zlen + 12);
  append_chunk_head(out, std::uint32_t(zlen), "IDAT");
  out.insert(out.end(), zlib.begin(), zlib.end());
  append_crc(out, zlen);
  append_chunk_head(out, 0, "IEND");
  append_crc(out, 0);
  return out;
}

}  // namespace

namespace {
Image decode_image_checked(const std::uint8_t* data, std::size_t size, const std::string& name,
                           std::uint64_t max_pixels, std::string* decoder);
}  // namespace

Image decode_image(const std::uint8_t* data, std::size_t size, const std::string& name,
                   std::uint64_t max_pixels, std::string* decoder) {
  try {
    return decode_image_checked(data, size, name, max_pixels, decoder);
  } catch (const DecodeError&) {
    throw;
  } catch (const Error& e) {  // every refusal of the decoders is about the data
    throw DecodeError(e.what());
  }
}

namespace {
Image decode_image_checked(const std::uint8_t* data, std::size_t size, const std::string& name,
                           std::uint64_t max_pixels, std::string* decoder) {
  std::string unused;
  std::string& used = decoder ? *decoder : unused;
  used.clear();
  if (size == 0) throw Error("cannot read " + quoted(name) + ": the file is empty");
  if (size > std::size_t(INT_MAX))
    throw Error(quoted(name) + " is too large to decode (" + std::to_string(size) +
                " bytes; the decoder takes at most " + std::to_string(INT_MAX) + ")");
  // JPEG: libjpeg-turbo (jpeg_codec.hpp), so that pixels equal OpenCV's/Pillow's decode.
  if (jpeg::is_jpeg(data, size)) {
    used = codec::kLibjpegTurbo;
    return jpeg::decode(data, size, name, {max_pixels});
  }
  const int len = static_cast<int>(size);
  if (const char* why = jpeg_huffman_problem(data, size))
    throw Error(quoted(name) + " is not a decodable image: " + why);
  if (const char* why = pnm_header_problem(data, size))
    throw Error(quoted(name) + " is not a decodable image: " + why);
  // PNG chunks before stb_image sees them (io/png_checks.hpp): each within the file (stb grows
  // its buffer to a declared length first), each CRC (stb checks none).
  if (std::string why = detail::png_chunk_problem(data, size); !why.empty())
    throw Error(quoted(name) + " is not a decodable image: " + why);
  auto check_dims = [&](std::uint64_t w, std::uint64_t h) {
    if (w == 0 || h == 0)
      throw Error(quoted(name) + " has zero width or height: " + std::to_string(w) + "x" +
                  std::to_string(h));
    const std::uint64_t pixels = w * h;  // both < 2^32: no overflow
    if (pixels > max_pixels)
      throw Error(quoted(name) + " is " + std::to_string(w) + "x" + std::to_string(h) + " = " +
                  std::to_string(pixels) + " pixels, over the limit of " +
                  std::to_string(max_pixels) + " pixels");
  };
  // PNG: the IHDR's dimensions first, so that sizes stb_image rejects itself ("0-pixel image",
  // "too large") still get the message that names them and the limit.
  static const std::uint8_t kPngSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= 24 && std::memcmp(data, kPngSig, 8) == 0 && std::memcmp(data + 12, "IHDR", 4) == 0)
    check_dims(be32(data + 16), be32(data + 20));
  // Binary PNM (P5/P6): decoded here (detail::pnm_decode: data length checked before
  // allocating, any maxval 1..65535 scaled, 16-bit samples big-endian), not by stb.
  if (detail::is_binary_pnm(data, size)) {
    detail::PnmHeader pnm;
    if (std::string why = detail::pnm_header(data, size, &pnm); !why.empty())
      throw Error(quoted(name) + " is not a decodable image: " + why);
    check_dims(pnm.width, pnm.height);
    Image img;
    if (std::string why = detail::pnm_decode(data, size, pnm, &img); !why.empty())
      throw Error(quoted(name) + " is not a decodable image: " + why);
    used = codec::kPnm;
    return img;
  }
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(data, len, &w, &h, &comp))
    throw Error(quoted(name) + " is not a decodable image: " + format_failure_reason(data, len));
  if (h < 0 && h > -STBI_MAX_DIMENSIONS - 1 && detail::bmp_is_top_down(data, size))
    h = -h;  // a top-down BMP: stb's info gives the stored (negative) height, its decoder flips
  check_dims(std::uint64_t(std::max(w, 0)), std::uint64_t(std::max(h, 0)));
  // The common PNG (8-bit gray, gray+alpha, RGB, RGBA; not interlaced; no tRNS, no PLTE): the
  // batch executor's decoder (png_fast.cpp: libdeflate's inflate, several times faster than
  // stb's; the same pixels). Every check above has passed; it declines every other PNG and every
  // one that the checks below would refuse (zlib data that does not inflate to exactly the
  // image, trailing data, a bad Adler-32, more data than the header needs), which then goes on
  // to them and to stb_image as before.
  if (size >= 8 && std::memcmp(data, kPngSig, 8) == 0) {
    static const std::shared_ptr<Codec> fast_png = make_fast_png_decoder();  // stateless
    Image img;
    if (fast_png->decode(data, size, name, max_pixels, &img)) {
      img.icc = png::read_iccp(data, size);  // as below
      used = codec::kLibdeflatePng;
      return img;
    }
  }
  // The file's own structure (BMP, TGA, GIF, PNG): data long enough for every pixel, palette
  // indices within the palette, complete LZW/zlib data, no decompression bomb.
  if (std::string why = detail::structure_problem(data, size, bounded_inflate); !why.empty())
    throw Error(quoted(name) + " is not a decodable image: " + why);
  int dw = 0, dh = 0, dc = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> px(stbi_load_from_memory(data, len, &dw, &dh, &dc, 0),
                                               stbi_image_free);
  if (!px) {
    // stb's format probes leave their own reason behind when a decoder fails without one
    // ("bad png sig" for a cut JPEG): name the file's format and the defect class instead.
    const std::string why = stbi_failure_reason() ? stbi_failure_reason() : "";
    const bool probe_reason = why.empty() || why == "bad png sig" || why == "not BMP" ||
                              why == "not GIF" || why == "not PSD" || why == "not PIC" ||
                              why == "bad file";
    throw Error(quoted(name) + " is not a decodable image: " +
                (probe_reason ? std::string("corrupt or truncated ") +
                                    detail::format_name(data, size) + " data"
                              : why));
  }
  if (dw != w || dh != h || dc < 1 || dc > 4)
    throw Error(quoted(name) + " decoded to an unexpected shape " + std::to_string(dw) + "x" +
                std::to_string(dh) + "x" + std::to_string(dc));
  Image img;
  img.width = dw;
  img.height = dh;
  img.channels = dc;
  img.pixels.assign(px.get(), px.get() + img.byte_count());
  img.icc = png::read_iccp(data, size);  // empty unless a PNG with an iCCP chunk
  used = codec::kStbImage;
  return img;
}
}  // namespace

std::vector<std::uint8_t> read_image_file(const std::string& path) { return read_file(path); }

Image load_image(const std::string& path, std::uint64_t max_pixels) {
  const std::vector<std::uint8_t> data = read_file(path);
  return decode_image(data.data(), data.size(), path, max_pixels);
}

void install_signal_cleanup() {
  for (int sig : kCleanupSignals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    if (old.sa_handler == SIG_IGN) continue;  // e.g. nohup: keep ignoring, as the caller asked
    struct sigaction sa {};
    sa.sa_handler = histeq_cleanup_handler;
    sigemptyset(&sa.sa_mask);
    for (int other : kCleanupSignals) sigaddset(&sa.sa_mask, other);
    sa.sa_flags = 0;
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

namespace {

/// A binary PGM (P5) or PPM (P6) of maxval 255: the header, then the samples as they are.
std::vector<std::uint8_t> write_pnm8(const Image& img, const std::string& ext_in) {
  std::string ext = lower(ext_in);
  if (!ext.empty() && ext[0] != '.') ext = "." + ext;
  const char kind = detail::pnm_kind(ext, img.channels, 8);
  const std::string head = std::string("P") + kind + "\n" + std::to_string(img.width) + " " +
                           std::to_string(img.height) + "\n255\n";
  std::vector<std::uint8_t> out;
  out.reserve(head.size() + img.pixels.size());
  out.insert(out.end(), head.begin(), head.end());
  out.insert(out.end(), img.pixels.begin(), img.pixels.end());
  return out;
}

}  // namespace

void set_save_hook_for_testing(SaveHook hook) { g_save_hook.store(hook); }

void check_output_path(const std::string& path) {
  Format f;
  const std::string ext = fs::path(path).extension().string();
  if (!format_of(ext, &f))
    throw UsageError("unknown output extension " + quoted(ext.empty() ? "(none)" : ext) + " for " +
                     quoted(path) + " (valid: " + kValidExtensions + ")");
}

int encoded_channels(int channels, const std::string& ext) {
  Format f;
  if (!format_of(ext, &f)) return channels;  // extensions histeq does not write: as they are
  const bool alpha = channels == 2 || channels == 4;
  if (f == Format::jpg) return channels <= 2 ? 1 : 3;  // no alpha in JPEG
  if (f == Format::bmp) return alpha ? 4 : 3;          // 24-bit BGR or 32-bit BGRA
  return channels;
}

std::vector<std::uint8_t> encode_image(const Image& img, const std::string& ext, int quality,
                                       jpeg::Subsampling subsampling) {
  EncodeOptions opt;
  opt.quality = quality;
  opt.subsampling = subsampling;
  return encode_image(img, ext, opt);
}

std::vector<std::uint8_t> encode_image(const Image& img, const std::string& ext,
                                       const EncodeOptions& opt) {
  const int quality = opt.quality;
  const jpeg::Subsampling subsampling = opt.subsampling;
  Format f;
  if (!format_of(ext, &f))
    throw UsageError("unknown output format " + quoted(ext) + " (valid: " + kValidExtensions + ")");
  if (img.width <= 0 || img.height <= 0 || img.channels < 1 || img.channels > 4)
    throw Error("cannot encode an image of " + std::to_string(img.width) + "x" +
                std::to_string(img.height) + "x" + std::to_string(img.channels) +
                " (need width, height > 0 and 1..4 channels)");
  if (img.pixels.size() != img.byte_count())
    throw Error("cannot encode: the image holds " + std::to_string(img.pixels.size()) +
                " bytes, its shape needs " + std::to_string(img.byte_count()));
  if (img.byte_count() > std::size_t(INT_MAX) / 2)
    throw Error("cannot encode an image of " + std::to_string(img.byte_count()) +
                " bytes: stb_image_write takes at most about 1 GiB");
  if (f == Format::jpg && (quality < 1 || quality > 100))
    throw UsageError("JPEG quality " + std::to_string(quality) + " out of range (valid: 1..100)");
  if (opt.png_level < 0 || opt.png_level > 9)
    throw UsageError("PNG level " + std::to_string(opt.png_level) + " out of range (valid: 0..9)");
  // PNG: histeq's own writer (write_png8, above); JPEG: libjpeg-turbo (jpeg_codec.hpp), 4:2:0
  // colour, 1-component gray; PGM/PPM: write_pnm8; BMP and TGA: stb_image_write.
  if (f == Format::png) return write_png8(img, opt.png_level);
  if (f == Format::jpg) return jpeg::encode(img, {quality, subsampling});
  if (f == Format::pnm) return write_pnm8(img, ext);
  std::vector<std::uint8_t> out;
  out.reserve(img.byte_count() + 1024);
  const void* px = img.pixels.data();
  int comp = img.channels;
  // BMP has no gray+alpha layout, and stb_image_write writes 2 channels as 24-bit gray, alpha
  // dropped: expanded to RGBA (gray in R, G and B), so it is written as 32-bit BGRA as RGBA is.
  std::vector<std::uint8_t> rgba;
  if (f == Format::bmp && img.channels == 2) {
    const std::size_t n = img.pixel_count();
    rgba.resize(n * 4);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint8_t g = img.pixels[2 * i], a = img.pixels[2 * i + 1];
      rgba[4 * i] = rgba[4 * i + 1] = rgba[4 * i + 2] = g;
      rgba[4 * i + 3] = a;
    }
    px = rgba.data();
    comp = 4;
  }
  const int ok = f == Format::bmp
                     ? stbi_write_bmp_to_func(append_bytes, &out, img.width, img.height, comp, px)
                     : stbi_write_tga_to_func(append_bytes, &out, img.width, img.height, comp, px);
  if (!ok || out.empty())
    throw Error("stb_image_write failed to encode a " + std::to_string(img.width) + "x" +
                std::to_string(img.height) + "x" + std::to_string(img.channels) + " " + ext +
                " image");
  return out;
}

void save_image(const Image& img, const std::string& path, int quality,
                jpeg::Subsampling subsampling) {
  EncodeOptions opt;
  opt.quality = quality;
  opt.subsampling = subsampling;
  save_image(img, path, opt);
}

void write_image_file(const std::vector<std::uint8_t>& bytes, const std::string& path) {
  write_file_atomic(path, bytes.data(), bytes.size());
}

void save_image(const Image& img, const std::string& path, const EncodeOptions& opt) {
  check_output_path(path);
  const std::vector<std::uint8_t> bytes =
      encode_image(img, fs::path(path).extension().string(), opt);
  write_file_atomic(path, bytes.data(), bytes.size());
}

bool image_info(const std::uint8_t* data, std::size_t size, int* width, int* height,
                int* channels) {
  if (size == 0 || size > std::size_t(INT_MAX)) return false;
  return stbi_info_from_memory(data, int(size), width, height, channels) != 0;
}

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
