#pragma once
/// @file
/// The host_batched transport's eviction orders, word by word (the warp-level passes that use
/// them are in detail/transport/host_batched.cuh; docs/uvm-preset.md has the argument). Pure
/// __host__ __device__ code on the page and progress words, so that host tests can run the
/// protocol with real threads.
///
/// Page words (page_table.hpp): an order takes a page VALID with no holders -> BUSY naming the
/// order in the holders bits (a BUSY word has no holders: holds need VALID, and a page is only
/// taken with none), and marks it `page_counted` once the order has counted it.
///
/// An order's progress word: its index in the high 32 bits; below, the pages taken and counted
/// (`taken`), the marks of those (`marked`), the withdrawn flag, and once withdrawn, the pages
/// given back (`returned`). Each count is at most 512. The order is carried out when marked
/// reaches its pages; withdrawn and done when marked and returned both reach taken.

#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/detail/core/page_table.hpp"
#include "warpvm/detail/host_device.hpp"

#include <cuda/atomic>

#include <cstdint>

namespace warpvm::detail::eviction_order {

inline constexpr std::uint64_t taken_one = 1;
inline constexpr std::uint64_t marked_one = std::uint64_t{1} << 10;
inline constexpr std::uint64_t returned_one = std::uint64_t{1} << 20;
inline constexpr std::uint64_t withdrawn_flag = std::uint64_t{1} << 31;
inline constexpr std::uint64_t count_mask = (std::uint64_t{1} << 10) - 1;
inline constexpr std::uint32_t page_counted = 1u << 29;

using progress_atomic = cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>;

/// The progress word the host writes for order `o` before posting it.
WARPVM_HD_INLINE constexpr std::uint64_t initial_progress(std::uint64_t o) { return (o & 0xffffffffu) << 32; }
WARPVM_HD_INLINE constexpr bool is_order(std::uint64_t w, std::uint64_t o) { return (w >> 32) == (o & 0xffffffffu); }
WARPVM_HD_INLINE constexpr std::uint32_t taken(std::uint64_t w) { return static_cast<std::uint32_t>(w & count_mask); }
WARPVM_HD_INLINE constexpr std::uint32_t marked(std::uint64_t w) {
  return static_cast<std::uint32_t>((w >> 10) & count_mask);
}
WARPVM_HD_INLINE constexpr std::uint32_t returned(std::uint64_t w) {
  return static_cast<std::uint32_t>((w >> 20) & count_mask);
}
WARPVM_HD_INLINE constexpr bool is_withdrawn(std::uint64_t w) { return (w & withdrawn_flag) != 0; }

/// What a change of the progress word finished: nothing, the eviction, or the withdrawal.
enum class Finished : std::uint8_t { nothing, evicted, withdrawn };

/// Whether progress word `w` (just written) finishes an order of `pages` pages.
WARPVM_HD_INLINE constexpr Finished finished(std::uint64_t w, std::uint32_t pages) {
  if (!is_withdrawn(w)) return marked(w) == pages ? Finished::evicted : Finished::nothing;
  return marked(w) == taken(w) && returned(w) == taken(w) ? Finished::withdrawn : Finished::nothing;
}

/// The acknowledgement of order `o` (EvictionAck::sequence) for what finished it.
WARPVM_HD_INLINE constexpr std::uint64_t ack_sequence(std::uint64_t o, Finished how) {
  return how == Finished::withdrawn ? (o + 1) | eviction_ack_cancelled : o + 1;
}

/// The BUSY word of a page taken by order `o`, not yet counted.
WARPVM_HD_INLINE constexpr std::uint32_t page_taken_by(std::uint64_t o) {
  return page_word::busy | static_cast<std::uint32_t>(o & (page_counted - 1));
}

/// Takes a resident page nobody holds (VALID, no holders -> `taken_word`).
WARPVM_HD_INLINE bool try_take(std::uint32_t& word, std::uint32_t taken_word) {
  return page_try_begin_evict(word, taken_word);
}

/// Gives a taken page back (`taken_word` -> VALID with no holders). A CAS, never a store: only
/// the exact word its order left is changed, so a give-back that comes late finds it changed
/// (given back already, and maybe held again) and leaves it alone.
WARPVM_HD_INLINE bool try_give_back(std::uint32_t& word, std::uint32_t taken_word) {
  return page_atomic(word).compare_exchange_strong(taken_word, page_word::valid, cuda::std::memory_order_release,
                                                   cuda::std::memory_order_relaxed);
}

/// Marks a page its taker got counted. A store: nothing else changes a taken, uncounted word
/// (takes and holds need VALID, give-backs of counted pages need the mark, and the host writes
/// only the words of an order whose marks are all counted).
WARPVM_HD_INLINE void mark_counted(std::uint32_t& word, std::uint32_t taken_word) {
  page_atomic(word).store(taken_word | page_counted, cuda::std::memory_order_relaxed);
}

/// Counts `n` pages taken for order `o` of `pages` pages, unless the order has left its slot,
/// was withdrawn, or is complete (a page taken again after the order completed: the block came
/// back). A taker whose count is refused gives its page back.
WARPVM_HD_INLINE bool count_taken(std::uint64_t& progress, std::uint64_t o, std::uint32_t pages, std::uint32_t n) {
  progress_atomic ref(progress);
  std::uint64_t seen = ref.load(cuda::std::memory_order_relaxed);
  while (is_order(seen, o) && !is_withdrawn(seen) && taken(seen) + n <= pages) {
    if (ref.compare_exchange_weak(seen, seen + n * taken_one, cuda::std::memory_order_acq_rel,
                                  cuda::std::memory_order_relaxed))
      return true;
  }
  return false;
}

/// Adds marks or give-backs (`added`, in units of marked_one or returned_one) of pages the order
/// counted; returns what this add finished (exactly one add finishes an order).
WARPVM_HD_INLINE Finished add_progress(std::uint64_t& progress, std::uint32_t pages, std::uint64_t added) {
  return finished(progress_atomic(progress).fetch_add(added, cuda::std::memory_order_acq_rel) + added, pages);
}

/// Withdraws order `o` unless every page is taken already (then it completes as an eviction).
/// Returns whether it is withdrawn (by this call or an earlier one); `how` is Finished::withdrawn
/// when this call withdrew it with nothing taken, so that it is done at once.
WARPVM_HD_INLINE bool try_withdraw(std::uint64_t& progress, std::uint64_t o, std::uint32_t pages, Finished& how) {
  progress_atomic ref(progress);
  std::uint64_t seen = ref.load(cuda::std::memory_order_relaxed);
  how = Finished::nothing;
  while (is_order(seen, o) && !is_withdrawn(seen) && taken(seen) < pages) {
    if (ref.compare_exchange_weak(seen, seen | withdrawn_flag, cuda::std::memory_order_acq_rel,
                                  cuda::std::memory_order_relaxed)) {
      seen |= withdrawn_flag;
      how = finished(seen, pages);
    }
  }
  return is_order(seen, o) && is_withdrawn(seen);
}

}  // namespace warpvm::detail::eviction_order
