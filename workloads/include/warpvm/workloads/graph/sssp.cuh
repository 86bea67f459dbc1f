#pragma once
// Single-source shortest paths on the GPU: data-driven Bellman-Ford. Distances are uint32
// (workloads::sssp_unreached for "not reached"), the root at 0; the first frontier is the root. Each
// iteration's kernel lets every frontier vertex v (a warp each, or a warp per chunk of its row
// with a Balanced CSR) relax its edges: for neighbour u over an edge of weight w,
// atomicMin(distance[u], distance[v] + w), and a u whose distance dropped enters the next
// frontier (once per iteration: the queue's stamps). Distances only fall, so a stale read only
// delays; when a frontier is empty no edge can shorten a path, so the distances are the shortest
// (workloads::reference_sssp's). Weights are a CSR array aligned with the columns
// (workloads::fill_edge_weights). Two versions of the kernel, as for BFS (bfs.cuh): plain pointers, and
// warpvm::array handles with page spans over the columns and the weights (the same page of each)
// and element accesses / atomics on the distances.

#include "warpvm/workloads/graph/graph_kernels.cuh"
#include "warpvm/workloads/graph/graph_reference.hpp"
#include "warpvm/warpvm.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace warpvm::workloads {

/// Pages a thread of sssp_relax_paged holds at once: a column page, the weight page beside it
/// and one distance.
inline constexpr std::uint32_t sssp_pages_held = 3;

namespace sssp_detail {
/// distance[v] + w when it fits below sssp_unreached; else sssp_unreached, which lowers nothing
/// (workloads::reference_sssp refuses graphs whose distances do not fit).
__device__ inline std::uint32_t extend(std::uint32_t distance, std::uint32_t weight) {
  const std::uint64_t sum = std::uint64_t{distance} + weight;
  return sum < sssp_unreached ? static_cast<std::uint32_t>(sum) : sssp_unreached;
}
}  // namespace sssp_detail

/// One iteration on plain pointers over `rows` (graph_detail::FrontierRows or ChunkRows: a warp
/// per frontier vertex or per chunk of its row).
template <class Rows>
__global__ void sssp_relax_raw(Rows rows, const std::uint32_t* columns, const std::uint32_t* weights,
                               std::uint32_t* distances, std::uint32_t* next, std::uint32_t* next_size,
                               std::uint32_t* stamps, std::uint32_t iteration) {
  graph_detail::for_each_row(rows, [&](std::uint32_t v, graph_detail::Row row) {
    // Read after v last dropped (or v is queued again): a later drop brings v back next iteration.
    const std::uint32_t distance = distances[v];
    graph_detail::walk_row(row, [&](std::uint64_t e, bool in_row) {
      bool lowered = false;
      std::uint32_t u = 0;
      if (in_row) {
        u = columns[e];
        const std::uint32_t candidate = sssp_detail::extend(distance, weights[e]);
        lowered = candidate < distances[u] && atomicMin(&distances[u], candidate) > candidate &&
                  graph_detail::first_this_iteration(stamps, u, iteration);
      }
      graph_detail::append(lowered, u, next, next_size);
    });
  });
}

/// The same iteration through warpvm: the rows' offsets (or chunk offsets), `columns`, `weights`
/// and `distances` are objects of the paged space; launch with
/// Config::max_pages_held_per_thread >= sssp_pages_held.
template <class Rows>
__global__ void __launch_bounds__(graph_block_threads, graph_paged_min_blocks)
    sssp_relax_paged(Rows rows, array<std::uint32_t> columns, array<std::uint32_t> weights,
                     array<std::uint32_t> distances, std::uint32_t* next, std::uint32_t* next_size,
                     std::uint32_t* stamps, std::uint32_t iteration) {
  graph_detail::for_each_row(rows, [&](std::uint32_t v, graph_detail::Row row) {
    const std::uint32_t distance = graph_detail::warp_value(distances, v);
    graph_detail::walk_row_paged<true>(columns, weights, row, [&](std::uint32_t u, std::uint32_t weight, bool in_row) {
      const std::uint32_t candidate = sssp_detail::extend(distance, weight);
      const bool lowered = in_row && candidate < distances[u] && distances.fetch_min(u, candidate) > candidate &&
                           graph_detail::first_this_iteration(stamps, u, iteration);
      graph_detail::append(lowered, u, next, next_size);
    });
  });
}

/// Shortest paths through warpvm on rt's stream: the caller has set the distances object's host
/// copy (root 0, others sssp_unreached) with nothing of it cached; `max_blocks` and `chunks` as
/// for bfs_paged. Distances are in the cache afterwards: flush() for the host copy. Returns the
/// iterations run.
inline std::uint32_t sssp_paged(Runtime& rt, FrontierQueues& queues, const array<std::uint64_t>& offsets,
                                const array<std::uint32_t>& columns, const array<std::uint32_t>& weights,
                                const array<std::uint32_t>& distances, std::uint32_t root, std::uint64_t max_blocks,
                                unsigned block_threads = graph_block_threads, const PagedChunkTable* chunks = nullptr) {
  const RuntimeLauncher launch{rt};
  const unsigned threads = paged_block(block_threads).x;
  return queues.run_from(rt.stream(), root, [&](const std::uint32_t* frontier, std::uint32_t size, std::uint32_t* next,
                                                std::uint32_t* next_size, std::uint32_t* stamps, std::uint32_t iteration) {
    queues.launch_over_rows(launch, offsets, chunks, frontier, size, max_blocks, threads, [&](auto rows, dim3 grid, dim3 block) {
      launch(sssp_relax_paged<decltype(rows)>, grid, block, rows, columns, weights, distances, next, next_size, stamps,
             iteration);
    });
  });
}

/// Shortest paths on plain pointers on `stream`; distances as for sssp_paged (reset_from_root),
/// `chunks` as for bfs_raw.
inline std::uint32_t sssp_raw(cudaStream_t stream, FrontierQueues& queues, const std::uint64_t* offsets,
                              const std::uint32_t* columns, const std::uint32_t* weights, std::uint32_t* distances,
                              std::uint32_t root, std::uint64_t max_blocks, const RawChunkTable* chunks = nullptr) {
  const StreamLauncher launch{stream};
  return queues.run_from(stream, root, [&](const std::uint32_t* frontier, std::uint32_t size, std::uint32_t* next,
                                           std::uint32_t* next_size, std::uint32_t* stamps, std::uint32_t iteration) {
    queues.launch_over_rows(launch, offsets, chunks, frontier, size, max_blocks, graph_block_threads,
                            [&](auto rows, dim3 grid, dim3 block) {
                              launch(sssp_relax_raw<decltype(rows)>, grid, block, rows, columns, weights, distances, next,
                                     next_size, stamps, iteration);
                            });
  });
}

}  // namespace warpvm::workloads
