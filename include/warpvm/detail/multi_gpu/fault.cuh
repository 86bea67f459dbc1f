#pragma once
/// @file
/// The multi-GPU fault path. A warp's lanes group by page of one object (__match_any_sync); each
/// group's leader takes a hold on its GPU's page-table word (pte.hpp). A usable mapping is a hit: the lanes
/// access the local frame, or the owner's frame on a peer over NVLink, and release. Otherwise
/// the warp serves the faulting groups one at a time: one lane (the driver)
/// takes the page's directory lock, runs placement.hpp's decide()/apply(), plans every GPU's new
/// mapping (transition.hpp), revokes and drains the mappings that change, and then all lanes
/// copy the page (host -> GPU over PCIe, or peer -> GPU over NVLink); the driver installs the new
/// mappings, gives back freed frames, writes the directory and unlocks. Then the warp retries.
///
/// A full pool. When the page must be pulled and frame_alloc finds no free frame (in the window
/// of the bitmap it scans: frame_pool.hpp), the driver gives
/// the faulting page's lock back and, holding no directory lock, evicts: the pool's clock
/// (frame_pool.hpp) proposes frames, the reverse map names the page a frame holds, the driver
/// only try-locks that page's directory entry (a victim whose lock is taken is skipped), checks
/// that the frame is still this GPU's copy of it, and runs placement.hpp's evict_copy(): the same
/// plan / revoke / drain as a transition, then the warp writes the page back to the host if it
/// goes there dirty. The frame is not returned to the pool but kept by the driver for its fault
/// (so another warp cannot take it first), which it then decides again (serve()).
///
/// Why this cannot deadlock. The waits are: (a) a warp waiting for a directory lock, (b) a lock
/// holder waiting for holders of a revoked mapping to drain, (c) a driver waiting for a frame in
/// begin_eviction, holding no directory lock, bounded by the watchdog; nothing else (the
/// O-Table and the counters are single atomics). (a) never happens while the waiting warp
/// holds a page of that access: access_page() releases each group's hold right after its access
/// and serves faults holding nothing. A hold lasts one element access or one with_page() /
/// with_span() callback, so a holder that is not itself in (a) releases in bounded time. A holder
/// can only be in (a) when user code faults inside such a callback
/// (nested access) - the one hold-and-wait the design allows - and for that (b) is bounded: a
/// lock holder whose mappings do not drain within drain_timeout_ns cancels its revokes, gives
/// the lock back and retries later (aborted_transitions). So every wait a lock holder does ends,
/// no cycle of waits can be permanent, and revoked words are never left behind. Lock holders
/// take one directory lock at a time (counter migrations walk their group page by page; an
/// evicter holds only its victim's lock, taken by a try-lock after the faulting page's lock was
/// given back, and a victim that does not drain in time is skipped like one whose lock is taken).

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
  copy.shared = __ldcg(&e.shared);
  copy.placed = __ldcg(&e.placed);
  copy.lock = 1;
  return copy;
}

/// Writes the fields under the lock; directory_unlock() publishes them.
__device__ inline void store_entry(DirectoryEntry& e, const DirectoryEntry& v) {
  __stcg(reinterpret_cast<unsigned long long*>(&e.replicas), static_cast<unsigned long long>(v.replicas));
  __stcg(reinterpret_cast<unsigned long long*>(&e.remote), static_cast<unsigned long long>(v.remote));
  __stcg(&e.owner, v.owner);
  __stcg(&e.shared, v.shared);
  __stcg(&e.placed, v.placed);
}

/// Records the space's first device failure for the host (synchronize() raises it, naming the
/// object); later ones are dropped.
__device__ inline void record_failure(const SpaceView& s, DeviceFailure failure, std::uint32_t object_id,
                                      std::uint64_t where) {
  record_first_failure<cuda::thread_scope_system>(s.error_claim, [&] {
    volatile ErrorRecord* record = s.error;
    record->object_id = object_id;
    record->gpu = s.gpu;
    record->frames = s.pools[s.gpu].frames;
    record->where = where;
    record->failure = failure;
    __threadfence_system();
    record->state = 1;
  });
}

[[nodiscard]] __device__ inline std::uint64_t page_bytes_of(const SpaceView& s, const ObjectView& o, std::uint64_t page) {
  const std::uint64_t begin = page << s.page_shift, full = std::uint64_t{1} << s.page_shift;
  return o.bytes - begin < full ? o.bytes - begin : full;
}

