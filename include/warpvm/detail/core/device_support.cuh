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

/// Records the first device-side failure; later ones are dropped (the first is the cause).
/// The claim is a device word; the record itself is written with plain stores to mapped host
/// memory (no host-memory atomics needed) so that the host can read it even after a trap.
__device__ inline void record_error(const CacheView& cache, ErrorKind kind, std::uint32_t object_id,
                                    std::uint64_t index, std::uint64_t limit) {
  if (atomicExch(cache.error_claim, 1u) != 0u) return;
  volatile ErrorRecord* record = cache.error;
  record->kind = static_cast<std::uint32_t>(kind);
  record->object_id = object_id;
  record->index = index;
  record->limit = limit;
  __threadfence_system();
  record->state = error_state_set;
  __threadfence_system();
}

}  // namespace warpvm::detail
