#pragma once
/// @file
/// The device fault path. Lanes of a warp that name the same page elect one leader
/// (__match_any_sync), which acquires the page once for all of them. A resident page is a hit.
/// An absent page is loaded by the one warp that wins its BUSY bit: that warp takes a victim
/// frame, writes the victim back if dirty, and copies the page in with all its active lanes;
/// other warps wait with nanosleep backoff, for at most Config::watchdog_seconds (then the
/// kernel records no_progress, naming the page, and traps).

#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/detail/core/device_support.cuh"
#include "warpvm/detail/core/overwrite_check.hpp"
#include "warpvm/detail/core/page_table.hpp"
#include "warpvm/detail/policy/automatic.hpp"
#include "warpvm/detail/policy/victim.hpp"
#include "warpvm/detail/trace/fault_recorder.cuh"
#include "warpvm/detail/transport/warp_copy.cuh"

#include <cstdint>

namespace warpvm::detail {

inline constexpr unsigned backoff_min_ns = 8;
inline constexpr unsigned backoff_max_ns = 256;
inline constexpr std::uint32_t victim_probe_budget = 1024;

__device__ __forceinline__ std::uint32_t& page_word_of(const CacheView& cache, std::uint64_t key) {
  return cache.objects[key_object(key)].pages[key_page(key)].state;
}

/// Takes a frame for a new page (one lane). Searches until a frame is free or evictable; if
/// none is for longer than the watchdog, the cache is too small for what the resident threads
/// hold: the error is recorded for the host and the kernel traps instead of hanging.
__device__ inline Victim claim_victim(const CacheView& cache) {
  WaitDeadline deadline;
  for (;;) {
    const VictimSearch search =
        find_victim(cache.table, cache.eviction, *cache.never_evicts != 0u, victim_probe_budget,
                    [&](std::uint64_t key) -> std::uint32_t& { return page_word_of(cache, key); });
    if (search.found) return search.victim;
    if (deadline.expired(cache.watchdog_ns))
      fail_kernel(cache, ErrorKind::no_progress, ~0u, 0, cache.table.count, FailureCause::no_victim);
    __nanosleep(backoff_max_ns);
  }
}

/// Copies frame `frame`, which holds the page `key`, back to host memory; every lane in `mask`
/// helps, and the lane that passes `counts` counts it. The system fence puts the bytes on their
/// way to the host before anything published afterwards lets another warp re-read the page there.
__device__ inline void write_back_page(const CacheView& cache, unsigned mask, bool counts, std::uint32_t frame,
                                       std::uint64_t key) {
  const ObjectDescriptor& owner = cache.objects[key_object(key)];
  const PageGeometry geometry = cache.geometry();
  const std::uint64_t page = key_page(key);
  const std::uint64_t bytes = geometry.bytes_in_page(page, owner.bytes);
  warp_copy(mask, owner.host + geometry.page_begin(page), cache.frame_data(frame), bytes);
  __threadfence_system();
  __syncwarp(mask);
  if (counts) {
    count_event(cache, Counter::writebacks, 1);
    count_event(cache, Counter::bytes_out, bytes);
  }
}

/// Checked mode, a page loaded for overwrite: fills its frame with poison, so that the span's
/// release finds what it left unwritten (overwrite_check.hpp). Every lane in `mask` helps.
__device__ inline void poison_frame(const CacheView& cache, unsigned mask, std::uint32_t frame) {
  const unsigned rank = static_cast<unsigned>(__popc(mask & lanemask_lt()));
  const unsigned lanes = static_cast<unsigned>(__popc(mask));
  const uint4 poison{overwrite_poison_word, overwrite_poison_word, overwrite_poison_word, overwrite_poison_word};
  auto* words = reinterpret_cast<uint4*>(cache.frame_data(frame));
  for (std::uint64_t w = rank; w < (std::uint64_t{1} << cache.page_shift) / sizeof(uint4); w += lanes) words[w] = poison;
}

/// Loads the page named by `key` into a frame; every lane in `mask` helps copy, lane `driver`
/// owns the page's BUSY bit, does the bookkeeping and records the fault (`started`, `lanes`
/// and `write` are the driver's). Returns the frame.
__device__ inline std::uint32_t fill_page(const CacheView& cache, unsigned mask, unsigned driver,
                                          std::uint64_t key, bool load_contents, std::uint64_t started,
                                          unsigned lanes, bool write) {
  const bool is_driver = lane_id() == driver;
  const ObjectDescriptor& object = cache.objects[key_object(key)];
  const std::uint64_t page = key_page(key);
  // A resident object's page has its own frame, past the cache's: nothing is evicted for it.
  const bool own_frame = object.placement == Placement::resident;
  Victim victim{object.resident_first_frame + static_cast<std::uint32_t>(page), empty_page_key, false};
  if (is_driver && !own_frame) victim = claim_victim(cache);
  const std::uint32_t frame = own_frame ? victim.frame : __shfl_sync(mask, victim.frame, driver);
  const std::uint64_t evicted_key = __shfl_sync(mask, victim.evicted_key, driver);
  const bool evicted_dirty = __shfl_sync(mask, victim.dirty, driver);
  const PageGeometry geometry = cache.geometry();

  if (evicted_key != empty_page_key) {
    if (evicted_dirty) write_back_page(cache, mask, is_driver, frame, evicted_key);
    if (is_driver) {
      page_finish_evict(page_word_of(cache, evicted_key));
      count_event(cache, Counter::evictions, 1);
    }
  }

  const std::uint64_t bytes = load_contents ? geometry.bytes_in_page(page, object.bytes) : 0;
  warp_copy(mask, cache.frame_data(frame), object.host + geometry.page_begin(page), bytes);
  if (!load_contents && cache.checked) poison_frame(cache, mask, frame);
  __threadfence();
  __syncwarp(mask);
  if (is_driver) {
    cache.table.set_dirty(frame, false);
    cache.table.set_owner(frame, key);
    cache.table.set_referenced(frame, false);  // a page earns its second chance by being used again
    object.pages[page].frame = frame;
    // Placement::automatic counts remote reads since the last load: once evicted, a page must
    // pay for its next copy again (a count that outlived its copies would migrate it at every read).
    if (object.remote_sectors != nullptr) object.remote_sectors[page] = 0;
    cache.table.unlock(frame);
    page_finish_fetch(object.pages[page].state);
    count_event(cache, Counter::misses, 1);
    count_event(cache, Counter::bytes_in, bytes);
    const unsigned evicted = evicted_key == empty_page_key ? 0u : evicted_dirty ? 2u : 1u;
    record_fault(cache, started, key_object(key), page, lanes, FaultKind::fill, write, evicted);
  }
  return frame;
}

__device__ __forceinline__ std::uint32_t resident_frame(const ObjectDescriptor& object, std::uint64_t page) {
  return cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(object.pages[page].frame)
      .load(cuda::std::memory_order_relaxed);
}

/// What a lane will do with an acquired page. `overwrite`: the holder writes every element, so
/// a page loaded for a group of overwriters is not read from host memory first.
enum class Intent : std::uint8_t { read, write, overwrite };

/// The frame past the cache's last: allocated, never filled, never read for data. Readers that
/// load before they know whether a page is resident read it instead of a real frame, so they
/// cannot leave an L1 line of a frame that is filled later in the kernel.
__device__ __forceinline__ std::uint32_t scratch_frame(const CacheView& cache) { return cache.table.count; }

/// When no page can be evicted (every migrate object fits in the cache), and always for a
/// Placement::resident object (its frames are its own), a resident page needs no holder count:
/// its frame cannot change before the kernel ends. The page's entry (state and frame together)
/// is read through L1: a line cached before the page became resident can only say "absent",
/// never a wrong frame; recheck_resident_unheld() then asks L2. On false `frame` is the scratch
/// frame, so a caller may read from it before it knows the answer and discard the value.
__device__ __forceinline__ bool peek_resident_unheld(const CacheView& cache, const ObjectDescriptor& object,
                                                     std::uint64_t page, std::uint32_t& frame) {
  const PageEntry seen = object.pages[page];
  const bool unheld = (*cache.never_evicts != 0u) | (object.placement == Placement::resident);
  const bool resident = unheld & page_word::is_resident(seen.state);
  frame = resident ? seen.frame : scratch_frame(cache);
  return resident;
}

/// Placement::automatic: whether the calling lane's read of `page` goes to host memory instead of
/// migrating the page. All active lanes call together; lanes reading one page decide together,
/// priced at the 32-byte sectors they fetch between them (`byte_in_page`: where the lane's
/// element starts; an element of `element_bytes` > 32 spans several sectors), and their leader
/// adds that to the page's count unless a plain load already shows it would pass the budget
/// (*cache.automatic_budget: policy/automatic.hpp; racing leaders may carry the count past it,
/// which only migrates; a load restarts the count, fill_page()). Only an
/// absent page is read remotely: its host copy is current, since an eviction writes a dirty page
/// back (system fence) before its release makes the page absent, and the leader's acquire load,
/// then a barrier of its group, order the remote reads after that.
__device__ inline bool read_absent_page_remotely(const CacheView& cache, const ObjectDescriptor& object,
                                                 std::uint64_t page, std::uint32_t byte_in_page,
                                                 std::uint32_t element_bytes) {
  const unsigned mask = __activemask();
  const unsigned peers = __match_any_sync(mask, make_page_key(object.id, page));
  const unsigned leader = first_lane(peers);
  const unsigned same_sector = __match_any_sync(peers, byte_in_page / remote_sector_bytes);
  const unsigned sector_leaders = __ballot_sync(peers, lane_id() == first_lane(same_sector));
  const std::uint32_t element_sectors = element_bytes > remote_sector_bytes ? element_bytes / remote_sector_bytes : 1u;
  const std::uint32_t sectors = static_cast<std::uint32_t>(__popc(sector_leaders)) * element_sectors;
  bool remote = false;
  if (lane_id() == leader && page_word::is_absent(page_load(object.pages[page].state))) {
    // A page past its budget migrates on every later absence: a plain load says so without the
    // atomic (and the count stops near the budget instead of wrapping).
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> fetched(object.remote_sectors[page]);
    const std::uint32_t budget = *cache.automatic_budget;
    remote = automatic_reads_remotely(fetched.load(cuda::std::memory_order_relaxed), sectors, budget) &&
             automatic_reads_remotely(fetched.fetch_add(sectors, cuda::std::memory_order_relaxed), sectors, budget);
  }
  remote = __shfl_sync(peers, remote, leader);
  // A shuffle orders no memory accesses: the barrier puts every peer's host read after the
  // leader's acquire (as in acquire_page). The whole group takes this branch or none of it does.
  if (remote) __syncwarp(peers);
  return remote;
}

/// *p through L2 only (ld.global.cg): a host line read remotely must never come from an L1 copy
/// older than the last write-back of its page. Elements larger than 16 bytes (array<T> allows
/// any power of two up to min_page_bytes) are read in 16-byte pieces: they are 16-byte aligned,
/// since object memory is and sizeof(T) is a multiple of 16.
template <class T>
__device__ __forceinline__ T load_through_l2(const T* p) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) % 16 == 0);
  T value;
  if constexpr (sizeof(T) == 1) {
    const unsigned char raw = __ldcg(reinterpret_cast<const unsigned char*>(p));
    memcpy(&value, &raw, 1);
  } else if constexpr (sizeof(T) == 2) {
    const unsigned short raw = __ldcg(reinterpret_cast<const unsigned short*>(p));
    memcpy(&value, &raw, 2);
  } else if constexpr (sizeof(T) == 4) {
    const unsigned raw = __ldcg(reinterpret_cast<const unsigned*>(p));
    memcpy(&value, &raw, 4);
  } else if constexpr (sizeof(T) == 8) {
    const unsigned long long raw = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    memcpy(&value, &raw, 8);
  } else {
    const auto* from = reinterpret_cast<const uint4*>(p);
    auto* to = reinterpret_cast<unsigned char*>(&value);
#pragma unroll
    for (std::size_t k = 0; k < sizeof(T) / 16; ++k) {
      const uint4 raw = __ldcg(from + k);
      memcpy(to + k * 16, &raw, 16);
    }
  }
  return value;
}

