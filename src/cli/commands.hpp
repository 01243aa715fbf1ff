// cli/commands.hpp — the commands of the command line, one file each (cli/equalize.cpp,
// cli/histogram.cpp, cli/kernels.cpp); cli/cli.cpp dispatches to them. Each parses its own
// options (cli/options.hpp) and throws UsageError / Error; none prints an error itself.
// Room cli (docs/architecture.md): not installed.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace histeq::cli {

/// `histeq equalize` (clahe false) and `histeq clahe` (clahe true).
int cmd_equalize(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                 bool clahe);
int cmd_histogram(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_kernels(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace histeq::cli
