// The heap's space (OR tree over 2 MB segments + PortionTree for regions under 2 MB, grown by
// arenas): random alloc/free sequences against a brute-force model of the same placement rules,
// and the protocol's pure pieces: region words (double free, foreign pointers) and heap_ptr
// offsets.

#include "warpvm/detail/alloc/heap_protocol.hpp"
#include "warpvm/detail/alloc/heap_ptr.hpp"
#include "warpvm/detail/alloc/heap_space.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace warpvm::detail {
namespace {

constexpr std::uint64_t kb = 1024;
constexpr std::uint64_t mb = 1024 * kb;
constexpr std::uint64_t blocks_per_segment = vablock_bytes / basic_block_bytes;

struct Space {
  Space(std::uint32_t segments, std::uint32_t portion_vablocks)
      : storage(HeapSpace::storage_words(segments)),
        space(storage.data(), storage.size(), segments, portion_vablocks) {}
  std::vector<std::uint64_t> storage;
  HeapSpace space;
};

/// The placement rules by brute force over 64 KB blocks (true = reserved): under 2 MB, the
/// leftmost aligned run of 2^(h+1) blocks in the PortionSpace or an arena (h the warptree
/// height, the run at most a VABlock), else in a new arena, the leftmost free segment past the
/// PortionSpace; 2 MB and more, the leftmost run of free segments past the PortionSpace that
/// are no arenas. An arena whose last reservation goes is a free segment again.
struct Model {
  std::uint64_t portion_blocks;
  std::vector<bool> reserved;
  std::map<std::uint64_t, std::uint64_t> live;  // offset -> reserved bytes
  std::set<std::uint64_t> arenas;               // segments lent to the PortionTree

