// cli/cli.hpp — the `histeq` command line (equalize, histogram, kernels, bench), parsed with
// cxxopts. Everything runs in-process against two streams, so tests can drive it without a
// process; src/cli/main.cpp only forwards argv and turns exceptions into exit statuses.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace histeq::cli {

/// Runs one command line. args: argv without the program name, e.g. {"equalize", "in.png",
/// "-o", "out.png"}. Normal output goes to `out`; notices and warnings (CPU fallback, racy
/// kernel) to `err`. Returns the exit status of a completed command (0, or what `bench`
/// returns). Throws UsageError (exit 2) for a bad command line — unknown command, option,
/// kernel, mode, formula, backend or output extension; missing INPUT or -o — naming the bad
/// value and the valid choices; throws Error (exit 1) for runtime failures (bad input file,
/// write failure, CUDA errors). Prints no error itself: the catcher prints each error once.
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// The top-level usage text printed by `histeq --help`.
std::string usage();

}  // namespace histeq::cli
