#pragma once
/// @file
/// Free staging pages of a WIC channel (the paper's PCM pages, Section 5.3): a segment tree in
/// which every node keeps, for its segment of pages, the paper's four counts
///
///   sum        free pages
///   max_len    longest run of free pages
///   left_len   free pages from the segment's left end
///   right_len  free pages from the segment's right end
///
/// A batch of requests needs one contiguous run of pages, so the search for k pages descends
/// from the root once (left child, else the run across the middle, else the right child), and
/// takes the leftmost run that fits: O(log n). Taking or giving back a whole run is a range
/// assignment with lazy propagation (a node that is wholly free or wholly taken is set at once
/// and its children later, when a search or update passes through it): O(log n) as well, where
/// the paper's per-page updates cost O(k log n) for k pages.
///
/// Not thread-safe: the tree has one owner (the channel's monitor), which forms batches and
/// recycles their runs; nothing else reads it. Storage (`nodes_required(pages)` nodes) belongs
/// to the caller, so the same code runs in a kernel, a host thread or a test.

#include "warpvm/detail/host_device.hpp"

#include <cstddef>
#include <cstdint>

namespace warpvm::detail {

/// What a node says about all of its segment, or `none` while its children carry the truth.
enum class StagingFill : std::uint8_t { none, free, taken };

/// One node of the tree: the paper's counts and an assignment not yet pushed to the children.
struct StagingTreeNode {
  std::uint32_t sum;
  std::uint32_t max_len;
  std::uint32_t left_len;
  std::uint32_t right_len;
  StagingFill pending;
};

/// Non-owning view: the caller keeps `nodes_required(pages)` nodes alive as long as the view.
/// The leaves are rounded up to a power of two; the padding leaves are taken forever, so no run
/// ever reaches past the last page.
class StagingPageTree {
 public:
  /// `allocate` found no run of the requested length.
  static constexpr std::uint32_t no_run = ~0u;

  [[nodiscard]] WARPVM_HD static constexpr std::uint32_t leaf_capacity(std::uint32_t pages) {
    std::uint32_t leaves = 1;
    while (leaves < pages) leaves <<= 1;
    return leaves;
  }
  /// Node 0 is unused, node 1 is the root, node i has children 2i and 2i + 1.
  [[nodiscard]] WARPVM_HD static constexpr std::size_t nodes_required(std::uint32_t pages) {
    return std::size_t{2} * leaf_capacity(pages);
  }

  /// `pages` must be at least 1 and below 2^31. Call `reset` before the first use of fresh storage.
  WARPVM_HD StagingPageTree(StagingTreeNode* nodes, std::uint32_t pages)
      : nodes_(nodes), pages_(pages), leaves_(leaf_capacity(pages)) {
    while ((1u << height_) < leaves_) ++height_;
  }

  /// Marks every page free. O(n).
  WARPVM_HD void reset() const {
    for (std::uint32_t page = 0; page < leaves_; ++page)
      assign(leaves_ + page, 1, page < pages_ ? StagingFill::free : StagingFill::taken);
    std::uint32_t child_len = 1;
    for (std::uint32_t level_first = leaves_ / 2; level_first >= 1; level_first /= 2, child_len *= 2)
      for (std::uint32_t node = level_first; node < 2 * level_first; ++node) {
        nodes_[node].pending = StagingFill::none;
        pull(node, child_len);
      }
  }

  /// Takes the leftmost run of `count` free pages and returns its first page, or `no_run` when
  /// no run is that long (or `count` is 0). O(log n).
  WARPVM_HD std::uint32_t allocate(std::uint32_t count) const {
    if (count == 0 || nodes_[1].max_len < count) return no_run;
    // Invariant: the segment of `node` holds a free run of `count` pages. The leftmost such run
    // lies wholly in the left child if that has one (a run there starts no later than any run
    // across the middle), else across the middle if the two halves' facing ends are long
    // enough, else wholly in the right child.
    std::uint32_t node = 1;
    std::uint32_t first = 0;
    std::uint32_t len = leaves_;
    while (node < leaves_) {
      const std::uint32_t half = len / 2;
      push(node, half);
      const StagingTreeNode& left = nodes_[2 * node];
      const StagingTreeNode& right = nodes_[2 * node + 1];
      if (left.max_len >= count) {
        node = 2 * node;
      } else if (left.right_len + right.left_len >= count) {
        first += half - left.right_len;
        break;
      } else {
        node = 2 * node + 1;
        first += half;
      }
      len = half;
    }
    assign_range(first, first + count, StagingFill::taken);
    return first;
  }

  /// Gives back pages [first, first + count). Refuses, changing nothing, an empty range, one
  /// that reaches past the last page, or one holding a page that is free already (a double
  /// free would hand the same pages to two batches). O(log n).
  WARPVM_HD bool release(std::uint32_t first, std::uint32_t count) const {
    if (count == 0 || first >= pages_ || count > pages_ - first) return false;
    if (free_pages_in(first, count) != 0) return false;
    assign_range(first, first + count, StagingFill::free);
    return true;
  }

