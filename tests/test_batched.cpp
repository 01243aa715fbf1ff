// test_batched.cpp — gpu::Equalizer::equalize_batch (kernels/batched/batched.cu) and the Equalizer
// on an external stream: every image of a batch equals the CPU pipeline's result for it alone
// (which the other suites tie to the GPU single-image path and to OpenCV), for sizes around the
// chunk size, empty images, misaligned and in-place buffers, more images than one launch's table,
// and repeated calls (the zeroed scratch must come back zero); match_batch likewise against
// match_lut of each image's histogram. The batch tests run once per kernel
// configuration (kConfigs: the policy, the cluster path's large blocks at every size, without
// and with programmatic dependent launch everywhere; gpu::Equalizer::set_tuning).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "batched/batched.hpp"
#include "gpu_test_support.hpp"
#include "histeq/cpu.hpp"
#include "histeq/error.hpp"
#include "histeq/gpu.hpp"
#include "histeq/lut.hpp"
#include "histeq/match.hpp"
#include "histeq/synthetic.hpp"
#include "histeq/tuning.hpp"
#include "region_test_support.hpp"
#include "test_support.hpp"

namespace histeq {
namespace {

using test::Config;
using test::config;

using kernels::BatchedPolicy;

std::vector<std::uint8_t> samples(std::size_t n, Distribution d, std::uint64_t seed) {
  SyntheticSpec s;
  s.n = n;
  s.dist = d;
  s.seed = seed;
  return make_samples(s);
}

/// The CPU reference: lut(histogram(img)) applied to img.
std::vector<std::uint8_t> reference(const std::vector<std::uint8_t>& img, Formula f) {
  const Histogram h = cpu::histogram(img.data(), img.size(), SampleType::u8, 256, 1);
  const Lut lut = make_lut(h.data(), f);
  std::vector<std::uint8_t> out(img.size());
  for (std::size_t i = 0; i < img.size(); ++i) out[i] = lut[img[i]];
  return out;
}

/// The policy; the cluster path with 1024-thread blocks at every size (the policy takes them
/// only above 1 MiB); no programmatic dependent launch; programmatic launch on every site.
const Config kConfigs[] = {
    {"policy", Tuning{}},
    config("cluster_1024", [](Tuning& t) { t.batch.cluster_threads = 1024; }),
    config("no_pdl", [](Tuning& t) { t.pdl_edges = 0; }),
    config("every_pdl", [](Tuning& t) { t.pdl_edges = 0x7FFFFFFF; }),
};

/// The fixture of the batch tests: eq() is an Equalizer with the configuration's tuning.
class BatchedConfig : public ::testing::TestWithParam<Config> {
 protected:
  gpu::Equalizer eq() const {
    gpu::Equalizer e;
    e.set_tuning(GetParam().tuning);
    return e;
  }
  const Tuning& tuning() const { return GetParam().tuning; }
};
class BatchedTable : public BatchedConfig {};
class BatchedUniform : public BatchedConfig {};
class BatchedClusterSizes : public BatchedConfig {};
std::string config_name(const ::testing::TestParamInfo<Config>& p) { return p.param.name; }
INSTANTIATE_TEST_SUITE_P(Configs, BatchedTable, ::testing::ValuesIn(kConfigs), config_name);
INSTANTIATE_TEST_SUITE_P(Configs, BatchedUniform, ::testing::ValuesIn(kConfigs), config_name);
INSTANTIATE_TEST_SUITE_P(Configs, BatchedClusterSizes, ::testing::ValuesIn(kConfigs), config_name);

std::vector<std::size_t> sizes_for_test() {
  const std::size_t c = BatchedPolicy::kChunkBytes;
  return {0, 1, 15, 16, 17, 255, 4096, c - 1, c, c + 1, 3 * c + 7, 100003, 1 << 20};
}

TEST_P(BatchedTable, EveryImageEqualsItsOwnEqualization) {
  HISTEQ_REQUIRE_GPU();
  const auto sizes = sizes_for_test();
  const auto& dists = all_distributions();
  for (Formula f : {Formula::opencv, Formula::exact}) {
    std::vector<std::vector<std::uint8_t>> host;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      host.push_back(samples(sizes[i], dists[i % dists.size()], 7 + i));
    }
    // Inputs at offsets 0..15 (misaligned vector paths), outputs in separate buffers; the last
    // image in place.
    std::vector<DeviceBuffer<std::uint8_t>> d_in, d_out;
    std::vector<gpu::Equalizer::BatchImage> table;
    for (std::size_t i = 0; i < host.size(); ++i) {
      const std::size_t off = i % 16;
      d_in.push_back(test::upload_bytes(host[i], off));
      d_out.emplace_back(host[i].size() + 16);
      gpu::Equalizer::BatchImage b;
      b.d_in = d_in.back().get() + off;
      b.d_out = i + 1 == host.size() ? d_in.back().get() + off : d_out.back().get() + (i * 3) % 16;
      b.n = host[i].size();
      table.push_back(b);
    }
    gpu::Equalizer eq = this->eq();
    for (int rep = 0; rep < 2; ++rep) {  // the second call needs the scratch zero again
      if (rep == 1) {                    // in place: restore the input of the last image
        HISTEQ_CUDA_CHECK(cudaMemcpy(const_cast<std::uint8_t*>(table.back().d_in),
                                     host.back().data(), host.back().size(),
                                     cudaMemcpyHostToDevice));
        HISTEQ_CUDA_CHECK(cudaDeviceSynchronize());
      }
      eq.equalize_batch(table.data(), table.size(), f);
      eq.synchronize();
      for (std::size_t i = 0; i < host.size(); ++i) {
        const auto got = test::download(table[i].d_out, host[i].size());
        EXPECT_EQ(got, reference(host[i], f))
            << "image " << i << " (" << host[i].size() << " bytes), formula " << to_string(f)
            << ", call " << rep;
      }
    }
  }
}

TEST_P(BatchedTable, MoreImagesThanOneLaunchTable) {
  HISTEQ_REQUIRE_GPU();
  const std::size_t count = 2 * BatchedPolicy::kTableImages + 5;
  std::vector<std::vector<std::uint8_t>> host;
  std::vector<DeviceBuffer<std::uint8_t>> d_in;
  std::vector<DeviceBuffer<std::uint8_t>> d_out;
  std::vector<gpu::Equalizer::BatchImage> table;
  for (std::size_t i = 0; i < count; ++i) {
    host.push_back(samples(1000 + 997 * i, Distribution::natural, 100 + i));
    d_in.push_back(test::upload_bytes(host.back()));
    d_out.emplace_back(host.back().size());
    table.push_back({d_in.back().get(), d_out.back().get(), host.back().size()});
  }
  gpu::Equalizer eq = this->eq();
  eq.equalize_batch(table.data(), table.size(), Formula::opencv);
  eq.synchronize();
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_EQ(test::download(d_out[i].get(), host[i].size()), reference(host[i], Formula::opencv))
        << "image " << i;
  }
}

