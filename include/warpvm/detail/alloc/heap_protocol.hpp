#pragma once
/// @file
/// What the device heap and its host service thread share: the request ring in mapped pinned
/// memory, and the per-region word through which lanes free their parts of a warp's region.
///
/// The ring: a requester takes a position from a device counter, waits until the slot at that
/// position (mod capacity) is empty, writes its request and then the slot's header
/// (posted, position) with a release store. The service takes slots in position order, a batch
/// at a time. A free is answered by emptying the slot; an allocation by writing the reply and
/// then the header (replied, position), which the requesting warp polls for, reads, and empties
/// the slot. A slot is so reused only once its previous request is fully done.

#include "warpvm/detail/alloc/heap_ptr.hpp"
#include "warpvm/detail/alloc/small_blocks.hpp"
#include "warpvm/detail/alloc/uvm_blocks.hpp"
#include "warpvm/detail/host_device.hpp"

#include <cstdint>

namespace warpvm::detail {

enum class HeapRequest : std::uint32_t {
  allocate = 1,  ///< value: region bytes (no_offset: a request no region can meet)
  release = 2,   ///< value: region offset
};

/// Slot headers: 0 empty, else the position with its state in the low two bits.
inline constexpr std::uint64_t heap_slot_posted = 1;
inline constexpr std::uint64_t heap_slot_replied = 2;
WARPVM_HD_INLINE constexpr std::uint64_t heap_slot_header(std::uint64_t position, std::uint64_t state) {
  return (position << 2) | state;
}

/// One ring slot (mapped pinned host memory).
struct alignas(32) HeapSlot {
  std::uint64_t header;
  std::uint64_t value;  ///< request: see HeapRequest; reply: region offset, or no_offset
  std::uint32_t kind;   ///< HeapRequest
  std::uint32_t lanes;  ///< allocate: threads served by the request
  std::uint32_t tag;    ///< reply: the region's tag (never 0)
  /// allocate: the lanes' largest request in 16-byte units (0: too large for any region), for
  /// the refusal HeapStats describes.
  std::uint32_t lane_units;
};

/// The fast path's device state (small_blocks.hpp). Plain pointers into device memory the Heap
/// owns; all zero where the fast path is off (area.slabs == 0).
struct SmallSlabsView {
  SmallArea area;
  std::uint32_t* tags;             ///< per slab: its tag while bound, else 0
  std::uint32_t* live;             ///< per slab: its blocks not yet freed (handed out or still to be)
  std::uint32_t* bitmaps;          ///< per slab: slab_bitmap_words words, a bit per live block
  std::uint64_t* tickets;          ///< per class: tickets taken
  std::uint64_t* bindings;         ///< per class: binding_ring entries (binding_entry)
  std::uint32_t* binding_readers;  ///< per binding entry: lanes yet to read its binding
  std::uint64_t* queue;            ///< the free-slab queue: area.slabs entries (queue_entry)
  std::uint64_t* queue_head;       ///< positions taken
  std::uint64_t* queue_tail;       ///< positions given
  std::int64_t* queue_available;   ///< slabs in the queue that no taker has claimed (transiently less)
};

/// What a kernel needs of one heap. Plain pointers into memory the Heap owns.
struct HeapView {
  HeapSlot* slots;              ///< device address of the ring (mapped pinned memory)
  std::uint64_t* next_position; ///< device word
  std::uint32_t capacity;       ///< slots, a power of two
  std::uint64_t* regions;       ///< device memory: one region word per 64 KB block of the heap
  std::uint64_t blocks;         ///< 64 KB blocks in the heap
  HeapLayout layout;
  LaneOrder order;
  SmallSlabsView small;
};

/// A region's word: its tag in the high half, the lanes still holding their part in the low.
WARPVM_HD_INLINE constexpr std::uint64_t heap_region_word(std::uint32_t tag, std::uint32_t lanes) {
  const std::uint32_t live = lanes >= 32 ? ~std::uint32_t{0} : (std::uint32_t{1} << lanes) - 1;
  return (std::uint64_t{tag} << 32) | live;
}

enum class LaneRelease : std::uint8_t {
  released,       ///< the lane's part is free; other lanes still hold theirs
  region_free,    ///< it was the last part: the region goes back to the host
  not_live,       ///< tag mismatch or the lane already freed: a double free or a foreign pointer
};

/// Frees the parts `lanes` (bit i: lane i) of a region whose word is `word`, for pointers
/// carrying `tag`: returns the parts that were live and are now free (0 for a tag mismatch),
/// and in `next` the word to store (== word when 0). The region is free when `next`'s low
/// half is 0 and something was freed.
WARPVM_HD_INLINE constexpr std::uint32_t release_lanes(std::uint64_t word, std::uint32_t tag, std::uint32_t lanes,
                                                       std::uint64_t& next) {
  next = word;
  if (tag == 0 || static_cast<std::uint32_t>(word >> 32) != tag) return 0;
  const std::uint32_t live = static_cast<std::uint32_t>(word) & lanes;
  next = word & ~std::uint64_t{live};
  return live;
}

/// Frees `lane`'s part of a region whose word is `word`, for a pointer carrying `tag`: the
/// outcome, and in `next` the word to store (== word when not_live).
WARPVM_HD_INLINE constexpr LaneRelease release_lane(std::uint64_t word, std::uint32_t tag, std::uint32_t lane,
                                                    std::uint64_t& next) {
  next = word;
  if (lane >= warp_lanes || release_lanes(word, tag, std::uint32_t{1} << lane, next) == 0) return LaneRelease::not_live;
  return (next & 0xffffffffu) == 0 ? LaneRelease::region_free : LaneRelease::released;
}

}  // namespace warpvm::detail
