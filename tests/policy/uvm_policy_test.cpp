// UVM's policy as the open driver states it: the tree-based prefetcher, batch formation with
// duplicates dropped, and 2 MB chunk eviction in order of the last migration (a chunk that fails
// to evict goes back as the newest); and the host_batched transport's eviction orders, carried
// out or withdrawn, under real threads.

#include "warpvm/detail/policy/eviction_order.hpp"
#include "warpvm/detail/policy/uvm_prefetch.hpp"
#include "warpvm/detail/policy/uvm_model.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

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
  detail::UvmModel uvm(/*chunks=*/8);
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
  detail::UvmModel uvm(/*chunks=*/8, /*prefetch=*/false);
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
  detail::UvmModel uvm(/*chunks=*/2, /*prefetch=*/false, /*batch_size=*/1);
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
  detail::UvmModel plain(/*chunks=*/4, /*prefetch=*/false);
  const detail::UvmPlan one = plain.service({515, 3, 515});  // page 3 of block 0, page 3 of block 1 twice
  EXPECT_EQ(one.batch.faults, 3u);
  EXPECT_EQ(one.batch.unique_faults, 2u);
  ASSERT_EQ(one.migrations.size(), 2u);
  EXPECT_EQ(one.migrations[0].block, 0u);
  EXPECT_EQ(one.migrations[0].pages.count(), 1u);
  EXPECT_TRUE(one.migrations[0].pages.test(3));
  EXPECT_EQ(one.migrations[1].block, 1u);
  EXPECT_TRUE(plain.resident_pages(1).test(3));
  EXPECT_TRUE(plain.service({3}).migrations.empty());  // resident already: nothing to copy

  detail::UvmModel prefetching(/*chunks=*/4, /*prefetch=*/true);
  const detail::UvmPlan big = prefetching.service({20});
  ASSERT_EQ(big.migrations.size(), 1u);
  EXPECT_EQ(big.migrations[0].pages.count_in(16, 16), 16u);  // the faulted page and its 64 KB big page
  EXPECT_EQ(big.migrations[0].pages.count(), 16u);
  EXPECT_EQ(big.batch.pages_faulted, 1u);
  EXPECT_EQ(big.batch.pages_prefetched, 15u);
}

TEST(UvmModel, PlanNamesTheEvictedChunkAndForgottenBlocksFreeTheirs) {
  detail::UvmModel uvm(/*chunks=*/1, /*prefetch=*/false);
  (void)uvm.service({1, 2});
  const detail::UvmPlan second = uvm.service({512});
  ASSERT_EQ(second.evictions.size(), 1u);
  EXPECT_EQ(second.evictions[0].block, 0u);
  EXPECT_EQ(second.evictions[0].pages.count(), 2u);
  uvm.forget_blocks([](std::uint64_t block) { return block == 1; });
  EXPECT_EQ(uvm.chunks_in_use(), 0u);
  EXPECT_TRUE(uvm.service({1024}).evictions.empty());  // the forgotten block's chunk was free
  EXPECT_FALSE(uvm.resident(512));
}

TEST(UvmModel, AChunkThatFailedToEvictIsResidentAgainAndTheNextOldestGoes) {
  detail::UvmModel uvm(/*chunks=*/3, /*prefetch=*/false);
  const std::uint64_t a = 0, b = 512, c = 1024, d = 1536;  // first pages of four blocks
  (void)uvm.service({a, a + 7});
  (void)uvm.service({b});
  (void)uvm.service({c});
  const detail::UvmPlan full = uvm.service({d});  // A, migrated into longest ago, is the victim
  ASSERT_EQ(full.evictions.size(), 1u);
  ASSERT_EQ(full.evictions[0].block, 0u);
  EXPECT_EQ(uvm.chunks_in_use(), 3u);

  // A's pages stayed held on the GPU: A is resident again with them, and B (now the oldest)
  // gives up its chunk in A's place.
  const std::vector<detail::BlockPages> instead = uvm.eviction_failed(0, full.evictions[0].pages);
  ASSERT_EQ(instead.size(), 1u);
  EXPECT_EQ(instead[0].block, 1u);
  EXPECT_TRUE(instead[0].pages.test(0));
  EXPECT_TRUE(uvm.resident(a));
  EXPECT_TRUE(uvm.resident(a + 7));
  EXPECT_FALSE(uvm.resident(b));
  EXPECT_EQ(uvm.chunks_in_use(), 3u);

  // A counts as touched now: C and D were migrated into before it, so they go first.
  const std::uint64_t e = 2048, f = 2560, g = 3072;
  ASSERT_EQ(uvm.service({e}).evictions.at(0).block, 2u);
  ASSERT_EQ(uvm.service({f}).evictions.at(0).block, 3u);
  EXPECT_EQ(uvm.service({g}).evictions.at(0).block, 0u);
}

