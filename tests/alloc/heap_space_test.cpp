// The heap's space (OR tree over 2 MB segments + PortionTree for regions under 2 MB): random
// alloc/free sequences against a brute-force model of the same placement rules, and the
// protocol's pure pieces: region words (double free, foreign pointers) and heap_ptr offsets.

#include "warpvm/detail/alloc/heap_protocol.hpp"
#include "warpvm/detail/alloc/heap_ptr.hpp"
#include "warpvm/detail/alloc/heap_space.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace warpvm::detail {
namespace {

constexpr std::uint64_t kb = 1024;
constexpr std::uint64_t mb = 1024 * kb;
constexpr std::uint64_t blocks_per_segment = vablock_bytes / basic_block_bytes;

struct Space {
  Space(std::uint32_t segments, std::uint32_t portion_vablocks)
      : storage(HeapSpace::storage_words(segments, portion_vablocks)),
        space(storage.data(), storage.size(), segments, portion_vablocks) {}
  std::vector<std::uint64_t> storage;
  HeapSpace space;
};

/// The placement rules by brute force over 64 KB blocks (true = reserved): under 2 MB, the
/// leftmost aligned run of 2^(h+1) blocks in the PortionSpace (h the warptree height, the run
/// at most a VABlock), else the leftmost run of whole free segments after it.
struct Model {
  std::uint64_t portion_blocks;
  std::vector<bool> reserved;
  std::map<std::uint64_t, std::uint64_t> live;  // offset -> reserved bytes

  [[nodiscard]] bool run_free(std::uint64_t first, std::uint64_t count) const {
    for (std::uint64_t b = first; b < first + count; ++b)
      if (reserved[b]) return false;
    return true;
  }
  HeapRegion allocate(std::uint64_t bytes) {
    if (bytes == 0 || bytes > reserved.size() * basic_block_bytes) return {no_offset, 0};
    if (bytes < vablock_bytes) {
      const std::uint64_t run = std::uint64_t{1} << PortionTree::reserved_height(PortionTree::warptree_height(bytes));
      for (std::uint64_t first = 0; first + run <= portion_blocks; first += run)
        if (run_free(first, run)) return take(first, run);
    }
    const std::uint64_t count = (bytes + vablock_bytes - 1) / vablock_bytes * blocks_per_segment;
    for (std::uint64_t first = portion_blocks; first + count <= reserved.size(); first += blocks_per_segment)
      if (run_free(first, count)) return take(first, count);
    return {no_offset, 0};
  }
  HeapRegion take(std::uint64_t first, std::uint64_t count) {
    for (std::uint64_t b = first; b < first + count; ++b) reserved[b] = true;
    live[first * basic_block_bytes] = count * basic_block_bytes;
    return {first * basic_block_bytes, count * basic_block_bytes};
  }
  std::uint64_t release(std::uint64_t offset) {
    const auto it = live.find(offset);
    if (it == live.end()) return 0;
    const std::uint64_t bytes = it->second;
    for (std::uint64_t b = offset / basic_block_bytes; b < (offset + bytes) / basic_block_bytes; ++b) reserved[b] = false;
    live.erase(it);
    return bytes;
  }
  [[nodiscard]] std::uint64_t reserved_bytes() const {
    std::uint64_t n = 0;
    for (const auto& [offset, bytes] : live) n += bytes;
    return n;
  }
};

TEST(HeapSpace, SmallRegionsAreWarptreesLargeOnesWholeSegments) {
  Space s(8, 2);
  EXPECT_EQ(s.space.capacity_bytes(), 16 * mb);
  EXPECT_EQ(s.space.portion_bytes(), 4 * mb);
  const HeapRegion small = s.space.allocate(100 * kb);  // a 128 KB warptree, 256 KB reserved
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small.offset, 0u);
  EXPECT_EQ(small.reserved_bytes, 256 * kb);
  const HeapRegion large = s.space.allocate(3 * mb);  // two segments after the PortionSpace
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(large.offset, 4 * mb);
  EXPECT_EQ(large.reserved_bytes, 4 * mb);
  EXPECT_EQ(s.space.reserved_bytes(), 256 * kb + 4 * mb);
  EXPECT_EQ(s.space.release(large.offset), 4 * mb);
  EXPECT_EQ(s.space.release(large.offset), 0u) << "a second release of the same region";
  EXPECT_EQ(s.space.release(small.offset + basic_block_bytes), 0u) << "no region starts there";
  EXPECT_EQ(s.space.release(small.offset), 256 * kb);
  EXPECT_EQ(s.space.reserved_bytes(), 0u);
}