/// The object's policy for a shared fault. `learns`: the fault is seen for the first time, and
/// OASIS's O-Table learns from it; a fault decided again (after an eviction) only reads it.
[[nodiscard]] __device__ inline PagePolicy shared_fault_policy(const SpaceView& s, const ObjectView& o, bool write,
                                                               bool learns) {
  switch (o.policy) {
    case PlacementPolicy::on_touch: return PagePolicy::on_touch;
    case PlacementPolicy::access_counter: return PagePolicy::access_counter;
    case PlacementPolicy::duplication: return PagePolicy::duplication;
    case PlacementPolicy::oasis: break;
  }
  return learns ? otable_shared_fault(s.otable[o.id], write, s.reset_threshold) : otable_policy_for(s.otable[o.id], write);
}

/// What the driver tells the other lanes after deciding.
struct CopyOrder {
  std::byte* dst = nullptr;
  const std::byte* src = nullptr;
  std::uint64_t bytes = 0;
};

/// Revokes every mapping `changes` takes away or narrows and waits for its holders to drain (the
/// page's lock held). False if one did not drain within the timeout: the revokes are cancelled,
/// nothing changed.
__device__ inline bool revoke_and_drain(const SpaceView& s, const ObjectView& o, std::uint64_t page,
                                        const PteChange* changes) {
  for (unsigned g = 0; g < s.gpus; ++g)
    if (changes[g].revoke) pte_begin_revoke(o.pte[g][page]);
  const std::uint64_t started = global_timer_ns();
  for (unsigned g = 0; g < s.gpus; ++g) {
    if (!changes[g].revoke) continue;
    unsigned backoff = lock_backoff_min_ns;
    while (!pte_drained(o.pte[g][page])) {
      if (global_timer_ns() - started > s.drain_timeout_ns) {
        for (unsigned h = 0; h < s.gpus; ++h)
          if (changes[h].revoke) pte_cancel_revoke(o.pte[h][page]);
        count(s, Counter::aborted_transitions, 1);
        return false;
      }
      __nanosleep(backoff);
      backoff = backoff * 2 < lock_backoff_max_ns ? backoff * 2 : lock_backoff_max_ns;
    }
  }
  return true;
}

/// Installs every GPU's planned word and gives back the own frames the plan frees (the page's
/// lock held, the drain done). Returns how many other GPUs' mappings were revoked.
__device__ inline unsigned install_changes(const SpaceView& s, const ObjectView& o, std::uint64_t page,
                                           const std::uint64_t* old_words, const PteChange* changes) {
  unsigned invalidated = 0;
  for (unsigned g = 0; g < s.gpus; ++g) {
    const PteChange& c = changes[g];
    if (c.revoke || c.after != (old_words[g] & pte::mapping_mask)) pte_install(o.pte[g][page], c.after);
    if (c.revoke && g != s.gpu) ++invalidated;
  }
  for (unsigned g = 0; g < s.gpus; ++g)
    if (changes[g].frees_frame) release_frame(s.pools[g], frame_at(s.pools[g], pte::address(old_words[g]), s.page_shift));
  return invalidated;
}

/// One change of one page's placement, planned by the driver under the page's lock: the faulting
/// page's transition, or an eviction of a victim page from this GPU's pool. serve() has one plan,
/// one plan-and-drain and one copy loop, whichever it is: the fault path is inlined into every
/// paged kernel, and a second copy of them cost every kernel registers (occupancy) or spills.
struct Transition {
  const ObjectView* object;  ///< the page changed: the faulting one, or an eviction's victim
  std::uint64_t page;
  bool evicts;
  DirectoryEntry after;
  Effects fx;     ///< an eviction: none (it pulls nothing; a write-back is counted as PCIe bytes)
  Action action;  ///< an eviction: local (no transition counter)
  std::uint64_t old_words[max_gpus];
  PteChange changes[max_gpus];
  std::uint32_t new_frame;  ///< a transition: the frame a pulled page goes to; an eviction: the frame it frees
};

