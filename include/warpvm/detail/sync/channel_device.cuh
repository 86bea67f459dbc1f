#pragma once
/// @file
/// The consumer side of a warpvm::channel, in device code: post a request, park on the warp's
/// waiter word in device memory, read the data in staging, say so. In direct mode, poll the
/// device availability map for the tags and read the producers' buffer in place instead.
/// docs/channels.md has the protocols and their memory-ordering arguments.

#include "warpvm/detail/core/device_support.cuh"
#include "warpvm/detail/sync/availability.hpp"
#include "warpvm/detail/sync/channel_view.hpp"
#include "warpvm/detail/sync/request_queue.hpp"

#include <cuda/atomic>

#include <cstdint>

namespace warpvm::detail {

/// Records the first failure of the channel (later ones are dropped) and traps: the host raises
/// it as a warpvm::Error from channel::synchronize().
__device__ inline void channel_fail(const ChannelView& view, ChannelFault fault, std::uint32_t warp,
                                    std::uint32_t first_tag, std::uint64_t value, std::uint64_t source_offset) {
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> claim(*view.error_claim);
  if (claim.exchange(1u, cuda::std::memory_order_relaxed) == 0u) {
    volatile ChannelErrorRecord* record = view.error;
    record->fault = static_cast<std::uint32_t>(fault);
    record->warp = warp;
    record->first_tag = first_tag;
    record->value = value;
    record->source_offset = source_offset;
    __threadfence_system();
    record->state = 1;
    __threadfence_system();
    claim.store(2u, cuda::std::memory_order_release);
  } else {
    // A trap ends the whole kernel: wait (boundedly) until the first failure is on record.
    const std::uint64_t started = global_timer_ns();
    while (claim.load(cuda::std::memory_order_acquire) != 2u && global_timer_ns() - started < 1000000000ull)
      __nanosleep(1000);
  }
  __trap();
}

/// What acquire returns to every lane: where the data is and what to release (`released` is
/// null in direct mode: nothing to give back).
struct ChannelGrant {
  const std::byte* data;
  std::uint32_t* released;
  std::uint32_t seq;
};

/// Direct mode, warp-collective (arguments already checked): every lane polls the device map for
/// tags [first_tag, +tag_count) (TagRangeWait: system-scope acquire loads for the first poll and
/// the direct_acquiring_polls after it, then relaxed ones and one acquire load per word once all
/// were seen) until all lanes saw every tag set, sleeping with
/// backoff between polls (the map is in this GPU's memory: a poll is an L2 read, no link
/// crossed), then returns the producers' buffer at `source_offset`, in place. Each lane's own
/// acquire that saw a tag's bit synchronises with the producer's release OR, so its plain loads
/// of the data that follow see the producer's writes (docs/channels.md, "Direct mode"); the
/// vote only decides when to stop, it orders nothing in memory.
__device__ inline ChannelGrant channel_acquire_direct(const ChannelView& view, unsigned mask, std::uint32_t warp,
                                                      std::uint32_t first_tag, std::uint32_t tag_count,
                                                      std::uint64_t source_offset) {
  const AvailabilityBitmap<cuda::thread_scope_system> map(view.direct_map, view.tag_count);
  // Counters only (stats() copies them): relaxed, and counted before the wait, so that they are
  // performed while the warp waits. Counted after it, they stood between the data's arrival
  // and the warp's next release (its own publish waits for them): 0.12 us a hop on the H200.
  const bool counts = lane_id() == first_lane(mask);
  auto count = [&](std::uint32_t counter) {
    if (counts)
      cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(view.direct_counts[counter])
          .fetch_add(1, cuda::std::memory_order_relaxed);
  };
  count(direct_count_acquires);
  TagRangeWait wait(first_tag, tag_count);
  if (!__all_sync(mask, wait.poll(map, true))) {
    count(direct_count_parked);
    const std::uint64_t started = global_timer_ns();
    std::uint32_t backoff_ns = waiter_backoff_min_ns;
    for (std::uint32_t polls = 1; !__all_sync(mask, wait.poll(map, polls <= direct_acquiring_polls)); ++polls) {
      if ((polls & 63u) == 0 && global_timer_ns() - started > view.watchdog_ns)
        channel_fail(view, ChannelFault::wait_timeout, warp, first_tag, tag_count, source_offset);
      __nanosleep(backoff_ns);
      backoff_ns = backoff_ns * 2 < waiter_backoff_max_ns ? backoff_ns * 2 : waiter_backoff_max_ns;
    }
  }
  return ChannelGrant{view.direct_buffer + source_offset, nullptr, 0};
}

/// Warp-collective: every active lane calls with the same arguments. One lane posts one request
/// for the warp and parks; the others wait for it at the shuffle (taking no issue slots).
__device__ inline ChannelGrant channel_acquire(const ChannelView& view, std::uint32_t first_tag,
                                               std::uint32_t tag_count, std::uint32_t bytes,
                                               std::uint64_t source_offset) {
  const unsigned mask = __activemask();
  const unsigned leader = first_lane(mask);
  const std::uint32_t warp = global_warp_index();
  int uniform = 0;
  __match_all_sync(mask, (std::uint64_t{first_tag} << 32 | tag_count) ^ (source_offset * 0x9e3779b97f4a7c15ull) ^
                             (std::uint64_t{bytes} << 17),
                   &uniform);
  if (!uniform) channel_fail(view, ChannelFault::not_uniform, warp, first_tag, bytes, source_offset);
  const bool direct = view.direct_map != nullptr;  // no waiter words, no staging
  if (!direct && warp >= view.waiters) channel_fail(view, ChannelFault::bad_warp, warp, first_tag, warp, source_offset);
  if (bytes == 0 || (!direct && bytes > view.staging_bytes) || source_offset > view.buffer_bytes ||
      bytes > view.buffer_bytes - source_offset || first_tag > view.tag_count || tag_count > view.tag_count - first_tag)
    channel_fail(view, ChannelFault::bad_request, warp, first_tag, bytes, source_offset);
  if (direct) return channel_acquire_direct(view, mask, warp, first_tag, tag_count, source_offset);

  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> served(view.served[warp]);
  std::uint32_t seq = 0;
  if (lane_id() == leader) {
    // The warp's previous request (if any) was served before it could ask again, so this is the
    // count the monitor will write when it serves this one.
    seq = served.load(cuda::std::memory_order_relaxed) + 1;
    const RequestQueue<cuda::thread_scope_system> queue(view.cursors, view.slots, view.queue_capacity);
    const Request request{first_tag, tag_count, warp, bytes, source_offset, seq};
    const std::uint64_t started = global_timer_ns();
    std::uint32_t backoff_ns = waiter_backoff_min_ns;
    // At most one request per warp is outstanding and the queue holds max_warps or more, so the
    // claimed cell is free at once (RequestQueue::claim): one pinned-memory read per post, where
    // try_post's CAS loop re-reads a turn over PCIe for every lost race (docs/channels.md: GPU
    // reads of pinned memory slow the monitor's copies on the H200).
    const std::uint64_t position = queue.claim();
    while (!queue.try_fill(position, request)) {
      if (global_timer_ns() - started > view.watchdog_ns)
        channel_fail(view, ChannelFault::post_timeout, warp, first_tag, tag_count, source_offset);
      __nanosleep(backoff_ns);
      backoff_ns = backoff_ns * 2 < waiter_backoff_max_ns ? backoff_ns * 2 : waiter_backoff_max_ns;
    }
    // Park: relaxed device-scope loads are served by L2 (the copy engine's writes land there) and
    // leave L1 alone for the warps that compute meanwhile.
    backoff_ns = waiter_backoff_min_ns;
    std::uint32_t polls = 0;
    std::uint32_t answered = served.load(cuda::std::memory_order_relaxed);
    while (!channel_seq_reached(answered, seq)) {
      if ((++polls & 63u) == 0 && global_timer_ns() - started > view.watchdog_ns)
        channel_fail(view, ChannelFault::wait_timeout, warp, first_tag, tag_count, source_offset);
      __nanosleep(backoff_ns);
      backoff_ns = backoff_ns * 2 < monitor_waiter_backoff_max_ns ? backoff_ns * 2 : monitor_waiter_backoff_max_ns;
      answered = served.load(cuda::std::memory_order_relaxed);
    }
    // Exactly this request's answer: a count past it means a second request of this warp was
    // served too, and offsets[warp] may name that one's data.
    if (answered != seq) channel_fail(view, ChannelFault::served_ahead, warp, first_tag, answered, source_offset);
  }
  seq = __shfl_sync(mask, seq, static_cast<int>(leader));
  // Every lane acquires on the waiter word itself, and waits until it sees the served count the
  // leader saw: the shuffle orders nothing in memory, and one lane was seen reading an older
  // count right after its leader (the copy engine wrote the data and the offset before the
  // count, in stream order, so a lane that sees the count sees them). The acquire, with the
  // fence (L1 invalidated), keeps this SM from serving the data from L1 lines left by an
  // earlier use of the same staging pages.
  const std::uint64_t woken = global_timer_ns();
  while (!channel_seq_reached(served.load(cuda::std::memory_order_acquire), seq)) {
    if (global_timer_ns() - woken > view.watchdog_ns)
      channel_fail(view, ChannelFault::wait_timeout, warp, first_tag, tag_count, source_offset);
    __nanosleep(waiter_backoff_min_ns);
  }
  cuda::atomic_thread_fence(cuda::std::memory_order_acquire, cuda::thread_scope_device);
  const std::uint64_t offset = __ldcg(view.offsets + warp);
  return ChannelGrant{view.staging + offset, view.released + warp, seq};
}

/// Warp-collective: every lane that acquired has finished reading. One release store per warp,
/// into pinned host memory where the monitor reads it (a store, not an atomic: PCIe needs none).
__device__ inline void channel_release(std::uint32_t* released, std::uint32_t seq) {
  const unsigned mask = __activemask();
  __syncwarp(mask);  // every lane's reads of the data happen before the leader's release
  if (lane_id() == first_lane(mask))
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(*released).store(seq, cuda::std::memory_order_release);
}

}  // namespace warpvm::detail
