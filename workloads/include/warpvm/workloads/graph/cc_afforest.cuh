#pragma once
// Connected components on the GPU by Afforest (afforest.hpp has the algorithm and the union-find
// the kernels share with the host replay): a union-find over the labels array (labels[v] = v at
// the start, as for label propagation), whose roots are the least ids of their components, so the
// final labels are workloads::reference_cc's. The kernels, in order:
//  - afforest_link_neighbours then afforest_compress, once per neighbour round: a thread per
//    vertex links it with its r-th neighbour;
//  - afforest_sample: a thread per sampled vertex reads its root; the host picks the most
//    frequent (one wait, 4 KB back);
//  - afforest_select: a thread per vertex appends the vertices outside that component with more
//    than neighbour_rounds entries to a frontier queue and counts their entries;
//  - afforest_link_rows over that queue: a warp per vertex's row, or with a Balanced CSR a warp
//    per chunk of it (FrontierQueues::launch_over_rows, as the other apps), links the vertex with
//    every neighbour; then afforest_compress once more.
// The rows of the sampled component are never read: on a paged space their column pages are
// never moved. One template per kernel serves both forms: plain pointers (device, managed or
// zero-copy memory; the labels through ParentPointers) and warpvm arrays (element accesses and
// compare_exchange on the labels, page spans over the rows, as cc_propagate_paged).

#include "warpvm/workloads/graph/afforest.hpp"
#include "warpvm/workloads/graph/graph_kernels.cuh"
#include "warpvm/warpvm.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace warpvm::workloads {

/// Pages a thread of the Afforest kernels holds at once: in afforest_link_rows a column page and
/// one label; elsewhere one element at a time.
inline constexpr std::uint32_t cc_afforest_pages_held = 2;

/// Labels in plain memory with warpvm::array's element API: afforest.hpp's union-find on them.
/// Loads are plain (a stale parent only costs a failed compare-and-swap: afforest.hpp).
struct ParentPointers {
  std::uint32_t* parents;
  __device__ std::uint32_t load(std::uint64_t i) const { return parents[i]; }
  __device__ void store(std::uint64_t i, std::uint32_t value) const { parents[i] = value; }
  __device__ bool compare_exchange(std::uint64_t i, std::uint32_t& expected, std::uint32_t desired) const {
    const std::uint32_t seen = atomicCAS(parents + i, expected, desired);
    const bool swapped = seen == expected;
    expected = seen;
    return swapped;
  }
};

/// What one run did, for the records.
struct AfforestCounts {
  std::uint32_t giant = 0;           ///< the sampled component's root (its least vertex)
  std::uint32_t rows_linked = 0;     ///< vertices whose rows the last linking pass walked
  std::uint64_t entries_linked = 0;  ///< the entries of those rows
};