/// The driver starts the fault's transition (the lock held, the directory read `before`): the
/// directory after `action`, and the requester's frame after it (`frame`): its present one, or
/// for a pulled page `reserved` (kept from an eviction or an earlier try), else one from the
/// pool. False if frame_alloc found no free frame (nothing changed, `reserved` is no_frame).
__device__ inline bool begin_transition(const SpaceView& s, const ObjectView& o, std::uint64_t page,
                                        const DirectoryEntry& before, Action action, std::uint32_t& reserved,
                                        Transition& t, std::uint64_t& frame) {
  const unsigned me = s.gpu;
  t.object = &o;
  t.page = page;
  t.evicts = false;
  t.after = before;
  t.action = action;
  t.fx = apply(t.after, me, action);
  t.new_frame = no_frame;
  if (!t.fx.pulled) {
    frame = pte::address(pte_load(o.pte[me][page]));
    return true;
  }
  if (reserved == no_frame) reserved = frame_alloc(s.pools[me]);
  if (reserved == no_frame) return false;
  t.new_frame = reserved;
  frame = frame_address(s.pools[me], t.new_frame, s.page_shift);
  return true;
}

/// The driver starts an eviction from this GPU's pool for its fault on `faulting_page` of object
/// `object_id`; it holds no directory lock. The clock proposes frames; a frame is skipped if it
/// holds no installed page (free, or taken by a transition not finished), if its page's lock is
/// taken (try-lock only), or if it no longer is this GPU's copy of the page its reverse-map word
/// names (changed hands after the word was read). For the first victim: true, its lock held,
/// evict_copy() done (`t`: the victim, the frame it frees; `frame`: that frame's address). A sweep
/// that finds no victim looks through the whole bitmap (free frames outside the window the
/// fault's frame_alloc scanned, or given back since: one frame_alloc per window): false with
/// that frame in `reserved`; else it backs off and sweeps again. `since` is when the fault
/// began to look for a frame (in units of 2^20 ns, odd; 0: now: one word the paged kernels keep
/// live, where nanoseconds would take two), kept across rounds by the caller so that victims whose
/// drains time out (every frame held, e.g. by warps inside nested accesses that wait for frames
/// themselves) do not restart the clock: after the watchdog without a frame the kernel
/// fails (DeviceFailure::out_of_frames) instead of hanging.
__device__ inline bool begin_eviction(const SpaceView& s, std::uint32_t object_id, std::uint64_t faulting_page,
                                      std::uint32_t& since, std::uint32_t& reserved, Transition& t,
                                      std::uint64_t& frame) {
  const unsigned me = s.gpu;
  const FramePoolView& pool = s.pools[me];
  const auto now = [] { return static_cast<std::uint32_t>(global_timer_ns() >> 20) | 1u; };
  if (since == 0) since = now();
  for (;;) {
    for (std::uint32_t step = 0; step < pool.frames; ++step) {
      const std::uint32_t f = clock_next(pool);
      const std::uint64_t held = frame_owner_of(pool, f);
      if (held == frame_owner::empty) continue;
      const ObjectView& o = s.objects[frame_owner::object(held)];
      const std::uint64_t page = frame_owner::page(held);
      DirectoryEntry& entry = o.directory[page];
      if (!directory_try_lock(entry)) continue;
      frame = frame_address(pool, f, s.page_shift);
      const std::uint64_t mine = pte_load(o.pte[me][page]);
      t.after = load_entry(entry);
      if (!pte::is_own_frame(mine) || pte::address(mine) != frame || !t.after.has_copy(me)) {
        directory_unlock(entry);
        continue;
      }
      evict_copy(t.after, me);
      t.object = &o;
      t.page = page;
      t.evicts = true;
      t.fx = Effects{};
      t.action = Action::local;
      t.new_frame = f;
      return true;
    }
    for (std::uint32_t window = 0; window <= pool.bitmap_words() / frame_scan_words; ++window) {
      reserved = frame_alloc(pool);
      if (reserved != no_frame) return false;
    }
    if (now() - since > static_cast<std::uint32_t>(s.watchdog_ns >> 20)) {
      record_failure(s, DeviceFailure::out_of_frames, object_id, faulting_page);
      trap_once_recorded<cuda::thread_scope_system>(s.error_claim);  // the fault cannot be served
    }
    __nanosleep(lock_backoff_max_ns);
  }
}

