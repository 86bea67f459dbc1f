#pragma once
// How the consumer warps of warpvm-channel-bench's workloads meet the producer's data (WaitMode),
// shared by the CPU-to-GPU kernels (channel_workloads.cuh), the GPU-to-GPU ones (peer_exchange.cuh
// and the *2gpu.cuh kernels) and the tests. Every waiting warp stamps when it started waiting and
// when its data had arrived (%globaltimer) for the metrics of overlap_metric.hpp. CPU to GPU,
// meet() hands a consumer warp its window of the host's buffer in the mode's way, and Launch is
// what every CPU-to-GPU kernel gets besides its own data.

#include "warpvm/workloads/channel/pair_schedules.hpp"
#include "warpvm/channel.hpp"

#include <cuda/atomic>
#include <cuda/std/optional>

#include <cstdint>

namespace warpvm::workloads {

// CPU to GPU, four ways to meet the data:
//
//   channel       warpvm::channel: the warp posts a request and parks on a device word; the
//                 monitor thread copies the data into staging and wakes it
//   pinned_flag   lane 0 of each consumer warp spins on per-tag flags in pinned host memory
//                 (an acquire load over PCIe per poll), then the warp copies the data from pinned
//                 memory into device memory
//   naive         the paper's Algorithm 1: per block, __syncthreads, thread 0 spins on the flags
//                 in pinned host memory, __syncthreads, then the data is copied from pinned
//                 memory. The paper polls with atomicAdd(&flag, 0) on managed memory; on the lent
//                 H200 (no host-native atomics) a device atomicAdd on pinned host memory never saw
//                 the host's store (the kernel hung), so thread 0 polls with a system-scope
//                 acquire load instead: the same spin, one PCIe read each
//   atomic_wait   lane 0 calls cuda::atomic_ref<uint32_t, thread_scope_system>::wait(0) on each
//                 flag (libcu++'s device wait: loads with an exponential nanosleep backoff)
//
// GPU to GPU, peer_flag replaces pinned_flag: the producing kernel stores its row into the other
// GPU's memory over NVLink, then a flag there, on which lane 0 of each consumer warp spins; and
// channel_direct is the channel in direct mode: consumer warps poll the device availability map
// in their own GPU's memory and read the row in place (by default their own GPU's memory, which
// the producer's stores fill over NVLink), no host monitor involved; channel_warp is the channel
// with a monitor warp: consumer warps post requests and park, and a one-warp kernel beside the
// workload's polls the map and wakes them (data in place, as channel_direct).

/// How consumer warps meet the producer's data.
enum class WaitMode : std::uint32_t {
  channel,      ///< warpvm::channel: acquire parks the warp; the data arrives in staging
  pinned_flag,  ///< lane 0 of each warp spins on per-tag flags in pinned host memory (acquire loads)
  naive,        ///< the paper's Algorithm 1: per block, __syncthreads, thread 0 spins, __syncthreads
  atomic_wait,  ///< lane 0 calls cuda::atomic_ref<..., thread_scope_system>::wait on each flag
  peer_flag,    ///< GPU to GPU: lane 0 of each warp spins on a flag in its GPU's memory that the peer stores
  channel_direct,  ///< GPU to GPU: warpvm::channel in direct mode: acquire polls the device map, reads in place
  /// GPU to GPU: warpvm::channel with a monitor warp (a one-warp kernel beside the workload's):
  /// acquire posts a request and parks, the monitor warp polls the map and wakes; reads in place
  channel_warp,
};

/// Whether the mode meets the data through a warpvm::channel (host monitor, direct or monitor warp).
__host__ __device__ constexpr bool uses_channel(WaitMode mode) {
  return mode == WaitMode::channel || mode == WaitMode::channel_direct || mode == WaitMode::channel_warp;
}

/// The mode's name in flags and records.
inline const char* mode_name(WaitMode mode) {
  switch (mode) {
    case WaitMode::channel: return "channel";
    case WaitMode::pinned_flag: return "pinned_flag";
    case WaitMode::naive: return "naive";
    case WaitMode::atomic_wait: return "atomic_wait";
    case WaitMode::peer_flag: return "peer_flag";
    case WaitMode::channel_direct: return "channel_direct";
    case WaitMode::channel_warp: return "channel_warp";
  }
  return "?";
}

/// The modes the CPU-to-GPU workloads (tiles, cg, halo) run, and those the GPU-to-GPU ones run.
inline constexpr WaitMode cpu_to_gpu_modes[] = {WaitMode::channel, WaitMode::pinned_flag, WaitMode::naive,
                                                WaitMode::atomic_wait};
inline constexpr WaitMode gpu_pair_modes[] = {WaitMode::channel,   WaitMode::channel_direct, WaitMode::channel_warp,
                                              WaitMode::peer_flag, WaitMode::naive,          WaitMode::atomic_wait};

/// Per-warp stamps for the waiting metrics; a null `lives` records nothing.
struct Stamps {
  unsigned long long* lives;        ///< [warp][3]: start, end, (consumer << 32) | SM id
  unsigned long long* waits;        ///< [warp][capacity][2]: started waiting, data arrived
  std::uint32_t* wait_counts;       ///< [warp]
  std::uint32_t capacity;           ///< waits recorded per warp at most

