// hybrid_probe.cu — whether nvJPEG's hybrid decoder, driven through its decoupled phases from
// many CPU threads at once, decodes progressive JPEGs faster than libjpeg-turbo on the same
// threads: the progressive third of a photo folder is what bounds histeq's JPEG device route
// (docs/benchmarks.md, "Where the 10 GP run goes"), and its entropy decoding is CPU work either
// way. Measured apart, in one process:
//
//   setup     one-time costs, each timed on its own: the context (cudaFree(0)), the first and a
//             second nvJPEG handle, a hybrid decoder, a decode state, pinned and device
//             buffers, a JPEG stream, decode parameters, the first decode (cold) and a second;
//             teardown of each kind at the end.
//   support   per file: progressive or not, size, whether the HYBRID and GPU_HYBRID decoders
//             take it (nvjpegDecoderJpegSupported, output YUV; Y for a gray file).
//   exact     per file: nvJPEG's hybrid decode to the file's own YCbCr planes (NVJPEG_OUTPUT_YUV)
//             against libjpeg-turbo's (jpeg_read_raw_data, ISLOW, no smoothing): the largest
//             difference and the share of samples that differ, per plane.
//   threads   for each thread count: libjpeg-turbo's entropy decoding alone
//             (jpeg_read_coefficients) and its decode to the planes, then nvJPEG's hybrid
//             decoder with every thread's objects made beforehand (one handle per thread, and
//             one handle shared by all threads), each thread running the decoupled phases
//             (nvjpegJpegStreamParse, nvjpegDecodeJpegHost, TransferToDevice, DecodeJpegDevice)
//             on its own state and stream with two pinned buffers in turn (the host phase of a
//             file overlaps the device phase of the one before). Time inside each phase's call
//             is summed per thread: the host phase is the CPU's share.
//
// Passes as bench/probes/progressive_probe.cpp runs them: every thread makes its objects and
// decodes every file twice untimed (both pinned buffers reach every file's size), then --reps passes start at a
// barrier, take files from a shared counter (every file --repeat times a pass) and end when the
// last thread has synchronized its stream; the best pass is printed, with the threads' CPU time
// over their wall time. malloc as histeq's batches set it (src/cli/batch.cpp).
//
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/hybrid_probe.cu -I<nvjpeg include>
//        -L<nvjpeg lib> -lnvjpeg -ljpeg -lpthread -o hybrid_probe
//   ./hybrid_probe [--threads 1,2,4,8,16] [--repeat 8] [--reps 3] [--cpu-only] FILE.jpg...
//
// --cpu-only: the libjpeg-turbo rows alone (no CUDA call), for a machine without a GPU.
// Only progressive files that are gray or 3-component YCbCr go to the threads section (the
// files histeq's device route leaves to the CPU workers); the others are listed in support.
#include <cuda_runtime.h>
#include <malloc.h>
#include <nvjpeg.h>
#include <sys/resource.h>
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include <jpeglib.h>  // needs size_t and FILE first

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

