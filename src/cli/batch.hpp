// cli/batch.hpp — several inputs, folders: the batch that `equalize`, `clahe` and `histogram`
// hand to the executor (histeq/executor.hpp), planned before any work (outputs, collisions,
// folders), reported per file (text or JSON Lines) and summed up at the end.
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

/// How a command prints one file's result in text (not --json).
using PrintItem = std::function<void(std::ostream&, const ItemReport&)>;

/// Runs a batch for `equalize` (outdir given) or `histogram` (outdir empty). Returns 1 when any
/// file failed (each failure printed once, on `err`), else 0. clahe: the options of a `clahe`
/// batch, which its --json lines name (operation, clip_limit, tiles_x, tiles_y); null otherwise.
int run_batch(const cxxopts::ParseResult& r, Common& cm, Task task,
              const std::vector<std::string>& inputs, const std::string& outdir, std::ostream& out,
              std::ostream& err, const PrintItem& print_item,
              const ExecutorOptions::ItemOp& item_op = {}, const ClaheOptions* clahe = nullptr);

/// An error message of the library, with the option that sets the limit it names when it is
/// the pixel limit ("... over the limit of N pixels" → "...; --max-pixels sets the limit").
std::string with_limit_hint(const std::string& message);

}  // namespace histeq::cli
