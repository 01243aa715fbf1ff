// histeq/jpeg_codec.hpp — JPEG decode and encode on the CPU with libjpeg-turbo (its libjpeg API,
// Debian libjpeg62-turbo-dev), EXIF orientation, and the ICC / EXIF metadata that travels with an
// image (JPEG APP1/APP2 segments, the PNG iCCP chunk).
//
// Decoded pixels equal what OpenCV's imread, Pillow and ImageMagick decode from the same file:
// libjpeg's defaults are kept (JDCT_ISLOW integer IDCT, fancy upsampling, no block smoothing).
//
// Thread safety: every function here is reentrant (no shared state): one call per thread at a
// time on distinct data, any number of threads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "histeq/types.hpp"

namespace histeq::jpeg {

/// True when the bytes start like a JPEG file (SOI followed by a marker: FF D8 FF).
bool is_jpeg(const std::uint8_t* data, std::size_t size);

/// What to do with the EXIF Orientation tag (0x0112) of a decoded JPEG.
///  apply: the pixels are rotated/flipped into display orientation (as OpenCV's imread and
///         ImageMagick's -auto-orient) and the tag in Image::exif is rewritten to 1 (default).
///  keep:  the pixels stay as stored; the tag is kept, so a JPEG output displays the same.
enum class Orientation : std::uint8_t { apply, keep };

struct DecodeOptions {
  std::uint64_t max_pixels = std::uint64_t(1) << 28;  ///< refuse larger images before allocating
  Orientation orientation = Orientation::apply;
};

/// Decodes an 8-bit JPEG (baseline, extended, progressive; Huffman or arithmetic coding) held in
/// memory into an Image: 1 channel for a 1-component (gray) file, 3 (RGB) for YCbCr, RGB, CMYK
/// and YCCK files. CMYK/YCCK: libjpeg gives CMYK (YCCK → CMYK by libjpeg); each channel is then
/// R = (255 − C)(255 − K)/255 (rounded), the same for G with M and B with Y; files with an Adobe
/// APP14 marker store CMYK inverted (as Photoshop writes them), so there R = C·K/255. (No colour
/// management: an embedded CMYK ICC profile is not applied, and is not kept.)
/// Image::exif gets the APP1 "Exif\0\0" segment's payload (prefix included), Image::icc the ICC
/// profile (APP2 ICC_PROFILE chunks joined), when present.
/// Errors (histeq::Error, message naming `name` and the reason): not a JPEG, 12-bit or lossless
/// JPEGs, zero or too many pixels (checked from the header before any pixel memory exists), a
/// file whose structure cannot give every pixel (checked from the markers, before libjpeg
/// allocates anything: no scan, a component that no scan covers — progressive: no DC-first
/// scan of it —, a Huffman-coded scan with fewer entropy-coded bytes than its 8x8 blocks / 8;
/// see decode_checks.hpp, jpeg_structure_problem), a truncated file (libjpeg's "premature end"
/// warning) and corrupt entropy-coded data (its "Corrupt JPEG data" warnings): every output pixel
/// comes from the file, never from libjpeg's fill-in. libjpeg's errors never exit() or unwind
/// through C++ frames (setjmp/longjmp confined to functions holding no C++ objects).
Image decode(const std::uint8_t* data, std::size_t size, const std::string& name,
             const DecodeOptions& opt = {});

/// Header facts of a JPEG file, without decoding pixels.
struct Info {
  int width = 0, height = 0;  ///< as stored (before orientation)
  int components = 0;         ///< 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
  int precision = 8;          ///< bits per sample (8 or 12)
  bool progressive = false;
  bool arithmetic = false;
  bool lossless = false;
  int orientation = 1;  ///< EXIF orientation 1..8 (1 when absent or invalid)
  /// True for 3-component files stored as RGB, not YCbCr (Adobe APP14 transform 0, or
  /// component ids 'R','G','B' without JFIF): decoders that assume YCbCr get their colours wrong.
  bool rgb_stored = false;
  /// 4:4:4 / 4:2:2 / 4:2:0 / 4:4:0 / 4:1:1 ... or "gray" or "other", from the sampling factors.
  std::string subsampling;
  /// A scan uses a Huffman table no DHT defined (libjpeg-turbo then uses T.81's standard tables;
  /// the nvJPEG route sends such a file to libjpeg-turbo).
  bool undefined_huffman_table = false;
};

/// Reads the markers up to the first SOF for the facts above, then walks every marker and scan
/// to EOI (no libjpeg, no allocation of pixels; O(size)). Throws Error naming `name` when the
/// bytes are not a JPEG, the header is cut off, or the structure checks of decode() fail (no
/// scan, a component no scan covers, too few entropy-coded bytes for the declared size): the
/// nvJPEG route (nvjpeg_codec.cpp) reads this first, so such a file never reaches nvJPEG; it goes
/// to decode(), which refuses it with the same reason.
Info read_info(const std::uint8_t* data, std::size_t size, const std::string& name);

/// The facts of Info from the markers before the first scan only (O(header), no structure
/// checks): false when the bytes are not a JPEG or hold no frame header there. For routing a file
/// before it is decoded (the executor); read_info is what checks it.
bool read_header(const std::uint8_t* data, std::size_t size, Info* info);

/// Chroma subsampling of a colour JPEG output (gray outputs are always one component, 4:0:0).
enum class Subsampling : std::uint8_t { s444, s422, s420 };
const char* to_string(Subsampling s);               ///< "444", "422", "420"
Subsampling parse_subsampling(std::string_view s);  ///< "444|422|420" (also "4:2:0"...); UsageError

struct EncodeOptions {
  int quality = 95;  ///< 1..100, libjpeg's jpeg_set_quality scale
  Subsampling subsampling = Subsampling::s420;
};

/// Encodes an 8-bit image to a baseline JPEG (ISLOW DCT, standard Huffman tables, as libjpeg's
/// and OpenCV's defaults). 1 and 2 channels (gray, gray+alpha) → 1-component JPEG; 3 and 4 (RGB,
/// RGBA) → YCbCr with `subsampling`. Alpha is dropped. Image::exif is written as APP1 (then no
/// JFIF APP0), Image::icc as APP2 ICC_PROFILE when its colour space fits the output (an RGB
/// profile is not written into a gray JPEG, nor a gray one into a colour JPEG).
/// Throws Error (bad shape, pixel count) or UsageError (quality out of 1..100).
std::vector<std::uint8_t> encode(const Image& img, const EncodeOptions& opt = {});

/// Adds metadata segments to an encoded JPEG (e.g. one from nvJPEG's encoder): `exif` (an APP1
/// payload, "Exif\0\0" + TIFF) as APP1 and `icc` as APP2 ICC_PROFILE chunks (at most 65519
/// bytes each, numbered as the ICC spec's JPEG embedding), placed after SOI and a leading JFIF
/// APP0. Empty vectors add nothing; an ICC profile that does not fit `channels` (icc_fits) and
/// EXIF over 65533 bytes are left out. Throws Error when `jpg` does not start with SOI.
void insert_metadata(std::vector<std::uint8_t>& jpg, const std::vector<std::uint8_t>& exif,
                     const std::vector<std::uint8_t>& icc, int channels);

// ---- the stored planes: luma mode without colour conversion ----

/// One component of a JPEG as stored: after entropy decoding and the IDCT, before upsampling and
/// colour conversion (libjpeg's raw-data interface). `width` x `height` samples are the image's
/// (ceil(image width * h / max h) by ceil(image height * v / max v)); the buffer is `stride` bytes
/// by `rows` rows, whole 8x8 blocks of its sampling, and its samples right of `width` and below
/// `height` repeat the last column and row (as libjpeg's encoder pads an image).
struct Plane {
  int width = 0, height = 0;
  std::size_t stride = 0;
  int rows = 0;
  int h = 1, v = 1;  ///< sampling factors of the file (1..4)
  std::unique_ptr<std::uint8_t[]> data;
  std::uint8_t* row(int y) { return data.get() + std::size_t(y) * stride; }
  const std::uint8_t* row(int y) const { return data.get() + std::size_t(y) * stride; }
};

/// A colour (YCbCr) JPEG's three planes: Y (plane 0), Cb, Cr at their stored sampling, with the
/// file's EXIF (APP1) and ICC profile (APP2) as decode() keeps them.
struct Planes {
  int width = 0, height = 0;  ///< the image's size (in display orientation where decode_planes
                              ///< applied the EXIF orientation)
  Plane plane[3];
  std::vector<std::uint8_t> exif, icc;
};

/// True when a file with these header facts can go through decode_planes and encode_planes to a
/// JPEG with `out`'s subsampling: 8 bits, 3 components coded as YCbCr (not stored as RGB) with
/// 4:4:4, 4:2:2 or 4:2:0 sampling, an output subsampling that needs no chroma upsampling (4:4:4
/// goes to any, 4:2:2 to 4:2:2 and 4:2:0, 4:2:0 to 4:2:0, each as the planes stand once turned).
/// An EXIF orientation to apply (2..8 with Orientation::apply) turns the planes, which needs
/// whole chroma samples along each axis the orientation flips (a width that is a multiple of
/// the luma's horizontal sampling factor where the stored columns flip, a height of the vertical
/// one where the rows do); a transposing orientation makes 4:2:2 planes 4:4:0, which goes to
/// 4:2:0 only. Everything else takes decode() and encode().
bool planes_route(const Info& info, const EncodeOptions& out, Orientation orientation);

/// Decodes a colour JPEG into its stored planes (no upsampling, no colour conversion: the Y
/// samples are the ones libjpeg's colour conversion starts from). The same checks, limits and
/// errors as decode(); throws Error when the frame header does not fit planes_route (callers ask
/// it first). Returns planes of width 0 (nothing decoded) when a marker planes_route cannot see,
/// one after the frame header, takes the file off the route: libjpeg then reads it as RGB (an
/// Adobe APP14 transform), or its EXIF orientation is 2..8 and opt.orientation is apply while
/// the size is not one planes_route turns. The caller then decodes the file to pixels
/// (decode()). With opt.orientation apply, an EXIF orientation of 2..8 is applied to the planes
/// (the pixels decode() gives, turned and flipped the same way, have them as their planes) and
/// the planes' EXIF orientation is set to 1.
Planes decode_planes(const std::uint8_t* data, std::size_t size, const std::string& name,
                     const DecodeOptions& opt = {});

/// One component of a JPEG as its scans code it: the quantized DCT coefficients, before the
/// inverse DCT. `blocks_w` x `blocks_h` blocks of 64 coefficients (libjpeg's width_in_blocks and
/// height_in_blocks: the blocks that cover the component's samples), row by row, each block in
/// natural (row-major) order as libjpeg keeps them; `quant` the component's quantization table
/// in the same order. `plane` is the geometry of the Plane decode_planes makes of it (width,
/// height, stride, rows, sampling; no samples).
struct CoefficientPlane {
  /// A std::allocator whose resize leaves new elements uninitialized (the decode writes every
  /// one): no pass of zeros over the coefficients before they are copied in.
  template <typename T>
  struct Uninitialized : std::allocator<T> {
    template <typename U>
    struct rebind {
      using other = Uninitialized<U>;
    };
    Uninitialized() = default;
    template <typename U>
    explicit Uninitialized(const Uninitialized<U>&) noexcept {}
    template <typename U>
    void construct(U* p) noexcept {
      ::new (static_cast<void*>(p)) U;
    }
    template <typename U, typename... A>
    void construct(U* p, A&&... a) {
      ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
  };
  Plane plane;
  int blocks_w = 0, blocks_h = 0;
  std::uint16_t quant[64] = {};
  std::vector<std::int16_t, Uninitialized<std::int16_t>> coef;  ///< blocks_h * blocks_w * 64
};

/// A colour JPEG's three components as coefficients (decode_coefficients), with the file's
/// EXIF and ICC profile as decode_planes keeps them.
struct Coefficients {
  int width = 0, height = 0;
  CoefficientPlane comp[3];
  std::vector<std::uint8_t> exif, icc;
};

/// Reads every scan of a colour JPEG that decode_planes takes (the same checks, limits and
/// errors) and returns its coefficients, so that the inverse DCT can run elsewhere (on the
/// device, or planes_from_coefficients): the entropy decoding is most of a progressive file's
/// decode. Returns width 0 (nothing for this route) where decode_planes does, and where a
/// dequantized coefficient is beyond ±2048 (more than any encoder writes) or a block's samples
/// before clamping lie more than 511 from the level shift: damaged or crafted data, where
/// libjpeg-turbo's own transforms (its C one wraps, its SIMD ones saturate) differ from each
/// other and from planes_from_coefficients. (histeq decodes
/// with libjpeg's block smoothing off, so a progressive file whose scans leave coefficients
/// unrefined decodes to the plain inverse DCT of what they sent, here as in decode_planes.)
Coefficients decode_coefficients(const std::uint8_t* data, std::size_t size,
                                 const std::string& name, const DecodeOptions& opt = {});

/// The planes of decode_coefficients' result on the CPU: libjpeg's islow inverse DCT of every
/// block (idct_formula.hpp), padded as decode_planes pads. Equal to decode_planes of the same
/// file byte for byte.
Planes planes_from_coefficients(const Coefficients& c);

/// `src` averaged by fx x fy (1 or 2 each) into `dst` (allocated here, sampling factors 1x1,
/// padded as decode_planes pads), as libjpeg's jcsample.c averages: along a row
/// (a + b + {0,1}) >> 1 and 2x2 (a + b + c + d + {1,2}) >> 2, the bias alternating with the
/// output column (h2v1_downsample, h2v2_downsample), and down a column (a + b + 1) >> 1
/// (int_downsample's rounding); samples past src's width and height repeat its last. Throws
/// Error for other factors.
void average_down(const Plane& src, int fx, int fy, Plane* dst);

/// Encodes planes as a baseline JPEG (ISLOW DCT, standard Huffman tables, quality as encode()),
/// Y at `opt.subsampling`'s luma factors and Cb, Cr at one: chroma planes at the output's
/// sampling are written as they are, finer ones are averaged down first (average_down). EXIF and
/// ICC as encode() writes them.
/// Throws UsageError (quality out of 1..100) or Error (planes that need upsampling).
std::vector<std::uint8_t> encode_planes(const Planes& planes, const EncodeOptions& opt = {});

// ---- EXIF orientation ----

/// The Orientation tag (1..8) of an APP1 payload ("Exif\0\0" + TIFF), or 0 when absent/invalid.
int exif_orientation(const std::vector<std::uint8_t>& exif);
/// Rewrites the Orientation tag in place; false when the payload has none (nothing changed).
bool set_exif_orientation(std::vector<std::uint8_t>& exif, int orientation);
/// The pixels of `img` as displayed under EXIF `orientation` (1..8, as the EXIF 2.32 standard's
/// "0th row / 0th column" table): 2 mirror left-right, 3 rotate 180°, 4 mirror top-bottom,
/// 5 transpose, 6 rotate 90° clockwise, 7 transverse, 8 rotate 90° counter-clockwise. 5..8 swap
/// width and height. Metadata is copied unchanged. Other values: a copy.
Image apply_orientation(const Image& img, int orientation);

// ---- ICC profiles ----

/// The ICC profile's data colour space signature (bytes 16..19: "RGB ", "GRAY", "CMYK"...), or ""
/// when the profile is too short.
std::string icc_color_space(const std::vector<std::uint8_t>& icc);
/// True when an ICC profile describes images with `channels` colour channels (1..4, alpha not
/// counted: 1-2 → GRAY, 3-4 → RGB).
bool icc_fits(const std::vector<std::uint8_t>& icc, int channels);

}  // namespace histeq::jpeg

namespace histeq::png {

/// The ICC profile of a PNG's iCCP chunk (zlib-inflated with libdeflate), or empty when the file
/// has none, is not a PNG, or the chunk does not inflate (a bad profile is dropped, not fatal).
std::vector<std::uint8_t> read_iccp(const std::uint8_t* data, std::size_t size);

/// Inserts an iCCP chunk (name "ICC Profile", zlib-compressed with libdeflate, CRC-32) right after
/// the IHDR chunk of the encoded PNG `png`. Does nothing when `icc` is empty. Throws Error when
/// `png` does not start with a PNG signature and IHDR.
void insert_iccp(std::vector<std::uint8_t>& png, const std::vector<std::uint8_t>& icc);

}  // namespace histeq::png
