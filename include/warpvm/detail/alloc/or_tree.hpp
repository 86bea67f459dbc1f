#pragma once
/// @file
/// AlignMalloc's OR tree (Section VI-B): which 2 MB segments of the UVM space are free, with
/// the leftmost free segment, the successor of a segment and the leftmost run of k free
/// segments found in O(log n) per segment visited.

#include "warpvm/detail/alloc/packed_bits.hpp"
#include "warpvm/detail/host_device.hpp"

#include <cuda/std/bit>

#include <cstddef>
#include <cstdint>

namespace warpvm::detail {

/// Free map of `segments` equal segments as a complete binary tree of bits in heap order (root
/// 1, children 2x and 2x + 1, leaf s at leaf_base + s). As in the paper a leaf is 1 while its
/// segment is free and an inner node is the OR of its children, so a 1 means "a free segment
/// lies below" and every search descends without backtracking. Leaves past `segments` (up to
/// the next power of two) stay 0 forever, so no search can return them.
///
/// A view of caller storage (host or device memory): the tree keeps no state of its own, and
/// copies of it (into a kernel's parameters, say) are views of the same tree. Not thread-safe:
/// one caller at a time, as in AlignMalloc, where the host runs it.
///
/// Failure contract: a request that cannot be met, or that names segments outside the tree or
/// in the wrong state, returns `no_segment` or false and leaves the tree as it was.
class OrTree {
 public:
  static constexpr std::uint32_t no_segment = ~std::uint32_t{0};
  static constexpr std::uint32_t max_segments = std::uint32_t{1} << 31;

  /// Words of storage a tree of `segments` needs: the free count, then the node bits.
  [[nodiscard]] WARPVM_HD static constexpr std::size_t storage_words(std::uint32_t segments) {
    return 1 + words_for_bits(2 * leaf_count(segments));
  }

  /// Formats `storage` (`words` words) as a tree of `segments`, all free. With no segments,
  /// more than max_segments or fewer words than storage_words(segments) the tree has no
  /// segments, touches no storage, and every request fails.
  WARPVM_HD OrTree(std::uint64_t* storage, std::size_t words, std::uint32_t segments) {
    if (storage == nullptr || segments == 0 || segments > max_segments || words < storage_words(segments)) return;
    storage_ = storage;
    segments_ = segments;
    leaf_base_ = leaf_count(segments);
    storage_[0] = leaf_base_;
    assign_bits(nodes(), 0, 2 * leaf_base_, true);
    assign_bit(nodes(), 0, false);  // heap order leaves bit 0 unused
    // The leaves past the last segment are used for good, which leaves `segments` free.
    const std::uint64_t padding = leaf_base_ - segments;
    if (padding != 0) assign(segments, static_cast<std::uint32_t>(padding), false);
  }

  [[nodiscard]] WARPVM_HD std::uint32_t segments() const { return segments_; }
  [[nodiscard]] WARPVM_HD std::uint32_t free_segments() const {
    return segments_ == 0 ? 0 : static_cast<std::uint32_t>(storage_[0]);
  }
  [[nodiscard]] WARPVM_HD std::uint32_t used_segments() const { return segments_ - free_segments(); }
  [[nodiscard]] WARPVM_HD bool is_free(std::uint32_t segment) const {
    return segment < segments_ && test_bit(nodes(), leaf_base_ + segment);
  }

  /// The free segment with the smallest index, or no_segment: from the root, always the
  /// leftmost child that has a free leaf. First fit keeps the used space compact. O(log n).
  [[nodiscard]] WARPVM_HD std::uint32_t leftmost_free() const {
    if (segments_ == 0 || !test_bit(nodes(), 1)) return no_segment;
    return leftmost_free_below(1);
  }

