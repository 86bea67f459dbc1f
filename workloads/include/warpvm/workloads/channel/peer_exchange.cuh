#pragma once
// The GPU-to-GPU side of warpvm-channel-bench's workloads (stencil2gpu, kmeans2gpu, gemm2gpu,
// bfs2gpu, bitonic2gpu, pingpong2gpu): each GPU runs one persistent kernel; every iteration one
// block of each GPU (the exchange block) produces data for the other GPU and meets the other's.
// Here: the device-side watchdog and waits, one step's exchange in each mode (PeerExchange,
// peer_announce, peer_meet), and channel_warp's monitor kernel (the channel tests' too).

#include "warpvm/workloads/channel/wait_modes.cuh"

#include <cuda/atomic>
#include <cuda/std/optional>

#include <cstdint>
#include <cstdio>

namespace warpvm::workloads {

/// Device-side waits of the GPU-to-GPU kernels give up after this long (a publish that never
/// comes, a peer kernel that failed): a message and a trap instead of a hang.
constexpr std::uint64_t peer_watchdog_ns = 10'000'000'000ull;

/// Gives up (message, trap) once a wait that began at `since` passed the watchdog.
__device__ inline void peer_watchdog(const char* workload, std::uint64_t since, const char* what, std::uint32_t k) {
  if (detail::global_timer_ns() - since < peer_watchdog_ns) return;
  printf("%s: block %u waited %llu s for %s (iteration %u); giving up\n", workload, blockIdx.x,
         static_cast<unsigned long long>(peer_watchdog_ns / 1000000000ull), what, k);
  __trap();
}

/// One thread: waits until `word`, which other blocks of this GPU (or, at system scope, the other
/// GPU) count up with release stores, reaches `target` (acquire loads, `__nanosleep(64)` between
/// them); gives up at the watchdog, naming `what` and step `k` of `workload`.
template <cuda::thread_scope Scope = cuda::thread_scope_system>
__device__ inline void wait_at_least(std::uint32_t& word, std::uint32_t target, const char* workload, const char* what,
                                     std::uint32_t k) {
  const std::uint64_t since = detail::global_timer_ns();
  cuda::atomic_ref<std::uint32_t, Scope> counted(word);
  for (std::uint32_t polls = 1; counted.load(cuda::std::memory_order_acquire) < target; ++polls) {
    __nanosleep(64);
    if (polls % 1024 == 0) peer_watchdog(workload, since, what, k);
  }
}

/// Block-collective: thread 0 waits as wait_at_least while the block waits at a barrier
/// (block_waits_for_thread0); every warp stamps the wait in the row of its global warp index.
template <cuda::thread_scope Scope = cuda::thread_scope_system>
__device__ inline void block_waits_at_least(std::uint32_t& word, std::uint32_t target, const Stamps& stamps,
                                            const char* workload, const char* what, std::uint32_t k) {
  const std::uint64_t began = detail::global_timer_ns();
  const std::uint64_t arrived = block_waits_for_thread0([&] { wait_at_least<Scope>(word, target, workload, what, k); });
  stamps.wait(blockIdx.x * block_warps + threadIdx.x / 32, began, arrived);
}

/// Block-collective: the next entry of the task queue whose head is `*head` (thread 0 takes it
/// for the block).
__device__ inline std::uint32_t block_takes_task(std::uint32_t* head) {
  __shared__ std::uint32_t taken;
  if (threadIdx.x == 0) taken = atomicAdd(head, 1u);
  __syncthreads();
  const std::uint32_t q = taken;
  __syncthreads();  // every thread has read it before thread 0 takes the next
  return q;
}

/// How a GPU-to-GPU kernel hands the data of each step to the other GPU and learns that the
/// other's is there. Channel modes: one tag per step. Baselines: the producer stores its data into
/// the consumer's memory (its mailbox), then the count of steps sent so far into `published`.
struct PeerExchange {
  WaitMode mode;                  ///< channel, channel_direct, peer_flag, naive or atomic_wait
  channel_handle from_neighbour;  ///< this GPU's channel
  channel_producer to_neighbour;  ///< the neighbour's channel (its buffer: this GPU's memory for channel; for channel_direct the neighbour's by default)
  std::uint32_t* published;            ///< this GPU's memory; naive: managed memory
  std::uint32_t* neighbour_published;  ///< the neighbour's `published`
  unsigned* blocks_done;               ///< channel_warp: this GPU's blocks that ended (its monitor warp stops at all)
};

/// Block-collective, the last thing every block of a GPU-to-GPU kernel does: in channel_warp
/// mode, counts the block off, after all its warps' acquires.
__device__ inline void peer_block_done(const PeerExchange& x) {
  if (x.mode != WaitMode::channel_warp) return;
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(x.blocks_done, 1u);
}

/// channel_warp: the monitor warp of one GPU's channel (one block of 32 threads, on a stream of
/// its own), until `*finished` reaches `target` (the bench: the blocks of that GPU's workload
/// kernel that ended; the tests: consumer warps); its lists in the block's dynamic shared memory
/// when `lists_in_shared` (launched with channel::monitor_scratch_bytes).
__global__ void pair_monitor_kernel(channel_handle ch, const unsigned* finished, unsigned target, bool lists_in_shared) {
  extern __shared__ uint4 monitor_scratch[];
  ch.monitor(
      [&] {
        return cuda::atomic_ref<const unsigned, cuda::thread_scope_device>(*finished)
                   .load(cuda::std::memory_order_relaxed) >= target;
      },
      lists_in_shared ? monitor_scratch : nullptr);
}

/// One thread: waits until the neighbour has announced `count` steps (acquire, system scope: the
/// neighbour's release store follows its data's peer stores).
__device__ inline void peer_wait_published(const PeerExchange& x, const char* workload, std::uint32_t count,
                                           std::uint32_t k) {
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> published(*x.published);
  const std::uint64_t since = detail::global_timer_ns();
  if (x.mode == WaitMode::atomic_wait) {
    // libcu++'s wait returns once the word differs from `seen` (docs/bench/channel.md, "Modes": a backoff loop)
    for (std::uint32_t seen = published.load(cuda::std::memory_order_acquire); seen < count;
         seen = published.load(cuda::std::memory_order_acquire))
      published.wait(seen, cuda::std::memory_order_acquire);
    return;
  }
  for (std::uint32_t polls = 1;; ++polls) {
    // naive: Algorithm 1 polls with atomicAdd(&flag, 0) on managed memory (an acquire RMW here,
    // so that the data's stores are visible after it)
    const std::uint32_t seen = x.mode == WaitMode::naive ? published.fetch_add(0u, cuda::std::memory_order_acquire)
                                                         : published.load(cuda::std::memory_order_acquire);
    if (seen >= count) return;
    if (polls % 1024 == 0) peer_watchdog(workload, since, "the other GPU's data", k);
  }
}

/// Thread 0 of the exchange block, after a __syncthreads that follows every store of step
/// `state`'s data: announces it (release at system scope, cumulative over the block's stores).
__device__ inline void peer_announce(const PeerExchange& x, std::uint32_t state) {
  if (uses_channel(x.mode)) {
    if (!x.to_neighbour.publish(state, 1)) __trap();  // tags are the steps: cannot be past the last
  } else {
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(*x.neighbour_published)
        .store(state + 1, cuda::std::memory_order_release);
  }
}

/// What a warp of the exchange block got from the other GPU, readable until release().
struct PeerWindow {
  const std::byte* data = nullptr;
  cuda::std::optional<channel_data> grant;  ///< channel modes

