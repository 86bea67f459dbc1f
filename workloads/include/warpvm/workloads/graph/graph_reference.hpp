#pragma once
/// @file
/// Edge weights and the CPU references for connected components and single-source shortest
/// paths on symmetric CSR graphs (rmat.hpp's; issue #5): union-find for the components (labels:
/// the least vertex id of each component) and Dijkstra for the distances. Independent of the GPU
/// kernels' algorithms (label propagation, frontier Bellman-Ford), so that they check them.
/// Host code only; shared by warpvm-graph-bench, the GPU tests and the host tests.
///
/// @code
///   std::vector<std::uint32_t> weights(columns.size());
///   warpvm::workloads::fill_edge_weights(offsets, columns, weights, /*seed=*/7);
///   auto labels = warpvm::workloads::reference_cc(offsets, columns);
///   auto distances = warpvm::workloads::reference_sssp(offsets, columns, weights, /*root=*/0);
///   assert(warpvm::workloads::certify_sssp(offsets, columns, weights, 0, distances).empty());
/// @endcode

#include "warpvm/workloads/graph/rmat.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace warpvm::workloads {

/// Distance of a vertex the root does not reach (the same value as bfs_unreached, so that
/// bfs_work() reads distances as it reads levels).
inline constexpr std::uint32_t sssp_unreached = bfs_unreached;
/// Edge weights are integers in [1, max_edge_weight].
inline constexpr std::uint32_t max_edge_weight = 255;

/// Weight of the undirected edge {u, v}: a pure function of the seed and the unordered pair, so
/// both directions of an edge (and its duplicates) weigh the same whatever the threads.
inline std::uint32_t edge_weight(std::uint64_t seed, std::uint32_t u, std::uint32_t v) {
  const std::uint64_t pair = std::uint64_t{std::min(u, v)} << 32 | std::max(u, v);
  return 1 + static_cast<std::uint32_t>(mix64(mix64(seed ^ 0x3c6ef372fe94f82bull) + pair) % max_edge_weight);
}

/// weights[e] = edge_weight(seed, v, columns[e]) for every entry e of v's row: a CSR weights
/// array aligned with `columns`. `parallel_for` as for build_rmat_csr.
template <class ParallelFor = SerialFor>
void fill_edge_weights(std::span<const std::uint64_t> offsets, std::span<const std::uint32_t> columns,
                       std::span<std::uint32_t> weights, std::uint64_t seed, ParallelFor&& parallel_for = {}) {
  if (weights.size() != columns.size())
    throw std::invalid_argument("fill_edge_weights: weights need as many entries as columns (" +
                                std::to_string(columns.size()) + "), got " + std::to_string(weights.size()));
  parallel_for(offsets.size() - 1, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t v = lo; v < hi; ++v)
      for (std::uint64_t e = offsets[v]; e < offsets[v + 1]; ++e)
        weights[e] = edge_weight(seed, static_cast<std::uint32_t>(v), columns[e]);
  });
}

/// Component labels: each vertex gets the least vertex id of its component (of the undirected
/// graph: a CSR entry joins its two ends whichever way it is stored). Union-find whose
/// roots are always their set's least member (a union links the larger root under the smaller
/// with a compare-and-swap, retried on a race; finds halve paths with benign CASes), so threads
/// may unite edges in any order. `parallel_for` as for build_rmat_csr.
template <class ParallelFor = SerialFor>
std::vector<std::uint32_t> reference_cc(std::span<const std::uint64_t> offsets, std::span<const std::uint32_t> columns,
                                        ParallelFor&& parallel_for = {}) {
  const std::uint64_t n = offsets.size() - 1;
  std::vector<std::uint32_t> parent(n);
  parallel_for(n, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t v = lo; v < hi; ++v) parent[v] = static_cast<std::uint32_t>(v);
  });
  using Ref = std::atomic_ref<std::uint32_t>;
  auto find = [&](std::uint32_t x) {
    for (;;) {
      const std::uint32_t up = Ref(parent[x]).load(std::memory_order_relaxed);
      if (up == x) return x;
      std::uint32_t expected = up;  // halving: point x at its grandparent, still an ancestor
      Ref(parent[x]).compare_exchange_weak(expected, Ref(parent[up]).load(std::memory_order_relaxed),
                                           std::memory_order_relaxed);
      x = up;
    }
  };
  parallel_for(n, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t v = lo; v < hi; ++v)
      for (std::uint64_t e = offsets[v]; e < offsets[v + 1]; ++e) {
        if (columns[e] == v) continue;  // every other entry: a one-way entry still joins (weak components)
        for (;;) {
          std::uint32_t a = find(static_cast<std::uint32_t>(v)), b = find(columns[e]);
          if (a == b) break;
          if (a < b) std::swap(a, b);
          std::uint32_t expected = a;  // a is still a root: hang it under the smaller root b
          if (Ref(parent[a]).compare_exchange_strong(expected, b, std::memory_order_relaxed)) break;
        }
      }
  });
  std::vector<std::uint32_t> labels(n);
  parallel_for(n, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t v = lo; v < hi; ++v) labels[v] = find(static_cast<std::uint32_t>(v));
  });
  return labels;
}

