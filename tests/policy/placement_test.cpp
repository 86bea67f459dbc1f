// Placement across GPUs (issue #6): the directory transitions of the three page policies, the
// access counters, OASIS's O-Table state diagram, their atomic forms under real threads, pages
// placed on GPUs before use (another GPU's write takes them, never shared by placement alone), and a
// randomized differential test against a set-based reference model.

#include "warpvm/detail/policy/placement.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace warpvm::detail {
namespace {

/// A policy source that must not be consulted (hits and first touches).
struct NeverAsked {
  int* calls;
  PagePolicy operator()(bool) const {
    ++*calls;
    return PagePolicy::on_touch;
  }
};

struct Fixed {
  PagePolicy policy;
  int* calls;
  PagePolicy operator()(bool) const {
    ++*calls;
    return policy;
  }
};

/// decide + apply for one access; returns the decision.
Decision access(DirectoryEntry& e, unsigned gpu, bool write, PagePolicy policy, int* calls, Effects* fx = nullptr) {
  const Decision d = decide(e, gpu, write, Fixed{policy, calls});
  const Effects done = apply(e, gpu, d.action);
  if (fx != nullptr) *fx = done;
  EXPECT_TRUE(directory_valid(e));
  return d;
}

std::uint64_t bit(unsigned g) { return std::uint64_t{1} << g; }

// ---- directory transitions ------------------------------------------------------------------

TEST(Placement, FirstTouchIsPrivateOnTouchAndSkipsTheObject) {
  DirectoryEntry e;
  EXPECT_EQ(e.state(), PageState::host);
  int calls = 0;
  const Decision d = decide(e, 1, true, NeverAsked{&calls});
  EXPECT_EQ(d.action, Action::fetch_from_host);
  EXPECT_EQ(d.fault, PlacementFault::first_touch);
  EXPECT_EQ(calls, 0);
  const Effects fx = apply(e, 1, d.action);
  EXPECT_TRUE(fx.pulled);
  EXPECT_EQ(fx.source, owner_host);
  EXPECT_EQ(e.owner, 1);
  EXPECT_EQ(e.state(), PageState::exclusive);
  // The owner's later reads and writes hit without asking the object.
  EXPECT_EQ(decide(e, 1, false, NeverAsked{&calls}).action, Action::local);
  EXPECT_EQ(decide(e, 1, true, NeverAsked{&calls}).action, Action::local);
  EXPECT_EQ(calls, 0);
}

/// A page as place_on_gpus() leaves it on GPU `g`.
DirectoryEntry placed_on(unsigned g) {
  DirectoryEntry e;
  apply(e, g, Action::fetch_from_host);
  e.placed = 1;
  EXPECT_TRUE(directory_valid(e));
  return e;
}

TEST(Placement, AnotherGpusWriteTakesAPlacedPageAsAFirstTouch) {
  int calls = 0;
  DirectoryEntry taken = placed_on(3);
  // The owner's accesses are hits (the device never asks the directory for them).
  EXPECT_EQ(decide(taken, 3, false, NeverAsked{&calls}).action, Action::local);
  EXPECT_EQ(decide(taken, 3, true, NeverAsked{&calls}).action, Action::local);
  const Decision d = decide(taken, 5, true, NeverAsked{&calls});
  EXPECT_EQ(d.action, Action::take_placed);
  EXPECT_EQ(d.fault, PlacementFault::first_touch);
  const Effects fx = apply(taken, 5, d.action);
  EXPECT_TRUE(fx.pulled);
  EXPECT_EQ(fx.source, 3);
  EXPECT_EQ(fx.invalidated, 1u);
  EXPECT_EQ(taken.owner, 5);
  EXPECT_EQ(taken.placed, 0);
  EXPECT_EQ(taken.shared, 0) << "a taken page is private: its next foreign fault is shared, not before";
  EXPECT_EQ(calls, 0) << "the object is not asked";
  EXPECT_EQ(decide(taken, 3, false, Fixed{PagePolicy::duplication, &calls}).fault, PlacementFault::shared);
  EXPECT_EQ(calls, 1);
}

TEST(Placement, TheOwnersFirstWriteEndsThePlacementSoAnotherGpusWriteIsShared) {
  DirectoryEntry e = placed_on(3);
  EXPECT_FALSE(owner_write_ends_placement(e, 5)) << "only the owner's write ends it";
  EXPECT_EQ(e.placed, 1);
  EXPECT_TRUE(owner_write_ends_placement(e, 3));
  EXPECT_EQ(e.placed, 0);
  EXPECT_EQ(e.owner, 3) << "nothing moves";
  EXPECT_FALSE(owner_write_ends_placement(e, 3)) << "once";
  EXPECT_TRUE(directory_valid(e));
  int calls = 0;
  const Decision d = decide(e, 5, true, Fixed{PagePolicy::access_counter, &calls});
  EXPECT_EQ(d.fault, PlacementFault::shared);
  EXPECT_EQ(d.action, Action::map_remote);
  EXPECT_EQ(calls, 1) << "the object learns from a write to a page its owner uses";
}

TEST(Placement, AnotherGpusReadOfAPlacedPageIsASharedFaultThatEndsThePlacement) {
  for (const PagePolicy policy : {PagePolicy::on_touch, PagePolicy::access_counter, PagePolicy::duplication}) {
    SCOPED_TRACE(to_string(policy));
    int calls = 0;
    DirectoryEntry e = placed_on(3);
    const Decision d = access(e, 5, false, policy, &calls);
    EXPECT_EQ(d.fault, PlacementFault::shared);
    EXPECT_EQ(calls, 1) << "the object is asked, as for any page another GPU holds";
    EXPECT_EQ(e.placed, 0);
    EXPECT_EQ(e.shared, 1);
  }
}

TEST(Placement, APlacedPageIsOnlyExclusiveAndAnEvictionUnplacesIt) {
  DirectoryEntry e = placed_on(2);
  e.replicas = bit(1);
  EXPECT_FALSE(directory_valid(e)) << "a placed page has no replicas";
  e.replicas = 0;
  e.remote = bit(1);
  EXPECT_FALSE(directory_valid(e)) << "nor remote mappers";
  DirectoryEntry on_host;
  on_host.placed = 1;
  EXPECT_FALSE(directory_valid(on_host)) << "nor is it on the host";
  DirectoryEntry evicted = placed_on(2);
  const EvictEffects fx = evict_copy(evicted, 2);
  EXPECT_TRUE(fx.to_host);
  EXPECT_EQ(evicted.placed, 0);
  EXPECT_TRUE(directory_valid(evicted));
  int calls = 0;
  EXPECT_EQ(decide(evicted, 2, false, NeverAsked{&calls}).action, Action::fetch_from_host) << "a first touch again";
}

TEST(Placement, OnTouchMovesThePageAndInvalidatesTheOldMapping) {
  DirectoryEntry e;
  int calls = 0;
  access(e, 0, false, PagePolicy::on_touch, &calls);
  Effects fx;
  const Decision d = access(e, 1, false, PagePolicy::on_touch, &calls, &fx);
  EXPECT_EQ(d.action, Action::migrate);
  EXPECT_EQ(d.fault, PlacementFault::shared);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(e.owner, 1);
  EXPECT_TRUE(fx.pulled);
  EXPECT_EQ(fx.source, 0);
  EXPECT_EQ(fx.invalidated, 1u);
  EXPECT_FALSE(e.has_copy(0));
  // Ping-pong: GPU 0 takes it back.
  EXPECT_EQ(access(e, 0, true, PagePolicy::on_touch, &calls).action, Action::migrate);
  EXPECT_EQ(e.owner, 0);
}

TEST(Placement, AccessCounterMapsTheOwnersFrameRemotely) {
  DirectoryEntry e;
  int calls = 0;
  access(e, 0, false, PagePolicy::access_counter, &calls);
  Effects fx;
  const Decision d = access(e, 1, true, PagePolicy::access_counter, &calls, &fx);
  EXPECT_EQ(d.action, Action::map_remote);
  EXPECT_TRUE(access_goes_remote(d.action));
  EXPECT_FALSE(fx.pulled);
  EXPECT_EQ(e.owner, 0);
  EXPECT_EQ(e.remote, bit(1));
  // Later reads and writes by GPU 1 go remote without a fault.
  EXPECT_EQ(decide(e, 1, false, NeverAsked{&calls}).action, Action::remote);
  EXPECT_EQ(decide(e, 1, true, NeverAsked{&calls}).action, Action::remote);
  EXPECT_EQ(calls, 1);
  // The counter reached: the page moves to GPU 1 and nobody else maps it.
  fx = apply(e, 1, Action::counter_migrate);
  EXPECT_EQ(e.owner, 1);
  EXPECT_EQ(e.remote, 0u);
  EXPECT_TRUE(fx.pulled);
  EXPECT_EQ(fx.invalidated, 1u);  // the old owner's copy
}

TEST(Placement, AccessCounterCountsPerGroupAndFiresOnceAtTheThreshold) {
  std::uint32_t counter = 0;
  for (std::uint32_t i = 1; i < default_counter_threshold; ++i) EXPECT_FALSE(count_remote(counter, 1, default_counter_threshold));
  EXPECT_TRUE(count_remote(counter, 1, default_counter_threshold));
  EXPECT_EQ(counter, 0u);
  // A batch of accesses crossing the threshold fires once and keeps what exceeded it.
  EXPECT_FALSE(count_remote(counter, 200, default_counter_threshold));
  EXPECT_TRUE(count_remote(counter, 100, default_counter_threshold));
  EXPECT_EQ(counter, 44u);
}

TEST(Placement, DuplicationReplicatesReadsAndAWriteCollapsesTheReplicas) {
  for (const unsigned gpus : {2u, 4u, 8u}) {
    SCOPED_TRACE(gpus);
    DirectoryEntry e;
    int calls = 0;
    access(e, 0, false, PagePolicy::duplication, &calls);
    for (unsigned g = 1; g < gpus; ++g) {
      Effects fx;
      EXPECT_EQ(access(e, g, false, PagePolicy::duplication, &calls, &fx).action, Action::replicate);
      EXPECT_TRUE(fx.pulled);
      EXPECT_EQ(fx.source, 0);
    }
    EXPECT_EQ(e.state(), PageState::replicated);
    EXPECT_EQ(e.replicas, ((std::uint64_t{1} << gpus) - 1) & ~bit(0));
    for (unsigned g = 0; g < gpus; ++g) EXPECT_EQ(decide(e, g, false, NeverAsked{&calls}).action, Action::local);
    // The last replica writes: a protection fault; the others are invalidated, nothing is pulled.
    Effects fx;
    const Decision d = access(e, gpus - 1, true, PagePolicy::duplication, &calls, &fx);
    EXPECT_EQ(d.action, Action::collapse_and_own);
    EXPECT_EQ(d.fault, PlacementFault::shared);
    EXPECT_FALSE(fx.pulled);
    EXPECT_EQ(fx.invalidated, gpus - 1);
    EXPECT_EQ(e.owner, gpus - 1);
    EXPECT_EQ(e.state(), PageState::exclusive);
    EXPECT_FALSE(e.has_copy(0));
  }
}

TEST(Placement, TheOwnersWriteToAReplicatedPageCollapsesToo) {
  DirectoryEntry e;
  int calls = 0;
  access(e, 2, false, PagePolicy::duplication, &calls);
  access(e, 3, false, PagePolicy::duplication, &calls);
  Effects fx;
  EXPECT_EQ(access(e, 2, true, PagePolicy::duplication, &calls, &fx).action, Action::collapse_and_own);
  EXPECT_EQ(fx.invalidated, 1u);
  EXPECT_EQ(e.owner, 2);
  EXPECT_EQ(e.replicas, 0u);
}

TEST(Placement, AWriterWithoutACopyPullsOrMapsDependingOnThePolicy) {
  DirectoryEntry dup, ac;
  int calls = 0;
  for (DirectoryEntry* e : {&dup, &ac}) {
    access(*e, 0, false, PagePolicy::duplication, &calls);
    access(*e, 1, false, PagePolicy::duplication, &calls);
  }
  Effects fx;
  EXPECT_EQ(access(dup, 2, true, PagePolicy::duplication, &calls, &fx).action, Action::collapse_and_own);
  EXPECT_TRUE(fx.pulled);
  EXPECT_EQ(fx.invalidated, 2u);
  EXPECT_EQ(dup.owner, 2);
  EXPECT_EQ(access(ac, 2, true, PagePolicy::access_counter, &calls, &fx).action, Action::collapse_and_map_remote);
  EXPECT_FALSE(fx.pulled);
  EXPECT_EQ(fx.invalidated, 1u);  // the replica on GPU 1; the owner keeps its frame
  EXPECT_EQ(ac.owner, 0);
  EXPECT_EQ(ac.replicas, 0u);
  EXPECT_EQ(ac.remote, bit(2));
}

TEST(Placement, DuplicationWriteToAnExclusivePageMigrates) {
  DirectoryEntry e;
  int calls = 0;
  access(e, 0, false, PagePolicy::duplication, &calls);
  EXPECT_EQ(access(e, 5, true, PagePolicy::duplication, &calls).action, Action::migrate);
  EXPECT_EQ(e.owner, 5);
}

TEST(Placement, TheHighestGpuIndexWorks) {
  DirectoryEntry e;
  int calls = 0;
  access(e, 63, false, PagePolicy::duplication, &calls);
  access(e, 0, false, PagePolicy::duplication, &calls);
  EXPECT_EQ(access(e, 62, false, PagePolicy::access_counter, &calls).action, Action::map_remote);
  EXPECT_EQ(e.remote, bit(62));
  EXPECT_EQ(access(e, 0, true, PagePolicy::access_counter, &calls).action, Action::collapse_and_own);
  EXPECT_EQ(e.owner, 0);
  EXPECT_EQ(e.remote, 0u);
}

// ---- eviction (a full frame pool gives up a copy) --------------------------------------------

TEST(PlacementEviction, AReplicaIsDroppedAndTheOwnerAndRemoteMappersStay) {
  DirectoryEntry e;
  int calls = 0;
  access(e, 0, false, PagePolicy::duplication, &calls);
  access(e, 1, false, PagePolicy::duplication, &calls);
  access(e, 2, false, PagePolicy::access_counter, &calls);
  ASSERT_EQ(e.replicas, bit(1));
  ASSERT_EQ(e.remote, bit(2));
  const EvictEffects fx = evict_copy(e, 1);
  EXPECT_FALSE(fx.to_host);
  EXPECT_EQ(fx.new_owner, 0);
  EXPECT_EQ(e.owner, 0);
  EXPECT_EQ(e.replicas, 0u);
  EXPECT_EQ(e.remote, bit(2));
  EXPECT_TRUE(directory_valid(e));
}

TEST(PlacementEviction, AnOwnerWithReplicasHandsThePageToItsLowestReplica) {
  DirectoryEntry e;
  int calls = 0;
  access(e, 3, false, PagePolicy::duplication, &calls);
  for (const unsigned g : {5u, 1u, 7u}) access(e, g, false, PagePolicy::duplication, &calls);
  access(e, 2, false, PagePolicy::access_counter, &calls);
  const EvictEffects fx = evict_copy(e, 3);
  EXPECT_FALSE(fx.to_host) << "no data moves: the new owner has the frame it replicated into";
  EXPECT_EQ(fx.new_owner, 1);
  EXPECT_EQ(e.owner, 1);
  EXPECT_EQ(e.replicas, bit(5) | bit(7));
  EXPECT_EQ(e.remote, bit(2)) << "the remote mapper now maps the new owner's frame";
  EXPECT_TRUE(directory_valid(e));
  // The last replica standing becomes an exclusive owner that may write without a fault.
  evict_copy(e, 1);
  evict_copy(e, 5);
  EXPECT_EQ(e.owner, 7);
  EXPECT_EQ(e.state(), PageState::exclusive);
  EXPECT_EQ(decide(e, 7, true, NeverAsked{&calls}).action, Action::local);
}

TEST(PlacementEviction, ASoleOwnersPageGoesToTheHostAndRemoteMappingsAreDropped) {
  DirectoryEntry e;
  int calls = 0;
  access(e, 0, true, PagePolicy::access_counter, &calls);
  access(e, 1, true, PagePolicy::access_counter, &calls);
  const EvictEffects fx = evict_copy(e, 0);
  EXPECT_TRUE(fx.to_host);
  EXPECT_EQ(fx.new_owner, owner_host);
  EXPECT_EQ(e.state(), PageState::host);
  EXPECT_EQ(e.remote, 0u);
  EXPECT_TRUE(directory_valid(e));
}

// The paper's oversubscription fix (Section VI-D): a page evicted to the host after it was shared
// keeps that fact (here the entry's sticky `shared`, there the PTE's policy bits), so that its
// next fault is a shared fault that consults the object (the O-Table learns from it) and not a
// first touch taken for private. It is served from the host whatever the policy: there is no
// GPU copy to map remotely or replicate from.
TEST(PlacementEviction, AnEvictedSharedPageIsASharedFaultAgainAndAPrivateOneAFirstTouch) {
  int calls = 0;
  DirectoryEntry private_page;
  access(private_page, 0, true, PagePolicy::duplication, &calls);
  EXPECT_EQ(private_page.shared, 0) << "a first touch is not sharing";
  evict_copy(private_page, 0);
  Decision d = decide(private_page, 1, false, NeverAsked{&calls});
  EXPECT_EQ(d.fault, PlacementFault::first_touch);
  EXPECT_EQ(d.action, Action::fetch_from_host);
  EXPECT_EQ(calls, 0);

  DirectoryEntry shared_page;
  access(shared_page, 0, false, PagePolicy::duplication, &calls);
  access(shared_page, 1, false, PagePolicy::duplication, &calls);  // a replica: shared
  ASSERT_EQ(calls, 1);
  evict_copy(shared_page, 0);
  evict_copy(shared_page, 1);
  ASSERT_EQ(shared_page.state(), PageState::host);
  EXPECT_EQ(shared_page.shared, 1) << "eviction keeps the page's sharing";
  // Re-referenced through the O-Table (word 0: on-touch, count 0): the fault relearns from it.
  std::uint32_t otable_word = 0;
  d = decide(shared_page, 0, false, [&](bool w) { return otable_shared_fault(otable_word, w, default_reset_threshold); });
  EXPECT_EQ(d.fault, PlacementFault::shared);
  EXPECT_EQ(d.action, Action::fetch_from_host);
  EXPECT_EQ(d.policy, PagePolicy::duplication) << "a read relearns duplication";
  EXPECT_EQ(otable::count(otable_word), 1u) << "the O-Table counted the fault";
  EXPECT_EQ(otable::policy(otable_word), PagePolicy::duplication);
  apply(shared_page, 0, d.action);
  EXPECT_EQ(shared_page.owner, 0);
  EXPECT_EQ(shared_page.shared, 1);
  // The next GPU's fault finds it held: served by the learned policy as before the eviction.
  EXPECT_EQ(access(shared_page, 1, false, PagePolicy::duplication, &calls).action, Action::replicate);
}

TEST(PlacementEviction, EveryTransitionThatServesASharedFaultMarksThePageShared) {
  for (const Action a : {Action::migrate, Action::map_remote, Action::replicate, Action::collapse_and_own,
                         Action::collapse_and_map_remote, Action::counter_migrate}) {
    SCOPED_TRACE(to_string(a));
    DirectoryEntry e;
    apply(e, 0, Action::fetch_from_host);
    EXPECT_EQ(e.shared, 0);
    if (a == Action::collapse_and_own || a == Action::collapse_and_map_remote) apply(e, 2, Action::replicate);
    if (a == Action::counter_migrate) apply(e, 1, Action::map_remote);
    apply(e, 1, a);
    EXPECT_EQ(e.shared, 1);
  }
}

/// A fault decided again after its pool was full (fault.cuh's serve()) reads the object's policy
/// without counting: the O-Table sees each fault once.
TEST(PlacementEviction, AFaultDecidedAgainReadsTheOTableWithoutCounting) {
  std::uint32_t word = 0;
  EXPECT_EQ(otable_policy_for(word, true), PagePolicy::access_counter) << "on-touch reads as a relearning fault";
  EXPECT_EQ(otable_policy_for(word, false), PagePolicy::duplication);
  EXPECT_EQ(word, 0u);
  EXPECT_EQ(otable_shared_fault(word, false, default_reset_threshold), PagePolicy::duplication);
  const std::uint32_t counted = word;
  EXPECT_EQ(otable_policy_for(word, true), PagePolicy::duplication) << "the learned policy, not the write's";
  EXPECT_EQ(otable_policy_for(word, false), PagePolicy::duplication);
  EXPECT_EQ(word, counted) << "nothing counted";
}

// ---- the O-Table: the paper's state diagram (Fig. 13b) --------------------------------------

TEST(OTable, StartsOnTouchAndLearnsFromTheFirstSharedFault) {
  EXPECT_EQ(otable::policy(0), PagePolicy::on_touch);
  EXPECT_EQ(otable::policy(otable::after_shared_fault(0, false, 8)), PagePolicy::duplication);     // (2)
  EXPECT_EQ(otable::policy(otable::after_shared_fault(0, true, 8)), PagePolicy::access_counter);  // (1)
}

TEST(OTable, KeepsItsPolicyUntilTheResetThresholdThenRelearns) {
  for (const std::uint32_t reset : {4u, 8u, 32u}) {
    SCOPED_TRACE(reset);
    std::uint32_t word = 0;
    EXPECT_EQ(otable_shared_fault(word, true, reset), PagePolicy::access_counter);
    // Reads within the window keep access-counter (the entry only relearns at count zero).
    for (std::uint32_t i = 1; i < reset; ++i) {
      EXPECT_EQ(otable::pf_count(word, reset), i);
      EXPECT_EQ(otable_shared_fault(word, false, reset), PagePolicy::access_counter);
    }
    EXPECT_EQ(otable::pf_count(word, reset), 0u);  // the reset_threshold-th fault reset the PF Count
    EXPECT_EQ(otable_shared_fault(word, false, reset), PagePolicy::duplication);  // (4)
    for (std::uint32_t i = 1; i < reset; ++i) EXPECT_EQ(otable_shared_fault(word, true, reset), PagePolicy::duplication);
    EXPECT_EQ(otable_shared_fault(word, true, reset), PagePolicy::access_counter);  // (5)
    for (std::uint32_t i = 1; i < reset; ++i) EXPECT_EQ(otable_shared_fault(word, true, reset), PagePolicy::access_counter);
    EXPECT_EQ(otable_shared_fault(word, true, reset), PagePolicy::access_counter);  // (3)
  }
}

TEST(OTable, APhaseBoundaryRelearnsButNeverReturnsToOnTouch) {
  std::uint32_t word = 0;
  otable_begin_phase(word);
  EXPECT_EQ(word, 0u);  // still on-touch: nothing learned yet
  EXPECT_EQ(otable_shared_fault(word, false, 8), PagePolicy::duplication);
  EXPECT_EQ(otable_shared_fault(word, true, 8), PagePolicy::duplication);
  otable_begin_phase(word);
  EXPECT_EQ(otable::count(word), 0u);
  EXPECT_EQ(otable::policy(word), PagePolicy::duplication);  // kept until the next shared fault
  EXPECT_EQ(otable_shared_fault(word, true, 8), PagePolicy::access_counter);
  for (int phase = 0; phase < 3; ++phase) {
    otable_begin_phase(word);
    EXPECT_NE(otable::policy(word), PagePolicy::on_touch);
  }
}

TEST(OTable, TheDeviceFormFollowsTheSequentialSpecification) {
  for (const std::uint32_t reset : {1u, 3u, 4u, 8u, 32u, 255u}) {
    SCOPED_TRACE(reset);
    std::mt19937 rng(reset);
    std::uint32_t word = 0, spec = 0;
    for (int i = 0; i < 20000; ++i) {
      if (rng() % 500 == 0) {
        otable_begin_phase(word);
        spec = otable::after_phase(spec);
      }
      const bool write = rng() % 3 == 0;
      spec = otable::after_shared_fault(spec, write, reset);
      ASSERT_EQ(otable_shared_fault(word, write, reset), otable::policy(spec)) << "fault " << i;
      ASSERT_EQ(word, spec) << "fault " << i;
    }
  }
}

TEST(OTable, TheCountFoldsBeforeThePolicyBitsAndKeepsThePfCount) {
  for (const std::uint32_t reset : {1u, 7u, 8u, 32u, 255u}) {
    SCOPED_TRACE(reset);
    const std::uint32_t fold = otable::fold_point(reset);
    ASSERT_EQ(fold % reset, 0u);
    ASSERT_LT(fold + 100000u, otable::count_mask);  // room for the faults in flight when it folds
    std::uint32_t word = otable::make(PagePolicy::duplication, fold - 2 * reset + 1);
    for (std::uint32_t i = 0; i < 4 * reset; ++i) {
      const std::uint32_t pf_before = otable::pf_count(word, reset);
      const bool relearns = pf_before == 0;
      const PagePolicy served = otable_shared_fault(word, true, reset);
      EXPECT_EQ(served, relearns ? PagePolicy::access_counter : otable::policy(word)) << "fault " << i;
      EXPECT_EQ(otable::pf_count(word, reset), (pf_before + 1) % reset) << "fault " << i;
      EXPECT_LE(otable::count(word), fold + 1) << "fault " << i;
      EXPECT_NE(otable::policy(word), PagePolicy::on_touch);
    }
  }
}

TEST(OTable, AResetThresholdOfOneRelearnsAtEveryFault) {
  std::uint32_t word = 0;
  EXPECT_EQ(otable_shared_fault(word, true, 1), PagePolicy::access_counter);
  EXPECT_EQ(otable_shared_fault(word, false, 1), PagePolicy::duplication);
  EXPECT_EQ(otable_shared_fault(word, true, 1), PagePolicy::access_counter);
}

// ---- atomic forms under real threads --------------------------------------------------------

TEST(PlacementConcurrency, OTableCountsEverySharedFault) {
  constexpr int threads = 8, faults = 10007;
  constexpr std::uint32_t reset = 32;
  std::uint32_t word = 0;
  std::atomic<int> not_dup{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i = 0; i < faults; ++i)
        if (otable_shared_fault(word, false, reset) != PagePolicy::duplication) ++not_dup;
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(not_dup.load(), 0);
  EXPECT_EQ(otable::count(word), static_cast<std::uint32_t>(threads * faults));  // no fault lost
  EXPECT_EQ(otable::pf_count(word, reset), static_cast<std::uint32_t>(threads * faults) % reset);
}

TEST(PlacementConcurrency, OTableNeverServesOnTouchAfterASharedFaultAndKeepsALearnedPolicy) {
  for (const std::uint32_t reset : {1u, 4u, 8u}) {
    SCOPED_TRACE(reset);
    constexpr int threads = 8, faults = 5003;
    std::uint32_t word = 0;
    std::atomic<int> on_touch{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(t) * 7919u + reset);
        for (int i = 0; i < faults; ++i)
          if (otable_shared_fault(word, rng() % 3 == 0, reset) == PagePolicy::on_touch) ++on_touch;
      });
    for (auto& th : pool) th.join();
    EXPECT_EQ(on_touch.load(), 0);
    EXPECT_NE(otable::policy(word), PagePolicy::on_touch);
    EXPECT_EQ(otable::count(word), static_cast<std::uint32_t>(threads * faults));
  }
}

