// histeq/item.hpp — one image file through an operation: its plan (the facts of its header, read
// once, and the route they give) and the run of that plan on the CPU or on a leased device
// engine. The single-file command and the batch executor run the same plans with the same code,
// so one file gives the same bytes and the same report either way.
#pragma once
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "histeq/codec.hpp"
#include "histeq/image_io.hpp"
#include "histeq/jpeg_codec.hpp"
#include "histeq/operation.hpp"

namespace histeq {

namespace gpu {
class ImageEngine;  // the 8-bit stage sequence on a device (src/pipeline/image_engine.hpp)
}

/// How an item is processed.
enum class ItemRoute : std::uint8_t {
  pixels,       ///< decoded to pixels (8 or 16 bits) → the operation → encoded, on the CPU
                ///< (the equalization on a leased device engine when one is given)
  jpeg_planes,  ///< a colour JPEG to a JPEG in luma mode, in its stored YCbCr planes, on the CPU
                ///< (jpeg_planes.hpp)
  jpeg_device,  ///< a JPEG for the device's JPEG route: decoded, equalized and (a JPEG output)
                ///< encoded on the GPU in batches (the executor's device workers)
};
/// "pixels", "jpeg-planes", "jpeg-device".
const char* to_string(ItemRoute r);

/// The kind of failure an exception is (ItemError: by its type in histeq/error.hpp).
ItemError error_kind_of(const std::exception& e);

/// A failed item's report from the exception that failed it: `ok` false, `error` its message,
/// `error_kind` from its type (error_kind_of), and for a FileError its errno and path.
void set_error(ItemReport& rep, const std::exception& e);

/// What the plan may choose from (the executor's and the command line's options).
struct RouteChoice {
  /// JPEGs that the device's planes route takes (gpu::planes_candidate) may go to the device.
  bool device_planes = false;
  /// Every JPEG goes to the device (--decoder gpu, or the CUDA backend with nvJPEG): the device
  /// decodes what its decoders take and equalizes and encodes there.
  bool device_all_jpeg = false;
  /// Colour JPEG → JPEG in luma mode may take the CPU's stored-planes route.
  bool cpu_planes = true;
};

/// The facts of one file's header, read once, and the route they give.
struct ItemPlan {
  std::string format;  ///< "jpeg", "png", "pnm", "bmp", "tga", "gif", or "" (not recognized)
  int width = 0, height = 0, channels = 0;  ///< from the header; 0 when unknown
  int bits = 8;                             ///< bits per sample of the file (16: 16-bit PNG/PNM)
  int work_bits = 8;  ///< bits per sample the operation runs at (Operation::depth, the file)
  jpeg::Info jpeg;    ///< a JPEG's facts (jpeg_checked: read_info walked and checked them)
  bool jpeg_checked = false;
  /// The CPU's stored-planes route takes it (colour JPEG → JPEG, luma, no rotation, ...).
  bool cpu_planes = false;
  /// The device's planes route takes it (gpu::planes_candidate with this output).
  bool device_planes = false;
  ItemRoute route = ItemRoute::pixels;
  /// Bytes the item holds on the host while it waits (the executor's byte budget): on the pixels
  /// route the file, the decoded pixels twice and one plane; on the stored-planes route the file
  /// (its planes exist only while a worker decodes it); on the device route the file and its
  /// encoded output (the pixels are on the GPU). A header declaring more than max_pixels: the
  /// file (the decoder refuses it).
  std::size_t cost = 0;
  /// The same on the CPU, for a device item that a CPU worker takes after all.
  std::size_t cpu_cost = 0;
  double megapixels() const { return double(width) * double(height) / 1e6; }
};

/// Plans one file: `data` is the whole file (or at least its header); `out_ext` the output's
/// format (".png", ...; empty for OpKind::histogram). Never throws for a bad file: a file whose
/// header cannot be read is planned for the pixels route, whose decoder names the defect.
ItemPlan plan_item(const std::uint8_t* data, std::size_t size, const Operation& op,
                   const std::string& out_ext, const EncodeOptions& enc, std::uint64_t max_pixels,
                   const RouteChoice& choice);

/// What run_item needs besides the file.
struct ItemContext {
  Operation op;
  EncodeOptions encode;
  std::uint64_t max_pixels = kDefaultMaxPixels;
  /// Tried in order before the built-in decoders and encoders (Codec).
  std::vector<std::shared_ptr<Codec>> codecs;
  /// histeq's PNG decoder (libdeflate) for the 8-bit PNGs it takes, before stb_image.
  bool fast_png = true;
  int threads = 0;  ///< CPU threads for one item (0: usable_cpus(); a batch runs 1 per item)
  /// A leased device engine: 8-bit equalize and histogram run there (its device is current).
  /// Null: on the CPU. CLAHE and 16-bit images follow op.equalize.backend.
  gpu::ImageEngine* device = nullptr;
  /// CUDA devices that CLAHE and 16-bit items are spread over, round robin, when they run on
  /// the GPU (empty: every visible device).
  std::vector<int> devices;
};

/// Runs one planned file on the CPU (routes pixels and jpeg_planes; a jpeg_device plan runs as
/// the CPU would take it): decode → the operation → encode. Returns the output file's bytes
/// (empty for OpKind::histogram) and fills rep: width, height, channels, output_channels,
/// bit_depth, decoder, encoder (the codecs that ran, as codec_names.hpp names them, or a Codec's
/// name), equalize (backend, device,
/// kernel, mode; histograms for OpKind::histogram), times (decode, equalize, encode). Throws
/// UsageError for an output that cannot hold the result (16 bits in JPEG/BMP/TGA, channels a
/// PGM/PPM cannot hold, a mode 16-bit colour cannot take), Error for a bad file (its message
/// names `name`).
std::vector<std::uint8_t> run_item(const ItemContext& ctx, const ItemPlan& plan,
                                   const std::uint8_t* data, std::size_t size,
                                   const std::string& name, const std::string& out_ext,
                                   ItemReport& rep);

/// Encodes an 8-bit image in the format of `ext` through the chain run_item uses (the context's
/// codecs, then encode_image) and names the encoder that ran in *encoder.
std::vector<std::uint8_t> encode_item(const ItemContext& ctx, const Image& img,
                                      const std::string& ext, std::string* encoder);

/// True when a file of this extension (".png", ".pgm", ...; any case) can hold 16-bit samples.
bool holds_16bit(const std::string& ext);

}  // namespace histeq
