#pragma once
/// @file
/// Address arithmetic of the paged space: pages of an object, page keys naming a page of any
/// object, bytes of a (possibly partial) last page.

#include "warpvm/detail/host_device.hpp"

#include <cstdint>

namespace warpvm::detail {

inline constexpr std::uint64_t min_page_bytes = 512;           // 32 lanes x one 16-byte load
inline constexpr std::uint64_t max_page_bytes = 2u << 20;      // 2 MiB
inline constexpr unsigned object_id_shift = 40;                // 2^40 pages per object
inline constexpr std::uint64_t max_object_count = 1u << 20;    // ids fit in the 24 high bits
inline constexpr std::uint64_t empty_page_key = ~std::uint64_t{0};

WARPVM_HD_INLINE constexpr bool is_power_of_two(std::uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

WARPVM_HD_INLINE constexpr unsigned log2_exact(std::uint64_t x) {
  unsigned shift = 0;
  while ((std::uint64_t{1} << shift) < x) ++shift;
  return shift;
}

/// A page of any object, in one 64-bit word: object id in the high bits, page in the low 40.
/// Full 64-bit keys everywhere: a truncated page number is how one page cache let an in-use
/// page be evicted.
WARPVM_HD_INLINE constexpr std::uint64_t make_page_key(std::uint32_t object_id, std::uint64_t page) {
  return (std::uint64_t{object_id} << object_id_shift) | page;
}
WARPVM_HD_INLINE constexpr std::uint32_t key_object(std::uint64_t key) {
  return static_cast<std::uint32_t>(key >> object_id_shift);
}
WARPVM_HD_INLINE constexpr std::uint64_t key_page(std::uint64_t key) {
  return key & ((std::uint64_t{1} << object_id_shift) - 1);
}

/// Page arithmetic for one page size.
struct PageGeometry {
  unsigned page_shift;

  [[nodiscard]] WARPVM_HD constexpr std::uint64_t page_bytes() const { return std::uint64_t{1} << page_shift; }
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t page_of(std::uint64_t byte_offset) const { return byte_offset >> page_shift; }
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t offset_in_page(std::uint64_t byte_offset) const {
    return byte_offset & (page_bytes() - 1);
  }
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t page_begin(std::uint64_t page) const { return page << page_shift; }
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t pages_for(std::uint64_t bytes) const {
    return (bytes + page_bytes() - 1) >> page_shift;
  }
  /// Bytes of `page` that lie inside an object of `object_bytes` (the last page may be partial).
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t bytes_in_page(std::uint64_t page, std::uint64_t object_bytes) const {
    const std::uint64_t begin = page_begin(page);
    if (begin >= object_bytes) return 0;
    const std::uint64_t left = object_bytes - begin;
    return left < page_bytes() ? left : page_bytes();
  }
  /// log2 of the elements per page for an element of `element_bytes` (a power of two <= page).
  [[nodiscard]] WARPVM_HD constexpr unsigned element_shift(std::uint64_t element_bytes) const {
    return page_shift - log2_exact(element_bytes);
  }
};

}  // namespace warpvm::detail
