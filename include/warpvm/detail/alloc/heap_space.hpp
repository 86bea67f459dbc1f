#pragma once
/// @file
/// The heap's address space as the host service manages it (AlignMalloc's host co-management,
/// Section VI): 2 MB segments under an OR tree, of which the first `portion_vablocks` form the
/// PortionSpace, where regions under 2 MB go as warptrees of a PortionTree. Larger regions take
/// the leftmost run of free segments. A small region that finds the PortionSpace full grows it
/// by an arena: the leftmost free segment, lent to the PortionTree until it empties.

#include "warpvm/detail/alloc/or_tree.hpp"
#include "warpvm/detail/alloc/portion_tree.hpp"
#include "warpvm/detail/alloc/uvm_blocks.hpp"
#include "warpvm/detail/host_device.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace warpvm::detail {

/// Where a region went: `offset` is no_offset when nothing was free.
struct HeapRegion {
  std::uint64_t offset;
  std::uint64_t reserved_bytes;  ///< what the region keeps from others (padding included)
  [[nodiscard]] WARPVM_HD bool ok() const { return offset != no_offset; }
};

/// Where HeapOptions' PortionSpace and small area end up: whole segments each.
struct HeapShares {
  std::uint64_t portion_bytes;
  std::uint64_t small_bytes;  ///< the fast path's small area; 0: none
};

inline constexpr std::uint64_t default_small_limit_bytes = 8ull << 30;
inline constexpr std::uint64_t paper_portion_bytes = std::uint64_t{PortionTree::paper_vablocks} * vablock_bytes;

/// HeapOptions' PortionSpace and small area for a heap of `capacity_bytes` (whole segments), 0
/// for either meaning its default; the small area only with `fast_path`. Defaults: the small
/// area a quarter of the heap (at most 8 GiB), and the PortionSpace half of what the small area
/// leaves (at most the paper's 4 GiB), half the heap as before the fast path when there is no
/// small area. The small area so comes out of the PortionSpace and the regions of 2 MB and more
/// (which can use neither) alike: taken from the latter's share alone, it left an 8 GiB heap
/// 2 GiB of segments, too little for a kernel that asked 2.3 GiB of 3-5 MB regions (issue #4).
/// Sizes are not checked here (Heap does: the small area must fit beside the PortionSpace).
[[nodiscard]] constexpr HeapShares heap_shares(std::uint64_t capacity_bytes, std::uint64_t portion_bytes,
                                               bool fast_path, std::uint64_t small_bytes) {
  const std::uint64_t small_asked =
      !fast_path ? 0 : small_bytes != 0 ? small_bytes : std::min(capacity_bytes / 4, default_small_limit_bytes);
  const std::uint64_t small = small_asked / vablock_bytes * vablock_bytes;
  const std::uint64_t left = small < capacity_bytes ? capacity_bytes - small : 0;
  const std::uint64_t portion =
      portion_bytes != 0 ? std::min(portion_bytes, capacity_bytes) : std::min(left / 2, paper_portion_bytes);
  return {portion / vablock_bytes * vablock_bytes, small};
}

/// Arenas: the PortionTree spans every segment, the PortionSpace's open for good and the others
/// closed. A region under 2 MB for which no node at its reserved height is free opens the
/// leftmost free segment of the OR tree in the PortionTree and goes there; the release that
/// leaves an arena with no reservation closes it and frees its segment, for regions of any
/// size. Placement inside a segment is the PortionTree's (Eq. 3 holds, as no reservation
/// crosses a VABlock), offsets are heap offsets like any other, and a region's offset alone
/// says where it goes back: to the PortionTree when its segment is the PortionSpace's or an
/// arena, else to the OR tree. Without arenas such a region took a whole segment (2 MB kept
/// for a 64 KB warptree), the worst padding of issue #4's random workload.
///
/// A view of caller storage, like the trees it combines; one caller at a time. Requests that
/// cannot be met return a region with no_offset, releases of offsets where no region starts
/// return false, and neither changes anything.
class HeapSpace {
 public:
  /// Words of storage for `segments` segments (the PortionTree spans all of them, so the
  /// PortionSpace's share does not matter).
  [[nodiscard]] WARPVM_HD static constexpr std::size_t storage_words(std::uint32_t segments) {
    return OrTree::storage_words(segments) + PortionTree::storage_words(segments) + segments + 2;
  }

  /// Formats `storage` as an empty space. With no segments or more than the PortionTree spans,
  /// portion_vablocks > segments, or fewer words than storage_words, the space has no segments
  /// and every request fails.
  WARPVM_HD HeapSpace(std::uint64_t* storage, std::size_t words, std::uint32_t segments, std::uint32_t portion_vablocks)
      : segments_tree_(nullptr, 0, 0), portions_(nullptr, 0, 0) {
    if (storage == nullptr || segments == 0 || segments > PortionTree::max_vablocks || portion_vablocks > segments ||
        words < storage_words(segments))
      return;
    const std::size_t tree_words = OrTree::storage_words(segments);
    const std::size_t portion_words = PortionTree::storage_words(segments);
    segments_tree_ = OrTree(storage, tree_words, segments);
    portions_ = PortionTree(storage + tree_words, portion_words, segments, portion_vablocks);
    if (portion_vablocks != 0) segments_tree_.mark_used(0, portion_vablocks);
    runs_ = storage + tree_words + portion_words;
    used_ = runs_ + segments;
    arenas_ = used_ + 1;
    for (std::uint32_t s = 0; s < segments; ++s) runs_[s] = 0;
    *used_ = 0;
    *arenas_ = 0;
    portion_vablocks_ = portion_vablocks;
  }

