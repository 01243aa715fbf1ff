// item.cpp — one file's plan and its run on the CPU or a leased device engine (histeq/item.hpp).
#include "histeq/item.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "histeq/clahe.hpp"
#include "histeq/codec_names.hpp"
#include "histeq/cpu.hpp"
#include "histeq/equalize16.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/gpu16.hpp"
#include "histeq/image16.hpp"
#include "histeq/jpeg_planes.hpp"
#include "histeq/match.hpp"
#include "histeq/nvjpeg_codec.hpp"
#include "histeq/pipeline.hpp"
#include "histeq/planes.hpp"
#include "image_engine.hpp"
#include "io/png_fast.hpp"
#include "support/cuda_check.hpp"

namespace histeq {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string lower_ext(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (!s.empty() && s[0] != '.') s = "." + s;
  return s;
}

bool is_jpeg_ext(const std::string& lower) { return lower == ".jpg" || lower == ".jpeg"; }

std::string cpu_label(int threads) {
  const int n = threads > 0 ? threads : cpu::usable_cpus();
  return "CPU (" + std::to_string(n) + (n == 1 ? " thread)" : " threads)");
}

std::string device_label(const std::string& used, int threads) {
  return used == "cpu" ? cpu_label(threads) : used;
}

/// The format of a file from its first bytes ("" when not recognized).
std::string sniff_format(const std::uint8_t* d, std::size_t n) {
  if (jpeg::is_jpeg(d, n)) return "jpeg";
  if (n >= 8 && d[0] == 0x89 && d[1] == 'P' && d[2] == 'N' && d[3] == 'G') return "png";
  if (n >= 2 && d[0] == 'P' && (d[1] == '5' || d[1] == '6')) return "pnm";
  if (n >= 2 && d[0] == 'B' && d[1] == 'M') return "bmp";
  if (n >= 6 && d[0] == 'G' && d[1] == 'I' && d[2] == 'F') return "gif";
  return "";
}

/// The mode a 16-bit image runs in: the asked one, else gray (1-2 channels) or rgb (colour).
Mode mode16(const std::optional<Mode>& asked, int channels) {
  if (channels < 3) return Mode::gray;
  return asked.value_or(Mode::rgb);
}

/// Gray+alpha with mode gray asked: its gray channel alone, as the 8-bit route drops the alpha
/// (one channel of equalized gray). Any other image, or no mode asked, is left as it is.
void drop_alpha16_for_gray(Image16& img, const std::optional<Mode>& asked) {
  if (img.channels != 2 || asked != Mode::gray) return;
  const std::size_t n = img.pixel_count();
  for (std::size_t i = 0; i < n; ++i) img.pixels[i] = img.pixels[2 * i];
  img.pixels.resize(n);
  img.pixels.shrink_to_fit();
  img.channels = 1;
}

void check_mode16(Mode m, int channels, const std::string& name) {
  if (channels >= 3 && m != Mode::rgb)
    throw UsageError("'" + name + "' is a 16-bit colour image, processed per channel: mode " +
                     to_string(m) + " needs 16-bit YCbCr; use mode rgb, or a depth of 8");
}

/// Before decoding: an output that cannot hold the result (16 bits in JPEG/BMP/TGA), and a
/// CLAHE grid too large for 65536-entry LUTs, are usage errors naming the file.
void check_output(const Operation& op, const std::string& name, const std::string& ext,
                  bool work16) {
  if (op.writes() && work16 && !holds_16bit(ext))
    throw UsageError("'" + name + "' is processed at 16 bits, which a " + ext.substr(1) +
                     " file cannot hold (8 bits per sample): write .png (or .pgm/.ppm/.pnm), or "
                     "process it at a depth of 8");
  if (op.kind == OpKind::clahe && work16) {
    try {
      validate(op.clahe, kBins16);
    } catch (const UsageError& e) {
      throw UsageError("a CLAHE grid of " + std::to_string(op.clahe.tiles_x) + "x" +
                       std::to_string(op.clahe.tiles_y) + " tiles is too large for '" + name +
                       "' at 16 bits: at most " + std::to_string(kMaxClaheLutEntries / kBins16) +
                       " tiles of 65536-entry LUTs (e.g. 64x64), or a depth of 8 (" + e.what() +
                       ")");
    }
  }
}

/// The region (masked equalization, masked CLAHE) against this image: a usage error naming the
/// file. Every pixel (region.all()): nothing to check.
void check_region(const Operation& op, int width, int height, const std::string& name) {
  const Region& region = op.equalize.region;
  if (region.all()) return;
  region.check(width, height, "'" + name + "'");
}

/// OpKind::match: the reference's histograms for this image (one per plane of `mode`, at
/// `bits`); null for the other kinds. A reference this image cannot be matched to (a colour one
/// for a 16-bit gray image) is a usage error naming both.
std::shared_ptr<const std::vector<Histogram>> reference_for(const Operation& op, Mode mode,
                                                            int channels, int bits,
                                                            const std::string& name) {
  if (op.kind != OpKind::match) return nullptr;
  if (!op.reference) throw UsageError("histogram matching needs a reference image");
  try {
    return op.reference->histograms(mode, channels, bits);
  } catch (const UsageError& e) {
    throw UsageError("'" + name + "' cannot be matched to its reference: " + e.what());
  }
}

/// A batch spreads the GPU's CLAHE and 16-bit items over the devices, round robin: the calling
/// thread's current device becomes the next of the list.
void next_device(const ItemContext& ctx) {
  if (ctx.devices.empty() || resolve_backend(ctx.op.equalize.backend) != Backend::cuda) return;
  static std::atomic<unsigned> counter{0};
  HISTEQ_CUDA_CHECK(cudaSetDevice(ctx.devices[counter++ % ctx.devices.size()]));
}

/// 8-bit decode through the chain: the caller's codecs, libjpeg-turbo for JPEG, histeq's PNG
/// decoder, then decode_image (stb_image, histeq's PNM reader).
Image decode8(const ItemContext& ctx, const std::uint8_t* data, std::size_t size,
              const std::string& name, std::string* decoder) {
  for (const auto& c : ctx.codecs) {
    Image img;
    if (c && c->decode(data, size, name, ctx.max_pixels, &img)) {
      *decoder = c->name();
      return img;
    }
  }
  if (ctx.fast_png) {
    static const std::shared_ptr<Codec> fast = make_fast_png_decoder();
    Image img;
    if (fast->decode(data, size, name, ctx.max_pixels, &img)) {
      img.icc = png::read_iccp(data, size);  // as decode_image keeps it
      *decoder = fast->name();
      return img;
    }
  }
  return decode_image(data, size, name, ctx.max_pixels, decoder);
}

std::vector<std::uint8_t> encode8(const ItemContext& ctx, const Image& img, const std::string& ext,
                                  std::string* encoder) {
  for (const auto& c : ctx.codecs) {
    std::vector<std::uint8_t> bytes;
    if (c && c->encode(img, ext, ctx.encode, &bytes)) {
      *encoder = c->name();
      return bytes;
    }
  }
  *encoder = codec::encoder_name(ext, ctx.encode.png_level);
  return encode_image(img, ext, ctx.encode);
}

/// The operation on an 8-bit image: equalize / match / histogram through the stage sequence (a
/// leased device engine, the CUDA backend's one-call engine, or the CPU), CLAHE on its backend.
/// The region (op.equalize.region) and the reference's histograms (match) go with the options.
Image run8(const ItemContext& ctx, Image&& img, const std::string& name, ItemReport& rep) {
  EqualizeReport& er = rep.equalize;
  const Operation& op = ctx.op;
  check_region(op, img.width, img.height, name);
  if (op.kind == OpKind::clahe) {
    ClaheOptions co = op.clahe;
    co.mode = op.equalize.mode.value_or(default_mode(img.channels));
    co.region = op.equalize.region;
    std::string used;
    Image out = clahe(img, co, op.equalize.backend, &used);
    er.mode = mode_that_runs(co.mode, img.channels);
    er.kernel = used == "cpu" ? "cpu" : "clahe";
    er.backend = used == "cpu" ? "cpu" : "cuda";
    er.device = device_label(used, ctx.threads);
    out.icc = img.icc;
    out.exif = img.exif;
    return out;
  }
  const bool apply = op.kind != OpKind::histogram;
  EqualizeOptions opt = op.equalize;
  opt.reference = reference_for(op, op.equalize.mode.value_or(default_mode(img.channels)),
                                img.channels, 8, name);
  Image out;
  if (ctx.device) {
    out = ctx.device->run(img, &img, opt, apply, true, er);
    rep.times.upload_ms = er.times.upload_ms;
    rep.times.download_ms = er.times.download_ms;
    rep.times.equalize_ms = er.times.histogram_ms + er.times.cdf_lut_ms + er.times.apply_ms;
  } else if (opt.backend == Backend::cuda) {
    if (apply)
      out = equalize(img, opt, &er);
    else
      image_histograms(img, opt, &er);
    rep.times.upload_ms = er.times.upload_ms;
    rep.times.download_ms = er.times.download_ms;
    rep.times.equalize_ms = er.times.histogram_ms + er.times.cdf_lut_ms + er.times.apply_ms;
  } else {
    out = cpu::equalize_stages(std::move(img), opt, apply, ctx.threads, er);
    er.device = cpu_label(ctx.threads);
    rep.times.equalize_ms = er.times.total_ms;
  }
  return out;
}

/// A 16-bit image (or an 8-bit one widened): equalize16 / match / histograms16 / CLAHE on its
/// backend, with the region and the reference's 65536-bin histograms.
Image16 run16(const ItemContext& ctx, const Image16& img, const std::string& name,
              ItemReport& rep) {
  EqualizeReport& er = rep.equalize;
  const Operation& op = ctx.op;
  const Mode m = mode16(op.equalize.mode, img.channels);
  check_mode16(m, img.channels, name);
  check_region(op, img.width, img.height, name);
  er.mode = m;
  std::string used;
  Image16 out;
  const Region& region = op.equalize.region;
  if (op.kind == OpKind::histogram) {
    er.histograms = histograms16(img, m, op.equalize.backend, &used, region);
    er.kernel = used == "cpu" ? "cpu" : "hist_u16";
  } else if (op.kind == OpKind::equalize || op.kind == OpKind::match) {
    const auto reference = reference_for(op, m, img.channels, 16, name);
    out = equalize16(img, m, op.equalize.backend, &used, region, reference.get());
    er.kernel = used == "cpu" ? "cpu" : "hist_u16";
  } else {
    ClaheOptions co = op.clahe;
    co.mode = m;
    co.region = region;
    out = clahe(img, co, op.equalize.backend, &used);
    er.kernel = used == "cpu" ? "cpu" : "clahe";
  }
  er.backend = used == "cpu" ? "cpu" : "cuda";
  er.device = device_label(used, ctx.threads);
  out.icc = img.icc;
  return out;
}

std::vector<std::uint8_t> run_pixels(const ItemContext& ctx, const ItemPlan& plan,
                                     const std::uint8_t* data, std::size_t size,
                                     const std::string& name, const std::string& ext,
                                     ItemReport& rep) {
  const Operation& op = ctx.op;
  const bool in16 = plan.bits == 16;
  const bool work16 = plan.work_bits == 16;
  check_output(op, name, ext, work16);
  if (work16 && op.kind == OpKind::equalize && op.equalize.formula != Formula::opencv)
    throw UsageError("'" + name + "' is equalized at 16 bits (" +
                     (in16 ? "a 16-bit file" : "depth 16") + "), and the formula '" +
                     to_string(op.equalize.formula) +
                     "' is 8-bit equalization's: 16 bits take OpenCV's over 65536 levels; use the "
                     "formula opencv, or a depth of 8");
  rep.bit_depth = work16 ? 16 : 8;
  next_device(ctx);
  auto t0 = Clock::now();
  std::vector<std::uint8_t> encoded;
  if (work16) {
    Image16 img;
    if (in16) {
      img = decode_image16(data, size, name, ctx.max_pixels);
      rep.decoder = codec::decoder16_name(data, size);
    } else {
      img = widen_to_16(decode8(ctx, data, size, name, &rep.decoder));
    }
    rep.times.decode_ms = ms_since(t0);
    rep.width = img.width;
    rep.height = img.height;
    rep.channels = img.channels;
    drop_alpha16_for_gray(img, op.equalize.mode);
    t0 = Clock::now();
    Image16 out = run16(ctx, img, name, rep);
    rep.times.equalize_ms = ms_since(t0);
    if (op.writes()) {
      rep.output_channels = encoded_channels(out.channels, ext);
      Image16().pixels.swap(img.pixels);
      t0 = Clock::now();
      encoded = encode_image16(out, ext, ctx.encode.png_level);
      rep.encoder = codec::encoder16_name(ext);
      rep.times.encode_ms = ms_since(t0);
    }
  } else {
    Image img;
    if (in16) {  // a depth of 8 asked for: narrowed on purpose, round(v / 257)
      img = narrow_to_8(decode_image16(data, size, name, ctx.max_pixels));
      rep.decoder = codec::decoder16_name(data, size);
    } else {
      img = decode8(ctx, data, size, name, &rep.decoder);
    }
    rep.times.decode_ms = ms_since(t0);
    rep.width = img.width;
    rep.height = img.height;
    rep.channels = img.channels;
    rep.equalize.mode = ctx.op.equalize.mode.value_or(default_mode(img.channels));
    t0 = Clock::now();
    const Image out = run8(ctx, std::move(img), name, rep);
    if (rep.times.equalize_ms == 0) rep.times.equalize_ms = ms_since(t0);
    if (op.writes()) {
      rep.output_channels = encoded_channels(out.channels, ext);
      t0 = Clock::now();
      encoded = encode8(ctx, out, ext, &rep.encoder);
      rep.times.encode_ms = ms_since(t0);
    }
  }
  EqualizeReport& er = rep.equalize;
  er.times.decode_ms = rep.times.decode_ms;
  er.times.encode_ms = rep.times.encode_ms;
  return encoded;
}

}  // namespace