/// The slow side of peek_resident_unheld(): the entry read from L2. False: acquire the page.
__device__ inline bool recheck_resident_unheld(const CacheView& cache, const ObjectDescriptor& object,
                                               std::uint64_t page, std::uint32_t& frame) {
  if (*cache.never_evicts == 0u && object.placement != Placement::resident) return false;
  const unsigned long long fresh = __ldcg(reinterpret_cast<const unsigned long long*>(object.pages + page));
  const PageEntry seen{static_cast<std::uint32_t>(fresh), static_cast<std::uint32_t>(fresh >> 32)};
  frame = seen.frame;
  return page_word::is_resident(seen.state);
}

/// Acquires the page `page` of `object` for the calling lane; all active lanes call together,
/// each with its own page (possibly of different objects). The page stays resident until the
/// lane calls release_page. Returns the frame holding it.
__device__ inline std::uint32_t acquire_page(const CacheView& cache, const ObjectDescriptor& object,
                                             std::uint64_t page, Intent intent) {
  enum class Step : std::uint8_t { ready, fill, wait };
  const unsigned mask = __activemask();
  const std::uint64_t key = make_page_key(object.id, page);
  const unsigned peers = __match_any_sync(mask, key);
  const unsigned leader = first_lane(peers);
  const bool is_leader = lane_id() == leader;
  const unsigned overwriters = __ballot_sync(mask, intent == Intent::overwrite);
  const bool group_overwrites = (overwriters & peers) == peers;
  const std::uint64_t started = event_clock(cache);
  std::uint32_t& word = object.pages[page].state;

  Step step = Step::ready;
  bool hit = false;
  bool waited = false;
  bool loaded = false;
  std::uint32_t frame = 0;
  if (is_leader) {
    const std::uint32_t before = page_acquire(word, __popc(peers));
    switch (classify(before)) {
      case AcquireOutcome::hit:
        frame = resident_frame(object, page);
        hit = true;
        break;
      case AcquireOutcome::fetch: step = page_try_begin_fetch(word) ? Step::fill : Step::wait; break;
      case AcquireOutcome::wait: step = Step::wait; break;
    }
    waited = step == Step::wait;
  }

  unsigned backoff_ns = backoff_min_ns;
  WaitDeadline deadline;  // a waiter's: the page's loader or evicter must finish within the watchdog
  for (;;) {
    for (unsigned fillers = __ballot_sync(mask, step == Step::fill); fillers != 0; fillers &= fillers - 1) {
      const unsigned driver = first_lane(fillers);
      // What the fault event says (only computed when recording: it costs registers).
      const bool group_writes = recording(cache) && (__ballot_sync(mask, intent != Intent::read) & peers) != 0;
      const std::uint32_t filled = fill_page(cache, mask, driver, __shfl_sync(mask, key, driver),
                                             !__shfl_sync(mask, group_overwrites, driver), started,
                                             static_cast<unsigned>(__popc(peers)), group_writes);
      if (lane_id() == driver) {
        frame = filled;
        step = Step::ready;
        loaded = true;
      }
    }
    if (!__any_sync(mask, step == Step::wait)) break;
    if (step == Step::wait) {
      const std::uint32_t now = page_load(word);
      if (page_word::is_resident(now)) {
        frame = resident_frame(object, page);
        step = Step::ready;
      } else if (page_word::is_absent(now) && page_try_begin_fetch(word)) {
        step = Step::fill;
      } else if (backoff_ns == backoff_max_ns && deadline.expired(cache.watchdog_ns)) {
        // The page never left its transition: its loader or evicter cannot finish (it waits for
        // a frame itself past the watchdog, or the page's state is corrupt). A hang otherwise.
        fail_kernel(cache, ErrorKind::no_progress, object.id, page, 0, FailureCause::page_transition);
      }
    }
    if (__any_sync(mask, step == Step::wait)) {
      __nanosleep(backoff_ns);
      backoff_ns = backoff_ns * 2 < backoff_max_ns ? backoff_ns * 2 : backoff_max_ns;
    }
  }

  const unsigned hit_leaders = __ballot_sync(mask, is_leader && hit);
  const unsigned wait_leaders = __ballot_sync(mask, is_leader && waited);
  const unsigned writers = __ballot_sync(mask, intent != Intent::read);
  const bool group_writes = (writers & peers) != 0;
  if (is_leader && waited && !loaded)  // a waiter that ended up loading recorded a fill
    record_fault(cache, started, object.id, page, static_cast<unsigned>(__popc(peers)), FaultKind::wait, group_writes, 0);
  if (lane_id() == first_lane(mask)) {
    if (hit_leaders != 0) count_event(cache, Counter::hits, __popc(hit_leaders));
    if (wait_leaders != 0) count_event(cache, Counter::waits, __popc(wait_leaders));
  }
  frame = __shfl_sync(mask, frame, leader);
  __syncwarp(mask);  // orders every lane's frame accesses after the leader's acquire
  if (is_leader) {
    if (group_writes) cache.table.set_dirty(frame, true);
    if (cache.eviction == EvictionPolicy::clock && !loaded) cache.table.set_referenced(frame, true);
  }
  return frame;
}

/// Releases a page acquired by acquire_page; lanes releasing the same page together release
/// it with one atomic. __syncwarp orders every lane's accesses to the frame before the release.
__device__ inline void release_page(std::uint32_t* page_state_word, std::uint64_t key) {
  const unsigned mask = __activemask();
  const unsigned peers = __match_any_sync(mask, key);
  __syncwarp(mask);
  if (lane_id() == first_lane(peers)) page_release(*page_state_word, __popc(peers));
}

}  // namespace warpvm::detail
