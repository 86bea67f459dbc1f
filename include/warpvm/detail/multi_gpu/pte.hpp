#pragma once
/// @file
/// One GPU's page-table word for one page of a multi-GPU object (64 bits, in that GPU's memory):
///
///   bits 0-39   the frame's device address >> 12 (frames are page-aligned, pages >= 4 KB): the
///               GPU's own frame, or the owner's frame on a peer GPU (reached over NVLink, UVA)
///   bit 40      PRESENT   the mapping may be used
///   bit 41      WRITABLE  stores may go through it (granted only on a write fault: the page is
///                         then marked dirty, so a writable mapping implies a dirty page)
///   bit 42      REMOTE    the frame is a peer's (accesses count towards access-counter migration)
///   bit 43      REVOKE    a fault handler is taking the mapping away: new holds must not use it
///   bits 48-63  holders   warps that hold the page on this GPU right now
///
/// Holds are taken only by warps of the GPU that owns the word (fetch_add, acquire); every other
/// field changes only under the page's directory lock (placement.hpp), possibly from another GPU
/// through a peer atomic. Invalidating or downgrading a mapping is:
///   1. revoke: fetch_or(REVOKE). From now on a warp that adds itself sees REVOKE, drops its hold
///      without touching the frame and faults (it then waits for the directory lock).
///   2. drain: wait until a load shows no holders. Holds taken after step 1 never touch the frame,
///      and the count is the sum of the older (real) holds and the newer (transient) ones, so a
///      zero means every older hold has been released: nobody reads or writes through the old
///      mapping any more.
///   3. install: the new mapping replaces every field but the holders (CAS loop), REVOKE cleared.
/// Giving a mapping (absent -> present) or a permission (read-only -> writable) needs no drain.
/// Every atomic is system scope: peers update these words over NVLink.

#include "warpvm/detail/host_device.hpp"

#include <cuda/atomic>

#include <cstdint>

namespace warpvm::detail::mg {

namespace pte {
inline constexpr unsigned address_shift = 12;
inline constexpr std::uint64_t address_mask = (std::uint64_t{1} << 40) - 1;
inline constexpr std::uint64_t present = std::uint64_t{1} << 40;
inline constexpr std::uint64_t writable = std::uint64_t{1} << 41;
inline constexpr std::uint64_t remote = std::uint64_t{1} << 42;
inline constexpr std::uint64_t revoke = std::uint64_t{1} << 43;
inline constexpr unsigned holder_shift = 48;
inline constexpr std::uint64_t holder_one = std::uint64_t{1} << holder_shift;
inline constexpr std::uint64_t holders_mask = ~std::uint64_t{0} << holder_shift;
inline constexpr std::uint64_t mapping_mask = ~holders_mask;
/// The largest frame address a word can hold (exclusive).
inline constexpr std::uint64_t address_limit = (address_mask + 1) << address_shift;

/// A mapping of the frame at `address` (page-aligned) with `flags`; no holders.
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint64_t make(std::uint64_t address, std::uint64_t flags) {
  return ((address >> address_shift) & address_mask) | flags;
}
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint64_t address(std::uint64_t w) {
  return (w & address_mask) << address_shift;
}
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint32_t holders(std::uint64_t w) {
  return static_cast<std::uint32_t>(w >> holder_shift);
}
[[nodiscard]] WARPVM_HD_INLINE constexpr bool is_present(std::uint64_t w) { return (w & present) != 0; }
[[nodiscard]] WARPVM_HD_INLINE constexpr bool is_writable(std::uint64_t w) { return (w & writable) != 0; }
[[nodiscard]] WARPVM_HD_INLINE constexpr bool is_remote(std::uint64_t w) { return (w & remote) != 0; }
/// The GPU's own frame (owner or replica), as opposed to a remote mapping.
[[nodiscard]] WARPVM_HD_INLINE constexpr bool is_own_frame(std::uint64_t w) { return is_present(w) && !is_remote(w); }
/// A hold that saw `w` may read (and, for `write`, store) through the mapping.
[[nodiscard]] WARPVM_HD_INLINE constexpr bool usable(std::uint64_t w, bool write) {
  return (w & (present | revoke)) == present && (!write || is_writable(w));
}
}  // namespace pte

using pte_atomic = cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>;

/// Adds one holder (the calling warp's group). Acquire: the frame's contents as published by the
/// mapping's installer are visible, and (on this architecture) L1 lines of the frame are dropped.
/// Returns the word before the add.
WARPVM_HD_INLINE std::uint64_t pte_hold(std::uint64_t& word) {
  return pte_atomic(word).fetch_add(pte::holder_one, cuda::std::memory_order_acquire);
}

/// Drops a hold that was used. Release: the holder's reads and writes of the frame happen before
/// a drainer can see the count fall.
WARPVM_HD_INLINE void pte_release(std::uint64_t& word) {
  pte_atomic(word).fetch_sub(pte::holder_one, cuda::std::memory_order_release);
}

/// Drops a hold whose mapping was not usable (the frame was not touched).
WARPVM_HD_INLINE void pte_drop_unused(std::uint64_t& word) {
  pte_atomic(word).fetch_sub(pte::holder_one, cuda::std::memory_order_relaxed);
}

[[nodiscard]] WARPVM_HD_INLINE std::uint64_t pte_load(std::uint64_t& word) {
  return pte_atomic(word).load(cuda::std::memory_order_acquire);
}

/// Step 1 of an invalidation (the directory lock held). Returns the word before.
WARPVM_HD_INLINE std::uint64_t pte_begin_revoke(std::uint64_t& word) {
  return pte_atomic(word).fetch_or(pte::revoke, cuda::std::memory_order_acq_rel);
}

/// Takes back a revoke whose transition was abandoned (the mapping stays as it was).
WARPVM_HD_INLINE void pte_cancel_revoke(std::uint64_t& word) {
  pte_atomic(word).fetch_and(~pte::revoke, cuda::std::memory_order_release);
}

/// Step 2 check: true once no hold taken before the revoke is left.
[[nodiscard]] WARPVM_HD_INLINE bool pte_drained(std::uint64_t& word) { return pte::holders(pte_load(word)) == 0; }

/// Step 3, and the form of every change made under the directory lock: the mapping fields become
/// `mapping` (REVOKE cleared), the holders are kept. Release: the frame's new contents and the
/// directory's state are visible to whoever then holds the page.
WARPVM_HD_INLINE void pte_install(std::uint64_t& word, std::uint64_t mapping) {
  pte_atomic ref(word);
  std::uint64_t seen = ref.load(cuda::std::memory_order_relaxed);
  while (!ref.compare_exchange_weak(seen, (seen & pte::holders_mask) | (mapping & pte::mapping_mask),
                                    cuda::std::memory_order_release, cuda::std::memory_order_relaxed)) {
  }
}

/// A write fault on a mapping the directory lets this GPU write (exclusive owner, or remote
/// mapper of an unreplicated page): the permission is added in place.
WARPVM_HD_INLINE void pte_grant_write(std::uint64_t& word) {
  pte_atomic(word).fetch_or(pte::writable, cuda::std::memory_order_release);
}

/// flush(): the page was written back; the next store faults and marks it dirty again. Only
/// called while no kernel uses the space.
WARPVM_HD_INLINE void pte_clear_write(std::uint64_t& word) {
  pte_atomic(word).fetch_and(~pte::writable, cuda::std::memory_order_relaxed);
}

}  // namespace warpvm::detail::mg
