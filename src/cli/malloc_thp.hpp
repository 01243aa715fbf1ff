// cli/malloc_thp.hpp — the `histeq` executable runs with glibc's malloc on transparent huge pages
// (the tunable glibc.malloc.hugetlb=1, which only the environment can set: main.cpp starts the
// program again with it, once, before anything else).
//
// Why: a folder's workers allocate and free buffers of megabytes per file (the file, its planes,
// a progressive file's coefficients, the encoded output). glibc maps each such buffer afresh and
// every 4 KiB page of it faults on first use: about 600,000 faults for the 1 GP folder. The
// faults slow the run and, worse, they hold the process's memory-map lock that the CUDA driver
// needs while it starts: beside 16 threads that fault memory in, the nvJPEG handle took 1.4-1.9 s
// to make instead of 0.27 s (bench/results/h100/probes/fault_probe.txt). With the tunable,
// glibc asks for huge pages on those mappings (madvise), the faults fall about 100-fold and the
// 1 GP folder ends in 1.04 s instead of 1.22 s on average on the H100 machine
// (bench/results/h100/e2e/alloc_p8.txt, where other allocators are measured too).
#pragma once
#include <string>
#include <string_view>

namespace histeq::cli {

/// The GLIBC_TUNABLES value to start the program again with, or "" for none:
/// `tunables` (the current value, nullptr when unset) with glibc.malloc.hugetlb=1 added, when
/// it names no glibc.malloc.hugetlb already (a value the user set is kept, =0 included),
/// `thp_enabled` (the text of /sys/kernel/mm/transparent_hugepage/enabled) selects [madvise]
/// (with [always] every mapping has huge pages already; with [never], or unreadable, none can),
/// and `glibc_version` ("2.36") is 2.35 or later (the first glibc with the tunable).
std::string malloc_thp_tunables(const char* tunables, std::string_view thp_enabled,
                                std::string_view glibc_version);

/// Starts this program again (execv of /proc/self/exe, the same pid, argv and descriptors) with
/// GLIBC_TUNABLES from malloc_thp_tunables, when that says so and the process is not in secure
/// execution (setuid: the loader would drop the variable). Returns when nothing is to be done or
/// the exec failed (the program then runs as it is). Called first in main, before any thread,
/// file or signal handler exists.
void restart_with_malloc_thp(char** argv);

/// `histeq --version`'s line on the allocator: "memory: glibc malloc with
/// GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (transparent huge pages: madvise)" (or "GLIBC_TUNABLES
/// unset", and the kernel's mode as /sys says, "unknown" where it cannot be read).
std::string malloc_line();

}  // namespace histeq::cli
