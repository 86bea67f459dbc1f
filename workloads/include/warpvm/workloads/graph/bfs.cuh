#pragma once
// Breadth-first search on the GPU, level-synchronous and top-down: each level's kernel expands
// the current frontier queue (one vertex per warp, or with a Balanced CSR one chunk of a vertex's
// row per warp) and claims unreached neighbours for the next level with a compare-and-swap on the
// level array; the claimants are appended to the next frontier queue. Two versions of the level
// kernel, same structure:
//  - bfs_expand_raw: plain pointers (device, managed or zero-copy host memory); each row is read
//    in 128-byte aligned windows;
//  - bfs_expand_paged: warpvm::array<T> handles. The row bounds and the level array are
//    scattered accesses (element API: a[i], compare_exchange); the warp walks the contiguous
//    adjacency list one page at a time through page spans (one hold per page per warp, then
//    plain loads).
// The frontier queues (graph_kernels.cuh) live in device memory in every mode. Used by
// warpvm-graph-bench and the GPU tests (tests/workloads/graph_test.cu); docs/bench/graph.md
// describes the workload.

#include "warpvm/workloads/graph/graph_kernels.cuh"
#include "warpvm/workloads/graph/rmat.hpp"
#include "warpvm/warpvm.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace warpvm::workloads {

/// Pages a thread of bfs_expand_paged holds at once: a page span of the column array and one
/// element access (row bound or level) inside it. The runtime's Config::max_pages_held_per_thread.
inline constexpr std::uint32_t bfs_pages_held = 2;

/// One level on plain pointers: every unit of work of `rows` (a warp each: a frontier vertex's
/// row, or a chunk of it; graph_detail::FrontierRows or ChunkRows) claims its unreached
/// neighbours for `next_level` and appends them to `next` (the claim succeeds once per vertex,
/// so the queue's stamps are not needed).
template <class Rows>
__global__ void bfs_expand_raw(Rows rows, const std::uint32_t* columns, std::uint32_t* levels, std::uint32_t* next,
                               std::uint32_t* next_size, std::uint32_t next_level) {
  graph_detail::for_each_row(rows, [&](std::uint32_t, graph_detail::Row row) {
    graph_detail::walk_row(row, [&](std::uint64_t e, bool in_row) {
      bool claimed = false;
      std::uint32_t u = 0;
      if (in_row) {
        u = columns[e];
        // The plain read filters visited vertices without an atomic; a stale "unreached" only
        // costs a failed CAS.
        claimed = levels[u] == bfs_unreached && atomicCAS(&levels[u], bfs_unreached, next_level) == bfs_unreached;
      }
      graph_detail::append(claimed, u, next, next_size);
    });
  });
}

/// The same level through warpvm: the rows' offsets (or chunk offsets), `columns` and `levels`
/// are objects of the paged space; launch with Config::max_pages_held_per_thread >=
/// bfs_pages_held.
template <class Rows>
__global__ void __launch_bounds__(graph_block_threads, graph_paged_min_blocks)
    bfs_expand_paged(Rows rows, array<std::uint32_t> columns, array<std::uint32_t> levels, std::uint32_t* next,
                     std::uint32_t* next_size, std::uint32_t next_level) {
  graph_detail::for_each_row(rows, [&](std::uint32_t, graph_detail::Row row) {
    graph_detail::walk_row_paged<false>(columns, columns, row, [&](std::uint32_t u, std::uint32_t, bool in_row) {
      std::uint32_t unreached = bfs_unreached;
      const bool claimed =
          in_row && levels[u] == bfs_unreached && levels.compare_exchange(u, unreached, next_level);
      graph_detail::append(claimed, u, next, next_size);
    });
  });
}

/// One search through warpvm on rt's stream: the caller has set the levels object's host copy
/// (root 0, others unreached) with nothing of it cached. `max_blocks` caps each level's grid
/// (keep it within the launch's progress bound: max_paged_blocks). `chunks`: the Balanced CSR's
/// chunk table (objects of the same space; the queues built with its chunk count) for a warp per
/// chunk, or null for a warp per vertex. Levels are in the cache afterwards: flush() for the host
/// copy. Returns the number of levels (the root's included).
inline std::uint32_t bfs_paged(Runtime& rt, FrontierQueues& queues, const array<std::uint64_t>& offsets,
                               const array<std::uint32_t>& columns, const array<std::uint32_t>& levels,
                               std::uint32_t root, std::uint64_t max_blocks, unsigned block_threads = graph_block_threads,
                               const PagedChunkTable* chunks = nullptr) {
  const RuntimeLauncher launch{rt};
  const unsigned threads = paged_block(block_threads).x;
  return queues.run_from(rt.stream(), root, [&](const std::uint32_t* frontier, std::uint32_t size, std::uint32_t* next,
                                                std::uint32_t* next_size, std::uint32_t*, std::uint32_t level) {
    queues.launch_over_rows(launch, offsets, chunks, frontier, size, max_blocks, threads, [&](auto rows, dim3 grid, dim3 block) {
      launch(bfs_expand_paged<decltype(rows)>, grid, block, rows, columns, levels, next, next_size, level);
    });
  });
}

/// One search on plain pointers on `stream`; levels as for bfs_paged (reset_from_root), `chunks`
/// as there (plain pointers).
inline std::uint32_t bfs_raw(cudaStream_t stream, FrontierQueues& queues, const std::uint64_t* offsets,
                             const std::uint32_t* columns, std::uint32_t* levels, std::uint32_t root,
                             std::uint64_t max_blocks, const RawChunkTable* chunks = nullptr) {
  const StreamLauncher launch{stream};
  return queues.run_from(stream, root, [&](const std::uint32_t* frontier, std::uint32_t size, std::uint32_t* next,
                                           std::uint32_t* next_size, std::uint32_t*, std::uint32_t level) {
    queues.launch_over_rows(launch, offsets, chunks, frontier, size, max_blocks, graph_block_threads,
                            [&](auto rows, dim3 grid, dim3 block) {
                              launch(bfs_expand_raw<decltype(rows)>, grid, block, rows, columns, levels, next, next_size, level);
                            });
  });
}

}  // namespace warpvm::workloads