TEST(PlacementConcurrency, AccessCountersFireOncePerThresholdCrossed) {
  constexpr int threads = 8, adds = 4096;
  std::uint32_t counter = 0;
  std::atomic<int> fired{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i = 0; i < adds; ++i)
        if (count_remote(counter, 1, default_counter_threshold)) ++fired;
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(fired.load(), threads * adds / static_cast<int>(default_counter_threshold));
  EXPECT_EQ(counter, 0u);
}

TEST(PlacementConcurrency, DirectoryTransitionsUnderTheLockKeepTheInvariants) {
  constexpr unsigned gpus = 8, pages = 16;
  constexpr int steps = 20000;
  std::vector<DirectoryEntry> dir(pages);
  std::uint32_t object = 0;
  std::atomic<int> broken{0};
  std::vector<std::thread> pool;
  for (unsigned g = 0; g < gpus; ++g)
    pool.emplace_back([&, g] {
      std::mt19937 rng(g);
      for (int i = 0; i < steps; ++i) {
        DirectoryEntry& e = dir[rng() % pages];
        const bool write = rng() % 4 == 0;
        while (!directory_try_lock(e)) std::this_thread::yield();
        const Decision d = decide(e, g, write, [&](bool w) { return otable_shared_fault(object, w, 8); });
        (void)apply(e, g, d.action);
        // After the transition this GPU can do the access without another fault.
        const Decision again = decide(e, g, write, [](bool) { return PagePolicy::on_touch; });
        if (!directory_valid(e) || (again.action != Action::local && again.action != Action::remote)) ++broken;
        directory_unlock(e);
      }
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(broken.load(), 0);
}

// ---- randomized differential test against a reference model ---------------------------------

/// The spec written with sets, independently of the bit masks and the packed O-Table word.
struct RefPage {
  int owner = -1;  // -1: host
  std::set<int> replicas, remote;
};

struct RefObject {
  int learned = 0;  // 0 on-touch, 1 access-counter, 2 duplication
  int faults = 0;
};

enum class Mode { on_touch, access_counter, duplication, oasis };

struct RefResult {
  Action action;
  bool pulled = false;
  unsigned invalidated = 0;
};

RefResult ref_take_over(RefPage& p, int gpu, Action action) {
  RefResult r{action};
  std::set<int> others = p.replicas;
  others.insert(p.remote.begin(), p.remote.end());
  others.insert(p.owner);
  r.pulled = !(p.owner == gpu || p.replicas.count(gpu));
  others.erase(gpu);
  r.invalidated = static_cast<unsigned>(others.size());
  p.owner = gpu;
  p.replicas.clear();
  p.remote.clear();
  return r;
}

RefResult ref_access(RefPage& p, RefObject& o, Mode mode, std::uint32_t reset, int gpu, bool write) {
  if (p.owner == -1) {
    p.owner = gpu;
    return {Action::fetch_from_host, true, 0};
  }
  const bool has_copy = p.owner == gpu || p.replicas.count(gpu) != 0;
  const bool replicated = !p.replicas.empty();
  if (has_copy && !(write && replicated)) return {Action::local};
  if (p.remote.count(gpu) && !(write && replicated)) return {Action::remote};
  int policy = mode == Mode::access_counter ? 1 : mode == Mode::duplication ? 2 : 0;
  if (mode == Mode::oasis) {
    if (o.faults == 0) o.learned = write ? 1 : 2;
    if (++o.faults == static_cast<int>(reset)) o.faults = 0;
    policy = o.learned;
  }
  if (write && replicated) {
    if (has_copy || policy != 1) return ref_take_over(p, gpu, Action::collapse_and_own);
    RefResult r{Action::collapse_and_map_remote};
    std::set<int> dropped = p.replicas;
    dropped.erase(gpu);
    r.invalidated = static_cast<unsigned>(dropped.size());
    p.replicas.clear();
    p.remote.insert(gpu);
    return r;
  }
  if (policy == 1) {
    p.remote.insert(gpu);
    return {Action::map_remote};
  }
  if (policy == 2 && !write) {
    p.replicas.insert(gpu);
    p.remote.erase(gpu);
    return {Action::replicate, true, 0};
  }
  return ref_take_over(p, gpu, Action::migrate);
}

bool same(const DirectoryEntry& e, const RefPage& p) {
  std::uint64_t replicas = 0, remote = 0;
  for (int g : p.replicas) replicas |= bit(static_cast<unsigned>(g));
  for (int g : p.remote) remote |= bit(static_cast<unsigned>(g));
  const std::uint8_t owner = p.owner == -1 ? owner_host : static_cast<std::uint8_t>(p.owner);
  return e.owner == owner && e.replicas == replicas && e.remote == remote;
}

struct DiffCase {
  Mode mode;
  unsigned gpus;
  std::uint32_t reset;
};

class PlacementDifferential : public ::testing::TestWithParam<DiffCase> {};

TEST_P(PlacementDifferential, MatchesTheReferenceModel) {
  const DiffCase c = GetParam();
  constexpr unsigned objects = 3, pages_per_object = 48, pages_per_group = 16;
  constexpr std::uint32_t counter_threshold = 6;  // small, so that counter migrations happen
  constexpr int steps = 200000;
  const PagePolicy fixed = c.mode == Mode::access_counter ? PagePolicy::access_counter
                           : c.mode == Mode::duplication  ? PagePolicy::duplication
                                                          : PagePolicy::on_touch;
  const unsigned groups = pages_per_object / pages_per_group;
  std::vector<DirectoryEntry> dir(objects * pages_per_object);
  std::vector<std::uint32_t> otab(objects, 0);
  std::vector<std::uint32_t> counters(objects * groups * c.gpus, 0);
  std::vector<RefPage> ref(objects * pages_per_object);
  std::vector<RefObject> ref_obj(objects);
  std::map<std::pair<unsigned, unsigned>, std::uint32_t> ref_counters;  // (object group, gpu)
  std::mt19937_64 rng(c.gpus * 1000 + c.reset + static_cast<unsigned>(c.mode));
  std::map<Action, int> seen;
  for (int step = 0; step < steps; ++step) {
    if (rng() % 5000 == 0) {  // an explicit phase boundary for every object
      for (auto& w : otab) otable_begin_phase(w);
      for (auto& o : ref_obj) o.faults = 0;
      continue;
    }
    const unsigned obj = rng() % objects;
    // Skewed GPUs and pages, so that pages get shared, replicated and written back and forth.
    const unsigned gpu = rng() % 3 == 0 ? 0 : rng() % c.gpus;
    const unsigned page = obj * pages_per_object + (rng() % 2 ? rng() % 8 : rng() % pages_per_object);
    const bool write = rng() % (obj + 2) == 0;
    const RefResult want = ref_access(ref[page], ref_obj[obj], c.mode, c.reset, static_cast<int>(gpu), write);
    int calls = 0;
    const Decision got = decide(dir[page], gpu, write, [&](bool w) {
      ++calls;
      return c.mode == Mode::oasis ? otable_shared_fault(otab[obj], w, c.reset) : fixed;
    });
    ASSERT_EQ(got.action, want.action) << "step " << step;
    ASSERT_EQ(calls, got.fault == PlacementFault::shared ? 1 : 0);
    const Effects fx = apply(dir[page], gpu, got.action);
    ASSERT_EQ(fx.pulled, want.pulled) << "step " << step;
    ASSERT_EQ(fx.invalidated, want.invalidated) << "step " << step;
    ASSERT_TRUE(same(dir[page], ref[page])) << "step " << step;
    ASSERT_TRUE(directory_valid(dir[page]));
    if (c.mode == Mode::oasis) {
      ASSERT_EQ(otable::pf_count(otab[obj], c.reset), static_cast<std::uint32_t>(ref_obj[obj].faults));
      const PagePolicy learned = ref_obj[obj].learned == 0   ? PagePolicy::on_touch
                                 : ref_obj[obj].learned == 1 ? PagePolicy::access_counter
                                                             : PagePolicy::duplication;
      ASSERT_EQ(otable::policy(otab[obj]), learned);
    }
    ++seen[got.action];
    if (!access_goes_remote(got.action)) continue;
    // The access went remote: count it; at the threshold every page of the group this GPU maps
    // remotely moves to it.
    const unsigned local_page = page % pages_per_object, group = local_page / pages_per_group;
    std::uint32_t& ref_count = ref_counters[{obj * groups + group, gpu}];
    const bool ref_fires = ++ref_count == counter_threshold;
    if (ref_fires) ref_count = 0;
    const bool fires = count_remote(counters[(obj * groups + group) * c.gpus + gpu], 1, counter_threshold);
    ASSERT_EQ(fires, ref_fires);
    if (!fires) continue;
    for (unsigned p = 0; p < pages_per_group; ++p) {
      const unsigned q = obj * pages_per_object + group * pages_per_group + p;
      ASSERT_EQ(dir[q].maps_remote(gpu), ref[q].remote.count(static_cast<int>(gpu)) != 0);
      if (!dir[q].maps_remote(gpu)) continue;
      const Effects moved = apply(dir[q], gpu, Action::counter_migrate);
      const RefResult ref_moved = ref_take_over(ref[q], static_cast<int>(gpu), Action::counter_migrate);
      ASSERT_EQ(moved.pulled, ref_moved.pulled);
      ASSERT_EQ(moved.invalidated, ref_moved.invalidated);
      ASSERT_TRUE(same(dir[q], ref[q]));
      ++seen[Action::counter_migrate];
    }
  }
  // The walk must have exercised the policy's transitions, or it tested nothing.
  EXPECT_GT(seen[Action::fetch_from_host], 0);
  EXPECT_GT(seen[Action::local], 0);
  switch (c.mode) {
    case Mode::on_touch: EXPECT_GT(seen[Action::migrate], 0); break;
    case Mode::access_counter:
      EXPECT_GT(seen[Action::map_remote], 0);
      EXPECT_GT(seen[Action::counter_migrate], 0);
      break;
    case Mode::duplication:
      EXPECT_GT(seen[Action::replicate], 0);
      EXPECT_GT(seen[Action::collapse_and_own], 0);
      break;
    case Mode::oasis:
      EXPECT_GT(seen[Action::replicate], 0);
      EXPECT_GT(seen[Action::map_remote], 0);
      EXPECT_GT(seen[Action::collapse_and_own], 0);
      // With two GPUs a replicated page has a copy on both: every writer holds one.
      if (c.gpus > 2) EXPECT_GT(seen[Action::collapse_and_map_remote], 0);
      else EXPECT_EQ(seen[Action::collapse_and_map_remote], 0);
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, PlacementDifferential,
                         ::testing::Values(DiffCase{Mode::on_touch, 2, 8}, DiffCase{Mode::access_counter, 2, 8},
                                           DiffCase{Mode::duplication, 4, 8}, DiffCase{Mode::oasis, 2, 8},
                                           DiffCase{Mode::oasis, 4, 4}, DiffCase{Mode::oasis, 8, 32},
                                           DiffCase{Mode::access_counter, 8, 8}, DiffCase{Mode::duplication, 64, 8}));

}  // namespace
}  // namespace warpvm::detail
