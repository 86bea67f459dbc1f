#pragma once
/// @file
/// The device side of the host_batched transport (UVM's way of serving faults): a warp that
/// touches an absent page posts a fault into the pinned fault buffer and waits until the host
/// service thread has copied the page in and written its page entry. Lanes of a warp on the
/// same page post once (as the GPU's fault unit coalesces a warp's accesses); different warps
/// post duplicates, which the host drops, as UVM's driver does. After every batch the host
/// flushes the buffer and bumps the replay epoch: a warp whose page is still absent then posts
/// again, as a replayed access faults again.
///
/// Eviction (while the migrate objects need more 2 MB chunks than the cache has; the runtime
/// then clears never_evicts). The service picks the victim chunk with UVM's policy (UvmModel),
/// but only the device can change page words atomically while a kernel runs, so the service
/// posts an eviction order (the block's resident pages) and warps that wait for their own
/// faults carry it out: per page, a take (CAS VALID with no holders -> BUSY naming the order,
/// skipped and retried later while held), then the order counts it and the page is marked
/// counted; the warp whose mark completes the order acknowledges it in mapped memory. The
/// service then writes the dirty pages back and the pages' entries absent with copies, and only
/// then reuses the chunk's frames. Accesses hold their page again (page_try_hold_resident, a
/// CAS that only touches a resident word), so:
///  - no warp reads a page being evicted: frame data is read only by holders, a take fails
///    while anyone holds the page, and no hold can be added to a BUSY or absent word; a hold
///    added to a page that was evicted and brought in again reads the frame after the CAS, so
///    it sees the new frame;
///  - the host writes a page's entry only while no device atomic can change the word: absent
///    (a page the service copies in, whose block has no order outstanding) or BUSY under an
///    acknowledged eviction (takes and holds need VALID, give-backs need a withdrawn order);
///  - no deadlock through eviction: an evicting warp never waits for a page (held pages are
///    skipped), so it cannot wait on a hold of its own; element accesses hold their page only
///    around their own operation; the service waits for an order only up to a time bound (a
///    block whose chunk is still being evicted stays queued while others are served; each
///    batch bumps the epoch, so its waiting warps post again and keep batches coming); and an
///    order that stays unfinished past that bound while blocks wait for chunks (a span or
///    cursor keeps one of its pages across another fault) is withdrawn: the device gives back
///    every page it took (withdraw_order), the block is resident again, and the model picks
///    another victim. docs/uvm-preset.md has the argument in full.

#include "warpvm/detail/core/acquire.cuh"
#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/detail/core/device_support.cuh"
#include "warpvm/detail/policy/eviction_order.hpp"
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
      fail_kernel(cache, ErrorKind::no_progress, key_object(key), key_page(key), 0, FailureCause::host_service);
    }
    __nanosleep(backoff_max_ns);
  }
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(ring.slots[position & (ring.capacity - 1)])
      .store(key + 1, cuda::std::memory_order_release);
}

/// The leader's post of `key`: the `first`, and another whenever the replay epoch has moved
/// since the last (counted in `posts`). The epoch is read before the post (the post's release
/// store orders it too), so a flush that drops the post bumps the epoch after this read, and the
/// warp posts again.
__device__ __forceinline__ void post_fault_per_epoch(const CacheView& cache, std::uint64_t key, bool first,
                                                     std::uint32_t& epoch, unsigned& posts) {
  const std::uint32_t now = read_replay_epoch(cache.faults);
  if (!first && now == epoch) return;
  epoch = now;
  __threadfence_system();
  post_fault(cache, key);
  ++posts;
}

/// One round of a warp's wait for the host service: past the watchdog since `started` (no
/// service thread, say), records no_progress on page `page` of object `object_id` and traps;
/// else sleeps, backing off exponentially.
__device__ __forceinline__ void back_off_for_host(const CacheView& cache, std::uint64_t started, std::uint32_t object_id,
                                                  std::uint64_t page, unsigned& backoff_ns) {
  if (global_timer_ns() - started > cache.watchdog_ns) {
    fail_kernel(cache, ErrorKind::no_progress, object_id, page, 0, FailureCause::host_service);
  }
  __nanosleep(backoff_ns);
  backoff_ns = backoff_ns * 2 < backoff_max_ns ? backoff_ns * 2 : backoff_max_ns;
}

/// The frame of page `page` of `object` once the host has served it (all active lanes call
/// together, each with its own page), while nothing can be evicted (never_evicts): nothing is
/// held, a resident page stays in its frame until the kernel ends. A warp that waits longer
/// than the watchdog (no service thread, say) records no_progress and traps.
__device__ inline std::uint32_t await_host_service(const CacheView& cache, const ObjectDescriptor& object,
                                                   std::uint64_t page, bool write) {
  const unsigned mask = __activemask();
  const std::uint64_t key = make_page_key(object.id, page);
  const unsigned peers = __match_any_sync(mask, key);
  const bool is_leader = lane_id() == first_lane(peers);
  const bool group_writes = (__ballot_sync(mask, write) & peers) != 0;
  const std::uint64_t started = global_timer_ns();  // for the watchdog and the fault event
  unsigned posts = 0;
  std::uint32_t epoch = 0;
  if (is_leader) post_fault_per_epoch(cache, key, /*first=*/true, epoch, posts);
  unsigned backoff_ns = backoff_min_ns;
  std::uint32_t frame = 0;
  while (!recheck_resident_unheld(cache, object, page, frame)) {
    if (is_leader) post_fault_per_epoch(cache, key, /*first=*/false, epoch, posts);
    back_off_for_host(cache, started, object.id, page, backoff_ns);
  }
  if (is_leader)
    record_fault(cache, started, object.id, page, static_cast<unsigned>(__popc(peers)), FaultKind::host, group_writes, posts);
  return frame;
}

