#pragma once
/// @file
/// OASIS when GPU memory runs short (issue #31): a capacity-aware controller over the O-Table.
/// Pure __host__ __device__ code without CUDA runtime calls, like placement.hpp, so that
/// warpvm-sim and a GPU fault handler can make the same decisions.
///
/// Duplication is what OASIS learns for every shared-read object, and a replica costs a frame in
/// every reading GPU's pool. In core that is free; when the pools are smaller than what the
/// replicas need, each replica evicts another page (often a replica the GPU will read again, or
/// a dirty page that has to go to the host), and duplication loses to policies that keep one copy.
///
/// The signal. Per object and GPU, the number of *redundant copies* of the object's pages the
/// GPU's pool has evicted since the last phase boundary: copies that were not the page's only one
/// (a replica dropped, or an owner that handed its page to a replica; `evict_copy`). It is zero
/// whenever no pool evicts, so in core it is silent by construction, whatever the pools' fill
/// level (the two signals tried before, a pool that has evicted once and a pool 90% full, fired
/// for objects whose replicas were never at risk, or in core). It names the object whose
/// replicas are being pushed out, not just a full pool, and a pool that evicts only the pages it
/// owns (private data streaming through) never raises it. The threshold keeps an isolated
/// eviction silent: on a GPU a frame-pool scan that misses its window may evict while free frames
/// remain elsewhere (frame_pool.hpp).
///
/// The controller. For a shared fault on an object under pressure on the faulting GPU, a learned
/// duplication is served as access-counter: a read maps the owner's frame instead of pulling a
/// replica (no frame taken), a write to a replicated page collapses the replicas (frames given
/// back). The access counters then find the reuse a replica pays for: when a GPU's count for a
/// group crosses the threshold, each page of it that the GPU maps remotely is replicated there
/// rather than migrated (a migration would take the page from the other GPUs that read it, which
/// would map it back and pass it around on their own counters). The O-Table learns exactly as
/// before; only the actions serving the object change, and only while the signal is on. With the
/// signal off every decision is today's, bit for bit.

#include "warpvm/detail/host_device.hpp"
#include "warpvm/detail/policy/placement.hpp"

#include <cuda/atomic>

#include <cstdint>

namespace warpvm::detail {

/// Redundant copies of one object one GPU's pool may evict in a phase before that GPU stops
/// replicating the object. 0 turns the controller off.
inline constexpr std::uint32_t default_pressure_evictions = 32;

namespace capacity {
/// The eviction counts toward the signal: it dropped a copy that was not the page's only one.
[[nodiscard]] WARPVM_HD_INLINE constexpr bool evicted_a_redundant_copy(const EvictEffects& fx) { return !fx.to_host; }

/// The signal: `evicted_copies` (this phase, one object, one GPU) reached `threshold` (0: never).
[[nodiscard]] WARPVM_HD_INLINE constexpr bool under_pressure(std::uint32_t evicted_copies, std::uint32_t threshold) {
  return threshold != 0 && evicted_copies >= threshold;
}

/// The controller: the policy that serves a shared fault whose object's O-Table says `learned`.
[[nodiscard]] WARPVM_HD_INLINE constexpr PagePolicy served_policy(PagePolicy learned, bool pressure) {
  return pressure && learned == PagePolicy::duplication ? PagePolicy::access_counter : learned;
}

/// The controller: what a GPU whose access counter crossed the threshold does to each page of
/// the group it maps remotely (every object but one the controller serves remotely: migrates it).
[[nodiscard]] WARPVM_HD_INLINE constexpr Action counter_action(PagePolicy learned, bool pressure) {
  return served_policy(learned, pressure) != learned ? Action::replicate : Action::counter_migrate;
}
}  // namespace capacity

/// The device form of the signal's count: GPU `gpu`'s eviction `fx` of a page of the object whose
/// word (for that GPU) is `evicted_copies`. One relaxed fetch_add, on the eviction path only.
WARPVM_HD_INLINE void pressure_count_eviction(std::uint32_t& evicted_copies, const EvictEffects& fx) {
  if (capacity::evicted_a_redundant_copy(fx))
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(evicted_copies).fetch_add(1u, cuda::std::memory_order_relaxed);
}

/// The signal for an object whose O-Table says `learned`, read from `evicted_copies` (relaxed: a
/// fault racing an eviction may see either count). Off, or for a policy the controller does not
/// change, it loads nothing.
[[nodiscard]] WARPVM_HD_INLINE bool pressure_on(PagePolicy learned, std::uint32_t& evicted_copies, std::uint32_t threshold) {
  if (threshold == 0 || learned != PagePolicy::duplication) return false;
  return capacity::under_pressure(
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(evicted_copies).load(cuda::std::memory_order_relaxed),
      threshold);
}

/// The controller around the O-Table, as the model and the GPU fault path both call it: the
/// policy that serves a shared fault whose object's O-Table says `learned`, on the GPU whose
/// count for the object is `evicted_copies`.
[[nodiscard]] WARPVM_HD_INLINE PagePolicy pressure_served_policy(PagePolicy learned, std::uint32_t& evicted_copies,
                                                                 std::uint32_t threshold) {
  return capacity::served_policy(learned, pressure_on(learned, evicted_copies, threshold));
}

/// The controller on the access-counter path, as the model and the GPU fault path both call it:
/// what the GPU whose count for the object is `evicted_copies`, and whose access counter for a
/// group crossed the threshold, does to each page of it that it maps remotely (the object's
/// O-Table word is `otable_word`). Off, it reads neither word: the counter path stays today's.
[[nodiscard]] WARPVM_HD_INLINE Action pressure_counter_action(std::uint32_t& otable_word, std::uint32_t& evicted_copies,
                                                              std::uint32_t threshold) {
  if (threshold == 0) return Action::counter_migrate;
  const PagePolicy learned = otable::policy(
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(otable_word).load(cuda::std::memory_order_relaxed));
  return capacity::counter_action(learned, pressure_on(learned, evicted_copies, threshold));
}

/// The device form of a phase boundary for one object and GPU: the count starts again.
WARPVM_HD_INLINE void pressure_begin_phase(std::uint32_t& evicted_copies) {
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(evicted_copies).store(0u, cuda::std::memory_order_relaxed);
}

}  // namespace warpvm::detail
