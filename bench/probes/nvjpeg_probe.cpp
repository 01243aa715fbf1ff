// nvjpeg_probe.cpp — what nvJPEG can do for a folder of photographs on this GPU, apart from
// histeq's executor: start-up costs (context, handles), the hardware decoder's throughput against
// batch size and decoding threads, the CPU cost of the support check, and the GPU encoder's
// throughput with one synchronize per image against one per group of images (several encoder
// states). A measuring aid for the executor's design (issue 17), not a benchmark.
//   g++ -O2 -std=c++17 bench/probes/nvjpeg_probe.cpp -I/usr/local/cuda/include \
//       -L/usr/local/cuda/lib64 -lnvjpeg -lcudart -lpthread -o nvjpeg_probe
//   ./nvjpeg_probe DIR_OF_JPEGS [COPIES]
//   ./nvjpeg_probe --exit MODE   the cost of ending a process that holds what the executor holds
//       (a context, a hardware handle and decode state, 4 encoder states, 8 pinned buffers of
//       44 MB, 8 device buffers of 44 MB): prints CLOCK_REALTIME in ns just before it ends, so
//       the caller can time the rest. MODE: _exit (std::_Exit), free (everything freed, then
//       _Exit), return (return from main: atexit handlers and the runtime's teardown).
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <nvjpeg.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

