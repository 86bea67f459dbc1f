#pragma once
/// @file
/// GPU-initiated transfer: the lanes of a warp copy a page between pinned host memory and a
/// frame with 16-byte loads, several in flight per lane, so that enough bytes cross the link at
/// once to fill it.

#include "warpvm/detail/core/device_support.cuh"

#include <cstddef>
#include <cstdint>

namespace warpvm::detail {

/// 16-byte loads each lane keeps in flight while copying a page. More hides more link latency per
/// warp, but each costs four registers in every kernel that can fault (the fill is inlined), and
/// registers bound occupancy. On the H200, 2 keeps PCIe full (51 GB/s) with the most resident
/// warps; 8 cost the hit path up to half its speed (docs/bench/paging.md). Override with
/// -DWARPVM_COPY_LOADS_IN_FLIGHT=n.
#ifndef WARPVM_COPY_LOADS_IN_FLIGHT
#define WARPVM_COPY_LOADS_IN_FLIGHT 2
#endif
inline constexpr unsigned copy_loads_in_flight = WARPVM_COPY_LOADS_IN_FLIGHT;

/// Copies `bytes` from `src` to `dst`; every lane in `mask` calls it with the same arguments.
/// Both pointers are 16-byte aligned; a tail that is not a multiple of 16 is copied bytewise.
__device__ inline void warp_copy(unsigned mask, std::byte* dst, const std::byte* src, std::uint64_t bytes) {
  const unsigned lanes = __popc(mask);
  const unsigned rank = __popc(mask & lanemask_lt());
  const std::uint64_t vectors = bytes / sizeof(uint4);
  const auto* from = reinterpret_cast<const uint4*>(src);
  auto* to = reinterpret_cast<uint4*>(dst);
  const std::uint64_t stride = std::uint64_t{lanes} * copy_loads_in_flight;
  for (std::uint64_t base = rank; base < vectors; base += stride) {
    uint4 staged[copy_loads_in_flight];
#pragma unroll
    for (unsigned k = 0; k < copy_loads_in_flight; ++k) {
      const std::uint64_t v = base + std::uint64_t{k} * lanes;
      if (v < vectors) staged[k] = __ldcg(from + v);
    }
#pragma unroll
    for (unsigned k = 0; k < copy_loads_in_flight; ++k) {
      const std::uint64_t v = base + std::uint64_t{k} * lanes;
      if (v < vectors) __stcg(to + v, staged[k]);
    }
  }
  const auto* from_bytes = reinterpret_cast<const unsigned char*>(src);
  auto* to_bytes = reinterpret_cast<unsigned char*>(dst);
  for (std::uint64_t b = vectors * sizeof(uint4) + rank; b < bytes; b += lanes) __stcg(to_bytes + b, __ldcg(from_bytes + b));
}

}  // namespace warpvm::detail