/// Tells the host that order `o` in `slot` is done (`how`: carried out, or withdrawn).
__device__ __forceinline__ void acknowledge_order(const EvictionRing& ring, std::uint32_t slot, std::uint64_t o,
                                                  eviction_order::Finished how) {
  if (how == eviction_order::Finished::nothing) return;
  __threadfence_system();
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(ring.acks[slot].sequence)
      .store(eviction_order::ack_sequence(o, how), cuda::std::memory_order_release);
}

/// The warp's share of withdrawing order `o` (the host asked: its pages stayed held too long).
/// The first lane withdraws it unless every page is taken already (then it completes as an
/// eviction, which the host accepts); then the lanes give back the pages the order counted and
/// marked (pages taken but not counted yet are given back by their takers, whose count is
/// refused). The warp whose change leaves no page of the order BUSY acknowledges the withdrawal.
__device__ inline void withdraw_order(const CacheView& cache, unsigned mask, std::uint64_t o, std::uint32_t slot,
                                      std::uint64_t first_key, std::uint32_t pages) {
  const EvictionRing& ring = *cache.faults.evictions;
  std::uint64_t& progress = ring.progress[slot].tagged;
  const unsigned first = first_lane(mask);
  bool withdrawn = false;
  if (lane_id() == first) {
    eviction_order::Finished how = eviction_order::Finished::nothing;
    withdrawn = eviction_order::try_withdraw(progress, o, pages, how);
    acknowledge_order(ring, slot, o, how);  // withdrawn with nothing taken: done at once
  }
  if (!__shfl_sync(mask, withdrawn, first)) return;
  const EvictionOrder& order = ring.orders[slot];
  const std::uint32_t counted = eviction_order::page_taken_by(o) | eviction_order::page_counted;
  unsigned given_back = 0;
  for (unsigned p = __popc(mask & lanemask_lt()); p < uvm_block_pages; p += __popc(mask))
    if (((__ldcg(&order.mask.words[p / 64]) >> (p % 64)) & 1u) != 0 &&
        eviction_order::try_give_back(page_word_of(cache, first_key + p), counted))
      ++given_back;
  given_back = __reduce_add_sync(mask, given_back);
  if (given_back != 0 && lane_id() == first)
    acknowledge_order(ring, slot, o,
                      eviction_order::add_progress(progress, pages, given_back * eviction_order::returned_one));
}

/// One pass of the warp (all lanes of `mask`) over eviction order `o`: every page of the order
/// that is resident and held by nobody is taken (VALID -> BUSY naming the order); held pages are
/// left for a later pass, so the warp never waits here. Per round of 32 pages the warp counts
/// what it took in the order's progress, then marks those pages counted and counts the marks;
/// the warp whose marks reach the order's pages acknowledges it. Once acknowledged the service
/// copies the dirty pages back and writes the pages absent with copies, which is safe because
/// no device atomic then changes those BUSY words (holds and takes need VALID; give-backs need
/// a withdrawn order). A page taken whose count is refused (the order completed, was withdrawn,
/// or left its slot: this warp read it before) is given back by its taker at once. An order the
/// host asked to withdraw is withdrawn instead (withdraw_order).
__device__ inline void evict_order_pages(const CacheView& cache, unsigned mask, std::uint64_t o) {
  const EvictionRing& ring = *cache.faults.evictions;
  const auto slot = static_cast<std::uint32_t>(o & (ring.capacity - 1));
  const EvictionOrder& order = ring.orders[slot];
  std::uint64_t& progress = ring.progress[slot].tagged;
  const std::uint64_t first_key = __ldcg(&order.first_key);  // written by host copies: L2, not L1
  const std::uint32_t pages = __ldcg(&order.pages);
  const bool cancel = __ldcg(&order.cancel) != 0;
  const std::uint64_t seen = eviction_order::progress_atomic(progress).load(cuda::std::memory_order_acquire);
  if (!eviction_order::is_order(seen, o)) return;
  if (cancel || eviction_order::is_withdrawn(seen)) {
    withdraw_order(cache, mask, o, slot, first_key, pages);
    return;
  }
  if (eviction_order::taken(seen) >= pages) return;  // all taken; the takers' marks finish it
  const unsigned first = first_lane(mask);
  const std::uint32_t taken = eviction_order::page_taken_by(o);
  for (unsigned round = 0; round < uvm_block_pages; round += __popc(mask)) {
    const unsigned p = round + __popc(mask & lanemask_lt());
    std::uint32_t* word = nullptr;
    if (p < uvm_block_pages && ((__ldcg(&order.mask.words[p / 64]) >> (p % 64)) & 1u) != 0)
      word = &page_word_of(cache, first_key + p);
    const bool took = word != nullptr && eviction_order::try_take(*word, taken);
    const unsigned takers = __ballot_sync(mask, took);
    if (takers == 0) continue;
    bool counted = false;
    if (lane_id() == first)
      counted = eviction_order::count_taken(progress, o, pages, static_cast<std::uint32_t>(__popc(takers)));
    counted = __shfl_sync(mask, counted, first);
    if (took) {
      if (counted)
        eviction_order::mark_counted(*word, taken);
      else
        eviction_order::try_give_back(*word, taken);  // ours alone (see mark_counted): cannot fail
    }
    if (!counted) return;  // nothing more to take for this order
    // Release: our marks (and, through the holders' releases before our takes, their frame
    // writes and dirty bits) come before the count of the marks, and so before the ack.
    __syncwarp(mask);
    if (lane_id() == first)
      acknowledge_order(ring, slot, o,
                        eviction_order::add_progress(progress, pages, __popc(takers) * eviction_order::marked_one));
  }
}

