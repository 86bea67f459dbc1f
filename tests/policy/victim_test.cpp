#include "page_cache_model.hpp"

#include <gtest/gtest.h>

namespace warpvm::detail {
namespace {

using sim::PageCacheModel;

void touch(PageCacheModel& m, std::uint64_t page, bool write = false) {
  m.acquire(0, page, write);
  m.release(0, page);
}

TEST(Victim, FreeFramesAreTakenInHandOrder) {
  PageCacheModel c(4, EvictionPolicy::fifo);
  c.add_object(16);
  for (std::uint32_t expected = 0; expected < 4; ++expected) {
    const VictimSearch s = c.search_victim(64);
    ASSERT_TRUE(s.found);
    EXPECT_EQ(s.victim.frame, expected);
    EXPECT_FALSE(s.victim.evicts());
  }
}

TEST(Victim, LockedFramesAreSkipped) {
  PageCacheModel c(4, EvictionPolicy::fifo);
  c.add_object(16);
  ASSERT_TRUE(c.table().try_lock(0));
  const VictimSearch s = c.search_victim(64);
  ASSERT_TRUE(s.found);
  EXPECT_EQ(s.victim.frame, 1u);
}

TEST(Victim, FifoEvictsInLoadOrderAndSkipsHeldPages) {
  PageCacheModel c(3, EvictionPolicy::fifo);
  c.add_object(16);
  for (std::uint32_t p = 0; p < 3; ++p) touch(c, p);
  c.acquire(0, 0, false);  // page 0 (frame 0) is held: FIFO must pass over it
  const VictimSearch s = c.search_victim(64);
  ASSERT_TRUE(s.found);
  EXPECT_EQ(s.victim.frame, 1u);
  EXPECT_EQ(key_page(s.victim.evicted_key), 1u);
  EXPECT_TRUE(page_word::is_busy(c.page_word(0, 1)));
}

TEST(Victim, ClockGivesReferencedFramesASecondChance) {
  PageCacheModel c(3, EvictionPolicy::clock);
  c.add_object(16);
  for (std::uint32_t p = 0; p < 3; ++p) touch(c, p);
  // Frames 1 and 2 were used again since loading; the hand clears them, then takes frame 0.
  c.table().set_referenced(1, true);
  c.table().set_referenced(2, true);
  c.set_hand(1);
  const VictimSearch s = c.search_victim(64);
  ASSERT_TRUE(s.found);
  EXPECT_EQ(s.victim.frame, 0u);
  EXPECT_FALSE(c.table().is_referenced(1));
  EXPECT_FALSE(c.table().is_referenced(2));
}

TEST(Victim, PagesEarnTheirSecondChanceByReuse) {
  PageCacheModel c(2, EvictionPolicy::clock);
  c.add_object(16);
  touch(c, 0);  // loaded: not referenced yet
  EXPECT_FALSE(c.table().is_referenced(0));
  touch(c, 0);  // used again: referenced
  EXPECT_TRUE(c.table().is_referenced(0));
}

TEST(Victim, HotCacheIsSweptInBatches) {
  constexpr std::uint32_t frames = 1000;
  PageCacheModel c(frames, EvictionPolicy::clock);
  c.add_object(2 * frames);
  for (std::uint32_t p = 0; p < frames; ++p) {
    touch(c, p);
    c.table().set_referenced(p, true);
  }
  c.set_hand(0);
  const VictimSearch s = c.search_victim(4 * frames);
  ASSERT_TRUE(s.found);
  EXPECT_EQ(s.victim.frame, 0u);  // every bit cleared once, then the first frame is taken
  EXPECT_LE(c.hand(), std::uint64_t{frames} + sweep_batch);
  for (std::uint32_t f = 1; f < frames; ++f) EXPECT_FALSE(c.table().is_referenced(f)) << f;
}

TEST(Victim, AllHeldMeansNotFoundWithinBudget) {
  PageCacheModel c(2, EvictionPolicy::clock);
  c.add_object(16);
  c.acquire(0, 0, false);
  c.acquire(0, 1, false);
  const VictimSearch s = c.search_victim(16);
  EXPECT_FALSE(s.found);
  EXPECT_FALSE(c.lock_held(0) || c.lock_held(1));  // a failed search leaves no frame locked
}

TEST(Victim, FreeOnlySearchNeverEvicts) {
  // Frames 0-3 hold pages nobody holds, frame 4 is free, and the hand points at frame 0: an
  // ordinary search evicts frame 0, a free-only search (nothing may be evicted) takes frame 4.
  PageCacheModel c(5, EvictionPolicy::fifo);
  c.add_object(16);
  for (std::uint32_t p = 0; p < 4; ++p) touch(c, p);
  c.set_hand(0);
  const VictimSearch free_only = c.search_victim(64, /*free_only=*/true);
  ASSERT_TRUE(free_only.found);
  EXPECT_EQ(free_only.victim.frame, 4u);
  EXPECT_FALSE(free_only.victim.evicts());
  for (std::uint32_t p = 0; p < 4; ++p) EXPECT_TRUE(page_word::is_resident(c.page_word(0, p)));
  c.table().unlock(4);
  c.set_hand(0);
  const VictimSearch ordinary = c.search_victim(64);
  ASSERT_TRUE(ordinary.found);
  EXPECT_EQ(ordinary.victim.frame, 0u);
  EXPECT_TRUE(ordinary.victim.evicts());
}

TEST(Victim, FreeOnlySearchWithNoFreeFrameFindsNothing) {
  PageCacheModel c(2, EvictionPolicy::clock);
  c.add_object(4);
  touch(c, 0);
  touch(c, 1);
  EXPECT_FALSE(c.search_victim(16, /*free_only=*/true).found);
}

TEST(Victim, DirtyVictimIsReported) {
  PageCacheModel c(1, EvictionPolicy::fifo);
  c.add_object(4);
  touch(c, 2, /*write=*/true);
  const VictimSearch s = c.search_victim(64);
  ASSERT_TRUE(s.found);
  EXPECT_TRUE(s.victim.dirty);
  EXPECT_EQ(key_page(s.victim.evicted_key), 2u);
}

TEST(Victim, CountsMatchAStreamingPass) {
  PageCacheModel c(8, EvictionPolicy::clock);
  c.add_object(64);
  for (std::uint32_t p = 0; p < 64; ++p) touch(c, p, p % 2 == 0);
  c.flush();
  const sim::ModelCounts n = c.counts();
  EXPECT_EQ(n.misses, 64u);
  EXPECT_EQ(n.evictions, 56u);
  EXPECT_EQ(n.writebacks, 32u);
}

TEST(Victim, ProgressBound) {
  EXPECT_EQ(frames_required(1024, 4), 4096u);
  EXPECT_EQ(frames_required(0, 4), 0u);
}

}  // namespace
}  // namespace warpvm::detail
