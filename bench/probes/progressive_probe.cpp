// progressive_probe.cpp — what the CPU costs for the JPEGs the hardware decoder refuses: how
// fast libjpeg-turbo decodes a folder's progressive photos on 1..N threads with nothing else
// running, in three depths of work:
//   huffman  jpeg_read_coefficients: the entropy decoding alone (all scans into DCT blocks). The
//            least the CPU must do for a progressive file as long as its entropy decoding stays on
//            the CPU (nvJPEG's hybrid backend also decodes it on the CPU, with its own decoder,
//            and runs the inverse DCT on the GPU);
//   planes   jpeg_read_raw_data into the file's own YCbCr planes: histeq's CPU route to the planes
//            (entropy decoding and the inverse DCT, no upsampling or colour conversion);
//   rgb      jpeg_read_scanlines to interleaved RGB (upsampling and colour conversion too).
//
// One-time work is done and timed apart: the files are read into memory; for each depth and
// thread count the threads are started, each creates its decompressor and decodes every file
// once (a warm-up: its buffers and its malloc arena reach their size), and then --reps passes
// run with the same threads and decompressors. A pass starts when every thread is at the start
// barrier and ends when the last thread has finished; threads take the next file from a shared
// counter. Every file is decoded --repeat times per pass (the photos under several names, as
// bench/e2e --repeat makes them). malloc keeps large blocks in one heap as `histeq`'s batches do
// (src/cli/batch.cpp): libjpeg allocates and frees a progressive file's coefficient arrays for
// every decode, and memory given back to the kernel costs a page fault per 4 KiB when it is
// taken again (a thread's own arena gives back its heaps whenever they fall free).
//
//   g++ -O2 -std=c++17 bench/probes/progressive_probe.cpp -ljpeg -lpthread -o /tmp/progressive_probe
//   /tmp/progressive_probe [--threads 1,2,4,8,16] [--repeat 8] [--reps 3] FILE.jpg...
//
// Files that are not progressive, or not gray or 3-component YCbCr (the planes route's files),
// are counted and left out. Prints, per depth and thread count, the best of the passes: seconds,
// MP/s in all and per thread, the threads' CPU time over their wall time (below 0.95 the pass is
// marked: something else ran, or a thread ran out of files before the last one finished, which
// a pass of few large files shows; a larger --repeat evens it) and minor page faults per decode.
// The last lines turn the best rates into what the folder's progressive share costs a run that
// decodes it on these threads (wall-time rates: an uneven pass makes the bound a little low).
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>  // needs size_t and FILE first

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <malloc.h>
#include <sys/resource.h>
#include <time.h>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct File {
  std::string name;
  std::vector<unsigned char> bytes;
  long pixels = 0;
  bool progressive = false;
  bool planes_route = false;  ///< gray, or 3 components stored as YCbCr
};

struct ErrorJump {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
};

void on_error(j_common_ptr c) {
  char msg[JMSG_LENGTH_MAX];
  (*c->err->format_message)(c, msg);
  std::fprintf(stderr, "libjpeg: %s\n", msg);
  std::longjmp(reinterpret_cast<ErrorJump*>(c->err)->jump, 1);
}

enum class Depth { huffman, planes, rgb };
const char* name_of(Depth d) {
  return d == Depth::huffman ? "huffman" : d == Depth::planes ? "planes" : "rgb";
}

/// One thread's decompressor and buffers, made once and reused for every file.
struct Decoder {
  jpeg_decompress_struct c{};
  ErrorJump err{};
  std::vector<unsigned char> out;   // rgb rows or the planes' rows
  std::vector<JSAMPROW> rows[3];    // planes: per component, max_v_samp_factor * DCTSIZE rows
  unsigned long checksum = 0;       // a byte of each output, so the work cannot be dropped

  Decoder() {
    c.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = on_error;
    jpeg_create_decompress(&c);
  }
  ~Decoder() { jpeg_destroy_decompress(&c); }

