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

/// Tickets a searcher takes at once once it is sweeping a run of referenced frames.
inline constexpr std::uint32_t sweep_batch = 32;

/// Probes at most `probe_budget` frames under the hand. A frame is taken when it is free, or
/// when its page is resident and held by nobody (begin_evict succeeds). CLOCK first clears a
/// set reference bit and moves on (second chance); FIFO ignores the bit.
/// `free_only`: while every migrate page fits in the frames, resident pages are read without
/// holds, so none may be evicted; a free frame then always exists (resident pages plus pages
/// being loaded never outnumber the frames) and only free frames are taken.
/// A searcher that has met `sweep_batch` referenced frames (a hot cache) takes the hand's
/// tickets that many at a time, so that one search clears a whole cache at load speed instead
/// of one atomic round trip per frame; frames left in a batch after the victim keep their state
/// until the hand comes round again.
/// `page_word_of(key)` returns the page-state word of any page key.
template <class PageWordOf>
WARPVM_HD VictimSearch find_victim(const FrameTable& frames, EvictionPolicy policy, bool free_only,
                                   std::uint32_t probe_budget, PageWordOf&& page_word_of) {
  std::uint32_t batch = 1;
  std::uint32_t referenced_seen = 0;
  for (std::uint32_t probed = 0; probed < probe_budget;) {
    const std::uint64_t first = frames.advance_hand(batch);
    for (std::uint32_t i = 0; i < batch; ++i, ++probed) {
      const std::uint32_t f = frames.frame_at(first + i);
      if (free_only && frames.owner_of(f) != empty_page_key) continue;
      if (policy == EvictionPolicy::clock && frames.is_referenced(f)) {
        frames.set_referenced(f, false);
        ++referenced_seen;
        continue;
      }
      if (!frames.try_lock(f)) continue;
      const std::uint64_t key = frames.owner_of(f);
      if (key == empty_page_key) return {{f, empty_page_key, false}, true};
      if (!free_only && page_try_begin_evict(page_word_of(key))) return {{f, key, frames.is_dirty(f)}, true};
      frames.unlock(f);
    }
    if (referenced_seen >= sweep_batch) batch = sweep_batch;
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
