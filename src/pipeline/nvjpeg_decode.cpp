// nvjpeg_decode.cpp — gpu::JpegCodec's decoders (nvjpeg_codec.hpp, nvjpeg_state.hpp): a batch
// to pixels, each image routed (the hardware decoder in batches of one output format, with
// nvjpegDecodeBatchedPreAllocate; the hybrid decoder one at a time; libjpeg-turbo for what
// nvJPEG does not take or fails), with its EXIF and ICC profile read from the markers; a batch
// to the stored planes on the hardware decoder; one image to host memory. Compiled with nvJPEG
// only (HISTEQ_HAVE_NVJPEG).
#ifdef HISTEQ_HAVE_NVJPEG
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "histeq/error.hpp"
#include "nvjpeg_state.hpp"
#include "support/cuda_check.hpp"

namespace histeq::gpu {

using nvjpeg_detail::align_up;
using nvjpeg_detail::chroma_factors;
using nvjpeg_detail::ends_with_eoi;

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

enum class Route { hw, hybrid, cpu };

/// An nvJPEG-decoded image's EXIF and ICC profile (jpeg::decode, which keeps them for
/// CPU-decoded ones, is not run for it).
void copy_metadata(const JpegInput& in, DeviceImage& out) {
  nvjpeg_detail::read_metadata(in.data, in.size, &out.exif, &out.icc);
}

}  // namespace

bool nvjpeg_detail::chroma_factors(nvjpegChromaSubsampling_t css, int* h, int* v) {
  switch (css) {
    case NVJPEG_CSS_444: *h = 1, *v = 1; return true;
    case NVJPEG_CSS_422: *h = 2, *v = 1; return true;
    case NVJPEG_CSS_420: *h = 2, *v = 2; return true;
    default: return false;
  }
}

bool nvjpeg_detail::ends_with_eoi(const std::uint8_t* d, std::size_t n) {
  const std::size_t tail = std::min<std::size_t>(n, 64);
  for (std::size_t i = n - tail; i + 1 < n; ++i)
    if (d[i] == 0xFF && d[i + 1] == 0xD9) return true;
  return false;
}

void nvjpeg_detail::read_metadata(const std::uint8_t* data, std::size_t size,
                                  std::vector<std::uint8_t>* exif, std::vector<std::uint8_t>* icc) {
  std::vector<std::uint8_t> icc_parts[256];
  int icc_count = 0;
  std::size_t pos = 2;
  while (pos + 4 <= size && data[pos] == 0xFF) {
    const std::uint8_t mk = data[pos + 1];
    if (mk == 0xDA || mk == 0xD9) break;
    const std::size_t len = std::size_t(data[pos + 2]) << 8 | data[pos + 3];
    if (len < 2 || pos + 2 + len > size) break;
    const std::uint8_t* seg = data + pos + 4;
    const std::size_t sl = len - 2;
    if (mk == 0xE1 && sl >= 6 && std::memcmp(seg, "Exif\0\0", 6) == 0 && exif->empty())
      exif->assign(seg, seg + sl);
    if (mk == 0xE2 && sl > 14 && std::memcmp(seg, "ICC_PROFILE\0", 12) == 0 && seg[12] >= 1) {
      icc_count = seg[13];
      icc_parts[seg[12]].assign(seg + 14, seg + sl);
    }
    pos += 2 + len;
  }
  bool complete = icc_count > 0;
  for (int k = 1; k <= icc_count; ++k) complete = complete && !icc_parts[k].empty();
  if (complete)
    for (int k = 1; k <= icc_count; ++k)
      icc->insert(icc->end(), icc_parts[k].begin(), icc_parts[k].end());
}

/// Whether the hardware decoder takes this file (parsed with the hardware handle).
bool JpegCodec::Impl::hw_supports(const JpegInput& in) {
  if (nvjpegJpegStreamParse(hw, in.data, in.size, 0, 0, hw_stream) != NVJPEG_STATUS_SUCCESS)
    return false;
  int not_supported = 1;
  if (nvjpegDecodeBatchedSupported(hw, hw_stream, &not_supported) != NVJPEG_STATUS_SUCCESS)
    return false;
  return not_supported == 0;  // 0: supported
}

