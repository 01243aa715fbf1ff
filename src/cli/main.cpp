// main.cpp — the `histeq` executable: forwards argv to histeq::cli::run and is the one place
// where errors are printed (each once) and turned into exit statuses:
//   success 0 · histeq::Error (runtime failure) 1 · histeq::UsageError (bad command line) 2.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
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

/// Descriptors 0, 1 and 2 open before anything else is: started with one of them closed (`>&-`,
/// `2>&-`, `<&-`), the first file the run opens would take its number, and the report or an error
/// message written "to standard output" would land inside an output image. A closed one is
/// opened on /dev/null, as daemons and coreutils' stdopen do: input reads nothing, output goes
/// nowhere, and the outputs are the bytes of a run with the stream open.
void open_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd == 1) histeq::cli::set_stdout_closed_at_start(true);  // -o - then has nowhere to go
    const int got = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (got < 0) std::_Exit(125);  // no /dev/null: nothing can be written safely
    if (got != fd) {               // an earlier number was closed too: opened there first
      ::dup2(got, fd);
      ::close(got);
    }
  }
}

int run_main(int argc, char** argv) {
  open_standard_descriptors();       // first: before any file or thread is opened
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
  } catch (const std::bad_alloc&) {  // the commands name the file they were at (cli/equalize)
    std::cerr << "histeq: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "histeq: error: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { finish(run_main(argc, argv)); }