#define CK(x)                                                                     \
  do {                                                                            \
    auto s_ = (x);                                                                \
    if (int(s_) != 0) {                                                           \
      std::fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

struct File {
  std::string name;
  std::vector<unsigned char> bytes;
  long pixels = 0;
  int comps = 0;
  bool progressive = false;
  bool planes_route = false;  ///< gray, or 3 components stored as YCbCr
  std::size_t plane_bytes = 0;  ///< nvJPEG's YUV planes, tightly pitched
  bool hybrid_ok = false;       ///< nvjpegDecoderJpegSupported: the HYBRID decoder takes it
  std::uint64_t planes_hash = 0;  ///< of nvJPEG's planes, decoded one file at a time
};

std::uint64_t fnv1a(const unsigned char* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// ---- libjpeg-turbo ----

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

/// One thread's libjpeg-turbo decompressor, reused for every file.
struct Libjpeg {
  jpeg_decompress_struct c{};
  ErrorJump err{};
  std::vector<unsigned char> out;
  std::vector<JSAMPROW> rows[3];
  unsigned long checksum = 0;

  Libjpeg() {
    c.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = on_error;
    jpeg_create_decompress(&c);
  }
  ~Libjpeg() { jpeg_destroy_decompress(&c); }
  Libjpeg(const Libjpeg&) = delete;
  Libjpeg& operator=(const Libjpeg&) = delete;

  /// The entropy decoding alone.
  bool coefficients(const File& f) {
    if (setjmp(err.jump)) {
      jpeg_abort_decompress(&c);
      return false;
    }
    jpeg_mem_src(&c, f.bytes.data(), f.bytes.size());
    jpeg_read_header(&c, TRUE);
    jvirt_barray_ptr* coefs = jpeg_read_coefficients(&c);
    JBLOCKARRAY b =
        (*c.mem->access_virt_barray)(reinterpret_cast<j_common_ptr>(&c), coefs[0], 0, 1, FALSE);
    checksum += static_cast<unsigned long>(b[0][0][0]);
    jpeg_finish_decompress(&c);
    return true;
  }

  /// The file's own planes, each `stride[k]` wide (width_in_blocks * 8) and `height[k]` tall
  /// (its rows rounded up to whole iMCU rows), into `out` one after the other.
  bool planes(const File& f, int* stride = nullptr, int* height = nullptr,
              int* width = nullptr, int* rows_used = nullptr) {
    if (setjmp(err.jump)) {
      jpeg_abort_decompress(&c);
      return false;
    }
    jpeg_mem_src(&c, f.bytes.data(), f.bytes.size());
    jpeg_read_header(&c, TRUE);
    c.raw_data_out = TRUE;
    c.out_color_space = c.jpeg_color_space;
    c.do_fancy_upsampling = FALSE;
    c.do_block_smoothing = FALSE;
    c.dct_method = JDCT_ISLOW;
    jpeg_start_decompress(&c);
    const int mcu_rows = c.max_v_samp_factor * DCTSIZE;
    const int imcu = int((c.output_height + JDIMENSION(mcu_rows) - 1) / JDIMENSION(mcu_rows));
    std::size_t need = 0;
    for (int i = 0; i < c.num_components && i < 3; ++i) {
      const jpeg_component_info& ci = c.comp_info[i];
      need += std::size_t(ci.width_in_blocks) * DCTSIZE * std::size_t(imcu) *
              std::size_t(ci.v_samp_factor) * DCTSIZE;
    }
    if (out.size() < need) out.resize(need);
    std::size_t base[3] = {};
    std::size_t at = 0;
    for (int i = 0; i < c.num_components && i < 3; ++i) {
      const jpeg_component_info& ci = c.comp_info[i];
      base[i] = at;
      const std::size_t s = std::size_t(ci.width_in_blocks) * DCTSIZE;
      const std::size_t h = std::size_t(imcu) * std::size_t(ci.v_samp_factor) * DCTSIZE;
      if (stride) stride[i] = int(s);
      if (height) height[i] = int(h);
      if (width) width[i] = int(ci.downsampled_width);
      if (rows_used) rows_used[i] = int(ci.downsampled_height);
      rows[i].resize(std::size_t(ci.v_samp_factor) * DCTSIZE);
      at += s * h;
    }
    int row_block = 0;
    while (c.output_scanline < c.output_height) {
      JSAMPARRAY planes[3];
      for (int i = 0; i < c.num_components && i < 3; ++i) {
        const jpeg_component_info& ci = c.comp_info[i];
        const std::size_t s = std::size_t(ci.width_in_blocks) * DCTSIZE;
        const std::size_t r0 = std::size_t(row_block) * rows[i].size();
        for (std::size_t r = 0; r < rows[i].size(); ++r)
          rows[i][r] = out.data() + base[i] + (r0 + r) * s;
        planes[i] = rows[i].data();
      }
      if (jpeg_read_raw_data(&c, planes, JDIMENSION(mcu_rows)) == 0) break;
      ++row_block;
    }
    checksum += out[0];
    jpeg_finish_decompress(&c);
    return true;
  }
};

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
  f.comps = c.num_components;
  f.progressive = c.progressive_mode != 0;
  f.planes_route =
      c.num_components == 1 || (c.num_components == 3 && c.jpeg_color_space == JCS_YCbCr);
  jpeg_destroy_decompress(&c);
  return true;
}

// ---- nvJPEG ----

double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

/// A thread's objects for nvJPEG's decoupled hybrid decode; the handle and the decoder are its
/// own or shared. Two pinned buffers and JPEG streams in turn (the host phase of a file writes
/// one while the device phase of the file before runs from the other), one device buffer, one
/// stream, one output buffer sized for the largest file. The order NVIDIA's decoupled samples
/// (and DALI) keep: host phase of file k, then a wait for the device phase of file k-1 (an event
/// recorded after it), then the transfer and the device phase of file k; so one file at a time
/// is on the device side of the state, and the host phase overlaps the device phase before.
struct Hybrid {
  nvjpegHandle_t handle = nullptr;
  nvjpegJpegDecoder_t decoder = nullptr;
  bool owns = false;
  nvjpegJpegState_t state = nullptr;
  nvjpegBufferPinned_t pinned[2] = {};
  nvjpegBufferDevice_t device = nullptr;
  nvjpegJpegStream_t js[2] = {};
  nvjpegDecodeParams_t params_yuv = nullptr, params_y = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;  ///< recorded after each device phase
  unsigned char* out = nullptr;
  std::size_t out_bytes = 0;
  int turn = 0;
  // Summed over calls (a pass's share is read as differences): wall milliseconds inside each
  // phase's calls, and the CPU seconds of the host phase.
  double parse_ms = 0, host_ms = 0, wait_ms = 0, transfer_ms = 0, device_ms = 0, sync_ms = 0;
  double host_cpu_s = 0, parse_cpu_s = 0;

  Hybrid(nvjpegHandle_t shared_handle, nvjpegJpegDecoder_t shared_decoder,
         std::size_t max_plane_bytes) {
    if (shared_handle) {
      handle = shared_handle;
      decoder = shared_decoder;
    } else {
      owns = true;
      CK(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &handle));
      CK(nvjpegDecoderCreate(handle, NVJPEG_BACKEND_HYBRID, &decoder));
    }
    CK(nvjpegDecoderStateCreate(handle, decoder, &state));
    for (int i = 0; i < 2; ++i) {
      CK(nvjpegBufferPinnedCreate(handle, nullptr, &pinned[i]));
      CK(nvjpegJpegStreamCreate(handle, &js[i]));
    }
    CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming | cudaEventBlockingSync));
    CK(cudaEventRecord(done, nullptr));
    CK(nvjpegBufferDeviceCreate(handle, nullptr, &device));
    CK(nvjpegStateAttachDeviceBuffer(state, device));
    CK(nvjpegDecodeParamsCreate(handle, &params_yuv));
    CK(nvjpegDecodeParamsSetOutputFormat(params_yuv, NVJPEG_OUTPUT_YUV));
    CK(nvjpegDecodeParamsCreate(handle, &params_y));
    CK(nvjpegDecodeParamsSetOutputFormat(params_y, NVJPEG_OUTPUT_Y));
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    out_bytes = max_plane_bytes;
    CK(cudaMalloc(&out, out_bytes));
  }
  ~Hybrid() {
    cudaStreamSynchronize(stream);
    cudaFree(out);
    nvjpegDecodeParamsDestroy(params_yuv);
    nvjpegDecodeParamsDestroy(params_y);
    nvjpegJpegStateDestroy(state);  // before the buffers attached to it
    for (int i = 0; i < 2; ++i) {
      nvjpegJpegStreamDestroy(js[i]);
      nvjpegBufferPinnedDestroy(pinned[i]);
    }
    cudaEventDestroy(done);
    nvjpegBufferDeviceDestroy(device);
    cudaStreamDestroy(stream);
    if (owns) {
      nvjpegDecoderDestroy(decoder);
      nvjpegDestroy(handle);
    }
  }
  Hybrid(const Hybrid&) = delete;
  Hybrid& operator=(const Hybrid&) = delete;

  /// The bytes nvJPEG's buffers hold now (pinned and device): a change inside a pass means an
  /// allocation was timed.
  std::size_t buffer_bytes() const {
    std::size_t total = 0;
    for (int i = 0; i < 2; ++i) {
      std::size_t n = 0;
      void* p = nullptr;
      CK(nvjpegBufferPinnedRetrieve(pinned[i], &n, &p));
      total += n;
    }
    std::size_t n = 0;
    void* p = nullptr;
    CK(nvjpegBufferDeviceRetrieve(device, &n, &p));
    return total + n;
  }

  /// The planes' layout at `dst` (tight pitch), from a parsed stream; *bytes: their size.
  static nvjpegImage_t layout(nvjpegJpegStream_t s, unsigned char* dst, std::size_t* bytes,
                              int* pw = nullptr, int* ph = nullptr) {
    unsigned n = 0;
    CK(nvjpegJpegStreamGetComponentsNum(s, &n));
    nvjpegImage_t img{};
    std::size_t at = 0;
    for (unsigned c = 0; c < n && c < 3; ++c) {
      unsigned w = 0, h = 0;
      CK(nvjpegJpegStreamGetComponentDimensions(s, c, &w, &h));
      img.channel[c] = dst + at;
      img.pitch[c] = w;
      if (pw) pw[c] = int(w);
      if (ph) ph[c] = int(h);
      at += std::size_t(w) * h;
    }
    *bytes = at;
    return img;
  }

  /// One file through the four phases into `dst` (default: out); its device phase is left in
  /// flight on `stream`. False when nvJPEG refused it.
  bool decode(const File& f, unsigned char* dst = nullptr, std::size_t room = 0) {
    const int b = turn;
    turn ^= 1;
    nvjpegDecodeParams_t params = f.comps == 1 ? params_y : params_yuv;
    auto t = Clock::now();
    const double pc0 = thread_cpu_s();
    CK(nvjpegStateAttachPinnedBuffer(state, pinned[b]));
    if (nvjpegJpegStreamParse(handle, f.bytes.data(), f.bytes.size(), 0, 0, js[b]) !=
        NVJPEG_STATUS_SUCCESS)
      return false;
    std::size_t bytes = 0;
    nvjpegImage_t img = layout(js[b], dst ? dst : out, &bytes);
    if (bytes > (dst ? room : out_bytes)) {
      std::fprintf(stderr, "%s: output buffer too small (%zu bytes)\n", f.name.c_str(), bytes);
      std::exit(1);
    }
    parse_ms += ms_since(t);
    parse_cpu_s += thread_cpu_s() - pc0;
    t = Clock::now();
    const double c0 = thread_cpu_s();
    if (nvjpegDecodeJpegHost(handle, decoder, state, params, js[b]) != NVJPEG_STATUS_SUCCESS)
      return false;
    host_cpu_s += thread_cpu_s() - c0;
    host_ms += ms_since(t);
    t = Clock::now();
    CK(cudaEventSynchronize(done));  // the file before is off the state's device side
    wait_ms += ms_since(t);
    t = Clock::now();
    CK(nvjpegDecodeJpegTransferToDevice(handle, decoder, state, js[b], stream));
    transfer_ms += ms_since(t);
    t = Clock::now();
    CK(nvjpegDecodeJpegDevice(handle, decoder, state, &img, stream));
    CK(cudaEventRecord(done, stream));
    device_ms += ms_since(t);
    return true;
  }
  void sync() {
    const auto t = Clock::now();
    CK(cudaStreamSynchronize(stream));
    sync_ms += ms_since(t);
  }
  double calls_ms() const { return transfer_ms + device_ms; }
  double waits_ms() const { return wait_ms + sync_ms; }
};

