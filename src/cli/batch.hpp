// cli/batch.hpp — several inputs, folders: the batch that `equalize`, `clahe`, `match` and
// `histogram` hand to the executor (histeq/executor.hpp), planned before any work (outputs,
// collisions, folders), reported per file (text or JSON Lines) and summed up at the end.
// Room cli (docs/architecture.md): not installed.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "cli/options.hpp"
#include "histeq/executor.hpp"

namespace histeq::cli {

/// How a command prints one file's result in text (not --json). The names it prints go through
/// one_line.
using PrintItem = std::function<void(std::ostream&, const ItemReport&)>;

/// A file name (or an error naming one) as one line of text, as `ls -b` writes it: a backslash
/// as \\, a line break, carriage return or tab as \n, \r, \t, any other control character as
/// \xHH; other bytes (UTF-8 included) as they are. --json and --csv quote names their own way.
std::string one_line(const std::string& s);

/// Runs a batch of `op` (equalize, clahe, match: outdir given; histogram: outdir empty) through the
/// executor. Returns 1 when any file failed (each failure printed once, on `err`), else 0. A
/// batch's --json lines name its operation and parameters (report.hpp's put_operation).
int run_batch(const cxxopts::ParseResult& r, Common& cm, const Operation& op,
              const std::vector<std::string>& inputs, const std::string& outdir, std::ostream& out,
              std::ostream& err, const PrintItem& print_item);

/// An error message of the library as the command line says it: the options that change what it
/// names ("a depth of 8" → "--depth 8", "mode rgb" → "--mode rgb", "a CLAHE grid of WxH tiles"
/// → "--tile-grid-size WxH", the pixel limit → "--max-pixels N sets the limit").
std::string with_option_hints(const std::string& message);

}  // namespace histeq::cli
