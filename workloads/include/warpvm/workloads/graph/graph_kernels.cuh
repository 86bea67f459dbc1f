#pragma once
// What the graph kernels (bfs.cuh, cc.cuh, cc_afforest.cuh, sssp.cuh) share: a warp per unit of
// work (a frontier vertex's row, or with DREAM's Balanced CSR one chunk of it), the row bounds read
// once per warp, two ways to walk a CSR row (plain pointers in 128-byte aligned windows; warpvm
// page spans), appending to the next frontier queue at most once per vertex and iteration, launch
// shapes, and the frontier queues that drive the iterations from the host. The queues (and the
// per-vertex stamps, and the chunk queue of the balanced runs) live in device memory in every mode:
// scratch that never needs to reach the host, 16 bytes per vertex (12 in arrival order; and 8 per
// chunk).
//
// Frontiers are walked in vertex order by default: the next queue fills in whatever order warps
// claim vertices, and a radix sort of it before the next iteration puts neighbouring rows (which
// share column pages) on warps that run at the same time. (With a Balanced CSR the chunk queue
// keeps that order only per 32 frontier vertices: expand_to_chunks appends a warp's at a time.)
// Out of core that is what decides how often a page comes back: in arrival order a page of 30
// rows is wanted by warps spread over the whole iteration, and a cache smaller than the graph
// evicts it between them (DREAM's and EMOGI's kernels scan the vertices in order for the same
// reason).

#include "warpvm/detail/core/cuda_buffers.hpp"
#include "warpvm/workloads/graph/rmat.hpp"
#include "warpvm/warpvm.hpp"

#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace warpvm::workloads {

/// Threads per block of the graph kernels (whole warps: the kernels use warp-wide votes).
inline constexpr unsigned graph_block_threads = 256;
/// Blocks of graph_block_threads per SM the paged kernels are compiled for (__launch_bounds__): at
/// most 64 registers a thread, where the compiler alone takes 96-119 and fits two blocks. The
/// paged accesses are chains of dependent loads, so resident warps are what hides them: on the
/// H200 (R-MAT scale 24, cache = 100%) CC went from 0.46 to 0.26 s, SSSP 3% and BFS at 50% cache
/// 6% faster, BFS at 100% unchanged, despite 0.5 KB of spills; six blocks (more spills) was slower.
inline constexpr unsigned graph_paged_min_blocks = 4;