/// Shortest-path distances from `root` over the weighted symmetric CSR (Dijkstra with a binary
/// heap; serial), sssp_unreached where it does not reach. Throws std::overflow_error when a
/// distance does not fit a uint32 below sssp_unreached (the GPU kernels keep uint32 distances).
inline std::vector<std::uint32_t> reference_sssp(std::span<const std::uint64_t> offsets,
                                                 std::span<const std::uint32_t> columns,
                                                 std::span<const std::uint32_t> weights, std::uint32_t root) {
  const std::uint64_t n = offsets.size() - 1;
  if (root >= n) throw std::invalid_argument("reference_sssp: root " + std::to_string(root) + " is not a vertex");
  if (weights.size() != columns.size()) throw std::invalid_argument("reference_sssp: weights and columns differ in size");
  constexpr std::uint64_t unreached = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::uint64_t> distance(n, unreached);
  using Entry = std::pair<std::uint64_t, std::uint32_t>;  // (tentative distance, vertex)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  distance[root] = 0;
  heap.emplace(0, root);
  while (!heap.empty()) {
    const auto [d, v] = heap.top();
    heap.pop();
    if (d != distance[v]) continue;  // superseded by a shorter path
    for (std::uint64_t e = offsets[v]; e < offsets[v + 1]; ++e) {
      const std::uint64_t candidate = d + weights[e];
      if (candidate < distance[columns[e]]) {
        distance[columns[e]] = candidate;
        heap.emplace(candidate, columns[e]);
      }
    }
  }
  std::vector<std::uint32_t> out(n);
  for (std::uint64_t v = 0; v < n; ++v) {
    if (distance[v] != unreached && distance[v] >= sssp_unreached)
      throw std::overflow_error("reference_sssp: vertex " + std::to_string(v) + " is " + std::to_string(distance[v]) +
                                " away, more than a uint32 distance holds");
    out[v] = distance[v] == unreached ? sssp_unreached : static_cast<std::uint32_t>(distance[v]);
  }
  return out;
}

/// Checks that `distances` are the shortest-path distances from `root` without computing them:
/// with positive weights on a symmetric CSR whose two directions of an edge weigh the same, they
/// are exactly when (1) the root is at 0, (2) no edge can shorten a path (d[v] <= d[u] + w for
/// every entry u -> v with d[u] reached; so d is at most the true distance, by induction along a
/// shortest path) and (3) every other reached vertex has a neighbour through which its distance
/// is tight (following those edges strictly descends to the root, so d is the length of a real
/// path: at least the true distance). Unreached vertices then have no reached neighbour, by (2).
/// O(edges) and parallel (`parallel_for` as for build_rmat_csr), where Dijkstra is serial: the
/// benchmark certifies a GPU result with it on graphs too large for the reference. Returns ""
/// when certified, else what fails first (a vertex and why).
template <class ParallelFor = SerialFor>
std::string certify_sssp(std::span<const std::uint64_t> offsets, std::span<const std::uint32_t> columns,
                         std::span<const std::uint32_t> weights, std::uint32_t root,
                         std::span<const std::uint32_t> distances, ParallelFor&& parallel_for = {}) {
  const std::uint64_t n = offsets.size() - 1;
  if (distances.size() != n || weights.size() != columns.size() || root >= n)
    return "certify_sssp: sizes or root do not match the graph";
  if (distances[root] != 0) return "the root is at " + std::to_string(distances[root]) + ", not 0";
  // The least failing vertex and why (x 2 + 0: an edge makes it shorter, + 1: no tight
  // neighbour) in one word, so that the message is the same whatever the threads.
  constexpr std::uint64_t none = std::numeric_limits<std::uint64_t>::max();
  std::atomic<std::uint64_t> first_wrong{none};
  parallel_for(n, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t v = lo; v < hi && 2 * v < first_wrong.load(std::memory_order_relaxed); ++v) {
      const std::uint64_t dv = distances[v];
      bool tight = v == root;
      bool shorter = false;
      // Symmetric with symmetric weights: v's row lists its in-edges with their weights.
      for (std::uint64_t e = offsets[v]; e < offsets[v + 1] && !shorter; ++e) {
        const std::uint64_t du = distances[columns[e]];
        if (du == sssp_unreached) continue;
        if (dv == sssp_unreached || dv > du + weights[e]) shorter = true;
        else if (dv == du + weights[e]) tight = true;
      }
      if (!shorter && (tight || dv == sssp_unreached)) continue;
      const std::uint64_t failure = 2 * v + (shorter ? 0 : 1);
      std::uint64_t seen = first_wrong.load();
      while (failure < seen && !first_wrong.compare_exchange_weak(seen, failure)) {
      }
      break;
    }
  });
  const std::uint64_t failure = first_wrong.load();
  if (failure == none) return "";
  const std::uint64_t v = failure / 2;
  return "vertex " + std::to_string(v) + " at " + std::to_string(distances[v]) +
         (failure % 2 == 0 ? ": a neighbour's edge makes it shorter" : ": no neighbour's edge makes it that far");
}

/// What a components run covers, for the benchmark's records.
struct CcWork {
  std::uint64_t components = 0;         ///< distinct labels (isolated vertices count as one each)
  std::uint64_t largest_component = 0;  ///< vertices in the largest
};

inline CcWork cc_work(std::span<const std::uint32_t> labels) {
  std::vector<std::uint64_t> size(labels.size(), 0);
  for (const std::uint32_t label : labels) ++size[label];
  CcWork w;
  for (const std::uint64_t s : size) {
    w.components += s > 0;
    w.largest_component = std::max(w.largest_component, s);
  }
  return w;
}

}  // namespace warpvm::workloads
