#pragma once
/// @file
/// The device side of warpvm's heap: warp-aggregated requests to the host service (AlignMalloc's
/// Section VI) and lane frees through the region words (heap_protocol.hpp).

#include "warpvm/detail/alloc/heap_protocol.hpp"
#include "warpvm/detail/core/acquire.cuh"
#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/detail/core/device_support.cuh"
#include "warpvm/error.hpp"

#include <cuda/atomic>
#include <cuda/std/bit>

#include <cstdint>

namespace warpvm::detail {

/// Waits with nanosleep backoff until `ready()`; past the runtime's watchdog (no service
/// thread: the Heap was destroyed under a running kernel) records no_progress and traps.
template <class Ready>
__device__ void heap_wait(const CacheView& cache, std::uint32_t object_id, std::uint64_t position, Ready&& ready) {
  unsigned backoff_ns = backoff_min_ns;
  const std::uint64_t started = global_timer_ns();
  while (!ready()) {
    if (global_timer_ns() - started > cache.watchdog_ns) {
      record_error(cache, ErrorKind::no_progress, object_id, position, 0);
      __trap();
    }
    __nanosleep(backoff_ns);
    backoff_ns = backoff_ns * 2 < backoff_max_ns * 4 ? backoff_ns * 2 : backoff_max_ns * 4;
  }
}

__device__ __forceinline__ cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> slot_header(HeapSlot& slot) {
  return cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(slot.header);
}

/// Posts one request; returns its position.
__device__ inline std::uint64_t heap_post(const HeapView& heap, const CacheView& cache, std::uint32_t object_id,
                                          HeapRequest kind, std::uint64_t value, std::uint32_t lanes) {
  const std::uint64_t position = cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*heap.next_position)
                                     .fetch_add(1, cuda::std::memory_order_relaxed);
  HeapSlot& slot = heap.slots[position & (heap.capacity - 1)];
  heap_wait(cache, object_id, position,
            [&] { return slot_header(slot).load(cuda::std::memory_order_acquire) == 0; });
  volatile HeapSlot& body = slot;
  body.value = value;
  body.kind = static_cast<std::uint32_t>(kind);
  body.lanes = lanes;
  slot_header(slot).store(heap_slot_header(position, heap_slot_posted), cuda::std::memory_order_release);
  return position;
}

/// Waits for the reply to the allocation at `position`, reads it and empties the slot.
__device__ inline void heap_await_reply(const HeapView& heap, const CacheView& cache, std::uint32_t object_id,
                                        std::uint64_t position, std::uint64_t& offset, std::uint32_t& tag) {
  HeapSlot& slot = heap.slots[position & (heap.capacity - 1)];
  const std::uint64_t replied = heap_slot_header(position, heap_slot_replied);
  heap_wait(cache, object_id, position,
            [&] { return slot_header(slot).load(cuda::std::memory_order_acquire) == replied; });
  const volatile HeapSlot& body = slot;
  offset = body.value;
  tag = body.tag;
  slot_header(slot).store(0, cuda::std::memory_order_release);
}

