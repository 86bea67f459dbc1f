#pragma once
// What the graph kernels (bfs.cuh, cc.cuh, sssp.cuh) share: a warp per frontier vertex, the
// row bounds read once per warp, two ways to walk a CSR row (plain pointers in 128-byte aligned
// windows; warpvm page spans), appending to the next frontier queue at most once per vertex and
// iteration, launch shapes, and the frontier queues that drive the iterations from the host.
// The queues (and the per-vertex stamps) live in device memory in every mode: scratch that never
// needs to reach the host, 12 bytes per vertex.

#include "warpvm/sim/rmat.hpp"
#include "warpvm/warpvm.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace warpvm::apps {

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

}  // namespace graph_detail

/// BFS levels and SSSP distances before a run, in device or managed memory: 0 at the root,
/// unreached (uint32 max: sim::bfs_unreached, sim::sssp_unreached) everywhere else.
__global__ void reset_from_root(std::uint32_t* values, std::uint64_t n, std::uint32_t root) {
  for (std::uint64_t v = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < n;
       v += std::uint64_t{gridDim.x} * blockDim.x)
    values[v] = v == root ? 0 : sim::bfs_unreached;
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

/// The two frontier queues, the next queue's length and the per-vertex stamps (iteration last
/// queued for), in device memory; move-only.
class FrontierQueues {
 public:
  explicit FrontierQueues(std::uint64_t vertices) : vertices_(vertices) {
    try {
      WARPVM_CUDA_TRY(cudaMalloc(&queues_[0], vertices * sizeof(std::uint32_t)));
      WARPVM_CUDA_TRY(cudaMalloc(&queues_[1], vertices * sizeof(std::uint32_t)));
      WARPVM_CUDA_TRY(cudaMalloc(&stamps_, vertices * sizeof(std::uint32_t)));
      WARPVM_CUDA_TRY(cudaMalloc(&next_size_, sizeof(std::uint32_t)));
      WARPVM_CUDA_TRY(cudaHostAlloc(&host_word_, sizeof(std::uint32_t), cudaHostAllocDefault));
    } catch (...) {
      release();
      throw;
    }
  }
  ~FrontierQueues() { release(); }
  FrontierQueues(const FrontierQueues&) = delete;
  FrontierQueues& operator=(const FrontierQueues&) = delete;

  /// Iterates on `stream` from the frontier {root} until a frontier is empty.
  /// `expand(frontier, frontier_size, next, next_size, stamps, iteration)` launches one
  /// iteration's kernel on `stream`; iteration counts from 1 (BFS: the level it assigns). Waits
  /// for the stream after each iteration (to read the next frontier's size). Returns the
  /// iterations run, the last (which found nothing new) included: for BFS the depth.
  template <class Expand>
  std::uint32_t run_from(cudaStream_t stream, std::uint32_t root, Expand&& expand) {
    *host_word_ = root;
    WARPVM_CUDA_TRY(cudaMemcpyAsync(queues_[0], host_word_, sizeof root, cudaMemcpyHostToDevice, stream));
    return iterate(stream, 1, expand);
  }

  /// The same from the frontier of every vertex.
  template <class Expand>
  std::uint32_t run_from_all(cudaStream_t stream, Expand&& expand) {
    fill_identity<<<256, 256, 0, stream>>>(queues_[0], vertices_);
    WARPVM_CUDA_TRY(cudaGetLastError());
    return iterate(stream, static_cast<std::uint32_t>(vertices_), expand);
  }

 private:
  template <class Expand>
  std::uint32_t iterate(cudaStream_t stream, std::uint32_t size, Expand& expand) {
    WARPVM_CUDA_TRY(cudaMemsetAsync(stamps_, 0, vertices_ * sizeof(std::uint32_t), stream));
    std::uint32_t iteration = 0;
    while (size > 0) {
      WARPVM_CUDA_TRY(cudaMemsetAsync(next_size_, 0, sizeof(std::uint32_t), stream));
      expand(static_cast<const std::uint32_t*>(queues_[iteration % 2]), size, queues_[(iteration + 1) % 2], next_size_,
             stamps_, iteration + 1);
      WARPVM_CUDA_TRY(cudaGetLastError());
      WARPVM_CUDA_TRY(cudaMemcpyAsync(host_word_, next_size_, sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream));
      WARPVM_CUDA_TRY(cudaStreamSynchronize(stream));
      size = *host_word_;
      ++iteration;
    }
    return iteration;
  }

  void release() noexcept {
    cudaFree(queues_[0]);
    cudaFree(queues_[1]);
    cudaFree(stamps_);
    cudaFree(next_size_);
    cudaFreeHost(host_word_);
  }
  std::uint64_t vertices_;
  std::uint32_t* queues_[2] = {nullptr, nullptr};
  std::uint32_t* stamps_ = nullptr;
  std::uint32_t* next_size_ = nullptr;
  std::uint32_t* host_word_ = nullptr;  // pinned: the root going in, each iteration's size coming out
};

}  // namespace warpvm::apps
