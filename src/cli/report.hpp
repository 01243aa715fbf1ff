// cli/report.hpp — every JSON the command line writes, one serializer per report type, all
// through nlohmann::ordered_json (keys in the order written here, which the tests read):
//   equalize_json       histeq equalize FILE --json: the 8-bit single-file report
//   item_op_json        the same for the per-file operation (clahe, match, a region, 16-bit;
//                       cli/depth.hpp)
//   batch_item_json     one line per file of a batch (equalize, clahe, match, histogram --json)
//   batch_summary_json  the summary line that ends a batch
// File names are bytes, not always UTF-8: put_path writes them with each invalid byte as U+FFFD
// and, only then, the exact bytes in hex under KEY_bytes_hex, so the output is valid JSON and
// still names the file exactly. dump_line writes one object on one line.
// Room cli (docs/architecture.md): not installed.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "cli/depth.hpp"
#include "histeq/executor.hpp"
#include "histeq/pipeline.hpp"

namespace histeq::cli {

using Json = nlohmann::ordered_json;

/// j[key] = s; when s is not valid UTF-8 also j[key + "_bytes_hex"] = its bytes in hex.
void put_path(Json& j, const std::string& key, const std::string& s);
/// One line of JSON (invalid UTF-8 in any string replaced by U+FFFD, never an exception).
std::string dump_line(const Json& j);
/// v rounded to 3 decimals; null when not finite.
Json ms3(double v);

/// What the 8-bit single-file path knows when it reports.
struct EqualizeFacts {
  std::string input, output;
  int width = 0, height = 0, channels = 0, output_channels = 0;
  Formula formula = Formula::opencv;
  std::string decoder, encoder;
  double histogram_bytes = 0;
  double histogram_gbps = 0;  ///< NaN when not timed
};
Json equalize_json(const EqualizeFacts& f, const EqualizeReport& rep);

/// The operation's parameters: clahe's clip_limit, tiles_x, tiles_y; match's reference (its
/// path); a region's mask (the path of --mask, `mask_name`) and roi ([x, y, width, height]).
void put_operation(Json& j, const Operation& op, const std::string& mask_name);

Json item_op_json(const ItemOpOptions& io, const std::string& mask_name, const std::string& input,
                  const std::string& output, const ItemReport& rep, double total_ms);

/// with_output: equalize/clahe/match (the item has an output file; "operation" says which);
/// false for histogram. `op`, when given, adds its parameters as item_op_json does
/// (put_operation).
Json batch_item_json(const ItemReport& rep, bool with_output, const std::string& error,
                     const Operation* op = nullptr, const std::string& mask_name = "");

Json batch_summary_json(const BatchSummary& sum, int jobs);

}  // namespace histeq::cli
