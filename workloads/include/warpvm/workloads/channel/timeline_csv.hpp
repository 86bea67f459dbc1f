#pragma once
// warpvm-channel-bench --timeline FILE: the per-warp stamps behind the waiting metrics, as CSV
// rows, so that a run's waits can be looked at one by one (when each tile arrived, which warps
// of an SM were busy while a consumer waited) instead of only through their sums.
//
// Pure host code so that the host tests check it.

#include "warpvm/workloads/channel/overlap_metric.hpp"

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <set>
#include <span>
#include <string_view>

namespace warpvm::workloads {

inline constexpr std::string_view timeline_csv_header = "run,warp,sm,consumer,kind,start_ns,end_ns\n";

/// Appends one row per warp life (`kind` life) and per wait (`kind` wait) of `warps` to `out`,
/// times in ns from the earliest life start of the run. `warp` is the position in `warps`. Only
/// warps on SMs where a consumer ran: those are the ones the overlap metric looks at, and the
/// others can be millions of rows.
inline void write_timeline_csv(std::ostream& out, std::string_view run, std::span<const WarpTimeline> warps) {
  std::set<std::uint32_t> consumer_sms;
  std::uint64_t origin = ~std::uint64_t{0};
  for (const WarpTimeline& w : warps) {
    if (w.consumer) consumer_sms.insert(w.sm);
    origin = std::min(origin, w.life.begin);
  }
  for (std::size_t i = 0; i < warps.size(); ++i) {
    const WarpTimeline& w = warps[i];
    if (!consumer_sms.contains(w.sm)) continue;
    auto row = [&](std::string_view kind, const Interval& at) {
      out << run << ',' << i << ',' << w.sm << ',' << (w.consumer ? 1 : 0) << ',' << kind << ','
          << at.begin - origin << ',' << at.end - origin << '\n';
    };
    row("life", w.life);
    for (const Interval& wait : w.waits) row("wait", wait);
  }
}

}  // namespace warpvm::workloads
