// OASIS's capacity-aware controller (issue #31): the pressure signal and the controller's
// decisions as pure functions and in their device forms, and through the simulator's placement
// model: bit-identical to today's OASIS whenever no pool evicts, and serving an object remotely
// once a GPU's pool evicts its replicas.

#include "warpvm/detail/policy/capacity.hpp"

#include "placement_model.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace warpvm::detail {
namespace {

std::uint64_t bit(unsigned g) { return std::uint64_t{1} << g; }

// ---- the signal -----------------------------------------------------------------------------

TEST(CapacitySignal, CountsOnlyEvictionsOfCopiesThatWereNotThePagesOnlyOne) {
  DirectoryEntry replica{.replicas = bit(1), .owner = 0};
  DirectoryEntry owner_with_replica{.replicas = bit(1), .owner = 0};
  DirectoryEntry sole_owner{.remote = bit(1), .owner = 0};
  std::uint32_t evicted = 0;
  pressure_count_eviction(evicted, evict_copy(replica, 1));             // a replica dropped
  EXPECT_EQ(evicted, 1u);
  pressure_count_eviction(evicted, evict_copy(owner_with_replica, 0));  // handed to the replica
  EXPECT_EQ(evicted, 2u);
  pressure_count_eviction(evicted, evict_copy(sole_owner, 0));          // the only copy goes to the host
  EXPECT_EQ(evicted, 2u);
  pressure_begin_phase(evicted);
  EXPECT_EQ(evicted, 0u);
}

TEST(CapacitySignal, FiresAtTheThresholdAndNeverWhenOff) {
  EXPECT_FALSE(capacity::under_pressure(0, 1));
  EXPECT_TRUE(capacity::under_pressure(1, 1));
  EXPECT_FALSE(capacity::under_pressure(31, 32));
  EXPECT_TRUE(capacity::under_pressure(32, 32));
  EXPECT_FALSE(capacity::under_pressure(1u << 30, 0));  // 0: the controller is off
  std::uint32_t evicted = 32;
  EXPECT_TRUE(pressure_on(PagePolicy::duplication, evicted, 32));
  EXPECT_FALSE(pressure_on(PagePolicy::duplication, evicted, 0));
  EXPECT_FALSE(pressure_on(PagePolicy::duplication, evicted, 33));
  // The controller changes nothing for the other policies, so their signal is never read.
  EXPECT_FALSE(pressure_on(PagePolicy::access_counter, evicted, 32));
  EXPECT_FALSE(pressure_on(PagePolicy::on_touch, evicted, 32));
}

// ---- the controller -------------------------------------------------------------------------

TEST(CapacityController, ServesALearnedDuplicationAsAccessCounterOnlyUnderPressure) {
  for (const PagePolicy p : {PagePolicy::on_touch, PagePolicy::access_counter, PagePolicy::duplication}) {
    EXPECT_EQ(capacity::served_policy(p, false), p);
    EXPECT_EQ(capacity::counter_action(p, false), Action::counter_migrate);
  }
  EXPECT_EQ(capacity::served_policy(PagePolicy::duplication, true), PagePolicy::access_counter);
  EXPECT_EQ(capacity::served_policy(PagePolicy::access_counter, true), PagePolicy::access_counter);
  EXPECT_EQ(capacity::served_policy(PagePolicy::on_touch, true), PagePolicy::on_touch);
  EXPECT_EQ(capacity::counter_action(PagePolicy::duplication, true), Action::replicate);
  EXPECT_EQ(capacity::counter_action(PagePolicy::access_counter, true), Action::counter_migrate);
}

TEST(CapacityController, UnderPressureAReadMapsRemotelyAndAWriteCollapsesTheReplicas) {
  const auto served = [](bool pressure) {
    return [pressure](bool) { return capacity::served_policy(PagePolicy::duplication, pressure); };
  };
  const DirectoryEntry held{.owner = 0};
  EXPECT_EQ(decide(held, 1, false, served(false)).action, Action::replicate);
  EXPECT_EQ(decide(held, 1, false, served(true)).action, Action::map_remote);
  const DirectoryEntry replicated{.replicas = bit(1), .owner = 0};
  EXPECT_EQ(decide(replicated, 2, true, served(false)).action, Action::collapse_and_own);
  EXPECT_EQ(decide(replicated, 2, true, served(true)).action, Action::collapse_and_map_remote);
  // A replica the counter found hot is an ordinary replica: the remote mapping becomes a copy.
  DirectoryEntry mapped{.remote = bit(1), .owner = 0};
  const Effects fx = apply(mapped, 1, capacity::counter_action(PagePolicy::duplication, true));
  EXPECT_TRUE(fx.pulled);
  EXPECT_EQ(fx.source, 0);
  EXPECT_EQ(mapped.replicas, bit(1));
  EXPECT_EQ(mapped.remote, 0u);
  EXPECT_TRUE(directory_valid(mapped));
}

}  // namespace
}  // namespace warpvm::detail