std::vector<std::uint8_t> encode_item(const ItemContext& ctx, const Image& img,
                                      const std::string& ext, std::string* encoder) {
  return encode8(ctx, img, lower_ext(ext), encoder);
}

ItemError error_kind_of(const std::exception& e) {
  if (dynamic_cast<const FileError*>(&e)) return ItemError::file;
  if (dynamic_cast<const DecodeError*>(&e)) return ItemError::decode;
  if (dynamic_cast<const CudaError*>(&e)) return ItemError::device;
  if (dynamic_cast<const UsageError*>(&e)) return ItemError::usage;
  if (dynamic_cast<const std::bad_alloc*>(&e)) return ItemError::memory;
  return ItemError::other;
}

void set_error(ItemReport& rep, const std::exception& e) {
  rep.ok = false;
  rep.error = e.what();
  rep.error_kind = error_kind_of(e);
  const auto* f = dynamic_cast<const FileError*>(&e);
  rep.error_errno = f ? f->code() : 0;
  rep.error_path = f ? f->path() : std::string();
}

const char* to_string(ItemRoute r) {
  switch (r) {
    case ItemRoute::jpeg_planes: return "jpeg-planes";
    case ItemRoute::jpeg_device: return "jpeg-device";
    default: return "pixels";
  }
}

