#pragma once
/// @file
/// The heap's fast path for small requests (16 B to 8 KB): its pure pieces, shared by the
/// device code (heap_device.cuh) and the host tests.
///
/// A part of the heap (the small area, reserved from the host's space once, when the Heap is
/// made) is cut into 64 KB slabs. Each size class (16 B << c, c = 0..9) hands out blocks by
/// ticket: a warp's lanes of one class take consecutive tickets with one atomic add; ticket t
/// is block t % B of the class's virtual slab t / B (B blocks per slab). The lane whose ticket
/// is block 0 of a virtual slab binds it to a physical slab taken from the free-slab queue and
/// publishes the binding in the class's binding ring; the other lanes of that virtual slab wait
/// for it, read it and count themselves off the entry, which the next lap's virtual slab takes
/// only then. A slab's live count starts at B (every block is handed out exactly once, by its
/// ticket) and each free takes one off; the free that empties it puts the slab back in the
/// queue. A bitmap per slab (one bit per block, set by malloc, cleared by free) makes a second
/// free of a block, or a pointer the heap did not return, change nothing and be reported.
/// Nothing here waits for the host: the host round trip is left to requests over 8 KB and to
/// lanes the fast path could not serve (the small area full).

#include "warpvm/detail/alloc/heap_ptr.hpp"
#include "warpvm/detail/alloc/uvm_blocks.hpp"
#include "warpvm/detail/host_device.hpp"

#include <cuda/std/bit>

#include <cstdint>

namespace warpvm::detail {

inline constexpr std::uint64_t slab_bytes = basic_block_bytes;  ///< a small block's slab is one 64 KB block
inline constexpr std::uint32_t small_classes = 10;               ///< 16 B .. 8 KB
inline constexpr std::uint64_t small_max_bytes = heap_unit_bytes << (small_classes - 1);
/// 32-bit bitmap words per slab: enough for the smallest class's 4096 blocks.
inline constexpr std::uint32_t slab_bitmap_words = static_cast<std::uint32_t>(slab_bytes / heap_unit_bytes / 32);
/// Entries of each class's binding ring: virtual slab v is published at v % binding_ring, once
/// every lane of v - binding_ring has read its binding there (binding_entry_free_for), so that
/// no lane ever finds its binding replaced (a fixed ring whose entries were simply overwritten
/// lost bindings, and hung their lanes, once one kernel bound more slabs of a class than it
/// had entries: issue #4). It bounds a class's virtual slabs in flight; a binder a ring ahead
/// waits only for lanes that are reading their binding.
inline constexpr std::uint32_t binding_ring = 1u << 14;
inline constexpr std::uint32_t no_small_class = ~std::uint32_t{0};

/// The class serving `bytes`: the bit width of its 16-byte units less one, as the region path's
/// warp grouping has it (heap_device.cuh); no_small_class for 0 bytes or over 8 KB.
WARPVM_HD_INLINE constexpr std::uint32_t small_class_of(std::uint64_t bytes) {
  if (bytes == 0 || bytes > small_max_bytes) return no_small_class;
  const std::uint64_t units = (bytes + heap_unit_bytes - 1) / heap_unit_bytes;
  return static_cast<std::uint32_t>(cuda::std::bit_width(units - 1));
}
WARPVM_HD_INLINE constexpr std::uint64_t small_class_bytes(std::uint32_t size_class) {
  return heap_unit_bytes << size_class;
}
WARPVM_HD_INLINE constexpr std::uint32_t small_blocks_per_slab(std::uint32_t size_class) {
  return static_cast<std::uint32_t>(slab_bytes / small_class_bytes(size_class));
}

/// Where ticket `ticket` of a class lands.
struct SmallTicket {
  std::uint64_t virtual_slab;
  std::uint32_t block;
};
WARPVM_HD_INLINE constexpr SmallTicket small_ticket(std::uint64_t ticket, std::uint32_t size_class) {
  const std::uint32_t per_slab = small_blocks_per_slab(size_class);
  return {ticket / per_slab, static_cast<std::uint32_t>(ticket % per_slab)};
}

/// A bound slab's tag: its class in the low 4 bits, the virtual slab above, the top bit set so
/// that it is never 0 (0: a slab not bound, which no pointer's tag matches).
WARPVM_HD_INLINE constexpr std::uint32_t small_slab_tag(std::uint32_t size_class, std::uint64_t virtual_slab) {
  return static_cast<std::uint32_t>((virtual_slab << 4) | size_class) | 0x80000000u;
}
WARPVM_HD_INLINE constexpr std::uint32_t small_tag_class(std::uint32_t tag) { return tag & 0xfu; }

/// A binding ring entry: the virtual slab's low 32 bits above, below the physical slab + 1
/// (0: nothing published yet) or failed_binding (the queue had no slab).
inline constexpr std::uint32_t failed_binding = ~std::uint32_t{0};
WARPVM_HD_INLINE constexpr std::uint64_t binding_entry(std::uint64_t virtual_slab, std::uint32_t slab_plus_one) {
  return (virtual_slab << 32) | slab_plus_one;
}

/// Where virtual slab `virtual_slab` of `size_class` is published.
WARPVM_HD_INLINE constexpr std::uint32_t binding_index(std::uint32_t size_class, std::uint64_t virtual_slab) {
  return size_class * binding_ring + static_cast<std::uint32_t>(virtual_slab % binding_ring);
}

enum class BindingState : std::uint8_t {
  pending,  ///< not published yet: wait
  bound,    ///< `slab` holds the virtual slab
  failed,   ///< no slab: the lanes go to the host path
};
struct Binding {
  BindingState state;
  std::uint32_t slab;
};
/// What entry `entry` of the ring says of `virtual_slab`: pending until its binder published.
WARPVM_HD_INLINE constexpr Binding read_binding(std::uint64_t entry, std::uint64_t virtual_slab) {
  const auto published = static_cast<std::uint32_t>(entry >> 32);
  const auto value = static_cast<std::uint32_t>(entry);
  if (value == 0 || published != static_cast<std::uint32_t>(virtual_slab)) return {BindingState::pending, 0};
  if (value == failed_binding) return {BindingState::failed, 0};
  return {BindingState::bound, value - 1};
}

/// Whether `virtual_slab`'s binder may publish into its entry, which holds `entry` and whose
/// previous virtual slab has `readers_left` lanes yet to read it: only once that previous one
/// (virtual_slab - binding_ring, none for the first lap) is published and read by all its
/// lanes. Every ticket below the binder's is taken, by a lane that reads its binding without
/// waiting for anything but that binding's own binder, so the wait ends.
WARPVM_HD_INLINE constexpr bool binding_entry_free_for(std::uint64_t entry, std::uint32_t readers_left,
                                                       std::uint64_t virtual_slab) {
  if (readers_left != 0) return false;
  if (virtual_slab < binding_ring) return entry == 0;
  return read_binding(entry, virtual_slab - binding_ring).state != BindingState::pending;
}
// A warp's 32 tickets never span a ring, so no binder waits for a lane of its own warp.
static_assert(std::uint64_t{binding_ring} * small_blocks_per_slab(small_classes - 1) > 32);

/// A free-slab queue entry: the queue position it serves (low 32 bits) above, below the slab + 1
/// put there for it, or 0 while that position waits for its slab. Position p's taker accepts
/// only an entry for p, and marks it, once read, as waiting for position p + slabs (the next
/// lap's giver): so a taker that fell a lap behind can never read another position's slab.
WARPVM_HD_INLINE constexpr std::uint64_t queue_entry(std::uint64_t position, std::uint32_t slab_plus_one) {
  return (position << 32) | slab_plus_one;
}
/// The slab + 1 that `entry` holds for `position`, or 0 when it holds none for it (yet).
WARPVM_HD_INLINE constexpr std::uint32_t queued_slab(std::uint64_t entry, std::uint64_t position) {
  return static_cast<std::uint32_t>(entry >> 32) == static_cast<std::uint32_t>(position)
             ? static_cast<std::uint32_t>(entry)
             : 0;
}

/// A block's bit in its slab's bitmap.
WARPVM_HD_INLINE constexpr std::uint32_t block_word(std::uint32_t block) { return block / 32; }
WARPVM_HD_INLINE constexpr std::uint32_t block_bit(std::uint32_t block) { return std::uint32_t{1} << (block % 32); }

/// Where the small area lies: `slabs` slabs of 64 KB from heap offset `area_offset`.
struct SmallArea {
  std::uint64_t area_offset;
  std::uint32_t slabs;  ///< 0: no fast path