using Clock = std::chrono::steady_clock;
static double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
#define CK(x)                                                                  \
  do {                                                                         \
    auto s_ = (x);                                                             \
    if (int(s_) != 0) {                                                        \
      std::fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

struct Jpg {
  std::string name;
  std::vector<unsigned char> bytes;
  int w = 0, h = 0, c = 0;
  bool hw = false;
  unsigned char* d_out = nullptr;
};

static int exit_probe(const std::string& mode) {
  CK(cudaFree(nullptr));
  nvjpegHandle_t hw = nullptr;
  CK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &hw));
  nvjpegJpegState_t st;
  CK(nvjpegJpegStateCreate(hw, &st));
  CK(nvjpegDecodeBatchedInitialize(hw, st, 8, 1, NVJPEG_OUTPUT_RGBI));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  std::vector<nvjpegEncoderState_t> es(4);
  for (auto& e : es) CK(nvjpegEncoderStateCreate(hw, &e, s));
  std::vector<void*> pinned(8), dev(8);
  for (auto& p : pinned) {
    CK(cudaMallocHost(&p, 44u << 20));
    std::memset(p, 1, 44u << 20);
  }
  for (auto& d : dev) CK(cudaMalloc(&d, 44u << 20));
  CK(cudaDeviceSynchronize());
  if (mode == "free") {
    for (auto& e : es) nvjpegEncoderStateDestroy(e);
    nvjpegJpegStateDestroy(st);
    nvjpegDestroy(hw);
    for (auto p : pinned) cudaFreeHost(p);
    for (auto d : dev) cudaFree(d);
  }
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  std::printf("%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
  std::fflush(stdout);
  if (mode == "return") return 0;
  std::_Exit(0);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (std::string(argv[1]) == "--exit") return exit_probe(argc > 2 ? argv[2] : "_exit");
  const int copies = argc > 2 ? std::atoi(argv[2]) : 7;
  std::vector<Jpg> files;
  DIR* dir = opendir(argv[1]);
  while (dirent* e = readdir(dir)) {
    std::string n = e->d_name;
    if (n.size() < 5 || n.substr(n.size() - 4) != ".jpg") continue;
    Jpg j;
    j.name = n;
    std::ifstream f(std::string(argv[1]) + "/" + n, std::ios::binary);
    j.bytes.assign(std::istreambuf_iterator<char>(f), {});
    files.push_back(std::move(j));
  }
  closedir(dir);
  std::sort(files.begin(), files.end(), [](auto& a, auto& b) { return a.name < b.name; });

  auto t0 = Clock::now();
  CK(cudaFree(nullptr));
  auto t1 = Clock::now();
  nvjpegHandle_t hw = nullptr, def = nullptr;
  CK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &hw));
  auto t2 = Clock::now();
  CK(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &def));
  auto t3 = Clock::now();
  std::printf("start-up: context %.1f ms, hardware handle %.1f ms, default handle %.1f ms\n",
              ms(t0, t1), ms(t1, t2), ms(t2, t3));
  {
    int ver[3] = {};
    nvjpegGetProperty(MAJOR_VERSION, &ver[0]);
    nvjpegGetProperty(MINOR_VERSION, &ver[1]);
    nvjpegGetProperty(PATCH_LEVEL, &ver[2]);
    std::printf("nvJPEG %d.%d.%d\n", ver[0], ver[1], ver[2]);
  }

  // support check and shape, CPU cost
  nvjpegJpegStream_t js;
  CK(nvjpegJpegStreamCreate(hw, &js));
  double check_ms = 0;
  double hw_mp = 0, all_mp = 0;
  for (auto& j : files) {
    auto a = Clock::now();
    CK(nvjpegJpegStreamParse(hw, j.bytes.data(), j.bytes.size(), 0, 0, js));
    int ns = 1;
    CK(nvjpegDecodeBatchedSupported(hw, js, &ns));
    check_ms += ms(a, Clock::now());
    unsigned w = 0, h = 0, nc = 0;
    nvjpegJpegStreamGetFrameDimensions(js, &w, &h);
    nvjpegJpegStreamGetComponentsNum(js, &nc);
    j.w = int(w);
    j.h = int(h);
    j.c = nc == 1 ? 1 : 3;
    j.hw = ns == 0;
    all_mp += double(w) * h / 1e6;
    if (j.hw) hw_mp += double(w) * h / 1e6;
    CK(cudaMalloc(reinterpret_cast<void**>(&j.d_out), std::size_t(w) * h * 3));
  }
  std::printf("support check (parse + DecodeBatchedSupported): %.2f ms for %zu files; %.1f of %.1f MP hw\n",
              check_ms, files.size(), hw_mp, all_mp);
  for (auto& j : files) std::printf("  %-20s %5dx%-5d c%d %s %zu B\n", j.name.c_str(), j.w, j.h, j.c, j.hw ? "hw" : "--", j.bytes.size());

  // the hardware list: colour ones only (one output format per batch), each `copies` times
  std::vector<Jpg*> list;
  for (int k = 0; k < copies; ++k)
    for (auto& j : files)
      if (j.hw && j.c == 3) list.push_back(&j);
  double list_mp = 0;
  for (auto* j : list) list_mp += double(j->w) * j->h / 1e6;

  auto decode_run = [&](int threads, int batch) {
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> th;
    std::vector<double> busy(threads, 0);
    auto a = Clock::now();
    for (int t = 0; t < threads; ++t)
      th.emplace_back([&, t] {
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        nvjpegJpegState_t st;
        CK(nvjpegJpegStateCreate(hw, &st));
        int inited = 0;
        for (;;) {
          const std::size_t b = next.fetch_add(std::size_t(batch));
          if (b >= list.size()) break;
          const std::size_t e = std::min(list.size(), b + std::size_t(batch));
          const int n = int(e - b);
          if (n != inited) {
            CK(nvjpegDecodeBatchedInitialize(hw, st, n, 1, NVJPEG_OUTPUT_RGBI));
            inited = n;
          }
          std::vector<const unsigned char*> d(n);
          std::vector<size_t> l(n);
          std::vector<nvjpegImage_t> o(n);
          for (int i = 0; i < n; ++i) {
            Jpg* j = list[b + i];
            d[i] = j->bytes.data();
            l[i] = j->bytes.size();
            std::memset(&o[i], 0, sizeof o[i]);
            o[i].channel[0] = j->d_out;
            o[i].pitch[0] = std::size_t(j->w) * 3;
          }
          auto c0 = Clock::now();
          CK(nvjpegDecodeBatched(hw, st, d.data(), l.data(), o.data(), s));
          busy[t] += ms(c0, Clock::now());
          CK(cudaStreamSynchronize(s));
        }
        nvjpegJpegStateDestroy(st);
        cudaStreamDestroy(s);
      });
    for (auto& x : th) x.join();
    const double wall = ms(a, Clock::now());
    double b = 0;
    for (double x : busy) b += x;
    std::printf("hw decode: %d thread(s), batch %2d: %7.1f ms for %zu images (%.0f MP) = %6.0f MP/s; "
                "in nvjpegDecodeBatched (summed) %.1f ms\n",
                threads, batch, wall, list.size(), list_mp, list_mp / wall * 1e3, b);
  };
  decode_run(1, 8);  // warm-up
  for (int threads : {1, 2, 4})
    for (int batch : {1, 4, 8, 16, 32}) decode_run(threads, batch);

  // hybrid (default backend) decode of the others, one at a time, one thread
  {
    nvjpegJpegState_t st;
    CK(nvjpegJpegStateCreate(def, &st));
    cudaStream_t s;
    cudaStreamCreate(&s);
    for (int rep = 0; rep < 2; ++rep)
      for (auto& j : files) {
        if (j.hw) continue;
        nvjpegImage_t o;
        std::memset(&o, 0, sizeof o);
        o.channel[0] = j.d_out;
        o.pitch[0] = std::size_t(j.w) * j.c;
        auto a = Clock::now();
        CK(nvjpegDecode(def, st, j.bytes.data(), j.bytes.size(),
                        j.c == 1 ? NVJPEG_OUTPUT_Y : NVJPEG_OUTPUT_RGBI, &o, s));
        CK(cudaStreamSynchronize(s));
        if (rep) std::printf("default-backend decode %-20s %.1f ms (%.0f MP/s)\n", j.name.c_str(), ms(a, Clock::now()), double(j.w) * j.h / 1e3 / ms(a, Clock::now()));
      }
  }

  // encode: per image sync, against K states then one sync
  std::vector<Jpg*> enc;
  for (int k = 0; k < copies; ++k)
    for (auto& j : files)
      if (j.c == 3) enc.push_back(&j);
  double enc_mp = 0;
  for (auto* j : enc) enc_mp += double(j->w) * j->h / 1e6;
  auto encode_run = [&](int threads, int group, nvjpegChromaSubsampling_t css) {
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> bytes{0};
    std::vector<std::thread> th;
    auto a = Clock::now();
    for (int t = 0; t < threads; ++t)
      th.emplace_back([&] {
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        std::vector<nvjpegEncoderState_t> es(group);
        nvjpegEncoderParams_t p;
        for (auto& e : es) CK(nvjpegEncoderStateCreate(hw, &e, s));
        CK(nvjpegEncoderParamsCreate(hw, &p, s));
        CK(nvjpegEncoderParamsSetQuality(p, 95, s));
        CK(nvjpegEncoderParamsSetSamplingFactors(p, css, s));
        std::vector<unsigned char> out;
        for (;;) {
          const std::size_t b = next.fetch_add(std::size_t(group));
          if (b >= enc.size()) break;
          const std::size_t e = std::min(enc.size(), b + std::size_t(group));
          for (std::size_t i = b; i < e; ++i) {
            nvjpegImage_t src;
            std::memset(&src, 0, sizeof src);
            src.channel[0] = enc[i]->d_out;
            src.pitch[0] = std::size_t(enc[i]->w) * 3;
            CK(nvjpegEncodeImage(hw, es[i - b], p, &src, NVJPEG_INPUT_RGBI, enc[i]->w, enc[i]->h, s));
          }
          CK(cudaStreamSynchronize(s));
          for (std::size_t i = b; i < e; ++i) {
            size_t len = 0;
            CK(nvjpegEncodeRetrieveBitstream(hw, es[i - b], nullptr, &len, s));
            out.resize(len);
            CK(nvjpegEncodeRetrieveBitstream(hw, es[i - b], out.data(), &len, s));
            bytes += len;
          }
          CK(cudaStreamSynchronize(s));
        }
        for (auto& e : es) nvjpegEncoderStateDestroy(e);
        nvjpegEncoderParamsDestroy(p);
        cudaStreamDestroy(s);
      });
    for (auto& x : th) x.join();
    const double wall = ms(a, Clock::now());
    std::printf("encode q95 css%d: %d thread(s), group %2d: %7.1f ms for %zu images (%.0f MP) = %6.0f MP/s, %.1f MB out\n",
                int(css), threads, group, wall, enc.size(), enc_mp, enc_mp / wall * 1e3, bytes / 1e6);
  };
  encode_run(1, 1, NVJPEG_CSS_420);  // warm-up
  for (int threads : {1, 2, 4})
    for (int group : {1, 4, 8}) encode_run(threads, group, NVJPEG_CSS_420);
  return 0;
}
