#pragma once
// Breadth-first search on the GPU, level-synchronous and top-down: each level's kernel expands
// the current frontier queue (one vertex per warp) and claims unreached neighbours for the
// next level with a compare-and-swap on the level array; the claimants are appended to the next
// frontier queue. Two versions of the level kernel, same structure:
//  - bfs_expand_raw: plain pointers (device memory, managed memory, explicit copies);
//  - bfs_expand_paged: warpvm::array<T> handles. The row bounds and the level array are
//    scattered accesses (element API: a[i], atomic_cas); the warp walks the contiguous
//    adjacency list one page at a time through page spans (one hold per page per warp, then
//    plain loads).
// The frontier queues live in device memory in every mode (BfsQueues): they are scratch that
// never needs to reach the host, at most 8 bytes per vertex. Used by warpvm-graph-bench and the
// GPU tests (tests/gpu/graph_test.cu); docs/benchmarks.md describes the workload.

#include "warpvm/sim/rmat.hpp"
#include "warpvm/warpvm.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace warpvm::apps {

using sim::bfs_unreached;

/// Threads per block of the level kernels (whole warps: the kernels use warp-wide votes).
inline constexpr unsigned bfs_block_threads = 256;
/// Pages a thread of bfs_expand_paged holds at once: a page span of the column array and one
/// element access (row bound or level) inside it. The runtime's Config::max_pages_held_per_thread.
inline constexpr std::uint32_t bfs_pages_held = 2;

namespace bfs_detail {

/// Appends the vertices the lanes claimed to the next frontier: one atomic per warp. Called by
/// all 32 lanes of the warp together.
__device__ inline void append(bool claimed, std::uint32_t vertex, std::uint32_t* next, std::uint32_t* next_size) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned winners = __ballot_sync(0xffffffffu, claimed);
  if (winners == 0) return;
  std::uint32_t base = 0;
  if (lane == 0) base = atomicAdd(next_size, static_cast<std::uint32_t>(__popc(winners)));
  base = __shfl_sync(0xffffffffu, base, 0);
  if (claimed) next[base + __popc(winners & ((1u << lane) - 1))] = vertex;
}

__device__ inline std::uint64_t warp_index() {
  return (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
}
__device__ inline std::uint64_t warp_count() { return std::uint64_t{gridDim.x} * blockDim.x / 32; }

}  // namespace bfs_detail

/// One level on plain pointers: every vertex of `frontier` (a warp each) claims its unreached
/// neighbours for `next_level` and appends them to `next`.
__global__ void bfs_expand_raw(const std::uint64_t* offsets, const std::uint32_t* columns, std::uint32_t* levels,
                               const std::uint32_t* frontier, std::uint32_t frontier_size, std::uint32_t* next,
                               std::uint32_t* next_size, std::uint32_t next_level) {
  const unsigned lane = threadIdx.x % 32;
  for (std::uint64_t i = bfs_detail::warp_index(); i < frontier_size; i += bfs_detail::warp_count()) {
    const std::uint32_t v = frontier[i];
    const std::uint64_t begin = offsets[v], end = offsets[v + 1];
    for (std::uint64_t base = begin; base < end; base += 32) {
      const std::uint64_t e = base + lane;
      bool claimed = false;
      std::uint32_t u = 0;
      if (e < end) {
        u = columns[e];
        // The plain read filters visited vertices without an atomic; a stale "unreached" only
        // costs a failed CAS.
        claimed = levels[u] == bfs_unreached && atomicCAS(&levels[u], bfs_unreached, next_level) == bfs_unreached;
      }
      bfs_detail::append(claimed, u, next, next_size);
    }
  }
}

/// The same level through warpvm: `offsets`, `columns` and `levels` are objects of the paged
/// space; launch with Config::max_pages_held_per_thread >= bfs_pages_held.
__global__ void bfs_expand_paged(array<std::uint64_t> offsets, array<std::uint32_t> columns, array<std::uint32_t> levels,
                                 const std::uint32_t* frontier, std::uint32_t frontier_size, std::uint32_t* next,
                                 std::uint32_t* next_size, std::uint32_t next_level) {
  const unsigned lane = threadIdx.x % 32;
  for (std::uint64_t i = bfs_detail::warp_index(); i < frontier_size; i += bfs_detail::warp_count()) {
    const std::uint32_t v = frontier[i];
    // Row bounds: lanes 0 and 1 read offsets[v] and offsets[v + 1] (one page acquisition for
    // both unless the pair straddles a page), then broadcast them.
    std::uint64_t bound = 0;
    if (lane < 2) bound = offsets[v + lane];
    const std::uint64_t begin = __shfl_sync(0xffffffffu, bound, 0), end = __shfl_sync(0xffffffffu, bound, 1);
    for (std::uint64_t e = begin; e < end;) {
      // The whole warp holds the row's current page once; its entries are then plain loads.
      const auto page = columns.span(e);
      const std::uint64_t page_end = std::min<std::uint64_t>(end, page.first() + page.size());
      for (std::uint64_t base = e; base < page_end; base += 32) {
        const std::uint64_t j = base + lane;
        bool claimed = false;
        std::uint32_t u = 0;
        if (j < page_end) {
          u = page[static_cast<std::uint32_t>(j - page.first())];
          claimed = levels[u] == bfs_unreached && levels.atomic_cas(u, bfs_unreached, next_level) == bfs_unreached;
        }
        bfs_detail::append(claimed, u, next, next_size);
      }
      e = page_end;
    }
  }
}

/// Levels in device or managed memory: every vertex unreached but the root (level 0).
__global__ void bfs_reset_levels(std::uint32_t* levels, std::uint64_t n, std::uint32_t root) {
  for (std::uint64_t v = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < n;
       v += std::uint64_t{gridDim.x} * blockDim.x)
    levels[v] = v == root ? 0 : bfs_unreached;
}

