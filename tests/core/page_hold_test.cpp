// A page hold (what page_span and cursor keep) cannot be copied: two copies could each be
// released, and the second release would carry the page's holder count below zero, into its
// BUSY bit. Moves stay trivial, so that the holds are passed in registers.

#include "warpvm/array.hpp"

#include <gtest/gtest.h>

#include <type_traits>

namespace warpvm {
namespace {

using Hold = detail::PageHold<float>;

TEST(PageHold, IsMoveOnly) {
  EXPECT_FALSE(std::is_copy_constructible_v<Hold>);
  EXPECT_FALSE(std::is_copy_assignable_v<Hold>);
  EXPECT_TRUE(std::is_move_constructible_v<Hold>);
  EXPECT_TRUE(std::is_move_assignable_v<Hold>);
}

TEST(PageHold, StaysTriviallyCopyableUnderneathForTheRegisterABI) {
  EXPECT_TRUE(std::is_trivially_copyable_v<Hold>);
  EXPECT_TRUE(std::is_trivially_destructible_v<Hold>);
}

}  // namespace
}  // namespace warpvm
