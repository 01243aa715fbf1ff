// cli/report.cpp — the command line's JSON reports (cli/report.hpp), one serializer each.
#include "cli/report.hpp"

#include "bench/json_text.hpp"

#include <cmath>
#include <cstdint>

namespace histeq::cli {

void put_path(Json& j, const std::string& key, const std::string& s) {
  json_text::put_text(j, key, s);
}

std::string dump_line(const Json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Json ms3(double v) {
  if (!std::isfinite(v)) return nullptr;
  return std::round(v * 1000.0) / 1000.0;
}

namespace {

Json batch_times_json(const ItemTimes& t) {
  return Json{{"read", ms3(t.read_ms)},         {"decode", ms3(t.decode_ms)},
              {"upload", ms3(t.upload_ms)},     {"equalize", ms3(t.equalize_ms)},
              {"download", ms3(t.download_ms)}, {"encode", ms3(t.encode_ms)},
              {"write", ms3(t.write_ms)}};
}

/// "formula" where the LUT formula made the LUTs: equalize at 8 bits (16-bit equalization has
/// OpenCV's one formula; clahe and match have their own mappings).
void put_formula(Json& j, const Operation& op, int bit_depth) {
  if (op.kind == OpKind::equalize && bit_depth == 8) j["formula"] = to_string(op.equalize.formula);
}

}  // namespace

Json equalize_json(const EqualizeFacts& f, const EqualizeReport& rep) {
  const StageTimes& t = rep.times;
  Json j;
  put_path(j, "input", f.input);
  put_path(j, "output", f.output);
  j["width"] = f.width;
  j["height"] = f.height;
  j["channels"] = f.channels;
  j["output_channels"] = f.output_channels;
  j["mode"] = to_string(rep.mode);
  j["formula"] = to_string(f.formula);
  j["kernel"] = rep.kernel;
  j["backend"] = rep.backend;
  j["device"] = rep.device;
  j["racy_lost"] = rep.racy_lost;
  j["times_ms"] = Json{{"decode", ms3(t.decode_ms)},       {"upload", ms3(t.upload_ms)},
                       {"histogram", ms3(t.histogram_ms)}, {"cdf_lut", ms3(t.cdf_lut_ms)},
                       {"apply", ms3(t.apply_ms)},         {"download", ms3(t.download_ms)},
                       {"encode", ms3(t.encode_ms)},       {"total", ms3(t.total_ms)}};
  j["histogram_bytes"] = std::uint64_t(f.histogram_bytes);
  j["histogram_gbps"] = ms3(f.histogram_gbps);
  j["decoder"] = f.decoder;
  j["encoder"] = f.encoder;
  return j;
}

void put_operation(Json& j, const Operation& op, const std::string& mask_name) {
  if (op.kind == OpKind::clahe) {
    j["clip_limit"] = op.clahe.clip_limit;
    j["tiles_x"] = op.clahe.tiles_x;
    j["tiles_y"] = op.clahe.tiles_y;
  }
  if (op.kind == OpKind::match && op.reference) put_path(j, "reference", op.reference->name());
  const Region& region = op.equalize.region;
  if (region.mask) put_path(j, "mask", mask_name);
  if (region.roi) j["roi"] = {region.roi->x, region.roi->y, region.roi->width, region.roi->height};
}

Json item_op_json(const ItemOpOptions& io, const std::string& mask_name, const std::string& input,
                  const std::string& output, const ItemReport& rep, double total_ms) {
  const EqualizeReport& er = rep.equalize;
  const ItemTimes& t = rep.times;
  Json j;
  put_path(j, "input", input);
  put_path(j, "output", output);
  j["width"] = rep.width;
  j["height"] = rep.height;
  j["channels"] = rep.channels;
  j["output_channels"] = rep.output_channels;
  j["bit_depth"] = rep.bit_depth;
  j["operation"] = to_string(io.op.kind);
  put_operation(j, io.op, mask_name);
  j["mode"] = to_string(er.mode);
  put_formula(j, io.op, rep.bit_depth);
  j["kernel"] = er.kernel;
  j["backend"] = er.backend;
  j["device"] = er.device;
  j["times_ms"] = {{"decode", ms3(t.decode_ms)},
                   {"equalize", ms3(t.equalize_ms)},
                   {"encode", ms3(t.encode_ms)},
                   {"total", ms3(total_ms)}};
  j["decoder"] = rep.decoder;
  j["encoder"] = rep.encoder;
  return j;
}

Json batch_item_json(const ItemReport& rep, bool with_output, const std::string& error,
                     const Operation* op, const std::string& mask_name) {
  Json j;
  put_path(j, "input", rep.input);
  if (with_output) put_path(j, "output", rep.output);
  j["ok"] = rep.ok;
  if (!rep.ok) {
    j["error"] = error;
    j["error_kind"] =
        to_string(rep.error_kind == ItemError::none ? ItemError::other : rep.error_kind);
    if (rep.error_kind == ItemError::file) j["errno"] = rep.error_errno;
    return j;
  }
  j["width"] = rep.width;
  j["height"] = rep.height;
  j["channels"] = rep.channels;
  if (with_output) j["output_channels"] = rep.output_channels;
  j["bit_depth"] = rep.bit_depth;
  if (with_output) j["operation"] = op ? to_string(op->kind) : "equalize";
  if (op) put_operation(j, *op, mask_name);
  j["mode"] = to_string(rep.equalize.mode);
  if (op) put_formula(j, *op, rep.bit_depth);
  j["kernel"] = rep.equalize.kernel;
  j["backend"] = rep.equalize.backend;
  j["device"] = rep.equalize.device;
  j["decoder"] = rep.decoder;
  if (with_output) {
    j["encoder"] = rep.encoder;
    j["output_bytes"] = rep.output_bytes;
  } else {
    j["histograms"] = rep.equalize.histograms;
  }
  j["racy_lost"] = rep.equalize.racy_lost;
  j["times_ms"] = batch_times_json(rep.times);
  return j;
}

Json batch_summary_json(const BatchSummary& sum, int jobs) {
  const double mps = sum.wall_s > 0 ? sum.megapixels / sum.wall_s : 0;
  Json s;
  s["summary"] = {{"files", sum.files},         {"failures", sum.failures},
                  {"cancelled", sum.cancelled}, {"megapixels", ms3(sum.megapixels)},
                  {"seconds", ms3(sum.wall_s)}, {"mp_per_s", ms3(mps)}};
  s["summary"]["summed_ms"] = batch_times_json(sum.summed);
  s["summary"]["jobs"] = jobs;
  s["summary"]["peak_busy_workers"] = sum.peak_busy_workers;
  s["summary"]["decoders"] = sum.decoders;
  s["summary"]["device_init_ms"] = ms3(sum.device_init_ms);
  s["summary"]["nvjpeg_init_ms"] = ms3(sum.nvjpeg_init_ms);
  s["summary"]["encoder_ready_ms"] = ms3(sum.encoder_ready_ms);
  s["summary"]["first_file_ms"] = ms3(sum.first_file_ms);
  s["summary"]["device_started"] = sum.device_started;
  if (!sum.device_note.empty()) s["summary"]["device_note"] = sum.device_note;
  Json routes = Json::object();
  for (const auto& [route, share] : sum.routes)
    routes[route] = {{"files", share.files}, {"megapixels", ms3(share.megapixels)}};
  s["summary"]["routes"] = routes;
  if (sum.device.batches > 0)
    s["summary"]["device_route"] = {{"batches", sum.device.batches},
                                    {"files", sum.device.files},
                                    {"megapixels", ms3(sum.device.megapixels)},
                                    {"decode_ms", ms3(sum.device.decode_ms)},
                                    {"encode_ms", ms3(sum.device.encode_ms)},
                                    {"first_done_ms", ms3(sum.device.first_done_ms)},
                                    {"last_done_ms", ms3(sum.device.last_done_ms)}};
  return s;
}

}  // namespace histeq::cli
