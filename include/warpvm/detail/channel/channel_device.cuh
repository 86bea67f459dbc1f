#pragma once
/// @file
/// The consumer side of a warpvm::channel, in device code: post a request, park on the warp's
/// waiter word in device memory, read the data in staging, say so. In direct mode, poll the
/// device availability map for the tags and read the producers' buffer in place instead.
/// docs/channels.md has the protocols and their memory-ordering arguments.

#include "warpvm/detail/core/device_support.cuh"
#include "warpvm/detail/channel/availability.hpp"
#include "warpvm/detail/channel/channel_view.hpp"
#include "warpvm/detail/channel/request_queue.hpp"

#include <cuda/atomic>

#include <cstdint>

namespace warpvm::detail {

/// Records the first failure of the channel (later ones are dropped) and traps: the host raises
/// it as a warpvm::Error from channel::synchronize().
__device__ inline void channel_fail(const ChannelView& view, ChannelFault fault, std::uint32_t warp,
                                    std::uint32_t first_tag, std::uint64_t value, std::uint64_t source_offset) {
  record_first_failure(view.error_claim, [&] {
    volatile ChannelErrorRecord* record = view.error;
    record->fault = static_cast<std::uint32_t>(fault);
    record->warp = warp;
    record->first_tag = first_tag;
    record->value = value;
    record->source_offset = source_offset;
    __threadfence_system();
    record->state = 1;
  });
  trap_once_recorded(view.error_claim);
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

/// The leader lane of an acquiring warp: posts `request` into the queue (the host monitor's slots
/// are in mapped pinned memory, the monitor warp's in device memory: system scope serves both, and
/// one inlined copy of this keeps the consumers' kernels at their registers) and parks on the
/// warp's waiter word until its answer comes, sleeping at most `park_backoff_max_ns` between
/// polls. Traps on the watchdog.
__device__ inline void channel_post_and_park(const ChannelView& view, const Request& request,
                                             std::uint32_t park_backoff_max_ns) {
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> served(view.served[request.waiter]);
  const RequestQueue<cuda::thread_scope_system> queue(view.cursors, view.slots, view.queue_capacity);
  const std::uint64_t started = global_timer_ns();
  std::uint32_t backoff_ns = waiter_backoff_min_ns;
  // At most one request per warp is outstanding and the queue holds max_warps or more, so the
  // claimed cell is free at once (RequestQueue::claim): one read of the turn per post, where
  // try_post's CAS loop re-reads a turn for every lost race (for the host monitor a PCIe read:
  // docs/channels.md, GPU reads of pinned memory slow the monitor's copies on the H200).
  const std::uint64_t position = queue.claim();
  while (!queue.try_fill(position, request)) {
    if (global_timer_ns() - started > view.watchdog_ns)
      channel_fail(view, ChannelFault::post_timeout, request.waiter, request.first_tag, request.tag_count,
                   request.source_offset);
    __nanosleep(backoff_ns);
    backoff_ns = backoff_ns * 2 < waiter_backoff_max_ns ? backoff_ns * 2 : waiter_backoff_max_ns;
  }
  // Park: relaxed device-scope loads are served by L2 (where the copy engine's and the monitor
  // warp's writes land) and leave L1 alone for the warps that compute meanwhile.
  backoff_ns = waiter_backoff_min_ns;
  std::uint32_t polls = 0;
  std::uint32_t answered = served.load(cuda::std::memory_order_relaxed);
  while (!channel_seq_reached(answered, request.seq)) {
    if ((++polls & 63u) == 0 && global_timer_ns() - started > view.watchdog_ns)
      channel_fail(view, ChannelFault::wait_timeout, request.waiter, request.first_tag, request.tag_count,
                   request.source_offset);
    __nanosleep(backoff_ns);
    backoff_ns = backoff_ns * 2 < park_backoff_max_ns ? backoff_ns * 2 : park_backoff_max_ns;
    answered = served.load(cuda::std::memory_order_relaxed);
  }
  // Exactly this request's answer: a count past it means a second request of this warp was
  // served too, and offsets[warp] may name that one's data.
  if (answered != request.seq)
    channel_fail(view, ChannelFault::served_ahead, request.waiter, request.first_tag, answered, request.source_offset);
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
  const bool direct = view.direct_map != nullptr;       // no waiter words, no staging
  const bool warp_monitor = view.monitor.nodes != nullptr;  // waiter words, data in place
  if (!direct && warp >= view.waiters) channel_fail(view, ChannelFault::bad_warp, warp, first_tag, warp, source_offset);
  if (bytes == 0 || (!direct && !warp_monitor && bytes > view.staging_bytes) || source_offset > view.buffer_bytes ||
      bytes > view.buffer_bytes - source_offset || first_tag > view.tag_count || tag_count > view.tag_count - first_tag)
    channel_fail(view, ChannelFault::bad_request, warp, first_tag, bytes, source_offset);
  if (direct) return channel_acquire_direct(view, mask, warp, first_tag, tag_count, source_offset);

  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> served(view.served[warp]);
  std::uint32_t seq = 0;
  if (lane_id() == leader) {
    // The warp's previous request (if any) was served before it could ask again, so this is the
    // count the monitor will write when it serves this one.
    seq = served.load(cuda::std::memory_order_relaxed) + 1;
    const Request request{first_tag, tag_count, warp, bytes, source_offset, seq};
    // The monitor warp answers within a pass, the host monitor in tens of microseconds.
    channel_post_and_park(view, request, warp_monitor ? waiter_backoff_max_ns : monitor_waiter_backoff_max_ns);
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
  // The monitor warp's answer is the served count alone: the data is read in place.
  if (warp_monitor) return ChannelGrant{view.direct_buffer + source_offset, nullptr, 0};
  const std::uint64_t offset = __ldcg(view.offsets + warp);
  return ChannelGrant{view.staging + offset, view.released + warp, seq};
}

/// The monitor warp (channel_handle::monitor): warp-collective over a whole warp. Until `done()`
/// (evaluated by lane 0 when a pass found nothing to do) returns true, it takes requests from the
/// queue (lane 0), polls the words of the device map that waiting requests need (every lane a
/// word, acquire loads at system scope: producers on peers publish there) and wakes each warp
/// whose tags are all set, with a release store of its served count. Lane 0 keeps the waiting
/// lists (waiting_lists.hpp); lanes hand it the words they saw through `seen` and a __syncwarp,
/// then lane 0 fences (acquire), so its release continues the chain from the producers' release
/// ORs to the woken warp's acquire (docs/channels.md, "The monitor warp"). One monitor warp per
/// channel at a time, resident while any consumer waits.
///
/// With `scratch` of monitor_scratch_bytes (its block's shared memory), the lists live there
/// for this monitor's life, starting empty: every request a monitor takes is served before
/// `done()`, so none is left in them, and its copy of the map is relearnt as waiters need it.
template <class Done>
__device__ void channel_monitor(const ChannelView& view, Done&& done, void* scratch) {
  constexpr unsigned all_lanes = 0xffffffffu;
  const std::uint32_t lane = lane_id();
  WarpMonitorTables tables = view.monitor;
  if (scratch != nullptr) {
    tables = tables_in_scratch(tables, scratch, view.tag_count, view.waiters);
    const std::uint32_t words = AvailabilityBitmap<>::words_required(view.tag_count);
    for (std::uint32_t t = lane; t < view.tag_count; t += 32) tables.heads[t] = no_waiter;
    for (std::uint32_t w = lane; w < words; w += 32) {
      tables.seen[w] = 0;
      tables.word_waiters[w] = 0;
    }
    if (lane == 0) *tables.span = WaitingSpan{0, 0};
    __syncwarp();
  }
  const WaitingLists lists(tables, view.tag_count);
  const AvailabilityBitmap<cuda::thread_scope_system> map(view.monitor_map, view.tag_count);
  const RequestQueue<cuda::thread_scope_device> queue(view.cursors, view.slots, view.queue_capacity);
  // Lane 0 keeps the counters in registers and stores them when they change: a read-modify-write
  // in device memory would put an L2 load on its path every pass. Only one monitor runs at a time.
  std::uint64_t counts[monitor_count_slots] = {};
  if (lane == 0)
    for (std::uint32_t c = 0; c < monitor_count_slots; ++c) counts[c] = view.monitor.counts[c];
  auto publish_counts = [&] {
    for (std::uint32_t c = 0; c < monitor_count_slots; ++c) view.monitor.counts[c] = counts[c];
  };
  auto wake = [&](std::uint32_t waiter, std::uint32_t seq) {
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(view.served[waiter]).store(seq, cuda::std::memory_order_release);
  };
  std::uint32_t backoff_ns = waiter_backoff_min_ns;
  for (;;) {
    // Take up to 32 requests, a position per lane, and check them in parallel (each warp's served
    // and taken counts are L2 round trips); lane 0 then places them in the lists one by one.
    const std::uint64_t head = queue.head();
    const unsigned posted = __ballot_sync(all_lanes, queue.posted(head + lane));
    const std::uint32_t taken = posted == all_lanes ? 32u : static_cast<std::uint32_t>(__ffs(~posted) - 1);
    Request r{};
    if (lane < taken) {
      r = queue.take_at(head + lane);
      const unsigned same_warp = __match_any_sync(taken == 32 ? all_lanes : (1u << taken) - 1u, r.waiter);
      const bool follows =
          r.waiter < view.waiters && __popc(same_warp) == 1 &&
          lists.follows(r, cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(view.served[r.waiter])
                               .load(cuda::std::memory_order_relaxed));
      if (!follows) channel_fail(view, ChannelFault::split_request, r.waiter, r.first_tag, r.seq, r.source_offset);
    }
    for (std::uint32_t j = 0; j < taken; ++j) {
      const Request placed{__shfl_sync(all_lanes, r.first_tag, j), __shfl_sync(all_lanes, r.tag_count, j),
                           __shfl_sync(all_lanes, r.waiter, j), 0, 0, __shfl_sync(all_lanes, r.seq, j)};
      if (lane == 0 && lists.place(placed) == Admission::ready) wake(placed.waiter, placed.seq);
    }
    bool busy = taken != 0;
    if (lane == 0 && busy) {
      queue.advance_head(taken);
      counts[monitor_count_requests] += taken;
    }
    const std::uint64_t polls_before = counts[monitor_count_polls];
    __syncwarp();  // lane 0's head, lists and span before the lanes read them
    const WaitingSpan span = lists.span();
    for (std::uint32_t base = span.low; base < span.high; base += 32) {
      const std::uint32_t word = base + lane;
      std::uint64_t arrived = 0;
      if (word < span.high) arrived = lists.absorb(word, map.load_word(word, cuda::std::memory_order_acquire));
      const unsigned carrying = __ballot_sync(all_lanes, arrived != 0);
      if (lane == 0) counts[monitor_count_polls] += min(32u, span.high - base);
      if (carrying == 0) continue;
      __syncwarp();  // every lane's absorb before lane 0 reads `seen`
      // Every bit of `seen` came in this way, so lane 0 has acquired the producers' writes of each
      // before it wakes a warp on it (here, or when a later request is admitted ready).
      if (lane == 0) cuda::atomic_thread_fence(cuda::std::memory_order_acquire, cuda::thread_scope_system);
      for (unsigned left = carrying; left != 0; left &= left - 1) {
        const int from = __ffs(left) - 1;
        const std::uint32_t w = __shfl_sync(all_lanes, word, from);
        const std::uint64_t bits = __shfl_sync(all_lanes, arrived, from);
        if (lane == 0) {
          counts[monitor_count_tags] += static_cast<std::uint32_t>(__popcll(bits));
          if (lists.tags_arrived(w, bits, wake) != 0) ++counts[monitor_count_wakes];
        }
      }
      busy = true;
      __syncwarp();  // lane 0's lists before the next words' absorbs
    }
    if (lane == 0 && (busy || counts[monitor_count_polls] != polls_before)) publish_counts();
    busy = __shfl_sync(all_lanes, busy, 0);
    if (busy) {
      backoff_ns = waiter_backoff_min_ns;
      continue;
    }
    bool finished = false;
    if (lane == 0) finished = done();
    if (__shfl_sync(all_lanes, finished, 0)) return;
    __nanosleep(backoff_ns);
    backoff_ns = backoff_ns * 2 < waiter_backoff_max_ns ? backoff_ns * 2 : waiter_backoff_max_ns;
  }
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
