#pragma once
/// @file
/// The multi-GPU fault path. A warp's lanes group by page (__match_any_sync); each group's leader
/// takes a hold on its GPU's page-table word (pte.hpp). A usable mapping is a hit: the lanes
/// access the local frame, or the owner's frame on a peer over NVLink, and release. Otherwise
/// the warp serves the faulting groups one at a time: one lane (the driver)
/// takes the page's directory lock, runs placement.hpp's decide()/apply(), plans every GPU's new
/// mapping (transition.hpp), revokes and drains the mappings that change, and then all lanes
/// copy the page (host -> GPU over PCIe, or peer -> GPU over NVLink); the driver installs the new
/// mappings, gives back freed frames, writes the directory and unlocks. Then the warp retries.
///
/// Why this cannot deadlock. The waits are: (a) a warp waiting for a directory lock, (b) a lock
/// holder waiting for holders of a revoked mapping to drain, (c) nothing else (frame allocation,
/// the O-Table and the counters are single atomics). (a) never happens while the waiting warp
/// holds a page of that access: access_page() releases each group's hold right after its access
/// and serves faults holding nothing. A hold lasts one element access or one with_page() /
/// with_span() callback, so a holder that is not itself in (a) releases in bounded time. A holder
/// can only be in (a) when user code faults inside such a callback
/// (nested access) - the one hold-and-wait the design allows - and for that (b) is bounded: a
/// lock holder whose mappings do not drain within drain_timeout_ns cancels its revokes, gives
/// the lock back and retries later (aborted_transitions). So every wait a lock holder does ends,
/// no cycle of waits can be permanent, and revoked words are never left behind. Lock holders
/// take one directory lock at a time (counter migrations walk their group page by page).

#include "warpvm/detail/core/device_support.cuh"
#include "warpvm/detail/multi_gpu/frame_pool.hpp"
#include "warpvm/detail/multi_gpu/pte.hpp"
#include "warpvm/detail/multi_gpu/space_view.hpp"
#include "warpvm/detail/multi_gpu/transition.hpp"
#include "warpvm/detail/policy/placement.hpp"
#include "warpvm/detail/transport/warp_copy.cuh"

#include <cuda/atomic>

#include <cstdint>

