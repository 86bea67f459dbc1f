// The staging-page segment tree against a plain vector<bool> of free pages: known layouts, then
// random allocate / release sequences compared step by step with a linear leftmost-fit scan.

#include "warpvm/detail/channel/segment_tree.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace warpvm::detail {
namespace {

/// A tree with its own storage, every page free.
struct OwnedTree {
  explicit OwnedTree(std::uint32_t pages) : nodes(StagingPageTree::nodes_required(pages)), tree(nodes.data(), pages) {
    tree.reset();
  }
  std::vector<StagingTreeNode> nodes;
  StagingPageTree tree;
};

/// The reference: one flag per page, everything by linear scans.
struct FreeList {
  explicit FreeList(std::uint32_t pages) : free(pages, true) {}

  std::uint32_t allocate(std::uint32_t count) {
    std::uint32_t run = 0;
    for (std::uint32_t p = 0; p < free.size() && count != 0; ++p) {
      run = free[p] ? run + 1 : 0;
      if (run == count) {
        const std::uint32_t first = p + 1 - count;
        std::fill(free.begin() + first, free.begin() + first + count, false);
        return first;
      }
    }
    return StagingPageTree::no_run;
  }
  bool release(std::uint32_t first, std::uint32_t count) {
    if (count == 0 || first >= free.size() || count > free.size() - first) return false;
    if (std::any_of(free.begin() + first, free.begin() + first + count, [](bool f) { return f; })) return false;
    std::fill(free.begin() + first, free.begin() + first + count, true);
    return true;
  }
  std::uint32_t largest_run() const {
    std::uint32_t run = 0, best = 0;
    for (bool f : free) {
      run = f ? run + 1 : 0;
      best = std::max(best, run);
    }
    return best;
  }
  std::uint32_t free_pages() const { return static_cast<std::uint32_t>(std::count(free.begin(), free.end(), true)); }