/// One hardware batch of images with the same output format. False when nvJPEG failed (then
/// the caller sends these images another way).
bool JpegCodec::Impl::hw_decode(const std::vector<const JpegInput*>& ins,
                                std::vector<DeviceImage*>& outs, nvjpegOutputFormat_t fmt) {
  std::vector<nvjpegImage_t> dst(ins.size());
  int max_w = 0, max_h = 0;
  for (std::size_t i = 0; i < ins.size(); ++i) {
    std::memset(&dst[i], 0, sizeof dst[i]);
    dst[i].channel[0] = outs[i]->pixels;
    dst[i].pitch[0] = std::size_t(outs[i]->width) * outs[i]->channels;
    max_w = std::max(max_w, outs[i]->width);
    max_h = std::max(max_h, outs[i]->height);
  }
  return hw_decode_raw(ins, dst, fmt, max_w, max_h);
}

/// One hardware batch with the destinations given (planar or interleaved per fmt); max_w and
/// max_h: the batch's largest image. The state is initialized for the batch size and, with
/// nvjpegDecodeBatchedPreAllocate, sized for the largest image seen so far (4:4:4, the
/// largest sampling), so that batches of photos of varying sizes allocate nothing: without it
/// the hardware decoder ran about 3.5 times slower on the H200, host-bound inside
/// nvjpegDecodeBatched (docs/benchmarks.md, "JPEG on the device").
bool JpegCodec::Impl::hw_decode_raw(const std::vector<const JpegInput*>& ins,
                                    std::vector<nvjpegImage_t>& dst, nvjpegOutputFormat_t fmt,
                                    int max_w, int max_h) {
  const int n = int(ins.size());
  if (n == 0) return true;
  if (n != hw_batch || fmt != hw_format || max_w > pre_w || max_h > pre_h) {
    if (nvjpegDecodeBatchedInitialize(hw, hw_state, n, 1, fmt) != NVJPEG_STATUS_SUCCESS) {
      hw_batch = 0;
      return false;
    }
    pre_w = std::max(pre_w, max_w);
    pre_h = std::max(pre_h, max_h);
    // A failure here only leaves the allocation to the decode call.
    nvjpegDecodeBatchedPreAllocate(hw, hw_state, n, pre_w, pre_h, NVJPEG_CSS_444, fmt);
    hw_batch = n;
    hw_format = fmt;
  }
  std::vector<const unsigned char*> data(static_cast<std::size_t>(n));
  std::vector<std::size_t> lengths(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    data[std::size_t(i)] = ins[std::size_t(i)]->data;
    lengths[std::size_t(i)] = ins[std::size_t(i)]->size;
  }
  if (nvjpegDecodeBatched(hw, hw_state, data.data(), lengths.data(), dst.data(), stream) !=
      NVJPEG_STATUS_SUCCESS) {
    hw_batch = 0;  // re-initialize before the next batch ("also use to reset failed batches")
    return false;
  }
  return true;
}

bool JpegCodec::Impl::hybrid_decode(const JpegInput& in, DeviceImage& o) {
  ensure_default();
  nvjpegImage_t dst;
  std::memset(&dst, 0, sizeof dst);
  dst.channel[0] = o.pixels;
  dst.pitch[0] = std::size_t(o.width) * o.channels;
  const nvjpegOutputFormat_t fmt = o.channels == 1 ? NVJPEG_OUTPUT_Y : NVJPEG_OUTPUT_RGBI;
  return nvjpegDecode(def, def_state, in.data, in.size, fmt, &dst, stream) == NVJPEG_STATUS_SUCCESS;
}

/// CPU decode into `o` (metadata, shape, error); returns the host image (pixels to upload).
Image JpegCodec::Impl::cpu_decode(const JpegInput& in, DeviceImage& o) {
  jpeg::DecodeOptions d;
  d.max_pixels = opt.max_pixels;
  try {
    Image img = jpeg::decode(in.data, in.size, in.name, d);
    o.width = img.width;
    o.height = img.height;
    o.channels = img.channels;
    o.exif = img.exif;
    o.icc = img.icc;
    o.decoder = "libjpeg-turbo";
    return img;
  } catch (const Error& e) {
    o.error = e.what();
    return {};
  }
}