  [[nodiscard]] WARPVM_HD std::uint64_t capacity_bytes() const {
    return std::uint64_t{segments_tree_.segments()} * vablock_bytes;
  }
  /// The fixed PortionSpace, the first segments.
  [[nodiscard]] WARPVM_HD std::uint64_t portion_bytes() const {
    return std::uint64_t{portion_vablocks_} * vablock_bytes;
  }
  /// Bytes of the segments lent to the PortionTree as arenas now.
  [[nodiscard]] WARPVM_HD std::uint64_t arena_bytes() const {
    return runs_ == nullptr ? 0 : *arenas_ * vablock_bytes;
  }
  /// Bytes of the segments the OR tree has free: neither the PortionSpace, an arena nor a run.
  [[nodiscard]] WARPVM_HD std::uint64_t free_segment_bytes() const {
    return std::uint64_t{segments_tree_.free_segments()} * vablock_bytes;
  }
  /// Bytes in no reservation: the free segments, and the free blocks of the PortionSpace and the
  /// arenas. With reserved_bytes(), the whole capacity.
  [[nodiscard]] WARPVM_HD std::uint64_t free_bytes() const {
    return runs_ == nullptr ? 0 : free_segment_bytes() + portions_.free_bytes();
  }
  /// Bytes in live regions' reservations (padding included; an arena's unreserved blocks not).
  [[nodiscard]] WARPVM_HD std::uint64_t reserved_bytes() const { return runs_ == nullptr ? 0 : *used_; }

  /// A region of `bytes` (0 < bytes): under 2 MB a warptree of the PortionTree, in a new arena
  /// when no node of its height is free; else the leftmost run of whole segments.
  WARPVM_HD HeapRegion allocate(std::uint64_t bytes) {
    if (runs_ == nullptr || bytes == 0 || bytes > capacity_bytes()) return {no_offset, 0};
    if (bytes < vablock_bytes) {
      Portion portion = portions_.allocate(bytes);
      if (!portion.ok()) {
        const std::uint32_t arena = segments_tree_.allocate(1);
        if (arena == OrTree::no_segment) return {no_offset, 0};
        // Closed while the OR tree had it, so it opens; no other node of this height is free,
        // so the portion goes into it.
        portions_.open_vablock(arena);
        runs_[arena] = arena_run;
        ++*arenas_;
        portion = portions_.allocate(bytes);
      }
      *used_ += portion.reserved_bytes;
      return {portion.offset, portion.reserved_bytes};
    }
    const auto count = static_cast<std::uint32_t>((bytes + vablock_bytes - 1) / vablock_bytes);
    const std::uint32_t first = segments_tree_.allocate(count);
    if (first == OrTree::no_segment) return {no_offset, 0};
    runs_[first] = count;
    const std::uint64_t reserved = std::uint64_t{count} * vablock_bytes;
    *used_ += reserved;
    return {std::uint64_t{first} * vablock_bytes, reserved};
  }

  /// Frees the region that starts at `offset`; returns the bytes it reserved, 0 when no region
  /// starts there.
  WARPVM_HD std::uint64_t release(std::uint64_t offset) {
    if (runs_ == nullptr || offset >= capacity_bytes()) return 0;
    const auto segment = static_cast<std::uint32_t>(offset / vablock_bytes);
    if (segment < portion_vablocks_ || runs_[segment] == arena_run) {
      const std::uint64_t before = portions_.free_bytes();
      if (!portions_.release(offset)) return 0;
      const std::uint64_t freed = portions_.free_bytes() - before;
      *used_ -= freed;
      // An arena with nothing reserved goes back to the OR tree.
      if (segment >= portion_vablocks_ && portions_.close_vablock(segment)) {
        runs_[segment] = 0;
        --*arenas_;
        segments_tree_.release(segment, 1);
      }
      return freed;
    }
    if (offset % vablock_bytes != 0) return 0;
    const std::uint32_t first = segment;
    const std::uint64_t count = runs_[first];
    if (count == 0 || !segments_tree_.release(first, static_cast<std::uint32_t>(count))) return 0;
    runs_[first] = 0;
    *used_ -= count * vablock_bytes;
    return count * vablock_bytes;
  }

 private:
  /// runs_ entry of a segment lent as an arena (no run is that long).
  static constexpr std::uint64_t arena_run = ~std::uint64_t{0};

  OrTree segments_tree_;
  PortionTree portions_;
  std::uint64_t* runs_ = nullptr;    ///< per segment: length of the run starting there, arena_run, or 0
  std::uint64_t* used_ = nullptr;    ///< reserved bytes
  std::uint64_t* arenas_ = nullptr;  ///< segments lent as arenas
  std::uint32_t portion_vablocks_ = 0;
};

}  // namespace warpvm::detail