namespace warpvm::detail::mg {

inline constexpr unsigned lock_backoff_min_ns = 32;
inline constexpr unsigned lock_backoff_max_ns = 1024;
inline constexpr unsigned line_shift = 7;  ///< 128 B lines
static_assert((1u << line_shift) == remote_access_bytes, "a remote access is one line");

__device__ __forceinline__ void count(const SpaceView& s, Counter c, std::uint64_t n) {
  auto* slot = s.counters + (sm_id() % counter_shards) * counter_count + static_cast<std::uint32_t>(c);
  atomicAdd(reinterpret_cast<unsigned long long*>(slot), static_cast<unsigned long long>(n));
}

/// The entry's fields, read under its lock from L2 (never a stale L1 line: another GPU wrote them).
__device__ inline DirectoryEntry load_entry(const DirectoryEntry& e) {
  DirectoryEntry copy;
  copy.replicas = __ldcg(reinterpret_cast<const unsigned long long*>(&e.replicas));
  copy.remote = __ldcg(reinterpret_cast<const unsigned long long*>(&e.remote));
  copy.owner = __ldcg(&e.owner);
  copy.lock = 1;
  return copy;
}

/// Writes the fields under the lock; directory_unlock() publishes them.
__device__ inline void store_entry(DirectoryEntry& e, const DirectoryEntry& v) {
  __stcg(reinterpret_cast<unsigned long long*>(&e.replicas), static_cast<unsigned long long>(v.replicas));
  __stcg(reinterpret_cast<unsigned long long*>(&e.remote), static_cast<unsigned long long>(v.remote));
  __stcg(&e.owner, v.owner);
}

/// The pool of this GPU is full: the first failure is recorded for the host (which names the
/// object), then the kernel traps. No eviction yet (docs/placement.md).
__device__ inline void fail_out_of_frames(const SpaceView& s, std::uint32_t object_id, std::uint64_t page) {
  if (cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(*s.error_claim).exchange(1u) == 0u) {
    volatile ErrorRecord* record = s.error;
    record->object_id = object_id;
    record->gpu = s.gpu;
    record->frames = s.pools[s.gpu].frames;
    record->page = page;
    __threadfence_system();
    record->state = 1;
    __threadfence_system();
  }
  __trap();
}

[[nodiscard]] __device__ inline std::uint64_t page_bytes_of(const SpaceView& s, const ObjectView& o, std::uint64_t page) {
  const std::uint64_t begin = page << s.page_shift, full = std::uint64_t{1} << s.page_shift;
  return o.bytes - begin < full ? o.bytes - begin : full;
}

[[nodiscard]] __device__ inline PagePolicy shared_fault_policy(const SpaceView& s, const ObjectView& o, bool write) {
  switch (o.policy) {
    case PlacementPolicy::on_touch: return PagePolicy::on_touch;
    case PlacementPolicy::access_counter: return PagePolicy::access_counter;
    case PlacementPolicy::duplication: return PagePolicy::duplication;
    case PlacementPolicy::oasis: break;
  }
  return otable_shared_fault(s.otable[o.id], write, s.reset_threshold);
}

/// What the driver tells the other lanes after deciding.
struct CopyOrder {
  std::byte* dst = nullptr;
  const std::byte* src = nullptr;
  std::uint64_t bytes = 0;
};

/// The driver's half of a transition, the lock held and the directory read: plans, allocates,
/// revokes and drains. Returns false (everything undone, the lock still held) if a mapping did
/// not drain in time or the pool is full; otherwise fills the plan and the copy order.
struct Transition {
  DirectoryEntry after;
  Effects fx;
  Action action;
  std::uint64_t old_words[max_gpus];
  PteChange changes[max_gpus];
  std::uint32_t new_frame;
};

__device__ inline bool prepare_transition(const SpaceView& s, const ObjectView& o, std::uint64_t page, bool write,
                                          const DirectoryEntry& before, Action action, Transition& t,
                                          CopyOrder& copy) {
  const unsigned me = s.gpu;
  t.after = before;
  t.action = action;
  t.fx = apply(t.after, me, action);
  for (unsigned g = 0; g < s.gpus; ++g) t.old_words[g] = pte_load(o.pte[g][page]);
  t.new_frame = no_frame;
  std::uint64_t requester_frame = pte::address(t.old_words[me]);
  if (t.fx.pulled) {
    t.new_frame = frame_alloc(s.pools[me]);
    if (t.new_frame == no_frame) return false;
    requester_frame = reinterpret_cast<std::uint64_t>(s.pools[me].base) + (std::uint64_t{t.new_frame} << s.page_shift);
  }
  const std::uint64_t owner_frame =
      owner_frame_after(t.after, me, requester_frame, t.old_words[t.after.owner < s.gpus ? t.after.owner : me]);
  for (unsigned g = 0; g < s.gpus; ++g)
    t.changes[g] = plan_pte(t.after, g, me, write, t.old_words[g], owner_frame, requester_frame);
  for (unsigned g = 0; g < s.gpus; ++g)
    if (t.changes[g].revoke) pte_begin_revoke(o.pte[g][page]);
  const std::uint64_t started = global_timer_ns();
  for (unsigned g = 0; g < s.gpus; ++g) {
    if (!t.changes[g].revoke) continue;
    unsigned backoff = lock_backoff_min_ns;
    while (!pte_drained(o.pte[g][page])) {
      if (global_timer_ns() - started > s.drain_timeout_ns) {
        for (unsigned h = 0; h < s.gpus; ++h)
          if (t.changes[h].revoke) pte_cancel_revoke(o.pte[h][page]);
        if (t.new_frame != no_frame) frame_free(s.pools[me], t.new_frame);
        count(s, Counter::aborted_transitions, 1);
        return false;
      }
      __nanosleep(backoff);
      backoff = backoff * 2 < lock_backoff_max_ns ? backoff * 2 : lock_backoff_max_ns;
    }
  }
  if (t.fx.pulled) {
    copy.dst = reinterpret_cast<std::byte*>(requester_frame);
    copy.src = t.fx.source == owner_host ? o.host + (page << s.page_shift)
                                         : reinterpret_cast<const std::byte*>(pte::address(t.old_words[t.fx.source]));
    copy.bytes = page_bytes_of(s, o, page);
  }
  return true;
}

/// The driver's last half: installs the mappings, frees frames, writes the directory, unlocks.
__device__ inline void finish_transition(const SpaceView& s, const ObjectView& o, std::uint64_t page,
                                         DirectoryEntry& entry, const Transition& t, std::uint64_t copied) {
  const unsigned me = s.gpu;
  unsigned invalidated = 0;
  for (unsigned g = 0; g < s.gpus; ++g) {
    const PteChange& c = t.changes[g];
    if (c.revoke || c.after != (t.old_words[g] & pte::mapping_mask)) pte_install(o.pte[g][page], c.after);
    if (c.revoke && g != me) ++invalidated;
  }
  for (unsigned g = 0; g < s.gpus; ++g)
    if (t.changes[g].frees_frame) {
      const std::uint64_t address = pte::address(t.old_words[g]);
      frame_free(s.pools[g], static_cast<std::uint32_t>((address - reinterpret_cast<std::uint64_t>(s.pools[g].base)) >> s.page_shift));
    }
  if (pte::is_writable(t.changes[me].after)) __stcg(o.dirty + page, 1u);
  store_entry(entry, t.after);
  directory_unlock(entry);

  switch (t.action) {
    case Action::fetch_from_host: count(s, Counter::first_touches, 1); break;
    case Action::migrate: count(s, Counter::migrations, 1); break;
    case Action::counter_migrate: count(s, Counter::counter_migrations, 1); break;
    case Action::replicate: count(s, Counter::replications, 1); break;
    case Action::map_remote: count(s, Counter::remote_maps, 1); break;
    case Action::collapse_and_own:
    case Action::collapse_and_map_remote: count(s, Counter::collapses, 1); break;
    case Action::local:
    case Action::remote: break;
  }
  if (invalidated != 0) count(s, Counter::invalidations, invalidated);
  if (copied != 0) count(s, t.fx.source == owner_host ? Counter::pcie_bytes : Counter::nvlink_bytes, copied);
}

/// Serves one fault on `page` (or, with `counter_migration`, moves the page here if this GPU
/// maps it remotely). Every lane in `mask` calls it; lane `driver` decides, all lanes copy.
/// Returns with the page's state changed or found already usable; the caller retries its hold.
__device__ inline void serve(const SpaceView& s, const ObjectView& o, unsigned mask, unsigned driver, std::uint64_t page,
                             bool write, bool counter_migration) {
  const bool is_driver = lane_id() == driver;
  DirectoryEntry& entry = o.directory[page];
  std::uint64_t& own = o.pte[s.gpu][page];
  bool out_of_frames = false;
  for (;;) {
    bool again = false;
    bool transition = false;
    Transition t;
    CopyOrder copy;
    if (is_driver) {
      // (a): wait for the lock; a fault whose mapping became usable meanwhile needs nothing.
      bool locked = false;
      for (unsigned backoff = lock_backoff_min_ns;;) {
        if (!counter_migration && pte::usable(pte_load(own), write)) break;
        if (directory_try_lock(entry)) {
          locked = true;
          break;
        }
        __nanosleep(backoff);
        backoff = backoff * 2 < lock_backoff_max_ns ? backoff * 2 : lock_backoff_max_ns;
      }
      if (locked) {
        const DirectoryEntry before = load_entry(entry);
        Action action = Action::local;
        if (counter_migration) {
          if (before.maps_remote(s.gpu)) action = Action::counter_migrate;
        } else {
          const Decision d = decide(before, s.gpu, write, [&](bool w) { return shared_fault_policy(s, o, w); });
          if (d.fault == PlacementFault::shared) count(s, Counter::shared_faults, 1);
          action = d.action;
          if ((action == Action::local || action == Action::remote) && write && !pte::is_writable(pte_load(own))) {
            // A write through a mapping the directory lets this GPU write: grant it, mark dirty.
            __stcg(o.dirty + page, 1u);
            pte_grant_write(own);
            count(s, Counter::write_upgrades, 1);
          }
        }
        if (action == Action::local || action == Action::remote) {
          directory_unlock(entry);
        } else if (prepare_transition(s, o, page, write, before, action, t, copy)) {
          transition = true;
        } else if (t.fx.pulled && t.new_frame == no_frame) {
          directory_unlock(entry);
          out_of_frames = true;
        } else {
          directory_unlock(entry);
          again = true;  // a mapping did not drain in time: everything undone, retry
        }
      }
    }
    if (__shfl_sync(mask, out_of_frames, driver) && is_driver) fail_out_of_frames(s, o.id, page);
    const bool moves = __shfl_sync(mask, transition, driver);
    if (moves) {
      std::byte* dst = reinterpret_cast<std::byte*>(__shfl_sync(mask, reinterpret_cast<unsigned long long>(copy.dst), driver));
      const auto* src =
          reinterpret_cast<const std::byte*>(__shfl_sync(mask, reinterpret_cast<unsigned long long>(copy.src), driver));
      const std::uint64_t bytes = __shfl_sync(mask, copy.bytes, driver);
      if (bytes != 0) warp_copy(mask, dst, src, bytes);
      __threadfence_system();  // the copy reaches every GPU's view before a mapping points at it
      __syncwarp(mask);
      if (is_driver) finish_transition(s, o, page, entry, t, bytes);
    }
    if (!__shfl_sync(mask, again, driver)) return;
    if (is_driver) __nanosleep(lock_backoff_max_ns);
  }
}

/// Performs one access per lane to its page (all active lanes call together, each with its own
/// page, possibly divergent). Lanes on one page form a group whose leader takes one hold; a group
/// whose mapping is usable runs `op(frame)` on every lane, then releases at once (so a warp never
/// keeps a hold while it serves a fault); the other groups' faults are served one at a time and
/// those groups try again. `line` is the 128 B line the lane touches (a remote access counts its
/// group's distinct lines), or `span_lines` lines for a page or span access (then `line` is unused).
/// A group whose remote count for its 64 KB group reaches the threshold then moves the group's
/// remotely mapped pages to this GPU.
template <class Op>
__device__ inline void access_page(const Binding& b, std::uint64_t page, bool write, std::uint64_t line,
                                   std::uint32_t span_lines, Op&& op) {
  const unsigned mask = __activemask();
  const unsigned peers = __match_any_sync(mask, page);
  const unsigned leader = first_lane(peers);
  const bool is_leader = lane_id() == leader;
  const bool group_writes = (__ballot_sync(mask, write) & peers) != 0;
  const SpaceView& s = *b.space;
  std::uint64_t& word = b.pte[page];
  std::uint32_t lines = span_lines;
  bool lines_known = span_lines != 0;
  bool pending = true;
  for (;;) {
    std::uint64_t seen = 0;
    if (pending && is_leader) {
      seen = pte_hold(word);
      if (!pte::usable(seen, group_writes)) pte_drop_unused(word);
    }
    seen = __shfl_sync(mask, seen, leader);
    const bool now = pending && pte::usable(seen, group_writes);  // group_writes and pending are the group's
    const bool remote = now && pte::is_remote(seen);
    if (now) op(reinterpret_cast<std::byte*>(pte::address(seen)));
    __syncwarp(mask);  // every lane's access to the frame happens before its leader's release
    if (!lines_known && __any_sync(mask, remote)) {
      const unsigned same_line = __match_any_sync(mask, line);
      const bool line_leader = lane_id() == first_lane(same_line);
      lines = static_cast<std::uint32_t>(__popc(__ballot_sync(mask, line_leader) & peers));
      lines_known = true;
    }
    bool fired = false;
    if (now && is_leader) {
      pte_release(word);
      if (remote) {
        count(s, Counter::remote_accesses, 1);
        count(s, Counter::remote_lines, lines);  // stats() adds their bytes to nvlink_bytes
        fired = count_remote(b.object->counters[page / s.pages_per_group], lines, s.counter_threshold);
      } else {
        count(s, Counter::local_accesses, 1);
      }
    }
    if (now) pending = false;
    for (unsigned f = __ballot_sync(mask, fired); f != 0; f &= f - 1) {
      const unsigned driver = first_lane(f);
      const std::uint64_t group = __shfl_sync(mask, page, driver) / s.pages_per_group;
      const std::uint64_t pages = (b.object->bytes + (std::uint64_t{1} << s.page_shift) - 1) >> s.page_shift;
      const std::uint64_t end = (group + 1) * s.pages_per_group < pages ? (group + 1) * s.pages_per_group : pages;
      for (std::uint64_t q = group * s.pages_per_group; q < end; ++q) serve(s, *b.object, mask, driver, q, false, true);
    }
    const unsigned faulting = __ballot_sync(mask, pending && is_leader);
    if (faulting == 0) return;
    for (unsigned f = faulting; f != 0; f &= f - 1) {
      const unsigned driver = first_lane(f);
      serve(s, *b.object, mask, driver, __shfl_sync(mask, page, driver), __shfl_sync(mask, group_writes, driver), false);
    }
  }
}

}  // namespace warpvm::detail::mg
