// warpvm-channel-bench's waiting metrics (warpvm/workloads/channel/overlap_metric.hpp): hand-made timelines
// with known answers, and a random differential run against a per-nanosecond count.

#include "warpvm/workloads/channel/overlap_metric.hpp"
#include "warpvm/workloads/channel/timeline_csv.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

namespace warpvm::workloads {
namespace {

TEST(OverlapMetric, WaitHiddenOnlyWhileAnotherWarpOfTheSameSmIsBusy) {
  // Consumer on SM 0 waits [100, 300); a compute warp on SM 0 lives [0, 200); one on SM 1 lives
  // [0, 1000) and must not count.
  const std::vector<WarpTimeline> warps{
      {{0, 400}, 0, true, {{100, 300}}},
      {{0, 200}, 0, false, {}},
      {{0, 1000}, 1, false, {}},
  };
  const WaitMetrics m = wait_metrics(warps);
  EXPECT_EQ(m.waits, 1u);
  EXPECT_DOUBLE_EQ(m.wait_seconds, 200e-9);
  EXPECT_DOUBLE_EQ(m.hidden_seconds, 100e-9);
  EXPECT_DOUBLE_EQ(m.overlap_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(m.wait_share, 0.5);
}

TEST(OverlapMetric, AnotherConsumerWaitingAtTheSameTimeHidesNothing) {
  const std::vector<WarpTimeline> warps{
      {{0, 100}, 3, true, {{10, 90}}},
      {{0, 100}, 3, true, {{0, 100}}},
  };
  const WaitMetrics m = wait_metrics(warps);
  // The first warp's wait is hidden by nothing; the second one's by [0,10) and [90,100).
  EXPECT_DOUBLE_EQ(m.hidden_seconds, 20e-9);
  EXPECT_DOUBLE_EQ(m.wait_seconds, 180e-9);
  EXPECT_DOUBLE_EQ(m.wait_share, 0.9);
}

TEST(OverlapMetric, NoWaitsMeansNothingToHide) {
  const std::vector<WarpTimeline> warps{{{0, 50}, 0, true, {}}, {{0, 50}, 0, false, {}}};
  const WaitMetrics m = wait_metrics(warps);
  EXPECT_EQ(m.waits, 0u);
  EXPECT_DOUBLE_EQ(m.overlap_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(m.wait_share, 0.0);
}

TEST(OverlapMetric, MatchesACountPerNanosecondOnRandomTimelines) {
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 50; ++round) {
    constexpr std::uint64_t horizon = 400;
    std::vector<WarpTimeline> warps(1 + rng() % 12);
    for (WarpTimeline& w : warps) {
      w.sm = rng() % 3;
      w.consumer = rng() % 2 == 0;
      std::uint64_t a = rng() % horizon, b = rng() % horizon;
      if (a > b) std::swap(a, b);
      w.life = {a, b};
      for (std::uint64_t t = a; t < b && w.consumer;) {  // waits in time order inside the life
        const std::uint64_t begin = t + rng() % 40, end = begin + rng() % 60;
        if (end > b) break;
        w.waits.push_back({begin, end});
        t = end;
      }
    }
    std::uint64_t waited = 0, hidden = 0;
    for (std::size_t i = 0; i < warps.size(); ++i)
      for (const Interval& wait : warps[i].waits)
        for (std::uint64_t t = wait.begin; t < wait.end; ++t) {
          ++waited;
          bool other_busy = false;
          for (std::size_t j = 0; j < warps.size() && !other_busy; ++j) {
            const WarpTimeline& o = warps[j];
            if (j == i || o.sm != warps[i].sm || t < o.life.begin || t >= o.life.end) continue;
            bool waiting = false;
            for (const Interval& ow : o.waits) waiting = waiting || (t >= ow.begin && t < ow.end);
            other_busy = !waiting;
          }
          hidden += other_busy ? 1 : 0;
        }
    const WaitMetrics m = wait_metrics(warps);
    ASSERT_DOUBLE_EQ(m.wait_seconds, static_cast<double>(waited) / 1e9) << "round " << round;
    ASSERT_DOUBLE_EQ(m.hidden_seconds, static_cast<double>(hidden) / 1e9) << "round " << round;
  }
}

TEST(TimelineCsv, RowsForEveryWarpOfAConsumersSmOnlyTimedFromTheFirstStart) {
  const std::vector<WarpTimeline> warps{
      {{1000, 1400}, 0, true, {{1100, 1300}, {1350, 1360}}},
      {{1050, 1200}, 0, false, {}},
      {{900, 5000}, 1, false, {}},  // no consumer on SM 1: no rows, but the origin is its start
  };
  std::ostringstream out;
  write_timeline_csv(out, "tiles-channel", warps);
  EXPECT_EQ(out.str(),
            "tiles-channel,0,0,1,life,100,500\n"
            "tiles-channel,0,0,1,wait,200,400\n"
            "tiles-channel,0,0,1,wait,450,460\n"
            "tiles-channel,1,0,0,life,150,300\n");
}

}  // namespace
}  // namespace warpvm::workloads
