// signals.hpp — for threads of histeq's own that never write an output file (atomic_write.cpp).
// Internal header of histeq_host.
#pragma once

namespace histeq {

/// Blocks, in the calling thread and for its lifetime, the signals whose handler removes
/// half-written temp files (install_signal_cleanup): a process-directed SIGTERM is then handled
/// by a thread that writes files, which blocks it only while its temp file is not yet visible
/// to the handler, so no temp file is ever left behind. For helper threads that live through
/// other threads' writes (png_deflate.cpp's strip compressors).
void block_cleanup_signals();

}  // namespace histeq