/// The CPU reference of matching: match_lut(histogram(img), ref) applied to img.
std::vector<std::uint8_t> matched(const std::vector<std::uint8_t>& img, const Histogram& ref) {
  const Histogram h = cpu::histogram(img.data(), img.size(), SampleType::u8, 256, 1);
  const Lut lut = match_lut(h.data(), ref.data());
  std::vector<std::uint8_t> out(img.size());
  for (std::size_t i = 0; i < img.size(); ++i) out[i] = lut[img[i]];
  return out;
}

// match_batch (the JPEG device route's matching of Y planes): every image of a batch of any
// sizes (around the chunk size, empty, misaligned, one in place, more than two launch tables)
// equals match_lut of its own histogram applied, for references of one level, two levels, with
// gaps and of a natural image; device_hist and device_lut hold each image's histogram and LUT;
// a second call and an equalize_batch on the same Equalizer afterwards are unaffected.
TEST_P(BatchedTable, MatchingEveryImageEqualsItsOwnMatch) {
  HISTEQ_REQUIRE_GPU();
  std::vector<std::size_t> sizes = sizes_for_test();
  for (std::size_t i = 0; i < 2 * BatchedPolicy::kTableImages; ++i) sizes.push_back(500 + 331 * i);
  const auto& dists = all_distributions();
  std::vector<std::vector<std::uint8_t>> host;
  std::vector<DeviceBuffer<std::uint8_t>> d_in, d_out;
  std::vector<gpu::Equalizer::BatchImage> table;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    host.push_back(samples(sizes[i], dists[i % dists.size()], 31 + i));
    const std::size_t off = i % 16;
    d_in.push_back(test::upload_bytes(host[i], off));
    d_out.emplace_back(host[i].size() + 16);
    gpu::Equalizer::BatchImage b;
    b.d_in = d_in.back().get() + off;
    b.d_out = i == 3 ? d_in.back().get() + off : d_out.back().get() + (i * 5) % 16;
    b.n = host[i].size();
    table.push_back(b);
  }
  Histogram one(256, 0), two(256, 0), gaps(256, 0);
  one[77] = 5;
  two[0] = 3;
  two[255] = 1000;
  for (std::size_t v = 3; v < 256; v += 17) gaps[v] = 1 + v % 7;
  const std::vector<std::uint8_t> natural = samples(200000, Distribution::natural, 2);
  const Histogram nat = cpu::histogram(natural.data(), natural.size(), SampleType::u8, 256, 1);
  gpu::Equalizer eq = this->eq();
  int call = 0;
  for (const Histogram& ref : {one, two, gaps, nat}) {
    HISTEQ_CUDA_CHECK(cudaMemcpy(const_cast<std::uint8_t*>(table[3].d_in), host[3].data(),
                                 host[3].size(), cudaMemcpyHostToDevice));  // in place: again
    const DeviceBuffer<std::uint64_t> d_ref = test::upload_typed(ref);
    eq.match_batch(table.data(), table.size(), d_ref.get());
    eq.synchronize();
    const auto hists = test::download(eq.device_hist(int(table.size())), table.size() * 256);
    const auto luts = test::download(eq.device_lut(int(table.size())), table.size() * 256);
    for (std::size_t i = 0; i < host.size(); ++i) {
      const Histogram h = cpu::histogram(host[i].data(), host[i].size(), SampleType::u8, 256, 1);
      const Lut lut = match_lut(h.data(), ref.data());
      EXPECT_EQ(Histogram(hists.begin() + std::ptrdiff_t(i * 256),
                          hists.begin() + std::ptrdiff_t(i * 256 + 256)),
                h)
          << "image " << i << ", reference " << call;
      EXPECT_TRUE(std::equal(lut.begin(), lut.end(), luts.begin() + std::ptrdiff_t(i * 256)))
          << "image " << i << ", reference " << call;
      EXPECT_EQ(test::download(table[i].d_out, host[i].size()), matched(host[i], ref))
          << "image " << i << " (" << host[i].size() << " bytes), reference " << call;
    }
    ++call;
  }
  // The batched equalization after matching on the same Equalizer (its zeroed scratch untouched).
  HISTEQ_CUDA_CHECK(cudaMemcpy(const_cast<std::uint8_t*>(table[3].d_in), host[3].data(),
                               host[3].size(), cudaMemcpyHostToDevice));
  eq.equalize_batch(table.data(), table.size(), Formula::opencv);
  eq.synchronize();
  for (std::size_t i = 0; i < host.size(); ++i)
    EXPECT_EQ(test::download(table[i].d_out, host[i].size()), reference(host[i], Formula::opencv))
        << "image " << i << " equalized after matching";
}

