#pragma once
/// @file
/// The UVM units AlignMalloc lays memory out by (Sections II-C and V): the 64 KB basic block
/// that UVM prefetches, the 2 MB VABlock whose 32 basic blocks form the leaves of one
/// prefetching tree (TBN), and the 4 KB page that the leftovers of a tile are cut into.

#include <cstdint>

namespace warpvm::detail {

inline constexpr std::uint64_t small_segment_bytes = 4u << 10;   ///< 4 KB page
inline constexpr std::uint64_t basic_block_bytes = 64u << 10;    ///< 64 KB, a TBN leaf
inline constexpr std::uint64_t vablock_bytes = 2u << 20;         ///< 2 MB, one TBN
inline constexpr unsigned vablock_height = 5;                    ///< a VABlock's root is 2^5 leaves up
inline constexpr std::uint32_t warp_lanes = 32;

/// Returned where a byte offset is asked for and none exists.
inline constexpr std::uint64_t no_offset = ~std::uint64_t{0};

static_assert(vablock_bytes == basic_block_bytes << vablock_height);

}  // namespace warpvm::detail