TEST(UvmModel, AFailedEvictionOfABlockMigratedIntoAgainKeepsBothItsPageSets) {
  detail::UvmModel uvm(/*chunks=*/2, /*prefetch=*/false);
  (void)uvm.service({3});
  (void)uvm.service({512});
  const detail::UvmPlan evicting = uvm.service({1024});  // block 0 goes
  ASSERT_EQ(evicting.evictions.size(), 1u);
  const detail::UvmPlan back = uvm.service({9});  // block 0 faults again before its eviction is done: block 1 goes
  ASSERT_EQ(back.evictions.size(), 1u);
  EXPECT_EQ(back.evictions[0].block, 1u);
  // The first eviction fails: block 0 already has a chunk again, so nothing more is evicted.
  EXPECT_TRUE(uvm.eviction_failed(0, evicting.evictions[0].pages).empty());
  EXPECT_TRUE(uvm.resident(3));
  EXPECT_TRUE(uvm.resident(9));
  EXPECT_EQ(uvm.chunks_in_use(), 2u);
  // And it is the newest: block 2 (migrated into before) is the next victim.
  EXPECT_EQ(uvm.service({1536}).evictions.at(0).block, 2u);
}

/// One order over `pages` page words, run by threads standing for warps of one lane: takers
/// pass over it, `holders` threads hold and release its pages (and, with `pin`, page 0 stays
/// held until the order is acknowledged, like a span across a fault), and the host asks for a
/// withdrawal after `cancel_after`.
struct OrderRun {
  std::uint64_t order;
  std::uint32_t holders;
  bool pin;
  std::chrono::microseconds cancel_after;
  std::uint32_t seed;
};

struct OrderOutcome {
  int acknowledgements = 0;
  std::uint64_t sequence = 0;
  std::uint64_t progress = 0;
  int held_while_not_resident = 0;  // a holder saw its page BUSY or absent under its hold
  std::vector<std::uint32_t> words;
};

OrderOutcome run_order(const OrderRun& run) {
  namespace order = eviction_order;
  constexpr std::uint32_t pages = 64;
  const std::uint64_t o = run.order;
  OrderOutcome out;
  out.words.assign(pages, page_word::valid);
  out.progress = order::initial_progress(o);
  std::atomic<bool> cancel{false};
  std::atomic<int> acknowledgements{0};
  std::atomic<std::uint64_t> sequence{0};
  std::atomic<int> bad_holds{0};
  auto acknowledge = [&](order::Finished how) {
    if (how == order::Finished::nothing) return;
    acknowledgements.fetch_add(1);
    sequence.store(order::ack_sequence(o, how));
  };
  auto done = [&] { return sequence.load() != 0; };

  auto holder = [&](std::uint32_t seed) {
    std::mt19937 random(seed);
    while (!done()) {
      std::uint32_t& word = out.words[random() % pages];
      if (!page_try_hold_resident(word, 1)) continue;
      if (!page_word::is_resident(page_load(word))) bad_holds.fetch_add(1);
      std::this_thread::yield();
      page_release(word, 1);
    }
  };
  auto pinner = [&] {  // holds page 0 from before the takers start until the acknowledgement
    while (!done()) std::this_thread::yield();
    page_release(out.words[0], 1);
  };
  auto taker = [&] {
    const std::uint32_t taken = order::page_taken_by(o);
    const std::uint32_t counted = taken | order::page_counted;
    while (!done()) {
      if (cancel.load()) {
        order::Finished how = order::Finished::nothing;
        const bool withdrawn = order::try_withdraw(out.progress, o, pages, how);
        acknowledge(how);
        if (withdrawn) {
          std::uint32_t given_back = 0;
          for (std::uint32_t& word : out.words) given_back += order::try_give_back(word, counted) ? 1u : 0u;
          if (given_back != 0) acknowledge(order::add_progress(out.progress, pages, given_back * order::returned_one));
          std::this_thread::yield();
          continue;
        }
      }
      for (std::uint32_t& word : out.words) {
        if (!order::try_take(word, taken)) continue;
        if (!order::count_taken(out.progress, o, pages, 1)) {
          EXPECT_TRUE(order::try_give_back(word, taken));  // an uncounted take is its taker's alone
          break;
        }
        order::mark_counted(word, taken);
        acknowledge(order::add_progress(out.progress, pages, order::marked_one));
      }
      std::this_thread::yield();
    }
  };

  std::vector<std::thread> threads;
  for (std::uint32_t h = 0; h < run.holders; ++h) threads.emplace_back(holder, run.seed + h);
  if (run.pin) {
    EXPECT_TRUE(page_try_hold_resident(out.words[0], 1));
    threads.emplace_back(pinner);
  }
  for (int t = 0; t < 3; ++t) threads.emplace_back(taker);
  std::this_thread::sleep_for(run.cancel_after);
  cancel.store(true);
  for (std::thread& t : threads) t.join();
  out.acknowledgements = acknowledgements.load();
  out.sequence = sequence.load();
  out.held_while_not_resident = bad_holds.load();
  return out;
}