/// Takes `entry`'s directory lock (of page `page` of object `object_id`), or returns false without
/// it as soon as `done()` says the lock is not needed any more. Holders give the lock back in
/// bounded time (the argument at the top); one that has not within the watchdog never will (its
/// warp died, or the entry is corrupt): the kernel records no_progress naming the page and traps
/// rather than hang.
template <class Done>
__device__ inline bool wait_for_directory_lock(const SpaceView& s, DirectoryEntry& entry, std::uint32_t object_id,
                                               std::uint64_t page, Done&& done) {
  WaitDeadline deadline;
  for (unsigned backoff = lock_backoff_min_ns;;) {
    if (done()) return false;
    if (directory_try_lock(entry)) return true;
    if (backoff == lock_backoff_max_ns && deadline.expired(s.watchdog_ns)) {
      record_failure(s, DeviceFailure::lock_timeout, object_id, page);
      trap_once_recorded<cuda::thread_scope_system>(s.error_claim);
    }
    __nanosleep(backoff);
    backoff = backoff * 2 < lock_backoff_max_ns ? backoff * 2 : lock_backoff_max_ns;
  }
}

/// Plans every GPU's mapping of `t.after` (its page's lock held; `frame` the requester's frame
/// after it, `write` whether the requester writes), revokes the mappings that change and waits
/// for them to drain. False if one did not drain in time (nothing changed, the lock still held).
__device__ inline bool plan_and_drain(const SpaceView& s, Transition& t, bool write, std::uint64_t frame) {
  const unsigned me = s.gpu;
  const ObjectView& o = *t.object;
  for (unsigned g = 0; g < s.gpus; ++g) t.old_words[g] = pte_load(o.pte[g][t.page]);
  const std::uint64_t owner_frame =
      owner_frame_after(t.after, me, frame, t.old_words[t.after.owner < s.gpus ? t.after.owner : me]);
  for (unsigned g = 0; g < s.gpus; ++g)
    t.changes[g] = plan_pte(t.after, g, me, write, t.old_words[g], owner_frame, frame);
  if (t.evicts) t.changes[me].frees_frame = false;  // the frame goes to the evicting driver, not back to the pool
  return revoke_and_drain(s, o, t.page, t.changes);
}

/// What the warp copies once the change is drained: a pulled page into the requester's `frame`
/// (from the host, or the owner's frame over NVLink), or an evicted page that goes to the host
/// dirty back to the host (its only copy, `frame`). Nothing otherwise.
__device__ inline CopyOrder copy_order_of(const SpaceView& s, const Transition& t, std::uint64_t frame) {
  const ObjectView& o = *t.object;
  std::byte* host = o.host + (t.page << s.page_shift);
  CopyOrder copy;
  if (t.evicts) {
    if (t.after.owner != owner_host || __ldcg(o.dirty + t.page) == 0u) return copy;
    copy.dst = host;
    copy.src = reinterpret_cast<const std::byte*>(frame);
  } else {
    if (!t.fx.pulled) return copy;
    copy.dst = reinterpret_cast<std::byte*>(frame);
    copy.src = t.fx.source == owner_host ? host : reinterpret_cast<const std::byte*>(pte::address(t.old_words[t.fx.source]));
  }
  copy.bytes = page_bytes_of(s, o, t.page);
  return copy;
}

/// The counter a transition adds one to (Counter::count: none). One count() call site for every
/// action: a switch with a count() per case cost every paged kernel registers (two more cases
/// took transpose's kernel from 80 to 95 at a41e1cb).
[[nodiscard]] __device__ inline Counter transition_counter(Action action, bool shared_after) {
  switch (action) {
    // An evicted page that was shared comes back through a shared fault (decide()): counted there.
    case Action::fetch_from_host: return shared_after ? Counter::count : Counter::first_touches;
    case Action::take_placed: return Counter::first_touches;
    case Action::migrate: return Counter::migrations;
    case Action::counter_migrate: return Counter::counter_migrations;
    case Action::replicate: return Counter::replications;
    case Action::map_remote: return Counter::remote_maps;
    case Action::collapse_and_own:
    case Action::collapse_and_map_remote: return Counter::collapses;
    case Action::local:
    case Action::remote: break;
  }
  return Counter::count;
}

