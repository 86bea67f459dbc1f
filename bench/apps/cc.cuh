#pragma once
// Connected components on the GPU by label propagation, data-driven: every label starts as the
// vertex's own id and the first frontier holds every vertex; each iteration's kernel lets every
// frontier vertex (a warp each) offer its label to its neighbours with an atomic min, and a
// neighbour whose label dropped enters the next frontier (once per iteration: the queue's
// stamps). Labels only fall, so a stale read only delays; when a frontier is empty every edge
// joins equal labels, the least id of the component (sim::reference_cc's labels). The graph
// must be symmetric (both directions of every edge stored). Two versions of the kernel, as for
// BFS (bfs.cuh): plain pointers, and warpvm::array handles with page spans over the adjacency
// list and element accesses / atomics on the labels.

#include "graph_kernels.cuh"
#include "warpvm/warpvm.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace warpvm::apps {

/// Pages a thread of cc_propagate_paged holds at once: a column page and one label.
inline constexpr std::uint32_t cc_pages_held = 2;

/// One iteration on plain pointers.
__global__ void cc_propagate_raw(const std::uint64_t* offsets, const std::uint32_t* columns, std::uint32_t* labels,
                                 const std::uint32_t* frontier, std::uint32_t frontier_size, std::uint32_t* next,
                                 std::uint32_t* next_size, std::uint32_t* stamps, std::uint32_t iteration) {
  for (std::uint64_t i = graph_detail::warp_index(); i < frontier_size; i += graph_detail::warp_count()) {
    const std::uint32_t v = frontier[i];
    const graph_detail::Row row = graph_detail::row_of(offsets, v);
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
  }
}

/// The same iteration through warpvm: `offsets`, `columns` and `labels` are objects of the paged
/// space; launch with Config::max_pages_held_per_thread >= cc_pages_held.
__global__ void __launch_bounds__(graph_block_threads, graph_paged_min_blocks) cc_propagate_paged(array<std::uint64_t> offsets, array<std::uint32_t> columns, array<std::uint32_t> labels,
                                   const std::uint32_t* frontier, std::uint32_t frontier_size, std::uint32_t* next,
                                   std::uint32_t* next_size, std::uint32_t* stamps, std::uint32_t iteration) {
  for (std::uint64_t i = graph_detail::warp_index(); i < frontier_size; i += graph_detail::warp_count()) {
    const std::uint32_t v = frontier[i];
    const graph_detail::Row row = graph_detail::row_of(offsets, v);
    const std::uint32_t label = graph_detail::warp_value(labels, v);
    graph_detail::walk_row_paged<false>(columns, columns, row, [&](std::uint32_t u, std::uint32_t, bool in_row) {
      const bool lowered = in_row && labels[u] > label && labels.atomic_min(u, label) > label &&
                           graph_detail::first_this_iteration(stamps, u, iteration);
      graph_detail::append(lowered, u, next, next_size);
    });
  }
}

/// Components through warpvm on rt's stream: the caller has set the labels object's host copy
/// (labels[v] = v) with nothing of it cached; `max_blocks` as for bfs_paged. Labels are in the
/// cache afterwards: flush() for the host copy. Returns the iterations run.
inline std::uint32_t cc_paged(Runtime& rt, FrontierQueues& queues, const array<std::uint64_t>& offsets,
                              const array<std::uint32_t>& columns, const array<std::uint32_t>& labels,
                              std::uint64_t max_blocks, unsigned block_threads = graph_block_threads) {
  return queues.run_from_all(rt.stream(), [&](const std::uint32_t* frontier, std::uint32_t size, std::uint32_t* next,
                                              std::uint32_t* next_size, std::uint32_t* stamps, std::uint32_t iteration) {
    rt.launch(cc_propagate_paged, frontier_grid(size, max_blocks, block_threads), paged_block(block_threads), 0, offsets,
              columns, labels, frontier, size, next, next_size, stamps, iteration);
  });
}

/// Components on plain pointers on `stream`; labels as for cc_paged (fill_identity).
inline std::uint32_t cc_raw(cudaStream_t stream, FrontierQueues& queues, const std::uint64_t* offsets,
                            const std::uint32_t* columns, std::uint32_t* labels, std::uint64_t max_blocks) {
  return queues.run_from_all(stream, [&](const std::uint32_t* frontier, std::uint32_t size, std::uint32_t* next,
                                         std::uint32_t* next_size, std::uint32_t* stamps, std::uint32_t iteration) {
    cc_propagate_raw<<<frontier_grid(size, max_blocks), graph_block_threads, 0, stream>>>(
        offsets, columns, labels, frontier, size, next, next_size, stamps, iteration);
  });
}

}  // namespace warpvm::apps
