// AlignMalloc's OR tree over 2 MB segments: first fit, successor search, runs of k free
// segments, and long random sequences checked against a plain vector<bool>.

#include "warpvm/detail/alloc/or_tree.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace warpvm::detail {
namespace {

constexpr std::uint32_t none = OrTree::no_segment;

/// A tree and the storage it lives in.
struct Tree {
  explicit Tree(std::uint32_t segments)
      : storage(OrTree::storage_words(segments)), tree(storage.data(), storage.size(), segments) {}
  std::vector<std::uint64_t> storage;
  OrTree tree;
};

/// The same questions answered by scanning a vector<bool> (true = free).
struct Reference {
  std::vector<bool> free;

  [[nodiscard]] std::uint32_t next_free(std::uint64_t from) const {
    for (std::uint64_t s = from; s < free.size(); ++s)
      if (free[s]) return static_cast<std::uint32_t>(s);
    return none;
  }
  [[nodiscard]] std::uint32_t free_run(std::uint32_t count) const {
    std::uint32_t length = 0;
    for (std::uint32_t s = 0; s < free.size() && count != 0; ++s) {
      length = free[s] ? length + 1 : 0;
      if (length == count) return s + 1 - count;
    }
    return none;
  }
  [[nodiscard]] std::uint32_t free_count() const {
    std::uint32_t n = 0;
    for (bool f : free) n += f ? 1 : 0;
    return n;
  }
};

TEST(OrTree, StartsAllFree) {
  Tree t(1000);
  EXPECT_EQ(t.tree.segments(), 1000u);
  EXPECT_EQ(t.tree.free_segments(), 1000u);
  EXPECT_EQ(t.tree.used_segments(), 0u);
  EXPECT_EQ(t.tree.leftmost_free(), 0u);
  EXPECT_EQ(t.tree.next_free(998), 999u);
  EXPECT_EQ(t.tree.next_free(999), none);  // the padding leaves up to 1024 are never free
  EXPECT_FALSE(t.tree.is_free(1000));
  EXPECT_EQ(t.tree.find_free_run(1000), 0u);
  EXPECT_EQ(t.tree.find_free_run(1001), none);
}

TEST(OrTree, SuccessorClimbsToTheFirstLeftChildWithAFreeSibling) {
  // Section VI-B, Fig. 9: 8 segments, only 0, 3 and 4 free. From leaf 0 the search climbs past
  // leaf 1 (used) to node {0,1}, whose sibling {2,3} has a free leaf, and descends to 3.
  Tree t(8);
  ASSERT_TRUE(t.tree.mark_used(1, 2));
  ASSERT_TRUE(t.tree.mark_used(5, 3));
  EXPECT_EQ(t.tree.leftmost_free(), 0u);
  EXPECT_EQ(t.tree.next_free(0), 3u);
  EXPECT_EQ(t.tree.next_free(3), 4u);  // crosses the root's halves
  EXPECT_EQ(t.tree.next_free(4), none);
  EXPECT_EQ(t.tree.next_free(1), 3u);  // works from used segments too
}

TEST(OrTree, LeftmostFreeFollowsUseAndRelease) {
  Tree t(64);
  EXPECT_EQ(t.tree.allocate(5), 0u);
  EXPECT_EQ(t.tree.leftmost_free(), 5u);
  ASSERT_TRUE(t.tree.release(2, 1));
  EXPECT_EQ(t.tree.leftmost_free(), 2u);
  EXPECT_EQ(t.tree.allocate(1), 2u);  // the freed segment is the first reused
  EXPECT_EQ(t.tree.allocate(1), 5u);
  EXPECT_EQ(t.tree.free_segments(), 58u);
}

TEST(OrTree, RunOfKSkipsGapsTooShort) {
  // Free runs: [0,1], [3,4], [7,9], [11,15].
  Tree t(16);
  for (std::uint32_t used : {2u, 5u, 6u, 10u}) ASSERT_TRUE(t.tree.mark_used(used, 1));
  EXPECT_EQ(t.tree.find_free_run(1), 0u);
  EXPECT_EQ(t.tree.find_free_run(2), 0u);
  EXPECT_EQ(t.tree.find_free_run(3), 7u);
  EXPECT_EQ(t.tree.find_free_run(4), 11u);
  EXPECT_EQ(t.tree.find_free_run(5), 11u);
  EXPECT_EQ(t.tree.find_free_run(6), none);
  EXPECT_EQ(t.tree.allocate(3), 7u);
  EXPECT_EQ(t.tree.find_free_run(3), 11u);
}

TEST(OrTree, FullTreeFailsAndFreedRunIsReused) {
  Tree t(100);
  EXPECT_EQ(t.tree.allocate(40), 0u);
  EXPECT_EQ(t.tree.allocate(60), 40u);
  EXPECT_EQ(t.tree.free_segments(), 0u);
  EXPECT_EQ(t.tree.leftmost_free(), none);
  EXPECT_EQ(t.tree.allocate(1), none);
  ASSERT_TRUE(t.tree.release(10, 20));
  EXPECT_EQ(t.tree.allocate(21), none);
  EXPECT_EQ(t.tree.allocate(20), 10u);
}

TEST(OrTree, FailedRequestsLeaveTheTreeUnchanged) {
  Tree t(50);
  ASSERT_TRUE(t.tree.mark_used(10, 5));
  const std::vector<std::uint64_t> before = t.storage;
  EXPECT_FALSE(t.tree.mark_used(12, 1));   // already used
  EXPECT_FALSE(t.tree.mark_used(8, 4));    // partly used
  EXPECT_FALSE(t.tree.release(9, 3));      // partly free: a double free
  EXPECT_FALSE(t.tree.release(20, 1));     // never used
  EXPECT_FALSE(t.tree.mark_used(49, 2));   // leaves the tree
  EXPECT_FALSE(t.tree.mark_used(50, 1));
  EXPECT_FALSE(t.tree.mark_used(0, 0));    // empty
  EXPECT_EQ(t.tree.allocate(0), none);
  EXPECT_EQ(t.tree.allocate(46), none);    // more than is free
  EXPECT_EQ(t.tree.allocate(36), none);    // as much as is free, but not in one run
  EXPECT_EQ(t.tree.next_free(50), none);
  EXPECT_EQ(t.storage, before);
}

TEST(OrTree, TooLittleStorageGivesAnEmptyTreeThatTouchesNothing) {
  std::vector<std::uint64_t> storage(OrTree::storage_words(1000) - 1, 0x5a5a5a5a5a5a5a5aull);
  const std::vector<std::uint64_t> before = storage;
  OrTree tree(storage.data(), storage.size(), 1000);
  EXPECT_EQ(tree.segments(), 0u);
  EXPECT_EQ(tree.free_segments(), 0u);
  EXPECT_EQ(tree.leftmost_free(), none);
  EXPECT_EQ(tree.allocate(1), none);
  EXPECT_FALSE(tree.mark_used(0, 1));
  EXPECT_EQ(storage, before);
  EXPECT_EQ(OrTree(nullptr, 0, 0).segments(), 0u);
}

TEST(OrTree, OneSegment) {
  Tree t(1);
  EXPECT_EQ(t.tree.allocate(1), 0u);
  EXPECT_EQ(t.tree.allocate(1), none);
  EXPECT_TRUE(t.tree.release(0, 1));
  EXPECT_EQ(t.tree.leftmost_free(), 0u);
}

TEST(OrTree, MatchesReferenceOverRandomSequences) {
  struct Live {
    std::uint32_t first, count;
  };
  for (std::uint32_t segments : {1u, 2u, 7u, 64u, 65u, 1000u, 4099u}) {
    SCOPED_TRACE(segments);
    std::mt19937_64 rng(segments);
    Tree t(segments);
    Reference ref{std::vector<bool>(segments, true)};
    std::vector<Live> live;
    const std::uint32_t longest = segments < 48 ? segments : 48;
    for (int step = 0; step < 20000; ++step) {
      const auto pick = [&](std::uint64_t n) { return static_cast<std::uint32_t>(rng() % n); };
      const std::uint32_t op = pick(10);
      if (op < 5) {  // allocate a run, small runs more often
        const std::uint32_t count = 1 + pick(1 + pick(longest));
        const std::uint32_t expected = ref.free_run(count);
        const std::uint32_t got = t.tree.allocate(count);
        ASSERT_EQ(got, expected) << "count " << count;
        if (got == none) continue;
        for (std::uint32_t s = got; s < got + count; ++s) {
          ASSERT_TRUE(ref.free[s]) << "overlaps a live allocation at " << s;
          ref.free[s] = false;
        }
        live.push_back({got, count});
      } else if (op < 9 && !live.empty()) {  // release a live allocation
        const std::size_t i = pick(live.size());
        ASSERT_TRUE(t.tree.release(live[i].first, live[i].count));
        for (std::uint32_t s = live[i].first; s < live[i].first + live[i].count; ++s) ref.free[s] = true;
        live[i] = live.back();
        live.pop_back();
      } else {  // a release of a range holding a free segment must fail
        const std::uint32_t s = pick(segments);
        if (ref.free[s]) {
          ASSERT_FALSE(t.tree.release(s, 1));
        }
      }
      const std::uint32_t probe = pick(segments);
      ASSERT_EQ(t.tree.next_free(probe), ref.next_free(std::uint64_t{probe} + 1)) << "after " << probe;
      ASSERT_EQ(t.tree.leftmost_free(), ref.next_free(0));
      ASSERT_EQ(t.tree.free_segments(), ref.free_count());
    }
    for (std::uint32_t s = 0; s < segments; ++s) ASSERT_EQ(t.tree.is_free(s), ref.free[s]) << s;
  }
}

TEST(OrTree, MillionSegmentsFillAndEmpty) {
  constexpr std::uint32_t segments = 1u << 20;  // 2 TB of 2 MB segments
  Tree t(segments);
  for (std::uint32_t first = 0; first < segments; first += 1024) ASSERT_EQ(t.tree.allocate(1024), first);
  EXPECT_EQ(t.tree.allocate(1), none);
  ASSERT_TRUE(t.tree.release(segments - 3, 2));
  EXPECT_EQ(t.tree.leftmost_free(), segments - 3);
  EXPECT_EQ(t.tree.find_free_run(2), segments - 3);
  EXPECT_EQ(t.tree.find_free_run(3), none);
}

}  // namespace
}  // namespace warpvm::detail