// ---- passes over threads ----

struct PassResult {
  double seconds = 0;    ///< start barrier to the last thread's end
  double busy_s = 0;     ///< wall time inside the decode calls (and nvJPEG's last sync), summed
  double cpu_share = 0;  ///< the threads' CPU time over (threads x seconds)
  double host_s = 0;     ///< nvJPEG: wall time inside nvjpegDecodeJpegHost, summed over threads
  double host_cpu_s = 0; ///< nvJPEG: CPU time inside nvjpegDecodeJpegHost, summed
  double parse_s = 0, parse_cpu_s = 0;  ///< nvJPEG: wall and CPU time inside the parse
  double calls_s = 0;    ///< nvJPEG: wall time inside the transfer and device calls, summed
  double waits_s = 0;    ///< nvJPEG: wall time waiting for the device (event, last sync)
  bool grew = false;     ///< nvJPEG: a buffer changed size during the pass
  int checked = 0, differ = 0;  ///< (first pass's record) threads' last outputs checked, differing
};

enum class Work { lj_coefficients, lj_planes, nv_own, nv_shared };
const char* name_of(Work w) {
  switch (w) {
    case Work::lj_coefficients: return "libjpeg-turbo entropy (jpeg_read_coefficients)";
    case Work::lj_planes: return "libjpeg-turbo to planes (jpeg_read_raw_data)";
    case Work::nv_own: return "nvJPEG hybrid, a handle per thread";
    case Work::nv_shared: return "nvJPEG hybrid, one handle shared";
  }
  return "?";
}

