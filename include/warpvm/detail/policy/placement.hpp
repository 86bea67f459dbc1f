#pragma once
/// @file
/// Page placement across N GPUs and the host (issue #6, OASIS, HPCA'25 Sections IV-V): the page
/// directory, the three page policies and OASIS's per-object controller (the O-Table). Pure
/// __host__ __device__ code without CUDA runtime calls: a GPU fault handler and warpvm-sim carry
/// out the same decisions.
///
/// One access by one GPU goes through three steps:
///  1. `decide(entry, gpu, write, policy_for)` reads the page's directory entry. Without a fault
///     the answer is `local` (the GPU has a copy that allows this access) or `remote` (the GPU
///     maps the owner's frame). A fault on a page on the host that was never shared is a first
///     touch: private, served by on-touch migration without asking the object (the paper's host
///     page table filter). So is a write fault on a page that place_on_gpus() put on another GPU
///     and neither a transition nor its owner's first write has changed since: placement is not
///     use. A page evicted after it was shared faults as shared. Any other fault is shared: the
///     page is held by another GPU (or replicated while this GPU writes). Only then is `policy_for(write)` called: the object's
///     fixed policy, or its O-Table entry (`otable_shared_fault`), which learns from this very
///     fault.
///  2. `apply(entry, gpu, action)` performs the directory transition and says what moved.
///     `evict_copy(entry, gpu)` is the one transition no access asks for: a GPU whose frame pool
///     is full gives up its copy of a victim page (a replica is dropped, a replica is promoted in
///     the owner's place, or a sole owner's page goes back to the host).
///  3. A remote access is counted (`count_remote`) per 64 KB group per GPU; when a GPU's count
///     for a group reaches the threshold, each page of the group it maps remotely gets
///     `counter_migrate`.
///
/// Concurrency on a device. The directory and the O-Table live where every GPU reaches them
/// (mapped host memory or one GPU's memory, NVLink peer access), so their atomics are system
/// scope:
///  - O-Table entry: one 32-bit word, one fetch_add per shared fault (`otable_shared_fault`; the
///    rare relearning fault that changes the policy adds one or two fetch_or/fetch_and), its
///    count cleared at a phase boundary with one fetch_and (`otable_begin_phase`).
///  - Directory entry: `lock` is taken by CAS (`directory_try_lock`) by the one fault handler
///    that changes the page; owner and masks are plain fields written only under it and
///    published by the releasing store (`directory_unlock`). Accesses that hit never read the
///    directory: they use the GPU's own page table, which the handler updates (and, for the GPUs
///    whose mappings it invalidates, shoots down) while it holds the lock.
///  - Access counters: one 32-bit word per (group, GPU), fetch_add; the adder that crosses the
///    threshold wins the migration and subtracts the threshold.

#include "warpvm/detail/host_device.hpp"

#include <cuda/atomic>
#include <cuda/std/bit>

#include <cstdint>

