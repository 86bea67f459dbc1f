#pragma once
/// @file
/// AlignMalloc's PortionTree (Section V-B, Algorithms 1 and 2): places each warp's portion
/// smaller than a VABlock as a warptree, a full subtree of 64 KB blocks, and keeps the subtree
/// under the warptree root's parent to that warp alone, so that UVM's tree prefetcher, which
/// only ever pulls in whole subtrees more than half present, never reaches another warp's
/// blocks (Eq. 3).

#include "warpvm/detail/alloc/packed_bits.hpp"
#include "warpvm/detail/alloc/uvm_blocks.hpp"
#include "warpvm/detail/host_device.hpp"

#include <cuda/std/bit>

#include <cstddef>
#include <cstdint>

namespace warpvm::detail {

/// Where one warp's portion went in the PortionSpace.
struct Portion {
  std::uint64_t offset;          ///< byte offset of the warptree, or no_offset when none was free
  std::uint64_t bytes;           ///< the warptree: the request rounded up to 2^i x 64 KB
  std::uint64_t reserved_bytes;  ///< the warptree and its padding, kept from every other warp
  [[nodiscard]] WARPVM_HD bool ok() const { return offset != no_offset; }
};

/// The PortionTree over `vablocks` VABlocks (the paper's PortionSpace has 2048), one leaf per
/// 64 KB block. FreeNodeArray as in Algorithm 1: a node's bit is 1 while every block below it
/// is free, so a node can take a warptree exactly when its bit is 1.
///
/// Allocation (Algorithm 2): a request of M bytes, 0 < M <= 2 MB, becomes a warptree of
/// 2^i blocks, i = ceil(log2(M / 64 KB)) (0 for M <= 64 KB). The leftmost free node at the
/// height of the warptree root's parent, i + 1, is reserved whole: the warptree in its left
/// half, padding in its right half. Reserved subtrees never overlap, which is Eq. 3. A warptree
/// of a whole VABlock (i = 5) has no parent inside its TBN and takes just its VABlock, so a
/// reservation never crosses a VABlock. Padding stays virtual: prefetching never reaches it.
///
/// VABlocks can be closed: all their nodes 0, as if reserved, so that nothing is placed there.
/// HeapSpace lends a closed VABlock to the tree (open_vablock) when no free node is left at a
/// request's height, and takes it back (close_vablock) once nothing in it is reserved. As no
/// reservation crosses a VABlock, opening and closing one never moves another's portions.
///
/// Storage, threading and failures as for OrTree: a view of caller storage, one caller at a
/// time; requests that cannot be met return a Portion with offset no_offset, releases of
/// offsets where no portion starts return false, and neither changes the tree.
class PortionTree {
 public:
  static constexpr std::uint32_t paper_vablocks = 2048;
  /// A Heap's 256 TiB (heap_ptr keeps 64 KB blocks in 32 bits), which HeapSpace spans whole.
  static constexpr std::uint32_t max_vablocks = std::uint32_t{1} << 27;

  /// Words of storage a tree of `vablocks` needs: the free block count, a search start per
  /// height within a VABlock, FreeNodeArray, and one bit per node that marks where a reservation
  /// is rooted.
  [[nodiscard]] WARPVM_HD static constexpr std::size_t storage_words(std::uint32_t vablocks) {
    return 1 + search_starts + 2 * words_for_bits(2 * leaf_count(vablocks));
  }

  /// log2 of the blocks in the warptree for a portion of `bytes` (0 < bytes <= 2 MB).
  [[nodiscard]] WARPVM_HD static constexpr unsigned warptree_height(std::uint64_t bytes) {
    const std::uint64_t blocks = (bytes + basic_block_bytes - 1) / basic_block_bytes;
    return blocks <= 1 ? 0u : static_cast<unsigned>(cuda::std::bit_width(blocks - 1));
  }
  /// Height of the reserved subtree's root: the warptree root's parent, within the VABlock.
  [[nodiscard]] WARPVM_HD static constexpr unsigned reserved_height(unsigned warptree_height) {
    return warptree_height < vablock_height ? warptree_height + 1 : vablock_height;
  }