  /// Word i of the window: the channel's data (staging, or the neighbour's buffer in place) with
  /// plain loads; the mailbox, rewritten by the peer while the kernel runs, from L2.
  template <class T>
  __device__ T load(std::uint32_t i) const {
    const T* at = reinterpret_cast<const T*>(data) + i;
    return grant ? *at : __ldcg(at);
  }
  /// Warp-collective: done reading.
  __device__ void release() const {
    if (grant) grant->release();
  }
};

/// Every warp of the exchange block (naive mode: block-collective): waits for the other GPU's data
/// of step `state` and returns this warp's window of it, `bytes` from `channel_offset` of the
/// channel's buffer (channel modes) or `mailbox` (baselines). Stamps the wait in `stamp_row`.
__device__ inline PeerWindow peer_meet(const PeerExchange& x, const char* workload, std::uint32_t state,
                                       std::uint32_t bytes, std::uint64_t channel_offset, const void* mailbox,
                                       const Stamps& stamps, std::uint32_t stamp_row) {
  // The warp's lanes together: a caller may come here straight from a branch that only some of
  // them took (kmeans2gpu: thread 0's publish), and acquire is collective over the lanes active
  // at the call, so a warp still diverged would acquire twice, as two groups (docs/bench/channel.md,
  // "What was tried").
  __syncwarp();
  const std::uint64_t began = detail::global_timer_ns();
  PeerWindow window;
  std::uint64_t arrived = 0;  // only lane 0's is recorded
  if (uses_channel(x.mode)) {  // channel_direct: the window in place, in the buffer's GPU
    window.grant.emplace(x.from_neighbour.acquire(state, 1, bytes, channel_offset));
    window.data = window.grant->data();
    arrived = detail::global_timer_ns();
  } else if (x.mode == WaitMode::naive) {  // Algorithm 1: the block waits, thread 0 polls
    window.data = static_cast<const std::byte*>(mailbox);
    arrived = block_waits_for_thread0([&] { peer_wait_published(x, workload, state + 1, state); });
  } else {
    window.data = static_cast<const std::byte*>(mailbox);
    if (threadIdx.x % 32 == 0) peer_wait_published(x, workload, state + 1, state);
    __syncwarp();
    arrived = detail::global_timer_ns();  // lane 0's, after its own wait
  }
  stamps.wait(stamp_row, began, arrived);
  return window;
}

}  // namespace warpvm::workloads
