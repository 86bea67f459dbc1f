#pragma once
/// @file
/// UVM's tree-based prefetcher, as the open driver describes it (uvm_perf_prefetch.c), for one
/// 2 MB VA block of 512 4 KB pages. Pure __host__ __device__ code: the host-batched transport
/// and the simulator share it.
///
///  1. The tree counts a page as present when it is resident on the destination or faulted.
///  2. Big-page pre-fill: every 64 KB big page holding a fault counts as present whole.
///  3. For each faulted page, walk from the leaf to the root; a subtree qualifies when strictly
///     more than `threshold` percent of its pages are present; the largest qualifying one wins.
///  4. Prefetch = union of the winning subtrees, minus the faulted pages themselves.

#include "warpvm/detail/host_device.hpp"

#include <cstdint>

namespace warpvm::detail {

inline constexpr unsigned uvm_block_pages = 512;     ///< 4 KB pages per 2 MB VA block
inline constexpr unsigned uvm_big_page_pages = 16;   ///< 64 KB big page
inline constexpr unsigned uvm_prefetch_threshold = 51;

/// 512 page bits of one VA block.
struct BlockMask {
  std::uint64_t words[uvm_block_pages / 64] = {};

  [[nodiscard]] WARPVM_HD bool test(unsigned page) const { return (words[page / 64] >> (page % 64)) & 1u; }
  WARPVM_HD void set(unsigned page) { words[page / 64] |= std::uint64_t{1} << (page % 64); }
  /// Sets pages [first, first + count).
  WARPVM_HD void fill(unsigned first, unsigned count) {
    for (unsigned p = first; p < first + count; ++p) set(p);
  }
  /// Pages set in [first, first + count).
  [[nodiscard]] WARPVM_HD unsigned count_in(unsigned first, unsigned count) const {
    unsigned n = 0;
    for (unsigned p = first; p < first + count; ++p) n += test(p) ? 1u : 0u;
    return n;
  }
  [[nodiscard]] WARPVM_HD unsigned count() const { return count_in(0, uvm_block_pages); }
  [[nodiscard]] WARPVM_HD bool any_in(unsigned first, unsigned count) const { return count_in(first, count) != 0; }
  WARPVM_HD BlockMask& operator|=(const BlockMask& o) {
    for (unsigned w = 0; w < uvm_block_pages / 64; ++w) words[w] |= o.words[w];
    return *this;
  }
  [[nodiscard]] WARPVM_HD BlockMask without(const BlockMask& o) const {
    BlockMask r = *this;
    for (unsigned w = 0; w < uvm_block_pages / 64; ++w) r.words[w] &= ~o.words[w];
    return r;
  }
};

/// The pages to prefetch into a block given what is resident there and what faulted.
WARPVM_HD_INLINE BlockMask uvm_prefetch_pages(const BlockMask& resident, const BlockMask& faulted,
                                              unsigned threshold = uvm_prefetch_threshold) {
  BlockMask present = resident;
  present |= faulted;
  for (unsigned big = 0; big < uvm_block_pages; big += uvm_big_page_pages)
    if (faulted.any_in(big, uvm_big_page_pages)) present.fill(big, uvm_big_page_pages);

  BlockMask prefetch;
  for (unsigned page = 0; page < uvm_block_pages; ++page) {
    if (!faulted.test(page)) continue;
    unsigned best_first = 0, best_size = 0;
    for (unsigned size = 1; size <= uvm_block_pages; size *= 2) {
      const unsigned first = page & ~(size - 1);
      if (present.count_in(first, size) * 100 > size * threshold) {
        best_first = first;
        best_size = size;
      }
    }
    prefetch.fill(best_first, best_size);
    if (best_size == uvm_block_pages) break;  // the whole block already
  }
  return prefetch.without(faulted);
}

}  // namespace warpvm::detail
