// The first-fit runs of frames that resident objects take (detail/core/frame_ranges.hpp).

#include "warpvm/detail/core/frame_ranges.hpp"

#include <gtest/gtest.h>

namespace warpvm::detail {
namespace {

TEST(FrameRanges, TakesTheLowestRunLongEnoughAndRefusesWhatNoRunHolds) {
  FrameRanges frames(100, 10);
  EXPECT_EQ(frames.take(4), 100u);
  EXPECT_EQ(frames.take(4), 104u);
  EXPECT_EQ(frames.take(3), std::nullopt);  // two frames are left
  EXPECT_EQ(frames.free_frames(), 2u);
  EXPECT_EQ(frames.take(2), 108u);
  EXPECT_EQ(frames.free_frames(), 0u);
  EXPECT_EQ(frames.take(1), std::nullopt);
}

TEST(FrameRanges, GivenBackRunsJoinTheirNeighbours) {
  FrameRanges frames(0, 12);
  const auto a = frames.take(4), b = frames.take(4), c = frames.take(4);
  ASSERT_TRUE(a && b && c);
  frames.give_back(*a, 4);
  frames.give_back(*c, 4);
  EXPECT_EQ(frames.largest_run(), 4u);  // two runs of 4, not joined: b lies between
  EXPECT_EQ(frames.take(8), std::nullopt);
  frames.give_back(*b, 4);  // joins both neighbours
  EXPECT_EQ(frames.largest_run(), 12u);
  EXPECT_EQ(frames.take(12), 0u);
}

TEST(FrameRanges, FirstFitSkipsRunsTooShort) {
  FrameRanges frames(0, 10);
  const auto a = frames.take(2);
  ASSERT_EQ(frames.take(8), 2u);
  frames.give_back(*a, 2);
  frames.give_back(5, 5);  // the upper part of the 8
  EXPECT_EQ(frames.take(3), 5u);  // [0, 2) is too short
  EXPECT_EQ(frames.take(2), 0u);
  EXPECT_EQ(frames.free_frames(), 2u);
}

TEST(FrameRanges, NoFramesSetAside) {
  FrameRanges frames(7, 0);
  EXPECT_EQ(frames.take(1), std::nullopt);
  EXPECT_EQ(frames.free_frames(), 0u);
}

}  // namespace
}  // namespace warpvm::detail
