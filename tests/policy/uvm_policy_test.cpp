// UVM's policy as the open driver states it: the tree-based prefetcher, batch formation with
// duplicates dropped, and 2 MB chunk eviction in order of the last migration.

#include "warpvm/detail/policy/uvm_prefetch.hpp"
#include "warpvm/sim/uvm_model.hpp"

#include <gtest/gtest.h>

namespace warpvm::detail {
namespace {

BlockMask pages(std::initializer_list<unsigned> list) {
  BlockMask m;
  for (unsigned p : list) m.set(p);
  return m;
}

TEST(UvmPrefetch, OneFaultInAnEmptyBlockFillsItsBigPage) {
  const BlockMask prefetch = uvm_prefetch_pages({}, pages({20}));
  EXPECT_EQ(prefetch.count(), 15u);
  EXPECT_EQ(prefetch.count_in(16, 16), 15u);
  EXPECT_FALSE(prefetch.test(20));  // the faulted page migrates as a fault, not a prefetch
}

TEST(UvmPrefetch, LargestQualifyingAncestorWins) {
  // Big pages 0 and 16 make the 32-page subtree full; the 64-page one is only 50% present.
  EXPECT_EQ(uvm_prefetch_pages({}, pages({0, 16})).count(), 30u);
  // Three big pages: 48 of 64 present qualifies; 48 of 128 does not.
  const BlockMask three = uvm_prefetch_pages({}, pages({0, 16, 32}));
  EXPECT_EQ(three.count(), 61u);
  EXPECT_EQ(three.count_in(0, 64), 61u);
}

TEST(UvmPrefetch, ThresholdIsStrict) {
  // A lone big page is exactly 50% of its 32-page parent: not more than 50%, so not taken.
  EXPECT_EQ(uvm_prefetch_pages({}, pages({0}), 50).count(), 15u);
  EXPECT_EQ(uvm_prefetch_pages({}, pages({0}), 49).count(), 31u);
}

TEST(UvmPrefetch, ResidentPagesCountTowardTheTree) {
  BlockMask resident;
  resident.fill(0, 256);
  // 256 resident + a 16-page big page around the fault = 272 of 512 > 51%: the whole block.
  const BlockMask prefetch = uvm_prefetch_pages(resident, pages({256}));
  EXPECT_EQ(prefetch.without(resident).count(), 255u);
}

TEST(UvmModel, DuplicatesAreDroppedWithinABatch) {
  sim::UvmModel uvm(/*chunks=*/8);
  for (int warp = 0; warp < 10; ++warp) uvm.access(7);
  uvm.drain();
  ASSERT_EQ(uvm.batches().size(), 1u);
  EXPECT_EQ(uvm.batches()[0].faults, 10u);
  EXPECT_EQ(uvm.batches()[0].unique_faults, 1u);
  EXPECT_EQ(uvm.batches()[0].pages_faulted, 1u);
  EXPECT_EQ(uvm.batches()[0].pages_prefetched, 15u);
  uvm.access(8);  // prefetched: a hit
  EXPECT_EQ(uvm.hits(), 1u);
}

TEST(UvmModel, BatchesTakeAtMost256FaultsAndServicePerBlock) {
  sim::UvmModel uvm(/*chunks=*/8, /*prefetch=*/false);
  for (std::uint64_t p = 0; p < 300; ++p) uvm.access(p * 3);  // 900 pages: blocks 0 and 1
  uvm.drain();
  ASSERT_EQ(uvm.batches().size(), 2u);
  EXPECT_EQ(uvm.batches()[0].faults, 256u);
  EXPECT_EQ(uvm.batches()[0].blocks, 2u);  // pages 0..765 span blocks 0 and 1
  EXPECT_EQ(uvm.batches()[1].faults, 44u);
  EXPECT_EQ(uvm.batches()[1].blocks, 1u);
  EXPECT_EQ(uvm.batches()[0].pages_faulted + uvm.batches()[1].pages_faulted, 300u);
}

TEST(UvmModel, EvictsTheChunkMigratedIntoLongestAgoEvenIfUsedSince) {
  sim::UvmModel uvm(/*chunks=*/2, /*prefetch=*/false, /*batch_size=*/1);
  const std::uint64_t a = 0, b = 512, c = 1024, d = 1536;  // first pages of four blocks
  uvm.access(a);
  uvm.access(b);
  uvm.access(c);  // full: A (oldest migration) goes
  EXPECT_FALSE(uvm.resident(a));
  EXPECT_TRUE(uvm.resident(b));
  uvm.access(b);  // a GPU access, not a migration: the driver's order does not change
  uvm.access(d);  // B was migrated into before C: B goes
  EXPECT_FALSE(uvm.resident(b));
  EXPECT_TRUE(uvm.resident(c));
  EXPECT_TRUE(uvm.resident(d));
  EXPECT_EQ(uvm.chunks_in_use(), 2u);
  std::uint32_t evicted = 0;
  for (const auto& batch : uvm.batches()) evicted += batch.chunks_evicted;
  EXPECT_EQ(evicted, 2u);
}

TEST(UvmModel, ServicePlansTheCopiesOfFaultedAndPrefetchedPages) {
  sim::UvmModel plain(/*chunks=*/4, /*prefetch=*/false);
  const sim::UvmPlan one = plain.service({515, 3, 515});  // page 3 of block 0, page 3 of block 1 twice
  EXPECT_EQ(one.batch.faults, 3u);
  EXPECT_EQ(one.batch.unique_faults, 2u);
  ASSERT_EQ(one.migrations.size(), 2u);
  EXPECT_EQ(one.migrations[0].block, 0u);
  EXPECT_EQ(one.migrations[0].pages.count(), 1u);
  EXPECT_TRUE(one.migrations[0].pages.test(3));
  EXPECT_EQ(one.migrations[1].block, 1u);
  EXPECT_TRUE(plain.resident_pages(1).test(3));
  EXPECT_TRUE(plain.service({3}).migrations.empty());  // resident already: nothing to copy

  sim::UvmModel prefetching(/*chunks=*/4, /*prefetch=*/true);
  const sim::UvmPlan big = prefetching.service({20});
  ASSERT_EQ(big.migrations.size(), 1u);
  EXPECT_EQ(big.migrations[0].pages.count_in(16, 16), 16u);  // the faulted page and its 64 KB big page
  EXPECT_EQ(big.migrations[0].pages.count(), 16u);
  EXPECT_EQ(big.batch.pages_faulted, 1u);
  EXPECT_EQ(big.batch.pages_prefetched, 15u);
}

TEST(UvmModel, PlanNamesTheEvictedChunkAndForgottenBlocksFreeTheirs) {
  sim::UvmModel uvm(/*chunks=*/1, /*prefetch=*/false);
  (void)uvm.service({1, 2});
  const sim::UvmPlan second = uvm.service({512});
  ASSERT_EQ(second.evictions.size(), 1u);
  EXPECT_EQ(second.evictions[0].block, 0u);
  EXPECT_EQ(second.evictions[0].pages.count(), 2u);
  uvm.forget_blocks([](std::uint64_t block) { return block == 1; });
  EXPECT_EQ(uvm.chunks_in_use(), 0u);
  EXPECT_TRUE(uvm.service({1024}).evictions.empty());  // the forgotten block's chunk was free
  EXPECT_FALSE(uvm.resident(512));
}

}  // namespace
}  // namespace warpvm::detail
