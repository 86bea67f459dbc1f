#pragma once
// The waiting metrics of warpvm-channel-bench (docs/bench/channel.md, "Metrics"), from per-warp
// %globaltimer stamps: each warp's lifetime and SM, and every interval in which it waited for the
// producer's data (from the moment it started waiting to the moment its data had arrived).
//
//   wait_share          sum of consumer waits / sum of consumer lifetimes (the paper's Fig. 5:
//                       the share of consumer time spent waiting, i.e. polling for the baselines)
//   overlap_efficiency  sum over waits of the time inside the wait during which the same SM had
//                       other work (another warp alive and not itself waiting for the producer),
//                       divided by the sum of waits: the share of waiting hidden behind
//                       computation (the paper's Fig. 14); 1 when nothing waited
//
// Pure host code so that the host tests check it.

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace warpvm::workloads {

struct Interval {
  std::uint64_t begin = 0, end = 0;  ///< ns, end >= begin
};

/// One warp of a run: when it lived, on which SM, whether it is a consumer, and when it waited
/// (intervals in time order, inside its lifetime).
struct WarpTimeline {
  Interval life;
  std::uint32_t sm = 0;
  bool consumer = false;
  std::vector<Interval> waits;
};

struct WaitMetrics {
  double wait_seconds = 0;    ///< sum of all waits
  double hidden_seconds = 0;  ///< of which the SM had other work
  double wait_share = 0;
  double overlap_efficiency = 1;
  std::uint64_t waits = 0;
};

inline WaitMetrics wait_metrics(std::span<const WarpTimeline> warps) {
  // Per SM, the union of the times some warp was busy: alive and not waiting for the producer.
  std::map<std::uint32_t, std::vector<Interval>> busy;
  for (const WarpTimeline& w : warps) {
    std::vector<Interval>& segments = busy[w.sm];
    std::uint64_t from = w.life.begin;
    for (const Interval& wait : w.waits) {
      if (wait.begin > from) segments.push_back({from, wait.begin});
      from = std::max(from, wait.end);
    }
    if (w.life.end > from) segments.push_back({from, w.life.end});
  }
  for (auto& [sm, segments] : busy) {
    std::sort(segments.begin(), segments.end(), [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
    std::vector<Interval> merged;
    for (const Interval& s : segments) {
      if (!merged.empty() && s.begin <= merged.back().end) merged.back().end = std::max(merged.back().end, s.end);
      else merged.push_back(s);
    }
    segments = std::move(merged);
  }
  // A warp's own busy segments never overlap its own waits, so intersecting a wait with the
  // union measures exactly the time other warps of its SM were busy.
  WaitMetrics m;
  double lived = 0;
  std::uint64_t waited_ns = 0, hidden_ns = 0;
  for (const WarpTimeline& w : warps) {
    if (!w.consumer) continue;
    lived += static_cast<double>(w.life.end - w.life.begin);
    const std::vector<Interval>& segments = busy[w.sm];
    for (const Interval& wait : w.waits) {
      ++m.waits;
      waited_ns += wait.end - wait.begin;
      auto it = std::upper_bound(segments.begin(), segments.end(), wait.begin,
                                 [](std::uint64_t t, const Interval& s) { return t < s.end; });
      for (; it != segments.end() && it->begin < wait.end; ++it)
        hidden_ns += std::min(it->end, wait.end) - std::max(it->begin, wait.begin);
    }
  }
  m.wait_seconds = static_cast<double>(waited_ns) / 1e9;
  m.hidden_seconds = static_cast<double>(hidden_ns) / 1e9;
  m.wait_share = lived > 0 ? static_cast<double>(waited_ns) / lived : 0;
  m.overlap_efficiency = waited_ns > 0 ? static_cast<double>(hidden_ns) / static_cast<double>(waited_ns) : 1;
  return m;
}

}  // namespace warpvm::workloads
