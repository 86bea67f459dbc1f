// warpvm-alloc-bench's access workloads, their host side (warpvm/workloads/alloc/access_workloads.hpp):
// the managed backend's placement gives every thread bytes of its own, within the buffer, in
// the heap's region shapes (regions under 2 MB in the PortionSpace, larger ones on 2 MB
// boundaries after it; the layouts' offsets as Eq. 1-2 and the contiguous rule give them); the
// heap size it computes fits every point; and the references (touched pages, expected sums)
// count what the reads do.

#include "warpvm/workloads/alloc/access_workloads.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace warpvm::workloads {
namespace {

constexpr std::uint64_t kib = 1024;
constexpr std::uint64_t mib = 1024 * kib;
constexpr AccessOffsets per_thread = AccessOffsets::per_thread;
constexpr std::uint64_t page = detail::small_segment_bytes;

class AccessPlacement : public ::testing::TestWithParam<HeapLayout> {};

TEST_P(AccessPlacement, EveryThreadGetsBytesOfItsOwnInTheHeapsRegionShapes) {
  const HeapLayout layout = GetParam();
  constexpr std::uint64_t threads = 100;  // three full warps and one of 4 lanes
  for (const std::uint64_t bytes : {std::uint64_t{500}, 4000 * std::uint64_t{1}, 64 * kib, 100000 * std::uint64_t{1},
                                    2 * mib + 12}) {
    SCOPED_TRACE(std::to_string(bytes) + " B per thread");
    const std::uint64_t capacity = heap_bytes_for(layout, threads, bytes);
    const WarpRegions placed = place_warp_regions(capacity, layout, detail::LaneOrder::lane_id, threads, bytes);
    ASSERT_LE(placed.extent_bytes, capacity);
    const std::uint64_t portion = detail::heap_shares(capacity, 0, false, 0).portion_bytes;
    std::vector<bool> used(placed.extent_bytes / detail::heap_unit_bytes, false);
    for (std::uint64_t t = 0; t < threads; ++t) {
      const heap_ptr p = placed.ptrs[t];
      ASSERT_TRUE(p) << "thread " << t << " got nothing from a heap sized for the point";
      ASSERT_GE(p.size(), bytes);
      ASSERT_EQ(p.lane(), t % 32);
      ASSERT_EQ(p.lanes(), t < 96 ? 32u : 4u);
      if (p.region_bytes() < detail::vablock_bytes) {
        ASSERT_LE(p.region_offset() + p.region_bytes(), portion) << "a region under 2 MB outside the PortionSpace";
      } else {
        ASSERT_GE(p.region_offset(), portion);
        ASSERT_EQ(p.region_offset() % detail::vablock_bytes, 0u);
      }
      for (std::uint64_t unit = 0; unit < p.size(); unit += detail::heap_unit_bytes) {
        const std::uint64_t offset = p.offset_of(unit);
        ASSERT_LT(offset, placed.extent_bytes);
        ASSERT_FALSE(used[offset / detail::heap_unit_bytes]) << "thread " << t << " byte " << unit << " is shared";
        used[offset / detail::heap_unit_bytes] = true;
      }
    }
  }
}

TEST_P(AccessPlacement, ATooSmallHeapLeavesWholeWarpsWithoutMemory) {
  const HeapLayout layout = GetParam();
  constexpr std::uint64_t threads = 256, bytes = 1 * mib;  // 8 warps of 32 MiB regions
  const WarpRegions placed = place_warp_regions(64 * mib, layout, detail::LaneOrder::lane_id, threads, bytes);
  std::uint64_t with_memory = 0;
  for (std::uint64_t t = 0; t < threads; ++t) {
    with_memory += placed.ptrs[t] ? 1 : 0;
    EXPECT_EQ(static_cast<bool>(placed.ptrs[t]), static_cast<bool>(placed.ptrs[t - t % 32])) << "thread " << t;
  }
  EXPECT_EQ(with_memory, 32u) << "a 64 MiB heap has 32 MiB of segments after its PortionSpace: one warp's region";
}

INSTANTIATE_TEST_SUITE_P(Layouts, AccessPlacement, ::testing::Values(HeapLayout::contiguous, HeapLayout::aligned),
                         [](const ::testing::TestParamInfo<HeapLayout>& layout) {
                           return std::string(layout.param == HeapLayout::aligned ? "aligned" : "contiguous");
                         });

TEST(AccessPlacement, TheLayoutsPutTheLanesWhereTheirRulesSay) {
  constexpr std::uint64_t threads = 64, bytes = 2 * mib;
  const std::uint64_t capacity = heap_bytes_for(HeapLayout::aligned, threads, bytes);
  const WarpRegions aligned =
      place_warp_regions(capacity, HeapLayout::aligned, detail::LaneOrder::lane_id, threads, bytes);
  const WarpRegions contiguous =
      place_warp_regions(capacity, HeapLayout::contiguous, detail::LaneOrder::lane_id, threads, bytes);
  const std::uint64_t tile = detail::basic_block_bytes;
  for (const std::uint64_t t : {std::uint64_t{0}, std::uint64_t{5}, std::uint64_t{31}, std::uint64_t{40}}) {
    const std::uint64_t lane = t % 32;
    for (const std::uint64_t byte : {std::uint64_t{0}, 4 * kib + 8, 64 * kib, 1 * mib + 100, 2 * mib - 4}) {
      // Eq. 1-2: tile k of lane L at the region's row k, slot L.
      const std::uint64_t k = byte / tile;
      EXPECT_EQ(aligned.ptrs[t].offset_of(byte),
                aligned.ptrs[t].region_offset() + (k * 32 + lane) * tile + byte % tile);
      EXPECT_EQ(contiguous.ptrs[t].offset_of(byte), contiguous.ptrs[t].region_offset() + lane * bytes + byte);
    }
  }
}

TEST(AccessReferences, TouchedPagesCountTheDistinctPagesRead) {
  std::mt19937_64 random(std::random_device{}());
  const std::uint64_t seed = random();
  constexpr std::uint64_t threads = 1024;
  const auto place = [&](HeapLayout layout, std::uint64_t bytes) {
    const std::uint64_t capacity = heap_bytes_for(layout, threads, bytes);
    return place_warp_regions(capacity, layout, detail::LaneOrder::lane_id, threads, bytes).ptrs;
  };
  for (const HeapLayout layout : {HeapLayout::contiguous, HeapLayout::aligned}) {
    // A 4 KB range is one page (aligned lanes are whole pages; contiguous ones too at 4 KB) ...
    EXPECT_EQ(touched_page_bytes(place(layout, 4 * kib), seed, 1024, 100, per_thread), threads * page);
    // ... and 2000 reads of a 64 KB range find all 16 of its pages.
    EXPECT_EQ(touched_page_bytes(place(layout, 64 * kib), seed, 16 * 1024, 2000, per_thread), threads * 64 * kib);
  }
  // 0.5 KB ranges: contiguous lanes share a page eight at a time, aligned lanes are padded to
  // a page each (AlignMalloc's small-size cost).
  EXPECT_EQ(touched_page_bytes(place(HeapLayout::contiguous, 512), seed, 128, 100, per_thread), threads / 8 * page);
  EXPECT_EQ(touched_page_bytes(place(HeapLayout::aligned, 512), seed, 128, 100, per_thread), threads * page);
  // 100 reads of 512 pages: both layouts keep every page whole, so they touch as many pages,
  // about 91 per thread (512 x (1 - (511/512)^100)).
  const std::uint64_t big = touched_page_bytes(place(HeapLayout::aligned, 2 * mib), seed, 512 * 1024, 100, per_thread);
  EXPECT_EQ(touched_page_bytes(place(HeapLayout::contiguous, 2 * mib), seed, 512 * 1024, 100, per_thread), big);
  EXPECT_GT(big, threads * 85 * page);
  EXPECT_LE(big, threads * 100 * page);
}

TEST(AccessReferences, PerWarpOffsetsPutAWarpsReadsOfOneStepInOneVaBlockOnlyWhenAligned) {
  // With per-warp draws every lane reads the same word of its own 1 MB range at each step: the
  // aligned layout puts those 32 words in 32 consecutive 64 KB tiles, one 2 MB VA block (what
  // UVM's prefetcher decides on), the contiguous layout 1 MB apart, over 16 blocks. With
  // per-thread draws neither layout keeps a step's reads together.
  const std::uint64_t seed = std::mt19937_64(std::random_device{}())();
  constexpr std::uint64_t threads = 32, range = mib, words = range / 4, steps = 50;
  const auto blocks_per_step = [&](HeapLayout layout, AccessOffsets offsets) {
    const std::uint64_t capacity = heap_bytes_for(layout, threads, range);
    const std::vector<heap_ptr> ptrs = place_warp_regions(capacity, layout, detail::LaneOrder::lane_id, threads, range).ptrs;
    std::uint64_t most = 0;
    for (std::uint64_t a = 0; a < steps; ++a) {
      std::vector<std::uint64_t> blocks;
      for (std::uint64_t t = 0; t < threads; ++t)
        blocks.push_back(ptrs[t].offset_of(access_word(seed, access_stream(t, offsets), a, words) * 4) /
                         detail::vablock_bytes);
      std::sort(blocks.begin(), blocks.end());
      most = std::max<std::uint64_t>(most, std::unique(blocks.begin(), blocks.end()) - blocks.begin());
    }
    return most;
  };
  EXPECT_EQ(blocks_per_step(HeapLayout::aligned, AccessOffsets::per_warp), 1u);
  EXPECT_EQ(blocks_per_step(HeapLayout::contiguous, AccessOffsets::per_warp), 16u);
  EXPECT_GT(blocks_per_step(HeapLayout::aligned, per_thread), 8u);
  // The references follow the same draws as the kernel: a warp's lanes share one stream.
  EXPECT_EQ(access_stream(5, AccessOffsets::per_warp), access_stream(31, AccessOffsets::per_warp));
  EXPECT_NE(access_stream(31, AccessOffsets::per_warp), access_stream(32, AccessOffsets::per_warp));
  EXPECT_NE(expected_sums(seed, 64, words, steps, AccessOffsets::per_warp), expected_sums(seed, 64, words, steps, per_thread));
}

TEST(AccessReferences, ExpectedSumsAreTheSumsOfTheDrawnWords) {
  std::mt19937_64 random(std::random_device{}());
  const std::uint64_t seed = random();
  constexpr std::uint64_t threads = 64, accesses = 100;
  // One word per range: every read finds it.
  const std::vector<std::uint64_t> single = expected_sums(seed, threads, 1, accesses, per_thread);
  for (std::uint64_t t = 0; t < threads; ++t) EXPECT_EQ(single[t], accesses * pattern_word(seed, t, 0));
  // The reads stay in the range and spread over it; a new seed draws other words.
  constexpr std::uint64_t words = 1000;
  std::vector<bool> hit(words, false);
  for (std::uint64_t a = 0; a < 20000; ++a) {
    const std::uint64_t w = access_word(seed, 3, a, words);
    ASSERT_LT(w, words);
    hit[w] = true;
  }
  EXPECT_EQ(std::count(hit.begin(), hit.end(), true), static_cast<std::ptrdiff_t>(words));
  EXPECT_NE(expected_sums(seed, threads, words, accesses, per_thread),
            expected_sums(seed + 1, threads, words, accesses, per_thread));
  EXPECT_NE(pattern_word(seed, 0, 0), pattern_word(seed, 0, 1));
}

}  // namespace
}  // namespace warpvm::workloads