TEST_P(BatchedUniform, BackToBackImagesEqualTheirOwnEqualization) {
  HISTEQ_REQUIRE_GPU();
  for (std::size_t n :
       {std::size_t(1), std::size_t(257), BatchedPolicy::kChunkBytes + 3, std::size_t(1) << 20}) {
    const std::size_t count = n > 100000 ? 9 : 33;
    std::vector<std::uint8_t> all;
    std::vector<std::vector<std::uint8_t>> each;
    for (std::size_t i = 0; i < count; ++i) {
      each.push_back(samples(n, all_distributions()[i % all_distributions().size()], 3 * i + 1));
      all.insert(all.end(), each.back().begin(), each.back().end());
    }
    auto d_in = test::upload_bytes(all);
    DeviceBuffer<std::uint8_t> d_out(all.size());
    gpu::Equalizer eq = this->eq();
    using Path = gpu::Equalizer::BatchPath;
    // Every path twice (the scratch is left reusable by each, whatever the path before it).
    const Path paths[] = {Path::queued,    Path::queued,  Path::two_launch, Path::two_launch,
                          Path::automatic, Path::cluster, Path::queued,     Path::cluster};
    for (int rep = 0; rep < int(std::size(paths)); ++rep) {
      SCOPED_TRACE("path " + std::to_string(int(paths[rep])));
      eq.equalize_batch(d_in.get(), d_out.get(), count, n, Formula::opencv, paths[rep]);
      eq.synchronize();
      const auto got = test::download(d_out.get(), all.size());
      for (std::size_t i = 0; i < count; ++i) {
        const std::vector<std::uint8_t> gi(got.begin() + std::ptrdiff_t(i * n),
                                           got.begin() + std::ptrdiff_t((i + 1) * n));
        EXPECT_EQ(gi, reference(each[i], Formula::opencv)) << "n " << n << " image " << i;
      }
    }
    // The LUTs stay readable after the call (device_lut(count)).
    const auto luts = test::download(eq.device_lut(int(count)), count * 256);
    const Histogram h = cpu::histogram(each[0].data(), n, SampleType::u8, 256, 1);
    const Lut want = make_lut(h.data(), Formula::opencv);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), luts.begin())) << "n " << n;
  }
}

