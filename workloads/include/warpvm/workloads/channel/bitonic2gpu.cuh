#pragma once
// bitonic2gpu: the merge of a sort across two GPUs (issue #7's G_BS: scatter-gather, many
// transfers), after bitonic sort's last merge.
//
// Each GPU holds half of the keys and sorts them ascending (CUB's radix sort, before the kernel).
// The last merge of bitonic sort then compares key i of one half with key h - 1 - i of the other
// (h = keys per GPU): GPU 0 keeps the smaller of each pair, GPU 1 the larger, so GPU 0 ends with
// the lower half of all keys and GPU 1 with the upper, each as a bitonic sequence. So every key
// crosses NVLink: each GPU streams its sorted half to the other in chunks, highest chunk first
// (tag t = chunk C - 1 - t, which the other GPU's output chunk t pairs with). A bitonic sequence
// made of one ascending and one descending run is sorted by merging the two runs: a merge-path
// pass ends the kernel.
//
// One persistent kernel per GPU, every block resident. Block 0 (the exchange block) announces
// the chunks in tag order once their copies are written. The other blocks take tasks from one
// queue: first the C copies of this GPU's chunks into the other GPU's memory (the channel's
// buffer, or the baselines' mailbox), then the C pair-ups (output chunk t meets tag t: the
// block's 8 warps a window each), then the merge, 4096 outputs a task, once every pair-up is
// done.

#include "warpvm/workloads/channel/peer_exchange.cuh"

namespace warpvm::workloads {

struct Bitonic2Gpu {
  PeerExchange exchange;
  BitonicGeometry size;
  bool keeps_low;              ///< GPU 0: the smaller key of each pair; GPU 1: the larger
  const std::uint32_t* mine;   ///< [half]: this GPU's keys, sorted ascending
  std::uint32_t* paired;       ///< [half]: key i is the kept one of pair (mine[i], theirs[h - 1 - i])
  std::uint32_t* out;          ///< [half]: the result, ascending
  std::uint32_t* counters;     ///< [size.counter_words()], zero before the run
  // channel, channel_direct: tag t's chunk at t x chunk keys of the other GPU's channel buffer.
  // peer_flag, naive, atomic_wait: into the other GPU's mailbox at the same place, then t + 1
  // into exchange.published
  const std::uint32_t* mailbox;        ///< this GPU, [half]
  std::uint32_t* neighbour_mailbox;    ///< the other GPU's `mailbox` (a peer address)
  /// Lives and waits by global warp: every warp is a consumer (pair-ups wait for the other
  /// GPU's chunks, merges for every pair-up).
  Stamps stamps;