/// `reps` passes of `threads` threads over `order` (each file's repeats together, the largest
/// files first, so that the pass ends on small files), after each thread made its objects and
/// decoded every file twice (both pinned buffers reach every file's size) untimed.
std::vector<PassResult> passes(const std::vector<const File*>& files,
                               const std::vector<const File*>& order, int threads, Work work,
                               int reps, std::size_t max_planes, double* setup_ms,
                               unsigned long& checksum) {
  const std::size_t items = order.size();
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0, generation = 0;
  std::atomic<std::size_t> next{0};
  std::vector<PassResult> out(static_cast<std::size_t>(reps));
  Clock::time_point start;
  const std::size_t n = std::size_t(threads);
  std::vector<Clock::time_point> ends(n);
  std::vector<double> cpu(n), busy(n), host(n), host_cpu(n), parse(n), parse_cpu(n), calls(n),
      waits(n), made(n);
  std::vector<char> grew(n);
  std::atomic<unsigned long> sum{0};
  std::atomic<int> checked{0}, differ{0};
  // A handle and decoder shared by every thread (nv_shared), made before the threads start;
  // their time is added to every thread's own.
  nvjpegHandle_t sh = nullptr;
  nvjpegJpegDecoder_t sd = nullptr;
  double shared_ms = 0;
  if (work == Work::nv_shared) {
    const auto t0 = Clock::now();
    CK(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &sh));
    CK(nvjpegDecoderCreate(sh, NVJPEG_BACKEND_HYBRID, &sd));
    shared_ms = ms_since(t0);
  }
  auto barrier = [&](const std::function<void()>& last) {
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
    for (std::size_t t = 0; t < n; ++t) {
      c += cpu[t];
      p.busy_s += busy[t];
      p.host_s += host[t] / 1e3;
      p.host_cpu_s += host_cpu[t];
      p.parse_s += parse[t] / 1e3;
      p.parse_cpu_s += parse_cpu[t];
      p.calls_s += calls[t] / 1e3;
      p.waits_s += waits[t] / 1e3;
      p.grew = p.grew || grew[t];
    }
    p.cpu_share = c / (p.seconds * threads);
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const std::size_t ti = std::size_t(t);
      std::unique_ptr<Libjpeg> lj;
      std::unique_ptr<Hybrid> nv;
      const auto t0 = Clock::now();
      if (work == Work::lj_coefficients || work == Work::lj_planes) {
        lj = std::make_unique<Libjpeg>();
      } else {
        nv = std::make_unique<Hybrid>(sh, sd, max_planes);
      }
      made[ti] = ms_since(t0) + shared_ms;
      auto one = [&](const File& f) {
        bool ok = false;
        if (work == Work::lj_coefficients) ok = lj->coefficients(f);
        else if (work == Work::lj_planes) ok = lj->planes(f);
        else ok = nv->decode(f);
        if (!ok) {
          std::fprintf(stderr, "%s: refused by %s\n", f.name.c_str(), name_of(work));
          std::exit(1);
        }
      };
      for (const File* f : files) {  // warm-up, untimed: every file on both pinned buffers
        one(*f);
        one(*f);
      }
      if (nv) nv->sync();
      const File* last = nullptr;
      for (int r = 0; r < reps; ++r) {
        // Snapshots before the barrier: nothing but the decodes inside the pass.
        const double h0 = nv ? nv->host_ms : 0, hc0 = nv ? nv->host_cpu_s : 0;
        const double p0 = nv ? nv->parse_ms : 0, pc0 = nv ? nv->parse_cpu_s : 0;
        const double k0 = nv ? nv->calls_ms() : 0, w0 = nv ? nv->waits_ms() : 0;
        const std::size_t b0 = nv ? nv->buffer_bytes() : 0;
        barrier([&] {
          next = 0;
          start = Clock::now();
        });
        const double c0 = thread_cpu_s();
        double in_calls = 0;
        for (;;) {
          const std::size_t i = next.fetch_add(1);
          if (i >= items) break;
          const auto tc = Clock::now();
          one(*order[i]);
          in_calls += ms_since(tc);
          last = order[i];
        }
        if (nv) {
          const auto tc = Clock::now();
          nv->sync();
          in_calls += ms_since(tc);
        }
        ends[ti] = Clock::now();
        cpu[ti] = thread_cpu_s() - c0;
        busy[ti] = in_calls / 1e3;
        if (nv) {
          host[ti] = nv->host_ms - h0;
          host_cpu[ti] = nv->host_cpu_s - hc0;
          parse[ti] = nv->parse_ms - p0;
          parse_cpu[ti] = nv->parse_cpu_s - pc0;
          calls[ti] = nv->calls_ms() - k0;
          waits[ti] = nv->waits_ms() - w0;
          grew[ti] = nv->buffer_bytes() != b0;
        }
        barrier([&] { finish_pass(r); });
      }
      // Each thread's last output against that file's one-at-a-time decode (support section).
      if (nv && last && last->planes_hash != 0) {
        std::vector<unsigned char> host(last->plane_bytes);
        CK(cudaMemcpy(host.data(), nv->out, host.size(), cudaMemcpyDeviceToHost));
        checked += 1;
        if (fnv1a(host.data(), host.size()) != last->planes_hash) differ += 1;
      }
      if (lj) sum += lj->checksum;
    });
  }
  for (auto& th : pool) th.join();
  if (sd) nvjpegDecoderDestroy(sd);
  if (sh) nvjpegDestroy(sh);
  *setup_ms = *std::max_element(made.begin(), made.end());
  checksum += sum;
  if (checked > 0) {
    out[0].checked = checked;
    out[0].differ = differ;
  }
  return out;
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

