// progressive_probe.cpp — the CPU's floor for the JPEGs the hardware decoder refuses: how fast
// libjpeg-turbo decodes a folder's progressive photos on 1..N threads with nothing else running,
// in three depths of work:
//   huffman  jpeg_read_coefficients: the entropy decoding alone (all scans into DCT blocks);
//   planes   jpeg_read_raw_data into the file's own YCbCr planes: what histeq's CPU route to the
//            planes does (entropy decoding, inverse DCT, no upsampling or colour conversion);
//   rgb      jpeg_read_scanlines to interleaved RGB (upsampling and colour conversion too).
//
// One-time work is done and timed apart: the files are read into memory, and each thread creates
// its decompressor (and its output buffers, grown on first use) in a warm-up pass over its share
// that is not timed. The timed pass starts when every thread is ready (a start barrier) and ends
// when the last thread has finished its share; each thread takes the next file from a shared
// counter, so no thread idles while another holds two files. Every file is decoded `repeat`
// times per pass (the folder's photos under several names, as bench/e2e --repeat makes them).
//
//   g++ -O2 -std=c++17 bench/probes/progressive_probe.cpp -ljpeg -lpthread -o /tmp/progressive_probe
//   /tmp/progressive_probe [--threads 1,2,4,8,16] [--repeat 8] [--reps 3] FILE.jpg...
//
// Non-progressive files among the arguments are counted and left out. Prints, per depth and
// thread count, the best of --reps timed passes: seconds, megapixels per second in all and per
// thread. The last lines give the floor the folder's progressive share puts on a run: its
// megapixels over the best `planes` rate, and the whole folder's megapixels over that time.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>  // needs size_t and FILE first

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
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

/// A pass: `threads` threads decode every file `repeat` times. Returns the timed seconds (start
/// barrier to the last thread's end); the warm-up pass, made first, is not timed.
double pass(const std::vector<const File*>& files, int repeat, int threads, Depth depth,
            unsigned long& checksum) {
  std::vector<std::unique_ptr<Decoder>> decoders;  // not movable: c.err points into it
  for (int t = 0; t < threads; ++t) decoders.push_back(std::make_unique<Decoder>());
  const std::size_t items = files.size() * std::size_t(repeat);
  // Warm-up (untimed): each decoder decodes each file once, so its buffers have their final size
  // and the files' bytes are in the cache hierarchy as in a steady run.
  for (auto& d : decoders)
    for (const File* f : files) d->decode(*f, depth);

  std::atomic<std::size_t> next{0};
  std::mutex m;
  std::condition_variable cv;
  int ready = 0;
  bool go = false;
  Clock::time_point start;
  std::vector<Clock::time_point> ends(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      {
        std::unique_lock<std::mutex> lock(m);
        if (++ready == threads) {
          start = Clock::now();
          go = true;
          cv.notify_all();
        } else {
          cv.wait(lock, [&] { return go; });
        }
      }
      for (;;) {
        const std::size_t i = next.fetch_add(1);
        if (i >= items) break;
        if (!decoders[std::size_t(t)]->decode(*files[i % files.size()], depth)) std::abort();
      }
      ends[std::size_t(t)] = Clock::now();
    });
  }
  for (auto& th : pool) th.join();
  for (auto& d : decoders) checksum += d->checksum;
  const Clock::time_point end = *std::max_element(ends.begin(), ends.end());
  return std::chrono::duration<double>(end - start).count();
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
  std::vector<int> threads;
  int repeat = 8, reps = 3;
  std::vector<File> all;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = parse_list(argv[++i]);
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
  for (const File& f : all) {
    all_pixels += f.pixels;
    if (f.progressive) {
      prog.push_back(&f);
      prog_pixels += f.pixels;
    }
  }
  std::printf("files: %zu, %.1f MP; progressive: %zu, %.1f MP (%.0f %% of the pixels)\n",
              all.size(), all_pixels / 1e6, prog.size(), prog_pixels / 1e6,
              all_pixels ? 100.0 * double(prog_pixels) / double(all_pixels) : 0.0);
  if (prog.empty()) return 0;
  std::printf("each pass: every progressive file %d times (%.1f MP); best of %d passes; "
              "libjpeg-turbo %d\n\n",
              repeat, double(prog_pixels) * repeat / 1e6, reps, LIBJPEG_TURBO_VERSION_NUMBER);
  std::printf("| depth | threads | seconds | MP/s | MP/s per thread |\n|---|---:|---:|---:|---:|\n");
  unsigned long checksum = 0;
  double best_planes = 0;
  for (Depth d : {Depth::huffman, Depth::planes, Depth::rgb}) {
    for (int t : threads) {
      double best = 1e300;
      for (int r = 0; r < reps; ++r) best = std::min(best, pass(prog, repeat, t, d, checksum));
      const double mps = double(prog_pixels) * repeat / 1e6 / best;
      if (d == Depth::planes) best_planes = std::max(best_planes, mps);
      std::printf("| %s | %d | %.3f | %.0f | %.1f |\n", name_of(d), t, best, mps, mps / t);
      std::fflush(stdout);
    }
  }
  const double floor_s = double(prog_pixels) / 1e6 / best_planes;
  std::printf("\nfloor: the progressive %.1f MP of this folder take at least %.3f s at the best "
              "planes rate (%.0f MP/s); a run over the whole folder (%.1f MP) with every other file "
              "free cannot beat %.0f MP/s (per name the folder is repeated under, the same)\n",
              prog_pixels / 1e6, floor_s, best_planes, all_pixels / 1e6,
              double(all_pixels) / 1e6 / floor_s);
  std::printf("(checksum %lu)\n", checksum);
  return 0;
}