TEST(EvictionOrder, IsCarriedOutOrWithdrawnOnceAndNoHolderIsLost) {
  namespace order = eviction_order;
  std::mt19937 random(std::random_device{}());
  int withdrawals = 0;
  int evictions = 0;
  for (int trial = 0; trial < 60; ++trial) {
    // Pinned (must be withdrawn), contended, or alone (mostly carried out, or racing the withdrawal).
    const OrderRun run{(std::uint64_t{1} << 33) + static_cast<std::uint64_t>(trial) * 977, trial % 3 == 2 ? 0u : 2u,
                       trial % 3 == 0, std::chrono::microseconds(random() % 300), static_cast<std::uint32_t>(random())};
    const OrderOutcome out = run_order(run);
    SCOPED_TRACE("trial " + std::to_string(trial) + (run.pin ? ", pinned" : "") + ", seed " + std::to_string(run.seed));
    ASSERT_EQ(out.acknowledgements, 1);
    EXPECT_EQ(out.held_while_not_resident, 0);
    if (out.sequence == order::ack_sequence(run.order, order::Finished::evicted)) {
      ++evictions;
      EXPECT_FALSE(order::is_withdrawn(out.progress));
      EXPECT_EQ(order::marked(out.progress), 64u);
      for (const std::uint32_t w : out.words) EXPECT_EQ(w, order::page_taken_by(run.order) | order::page_counted);
    } else {
      ASSERT_EQ(out.sequence, order::ack_sequence(run.order, order::Finished::withdrawn));
      ++withdrawals;
      EXPECT_TRUE(order::is_withdrawn(out.progress));
      EXPECT_EQ(order::returned(out.progress), order::taken(out.progress));
      // Every page resident again, no holder left over and none lost (a lost holder's release
      // would have taken the word below VALID).
      for (const std::uint32_t w : out.words) EXPECT_EQ(w, page_word::valid);
      // A taker that read the order before the acknowledgement comes too late: its take is
      // refused and given back, and the progress word no longer changes.
      std::vector<std::uint32_t> words = out.words;
      std::uint64_t progress = out.progress;
      ASSERT_TRUE(order::try_take(words[5], order::page_taken_by(run.order)));
      EXPECT_FALSE(order::count_taken(progress, run.order, 64, 1));
      EXPECT_TRUE(order::try_give_back(words[5], order::page_taken_by(run.order)));
      order::Finished how = order::Finished::nothing;
      EXPECT_TRUE(order::try_withdraw(progress, run.order, 64, how));
      EXPECT_EQ(how, order::Finished::nothing);
      EXPECT_EQ(progress, out.progress);
      EXPECT_EQ(words, out.words);
    }
    if (run.pin) {
      EXPECT_EQ(out.sequence, order::ack_sequence(run.order, order::Finished::withdrawn)) << "page 0 was pinned";
    }
  }
  EXPECT_GT(withdrawals, 0);
  std::printf("eviction orders: %d carried out, %d withdrawn\n", evictions, withdrawals);
}

}  // namespace
}  // namespace warpvm::detail
