#pragma once
/// @file
/// warpvm::heap_ptr: what warpvm::device_heap::malloc returns. Not an address: the place of one
/// thread's allocation in the heap's region for its warp, from which every byte's offset in the
/// heap's backing object follows (contiguous layout, or AlignMalloc's rearranged one).

#include "warpvm/detail/alloc/uvm_blocks.hpp"
#include "warpvm/detail/alloc/warp_layout.hpp"
#include "warpvm/detail/host_device.hpp"

#include <cstdint>

namespace warpvm {

/// How the threads of one warp request share their region.
enum class HeapLayout : std::uint8_t {
  /// Each thread's bytes in one piece, lane after lane (a SyncMalloc-like per-thread layout).
  contiguous,
  /// AlignMalloc's intra-warp rearrangement (detail::WarpLayout): 64 KB tiles of the lanes side
  /// by side, so that a warp walking its ranges together touches whole 64 KB blocks.
  aligned,
};

namespace detail {
/// Allocation granularity: regions start on 64 KB blocks, lane sizes count 16-byte units.
inline constexpr std::uint64_t heap_unit_bytes = 16;
inline constexpr std::uint64_t heap_max_lane_bytes = (std::uint64_t{1} << 32) * heap_unit_bytes - heap_unit_bytes;

/// Bytes a warp's region needs for `lanes` lanes of `lane_bytes` each (a multiple of 16).
WARPVM_HD_INLINE constexpr std::uint64_t heap_region_bytes(HeapLayout layout, LaneOrder order, std::uint32_t lanes,
                                                            std::uint64_t lane_bytes) {
  return layout == HeapLayout::contiguous ? lanes * lane_bytes : WarpLayout(lanes, lane_bytes, order).region_bytes();
}
}  // namespace detail

/// One thread's allocation: 16 bytes, trivially copyable, null by default. Byte b of it
/// (b < size()) lies at heap offset offset_of(b); the bytes from there to offset_of(b) +
/// contiguous_bytes(b) are consecutive in the heap.
class heap_ptr {
 public:
  heap_ptr() = default;
  WARPVM_HD constexpr heap_ptr(std::uint64_t region_offset, std::uint64_t lane_bytes, std::uint32_t tag,
                               std::uint32_t lane, std::uint32_t lanes, HeapLayout layout, detail::LaneOrder order)
      : block_(static_cast<std::uint32_t>(region_offset / detail::basic_block_bytes)),
        lane_units_(static_cast<std::uint32_t>(lane_bytes / detail::heap_unit_bytes)),
        tag_(tag),
        lane_(static_cast<std::uint16_t>(lane)),
        lanes_(static_cast<std::uint8_t>(lanes)),
        shape_(static_cast<std::uint8_t>(static_cast<unsigned>(layout) | static_cast<unsigned>(order) << 4)) {}

  /// A block of the small-request fast path (detail/alloc/small_blocks.hpp): block `index` of
  /// `block_bytes` in the 64 KB slab at heap offset `slab_offset`, whose tag is `tag`. Laid
  /// out like lane `index` of a contiguous region: its bytes are consecutive.
  [[nodiscard]] WARPVM_HD static constexpr heap_ptr small_block(std::uint64_t slab_offset, std::uint64_t block_bytes,
                                                                std::uint32_t index, std::uint32_t tag) {
    heap_ptr p(slab_offset, block_bytes, tag, 0, 0, HeapLayout::contiguous, detail::LaneOrder::lane_id);
    p.lane_ = static_cast<std::uint16_t>(index);
    return p;
  }

  [[nodiscard]] WARPVM_HD constexpr bool is_null() const { return block_ == null_block; }
  /// Served by the small-request fast path (a slab block) rather than a warp's region.
  [[nodiscard]] WARPVM_HD constexpr bool is_small() const { return !is_null() && lanes_ == 0; }
  [[nodiscard]] WARPVM_HD constexpr explicit operator bool() const { return !is_null(); }
  /// Usable bytes: the request rounded up to 16 (at least what the warp's largest request in
  /// this size class asked for).
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t size() const { return lane_units_ * detail::heap_unit_bytes; }
  /// Byte offset in the heap of the warp's region (64 KB aligned); a small block's slab.
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t region_offset() const {
    return std::uint64_t{block_} * detail::basic_block_bytes;
  }
  /// The region's bytes (a small block: its own bytes).
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t region_bytes() const {
    return is_small() ? size() : detail::heap_region_bytes(layout(), order(), lanes_, size());
  }
  /// The thread's rank in its region (a small block: its index in the slab).
  [[nodiscard]] WARPVM_HD constexpr std::uint32_t lane() const { return lane_; }
  /// Lanes sharing the region: 1 to 32; 0 for a small block.
  [[nodiscard]] WARPVM_HD constexpr std::uint32_t lanes() const { return lanes_; }
  [[nodiscard]] WARPVM_HD constexpr std::uint32_t tag() const { return tag_; }
  [[nodiscard]] WARPVM_HD constexpr HeapLayout layout() const { return static_cast<HeapLayout>(shape_ & 0xfu); }
  [[nodiscard]] WARPVM_HD constexpr detail::LaneOrder order() const {
    return static_cast<detail::LaneOrder>(shape_ >> 4);
  }

  /// Heap byte offset of byte `byte` of this allocation (byte < size()); detail::no_offset
  /// outside it or for null.
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t offset_of(std::uint64_t byte) const {
    if (is_null() || byte >= size()) return detail::no_offset;
    if (layout() == HeapLayout::contiguous) return region_offset() + lane_ * size() + byte;
    return region_offset() + detail::WarpLayout(lanes_, size(), order()).offset_of(lane_, byte);
  }
  /// Bytes of this allocation that follow byte `byte` (itself included) without a gap: to the
  /// end under the contiguous layout; at least to the next 4 KB boundary of the thread's data
  /// under the aligned one (tiles and tail segments are whole 4 KB pages). 0 outside it.
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t contiguous_bytes(std::uint64_t byte) const {
    if (is_null() || byte >= size()) return 0;
    const std::uint64_t to_end = size() - byte;
    if (layout() == HeapLayout::contiguous) return to_end;
    const std::uint64_t to_page = detail::small_segment_bytes - byte % detail::small_segment_bytes;
    return to_page < to_end ? to_page : to_end;
  }

  [[nodiscard]] WARPVM_HD constexpr std::uint32_t block() const { return block_; }

 private:
  static constexpr std::uint32_t null_block = ~std::uint32_t{0};

  std::uint32_t block_ = null_block;  ///< region start in 64 KB blocks
  std::uint32_t lane_units_ = 0;      ///< bytes per lane / 16
  std::uint32_t tag_ = 0;             ///< the region's tag, checked by free()
  std::uint16_t lane_ = 0;            ///< this thread's rank among the request's lanes (small: block index)
  std::uint8_t lanes_ = 0;            ///< lanes in the request (1 to 32; 0: a small block)
  std::uint8_t shape_ = static_cast<std::uint8_t>(HeapLayout::aligned);  ///< layout | lane order << 4
};

static_assert(sizeof(heap_ptr) == 16);

}  // namespace warpvm
