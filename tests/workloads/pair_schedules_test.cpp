// The host-and-device logic of warpvm-channel-bench's GPU-to-GPU workloads
// (warpvm/workloads/channel/pair_schedules.hpp): gemm2gpu's task queue, bfs2gpu's message layout and its
// decision to go on, and bitonic2gpu's pairing and merge, replayed on the host for both GPUs
// against std::sort.

#include "warpvm/workloads/channel/pair_schedules.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <vector>

namespace warpvm::workloads {
namespace {

TEST(Gemm2GpuQueue, EveryTileOnceAndEachPanelProducedBeforeItIsConsumed) {
  for (const std::uint32_t n : {128u, 256u, 1024u, 2048u}) {
    const GemmGeometry size{n};
    std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, std::uint32_t> seen;  // (kind, panel, tile) -> q
    std::vector<std::uint32_t> last_production(size.panels(), 0), first_consumption(size.panels(), size.total_tiles());
    for (std::uint32_t q = 0; q < size.total_tiles(); ++q) {
      const GemmTask task = gemm_task(q, size);
      ASSERT_LT(task.panel, size.panels()) << "n " << n << " q " << q;
      ASSERT_LT(task.tile, task.kind == GemmTask::produce ? size.production_tiles() : size.consumption_tiles());
      ASSERT_TRUE(seen.emplace(std::tuple{task.kind, task.panel, task.tile}, q).second) << "n " << n << " q " << q;
      if (task.kind == GemmTask::produce) last_production[task.panel] = q;
      else first_consumption[task.panel] = std::min(first_consumption[task.panel], q);
    }
    EXPECT_EQ(seen.size(), std::size_t{size.total_tiles()});
    for (std::uint32_t p = 0; p < size.panels(); ++p) {
      // a panel's consumers come after all of its producers, and after the next panel's began
      EXPECT_GT(first_consumption[p], last_production[p]) << "n " << n << " panel " << p;
      if (p + 1 < size.panels()) {
        EXPECT_GT(first_consumption[p], seen.at({GemmTask::produce, p + 1, 0})) << "n " << n << " panel " << p;
      }
    }
  }
}

TEST(Bfs2GpuMessage, TheHeaderLiesInOneWindowOfWholeGranules) {
  for (std::uint32_t scale = 11; scale <= 30; ++scale) {
    const BfsGeometry size{(1u << scale) / 2, 64};
    ASSERT_EQ(size.message_words() % block_warps, 0u) << "scale " << scale;
    ASSERT_EQ(size.window_words() % 4, 0u) << "scale " << scale;  // 16-byte windows
    // the warp whose window holds the header's first word holds its second too
    EXPECT_EQ(size.bitmap_words() / size.window_words(), (size.bitmap_words() + 1) / size.window_words());
    EXPECT_EQ(size.overflow_word() + 1, size.counter_words());
  }
  EXPECT_FALSE(bfs_goes_on(0, 0, 0, 0));
  EXPECT_TRUE(bfs_goes_on(0, 0, 0, 1));  // a bit marked for this GPU: the next level looks
  EXPECT_TRUE(bfs_goes_on(5, 0, 0, 0));
}

/// Both GPUs' results of bitonic2gpu on `keys` (half each), merged in slices of `slice` outputs
/// as the merge tasks' threads do, one after the other.
std::vector<std::uint32_t> bitonic_on_host(const std::vector<std::uint32_t>& keys, std::uint32_t slice) {
  const auto half = static_cast<std::uint32_t>(keys.size() / 2);
  std::vector<std::uint32_t> halves[2] = {{keys.begin(), keys.begin() + half}, {keys.begin() + half, keys.end()}};
  for (auto& h : halves) std::sort(h.begin(), h.end());
  std::vector<std::uint32_t> result;
  for (int g = 0; g < 2; ++g) {
    const bool keeps_low = g == 0;
    const std::vector<std::uint32_t>& mine = halves[g];
    const std::vector<std::uint32_t>& theirs = halves[1 - g];
    std::vector<std::uint32_t> paired(half);
    std::uint32_t kept = 0;
    for (std::uint32_t i = 0; i < half; ++i) {
      const bool own = bitonic_keeps_own(keeps_low, mine[i], theirs[half - 1 - i]);
      paired[i] = own ? mine[i] : theirs[half - 1 - i];
      kept += own ? 1 : 0;
    }
    const BitonicRuns runs{half, kept, keeps_low};
    std::vector<std::uint32_t> out(half, 0xdeadbeefu);
    for (std::uint32_t first = 0; first < half; first += slice)
      merge_path([&](std::uint32_t k) { return paired[runs.a_index(k)]; }, runs.a_size(),
                 [&](std::uint32_t k) { return paired[runs.b_index(k)]; }, runs.b_size(), first,
                 std::min(slice, half - first), [&](std::uint32_t k, std::uint32_t key) { out[k] = key; });
    result.insert(result.end(), out.begin(), out.end());
  }
  return result;
}

TEST(Bitonic2GpuMerge, BothGpusTogetherSortEveryInput) {
  std::mt19937 rng(2026);
  for (const std::uint32_t half : {1u, 2u, 5u, 16u, 33u, 100u, 1000u}) {
    for (const std::uint32_t range : {2u, 7u, 1000u, 0xffffffffu}) {  // many equal keys, then few
      for (const std::uint32_t slice : {1u, 3u, 16u}) {
        std::vector<std::uint32_t> keys(2 * half);
        for (auto& k : keys) k = static_cast<std::uint32_t>(rng() % (std::uint64_t{range} + 1));
        std::vector<std::uint32_t> want = keys;
        std::sort(want.begin(), want.end());
        ASSERT_EQ(bitonic_on_host(keys, slice), want) << "half " << half << " range " << range << " slice " << slice;
      }
    }
  }
}

TEST(Bitonic2GpuMerge, OneGpuHoldingAllTheLowKeys) {
  // every pair keeps GPU 0's own key (and GPU 1's): runs B are empty
  std::vector<std::uint32_t> keys(64);
  for (std::uint32_t i = 0; i < 64; ++i) keys[i] = i;
  std::vector<std::uint32_t> want = keys;
  EXPECT_EQ(bitonic_on_host(keys, 16), want);
  std::reverse(keys.begin(), keys.end());  // GPU 0 holds all the high ones: runs A are empty
  EXPECT_EQ(bitonic_on_host(keys, 16), want);
}

}  // namespace
}  // namespace warpvm::workloads
