// cli/kernels.cpp — `histeq kernels`: the registry's histogram kernels, and with --details each
// one's launch shape and occupancy on this GPU.
#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <ostream>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "histeq/error.hpp"
#include "histeq/pipeline.hpp"
#include "histogram/details.hpp"
#include "histogram/registry.hpp"

namespace histeq::cli {

int cmd_kernels(const std::vector<std::string>& args, std::ostream& out, std::ostream& /*err*/) {
  Command c("kernels",
            "Lists the histogram kernels of the registry: name, exact or not, and the idea in one "
            "line. --details adds each kernel's launch shape and occupancy on this GPU.");
  c.add_flag("details",
             "per kernel: block size, grid, shared memory per block, registers per thread, "
             "resident blocks per SM, theoretical occupancy (needs a GPU)");
  c.add("type", "sample type for --details: u8 or i32",
        cxxopts::value<std::string>()->default_value("u8"), "T");
  c.add("bins", "bins for --details (1..4096)", cxxopts::value<int>()->default_value("256"), "N");
  c.add("size", "number of samples for --details (sets the grid); K/M/G suffixes as in bench",
        cxxopts::value<std::string>()->default_value("16M"), "N");
  c.add_flag("h,help", "print this help");

  const cxxopts::ParseResult r = c.parse(args);
  if (r.count("help")) {
    out << c.options.help();
    return 0;
  }
  const SampleType type = parse_sample_type(r["type"].as<std::string>());
  const int bins = r["bins"].as<int>();
  if (bins < 1 || bins > kMaxBins) {
    throw UsageError("--bins must be in 1.." + std::to_string(kMaxBins) + ", got " +
                     std::to_string(bins));
  }
  const std::uint64_t size = bench::parse_size(r["size"].as<std::string>());
  if (!r.count("details")) {
    for (const char* o : {"type", "bins", "size"}) {
      if (r.count(o)) {
        throw UsageError(std::string("--") + o +
                         " describes the launch shape of --details; add --details (the plain "
                         "list does not depend on it)");
      }
    }
  }
  const auto& reg = kernels::registry();

  if (!r.count("details")) {
    std::size_t w = 4;
    for (const auto& e : reg) w = std::max(w, std::string(e.name).size());
    out << std::left << std::setw(int(w)) << "name"
        << "  exact  summary\n";
    for (const auto& e : reg) {
      out << std::left << std::setw(int(w)) << e.name << "  " << std::setw(5)
          << (e.exact ? "yes" : "no") << "  " << e.summary << '\n';
    }
    if (reg.empty()) out << "(no kernels registered)\n";
    return 0;
  }

  std::string why;
  if (!cuda_available(&why)) throw Error("kernels --details needs a CUDA device: " + why);
  std::vector<kernels::KernelDetails> ds;
  for (const auto& e : reg) ds.push_back(kernels::describe(e, type, bins, std::size_t(size)));
  out << "kernels for " << size << " " << to_string(type) << " samples, " << bins << " bins:\n"
      << kernels::format_details(ds);
  return 0;
}

}  // namespace histeq::cli
