#pragma once
/// @file
/// Runtime configuration: cache size, page size, eviction policy, checked mode, progress bound.

#include <cstddef>
#include <cstdint>
#include <string>

namespace warpvm {

/// How the device page cache picks a victim frame.
enum class EvictionPolicy : std::uint8_t {
  clock,  ///< CLOCK: a frame referenced since the hand last passed gets a second chance (default)
  fifo,   ///< FIFO with reference counts, as DREAM: the hand takes the next frame nobody holds
};

/// Where an object's pages are served from.
enum class Placement : std::uint8_t {
  migrate,  ///< pages are copied into the device cache on first touch (default)
  remote,   ///< every access goes to pinned host memory over the link (zero-copy); nothing cached
};

const char* to_string(EvictionPolicy policy) noexcept;
const char* to_string(Placement placement) noexcept;

/// Everything a Runtime needs to know up front. Validated by Runtime's constructor.
struct Config {
  /// Device cache size in bytes; 0 means "use cache_fraction_of_free".
  std::size_t cache_bytes = 0;
  /// Share of the device's free memory given to the cache when cache_bytes is 0, in (0, 0.95].
  double cache_fraction_of_free = 0.5;
  /// Page (and frame) size: a power of two from 512 B (one 16-byte load per lane) to 2 MiB.
  std::size_t page_bytes = 4096;
  EvictionPolicy eviction = EvictionPolicy::clock;
  /// Bounds-check every element access; an out-of-range index is raised as a warpvm::Error.
  bool checked = false;
  /// Pages one thread may hold at once (live page spans or cursors, plus one element access).
  /// Launches are refused when resident threads x this exceeds the frames: that bound is what
  /// makes every oversubscription ratio deadlock-free.
  std::uint32_t max_pages_held_per_thread = 4;
  /// Objects that may be alive at once.
  std::uint32_t max_objects = 1024;
  /// CUDA device ordinal.
  int device = 0;
  /// A warp that finds no evictable frame for this long records a no_progress error and traps.
  double watchdog_seconds = 20.0;

  /// Throws warpvm::Error(invalid_config) naming the first field that cannot work.
  void validate() const;
  /// One-line human-readable summary.
  [[nodiscard]] std::string describe() const;
};

}  // namespace warpvm