  [[nodiscard]] bool run_free(std::uint64_t first, std::uint64_t count) const {
    for (std::uint64_t b = first; b < first + count; ++b)
      if (reserved[b]) return false;
    return true;
  }
  [[nodiscard]] bool holds_portions(std::uint64_t block) const {
    return block < portion_blocks || arenas.contains(block / blocks_per_segment);
  }
  HeapRegion allocate(std::uint64_t bytes) {
    if (bytes == 0 || bytes > reserved.size() * basic_block_bytes) return {no_offset, 0};
    if (bytes < vablock_bytes) {
      const std::uint64_t run = std::uint64_t{1} << PortionTree::reserved_height(PortionTree::warptree_height(bytes));
      for (std::uint64_t first = 0; first + run <= reserved.size(); first += run)
        if (holds_portions(first) && run_free(first, run)) return take(first, run);
      for (std::uint64_t first = portion_blocks; first < reserved.size(); first += blocks_per_segment) {
        if (!holds_portions(first) && run_free(first, blocks_per_segment)) {
          arenas.insert(first / blocks_per_segment);
          return take(first, run);
        }
      }
      return {no_offset, 0};
    }
    const std::uint64_t count = (bytes + vablock_bytes - 1) / vablock_bytes * blocks_per_segment;
    for (std::uint64_t first = portion_blocks; first + count <= reserved.size(); first += blocks_per_segment) {
      bool no_arena = true;
      for (std::uint64_t b = first; b < first + count; b += blocks_per_segment) no_arena = no_arena && !holds_portions(b);
      if (no_arena && run_free(first, count)) return take(first, count);
    }
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
    const std::uint64_t segment = offset / vablock_bytes;
    if (arenas.contains(segment) && run_free(segment * blocks_per_segment, blocks_per_segment)) arenas.erase(segment);
    return bytes;
  }
  [[nodiscard]] std::uint64_t reserved_bytes() const {
    std::uint64_t n = 0;
    for (const auto& [offset, bytes] : live) n += bytes;
    return n;
  }
  /// Segments past the PortionSpace that are neither arenas nor reserved.
  [[nodiscard]] std::uint64_t free_segments() const {
    std::uint64_t n = 0;
    for (std::uint64_t first = portion_blocks; first < reserved.size(); first += blocks_per_segment)
      n += !holds_portions(first) && run_free(first, blocks_per_segment) ? 1 : 0;
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

TEST(HeapSpace, FullPortionSpaceGrowsIntoSegmentsThenFails) {
  Space s(3, 1);  // one VABlock of portions, two segments
  std::vector<HeapRegion> regions;
  for (int i = 0; i < 3; ++i) regions.push_back(s.space.allocate(1 * mb));  // reserved: 2 MB each
  EXPECT_EQ(regions[0].offset, 0u);
  EXPECT_EQ(regions[1].offset, 2 * mb);
  EXPECT_EQ(regions[2].offset, 4 * mb);
  EXPECT_EQ(s.space.arena_bytes(), 4 * mb);
  EXPECT_FALSE(s.space.allocate(1).ok());
  EXPECT_FALSE(s.space.allocate(7 * mb).ok()) << "more than the capacity";
  EXPECT_FALSE(s.space.allocate(0).ok());
  EXPECT_EQ(s.space.release(regions[1].offset), 2 * mb);
  EXPECT_EQ(s.space.arena_bytes(), 2 * mb) << "the emptied arena went back";
  EXPECT_EQ(s.space.allocate(64 * kb).offset, 2 * mb) << "the freed segment is reused";
}

/// Issue #4: a region under 2 MB that finds the PortionSpace full no longer keeps a whole
/// segment; it opens an arena that later small regions share, and the arena goes back to the
/// OR tree, for regions of any size, once its last region is freed.
TEST(HeapSpace, FullPortionSpacePlacesSmallRegionsInArenasAndGivesThemBack) {
  Space s(6, 1);
  std::vector<std::uint64_t> in_portion_space;
  for (std::uint64_t i = 0; i < blocks_per_segment / 2; ++i) {  // 16 warptrees of 64 KB, 128 KB reserved each
    const HeapRegion r = s.space.allocate(64 * kb);
    ASSERT_EQ(r.offset, i * 128 * kb);
    in_portion_space.push_back(r.offset);
  }
  EXPECT_EQ(s.space.arena_bytes(), 0u);
  const HeapRegion first = s.space.allocate(64 * kb);
  EXPECT_EQ(first.offset, 2 * mb) << "the leftmost free segment, as an arena";
  EXPECT_EQ(first.reserved_bytes, 128 * kb) << "a warptree's reservation, not a whole segment";
  const HeapRegion second = s.space.allocate(200 * kb);  // a 256 KB warptree, 512 KB reserved
  EXPECT_EQ(second.offset, 2 * mb + 512 * kb) << "in the same arena, Eq. 3's aligned subtree";
  EXPECT_EQ(second.reserved_bytes, 512 * kb);
  EXPECT_EQ(s.space.arena_bytes(), 2 * mb);
  const HeapRegion large = s.space.allocate(4 * mb);
  EXPECT_EQ(large.offset, 4 * mb) << "regions of segments pass the arena by";
  EXPECT_EQ(s.space.reserved_bytes(), 2 * mb + 640 * kb + 4 * mb);
  EXPECT_FALSE(s.space.allocate(6 * mb).ok()) << "one segment free";

  // A PortionSpace slot freed is used before any arena.
  EXPECT_EQ(s.space.release(in_portion_space[3]), 128 * kb);
  EXPECT_EQ(s.space.allocate(64 * kb).offset, in_portion_space[3]);

  EXPECT_EQ(s.space.release(first.offset + basic_block_bytes), 0u) << "no region starts there";
  EXPECT_EQ(s.space.release(first.offset), 128 * kb);
  EXPECT_EQ(s.space.release(first.offset), 0u) << "a second release of the same region";
  EXPECT_EQ(s.space.arena_bytes(), 2 * mb) << "the arena still holds a region";
  EXPECT_EQ(s.space.release(second.offset), 512 * kb);
  EXPECT_EQ(s.space.arena_bytes(), 0u) << "empty, the arena went back";
  EXPECT_EQ(s.space.release(second.offset), 0u);
  EXPECT_EQ(s.space.allocate(2 * mb).offset, 2 * mb) << "its segment serves regions of segments again";
  EXPECT_EQ(s.space.allocate(4 * mb).offset, 8 * mb);
  EXPECT_EQ(s.space.reserved_bytes(), 2 * mb + 4 * mb + 2 * mb + 4 * mb);
  EXPECT_FALSE(s.space.allocate(64 * kb).ok()) << "no free segment for an arena";
  EXPECT_EQ(s.space.arena_bytes(), 0u) << "and the failed request kept none";
}

TEST(HeapSpace, InvalidShapesServeNothing) {
  std::vector<std::uint64_t> storage(HeapSpace::storage_words(4));
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
                std::vector<bool>(std::uint64_t{segments} * blocks_per_segment, false), {}, {}};
    std::mt19937_64 rng(segments * 131 + portions);
    std::vector<std::uint64_t> live;
    std::uint64_t peak_arenas = 0;
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
      ASSERT_EQ(s.space.arena_bytes(), model.arenas.size() * vablock_bytes) << "step " << step;
      ASSERT_EQ(s.space.free_segment_bytes(), model.free_segments() * vablock_bytes) << "step " << step;
      peak_arenas = std::max<std::uint64_t>(peak_arenas, model.arenas.size());
    }
    EXPECT_GT(peak_arenas, (segments - portions) / 4) << "the sequence grew the PortionSpace";
    for (const std::uint64_t offset : live) EXPECT_EQ(s.space.release(offset), model.release(offset));
    EXPECT_EQ(s.space.reserved_bytes(), 0u);
    EXPECT_EQ(s.space.arena_bytes(), 0u);
    // Everything is free again: the segments past the PortionSpace as one run, and the
    // PortionSpace as whole-VABlock warptrees.
    EXPECT_EQ(s.space.allocate(s.space.capacity_bytes() - s.space.portion_bytes()).offset, s.space.portion_bytes());
    for (std::uint64_t v = 0; v < portions; ++v) EXPECT_EQ(s.space.allocate(vablock_bytes - 1).offset, v * vablock_bytes);
  }
}