// ---- sections ----

#define TRY(x) ((x) == NVJPEG_STATUS_SUCCESS)

/// One-time costs, each timed on its own, on `f` (a progressive file of the threads section);
/// teardown at the end. A call that fails is reported, not fatal.
void setup_section(const std::vector<const File*>& candidates) {
  const File& f = *candidates.front();
  std::printf("## setup (one-time costs, each timed alone, ms)\n\n| what | ms |\n|---|---:|\n");
  auto row = [](const char* what, double v, const char* note = "") {
    std::printf("| %s%s | %.3f |\n", what, note, v);
  };
  auto t = Clock::now();
  CK(cudaFree(nullptr));
  row("CUDA context (cudaFree(0))", ms_since(t));
  nvjpegHandle_t h1 = nullptr, h2 = nullptr;
  t = Clock::now();
  CK(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &h1));
  row("first nvJPEG handle (nvjpegCreateEx, default backend)", ms_since(t));
  t = Clock::now();
  CK(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &h2));
  row("second nvJPEG handle", ms_since(t));
  nvjpegJpegDecoder_t dec = nullptr, dec_gpu = nullptr;
  t = Clock::now();
  CK(nvjpegDecoderCreate(h1, NVJPEG_BACKEND_HYBRID, &dec));
  row("hybrid decoder (nvjpegDecoderCreate, HYBRID)", ms_since(t));
  t = Clock::now();
  const bool gpu_ok = TRY(nvjpegDecoderCreate(h1, NVJPEG_BACKEND_GPU_HYBRID, &dec_gpu));
  row("GPU_HYBRID decoder", ms_since(t), gpu_ok ? "" : " (refused)");
  if (!gpu_ok) dec_gpu = nullptr;
  nvjpegJpegState_t st = nullptr;
  t = Clock::now();
  CK(nvjpegDecoderStateCreate(h1, dec, &st));
  row("decode state (nvjpegDecoderStateCreate)", ms_since(t));
  nvjpegBufferPinned_t pin = nullptr;
  nvjpegBufferDevice_t dbuf = nullptr;
  t = Clock::now();
  CK(nvjpegBufferPinnedCreate(h1, nullptr, &pin));
  CK(nvjpegBufferDeviceCreate(h1, nullptr, &dbuf));
  CK(nvjpegStateAttachPinnedBuffer(st, pin));
  CK(nvjpegStateAttachDeviceBuffer(st, dbuf));
  row("pinned and device buffers made and attached (empty)", ms_since(t));
  nvjpegJpegStream_t js = nullptr;
  nvjpegDecodeParams_t prm = nullptr;
  t = Clock::now();
  CK(nvjpegJpegStreamCreate(h1, &js));
  CK(nvjpegDecodeParamsCreate(h1, &prm));
  CK(nvjpegDecodeParamsSetOutputFormat(prm, f.comps == 1 ? NVJPEG_OUTPUT_Y : NVJPEG_OUTPUT_YUV));
  row("JPEG stream and decode parameters", ms_since(t));
  cudaStream_t s = nullptr;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned char* out = nullptr;
  CK(cudaMalloc(&out, std::size_t(f.pixels) * 3 + (1u << 20)));  // any 3-plane layout
  // The first file (largest first) that the hybrid decoder takes, decoded cold and again.
  const File* used = nullptr;
  for (const File* c : candidates) {
    int not_supported = 1;
    if (TRY(nvjpegJpegStreamParse(h1, c->bytes.data(), c->bytes.size(), 0, 0, js)) &&
        TRY(nvjpegDecoderJpegSupported(dec, js, prm, &not_supported)) && not_supported == 0) {
      used = c;
      break;
    }
  }
  if (!used) std::printf("| the hybrid decoder takes none of the progressive files | - |\n");
  if (used && used != &f) {
    CK(cudaFree(out));
    CK(cudaMalloc(&out, std::size_t(used->pixels) * 3 + (1u << 20)));
  }
  double first = 0;
  for (int k = 0; used && k < 2; ++k) {
    t = Clock::now();
    if (!TRY(nvjpegJpegStreamParse(h1, used->bytes.data(), used->bytes.size(), 0, 0, js))) {
      std::printf("| decode of %s: parse refused | - |\n", used->name.c_str());
      break;
    }
    const double parse = ms_since(t);
    t = Clock::now();
    if (!TRY(nvjpegDecodeJpegHost(h1, dec, st, prm, js))) {
      std::printf("| decode of %s: host phase refused | - |\n", used->name.c_str());
      break;
    }
    const double host = ms_since(t);
    t = Clock::now();
    std::size_t bytes = 0;
    nvjpegImage_t img = Hybrid::layout(js, out, &bytes);
    if (!TRY(nvjpegDecodeJpegTransferToDevice(h1, dec, st, js, s)) ||
        !TRY(nvjpegDecodeJpegDevice(h1, dec, st, &img, s))) {
      std::printf("| decode of %s: device phase refused | - |\n", used->name.c_str());
      break;
    }
    CK(cudaStreamSynchronize(s));
    const double dev = ms_since(t);
    const double all = parse + host + dev;
    std::printf("| %s decode of %s (%.1f MP): parse %.3f, host phase %.3f, transfer + device + "
                "sync %.3f | %.3f |\n",
                k == 0 ? "first (cold)" : "second", used->name.c_str(), used->pixels / 1e6, parse,
                host, dev, all);
    if (k == 0) first = all;
    else
      row("one-time part of the first decode (first - second: the buffers' pinned and device "
          "allocations, the kernels' first load)",
          first - all);
  }
  t = Clock::now();
  nvjpegJpegStreamDestroy(js);
  nvjpegDecodeParamsDestroy(prm);
  nvjpegJpegStateDestroy(st);
  nvjpegBufferPinnedDestroy(pin);
  nvjpegBufferDeviceDestroy(dbuf);
  row("teardown: stream, parameters, state, buffers", ms_since(t));
  t = Clock::now();
  nvjpegDecoderDestroy(dec);
  if (dec_gpu) nvjpegDecoderDestroy(dec_gpu);
  row("teardown: decoders", ms_since(t));
  t = Clock::now();
  nvjpegDestroy(h2);
  nvjpegDestroy(h1);
  row("teardown: two handles", ms_since(t));
  cudaFree(out);
  cudaStreamDestroy(s);
  std::printf("\n");
}