/// The driver's last half, the copy done, on `page` of `o` (t.object and t.page, passed again by
/// the caller: see serve()): installs the mappings, frees frames, keeps the reverse map and the
/// dirty mark, writes the directory, unlocks, counts.
__device__ inline void finish_change(const SpaceView& s, const ObjectView& o, std::uint64_t page, const Transition& t,
                                     std::uint64_t copied) {
  const unsigned me = s.gpu;
  if (t.fx.pulled) frame_set_owner(s.pools[me], t.new_frame, o.id, page);
  if (t.evicts) frame_clear_owner(s.pools[me], t.new_frame);
  const unsigned invalidated = install_changes(s, o, page, t.old_words, t.changes);
  if (pte::is_writable(t.changes[me].after)) __stcg(o.dirty + page, 1u);
  if (t.evicts && copied != 0) __stcg(o.dirty + page, 0u);  // an eviction copies only to write a dirty page back
  store_entry(o.directory[page], t.after);
  directory_unlock(o.directory[page]);

  if (t.evicts) {
    count(s, Counter::evictions, 1);
    if (copied != 0) count(s, Counter::writebacks, 1);
  }
  const Counter counter = transition_counter(t.action, t.after.shared != 0);
  if (counter != Counter::count) count(s, counter, 1);
  if (invalidated != 0) count(s, Counter::invalidations, invalidated);
  if (copied != 0) count(s, t.fx.source == owner_host ? Counter::pcie_bytes : Counter::nvlink_bytes, copied);
}

/// All lanes in `mask` carry out the driver's copy order (the driver's `copy`), then make it
/// visible to every GPU. Returns the bytes copied.
__device__ inline std::uint64_t warp_copy_order(unsigned mask, unsigned driver, const CopyOrder& copy) {
  auto* dst = reinterpret_cast<std::byte*>(__shfl_sync(mask, reinterpret_cast<unsigned long long>(copy.dst), driver));
  const auto* src = reinterpret_cast<const std::byte*>(__shfl_sync(mask, reinterpret_cast<unsigned long long>(copy.src), driver));
  const std::uint64_t bytes = __shfl_sync(mask, copy.bytes, driver);
  if (bytes != 0) warp_copy(mask, dst, src, bytes);
  __threadfence_system();  // the copy reaches every GPU's view (and the host's) before a mapping or the lock publishes it
  __syncwarp(mask);
  return bytes;
}