TEST(HeapSpace, FullPortionSpaceFallsBackToSegmentsThenFails) {
  Space s(3, 1);  // one VABlock of portions, two segments
  std::vector<HeapRegion> regions;
  for (int i = 0; i < 3; ++i) regions.push_back(s.space.allocate(1 * mb));  // reserved: 2 MB each
  EXPECT_EQ(regions[0].offset, 0u);
  EXPECT_EQ(regions[1].offset, 2 * mb);
  EXPECT_EQ(regions[2].offset, 4 * mb);
  EXPECT_FALSE(s.space.allocate(1).ok());
  EXPECT_FALSE(s.space.allocate(7 * mb).ok()) << "more than the capacity";
  EXPECT_FALSE(s.space.allocate(0).ok());
  EXPECT_EQ(s.space.release(regions[1].offset), 2 * mb);
  EXPECT_EQ(s.space.allocate(64 * kb).offset, 2 * mb) << "the freed segment is reused";
}

TEST(HeapSpace, InvalidShapesServeNothing) {
  std::vector<std::uint64_t> storage(HeapSpace::storage_words(4, 2));
  HeapSpace too_many_portions(storage.data(), storage.size(), 1, 2);
  EXPECT_FALSE(too_many_portions.allocate(64 * kb).ok());
  HeapSpace too_little_storage(storage.data(), 3, 4, 2);
  EXPECT_FALSE(too_little_storage.allocate(64 * kb).ok());
  EXPECT_EQ(too_little_storage.release(0), 0u);
}

/// Random sequences against the model: same offsets, same reservations, no overlap.
TEST(HeapSpace, RandomAllocFreeMatchesTheModel) {
  for (const auto& [segments, portions] : {std::pair{16u, 4u}, std::pair{40u, 0u}, std::pair{33u, 32u}}) {
    Space s(segments, portions);
    Model model{std::uint64_t{portions} * blocks_per_segment,
                std::vector<bool>(std::uint64_t{segments} * blocks_per_segment, false), {}};
    std::mt19937_64 rng(segments * 131 + portions);
    std::vector<std::uint64_t> live;
    for (int step = 0; step < 20000; ++step) {
      if (!live.empty() && rng() % 100 < 45) {
        const std::size_t pick = rng() % live.size();
        const std::uint64_t offset = live[pick];
        live[pick] = live.back();
        live.pop_back();
        ASSERT_EQ(s.space.release(offset), model.release(offset)) << "step " << step;
        continue;
      }
      // Mostly small regions, some of several segments.
      const std::uint64_t bytes = rng() % 8 == 0 ? 1 + rng() % (6 * mb) : 1 + rng() % (2 * mb - 1);
      const HeapRegion got = s.space.allocate(bytes);
      const HeapRegion want = model.allocate(bytes);
      ASSERT_EQ(got.offset, want.offset) << "step " << step << ", " << bytes << " B";
      ASSERT_EQ(got.reserved_bytes, want.reserved_bytes);
      if (got.ok()) {
        EXPECT_GE(got.reserved_bytes, bytes);
        live.push_back(got.offset);
      }
      ASSERT_EQ(s.space.reserved_bytes(), model.reserved_bytes());
    }
    for (const std::uint64_t offset : live) EXPECT_EQ(s.space.release(offset), model.release(offset));
    EXPECT_EQ(s.space.reserved_bytes(), 0u);
    // Everything is free again: the segments past the PortionSpace as one run, and the
    // PortionSpace as whole-VABlock warptrees.
    EXPECT_EQ(s.space.allocate(s.space.capacity_bytes() - s.space.portion_bytes()).offset, s.space.portion_bytes());
    for (std::uint64_t v = 0; v < portions; ++v) EXPECT_EQ(s.space.allocate(vablock_bytes - 1).offset, v * vablock_bytes);
  }
}

