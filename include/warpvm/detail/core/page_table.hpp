#pragma once
/// @file
/// The per-page state machine. One 32-bit word per virtual page:
///
///   bit 31 VALID  the page is in a frame and may be read there
///   bit 30 BUSY   one warp owns the page's transition (loading it, or evicting it)
///   bits 0-29     holders: lanes that acquired the page and have not released it
///
/// Transitions (every one a single atomic on the word):
///   acquire:        holders += n                       (any state; a holder keeps a VALID page resident)
///   begin_fetch:    {!VALID, !BUSY}   -> {!VALID, BUSY}  one winner loads the page
///   finish_fetch:   {!VALID, BUSY}    -> {VALID, !BUSY}
///   begin_evict:    {VALID, holders 0} -> {!VALID, BUSY} fails while anybody holds the page
///   finish_evict:   {!VALID, BUSY}    -> {!VALID, !BUSY} waiters then race to begin_fetch
///   release:        holders -= n
/// A page is therefore never evicted while held, and never loaded by two warps at once.

#include "warpvm/detail/host_device.hpp"

#include <cuda/atomic>

#include <cstdint>

namespace warpvm::detail {

/// One page: its state word and, while VALID, its frame. Eight aligned bytes, so that one load
/// reads a consistent pair (the hold-free hit path relies on it).
struct alignas(8) PageEntry {
  std::uint32_t state;
  std::uint32_t frame;
};
static_assert(sizeof(PageEntry) == 8);

namespace page_word {
inline constexpr std::uint32_t valid = 1u << 31;
inline constexpr std::uint32_t busy = 1u << 30;
inline constexpr std::uint32_t holders_mask = busy - 1;

WARPVM_HD_INLINE constexpr bool is_resident(std::uint32_t w) { return (w & (valid | busy)) == valid; }
WARPVM_HD_INLINE constexpr bool is_busy(std::uint32_t w) { return (w & busy) != 0; }
WARPVM_HD_INLINE constexpr bool is_absent(std::uint32_t w) { return (w & (valid | busy)) == 0; }
WARPVM_HD_INLINE constexpr std::uint32_t holders(std::uint32_t w) { return w & holders_mask; }
}  // namespace page_word

/// What a warp does after adding itself to a page's holders.
enum class AcquireOutcome : std::uint8_t { hit, fetch, wait };

WARPVM_HD_INLINE constexpr AcquireOutcome classify(std::uint32_t word_after_acquire) {
  if (page_word::is_resident(word_after_acquire)) return AcquireOutcome::hit;
  if (page_word::is_absent(word_after_acquire)) return AcquireOutcome::fetch;
  return AcquireOutcome::wait;
}

using page_atomic = cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>;

/// Adds `n` holders; returns the word as it was before (holders not yet counted).
WARPVM_HD_INLINE std::uint32_t page_acquire(std::uint32_t& word, std::uint32_t n) {
  return page_atomic(word).fetch_add(n, cuda::std::memory_order_acquire);
}

/// Removes `n` holders. Release order: the holders' reads and writes of the frame happen first.
WARPVM_HD_INLINE void page_release(std::uint32_t& word, std::uint32_t n) {
  page_atomic(word).fetch_sub(n, cuda::std::memory_order_release);
}

WARPVM_HD_INLINE std::uint32_t page_load(std::uint32_t& word) {
  return page_atomic(word).load(cuda::std::memory_order_acquire);
}

/// Claims the right to load an absent page. Exactly one caller wins per absence.
WARPVM_HD_INLINE bool page_try_begin_fetch(std::uint32_t& word) {
  page_atomic ref(word);
  std::uint32_t seen = ref.load(cuda::std::memory_order_relaxed);
  while (page_word::is_absent(seen)) {
    if (ref.compare_exchange_weak(seen, seen | page_word::busy, cuda::std::memory_order_acq_rel,
                                  cuda::std::memory_order_relaxed))
      return true;
  }
  return false;
}

/// Publishes a loaded page: BUSY off, VALID on, holders untouched. Release order: the frame's
/// contents and the page's frame number are visible to anyone who then sees VALID.
WARPVM_HD_INLINE void page_finish_fetch(std::uint32_t& word) {
  page_atomic(word).fetch_xor(page_word::valid | page_word::busy, cuda::std::memory_order_release);
}

/// Claims a resident page nobody holds for eviction: VALID with no holders -> `busy_word` (BUSY;
/// a host_batched eviction order names itself in the holder bits, eviction_order::try_take).
WARPVM_HD_INLINE bool page_try_begin_evict(std::uint32_t& word, std::uint32_t busy_word = page_word::busy) {
  std::uint32_t expected = page_word::valid;
  return page_atomic(word).compare_exchange_strong(expected, busy_word,
                                                   cuda::std::memory_order_acq_rel,
                                                   cuda::std::memory_order_relaxed);
}

/// host_batched while eviction is possible: adds `n` holders only to a resident page (a CAS, so
/// a page that is absent or being evicted is never written: the host writes absent pages' entries
/// with copies, which an atomic on the same word would race). Returns whether it did.
WARPVM_HD_INLINE bool page_try_hold_resident(std::uint32_t& word, std::uint32_t n) {
  page_atomic ref(word);
  std::uint32_t seen = ref.load(cuda::std::memory_order_relaxed);
  while (page_word::is_resident(seen)) {
    if (ref.compare_exchange_weak(seen, seen + n, cuda::std::memory_order_acquire, cuda::std::memory_order_relaxed))
      return true;
  }
  return false;
}

/// Ends an eviction; holders that arrived meanwhile stay counted and will re-fetch.
WARPVM_HD_INLINE void page_finish_evict(std::uint32_t& word) {
  page_atomic(word).fetch_and(~page_word::busy, cuda::std::memory_order_release);
}

}  // namespace warpvm::detail