/// Per file: what the hybrid decoders take (File::hybrid_ok); nvJPEG's planes against
/// libjpeg-turbo's; then the files decoded back to back through the pipelined order of the
/// threads section, each into its own buffer, against the one-at-a-time decodes.
void support_and_exact(std::vector<File>& all) {
  nvjpegHandle_t h = nullptr;
  CK(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &h));
  nvjpegJpegDecoder_t dh = nullptr, dg = nullptr;
  CK(nvjpegDecoderCreate(h, NVJPEG_BACKEND_HYBRID, &dh));
  if (!TRY(nvjpegDecoderCreate(h, NVJPEG_BACKEND_GPU_HYBRID, &dg))) dg = nullptr;
  nvjpegJpegStream_t js = nullptr;
  nvjpegDecodeParams_t prm_yuv = nullptr, prm_y = nullptr;
  CK(nvjpegJpegStreamCreate(h, &js));
  CK(nvjpegDecodeParamsCreate(h, &prm_yuv));
  CK(nvjpegDecodeParamsSetOutputFormat(prm_yuv, NVJPEG_OUTPUT_YUV));
  CK(nvjpegDecodeParamsCreate(h, &prm_y));
  CK(nvjpegDecodeParamsSetOutputFormat(prm_y, NVJPEG_OUTPUT_Y));
  std::size_t max_planes = 1;
  std::vector<int> gpu_hybrid(all.size(), 0);
  for (std::size_t i = 0; i < all.size(); ++i) {
    File& f = all[i];
    if (!TRY(nvjpegJpegStreamParse(h, f.bytes.data(), f.bytes.size(), 0, 0, js))) continue;
    nvjpegDecodeParams_t prm = f.comps == 1 ? prm_y : prm_yuv;
    int sh = 1, sg = 1;  // 0: supported; a failed call: not
    if (!TRY(nvjpegDecoderJpegSupported(dh, js, prm, &sh))) sh = 1;
    if (dg && !TRY(nvjpegDecoderJpegSupported(dg, js, prm, &sg))) sg = 1;
    f.hybrid_ok = sh == 0;  // 0: supported
    gpu_hybrid[i] = sg == 0;
    std::size_t bytes = 0;
    Hybrid::layout(js, nullptr, &bytes);
    f.plane_bytes = bytes;
    max_planes = std::max(max_planes, bytes);
  }
  auto nv = std::make_unique<Hybrid>(h, dh, max_planes);
  Libjpeg lj;
  std::printf("## support and exactness (nvJPEG hybrid to the file's planes, NVJPEG_OUTPUT_YUV "
              "or _Y, against libjpeg-turbo's planes, ISLOW, no smoothing)\n\n| file | MP | "
              "comps | progressive | HYBRID | GPU_HYBRID | largest difference (Y, Cb, Cr) | "
              "samples that differ (Y, Cb, Cr) |\n|---|---:|---:|---|---|---|---|---|\n");
  for (std::size_t i = 0; i < all.size(); ++i) {
    File& f = all[i];
    std::printf("| %s | %.1f | %d | %s | %s | %s | ", f.name.c_str(), f.pixels / 1e6, f.comps,
                f.progressive ? "yes" : "no", f.hybrid_ok ? "yes" : "no",
                gpu_hybrid[i] ? "yes" : "no");
    if (!f.hybrid_ok || !f.planes_route) {
      std::printf("- | - |\n");
      continue;
    }
    if (!nv->decode(f)) {
      std::printf("refused | - |\n");
      f.hybrid_ok = false;
      continue;
    }
    nv->sync();
    int pw[3] = {}, ph[3] = {};
    std::size_t bytes = 0;
    const nvjpegImage_t img = Hybrid::layout(nv->js[nv->turn ^ 1], nv->out, &bytes, pw, ph);
    std::vector<unsigned char> host(bytes);
    CK(cudaMemcpy(host.data(), nv->out, bytes, cudaMemcpyDeviceToHost));
    f.planes_hash = fnv1a(host.data(), bytes);
    int ls[3] = {}, lh[3] = {}, lw[3] = {}, lr[3] = {};
    if (!lj.planes(f, ls, lh, lw, lr)) {
      std::printf("libjpeg refused | - |\n");
      f.hybrid_ok = false;  // left out of the threads section too
      continue;
    }
    std::size_t lbase = 0, nbase = 0;
    int maxd[3] = {};
    double share[3] = {};
    const int comps = std::min(f.comps, 3);
    for (int c = 0; c < comps; ++c) {
      const int w = std::min(pw[c], lw[c]), hh = std::min(ph[c], lr[c]);
      long diff = 0;
      for (int y = 0; y < hh; ++y)
        for (int x = 0; x < w; ++x) {
          const int a = host[nbase + std::size_t(y) * img.pitch[c] + std::size_t(x)];
          const int b = lj.out[lbase + std::size_t(y) * std::size_t(ls[c]) + std::size_t(x)];
          const int d = std::abs(a - b);
          maxd[c] = std::max(maxd[c], d);
          diff += d != 0;
        }
      share[c] = double(diff) / (double(w) * hh);
      if (pw[c] != lw[c] || ph[c] != lr[c])
        std::fprintf(stderr, "%s: plane %d is %dx%d from nvJPEG, %dx%d from libjpeg-turbo\n",
                     f.name.c_str(), c, pw[c], ph[c], lw[c], lr[c]);
      nbase += std::size_t(pw[c]) * std::size_t(ph[c]);
      lbase += std::size_t(ls[c]) * std::size_t(lh[c]);
    }
    for (int c = 0; c < comps; ++c) std::printf("%s%d", c ? ", " : "", maxd[c]);
    std::printf(" | ");
    for (int c = 0; c < comps; ++c) std::printf("%s%.4f", c ? ", " : "", share[c]);
    std::printf(" |\n");
  }
  // The pipelined order (host phase of a file while the one before is on the device), every
  // decoded file into its own part of one buffer, twice over: equal to one at a time?
  std::vector<const File*> piped;
  std::size_t total = 0;
  for (const File& f : all)
    if (f.hybrid_ok && f.progressive && f.planes_route && f.planes_hash != 0) {
      piped.push_back(&f);
      total += f.plane_bytes;
    }
  if (!piped.empty()) {
    unsigned char* many = nullptr;
    CK(cudaMalloc(&many, 2 * total));
    std::size_t at = 0;
    for (int round = 0; round < 2; ++round)
      for (const File* f : piped) {
        if (!nv->decode(*f, many + at, f->plane_bytes)) std::exit(1);
        at += f->plane_bytes;
      }
    nv->sync();
    std::vector<unsigned char> host(2 * total);
    CK(cudaMemcpy(host.data(), many, 2 * total, cudaMemcpyDeviceToHost));
    cudaFree(many);
    int differ = 0;
    at = 0;
    for (int round = 0; round < 2; ++round)
      for (const File* f : piped) {
        differ += fnv1a(host.data() + at, f->plane_bytes) != f->planes_hash;
        at += f->plane_bytes;
      }
    std::printf("\npipelined decodes (the %zu progressive files twice, back to back) equal to "
                "the one-at-a-time decodes: %s\n",
                piped.size(), differ == 0 ? "all" : "NO");
    if (differ) std::printf("%d of %zu differ\n", differ, 2 * piped.size());
  }
  std::printf("\n");
  nv.reset();  // before the handle it borrowed
  nvjpegJpegStreamDestroy(js);
  nvjpegDecodeParamsDestroy(prm_yuv);
  nvjpegDecodeParamsDestroy(prm_y);
  nvjpegDecoderDestroy(dh);
  if (dg) nvjpegDecoderDestroy(dg);
  nvjpegDestroy(h);
}

}  // namespace

