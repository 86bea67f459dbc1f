#include "host_cache.hpp"

#include <gtest/gtest.h>

namespace warpvm::detail {
namespace {

using testing::HostCache;

VictimSearch search(HostCache& c, std::uint32_t budget = 64) {
  return find_victim(c.table, c.policy, budget, [&](std::uint64_t k) -> std::uint32_t& { return c.word_of(k); });
}

TEST(Victim, FreeFramesAreTakenInHandOrder) {
  HostCache c(4, 16, 1, EvictionPolicy::fifo);
  for (std::uint32_t expected = 0; expected < 4; ++expected) {
    const VictimSearch s = search(c);
    ASSERT_TRUE(s.found);
    EXPECT_EQ(s.victim.frame, expected);
    EXPECT_FALSE(s.victim.evicts());
  }
}

TEST(Victim, LockedFramesAreSkipped) {
  HostCache c(4, 16, 1, EvictionPolicy::fifo);
  ASSERT_TRUE(c.table.try_lock(0));
  const VictimSearch s = search(c);
  ASSERT_TRUE(s.found);
  EXPECT_EQ(s.victim.frame, 1u);
}

TEST(Victim, FifoEvictsInLoadOrderAndSkipsHeldPages) {
  HostCache c(3, 16, 1, EvictionPolicy::fifo);
  for (std::uint32_t p = 0; p < 3; ++p) {
    c.acquire(p, false);
    c.release(p);
  }
  c.acquire(0, false);  // page 0 (frame 0) is held: FIFO must pass over it
  const VictimSearch s = search(c);
  ASSERT_TRUE(s.found);
  EXPECT_EQ(s.victim.frame, 1u);
  EXPECT_EQ(key_page(s.victim.evicted_key), 1u);
  EXPECT_TRUE(page_word::is_busy(c.page_state[1]));
}

TEST(Victim, ClockGivesReferencedFramesASecondChance) {
  HostCache c(3, 16, 1, EvictionPolicy::clock);
  for (std::uint32_t p = 0; p < 3; ++p) {
    c.acquire(p, false);
    c.release(p);
  }
  // Frames 1 and 2 were used again since loading; the hand clears them, then takes frame 0.
  c.table.set_referenced(0, false);
  c.table.set_referenced(1, true);
  c.table.set_referenced(2, true);
  c.hand = 1;
  const VictimSearch s = search(c);
  ASSERT_TRUE(s.found);
  EXPECT_EQ(s.victim.frame, 0u);
  EXPECT_FALSE(c.table.is_referenced(1));
  EXPECT_FALSE(c.table.is_referenced(2));
}

TEST(Victim, PagesEarnTheirSecondChanceByReuse) {
  HostCache c(2, 16, 1, EvictionPolicy::clock);
  c.acquire(0, false);  // loaded: not referenced yet
  c.release(0);
  EXPECT_FALSE(c.table.is_referenced(0));
  c.acquire(0, false);  // used again: referenced
  c.release(0);
  EXPECT_TRUE(c.table.is_referenced(0));
}

TEST(Victim, HotCacheIsSweptInBatches) {
  constexpr std::uint32_t frames = 1000;
  HostCache c(frames, 2 * frames, 1, EvictionPolicy::clock);
  for (std::uint32_t p = 0; p < frames; ++p) {
    c.acquire(p, false);
    c.release(p);
    c.table.set_referenced(c.page_frame[p], true);
  }
  c.hand = 0;
  const VictimSearch s = search(c, 4 * frames);
  ASSERT_TRUE(s.found);
  EXPECT_EQ(s.victim.frame, 0u);  // every bit cleared once, then the first frame is taken
  EXPECT_LE(c.hand, std::uint64_t{frames} + sweep_batch);
  for (std::uint32_t f = 1; f < frames; ++f) EXPECT_FALSE(c.table.is_referenced(f)) << f;
}

TEST(Victim, AllHeldMeansNotFoundWithinBudget) {
  HostCache c(2, 16, 1, EvictionPolicy::clock);
  c.acquire(0, false);
  c.acquire(1, false);
  const VictimSearch s = search(c, 16);
  EXPECT_FALSE(s.found);
  EXPECT_EQ(c.lock[0] + c.lock[1], 0u);  // a failed search leaves no frame locked
}

TEST(Victim, DirtyVictimIsReported) {
  HostCache c(1, 4, 1, EvictionPolicy::fifo);
  c.acquire(2, true);
  c.release(2);
  const VictimSearch s = search(c);
  ASSERT_TRUE(s.found);
  EXPECT_TRUE(s.victim.dirty);
  EXPECT_EQ(key_page(s.victim.evicted_key), 2u);
}

TEST(Victim, ProgressBound) {
  EXPECT_EQ(frames_required(1024, 4), 4096u);
  EXPECT_EQ(frames_required(0, 4), 0u);
}

}  // namespace
}  // namespace warpvm::detail
