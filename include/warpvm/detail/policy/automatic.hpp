#pragma once
/// @file
/// Placement::automatic's choice between reading an absent page over the link and migrating
/// it, in bytes: a page is read remotely while the 32-byte sectors its reads fetched stay within
/// a budget (Config::automatic_remote_share of the page), and migrates once the next read would
/// pass it. This is the ski-rental rule priced in what crosses the link: a warp access that
/// fetches one sector (a scattered read) costs 32 B, one that fetches a sector per lane costs as
/// much as 1 KB of the page's copy, so a page read that densely migrates at once instead of
/// being paid for twice. Pure __host__ __device__ logic; the kernels' access path (acquire.cuh)
/// counts the sectors and calls it.

#include "warpvm/detail/host_device.hpp"

#include <cstdint>

namespace warpvm::detail {

/// What one read costs the link at least: an L2 sector.
inline constexpr std::uint32_t remote_sector_bytes = 32;

/// The sectors remote reads may fetch from one page before it migrates: `share` of the page,
/// rounded down (0: every absent read migrates).
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint32_t automatic_remote_sectors(std::uint64_t page_bytes, double share) {
  return static_cast<std::uint32_t>(static_cast<double>(page_bytes / remote_sector_bytes) * share);
}

/// Whether a read fetching `sectors` of a page whose remote reads fetched `fetched` so far goes
/// to host memory (within `budget`); otherwise the page migrates.
[[nodiscard]] WARPVM_HD_INLINE constexpr bool automatic_reads_remotely(std::uint32_t fetched, std::uint32_t sectors,
                                                                       std::uint32_t budget) {
  return std::uint64_t{fetched} + sectors <= budget;
}

}  // namespace warpvm::detail