  /// Formats `storage` (`words` words) as a PortionTree of `vablocks`, the first
  /// `open_vablocks` of them free (Algorithm 1; by default all) and the rest closed. With no
  /// VABlocks, more than max_vablocks or fewer words than storage_words(vablocks) the tree has
  /// no blocks, touches no storage, and every request fails.
  WARPVM_HD PortionTree(std::uint64_t* storage, std::size_t words, std::uint32_t vablocks = paper_vablocks,
                        std::uint32_t open_vablocks = max_vablocks) {
    if (storage == nullptr || vablocks == 0 || vablocks > max_vablocks || words < storage_words(vablocks)) return;
    storage_ = storage;
    blocks_ = std::uint64_t{vablocks} << vablock_height;
    leaf_base_ = leaf_count(vablocks);
    const std::uint64_t open_blocks = std::uint64_t{open_vablocks < vablocks ? open_vablocks : vablocks}
                                      << vablock_height;
    storage_[0] = open_blocks;
    for (unsigned height = 0; height < search_starts; ++height) search_start()[height] = leaf_base_ >> height;
    assign_bits(free_nodes(), 0, 2 * leaf_base_, true);
    assign_bit(free_nodes(), 0, false);  // heap order leaves bit 0 unused
    assign_bits(rooted_nodes(), 0, 2 * leaf_base_, false);
    // Closed VABlocks and blocks past the last one (up to a power of two) are not free, nor is
    // any node above one.
    for (std::uint64_t first = leaf_base_ + open_blocks, end = 2 * leaf_base_; first < end; first >>= 1, end >>= 1)
      assign_bits(free_nodes(), first, end, false);
  }

  [[nodiscard]] WARPVM_HD std::uint64_t capacity_bytes() const { return blocks_ * basic_block_bytes; }
  [[nodiscard]] WARPVM_HD std::uint32_t vablocks() const {
    return static_cast<std::uint32_t>(blocks_ >> vablock_height);
  }
  /// Bytes in no reservation: neither a warptree nor padding.
  [[nodiscard]] WARPVM_HD std::uint64_t free_bytes() const {
    return blocks_ == 0 ? 0 : storage_[0] * basic_block_bytes;
  }
  /// Whether the 64 KB block at `offset` is in no reservation (false outside the space).
  [[nodiscard]] WARPVM_HD bool is_free(std::uint64_t offset) const {
    return offset < capacity_bytes() && test_bit(free_nodes(), leaf_base_ + offset / basic_block_bytes);
  }

  /// Algorithm 2: the warptree for a portion of `bytes` in the leftmost node at the reserved
  /// height whose bit in FreeNodeArray is 1. A scan of that level, a word at a time, from the
  /// level's search start (no node before it is free): at most O(n / 2^(i+1) / 64) words for n
  /// blocks, plus O(2^(i+1) + log n) to update the tree.
  WARPVM_HD Portion allocate(std::uint64_t bytes) {
    if (blocks_ == 0 || bytes == 0 || bytes > vablock_bytes) return {no_offset, 0, 0};
    const unsigned tree = warptree_height(bytes);
    const unsigned reserved = reserved_height(tree);
    const std::uint64_t level_end = 2 * (leaf_base_ >> reserved);
    const std::uint64_t node = find_set_bit(free_nodes(), search_start()[reserved], level_end);
    search_start()[reserved] = node;
    if (node == level_end) return {no_offset, 0, 0};

    assign_bit(rooted_nodes(), node, true);
    take_subtree(node, reserved);
    const std::uint64_t first_block = (node << reserved) - leaf_base_;
    return {first_block * basic_block_bytes, basic_block_bytes << tree, basic_block_bytes << reserved};
  }

  /// Frees the portion whose warptree starts at `offset` (as returned by allocate), padding
  /// included. The reservation is found among the at most six nodes whose subtrees start at
  /// that block. O(2^(i+1) + log n).
  WARPVM_HD bool release(std::uint64_t offset) {
    if (offset >= capacity_bytes() || offset % basic_block_bytes != 0) return false;
    const std::uint64_t block = offset / basic_block_bytes;
    for (unsigned height = 0; height <= vablock_height && block % (std::uint64_t{1} << height) == 0; ++height) {
      const std::uint64_t node = (leaf_base_ + block) >> height;
      if (!test_bit(rooted_nodes(), node)) continue;
      assign_bit(rooted_nodes(), node, false);
      give_subtree(node, height);
      return true;
    }
    return false;
  }