bool holds_16bit(const std::string& ext) {
  const std::string e = lower_ext(ext);
  return e == ".png" || e == ".pgm" || e == ".ppm" || e == ".pnm";
}

ItemPlan plan_item(const std::uint8_t* data, std::size_t size, const Operation& op,
                   const std::string& out_ext, const EncodeOptions& enc, std::uint64_t max_pixels,
                   const RouteChoice& choice) {
  ItemPlan p;
  p.format = sniff_format(data, size);
  p.bits = is_16bit_data(data, size) ? 16 : 8;
  p.work_bits = op.depth == 16 || (p.bits == 16 && op.depth != 8) ? 16 : 8;
  int w = 0, h = 0, c = 0;
  jpeg::Info head;
  if (p.format == "jpeg") {  // stb_image reads no JPEG here: libjpeg-turbo decodes them
    if (jpeg::read_header(data, size, &head)) {
      p.width = head.width;
      p.height = head.height;
      p.channels = head.components == 1 ? 1 : 3;  // as decoded (CMYK/YCCK: RGB)
    }
  } else if (image_info(data, size, &w, &h, &c)) {
    p.width = w;
    p.height = h;
    p.channels = c;
  }
  const std::size_t px = std::size_t(std::max(p.width, 0)) * std::size_t(std::max(p.height, 0));
  const std::size_t sample = p.work_bits == 16 ? 2 : 1;
  p.cost = size + px * std::size_t(std::max(p.channels, 1)) * sample * 2 + px * sample;
  if (px > max_pixels) p.cost = size;  // refused by its decoder: no pixels to hold
  p.cpu_cost = p.cost;
  const std::string ext = lower_ext(out_ext);
  // The stored-planes routes (the CPU's and the device's) equalize or match Y over the whole
  // image: a region or another kind runs on pixels.
  if (p.format != "jpeg" || (op.kind != OpKind::equalize && op.kind != OpKind::match) ||
      p.work_bits != 8 || !op.equalize.region.all())
    return p;
  try {
    p.jpeg = jpeg::read_info(data, size, "");
    p.jpeg_checked = true;
  } catch (const Error&) {
    return p;  // the CPU decoder names the defect
  }
  const bool luma = !op.equalize.mode || *op.equalize.mode == Mode::luma ||
                    (p.jpeg.components == 1 && *op.equalize.mode == Mode::gray);
  const jpeg::EncodeOptions je{enc.quality, enc.subsampling};
  p.cpu_planes = choice.cpu_planes && is_jpeg_ext(ext) && luma && op.equalize.kernel == "auto" &&
                 jpeg::planes_route(p.jpeg, je, jpeg::Orientation::apply);
  p.device_planes = is_jpeg_ext(ext) && luma && gpu::nvjpeg_built() &&
                    gpu::planes_candidate(p.jpeg, je, max_pixels);
  if (choice.device_all_jpeg || (choice.device_planes && p.device_planes))
    p.route = ItemRoute::jpeg_device;
  else if (p.cpu_planes)
    p.route = ItemRoute::jpeg_planes;
  if (p.cpu_planes) {
    // The budget counts what an item holds while it waits. On the planes route the pixels never
    // exist as RGB, and the planes (or a progressive file's coefficients) exist only while a
    // worker decodes it, at most --jobs at once, and while the device route takes its part: the
    // file is what waits. Counting a progressive file's coefficients too (4 bytes a stored
    // sample: libjpeg's arrays and their copy) filled the default cap with split files waiting
    // for the device's inverse DCT: the 10 GP plasma run took 8.0 s against 5.9 s (H200
    // machine, a14868c against 42a482c; bench/results/h200/e2e/plasma80_budget.txt).
    p.cost = size;
  }
  p.cpu_cost = p.cost;
  // On the device route the host holds the file and the encoded output (at most a few times the
  // file at quality 95; a little headroom for the small ones).
  if (p.route == ItemRoute::jpeg_device) p.cost = 4 * size + (std::size_t(1) << 20);
  return p;
}

