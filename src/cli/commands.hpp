// cli/commands.hpp — the commands of the command line, one file each (cli/equalize.cpp,
// cli/histogram.cpp, cli/kernels.cpp); cli/cli.cpp dispatches to them. Each parses its own
// options (cli/options.hpp) and throws UsageError / Error; none prints an error itself.
// Room cli (docs/architecture.md): not installed.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "histeq/operation.hpp"

namespace histeq::cli {

/// `histeq equalize`, `histeq clahe` and `histeq match` (kind: equalize, clahe, match).
int cmd_equalize(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                 OpKind kind);
int cmd_histogram(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_kernels(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace histeq::cli
