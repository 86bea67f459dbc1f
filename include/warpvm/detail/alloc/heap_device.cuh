#pragma once
/// @file
/// The device side of warpvm's heap: the fast path for small requests, served on the device from
/// slabs (small_blocks.hpp), and for the rest warp-aggregated requests to the host service
/// (AlignMalloc's Section VI) and lane frees through the region words (heap_protocol.hpp).

#include "warpvm/detail/alloc/heap_protocol.hpp"
#include "warpvm/detail/core/acquire.cuh"
#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/detail/core/device_support.cuh"
#include "warpvm/error.hpp"

#include <cuda/atomic>
#include <cuda/std/bit>

#include <cstdint>

namespace warpvm::detail {

/// Waits with nanosleep backoff until `ready()` (a host reply, a free ring slot, a slab's
/// binding); past the runtime's watchdog (no service thread: the Heap was destroyed under a
/// running kernel) records no_progress and traps.
template <class Ready>
__device__ void heap_wait(const CacheView& cache, std::uint32_t object_id, std::uint64_t position, Ready&& ready) {
  unsigned backoff_ns = backoff_min_ns;
  const std::uint64_t started = global_timer_ns();
  while (!ready()) {
    if (global_timer_ns() - started > cache.watchdog_ns) {
      fail_kernel(cache, ErrorKind::no_progress, object_id, position, 0, FailureCause::host_service);
    }
    __nanosleep(backoff_ns);
    backoff_ns = backoff_ns * 2 < backoff_max_ns * 4 ? backoff_ns * 2 : backoff_max_ns * 4;
  }
}

template <class T>
__device__ __forceinline__ cuda::atomic_ref<T, cuda::thread_scope_device> device_atomic(T& word) {
  return cuda::atomic_ref<T, cuda::thread_scope_device>(word);
}

__device__ __forceinline__ cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> slot_header(HeapSlot& slot) {
  return cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(slot.header);
}

/// Posts one request; returns its position.
__device__ inline std::uint64_t heap_post(const HeapView& heap, const CacheView& cache, std::uint32_t object_id,
                                          HeapRequest kind, std::uint64_t value, std::uint32_t lanes,
                                          std::uint32_t lane_units = 0) {
  const std::uint64_t position = device_atomic(*heap.next_position).fetch_add(1, cuda::std::memory_order_relaxed);
  HeapSlot& slot = heap.slots[position & (heap.capacity - 1)];
  heap_wait(cache, object_id, position,
            [&] { return slot_header(slot).load(cuda::std::memory_order_acquire) == 0; });
  volatile HeapSlot& body = slot;
  body.value = value;
  body.kind = static_cast<std::uint32_t>(kind);
  body.lanes = lanes;
  body.lane_units = lane_units;
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

// ---- the fast path: small blocks from slabs ---------------------------------------------------

/// A slab from the free-slab queue, or failed_binding when it has none.
__device__ inline std::uint32_t small_take_slab(const SmallSlabsView& small, const CacheView& cache,
                                                std::uint32_t object_id) {
  auto available = device_atomic(*small.queue_available);
  if (available.fetch_sub(1, cuda::std::memory_order_relaxed) <= 0) {
    available.fetch_add(1, cuda::std::memory_order_relaxed);
    return failed_binding;
  }
  // A slab is claimed: the one for our position is there, or is being put there.
  const std::uint64_t head = device_atomic(*small.queue_head).fetch_add(1, cuda::std::memory_order_relaxed);
  auto entry = device_atomic(small.queue[head % small.area.slabs]);
  std::uint32_t slab_plus_one = 0;
  heap_wait(cache, object_id, head, [&] {
    return (slab_plus_one = queued_slab(entry.load(cuda::std::memory_order_acquire), head)) != 0;
  });
  entry.store(queue_entry(head + small.area.slabs, 0), cuda::std::memory_order_relaxed);
  return slab_plus_one - 1;
}

/// Puts an emptied slab (bitmap all clear, live count 0) back in the queue. The queue has room
/// for every slab, so the entry for our position is free, or about to be (the taker of the
/// previous lap's slab there has claimed it and is reading it).
__device__ inline void small_give_slab(const SmallSlabsView& small, const CacheView& cache, std::uint32_t object_id,
                                       std::uint32_t slab) {
  const std::uint64_t tail = device_atomic(*small.queue_tail).fetch_add(1, cuda::std::memory_order_relaxed);
  auto entry = device_atomic(small.queue[tail % small.area.slabs]);
  heap_wait(cache, object_id, tail, [&] {
    std::uint64_t empty = queue_entry(tail, 0);
    return entry.compare_exchange_strong(empty, queue_entry(tail, slab + 1), cuda::std::memory_order_release,
                                         cuda::std::memory_order_relaxed);
  });
  device_atomic(*small.queue_available).fetch_add(1, cuda::std::memory_order_release);
}

/// Binds virtual slab `virtual_slab` of `size_class` to a slab from the queue (or records that
/// there was none) and publishes it for the lanes whose tickets fall in it, once the lanes of
/// the virtual slab a ring before it have all read theirs from the same entry.
__device__ inline void small_bind(const SmallSlabsView& small, const CacheView& cache, std::uint32_t object_id,
                                  std::uint32_t size_class, std::uint64_t virtual_slab) {
  const std::uint32_t index = binding_index(size_class, virtual_slab);
  auto entry = device_atomic(small.bindings[index]);
  auto readers = device_atomic(small.binding_readers[index]);
  // The entry first: once it shows the previous virtual slab published, its reader count is
  // the one its binder set, or lower.
  heap_wait(cache, object_id, virtual_slab, [&] {
    const std::uint64_t seen = entry.load(cuda::std::memory_order_acquire);
    return binding_entry_free_for(seen, readers.load(cuda::std::memory_order_acquire), virtual_slab);
  });
  const std::uint32_t slab = small_take_slab(small, cache, object_id);
  if (slab != failed_binding) {
    device_atomic(small.tags[slab]).store(small_slab_tag(size_class, virtual_slab), cuda::std::memory_order_relaxed);
    device_atomic(small.live[slab]).store(small_blocks_per_slab(size_class), cuda::std::memory_order_relaxed);
  }
  readers.store(small_blocks_per_slab(size_class), cuda::std::memory_order_relaxed);
  entry.store(binding_entry(virtual_slab, slab == failed_binding ? failed_binding : slab + 1),
              cuda::std::memory_order_release);
}

/// The fast path for the lanes of `group`, all asking for class `size_class`: one ticket add
/// for the group, one bitmap OR per word its blocks share. Null for a lane it could not serve
/// (no slab free).
__device__ inline heap_ptr small_malloc(const SmallSlabsView& small, const CacheView& cache, std::uint32_t object_id,
                                        std::uint32_t size_class, unsigned group) {
  const unsigned leader = first_lane(group);
  std::uint64_t first = 0;
  if (lane_id() == leader)
    first = device_atomic(small.tickets[size_class]).fetch_add(__popc(group), cuda::std::memory_order_relaxed);
  first = __shfl_sync(group, first, leader);
  const SmallTicket ticket = small_ticket(first + __popc(group & lanemask_lt()), size_class);
  if (ticket.block == 0) small_bind(small, cache, object_id, size_class, ticket.virtual_slab);
  const std::uint32_t index = binding_index(size_class, ticket.virtual_slab);
  auto entry = device_atomic(small.bindings[index]);
  Binding binding{};
  heap_wait(cache, object_id, ticket.virtual_slab, [&] {
    binding = read_binding(entry.load(cuda::std::memory_order_acquire), ticket.virtual_slab);
    return binding.state != BindingState::pending;
  });
  // Read: the lanes of one virtual slab count themselves off its entry with one subtraction
  // (their reads happen before it, and so before a later binder overwrites the entry).
  const unsigned same_virtual_slab = __match_any_sync(group, ticket.virtual_slab);
  __syncwarp(same_virtual_slab);
  if (lane_id() == first_lane(same_virtual_slab))
    device_atomic(small.binding_readers[index])
        .fetch_sub(static_cast<std::uint32_t>(__popc(same_virtual_slab)), cuda::std::memory_order_release);
  const bool bound = binding.state == BindingState::bound;
  const unsigned served = __ballot_sync(group, bound);
  if (!bound) return heap_ptr{};
  const std::uint32_t word = binding.slab * slab_bitmap_words + block_word(ticket.block);
  const unsigned sharing = __match_any_sync(served, word);
  const std::uint32_t bits = __reduce_or_sync(sharing, block_bit(ticket.block));
  if (lane_id() == first_lane(sharing))
    device_atomic(small.bitmaps[word]).fetch_or(bits, cuda::std::memory_order_relaxed);
  __syncwarp(sharing);  // the bits are set before any lane can free its block
  return small.area.pointer(size_class, binding.slab, ticket.block, small_slab_tag(size_class, ticket.virtual_slab));
}

/// Frees small block p; false (changing nothing) when it is not live. The active lanes freeing
/// blocks of one bitmap word clear their bits with one atomic AND (lane by lane when two of
/// them free the same block, so that exactly one succeeds), and those freeing blocks of one
/// slab take them off its live count with one subtraction; the one that empties the slab puts
/// it back in the queue.
__device__ inline bool small_free(const SmallSlabsView& small, const CacheView& cache, std::uint32_t object_id,
                                  const heap_ptr& p) {
  const unsigned mask = __activemask();
  const SmallArea::Located at = small.area.locate(p);
  const bool tagged = at.ok && device_atomic(small.tags[at.slab]).load(cuda::std::memory_order_relaxed) == p.tag();
  const unsigned candidates = __ballot_sync(mask, tagged);
  if (!tagged) return false;
  const std::uint32_t word_index = at.slab * slab_bitmap_words + block_word(at.block);
  const std::uint32_t bit = block_bit(at.block);
  auto word = device_atomic(small.bitmaps[word_index]);
  const unsigned sharing = __match_any_sync(candidates, word_index);
  const std::uint32_t bits = __reduce_or_sync(sharing, bit);
  bool freed = false;
  if (static_cast<unsigned>(__popc(bits)) != static_cast<unsigned>(__popc(sharing))) {
    freed = (word.fetch_and(~bit, cuda::std::memory_order_acq_rel) & bit) != 0;
  } else {
    const unsigned leader = first_lane(sharing);
    __syncwarp(sharing);  // every lane's accesses to its block happen before the leader's release
    std::uint32_t was = 0;
    if (lane_id() == leader) was = word.fetch_and(~bits, cuda::std::memory_order_acq_rel);
    freed = (__shfl_sync(sharing, was, leader) & bit) != 0;
  }
  const unsigned freeing = __ballot_sync(candidates, freed);
  if (!freed) return false;
  const unsigned same_slab = __match_any_sync(freeing, at.slab);
  if (lane_id() == first_lane(same_slab)) {
    const auto count = static_cast<std::uint32_t>(__popc(same_slab));
    if (device_atomic(small.live[at.slab]).fetch_sub(count, cuda::std::memory_order_acq_rel) == count) {
      // Stale pointers to the slab no longer match its tag.
      device_atomic(small.tags[at.slab]).store(0, cuda::std::memory_order_relaxed);
      small_give_slab(small, cache, object_id, at.slab);
    }
  }
  return true;
}

// ---- the host path: a region per warp and size class ------------------------------------------

/// malloc through the host for the lanes `mask` (all calling together). Lanes are grouped by
/// size class (__match_any_sync on the bit width of their 16-byte units), each group is one
/// request for a region of popc(group) lanes of the group's largest size, posted by its lowest
/// lane; lanes take their rank in the group as their slot in the region. Lanes asking for 0
/// bytes get null.
__device__ inline heap_ptr heap_region_malloc(const HeapView& heap, const CacheView& cache, std::uint32_t object_id,
                                              std::uint64_t bytes, unsigned mask) {
  const unsigned lane = lane_id();
  const bool wants = bytes != 0;
  const bool fits = bytes <= heap_max_lane_bytes;
  const auto units = static_cast<std::uint32_t>(fits ? (bytes + heap_unit_bytes - 1) / heap_unit_bytes : 0);
  // Classes 0..32 by bit width; 33: too large for any region; 34: not asking.
  const unsigned size_class = !wants ? 34u : !fits ? 33u : static_cast<unsigned>(cuda::std::bit_width(units - 1));
  const unsigned group = __match_any_sync(mask, size_class);
  const unsigned leader = first_lane(group);
  const unsigned rank = static_cast<unsigned>(__popc(group & lanemask_lt()));
  const unsigned lanes = static_cast<unsigned>(__popc(group));

  // Each group's largest request: one warp-wide max per group, the lanes of other groups
  // contributing 0 (the loop runs once per group, uniformly over the active lanes).
  std::uint32_t group_units = 0;
  for (unsigned pending = __ballot_sync(mask, wants); pending != 0;) {
    const unsigned first = first_lane(pending);
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
    const std::uint64_t position = heap_post(heap, cache, object_id, HeapRequest::allocate, region, lanes, group_units);
    heap_await_reply(heap, cache, object_id, position, offset, tag);
    if (offset != no_offset)
      device_atomic(heap.regions[offset / basic_block_bytes])
          .store(heap_region_word(tag, lanes), cuda::std::memory_order_relaxed);
  }
  // The region word is written before any lane can free its part.
  __syncwarp(mask);
  offset = __shfl_sync(mask, offset, leader);
  tag = __shfl_sync(mask, tag, leader);
  if (!wants || offset == no_offset) return heap_ptr{};
  return heap_ptr(offset, lane_bytes, tag, rank, lanes, heap.layout, heap.order);
}

/// malloc for every active lane at once: requests of at most 8 KB from the fast path, grouped
/// by class; the rest, and small requests the fast path could not serve, through the host.
__device__ inline heap_ptr heap_malloc(const HeapView& heap, const CacheView& cache, std::uint32_t object_id,
                                       std::uint64_t bytes) {
  const unsigned mask = __activemask();
  if (heap.small.area.slabs == 0) return heap_region_malloc(heap, cache, object_id, bytes, mask);
  const std::uint32_t size_class = small_class_of(bytes);
  const bool small = size_class != no_small_class;
  const unsigned small_lanes = __ballot_sync(mask, small);
  heap_ptr p;
  if (small) p = small_malloc(heap.small, cache, object_id, size_class, __match_any_sync(small_lanes, size_class));
  const unsigned rest = __ballot_sync(mask, bytes != 0 && !p);
  if (((rest >> lane_id()) & 1u) == 0) return p;
  return heap_region_malloc(heap, cache, object_id, bytes, rest);
}

/// Frees the parts `lanes` of `p`'s region with one CAS loop on its word: the parts that were
/// live (0 for a tag mismatch); the caller that empties the region gets `emptied`.
__device__ inline std::uint32_t heap_release_lanes(const HeapView& heap, const heap_ptr& p, std::uint32_t lanes,
                                                   bool& emptied) {
  auto word = device_atomic(heap.regions[p.block()]);
  std::uint64_t seen = word.load(cuda::std::memory_order_relaxed);
  std::uint64_t next = 0;
  std::uint32_t live = release_lanes(seen, p.tag(), lanes, next);
  while (live != 0 &&
         !word.compare_exchange_weak(seen, next, cuda::std::memory_order_acq_rel, cuda::std::memory_order_relaxed))
    live = release_lanes(seen, p.tag(), lanes, next);
  emptied = live != 0 && static_cast<std::uint32_t>(next) == 0;
  return live;
}

/// Frees one lane's part (a small block: small_free); whoever frees a region's last part gives
/// it back to the host.
/// Returns false (changing nothing) for a pointer whose part is not live. The active lanes
/// freeing parts of one region together (the usual case: a warp frees what it allocated) do it
/// with one CAS by their lowest lane rather than one contended CAS each.
__device__ inline bool heap_free(const HeapView& heap, const CacheView& cache, std::uint32_t object_id, heap_ptr p) {
  if (p.is_null()) return true;
  if (p.is_small()) return small_free(heap.small, cache, object_id, p);
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
  const unsigned leader = first_lane(group);
  __syncwarp(group);  // every lane's accesses to its part happen before the leader's release
  std::uint32_t live = 0;
  if (lane_id() == leader) live = heap_release_lanes(heap, p, parts, emptied);
  live = __shfl_sync(group, live, leader);
  if (emptied) heap_post(heap, cache, object_id, HeapRequest::release, p.region_offset(), 0);
  return (live & part) != 0;
}

}  // namespace warpvm::detail