constexpr std::uint64_t gb = 1024 * mb;

TEST(HeapShares, TheSmallAreaComesOutOfThePortionSpaceAndLargeRegionsAlike) {
  const auto segments_in = [](std::uint64_t bytes) { return bytes / vablock_bytes * vablock_bytes; };
  for (const std::uint64_t capacity : {8 * mb, 64 * mb, 4 * gb, 8 * gb, 16 * gb, 32 * gb, 64 * gb, 1024 * gb}) {
    SCOPED_TRACE(std::to_string(capacity / mb) + " MiB");
    const HeapShares shares = heap_shares(capacity, 0, true, 0);
    EXPECT_EQ(shares.small_bytes, std::min(capacity / 4, default_small_limit_bytes));
    EXPECT_EQ(shares.portion_bytes, segments_in(std::min((capacity - shares.small_bytes) / 2, paper_portion_bytes)));
    const std::uint64_t for_large_regions = capacity - shares.portion_bytes - shares.small_bytes;
    EXPECT_GE(for_large_regions, (capacity - shares.small_bytes) / 2);
    EXPECT_GE(8 * for_large_regions, 3 * capacity);
    const HeapShares host_only = heap_shares(capacity, 0, false, 0);
    EXPECT_EQ(host_only.small_bytes, 0u);
    EXPECT_EQ(host_only.portion_bytes, segments_in(std::min(capacity / 2, paper_portion_bytes)))
        << "as before the fast path";
  }
  // 8 GiB: a 2 GiB small area, and 3 GiB each for the PortionSpace and the regions of segments.
  EXPECT_EQ(heap_shares(8 * gb, 0, true, 0).portion_bytes, 3 * gb);
  // Explicit sizes are kept, in whole segments.
  EXPECT_EQ(heap_shares(8 * mb, 0, true, 2 * mb).portion_bytes, 2 * mb) << "3 MiB, rounded down";
  EXPECT_EQ(heap_shares(8 * gb, 0, true, 6 * gb).portion_bytes, 1 * gb);
  EXPECT_EQ(heap_shares(8 * gb, 0, true, 16 * mb).portion_bytes, 4 * gb - 8 * mb);
  EXPECT_EQ(heap_shares(8 * gb, 0, true, 3 * mb).small_bytes, 2 * mb);
  EXPECT_EQ(heap_shares(8 * mb, 0, true, 16 * mb).portion_bytes, 0u)
      << "a small area past the capacity (Heap refuses it)";
  EXPECT_EQ(heap_shares(8 * gb, 6 * gb, true, 0).portion_bytes, 6 * gb);
  EXPECT_EQ(heap_shares(8 * gb, 16 * gb, true, 0).portion_bytes, 8 * gb) << "at most the capacity";
  EXPECT_EQ(heap_shares(8 * gb, 0, false, 16 * mb).small_bytes, 0u) << "no small area without the fast path";
}