  /// The smallest free segment after `segment`, or no_segment: up from its leaf to the first
  /// left child whose right sibling has a free leaf, then down that sibling's leftmost free
  /// path. O(log n).
  [[nodiscard]] WARPVM_HD std::uint32_t next_free(std::uint32_t segment) const {
    if (segment >= segments_) return no_segment;
    for (std::uint64_t node = leaf_base_ + segment; node > 1; node >>= 1)
      if ((node & 1) == 0 && test_bit(nodes(), node + 1)) return leftmost_free_below(node + 1);
    return no_segment;
  }

  /// First segment of the leftmost run of `count` consecutive free segments, or no_segment
  /// (also for count 0). Grows a run from the leftmost free segment by successor searches and
  /// restarts it at the successor whenever a used segment breaks it: O(v log n) for the v free
  /// segments visited, which is O(count log n) when the first free run is long enough.
  [[nodiscard]] WARPVM_HD std::uint32_t find_free_run(std::uint32_t count) const {
    if (count == 0 || count > free_segments()) return no_segment;
    std::uint32_t first = leftmost_free();
    std::uint32_t last = first;
    while (last - first + 1 < count) {
      if (segments_ - first < count) return no_segment;  // no room left before the end
      const std::uint32_t next = next_free(last);
      if (next == no_segment) return no_segment;
      if (next != last + 1) first = next;
      last = next;
    }
    return first;
  }

  /// Takes the leftmost run of `count` free segments; returns its first segment or no_segment.
  WARPVM_HD std::uint32_t allocate(std::uint32_t count) {
    const std::uint32_t first = find_free_run(count);
    if (first != no_segment) assign(first, count, false);
    return first;
  }

  /// Marks [first, first + count) used; false if the range is empty, leaves the tree or holds
  /// a used segment.
  WARPVM_HD bool mark_used(std::uint32_t first, std::uint32_t count) { return change(first, count, false); }

  /// Marks [first, first + count) free again; false if the range is empty, leaves the tree or
  /// holds a free segment (a double free).
  WARPVM_HD bool release(std::uint32_t first, std::uint32_t count) { return change(first, count, true); }

 private:
  [[nodiscard]] WARPVM_HD static constexpr std::uint64_t leaf_count(std::uint32_t segments) {
    return cuda::std::bit_ceil(std::uint64_t{segments == 0 ? 1u : segments});
  }
  [[nodiscard]] WARPVM_HD std::uint64_t* nodes() const { return storage_ + 1; }

  /// Descends from `node`, which has a free leaf below, to the leftmost such leaf.
  [[nodiscard]] WARPVM_HD std::uint32_t leftmost_free_below(std::uint64_t node) const {
    while (node < leaf_base_) node = test_bit(nodes(), 2 * node) ? 2 * node : 2 * node + 1;
    return static_cast<std::uint32_t>(node - leaf_base_);
  }

  WARPVM_HD bool change(std::uint32_t first, std::uint32_t count, bool to_free) {
    if (count == 0 || first >= segments_ || count > segments_ - first) return false;
    for (std::uint32_t s = first; s < first + count; ++s)
      if (is_free(s) == to_free) return false;
    assign(first, count, to_free);
    return true;
  }

  /// Sets the leaves [first, first + count) and recomputes the ORs above them one level at a
  /// time, each level's range half the one below: O(count + log n).
  WARPVM_HD void assign(std::uint32_t first, std::uint32_t count, bool to_free) {
    std::uint64_t lo = leaf_base_ + first;
    std::uint64_t hi = lo + count - 1;
    assign_bits(nodes(), lo, hi + 1, to_free);
    storage_[0] = to_free ? storage_[0] + count : storage_[0] - count;
    while (lo > 1) {
      lo >>= 1;
      hi >>= 1;
      for (std::uint64_t node = lo; node <= hi; ++node)
        assign_bit(nodes(), node, test_bit(nodes(), 2 * node) || test_bit(nodes(), 2 * node + 1));
    }
  }

  std::uint64_t* storage_ = nullptr;  ///< [0]: free segments; from [1]: node bits
  std::uint32_t segments_ = 0;
  std::uint64_t leaf_base_ = 1;       ///< heap index of segment 0's leaf, a power of two
};

}  // namespace warpvm::detail