TEST(HeapProtocol, RegionWordsCatchDoubleFreesAndForeignTags) {
  const std::uint64_t word = heap_region_word(7, 3);
  std::uint64_t next = 0;
  EXPECT_EQ(release_lane(word, 7, 1, next), LaneRelease::released);
  EXPECT_EQ(release_lane(next, 7, 1, next), LaneRelease::not_live) << "lane 1 again";
  EXPECT_EQ(release_lane(next, 8, 0, next), LaneRelease::not_live) << "another region's tag";
  EXPECT_EQ(release_lane(next, 7, 3, next), LaneRelease::not_live) << "a lane the region does not have";
  EXPECT_EQ(release_lane(next, 7, 0, next), LaneRelease::released);
  EXPECT_EQ(release_lane(next, 7, 2, next), LaneRelease::region_free);
  EXPECT_EQ(release_lane(next, 7, 2, next), LaneRelease::not_live);
  EXPECT_EQ(release_lane(0, 0, 0, next), LaneRelease::not_live) << "a word never live";
  EXPECT_EQ(heap_region_word(1, 32) & 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(heap_slot_header(5, heap_slot_posted), (5u << 2) | 1u);
}

TEST(HeapProtocol, ALanesMaskFreesOnlyTheLiveParts) {
  const std::uint64_t word = heap_region_word(7, 4);
  std::uint64_t next = 0;
  EXPECT_EQ(release_lanes(word, 7, 0b0110u, next), 0b0110u);
  EXPECT_EQ(next, heap_region_word(7, 4) & ~std::uint64_t{0b0110u});
  const std::uint64_t after = next;
  EXPECT_EQ(release_lanes(after, 7, 0b0011u, next), 0b0001u) << "lane 1 again is not freed";
  EXPECT_EQ(next & 0xffffffffu, 0b1000u);
  EXPECT_EQ(release_lanes(next, 8, 0b1000u, next), 0u) << "another region's tag";
  EXPECT_EQ(next & 0xffffffffu, 0b1000u) << "and nothing changed";
  EXPECT_EQ(release_lanes(next, 7, 0xffffffffu, next), 0b1000u);
  EXPECT_EQ(next & 0xffffffffu, 0u) << "the region is free";
  EXPECT_EQ(release_lanes(0, 0, 1u, next), 0u) << "a word never live";
  EXPECT_EQ(next, 0u);
}

/// The lanes of one request never share a byte and stay inside the region, in both layouts.
TEST(HeapPtr, LanesOfARegionPartitionIt) {
  for (const HeapLayout layout : {HeapLayout::contiguous, HeapLayout::aligned}) {
    for (const LaneOrder order : {LaneOrder::lane_id, LaneOrder::prefetch_first}) {
      for (const std::uint32_t lanes : {1u, 5u, 32u}) {
        for (const std::uint64_t lane_bytes : {std::uint64_t{16}, std::uint64_t{4080}, 70 * kb + 48, 200 * kb}) {
          const std::uint64_t region = 3 * basic_block_bytes;
          const std::uint64_t region_bytes = heap_region_bytes(layout, order, lanes, lane_bytes);
          std::set<std::uint64_t> seen;
          for (std::uint32_t lane = 0; lane < lanes; ++lane) {
            const heap_ptr p(region, lane_bytes, 9, lane, lanes, layout, order);
            ASSERT_EQ(p.size(), lane_bytes);
            EXPECT_EQ(p.region_bytes(), region_bytes);
            for (std::uint64_t b = 0; b < lane_bytes; b += std::max<std::uint64_t>(1, lane_bytes / 97)) {
              const std::uint64_t at = p.offset_of(b);
              ASSERT_GE(at, region);
              ASSERT_LT(at, region + region_bytes);
              ASSERT_TRUE(seen.insert(at).second) << "two lanes share heap byte " << at;
              // The run it promises is consecutive in the heap.
              const std::uint64_t run = p.contiguous_bytes(b);
              ASSERT_GE(run, 1u);
              ASSERT_EQ(p.offset_of(b + run - 1), at + run - 1);
            }
            EXPECT_EQ(p.offset_of(lane_bytes), no_offset);
            EXPECT_EQ(p.contiguous_bytes(lane_bytes), 0u);
          }
        }
      }
    }
  }
  EXPECT_TRUE(heap_ptr{}.is_null());
  EXPECT_EQ(heap_ptr{}.offset_of(0), no_offset);
}

}  // namespace
}  // namespace warpvm::detail