/// The requests the GPU test HeapTest.DivergentCallersAndLargeRegions posts for its host path,
/// one kernel of 3000 threads: per warp, lanes t % 6 == 1 ask 3-5 MB and lanes t % 3 == 2 ask
/// 4 KB-80000 B (those of at most 8 KB go to the fast path); each warp's lanes of one size class
/// (bit width of their 16-byte units) share one region of lanes x their largest request.
std::vector<std::uint64_t> divergent_region_requests(HeapLayout layout, std::mt19937_64& rng) {
  constexpr std::uint64_t threads = 3000;
  std::vector<std::uint64_t> regions;
  for (std::uint64_t warp = 0; warp < threads; warp += warp_lanes) {
    std::map<unsigned, std::pair<std::uint32_t, std::uint64_t>> groups;  // class -> lanes, largest units
    for (std::uint64_t t = warp; t < std::min(warp + warp_lanes, threads); ++t) {
      std::uint64_t bytes = 0;
      if (t % 6 == 1) bytes = (3 * mb) + rng() % (2 * mb + 1);
      if (t % 3 == 2) bytes = 4096 + rng() % (80000 - 4096 + 1);
      if (bytes <= small_max_bytes) continue;
      const std::uint64_t units = (bytes + heap_unit_bytes - 1) / heap_unit_bytes;
      auto& [lanes, largest] = groups[static_cast<unsigned>(std::bit_width(units - 1))];
      ++lanes;
      largest = std::max(largest, units);
    }
    for (const auto& [size_class, group] : groups)
      regions.push_back(heap_region_bytes(layout, LaneOrder::lane_id, group.first, group.second * heap_unit_bytes));
  }
  return regions;
}

/// Issue #4: with an 8 GiB heap the default small area (2 GiB) came out of the 4 GiB that the
/// default PortionSpace left to regions of 2 MB and more, and the test kernel's ~2.3 GiB of
/// 3-5 MB regions found only 2 GiB: ~50 lanes a round refused. The Heap's space, made and
/// reserved as Heap does it (3 GiB of segments left), now serves every round, and gets
/// everything back between them.
TEST(HeapShares, TheDefaultSmallAreaLeavesRoomForLargeRegions) {
  const std::uint64_t capacity = 8 * gb;
  const HeapShares shares = heap_shares(capacity, 0, true, 0);
  const auto segments = static_cast<std::uint32_t>(capacity / vablock_bytes);
  for (const HeapLayout layout : {HeapLayout::contiguous, HeapLayout::aligned}) {
    Space s(segments, static_cast<std::uint32_t>(shares.portion_bytes / vablock_bytes));
    ASSERT_TRUE(s.space.allocate(shares.small_bytes).ok()) << "the small area";
    std::mt19937_64 rng(static_cast<std::uint64_t>(layout) + 11);
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      const std::vector<std::uint64_t> requests = divergent_region_requests(layout, rng);
      std::uint64_t large_segments = 0;
      for (const std::uint64_t bytes : requests)
        if (bytes >= vablock_bytes) large_segments += (bytes + vablock_bytes - 1) / vablock_bytes;
      // The old split's room (8 - 4 - 2 GiB) was too small for this; ours is not.
      EXPECT_GT(large_segments * vablock_bytes, capacity - paper_portion_bytes - shares.small_bytes);
      std::vector<std::uint64_t> live;
      for (const std::uint64_t bytes : requests) {
        const HeapRegion region = s.space.allocate(bytes);
        ASSERT_TRUE(region.ok()) << bytes << " B, after " << live.size() << " regions";
        live.push_back(region.offset);
      }
      for (const std::uint64_t offset : live) EXPECT_NE(s.space.release(offset), 0u);
      EXPECT_EQ(s.space.reserved_bytes(), shares.small_bytes) << "every region went back";
    }
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
