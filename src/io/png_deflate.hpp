// png_deflate.hpp — the zlib stream of a PNG's filtered rows compressed in strips on several
// threads (png_deflate.cpp), for the default --png-level 1. Internal header of histeq_host.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace histeq::png {

/// Rows per strip: about this many bytes.
inline constexpr std::size_t kStripBytes = std::size_t(4) << 20;

/// The --png-level whose zlib stream zlib_strips writes (the default, kDefaultPngLevel); level 0
/// (stored) and levels 2..9 are one libdeflate call at that level, smaller and slower.
inline constexpr int kStripPngLevel = 1;

/// Writes the filtered rows [y0, y1) (each `row_bytes` long, filter byte first) to dst.
using FillRows = std::function<void(std::size_t y0, std::size_t y1, std::uint8_t* dst)>;

/// The zlib stream (RFC 1950) of `rows` filtered rows of `row_bytes` bytes, compressed by ISA-L's
/// igzip at its level 1, in strips of about 4 MiB of rows. Each strip is filtered (`fill`) and
/// compressed as a run of raw DEFLATE blocks (RFC 1951) ended by a sync flush (an empty stored
/// block, so the next strip starts on a byte), with the previous 32 KiB of filtered rows as its
/// dictionary, so the strips join into one stream that decoders read as any other; the
/// last strip ends with the final block, then the Adler-32 of all rows. The calling thread
/// compresses strips itself while idle helper threads (one per core, started on first use) take
/// the others, so an image alone on a machine uses every core and an image among others costs
/// the same CPU as one thread. The stream's first byte goes in a stored block of its own and the
/// first strip takes it as its dictionary (png_deflate.cpp: igzip otherwise hashes a stream's
/// third byte from the stream's address), so the bytes depend on the rows only, not on which
/// thread did what or where its memory lay.
/// `strip_bytes` (tests) sets another strip size. Throws Error when memory or ISA-L fails.
std::vector<std::uint8_t> zlib_strips(std::size_t rows, std::size_t row_bytes, const FillRows& fill,
                                      std::size_t strip_bytes = kStripBytes);

}  // namespace histeq::png
