// The shadow map of flat addresses (OASIS-InMem's, detail/multi_gpu/shadow_map.hpp): addresses
// handed out in whole segments after every earlier object's and never reused, every byte of an
// object finding it, freed objects and the gaps finding no object, leaves made only where
// objects lie, and a clear error when the addresses are spent.

#include "warpvm/detail/multi_gpu/shadow_map.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::detail::mg {
namespace {

constexpr unsigned page_shift = 12;
constexpr std::uint64_t page = std::uint64_t{1} << page_shift;

TEST(ShadowMap, EveryByteOfAnObjectFindsItAndNothingElseDoes) {
  ShadowMap map(std::uint64_t{1} << 40, page_shift);
  const ShadowMapView view = map.view();
  EXPECT_EQ(shadow_lookup(view, 0), no_object) << "address 0 is no object's";
  const std::uint64_t a = map.assign(7, 10 * page + 1);  // 11 segments, the last one partly used
  const std::uint64_t b = map.assign(3, 1);
  EXPECT_EQ(a, page) << "the first object starts one segment in";
  EXPECT_EQ(b, a + 11 * page) << "whole segments, one object after another";
  for (const std::uint64_t at : {a, a + 1, a + 5 * page + 17, a + 10 * page, a + 11 * page - 1})
    EXPECT_EQ(shadow_lookup(view, at), 7u) << at;
  EXPECT_EQ(shadow_lookup(view, b), 3u);
  EXPECT_EQ(shadow_lookup(view, b + page - 1), 3u);
  EXPECT_EQ(shadow_lookup(view, b + page), no_object) << "past the last object";
  EXPECT_EQ(shadow_lookup(view, ~std::uint64_t{0}), no_object) << "past the map";
}

TEST(ShadowMap, AFreedObjectsAddressesFindNoObjectAndAreNotReused) {
  ShadowMap map(std::uint64_t{1} << 30, page_shift);
  const std::uint64_t gone = map.assign(1, 3 * page);
  map.clear(gone, 3 * page);
  for (std::uint64_t at = gone; at < gone + 3 * page; at += page / 2) EXPECT_EQ(shadow_lookup(map.view(), at), no_object);
  const std::uint64_t next = map.assign(1, page);  // the same id again
  EXPECT_EQ(next, gone + 3 * page) << "a new object never takes a freed one's addresses";
  EXPECT_EQ(shadow_lookup(map.view(), gone), no_object) << "a stale address does not find the id's new object";
  EXPECT_EQ(shadow_lookup(map.view(), next), 1u);
}

TEST(ShadowMap, LeavesAreMadeOnlyWhereObjectsLieAndRangesNameTheirs) {
  ShadowMap map(std::uint64_t{1} << 40, page_shift);
  const std::uint64_t span = shadow_leaf_entries * page;  // the addresses one leaf covers
  EXPECT_EQ(map.leaf_count(), (std::uint64_t{1} << 40) / span);
  const std::uint64_t big = map.assign(0, 2 * span);  // from segment 1: touches leaves 0, 1 and 2
  const ShadowMap::LeafRange range = map.leaves_of(big, 2 * span);
  EXPECT_EQ(range.first, 0u);
  EXPECT_EQ(range.end, 3u);
  for (std::uint64_t leaf = 0; leaf < 3; ++leaf) EXPECT_EQ(map.leaf(leaf).size(), shadow_leaf_entries);
  EXPECT_TRUE(map.leaf(3).empty());
  EXPECT_EQ(shadow_lookup(map.view(), 5 * span), no_object) << "an address under no leaf";
}

TEST(ShadowMap, RandomObjectsAgreeWithAPlainList) {
  ShadowMap map(std::uint64_t{1} << 36, page_shift);
  struct Range {
    std::uint64_t base, bytes;
    std::uint32_t id;
    bool live;
  };
  std::vector<Range> ranges;
  std::mt19937_64 rng(11);
  for (std::uint32_t id = 0; id < 300; ++id) {
    const std::uint64_t bytes = 1 + rng() % (20 * page);
    ranges.push_back({map.assign(id, bytes), bytes, id, true});
    if (rng() % 3 == 0) {
      Range& r = ranges[rng() % ranges.size()];
      if (r.live) map.clear(r.base, r.bytes);
      r.live = false;
    }
  }
  for (const Range& r : ranges)
    for (const std::uint64_t at : {r.base, r.base + r.bytes / 2, r.base + r.bytes - 1})
      ASSERT_EQ(shadow_lookup(map.view(), at), r.live ? r.id : no_object) << "object " << r.id << " at " << at;
}

TEST(ShadowMap, SpentAddressesAreAClearError) {
  ShadowMap map(shadow_leaf_entries * page, page_shift);  // one leaf: 4095 segments to hand out
  (void)map.assign(0, (shadow_leaf_entries - 2) * page);
  EXPECT_NO_THROW((void)map.assign(1, page));
  try {
    (void)map.assign(2, 1);
    FAIL() << "expected the addresses to be spent";
  } catch (const std::length_error& e) {
    EXPECT_NE(std::string(e.what()).find("flat addresses are spent"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace warpvm::detail::mg