std::vector<std::uint8_t> run_item(const ItemContext& ctx, const ItemPlan& plan,
                                   const std::uint8_t* data, std::size_t size,
                                   const std::string& name, const std::string& out_ext,
                                   ItemReport& rep) {
  const std::string ext = ctx.op.writes() ? lower_ext(out_ext) : std::string();
  if (plan.cpu_planes && plan.route != ItemRoute::pixels) {
    EqualizeReport& er = rep.equalize;
    std::vector<std::uint8_t> bytes;
    EqualizeOptions opt = ctx.op.equalize;
    opt.reference = reference_for(ctx.op, Mode::luma, 3, 8, name);  // null unless matching
    if (opt.reference) check_match_reference(*opt.reference, 1, 256);
    if (equalize_jpeg_planes(data, size, name, opt, {ctx.encode.quality, ctx.encode.subsampling},
                             ctx.max_pixels, &bytes, &er, &rep.width, &rep.height)) {
      er.device = cpu_label(ctx.threads);
      rep.channels = rep.output_channels = 3;
      rep.decoder = rep.encoder = codec::kLibjpegTurboYcbcr;
      rep.times.decode_ms = er.times.decode_ms;
      rep.times.equalize_ms = er.times.histogram_ms + er.times.cdf_lut_ms + er.times.apply_ms;
      rep.times.encode_ms = er.times.encode_ms;
      return bytes;
    }
    // a marker after the frame header took it off the route: the pixels route below
    rep.equalize = EqualizeReport{};
  }
  return run_pixels(ctx, plan, data, size, name, ext, rep);
}

}  // namespace histeq