/// Blocks for one level: a warp per frontier vertex, at most `max_blocks`.
inline dim3 bfs_grid(std::uint32_t frontier_size, std::uint64_t max_blocks, unsigned block_threads = bfs_block_threads) {
  const std::uint64_t warps_per_block = block_threads / 32;
  const std::uint64_t wanted = (std::uint64_t{frontier_size} + warps_per_block - 1) / warps_per_block;
  return dim3(static_cast<unsigned>(std::max<std::uint64_t>(1, std::min(wanted, max_blocks))));
}

/// The two frontier queues and the next-frontier counter, in device memory; move-only.
class BfsQueues {
 public:
  explicit BfsQueues(std::uint64_t vertices) {
    try {
      WARPVM_CUDA_TRY(cudaMalloc(&queues_[0], vertices * sizeof(std::uint32_t)));
      WARPVM_CUDA_TRY(cudaMalloc(&queues_[1], vertices * sizeof(std::uint32_t)));
      WARPVM_CUDA_TRY(cudaMalloc(&next_size_, sizeof(std::uint32_t)));
      WARPVM_CUDA_TRY(cudaHostAlloc(&host_word_, sizeof(std::uint32_t), cudaHostAllocDefault));
    } catch (...) {
      release();
      throw;
    }
  }
  ~BfsQueues() { release(); }
  BfsQueues(const BfsQueues&) = delete;
  BfsQueues& operator=(const BfsQueues&) = delete;

  /// Searches from `root` on `stream`; the levels must already say root 0, others unreached.
  /// `expand(frontier, frontier_size, next, next_size, next_level)` launches one level's kernel
  /// on `stream`. Waits for the stream after each level (to read the next frontier's size).
  /// Returns the number of levels (the root's included).
  template <class Expand>
  std::uint32_t run(cudaStream_t stream, std::uint32_t root, Expand&& expand) {
    *host_word_ = root;
    WARPVM_CUDA_TRY(cudaMemcpyAsync(queues_[0], host_word_, sizeof root, cudaMemcpyHostToDevice, stream));
    std::uint32_t size = 1, level = 0;
    for (; size > 0; ++level) {
      WARPVM_CUDA_TRY(cudaMemsetAsync(next_size_, 0, sizeof(std::uint32_t), stream));
      expand(static_cast<const std::uint32_t*>(queues_[level % 2]), size, queues_[(level + 1) % 2], next_size_, level + 1);
      WARPVM_CUDA_TRY(cudaGetLastError());
      WARPVM_CUDA_TRY(cudaMemcpyAsync(host_word_, next_size_, sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream));
      WARPVM_CUDA_TRY(cudaStreamSynchronize(stream));
      size = *host_word_;
    }
    return level;
  }

 private:
  void release() noexcept {
    cudaFree(queues_[0]);
    cudaFree(queues_[1]);
    cudaFree(next_size_);
    cudaFreeHost(host_word_);
  }
  std::uint32_t* queues_[2] = {nullptr, nullptr};
  std::uint32_t* next_size_ = nullptr;
  std::uint32_t* host_word_ = nullptr;  // pinned: the root going in, each level's size coming out
};

/// One search through warpvm on rt's stream: the caller has set the levels object's host copy
/// (root 0, others unreached) with nothing of it cached. `max_blocks` caps each level's grid
/// (keep it within the launch's progress bound: max_paged_blocks). Levels are in the cache
/// afterwards: flush() for the host copy.
inline std::uint32_t bfs_paged(Runtime& rt, BfsQueues& queues, const array<std::uint64_t>& offsets,
                               const array<std::uint32_t>& columns, const array<std::uint32_t>& levels,
                               std::uint32_t root, std::uint64_t max_blocks, unsigned block_threads = bfs_block_threads) {
  return queues.run(rt.stream(), root, [&](const std::uint32_t* frontier, std::uint32_t size, std::uint32_t* next,
                                           std::uint32_t* next_size, std::uint32_t next_level) {
    rt.launch(bfs_expand_paged, bfs_grid(size, max_blocks, block_threads), dim3(block_threads), 0, offsets, columns,
              levels, frontier, size, next, next_size, next_level);
  });
}

/// The most blocks of `block_threads` a bfs_expand_paged launch on `rt` may have: `wanted`, cut
/// to what the cache guarantees progress for (at least one block; a cache too small even for
/// that is refused by the launch, saying so). The uvm preset holds nothing: `wanted` as is.
inline std::uint64_t max_paged_blocks(const Runtime& rt, std::uint64_t wanted, unsigned block_threads = bfs_block_threads) {
  if (rt.config().transport == Transport::host_batched) return wanted;
  return std::max<std::uint64_t>(1, std::min(wanted, rt.max_resident_threads() / block_threads));
}

/// One search on plain pointers (device or managed memory) on `stream`; levels as for bfs_paged.
inline std::uint32_t bfs_raw(cudaStream_t stream, BfsQueues& queues, const std::uint64_t* offsets,
                             const std::uint32_t* columns, std::uint32_t* levels, std::uint32_t root,
                             std::uint64_t max_blocks) {
  return queues.run(stream, root, [&](const std::uint32_t* frontier, std::uint32_t size, std::uint32_t* next,
                                      std::uint32_t* next_size, std::uint32_t next_level) {
    bfs_expand_raw<<<bfs_grid(size, max_blocks), bfs_block_threads, 0, stream>>>(offsets, columns, levels, frontier,
                                                                                size, next, next_size, next_level);
  });
}

}  // namespace warpvm::apps