// ---- through the placement model ------------------------------------------------------------

namespace warpvm::sim {
namespace {

struct Workload {
  std::vector<std::uint64_t> object_pages;
  struct Access {
    unsigned gpu;
    std::uint32_t object;
    std::uint64_t page;
    bool write;
    std::uint32_t lines;
    bool begins_phase;
  };
  std::vector<Access> accesses;
};

/// Random accesses by `gpus` GPUs to a few objects, each object mostly read (so OASIS learns
/// duplication for some), with explicit phases now and then.
Workload random_workload(unsigned gpus, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Workload w{{96, 64, 160, 32}, {}};
  const double write_share[] = {0.02, 0.3, 0.0, 0.1};
  for (int i = 0; i < 40000; ++i) {
    const auto object = static_cast<std::uint32_t>(rng() % w.object_pages.size());
    w.accesses.push_back({static_cast<unsigned>(rng() % gpus), object, rng() % w.object_pages[object],
                          std::uniform_real_distribution<>(0, 1)(rng) < write_share[object],
                          static_cast<std::uint32_t>(1 + rng() % 32), rng() % 5000 == 0});
  }
  return w;
}

PlacementModel replay(const Workload& w, PlacementModelConfig config) {
  PlacementModel model(config);
  for (const std::uint64_t pages : w.object_pages) model.add_object(pages);
  for (const Workload::Access& a : w.accesses) {
    if (a.begins_phase) model.begin_phase();
    model.access(a.gpu, a.object, a.page, a.write, a.lines);
  }
  return model;
}

void expect_same_run(const PlacementModel& a, const PlacementModel& b, const Workload& w) {
  const PlacementCounts &x = a.counts(), &y = b.counts();
  EXPECT_EQ(x.local, y.local);
  EXPECT_EQ(x.remote, y.remote);
  EXPECT_EQ(x.first_touches, y.first_touches);
  EXPECT_EQ(x.shared_faults, y.shared_faults);
  EXPECT_EQ(x.migrations, y.migrations);
  EXPECT_EQ(x.counter_migrations, y.counter_migrations);
  EXPECT_EQ(x.replications, y.replications);
  EXPECT_EQ(x.collapses, y.collapses);
  EXPECT_EQ(x.remote_maps, y.remote_maps);
  EXPECT_EQ(x.invalidations, y.invalidations);
  EXPECT_EQ(x.nvlink_bytes, y.nvlink_bytes);
  EXPECT_EQ(x.host_bytes, y.host_bytes);
  EXPECT_EQ(a.modelled_seconds(), b.modelled_seconds());
  for (std::uint32_t o = 0; o < w.object_pages.size(); ++o)
    for (std::uint64_t p = 0; p < w.object_pages[o]; ++p) {
      const detail::DirectoryEntry &e = a.entry(o, p), &f = b.entry(o, p);
      ASSERT_EQ(e.owner, f.owner);
      ASSERT_EQ(e.replicas, f.replicas);
      ASSERT_EQ(e.remote, f.remote);
      ASSERT_EQ(e.shared, f.shared);
    }
}

TEST(CapacityModel, InCoreTheControllerChangesNoDecision) {
  for (const unsigned gpus : {2u, 4u})
    for (const std::uint32_t seed : {1u, 2u, 3u}) {
      const Workload w = random_workload(gpus, seed);
      // A counter threshold low enough that counters fire on OASIS's remotely mapped objects.
      const PlacementModelConfig today{.gpus = gpus, .placement = Placement::oasis, .counter_threshold = 16};
      PlacementModelConfig controlled = today;
      controlled.pressure_evictions = 1;  // the most eager setting
      const PlacementModel a = replay(w, today), b = replay(w, controlled);
      EXPECT_EQ(b.counts().evictions, 0u);
      EXPECT_GT(a.counts().replications, 0u);
      EXPECT_GT(a.counts().counter_migrations, 0u);
      expect_same_run(a, b, w);
    }
}

TEST(CapacityModel, CappedPoolsHoldNoMoreCopiesThanFramesAndKeepTheDirectoryValid) {
  for (const std::uint32_t pressure : {0u, 1u, 32u}) {
    const Workload w = random_workload(3, 7);
    const PlacementModel m = replay(w, {.gpus = 3, .placement = Placement::oasis, .counter_threshold = 16,
                                        .pool_fraction = 0.4, .pressure_evictions = pressure});
    EXPECT_GT(m.counts().evictions, 0u);
    std::vector<std::uint32_t> copies(3, 0);
    for (std::uint32_t o = 0; o < w.object_pages.size(); ++o)
      for (std::uint64_t p = 0; p < w.object_pages[o]; ++p) {
        const detail::DirectoryEntry& e = m.entry(o, p);
        ASSERT_TRUE(detail::directory_valid(e));
        for (unsigned g = 0; g < 3; ++g) copies[g] += e.has_copy(g) ? 1 : 0;
      }
    // Each copy holds exactly one frame of its GPU's pool: no frame leaked or given back twice.
    for (unsigned g = 0; g < 3; ++g) {
      EXPECT_LE(copies[g], m.pool_frames());
      EXPECT_EQ(copies[g], m.frames_in_use(g)) << "GPU " << g;
    }
  }
}

TEST(CapacityModel, AGpuWhoseReplicasAreEvictedReadsTheObjectRemotely) {
  // One object of 64 pages, pools of 32 frames. GPU 0 reads pages 0-31 (first touches: its pool
  // is full); GPU 1 reads them too (replicas: its pool is full), then writes pages 32-63 (first
  // touches, each evicting one of its replicas: 32 redundant copies evicted). Then GPU 1 reads
  // pages 0-31 again. (No access counter fires: its threshold is above the lines read.)
  const auto run = [](std::uint32_t pressure) {
    PlacementModel m({.gpus = 2, .placement = Placement::oasis, .counter_threshold = 4096, .pool_fraction = 0.5,
                      .pressure_evictions = pressure});
    m.add_object(64);
    for (std::uint64_t p = 0; p < 32; ++p) m.access(0, 0, p, false, 32);
    for (std::uint64_t p = 0; p < 64; ++p) m.access(1, 0, p, p >= 32, 32);
    EXPECT_EQ(m.counts().evictions, 32u);
    for (std::uint64_t p = 0; p < 32; ++p) m.access(1, 0, p, false, 32);
    return m;
  };
  const PlacementModel today = run(0), controlled = run(32);
  // Today every read replicates again, evicting GPU 1's own (dirty) pages 32-63 to the host.
  EXPECT_EQ(today.counts().replications, 64u);
  EXPECT_EQ(today.counts().evictions, 64u);
  EXPECT_EQ(today.entry(0, 40).owner, detail::owner_host);
  EXPECT_EQ(today.counts().writebacks, 32u);
  // Under pressure GPU 1 maps GPU 0's frames and keeps its own pages.
  EXPECT_EQ(controlled.counts().replications, 32u);
  EXPECT_EQ(controlled.counts().remote_maps, 32u);
  EXPECT_EQ(controlled.counts().evictions, 32u);
  EXPECT_TRUE(controlled.entry(0, 0).maps_remote(1));
  EXPECT_EQ(controlled.entry(0, 40).owner, 1);
  EXPECT_EQ(controlled.counts().writebacks, 0u);
  EXPECT_LT(controlled.counts().host_bytes, today.counts().host_bytes);
}

TEST(CapacityModel, AnEvictedDirtyPageIsWrittenBackAndCharged) {
  PlacementModel m({.gpus = 2, .placement = Placement::on_touch, .pool_fraction = 0.5});
  m.add_object(64);
  for (std::uint64_t p = 0; p < 32; ++p) m.access(0, 0, p, true, 32);   // dirty, the pool full
  const std::uint64_t host_before = m.counts().host_bytes;
  m.access(0, 0, 32, false, 32);  // evicts page 0 (the clock's first frame) to the host
  EXPECT_EQ(m.counts().evictions, 1u);
  EXPECT_EQ(m.counts().writebacks, 1u);
  EXPECT_EQ(m.counts().host_bytes, host_before + 2 * 4096);  // the write-back and the new page
  EXPECT_EQ(m.entry(0, 0).owner, detail::owner_host);
  m.access(0, 0, 33, false, 32);  // evicts page 1, dirty too; page 32 was only read
  EXPECT_EQ(m.counts().writebacks, 2u);
}

}  // namespace
}  // namespace warpvm::sim
