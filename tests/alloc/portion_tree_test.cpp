// AlignMalloc's PortionTree: warptree sizes (Algorithm 2), placement whose reserved subtrees
// never overlap (Eq. 3), UVM's own prefetcher staying inside each warp's warptree, and long
// random sequences checked against a plain vector<bool>, VABlocks opened and closed among them
// (HeapSpace's arenas).

#include "warpvm/detail/alloc/portion_tree.hpp"
#include "warpvm/detail/policy/uvm_prefetch.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace warpvm::detail {
namespace {

constexpr std::uint64_t kb = 1024;
constexpr std::uint64_t block = basic_block_bytes;

/// A tree and the storage it lives in.
struct Tree {
  explicit Tree(std::uint32_t vablocks)
      : storage(PortionTree::storage_words(vablocks)), tree(storage.data(), storage.size(), vablocks) {}
  std::vector<std::uint64_t> storage;
  PortionTree tree;
};

/// The placement rule by brute force: the leftmost run of 2^r free blocks that starts at a
/// multiple of 2^r (true = reserved).
struct Reference {
  std::vector<bool> reserved;

  [[nodiscard]] std::uint64_t place(std::uint64_t blocks) const {
    for (std::uint64_t first = 0; first + blocks <= reserved.size(); first += blocks) {
      bool free = true;
      for (std::uint64_t b = first; b < first + blocks && free; ++b) free = !reserved[b];
      if (free) return first;
    }
    return no_offset;
  }
  void assign(std::uint64_t first, std::uint64_t blocks, bool on) {
    for (std::uint64_t b = first; b < first + blocks; ++b) reserved[b] = on;
  }
  [[nodiscard]] std::uint64_t free_blocks() const {
    std::uint64_t n = 0;
    for (bool r : reserved) n += r ? 0 : 1;
    return n;
  }
};

/// A random sequence on a tree beside the reference: the portions live in it, and how many lie
/// in each VABlock. Each step checks the tree against the reference.
struct RandomRun {
  RandomRun(PortionTree& t, std::uint32_t vablocks)
      : tree(t), ref{std::vector<bool>(std::size_t{vablocks} * 32, false)}, live_in(vablocks, 0) {}
  PortionTree& tree;
  Reference ref;
  std::vector<Portion> live;
  std::vector<std::uint32_t> live_in;  ///< live portions per VABlock