TEST_P(BatchedUniform, OneEqualizerAcrossCountsSizesAndModesInPlace) {
  HISTEQ_REQUIRE_GPU();
  gpu::Equalizer eq = this->eq();
  // (count, n): growth of the scratch, then smaller calls that reuse the larger buffer, in
  // between a table call; the ready flags and queue counters must not leak between them.
  const std::pair<std::size_t, std::size_t> calls[] = {
      {40, 1000}, {70, 50000}, {10, 300000}, {3, 17}, {70, 50000}};
  for (std::size_t c = 0; c < std::size(calls); ++c) {
    const auto [count, n] = calls[c];
    std::vector<std::uint8_t> all = samples(count * n, Distribution::blocky, 50 + c);
    auto d = test::upload_bytes(all);
    using Path = gpu::Equalizer::BatchPath;
    const Path path = c % 2 ? Path::two_launch : Path::queued;  // the paths share the scratch
    eq.equalize_batch(d.get(), d.get(), count, n, Formula::opencv, path);  // in place
    std::vector<std::uint8_t> one = samples(4321, Distribution::natural, c);
    auto d1 = test::upload_bytes(one);
    DeviceBuffer<std::uint8_t> o1(one.size());
    gpu::Equalizer::BatchImage b{d1.get(), o1.get(), one.size()};
    eq.equalize_batch(&b, 1, Formula::exact);
    eq.synchronize();
    const auto got = test::download(d.get(), all.size());
    for (std::size_t i = 0; i < count; ++i) {
      const std::vector<std::uint8_t> in(all.begin() + std::ptrdiff_t(i * n),
                                         all.begin() + std::ptrdiff_t((i + 1) * n));
      const std::vector<std::uint8_t> gi(got.begin() + std::ptrdiff_t(i * n),
                                         got.begin() + std::ptrdiff_t((i + 1) * n));
      ASSERT_EQ(gi, reference(in, Formula::opencv)) << "call " << c << " image " << i;
    }
    EXPECT_EQ(test::download(o1.get(), one.size()), reference(one, Formula::exact)) << c;
  }
}

