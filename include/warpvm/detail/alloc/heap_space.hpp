#pragma once
/// @file
/// The heap's address space as the host service manages it (AlignMalloc's host co-management,
/// Section VI): 2 MB segments under an OR tree, of which the first `portion_vablocks` form the
/// PortionSpace, where regions under 2 MB go as warptrees of a PortionTree. Larger regions take
/// the leftmost run of free segments; a small region that finds the PortionSpace full takes one
/// whole segment instead.

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

/// A view of caller storage, like the trees it combines; one caller at a time. Requests that
/// cannot be met return a region with no_offset, releases of offsets where no region starts
/// return false, and neither changes anything.
class HeapSpace {
 public:
  /// Words of storage for `segments` segments of which `portion_vablocks` are the PortionSpace.
  [[nodiscard]] WARPVM_HD static constexpr std::size_t storage_words(std::uint32_t segments,
                                                                     std::uint32_t portion_vablocks) {
    return OrTree::storage_words(segments) + (portion_vablocks == 0 ? 0 : PortionTree::storage_words(portion_vablocks)) +
           segments + 1;
  }

  /// Formats `storage` as an empty space. With portion_vablocks > segments, or fewer words than
  /// storage_words, the space has no segments and every request fails.
  WARPVM_HD HeapSpace(std::uint64_t* storage, std::size_t words, std::uint32_t segments, std::uint32_t portion_vablocks)
      : segments_tree_(nullptr, 0, 0), portions_(nullptr, 0, 0) {
    if (storage == nullptr || portion_vablocks > segments || words < storage_words(segments, portion_vablocks)) return;
    const std::size_t tree_words = OrTree::storage_words(segments);
    const std::size_t portion_words = portion_vablocks == 0 ? 0 : PortionTree::storage_words(portion_vablocks);
    segments_tree_ = OrTree(storage, tree_words, segments);
    if (portion_vablocks != 0) {
      portions_ = PortionTree(storage + tree_words, portion_words, portion_vablocks);
      segments_tree_.mark_used(0, portion_vablocks);
    }
    runs_ = storage + tree_words + portion_words;
    used_ = runs_ + segments;
    for (std::uint32_t s = 0; s < segments; ++s) runs_[s] = 0;
    *used_ = 0;
    portion_bytes_ = std::uint64_t{portion_vablocks} * vablock_bytes;
  }

  [[nodiscard]] WARPVM_HD std::uint64_t capacity_bytes() const {
    return std::uint64_t{segments_tree_.segments()} * vablock_bytes;
  }
  [[nodiscard]] WARPVM_HD std::uint64_t portion_bytes() const { return portion_bytes_; }
  /// Bytes in live regions' reservations (padding included).
  [[nodiscard]] WARPVM_HD std::uint64_t reserved_bytes() const { return runs_ == nullptr ? 0 : *used_; }

  /// A region of `bytes` (0 < bytes): a warptree of the PortionTree when under 2 MB and one is
  /// free, else the leftmost run of whole segments.
  WARPVM_HD HeapRegion allocate(std::uint64_t bytes) {
    if (runs_ == nullptr || bytes == 0 || bytes > capacity_bytes()) return {no_offset, 0};
    if (bytes < vablock_bytes && portion_bytes_ != 0) {
      const Portion portion = portions_.allocate(bytes);
      if (portion.ok()) {
        *used_ += portion.reserved_bytes;
        return {portion.offset, portion.reserved_bytes};
      }
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
    if (runs_ == nullptr) return 0;
    if (offset < portion_bytes_) {
      const std::uint64_t before = portions_.free_bytes();
      if (!portions_.release(offset)) return 0;
      const std::uint64_t freed = portions_.free_bytes() - before;
      *used_ -= freed;
      return freed;
    }
    if (offset % vablock_bytes != 0 || offset >= capacity_bytes()) return 0;
    const auto first = static_cast<std::uint32_t>(offset / vablock_bytes);
    const std::uint64_t count = runs_[first];
    if (count == 0 || !segments_tree_.release(first, static_cast<std::uint32_t>(count))) return 0;
    runs_[first] = 0;
    *used_ -= count * vablock_bytes;
    return count * vablock_bytes;
  }

 private:
  OrTree segments_tree_;
  PortionTree portions_;
  std::uint64_t* runs_ = nullptr;  ///< per segment: length of the run starting there, or 0
  std::uint64_t* used_ = nullptr;  ///< reserved bytes
  std::uint64_t portion_bytes_ = 0;
};

}  // namespace warpvm::detail
