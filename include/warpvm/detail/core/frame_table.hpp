#pragma once
/// @file
/// The frames of the device page cache: for each frame the page it holds, a lock taken by the
/// one warp that is replacing its page, a reference bit for CLOCK and a dirty bit.

#include "warpvm/detail/core/geometry.hpp"
#include "warpvm/detail/host_device.hpp"

#include <cuda/atomic>

#include <cstdint>

namespace warpvm::detail {

using frame_atomic = cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>;
using owner_atomic = cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>;

/// Non-owning view of the frame metadata arrays (device memory on the GPU, plain memory in tests).
struct FrameTable {
  std::uint64_t* owner;       ///< page key held by each frame, or empty_page_key
  std::uint32_t* lock;        ///< 1 while a warp replaces the frame's page
  std::uint32_t* referenced;  ///< CLOCK's second-chance bit, set when a loaded page is used again
  std::uint32_t* dirty;       ///< set by writers; the evictor writes the page back
  std::uint64_t* hand;        ///< the clock hand / FIFO cursor (monotonic ticket)
  std::uint32_t count;        ///< number of frames

  [[nodiscard]] WARPVM_HD bool try_lock(std::uint32_t f) const {
    return frame_atomic(lock[f]).exchange(1u, cuda::std::memory_order_acquire) == 0u;
  }
  WARPVM_HD void unlock(std::uint32_t f) const {
    frame_atomic(lock[f]).store(0u, cuda::std::memory_order_release);
  }
  [[nodiscard]] WARPVM_HD std::uint64_t owner_of(std::uint32_t f) const {
    return owner_atomic(owner[f]).load(cuda::std::memory_order_relaxed);
  }
  WARPVM_HD void set_owner(std::uint32_t f, std::uint64_t key) const {
    owner_atomic(owner[f]).store(key, cuda::std::memory_order_relaxed);
  }
  [[nodiscard]] WARPVM_HD bool is_referenced(std::uint32_t f) const {
    return frame_atomic(referenced[f]).load(cuda::std::memory_order_relaxed) != 0u;
  }
  WARPVM_HD void set_referenced(std::uint32_t f, bool on) const {
    frame_atomic(referenced[f]).store(on ? 1u : 0u, cuda::std::memory_order_relaxed);
  }
  [[nodiscard]] WARPVM_HD bool is_dirty(std::uint32_t f) const {
    return frame_atomic(dirty[f]).load(cuda::std::memory_order_relaxed) != 0u;
  }
  WARPVM_HD void set_dirty(std::uint32_t f, bool on) const {
    frame_atomic(dirty[f]).store(on ? 1u : 0u, cuda::std::memory_order_relaxed);
  }
  /// Moves the hand past `n` frames; returns the ticket of the first. Tickets are 64-bit so
  /// the hand never wraps in practice.
  [[nodiscard]] WARPVM_HD std::uint64_t advance_hand(std::uint32_t n) const {
    return owner_atomic(*hand).fetch_add(n, cuda::std::memory_order_relaxed);
  }
  [[nodiscard]] WARPVM_HD std::uint32_t frame_at(std::uint64_t ticket) const {
    return static_cast<std::uint32_t>(ticket % count);
  }
};

}  // namespace warpvm::detail
