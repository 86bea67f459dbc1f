// AlignMalloc's intra-warp rearrangement: Eq. 1-2 for the 64 KB tiles, the 2^i x 4 KB tail
// segments, the prefetch-first lane pattern, and the translation as a bijection onto the
// warp's region that keeps every tile and segment whole.

#include "warpvm/detail/alloc/warp_layout.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace warpvm::detail {
namespace {

constexpr std::uint64_t kb = 1024;
constexpr std::uint64_t tile = basic_block_bytes;

TEST(WarpLayout, TilesFollowEquationsOneAndTwo) {
  // OB = OF / 64 KB; UVM_addr = User_addr + (OB x WS + Lane_ID - OB) x 64 KB, where the
  // user's address of byte OF is base + OF for every lane.
  for (std::uint32_t ws : {1u, 7u, 32u}) {
    const WarpLayout layout(ws, 5 * tile);
    const std::uint64_t base = 0x7f0000000000;
    for (std::uint32_t lane = 0; lane < ws; ++lane)
      for (std::uint64_t of = 0; of < 5 * tile; of += 4093) {
        const std::uint64_t user = base + of;
        const std::uint64_t ob = of / tile;
        EXPECT_EQ(base + layout.offset_of(lane, of), user + (ob * ws + lane - ob) * tile) << lane << " " << of;
      }
  }
}

TEST(WarpLayout, HundredKilobytesPerThread) {
  // 100 KB = one tile + a 36 KB tail = 32 KB + 4 KB segments.
  const WarpLayout layout(32, 100 * kb);
  EXPECT_EQ(layout.lane_bytes(), 100 * kb);
  EXPECT_EQ(layout.full_tiles(), 1u);
  EXPECT_EQ(layout.tail_bytes(), 36 * kb);
  EXPECT_EQ(layout.region_bytes(), 32 * 100 * kb);
  EXPECT_EQ(layout.offset_of(0, 0), 0u);
  EXPECT_EQ(layout.offset_of(1, 0), 64 * kb);                    // tiles side by side: row 0
  EXPECT_EQ(layout.offset_of(0, 64 * kb), 2048 * kb);            // the row of 32 KB segments
  EXPECT_EQ(layout.offset_of(1, 64 * kb + 5), 2048 * kb + 32 * kb + 5);
  EXPECT_EQ(layout.offset_of(0, 96 * kb), 3072 * kb);            // the row of 4 KB segments
  EXPECT_EQ(layout.offset_of(31, 100 * kb - 1), layout.region_bytes() - 1);
}

TEST(WarpLayout, RequestsRoundUpToPages) {
  EXPECT_EQ(WarpLayout(32, 1).lane_bytes(), 4 * kb);
  EXPECT_EQ(WarpLayout(32, 4 * kb + 1).tail_bytes(), 8 * kb);
  const WarpLayout almost_two(4, 2 * tile - 1);  // the tail rounds up to a whole tile
  EXPECT_EQ(almost_two.full_tiles(), 2u);
  EXPECT_EQ(almost_two.tail_bytes(), 0u);
  EXPECT_EQ(WarpLayout(32, 0).region_bytes(), 0u);
}

TEST(WarpLayout, PrefetchFirstPattern) {
  // Section V-A: lanes 0, 1, 2, 4, 6, ... lead each row; 3, 5, 7, ... follow.
  std::vector<std::uint32_t> row;
  for (std::uint32_t slot = 0; slot < 32; ++slot) row.push_back(lane_at_slot(slot, 32, LaneOrder::prefetch_first));
  std::vector<std::uint32_t> expected{0, 1};
  for (std::uint32_t lane = 2; lane < 32; lane += 2) expected.push_back(lane);
  for (std::uint32_t lane = 3; lane < 32; lane += 2) expected.push_back(lane);
  EXPECT_EQ(row, expected);

  for (std::uint32_t lanes = 1; lanes <= 32; ++lanes) {
    std::vector<bool> taken(lanes, false);
    for (std::uint32_t lane = 0; lane < lanes; ++lane) {
      const std::uint32_t slot = slot_of_lane(lane, lanes, LaneOrder::prefetch_first);
      ASSERT_LT(slot, lanes) << lanes;
      ASSERT_FALSE(taken[slot]) << lanes;
      taken[slot] = true;
      ASSERT_EQ(lane_at_slot(slot, lanes, LaneOrder::prefetch_first), lane);
    }
  }
  const WarpLayout layout(32, 3 * tile, LaneOrder::prefetch_first);
  EXPECT_EQ(layout.offset_of(4, 0), 3 * tile);
  EXPECT_EQ(layout.offset_of(3, tile + 7), (32 + 17) * tile + 7);
}

/// Every byte of every lane lands on its own byte of the region, and locate undoes it.
void expect_bijection(const WarpLayout& layout) {
  std::vector<bool> hit(layout.region_bytes(), false);
  for (std::uint32_t lane = 0; lane < layout.lanes(); ++lane)
    for (std::uint64_t offset = 0; offset < layout.lane_bytes(); ++offset) {
      const std::uint64_t at = layout.offset_of(lane, offset);
      ASSERT_LT(at, layout.region_bytes());
      ASSERT_FALSE(hit[at]) << "lane " << lane << " offset " << offset;
      hit[at] = true;
      const LaneByte back = layout.locate(at);
      ASSERT_EQ(back.lane, lane);
      ASSERT_EQ(back.offset, offset);
    }
}

/// Each whole tile of a lane is one aligned 64 KB run in row `tile` of the region, and each tail
/// segment one run aligned to its size.
void expect_whole_pieces(const WarpLayout& layout) {
  const std::uint64_t row_bytes = layout.lanes() * tile;
  for (std::uint32_t lane = 0; lane < layout.lanes(); ++lane) {
    std::uint64_t piece = 0;
    for (std::uint64_t t = 0; t < layout.full_tiles(); ++t, piece += tile) {
      const std::uint64_t start = layout.offset_of(lane, piece);
      ASSERT_EQ(start % tile, 0u);
      ASSERT_EQ(start / row_bytes, t);
      ASSERT_EQ(layout.offset_of(lane, piece + tile - 1), start + tile - 1);
    }
    for (std::uint64_t segment = tile / 2; segment >= small_segment_bytes; segment /= 2) {
      if ((layout.tail_bytes() & segment) == 0) continue;
      const std::uint64_t start = layout.offset_of(lane, piece);
      ASSERT_EQ(start % segment, 0u) << segment;
      for (std::uint64_t b = 0; b < segment; b += 511) ASSERT_EQ(layout.offset_of(lane, piece + b), start + b);
      ASSERT_EQ(layout.offset_of(lane, piece + segment - 1), start + segment - 1);
      piece += segment;
    }
    ASSERT_EQ(piece, layout.lane_bytes());
  }
}

TEST(WarpLayout, TranslationIsABijectionKeepingPiecesWhole) {
  for (LaneOrder order : {LaneOrder::lane_id, LaneOrder::prefetch_first})
    for (std::uint32_t lanes : {1u, 3u, 32u})
      for (std::uint64_t bytes :
           {std::uint64_t{1}, 4 * kb, 60 * kb + 1, tile, tile + 28 * kb + 5, 3 * tile + 60 * kb}) {
        SCOPED_TRACE(testing::Message() << "lanes " << lanes << " bytes " << bytes << " order "
                                        << static_cast<int>(order));
        const WarpLayout layout(lanes, bytes, order);
        ASSERT_EQ(layout.region_bytes(), lanes * layout.lane_bytes());
        expect_bijection(layout);
        expect_whole_pieces(layout);
      }
}

TEST(WarpLayout, OutsideTheLayoutIsASentinel) {
  const WarpLayout layout(8, 100 * kb);
  EXPECT_EQ(layout.offset_of(8, 0), no_offset);
  EXPECT_EQ(layout.offset_of(0, layout.lane_bytes()), no_offset);
  EXPECT_EQ(layout.locate(layout.region_bytes()).lane, WarpLayout::no_lane);
  const WarpLayout too_big(32, WarpLayout::max_lane_bytes + 1);
  for (const WarpLayout bad : {WarpLayout(0, tile), WarpLayout(33, tile), too_big}) {
    EXPECT_EQ(bad.region_bytes(), 0u);
    EXPECT_EQ(bad.offset_of(0, 0), no_offset);
    EXPECT_EQ(bad.locate(0).lane, WarpLayout::no_lane);
  }
}

TEST(WarpLayout, UsableInConstantExpressions) {
  constexpr WarpLayout layout(32, 2 * tile);
  static_assert(layout.offset_of(1, tile) == 33 * tile);
  static_assert(layout.locate(33 * tile).lane == 1);
}

}  // namespace
}  // namespace warpvm::detail