  bool decode(const File& f, Depth depth) {
    if (setjmp(err.jump)) {
      jpeg_abort_decompress(&c);
      return false;
    }
    jpeg_mem_src(&c, f.bytes.data(), f.bytes.size());
    jpeg_read_header(&c, TRUE);
    if (depth == Depth::huffman) {
      jvirt_barray_ptr* coefs = jpeg_read_coefficients(&c);
      JBLOCKARRAY b = (*c.mem->access_virt_barray)(reinterpret_cast<j_common_ptr>(&c), coefs[0],
                                                   0, 1, FALSE);
      checksum += static_cast<unsigned long>(b[0][0][0]);
      jpeg_finish_decompress(&c);
      return true;
    }
    if (depth == Depth::planes) {
      c.raw_data_out = TRUE;
      c.out_color_space = c.jpeg_color_space;  // no conversion
      c.do_fancy_upsampling = FALSE;
      c.do_block_smoothing = FALSE;
      jpeg_start_decompress(&c);
      const int mcu_rows = c.max_v_samp_factor * DCTSIZE;
      std::size_t need = 0;
      for (int i = 0; i < c.num_components; ++i) {
        const jpeg_component_info& ci = c.comp_info[i];
        need += std::size_t(ci.width_in_blocks) * DCTSIZE * ci.v_samp_factor * DCTSIZE;
      }
      if (out.size() < need) out.resize(need);
      JSAMPARRAY planes[3];
      std::size_t at = 0;
      for (int i = 0; i < c.num_components && i < 3; ++i) {
        const jpeg_component_info& ci = c.comp_info[i];
        const std::size_t stride = std::size_t(ci.width_in_blocks) * DCTSIZE;
        rows[i].resize(std::size_t(ci.v_samp_factor) * DCTSIZE);
        for (std::size_t r = 0; r < rows[i].size(); ++r) rows[i][r] = out.data() + at + r * stride;
        at += stride * rows[i].size();
        planes[i] = rows[i].data();
      }
      while (c.output_scanline < c.output_height) {
        if (jpeg_read_raw_data(&c, planes, JDIMENSION(mcu_rows)) == 0) break;
        checksum += out[0];
      }
      jpeg_finish_decompress(&c);
      return true;
    }
    c.out_color_space = c.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    c.dct_method = JDCT_ISLOW;
    c.do_block_smoothing = FALSE;
    jpeg_start_decompress(&c);
    const std::size_t stride = std::size_t(c.output_width) * std::size_t(c.output_components);
    if (out.size() < stride) out.resize(stride);
    JSAMPROW row = out.data();
    while (c.output_scanline < c.output_height) {
      jpeg_read_scanlines(&c, &row, 1);
      checksum += out[0];
    }
    jpeg_finish_decompress(&c);
    return true;
  }
};

struct PassResult {
  double seconds = 0;   ///< start barrier to the last thread's end
  double cpu_share = 0; ///< the threads' CPU time over (threads x seconds)
  double faults = 0;    ///< minor page faults per decode
};

/// The calling thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID: getrusage's counts move
/// only at scheduler ticks, milliseconds behind on a short pass) and its minor page faults.
double thread_cpu_s(long* minflt) {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  *minflt = u.ru_minflt;
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

/// `reps` passes of `threads` threads decoding every file `repeat` times, after each thread's
/// untimed warm-up (see the header).
std::vector<PassResult> passes(const std::vector<const File*>& files, int repeat, int threads,
                               Depth depth, int reps, unsigned long& checksum) {
  const std::size_t items = files.size() * std::size_t(repeat);
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0, generation = 0;
  std::atomic<std::size_t> next{0};
  std::vector<PassResult> out(static_cast<std::size_t>(reps));
  Clock::time_point start;
  std::vector<Clock::time_point> ends(static_cast<std::size_t>(threads));
  std::vector<double> cpu(static_cast<std::size_t>(threads));
  std::vector<long> faults(static_cast<std::size_t>(threads));
  std::atomic<unsigned long> sum{0};
  // All threads meet here; the last to arrive runs `last` (under the lock) and releases them.
  auto barrier = [&](auto&& last) {
    std::unique_lock<std::mutex> lock(m);
    const int gen = generation;
    if (++arrived == threads) {
      arrived = 0;
      last();
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != gen; });
    }
  };
  auto finish_pass = [&](int r) {
    const Clock::time_point end = *std::max_element(ends.begin(), ends.end());
    PassResult& p = out[std::size_t(r)];
    p.seconds = std::chrono::duration<double>(end - start).count();
    double c = 0;
    long f = 0;
    for (int t = 0; t < threads; ++t) {
      c += cpu[std::size_t(t)];
      f += faults[std::size_t(t)];
    }
    p.cpu_share = c / (p.seconds * threads);
    p.faults = double(f) / double(items);
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Decoder d;
      for (const File* f : files) d.decode(*f, depth);  // warm-up, untimed
      for (int r = 0; r < reps; ++r) {
        barrier([&] {
          next = 0;
          start = Clock::now();
        });
        long f0 = 0, f1 = 0;
        const double c0 = thread_cpu_s(&f0);
        for (;;) {
          const std::size_t i = next.fetch_add(1);
          if (i >= items) break;
          if (!d.decode(*files[i % files.size()], depth)) std::abort();
        }
        ends[std::size_t(t)] = Clock::now();
        cpu[std::size_t(t)] = thread_cpu_s(&f1) - c0;
        faults[std::size_t(t)] = f1 - f0;
        barrier([&] { finish_pass(r); });
      }
      sum += d.checksum;
    });
  }
  for (auto& th : pool) th.join();
  checksum += sum;
  return out;
}

