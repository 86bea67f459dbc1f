#pragma once
/// @file
/// Device side of the fault-event recorder. Only the fault path records (hits never do), only
/// when built with WARPVM_FAULT_EVENTS=1 (CMake option WARPVM_FAULT_EVENTS) and only when the
/// runtime was configured with a capacity. Built without it, the recorder is not compiled at
/// all: the fault path keeps its registers, and with them the hit path's occupancy (recording
/// adds 8 to 27 registers per thread to a kernel that uses warpvm).

#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/detail/core/device_support.cuh"

#include <cuda/atomic>

#include <cstdint>

namespace warpvm::detail {

[[nodiscard]] __device__ __forceinline__ bool recording([[maybe_unused]] const CacheView& cache) {
#if WARPVM_FAULT_EVENTS
  return cache.recorder.events != nullptr;
#else
  return false;
#endif
}

/// The clock, when recording (0 otherwise, so the hot path does not read it).
[[nodiscard]] __device__ __forceinline__ std::uint64_t event_clock(const CacheView& cache) {
  return recording(cache) ? global_timer_ns() : 0;
}

/// Appends one event (one lane calls it). Events past the capacity are counted, not written.
__device__ inline void record_fault(const CacheView& cache, std::uint64_t start_ns, std::uint32_t object,
                                    std::uint64_t page, unsigned lanes, FaultKind kind, bool write,
                                    unsigned detail) {
  if (!recording(cache)) return;
  const std::uint64_t slot =
      cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*cache.recorder.next).fetch_add(1, cuda::std::memory_order_relaxed);
  if (slot >= cache.recorder.capacity) return;
  FaultEvent event{};
  event.start_ns = start_ns;
  event.end_ns = global_timer_ns();
  event.page = page;
  event.object = object;
  event.warp = global_warp_index();
  event.sm = static_cast<std::uint16_t>(sm_id());
  event.lanes = static_cast<std::uint8_t>(lanes);
  event.kind = kind;
  event.write = write ? 1 : 0;
  event.detail = static_cast<std::uint8_t>(detail < 255 ? detail : 255);
  cache.recorder.events[slot] = event;
}

}  // namespace warpvm::detail
