#pragma once
// bfs2gpu: breadth-first search with the frontier exchanged between two GPUs (issue #7's G_BFS:
// random access, a probabilistic amount of data per level).
//
// The graph's vertices are split in halves: GPU g owns [g h, (g + 1) h) and holds their CSR rows
// (neighbours by global id) and their depths. Level L, on each GPU: every warp takes 32 of its
// vertices at a time, and the whole warp walks the neighbours of each one at depth L. A neighbour
// of its own GPU is claimed for depth L + 1 (compare-and-swap); one of the other GPU's is marked
// in this level's outgoing bitmap (a bit per vertex of the other half). When every block has
// finished the level, the exchange block (block 0) sends the bitmap and two counts to the other
// GPU, meets the other's, claims the vertices it marks, and tells the blocks whether a level L +
// 1 follows: both GPUs decide alike, from the same four counts (see bfs_goes_on).

#include "warpvm/workloads/channel/peer_exchange.cuh"
#include "warpvm/workloads/graph/rmat.hpp"

namespace warpvm::workloads {

struct Bfs2Gpu {
  PeerExchange exchange;
  BfsGeometry size;
  bool first_half;             ///< GPU 0: vertices [0, half)
  const std::uint64_t* offsets;  ///< [half + 1]: this GPU's rows in `columns`
  const std::uint32_t* columns;  ///< neighbours, global ids
  std::uint32_t* depth;        ///< [half]: bfs_unreached but the root's 0 before the run
  std::uint32_t* outgoing;     ///< [max_levels][half / 32]: zero before the run
  std::uint32_t* counters;     ///< [size.counter_words()], zero before the run
  // channel, channel_direct: level L's message (bitmap, then header) at L x message words of the
  // other GPU's channel buffer, tag L. peer_flag, naive, atomic_wait: into the other GPU's
  // mailbox[L], then L + 1 into exchange.published
  const std::uint32_t* mailbox;    ///< this GPU, [max_levels][message words]
  std::uint32_t* neighbour_mailbox;  ///< the other GPU's `mailbox` (a peer address)
  /// Lives and waits by global warp: the exchange block's for the other GPU's message, the other
  /// blocks' for the level's end (so that such waits do not count as hiding work).
  Stamps stamps;

