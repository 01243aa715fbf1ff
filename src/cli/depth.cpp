// cli/depth.cpp — the per-file operation of the command line for CLAHE and 16-bit images
// (cli/depth.hpp).
#include "cli/depth.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <thread>

#include "histeq/cpu.hpp"
#include "histeq/equalize16.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/gpu16.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/planes.hpp"
#include "support/cuda_check.hpp"
#include "support/device_buffer.hpp"

namespace histeq::cli {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (!s.empty() && s[0] != '.') s = "." + s;
  return s;
}

std::string device_label(const std::string& used) {
  if (used != "cpu") return used;
  const int n = cpu::usable_cpus();
  return "CPU (" + std::to_string(n) + (n == 1 ? " thread)" : " threads)");
}

/// The mode a 16-bit image runs in: the asked one, else gray (1-2 channels) or rgb (colour).
Mode mode16(const std::optional<Mode>& asked, int channels) {
  if (channels < 3) return Mode::gray;
  return asked.value_or(Mode::rgb);
}

/// name: the file the message names (in a batch the other files go on), or empty.
void check_mode16(Mode m, int channels, const std::string& name = std::string()) {
  if (channels >= 3 && m != Mode::rgb)
    throw UsageError((name.empty() ? std::string("16-bit colour images are")
                                   : "'" + name + "' is a 16-bit colour image,") +
                     " processed per channel: --mode " + to_string(m) +
                     " needs 16-bit YCbCr; use --mode rgb, or --depth 8");
}

/// The writer encode_image uses for an extension (lower case), named as the executor names it.
const char* encoder_name8(const std::string& ext) {
  if (ext == ".jpg" || ext == ".jpeg") return "libjpeg-turbo";
  if (ext == ".png") return "histeq-png+libdeflate";
  if (ext == ".pgm" || ext == ".ppm" || ext == ".pnm") return "pnm";
  return "stb";
}

/// In a batch on the GPU: the calling thread's current device becomes the next of the list.
void next_device(const ItemOpOptions& opt) {
  if (!opt.spread_over_devices || resolve_backend(opt.equalize.backend) != Backend::cuda) return;
  static std::atomic<unsigned> counter{0};
  const unsigned k = counter++;
  int dev = 0;
  if (!opt.devices.empty()) {
    dev = opt.devices[k % opt.devices.size()];
  } else {
    int n = 0;
    HISTEQ_CUDA_CHECK(cudaGetDeviceCount(&n));
    dev = n > 0 ? int(k % unsigned(n)) : 0;
  }
  HISTEQ_CUDA_CHECK(cudaSetDevice(dev));
}

/// Before decoding: an output that cannot hold the result (16 bits in JPEG/BMP/TGA, 8 bits in
/// PGM/PPM), and a CLAHE grid too large for 65536-entry LUTs, are usage errors naming the file.
void check_item_output(const ItemOpOptions& opt, const std::string& name, const std::string& ext,
                       bool apply, bool work16) {
  if (apply && work16 && !holds_16bit(ext))
    throw UsageError(
        "'" + name + "' is processed at 16 bits, which a " + ext.substr(1) +
        " file cannot hold (8 bits per sample): write .png (or .pgm/.ppm/.pnm), or add "
        "--depth 8 to convert to 8 bits");

  if (opt.kind == ItemOpKind::clahe && work16) {
    try {
      validate(opt.clahe, kBins16);
    } catch (const UsageError& e) {
      throw UsageError("--tiles " + std::to_string(opt.clahe.tiles_x) + "x" +
                       std::to_string(opt.clahe.tiles_y) + " is too large for '" + name +
                       "' at 16 bits: at most " + std::to_string(kMaxClaheLutEntries / kBins16) +
                       " tiles of 65536-entry LUTs (e.g. 64x64), or --depth 8 (" + e.what() + ")");
    }
  }
}

}  // namespace

bool needs_item_op(const ItemOpOptions& opt, bool input_is_16bit) {
  return opt.kind == ItemOpKind::clahe || input_is_16bit || opt.depth == 16;
}

bool holds_16bit(const std::string& ext) {
  const std::string e = lower(ext);
  return e == ".png" || e == ".pgm" || e == ".ppm" || e == ".pnm";
}

