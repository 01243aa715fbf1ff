// batched.hpp — equalization of N gray images of any sizes in three launches on one stream
// (kernels/batched/batched.cu): per-image histograms with the per-image CDF + LUT done by each
// image's last block, then one apply launch. Used by gpu::Equalizer::equalize_batch; the two
// passes apart (per-image histograms, then the apply of given LUTs) by Equalizer::match_batch.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "histeq/tuning.hpp"
#include "histeq/types.hpp"

namespace histeq::kernels {

/// Tuning numbers of the batched kernels (one place; no literals in the kernels).
struct BatchedPolicy {
  static constexpr int kBlockSize = 256;       ///< threads per block; = 256 bins, one per thread
  static constexpr int kVectorsPerThread = 8;  ///< 16-byte vectors per thread per item
  /// Bytes of one image a block covers (the unit of the block → image map).
  static constexpr std::size_t kChunkBytes = std::size_t(kBlockSize) * kVectorsPerThread * 16;
  /// Images whose descriptors travel in one launch's parameters (see BatchTable).
  static constexpr int kTableImages = 64;
  /// Uniform batches: bytes of images between an image's histogram and its apply in the queue
  /// (they stay in the H200's 60 MB L2 between the two passes; see launch_equalize_batch_uniform).
  static constexpr std::size_t kLagBytes = std::size_t(24) << 20;
  /// BatchPath::automatic on a uniform batch: the one-launch queue from this many bytes (count ·
  /// n) up; below, the two launches (histogram + LUT, then apply): the whole batch then stays in
  /// L2 between them anyway, and the two launches have no queue atomics and no spin waits.
  /// bench/python/bench_python.py times both paths ("batch path" rows) to revisit this. On the
  /// H200 at 4b24ce2, 64 x 1M: two launches 78.1 us, the queue 90.9 us (from Python, CUDA
  /// events): the queue has not won where it was measured, so automatic takes it only from
  /// 1 GiB (a size not measured yet; `queued` still selects it).
  static constexpr std::size_t kQueuedMinBytes = std::size_t(1) << 30;
  /// Cluster path (launch_equalize_batch_uniform_cluster): threads per block, and 16-byte
  /// vectors each thread holds in registers from the count to the apply (64 registers: two
  /// 512-thread blocks or one 1024-thread block per SM). Blocks of kClusterThreadsSmall (64 KiB
  /// each) while 16 of them hold the image: measured 4-5 % faster than kClusterThreads (128 KiB)
  /// on 64 x 1M (H200, ncu: 78-80 against 82-84 us); larger images take kClusterThreads.
  static constexpr int kClusterThreads = 1024;
  static constexpr int kClusterThreadsSmall = 512;
  static constexpr int kClusterVectors = 8;
  /// Bytes one block of kClusterThreads holds.
  static constexpr std::size_t kClusterBlockBytes =
      std::size_t(kClusterThreads) * kClusterVectors * 16;  // 128 KiB
  /// Largest cluster: 16 blocks (non-portable; 8 is the portable limit), so images up to 2 MiB
  /// (1920 x 1080 is 1.98 MiB).
  static constexpr int kMaxClusterBlocks = 16;
  /// Smallest image the cluster path takes: below it a 1024-thread block with one image holds
  /// mostly idle registers, and the two-launch path's 256-thread blocks share SMs better.
  static constexpr std::size_t kClusterMinBytes = std::size_t(64) << 10;
};

/// How a uniform batch (count images of n bytes back to back) runs.
enum class BatchPath : std::uint8_t {
  automatic,   ///< cluster where cluster_batch_blocks allows it; else queued from
               ///< BatchedPolicy::kQueuedMinBytes up, else two_launch
  queued,      ///< one launch: the work queue with spin waits (launch_equalize_batch_uniform)
  two_launch,  ///< histogram + LUT launch, then apply launch (launch_equalize_batch_uniform_pair)
  cluster      ///< one launch, one thread-block cluster per image, the image held in registers
               ///< (launch_equalize_batch_uniform_cluster); two_launch where it cannot serve
};

/// One gray image of a batch: d_in[0,n) → d_out[0,n), device memory, any alignment; d_out may
/// equal d_in (in place) but must not overlap it otherwise.
struct BatchImage {
  const std::uint8_t* d_in = nullptr;
  std::uint8_t* d_out = nullptr;
  std::size_t n = 0;
};

/// Bytes of zeroed device scratch (per-image uint64 histograms, tickets, ready flags, and the
/// queue's two counters) that the launches need for `count` images. The launches leave it as
/// they found it (histograms, tickets and counters zero; the flags hold past epochs), so it is
/// cudaMemset to zero once, when allocated; a larger buffer serves fewer images too.
std::size_t batch_scratch_bytes(std::size_t count);

/// Equalizes images[0, count) (each exactly as the single-image path: the 256-bin histogram,
/// lut_formula.hpp's LUT, out = lut[in]). d_luts: count·256 bytes of device memory, receives
/// each image's LUT. d_zeroed_scratch: scratch_bytes ≥ batch_scratch_bytes(count) bytes, see
/// batch_scratch_bytes. Async on `stream`,
/// no host synchronization; descriptors travel as kernel parameters, kTableImages per launch
/// pair (so count > kTableImages takes ceil(count / kTableImages) × 2 launches).
void launch_equalize_batch(const BatchImage* images, std::size_t count, Formula f,
                           std::uint8_t* d_luts, void* d_zeroed_scratch, std::size_t scratch_bytes,
                           cudaStream_t stream, const Tuning& t = Tuning{});

/// The two passes of launch_equalize_batch apart, for a LUT made between them (histogram
/// matching: launch_match_lut_planes against a reference). launch_histogram_batch: each image's
/// 256-bin histogram into d_hists[i·256, +256) (uint64, device; zeroed here, then counted:
/// overwritten), one launch per kTableImages images, d_out unused but checked as
/// launch_equalize_batch checks the table. launch_apply_batch: images[i].d_out =
/// d_luts[i·256 + images[i].d_in] (in place allowed), one launch per kTableImages images. Both
/// async on `stream`; no scratch, no host sync; UsageError for null or overlapping pointers.
void launch_histogram_batch(const BatchImage* images, std::size_t count, std::uint64_t* d_hists,
                            cudaStream_t stream);
void launch_apply_batch(const BatchImage* images, std::size_t count, const std::uint8_t* d_luts,
                        cudaStream_t stream, const Tuning& t = Tuning{});

/// The same for `count` images of n bytes each, back to back: image i is d_in[i·n, (i+1)·n)
/// → d_out[i·n, (i+1)·n), in ONE launch whatever count is: a queue of 16 KiB items claimed in
/// order, each image's histogram items followed `lag` images later by its apply items, which
/// wait for the image's ready flag (= epoch) that the last histogram item sets after writing the
/// LUT. So the image is still in L2 when it is read the second time. `epoch`: a different
/// non-zero value for every call that shares the scratch (the flags are never reset).
void launch_equalize_batch_uniform(const std::uint8_t* d_in, std::uint8_t* d_out, std::size_t count,
                                   std::size_t n, Formula f, std::uint8_t* d_luts,
                                   void* d_zeroed_scratch, std::size_t scratch_bytes,
                                   unsigned epoch, cudaStream_t stream);

/// The same result as launch_equalize_batch_uniform in two launches over the whole batch (no
/// queue, no flags, no epoch): launch 1 counts every 32 KiB chunk and each image's last block
/// writes its LUT; launch 2 maps every chunk. The batch is read twice (from L2 when it fits).
void launch_equalize_batch_uniform_pair(const std::uint8_t* d_in, std::uint8_t* d_out,
                                        std::size_t count, std::size_t n, Formula f,
                                        std::uint8_t* d_luts, void* d_zeroed_scratch,
                                        std::size_t scratch_bytes, cudaStream_t stream,
                                        const Tuning& t = Tuning{});

/// Threads per block the cluster path uses for images of n bytes: kClusterThreadsSmall up to
/// 16 such blocks' worth (1 MiB), else kClusterThreads; BatchTuning::cluster_threads (512 or
/// 1024) forces one.
int cluster_batch_threads(std::size_t n, const Tuning& t = Tuning{});

/// Blocks per cluster the cluster path would give each of count images of n bytes at d_in →
/// d_out on the current device: the fewest of 1, 2, 4, 8, 16 whose blocks hold the image
/// (cluster_batch_threads(n) · kClusterVectors · 16 bytes each), or 0 where the path cannot
/// serve the batch: a
/// device without clusters (compute capability < 9.0) or without room for such a cluster, n
/// not a multiple of 16, a pointer not 16-byte aligned, n below kClusterMinBytes or above
/// kMaxClusterBlocks · kClusterBlockBytes.
int cluster_batch_blocks(const std::uint8_t* d_in, const std::uint8_t* d_out, std::size_t count,
                         std::size_t n, const Tuning& t = Tuning{});

/// The same result as launch_equalize_batch_uniform in ONE launch of count clusters of
/// k = cluster_batch_blocks(...) blocks, cluster i for image i: each block loads its part of the
/// image into registers (16-byte evict-first loads) and counts it in shared memory; the cluster
/// merges its blocks' histograms through distributed shared memory; every block builds the LUT
/// and maps the part it holds, storing with evict-first hints. The batch is read from DRAM once
/// and written once; no scratch, no flags. Requires k > 0 (UsageError otherwise).
void launch_equalize_batch_uniform_cluster(const std::uint8_t* d_in, std::uint8_t* d_out,
                                           std::size_t count, std::size_t n, Formula f,
                                           std::uint8_t* d_luts, cudaStream_t stream,
                                           const Tuning& t = Tuning{});

/// The path BatchPath::automatic takes for count images of n bytes at d_in → d_out.
BatchPath choose_batch_path(const std::uint8_t* d_in, const std::uint8_t* d_out, std::size_t count,
                            std::size_t n, const Tuning& t = Tuning{});

}  // namespace histeq::kernels
