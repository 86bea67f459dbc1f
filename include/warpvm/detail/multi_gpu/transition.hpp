#pragma once
/// @file
/// What a directory transition (placement.hpp's apply()) means for each GPU's page-table word:
/// the mapping it gets, whether its old mapping must be revoked and drained before any data
/// moves, and whether its own old frame goes back to its pool. Pure __host__ __device__ code:
/// the device fault handler runs it under the page's directory lock, the host tests run it
/// against a model of the page's contents.
///
/// The page-table words follow the directory (invariants the host tests check):
///  - the owner and every replica map their own frame; remote mappers map the owner's frame;
///    every other GPU maps nothing;
///  - a word is writable only while the page has no replicas, and only after a write fault by
///    that GPU (so a writable word implies the page is marked dirty);
///  - no frame is mapped as its own by two GPUs.

#include "warpvm/detail/host_device.hpp"
#include "warpvm/detail/multi_gpu/pte.hpp"
#include "warpvm/detail/policy/placement.hpp"

#include <cstdint>

namespace warpvm::detail::mg {

enum class Mapping : std::uint8_t {
  none,
  own,     ///< the GPU's own frame: the owner's copy or a replica
  remote,  ///< the owner's frame on a peer, over the link
};

[[nodiscard]] WARPVM_HD_INLINE constexpr Mapping mapping_of(const DirectoryEntry& e, unsigned g) {
  if (e.owner == owner_host) return Mapping::none;
  if (e.has_copy(g)) return Mapping::own;
  return e.maps_remote(g) ? Mapping::remote : Mapping::none;
}

/// One GPU's part of a transition.
struct PteChange {
  std::uint64_t after = 0;   ///< mapping fields after the transition (0: absent)
  bool revoke = false;       ///< the old mapping is taken away or narrowed: revoke and drain it first
  bool frees_frame = false;  ///< the GPU's own old frame is no longer mapped: give it back afterwards
};

/// GPU `g`'s change when the entry goes from `before` to `after` by an action of `requester`
/// (which writes when `writes`). `old_word` is g's word before; `owner_frame` the address of the
/// owner's frame after the transition; `requester_frame` the address of the requester's own
/// frame after it (the frame it pulled into, or the copy it had).
[[nodiscard]] WARPVM_HD_INLINE PteChange plan_pte(const DirectoryEntry& after, unsigned g, unsigned requester,
                                                  bool writes, std::uint64_t old_word, std::uint64_t owner_frame,
                                                  std::uint64_t requester_frame) {
  PteChange c;
  const Mapping m = mapping_of(after, g);
  if (m != Mapping::none) {
    const std::uint64_t address =
        m == Mapping::remote ? owner_frame : g == requester ? requester_frame : pte::address(old_word);
    const bool keeps_write = pte::is_present(old_word) && pte::is_writable(old_word) &&
                             pte::is_remote(old_word) == (m == Mapping::remote) && pte::address(old_word) == address;
    const bool may_write = after.replicas == 0 && ((g == requester && writes) || keeps_write);
    c.after = pte::make(address, pte::present | (m == Mapping::remote ? pte::remote : 0) | (may_write ? pte::writable : 0));
  }
  if (pte::is_present(old_word)) {
    const bool same_frame = pte::is_present(c.after) && pte::address(c.after) == pte::address(old_word) &&
                            pte::is_remote(c.after) == pte::is_remote(old_word);
    c.revoke = !same_frame || (pte::is_writable(old_word) && !pte::is_writable(c.after));
    c.frees_frame = pte::is_own_frame(old_word) && !same_frame;
  }
  return c;
}

/// The address of the owner's frame after the transition: the requester's new frame if it became
/// the owner by pulling, otherwise the owner's current own frame (its word `owner_old_word`).
[[nodiscard]] WARPVM_HD_INLINE std::uint64_t owner_frame_after(const DirectoryEntry& after, unsigned requester,
                                                               std::uint64_t requester_frame,
                                                               std::uint64_t owner_old_word) {
  return after.owner == requester ? requester_frame : pte::address(owner_old_word);
}

}  // namespace warpvm::detail::mg