/// malloc for every active lane at once. Lanes are grouped by size class (__match_any_sync on
/// the bit width of their 16-byte units), each group is one request for a region of
/// popc(group) lanes of the group's largest size, posted by its lowest lane; lanes take their
/// rank in the group as their slot in the region. Lanes asking for 0 bytes get null.
__device__ inline heap_ptr heap_malloc(const HeapView& heap, const CacheView& cache, std::uint32_t object_id,
                                       std::uint64_t bytes) {
  const unsigned mask = __activemask();
  const unsigned lane = lane_id();
  const bool wants = bytes != 0;
  const bool fits = bytes <= heap_max_lane_bytes;
  const auto units = static_cast<std::uint32_t>(fits ? (bytes + heap_unit_bytes - 1) / heap_unit_bytes : 0);
  // Classes 0..32 by bit width; 33: too large for any region; 34: not asking.
  const unsigned size_class = !wants ? 34u : !fits ? 33u : static_cast<unsigned>(cuda::std::bit_width(units - 1));
  const unsigned group = __match_any_sync(mask, size_class);
  const unsigned leader = static_cast<unsigned>(__ffs(group) - 1);
  const unsigned rank = static_cast<unsigned>(__popc(group & lanemask_lt()));
  const unsigned lanes = static_cast<unsigned>(__popc(group));

  // Each group's largest request: one warp-wide max per group, the lanes of other groups
  // contributing 0 (the loop runs once per group, uniformly over the active lanes).
  std::uint32_t group_units = 0;
  for (unsigned pending = __ballot_sync(mask, wants); pending != 0;) {
    const unsigned first = static_cast<unsigned>(__ffs(pending) - 1);
    const unsigned members = __shfl_sync(mask, group, first);
    const std::uint32_t largest = __reduce_max_sync(mask, (members >> lane) & 1u ? units : 0u);
    if ((members >> lane) & 1u) group_units = largest;
    pending &= ~members;
  }

  const std::uint64_t lane_bytes = std::uint64_t{group_units} * heap_unit_bytes;
  std::uint64_t offset = no_offset;
  std::uint32_t tag = 0;
  if (wants && lane == leader) {
    const std::uint64_t region = fits ? heap_region_bytes(heap.layout, heap.order, lanes, lane_bytes) : no_offset;
    const std::uint64_t position = heap_post(heap, cache, object_id, HeapRequest::allocate, region, lanes);
    heap_await_reply(heap, cache, object_id, position, offset, tag);
    if (offset != no_offset)
      cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(heap.regions[offset / basic_block_bytes])
          .store(heap_region_word(tag, lanes), cuda::std::memory_order_relaxed);
  }
  // The region word is written before any lane can free its part.
  __syncwarp(mask);
  offset = __shfl_sync(mask, offset, leader);
  tag = __shfl_sync(mask, tag, leader);
  if (!wants || offset == no_offset) return heap_ptr{};
  return heap_ptr(offset, lane_bytes, tag, rank, lanes, heap.layout, heap.order);
}

/// Frees the parts `lanes` of `p`'s region with one CAS loop on its word: the parts that were
/// live (0 for a tag mismatch); the caller that empties the region gets `emptied`.
__device__ inline std::uint32_t heap_release_lanes(const HeapView& heap, const heap_ptr& p, std::uint32_t lanes,
                                                   bool& emptied) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device> word(heap.regions[p.block()]);
  std::uint64_t seen = word.load(cuda::std::memory_order_relaxed);
  std::uint64_t next = 0;
  std::uint32_t live = release_lanes(seen, p.tag(), lanes, next);
  while (live != 0 &&
         !word.compare_exchange_weak(seen, next, cuda::std::memory_order_acq_rel, cuda::std::memory_order_relaxed))
    live = release_lanes(seen, p.tag(), lanes, next);
  emptied = live != 0 && static_cast<std::uint32_t>(next) == 0;
  return live;
}

/// Frees one lane's part; whoever frees a region's last part gives it back to the host.
/// Returns false (changing nothing) for a pointer whose part is not live. The active lanes
/// freeing parts of one region together (the usual case: a warp frees what it allocated) do it
/// with one CAS by their lowest lane rather than one contended CAS each.
__device__ inline bool heap_free(const HeapView& heap, const CacheView& cache, std::uint32_t object_id, heap_ptr p) {
  if (p.is_null()) return true;
  if (p.block() >= heap.blocks || p.lane() >= p.lanes() || p.lanes() > warp_lanes) return false;
  const unsigned mask = __activemask();
  const unsigned group = __match_any_sync(mask, (std::uint64_t{p.block()} << 32) | p.tag());
  const std::uint32_t part = std::uint32_t{1} << p.lane();
  const std::uint32_t parts = __reduce_or_sync(group, part);
  bool emptied = false;
  if (__popc(parts) != __popc(group)) {
    // Two lanes free the same part (a double free in one call): each on its own, so that
    // exactly one of them succeeds.
    const bool freed = heap_release_lanes(heap, p, part, emptied) != 0;
    if (emptied) heap_post(heap, cache, object_id, HeapRequest::release, p.region_offset(), 0);
    return freed;
  }
  const unsigned leader = static_cast<unsigned>(__ffs(group) - 1);
  __syncwarp(group);  // every lane's accesses to its part happen before the leader's release
  std::uint32_t live = 0;
  if (lane_id() == leader) live = heap_release_lanes(heap, p, parts, emptied);
  live = __shfl_sync(group, live, leader);
  if (emptied) heap_post(heap, cache, object_id, HeapRequest::release, p.region_offset(), 0);
  return (live & part) != 0;
}

}  // namespace warpvm::detail