/// Serves one fault on `page` (or, with `counter_migration`, moves the page here if this GPU
/// maps it remotely). Every lane in `mask` calls it; lane `driver` decides, all lanes copy.
/// Returns with the page's state changed or found already usable; the caller retries its hold.
///
/// Each round the driver takes one lock and plans one change: the fault's transition, or, when
/// the round before found no free frame, an eviction (the fault's lock given back first: a lock
/// holder never waits for a victim's lock) whose frame it keeps in `reserved`, so that no other
/// warp takes it first. After an eviction the fault is decided again on the page's state then:
/// it was counted (and, under OASIS, taught to the O-Table) the first time, so later rounds only
/// read the object's policy.
__device__ inline void serve(const SpaceView& s, const ObjectView& o, unsigned mask, unsigned driver, std::uint64_t page,
                             bool write, bool counter_migration) {
  const bool is_driver = lane_id() == driver;
  DirectoryEntry& entry = o.directory[page];
  std::uint64_t& own = o.pte[s.gpu][page];
  // The driver's state across rounds.
  std::uint32_t reserved = no_frame;  // its frame for the page, from the pool or an eviction
  bool needs_frame = false;           // the round before found no free frame: this one evicts
  std::uint32_t seeking_since = 0;    // when it began to look for a frame (begin_eviction's give-up)
  for (;;) {
    bool again = false;
    bool changes = false;  // the driver planned and drained a change: the warp copies
    Transition t;
    CopyOrder copy;
    if (is_driver) {
      bool planned = false;  // `t` holds a change, its page's lock held
      std::uint64_t frame = 0;
      if (needs_frame && !counter_migration && pte::usable(pte_load(own), write)) {
        needs_frame = false;  // another warp served the fault meanwhile: no page is evicted for it
      } else if (needs_frame) {
        planned = begin_eviction(s, o.id, page, seeking_since, reserved, t, frame);
        needs_frame = planned;  // else a frame came free: decide again with it
        again = true;
      } else {
        // (a): wait for the lock; a fault whose mapping became usable meanwhile needs nothing.
        if (wait_for_directory_lock(s, entry, o.id, page,
                                    [&] { return !counter_migration && pte::usable(pte_load(own), write); })) {
          const DirectoryEntry before = load_entry(entry);
          Action action = Action::local;
          if (counter_migration) {
            if (before.maps_remote(s.gpu)) action = Action::counter_migrate;
          } else {
            // A driver holding a frame for the fault took it in an earlier round, for the transition
            // decided (and counted) then: deciding again (after an eviction or a drain timeout) counts nothing.
            const bool first_decision = reserved == no_frame;
            const Decision d =
                decide(before, s.gpu, write, [&](bool w) { return shared_fault_policy(s, o, w, first_decision); });
            if (d.fault == PlacementFault::shared && first_decision) count(s, Counter::shared_faults, 1);
            action = d.action;
            if ((action == Action::local || action == Action::remote) && write && !pte::is_writable(pte_load(own))) {
              // A write through a mapping the directory lets this GPU write: grant it, mark dirty.
              __stcg(o.dirty + page, 1u);
              pte_grant_write(own);
              count(s, Counter::write_upgrades, 1);
              // The owner's first write ends a placement (owner_write_ends_placement). Only the
              // owner's upgrade can find its page placed (a placed page has no remote mappers),
              // so it is one unconditional store: testing `before` here kept it live and
              // spilled gemm's kernel (360 -> 560 bytes, 21% slower).
              __stcg(&entry.placed, std::uint8_t{0});
            }
          }
          if (action == Action::local || action == Action::remote) {
            directory_unlock(entry);
          } else if (begin_transition(s, o, page, before, action, reserved, t, frame)) {
            planned = true;
          } else {
            // No free frame found: the lock is given back, the next round evicts.
            directory_unlock(entry);
            needs_frame = true;
            again = true;
          }
        }
      }
      if (planned) {
        if (plan_and_drain(s, t, write && !t.evicts, frame)) {
          changes = true;
          copy = copy_order_of(s, t, frame);
        } else {
          // A mapping did not drain in time: nothing changed; back off and retry (an eviction
          // sweeps on from the next frame).
          directory_unlock(t.object->directory[t.page]);
          if (!t.evicts) __nanosleep(lock_backoff_max_ns);
          again = true;
        }
      }
    }
    if (__shfl_sync(mask, changes, driver)) {
      const std::uint64_t copied = warp_copy_order(mask, driver, copy);
      if (is_driver) {
        // The page changed is this fault's, or an eviction's victim: read back from the frame's
        // reverse-map word (stable: the victim's lock is held) rather than kept live across the
        // copy, which would cost every paged kernel registers.
        const ObjectView* changed = &o;
        std::uint64_t changed_page = page;
        if (t.evicts) {
          const std::uint64_t victim = frame_owner_of(s.pools[s.gpu], t.new_frame);
          changed = &s.objects[frame_owner::object(victim)];
          changed_page = frame_owner::page(victim);
        }
        finish_change(s, *changed, changed_page, t, copied);
        if (t.evicts) {
          reserved = t.new_frame;
          needs_frame = false;
        } else if (t.fx.pulled) {
          reserved = no_frame;
        }
      }
    }
    if (!__shfl_sync(mask, again, driver)) break;
  }
  if (is_driver && reserved != no_frame) frame_free(s.pools[s.gpu], reserved);  // the fault needed no frame after all
}

/// Performs one access per lane to its page (all active lanes call together, each with its own
/// binding and page, possibly divergent: flat_view's lanes may reach different objects). Lanes on
/// one page of one object (one page-table word) form a group whose leader takes one hold; a group
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
  // The group key is the address of byte `page` of the lane's page table: inside that table's
  // allocation (8 bytes a page), so equal keys mean the same table and page, and lanes of
  // different objects (flat_view's) never share a hold.
  const unsigned peers = __match_any_sync(mask, reinterpret_cast<std::uintptr_t>(b.pte) + page);
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
      const std::uint64_t own_end = (group + 1) * s.pages_per_group < pages ? (group + 1) * s.pages_per_group : pages;
      // Every lane runs the driver's loop (serve() is warp-collective), so to the driver's object's
      // end. Each lane still passes its own object to serve(): only the driver uses it (the others
      // at most read its table pointers), and passing the driver's (a shuffled pointer)
      // cost transpose's kernel 3-9 registers and a third of its occupancy.
      const std::uint64_t end = __shfl_sync(mask, own_end, driver);
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
