#pragma once
// The placement apps' kernels over an R-MAT graph in CSR (row offsets, columns): pagerank (pull,
// one launch per iteration) and bfs (top-down, one launch per level, the host loop in
// run_bfs_levels). A lane walks its adjacency run a page at a time under one hold. Taking
// shared_array or Raw as dense_kernels.cuh's do; placement_workloads.cuh launches them.

#include "warpvm/workloads/multi_gpu/kernel_support.cuh"
#include "warpvm/workloads/graph/rmat.hpp"
#include "warpvm/detail/core/device_support.cuh"
#include "warpvm/warpvm.hpp"

#include <cuda/atomic>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

namespace warpvm::workloads::multi_gpu {

/// visit(u) for each neighbour u in columns[begin, end), in order, a page's run at a time under
/// one hold (with_span; `per_page`: columns.elements_per_page(); u refers into the held page):
/// how pagerank and bfs walk a row.
template <class Cl, class Visit>
__device__ void for_each_neighbour(const Cl& columns, std::uint64_t per_page, std::uint64_t begin, std::uint64_t end,
                                   Visit&& visit) {
  for_each_page_piece(per_page, begin, end, [&](std::uint64_t e, std::uint32_t run) {
    columns.template with_span<access::read>(e, run, [&](const std::uint32_t* neighbours) {
      for (std::uint32_t j = 0; j < run; ++j) visit(neighbours[j]);
    });
  });
}

// ---- PageRank (pull) over an R-MAT CSR: x[u] = rank[u] / degree(u); one launch per iteration ----
// A lane walks its adjacency run one page at a time under one hold (with_span) and gathers the
// neighbours' ranks inside it (nested accesses, in the same order as element by element).
template <class O, class Cl, class X>
__global__ void pagerank_kernel(O offsets, Cl columns, X x_cur, X x_next, std::uint64_t vertices) {
  const std::uint64_t v0 = vertices * x_next.gpu() / x_next.gpus(), v1 = vertices * (x_next.gpu() + 1) / x_next.gpus();
  const std::uint64_t per_page = columns.elements_per_page();
  for (std::uint64_t v = v0 + tid(); v < v1; v += nthreads()) {
    const std::uint64_t begin = offsets.load(v), end = offsets.load(v + 1);
    float sum = 0;
    for_each_neighbour(columns, per_page, begin, end, [&](const std::uint32_t& u) { sum += x_cur.load(u); });
    const float rank = 0.15f / static_cast<float>(vertices) + 0.85f * sum;
    x_next.store(v, end > begin ? rank / static_cast<float>(end - begin) : rank);
  }
}

// ---- BFS, top-down and level-synchronous, over the same R-MAT CSR: one launch per level ----
// Each GPU scans every gpus()-th vertex (interleaved: R-MAT's high-degree vertices are the low
// ids, so contiguous parts would not balance, and every page of the graph is read by every GPU)
// for those at `level` and claims their unvisited neighbours (read first, then compare_exchange)
// for level + 1 on depth (read and written by every GPU: the shared-write object), walking each adjacency run
// one page at a time under one hold as pagerank does. A warp that claimed a vertex stores
// level + 1 into `reached` (a word on the first GPU, reached by peers): the host stops after the
// first level that claims nothing.
template <class O, class Cl, class D>
__global__ void bfs_level_kernel(O offsets, Cl columns, D depth, std::uint64_t vertices, std::uint32_t level,
                                 unsigned* reached) {
  const std::uint64_t per_page = columns.elements_per_page();
  bool claimed = false;
  for (std::uint64_t v = depth.gpu() + tid() * depth.gpus(); v < vertices; v += nthreads() * depth.gpus()) {
    // Depths at `level` were written in an earlier launch; this one only turns unvisited ones
    // into level + 1, so a concurrent claim never changes what this test sees.
    if (depth.load(v) != level) continue;
    const std::uint64_t begin = offsets.load(v), end = offsets.load(v + 1);
    for_each_neighbour(columns, per_page, begin, end, [&](const std::uint32_t& u) {
      // The read filters visited vertices without a write hold (as a GPU BFS does); a stale
      // "unvisited" only costs a failed claim.
      std::uint32_t expected = bfs_unreached;
      if (depth.load(u) == expected && depth.compare_exchange(u, expected, level + 1)) claimed = true;
    });
  }
  // One store per warp that claimed anything (over NVLink for the other GPUs), not one per lane.
  const unsigned lanes = __activemask();
  if (__any_sync(lanes, claimed) && detail::lane_id() == detail::first_lane(lanes))
    cuda::atomic_ref<unsigned, cuda::thread_scope_system>(*reached).store(level + 1, cuda::std::memory_order_relaxed);
}

/// bfs's host loop: `launch_level(level)` launches one level's kernels and waits for them, for
/// level 0, 1, ... until a level claims nothing (its kernels leave `reached` below level + 1).
inline void run_bfs_levels(unsigned* reached, const std::function<void(std::uint32_t)>& launch_level) {
  zero_device_word(reached);
  for (std::uint32_t level = 0;; ++level) {
    launch_level(level);
    unsigned seen = 0;
    WARPVM_CUDA_TRY(cudaSetDevice(0));
    WARPVM_CUDA_TRY(cudaMemcpy(&seen, reached, sizeof seen, cudaMemcpyDeviceToHost));
    if (seen != level + 1) return;
  }
}

}  // namespace warpvm::workloads::multi_gpu