namespace warpvm::detail {

inline constexpr unsigned placement_max_gpus = 64;             ///< sharer masks are 64 bits
inline constexpr std::uint8_t owner_host = 0xff;               ///< owner value: the page is on the host
inline constexpr std::uint32_t counter_group_bytes = 64u << 10;  ///< access counters count per 64 KB
inline constexpr std::uint32_t default_counter_threshold = 256;  ///< remote accesses per group before migration
inline constexpr std::uint32_t default_reset_threshold = 8;      ///< shared faults before the O-Table relearns
inline constexpr std::uint32_t remote_access_bytes = 128;        ///< one remote access: a 128 B line

/// How a page's faults are served. The values are OASIS's PTE policy bits (on-touch 00,
/// access-counter 01, duplication 11).
enum class PagePolicy : std::uint8_t { on_touch = 0, access_counter = 1, duplication = 3 };

[[nodiscard]] WARPVM_HD_INLINE constexpr const char* to_string(PagePolicy p) {
  return p == PagePolicy::on_touch ? "on_touch" : p == PagePolicy::access_counter ? "access_counter" : "duplication";
}

/// Where a page is, derived from its directory entry.
enum class PageState : std::uint8_t {
  host,        ///< no GPU holds it (never touched, or evicted to the host): the only copy is in host memory
  exclusive,   ///< one GPU owns the only copy (others may map it remotely); the owner may write
  replicated,  ///< read-only copies on several GPUs; any write faults and collapses them
};

/// One page in the directory. Invariants (`directory_valid`): a host page has no replicas and
/// no remote mappers; the owner is in neither mask; the masks are disjoint; a placed page is
/// exclusive (no replicas, no remote mappers, not on the host) and was never shared.
struct DirectoryEntry {
  std::uint64_t replicas = 0;  ///< GPUs other than the owner holding a read-only copy
  std::uint64_t remote = 0;    ///< GPUs mapping the owner's frame over the link
  std::uint32_t lock = 0;      ///< device form: held by the fault handler changing the page
  std::uint8_t owner = owner_host;
  /// Sticky: a shared fault (or a counter migration) has served the page. It survives eviction
  /// to the host, where it stands for OASIS's PTE policy bits of an evicted page (Section VI-D):
  /// a re-referenced page that was shared is a shared fault, not a first touch (decide()).
  std::uint8_t shared = 0;
  /// The owner holds the page because place_on_gpus() put it there, and neither a transition
  /// nor the owner's first write has changed it since: another GPU's write to it is a first touch
  /// (decide()). Only an exclusive page is placed, and it was never shared. The owner's reads do
  /// not end it: they are hits, which no fault handler sees.
  std::uint8_t placed = 0;

