#pragma once
/// @file
/// The device side of the host_batched transport (UVM's way of serving faults): a warp that
/// touches an absent page posts a fault into the pinned fault buffer and waits until the host
/// service thread has copied the page in and written its page entry. Lanes of a warp on the
/// same page post once (as the GPU's fault unit coalesces a warp's accesses); different warps
/// post duplicates, which the host drops, as UVM's driver does. After every batch the host
/// flushes the buffer and bumps the replay epoch: a warp whose page is still absent then posts
/// again, as a replayed access faults again.

#include "warpvm/detail/core/acquire.cuh"
#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/detail/core/device_support.cuh"
#include "warpvm/detail/trace/fault_recorder.cuh"

#include <cuda/atomic>

#include <cstdint>

namespace warpvm::detail {

__device__ __forceinline__ std::uint32_t read_replay_epoch(const FaultRing& ring) {
  return __ldcg(&ring.replay->epoch);  // written by the host's copies: read L2, never a stale L1 line
}

/// Posts the fault on `key` at the next position, once the host has taken the post one lap
/// behind it; past the watchdog (no service thread), records no_progress and traps.
__device__ inline void post_fault(const CacheView& cache, std::uint64_t key) {
  const FaultRing& ring = cache.faults;
  const std::uint64_t position =
      cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*ring.next_position).fetch_add(1, cuda::std::memory_order_relaxed);
  const std::uint64_t started = global_timer_ns();
  while (position - __ldcg(&ring.replay->consumed) >= ring.capacity) {
    if (global_timer_ns() - started > cache.watchdog_ns) {
      record_error(cache, ErrorKind::no_progress, key_object(key), key_page(key), 0);
      __trap();
    }
    __nanosleep(backoff_max_ns);
  }
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(ring.slots[position & (ring.capacity - 1)])
      .store(key + 1, cuda::std::memory_order_release);
}

/// The frame of page `page` of `object` once the host has served it (all active lanes call
/// together, each with its own page). Nothing is held: host_batched runs only while every
/// migrate object fits in the cache, so a resident page stays in its frame. A warp that waits
/// longer than the watchdog (no service thread, say) records no_progress and traps.
__device__ inline std::uint32_t await_host_service(const CacheView& cache, const ObjectDescriptor& object,
                                                   std::uint64_t page, bool write) {
  const unsigned mask = __activemask();
  const std::uint64_t key = make_page_key(object.id, page);
  const unsigned peers = __match_any_sync(mask, key);
  const bool is_leader = lane_id() == static_cast<unsigned>(__ffs(peers) - 1);
  const bool group_writes = (__ballot_sync(mask, write) & peers) != 0;
  const std::uint64_t started = global_timer_ns();  // for the watchdog and the fault event
  unsigned posts = 1;
  std::uint32_t epoch = 0;
  if (is_leader) {
    // The epoch is read before the post (the post's release store orders it too), so a flush
    // that drops this post bumps the epoch after this read, and the warp posts again.
    epoch = read_replay_epoch(cache.faults);
    __threadfence_system();
    post_fault(cache, key);
  }
  unsigned backoff_ns = backoff_min_ns;
  std::uint32_t frame = 0;
  while (!recheck_resident_unheld(cache, object, page, frame)) {
    if (is_leader) {
      const std::uint32_t now = read_replay_epoch(cache.faults);
      if (now != epoch) {
        epoch = now;
        __threadfence_system();
        post_fault(cache, key);
        ++posts;
      }
    }
    if (global_timer_ns() - started > cache.watchdog_ns) {
      record_error(cache, ErrorKind::no_progress, object.id, page, 0);
      __trap();
    }
    __nanosleep(backoff_ns);
    backoff_ns = backoff_ns * 2 < backoff_max_ns ? backoff_ns * 2 : backoff_max_ns;
  }
  if (is_leader)
    record_fault(cache, started, object.id, page, static_cast<unsigned>(__popc(peers)), FaultKind::host, group_writes, posts);
  return frame;
}

}  // namespace warpvm::detail
