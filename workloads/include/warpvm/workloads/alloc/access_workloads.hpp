#pragma once
/// @file
/// The host side of warpvm-alloc-bench's access workloads (random_access, large_ranges,
/// oversubscription; access_bench.cu): the managed backend's placement, which lays the heap's
/// regions over one cudaMallocManaged buffer where warpvm::Heap itself would put them, and the
/// references the kernels are checked against. No CUDA runtime: host-tested in
/// tests/alloc/access_workloads_test.cpp.

#include "warpvm/workloads/alloc/alloc_workloads.hpp"

#include "warpvm/detail/alloc/heap_ptr.hpp"
#include "warpvm/detail/alloc/heap_space.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::workloads {

/// Each thread's allocation, and how far the regions reach.
struct WarpRegions {
  std::vector<heap_ptr> ptrs;      ///< thread t's allocation; null where the space was full
  std::uint64_t extent_bytes = 0;  ///< the end of the furthest region: the bytes a buffer needs
};

/// A lane's bytes for a request of `bytes`: heap_malloc's rounding to 16-byte units.
inline std::uint64_t heap_lane_bytes(std::uint64_t bytes) {
  return (bytes + detail::heap_unit_bytes - 1) / detail::heap_unit_bytes * detail::heap_unit_bytes;
}

/// What warpvm::Heap gives `threads` threads that each ask for `bytes` in one call, every lane
/// of each warp active (warp w: threads 32w to 32w + 31, the last one what is left), mirrored on
/// the host: as heap_malloc does, each warp's lanes share one region of lanes x `bytes` rounded
/// up to 16 B, in `layout`, the lane's rank its lane id; as the heap's service does, the region
/// is placed by a HeapSpace for a heap of `capacity_bytes` without the fast path (no small area,
/// heap_shares' PortionSpace), warps asked for in order. The device serves warps in the order
/// their requests arrive, which only permutes regions of one shape. Offsets are byte offsets of
/// the buffer the regions are laid over.
inline WarpRegions place_warp_regions(std::uint64_t capacity_bytes, HeapLayout layout, detail::LaneOrder order,
                                      std::uint64_t threads, std::uint64_t bytes) {
  if (bytes == 0 || bytes > detail::heap_max_lane_bytes)
    throw std::invalid_argument("place_warp_regions: " + std::to_string(bytes) +
                                " bytes per thread; a heap region's lane holds 1 B to 64 GiB");
  const std::uint64_t segments = (capacity_bytes + detail::vablock_bytes - 1) / detail::vablock_bytes;
  const detail::HeapShares shares = detail::heap_shares(segments * detail::vablock_bytes, 0, false, 0);
  const auto portion_vablocks = static_cast<std::uint32_t>(shares.portion_bytes / detail::vablock_bytes);
  std::vector<std::uint64_t> storage(detail::HeapSpace::storage_words(static_cast<std::uint32_t>(segments)));
  detail::HeapSpace space(storage.data(), storage.size(), static_cast<std::uint32_t>(segments), portion_vablocks);
  const std::uint64_t lane_bytes = heap_lane_bytes(bytes);
  WarpRegions placed;
  placed.ptrs.resize(threads);
  for (std::uint64_t first = 0; first < threads; first += detail::warp_lanes) {
    const auto lanes = static_cast<std::uint32_t>(std::min<std::uint64_t>(detail::warp_lanes, threads - first));
    const std::uint64_t region_bytes = detail::heap_region_bytes(layout, order, lanes, lane_bytes);
    const detail::HeapRegion region = space.allocate(region_bytes);
    if (!region.ok()) continue;
    const auto tag = static_cast<std::uint32_t>(first / detail::warp_lanes + 1);  // never 0, like the service's
    for (std::uint32_t lane = 0; lane < lanes; ++lane)
      placed.ptrs[first + lane] = heap_ptr(region.offset, lane_bytes, tag, lane, lanes, layout, order);
    placed.extent_bytes = std::max(placed.extent_bytes, region.offset + region_bytes);
  }
  return placed;
}

/// Thread t's sum of its `accesses` reads of its `words` words, each word holding pattern_word:
/// what the access kernel must find.
inline std::vector<std::uint64_t> expected_sums(std::uint64_t seed, std::uint64_t threads, std::uint64_t words,
                                                std::uint64_t accesses, AccessOffsets offsets) {
  std::vector<std::uint64_t> sums(threads, 0);
  for (std::uint64_t t = 0; t < threads; ++t)
    for (std::uint64_t a = 0; a < accesses; ++a)
      sums[t] += pattern_word(seed, t, access_word(seed, access_stream(t, offsets), a, words));
  return sums;
}

/// Bytes of the distinct 4 KB pages the access kernel's reads fall on, through each thread's
/// allocation (null ones read nothing): the bytes a fault-driven system must bring in at least.
inline std::uint64_t touched_page_bytes(const std::vector<heap_ptr>& ptrs, std::uint64_t seed, std::uint64_t words,
                                        std::uint64_t accesses, AccessOffsets offsets) {
  std::vector<std::uint64_t> pages;
  pages.reserve(ptrs.size() * accesses);
  for (std::uint64_t t = 0; t < ptrs.size(); ++t) {
    if (!ptrs[t]) continue;
    for (std::uint64_t a = 0; a < accesses; ++a)
      pages.push_back(ptrs[t].offset_of(access_word(seed, access_stream(t, offsets), a, words) * 4) /
                      detail::small_segment_bytes);
  }
  std::sort(pages.begin(), pages.end());
  return static_cast<std::uint64_t>(std::unique(pages.begin(), pages.end()) - pages.begin()) *
         detail::small_segment_bytes;
}

/// The capacity of a heap without the fast path that fits every warp of `threads` threads
/// asking `bytes` each: their regions in whole 2 MB segments, and as much again, at most 4 GiB,
/// for the PortionSpace that heap_shares puts in front of them (regions under 2 MB go there,
/// or into an arena, a free segment the PortionSpace grows into, where it is full).
inline std::uint64_t heap_bytes_for(HeapLayout layout, std::uint64_t threads, std::uint64_t bytes) {
  const std::uint64_t lane_bytes = heap_lane_bytes(bytes);
  const std::uint64_t warps = (threads + detail::warp_lanes - 1) / detail::warp_lanes;
  const std::uint64_t region =
      detail::heap_region_bytes(layout, detail::LaneOrder::lane_id, detail::warp_lanes, lane_bytes);
  const std::uint64_t segments_bytes = warps * ((region + detail::vablock_bytes - 1) / detail::vablock_bytes) *
                                       detail::vablock_bytes;
  return segments_bytes + std::min(segments_bytes, detail::paper_portion_bytes);
}

}  // namespace warpvm::workloads
