#pragma once
/// @file
/// Victim selection for the device page cache (CLOCK and DREAM's FIFO with reference counts).
/// Pure __host__ __device__ logic over a FrameTable; the same code runs in kernels, in the
/// simulator and in host tests.

#include "warpvm/config.hpp"
#include "warpvm/detail/core/frame_table.hpp"
#include "warpvm/detail/core/page_table.hpp"
#include "warpvm/detail/host_device.hpp"

#include <cstdint>

namespace warpvm::detail {

/// A frame taken for a new page. The frame is locked; if it held a page, that page is now in
/// its eviction (BUSY) state and must be written back (when dirty) and then finished.
struct Victim {
  std::uint32_t frame;
  std::uint64_t evicted_key;  ///< empty_page_key when the frame was free
  bool dirty;
  [[nodiscard]] WARPVM_HD bool evicts() const { return evicted_key != empty_page_key; }
};

/// Result of a bounded victim search: found, or every probe failed (all frames held, locked or
/// recently referenced), in which case the caller backs off and searches again.
struct VictimSearch {
  Victim victim;
  bool found;
};

/// Probes at most `probe_budget` frames under the hand. A frame is taken when it is free, or
/// when its page is resident and held by nobody (begin_evict succeeds). CLOCK first clears a
/// set reference bit and moves on (second chance); FIFO ignores the bit.
/// `page_word_of(key)` returns the page-state word of any page key.
template <class PageWordOf>
WARPVM_HD VictimSearch find_victim(const FrameTable& frames, EvictionPolicy policy,
                                   std::uint32_t probe_budget, PageWordOf&& page_word_of) {
  for (std::uint32_t probe = 0; probe < probe_budget; ++probe) {
    const std::uint32_t f = frames.advance_hand();
    if (policy == EvictionPolicy::clock && frames.is_referenced(f)) {
      frames.set_referenced(f, false);
      continue;
    }
    if (!frames.try_lock(f)) continue;
    const std::uint64_t key = frames.owner_of(f);
    if (key == empty_page_key) return {{f, empty_page_key, false}, true};
    if (page_try_begin_evict(page_word_of(key))) return {{f, key, frames.is_dirty(f)}, true};
    frames.unlock(f);
  }
  return {{0, empty_page_key, false}, false};
}

/// Frames a launch needs so that it always makes progress: even if every resident thread
/// holds all but one of its pages and waits for one more, some frame is held by nobody.
WARPVM_HD_INLINE constexpr std::uint64_t frames_required(std::uint64_t resident_threads,
                                                         std::uint32_t pages_held_per_thread) {
  return resident_threads * pages_held_per_thread;
}

}  // namespace warpvm::detail