  std::vector<bool> free;
};

void expect_same_pages(const StagingPageTree& tree, const FreeList& model) {
  for (std::uint32_t p = 0; p < model.free.size(); ++p) ASSERT_EQ(tree.is_free(p), model.free[p]) << "page " << p;
}

TEST(SegmentTree, StorageIsTwiceThePowerOfTwoAbove) {
  EXPECT_EQ(StagingPageTree::nodes_required(1), 2u);
  EXPECT_EQ(StagingPageTree::nodes_required(5), 16u);
  EXPECT_EQ(StagingPageTree::nodes_required(16384), 32768u);  // the paper's 16K PCM pages
}

TEST(SegmentTree, FreshTreeIsOneFreeRun) {
  OwnedTree t(10);
  EXPECT_EQ(t.tree.page_count(), 10u);
  EXPECT_EQ(t.tree.free_pages(), 10u);
  EXPECT_EQ(t.tree.largest_free_run(), 10u);
  for (std::uint32_t p = 0; p < 10; ++p) EXPECT_TRUE(t.tree.is_free(p));
}

TEST(SegmentTree, AllocatesLeftmostFitAndRefusesWhatDoesNotFit) {
  OwnedTree t(10);
  EXPECT_EQ(t.tree.allocate(3), 0u);
  EXPECT_EQ(t.tree.allocate(4), 3u);
  EXPECT_EQ(t.tree.allocate(4), StagingPageTree::no_run);  // pages 7-9 are left: too short
  EXPECT_EQ(t.tree.free_pages(), 3u);
  EXPECT_EQ(t.tree.largest_free_run(), 3u);
  EXPECT_EQ(t.tree.allocate(3), 7u);
  EXPECT_EQ(t.tree.free_pages(), 0u);
  EXPECT_EQ(t.tree.allocate(1), StagingPageTree::no_run);
  EXPECT_EQ(t.tree.allocate(0), StagingPageTree::no_run);

  ASSERT_TRUE(t.tree.release(3, 4));
  EXPECT_EQ(t.tree.largest_free_run(), 4u);
  EXPECT_EQ(t.tree.allocate(2), 3u);
  EXPECT_EQ(t.tree.allocate(3), StagingPageTree::no_run);  // 5 and 6 are free, nothing else
  EXPECT_EQ(t.tree.largest_free_run(), 2u);
  EXPECT_EQ(t.tree.allocate(2), 5u);
}

TEST(SegmentTree, FindsARunAcrossTheMiddleOfANode) {
  OwnedTree t(16);
  ASSERT_EQ(t.tree.allocate(16), 0u);
  ASSERT_TRUE(t.tree.release(2, 1));
  ASSERT_TRUE(t.tree.release(6, 4));  // straddles the root's middle (page 8)
  ASSERT_TRUE(t.tree.release(12, 3));
  EXPECT_EQ(t.tree.largest_free_run(), 4u);
  EXPECT_EQ(t.tree.allocate(4), 6u);
  EXPECT_EQ(t.tree.allocate(2), 12u);  // leftmost run of 2: page 2 alone is too short
  EXPECT_EQ(t.tree.allocate(1), 2u);
  EXPECT_EQ(t.tree.allocate(1), 14u);
  EXPECT_EQ(t.tree.free_pages(), 0u);
}

TEST(SegmentTree, PrefersAnEarlierRunInTheLeftHalfOverOneAcrossTheMiddle) {
  OwnedTree t(16);
  ASSERT_EQ(t.tree.allocate(16), 0u);
  ASSERT_TRUE(t.tree.release(1, 3));  // pages 1-3
  ASSERT_TRUE(t.tree.release(6, 6));  // pages 6-11, across the middle
  EXPECT_EQ(t.tree.allocate(3), 1u);
  EXPECT_EQ(t.tree.allocate(3), 6u);
}

TEST(SegmentTree, ReleaseRefusesDoubleFreesAndRangesPastTheEnd) {
  OwnedTree t(10);
  ASSERT_EQ(t.tree.allocate(6), 0u);
  EXPECT_FALSE(t.tree.release(4, 3));   // page 6 is free already
  EXPECT_FALSE(t.tree.release(8, 5));   // past the last page
  EXPECT_FALSE(t.tree.release(10, 1));
  EXPECT_FALSE(t.tree.release(2, 0));   // nothing to give back
  EXPECT_FALSE(t.tree.release(~0u, 2));  // first + count would wrap
  EXPECT_EQ(t.tree.free_pages(), 4u);    // the refusals changed nothing
  EXPECT_TRUE(t.tree.release(2, 2));     // part of a run may go back
  EXPECT_FALSE(t.tree.release(2, 2));
  EXPECT_EQ(t.tree.free_pages(), 6u);
  EXPECT_EQ(t.tree.allocate(3), 6u);     // 2-3 is too short, 6-9 fits
}

TEST(SegmentTree, PaddingPagesAreNeverHandedOut) {
  OwnedTree t(5);  // eight leaves, three of them padding
  EXPECT_EQ(t.tree.largest_free_run(), 5u);
  EXPECT_EQ(t.tree.allocate(6), StagingPageTree::no_run);
  EXPECT_EQ(t.tree.allocate(5), 0u);
  EXPECT_EQ(t.tree.allocate(1), StagingPageTree::no_run);
  EXPECT_FALSE(t.tree.release(5, 1));
  EXPECT_TRUE(t.tree.release(0, 5));
  EXPECT_EQ(t.tree.largest_free_run(), 5u);
}

TEST(SegmentTree, OnePageTree) {
  OwnedTree t(1);
  EXPECT_EQ(t.tree.allocate(2), StagingPageTree::no_run);
  EXPECT_EQ(t.tree.allocate(1), 0u);
  EXPECT_FALSE(t.tree.is_free(0));
  EXPECT_EQ(t.tree.allocate(1), StagingPageTree::no_run);
  EXPECT_TRUE(t.tree.release(0, 1));
  EXPECT_TRUE(t.tree.is_free(0));
}

TEST(SegmentTree, FreePagesInCountsARange) {
  OwnedTree t(32);
  ASSERT_EQ(t.tree.allocate(20), 0u);
  ASSERT_TRUE(t.tree.release(3, 5));
  EXPECT_EQ(t.tree.free_pages_in(0, 32), 17u);
  EXPECT_EQ(t.tree.free_pages_in(4, 2), 2u);
  EXPECT_EQ(t.tree.free_pages_in(7, 14), 2u);  // page 7 and page 20
  EXPECT_EQ(t.tree.free_pages_in(8, 12), 0u);
  EXPECT_EQ(t.tree.free_pages_in(5, 0), 0u);
}

TEST(SegmentTree, ThePapersPoolFillsWithBatchesAndEmptiesAgain) {
  constexpr std::uint32_t pages = 16384;
  OwnedTree t(pages);
  for (std::uint32_t batch = 0; batch < pages / 16; ++batch) ASSERT_EQ(t.tree.allocate(16), batch * 16);
  EXPECT_EQ(t.tree.allocate(1), StagingPageTree::no_run);
  for (std::uint32_t batch = 0; batch < pages / 16; batch += 2) ASSERT_TRUE(t.tree.release(batch * 16, 16));
  EXPECT_EQ(t.tree.free_pages(), pages / 2);
  EXPECT_EQ(t.tree.largest_free_run(), 16u);  // freed every other batch: no run of 17
  EXPECT_EQ(t.tree.allocate(17), StagingPageTree::no_run);
  for (std::uint32_t batch = 1; batch < pages / 16; batch += 2) ASSERT_TRUE(t.tree.release(batch * 16, 16));
  EXPECT_EQ(t.tree.largest_free_run(), pages);
}

/// Random allocations (mostly small, sometimes large), releases of whole runs, of parts of runs
/// and of arbitrary ranges (which the tree must refuse exactly when the model does), checked
/// against the model after every step.
class SegmentTreeDifferential : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(SegmentTreeDifferential, MatchesALinearScan) {
  const std::uint32_t pages = GetParam();
  OwnedTree t(pages);
  FreeList model(pages);
  std::mt19937 rng(pages * 7919u + 1);
  struct Run {
    std::uint32_t first, count;
  };
  std::vector<Run> runs;
  const int steps = pages > 256 ? 6000 : 3000;
  for (int step = 0; step < steps; ++step) {
    const std::uint32_t op = rng() % 10;
    if (op < 5) {
      const std::uint32_t count = (rng() % 4 == 0) ? 1 + rng() % pages : 1 + rng() % std::min(pages, 8u);
      const std::uint32_t got = t.tree.allocate(count);
      ASSERT_EQ(got, model.allocate(count)) << "step " << step << " allocate " << count;
      if (got != StagingPageTree::no_run) runs.push_back({got, count});
    } else if (op < 8 && !runs.empty()) {
      const std::size_t i = rng() % runs.size();
      Run run = runs[i];
      runs.erase(runs.begin() + static_cast<std::ptrdiff_t>(i));
      if (op == 7 && run.count > 2) {  // give back the middle, keep both ends taken
        const std::uint32_t cut = 1 + rng() % (run.count - 2);
        const std::uint32_t len = 1 + rng() % (run.count - 1 - cut);
        runs.push_back({run.first, cut});
        runs.push_back({run.first + cut + len, run.count - cut - len});
        run = {run.first + cut, len};
      }
      ASSERT_TRUE(t.tree.release(run.first, run.count)) << "step " << step;
      ASSERT_TRUE(model.release(run.first, run.count));
    } else {
      const std::uint32_t first = rng() % (pages + 2);
      const std::uint32_t count = rng() % 6;
      const bool expected = model.release(first, count);
      ASSERT_EQ(t.tree.release(first, count), expected) << "step " << step << " release " << first << "+" << count;
      if (expected) {  // it released pages some run held: drop them from the bookkeeping
        std::vector<Run> kept;
        for (const Run& r : runs) {
          if (r.first + r.count <= first || r.first >= first + count) {
            kept.push_back(r);
            continue;
          }
          if (r.first < first) kept.push_back({r.first, first - r.first});
          if (r.first + r.count > first + count) kept.push_back({first + count, r.first + r.count - first - count});
        }
        runs = kept;
      }
    }
    ASSERT_EQ(t.tree.free_pages(), model.free_pages()) << "step " << step;
    ASSERT_EQ(t.tree.largest_free_run(), model.largest_run()) << "step " << step;
    if (step % 64 == 0) expect_same_pages(t.tree, model);
  }
  expect_same_pages(t.tree, model);
}

INSTANTIATE_TEST_SUITE_P(Sizes, SegmentTreeDifferential,
                         ::testing::Values(1u, 2u, 3u, 7u, 16u, 33u, 100u, 1000u, 1024u),
                         [](const ::testing::TestParamInfo<std::uint32_t>& size) {
                           return std::to_string(size.param) + "pages";
                         });

}  // namespace
}  // namespace warpvm::detail
