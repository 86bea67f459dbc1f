#include "warpvm/detail/core/page_table.hpp"

#include <gtest/gtest.h>

namespace warpvm::detail {
namespace {

using namespace page_word;

TEST(PageTable, AbsentPageIsFetchedByExactlyOneWinner) {
  std::uint32_t word = 0;
  EXPECT_EQ(classify(page_acquire(word, 3)), AcquireOutcome::fetch);
  EXPECT_TRUE(page_try_begin_fetch(word));
  EXPECT_FALSE(page_try_begin_fetch(word));  // second loader loses: no page in two frames
  EXPECT_EQ(classify(page_acquire(word, 1)), AcquireOutcome::wait);
  EXPECT_EQ(holders(word), 4u);
  page_finish_fetch(word);
  EXPECT_TRUE(is_resident(word));
  EXPECT_EQ(holders(word), 4u);
}

TEST(PageTable, ResidentPageIsAHit) {
  std::uint32_t word = valid;
  EXPECT_EQ(classify(page_acquire(word, 32)), AcquireOutcome::hit);
  EXPECT_EQ(holders(word), 32u);
  page_release(word, 32);
  EXPECT_EQ(word, valid);
}

TEST(PageTable, HeldPageCannotBeEvicted) {
  std::uint32_t word = valid;
  page_acquire(word, 1);
  EXPECT_FALSE(page_try_begin_evict(word));
  page_release(word, 1);
  EXPECT_TRUE(page_try_begin_evict(word));
  EXPECT_TRUE(is_busy(word));
  EXPECT_FALSE(is_resident(word));
}

TEST(PageTable, EvictionEndsAbsentAndKeepsLateHolders) {
  std::uint32_t word = valid;
  ASSERT_TRUE(page_try_begin_evict(word));
  EXPECT_EQ(classify(page_acquire(word, 2)), AcquireOutcome::wait);  // arrives mid-eviction
  EXPECT_FALSE(page_try_begin_fetch(word));                          // cannot load while evicting
  page_finish_evict(word);
  EXPECT_TRUE(is_absent(word));
  EXPECT_EQ(holders(word), 2u);
  EXPECT_TRUE(page_try_begin_fetch(word));  // a waiter becomes the loader
}

TEST(PageTable, LoadingPageCannotBeEvicted) {
  std::uint32_t word = 0;
  ASSERT_TRUE(page_try_begin_fetch(word));
  EXPECT_FALSE(page_try_begin_evict(word));
}

TEST(PageTable, ResidentPageIsNotFetchedAgain) {
  std::uint32_t word = valid;
  EXPECT_FALSE(page_try_begin_fetch(word));
}

// host_batched while eviction is possible: holds are added only to resident words, so the
// words the host writes with copies (absent, or BUSY while evicted) never change under it.
TEST(PageTable, HoldsAreAddedOnlyToResidentPages) {
  std::uint32_t word = 0;
  EXPECT_FALSE(page_try_hold_resident(word, 3));
  EXPECT_EQ(word, 0u);  // untouched
  word = valid;
  ASSERT_TRUE(page_try_hold_resident(word, 3));
  EXPECT_EQ(word, valid | 3u);
  EXPECT_FALSE(page_try_begin_evict(word));  // held
  page_release(word, 3);
  ASSERT_TRUE(page_try_begin_evict(word));
  EXPECT_EQ(word, busy);
  EXPECT_FALSE(page_try_hold_resident(word, 1));
  EXPECT_EQ(word, busy);  // untouched while evicting
}

}  // namespace
}  // namespace warpvm::detail
