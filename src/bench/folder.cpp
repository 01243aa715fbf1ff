// bench/folder.cpp — `histeq bench --folder IN... -o OUTDIR` (bench/bench.hpp): one batch of
// equalize through the executor, planned as `histeq equalize IN... -o OUTDIR` plans it
// (histeq/inputs.hpp: the same files and outputs; the command line's defaults but for --jobs,
// --decoder and --backend), with the router's start rule from --tune router.device_start_s
// (ExecutorOptions::device_start_cpu_s); then what the run did, one fact a line: files, failures,
// megapixels, wall time, whether the JPEG device route started (or why not), its start-up, the
// routes and the decoders. What the GPU machine runs to set that rule again.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "bench/detail.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/executor.hpp"
#include "histeq/inputs.hpp"
#include "histeq/pipeline.hpp"

namespace fs = std::filesystem;

namespace histeq::bench::internal {
namespace {

/// The executor's options of `histeq equalize IN... -o OUTDIR` with --jobs, --decoder, --backend
/// and the router's rule as given.
ExecutorOptions executor_options(const Options& opt) {
  ExecutorOptions eo;  // equalize; quality 95, 4:2:0, the default PNG level, the pixel limit
  eo.op.kind = OpKind::equalize;
  eo.op.equalize.backend = opt.folder.backend;
  eo.jobs = opt.folder.jobs;
  eo.jpeg = opt.folder.decoder;
  if (opt.tune.device_start_s) eo.device_start_cpu_s = *opt.tune.device_start_s;
  if (opt.tune.encoder_start_s) eo.encoder_start_cpu_s = *opt.tune.encoder_start_s;
  if (opt.tune.encoder_slots) eo.encoder_slots = *opt.tune.encoder_slots;
  if (opt.tune.encoder_states) eo.encoder_states = *opt.tune.encoder_states;
  eo.progressive = opt.tune.progressive;
  eo.report_window = opt.tune.report_window;
  eo.hybrid_decoders = opt.tune.hybrid_decoders;
  eo.gpu_huffman_decoders = opt.tune.gpu_huffman_decoders;
  eo.early_hybrid = opt.tune.early_hybrid;
  eo.router_measures = opt.tune.router_measures;
  return eo;
}

/// The items of the run (plan_files) and the output folder made; a folder that could not be
/// listed is named on `err` and counted as a failure by the caller.
std::vector<WorkItem> plan(const FolderRun& f, std::vector<UnlistedInput>& unlisted,
                           std::ostream& err) {
  FilePlanOptions po;
  po.output_dir = f.output;
  FilePlan p;
  try {
    p = plan_files(f.inputs, po);
  } catch (const UsageError& e) {
    // The library leaves the way to give an output format to the front end; bench --folder has
    // none (it writes what equalize writes without --format).
    std::string m = e.what();
    const std::string give = std::string(kGiveAnOutputFormat) + "png (or jpg, bmp, tga, pnm)";
    const std::size_t at = m.find(give);
    if (at != std::string::npos)
      m.replace(at, give.size(),
                "bench --folder has no --format (leave the file out, or convert it first)");
    throw UsageError(m);
  }
  unlisted = std::move(p.unlisted);
  if (p.items.empty() && !unlisted.empty()) {  // nothing to do but say why, as the CLI says it
    std::string message = unlisted.front().message();
    for (std::size_t i = 1; i < unlisted.size(); ++i) message += "; " + unlisted[i].message();
    throw Error(message);
  }
  for (const UnlistedInput& u : unlisted) err << "histeq bench: error: " << u.message() << '\n';
  if (p.items.empty())
    throw UsageError(
        "--folder: no image files in the inputs (folders are searched for .png .jpg .jpeg .bmp "
        ".tga .gif .pnm .pgm .ppm)");
  return std::move(p.items);  // (the run makes the output folder: make_output_folders)
}

/// The machine, named after the run (asking CUDA before it would take the driver's start-up
/// out of the device route's): the GPU's name, else the CPU's threads and why no GPU.
std::string machine() {
  std::string why;
  if (cuda_available(&why)) {
    int dev = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
      return prop.name;
    cudaGetLastError();
  }
  return "CPU (" + std::to_string(cpu::usable_cpus()) +
         " threads; no usable CUDA device: " + (why.empty() ? "unknown reason" : why) + ")";
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

/// Whether the device route started, and if not, why.
std::string device_words(const BatchSummary& s) {
  const std::string failed = "failed: ";
  if (s.device_note.rfind(failed, 0) == 0)  // its devices failed (at their start, or later)
    return "failed (" + s.device_note.substr(failed.size()) + "); the CPU workers ran its files";
  if (s.device_started) return s.device_note.empty() ? "started" : "started, " + s.device_note;
  if (!s.device_note.empty()) return s.device_note;
  return "not in play (the CPU backend, --decoder cpu, or no nvJPEG in this build)";
}

/// One fact a line, "name  value", after the header other bench modes print.
void write_report(std::ostream& out, const Options& opt, const BatchSummary& s, int jobs,
                  const std::string& no_device) {
  out << "# histeq bench on " << machine() << "; " << jobs << " CPU workers\n";
  std::string tuning;
  for (const std::string& kv : opt.tune.given) tuning += (tuning.empty() ? "" : " ") + kv;
  if (!tuning.empty()) out << "# tuning (not the policy): " << tuning << '\n';
  out << "# " << opt.command_line << "  (commit " << run_commit() << ")\n";
  const auto line = [&out](const char* name) -> std::ostream& {
    out << name << std::string(16 - std::string(name).size(), ' ');
    return out;
  };
  line("files") << s.files << " (" << s.failures << " failed)\n";
  line("megapixels") << fmt(s.megapixels, 3) << '\n';
  line("wall_s") << fmt(s.wall_s, 3) << '\n';
  line("mp_per_s") << fmt(s.wall_s > 0 ? s.megapixels / s.wall_s : 0, 1) << '\n';
  if (opt.tune.device_start_s)
    line("device_start_s") << seconds_text(*opt.tune.device_start_s)
                           << " (the policy's: " << seconds_text(kDeviceStartCpuS) << ")\n";
  else
    line("device_start_s") << seconds_text(kDeviceStartCpuS) << " (the policy)\n";
  if (opt.tune.encoder_start_s)
    line("encoder_start_s") << seconds_text(*opt.tune.encoder_start_s)
                            << " (the policy's: " << seconds_text(kEncoderStartCpuS) << ")\n";
  else
    line("encoder_start_s") << seconds_text(kEncoderStartCpuS) << " (the policy)\n";
  const ProgressiveJpeg pj = opt.tune.progressive;
  line("progressive") << progressive_name(pj)
                      << (pj == ProgressiveJpeg::libjpeg  ? " (libjpeg-turbo's coefficients)"
                          : pj == ProgressiveJpeg::hybrid ? " (nvJPEG's hybrid decoder)"
                                                          : " (nvJPEG's GPU Huffman decoding)")
                      << (pj == ExecutorOptions{}.progressive ? " (the policy)\n"
                                                              : " (jpeg.progressive)\n");
  line("device") << device_words(s) << '\n';
  if (!no_device.empty()) line("cuda") << "no usable CUDA device (" << no_device << ")\n";
  line("device_init_ms") << fmt(s.device_init_ms, 1) << '\n';
  line("nvjpeg_init_ms") << fmt(s.nvjpeg_init_ms, 1) << '\n';
  line("encoder_init_ms") << fmt(s.encoder_ready_ms, 1) << '\n';
  line("first_file_ms") << fmt(s.first_file_ms, 1) << '\n';
  if (s.device.batches > 0)
    line("device_work") << s.device.batches << " batches, " << s.device.files << " files, "
                        << fmt(s.device.megapixels, 1) << " MP; decode "
                        << fmt(s.device.decode_ms, 1) << " ms, equalize+encode "
                        << fmt(s.device.encode_ms, 1) << " ms (its slots, summed); done from "
                        << fmt(s.device.first_done_ms, 1) << " to " << fmt(s.device.last_done_ms, 1)
                        << " ms\n";
  if (s.device.batches > 0)
    line("device_slots") << "states " << fmt(s.device.slot_start_ms, 1)
                         << " ms (before ready), first batch: decode "
                         << fmt(s.device.first_decode_ms, 1) << " ms, equalize+encode "
                         << fmt(s.device.first_encode_ms, 1) << " ms (the slowest slot)\n";
  for (const auto& [route, share] : s.routes)
    line("route") << route << ' ' << share.files << " files " << fmt(share.megapixels, 3)
                  << " MP\n";
  for (const auto& [name, n] : s.decoders) line("decoder") << name << ' ' << n << '\n';
  const ItemTimes& t = s.summed;
  line("stages_ms") << "read " << fmt(t.read_ms, 1) << ", decode " << fmt(t.decode_ms, 1)
                    << ", equalize " << fmt(t.equalize_ms, 1) << ", encode " << fmt(t.encode_ms, 1)
                    << ", write " << fmt(t.write_ms, 1) << " (summed over the files)\n";
  line("tune") << (tuning.empty() ? "none (the policy)" : tuning) << '\n';
}

/// executor.prefault_mb: `mb` MiB of heap in blocks of 64 MiB (below the batch's mmap threshold,
/// so from the arena), every page written, then freed: the arena keeps them (no trim) for the
/// workers. Returns the milliseconds it took (outside the run's clock).
double prefault(std::size_t mb) {
  if (mb == 0) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  constexpr std::size_t kBlock = std::size_t(64) << 20;
  std::vector<void*> blocks;
  for (std::size_t left = mb << 20; left > 0;) {
    const std::size_t n = std::min(left, kBlock);
    void* p = std::malloc(n);
    if (!p) break;
    std::memset(p, 1, n);
    blocks.push_back(p);
    left -= n;
  }
  for (void* p : blocks) std::free(p);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int run_folder(const Options& opt, std::ostream& out, std::ostream& err) {
  const CpuSimd simd(opt.tune.cpu_simd);
  const ExecutorOptions eo = executor_options(opt);
  std::vector<UnlistedInput> unlisted;
  const std::vector<WorkItem> items = plan(opt.folder, unlisted, err);
  // The heap as the command line's batch sets it (cli/batch.cpp says why): the same run.
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);
  ::mallopt(M_TRIM_THRESHOLD, INT_MAX);
  ::mallopt(M_ARENA_MAX, 1);
  const double prefault_ms = prefault(opt.tune.prefault_mb);
  Executor ex(eo);  // kept until the report is printed (its devices' figures are read from it)
  // The output folders once the run can start, inside its clock, as the command line makes them.
  BatchSummary sum = ex.run(
      items,
      [&err](const ItemReport& r) {
        if (!r.ok) err << "histeq bench: error: " << r.error << '\n';
      },
      [&] { make_output_folders(items, opt.folder.output); });
  sum.files += unlisted.size();
  sum.failures += unlisted.size();
  std::string no_device;
  if (opt.folder.backend == Backend::automatic && ex.wanted_device())
    no_device = ex.cpu_fallback_reason();
  write_report(out, opt, sum, ex.jobs(), no_device);
  if (opt.tune.prefault_mb > 0)
    out << "prefault_ms     " << fmt(prefault_ms, 1) << " (" << opt.tune.prefault_mb
        << " MiB written before the run, outside wall_s)\n";
  return sum.failures > 0 ? 1 : 0;
}

}  // namespace histeq::bench::internal