  [[nodiscard]] __device__ std::uint32_t bitmap_words() const { return size.bitmap_words(); }
  [[nodiscard]] __device__ std::uint32_t message_words() const { return size.message_words(); }
  [[nodiscard]] __device__ std::uint32_t first_vertex() const { return first_half ? 0 : size.half; }
  [[nodiscard]] __device__ std::uint32_t* found() const { return counters; }
  [[nodiscard]] __device__ std::uint32_t* arrived() const { return counters + size.max_levels; }
  [[nodiscard]] __device__ std::uint32_t* ready() const { return counters + size.ready_word(); }
  [[nodiscard]] __device__ std::uint32_t* stop() const { return counters + size.max_levels + 2; }
  [[nodiscard]] __device__ std::uint32_t* overflow() const { return counters + size.overflow_word(); }
};

/// Every block: level `level`'s expansion of this GPU's frontier; adds the vertices it claimed
/// into found[level].
__device__ inline void bfs_expand(const Bfs2Gpu& m, std::uint32_t level) {
  __shared__ std::uint32_t claimed;
  if (threadIdx.x == 0) claimed = 0;
  __syncthreads();
  const std::uint32_t lane = threadIdx.x % 32, warps = gridDim.x * block_warps;
  const std::uint32_t first = m.first_vertex();
  std::uint32_t* marks = m.outgoing + std::uint64_t{level} * m.bitmap_words();
  std::uint32_t mine = 0;
  for (std::uint32_t base = (blockIdx.x * block_warps + threadIdx.x / 32) * 32; base < m.size.half; base += warps * 32) {
    // depths written this run by other SMs (claims) and the exchange block: L2 loads
    std::uint32_t frontier = __ballot_sync(0xffffffffu, __ldcg(m.depth + base + lane) == level);
    while (frontier != 0) {
      const std::uint32_t v = base + __ffs(frontier) - 1;
      frontier &= frontier - 1;
      const std::uint64_t end = m.offsets[v + 1];
      for (std::uint64_t e = m.offsets[v] + lane; e < end; e += 32) {
        const std::uint32_t u = m.columns[e];
        const std::uint32_t local = u - first;  // wraps past `half` for the other GPU's vertices
        if (local < m.size.half) {
          if (__ldcg(m.depth + local) == bfs_unreached && atomicCAS(m.depth + local, bfs_unreached, level + 1) == bfs_unreached)
            ++mine;
        } else {
          const std::uint32_t theirs = m.first_half ? u - m.size.half : u;
          const std::uint32_t bit = 1u << (theirs % 32);
          if ((__ldcg(marks + theirs / 32) & bit) == 0) atomicOr(marks + theirs / 32, bit);
        }
      }
    }
  }
  if (mine != 0) atomicAdd(&claimed, mine);
  __syncthreads();
  if (threadIdx.x == 0 && claimed != 0) atomicAdd(m.found() + level, claimed);
}

/// The exchange block after every block's expansion of `level`: sends this GPU's message, meets
/// the other's, claims what it marks, then publishes the decision (stop, then ready).
__device__ inline void bfs_exchange(const Bfs2Gpu& m, std::uint32_t level) {
  __shared__ std::uint32_t marked_here, found_there, marked_there;
  const std::uint32_t warp_in_block = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    marked_here = 0;
    wait_at_least(*m.arrived(), (level + 1) * gridDim.x, "bfs2gpu", "the blocks of its GPU", level);
  }
  __syncthreads();
  const std::uint64_t row = std::uint64_t{level} * m.message_words();
  std::uint32_t* to = uses_channel(m.exchange.mode) ? reinterpret_cast<std::uint32_t*>(m.exchange.to_neighbour.buffer()) + row
                                                    : m.neighbour_mailbox + row;
  const std::uint32_t* marks = m.outgoing + std::uint64_t{level} * m.bitmap_words();
  std::uint32_t bits = 0;
  for (std::uint32_t w = threadIdx.x; w < m.bitmap_words(); w += block_threads) {
    const std::uint32_t word = __ldcg(marks + w);  // the other blocks' atomicOr
    to[w] = word;
    bits += __popc(word);
  }
  atomicAdd(&marked_here, bits);
  __syncthreads();
  if (threadIdx.x == 0) {
    to[m.bitmap_words()] = __ldcg(m.found() + level);
    to[m.bitmap_words() + 1] = marked_here;
  }
  __syncthreads();  // every word of the message before thread 0's release (cumulative)
  if (threadIdx.x == 0) peer_announce(m.exchange, level);
  const std::uint32_t window_words = m.size.window_words(), first = warp_in_block * window_words;
  const PeerWindow other = peer_meet(m.exchange, "bfs2gpu", level, window_words * 4, (row + first) * 4,
                                     m.mailbox + row + first, m.stamps, warp_in_block);
  const std::uint32_t window_bitmap_words = first >= m.bitmap_words() ? 0 : min(window_words, m.bitmap_words() - first);
  for (std::uint32_t w = lane; w < window_bitmap_words; w += 32) {
    for (std::uint32_t word = other.load<std::uint32_t>(w); word != 0; word &= word - 1) {
      const std::uint32_t v = (first + w) * 32 + __ffs(word) - 1;
      // only this block writes depths now; L2 loads: other SMs' claims (and this SM's L1 may hold older lines)
      if (__ldcg(m.depth + v) == bfs_unreached) m.depth[v] = level + 1;
    }
  }
  if (first <= m.bitmap_words() && m.bitmap_words() < first + window_words && lane == 0) {  // the header's window (both words: 4-word windows)
    found_there = other.load<std::uint32_t>(m.bitmap_words() - first);
    marked_there = other.load<std::uint32_t>(m.bitmap_words() - first + 1);
  }
  other.release();
  __syncthreads();  // the claims and the header
  if (threadIdx.x == 0) {
    const bool goes_on = bfs_goes_on(__ldcg(m.found() + level), marked_here, found_there, marked_there);
    const bool out_of_levels = goes_on && level + 1 >= m.size.max_levels;
    if (out_of_levels) *m.overflow() = 1;
    *m.stop() = goes_on && !out_of_levels ? 0 : 1;
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(*m.ready()).store(level + 1, cuda::std::memory_order_release);
  }
}

/// Persistent: every block resident at once (the exchange block waits for all, they for it).
__global__ void __launch_bounds__(block_threads) bfs2gpu_kernel(Bfs2Gpu m) {
  const std::uint32_t warp = blockIdx.x * block_warps + threadIdx.x / 32;
  const bool exchange_block = blockIdx.x == 0;
  const std::uint64_t started = detail::global_timer_ns();
  for (std::uint32_t level = 0;; ++level) {
    bfs_expand(m, level);
    __syncthreads();  // the block's claims and marks before thread 0's release (cumulative)
    if (threadIdx.x == 0)
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(*m.arrived()).fetch_add(1u, cuda::std::memory_order_release);
    if (exchange_block) {
      bfs_exchange(m, level);
    } else {
      block_waits_at_least(*m.ready(), level + 1, m.stamps, "bfs2gpu", "the level's end", level);
    }
    __shared__ bool stop;
    if (threadIdx.x == 0) stop = __ldcg(m.stop()) != 0;  // after ready's acquire (thread 0 of block 0 wrote it)
    __syncthreads();
    if (stop) break;
  }
  m.stamps.life(warp, started, exchange_block);
  peer_block_done(m.exchange);
}

}  // namespace warpvm::workloads
