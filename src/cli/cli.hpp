// cli/cli.hpp — the `histeq` command line (equalize, histogram, kernels, bench), parsed with
// cxxopts. Everything runs in-process against two streams, so tests can drive it without a
// process; src/cli/main.cpp only forwards argv and turns exceptions into exit statuses.
#pragma once
#include <iosfwd>
#include <memory>
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

/// Ending the process without tearing down what it set up. The executable (main.cpp) turns this
/// on before run() and ends with std::_Exit once its output is flushed: objects handed to
/// keep_until_exit() (the batch executor, the single-file JPEG codec) are then never destroyed,
/// and the operating system reclaims the CUDA context, the nvJPEG states and the pinned buffers
/// at once instead of their destructors freeing them one by one (measured on the H200 machine:
/// 0.1 s of a batch's wall time with a CUDA context, 0.3-0.6 s with nvJPEG). Off (the default,
/// and in-process callers such as the tests): keep_until_exit destroys the object at once.
void set_exit_without_teardown(bool on);
/// Whether the process ends with std::_Exit once its work is done (set_exit_without_teardown).
bool exit_without_teardown();
void keep_until_exit(std::shared_ptr<void> object);

/// Standard output closed when the process started (`>&-`): main.cpp opens /dev/null on it, so
/// that reports go nowhere and no file takes its number, and says so here; an image asked for on
/// standard output (`-o -`) is then an error, not bytes thrown away. Off by default.
void set_stdout_closed_at_start(bool closed);
bool stdout_closed_at_start();

}  // namespace histeq::cli
