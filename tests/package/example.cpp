// example.cpp — the program of docs/library.md, built against the installed package and run by
// the package_consumer test: load an image, equalize it (GPU when usable, else the CPU twin),
// save it; then equalize its gray plane already in device memory with histeq::gpu::Equalizer
// and check the result byte for byte against the CPU. Exit status as the histeq tool:
// 0 done, 1 a runtime error (histeq::Error, CudaError, DeviceOutOfMemory), 2 a usage error.
#include <histeq/cpu.hpp>
#include <histeq/error.hpp>
#include <histeq/gpu.hpp>
#include <histeq/image_io.hpp>
#include <histeq/lut.hpp>
#include <histeq/pipeline.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

// A failed CUDA call of this program becomes a histeq::Error, like the library's own.
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw histeq::Error(std::string(what) + ": " + cudaGetErrorString(e));
}

// The gray plane of `img` equalized on the GPU from device memory.
std::vector<std::uint8_t> equalize_on_device(const std::vector<std::uint8_t>& gray) {
  const std::size_t n = gray.size();
  std::uint8_t* d_in = nullptr;
  std::uint8_t* d_out = nullptr;
  check(cudaMalloc(&d_in, n), "cudaMalloc");
  check(cudaMalloc(&d_out, n), "cudaMalloc");
  std::vector<std::uint8_t> out(n);
  try {
    histeq::gpu::Equalizer eq;  // its own non-blocking stream and buffers, reused across calls
    check(cudaMemcpyAsync(d_in, gray.data(), n, cudaMemcpyHostToDevice, eq.stream()), "upload");
    const std::string ran = eq.equalize_gray(d_in, d_out, n, histeq::Formula::opencv);
    check(cudaMemcpyAsync(out.data(), d_out, n, cudaMemcpyDeviceToHost, eq.stream()), "download");
    eq.synchronize();  // equalize_gray is asynchronous: wait before reading `out`
    std::printf("device memory: %zu samples equalized by '%s'\n", n, ran.c_str());
  } catch (...) {
    cudaFree(d_in);
    cudaFree(d_out);
    throw;
  }
  cudaFree(d_in);
  cudaFree(d_out);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IN OUT  (OUT: .png .jpg .bmp .tga)\n", argv[0]);
    return 2;
  }
  try {
    histeq::check_output_path(argv[2]);                    // UsageError for an unknown extension
    const histeq::Image in = histeq::load_image(argv[1]);  // Error: missing, corrupt, too big
    histeq::EqualizeOptions opt;                           // backend automatic, kernel auto, luma
    histeq::EqualizeReport report;
    const histeq::Image out = histeq::equalize(in, opt, &report);
    histeq::save_image(out, argv[2]);
    std::printf("%s: %dx%d, %d channel(s), equalized on %s with '%s'\n", argv[1], in.width,
                in.height, in.channels, report.device.c_str(), report.kernel.c_str());

    // The same library on data already in device memory: the gray (luma) plane.
    std::vector<std::uint8_t> gray(in.pixel_count());
    histeq::cpu::extract_planes(in.pixels.data(), in.pixel_count(), in.channels, histeq::Mode::gray,
                                gray.data());
    std::string why;
    if (!histeq::cuda_available(&why)) {
      std::printf("device memory: skipped, no usable GPU (%s)\n", why.c_str());
      return 0;
    }
    const std::vector<std::uint8_t> got = equalize_on_device(gray);
    // The CPU twin gives the same bytes: histogram -> LUT -> apply.
    const histeq::Histogram h =
        histeq::cpu::histogram(gray.data(), gray.size(), histeq::SampleType::u8, 256);
    const histeq::Lut lut = histeq::make_lut(h.data(), histeq::Formula::opencv);
    std::vector<std::uint8_t> want(gray.size());
    histeq::cpu::apply(gray.data(), gray.size(), 1, histeq::Mode::gray, &lut, want.data());
    if (got != want) throw histeq::Error("device result differs from the CPU twin");
    return 0;
  } catch (const histeq::UsageError& e) {  // before Error: UsageError derives from it
    std::fprintf(stderr, "example: %s\n", e.what());
    return 2;
  } catch (const histeq::Error& e) {  // CudaError and DeviceOutOfMemory derive from it
    std::fprintf(stderr, "example: error: %s\n", e.what());
    return 1;
  }
}