  /// Free pages in [first, first + count), which must lie within the pages. Not const in effect:
  /// it pushes pending assignments along the range's two boundary paths. O(log n).
  WARPVM_HD std::uint32_t free_pages_in(std::uint32_t first, std::uint32_t count) const {
    if (count == 0) return 0;
    push_boundary_paths(first, first + count);
    std::uint32_t free = 0;
    for (std::uint32_t lo = leaves_ + first, hi = leaves_ + first + count; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1u) free += nodes_[lo++].sum;
      if (hi & 1u) free += nodes_[--hi].sum;
    }
    return free;
  }

  /// Whether page `page` (< page_count()) is free: the highest node on its path that is wholly
  /// free or wholly taken decides. O(log n), reads only.
  [[nodiscard]] WARPVM_HD bool is_free(std::uint32_t page) const {
    std::uint32_t node = 1;
    for (std::uint32_t h = height_; h > 0; --h) {
      if (nodes_[node].pending != StagingFill::none) return nodes_[node].pending == StagingFill::free;
      node = 2 * node + ((page >> (h - 1)) & 1u);
    }
    return nodes_[node].sum == 1;
  }

  [[nodiscard]] WARPVM_HD std::uint32_t largest_free_run() const { return nodes_[1].max_len; }
  [[nodiscard]] WARPVM_HD std::uint32_t free_pages() const { return nodes_[1].sum; }
  [[nodiscard]] WARPVM_HD std::uint32_t page_count() const { return pages_; }

 private:
  /// Sets a node of `len` pages to wholly free or wholly taken; an inner node keeps the fact
  /// as pending for its children.
  WARPVM_HD void assign(std::uint32_t node, std::uint32_t len, StagingFill fill) const {
    const std::uint32_t run = fill == StagingFill::free ? len : 0;
    StagingTreeNode& n = nodes_[node];
    n.sum = n.max_len = n.left_len = n.right_len = run;
    n.pending = node < leaves_ ? fill : StagingFill::none;
  }

  /// Hands a pending assignment down to the two children (each `child_len` pages).
  WARPVM_HD void push(std::uint32_t node, std::uint32_t child_len) const {
    const StagingFill fill = nodes_[node].pending;
    if (fill == StagingFill::none) return;
    assign(2 * node, child_len, fill);
    assign(2 * node + 1, child_len, fill);
    nodes_[node].pending = StagingFill::none;
  }

  /// Recomputes a node from its children (each `child_len` pages).
  WARPVM_HD void pull(std::uint32_t node, std::uint32_t child_len) const {
    const StagingTreeNode& left = nodes_[2 * node];
    const StagingTreeNode& right = nodes_[2 * node + 1];
    StagingTreeNode& n = nodes_[node];
    n.sum = left.sum + right.sum;
    n.left_len = left.left_len == child_len ? child_len + right.left_len : left.left_len;
    n.right_len = right.right_len == child_len ? child_len + left.right_len : right.right_len;
    const std::uint32_t across = left.right_len + right.left_len;
    const std::uint32_t inside = left.max_len > right.max_len ? left.max_len : right.max_len;
    n.max_len = across > inside ? across : inside;
  }

  /// Pushes every pending assignment on the paths from the root to leaves `begin` and `end - 1`,
  /// so that the nodes covering [begin, end) exactly (children of those paths) are up to date.
  WARPVM_HD void push_boundary_paths(std::uint32_t begin, std::uint32_t end) const {
    for (std::uint32_t h = height_; h > 0; --h) {
      push((leaves_ + begin) >> h, 1u << (h - 1));
      push((leaves_ + end - 1) >> h, 1u << (h - 1));
    }
  }

  /// Sets pages [begin, end) to `fill`: the O(log n) nodes that cover the range exactly are
  /// assigned, then their ancestors (all on the two boundary paths) recomputed bottom-up. A
  /// path node that carries a pending fill is one of the covering nodes and is exact already.
  WARPVM_HD void assign_range(std::uint32_t begin, std::uint32_t end, StagingFill fill) const {
    push_boundary_paths(begin, end);
    std::uint32_t len = 1;
    for (std::uint32_t lo = leaves_ + begin, hi = leaves_ + end; lo < hi; lo /= 2, hi /= 2, len *= 2) {
      if (lo & 1u) assign(lo++, len, fill);
      if (hi & 1u) assign(--hi, len, fill);
    }
    for (std::uint32_t h = 1; h <= height_; ++h) {
      pull_unless_assigned((leaves_ + begin) >> h, 1u << (h - 1));
      pull_unless_assigned((leaves_ + end - 1) >> h, 1u << (h - 1));
    }
  }

  WARPVM_HD void pull_unless_assigned(std::uint32_t node, std::uint32_t child_len) const {
    if (nodes_[node].pending == StagingFill::none) pull(node, child_len);
  }

  StagingTreeNode* nodes_;
  std::uint32_t pages_;
  std::uint32_t leaves_;
  std::uint32_t height_ = 0;
};

}  // namespace warpvm::detail