std::vector<std::uint8_t> run_item(const ItemOpOptions& opt, const std::uint8_t* data,
                                   std::size_t size, const std::string& name,
                                   const std::string& out_ext, ItemReport& rep) {
  const bool in16 = is_16bit_data(data, size);
  const bool work16 = opt.depth == 16 || (in16 && opt.depth != 8);
  const bool apply = opt.kind != ItemOpKind::histogram;
  const std::string ext = apply ? lower(out_ext) : std::string();
  check_item_output(opt, name, ext, apply, work16);
  EqualizeReport& er = rep.equalize;
  rep.bit_depth = work16 ? 16 : 8;
  next_device(opt);
  auto t0 = Clock::now();
  std::vector<std::uint8_t> encoded;
  if (work16) {
    Image16 img;
    if (in16) {
      img = decode_image16(data, size, name, opt.max_pixels);
      rep.decoder = "libspng/pnm";
    } else {
      const Image img8 = decode_image(data, size, name, opt.max_pixels);
      rep.decoder = jpeg::is_jpeg(data, size) ? "libjpeg-turbo" : "stb";
      img = widen_to_16(img8);
    }
    rep.times.decode_ms = ms_since(t0);
    rep.width = img.width;
    rep.height = img.height;
    rep.channels = img.channels;
    const Mode m = mode16(opt.equalize.mode, img.channels);
    check_mode16(m, img.channels, name);
    er.mode = m;
    std::string used;
    t0 = Clock::now();
    Image16 out;
    if (opt.kind == ItemOpKind::histogram) {
      er.histograms = histograms16(img, m, opt.equalize.backend, &used);
      er.kernel = used == "cpu" ? "cpu" : "hist_u16";
    } else if (opt.kind == ItemOpKind::equalize) {
      out = equalize16(img, m, opt.equalize.backend, &used);
      er.kernel = used == "cpu" ? "cpu" : "hist_u16";
    } else {
      ClaheOptions co = opt.clahe;
      co.mode = m;
      out = clahe(img, co, opt.equalize.backend, &used);
      er.kernel = used == "cpu" ? "cpu" : "clahe";
    }
    rep.times.equalize_ms = ms_since(t0);
    er.backend = used == "cpu" ? "cpu" : "cuda";
    er.device = device_label(used);
    if (apply) {
      rep.output_channels = encoded_channels(out.channels, ext);  // JPEG, BMP: see there
      out.icc = img.icc;  // as below: the encoder drops a profile that no longer fits
      Image16().pixels.swap(img.pixels);
      t0 = Clock::now();
      encoded = encode_image16(out, ext);
      rep.encoder = ext == ".png" ? "libspng" : "pnm";  // PGM/PPM (io/pnm_write.hpp)
      rep.times.encode_ms = ms_since(t0);
    }
  } else {
    Image img;
    if (in16) {  // --depth 8: narrowed on purpose, round(v / 257)
      img = narrow_to_8(decode_image16(data, size, name, opt.max_pixels));
      rep.decoder = "libspng/pnm";
    } else {
      img = decode_image(data, size, name, opt.max_pixels);
      rep.decoder = jpeg::is_jpeg(data, size) ? "libjpeg-turbo" : "stb";
    }
    rep.times.decode_ms = ms_since(t0);
    rep.width = img.width;
    rep.height = img.height;
    rep.channels = img.channels;
    t0 = Clock::now();
    Image out;
    if (opt.kind == ItemOpKind::clahe) {
      ClaheOptions co = opt.clahe;
      co.mode = opt.equalize.mode.value_or(default_mode(img.channels));
      std::string used;
      out = clahe(img, co, opt.equalize.backend, &used);
      er.mode = img.channels == 1 ? Mode::gray : co.mode;
      er.kernel = used == "cpu" ? "cpu" : "clahe";
      er.backend = used == "cpu" ? "cpu" : "cuda";
      er.device = device_label(used);
    } else if (opt.kind == ItemOpKind::equalize) {
      out = equalize(img, opt.equalize, &er);
      er.luts.clear();
      er.histograms.clear();
    } else {
      (void)image_histograms(img, opt.equalize, &er);
    }
    rep.times.equalize_ms = ms_since(t0);
    if (apply) {
      rep.output_channels = encoded_channels(out.channels, ext);  // JPEG, BMP: see there
      out.icc = img.icc;
      out.exif = img.exif;
      Image().pixels.swap(img.pixels);
      t0 = Clock::now();
      encoded = encode_image(out, ext, opt.encode);
      rep.encoder = encoder_name8(ext);
      rep.times.encode_ms = ms_since(t0);
    }
  }
  er.times.decode_ms = rep.times.decode_ms;
  er.times.apply_ms = rep.times.equalize_ms;
  er.times.encode_ms = rep.times.encode_ms;
  return encoded;
}

}  // namespace histeq::cli