int main(int argc, char** argv) {
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);  // as src/cli/batch.cpp
  ::mallopt(M_TRIM_THRESHOLD, INT_MAX);
  ::mallopt(M_ARENA_MAX, 1);
  std::vector<int> threads;
  int repeat = 8, reps = 3;
  bool cpu_only = false;
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
    } else if (a == "--cpu-only") {
      cpu_only = true;
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
  if (all.empty()) {
    std::fprintf(stderr, "usage: hybrid_probe [--threads 1,2,4,8,16] [--repeat 8] [--reps 3] "
                         "[--cpu-only] FILE.jpg...\n");
    return 2;
  }
  if (threads.empty()) {
    const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
    for (int t = 1; t < hw; t *= 2) threads.push_back(t);
    threads.push_back(hw);
  }
  double load[3] = {0, 0, 0};
  if (std::FILE* la = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    std::fclose(la);
  }
  int ver[3] = {};
  if (!cpu_only) {
    nvjpegGetProperty(MAJOR_VERSION, &ver[0]);
    nvjpegGetProperty(MINOR_VERSION, &ver[1]);
    nvjpegGetProperty(PATCH_LEVEL, &ver[2]);
  }
  std::printf("load average at the start: %.2f %.2f %.2f; hardware threads: %u; nvJPEG %d.%d.%d; "
              "libjpeg-turbo %d\n\n",
              load[0], load[1], load[2], std::thread::hardware_concurrency(), ver[0], ver[1],
              ver[2], LIBJPEG_TURBO_VERSION_NUMBER);
  // The threads section's files: progressive, gray or YCbCr (and, with nvJPEG, taken by the
  // hybrid decoder); the setup section runs first, on the largest of them, so that its context
  // row is the cold cost.
  std::vector<const File*> prog;
  for (const File& f : all)
    if (f.progressive && f.planes_route) prog.push_back(&f);
  if (prog.empty()) {
    std::printf("no progressive gray or YCbCr file: nothing to measure\n");
    return 0;
  }
  if (!cpu_only) {
    std::vector<const File*> by_size = prog;
    std::stable_sort(by_size.begin(), by_size.end(),
                     [](const File* a, const File* b) { return a->pixels > b->pixels; });
    CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));  // as histeq's device route waits
    setup_section(by_size);
    support_and_exact(all);
    prog.erase(std::remove_if(prog.begin(), prog.end(),
                              [](const File* f) { return !f->hybrid_ok; }),
               prog.end());
    if (prog.empty()) {
      std::printf("the hybrid decoder takes none of the progressive files: no threads section\n");
      return 0;
    }
  }
  std::size_t max_planes = 1;
  long prog_pixels = 0;
  for (const File* f : prog) {
    prog_pixels += f->pixels;
    max_planes = std::max(max_planes, std::max<std::size_t>(f->plane_bytes, 1));
  }
  // A pass: each file's repeats together, the largest files first (the pass ends on the small
  // ones, so threads finish close together).
  std::vector<const File*> order;
  {
    std::vector<const File*> by_size = prog;
    std::stable_sort(by_size.begin(), by_size.end(),
                     [](const File* a, const File* b) { return a->pixels > b->pixels; });
    for (const File* f : by_size)
      for (int r = 0; r < repeat; ++r) order.push_back(f);
  }
  std::printf("## threads (the %zu progressive files, %.1f MP, each %d times a pass, the largest "
              "first; best of %d passes)\n\nMP/s: the pass's megapixels over its wall time. Per "
              "busy thread: over the wall time the threads spent inside the decode calls "
              "(nvJPEG: all four phases and the last sync), summed. nvJPEG, summed over the "
              "threads: the host phase (nvjpegDecodeJpegHost: the entropy decoding) and the "
              "parse (nvjpegJpegStreamParse), wall and CPU seconds; the transfer and device "
              "calls (host time to queue them); the waits for the device (the file before, and "
              "the last sync). Parse + host per thread is what to set against libjpeg-turbo's "
              "entropy row. Check: each thread's last output against the one-at-a-time decode.\n\n"
              "| work | threads | objects made, ms | seconds | MP/s | MP/s per busy thread | "
              "CPU / wall | host phase, s (CPU s) | parse, s (CPU s) | parse + host MP/s per "
              "thread | transfer + device calls, s | waits, s | buffers grew in a pass | check "
              "|\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
              prog.size(), prog_pixels / 1e6, repeat, reps);
  unsigned long checksum = 0;
  const double mp = double(prog_pixels) * repeat / 1e6;
  for (Work w : {Work::lj_coefficients, Work::lj_planes, Work::nv_own, Work::nv_shared}) {
    const bool nv = w == Work::nv_own || w == Work::nv_shared;
    if (cpu_only && nv) continue;
    for (int t : threads) {
      double made = 0;
      const std::vector<PassResult> ps =
          passes(prog, order, t, w, reps, max_planes, &made, checksum);
      const PassResult p = *std::min_element(
          ps.begin(), ps.end(),
          [](const PassResult& a, const PassResult& b) { return a.seconds < b.seconds; });
      bool grew = false;
      for (const PassResult& q : ps) grew = grew || q.grew;
      std::printf("| %s | %d | %.1f | %.3f | %.0f | %.1f | %.2f | ", name_of(w), t, made,
                  p.seconds, mp / p.seconds, p.busy_s > 0 ? mp / p.busy_s : 0.0, p.cpu_share);
      if (nv) {
        const double ph = p.parse_s + p.host_s;
        std::printf("%.3f (%.3f) | %.3f (%.3f) | %.1f | %.3f | %.3f | %s | ", p.host_s,
                    p.host_cpu_s, p.parse_s, p.parse_cpu_s, ph > 0 ? mp / ph : 0.0, p.calls_s,
                    p.waits_s, grew ? "YES" : "no");
        if (ps[0].checked == 0)
          std::printf("- |\n");
        else if (ps[0].differ == 0)
          std::printf("%d equal |\n", ps[0].checked);
        else
          std::printf("%d of %d DIFFER |\n", ps[0].differ, ps[0].checked);
      } else {
        std::printf("- | - | - | - | - | - | - |\n");
      }
      std::fflush(stdout);
    }
  }
  std::printf("\n(checksum %lu)\n", checksum);
  return 0;
}
