// coefficients_probe.cpp — what histeq's decode_coefficients (the progressive files' CPU part on
// the JPEG device route: entropy decoding, then the coefficients copied out of libjpeg's arrays
// and checked against the encoder range) costs over libjpeg-turbo's own jpeg_read_coefficients,
// per file, on one thread: best of --reps of each, taken in turns, from the file in memory to
// the coefficients (header included in both; libjpeg's arrays read row by row, as histeq does,
// without a copy). malloc as the batch sets it (src/cli/batch.cpp), so that neither pays page
// faults for fresh arrays.
//
//   cmake --build build --target histeq_lib histeq_host
//   g++ -O2 -std=c++17 bench/probes/coefficients_probe.cpp -Iinclude -Icore -Isrc \
//       build/libhisteq_host.a build/libhisteq.a -ljpeg -ldeflate -lisal -lspng -lpthread -ldl \
//       -o /tmp/coefficients_probe
//   /tmp/coefficients_probe [--reps 7] FILE.jpg...
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <jpeglib.h>

#include "histeq/jpeg_codec.hpp"

namespace {
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::vector<unsigned char> read_file(const char* p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

/// libjpeg-turbo alone: header, jpeg_read_coefficients, every row of every component accessed.
double libjpeg_ms(const std::vector<unsigned char>& b, long* sink) {
  jpeg_decompress_struct c;
  jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_decompress(&c);
  const auto t = Clock::now();
  jpeg_mem_src(&c, b.data(), static_cast<unsigned long>(b.size()));
  jpeg_read_header(&c, TRUE);
  jvirt_barray_ptr* arrays = jpeg_read_coefficients(&c);
  for (int k = 0; k < c.num_components; ++k) {
    const jpeg_component_info& ci = c.comp_info[k];
    for (JDIMENSION by = 0; by < ci.height_in_blocks; ++by) {
      JBLOCKARRAY rows = (*c.mem->access_virt_barray)(reinterpret_cast<j_common_ptr>(&c),
                                                      arrays[k], by, 1, FALSE);
      *sink += rows[0][0][0];
    }
  }
  jpeg_finish_decompress(&c);
  const double ms = ms_since(t);
  jpeg_destroy_decompress(&c);
  return ms;
}
}  // namespace

int main(int argc, char** argv) {
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);
  ::mallopt(M_TRIM_THRESHOLD, INT_MAX);
  ::mallopt(M_ARENA_MAX, 1);
  int reps = 7;
  std::vector<const char*> files;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else
      files.push_back(argv[i]);
  }
  std::printf("| file | MP | libjpeg-turbo jpeg_read_coefficients, ms | histeq decode_coefficients, ms "
              "| over |\n|---|---:|---:|---:|---:|\n");
  long sink = 0;
  for (const char* f : files) {
    const std::vector<unsigned char> b = read_file(f);
    double lib = 1e30, ours = 1e30;
    int w = 0, h = 0;
    for (int r = 0; r < reps; ++r) {
      lib = std::min(lib, libjpeg_ms(b, &sink));
      const auto t = Clock::now();
      const histeq::jpeg::Coefficients c = histeq::jpeg::decode_coefficients(b.data(), b.size(), f);
      ours = std::min(ours, ms_since(t));
      w = c.width;
      h = c.height;
    }
    if (w == 0) {
      std::printf("| %s | - | %.1f | declined | - |\n", f, lib);
      continue;
    }
    std::printf("| %s | %.1f | %.1f | %.1f | %+.1f %% |\n", f, double(w) * h / 1e6, lib, ours,
                100 * (ours / lib - 1));
  }
  return sink == 42 ? 1 : 0;
}