/// A waiting warp's share of the eviction work: one pass over one outstanding order, chosen by
/// the warp's index and `round` so that waiting warps spread over the orders.
__device__ inline void help_evict(const CacheView& cache, unsigned mask, unsigned round) {
  const unsigned first = first_lane(mask);
  std::uint64_t complete = 0;
  std::uint64_t posted = 0;
  if (lane_id() == first) {
    complete = __ldcg(&cache.faults.replay->orders_complete);
    posted = __ldcg(&cache.faults.replay->orders_posted);
  }
  complete = __shfl_sync(mask, complete, first);
  posted = __shfl_sync(mask, posted, first);
  if (posted <= complete) return;
  evict_order_pages(cache, mask, complete + (std::uint64_t{global_warp_index()} + round) % (posted - complete));
}

/// host_batched while eviction is possible. All active lanes call together, each with its own
/// page. Every lane's page is held (page_try_hold_resident) once resident; then, with `keep`,
/// the lane keeps the hold (a span or cursor; the caller releases it) and the frame is
/// returned; without, `use(frame)` runs for the lane while it holds the page, and the hold is
/// released in the same round (an element access): such a lane holds nothing while the warp
/// waits for its other lanes. Lanes whose page is absent post it (again after every replay
/// epoch) and, while they wait, the warp helps carry out the service's eviction orders.
template <class Use>
__device__ inline std::uint32_t hold_from_host(const CacheView& cache, const ObjectDescriptor& object,
                                               std::uint64_t page, bool write, bool keep, Use&& use) {
  const unsigned mask = __activemask();
  const std::uint64_t key = make_page_key(object.id, page);
  const unsigned peers = __match_any_sync(mask, key);
  const unsigned leader = first_lane(peers);
  const bool is_leader = lane_id() == leader;
  const bool group_writes = (__ballot_sync(mask, write) & peers) != 0;
  const std::uint64_t started = global_timer_ns();  // for the watchdog and the fault event
  std::uint32_t& word = object.pages[page].state;
  unsigned posts = 0;
  std::uint32_t epoch = 0;
  bool done = false;
  std::uint32_t frame = 0;
  unsigned backoff_ns = backoff_min_ns;
  for (unsigned round = 0;; ++round) {
    bool got = false;
    std::uint32_t seen_frame = 0;
    if (is_leader && !done && page_try_hold_resident(word, static_cast<std::uint32_t>(__popc(peers)))) {
      got = true;
      seen_frame = resident_frame(object, page);  // after the hold: the frame cannot change now
      if (group_writes) cache.table.set_dirty(seen_frame, true);  // before the hold's release
    }
    got = __shfl_sync(mask, got, leader);
    seen_frame = __shfl_sync(mask, seen_frame, leader);
    if (got) {
      frame = seen_frame;
      done = true;
      if (!keep) use(frame);
    }
    if (!keep) {
      __syncwarp(mask);  // every lane's accesses to its frame come before its leader's release
      if (got && is_leader) page_release(word, static_cast<std::uint32_t>(__popc(peers)));
    }
    if (__all_sync(mask, done)) break;
    if (is_leader && !done) post_fault_per_epoch(cache, key, /*first=*/posts == 0, epoch, posts);
    help_evict(cache, mask, round);
    back_off_for_host(cache, started, object.id, page, backoff_ns);
  }
  const unsigned hit_leaders = __ballot_sync(mask, is_leader && posts == 0);
  if (lane_id() == first_lane(mask) && hit_leaders != 0)
    count_event(cache, Counter::hits, __popc(hit_leaders));
  if (is_leader && posts != 0)
    record_fault(cache, started, object.id, page, static_cast<unsigned>(__popc(peers)), FaultKind::host, group_writes, posts);
  return frame;
}

}  // namespace warpvm::detail