// The cluster path's rules that need no device: sizes it refuses, misaligned pointers.
TEST(BatchedCluster, RefusesWhatItCannotServe) {
  alignas(16) static std::uint8_t host[64];
  const std::size_t lo = BatchedPolicy::kClusterMinBytes;
  const std::size_t hi =
      std::size_t(BatchedPolicy::kMaxClusterBlocks) * BatchedPolicy::kClusterBlockBytes;
  EXPECT_EQ(kernels::cluster_batch_blocks(host, host, 4, lo - 16), 0) << "below the minimum";
  EXPECT_EQ(kernels::cluster_batch_blocks(host, host, 4, hi + 16), 0) << "above 16 blocks";
  EXPECT_EQ(kernels::cluster_batch_blocks(host, host, 4, lo + 8), 0) << "n % 16 != 0";
  EXPECT_EQ(kernels::cluster_batch_blocks(host + 1, host, 4, lo), 0) << "input misaligned";
  EXPECT_EQ(kernels::cluster_batch_blocks(host, host + 4, 4, lo), 0) << "output misaligned";
  EXPECT_EQ(kernels::cluster_batch_blocks(host, host, 0, lo), 0) << "no images";
  // The block size: the small blocks while 16 of them hold the image, then the large ones.
  const std::size_t small16 = std::size_t(BatchedPolicy::kMaxClusterBlocks) *
                              BatchedPolicy::kClusterThreadsSmall * BatchedPolicy::kClusterVectors *
                              16;
  EXPECT_EQ(kernels::cluster_batch_threads(lo), BatchedPolicy::kClusterThreadsSmall);
  EXPECT_EQ(kernels::cluster_batch_threads(small16), BatchedPolicy::kClusterThreadsSmall);
  EXPECT_EQ(kernels::cluster_batch_threads(small16 + 16), BatchedPolicy::kClusterThreads);
  // BatchTuning::cluster_threads forces either size; other values leave the policy's.
  for (const int forced : {BatchedPolicy::kClusterThreadsSmall, BatchedPolicy::kClusterThreads}) {
    Tuning t;
    t.batch.cluster_threads = forced;
    EXPECT_EQ(kernels::cluster_batch_threads(lo, t), forced);
    EXPECT_EQ(kernels::cluster_batch_threads(small16 + 16, t), forced);
  }
  Tuning odd;
  odd.batch.cluster_threads = 300;
  EXPECT_EQ(kernels::cluster_batch_threads(lo, odd), BatchedPolicy::kClusterThreadsSmall);
}

// One cluster per image, 1 to 16 blocks of either block size: every image equals its own
// equalization, whatever the data (constant, one value plus one outlier, every distribution), in
// place or not; the LUTs are left in device_lut. On a device without clusters the path runs
// two_launch (same bytes).
TEST_P(BatchedClusterSizes, EveryClusterSizeEqualsTheReference) {
  HISTEQ_REQUIRE_GPU();
  const std::size_t block = BatchedPolicy::kClusterBlockBytes;
  // Sizes that take each cluster size of each block size, and the edges between them.
  const std::size_t cases[] = {BatchedPolicy::kClusterMinBytes,
                               block / 2 + 16,
                               block,
                               block + 16,
                               300000,
                               std::size_t(1) << 20,
                               (std::size_t(1) << 20) + 16,
                               1920 * 1080,
                               16 * block};
  int major = 0;
  HISTEQ_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  gpu::Equalizer eq = this->eq();
  const auto& dists = all_distributions();
  for (const std::size_t n : cases) {
    SCOPED_TRACE("n " + std::to_string(n));
    const std::size_t count = 5;
    std::vector<std::vector<std::uint8_t>> each;
    std::vector<std::uint8_t> all;
    for (std::size_t i = 0; i < count; ++i) {
      if (i == 0) {
        each.emplace_back(n, std::uint8_t(77));  // constant: the identity
      } else if (i == 1) {
        each.emplace_back(n, std::uint8_t(3));  // one value and one outlier in the last vector
        each.back()[n - 1] = 250;
      } else {
        each.push_back(samples(n, dists[(i + n) % dists.size()], n + i));
      }
      all.insert(all.end(), each.back().begin(), each.back().end());
    }
    auto d_in = test::upload_bytes(all);
    DeviceBuffer<std::uint8_t> d_out(all.size());
    // Expected: the fewest blocks (a power of two) of the policy's size that hold the image.
    const std::size_t holds = std::size_t(kernels::cluster_batch_threads(n, tuning())) *
                              BatchedPolicy::kClusterVectors * 16;
    int k = 1;
    while (std::size_t(k) * holds < n) k *= 2;
    const int got_k = kernels::cluster_batch_blocks(d_in.get(), d_out.get(), count, n, tuning());
    if (major >= 9) EXPECT_EQ(got_k, k <= BatchedPolicy::kMaxClusterBlocks ? k : 0);
    for (const bool in_place : {false, true}) {
      std::uint8_t* out = in_place ? d_in.get() : d_out.get();
      eq.equalize_batch(d_in.get(), out, count, n, Formula::opencv,
                        gpu::Equalizer::BatchPath::cluster);
      eq.synchronize();
      const auto got = test::download(out, all.size());
      for (std::size_t i = 0; i < count; ++i) {
        const std::vector<std::uint8_t> gi(got.begin() + std::ptrdiff_t(i * n),
                                           got.begin() + std::ptrdiff_t((i + 1) * n));
        ASSERT_EQ(gi, reference(each[i], Formula::opencv))
            << "image " << i << " in place " << in_place;
      }
      const auto luts = test::download(eq.device_lut(int(count)), count * 256);
      const Histogram h = cpu::histogram(each[2].data(), n, SampleType::u8, 256, 1);
      const Lut want = make_lut(h.data(), Formula::opencv);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), luts.begin() + 2 * 256));
    }
  }
  // The exact formula through the same path.
  const std::size_t n = std::size_t(1) << 20;
  std::vector<std::uint8_t> all = samples(3 * n, Distribution::natural, 99);
  auto d = test::upload_bytes(all);
  eq.equalize_batch(d.get(), d.get(), 3, n, Formula::exact, gpu::Equalizer::BatchPath::cluster);
  eq.synchronize();
  const auto got = test::download(d.get(), all.size());
  for (std::size_t i = 0; i < 3; ++i) {
    const std::vector<std::uint8_t> in(all.begin() + std::ptrdiff_t(i * n),
                                       all.begin() + std::ptrdiff_t((i + 1) * n));
    const std::vector<std::uint8_t> gi(got.begin() + std::ptrdiff_t(i * n),
                                       got.begin() + std::ptrdiff_t((i + 1) * n));
    EXPECT_EQ(gi, reference(in, Formula::exact)) << "image " << i;
  }
}

