#pragma once
/// @file
/// Counters of the fault path, as returned by Runtime::stats().

#include <cstdint>

namespace warpvm {

/// Counters kept by the device cache since the Runtime was made (or reset_stats()).
struct Stats {
  /// Warp-level acquisitions that found the page resident and took a hold on it. While every
  /// migrate object fits in the cache, and always for Placement::resident objects, resident
  /// pages are read without a hold and not counted.
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;      ///< pages loaded into a frame (one per fault actually served)
  std::uint64_t waits = 0;       ///< acquisitions that waited for another warp's load/eviction
  std::uint64_t evictions = 0;   ///< resident pages dropped to make room
  std::uint64_t writebacks = 0;  ///< dirty pages written back (by eviction or flush)
  std::uint64_t bytes_in = 0;    ///< bytes copied host -> device cache
  std::uint64_t bytes_out = 0;   ///< bytes written back device cache -> host

  [[nodiscard]] std::uint64_t pages_in() const { return misses; }
  [[nodiscard]] std::uint64_t pages_out() const { return writebacks; }
  [[nodiscard]] std::uint64_t bytes_moved() const { return bytes_in + bytes_out; }
};

}  // namespace warpvm
