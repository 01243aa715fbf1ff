// main.cpp — the `histeq` executable: forwards argv to histeq::cli::run and is the one place
// where errors are printed (each once) and turned into exit statuses:
//   success 0 · histeq::Error (runtime failure) 1 · histeq::UsageError (bad command line) 2.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "histeq/error.hpp"
#include "histeq/image_io.hpp"

namespace {

/// Ends the process once its output is out, without destructors or atexit handlers (see
/// cli::set_exit_without_teardown): every output file is already complete and renamed into
/// place by then.
[[noreturn]] void finish(int status) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(status);
}

int run_main(int argc, char** argv) {
  histeq::install_signal_cleanup();  // SIGINT/SIGTERM during a save: no output, no temp file
  histeq::cli::set_exit_without_teardown(true);
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const int status = histeq::cli::run(args, std::cout, std::cerr);
    std::cout.flush();
    if (!std::cout) {
      std::cerr << "histeq: error: could not write to standard output\n";
      return 1;
    }
    return status;
  } catch (const histeq::UsageError& e) {
    std::cerr << "histeq: " << e.what() << '\n';
    return 2;
  } catch (const histeq::Error& e) {
    std::cerr << "histeq: error: " << e.what() << '\n';
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "histeq: error: out of host memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "histeq: error: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { finish(run_main(argc, argv)); }