std::vector<DeviceImage> JpegCodec::decode(const std::vector<JpegInput>& batch) {
  Impl& m = *impl_;
  const std::size_t n = batch.size();
  std::vector<DeviceImage> res(n);
  std::vector<Route> route(n, Route::cpu);
  std::vector<Image> host(n);  // CPU-decoded pixels, uploaded at the end

  // 1. Route each image; CPU ones are decoded now (their shape is known only afterwards).
  for (std::size_t i = 0; i < n; ++i) {
    const JpegInput& in = batch[i];
    DeviceImage& o = res[i];
    bool gpu_ok =
        m.opt.use_gpu && jpeg::is_jpeg(in.data, in.size) && ends_with_eoi(in.data, in.size);
    jpeg::Info info;
    if (gpu_ok) {
      try {
        // Also the structure checks (no scan, a component no scan covers, too few entropy-coded
        // bytes for the declared size): a file failing them never reaches nvJPEG; the CPU
        // decoder below refuses it with the reason.
        info = jpeg::read_info(in.data, in.size, in.name);
      } catch (const Error&) {
        gpu_ok = false;
      }
    }
    gpu_ok = gpu_ok && nvjpeg_takes(info, m.opt.max_pixels);
    if (!gpu_ok) {
      host[i] = m.cpu_decode(in, o);
      continue;
    }
    o.width = info.width;
    o.height = info.height;
    o.channels = info.components == 1 ? 1 : 3;
    route[i] =
        (m.ensure_hw() && !info.progressive && m.hw_supports(in)) ? Route::hw : Route::hybrid;
  }

  // 2. One device slot per image.
  std::vector<std::size_t> offset(n, 0);
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!res[i].error.empty()) continue;
    offset[i] = total;
    total += align_up(res[i].byte_count());
  }
  if (total > m.out.size()) m.out = DeviceBuffer<std::uint8_t>(total + total / 4);
  for (std::size_t i = 0; i < n; ++i)
    if (res[i].error.empty()) res[i].pixels = m.out.get() + offset[i];

  // 3. Hardware batches (colour and gray separately: one output format per batch).
  for (int gray = 0; gray < 2; ++gray) {
    std::vector<const JpegInput*> ins;
    std::vector<DeviceImage*> outs;
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < n; ++i)
      if (route[i] == Route::hw && (res[i].channels == 1) == bool(gray)) {
        ins.push_back(&batch[i]);
        outs.push_back(&res[i]);
        idx.push_back(i);
      }
    const bool ok = m.hw_decode(ins, outs, gray ? NVJPEG_OUTPUT_Y : NVJPEG_OUTPUT_RGBI);
    for (std::size_t i : idx) {
      if (ok)
        res[i].decoder = "nvjpeg-hw";
      else
        route[i] = Route::hybrid;
    }
  }
  // 4. Hybrid, one at a time; a failure goes to the CPU decoder.
  for (std::size_t i = 0; i < n; ++i) {
    if (route[i] != Route::hybrid) continue;
    if (m.hybrid_decode(batch[i], res[i])) {
      res[i].decoder = "nvjpeg-hybrid";
      continue;
    }
    route[i] = Route::cpu;
    std::uint8_t* slot = res[i].pixels;
    const std::size_t cap = res[i].byte_count();
    host[i] = m.cpu_decode(batch[i], res[i]);
    res[i].pixels = res[i].error.empty() && host[i].pixels.size() <= cap ? slot : nullptr;
    if (res[i].error.empty() && !res[i].pixels)
      res[i].error = quoted(batch[i].name) + ": decoded shape does not match its header";
  }
  // 5. Metadata of nvJPEG-decoded images, from the markers (jpeg::decode is not run for them).
  for (std::size_t i = 0; i < n; ++i)
    if (route[i] != Route::cpu && res[i].error.empty()) copy_metadata(batch[i], res[i]);
  // 6. Upload the CPU-decoded images, then wait for everything.
  for (std::size_t i = 0; i < n; ++i) {
    if (route[i] != Route::cpu || !res[i].error.empty() || host[i].pixels.empty()) continue;
    HISTEQ_CUDA_CHECK(cudaMemcpyAsync(res[i].pixels, host[i].pixels.data(), host[i].pixels.size(),
                                      cudaMemcpyHostToDevice, m.stream));
  }
  HISTEQ_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  return res;
}

