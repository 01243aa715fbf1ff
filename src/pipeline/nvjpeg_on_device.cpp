// nvjpeg_on_device.cpp — the device-resident JPEG route of one file (nvjpeg_codec.hpp:
// equalize_on_device, equalize_jpeg_on_device): decoded by gpu::JpegCodec, equalized and encoded
// on the device, so that only the compressed bytes cross to the host; in luma mode the stored
// planes where the hardware decoder takes them. Compiled with nvJPEG only (HISTEQ_HAVE_NVJPEG).
#ifdef HISTEQ_HAVE_NVJPEG
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/planes.hpp"
#include "image_engine.hpp"
#include "nvjpeg_state.hpp"

namespace histeq::gpu {

void equalize_on_device(Equalizer& eq, const DeviceImage& img, const EqualizeOptions& opt,
                        std::uint8_t* d_out, EqualizeReport* report) {
  if ((img.channels != 1 && img.channels != 3) || img.width <= 0 || img.height <= 0 || !img.pixels)
    throw Error("equalize_on_device: need a decoded 1- or 3-channel device image");
  EqualizeReport local;
  EqualizeReport& rep = report ? *report : local;
  rep = EqualizeReport{};
  ImageEngine engine(eq);
  engine.run_device(img.pixels, img.width, img.height, img.channels, opt, d_out, rep);
}

namespace {

/// The planes route of one file (as the executor's device route runs a batch): decode into the
/// stored planes, Y equalized (equalize_gray: the bytes of Equalizer::equalize_batch), encoded
/// from the planes. False when the hardware decoder declines the file.
bool planes_on_device(Equalizer& eq, JpegCodec& codec, const JpegInput& in,
                      const EqualizeOptions& opt, const jpeg::EncodeOptions& enc,
                      EqualizeReport* report, JpegOnDevice* r) {
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  auto t = Clock::now();
  std::vector<DevicePlanes> dec = codec.decode_planes({in});
  if (dec.at(0).declined) return false;
  r->decode_ms = ms_since(t);
  DevicePlanes p = dec[0];
  const std::size_t n = std::size_t(p.width) * std::size_t(p.height);
  DeviceBuffer<std::uint8_t> y(n);
  t = Clock::now();
  const std::string ran = eq.equalize_gray(p.plane[0], y.get(), n, opt.formula);
  p.plane[0] = y.get();
  r->bytes = std::move(codec.encode_planes({p}, enc).at(0));
  r->encode_ms = ms_since(t);
  r->width = p.width;
  r->height = p.height;
  r->channels = r->out_channels = p.components;
  r->decoder = "nvjpeg-hw";
  if (report) {
    *report = EqualizeReport{};
    report->backend = "cuda";
    report->device = device_name();
    report->kernel = ran;
    report->mode = p.components == 1 ? Mode::gray : Mode::luma;
  }
  return true;
}

}  // namespace

JpegOnDevice equalize_jpeg_on_device(Equalizer& eq, JpegCodec& codec, const JpegInput& in,
                                     const EqualizeOptions& opt, const jpeg::EncodeOptions& enc,
                                     EqualizeReport* report) {
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  JpegOnDevice r;
  {  // luma mode into a JPEG: the stored planes, where the hardware decoder takes them
    jpeg::Info info;
    bool checked = false;
    try {
      info = jpeg::read_info(in.data, in.size, in.name);
      checked = true;
    } catch (const Error&) {  // the decoders below name the defect
    }
    const bool luma =
        !opt.mode || *opt.mode == Mode::luma || (info.components == 1 && *opt.mode == Mode::gray);
    // equalize_gray counts every pixel with the formula: a region or a reference takes the
    // stage sequence below.
    if (checked && luma && opt.kernel == "auto" && opt.region.all() && !opt.reference &&
        planes_candidate(info, enc, std::uint64_t(1) << 40) &&
        planes_on_device(eq, codec, in, opt, enc, report, &r))
      return r;
  }
  auto t = Clock::now();
  std::vector<DeviceImage> dec = codec.decode({in});
  r.decode_ms = ms_since(t);
  const DeviceImage& img = dec.at(0);
  if (!img.error.empty()) throw Error(img.error);
  r.width = img.width;
  r.height = img.height;
  r.channels = img.channels;
  r.decoder = img.decoder;
  const Mode mode = opt.mode.value_or(default_mode(img.channels));
  r.out_channels = output_channels(mode, img.channels);
  DeviceBuffer<std::uint8_t> d_out(img.byte_count() / std::size_t(img.channels) *
                                   std::size_t(r.out_channels));
  equalize_on_device(eq, img, opt, d_out.get(), report);
  t = Clock::now();
  r.bytes =
      codec.encode(d_out.get(), img.width, img.height, r.out_channels, enc, img.exif, img.icc);
  r.encode_ms = ms_since(t);
  return r;
}

}  // namespace histeq::gpu

#endif  // HISTEQ_HAVE_NVJPEG