  [[nodiscard]] WARPVM_HD constexpr std::uint64_t slab_offset(std::uint32_t slab) const {
    return area_offset + std::uint64_t{slab} * slab_bytes;
  }
  [[nodiscard]] WARPVM_HD constexpr heap_ptr pointer(std::uint32_t size_class, std::uint32_t slab,
                                                     std::uint32_t block, std::uint32_t tag) const {
    return heap_ptr::small_block(slab_offset(slab), small_class_bytes(size_class), block, tag);
  }

  /// A small pointer's slab and block, checked against everything the pointer itself says:
  /// `ok` is false for a pointer the fast path cannot have returned (the slab's tag is checked
  /// by the caller, against the slab's current one).
  struct Located {
    bool ok;
    std::uint32_t slab, block, size_class;
  };
  [[nodiscard]] WARPVM_HD constexpr Located locate(const heap_ptr& p) const {
    const Located none{false, 0, 0, 0};
    if (!p.is_small() || p.region_offset() < area_offset) return none;
    const std::uint64_t slab = (p.region_offset() - area_offset) / slab_bytes;
    const std::uint32_t size_class = small_class_of(p.size());
    if (slab >= slabs || size_class == no_small_class || small_class_bytes(size_class) != p.size() ||
        small_tag_class(p.tag()) != size_class || p.lane() >= small_blocks_per_slab(size_class))
      return none;
    return {true, static_cast<std::uint32_t>(slab), p.lane(), size_class};
  }
};

}  // namespace warpvm::detail