  [[nodiscard]] WARPVM_HD constexpr PageState state() const {
    return owner == owner_host ? PageState::host : replicas != 0 ? PageState::replicated : PageState::exclusive;
  }
  /// GPU `g` holds a local copy (the owner's or a replica).
  [[nodiscard]] WARPVM_HD constexpr bool has_copy(unsigned g) const {
    return owner == g || ((replicas >> g) & 1u) != 0;
  }
  [[nodiscard]] WARPVM_HD constexpr bool maps_remote(unsigned g) const { return ((remote >> g) & 1u) != 0; }
};

[[nodiscard]] WARPVM_HD_INLINE constexpr bool directory_valid(const DirectoryEntry& e) {
  if (e.owner == owner_host) return e.replicas == 0 && e.remote == 0 && e.placed == 0;
  if (e.owner >= placement_max_gpus) return false;
  if (e.placed != 0 && (e.replicas != 0 || e.remote != 0 || e.shared != 0)) return false;
  const std::uint64_t owner_bit = std::uint64_t{1} << e.owner;
  return (e.replicas & owner_bit) == 0 && (e.remote & owner_bit) == 0 && (e.replicas & e.remote) == 0;
}

/// What serves one access. The first two need no fault.
enum class Action : std::uint8_t {
  local,                    ///< the requester's own copy
  remote,                   ///< a load or store over the link to the owner's frame (counted)
  fetch_from_host,          ///< first touch: the page is copied from the host; the requester owns it
  migrate,                  ///< the page is pulled from its owner; every other mapping is dropped
  map_remote,               ///< the requester maps the owner's frame; the access goes remote
  replicate,                ///< the requester pulls a read-only copy; the owner keeps its copy
  collapse_and_own,         ///< write to a replicated page: all other copies and mappings dropped,
                            ///< the writer is the sole owner (it pulls the page if it held no copy)
  collapse_and_map_remote,  ///< write to a replicated page under access-counter by a GPU without a
                            ///< copy: replicas dropped, the writer maps the owner's frame
  counter_migrate,          ///< a remote access count reached the threshold: the page moves to the
                            ///< counting GPU, every other mapping dropped (no fault)
  take_placed,              ///< another GPU's write to a page still placed: a first touch (the page
                            ///< moves to the requester; no O-Table, not shared)
};

[[nodiscard]] WARPVM_HD_INLINE constexpr const char* to_string(Action a) {
  switch (a) {
    case Action::local: return "local";
    case Action::remote: return "remote";
    case Action::fetch_from_host: return "fetch_from_host";
    case Action::migrate: return "migrate";
    case Action::map_remote: return "map_remote";
    case Action::replicate: return "replicate";
    case Action::collapse_and_own: return "collapse_and_own";
    case Action::collapse_and_map_remote: return "collapse_and_map_remote";
    case Action::counter_migrate: return "counter_migrate";
    case Action::take_placed: return "take_placed";
  }
  return "?";
}

/// After the action, the access itself goes over the link (true) or to a local copy (false).
[[nodiscard]] WARPVM_HD_INLINE constexpr bool access_goes_remote(Action a) {
  return a == Action::remote || a == Action::map_remote || a == Action::collapse_and_map_remote;
}

enum class PlacementFault : std::uint8_t {
  none,
  first_touch,  ///< the page is on the host and was never shared, or is written while placed on another GPU:
                ///< private, on-touch, the O-Table is not consulted
  shared,       ///< the page is held by another GPU, or replicated and written: consults the object
};

struct Decision {
  Action action;
  PlacementFault fault;
  PagePolicy policy;  ///< the policy that served the fault (on_touch for first touches and hits)
};

/// Serves one access by GPU `gpu`. `policy_for(write)` returns the object's policy for a shared
/// fault and is called exactly once per shared fault, never otherwise (OASIS's O-Table learns
/// from it). Does not change `e`; `apply` does.
///
/// A page on the host that was shared before it was evicted (`e.shared`) is not mistaken for a
/// private one (the paper's oversubscription fix, Section VI-D): its fault is shared, so the
/// object is consulted and the O-Table learns from it, and it is served by fetching the page
/// from the host whatever the policy says (the only copy is there: nothing to map remotely or
/// replicate from). The next GPU to fault on it then sees it held and gets the object's policy.
template <class PolicyFor>
[[nodiscard]] WARPVM_HD Decision decide(const DirectoryEntry& e, unsigned gpu, bool write, PolicyFor&& policy_for) {
  if (e.owner == owner_host) {
    if (e.shared == 0) return {Action::fetch_from_host, PlacementFault::first_touch, PagePolicy::on_touch};
    return {Action::fetch_from_host, PlacementFault::shared, policy_for(write)};
  }
  // Where place_on_gpus() put a page says nothing about who writes it: another GPU's write there
  // is a first touch, not a shared write that would teach the object access-counter. A read is
  // served as shared (a replica under duplication: the placed copy stays useful if its GPU
  // reads too). A page its owner has written is no longer placed (owner_write_ends_placement):
  // another GPU's write to it is a shared write. The owner's reads are hits and end nothing, so
  // a page the owner has only read is still taken by a write.
  if (e.placed != 0 && write && e.owner != gpu)
    return {Action::take_placed, PlacementFault::first_touch, PagePolicy::on_touch};
  const bool replicated = e.replicas != 0;
  const bool copy = e.has_copy(gpu);
  if (!write || !replicated) {
    if (copy) return {Action::local, PlacementFault::none, PagePolicy::on_touch};
    if (e.maps_remote(gpu)) return {Action::remote, PlacementFault::none, PagePolicy::on_touch};
  }
  // A shared fault: no usable mapping, or a write to a replicated page (a protection fault).
  const PagePolicy policy = policy_for(write);
  if (write && replicated) {
    // Replicas are collapsed whatever the policy. A writer that already holds a copy keeps it
    // (nothing to pull); otherwise access-counter keeps the owner and maps it remotely.
    if (copy || policy != PagePolicy::access_counter) return {Action::collapse_and_own, PlacementFault::shared, policy};
    return {Action::collapse_and_map_remote, PlacementFault::shared, policy};
  }
  switch (policy) {
    case PagePolicy::access_counter: return {Action::map_remote, PlacementFault::shared, policy};
    case PagePolicy::duplication:
      return {write ? Action::migrate : Action::replicate, PlacementFault::shared, policy};
    case PagePolicy::on_touch: break;
  }
  return {Action::migrate, PlacementFault::shared, policy};
}

/// What a transition did, for the caller to carry out (copies, shootdowns) and to account.
struct Effects {
  std::uint8_t source = owner_host;  ///< where a pulled page came from (owner_host: the host)
  bool pulled = false;               ///< one page copied into the requester
  unsigned invalidated = 0;          ///< other GPUs' mappings (copies or remote) dropped
};

/// Performs the directory transition of `action` for GPU `gpu` (the lock held on a device).
WARPVM_HD_INLINE Effects apply(DirectoryEntry& e, unsigned gpu, Action action) {
  const std::uint64_t me = std::uint64_t{1} << gpu;
  Effects fx;
  // Every other action serves a shared fault (or a counter migration): the page is shared for good.
  if (action != Action::local && action != Action::remote && action != Action::fetch_from_host &&
      action != Action::take_placed)
    e.shared = 1;
  if (action != Action::local && action != Action::remote) e.placed = 0;  // a transition ends the placement
  switch (action) {
    case Action::local:
    case Action::remote: break;
    case Action::fetch_from_host:
      fx.pulled = true;
      e.owner = static_cast<std::uint8_t>(gpu);
      break;
    case Action::migrate:
    case Action::counter_migrate:
    case Action::collapse_and_own:
    case Action::take_placed: {
      const bool had_copy = e.has_copy(gpu);
      fx.source = e.owner;
      fx.pulled = !had_copy;
      const std::uint64_t owner_bit = e.owner == owner_host ? 0 : std::uint64_t{1} << e.owner;
      const std::uint64_t others = (e.replicas | e.remote | owner_bit) & ~me;
      fx.invalidated = static_cast<unsigned>(cuda::std::popcount(others));
      e.owner = static_cast<std::uint8_t>(gpu);
      e.replicas = 0;
      e.remote = 0;
      break;
    }
    case Action::map_remote: e.remote |= me; break;
    case Action::replicate:
      fx.source = e.owner;
      fx.pulled = true;
      e.replicas |= me;
      e.remote &= ~me;
      break;
    case Action::collapse_and_map_remote:
      fx.invalidated = static_cast<unsigned>(cuda::std::popcount(e.replicas & ~me));
      e.replicas = 0;
      e.remote |= me;
      break;
  }
  return fx;
}

/// What an eviction did.
struct EvictEffects {
  bool to_host = false;                 ///< the evicting GPU was the sole owner: the page is on the host again
  std::uint8_t new_owner = owner_host;  ///< the owner after the eviction
};

/// GPU `gpu` gives up its own copy of the page (`e.has_copy(gpu)`, the lock held on a device):
///  - a replica is dropped; nothing moves, the owner and the remote mappers are untouched;
///  - an owner with replicas hands the page to its lowest-numbered replica, which becomes the
///    owner with the frame it has (no copy); remote mappers then map the new owner's frame;
///  - a sole owner's page goes back to the host (the caller writes it back if it is dirty) and
///    every remote mapping is dropped.
/// `shared` is kept: a page evicted after being shared stays shared on its next fault (decide()).
/// A placed page (an exclusive one) goes to the host and is placed no more.
WARPVM_HD_INLINE EvictEffects evict_copy(DirectoryEntry& e, unsigned gpu) {
  const std::uint64_t me = std::uint64_t{1} << gpu;
  EvictEffects fx;
  e.placed = 0;
  if (e.owner != gpu) {
    e.replicas &= ~me;
    fx.new_owner = e.owner;
  } else if (e.replicas != 0) {
    const auto heir = static_cast<std::uint8_t>(cuda::std::countr_zero(e.replicas));
    e.replicas &= ~(std::uint64_t{1} << heir);
    e.owner = heir;
    fx.new_owner = heir;
  } else {
    e.owner = owner_host;
    e.remote = 0;
    fx.to_host = true;
  }
  return fx;
}

/// place_on_gpus() after GPU `gpu` read the page through the fault path: the page is marked
/// placed when that read was its first touch (it is `gpu`'s alone and was never shared; a page
/// shared before it went back to the host was read through a shared fault and stays unplaced).
/// True if it marked the page.
WARPVM_HD_INLINE bool mark_placed(DirectoryEntry& e, unsigned gpu) {
  if (e.owner != gpu || e.replicas != 0 || e.remote != 0 || e.shared != 0) return false;
  e.placed = 1;
  return true;
}

/// The owner's first write to its page (on a device, the write upgrade of a mapping placed
/// read-only): the owner uses the page, so it is placed no more and another GPU's write to it
/// is a shared fault. True if it ended a placement.
WARPVM_HD_INLINE bool owner_write_ends_placement(DirectoryEntry& e, unsigned gpu) {
  if (e.placed == 0 || e.owner != gpu) return false;
  e.placed = 0;
  return true;
}

// ---- access counters ------------------------------------------------------------------------

/// Counts `n` remote accesses by one GPU to one 64 KB group; true for the one call whose count
/// crosses `threshold` (that caller migrates the group; the count restarts from what exceeded it).
WARPVM_HD_INLINE bool count_remote(std::uint32_t& counter, std::uint32_t n, std::uint32_t threshold) {
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> ref(counter);
  const std::uint32_t before = ref.fetch_add(n, cuda::std::memory_order_relaxed);
  if (before < threshold && before + n >= threshold) {
    ref.fetch_sub(threshold, cuda::std::memory_order_relaxed);
    return true;
  }
  return false;
}

// ---- the O-Table ----------------------------------------------------------------------------

/// One object's O-Table entry in one 32-bit word: bits 0-23 the shared faults since the last
/// phase boundary (`count`), bits 24-25 the policy (on_touch until the first shared fault, then
/// access_counter or duplication; never on_touch again). The paper's PF Count is `count % reset`:
/// fault number k of a phase (from 0) relearns exactly when k % reset == 0, as a count that goes
/// back to zero on reaching the reset threshold would. Keeping the count free-running is what
/// lets the device form be a single fetch_add (no CAS loop): see otable_shared_fault.
namespace otable {
inline constexpr unsigned policy_shift = 24;
inline constexpr std::uint32_t count_mask = (std::uint32_t{1} << policy_shift) - 1;
inline constexpr std::uint32_t max_reset_threshold = 255;

[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint32_t count(std::uint32_t word) { return word & count_mask; }
[[nodiscard]] WARPVM_HD_INLINE constexpr PagePolicy policy(std::uint32_t word) {
  return static_cast<PagePolicy>((word >> policy_shift) & 3u);
}
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint32_t make(PagePolicy p, std::uint32_t n) {
  return static_cast<std::uint32_t>(p) << policy_shift | (n & count_mask);
}
/// The paper's PF Count: shared faults since the policy was last (re)learned.
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint32_t pf_count(std::uint32_t word, std::uint32_t reset_threshold) {
  return count(word) % reset_threshold;
}
/// What a relearning shared fault sets: a read duplication, a write access-counter.
[[nodiscard]] WARPVM_HD_INLINE constexpr PagePolicy learned_from(bool write) {
  return write ? PagePolicy::access_counter : PagePolicy::duplication;
}
/// The count is folded back by this multiple of the reset threshold by the one fault that finds
/// it there, so it never carries into the policy bits (concurrent faults add at most a few
/// thousand more before the fold lands) and `count % reset` is unchanged.
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint32_t fold_point(std::uint32_t reset_threshold) {
  return (std::uint32_t{1} << (policy_shift - 1)) / reset_threshold * reset_threshold;
}

/// The entry after one shared fault, as the paper's state diagram: a fault with PF Count zero
/// (re)learns the policy (a read: duplication, a write: access-counter); the others keep it.
/// The fault is served with policy(after(word, ...)). The sequential specification of
/// otable_shared_fault.
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint32_t after_shared_fault(std::uint32_t word, bool write,
                                                                       std::uint32_t reset_threshold) {
  const std::uint32_t n = count(word);
  const PagePolicy p = n % reset_threshold == 0 ? learned_from(write) : policy(word);
  return make(p, n == fold_point(reset_threshold) ? 1 : n + 1);
}

/// An explicit phase boundary (a kernel launch, `begin_phase`): the next shared fault relearns.
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint32_t after_phase(std::uint32_t word) { return word & ~count_mask; }
}  // namespace otable

/// The device form of a shared fault on an object: one fetch_add on its O-Table word, plus - only
/// on a relearning fault whose policy differs from the recorded one - one or two atomics that
/// publish the new policy. Returns the policy that serves the fault. `reset_threshold` in
/// [1, otable::max_reset_threshold].
///
/// Why not a CAS loop (the first form): every shared fault of every GPU updates this one word,
/// and under contention a CAS loop retires one fault per round trip (a cross-GPU one for all GPUs
/// but the word's), which serialised transpose's 131K shared faults (0.12 s on 2 x H200). The
/// fetch_add never retries. What it gives up: the policy a relearning fault picks is published
/// just after its count was taken, so a fault concurrent with it (within that one round trip) is
/// served with the policy before the relearn; a fault that finds the object still on-touch in
/// that window (only around the first shared fault of the object) decides for itself as a
/// relearning fault would, so nothing is served on-touch after a shared fault. Sequentially
/// (one fault at a time, the host tests and the simulator) the result is exactly
/// otable::after_shared_fault.
WARPVM_HD_INLINE PagePolicy otable_shared_fault(std::uint32_t& word, bool write, std::uint32_t reset_threshold) {
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> ref(word);
  const std::uint32_t before = ref.fetch_add(1u, cuda::std::memory_order_relaxed);
  const std::uint32_t n = otable::count(before);
  const std::uint32_t fold = otable::fold_point(reset_threshold);
  if (n == fold) ref.fetch_sub(fold, cuda::std::memory_order_relaxed);
  const PagePolicy recorded = otable::policy(before), learned = otable::learned_from(write);
  if (n % reset_threshold != 0) return recorded == PagePolicy::on_touch ? learned : recorded;
  if (learned == recorded) return learned;
  // Publish without passing through on-touch (00): access-counter is 01, duplication 11.
  constexpr std::uint32_t low = std::uint32_t{1} << otable::policy_shift, high = low << 1;
  if (learned == PagePolicy::duplication) {
    ref.fetch_or(low | high, cuda::std::memory_order_relaxed);
  } else {
    ref.fetch_or(low, cuda::std::memory_order_relaxed);
    ref.fetch_and(~high, cuda::std::memory_order_relaxed);
  }
  return learned;
}

/// The policy a shared fault on the object is served with, read without counting a fault: for a
/// fault decided again (after its pool was full) that otable_shared_fault has already counted.
/// An object still on-touch is read as otable_shared_fault serves it (the policy a relearning
/// fault learns), so nothing is served on-touch after a shared fault.
[[nodiscard]] WARPVM_HD_INLINE PagePolicy otable_policy_for(std::uint32_t& word, bool write) {
  const cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> ref(word);
  const PagePolicy recorded = otable::policy(ref.load(cuda::std::memory_order_relaxed));
  return recorded == PagePolicy::on_touch ? otable::learned_from(write) : recorded;
}

/// The device form of a phase boundary for one object.
WARPVM_HD_INLINE void otable_begin_phase(std::uint32_t& word) {
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(word).fetch_and(~otable::count_mask,
                                                                              cuda::std::memory_order_relaxed);
}

// ---- the directory lock (device form) -------------------------------------------------------

/// Claims the right to change a page's directory entry. Acquire: the previous holder's field
/// writes are visible.
WARPVM_HD_INLINE bool directory_try_lock(DirectoryEntry& e) {
  std::uint32_t expected = 0;
  return cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(e.lock).compare_exchange_strong(
      expected, 1u, cuda::std::memory_order_acquire, cuda::std::memory_order_relaxed);
}

/// Publishes the entry's new fields and releases it.
WARPVM_HD_INLINE void directory_unlock(DirectoryEntry& e) {
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(e.lock).store(0u, cuda::std::memory_order_release);
}

}  // namespace warpvm::detail
