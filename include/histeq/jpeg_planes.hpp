// histeq/jpeg_planes.hpp — luma mode of a colour JPEG written as a JPEG, on the CPU, in the
// file's own YCbCr planes (jpeg::decode_planes, jpeg::encode_planes).
//
// Luma mode equalizes Y and keeps the chroma. For pixels decoded to RGB (equalize()), Y, Cb and
// Cr are recomputed from the RGB samples with OpenCV's YCrCb conversion and the result goes back
// to RGB, the encoder then converts it to YCbCr again and averages the chroma down. A JPEG
// already holds Y, Cb and Cr: this route equalizes the stored Y samples, keeps Cb and Cr as
// stored (only averaged down when the output asks for coarser chroma than the file has) and
// encodes the planes. It skips libjpeg's upsampling and both colour conversions, and the chroma
// is never resampled up and down again.
//
// The result is not equal to the RGB route's: Y recomputed from rounded, clamped RGB differs
// from the stored Y by about one level at some pixels, so the histograms and LUTs differ a
// little (README "JPEG notes" and docs/benchmarks.md give the difference measured on photographs).
// Gray JPEGs are one plane either way and take the ordinary route (equal to cv::equalizeHist on
// OpenCV's decode).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "histeq/jpeg_codec.hpp"
#include "histeq/operation.hpp"

namespace histeq {

/// Whether colour JPEG -> JPEG luma equalization may take the stored planes with this --backend:
/// with Backend::cpu and Backend::automatic (where a file decoded on the CPU stays there: its
/// equalization is a few ms and its encode libjpeg-turbo's), never with Backend::cuda (which
/// asks for the GPU's equalization). In a batch with automatic, a JPEG that nvJPEG's route takes
/// still goes there: the report's decoder names the route each file took, as for the codecs.
bool jpeg_planes_backend(Backend requested);

/// True when equalize_jpeg_planes can take these bytes: a JPEG that jpeg::planes_route takes to
/// `enc` (EXIF rotation applied as decode() applies it: files that need one go the RGB route),
/// luma mode (opt.mode unset or Mode::luma) and the default kernel (opt.kernel "auto": a kernel
/// named on the command line asks for the GPU). The caller decides the rest: the backend
/// (jpeg_planes_backend) and a JPEG output.
bool jpeg_planes_route(const std::uint8_t* data, std::size_t size, const EqualizeOptions& opt,
                       const jpeg::EncodeOptions& enc);

/// The equalized JPEG of a file jpeg_planes_route takes, into *encoded. Fills *report like
/// equalize() on the CPU (backend "cpu", kernel "cpu", mode luma, the Y plane's histogram and
/// LUT, the stage times with decode and encode) and *width, *height. With opt.reference (one
/// luma histogram of 256 levels, checked by the caller: check_match_reference), Y is matched to
/// it (match_lut) instead of equalized. One thread. Returns false,
/// with nothing filled, when a marker after the frame header takes the file off the route
/// (jpeg::decode_planes): the caller decodes it to pixels as usual. Errors as jpeg::decode
/// (naming `name`), make_lut and jpeg::encode.
bool equalize_jpeg_planes(const std::uint8_t* data, std::size_t size, const std::string& name,
                          const EqualizeOptions& opt, const jpeg::EncodeOptions& enc,
                          std::uint64_t max_pixels, std::vector<std::uint8_t>* encoded,
                          EqualizeReport* report, int* width, int* height);

}  // namespace histeq
