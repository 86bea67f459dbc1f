#pragma once
/// @file
/// How warpvm::ops maps table rows onto pages, as pure __host__ __device__ arithmetic (host
/// tests cover it). A row of a [rows, dim] table is `dim` consecutive elements; when its bytes do
/// not divide the page size it may straddle pages, so a warp walks it one page segment at a time,
/// holding one page at a time. Also: the widest vector a copy may use, and how the lanes of a
/// warp describe a segment to Placement::automatic's sector count.

#include "warpvm/detail/host_device.hpp"
#include "warpvm/detail/policy/automatic.hpp"

#include <cstdint>

namespace warpvm::detail {

/// The elements [first, first + count) of one page.
struct RowSegment {
  std::uint64_t first;
  std::uint32_t count;
};

/// The segment that starts at element `element`, in pages of 2^element_shift elements, and ends
/// at the page's end or at `end` (exclusive, > element), whichever comes first.
[[nodiscard]] WARPVM_HD_INLINE constexpr RowSegment segment_at(std::uint64_t element, std::uint64_t end,
                                                               unsigned element_shift) {
  const std::uint64_t page_end = ((element >> element_shift) + 1) << element_shift;
  const std::uint64_t stop = end < page_end ? end : page_end;
  return {element, static_cast<std::uint32_t>(stop - element)};
}

/// The widest load (16, 8, 4, 2 or 1 bytes) that both addresses allow.
[[nodiscard]] WARPVM_HD_INLINE constexpr unsigned copy_width(std::uint64_t destination, std::uint64_t source) {
  const std::uint64_t misaligned = (destination | source) & 15u;
  return misaligned == 0 ? 16u : static_cast<unsigned>(misaligned & (~misaligned + 1));  // lowest set bit
}

/// What one lane passes to read_absent_page_remotely() so that the lanes of a warp together
/// price a segment of `bytes` bytes starting `byte_in_page` into its page at the 32-byte sectors
/// it covers: lane l names every `per_lane`-th sector and claims `per_lane` sectors for it
/// (lanes past the end repeat the last one, which counts once). The total is at least the
/// segment's sectors and less than that plus per_lane.
struct SectorProbe {
  std::uint32_t byte_in_page;
  std::uint32_t bytes;  ///< a multiple of remote_sector_bytes
};
[[nodiscard]] WARPVM_HD_INLINE constexpr SectorProbe sector_probe(std::uint32_t byte_in_page, std::uint32_t bytes,
                                                                  unsigned lane) {
  const std::uint32_t first = byte_in_page / remote_sector_bytes;
  const std::uint32_t sectors = (byte_in_page + bytes - 1) / remote_sector_bytes - first + 1;
  const std::uint32_t per_lane = (sectors + 31) / 32;
  const std::uint32_t last_probe = (sectors - 1) / per_lane;
  const std::uint32_t probe = lane < last_probe ? lane : last_probe;
  return {(first + probe * per_lane) * remote_sector_bytes, per_lane * remote_sector_bytes};
}

}  // namespace warpvm::detail