/// The sample's roots and the entry count of the last linking pass, on the device and in pinned
/// host memory; not copyable.
class AfforestScratch {
 public:
  [[nodiscard]] std::uint32_t* samples() const { return samples_.get(); }
  [[nodiscard]] unsigned long long* entries() const { return entries_.get(); }
  /// The most frequent root of the sample once the work queued on `stream` is done (waits).
  std::uint32_t most_frequent_root(cudaStream_t stream) const {
    WARPVM_CUDA_TRY(cudaMemcpyAsync(host_samples_.get(), samples_.get(), afforest::samples * sizeof(std::uint32_t),
                                    cudaMemcpyDeviceToHost, stream));
    WARPVM_CUDA_TRY(cudaStreamSynchronize(stream));
    return afforest::most_frequent(host_samples_.get(), afforest::samples);
  }
  /// The entry count once the work queued on `stream` is done (waits).
  std::uint64_t entries_counted(cudaStream_t stream) const {
    WARPVM_CUDA_TRY(
        cudaMemcpyAsync(host_entries_.get(), entries_.get(), sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
    WARPVM_CUDA_TRY(cudaStreamSynchronize(stream));
    return *host_entries_;
  }

 private:
  detail::device_ptr<std::uint32_t> samples_ = detail::make_device<std::uint32_t>(afforest::samples, "Afforest samples");
  detail::device_ptr<unsigned long long> entries_ = detail::make_device<unsigned long long>(1, "Afforest entries");
  detail::pinned_ptr<std::uint32_t> host_samples_ =
      detail::make_pinned_zeroed<std::uint32_t>(afforest::samples, cudaHostAllocDefault, "Afforest samples (host)");
  detail::pinned_ptr<unsigned long long> host_entries_ =
      detail::make_pinned_zeroed<unsigned long long>(1, cudaHostAllocDefault, "Afforest entries (host)");
};

namespace graph_detail {

/// visit(i, in_range) for i over [0, count), a thread each (grid-stride), called by all 32 lanes
/// of every warp together so that warp-wide votes work.
template <class Visit>
__device__ void for_each_index(std::uint64_t count, Visit&& visit) {
  for (std::uint64_t base = warp_index() * 32; base < count; base += warp_count() * 32) {
    const std::uint64_t i = base + lane();
    visit(static_cast<std::uint32_t>(i), i < count);
  }
}

/// visit(u, in_row) for each neighbour u of a row, the warp 32 entries at a time (walk_row on
/// plain memory, walk_row_paged through warpvm); u is 0 when !in_row.
template <class Visit>
__device__ void walk_neighbours(const std::uint32_t* columns, Row row, Visit&& visit) {
  walk_row(row, [&](std::uint64_t e, bool in_row) { visit(in_row ? columns[e] : 0u, in_row); });
}
template <class Visit>
__device__ void walk_neighbours(const array<std::uint32_t>& columns, Row row, Visit&& visit) {
  walk_row_paged<false>(columns, columns, row, [&](std::uint32_t u, std::uint32_t, bool in_row) { visit(u, in_row); });
}

}  // namespace graph_detail

/// Step 1, one round: every vertex links with its `round`-th neighbour.
template <class Offsets, class Columns, class Parents>
__global__ void __launch_bounds__(graph_block_threads, graph_paged_min_blocks)
    afforest_link_neighbours(Offsets offsets, Columns columns, Parents parents, std::uint64_t vertices,
                             std::uint32_t round) {
  graph_detail::for_each_index(vertices, [&](std::uint32_t v, bool in_range) {
    if (in_range) afforest::link_neighbour(offsets, columns, parents, v, round);
  });
}

/// Every vertex pointed at its root (no link in flight: a kernel of its own).
template <class Parents>
__global__ void __launch_bounds__(graph_block_threads, graph_paged_min_blocks)
    afforest_compress(Parents parents, std::uint64_t vertices) {
  graph_detail::for_each_index(vertices, [&](std::uint32_t v, bool in_range) {
    if (in_range) afforest::compress(parents, v);
  });
}

/// Step 2: the roots of the sampled vertices into `roots` (afforest::samples entries).
template <class Parents>
__global__ void __launch_bounds__(graph_block_threads, graph_paged_min_blocks)
    afforest_sample(Parents parents, std::uint64_t vertices, std::uint64_t seed, std::uint32_t* roots) {
  graph_detail::for_each_index(afforest::samples, [&](std::uint32_t i, bool in_range) {
    if (in_range) roots[i] = parents.load(afforest::sample_vertex(i, vertices, seed));
  });
}

/// Step 3's vertices (afforest::links_row, the labels compressed) appended to `queue`, their
/// entries added to `entries` (one atomic per warp).
template <class Offsets, class Parents>
__global__ void __launch_bounds__(graph_block_threads, graph_paged_min_blocks)
    afforest_select(Offsets offsets, Parents parents, std::uint64_t vertices, std::uint32_t giant, std::uint32_t* queue,
                    std::uint32_t* queue_size, unsigned long long* entries) {
  graph_detail::for_each_index(vertices, [&](std::uint32_t v, bool in_range) {
    bool walks = false;
    unsigned long long row_entries = 0;
    if (in_range) {
      const std::uint64_t degree = offsets[v + 1] - offsets[v];
      walks = afforest::links_row(parents.load(v), giant, degree);
      if (walks) row_entries = degree;
    }
    for (unsigned distance = 16; distance > 0; distance /= 2) row_entries += __shfl_down_sync(0xffffffffu, row_entries, distance);
    if (graph_detail::lane() == 0 && row_entries != 0) atomicAdd(entries, row_entries);
    graph_detail::append(walks, v, queue, queue_size);
  });
}

/// Step 3: every unit of work of `rows` (graph_detail::FrontierRows or ChunkRows over the
/// selected vertices, a warp each) links its vertex with each neighbour of the row or chunk.
template <class Rows, class Columns, class Parents>
__global__ void __launch_bounds__(graph_block_threads, graph_paged_min_blocks)
    afforest_link_rows(Rows rows, Columns columns, Parents parents) {
  graph_detail::for_each_row(rows, [&](std::uint32_t v, graph_detail::Row row) {
    graph_detail::walk_neighbours(columns, row, [&](std::uint32_t u, bool in_row) {
      if (in_row) afforest::link(parents, v, u);
    });
  });
}

namespace graph_detail {

/// The whole algorithm through `launch` (a StreamLauncher or RuntimeLauncher) on its stream, the
/// graph and labels in either form; waits twice (the sample, the selection's size) and at the end
/// for the entry count.
template <class Launcher, class Offsets, class Columns, class Parents, class Table>
AfforestCounts afforest(const Launcher& launch, FrontierQueues& queues, AfforestScratch& scratch, const Offsets& offsets,
                        const Columns& columns, const Parents& parents, const Table* chunks, std::uint64_t max_blocks,
                        unsigned block_threads, std::uint64_t seed) {
  const cudaStream_t stream = launch.launch_stream();
  const std::uint64_t vertices = queues.vertices();
  const dim3 block(block_threads);
  // A thread per vertex: frontier_grid counts warps.
  const dim3 vertex_grid = frontier_grid(static_cast<std::uint32_t>((vertices + 31) / 32), max_blocks, block_threads);
  for (std::uint32_t round = 0; round < afforest::neighbour_rounds; ++round) {
    launch(afforest_link_neighbours<Offsets, Columns, Parents>, vertex_grid, block, offsets, columns, parents, vertices, round);
    launch(afforest_compress<Parents>, vertex_grid, block, parents, vertices);
  }
  launch(afforest_sample<Parents>, frontier_grid(afforest::samples / 32, max_blocks, block_threads), block, parents, vertices,
         seed, scratch.samples());
  AfforestCounts counts;
  counts.giant = scratch.most_frequent_root(stream);
  WARPVM_CUDA_TRY(cudaMemsetAsync(scratch.entries(), 0, sizeof(unsigned long long), stream));
  counts.rows_linked = queues.run_over_selected(
      stream,
      [&](std::uint32_t* queue, std::uint32_t* queue_size) {
        launch(afforest_select<Offsets, Parents>, vertex_grid, block, offsets, parents, vertices, counts.giant, queue,
               queue_size, scratch.entries());
      },
      [&](const std::uint32_t* selected, std::uint32_t size) {
        queues.launch_over_rows(launch, offsets, chunks, selected, size, max_blocks, block_threads,
                                [&](auto rows, dim3 grid, dim3 rows_block) {
                                  launch(afforest_link_rows<decltype(rows), Columns, Parents>, grid, rows_block, rows, columns,
                                         parents);
                                });
      });
  launch(afforest_compress<Parents>, vertex_grid, block, parents, vertices);
  counts.entries_linked = scratch.entries_counted(stream);
  return counts;
}

}  // namespace graph_detail

/// Link passes of one run (the neighbour rounds and the last), the records' `iterations`.
inline constexpr std::uint32_t cc_afforest_passes = afforest::neighbour_rounds + 1;

/// Components by Afforest through warpvm on rt's stream: `labels` as for cc_paged (labels[v] = v
/// on the host, nothing of it cached), and in the cache afterwards (flush() for the host copy);
/// launch with Config::max_pages_held_per_thread >= cc_afforest_pages_held. `max_blocks`,
/// `block_threads` and `chunks` as for cc_paged; `seed` draws the sample.
inline AfforestCounts cc_afforest_paged(Runtime& rt, FrontierQueues& queues, AfforestScratch& scratch,
                                        const array<std::uint64_t>& offsets, const array<std::uint32_t>& columns,
                                        const array<std::uint32_t>& labels, std::uint64_t max_blocks, std::uint64_t seed,
                                        unsigned block_threads = graph_block_threads,
                                        const PagedChunkTable* chunks = nullptr) {
  return graph_detail::afforest(RuntimeLauncher{rt}, queues, scratch, offsets, columns, labels, chunks, max_blocks,
                                paged_block(block_threads).x, seed);
}

/// Components by Afforest on plain pointers on `stream`; labels as for cc_raw (fill_identity),
/// `chunks` as there.
inline AfforestCounts cc_afforest_raw(cudaStream_t stream, FrontierQueues& queues, AfforestScratch& scratch,
                                      const std::uint64_t* offsets, const std::uint32_t* columns, std::uint32_t* labels,
                                      std::uint64_t max_blocks, std::uint64_t seed, const RawChunkTable* chunks = nullptr) {
  return graph_detail::afforest(StreamLauncher{stream}, queues, scratch, offsets, columns, ParentPointers{labels}, chunks,
                                max_blocks, graph_block_threads, seed);
}

}  // namespace warpvm::workloads
