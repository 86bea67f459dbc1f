#pragma once
/// @file
/// Small device-side helpers: lane arithmetic, timers, sharded counters, the error record.

#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/error.hpp"

#include <cuda/atomic>

#include <cstdint>

namespace warpvm::detail {

__device__ __forceinline__ unsigned lane_id() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

/// The lowest lane of a non-empty lane mask: the leader a warp-level group elects.
__device__ __forceinline__ unsigned first_lane(unsigned mask) { return static_cast<unsigned>(__ffs(mask) - 1); }

__device__ __forceinline__ unsigned lanemask_lt() {
  unsigned mask;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(mask));
  return mask;
}

__device__ __forceinline__ unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

/// This warp's index across the grid, for any block shape: (block index x warps per block) +
/// warp in block.
__device__ __forceinline__ std::uint32_t global_warp_index() {
  const unsigned threads_per_block = blockDim.x * blockDim.y * blockDim.z;
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  return block * ((threads_per_block + 31) / 32) + thread / 32;
}

__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Adds to a counter in this SM's shard (a fire-and-forget reduction).
__device__ __forceinline__ void count_event(const CacheView& cache, Counter counter, std::uint64_t n) {
  auto* slot = cache.counters + (sm_id() % counter_shards) * counter_count +
               static_cast<std::uint32_t>(counter);
  atomicAdd(reinterpret_cast<unsigned long long*>(slot), static_cast<unsigned long long>(n));
}

/// Puts a kernel's first failure on record for the host (a runtime's, a channel's or a
/// multi-GPU space's); later ones are dropped, since the first is the cause. The claim word
/// goes 0 (nothing recorded) -> 1 (being written) -> 2 (on record); the host sets it back to 0
/// once it has read the record. `write` stores the record (plain stores to mapped host memory,
/// readable even after a trap). Returns whether this thread's failure is the one recorded.
template <cuda::thread_scope Scope = cuda::thread_scope_device, class Write>
__device__ bool record_first_failure(std::uint32_t* claim_word, Write&& write) {
  cuda::atomic_ref<std::uint32_t, Scope> claim(*claim_word);
  std::uint32_t nothing_recorded = 0;
  if (!claim.compare_exchange_strong(nothing_recorded, 1u, cuda::std::memory_order_relaxed)) return false;
  write();
  __threadfence_system();
  claim.store(2u, cuda::std::memory_order_release);
  return true;
}

/// Ends the kernel, but only once the first failure is on record: a thread that lost the claim
/// and trapped at once could end the kernel before the winner's stores land, leaving the host
/// a bare launch failure instead of the cause. The wait is bounded (a second).
template <cuda::thread_scope Scope = cuda::thread_scope_device>
__device__ void trap_once_recorded(std::uint32_t* claim_word) {
  cuda::atomic_ref<std::uint32_t, Scope> claim(*claim_word);
  const std::uint64_t started = global_timer_ns();
  while (claim.load(cuda::std::memory_order_acquire) != 2u && global_timer_ns() - started < 1000000000ull)
    __nanosleep(1000);
  __trap();
}

/// Records a device-side failure for the host (Runtime::synchronize() raises it as a
/// warpvm::Error); the kernel goes on.
__device__ inline void record_error(const CacheView& cache, ErrorKind kind, std::uint32_t object_id,
                                    std::uint64_t index, std::uint64_t limit,
                                    ErrorSite site = ErrorSite::element_access) {
  record_first_failure(cache.error_claim, [&] {
    volatile ErrorRecord* record = cache.error;
    record->kind = static_cast<std::uint32_t>(kind);
    record->object_id = object_id;
    record->site = static_cast<std::uint32_t>(site);
    record->index = index;
    record->limit = limit;
    __threadfence_system();
    record->state = error_state_set;
  });
}

/// Records a failure the kernel cannot go on from (no frame to evict, no host service) and ends
/// the kernel once the first failure is on record.
__device__ inline void fail_kernel(const CacheView& cache, ErrorKind kind, std::uint32_t object_id,
                                   std::uint64_t index, std::uint64_t limit) {
  record_error(cache, kind, object_id, index, limit);
  trap_once_recorded(cache.error_claim);
}

}  // namespace warpvm::detail