  __device__ void wait(std::uint32_t warp, std::uint64_t began, std::uint64_t arrived) const {
    if (lives == nullptr || threadIdx.x % 32 != 0) return;
    const std::uint32_t i = wait_counts[warp];
    if (i >= capacity) return;  // sized for the workload; a longer run keeps its first waits
    waits[(std::uint64_t{warp} * capacity + i) * 2] = began;
    waits[(std::uint64_t{warp} * capacity + i) * 2 + 1] = arrived;
    wait_counts[warp] = i + 1;
  }
  __device__ void life(std::uint32_t warp, std::uint64_t started, bool consumer) const {
    if (lives == nullptr || threadIdx.x % 32 != 0) return;
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    lives[std::uint64_t{warp} * 3] = started;
    lives[std::uint64_t{warp} * 3 + 1] = detail::global_timer_ns();
    lives[std::uint64_t{warp} * 3 + 2] = (static_cast<std::uint64_t>(consumer) << 32) | sm;
  }
};

/// Where consumer warps find the producer's data.
struct Source {
  WaitMode mode;
  channel_handle ch;            ///< channel mode
  const std::byte* pinned;      ///< baselines: the producers' buffer (device address of mapped pinned memory)
  std::uint32_t* flags;         ///< baselines: one flag per tag in mapped pinned memory, 0 until published
  std::byte* scratch;           ///< baselines: `scratch_bytes` of device memory per consumer warp
  std::uint32_t scratch_bytes;
  Stamps stamps;
};

/// What a consumer warp reads until it calls finish().
struct Held {
  const std::byte* data = nullptr;
  cuda::std::optional<channel_data> grant;  ///< channel mode
};

__device__ inline void spin_on_flags(const Source& s, std::uint32_t first_tag, std::uint32_t tag_count) {
  for (std::uint32_t t = first_tag; t < first_tag + tag_count; ++t) {
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> flag(s.flags[t]);
    if (s.mode == WaitMode::atomic_wait) {
      flag.wait(0u, cuda::std::memory_order_acquire);  // returns once the flag is no longer 0
    } else {  // Algorithm 1 polls with atomicAdd(&flag, 0): see the comment above WaitMode (H200)
      while (flag.load(cuda::std::memory_order_acquire) != 1u) {
      }
    }
  }
}

/// Block-collective (Algorithm 1's shape): the block waits at a __syncthreads() while thread 0
/// runs `poll`; returns, to every thread, the time thread 0's poll ended: the end of the wait of
/// every warp of the block. Why not each warp's own %globaltimer read after the barrier: in the
/// SASS that read follows `BAR.SYNC.DEFER_BLOCKING`, yet the warps that only waited at the
/// barrier recorded waits of zero (kmeans2gpu's timeline, H200): a read that touches no memory
/// does not wait for the deferred barrier. Naive polling's `wait_share` and
/// `overlap_efficiency`, and kmeans2gpu's in every mode, described blocks that never waited.
///
/// `PollingThreads` 32: the whole first warp runs `poll` (a warp-collective wait, such as a
/// channel acquire one warp makes for its block) and thread 0 reads the time after it.
template <std::uint32_t PollingThreads = 1, class Poll>
__device__ std::uint64_t block_waits_for_thread0(Poll&& poll) {
  __shared__ std::uint64_t polled;
  __syncthreads();  // also: every thread has read the previous call's `polled` (and what `poll` shares)
  if (threadIdx.x < PollingThreads) {
    poll();
    if (threadIdx.x == 0) polled = detail::global_timer_ns();
  }
  __syncthreads();
  return polled;
}

/// Warp-collective (naive mode: block-collective, every warp of the block calls it): returns
/// `bytes` (a multiple of 4) of the producers' buffer from `offset` (a multiple of 4) once tags
/// [first_tag, +tag_count) are published, in device memory. The naive mode waits, per block, for
/// tags [block_first_tag, +block_tag_count), which must cover every warp's tags.
__device__ inline Held meet(const Source& s, std::uint32_t warp, std::uint32_t block_first_tag,
                            std::uint32_t block_tag_count, std::uint32_t first_tag, std::uint32_t tag_count,
                            std::uint32_t bytes, std::uint64_t offset) {
  const std::uint32_t lane = threadIdx.x % 32;
  __syncwarp();  // callers come from lane 0's work of the previous step: acquire as one group (see peer_meet)
  const std::uint64_t began = detail::global_timer_ns();
  Held held;
  if (s.mode == WaitMode::channel) {
    held.grant.emplace(s.ch.acquire(first_tag, tag_count, bytes, offset));
    held.data = held.grant->data();
    s.stamps.wait(warp, began, detail::global_timer_ns());
    return held;
  }
  if (s.mode == WaitMode::naive) {
    s.stamps.wait(warp, began, block_waits_for_thread0([&] { spin_on_flags(s, block_first_tag, block_tag_count); }));
  } else {
    if (lane == 0) spin_on_flags(s, first_tag, tag_count);
    __syncwarp();
    s.stamps.wait(warp, began, detail::global_timer_ns());  // lane 0's, after its own spin
  }
  // Into device memory first: the kernels read each word several times. 16-byte loads where the
  // source allows them (scratch_bytes is a multiple of 16).
  std::byte* to = s.scratch + std::uint64_t{warp} * s.scratch_bytes;
  if (bytes % 16 == 0 && offset % 16 == 0) {
    const auto* from = reinterpret_cast<const uint4*>(s.pinned + offset);
    for (std::uint32_t i = lane; i < bytes / 16; i += 32) reinterpret_cast<uint4*>(to)[i] = from[i];
  } else {
    const auto* from = reinterpret_cast<const std::uint32_t*>(s.pinned + offset);
    for (std::uint32_t i = lane; i < bytes / 4; i += 32) reinterpret_cast<std::uint32_t*>(to)[i] = from[i];
  }
  __syncwarp();
  held.data = to;
  return held;
}

/// Warp-collective: the warp is done reading what meet() returned.
__device__ inline void finish(Held& held) {
  if (held.grant) held.grant->release();
  else __syncwarp();  // the scratch is rewritten by this warp's next meet
}

/// Independent work for the compute blocks: an integer hash chain per thread.
__device__ inline void independent_work(std::uint32_t iterations, std::uint32_t* out) {
  const std::uint32_t thread = blockIdx.x * blockDim.x + threadIdx.x;
  std::uint32_t x = thread + 1;
  for (std::uint32_t i = 0; i < iterations; ++i) x = x * 1664525u + 1013904223u + (x >> 13);
  out[thread] = x;
}

/// What every workload kernel gets besides its own data.
struct Launch {
  Source source;
  std::uint32_t consumer_blocks;  ///< blocks [0, consumer_blocks) consume; the rest compute
  std::uint32_t compute_iterations;
  std::uint32_t* compute_out;     ///< one word per thread of the grid
  bool consumers_only, compute_only;
};

}  // namespace warpvm::workloads