TEST(BatchedArgs, OverlappingBuffersAreRefused) {
  HISTEQ_REQUIRE_GPU();
  DeviceBuffer<std::uint8_t> d(1024);
  gpu::Equalizer eq;
  EXPECT_THROW(eq.equalize_batch(d.get(), d.get() + 1, 2, 500, Formula::opencv), UsageError);
  gpu::Equalizer::BatchImage b{d.get(), d.get() + 8, 100};
  EXPECT_THROW(eq.equalize_batch(&b, 1, Formula::opencv), UsageError);
  EXPECT_NO_THROW(eq.equalize_batch(nullptr, 0, Formula::opencv));
  DeviceBuffer<std::uint64_t> ref(256);
  EXPECT_THROW(eq.match_batch(&b, 1, ref.get()), UsageError);
  gpu::Equalizer::BatchImage ok{d.get(), d.get() + 512, 100};
  EXPECT_THROW(eq.match_batch(&ok, 1, nullptr), UsageError);
  EXPECT_NO_THROW(eq.match_batch(nullptr, 0, ref.get()));
}

TEST(ExternalStream, EqualizerRunsOnTheCallersStream) {
  HISTEQ_REQUIRE_GPU();
  cudaStream_t mine = nullptr;
  HISTEQ_CUDA_CHECK(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking));
  {
    gpu::Equalizer eq(mine);
    EXPECT_EQ(eq.stream(), mine);
    const auto host = samples(300000, Distribution::natural, 5);
    auto d_in = test::upload_bytes(host);
    DeviceBuffer<std::uint8_t> d_out(host.size());
    eq.equalize_gray(d_in.get(), d_out.get(), host.size(), Formula::opencv);
    HISTEQ_CUDA_CHECK(cudaStreamSynchronize(mine));
    EXPECT_EQ(test::download(d_out.get(), host.size()), reference(host, Formula::opencv));
    eq.set_stream(nullptr);  // back to an own stream
    EXPECT_NE(eq.stream(), mine);
    EXPECT_NE(eq.stream(), nullptr);
  }
  HISTEQ_CUDA_CHECK(cudaStreamDestroy(mine));
}

}  // namespace
}  // namespace histeq