std::vector<DevicePlanes> JpegCodec::decode_planes(const std::vector<JpegInput>& batch) {
  Impl& m = *impl_;
  const std::size_t n = batch.size();
  std::vector<DevicePlanes> res(n);
  std::vector<const JpegInput*> ins;
  std::vector<std::size_t> idx;
  std::vector<std::size_t> offset(n, 0);
  std::size_t total = 0;
  const bool hw = m.opt.use_gpu && m.ensure_hw();
  for (std::size_t i = 0; i < n; ++i) {
    const JpegInput& in = batch[i];
    DevicePlanes& o = res[i];
    o.declined = true;
    if (!hw || !jpeg::is_jpeg(in.data, in.size) || !ends_with_eoi(in.data, in.size)) continue;
    if (nvjpegJpegStreamParseHeader(m.hw, in.data, in.size, m.hw_stream) != NVJPEG_STATUS_SUCCESS)
      continue;
    int not_supported = 1;
    unsigned comps = 0, w = 0, h = 0;
    nvjpegChromaSubsampling_t css = NVJPEG_CSS_UNKNOWN;
    if (nvjpegDecodeBatchedSupported(m.hw, m.hw_stream, &not_supported) != NVJPEG_STATUS_SUCCESS ||
        not_supported != 0 ||
        nvjpegJpegStreamGetComponentsNum(m.hw_stream, &comps) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStreamGetFrameDimensions(m.hw_stream, &w, &h) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStreamGetChromaSubsampling(m.hw_stream, &css) != NVJPEG_STATUS_SUCCESS)
      continue;
    if (w == 0 || h == 0 || std::uint64_t(w) * h > m.opt.max_pixels) continue;
    if (comps == 3 && !chroma_factors(css, &o.chroma_h, &o.chroma_v)) continue;
    if (comps != 1 && comps != 3) continue;
    o.declined = false;
    o.width = int(w);
    o.height = int(h);
    o.components = int(comps);
    for (int c = 0; c < o.components; ++c) {
      o.plane_width[c] = c == 0 ? o.width : (o.width + o.chroma_h - 1) / o.chroma_h;
      o.plane_height[c] = c == 0 ? o.height : (o.height + o.chroma_v - 1) / o.chroma_v;
    }
    offset[i] = total;
    for (int c = 0; c < o.components; ++c)
      total += align_up(std::size_t(o.plane_width[c]) * std::size_t(o.plane_height[c]));
    ins.push_back(&in);
    idx.push_back(i);
  }
  if (ins.empty()) return res;
  if (total > m.planes_out.size()) m.planes_out = DeviceBuffer<std::uint8_t>(total + total / 4);
  std::vector<nvjpegImage_t> dst(ins.size());
  for (std::size_t k = 0; k < idx.size(); ++k) {
    DevicePlanes& o = res[idx[k]];
    std::memset(&dst[k], 0, sizeof dst[k]);
    std::size_t off = offset[idx[k]];
    for (int c = 0; c < o.components; ++c) {
      o.plane[c] = m.planes_out.get() + off;
      dst[k].channel[c] = o.plane[c];
      dst[k].pitch[c] = std::size_t(o.plane_width[c]);
      off += align_up(std::size_t(o.plane_width[c]) * std::size_t(o.plane_height[c]));
    }
  }
  int max_w = 0, max_h = 0;
  for (std::size_t i : idx) {
    max_w = std::max(max_w, res[i].width);
    max_h = std::max(max_h, res[i].height);
  }
  if (!m.hw_decode_raw(ins, dst, NVJPEG_OUTPUT_YUV, max_w, max_h)) {
    for (std::size_t i : idx) res[i] = DevicePlanes{}, res[i].declined = true;
    return res;
  }
  for (std::size_t i : idx) {
    DeviceImage meta;
    copy_metadata(batch[i], meta);
    res[i].exif = std::move(meta.exif);
    res[i].icc = std::move(meta.icc);
  }
  HISTEQ_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  return res;
}

Image JpegCodec::decode_to_host(const JpegInput& in, std::string* decoder) {
  std::vector<DeviceImage> r = decode({in});
  DeviceImage& d = r.at(0);
  if (!d.error.empty()) throw Error(d.error);
  Image img;
  img.width = d.width;
  img.height = d.height;
  img.channels = d.channels;
  img.exif = std::move(d.exif);
  img.icc = std::move(d.icc);
  img.pixels.resize(d.byte_count());
  HISTEQ_CUDA_CHECK(cudaMemcpyAsync(img.pixels.data(), d.pixels, img.pixels.size(),
                                    cudaMemcpyDeviceToHost, impl_->stream));
  HISTEQ_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
  if (decoder) *decoder = d.decoder;
  return img;
}

}  // namespace histeq::gpu

#endif  // HISTEQ_HAVE_NVJPEG