namespace graph_detail {

__device__ inline unsigned lane() { return threadIdx.x % 32; }
__device__ inline std::uint64_t warp_index() { return (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; }
__device__ inline std::uint64_t warp_count() { return std::uint64_t{gridDim.x} * blockDim.x / 32; }

/// Appends the vertices the lanes claimed to the next frontier: one atomic per warp. Called by
/// all 32 lanes of the warp together.
__device__ inline void append(bool claimed, std::uint32_t vertex, std::uint32_t* next, std::uint32_t* next_size) {
  const unsigned winners = __ballot_sync(0xffffffffu, claimed);
  if (winners == 0) return;
  std::uint32_t base = 0;
  if (lane() == 0) base = atomicAdd(next_size, static_cast<std::uint32_t>(__popc(winners)));
  base = __shfl_sync(0xffffffffu, base, 0);
  if (claimed) next[base + __popc(winners & ((1u << lane()) - 1))] = vertex;
}

/// True for the first caller per vertex and iteration: `stamps[v]` holds the last iteration v was
/// queued for, so a vertex lowered by several neighbours enters the next queue once.
__device__ inline bool first_this_iteration(std::uint32_t* stamps, std::uint32_t v, std::uint32_t iteration) {
  return atomicExch(&stamps[v], iteration) != iteration;
}

/// A CSR row's entries [begin, end).
struct Row {
  std::uint64_t begin, end;
};

/// v's row bounds: lanes 0 and 1 read offsets[v] and offsets[v + 1] (through warpvm one page
/// acquisition for both unless the pair straddles a page), then broadcast them. Called by all
/// 32 lanes; `Offsets` is a pointer or a warpvm::array<std::uint64_t>.
template <class Offsets>
__device__ Row row_of(const Offsets& offsets, std::uint32_t v) {
  std::uint64_t bound = 0;
  if (lane() < 2) bound = offsets[v + lane()];
  return {__shfl_sync(0xffffffffu, bound, 0), __shfl_sync(0xffffffffu, bound, 1)};
}

/// values[v] for the whole warp, read by one lane and shared (called by all 32 lanes): through
/// warpvm each lane's own read would be a page lookup of its own for the same element.
template <class Values>
__device__ std::uint32_t warp_value(const Values& values, std::uint32_t v) {
  std::uint32_t value = 0;
  if (lane() == 0) value = values[v];
  return __shfl_sync(0xffffffffu, value, 0);
}

/// The warp walks a row of plain arrays in windows of 32 entries aligned to 128 bytes (EMOGI's
/// aligned reads: each window of a uint32 array is one cache line, one PCIe request when the
/// array is zero-copy host memory). visit(e, in_row) is called by all lanes for each window; e
/// is the lane's entry, to be read only when in_row.
template <class Visit>
__device__ void walk_row(Row row, Visit&& visit) {
  for (std::uint64_t base = row.begin & ~std::uint64_t{31}; base < row.end; base += 32) {
    const std::uint64_t e = base + lane();
    visit(e, e >= row.begin && e < row.end);
  }
}

/// The warp walks a row of warpvm arrays one page at a time: the whole warp holds the page of
/// `columns` (and, when Weighted, the same page of `weights`: both hold uint32, so their pages
/// cover the same entries) once, then reads it with plain loads. visit(u, w, in_row) is called
/// by all lanes, 32 entries per step: u the neighbour and w the weight (1 unweighted), both 0
/// when !in_row. Holds one page per array for the visit's duration.
template <bool Weighted, class Visit>
__device__ void walk_row_paged(const array<std::uint32_t>& columns, const array<std::uint32_t>& weights, Row row,
                               Visit&& visit) {
  for (std::uint64_t e = row.begin; e < row.end;) {
    const auto neighbours = columns.span(e);
    const std::uint64_t page_end = std::min<std::uint64_t>(row.end, neighbours.first() + neighbours.size());
    auto visit_page = [&](auto&& weight_at) {
      for (std::uint64_t base = e; base < page_end; base += 32) {
        const std::uint64_t j = base + lane();
        const bool in_row = j < page_end;
        const auto slot = static_cast<std::uint32_t>(in_row ? j - neighbours.first() : 0);
        visit(in_row ? neighbours[slot] : 0u, in_row ? weight_at(slot) : 0u, in_row);
      }
    };
    if constexpr (Weighted) {
      const auto weight_page = weights.span(e);
      visit_page([&](std::uint32_t slot) { return weight_page[slot]; });
    } else {
      visit_page([](std::uint32_t) { return 1u; });
    }
    e = page_end;
  }
}

/// The warps' units of work without a chunk table: each frontier vertex's whole row.
template <class Offsets>
struct FrontierRows {
  Offsets offsets;  ///< the CSR's row offsets: a pointer or a warpvm::array<std::uint64_t>
  const std::uint32_t* frontier;
  std::uint32_t size;
  __device__ std::uint32_t vertex(std::uint64_t i) const { return frontier[i]; }
  /// Called by all 32 lanes (row_of).
  __device__ Row row(std::uint64_t i) const { return row_of(offsets, frontier[i]); }
};

/// The warps' units of work over the Balanced CSR: chunks of the frontier's rows, each with its
/// vertex (the chunk queue that expand_to_chunks fills).
template <class ChunkOffsets>
struct ChunkRows {
  ChunkOffsets chunk_offsets;  ///< the first edge of each chunk, then the end: as offsets are for rows
  const std::uint32_t* vertices;
  const std::uint32_t* chunks;
  std::uint32_t size;
  __device__ std::uint32_t vertex(std::uint64_t i) const { return vertices[i]; }
  /// A chunk's entries; called by all 32 lanes. The last chunk of a row ends where the next
  /// chunk begins: rows between them have no entries.
  __device__ Row row(std::uint64_t i) const { return row_of(chunk_offsets, chunks[i]); }
};

/// The most units of work (rows or chunks) a warp walks one after another before it jumps a grid
/// ahead: about a page of columns (a Balanced CSR chunk is at most 32 edges; an R-MAT row 32 on
/// average).
inline constexpr std::uint64_t max_units_per_run = 32;

/// visit(v, row) for each unit of work of `rows`, a warp each; called by all 32 lanes of every
/// warp of the grid. Warps take runs of neighbouring units, grid-stride over the runs: over a
/// frontier in vertex order a warp then walks neighbouring rows one after another, on the page it
/// has just used, while the warps in flight are on as many different pages as with any order. A
/// plain grid stride puts the warps in flight on a few pages, one warp loading each and the rest
/// waiting for it; one contiguous run per warp scatters device-memory reads (CC on device memory
/// 20% slower on the H200). Every warp gets the same number of runs (`rounds`), each as short as
/// that allows and at most max_units_per_run, so that no warp is left with a run more than the
/// others.
template <class Rows, class Visit>
__device__ void for_each_row(const Rows& rows, Visit&& visit) {
  const std::uint64_t warps = warp_count();
  const std::uint64_t longest = std::uint64_t{max_units_per_run} * warps;  // units in one round at most
  const std::uint64_t rounds = std::max<std::uint64_t>(1, (rows.size + longest - 1) / longest);
  const std::uint64_t units_per_run = (rows.size + rounds * warps - 1) / (rounds * warps);
  for (std::uint64_t run = warp_index() * units_per_run; run < rows.size; run += warps * units_per_run) {
    const std::uint64_t end = std::min<std::uint64_t>(rows.size, run + units_per_run);
    for (std::uint64_t i = run; i < end; ++i) visit(rows.vertex(i), rows.row(i));
  }
}

}  // namespace graph_detail

/// The Balanced CSR's chunk table as the kernels read it (workloads::balance_csr and
/// workloads::first_chunks): `chunk_offsets` (chunks + 1 entries) where each chunk's edges start, then
/// the end of the columns; `vertex_chunks` (vertices + 1) vertex v's chunks [vertex_chunks[v],
/// vertex_chunks[v + 1]). Plain pointers, or warpvm arrays.
template <class ChunkOffsets, class VertexChunks>
struct ChunkTable {
  ChunkOffsets chunk_offsets;
  VertexChunks vertex_chunks;
};
using RawChunkTable = ChunkTable<const std::uint64_t*, const std::uint32_t*>;
using PagedChunkTable = ChunkTable<array<std::uint64_t>, array<std::uint32_t>>;

/// The chunks of the frontier's vertices into the chunk queue (`chunk_vertices`, `chunk_ids`),
/// `chunk_count` (zero before) their number afterwards; a thread per frontier vertex, one atomic
/// per warp. `VertexChunks` is a pointer or a warpvm::array<std::uint32_t> (one element held at a
/// time). The queue needs room for the chunks of every vertex: a frontier holds each vertex once.
template <class VertexChunks>
__global__ void __launch_bounds__(graph_block_threads, graph_paged_min_blocks)
    expand_to_chunks(VertexChunks vertex_chunks, const std::uint32_t* frontier, std::uint32_t frontier_size,
                     std::uint32_t* chunk_vertices, std::uint32_t* chunk_ids, std::uint32_t* chunk_count) {
  using graph_detail::lane;
  constexpr unsigned all_lanes = 0xffffffffu;
  for (std::uint64_t base = graph_detail::warp_index() * 32; base < frontier_size; base += graph_detail::warp_count() * 32) {
    std::uint32_t v = 0, first = 0, count = 0;
    if (base + lane() < frontier_size) {
      v = frontier[base + lane()];
      first = vertex_chunks[v];
      count = vertex_chunks[v + 1] - first;
    }
    // Where each lane's chunks go: an inclusive scan of the counts, one atomic for the warp.
    std::uint32_t end = count;
    for (unsigned distance = 1; distance < 32; distance *= 2) {
      const std::uint32_t below = __shfl_up_sync(all_lanes, end, distance);
      if (lane() >= distance) end += below;
    }
    const std::uint32_t total = __shfl_sync(all_lanes, end, 31);
    std::uint32_t warp_slot = 0;
    if (lane() == 0 && total != 0) warp_slot = atomicAdd(chunk_count, total);
    const std::uint32_t slot = __shfl_sync(all_lanes, warp_slot, 0) + end - count;
    // A lane writes its own few chunks; a hub's many are written by the whole warp, 32 at a time,
    // so that one lane's serial stores do not hold up its warp.
    const bool hub = count > 32;
    if (!hub) {
      for (std::uint32_t k = 0; k < count; ++k) {
        chunk_vertices[slot + k] = v;
        chunk_ids[slot + k] = first + k;
      }
    }
    for (unsigned hubs = __ballot_sync(all_lanes, hub); hubs != 0; hubs &= hubs - 1) {
      const int from = __ffs(static_cast<int>(hubs)) - 1;
      const std::uint32_t hub_vertex = __shfl_sync(all_lanes, v, from), hub_first = __shfl_sync(all_lanes, first, from),
                          hub_count = __shfl_sync(all_lanes, count, from), hub_slot = __shfl_sync(all_lanes, slot, from);
      for (std::uint32_t k = lane(); k < hub_count; k += 32) {
        chunk_vertices[hub_slot + k] = hub_vertex;
        chunk_ids[hub_slot + k] = hub_first + k;
      }
    }
  }
}

/// Launches plain-pointer kernels on a stream.
struct StreamLauncher {
  cudaStream_t stream;
  [[nodiscard]] cudaStream_t launch_stream() const { return stream; }
  template <class... Params, class... Args>
  void operator()(void (*kernel)(Params...), dim3 grid, dim3 block, Args&&... args) const {
    kernel<<<grid, block, 0, stream>>>(std::forward<Args>(args)...);
    WARPVM_CUDA_TRY(cudaGetLastError());
  }
};

/// Launches paged kernels through a Runtime (on its stream, after its progress check).
struct RuntimeLauncher {
  Runtime& rt;
  [[nodiscard]] cudaStream_t launch_stream() const { return rt.stream(); }
  template <class... Params, class... Args>
  void operator()(void (*kernel)(Params...), dim3 grid, dim3 block, Args&&... args) const {
    rt.launch(kernel, grid, block, 0, std::forward<Args>(args)...);
  }
};

/// BFS levels and SSSP distances before a run, in device or managed memory: 0 at the root,
/// unreached (uint32 max: workloads::bfs_unreached, workloads::sssp_unreached) everywhere else.
__global__ void reset_from_root(std::uint32_t* values, std::uint64_t n, std::uint32_t root) {
  for (std::uint64_t v = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < n;
       v += std::uint64_t{gridDim.x} * blockDim.x)
    values[v] = v == root ? 0 : workloads::bfs_unreached;
}

/// values[v] = v: component labels before a run, and the frontier of every vertex.
__global__ void fill_identity(std::uint32_t* values, std::uint64_t n) {
  for (std::uint64_t v = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < n;
       v += std::uint64_t{gridDim.x} * blockDim.x)
    values[v] = static_cast<std::uint32_t>(v);
}

/// Blocks for one iteration: a warp per frontier vertex, at most `max_blocks`.
inline dim3 frontier_grid(std::uint32_t frontier_size, std::uint64_t max_blocks,
                          unsigned block_threads = graph_block_threads) {
  const std::uint64_t warps_per_block = block_threads / 32;
  const std::uint64_t wanted = (std::uint64_t{frontier_size} + warps_per_block - 1) / warps_per_block;
  return dim3(static_cast<unsigned>(std::max<std::uint64_t>(1, std::min(wanted, max_blocks))));
}

/// The block of a paged graph kernel's launch: whole warps, at most graph_block_threads (what the
/// paged kernels are compiled for: a larger block would fail at launch with a resource error).
inline dim3 paged_block(unsigned block_threads) {
  if (block_threads == 0 || block_threads % 32 != 0 || block_threads > graph_block_threads)
    throw std::invalid_argument("paged graph kernels take blocks of whole warps, at most " +
                                std::to_string(graph_block_threads) + " threads, not " + std::to_string(block_threads));
  return dim3(block_threads);
}

/// The most blocks of `block_threads` a paged graph kernel's launch on `rt` may have: `wanted`,
/// cut to what the cache guarantees progress for (at least one block; a cache too small even for
/// that is refused by the launch, saying so). The uvm preset holds nothing: `wanted` as is.
inline std::uint64_t max_paged_blocks(const Runtime& rt, std::uint64_t wanted, unsigned block_threads = graph_block_threads) {
  if (rt.config().transport == Transport::host_batched) return wanted;
  return std::max<std::uint64_t>(1, std::min(wanted, rt.max_resident_threads() / block_threads));
}

/// The order in which an iteration's warps take the frontier's vertices.
enum class FrontierOrder : std::uint8_t {
  vertex,   ///< ascending vertex id (the queue sorted before each iteration)
  arrival,  ///< the order the previous iteration's warps appended them
};

/// The two frontier queues (and a third that sorting them needs), the next queue's length and
/// the per-vertex stamps (iteration last queued for), and for balanced runs the chunk queue (a
/// frontier's chunks and their vertices), in device memory; not copyable.
class FrontierQueues {
 public:
  /// `chunks`: the Balanced CSR's chunk count when balanced runs use these queues (the chunk
  /// queue's room: a frontier holds each vertex once, so at most every chunk), else 0.
  explicit FrontierQueues(std::uint64_t vertices, std::uint64_t chunks = 0, FrontierOrder order = FrontierOrder::vertex)
      : vertices_(checked_vertex_count(vertices)),
        order_(order),
        queues_{detail::make_device<std::uint32_t>(vertices, "frontier queue"), detail::make_device<std::uint32_t>(vertices, "frontier queue")},
        stamps_(detail::make_device<std::uint32_t>(vertices, "frontier stamps")),
        next_size_(detail::make_device<std::uint32_t>(1, "frontier size")),
        host_word_(detail::make_pinned_zeroed<std::uint32_t>(1, cudaHostAllocDefault, "frontier word")) {
    if (order_ == FrontierOrder::vertex) {
      sorted_ = detail::make_device<std::uint32_t>(vertices, "frontier queue");
      // Vertex ids fit in these low bits: the sort does no pass over the zero bits above them.
      id_bits_ = vertices > 1 ? static_cast<int>(std::bit_width(vertices - 1)) : 1;
      cub::DoubleBuffer<std::uint32_t> keys(nullptr, nullptr);
      WARPVM_CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, sort_scratch_bytes_, keys,
                                                     static_cast<std::uint32_t>(vertices), 0, id_bits_));
      sort_scratch_ = detail::make_device<unsigned char>(std::max<std::size_t>(1, sort_scratch_bytes_), "frontier sort scratch");
    }
    if (chunks == 0) return;
    // The chunk count goes through 32-bit atomics and ids, as frontier sizes do.
    if (chunks > 0xffffffffu) throw std::invalid_argument("FrontierQueues: more chunks than 32-bit ids can name");
    chunk_vertices_ = detail::make_device<std::uint32_t>(chunks, "chunk queue");
    chunk_ids_ = detail::make_device<std::uint32_t>(chunks, "chunk queue");
    chunk_count_ = detail::make_device<std::uint32_t>(1, "chunk count");
  }

  /// Iterates on `stream` from the frontier {root} until a frontier is empty.
  /// `expand(frontier, frontier_size, next, next_size, stamps, iteration)` launches one
  /// iteration's kernel on `stream`; iteration counts from 1 (BFS: the level it assigns). Waits
  /// for the stream after each iteration (to read the next frontier's size). Returns the
  /// iterations run, the last (which found nothing new) included: for BFS the depth.
  template <class Expand>
  std::uint32_t run_from(cudaStream_t stream, std::uint32_t root, Expand&& expand) {
    *host_word_ = root;
    WARPVM_CUDA_TRY(cudaMemcpyAsync(queues_[0].get(), host_word_.get(), sizeof root, cudaMemcpyHostToDevice, stream));
    return iterate(stream, 1, expand);
  }

  /// The same from the frontier of every vertex.
  template <class Expand>
  std::uint32_t run_from_all(cudaStream_t stream, Expand&& expand) {
    fill_identity<<<256, 256, 0, stream>>>(queues_[0].get(), vertices_);
    WARPVM_CUDA_TRY(cudaGetLastError());
    return iterate(stream, static_cast<std::uint32_t>(vertices_), expand);
  }

  /// One pass over the vertices a kernel selects (Afforest's last linking pass): `select(queue,
  /// queue_size)` launches on `stream` a kernel that appends them to `queue` (graph_detail::append;
  /// `queue_size` is zero before), their number is read back (a wait), then `visit(queue, size)`
  /// launches the pass over them (launch_over_rows) unless there are none. Returns their number.
  template <class Select, class Visit>
  std::uint32_t run_over_selected(cudaStream_t stream, Select&& select, Visit&& visit) {
    WARPVM_CUDA_TRY(cudaMemsetAsync(next_size_.get(), 0, sizeof(std::uint32_t), stream));
    select(queues_[0].get(), next_size_.get());
    const std::uint32_t size = read_back(next_size_.get(), stream);
    put_in_order(queues_[0], size, stream);
    if (size > 0) visit(static_cast<const std::uint32_t*>(queues_[0].get()), size);
    return size;
  }

  [[nodiscard]] std::uint64_t vertices() const { return vertices_; }
  [[nodiscard]] FrontierOrder order() const { return order_; }

  /// One iteration's kernel over `frontier` (for an `expand` of run_from or run_from_all): calls
  /// launch_rows(rows, grid, block) with rows a graph_detail::FrontierRows over `offsets` (a warp
  /// per vertex) when `table` is null; else with graph_detail::ChunkRows, the frontier's chunks
  /// (a warp per chunk), which expand_to_chunks puts in the chunk queue first through `launch`
  /// (a StreamLauncher or RuntimeLauncher), then a wait for their number to size the grid.
  /// Grids as frontier_grid, at most `max_blocks` blocks of `block_threads`.
  template <class Launcher, class Offsets, class Table, class LaunchRows>
  void launch_over_rows(const Launcher& launch, const Offsets& offsets, const Table* table, const std::uint32_t* frontier,
                        std::uint32_t size, std::uint64_t max_blocks, unsigned block_threads, LaunchRows&& launch_rows) {
    const dim3 block(block_threads);
    if (table == nullptr) {
      launch_rows(graph_detail::FrontierRows<Offsets>{offsets, frontier, size}, frontier_grid(size, max_blocks, block_threads),
                  block);
      return;
    }
    if (chunk_ids_ == nullptr) throw std::logic_error("FrontierQueues: balanced runs need queues built with the chunk count");
    const cudaStream_t stream = launch.launch_stream();
    WARPVM_CUDA_TRY(cudaMemsetAsync(chunk_count_.get(), 0, sizeof(std::uint32_t), stream));
    // A thread per frontier vertex: a warp per 32.
    const auto warps = static_cast<std::uint32_t>((std::uint64_t{size} + 31) / 32);
    launch(expand_to_chunks<decltype(table->vertex_chunks)>, frontier_grid(warps, max_blocks, block_threads),
           block, table->vertex_chunks, frontier, size, chunk_vertices_.get(), chunk_ids_.get(), chunk_count_.get());
    // host_word_ is free here: iterate() reads the next frontier's size into it after this.
    const std::uint32_t chunks = read_back(chunk_count_.get(), stream);
    if (chunks == 0) return;  // frontier vertices without edges: nothing to visit
    launch_rows(graph_detail::ChunkRows<decltype(table->chunk_offsets)>{table->chunk_offsets, chunk_vertices_.get(),
                                                                        chunk_ids_.get(), chunks},
                frontier_grid(chunks, max_blocks, block_threads), block);
  }

 private:
  static std::uint64_t checked_vertex_count(std::uint64_t vertices) {
    if (vertices > 0xffffffffu) throw std::invalid_argument("FrontierQueues: more vertices than 32-bit ids can name");
    return vertices;
  }

  /// `word` (device memory) once the work queued on `stream` is done (waits), through host_word_.
  std::uint32_t read_back(const std::uint32_t* word, cudaStream_t stream) const {
    WARPVM_CUDA_TRY(cudaMemcpyAsync(host_word_.get(), word, sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream));
    WARPVM_CUDA_TRY(cudaStreamSynchronize(stream));
    return *host_word_;
  }

  /// Sorts the first `size` entries of `queue` on `stream` when the order is by vertex. The sort
  /// may leave them in the spare buffer: then the two swap, and `queue` names the sorted one.
  void put_in_order(detail::device_ptr<std::uint32_t>& queue, std::uint32_t size, cudaStream_t stream) {
    if (order_ != FrontierOrder::vertex || size < 2) return;
    cub::DoubleBuffer<std::uint32_t> keys(queue.get(), sorted_.get());
    std::size_t scratch_bytes = sort_scratch_bytes_;
    WARPVM_CUDA_TRY(cub::DeviceRadixSort::SortKeys(sort_scratch_.get(), scratch_bytes, keys, size, 0, id_bits_, stream));
    if (keys.Current() != queue.get()) std::swap(queue, sorted_);
  }

  template <class Expand>
  std::uint32_t iterate(cudaStream_t stream, std::uint32_t size, Expand& expand) {
    WARPVM_CUDA_TRY(cudaMemsetAsync(stamps_.get(), 0, vertices_ * sizeof(std::uint32_t), stream));
    std::uint32_t iteration = 0;
    while (size > 0) {
      WARPVM_CUDA_TRY(cudaMemsetAsync(next_size_.get(), 0, sizeof(std::uint32_t), stream));
      expand(static_cast<const std::uint32_t*>(queues_[iteration % 2].get()), size, queues_[(iteration + 1) % 2].get(),
             next_size_.get(), stamps_.get(), iteration + 1);
      WARPVM_CUDA_TRY(cudaGetLastError());
      size = read_back(next_size_.get(), stream);
      ++iteration;
      put_in_order(queues_[iteration % 2], size, stream);
    }
    return iteration;
  }

  std::uint64_t vertices_;
  FrontierOrder order_;
  detail::device_ptr<std::uint32_t> queues_[2];
  detail::device_ptr<std::uint32_t> sorted_;  // the sort's other buffer (vertex order only)
  detail::device_ptr<unsigned char> sort_scratch_;
  std::size_t sort_scratch_bytes_ = 0;
  int id_bits_ = 32;
  detail::device_ptr<std::uint32_t> stamps_;
  detail::device_ptr<std::uint32_t> next_size_;
  detail::pinned_ptr<std::uint32_t> host_word_;  // the root going in, each iteration's size coming out
  detail::device_ptr<std::uint32_t> chunk_vertices_;  // the chunk queue (balanced runs): each chunk's vertex
  detail::device_ptr<std::uint32_t> chunk_ids_;       // and the chunk
  detail::device_ptr<std::uint32_t> chunk_count_;
};

}  // namespace warpvm::workloads