  [[nodiscard]] __device__ std::uint32_t* next_task() const { return counters; }
  [[nodiscard]] __device__ std::uint32_t* copied() const { return counters + 1; }
  [[nodiscard]] __device__ std::uint32_t* paired_chunks() const { return counters + 1 + size.chunks(); }
  [[nodiscard]] __device__ std::uint32_t* kept_own() const { return counters + 2 + size.chunks(); }
};

/// Tasks [0, C): copy this GPU's chunk C - 1 - t into the other GPU's memory as tag t.
__device__ inline void bitonic_copy(const Bitonic2Gpu& m, std::uint32_t tag) {
  const std::uint32_t chunks = m.size.chunks();
  const auto* from = reinterpret_cast<const uint4*>(m.mine + std::uint64_t{chunks - 1 - tag} * bitonic_chunk);
  std::uint32_t* base = uses_channel(m.exchange.mode) ? reinterpret_cast<std::uint32_t*>(m.exchange.to_neighbour.buffer())
                                                      : m.neighbour_mailbox;
  auto* to = reinterpret_cast<uint4*>(base + std::uint64_t{tag} * bitonic_chunk);
  for (std::uint32_t i = threadIdx.x; i < bitonic_chunk / 4; i += block_threads) to[i] = __ldcg(from + i);
  __syncthreads();  // every thread's stores before thread 0's release (cumulative)
  if (threadIdx.x == 0)
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(m.copied()[tag]).store(1u, cuda::std::memory_order_release);
}

/// Tasks [C, 2C): output chunk t against the other GPU's tag t, each warp its window.
__device__ inline void bitonic_pair(const Bitonic2Gpu& m, std::uint32_t tag) {
  __shared__ std::uint32_t kept;
  if (threadIdx.x == 0) kept = 0;
  __syncthreads();
  constexpr std::uint32_t window = bitonic_chunk / block_warps;
  const std::uint32_t warp_in_block = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint64_t chunk_first = std::uint64_t{tag} * bitonic_chunk;
  const PeerWindow theirs =
      peer_meet(m.exchange, "bitonic2gpu", tag, window * 4, (chunk_first + warp_in_block * window) * 4,
                m.mailbox + chunk_first + warp_in_block * window, m.stamps, blockIdx.x * block_warps + threadIdx.x / 32);
  std::uint32_t own_kept = 0;
  for (std::uint32_t r = lane; r < window; r += 32) {
    // received key r of the window is the other GPU's key h - 1 - i for output i below
    const std::uint64_t i = chunk_first + bitonic_chunk - 1 - (warp_in_block * window + r);
    const std::uint32_t own = m.mine[i], other = theirs.load<std::uint32_t>(r);
    const bool keep_own = bitonic_keeps_own(m.keeps_low, own, other);
    m.paired[i] = keep_own ? own : other;
    own_kept += keep_own ? 1 : 0;
  }
  theirs.release();
  atomicAdd(&kept, own_kept);
  __syncthreads();  // the block's pairs and counts before thread 0's release (cumulative)
  if (threadIdx.x == 0) {
    atomicAdd(m.kept_own(), kept);
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(*m.paired_chunks()).fetch_add(1u, cuda::std::memory_order_release);
  }
}

/// Tasks [2C, 2C + merge tasks): once every pair is made, outputs [task x 4096, +4096).
__device__ inline void bitonic_merge_task(const Bitonic2Gpu& m, std::uint32_t task) {
  block_waits_at_least(*m.paired_chunks(), m.size.chunks(), m.stamps, "bitonic2gpu", "every pair", task);
  const BitonicRuns runs{m.size.half, __ldcg(m.kept_own()), m.keeps_low};
  const std::uint32_t first = task * bitonic_merge_outputs + threadIdx.x * bitonic_merge_per_thread;
  if (first >= m.size.half) return;
  // the pairs were written by other blocks during the kernel: L2 loads
  merge_path([&](std::uint32_t k) { return __ldcg(m.paired + runs.a_index(k)); }, runs.a_size(),
             [&](std::uint32_t k) { return __ldcg(m.paired + runs.b_index(k)); }, runs.b_size(), first,
             min(bitonic_merge_per_thread, m.size.half - first), [&](std::uint32_t k, std::uint32_t key) { m.out[k] = key; });
}

/// Persistent: every block resident at once (pair-ups wait for the other GPU's copies, merges
/// for every pair-up). At least two blocks.
__global__ void __launch_bounds__(block_threads) bitonic2gpu_kernel(Bitonic2Gpu m) {
  const std::uint64_t started = detail::global_timer_ns();
  const std::uint32_t chunks = m.size.chunks();
  if (blockIdx.x == 0) {  // the exchange block: announce in tag order
    if (threadIdx.x == 0) {
      for (std::uint32_t t = 0; t < chunks; ++t) {
        wait_at_least(m.copied()[t], 1, "bitonic2gpu", "this GPU's chunk copy", t);
        peer_announce(m.exchange, t);  // release at system scope: cumulative over the copy it acquired
      }
    }
  } else {
    for (std::uint32_t q = block_takes_task(m.next_task()); q < m.size.tasks(); q = block_takes_task(m.next_task())) {
      if (q < chunks) bitonic_copy(m, q);
      else if (q < 2 * chunks) bitonic_pair(m, q - chunks);
      else bitonic_merge_task(m, q - 2 * chunks);
    }
  }
  m.stamps.life(blockIdx.x * block_warps + threadIdx.x / 32, started, true);
  peer_block_done(m.exchange);
}

}  // namespace warpvm::workloads
