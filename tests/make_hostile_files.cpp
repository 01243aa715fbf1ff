// make_hostile_files DIR — writes the hostile set of tests/hostile_files.hpp into DIR as
// hostile-NAME files (tests/fuzz/crashes/decode/ in the repository: replayed by
// test_host_fuzz_replay and used as fuzz seeds). Regenerate with
//   build/tests/make_hostile_files tests/fuzz/crashes/decode
#include <cstdio>
#include <fstream>
#include <string>

#include "hostile_files.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_hostile_files DIR\n");
    return 2;
  }
  int n = 0;
  for (const auto& c : histeq::hostile::cases()) {
    if (c.bytes.size() > 65536) continue;  // the corpus stays small (the PNG bomb is ~8 KB)
    std::ofstream f(std::string(argv[1]) + "/hostile-" + c.name, std::ios::binary);
    f.write(reinterpret_cast<const char*>(c.bytes.data()), std::streamsize(c.bytes.size()));
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", c.name.c_str());
      return 1;
    }
    ++n;
  }
  std::printf("%d files\n", n);
  return 0;
}
