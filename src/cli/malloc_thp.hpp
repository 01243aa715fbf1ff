// cli/malloc_thp.hpp — the `histeq` executable runs with glibc's malloc on transparent huge pages
// (the tunable glibc.malloc.hugetlb=1, which only the environment can set: main.cpp starts the
// program again with it, once, before anything else).
//
// Why: a folder's workers hold buffers of megabytes per file (the file, its planes, a
// progressive file's coefficients, the encoded output), and the heap that holds them is faulted in
// 4 KiB at a time as it grows: about 600,000 faults for the 1 GP folder. The faults cost CPU time
// and, worse, they take the process's memory-map lock that the CUDA driver needs while it starts:
// beside 16 threads that fault memory in, the nvJPEG handle took 1.4-1.9 s to make instead of
// 0.27 s (bench/results/h100/probes/fault_probe.txt). With the tunable glibc asks for huge pages
// (madvise) where it grows the heap or maps a buffer, and the faults fall about 100-fold: the 1 GP
// folder's process took 5-7 % less time on two H100 machines, the same on a slower third, started
// again here or with the variable set by the caller alike (bench/results/h100/e2e/
// thp_restart_4bca34f.txt, thp_turns_p8.txt, thp_exec_p8.txt; alloc_p8.txt measures other
// allocators too).
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

/// Whether to start again at all: HISTEQ_MALLOC_RESTART (`knob`) "always" or "never"; otherwise
/// (unset, "auto", anything else) where a device route can start (`gpu_host`: nvJPEG in the
/// build and the NVIDIA driver's /dev/nvidiactl). Without a GPU nothing contends with the driver,
/// and the 2-core build machine (a VM) ran the CPU route 16 % slower on huge pages
/// (bench/results/build-machine/thp_cpu_route.txt).
bool malloc_thp_wanted(const char* knob, bool gpu_host);

/// Starts this program again (execv of the file the caller executed, AT_EXECFN: the same pid,
/// name, argv and descriptors) with GLIBC_TUNABLES from malloc_thp_tunables, when
/// malloc_thp_wanted and that say so,
/// malloc is glibc's own (not an LD_PRELOAD allocator or a sanitizer's), the file is the program
/// running (not `ld.so PROG`, whose options a direct exec would drop, nor under valgrind, which
/// an exec would leave), huge pages are not disabled for the process (PR_SET_THP_DISABLE) and it is
/// not in secure execution (setuid: the loader would drop the variable). The restarted image puts
/// the caller's GLIBC_TUNABLES back at once (its glibc has read it), so child processes see what
/// the user set. Returns when nothing is to be done or the exec failed (the program then runs as it
/// is, the variables as they were). Called first in main, before any thread, file or signal handler
/// exists; costs about 5 ms where it restarts.
void restart_with_malloc_thp(char** argv);

/// `histeq --version`'s line on the allocator: "memory: glibc malloc with
/// GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (histeq started itself again with it) (transparent huge
/// pages: madvise)": the value glibc read at start ("GLIBC_TUNABLES unset"), whether histeq
/// added it, and the kernel's mode as /sys says ("unknown" where it cannot be read).
std::string malloc_line();

}  // namespace histeq::cli
