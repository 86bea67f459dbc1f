#pragma once
// Connected components on the GPU by label propagation, data-driven: every label starts as the
// vertex's own id and the first frontier holds every vertex; each iteration's kernel lets every
// frontier vertex (a warp each, or a warp per chunk of its row with a Balanced CSR) offer its
// label to its neighbours with an atomic min, and a neighbour whose label dropped enters the next
// frontier (once per iteration: the queue's stamps). Labels only fall, so a stale read only
// delays; when a frontier is empty every edge joins equal labels, the least id of the component
// (workloads::reference_cc's labels). The graph must be symmetric (both directions of every edge
// stored). Two versions of the kernel, as for BFS (bfs.cuh): plain pointers, and warpvm::array
// handles with page spans over the adjacency list and element accesses / atomics on the labels.

#include "warpvm/workloads/graph/graph_kernels.cuh"
#include "warpvm/warpvm.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace warpvm::workloads {

/// Pages a thread of cc_propagate_paged holds at once: a column page and one label.
inline constexpr std::uint32_t cc_pages_held = 2;

/// One iteration on plain pointers over `rows` (graph_detail::FrontierRows or ChunkRows: a warp
/// per frontier vertex or per chunk of its row).
template <class Rows>
__global__ void cc_propagate_raw(Rows rows, const std::uint32_t* columns, std::uint32_t* labels, std::uint32_t* next,
                                 std::uint32_t* next_size, std::uint32_t* stamps, std::uint32_t iteration) {
  graph_detail::for_each_row(rows, [&](std::uint32_t v, graph_detail::Row row) {
    // Read after v last changed (or v is queued again): a later drop brings v back next iteration.
    const std::uint32_t label = labels[v];
    graph_detail::walk_row(row, [&](std::uint64_t e, bool in_row) {
      bool lowered = false;
      std::uint32_t u = 0;
      if (in_row) {
        u = columns[e];
        // The plain read spares the atomic where the label is already as low (labels only fall).
        lowered = labels[u] > label && atomicMin(&labels[u], label) > label &&
                  graph_detail::first_this_iteration(stamps, u, iteration);
      }
      graph_detail::append(lowered, u, next, next_size);
    });
  });
}

/// The same iteration through warpvm: the rows' offsets (or chunk offsets), `columns` and
/// `labels` are objects of the paged space; launch with Config::max_pages_held_per_thread >=
/// cc_pages_held.
template <class Rows>
__global__ void __launch_bounds__(graph_block_threads, graph_paged_min_blocks)
    cc_propagate_paged(Rows rows, array<std::uint32_t> columns, array<std::uint32_t> labels, std::uint32_t* next,
                       std::uint32_t* next_size, std::uint32_t* stamps, std::uint32_t iteration) {
  graph_detail::for_each_row(rows, [&](std::uint32_t v, graph_detail::Row row) {
    const std::uint32_t label = graph_detail::warp_value(labels, v);
    graph_detail::walk_row_paged<false>(columns, columns, row, [&](std::uint32_t u, std::uint32_t, bool in_row) {
      const bool lowered = in_row && labels[u] > label && labels.fetch_min(u, label) > label &&
                           graph_detail::first_this_iteration(stamps, u, iteration);
      graph_detail::append(lowered, u, next, next_size);
    });
  });
}

/// Components through warpvm on rt's stream: the caller has set the labels object's host copy
/// (labels[v] = v) with nothing of it cached; `max_blocks` and `chunks` as for bfs_paged. Labels
/// are in the cache afterwards: flush() for the host copy. Returns the iterations run.
inline std::uint32_t cc_paged(Runtime& rt, FrontierQueues& queues, const array<std::uint64_t>& offsets,
                              const array<std::uint32_t>& columns, const array<std::uint32_t>& labels,
                              std::uint64_t max_blocks, unsigned block_threads = graph_block_threads,
                              const PagedChunkTable* chunks = nullptr) {
  const RuntimeLauncher launch{rt};
  const unsigned threads = paged_block(block_threads).x;
  return queues.run_from_all(rt.stream(), [&](const std::uint32_t* frontier, std::uint32_t size, std::uint32_t* next,
                                              std::uint32_t* next_size, std::uint32_t* stamps, std::uint32_t iteration) {
    queues.launch_over_rows(launch, offsets, chunks, frontier, size, max_blocks, threads, [&](auto rows, dim3 grid, dim3 block) {
      launch(cc_propagate_paged<decltype(rows)>, grid, block, rows, columns, labels, next, next_size, stamps, iteration);
    });
  });
}

/// Components on plain pointers on `stream`; labels as for cc_paged (fill_identity), `chunks` as
/// for bfs_raw.
inline std::uint32_t cc_raw(cudaStream_t stream, FrontierQueues& queues, const std::uint64_t* offsets,
                            const std::uint32_t* columns, std::uint32_t* labels, std::uint64_t max_blocks,
                            const RawChunkTable* chunks = nullptr) {
  const StreamLauncher launch{stream};
  return queues.run_from_all(stream, [&](const std::uint32_t* frontier, std::uint32_t size, std::uint32_t* next,
                                         std::uint32_t* next_size, std::uint32_t* stamps, std::uint32_t iteration) {
    queues.launch_over_rows(launch, offsets, chunks, frontier, size, max_blocks, graph_block_threads,
                            [&](auto rows, dim3 grid, dim3 block) {
                              launch(cc_propagate_raw<decltype(rows)>, grid, block, rows, columns, labels, next, next_size,
                                     stamps, iteration);
                            });
  });
}

}  // namespace warpvm::workloads