  /// A request of up to 2 MB, placed where the reference places it (refused where it has no
  /// room) as a warptree of Algorithm 2's size whose reservation stays in its VABlock.
  void allocate(std::mt19937_64& rng) {
    const std::uint64_t bytes = 1 + rng() % (std::uint64_t{64 * kb} << (rng() % 6));  // up to 2 MB
    const unsigned height = PortionTree::reserved_height(PortionTree::warptree_height(bytes));
    const std::uint64_t reserved_blocks = std::uint64_t{1} << height;
    const std::uint64_t expected = ref.place(reserved_blocks);
    const Portion p = tree.allocate(bytes);
    ASSERT_EQ(p.offset, expected == no_offset ? no_offset : expected * block) << bytes;
    if (!p.ok()) return;
    ASSERT_GE(p.bytes, bytes);
    ASSERT_LT(p.bytes / 2, std::max<std::uint64_t>(bytes, block));
    ASSERT_EQ(p.reserved_bytes, reserved_blocks * block);
    ASSERT_EQ(p.offset / vablock_bytes, (p.offset + p.reserved_bytes - 1) / vablock_bytes);
    ref.assign(expected, reserved_blocks, true);
    ++live_in[p.offset / vablock_bytes];
    live.push_back(p);
  }
  /// Releases a live portion picked at random, if there is one.
  void release(std::mt19937_64& rng) {
    if (live.empty()) return;
    const std::size_t i = rng() % live.size();
    ASSERT_TRUE(tree.release(live[i].offset));
    ref.assign(live[i].offset / block, live[i].reserved_bytes / block, false);
    --live_in[live[i].offset / vablock_bytes];
    live[i] = live.back();
    live.pop_back();
  }
  /// Every block is free in the tree exactly where it is in the reference.
  void expect_same_blocks() const {
    for (std::uint64_t b = 0; b < ref.reserved.size(); ++b) ASSERT_EQ(tree.is_free(b * block), !ref.reserved[b]) << b;
  }
};

TEST(PortionTree, WarptreeSizesFollowAlgorithm2) {
  // S = 2^ceil(log2(M / 64 KB)) x 64 KB, h = ceil(log2(M / 64 KB)) + 1 (within the VABlock).
  struct Case {
    std::uint64_t bytes;
    unsigned warptree, reserved;
  };
  for (const Case c : {Case{1, 0, 1}, Case{64 * kb, 0, 1}, Case{64 * kb + 1, 1, 2}, Case{100 * kb, 1, 2},
                       Case{128 * kb, 1, 2}, Case{200 * kb, 2, 3}, Case{1024 * kb, 4, 5},
                       Case{1024 * kb + 1, 5, 5}, Case{2048 * kb, 5, 5}}) {
    EXPECT_EQ(PortionTree::warptree_height(c.bytes), c.warptree) << c.bytes;
    EXPECT_EQ(PortionTree::reserved_height(c.warptree), c.reserved) << c.bytes;
  }
  Tree t(1);
  const Portion p = t.tree.allocate(100 * kb);
  EXPECT_EQ(p.bytes, 128 * kb);
  EXPECT_EQ(p.reserved_bytes, 256 * kb);
}

TEST(PortionTree, PortionsGoLeftmostWithTheirPadding) {
  Tree t(1);
  EXPECT_EQ(t.tree.capacity_bytes(), vablock_bytes);
  EXPECT_EQ(t.tree.allocate(64 * kb).offset, 0u);           // blocks 0-1 (1 is padding)
  EXPECT_EQ(t.tree.allocate(10 * kb).offset, 2 * block);    // blocks 2-3
  EXPECT_EQ(t.tree.allocate(200 * kb).offset, 8 * block);   // 4 blocks + 4 of padding: 8-15
  EXPECT_EQ(t.tree.allocate(64 * kb).offset, 4 * block);    // the hole 4-7 takes small ones
  EXPECT_EQ(t.tree.allocate(100 * kb).offset, 16 * block);  // 2 blocks + 2 of padding: 16-19
  EXPECT_EQ(t.tree.free_bytes(), (32 - 18) * block);  // 2 + 2 + 8 + 2 + 4 blocks reserved
  EXPECT_FALSE(t.tree.is_free(1 * block));  // padding is kept from everyone else
  EXPECT_TRUE(t.tree.is_free(6 * block));
}

TEST(PortionTree, WholeVABlockWarptreeHasNoPadding) {
  Tree t(2);
  const Portion big = t.tree.allocate(2048 * kb);
  EXPECT_EQ(big.offset, 0u);
  EXPECT_EQ(big.reserved_bytes, vablock_bytes);
  const Portion over_half = t.tree.allocate(1500 * kb);
  EXPECT_EQ(over_half.offset, vablock_bytes);
  EXPECT_EQ(over_half.bytes, vablock_bytes);
  EXPECT_EQ(t.tree.free_bytes(), 0u);
  EXPECT_FALSE(t.tree.allocate(1).ok());
  // Up to 1 MB the warptree is half its VABlock, the other half padding.
  ASSERT_TRUE(t.tree.release(vablock_bytes));
  const Portion half = t.tree.allocate(1024 * kb);
  EXPECT_EQ(half.offset, vablock_bytes);
  EXPECT_EQ(half.bytes, vablock_bytes / 2);
  EXPECT_EQ(half.reserved_bytes, vablock_bytes);
}

TEST(PortionTree, RejectedRequestsAndReleasesChangeNothing) {
  Tree t(3);
  ASSERT_TRUE(t.tree.allocate(200 * kb).ok());  // blocks 0-3, padding 4-7
  ASSERT_TRUE(t.tree.allocate(64 * kb).ok());   // block 8, padding 9
  const std::vector<std::uint64_t> before = t.storage;
  EXPECT_FALSE(t.tree.allocate(0).ok());
  EXPECT_FALSE(t.tree.allocate(vablock_bytes + 1).ok());  // the OR tree's business
  EXPECT_FALSE(t.tree.release(1 * block));        // inside a warptree
  EXPECT_FALSE(t.tree.release(4 * block));        // padding
  EXPECT_FALSE(t.tree.release(9 * block));
  EXPECT_FALSE(t.tree.release(12 * block));       // free
  EXPECT_FALSE(t.tree.release(8 * block + 4096)); // not a block boundary
  EXPECT_FALSE(t.tree.release(3 * vablock_bytes));
  EXPECT_FALSE(t.tree.release(no_offset));
  EXPECT_EQ(t.storage, before);
  EXPECT_TRUE(t.tree.release(8 * block));
  EXPECT_FALSE(t.tree.release(8 * block));  // double free
}

TEST(PortionTree, TooLittleStorageGivesAnEmptyTreeThatTouchesNothing) {
  std::vector<std::uint64_t> storage(PortionTree::storage_words(4) - 1, 7);
  const std::vector<std::uint64_t> before = storage;
  PortionTree tree(storage.data(), storage.size(), 4);
  EXPECT_EQ(tree.capacity_bytes(), 0u);
  EXPECT_FALSE(tree.allocate(1).ok());
  EXPECT_FALSE(tree.release(0));
  EXPECT_FALSE(tree.is_free(0));
  EXPECT_EQ(storage, before);
}

TEST(PortionTree, PaperSpaceFillsEmptiesAndRefills) {
  Tree t(PortionTree::paper_vablocks);
  EXPECT_EQ(t.tree.capacity_bytes(), std::uint64_t{4} << 30);  // 2048 VABlocks, 4 GB
  std::vector<std::uint64_t> offsets;
  for (Portion p = t.tree.allocate(64 * kb); p.ok(); p = t.tree.allocate(64 * kb)) {
    ASSERT_EQ(p.offset, offsets.size() * 2 * block);  // every other block, padding between
    offsets.push_back(p.offset);
  }
  EXPECT_EQ(offsets.size(), std::size_t{2048} * 16);
  EXPECT_EQ(t.tree.free_bytes(), 0u);
  for (std::uint64_t offset : offsets) ASSERT_TRUE(t.tree.release(offset));
  EXPECT_EQ(t.tree.free_bytes(), t.tree.capacity_bytes());
  for (std::uint64_t v = 0; v < PortionTree::paper_vablocks; ++v)
    ASSERT_EQ(t.tree.allocate(2048 * kb).offset, v * vablock_bytes);
  EXPECT_FALSE(t.tree.allocate(1).ok());
}

TEST(PortionTree, MatchesReferenceOverRandomSequences) {
  for (std::uint32_t vablocks : {1u, 3u, 4u, 5u, 64u}) {
    SCOPED_TRACE(vablocks);
    std::mt19937_64 rng(vablocks);
    Tree t(vablocks);
    RandomRun run(t.tree, vablocks);
    for (int step = 0; step < 20000; ++step) {
      if (rng() % 8 < 5)
        ASSERT_NO_FATAL_FAILURE(run.allocate(rng));
      else
        ASSERT_NO_FATAL_FAILURE(run.release(rng));
      ASSERT_EQ(t.tree.free_bytes(), run.ref.free_blocks() * block);
    }
    ASSERT_NO_FATAL_FAILURE(run.expect_same_blocks());
  }
}

TEST(PortionTree, ClosedVABlocksHoldNothingUntilOpenedAndCloseOnlyWhenEmpty) {
  std::vector<std::uint64_t> storage(PortionTree::storage_words(4));
  PortionTree tree(storage.data(), storage.size(), 4, 1);
  EXPECT_EQ(tree.capacity_bytes(), 4 * vablock_bytes);
  EXPECT_EQ(tree.free_bytes(), vablock_bytes) << "only VABlock 0 is open";
  EXPECT_EQ(tree.allocate(vablock_bytes).offset, 0u);
  EXPECT_FALSE(tree.allocate(1).ok()) << "closed VABlocks take nothing";
  EXPECT_FALSE(tree.is_free(vablock_bytes));
  const std::vector<std::uint64_t> before = storage;
  EXPECT_FALSE(tree.close_vablock(0)) << "it holds a portion";
  EXPECT_FALSE(tree.open_vablock(0)) << "open already";
  EXPECT_FALSE(tree.close_vablock(1)) << "closed already";
  EXPECT_FALSE(tree.open_vablock(4)) << "past the tree";
  EXPECT_FALSE(tree.close_vablock(4));
  EXPECT_EQ(storage, before) << "refused calls change nothing";

  ASSERT_TRUE(tree.open_vablock(2));
  EXPECT_FALSE(tree.open_vablock(2)) << "open already";
  EXPECT_EQ(tree.free_bytes(), vablock_bytes);
  const Portion small = tree.allocate(64 * kb);
  EXPECT_EQ(small.offset, 2 * vablock_bytes);
  EXPECT_FALSE(tree.close_vablock(2));
  ASSERT_TRUE(tree.release(small.offset));
  ASSERT_TRUE(tree.close_vablock(2));
  EXPECT_EQ(tree.free_bytes(), 0u);
  EXPECT_FALSE(tree.allocate(1).ok());
  ASSERT_TRUE(tree.release(0));
  ASSERT_TRUE(tree.close_vablock(0)) << "the constructor's open VABlocks close too";
  for (std::uint32_t v = 0; v < 4; ++v) ASSERT_TRUE(tree.open_vablock(v));
  EXPECT_EQ(tree.allocate(1 * 1024 * kb).offset, 0u);  // 1 MB: a whole VABlock reserved
  EXPECT_EQ(tree.allocate(1 * 1024 * kb).offset, vablock_bytes) << "VABlocks 0 and 1, once closed, join again";
  EXPECT_EQ(tree.allocate(3 * 64 * kb).offset, 2 * vablock_bytes);
}

/// Random allocations, releases, openings and closings against the reference, where a closed
/// VABlock counts as reserved whole.
TEST(PortionTree, OpeningAndClosingMatchesReferenceOverRandomSequences) {
  for (std::uint32_t vablocks : {1u, 5u, 16u}) {
    SCOPED_TRACE(vablocks);
    std::mt19937_64 rng(vablocks + 100);
    std::vector<std::uint64_t> storage(PortionTree::storage_words(vablocks));
    PortionTree tree(storage.data(), storage.size(), vablocks, vablocks / 2);
    RandomRun run(tree, vablocks);
    std::vector<bool> open(vablocks, false);
    for (std::uint32_t v = 0; v < vablocks; ++v) {
      open[v] = v < vablocks / 2;
      if (!open[v]) run.ref.assign(std::uint64_t{v} * 32, 32, true);
    }
    std::uint64_t opened = 0, closed = 0;
    for (int step = 0; step < 20000; ++step) {
      const std::uint64_t op = rng() % 16;
      if (op < 2) {
        const auto v = static_cast<std::uint32_t>(rng() % vablocks);
        ASSERT_EQ(tree.open_vablock(v), !open[v]);
        if (!open[v]) {
          open[v] = true;
          ++opened;
          run.ref.assign(std::uint64_t{v} * 32, 32, false);
        }
      } else if (op < 4) {
        const auto v = static_cast<std::uint32_t>(rng() % vablocks);
        const bool closes = open[v] && run.live_in[v] == 0;
        ASSERT_EQ(tree.close_vablock(v), closes);
        if (closes) {
          open[v] = false;
          ++closed;
          run.ref.assign(std::uint64_t{v} * 32, 32, true);
        }
      } else if (op < 10) {
        ASSERT_NO_FATAL_FAILURE(run.allocate(rng));
      } else {
        ASSERT_NO_FATAL_FAILURE(run.release(rng));
      }
      ASSERT_EQ(tree.free_bytes(), run.ref.free_blocks() * block);
    }
    EXPECT_GT(opened, 10u);
    EXPECT_GT(closed, 10u);
    ASSERT_NO_FATAL_FAILURE(run.expect_same_blocks());
  }
}

/// Eq. 3: for any two warptrees, the subtrees under their roots' parents do not overlap.
TEST(PortionTree, ReservedSubtreesNeverOverlap) {
  std::mt19937_64 rng(3);
  Tree t(8);
  std::vector<Portion> live;
  for (int step = 0; step < 4000; ++step) {
    if (rng() % 3 != 0) {
      const Portion p = t.tree.allocate(1 + rng() % (std::uint64_t{64 * kb} << (rng() % 6)));
      if (!p.ok()) continue;
      for (const Portion& other : live) {
        const bool disjoint =
            p.offset + p.reserved_bytes <= other.offset || other.offset + other.reserved_bytes <= p.offset;
        ASSERT_TRUE(disjoint) << p.offset << " and " << other.offset;
      }
      live.push_back(p);
    } else if (!live.empty()) {
      const std::size_t i = rng() % live.size();
      ASSERT_TRUE(t.tree.release(live[i].offset));
      live[i] = live.back();
      live.pop_back();
    }
  }
}

/// The 64 KB blocks [first, first + count) as pages of a VABlock.
BlockMask blocks_of(std::uint64_t first, std::uint64_t count) {
  BlockMask m;
  m.fill(static_cast<unsigned>(first * uvm_big_page_pages), static_cast<unsigned>(count * uvm_big_page_pages));
  return m;
}

TEST(PortionTree, DenseWarpsLeakPrefetchesWarptreesDoNot) {
  // Section V-B: warp A owns three blocks, warp B the fourth. Packed densely, A's faults make
  // the 4-block subtree 75% present and UVM pulls in B's block.
  const BlockMask a_dense = blocks_of(0, 3);
  EXPECT_TRUE(uvm_prefetch_pages({}, a_dense, 50).any_in(3 * uvm_big_page_pages, uvm_big_page_pages));
  // Placed by the PortionTree, the same faults stay in A's warptree.
  Tree t(1);
  const Portion a = t.tree.allocate(3 * block);
  const Portion b = t.tree.allocate(1 * block);
  const BlockMask a_faults = blocks_of(a.offset / block, 3);
  const BlockMask prefetched = uvm_prefetch_pages({}, a_faults, 50);
  EXPECT_TRUE(prefetched.any_in(static_cast<unsigned>(a.offset / block * 16), 64));  // A's fourth block comes along
  EXPECT_FALSE(prefetched.any_in(static_cast<unsigned>(b.offset / block * 16), 16));
  EXPECT_EQ(prefetched.without(blocks_of(a.offset / block, a.bytes / block)).count(), 0u);
}

TEST(PortionTree, PrefetchNeverCrossesIntoAnotherWarp) {
  // Warps fault on random pages of their own warptrees, one batch at a time, with UVM's tree
  // prefetcher at the paper's 50%. Whatever is already present, no batch ever brings in a
  // page outside the faulting warp's warptree: neither another warp's nor padding.
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    Tree t(1);
    std::vector<Portion> warps;
    const auto request = [&] { return 1 + rng() % (std::uint64_t{64 * kb} << (rng() % 6)); };
    for (Portion p = t.tree.allocate(request()); p.ok(); p = t.tree.allocate(request()))
      warps.push_back(p);
    BlockMask resident;
    for (int batch = 0; batch < 64; ++batch) {
      const Portion& w = warps[rng() % warps.size()];
      const unsigned first = static_cast<unsigned>(w.offset / 4096);
      const unsigned pages = static_cast<unsigned>(w.bytes / 4096);
      BlockMask faults;
      for (unsigned n = 1 + rng() % 8; n > 0; --n) faults.set(first + static_cast<unsigned>(rng() % pages));
      const BlockMask prefetched = uvm_prefetch_pages(resident, faults, 50);
      const BlockMask own = blocks_of(w.offset / block, w.bytes / block);
      ASSERT_EQ(prefetched.without(own).count(), 0u) << "round " << round << " batch " << batch;
      resident |= faults;
      resident |= prefetched;
    }
  }
}

}  // namespace
}  // namespace warpvm::detail