bool read_header(File& f) {
  jpeg_decompress_struct c{};
  ErrorJump err{};
  c.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_error;
  jpeg_create_decompress(&c);
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&c);
    return false;
  }
  jpeg_mem_src(&c, f.bytes.data(), f.bytes.size());
  jpeg_read_header(&c, TRUE);
  f.pixels = long(c.image_width) * long(c.image_height);
  f.progressive = c.progressive_mode != 0;
  f.planes_route = c.num_components == 1 ||
                   (c.num_components == 3 && c.jpeg_color_space == JCS_YCbCr);
  jpeg_destroy_decompress(&c);
  return true;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);  // as src/cli/batch.cpp
  ::mallopt(M_TRIM_THRESHOLD, INT_MAX);
  ::mallopt(M_ARENA_MAX, 1);
  std::vector<int> threads;
  int repeat = 8, reps = 3;
  std::vector<File> all;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = parse_list(argv[++i]);
      for (int t : threads)
        if (t < 1) {
          std::fprintf(stderr, "--threads: counts of at least 1, got %d\n", t);
          return 2;
        }
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      File f;
      f.name = a;
      std::ifstream in(a, std::ios::binary);
      f.bytes.assign(std::istreambuf_iterator<char>(in), {});
      if (f.bytes.empty() || !read_header(f)) {
        std::fprintf(stderr, "%s: not a readable JPEG\n", a.c_str());
        return 2;
      }
      all.push_back(std::move(f));
    }
  }
  if (threads.empty()) {
    const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
    for (int t = 1; t < hw; t *= 2) threads.push_back(t);
    threads.push_back(hw);
  }
  std::vector<const File*> prog;
  long prog_pixels = 0, all_pixels = 0;
  int other_progressive = 0;
  for (const File& f : all) {
    all_pixels += f.pixels;
    if (f.progressive && f.planes_route) {
      prog.push_back(&f);
      prog_pixels += f.pixels;
    } else if (f.progressive) {
      ++other_progressive;
    }
  }
  double load[3] = {0, 0, 0};
  if (std::FILE* la = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    std::fclose(la);
  }
  std::printf("load average at the start: %.2f %.2f %.2f; hardware threads: %u\n", load[0],
              load[1], load[2], std::thread::hardware_concurrency());
  if (other_progressive)
    std::printf("left out: %d progressive files that are not gray or YCbCr\n", other_progressive);
  std::printf("files: %zu, %.1f MP; progressive: %zu, %.1f MP (%.0f %% of the pixels)\n",
              all.size(), all_pixels / 1e6, prog.size(), prog_pixels / 1e6,
              all_pixels ? 100.0 * double(prog_pixels) / double(all_pixels) : 0.0);
  if (prog.empty()) return 0;
  std::printf("each pass: every progressive file %d times (%.1f MP); best of %d passes; "
              "libjpeg-turbo %d\n\n",
              repeat, double(prog_pixels) * repeat / 1e6, reps, LIBJPEG_TURBO_VERSION_NUMBER);
  std::printf("| depth | threads | seconds | MP/s | MP/s per thread | CPU / wall | faults per "
              "decode |\n|---|---:|---:|---:|---:|---:|---:|\n");
  unsigned long checksum = 0;
  double best[3] = {0, 0, 0};
  int best_threads[3] = {0, 0, 0};
  for (Depth d : {Depth::huffman, Depth::planes, Depth::rgb}) {
    for (int t : threads) {
      const std::vector<PassResult> ps = passes(prog, repeat, t, d, reps, checksum);
      const PassResult p = *std::min_element(
          ps.begin(), ps.end(),
          [](const PassResult& a, const PassResult& b) { return a.seconds < b.seconds; });
      const double mps = double(prog_pixels) * repeat / 1e6 / p.seconds;
      if (mps > best[int(d)]) {
        best[int(d)] = mps;
        best_threads[int(d)] = t;
      }
      std::printf("| %s | %d | %.3f | %.0f | %.1f | %.2f%s | %.0f |\n", name_of(d), t, p.seconds,
                  mps, mps / t, p.cpu_share, p.cpu_share < 0.95 ? " (shared)" : "", p.faults);
      std::fflush(stdout);
    }
  }
  const double mp = double(prog_pixels) / 1e6, all_mp = double(all_pixels) / 1e6;
  for (Depth d : {Depth::huffman, Depth::planes}) {
    const double s_min = mp / best[int(d)];
    std::printf("\n%s: the progressive %.1f MP take %.3f s at the best rate (%.0f MP/s, %d "
                "threads); a run over the folder (%.1f MP) that does this on the CPU and nothing "
                "else there cannot beat %.0f MP/s",
                name_of(d), mp, s_min, best[int(d)], best_threads[int(d)], all_mp, all_mp / s_min);
  }
  std::printf("\n");
  std::printf("(checksum %lu)\n", checksum);
  return 0;
}