  /// Makes closed VABlock `vablock` free for portions. False, changing nothing, when it is out
  /// of the tree or not closed: a free block or a reservation lies in it. O(64).
  WARPVM_HD bool open_vablock(std::uint32_t vablock) {
    if (vablock >= vablocks()) return false;
    const std::uint64_t node = vablock_node(vablock);
    for (unsigned down = 0; down <= vablock_height; ++down) {
      const std::uint64_t first = node << down, end = (node + 1) << down;
      if (find_set_bit(free_nodes(), first, end) != end || find_set_bit(rooted_nodes(), first, end) != end)
        return false;
    }
    give_subtree(node, vablock_height);
    return true;
  }

  /// Closes VABlock `vablock` when nothing in it is reserved; false, changing nothing, when
  /// something is (or it is closed already, or out of the tree). O(64 + log n).
  WARPVM_HD bool close_vablock(std::uint32_t vablock) {
    if (vablock >= vablocks() || !test_bit(free_nodes(), vablock_node(vablock))) return false;
    take_subtree(vablock_node(vablock), vablock_height);
    return true;
  }

 private:
  [[nodiscard]] WARPVM_HD static constexpr std::uint64_t leaf_count(std::uint32_t vablocks) {
    return cuda::std::bit_ceil(std::uint64_t{vablocks == 0 ? 1u : vablocks} << vablock_height);
  }
  /// Heights a reservation can have: 0 to vablock_height (0 is never reserved, kept for indexing).
  static constexpr unsigned search_starts = vablock_height + 1;

  /// Per height: the leftmost node of that level that may be free. Taking nodes never frees one
  /// and give_subtree lowers the starts past the nodes it frees, so the scan in allocate skips
  /// only nodes that are not free: without it, a heap whose PortionTree spans 32 GiB, mostly
  /// reserved, scanned 4096 words for each 64 KB portion.
  [[nodiscard]] WARPVM_HD std::uint64_t* search_start() const { return storage_ + 1; }
  [[nodiscard]] WARPVM_HD std::uint64_t* free_nodes() const { return storage_ + 1 + search_starts; }
  [[nodiscard]] WARPVM_HD std::uint64_t* rooted_nodes() const {
    return free_nodes() + words_for_bits(2 * leaf_base_);
  }

  [[nodiscard]] WARPVM_HD std::uint64_t vablock_node(std::uint32_t vablock) const {
    return (leaf_base_ >> vablock_height) + vablock;
  }

  /// Sets FreeNodeArray over the whole subtree of `node` (at `height`), one level at a time.
  WARPVM_HD void assign_subtree(std::uint64_t node, unsigned height, bool to_free) {
    for (unsigned down = 0; down <= height; ++down)
      assign_bits(free_nodes(), node << down, (node + 1) << down, to_free);
  }

  /// Marks the free subtree of `node` (at `height`) not free, and its ancestors with it.
  WARPVM_HD void take_subtree(std::uint64_t node, unsigned height) {
    assign_subtree(node, height, false);
    // An ancestor already 0 has only 0s above it.
    for (std::uint64_t up = node >> 1; up >= 1 && test_bit(free_nodes(), up); up >>= 1)
      assign_bit(free_nodes(), up, false);
    storage_[0] -= std::uint64_t{1} << height;
  }

  /// Marks the subtree of `node` (at `height`) free, and each ancestor whose children now are.
  WARPVM_HD void give_subtree(std::uint64_t node, unsigned height) {
    assign_subtree(node, height, true);
    for (std::uint64_t child = node; child > 1; child >>= 1) {
      const std::uint64_t parent = child >> 1;
      const bool all_free = test_bit(free_nodes(), 2 * parent) && test_bit(free_nodes(), 2 * parent + 1);
      if (all_free == test_bit(free_nodes(), parent)) break;
      assign_bit(free_nodes(), parent, all_free);
    }
    // The first node this may have freed on each level: the subtree's leftmost below, the
    // ancestor above.
    for (unsigned level = 0; level < search_starts; ++level) {
      const std::uint64_t first = level <= height ? node << (height - level) : node >> (level - height);
      if (first < search_start()[level]) search_start()[level] = first;
    }
    storage_[0] += std::uint64_t{1} << height;
  }

  std::uint64_t* storage_ = nullptr;  ///< [0]: free blocks; the search starts; FreeNodeArray; the roots
  std::uint64_t blocks_ = 0;
  std::uint64_t leaf_base_ = 1;       ///< heap index of block 0's leaf, a power of two
};

}  // namespace warpvm::detail
